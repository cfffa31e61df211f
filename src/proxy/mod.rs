//! The local proxy (SPEC §1.2, §4.1, §4.2): one HTTP app between AI clients and the model
//! providers, serving the Anthropic, OpenAI and Gemini styles on one port. It shrinks long
//! prompts with the context engine (every elision committed and recoverable), forwards to the
//! provider's root URL with the client's own headers, and checks answers with the witness.
//!
//! Layout: [`server`] (the axum app and the request flow), [`provider`] and the three provider
//! modules (which parts of a request are text, what a response says, error shapes),
//! [`optimize`] (provider-neutral compression and byte-preserving re-serialisation via
//! [`spans`]), [`upstream`] (reqwest forwarding), [`routed`] (routing's model choice and
//! escalation), [`relay`] (bodies passed on as they come, and each request's log entry),
//! [`check`] (witness certificates), [`sse`] (re-emitting verified streams, with
//! [`logprobs`] emptied), [`stream_end`] (whether a stream ended whole), [`sidecar`]
//! (`/witness` and `/svc` routes), [`proof_sidecar`] (`/proof` routes, admitted by
//! [`local_only`]), [`stats`] (log lines and counters).

pub mod anthropic;
pub mod bench;
pub mod check;
pub mod gemini;
pub mod local_only;
pub mod logprobs;
pub mod openai;
pub mod optimize;
pub mod proof_sidecar;
pub mod provider;
pub mod relay;
pub mod routed;
pub mod server;
pub mod sidecar;
pub mod spans;
pub mod sse;
pub mod stats;
pub mod stream_end;
pub mod upstream;

pub use server::{ProxySettings, ProxyState, app, make_service};
