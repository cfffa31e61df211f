//! The trial harness: workloads (tasks with gold), conditions (how context is shaped), runners
//! (the model), scorers (numbers from a response) and the paired trial matrix that writes
//! schema-valid trial records.
//!
//! Two seams are filled by other subsystems: [`condition::default_selector`] (the context
//! engine) and [`scorer::default_claim_checker`] (the witness).

pub mod arms;
pub mod audit;
pub mod bench;
pub mod condition;
pub mod fixed_point;
pub mod judge;
pub mod run;
pub mod runner;
pub mod scorer;
pub mod selector;
pub mod summary;
pub mod text;
pub mod via_proxy;
pub mod workload;
