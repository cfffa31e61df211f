//! The durable prepare/advance/inspect protocol (SPEC §4.4, §4.5): the fixed-point loop driven
//! one model call at a time by a client that owns the model, with every step persisted in a
//! `pgs_…` session (see [`super::session`] for the lifecycle).
//!
//! Responses are JSON text. An idempotency key stores the exact response it produced: the same
//! key with the same input replays those bytes at any later revision; the same key with other
//! input (for advance: other model text) is refused. Prepare keys are kept under
//! `proof/idempotency/` (they exist before any session); advance keys inside the session.
//! Advances of one session are serialised by its lock ([`session::lock`]).

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::errors::ProofError;
use super::fixed_point::Step;
use super::layer::VerifiedEfficiencyLayer;
use super::round::{FixedPointResult, FixedPointStatus, ModelRequest};
use super::session::{
    self, IdempotencyRecord, SessionBody, SessionError, SessionFailure, SessionState,
};
use crate::digest;
use crate::state;

/// Directory of prepare idempotency records, relative to the state directory.
pub const IDEMPOTENCY_DIR: &str = "proof/idempotency";

/// Loop bounds fixed at prepare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bounds {
    pub max_rounds: usize,
    pub recovery_token_budget: usize,
    pub max_chunks_per_round: usize,
}

impl Default for Bounds {
    /// Three model calls, 2,000 recovered tokens, four chunks per round: enough for a draft and
    /// two revisions over a handful of paragraphs, small next to a prompt.
    fn default() -> Self {
        Self {
            max_rounds: 3,
            recovery_token_budget: 2000,
            max_chunks_per_round: 4,
        }
    }
}

/// The response of prepare.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrepareResponse {
    pub session_id: String,
    pub revision: u64,
    pub state: SessionState,
    pub ctx_id: String,
    pub context_tokens: usize,
    pub omitted_chunks: usize,
    pub bounds: Bounds,
    pub request: ModelRequest,
}

/// The response of advance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdvanceResponse {
    pub session_id: String,
    pub revision: u64,
    pub state: SessionState,
    /// The round the draft answered.
    pub round: usize,
    pub decision: String,
    /// Set when the run ended.
    pub status: Option<FixedPointStatus>,
    /// The next request (state `awaiting_draft`).
    pub request: Option<ModelRequest>,
    /// The result (state `finished`).
    pub result: Option<FixedPointResult>,
}

/// What inspect shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionView {
    pub session_id: String,
    pub revision: u64,
    pub state: SessionState,
    pub created_at: String,
    pub updated_at: String,
    pub ctx_id: String,
    pub query: String,
    pub bounds: Bounds,
    pub rounds: usize,
    pub recovery_tokens_used: usize,
    pub recovered_chunk_ids: Vec<String>,
    pub pending_request: Option<ModelRequest>,
    pub result: Option<FixedPointResult>,
    pub failure: Option<SessionFailure>,
    pub idempotency_keys: Vec<String>,
    pub path: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct PrepareKeyRecord {
    key: String,
    #[serde(flatten)]
    record: IdempotencyRecord,
}

fn to_json(value: &impl Serialize) -> String {
    // Response structs serialise infallibly.
    let mut text = serde_json::to_string_pretty(value).unwrap_or_default();
    text.push('\n');
    text
}

fn now() -> String {
    crate::clock::rfc3339(std::time::SystemTime::now())
}

/// The protocol over a layer's state directory.
#[derive(Debug, Clone)]
pub struct Protocol {
    layer: VerifiedEfficiencyLayer,
    lock_wait: std::time::Duration,
}

impl Protocol {
    pub fn new(layer: VerifiedEfficiencyLayer) -> Self {
        Self {
            layer,
            lock_wait: session::LOCK_WAIT,
        }
    }

    /// Wait up to `wait` for a session another process is advancing (default
    /// [`session::LOCK_WAIT`]).
    pub fn with_lock_wait(mut self, wait: std::time::Duration) -> Self {
        self.lock_wait = wait;
        self
    }

    fn prepare_key_path(&self, key: &str) -> PathBuf {
        self.layer
            .state_dir()
            .join(IDEMPOTENCY_DIR)
            .join(format!("{}.json", &digest::sha256_hex(key)[..32]))
    }

    /// Prepares a session and returns the response JSON (the first request included).
    pub fn prepare(
        &self,
        sources: &[(String, String)],
        query: &str,
        token_budget: usize,
        bounds: Bounds,
        idempotency_key: Option<&str>,
    ) -> Result<String, ProofError> {
        let input_sha256 = {
            let mut material =
                serde_json::to_vec(&(sources, query, token_budget, bounds)).unwrap_or_default();
            material.extend_from_slice(self.layer.mode().as_str().as_bytes());
            digest::sha256_hex(material)
        };
        let key_path = idempotency_key.map(|key| self.prepare_key_path(key));
        // Held until the key is recorded: parallel prepares with one key each made a session of
        // their own, and all but one were then named by no key.
        let _key_lock = match &key_path {
            Some(path) => Some(
                state::append::lock(path).map_err(|source| SessionError::Lock {
                    path: path.with_extension("lock"),
                    source,
                })?,
            ),
            None => None,
        };
        if let (Some(key), Some(path)) = (idempotency_key, &key_path)
            && let Ok(bytes) = std::fs::read(path)
        {
            let stored: PrepareKeyRecord =
                serde_json::from_slice(&bytes).map_err(|source| SessionError::KeyRecord {
                    path: path.clone(),
                    source,
                })?;
            if stored.key == key && stored.record.input_sha256 == input_sha256 {
                return Ok(stored.record.response);
            }
            return Err(SessionError::IdempotencyConflict {
                key: key.to_string(),
                operation: "prepare".to_string(),
            }
            .into());
        }
        let prepared = self.layer.prepare(sources, query, token_budget)?;
        let run = self.layer.start(
            bounds.max_rounds,
            bounds.recovery_token_budget,
            bounds.max_chunks_per_round,
        )?;
        let created = now();
        let body = SessionBody {
            session_id: session::new_id()?,
            created_at: created.clone(),
            updated_at: created,
            revision: 0,
            state: SessionState::AwaitingDraft,
            prepared,
            run,
            failure: None,
            idempotency: BTreeMap::new(),
        };
        let response = to_json(&PrepareResponse {
            session_id: body.session_id.clone(),
            revision: 0,
            state: body.state,
            ctx_id: body.prepared.ctx_id.clone(),
            context_tokens: body.prepared.context_tokens,
            omitted_chunks: body.prepared.omitted.len(),
            bounds,
            request: body.run.request(&body.prepared),
        });
        session::save(self.layer.state_dir(), &body)?;
        // The key is recorded after the session exists, so a replayed response never names a
        // session that was not written.
        if let (Some(key), Some(path)) = (idempotency_key, key_path) {
            let record = PrepareKeyRecord {
                key: key.to_string(),
                record: IdempotencyRecord {
                    operation: "prepare".to_string(),
                    input_sha256,
                    revision: 0,
                    response: response.clone(),
                },
            };
            state::atomic_write(&path, to_json(&record).as_bytes())?;
        }
        Ok(response)
    }

    /// Submits the model's draft for the pending request of `session_id`; returns the response
    /// JSON (the next request, or the result).
    pub fn advance(
        &self,
        session_id: &str,
        draft: &str,
        idempotency_key: Option<&str>,
    ) -> Result<String, ProofError> {
        let state_dir = self.layer.state_dir();
        // Held until the new revision is saved: another advance of this session waits and then
        // loads that revision (see the concurrency notes of [`session`]).
        let _lock = session::lock(state_dir, session_id, self.lock_wait)?;
        let mut body = session::load(state_dir, session_id)?;
        let input_sha256 = digest::sha256_hex(draft);
        if let Some(key) = idempotency_key
            && let Some(stored) = body.idempotency.get(key)
        {
            if stored.operation == "advance" && stored.input_sha256 == input_sha256 {
                return Ok(stored.response.clone());
            }
            return Err(SessionError::IdempotencyConflict {
                key: key.to_string(),
                operation: stored.operation.clone(),
            }
            .into());
        }
        if body.state != SessionState::AwaitingDraft {
            return Err(SessionError::Closed {
                id: session_id.to_string(),
                state: body.state.as_str(),
            }
            .into());
        }
        // An empty draft finished the session as `no_verifiable_claims`, for good: it is a
        // client's mistake (an empty file, a failed call), refused with the session unchanged.
        if crate::text::is_blank(draft) {
            return Err(SessionError::EmptyDraft {
                id: session_id.to_string(),
            }
            .into());
        }
        let round = body.run.round();
        let step = match self
            .layer
            .submit(&body.prepared, &mut body.run, draft.to_string())
        {
            Ok(step) => step,
            Err(error) => {
                let artifact_path = match &error {
                    ProofError::Verification(e) => Some(e.artifact.path.display().to_string()),
                    ProofError::Recovery(e) => Some(e.artifact.path.display().to_string()),
                    _ => None,
                };
                body.state = SessionState::Failed;
                body.revision += 1;
                body.updated_at = now();
                body.failure = Some(SessionFailure {
                    message: error.to_string(),
                    artifact_path,
                });
                session::save(state_dir, &body)?;
                return Err(error);
            }
        };
        body.revision += 1;
        body.updated_at = now();
        let decision = body
            .run
            .rounds
            .last()
            .map(|r| r.decision.clone())
            .unwrap_or_default();
        let response = match step {
            Step::Ask(request) => AdvanceResponse {
                session_id: session_id.to_string(),
                revision: body.revision,
                state: SessionState::AwaitingDraft,
                round,
                decision,
                status: None,
                request: Some(*request),
                result: None,
            },
            Step::Done(result) => {
                body.state = SessionState::Finished;
                AdvanceResponse {
                    session_id: session_id.to_string(),
                    revision: body.revision,
                    state: SessionState::Finished,
                    round,
                    decision,
                    status: Some(result.status),
                    request: None,
                    result: Some(*result),
                }
            }
        };
        let response = to_json(&response);
        if let Some(key) = idempotency_key {
            body.idempotency.insert(
                key.to_string(),
                IdempotencyRecord {
                    operation: "advance".to_string(),
                    input_sha256,
                    revision: body.revision,
                    response: response.clone(),
                },
            );
        }
        session::save(state_dir, &body)?;
        Ok(response)
    }

    /// The state of a session.
    pub fn inspect(&self, session_id: &str) -> Result<SessionView, ProofError> {
        let state_dir = self.layer.state_dir();
        let body = session::load(state_dir, session_id)?;
        let path = session::path_of(state_dir, session_id)?;
        Ok(SessionView {
            session_id: body.session_id.clone(),
            revision: body.revision,
            state: body.state,
            created_at: body.created_at.clone(),
            updated_at: body.updated_at.clone(),
            ctx_id: body.prepared.ctx_id.clone(),
            query: body.prepared.query.clone(),
            bounds: Bounds {
                max_rounds: body.run.settings.max_rounds,
                recovery_token_budget: body.run.settings.recovery_token_budget,
                max_chunks_per_round: body.run.settings.max_chunks_per_round,
            },
            rounds: body.run.rounds.len(),
            recovery_tokens_used: body.run.recovery_tokens_used,
            recovered_chunk_ids: body
                .run
                .evidence
                .iter()
                .map(|e| e.chunk_id.clone())
                .collect(),
            pending_request: (body.state == SessionState::AwaitingDraft)
                .then(|| body.run.request(&body.prepared)),
            result: body.run.result.clone(),
            failure: body.failure.clone(),
            idempotency_keys: body.idempotency.keys().cloned().collect(),
            path: path.display().to_string(),
        })
    }
}

#[cfg(test)]
mod tests;
