//! The context engine: index a repository or documents, select and compress under a token
//! budget, and commit the selection so omitted text stays exactly recoverable.

pub mod commit;
pub mod compress;
pub mod distill;
pub mod store;

pub use commit::{ChunkInput, CommitError, CommitStore, ContextReceipt, Resolution};
