//! Integration tests: one binary (faster linking), one module per area.

mod context;
mod harness;
mod records;
