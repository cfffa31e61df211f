//! Integration tests: one binary (faster linking), one module per area.

mod audit;
mod baselines;
mod benchmark;
mod compress;
mod context;
mod demo;
mod fuzz;
mod harness;
mod mcp;
mod proof;
mod proxy;
mod records;
mod report;
mod run;
mod state;
mod witness;
