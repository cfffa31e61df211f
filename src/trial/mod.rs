//! The context-efficiency trial record (SPEC §2.1): its type, its validation against the
//! published JSON Schema, and the JSONL writer that never writes an invalid record.

pub mod accept;
pub mod parquet;
pub mod read;
pub mod record;
pub mod validate;
pub mod writer;

pub use record::{Condition, CostSource, Outcome, SCHEMA_VERSION, TrialRecord, UsageSource};
pub use validate::{Problem, ProblemKind, RecordValidator};
pub use writer::TrialWriter;
