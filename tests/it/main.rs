//! Integration tests: one binary (faster linking), one module per area.

mod harness;
mod records;
mod report;
