//! Integration tests: one binary (faster linking), one module per area.

mod compress;
mod context;
mod harness;
mod records;
mod run;
mod witness;
