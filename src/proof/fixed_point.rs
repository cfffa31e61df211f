//! The fixed-point loop as a state machine: one [`LoopState::submit`] per model call. The
//! in-process loop ([`super::layer::VerifiedEfficiencyLayer::run_fixed_point`]) and the durable
//! prepare/advance protocol drive the same machine, so both obey the same rules (SPEC §3.1):
//!
//! 1. each run ends in exactly one status, chosen by [`FixedPointStatus::PRECEDENCE`];
//! 2. one round record per submitted draft, so per model call;
//! 3. the request of round t is the committed context followed by the exact evidence recovered
//!    in rounds 0..t; before each verification the prefix is checked against the receipt's
//!    `context_sha256` and every evidence item against its content hash;
//! 4. each recovered chunk is checked against the bundle's content hash (by the blob store) and
//!    the receipt's fingerprint;
//! 5. every terminal status returns the last round's draft with unsupported claims removed or
//!    marked ([`safe_output`]).

use std::panic::{AssertUnwindSafe, catch_unwind};

use serde::{Deserialize, Serialize};

use super::errors::{
    self, ARTIFACT_FORMAT, FailureArtifact, FailureKind, FixedPointModelError,
    FixedPointRecoveryError, FixedPointVerificationError, ProofError,
};
use super::layer::{ContextRiskMode, Prepared, VerifiedEfficiencyLayer};
use super::planner::{self, ChunkTerms, MIN_CLAIM_RISK, Obligation};
use super::round::{
    ClaimRecord, EvidenceItem, FinalOutput, FixedPointResult, FixedPointStatus, ModelRequest,
    RecoveredChunk, RoundRecord, sha,
};
use crate::context::commit::fingerprint;
use crate::witness::claims::ClaimKind;
use crate::witness::rewrite::{self, WITHHELD_NOTICE};
use crate::witness::verify::{self, Label, Verification};
use crate::witness::{Mode, Profile};

/// How many times the strict output is re-verified and cut again: removing a claim can leave a
/// fragment that is itself unsupported.
const SAFE_OUTPUT_PASSES: usize = 3;

/// The bounds and modes of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopSettings {
    pub max_rounds: usize,
    pub recovery_token_budget: usize,
    pub max_chunks_per_round: usize,
    pub mode: ContextRiskMode,
    pub profile: Profile,
}

/// What to do after a draft.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Ask the model again with this request.
    Ask(Box<ModelRequest>),
    /// The run ended.
    Done(Box<FixedPointResult>),
}

/// Where a run stands: its settings, the evidence recovered so far, its rounds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopState {
    pub settings: LoopSettings,
    pub evidence: Vec<EvidenceItem>,
    pub rounds: Vec<RoundRecord>,
    pub recovery_tokens_used: usize,
    pub result: Option<FixedPointResult>,
}

impl LoopState {
    pub fn new(settings: LoopSettings) -> Result<Self, ProofError> {
        if settings.max_rounds == 0 {
            return Err(ProofError::ZeroBound {
                what: "max_rounds (the bound on model calls)",
            });
        }
        if settings.max_chunks_per_round == 0 {
            return Err(ProofError::ZeroBound {
                what: "max_chunks_per_round",
            });
        }
        Ok(Self {
            settings,
            evidence: Vec::new(),
            rounds: Vec::new(),
            recovery_tokens_used: 0,
            result: None,
        })
    }

    /// The request of the current round.
    pub fn request(&self, prepared: &Prepared) -> ModelRequest {
        ModelRequest {
            query: prepared.query.clone(),
            stable_context_prefix: prepared.stable_context_prefix.clone(),
            appended_evidence: self.evidence.clone(),
            previous_output: self.rounds.last().map(|r| r.output.clone()),
        }
    }

    /// Index of the current round.
    pub fn round(&self) -> usize {
        self.rounds.len()
    }

    /// Whether the run has ended.
    pub fn is_done(&self) -> bool {
        self.result.is_some()
    }

    /// The error for a failed model call in the current round, with its signed artifact.
    pub fn model_failure(
        &self,
        layer: &VerifiedEfficiencyLayer,
        prepared: &Prepared,
        message: &str,
    ) -> ProofError {
        let round = self.rounds.len();
        match self.artifact(
            layer,
            prepared,
            FailureKind::Model,
            "model_call",
            round,
            message,
        ) {
            Ok(artifact) => FixedPointModelError { artifact }.into(),
            Err(e) => e,
        }
    }

    fn artifact(
        &self,
        layer: &VerifiedEfficiencyLayer,
        prepared: &Prepared,
        kind: FailureKind,
        stage: &str,
        round: usize,
        message: &str,
    ) -> Result<Box<errors::SignedArtifact>, ProofError> {
        let now = std::time::SystemTime::now();
        let artifact = FailureArtifact {
            format: ARTIFACT_FORMAT.to_string(),
            artifact_id: format!(
                "pgf_{}",
                &sha(&format!(
                    "{}\n{}\n{}\n{stage}\n{message}\n{:?}",
                    prepared.ctx_id, prepared.query, round, now
                ))[..24]
            ),
            kind,
            stage: stage.to_string(),
            round,
            message: message.to_string(),
            ctx_id: prepared.ctx_id.clone(),
            query: prepared.query.clone(),
            created_at: crate::clock::rfc3339(now),
            completed_rounds: self.rounds.clone(),
            recovered: self.recovered_so_far(),
            recovery_tokens_used: self.recovery_tokens_used,
        };
        errors::sign_and_store(layer.state_dir(), artifact)
            .map(Box::new)
            .map_err(|artifact| ProofError::Unrecorded {
                message: message.to_string(),
                artifact,
            })
    }

    fn recovered_so_far(&self) -> Vec<RecoveredChunk> {
        self.rounds
            .iter()
            .flat_map(|r| r.recovered.iter().cloned())
            .collect()
    }

    /// Verifies `draft` (the answer to [`Self::request`]), decides, and recovers.
    pub fn submit(
        &mut self,
        layer: &VerifiedEfficiencyLayer,
        prepared: &Prepared,
        draft: String,
    ) -> Result<Step, ProofError> {
        if let Some(result) = &self.result {
            return Ok(Step::Done(Box::new(result.clone())));
        }
        let round = self.rounds.len();
        let request = self.request(prepared);
        let verification_error = |state: &Self, stage: &str, message: String| -> ProofError {
            match state.artifact(
                layer,
                prepared,
                FailureKind::Verification,
                stage,
                round,
                &message,
            ) {
                Ok(artifact) => FixedPointVerificationError { artifact }.into(),
                Err(e) => e,
            }
        };
        if sha(&request.stable_context_prefix) != prepared.receipt.context_sha256 {
            return Err(verification_error(
                self,
                "context_integrity",
                format!(
                    "the committed context of {} no longer matches the receipt's context_sha256",
                    prepared.ctx_id
                ),
            ));
        }
        if let Some(item) = self
            .evidence
            .iter()
            .find(|e| sha(&e.text) != e.content_hash)
        {
            return Err(verification_error(
                self,
                "context_integrity",
                format!(
                    "recovered evidence {} was changed after recovery",
                    item.chunk_id
                ),
            ));
        }
        let context = request.full_context();
        let settings = self.settings;
        let checked = catch_unwind(AssertUnwindSafe(|| {
            let verification =
                verify::check(&draft, &context, Some(&prepared.query), settings.profile);
            let safe = safe_output(&draft, &verification, &context, &prepared.query, settings);
            (verification, safe)
        }));
        let (verification, (verified_output, claims_flagged)) = match checked {
            Ok(checked) => checked,
            Err(_) => {
                return Err(verification_error(
                    self,
                    "verification",
                    "the verifier failed on this draft".to_string(),
                ));
            }
        };
        let obligations = obligations(&verification, &prepared.query, &planner::terms(&context));
        let verifiable = verification.verifiable().count();
        let supported = verification
            .verifiable()
            .filter(|c| c.label == Label::Supported)
            .count();
        let mut record = RoundRecord {
            round,
            request_sha256: sha(&request.to_json()),
            stable_context_prefix_sha256: sha(&request.stable_context_prefix),
            appended_chunk_ids: self.evidence.iter().map(|e| e.chunk_id.clone()).collect(),
            output_sha256: sha(&draft),
            output: draft,
            claims: verification
                .claims
                .iter()
                .map(|c| ClaimRecord {
                    index: c.claim.index,
                    text: c.claim.text.clone(),
                    label: c.label.as_str().to_string(),
                    score: c.score,
                })
                .collect(),
            verifiable_claims: verifiable,
            supported_claims: supported,
            unsupported_claim_rate: verification.unsupported_claim_rate(),
            verified_output,
            obligations,
            plan: None,
            recovered: Vec::new(),
            stop_reason: None,
            decision: String::new(),
        };
        let remaining = settings
            .recovery_token_budget
            .saturating_sub(self.recovery_tokens_used);
        let unrecovered: Vec<ChunkTerms<'_>> = prepared
            .omitted
            .iter()
            .filter(|c| !self.evidence.iter().any(|e| e.chunk_id == c.chunk_id))
            .map(|c| ChunkTerms {
                chunk_id: &c.chunk_id,
                receipt_token_count: c.receipt_token_count,
                terms: &c.terms,
            })
            .collect();
        let stop = if verifiable == 0 {
            record.decision = "the draft has no verifiable claim".to_string();
            Some(FixedPointStatus::NoVerifiableClaims)
        } else if record.obligations.is_empty() {
            record.decision = format!("all {verifiable} verifiable claims are supported");
            Some(FixedPointStatus::Supported)
        } else if unrecovered.is_empty() {
            record.decision = if prepared.omitted.is_empty() {
                format!(
                    "{} claims are open and the selection omitted nothing: there is no evidence to recover",
                    record.obligations.len()
                )
            } else {
                format!(
                    "{} claims are open and every omitted chunk is already recovered",
                    record.obligations.len()
                )
            };
            Some(FixedPointStatus::NoOmittedEvidence)
        } else {
            let plan = planner::plan(
                &record.obligations,
                &planner::terms(&prepared.query),
                &unrecovered,
                remaining,
                settings.max_chunks_per_round,
            );
            let status = if !plan.has_supporting() {
                record.decision = format!(
                    "none of the {} unrecovered chunks overlaps the open claims",
                    unrecovered.len()
                );
                Some(FixedPointStatus::NoSupportingOmittedEvidence)
            } else if plan.selected.is_empty() {
                record.decision = format!(
                    "{} supporting chunks, none fits the remaining recovery budget of {remaining} tokens",
                    plan.candidates.len()
                );
                Some(FixedPointStatus::RecoveryBudgetExhausted)
            } else if round + 1 >= settings.max_rounds {
                record.decision = format!(
                    "the plan would recover {} but the bound of {} model calls is reached",
                    plan.selected.join(", "),
                    settings.max_rounds
                );
                Some(FixedPointStatus::MaxRoundsReached)
            } else {
                record.decision = format!(
                    "recover {} ({} tokens) and ask again",
                    plan.selected.join(", "),
                    plan.selected_tokens
                );
                None
            };
            record.plan = Some(plan);
            status
        };
        if let Some(status) = stop {
            record.stop_reason = Some(status);
            let final_output = FinalOutput {
                output_sha256: sha(&record.verified_output),
                output: record.verified_output.clone(),
                round,
                claims_flagged,
            };
            self.rounds.push(record);
            let result = FixedPointResult {
                status,
                final_output,
                recovery_tokens_used: self.recovery_tokens_used,
                rounds: self.rounds.clone(),
                ctx_id: prepared.ctx_id.clone(),
                query: prepared.query.clone(),
                max_rounds: settings.max_rounds,
                recovery_token_budget: settings.recovery_token_budget,
                max_chunks_per_round: settings.max_chunks_per_round,
            };
            self.result = Some(result.clone());
            return Ok(Step::Done(Box::new(result)));
        }
        let selected = record
            .plan
            .as_ref()
            .map(|p| p.selected.clone())
            .unwrap_or_default();
        let mut items = Vec::with_capacity(selected.len());
        for chunk_id in &selected {
            match recover(layer, prepared, chunk_id) {
                Ok((item, recovered)) => {
                    record.recovered.push(recovered);
                    items.push(item);
                }
                Err(message) => {
                    // The model call of this round happened: its record is kept, with the chunks
                    // recovered and verified before the failure.
                    record.decision = format!("recovery of {chunk_id} failed: {message}");
                    let mut failed = self.clone();
                    failed.rounds.push(record);
                    return Err(
                        // The failure is in this round, whose record the artifact keeps.
                        match failed.artifact(
                            layer,
                            prepared,
                            FailureKind::Recovery,
                            "recovery",
                            round,
                            &message,
                        ) {
                            Ok(artifact) => FixedPointRecoveryError { artifact }.into(),
                            Err(e) => e,
                        },
                    );
                }
            }
        }
        for (item, recovered) in items.into_iter().zip(&record.recovered) {
            self.recovery_tokens_used += recovered.receipt_token_count;
            self.evidence.push(EvidenceItem {
                recovered_in_round: round,
                ..item
            });
        }
        self.rounds.push(record);
        Ok(Step::Ask(Box::new(self.request(prepared))))
    }
}

/// The open proof obligations of a verification: one per verifiable claim not supported, with
/// the terms evidence must hold (a short answer is read against the question, so the question's
/// terms join it) and those of them the context (sorted `context_terms`) lacks.
fn obligations(
    verification: &Verification,
    query: &str,
    context_terms: &[String],
) -> Vec<Obligation> {
    verification
        .verifiable()
        .filter(|c| c.label != Label::Supported)
        .map(|c| {
            let mut terms = planner::terms(&c.claim.text);
            if c.claim.kind == ClaimKind::ShortAnswer {
                terms.extend(planner::terms(query));
                terms.sort();
                terms.dedup();
            }
            let missing: Vec<String> = terms
                .iter()
                .filter(|t| context_terms.binary_search(t).is_err())
                .cloned()
                .collect();
            Obligation {
                claim_index: c.claim.index,
                claim: c.claim.text.clone(),
                label: c.label.as_str().to_string(),
                risk: if c.label == Label::Contradicted {
                    1.0
                } else {
                    (1.0 - c.score).clamp(MIN_CLAIM_RISK, 1.0)
                },
                terms,
                missing,
            }
        })
        .collect()
}

/// Recovers one chunk's exact bytes: the blob store checks them against the bundle's content
/// hash, then they are checked against the receipt's fingerprint.
fn recover(
    layer: &VerifiedEfficiencyLayer,
    prepared: &Prepared,
    chunk_id: &str,
) -> Result<(EvidenceItem, RecoveredChunk), String> {
    let receipt_chunk = prepared
        .receipt
        .chunk(chunk_id)
        .ok_or_else(|| format!("{chunk_id} is not in the receipt of {}", prepared.ctx_id))?;
    let entry = prepared
        .bundle
        .entries
        .iter()
        .find(|e| e.chunk_id == chunk_id)
        .ok_or_else(|| {
            format!(
                "{chunk_id} is not in the recovery bundle of {}",
                prepared.ctx_id
            )
        })?;
    let bytes = layer
        .commits()
        .blobs()
        .get(&entry.content_hash)
        .map_err(|e| format!("{chunk_id}: {e}"))?;
    if fingerprint(chunk_id, &bytes) != receipt_chunk.fingerprint {
        return Err(format!(
            "{chunk_id}: the recovered bytes do not match the receipt fingerprint of {}",
            prepared.ctx_id
        ));
    }
    let text = String::from_utf8(bytes).map_err(|_| format!("{chunk_id}: bytes are not UTF-8"))?;
    Ok((
        EvidenceItem {
            chunk_id: chunk_id.to_string(),
            source: receipt_chunk.source.clone(),
            recovered_in_round: 0,
            content_hash: entry.content_hash.clone(),
            text,
        },
        RecoveredChunk {
            chunk_id: chunk_id.to_string(),
            source: receipt_chunk.source.clone(),
            receipt_token_count: receipt_chunk.receipt_token_count,
            fingerprint: receipt_chunk.fingerprint.clone(),
            content_hash: entry.content_hash.clone(),
        },
    ))
}

/// The safest strictly verified form of `draft` and how many claims were flagged: strict mode
/// removes unsupported claims (failing closed whatever the profile) and re-verifies what is
/// left until nothing unsupported remains, else withholds; audit mode marks them. Structured
/// output cannot be rewritten, so one with unsupported claims is withheld.
pub fn safe_output(
    draft: &str,
    verification: &Verification,
    context: &str,
    query: &str,
    settings: LoopSettings,
) -> (String, usize) {
    let flagged = verification
        .claims
        .iter()
        .filter(|c| matches!(c.label, Label::Unsupported | Label::Contradicted))
        .count();
    if flagged == 0 {
        return (draft.to_string(), 0);
    }
    if rewrite::is_structured(draft) {
        return (WITHHELD_NOTICE.to_string(), flagged);
    }
    match settings.mode {
        ContextRiskMode::Audit => (
            rewrite::apply(draft, verification, Mode::Annotate, settings.profile).output,
            flagged,
        ),
        ContextRiskMode::Strict => {
            let removal = if settings.profile.fails_closed() {
                settings.profile
            } else {
                Profile::Rag
            };
            let mut text = rewrite::apply(draft, verification, Mode::Strict, removal).output;
            for _ in 0..SAFE_OUTPUT_PASSES {
                // The notice asserts nothing about the evidence; it is not checked against it.
                if text == WITHHELD_NOTICE {
                    return (text, flagged);
                }
                let again = verify::check(&text, context, Some(query), settings.profile);
                if !again.has_unsupported() {
                    return (text, flagged);
                }
                text = rewrite::apply(&text, &again, Mode::Strict, removal).output;
            }
            let last = verify::check(&text, context, Some(query), settings.profile);
            if text != WITHHELD_NOTICE && last.has_unsupported() {
                text = WITHHELD_NOTICE.to_string();
            }
            (text, flagged)
        }
    }
}

#[cfg(test)]
mod tests;
