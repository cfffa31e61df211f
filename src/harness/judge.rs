//! `qa-judge-v1`: a model-graded scorer for free-form answers. A configured runner (the run's
//! own, or another with `--judge`) reads the question, the gold answers and the answer under a
//! fixed rubric (the committed template [`TEMPLATE`], whose SHA-256 the manifest records) and
//! replies `SCORE: 0`, `SCORE: 0.5` or `SCORE: 1`.
//!
//! - Parsing is strict: the reply must hold exactly one `SCORE:` line with one of those values.
//!   Anything else is a parse failure, and the trial becomes an `outcome: error` record with
//!   `error_type: judge_unparseable` (the judge's words in `notes.jsonl`), never a silent 0.
//!   A failed judge call is `judge_failed`.
//! - The judge's call is counted in the trial: its cost is added to `billed_cost_usd`; its
//!   tokens, cost and latency are in the `judge_call` note. It is not added to `latency_ms`
//!   (grading is not what a client waits for) nor to `output_tokens` (not the answer's).
//! - It goes through the run's response cache like any HTTP call (`requests.jsonl` purpose
//!   `judge`), so re-running a judged run does not pay for grading twice.
//! - The fixture cannot judge (it extracts from a context; it has no judgement), so a fixture
//!   judge is a configuration error, not a made-up score.

use std::sync::Arc;

use serde_json::{Value, json};

use super::runner::{ModelReply, ModelRequest, Runner, RunnerError};
use super::workload::{AnswerKind, Task};
use crate::digest;
use crate::trial::{Outcome, TrialRecord};

/// The rubric and prompt of `qa-judge-v1`, with `{question}`, `{gold}` and `{answer}`.
pub const TEMPLATE: &str = include_str!("judge/qa-judge-v1.txt");

/// The judge's system prompt.
pub const SYSTEM: &str = "You are a strict grader. Follow the rubric and the reply format exactly.";

/// Output tokens the judge may use: one short line.
const MAX_OUTPUT_TOKENS: usize = 16;

/// SHA-256 of the system prompt and template, as the manifest records it.
pub fn prompt_sha256() -> String {
    digest::sha256_hex(format!("{SYSTEM}\u{1f}{TEMPLATE}"))
}

/// Why a judge cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum JudgeError {
    #[error(
        "the judge runner `{runner}` is a fixture, which cannot grade answers; qa-judge-v1 needs a model: pass --judge RUNNER naming an openai_compatible, anthropic or command runner"
    )]
    FixtureJudge { runner: String },
}

/// A judge's reply that is not one clear score.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the judge's reply is not exactly one line `SCORE: 0|0.5|1`: {reason}")]
pub struct ParseFailure {
    pub reason: String,
}

/// A runner that grades answers.
#[derive(Debug, Clone)]
pub struct Judge {
    pub runner: Arc<Runner>,
}

impl Judge {
    pub fn new(runner: Arc<Runner>) -> Result<Self, JudgeError> {
        if runner.spec.kind == super::runner::RunnerKind::Fixture {
            return Err(JudgeError::FixtureJudge {
                runner: runner.spec.name.clone(),
            });
        }
        Ok(Self { runner })
    }

    /// The grading request for `answer` to `task`.
    pub fn request(&self, task: &Task, answer: &str) -> ModelRequest {
        let gold = task
            .answers
            .iter()
            .map(|a| format!("\"{a}\""))
            .collect::<Vec<_>>()
            .join(" or ");
        let mut prompt = String::with_capacity(TEMPLATE.len() + answer.len() + gold.len() + 256);
        // One pass, so braces inside the answer or the question stay as they are.
        let mut rest = TEMPLATE;
        while let Some(open) = rest.find('{') {
            prompt.push_str(&rest[..open]);
            let after = &rest[open..];
            let (value, len) = if after.starts_with("{question}") {
                (task.question.as_str(), "{question}".len())
            } else if after.starts_with("{gold}") {
                (gold.as_str(), "{gold}".len())
            } else if after.starts_with("{answer}") {
                (answer.trim(), "{answer}".len())
            } else {
                ("{", 1)
            };
            prompt.push_str(value);
            rest = &after[len..];
        }
        prompt.push_str(rest);
        ModelRequest {
            model: self.runner.spec.model.clone(),
            system: SYSTEM.to_string(),
            prompt,
            context: String::new(),
            question: task.question.clone(),
            answer_kind: AnswerKind::Span,
            max_output_tokens: MAX_OUTPUT_TOKENS,
        }
    }
}

/// The judge's grading call of one trial.
#[derive(Debug, Clone)]
pub struct JudgeCall {
    pub result: Result<ModelReply, RunnerError>,
    pub latency_ms: f64,
}

/// A note for `notes.jsonl`: kind, detail, values.
pub type JudgeNote = (&'static str, String, Option<Value>);

/// Sets a successful record's `task_score` from its judge's call and adds the call's cost, or
/// turns the record into an error (`judge_failed`, `judge_unparseable`) when there is no clear
/// score; returns the notes. A record that is already an error (no answer) is left alone.
pub fn grade(record: &mut TrialRecord, call: Option<JudgeCall>, judge: &Judge) -> Vec<JudgeNote> {
    if record.outcome != Outcome::Success {
        return Vec::new();
    }
    let answer = record.response_text.clone().unwrap_or_default();
    // The answer is not scored, so the trial is an error; its text stays in the note.
    let fail = |record: &mut TrialRecord, error_type: &str| {
        record.outcome = Outcome::Error;
        record.error_type = Some(error_type.to_string());
        record.response_text = None;
        record.response_sha256 = None;
        record.task_score = 0.0;
        record.unsupported_claim_rate = 0.0;
    };
    let runner = &judge.runner;
    let Some(call) = call else {
        fail(record, "judge_failed");
        return vec![(
            "judge_failed",
            "the judge was not called for this answer".into(),
            Some(json!({ "answer": answer })),
        )];
    };
    let reply = match call.result {
        Ok(reply) => reply,
        Err(error) => {
            fail(record, "judge_failed");
            return vec![(
                "judge_failed",
                format!(
                    "the judge {} failed ({}): {error}; the answer was not scored",
                    runner.spec.name,
                    error.error_type()
                ),
                Some(json!({
                    "answer": answer,
                    "judge_error_type": error.error_type(),
                    "latency_ms": call.latency_ms,
                })),
            )];
        }
    };
    let cost_usd = runner.cost_usd(&reply);
    // Grading was paid for whether or not its reply can be read.
    record.billed_cost_usd += cost_usd;
    let parsed = parse(&reply.text);
    let mut values = json!({
        "judge_runner": runner.spec.name,
        "judge_model": runner.spec.model,
        "prompt_sha256": prompt_sha256(),
        "score": parsed.as_ref().ok(),
        "judge_reply": reply.text,
        "provider_request_id": reply.provider_request_id,
        "input_tokens": reply.input_tokens,
        "cached_input_tokens": reply.cached_input_tokens,
        "output_tokens": reply.output_tokens,
        "cost_usd": cost_usd,
        "latency_ms": call.latency_ms,
    });
    match parsed {
        Ok(score) => {
            record.task_score = score;
            vec![(
                "judge_call",
                format!(
                    "qa-judge-v1 by {} ({}): score {score}; its cost {cost_usd} USD is in billed_cost_usd, its {:.1} ms are not in latency_ms",
                    runner.spec.name, runner.spec.model, call.latency_ms
                ),
                Some(values),
            )]
        }
        Err(failure) => {
            fail(record, "judge_unparseable");
            values["answer"] = json!(answer);
            vec![(
                "judge_unparseable",
                format!("{failure}; the answer was not scored"),
                Some(values),
            )]
        }
    }
}

/// The score of a judge's reply: exactly one line `SCORE: v` (case-insensitive, surrounding
/// spaces and a trailing period allowed) with v one of 0, 0.5, 1 (0.0, 0.50, 1.0 accepted).
/// Other lines are allowed (a model may explain itself) but a second `SCORE:` line is not.
pub fn parse(reply: &str) -> Result<f64, ParseFailure> {
    let fail = |reason: String| ParseFailure { reason };
    let scored: Vec<&str> = reply
        .lines()
        .map(str::trim)
        .filter(|line| {
            line.get(..6)
                .is_some_and(|head| head.eq_ignore_ascii_case("score:"))
        })
        .collect();
    let line = match scored.as_slice() {
        [] => {
            let mut shown = reply.trim().to_string();
            shown.truncate(200);
            return Err(fail(format!("no SCORE line in {shown:?}")));
        }
        [one] => *one,
        many => return Err(fail(format!("{} SCORE lines", many.len()))),
    };
    let value = line[6..].trim().trim_end_matches('.').trim();
    match value {
        "0" | "0.0" => Ok(0.0),
        "0.5" | "0.50" | ".5" => Ok(0.5),
        "1" | "1.0" => Ok(1.0),
        other => Err(fail(format!("score {other:?} is not 0, 0.5 or 1"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::workload::TaskContext;

    fn task() -> Task {
        Task {
            id: "t1".into(),
            question: "Which {city} hosts the harbour?".into(),
            context: TaskContext::Documents(Vec::new()),
            answer_kind: AnswerKind::Span,
            answers: vec!["Lomvi".into(), "MS Lomvi".into()],
            evidence: vec!["x".into()],
            gold_files: Vec::new(),
        }
    }

    #[test]
    fn strict_parsing_gives_a_score_or_a_clear_failure() {
        assert_eq!(parse("SCORE: 1"), Ok(1.0));
        assert_eq!(parse("  score: 0.5  \n"), Ok(0.5));
        assert_eq!(parse("The answer names the ship.\nSCORE: 1."), Ok(1.0));
        assert_eq!(parse("SCORE: 0.0"), Ok(0.0));
        for bad in [
            "",
            "1",
            "The answer is right.",
            "SCORE: 0.7",
            "SCORE: yes",
            "SCORE: 1\nSCORE: 0",
            "SCORE:",
        ] {
            let error = parse(bad).expect_err(bad);
            assert!(error.to_string().contains("SCORE"), "{error}");
        }
    }

    #[test]
    fn the_request_fills_the_committed_template_once() {
        let runner = Arc::new(
            Runner::from_spec(
                {
                    let mut spec = crate::harness::runner::RunnerSpec::fixture();
                    spec.kind = crate::harness::runner::RunnerKind::Command;
                    spec.command = Some(vec!["true".into()]);
                    spec.cost.source = crate::trial::CostSource::SelfHostedNoApiFee;
                    spec.model = "judge-m".into();
                    spec
                },
                "sha".into(),
            )
            .expect("runner"),
        );
        let judge = Judge::new(runner).expect("a command runner may judge");
        let request = judge.request(&task(), " The {answer} is MS Ternen ");
        assert!(
            request
                .prompt
                .contains("Question: Which {city} hosts the harbour?")
        );
        assert!(
            request
                .prompt
                .contains("Gold answer(s): \"Lomvi\" or \"MS Lomvi\"")
        );
        assert!(
            request
                .prompt
                .contains("Answer to grade: The {answer} is MS Ternen\n")
        );
        assert_eq!(request.model, "judge-m");
        assert_eq!(request.system, SYSTEM);
        assert_eq!(prompt_sha256().len(), 64);
    }

    #[test]
    fn a_fixture_cannot_judge() {
        let error = Judge::new(Arc::new(Runner::fixture())).expect_err("fixture");
        assert!(error.to_string().contains("--judge"), "{error}");
    }
}
