//! The run setting `--fixed-point ROUNDS[,BUDGET]`: the `svc` and `combined` conditions run the
//! proof-guided loop ([`crate::proof`]) with the trial's runner as the model callback.
//!
//! The loop prepares from the same units the condition selects from ([`super::condition::
//! svc_units`]) at the trial's budget, verifies each draft against the question (profile `qa`,
//! `code` for file answers) in strict mode, and recovers at most [`MAX_CHUNKS_PER_ROUND`] exact
//! chunks a round within the setting's recovery budget. Each round is one model call, and the
//! record adds them up: `context_tokens` is the sum of every call's context, output and
//! reasoning tokens, cost and latency are sums; `response_text` is the loop's final output (the
//! last draft with unsupported claims removed), `context_sha256` the last call's context and
//! `context_commit_id` the loop's commit. The rounds, statuses and recovered chunk ids go to
//! notes.jsonl (kind `fixed_point`).
//!
//! Only local runners (the fixture) drive the loop for now: their calls are synchronous like
//! the callback.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::condition::{BuiltContext, ConditionFailure};
use super::runner::{ModelReply, Runner, RunnerError};
use super::workload::{AnswerKind, Task};
use crate::proof::{ContextRiskMode, ProofError, VerifiedEfficiencyLayer};
use crate::tokens::Tokenizer;
use crate::witness::Profile;

/// Chunks the loop recovers per round in trials.
pub const MAX_CHUNKS_PER_ROUND: usize = 4;
/// Recovery budget when the setting names only the rounds: a few paragraphs.
pub const DEFAULT_RECOVERY_BUDGET: usize = 1024;

/// The loop's bounds in a run (recorded in the manifest).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedPointSetting {
    pub max_rounds: usize,
    pub recovery_token_budget: usize,
    pub max_chunks_per_round: usize,
}

impl FromStr for FixedPointSetting {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let usage = || {
            format!(
                "--fixed-point takes ROUNDS[,BUDGET] (e.g. 3 or 3,1024), got {text:?}: ROUNDS is the bound on model calls (>= 1), BUDGET the recovered tokens (default {DEFAULT_RECOVERY_BUDGET})"
            )
        };
        let (rounds, budget) = match text.split_once(',') {
            Some((rounds, budget)) => (rounds, Some(budget)),
            None => (text, None),
        };
        let max_rounds: usize = rounds.trim().parse().map_err(|_| usage())?;
        if max_rounds == 0 {
            return Err(usage());
        }
        let recovery_token_budget = match budget {
            Some(budget) => budget.trim().parse().map_err(|_| usage())?,
            None => DEFAULT_RECOVERY_BUDGET,
        };
        Ok(Self {
            max_rounds,
            recovery_token_budget,
            max_chunks_per_round: MAX_CHUNKS_PER_ROUND,
        })
    }
}

impl fmt::Display for FixedPointSetting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{}", self.max_rounds, self.recovery_token_budget)
    }
}

/// A trial run through the loop, ready for the record.
pub struct LoopTrial {
    /// The context the record describes (see the module docs), or why there is none.
    pub built: Result<BuiltContext, ConditionFailure>,
    /// The merged reply of every call and their summed latency; `None` when no call was made.
    pub reply: Option<(Result<ModelReply, RunnerError>, f64)>,
    pub notes: Vec<(&'static str, String)>,
}

#[derive(Default)]
struct Calls {
    context_tokens: usize,
    input_tokens: Option<u64>,
    all_reported_input: bool,
    output_tokens: u64,
    reasoning_tokens: u64,
    latency_ms: f64,
    last: Option<ModelReply>,
    error: Option<RunnerError>,
    last_context: String,
    count: usize,
}

/// Runs the loop for one trial. `commit_id` is the condition's own commit, named by the record
/// when the loop cannot prepare.
#[allow(clippy::too_many_arguments)]
pub fn run_trial(
    setting: FixedPointSetting,
    state_home: &Path,
    runner: &Runner,
    task: &Task,
    units: &[(String, String)],
    budget: usize,
    commit_id: Option<String>,
    tokenizer: &Tokenizer,
) -> LoopTrial {
    let profile = match task.answer_kind {
        AnswerKind::Span => Profile::Qa,
        AnswerKind::Files => Profile::Code,
    };
    let layer =
        VerifiedEfficiencyLayer::new(state_home, ContextRiskMode::Strict).with_profile(profile);
    let failure = |error_type: &'static str, message: String, commit: Option<String>| LoopTrial {
        built: Err(ConditionFailure {
            error_type,
            message,
            context_commit_id: commit,
        }),
        reply: None,
        notes: Vec::new(),
    };
    let prepared = match layer.prepare(units, &task.question, budget) {
        Ok(prepared) => prepared,
        Err(error) => {
            return failure(
                "fixed_point_prepare_error",
                format!("the fixed-point loop could not prepare: {error}"),
                commit_id,
            );
        }
    };
    let mut calls = Calls {
        all_reported_input: true,
        ..Calls::default()
    };
    let outcome = layer.run_fixed_point(
        &prepared,
        |request| {
            let context = request.full_context();
            let model_request = runner.request(&context, &task.question, task.answer_kind);
            let started = Instant::now();
            let reply =
                runner
                    .call_local(&model_request)
                    .ok_or_else(|| RunnerError::InvalidResponse {
                        url: runner.spec.name.clone(),
                        message: "the fixed-point loop needs a local runner".into(),
                    });
            calls.latency_ms += started.elapsed().as_secs_f64() * 1000.0;
            calls.count += 1;
            calls.context_tokens += tokenizer.count(&context);
            calls.last_context = context;
            match reply {
                Ok(reply) => {
                    match reply.input_tokens {
                        Some(tokens) => {
                            calls.input_tokens = Some(calls.input_tokens.unwrap_or(0) + tokens);
                        }
                        None => calls.all_reported_input = false,
                    }
                    calls.output_tokens += reply.output_tokens;
                    calls.reasoning_tokens += reply.reasoning_tokens;
                    let text = reply.text.clone();
                    calls.last = Some(reply);
                    Ok(text)
                }
                Err(error) => {
                    let message = error.to_string();
                    calls.error = Some(error);
                    Err(message.into())
                }
            }
        },
        setting.max_rounds,
        setting.recovery_token_budget,
        setting.max_chunks_per_round,
    );
    let built = BuiltContext {
        text: calls.last_context.clone(),
        tokens: calls.context_tokens,
        context_commit_id: Some(prepared.ctx_id.clone()),
        truncated_from: None,
    };
    match outcome {
        Ok(result) => {
            let Some(last) = calls.last else {
                return failure(
                    "fixed_point_error",
                    "the loop ended without a model call".into(),
                    Some(prepared.ctx_id),
                );
            };
            let detail = serde_json::json!({
                "status": result.status,
                "rounds": result.rounds.len(),
                "model_calls": calls.count,
                "recovered_chunk_ids": result.recovered_chunk_ids(),
                "recovery_tokens_used": result.recovery_tokens_used,
                "unsupported_claim_rate_by_round": result.rounds.iter().map(|r| r.unsupported_claim_rate).collect::<Vec<_>>(),
                "decisions": result.rounds.iter().map(|r| r.decision.as_str()).collect::<Vec<_>>(),
                "first_draft": result.rounds.first().map(|r| r.output.as_str()),
                "setting": setting.to_string(),
            });
            let reply = ModelReply {
                text: result.final_output.output,
                provider_request_id: last.provider_request_id,
                input_tokens: calls.input_tokens.filter(|_| calls.all_reported_input),
                output_tokens: calls.output_tokens,
                reasoning_tokens: calls.reasoning_tokens,
                usage_source: last.usage_source,
            };
            LoopTrial {
                built: Ok(built),
                reply: Some((Ok(reply), calls.latency_ms)),
                notes: vec![("fixed_point", detail.to_string())],
            }
        }
        Err(ProofError::Model(error)) => {
            let runner_error = calls.error.unwrap_or_else(|| RunnerError::InvalidResponse {
                url: runner.spec.name.clone(),
                message: error.to_string(),
            });
            LoopTrial {
                built: Ok(built),
                reply: Some((Err(runner_error), calls.latency_ms)),
                notes: vec![("fixed_point_model_error", error.to_string())],
            }
        }
        Err(error) => failure(
            "fixed_point_error",
            error.to_string(),
            Some(prepared.ctx_id),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setting_parses_rounds_and_an_optional_budget() {
        let setting: FixedPointSetting = "3".parse().expect("rounds");
        assert_eq!(
            (setting.max_rounds, setting.recovery_token_budget),
            (3, DEFAULT_RECOVERY_BUDGET)
        );
        let setting: FixedPointSetting = "2,512".parse().expect("rounds and budget");
        assert_eq!(setting.to_string(), "2,512");
        for bad in ["0", "x", "3,", "3,-1", ""] {
            assert!(bad.parse::<FixedPointSetting>().is_err(), "{bad}");
        }
    }
}
