//! svc: context selection, evidence verification and the context-efficiency trial harness.
//!
//! The library is the product; the `svc` binary is a thin clap front end over it. The library
//! never prints: it returns values and typed errors, and the command layer renders them.

pub mod bench;
pub mod child_groups;
pub mod clock;
pub mod context;
pub mod daemon;
pub mod dashboard;
pub mod demo;
pub mod digest;
pub mod events;
pub mod git;
pub mod harness;
pub mod http_api;
pub mod mcp;
pub mod own_user;
pub mod proof;
pub mod proxy;
pub mod ravs;
pub mod report;
pub mod rng;
pub mod routing;
pub mod state;
pub mod text;
pub mod tokens;
pub mod trial;
pub mod verification;
pub mod witness;
pub mod wrap;
