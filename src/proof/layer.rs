//! `VerifiedEfficiencyLayer` (SPEC §4.6): prepare a committed context for a query, then run the
//! proof-guided fixed-point loop with a model callback the application supplies.
//!
//! The layer never chooses a provider and never makes a network call: `model_call` is the only
//! way a model is reached, and it is the application's.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::errors::ProofError;
use super::fixed_point::{LoopSettings, LoopState, Step};
use super::ledger::{self, LedgerEntry, OutcomeSignal};
use super::planner;
use super::round::{FixedPointResult, ModelRequest};
use crate::context::commit::RecoveryBundle;
use crate::context::index::Index;
use crate::context::select::{self, SelectOptions};
use crate::context::{CommitStore, ContextReceipt, Resolution};
use crate::witness::Profile;

/// What the final output does with claims the evidence does not support.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum ContextRiskMode {
    /// Keep every claim; mark unsupported ones inline (`[unverified: …]`).
    #[default]
    Audit,
    /// Remove unsupported claims (the witness's strict mode, but failing closed under every
    /// profile: the warn-only profiles' unknown claims are removed too); a draft left with
    /// nothing supported becomes the witness's withheld notice.
    Strict,
}

impl ContextRiskMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ContextRiskMode::Audit => "audit",
            ContextRiskMode::Strict => "strict",
        }
    }
}

/// An omitted (or reduced) chunk the loop may recover.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OmittedChunk {
    pub chunk_id: String,
    pub source: String,
    /// How it was sent: `skeleton`, `reference`, or null when left out entirely.
    pub resolution: Option<Resolution>,
    pub receipt_token_count: usize,
    /// Normalised content terms of its exact bytes (what the planner scores).
    pub terms: Vec<String>,
}

/// A prepared request: the committed context and what recovery can add to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prepared {
    pub ctx_id: String,
    pub query: String,
    pub token_budget: usize,
    /// The committed context: the byte-identical prefix of every request.
    pub stable_context_prefix: String,
    /// Its tokens.
    pub context_tokens: usize,
    pub receipt: ContextReceipt,
    pub bundle: RecoveryBundle,
    pub omitted: Vec<OmittedChunk>,
}

impl Prepared {
    /// The first request of a run.
    pub fn first_request(&self) -> ModelRequest {
        ModelRequest {
            query: self.query.clone(),
            stable_context_prefix: self.stable_context_prefix.clone(),
            appended_evidence: Vec::new(),
            previous_output: None,
        }
    }
}

/// An error a model callback returns: any error, with its message kept in the failure artifact.
pub type ModelCallError = Box<dyn std::error::Error + Send + Sync>;

/// The proof-guided layer over one state directory.
#[derive(Debug, Clone)]
pub struct VerifiedEfficiencyLayer {
    state_dir: PathBuf,
    mode: ContextRiskMode,
    profile: Profile,
    commits: CommitStore,
    /// Selection settings fixed by the caller: no learned weights, no skills.
    fixed_options: Option<SelectOptions>,
}

impl VerifiedEfficiencyLayer {
    /// A layer keeping commits, sessions, failure artifacts and the ledger under `state_dir`.
    /// Drafts are verified under the `rag` profile; see [`Self::with_profile`].
    pub fn new(state_dir: impl Into<PathBuf>, context_risk_mode: ContextRiskMode) -> Self {
        let state_dir = state_dir.into();
        Self {
            commits: CommitStore::new(&state_dir),
            state_dir,
            mode: context_risk_mode,
            profile: Profile::Rag,
            fixed_options: None,
        }
    }

    /// Prepare with exactly these selection settings, ignoring the state directory's learned
    /// weights and promoted skills (experiments must be reproducible from their settings).
    pub fn with_select_options(mut self, options: SelectOptions) -> Self {
        self.fixed_options = Some(options);
        self
    }

    /// Verify drafts under `profile` (its support threshold) instead of `rag`.
    pub fn with_profile(mut self, profile: Profile) -> Self {
        self.profile = profile;
        self
    }

    pub fn state_dir(&self) -> &Path {
        &self.state_dir
    }

    pub fn mode(&self) -> ContextRiskMode {
        self.mode
    }

    pub fn profile(&self) -> Profile {
        self.profile
    }

    pub(crate) fn commits(&self) -> &CommitStore {
        &self.commits
    }

    /// Selects `sources` for `query` within `token_budget` tokens and commits the selection:
    /// the sent text becomes the stable prefix, everything else stays exactly recoverable.
    pub fn prepare(
        &self,
        sources: &[(String, String)],
        query: &str,
        token_budget: usize,
    ) -> Result<Prepared, ProofError> {
        if token_budget == 0 {
            return Err(ProofError::ZeroBound {
                what: "the token budget",
            });
        }
        if sources.is_empty() {
            return Err(ProofError::NoSources);
        }
        let index = Index::from_documents(sources);
        // Learned ranking weights when the state directory has any (the defaults otherwise,
        // also when the weights file is broken: `svc learning show` names the problem).
        let plain = self.fixed_options.clone().unwrap_or_else(|| SelectOptions {
            weights: crate::daemon::learning::active_weights(&self.state_dir).0,
            ..SelectOptions::default()
        });
        // Promoted skills (chunks the loop kept having to recover for queries like this one)
        // are pinned when this corpus has them; if they cannot fit, the plain selection runs.
        let options = match &self.fixed_options {
            Some(_) => plain.clone(),
            None => crate::events::evolution::skills::SkillStore::load(&self.state_dir)
                .map(|skills| {
                    skills.apply_promoted(query, &plain, &|chunk| {
                        index.fragments.iter().any(|f| f.chunk_id == chunk)
                    })
                })
                .unwrap_or_else(|_| plain.clone()),
        };
        let (selection, options) = match select::select(&index, query, token_budget, &options) {
            Err(select::SelectError::PinnedOverBudget { .. }) if options.pinned != plain.pinned => {
                (select::select(&index, query, token_budget, &plain)?, plain)
            }
            other => (other?, options),
        };
        let receipt = select::commit_selection(&index, &selection, &options, &self.commits)?;
        let bundle = self.commits.bundle(&receipt.ctx_id)?;
        let texts: std::collections::HashMap<String, String> = selection
            .chunk_inputs()
            .into_iter()
            .map(|c| (c.chunk_id, c.full_text))
            .collect();
        let omitted = receipt
            .recoverable()
            .map(|chunk| OmittedChunk {
                chunk_id: chunk.chunk_id.clone(),
                source: chunk.source.clone(),
                resolution: chunk.resolution,
                receipt_token_count: chunk.receipt_token_count,
                terms: texts
                    .get(&chunk.chunk_id)
                    .map(|t| planner::terms(t))
                    .unwrap_or_default(),
            })
            .collect();
        Ok(Prepared {
            ctx_id: receipt.ctx_id.clone(),
            query: query.to_string(),
            token_budget,
            context_tokens: selection.tokens,
            stable_context_prefix: selection.rendered,
            receipt,
            bundle,
            omitted,
        })
    }

    /// Starts a loop (the step-by-step form the durable protocol uses); drive it with
    /// [`Self::submit`] and [`LoopState::request`].
    pub fn start(
        &self,
        max_rounds: usize,
        recovery_token_budget: usize,
        max_chunks_per_round: usize,
    ) -> Result<LoopState, ProofError> {
        LoopState::new(LoopSettings {
            max_rounds,
            recovery_token_budget,
            max_chunks_per_round,
            mode: self.mode,
            profile: self.profile,
        })
    }

    /// Submits the draft answering `state`'s current request.
    pub fn submit(
        &self,
        prepared: &Prepared,
        state: &mut LoopState,
        draft: String,
    ) -> Result<Step, ProofError> {
        state.submit(self, prepared, draft)
    }

    /// Runs the loop: asks `model_call`, verifies, recovers and asks again until a terminal
    /// status (SPEC §3.1). The callback is called exactly once per item of `result.rounds`.
    pub fn run_fixed_point<F>(
        &self,
        prepared: &Prepared,
        mut model_call: F,
        max_rounds: usize,
        recovery_token_budget: usize,
        max_chunks_per_round: usize,
    ) -> Result<FixedPointResult, ProofError>
    where
        F: FnMut(&ModelRequest) -> Result<String, ModelCallError>,
    {
        let mut state = self.start(max_rounds, recovery_token_budget, max_chunks_per_round)?;
        loop {
            let request = state.request(prepared);
            // A panicking callback is a failed model call like any other, with an artifact.
            let called =
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| model_call(&request)));
            let draft = match called {
                Ok(Ok(draft)) if crate::text::is_blank(&draft) => {
                    return Err(state.model_failure(
                        self,
                        prepared,
                        "the model gave no text (an empty draft)",
                    ));
                }
                Ok(Ok(draft)) => draft,
                Ok(Err(error)) => {
                    return Err(state.model_failure(self, prepared, &error.to_string()));
                }
                Err(panic) => {
                    let message = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "the callback panicked".to_string());
                    return Err(state.model_failure(
                        self,
                        prepared,
                        &format!("the callback panicked: {message}"),
                    ));
                }
            };
            match state.submit(self, prepared, draft)? {
                Step::Ask(_) => continue,
                Step::Done(result) => return Ok(*result),
            }
        }
    }

    /// Appends the outcome of a run and an external signal to the world-model ledger
    /// (`proof/world-model.jsonl`, hash-chained).
    pub fn record_verified_outcome(
        &self,
        result: &FixedPointResult,
        signal: &OutcomeSignal,
    ) -> Result<LedgerEntry, ProofError> {
        Ok(ledger::append(&self.state_dir, result, signal)?)
    }
}
