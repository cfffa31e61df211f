//! The witness: checks a model's answer against the evidence it was given, flags unsupported or
//! contradicted claims, rewrites the output according to mode and profile, and records a proof
//! certificate.
//!
//! Verification is deterministic and local ([`verify`]); an optional NLI pass ([`nli`]) can
//! judge claims the deterministic pass leaves uncertain.

pub mod claims;
pub mod eval;
pub mod profile;
pub mod text;
pub mod verify;

pub use profile::{Mode, Profile};
pub use verify::{Label, Verification, check};
