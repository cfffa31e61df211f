//! Integration tests: one binary (faster linking), one module per area.

mod audit;
mod baselines;
mod benchmark;
mod browser;
mod compress;
mod context;
mod dashboard;
mod demo;
mod events;
mod experiments;
mod fuzz;
mod harness;
mod learning;
mod mcp;
mod proof;
mod proof_harness;
mod proxy;
mod proxy_proof;
mod records;
mod report;
mod routing;
mod run;
mod state;
mod via_proxy;
mod witness;
// The MCP-config paths under a temporary HOME are the Linux ones.
#[cfg(target_os = "linux")]
mod wrap;
