//! Integration tests: one binary (faster linking), one module per area.

mod benchmark;
mod compress;
mod context;
mod harness;
mod proof;
mod records;
mod report;
mod run;
mod witness;
