//! Integration tests: one binary (faster linking), one module per area.

mod baselines;
mod benchmark;
mod compress;
mod context;
mod harness;
mod records;
mod report;
mod run;
mod witness;
