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
//! The harness drives the loop's state machine one call at a time ([`TrialLoop`]), so any
//! runner can be the model: the fixture in-process, HTTP runners awaited on the run's runtime
//! (through the response cache, each round's request stored and logged in requests.jsonl like
//! any answer call).

use std::fmt;
use std::path::Path;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::condition::{BuiltContext, ConditionFailure};
use super::runner::{ModelReply, ModelRequest, Runner, RunnerError};
use super::workload::{AnswerKind, Task};
use crate::proof::fixed_point::{LoopState, Step};
use crate::proof::{
    ContextRiskMode, FixedPointResult, Prepared, ProofError, VerifiedEfficiencyLayer,
};
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
    /// When the loop failed after calls that answered: their context tokens and merged usage,
    /// which the error record still bills (they were spent).
    pub spent: Option<(usize, ModelReply)>,
}

impl LoopTrial {
    fn boxed(error_type: &'static str, message: String, commit: Option<String>) -> Box<Self> {
        Box::new(Self::failed(error_type, message, commit))
    }

    fn failed(error_type: &'static str, message: String, commit: Option<String>) -> Self {
        Self {
            built: Err(ConditionFailure {
                error_type,
                message,
                context_commit_id: commit,
            }),
            reply: None,
            notes: Vec::new(),
            spent: None,
        }
    }
}

impl Calls {
    /// The usage of every call that answered, merged into one reply carrying `text`; `None`
    /// when none answered.
    fn merged(&self, text: String) -> Option<ModelReply> {
        let last = self.last.as_ref()?;
        Some(ModelReply {
            text,
            provider_request_id: last.provider_request_id.clone(),
            input_tokens: self.input_tokens.filter(|_| self.all_reported_input),
            cached_input_tokens: self.cached_input_tokens,
            cache_write_tokens: self.cache_write_tokens,
            output_tokens: self.output_tokens,
            reasoning_tokens: self.reasoning_tokens,
            usage_source: last.usage_source,
        })
    }
}

/// A running sum of a count every call must report: the first call's value, then the sum
/// while every call reports one, `None` once one does not.
fn add_reported(first: bool, sum: Option<u64>, value: Option<u64>) -> Option<u64> {
    match (first, sum, value) {
        (true, _, value) => value,
        (false, Some(sum), Some(value)) => Some(sum + value),
        _ => None,
    }
}

#[derive(Default)]
struct Calls {
    context_tokens: usize,
    input_tokens: Option<u64>,
    all_reported_input: bool,
    cached_input_tokens: Option<u64>,
    cache_write_tokens: Option<u64>,
    output_tokens: u64,
    reasoning_tokens: u64,
    latency_ms: f64,
    last: Option<ModelReply>,
    error: Option<RunnerError>,
    last_context: String,
    count: usize,
}

/// A trial's loop in progress: the harness asks [`Self::next_request`], makes the call its own
/// way (in-process for the fixture, awaited over HTTP for servers) and hands the reply to
/// [`Self::answer`], until no request is left; [`Self::finish`] then gives the trial. Driving
/// the loop's state machine this way, rather than through a callback, lets an async call sit
/// between two rounds without a second runtime or thread.
pub struct TrialLoop<'a> {
    setting: FixedPointSetting,
    runner: &'a Runner,
    task: &'a Task,
    tokenizer: &'a Tokenizer,
    layer: VerifiedEfficiencyLayer,
    prepared: Prepared,
    state: LoopState,
    calls: Calls,
    /// The context of the request handed out and not yet answered.
    pending: Option<String>,
    outcome: Option<Result<FixedPointResult, ProofError>>,
}

impl<'a> TrialLoop<'a> {
    /// Prepares the loop for one trial: selects and commits `units` at `budget`. `commit_id` is
    /// the condition's own commit, named by the record when the loop cannot prepare.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        setting: FixedPointSetting,
        state_home: &Path,
        runner: &'a Runner,
        task: &'a Task,
        units: &[(String, String)],
        budget: usize,
        weights: crate::context::weights::RankingWeights,
        commit_id: Option<String>,
        tokenizer: &'a Tokenizer,
    ) -> Result<Self, Box<LoopTrial>> {
        let profile = match task.answer_kind {
            AnswerKind::Span => Profile::Qa,
            AnswerKind::Files => Profile::Code,
        };
        // The run's own selection settings, never the state home's learned weights or skills.
        let layer = VerifiedEfficiencyLayer::new(state_home, ContextRiskMode::Strict)
            .with_profile(profile)
            .with_select_options(crate::context::select::SelectOptions {
                weights,
                ..Default::default()
            });
        let prepared = layer
            .prepare(units, &task.question, budget)
            .map_err(|error| {
                LoopTrial::boxed(
                    "fixed_point_prepare_error",
                    format!("the fixed-point loop could not prepare: {error}"),
                    commit_id.clone(),
                )
            })?;
        let state = layer
            .start(
                setting.max_rounds,
                setting.recovery_token_budget,
                setting.max_chunks_per_round,
            )
            .map_err(|error| {
                LoopTrial::boxed(
                    "fixed_point_error",
                    error.to_string(),
                    Some(prepared.ctx_id.clone()),
                )
            })?;
        Ok(Self {
            setting,
            runner,
            task,
            tokenizer,
            layer,
            prepared,
            state,
            calls: Calls {
                all_reported_input: true,
                ..Calls::default()
            },
            pending: None,
            outcome: None,
        })
    }

    /// The runner request of the current round; `None` once the loop has ended.
    pub fn next_request(&mut self) -> Option<ModelRequest> {
        if self.outcome.is_some() {
            return None;
        }
        let context = self.state.request(&self.prepared).full_context();
        let request = self
            .runner
            .request(&context, &self.task.question, self.task.answer_kind);
        self.pending = Some(context);
        Some(request)
    }

    /// Takes the reply to the request [`Self::next_request`] gave, with the call's latency:
    /// adds the call to the trial's account, verifies the draft and decides the next step.
    pub fn answer(&mut self, reply: Result<ModelReply, RunnerError>, latency_ms: f64) {
        let Some(context) = self.pending.take() else {
            return;
        };
        let calls = &mut self.calls;
        calls.latency_ms += latency_ms;
        calls.count += 1;
        calls.context_tokens += self.tokenizer.count(&context);
        calls.last_context = context;
        let draft = match reply {
            Ok(reply) => {
                match reply.input_tokens {
                    Some(tokens) => {
                        calls.input_tokens = Some(calls.input_tokens.unwrap_or(0) + tokens);
                    }
                    None => calls.all_reported_input = false,
                }
                // Summed over the loop's calls; one call that does not say leaves the sum
                // unknown.
                let first = calls.count == 1;
                calls.cached_input_tokens =
                    add_reported(first, calls.cached_input_tokens, reply.cached_input_tokens);
                calls.cache_write_tokens =
                    add_reported(first, calls.cache_write_tokens, reply.cache_write_tokens);
                calls.output_tokens += reply.output_tokens;
                calls.reasoning_tokens += reply.reasoning_tokens;
                let text = reply.text.clone();
                calls.last = Some(reply);
                text
            }
            Err(error) => {
                let message = error.to_string();
                calls.error = Some(error);
                self.outcome = Some(Err(self.state.model_failure(
                    &self.layer,
                    &self.prepared,
                    &message,
                )));
                return;
            }
        };
        match self.state.submit(&self.layer, &self.prepared, draft) {
            Ok(Step::Ask(_)) => {}
            Ok(Step::Done(result)) => self.outcome = Some(Ok(*result)),
            Err(error) => self.outcome = Some(Err(error)),
        }
    }

    /// The trial for the record: its context, the merged reply and the loop's note.
    pub fn finish(self) -> LoopTrial {
        let calls = self.calls;
        let ctx_id = self.prepared.ctx_id.clone();
        let built = BuiltContext {
            text: calls.last_context.clone(),
            tokens: calls.context_tokens,
            context_commit_id: Some(ctx_id.clone()),
            truncated_from: None,
        };
        let Some(outcome) = self.outcome else {
            return LoopTrial::failed(
                "fixed_point_error",
                "the loop was left before it reached a terminal status".into(),
                Some(ctx_id),
            );
        };
        let spent = calls
            .merged(String::new())
            .map(|reply| (calls.context_tokens, reply));
        match outcome {
            Ok(result) => {
                let Some(reply) = calls.merged(result.final_output.output.clone()) else {
                    return LoopTrial::failed(
                        "fixed_point_error",
                        "the loop ended without a model call".into(),
                        Some(ctx_id),
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
                    "setting": self.setting.to_string(),
                });
                LoopTrial {
                    built: Ok(built),
                    reply: Some((Ok(reply), calls.latency_ms)),
                    notes: vec![("fixed_point", detail.to_string())],
                    spent: None,
                }
            }
            Err(ProofError::Model(error)) => {
                let runner_error = calls.error.unwrap_or_else(|| RunnerError::InvalidResponse {
                    url: self.runner.spec.name.clone(),
                    message: error.to_string(),
                });
                LoopTrial {
                    built: Ok(built),
                    reply: Some((Err(runner_error), calls.latency_ms)),
                    notes: vec![("fixed_point_model_error", error.to_string())],
                    spent,
                }
            }
            Err(error) => LoopTrial {
                spent,
                ..LoopTrial::failed("fixed_point_error", error.to_string(), Some(ctx_id))
            },
        }
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
