//! The `model-summary` variant of the `native_compaction` condition: what a client with an
//! auto-compact feature does. The oldest turns of a transcript, or the middle a head-and-tail cut
//! of documents leaves out, go to the runner's own model with a summarisation prompt, and the
//! summary replaces them.
//!
//! Shaping is split in two around the model call so the trial runner can make the call on its
//! own executor (rayon for the fixture, tokio for I/O): [`plan`] decides what is kept and what is
//! summarised, [`SummaryPlan::request`] is the summarisation request, and
//! [`SummaryPlan::splice`] puts the summary in place, cut with the tokenizer when it would not
//! fit the budget.
//!
//! Budget split: a quarter of the budget ([`SUMMARY_SHARE`]) is kept for the summary; the rest
//! holds the most recent turns (transcripts) or the head and tail (documents). Whatever the kept
//! part leaves unused also goes to the summary.

use serde::{Deserialize, Serialize};

use super::condition::{self, PreparedContext, drop_oldest_turns};
use super::runner::{ModelRequest, Runner};
use super::workload::{AnswerKind, TaskContext, Turn, render_turns};
use crate::tokens::Tokenizer;

/// How the `native_compaction` condition compacts; chosen per run and kept in the manifest.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum CompactionMode {
    /// Drop the oldest turns; keep the head and tail of documents. No model call.
    #[default]
    Deterministic,
    /// Summarise what would be dropped with the runner's model; the summary replaces it.
    ModelSummary,
}

impl CompactionMode {
    pub fn as_str(self) -> &'static str {
        match self {
            CompactionMode::Deterministic => "deterministic",
            CompactionMode::ModelSummary => "model-summary",
        }
    }
}

impl std::fmt::Display for CompactionMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The budget share kept for the summary: `budget / SUMMARY_SHARE`.
pub const SUMMARY_SHARE: usize = 4;

/// The system prompt of the summarisation call.
pub const SUMMARY_SYSTEM: &str = "You compact context for an assistant whose context window is full. \
Your summary replaces the text you are given, so anything you leave out is lost.";

/// The summarisation instruction. It is generic on purpose: a client compacts without knowing
/// which question comes next. It is also the request's `question`, which is all the fixture
/// model reads besides the text.
pub const SUMMARY_INSTRUCTION: &str = "Summarise the text below so that the summary can replace it. \
Keep every name, number, identifier, date, place, decision and fact the participants stated; \
drop small talk. Write plain sentences without a preamble.";

/// The summarisation prompt; `{instruction}` and `{text}` are filled once.
pub const SUMMARY_TEMPLATE: &str = "{instruction}\n\nText:\n{text}\n\nSummary:";

/// The role of the turn that carries a transcript's summary.
pub const SUMMARY_ROLE: &str = "system";
/// What opens that turn.
pub const TRANSCRIPT_SUMMARY_LEAD: &str = "Summary of the earlier conversation: ";
/// What replaces the middle of documents: open marker, summary, close marker.
pub const DOCUMENT_SUMMARY_OPEN: &str = "\n[summary of omitted context]\n";
pub const DOCUMENT_SUMMARY_CLOSE: &str = "\n[end of summary]\n";

/// What [`plan`] decided.
#[derive(Debug, Clone, PartialEq)]
pub enum Planned {
    /// No summary call: the context fits the budget, nothing would be dropped, or the budget has
    /// no room for a summary (then the deterministic compaction, with a note saying so).
    Ready {
        text: String,
        tokens: usize,
        note: Option<String>,
    },
    /// The model is asked to summarise.
    Summarise(SummaryPlan),
}

/// Where the summary goes.
#[derive(Debug, Clone, PartialEq)]
enum Layout {
    /// Before the most recent turns (rendered).
    Transcript { kept: String, kept_turns: usize },
    /// Between the head and the tail of the rendered documents.
    Documents { head: String, tail: String },
}

/// A model-summary compaction waiting for its summary.
#[derive(Debug, Clone, PartialEq)]
pub struct SummaryPlan {
    layout: Layout,
    budget: usize,
    /// Tokens the summary text may take, measured with an empty summary in place.
    room: usize,
    /// The text the model summarises (cut to the model's window when it was longer).
    pub source: String,
    /// Tokens of everything that was summarised (before any cut to the window).
    pub source_tokens: usize,
    /// `Some(tokens)` when the text to summarise was cut to fit the model's window.
    pub source_truncated_from: Option<usize>,
    /// Turns summarised (transcripts) or 0 (documents).
    pub summarised_turns: usize,
}

/// The context after the summary was put in place.
#[derive(Debug, Clone, PartialEq)]
pub struct Spliced {
    pub text: String,
    pub tokens: usize,
    /// Tokens of the summary the model wrote (trimmed).
    pub summary_tokens: usize,
    /// Tokens of the summary kept in the context (less when it was cut to fit).
    pub kept_summary_tokens: usize,
}

/// Plans a model-summary compaction of `context` to `budget` tokens. `input_window` is how many
/// tokens of text the summarisation request may carry (the runner's context window).
pub fn plan(
    context: &TaskContext,
    full: &PreparedContext,
    budget: usize,
    input_window: usize,
    tokenizer: &Tokenizer,
) -> Planned {
    let deterministic = |note: Option<String>| {
        let (text, tokens) = condition::native_compaction(context, full, budget, tokenizer);
        Planned::Ready { text, tokens, note }
    };
    if full.tokens <= budget {
        return deterministic(None);
    }
    let kept_budget = budget - budget / SUMMARY_SHARE;
    let (layout, source, summarised_turns) = match context {
        TaskContext::Transcript(turns) => {
            let kept = drop_oldest_turns(turns, kept_budget, tokenizer);
            let older = &turns[..turns.len() - kept.len()];
            if older.is_empty() {
                return deterministic(None);
            }
            (
                Layout::Transcript {
                    kept: render_turns(kept),
                    kept_turns: kept.len(),
                },
                render_turns(older),
                older.len(),
            )
        }
        TaskContext::Documents(_) => {
            let separator = format!("{DOCUMENT_SUMMARY_OPEN}{DOCUMENT_SUMMARY_CLOSE}");
            let Some((head, tail, _)) =
                condition::head_tail_parts(&full.rendered, kept_budget, &separator, tokenizer)
            else {
                return deterministic(Some(no_room(budget)));
            };
            let middle = &full.rendered[head.len()..full.rendered.len() - tail.len()];
            if middle.trim().is_empty() {
                return deterministic(None);
            }
            (
                Layout::Documents {
                    head: head.to_string(),
                    tail: tail.to_string(),
                },
                middle.to_string(),
                0,
            )
        }
    };
    let empty = assemble(&layout, "");
    let used = tokenizer.count(&empty);
    // A summary shorter than a few tokens says nothing; compact deterministically instead.
    if used + 4 > budget {
        return deterministic(Some(no_room(budget)));
    }
    let source_tokens = tokenizer.count(&source);
    let window = input_window.saturating_sub(tokenizer.count(SUMMARY_INSTRUCTION) + 64);
    let (source, source_truncated_from) = if source_tokens > window {
        (
            tokenizer.truncate(&source, window).0.to_string(),
            Some(source_tokens),
        )
    } else {
        (source, None)
    };
    Planned::Summarise(SummaryPlan {
        layout,
        budget,
        room: budget - used,
        source,
        source_tokens,
        source_truncated_from,
        summarised_turns,
    })
}

fn no_room(budget: usize) -> String {
    format!("a budget of {budget} tokens leaves no room for a summary; compacted deterministically")
}

fn assemble(layout: &Layout, summary: &str) -> String {
    match layout {
        Layout::Transcript { kept, .. } => {
            let turn = Turn {
                role: SUMMARY_ROLE.into(),
                text: format!("{TRANSCRIPT_SUMMARY_LEAD}{summary}"),
            };
            format!("{}{kept}", render_turns(std::slice::from_ref(&turn)))
        }
        Layout::Documents { head, tail } => {
            format!("{head}{DOCUMENT_SUMMARY_OPEN}{summary}{DOCUMENT_SUMMARY_CLOSE}{tail}")
        }
    }
}

impl SummaryPlan {
    /// Tokens the summary may take in the final context.
    pub fn room(&self) -> usize {
        self.room
    }

    /// What was summarised, for notes: `12 oldest turns` or `the middle of the documents`.
    pub fn what(&self) -> String {
        match &self.layout {
            Layout::Transcript { kept_turns, .. } => format!(
                "the {} oldest turns ({} tokens; {kept_turns} recent turns kept)",
                self.summarised_turns, self.source_tokens
            ),
            Layout::Documents { .. } => format!(
                "the middle of the documents ({} tokens; head and tail kept)",
                self.source_tokens
            ),
        }
    }

    /// The summarisation request for `runner`'s model. It asks for at most the room the summary
    /// has; a longer summary is cut by [`SummaryPlan::splice`].
    pub fn request(&self, runner: &Runner) -> ModelRequest {
        // The text goes in last, so placeholders inside it stay as they are.
        let prompt = SUMMARY_TEMPLATE
            .replacen("{instruction}", SUMMARY_INSTRUCTION, 1)
            .replacen("{text}", &self.source, 1);
        ModelRequest {
            model: runner.spec.model.clone(),
            system: SUMMARY_SYSTEM.to_string(),
            prompt,
            context: self.source.clone(),
            question: SUMMARY_INSTRUCTION.to_string(),
            answer_kind: AnswerKind::Span,
            max_output_tokens: self.room,
        }
    }

    /// The final context with `summary` in place, within the budget. A summary longer than the
    /// room is cut at a token boundary (the caller notes it when `kept_summary_tokens` is less
    /// than `summary_tokens`); an empty summary leaves its marker with nothing in it.
    pub fn splice(&self, summary: &str, tokenizer: &Tokenizer) -> Spliced {
        let summary = summary.trim();
        let summary_tokens = tokenizer.count(summary);
        let mut allowed = self.room.min(summary_tokens);
        loop {
            let (kept, kept_tokens) = tokenizer.truncate(summary, allowed);
            let text = assemble(&self.layout, kept.trim_end());
            let tokens = tokenizer.count(&text);
            // Tokens can merge across the seams; shrink until the whole fits.
            if tokens <= self.budget || allowed == 0 {
                return Spliced {
                    text,
                    tokens,
                    summary_tokens,
                    kept_summary_tokens: kept_tokens,
                };
            }
            allowed = allowed.saturating_sub((tokens - self.budget).max(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::runner::fixture;
    use crate::harness::workload::Document;

    fn transcript() -> TaskContext {
        let mut turns = vec![
            Turn {
                role: "user".into(),
                text: "Please keep this number in mind: the vault code is 4817.".into(),
            },
            Turn {
                role: "assistant".into(),
                text: "Noted, I will keep it.".into(),
            },
        ];
        for i in 0..30 {
            turns.push(Turn {
                role: if i % 2 == 0 { "user" } else { "assistant" }.into(),
                text: format!("Filler message {i} about the garden, the weather and the bus."),
            });
        }
        TaskContext::Transcript(turns)
    }

    #[test]
    fn the_summary_replaces_the_oldest_turns_within_the_budget() {
        let tokenizer = Tokenizer::default();
        let context = transcript();
        let full = PreparedContext {
            rendered: context.render(),
            tokens: tokenizer.count(&context.render()),
        };
        let Planned::Summarise(plan) = plan(&context, &full, 120, 100_000, &tokenizer) else {
            panic!("the transcript does not fit 120 tokens");
        };
        assert!(plan.source.starts_with("user: Please keep this number"));
        assert!(plan.summarised_turns >= 2 && plan.source_truncated_from.is_none());
        let runner = Runner::fixture();
        let request = plan.request(&runner);
        assert_eq!(request.max_output_tokens, plan.room());
        assert!(request.prompt.contains(&plan.source));
        // The fixture's "summary" is what it extracts for the summarisation instruction.
        let summary = fixture::call(&request, fixture::FixtureReader::Overlap).text;
        assert_eq!(summary, "4817");
        let spliced = plan.splice(&summary, &tokenizer);
        assert!(spliced.tokens <= 120, "{}", spliced.tokens);
        assert_eq!(spliced.tokens, tokenizer.count(&spliced.text));
        assert!(
            spliced
                .text
                .starts_with("system: Summary of the earlier conversation: 4817\n"),
            "{}",
            spliced.text
        );
        assert!(
            !spliced.text.contains("vault code"),
            "the oldest turns are gone"
        );
        let TaskContext::Transcript(turns) = &context else {
            panic!("a transcript");
        };
        assert!(
            spliced
                .text
                .ends_with(&render_turns(&turns[turns.len() - 1..]))
        );
        assert_eq!(spliced.kept_summary_tokens, spliced.summary_tokens);
    }

    #[test]
    fn a_long_summary_is_cut_to_the_budget() {
        let tokenizer = Tokenizer::default();
        let context = transcript();
        let full = PreparedContext {
            rendered: context.render(),
            tokens: tokenizer.count(&context.render()),
        };
        let Planned::Summarise(plan) = plan(&context, &full, 100, 100_000, &tokenizer) else {
            panic!("summarise");
        };
        let long = "The vault code is 4817 and the garden is green. ".repeat(40);
        let spliced = plan.splice(&long, &tokenizer);
        assert!(spliced.tokens <= 100, "{}", spliced.tokens);
        assert!(spliced.kept_summary_tokens < spliced.summary_tokens);
        assert!(spliced.kept_summary_tokens > 0);
        assert!(spliced.text.contains("The vault code is 4817"));
    }

    #[test]
    fn documents_summarise_the_middle_between_head_and_tail() {
        let tokenizer = Tokenizer::default();
        let docs: Vec<Document> = (0..20)
            .map(|i| Document {
                name: format!("doc-{i:02}"),
                text: format!(
                    "Document {i} is about harbour {i}; the ferry leaves at {i} o'clock."
                ),
            })
            .collect();
        let context = TaskContext::Documents(docs);
        let rendered = context.render();
        let full = PreparedContext {
            tokens: tokenizer.count(&rendered),
            rendered: rendered.clone(),
        };
        let Planned::Summarise(plan) = plan(&context, &full, 150, 100_000, &tokenizer) else {
            panic!("summarise");
        };
        assert!(rendered.contains(&plan.source) && plan.source.contains("doc-10"));
        let spliced = plan.splice("Harbours 4 to 15 have ferries.", &tokenizer);
        assert!(spliced.tokens <= 150);
        assert!(spliced.text.starts_with("## doc-00"));
        assert!(spliced.text.contains(
            "\n[summary of omitted context]\nHarbours 4 to 15 have ferries.\n[end of summary]\n"
        ));
        assert!(spliced.text.ends_with("19 o'clock.\n"));
        // The source is cut to a small model window, and a tiny budget has no room.
        let Planned::Summarise(cut) = self::plan(&context, &full, 150, 100, &tokenizer) else {
            panic!("summarise");
        };
        assert_eq!(cut.source_truncated_from, Some(plan.source_tokens));
        assert!(matches!(
            self::plan(&context, &full, 12, 100_000, &tokenizer),
            Planned::Ready { note: Some(_), .. }
        ));
        // A context that fits is sent whole, without a summary call.
        assert!(matches!(
            self::plan(&context, &full, full.tokens, 100_000, &tokenizer),
            Planned::Ready { note: None, .. }
        ));
    }
}
