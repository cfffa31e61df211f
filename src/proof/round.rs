//! The wire objects of the loop (SPEC §2.3): the model request, the round records, the result,
//! and the terminal statuses (§3.1).

use serde::{Deserialize, Serialize};

use super::planner::{Obligation, Plan};
use crate::digest;

/// How each recovered chunk is introduced in the full context. Message-format overhead: not
/// counted in the recovery budget (SPEC §8), and never part of the chunk's bytes.
pub const EVIDENCE_HEADER: &str = "\n\n[recovered evidence: ";

/// The terminal statuses of a run (SPEC §3.1). When several conditions hold at once the first
/// in this order wins (see [`FixedPointStatus::PRECEDENCE`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
#[clap(rename_all = "snake_case")]
pub enum FixedPointStatus {
    /// At least one verifiable claim, and none left unsupported.
    Supported,
    /// The draft had no claim able to establish convergence.
    NoVerifiableClaims,
    /// No unrecovered chunk remained.
    NoOmittedEvidence,
    /// Omitted chunks existed, but none overlapped the open obligations.
    NoSupportingOmittedEvidence,
    /// The recovery budget was zero, or no supporting candidate fit what was left of it.
    RecoveryBudgetExhausted,
    /// Recovery was possible but the bound on model calls was reached.
    MaxRoundsReached,
}

impl FixedPointStatus {
    /// Precedence when several conditions hold: facts about the draft first (it is supported,
    /// or it has nothing to verify: recovery cannot change either), then facts about the
    /// evidence pool (nothing left, nothing relevant left), then the budget, and the round
    /// bound last, because it is the only one that says "more calls would have helped".
    pub const PRECEDENCE: [FixedPointStatus; 6] = [
        FixedPointStatus::Supported,
        FixedPointStatus::NoVerifiableClaims,
        FixedPointStatus::NoOmittedEvidence,
        FixedPointStatus::NoSupportingOmittedEvidence,
        FixedPointStatus::RecoveryBudgetExhausted,
        FixedPointStatus::MaxRoundsReached,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FixedPointStatus::Supported => "supported",
            FixedPointStatus::NoVerifiableClaims => "no_verifiable_claims",
            FixedPointStatus::NoOmittedEvidence => "no_omitted_evidence",
            FixedPointStatus::NoSupportingOmittedEvidence => "no_supporting_omitted_evidence",
            FixedPointStatus::RecoveryBudgetExhausted => "recovery_budget_exhausted",
            FixedPointStatus::MaxRoundsReached => "max_rounds_reached",
        }
    }
}

impl std::fmt::Display for FixedPointStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One recovered chunk as the model sees it: exact bytes, never rewritten.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceItem {
    pub chunk_id: String,
    pub source: String,
    /// The round whose draft it was recovered for.
    pub recovered_in_round: usize,
    /// SHA-256 of `text` (the recovery bundle's content hash).
    pub content_hash: String,
    pub text: String,
}

/// The request handed to the model callback (SPEC §2.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelRequest {
    pub query: String,
    /// The committed context, byte-identical in every round.
    pub stable_context_prefix: String,
    /// Exact evidence recovered in earlier rounds, oldest first; earlier items never change.
    pub appended_evidence: Vec<EvidenceItem>,
    /// The previous round's draft (`None` in round 0).
    pub previous_output: Option<String>,
}

impl ModelRequest {
    /// The full context of the request: the committed prefix, then each recovered chunk after
    /// a one-line header naming it. This is what drafts are verified against.
    pub fn full_context(&self) -> String {
        render_context(&self.stable_context_prefix, &self.appended_evidence)
    }

    /// The request as the JSON a model command reads on stdin.
    pub fn to_json(&self) -> String {
        // A struct of strings serialises infallibly.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// `prefix` followed by each evidence item (see [`ModelRequest::full_context`]).
pub fn render_context(prefix: &str, evidence: &[EvidenceItem]) -> String {
    let extra: usize = evidence
        .iter()
        .map(|e| e.text.len() + e.chunk_id.len() + 32)
        .sum();
    let mut out = String::with_capacity(prefix.len() + extra);
    out.push_str(prefix);
    for item in evidence {
        out.push_str(EVIDENCE_HEADER);
        out.push_str(&item.chunk_id);
        out.push_str("]\n");
        out.push_str(&item.text);
    }
    out
}

/// A chunk recovered after a round, with the checks it passed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecoveredChunk {
    pub chunk_id: String,
    pub source: String,
    pub receipt_token_count: usize,
    /// Matched the context receipt.
    pub fingerprint: String,
    /// Matched the recovery bundle.
    pub content_hash: String,
}

/// The verdict on one claim of a draft.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimRecord {
    pub index: usize,
    pub text: String,
    /// `supported`, `contradicted`, `unsupported`, `not_verifiable`.
    pub label: String,
    pub score: f64,
}

/// One round: one model call, its verification, and what the planner decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoundRecord {
    pub round: usize,
    /// SHA-256 of the request JSON the callback received.
    pub request_sha256: String,
    /// SHA-256 of the committed context in the request (equal in every round).
    pub stable_context_prefix_sha256: String,
    /// Evidence in the request, in order.
    pub appended_chunk_ids: Vec<String>,
    /// The draft returned by the callback.
    pub output: String,
    pub output_sha256: String,
    pub claims: Vec<ClaimRecord>,
    pub verifiable_claims: usize,
    pub supported_claims: usize,
    pub unsupported_claim_rate: f64,
    /// The draft with unsupported claims removed or marked (the mode decides).
    pub verified_output: String,
    /// Open obligations: verifiable claims not supported.
    pub obligations: Vec<Obligation>,
    /// The planner's scores and choice (absent when the round stopped before planning).
    pub plan: Option<Plan>,
    /// Chunks recovered after this round, for the next request.
    pub recovered: Vec<RecoveredChunk>,
    /// The terminal status, when this round ended the run.
    pub stop_reason: Option<FixedPointStatus>,
    /// Why the loop continued or stopped, in words.
    pub decision: String,
}

/// The output a run returns: the safest strictly verified output of its last round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FinalOutput {
    pub output: String,
    /// Round whose draft it comes from (the last).
    pub round: usize,
    /// Claims of that draft removed or marked.
    pub claims_flagged: usize,
    pub output_sha256: String,
}

/// The result of a fixed-point run (SPEC §2.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedPointResult {
    pub status: FixedPointStatus,
    pub final_output: FinalOutput,
    /// Σ receipt_token_count of recovered chunks.
    pub recovery_tokens_used: usize,
    /// One entry per model call.
    pub rounds: Vec<RoundRecord>,
    pub ctx_id: String,
    pub query: String,
    pub max_rounds: usize,
    pub recovery_token_budget: usize,
    pub max_chunks_per_round: usize,
}

impl FixedPointResult {
    /// Ids of every recovered chunk, in order.
    pub fn recovered_chunk_ids(&self) -> Vec<&str> {
        self.rounds
            .iter()
            .flat_map(|r| r.recovered.iter().map(|c| c.chunk_id.as_str()))
            .collect()
    }
}

pub(crate) fn sha(text: &str) -> String {
    digest::sha256_hex(text)
}
