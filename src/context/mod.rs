//! The context engine: index a repository or documents, select and compress under a token
//! budget, and commit the selection so omitted text stays exactly recoverable.

pub mod bench;
pub mod commit;
pub mod compress;
pub mod distill;
pub mod eval;
pub mod index;
pub mod localize;
pub mod postings;
pub mod query;
pub mod recent;
pub mod roles;
pub mod seams;
pub mod select;
pub mod skeleton;
pub mod store;
pub mod terms;
pub mod version;
pub mod weights;

pub use commit::{ChunkInput, CommitError, CommitStore, ContextReceipt, Resolution};
