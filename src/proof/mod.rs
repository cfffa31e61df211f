//! The proof-guided fixed-point loop (SPEC §1.4, §2.3, §3.1, §3.3): verify a draft against the
//! committed context, recover the exact omitted chunks that support its open claims, ask the
//! model again, within a bound on model calls and a bound on recovered tokens.
//!
//! - [`layer`]: [`VerifiedEfficiencyLayer`]: `prepare` (select and commit) and `run_fixed_point`
//!   (the loop with an application-supplied model callback);
//! - [`fixed_point`]: the loop as a state machine, its rules and the status precedence;
//! - [`planner`]: which chunks to recover (an exact knapsack);
//! - [`session`], [`protocol`]: durable `pgs_…` sessions and prepare/advance/inspect with
//!   idempotency keys;
//! - [`errors`]: the three loop errors and their HMAC-signed failure artifacts;
//! - [`ledger`]: the hash-chained world-model ledger of verified outcomes.
//!
//! The loop never selects a provider and never makes a network call: the model is reached only
//! through the callback (or, in the protocol, by the client between prepare and advance).

pub mod bench;
pub mod command;
pub mod errors;
pub mod fixed_point;
pub mod layer;
pub mod ledger;
pub mod planner;
pub mod protocol;
pub mod round;
pub mod session;
pub mod sources;

pub use errors::{
    FixedPointModelError, FixedPointRecoveryError, FixedPointVerificationError, ProofError,
};
pub use layer::{ContextRiskMode, ModelCallError, Prepared, VerifiedEfficiencyLayer};
pub use ledger::OutcomeSignal;
pub use protocol::{Bounds, Protocol};
pub use round::{FixedPointResult, FixedPointStatus, ModelRequest};
