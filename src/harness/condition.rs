//! Conditions: how a trial's context is shaped before it reaches the model.
//!
//! - `raw`: the full context, cut only where it exceeds the model's context window;
//! - `native_compaction`: what a client does without svc: transcripts drop their oldest turns
//!   until they fit the budget; documents keep a head and a tail within the budget;
//! - `svc`: the context engine selects under the budget and the selection is committed
//!   (`context_commit_id` = `ctx_…`);
//! - `combined`: native compaction at twice the budget (the client's own threshold), then svc.
//!
//! The selector is a seam ([`ContextSelector`]) so engine tests can script it; trials use the
//! context engine through [`default_selector`].

use std::sync::Arc;

use serde_json::json;

use super::workload::{Task, TaskContext, Turn, render_turns};
use crate::context::index::Index;
use crate::context::select::{self, SelectOptions};
use crate::context::weights::RankingWeights;
use crate::context::{ChunkInput, CommitStore};
use crate::digest;
use crate::tokens::Tokenizer;
pub use crate::trial::Condition;

/// What a selector returns: the exact text to send, its token count, and every chunk it
/// considered (sent or omitted) for the commit.
#[derive(Debug, Clone)]
pub struct SelectedContext {
    pub rendered: String,
    pub tokens: usize,
    pub chunks: Vec<ChunkInput>,
}

/// Selects context under a token budget. The context engine implements this.
pub trait ContextSelector: Send + Sync {
    /// `docs` are (name, text) pairs; the result must fit `budget` tokens.
    fn select(
        &self,
        docs: &[(String, String)],
        query: &str,
        budget: usize,
    ) -> Result<SelectedContext, String>;

    /// Selects for one task. Selectors that need more than the question (the gold-evidence
    /// oracle, a per-task random draw) override this; the default is [`Self::select`].
    fn select_for(
        &self,
        docs: &[(String, String)],
        task: &Task,
        budget: usize,
    ) -> Result<SelectedContext, String> {
        self.select(docs, &task.question, budget)
    }

    /// The selector setting's wire name, recorded in the run's manifest (`selector`).
    fn name(&self) -> &'static str {
        "svc"
    }

    /// Ranking weights other than the defaults, recorded in the manifest (`ranking_weights`).
    fn ranking_weights(&self) -> Option<RankingWeights> {
        None
    }
}

/// The selector trials use: the context engine's selector over an in-memory index of the
/// task's documents.
pub fn default_selector() -> Arc<dyn ContextSelector> {
    Arc::new(EngineSelector::default())
}

/// `svc::context::select` over `Index::from_documents`.
#[derive(Debug, Default)]
pub struct EngineSelector {
    pub options: SelectOptions,
}

impl ContextSelector for EngineSelector {
    fn select(
        &self,
        docs: &[(String, String)],
        query: &str,
        budget: usize,
    ) -> Result<SelectedContext, String> {
        let index = Index::from_documents(docs);
        let selection =
            select::select(&index, query, budget, &self.options).map_err(|e| e.to_string())?;
        Ok(SelectedContext {
            tokens: selection.tokens,
            chunks: selection.chunk_inputs(),
            rendered: selection.rendered,
        })
    }

    fn ranking_weights(&self) -> Option<RankingWeights> {
        (self.options.weights != RankingWeights::default()).then_some(self.options.weights)
    }
}

/// The shaped context of one trial.
#[derive(Debug, Clone, PartialEq)]
pub struct BuiltContext {
    /// The exact context text sent.
    pub text: String,
    /// Its tokens.
    pub tokens: usize,
    pub context_commit_id: Option<String>,
    /// `Some(full tokens)` when `raw` had to be cut at the model's context window.
    pub truncated_from: Option<usize>,
}

/// Why a condition could not build its context. `svc`/`combined` failures still carry the
/// commit of what was available, because their records must name one.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionFailure {
    /// Short kind for `error_type`: `selector_error`, `selector_over_budget`, `commit_error`.
    pub error_type: &'static str,
    pub message: String,
    pub context_commit_id: Option<String>,
}

/// A task's full context, rendered and counted once per run.
#[derive(Debug, Clone)]
pub struct PreparedContext {
    pub rendered: String,
    pub tokens: usize,
}

impl PreparedContext {
    pub fn new(task: &Task, tokenizer: &Tokenizer) -> Self {
        let rendered = task.context.render();
        let tokens = tokenizer.count(&rendered);
        Self { rendered, tokens }
    }
}

/// What conditions need besides the task.
pub struct ConditionEnv<'a> {
    pub tokenizer: &'a Tokenizer,
    pub selector: &'a dyn ContextSelector,
    pub commits: &'a CommitStore,
    /// Tokens of context the model can take (its window minus prompt and output reserve).
    pub context_window: usize,
}

/// Builds the context of `condition` for `task` at `budget` tokens.
pub fn build(
    condition: Condition,
    task: &Task,
    full: &PreparedContext,
    budget: usize,
    env: &ConditionEnv<'_>,
) -> Result<BuiltContext, ConditionFailure> {
    let built = match condition {
        Condition::Raw => raw(full, env),
        Condition::NativeCompaction => {
            let (text, tokens) = native_compaction(&task.context, full, budget, env.tokenizer);
            BuiltContext {
                text,
                tokens,
                context_commit_id: None,
                truncated_from: None,
            }
        }
        Condition::Svc | Condition::Combined => {
            let units = svc_units(condition, task, full, budget, env.tokenizer).unwrap_or_default();
            svc(task, units, condition, budget, env)?
        }
    };
    Ok(built)
}

/// The (name, text) units the `svc` and `combined` conditions select from at `budget` (the
/// task's own units; for `combined`, what native compaction at twice the budget kept). `None`
/// for the other conditions. The fixed-point loop prepares from the same units.
pub fn svc_units(
    condition: Condition,
    task: &Task,
    full: &PreparedContext,
    budget: usize,
    tokenizer: &Tokenizer,
) -> Option<Vec<(String, String)>> {
    match condition {
        Condition::Svc => Some(task.context.units()),
        Condition::Combined => Some(match &task.context {
            TaskContext::Transcript(turns) => {
                let kept = drop_oldest_turns(turns, budget.saturating_mul(2), tokenizer);
                TaskContext::Transcript(kept.to_vec()).units()
            }
            TaskContext::Documents(_) => {
                let (text, _) =
                    native_compaction(&task.context, full, budget.saturating_mul(2), tokenizer);
                split_rendered_documents(&text)
            }
        }),
        Condition::Raw | Condition::NativeCompaction => None,
    }
}

fn raw(full: &PreparedContext, env: &ConditionEnv<'_>) -> BuiltContext {
    if full.tokens <= env.context_window {
        return BuiltContext {
            text: full.rendered.clone(),
            tokens: full.tokens,
            context_commit_id: None,
            truncated_from: None,
        };
    }
    let (prefix, tokens) = env.tokenizer.truncate(&full.rendered, env.context_window);
    BuiltContext {
        text: prefix.to_string(),
        tokens,
        context_commit_id: None,
        truncated_from: Some(full.tokens),
    }
}

/// The marker a client leaves where it cut the middle of a document context.
pub const ELISION: &str = "\n[… earlier context omitted …]\n";

/// Deterministic native compaction to `budget` tokens.
pub fn native_compaction(
    context: &TaskContext,
    full: &PreparedContext,
    budget: usize,
    tokenizer: &Tokenizer,
) -> (String, usize) {
    if full.tokens <= budget {
        return (full.rendered.clone(), full.tokens);
    }
    match context {
        TaskContext::Transcript(turns) => {
            let text = render_turns(drop_oldest_turns(turns, budget, tokenizer));
            let tokens = tokenizer.count(&text);
            (text, tokens)
        }
        TaskContext::Documents(_) => head_and_tail(&full.rendered, budget, tokenizer),
    }
}

/// The most recent turns whose rendering fits `budget` tokens.
pub fn drop_oldest_turns<'a>(
    turns: &'a [Turn],
    budget: usize,
    tokenizer: &Tokenizer,
) -> &'a [Turn] {
    let mut used = 0usize;
    let mut start = turns.len();
    for (i, turn) in turns.iter().enumerate().rev() {
        let cost = tokenizer.count(&render_turns(std::slice::from_ref(turn)));
        if used + cost > budget {
            break;
        }
        used += cost;
        start = i;
    }
    // Per-turn counts can differ from the joined count by a token at a boundary; re-check.
    while start < turns.len() && tokenizer.count(&render_turns(&turns[start..])) > budget {
        start += 1;
    }
    &turns[start..]
}

/// The head (token-exact) and tail (whole sentences and lines) of `text` within `budget`.
pub fn head_and_tail(text: &str, budget: usize, tokenizer: &Tokenizer) -> (String, usize) {
    match head_tail_parts(text, budget, ELISION, tokenizer) {
        Some((head, tail, tokens)) => (format!("{head}{ELISION}{tail}"), tokens),
        None => {
            let (prefix, tokens) = tokenizer.truncate(text, budget);
            (prefix.to_string(), tokens)
        }
    }
}

/// The head and tail of `text` that fit `budget` tokens with `separator` between them, and the
/// tokens of `head + separator + tail`. The head is a prefix and the tail a suffix of `text`, so
/// what lies between them is what was left out. `None` when the budget cannot hold the
/// separator and a little text.
pub fn head_tail_parts<'a>(
    text: &'a str,
    budget: usize,
    separator: &str,
    tokenizer: &Tokenizer,
) -> Option<(&'a str, &'a str, usize)> {
    let marker_tokens = tokenizer.count(separator);
    if budget <= marker_tokens + 2 {
        return None;
    }
    let available = budget - marker_tokens;
    let (head, head_tokens) = head_within(text, available / 2, tokenizer);
    let rest = &text[head.len()..];
    let mut tail = tail_within(rest, available - head_tokens, tokenizer);
    // Tokens merge across the joins, so the pieces' own counts can undershoot: drop the tail's
    // first piece until the whole fits. (These are the suffixes a shrinking tail budget would
    // give, longest first, with one count each instead of one per budget token.)
    loop {
        let tokens = tokenizer.count(&format!("{head}{separator}{tail}"));
        if tokens <= budget || tail.is_empty() {
            return Some((head, tail, tokens));
        }
        tail = &tail[next_piece(tail)..];
        tail = tail.trim_start_matches(' ');
    }
}

/// Where the second piece of `text` starts (see [`tail_within`]), or its length if it has one
/// piece.
fn next_piece(text: &str) -> usize {
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let boundary = b == b'\n'
            || ((b == b'.' || b == b'?' || b == b'!') && bytes.get(i + 1) == Some(&b' '));
        if boundary && i + 1 < bytes.len() {
            return i + 1;
        }
    }
    text.len()
}

/// The longest prefix of `text` within `budget` tokens (token-exact). Only a generous byte
/// window of the text is encoded (8 bytes per token: English averages about 4.5), and when the window
/// holds fewer than `budget` tokens the whole text is used, so the result is the same as
/// truncating the whole text, at a fraction of the cost on long contexts.
fn head_within<'a>(text: &'a str, budget: usize, tokenizer: &Tokenizer) -> (&'a str, usize) {
    let mut window = budget.saturating_mul(8).max(64);
    if window < text.len() {
        while !text.is_char_boundary(window) {
            window += 1;
        }
        let (prefix, tokens) = tokenizer.truncate(&text[..window], budget);
        // A prefix shorter than the window by a good margin is not affected by the cut.
        if tokens == budget || prefix.len() + 64 < window {
            return (prefix, tokens);
        }
    }
    tokenizer.truncate(text, budget)
}

/// The longest suffix of `text`, starting at a line or sentence boundary, whose pieces add up
/// to at most `budget` tokens.
fn tail_within<'a>(text: &'a str, budget: usize, tokenizer: &Tokenizer) -> &'a str {
    let mut starts: Vec<usize> = vec![0];
    let bytes = text.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        let boundary = b == b'\n'
            || ((b == b'.' || b == b'?' || b == b'!') && bytes.get(i + 1) == Some(&b' '));
        if boundary && i + 1 < bytes.len() {
            starts.push(i + 1);
        }
    }
    starts.push(text.len());
    let mut used = 0usize;
    let mut cut = text.len();
    for window in starts.windows(2).rev() {
        let cost = tokenizer.count(&text[window[0]..window[1]]);
        if used + cost > budget {
            break;
        }
        used += cost;
        cut = window[0];
    }
    text[cut..].trim_start_matches(' ')
}

/// Splits a rendering of documents (`## name` sections) back into (name, text) units; text
/// before the first header (a cut document) is named `compacted-part`.
pub fn split_rendered_documents(text: &str) -> Vec<(String, String)> {
    let mut units: Vec<(String, String)> = Vec::new();
    let mut name = String::from("compacted-part");
    let mut body = String::new();
    let mut parts = 0usize;
    for line in text.split_inclusive('\n') {
        if let Some(header) = line.strip_prefix("## ") {
            if !body.trim().is_empty() {
                units.push((name.clone(), std::mem::take(&mut body)));
            }
            body.clear();
            name = header.trim_end().to_string();
            continue;
        }
        if line.starts_with("[… earlier context omitted …]") {
            if !body.trim().is_empty() {
                units.push((name.clone(), std::mem::take(&mut body)));
            }
            body.clear();
            parts += 1;
            name = format!("compacted-part-{parts}");
            continue;
        }
        body.push_str(line);
    }
    if !body.trim().is_empty() {
        units.push((name, body));
    }
    // Names must be unique chunk ids: a document cut in the middle appears twice.
    let mut seen = std::collections::HashSet::new();
    for (i, unit) in units.iter_mut().enumerate() {
        if !seen.insert(unit.0.clone()) {
            unit.0 = format!("{}#{i}", unit.0);
            seen.insert(unit.0.clone());
        }
    }
    units
}

fn svc(
    task: &Task,
    units: Vec<(String, String)>,
    condition: Condition,
    budget: usize,
    env: &ConditionEnv<'_>,
) -> Result<BuiltContext, ConditionFailure> {
    let parameters = |error: Option<&str>| {
        let mut parameters = json!({
            "condition": condition.as_str(),
            "task_id": task.id,
            "query": task.question,
            "budget": budget,
            "error": error,
        });
        // Named only for the baselines, so the engine's commits keep their ids.
        let selector = env.selector.name();
        if selector != "svc" {
            parameters["selector"] = json!(selector);
        }
        parameters
    };
    let omitted = |units: &[(String, String)]| -> Vec<ChunkInput> {
        units
            .iter()
            .map(|(name, text)| ChunkInput {
                chunk_id: name.clone(),
                source: name.clone(),
                full_text: text.clone(),
                resolution: None,
                sent_tokens: 0,
                full_tokens: None,
            })
            .collect()
    };
    let fail = |error_type: &'static str, message: String| {
        // The record of a failed svc trial must still name a commit: commit what was
        // available, with nothing sent, so the failure is as recoverable as a success.
        let commit = env.commits.commit(
            &omitted(&units),
            parameters(Some(&message)),
            "",
            env.tokenizer,
        );
        ConditionFailure {
            error_type,
            message,
            context_commit_id: commit.ok().map(|receipt| receipt.ctx_id),
        }
    };
    let selected = match env.selector.select_for(&units, task, budget) {
        Ok(selected) => selected,
        Err(message) => return Err(fail("selector_error", message)),
    };
    let tokens = env.tokenizer.count(&selected.rendered);
    if tokens > budget {
        return Err(fail(
            "selector_over_budget",
            format!("the selector sent {tokens} tokens for a budget of {budget}"),
        ));
    }
    let receipt = env
        .commits
        .commit(
            &selected.chunks,
            parameters(None),
            &selected.rendered,
            env.tokenizer,
        )
        .map_err(|error| fail("commit_error", error.to_string()))?;
    debug_assert_eq!(
        receipt.context_sha256,
        digest::sha256_hex(&selected.rendered)
    );
    Ok(BuiltContext {
        text: selected.rendered,
        tokens,
        context_commit_id: Some(receipt.ctx_id),
        truncated_from: None,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::context::Resolution;
    use crate::harness::workload::{AnswerKind, Document};

    /// `head_tail_parts` as it was before it dropped whole pieces: shrink the tail budget one
    /// token per re-count. The faster loop must give exactly the same cut.
    fn head_tail_parts_by_single_tokens<'a>(
        text: &'a str,
        budget: usize,
        separator: &str,
        tokenizer: &Tokenizer,
    ) -> Option<(&'a str, &'a str, usize)> {
        let marker_tokens = tokenizer.count(separator);
        if budget <= marker_tokens + 2 {
            return None;
        }
        let available = budget - marker_tokens;
        let (head, head_tokens) = head_within(text, available / 2, tokenizer);
        let rest = &text[head.len()..];
        let mut tail_budget = available - head_tokens;
        loop {
            let tail = tail_within(rest, tail_budget, tokenizer);
            let tokens = tokenizer.count(&format!("{head}{separator}{tail}"));
            if tokens <= budget || tail_budget == 0 {
                return Some((head, tail, tokens));
            }
            tail_budget -= 1;
        }
    }

    #[test]
    fn head_and_tail_cuts_match_the_token_by_token_search() {
        let tokenizer = Tokenizer::default();
        let mut text = String::new();
        for i in 0..120 {
            // Pieces that merge across joins (no space after the full stop, digits, CJK).
            text.push_str(&format!(
                "Line {i} says 0x{i:04x}.Then {}! Über 東京 {i}? ok.\n",
                "word ".repeat(i % 7)
            ));
        }
        for budget in (4..400).step_by(7) {
            for separator in ["\n[… earlier context omitted …]\n", "…"] {
                assert_eq!(
                    head_tail_parts(&text, budget, separator, &tokenizer),
                    head_tail_parts_by_single_tokens(&text, budget, separator, &tokenizer),
                    "budget {budget}"
                );
            }
        }
    }

    /// A test double for the context engine: keeps whole units, best word overlap with the
    /// query first, while they fit. Test code only; the product's selector is the context engine.
    pub(crate) struct OverlapSelector;

    impl ContextSelector for OverlapSelector {
        fn select(
            &self,
            docs: &[(String, String)],
            query: &str,
            budget: usize,
        ) -> Result<SelectedContext, String> {
            let tokenizer = Tokenizer::default();
            let query_words: std::collections::HashSet<String> =
                crate::harness::text::content_words(query)
                    .into_iter()
                    .collect();
            let mut order: Vec<usize> = (0..docs.len()).collect();
            let score = |i: usize| {
                crate::harness::text::content_words(&docs[i].1)
                    .iter()
                    .filter(|w| query_words.contains(*w))
                    .count()
            };
            order.sort_by_key(|&i| std::cmp::Reverse(score(i)));
            let mut keep = vec![false; docs.len()];
            let mut used = 0;
            for i in order {
                let cost = tokenizer.count(&format!("## {}\n{}\n", docs[i].0, docs[i].1)) + 1;
                if used + cost <= budget {
                    keep[i] = true;
                    used += cost;
                }
            }
            let kept: Vec<Document> = docs
                .iter()
                .zip(&keep)
                .filter(|(_, k)| **k)
                .map(|((n, t), _)| Document {
                    name: n.clone(),
                    text: t.clone(),
                })
                .collect();
            let rendered = crate::harness::workload::render_documents(&kept);
            let chunks = docs
                .iter()
                .zip(&keep)
                .map(|((n, t), k)| ChunkInput {
                    chunk_id: n.clone(),
                    source: n.clone(),
                    full_text: t.clone(),
                    resolution: k.then_some(Resolution::Full),
                    sent_tokens: if *k { tokenizer.count(t) } else { 0 },
                    full_tokens: None,
                })
                .collect();
            let tokens = tokenizer.count(&rendered);
            Ok(SelectedContext {
                rendered,
                tokens,
                chunks,
            })
        }
    }

    fn task() -> Task {
        let docs = (0..20)
            .map(|i| Document {
                name: format!("doc-{i:02}"),
                text: format!("Document {i} describes the harbour of town {i}. The ferry leaves at {i} o'clock and the market opens on Tuesday."),
            })
            .chain(std::iter::once(Document {
                name: "doc-key".into(),
                text: "The lighthouse keeper of Varnholm is Ingrid Sollie.".into(),
            }))
            .collect();
        Task {
            id: "t1".into(),
            question: "Who is the lighthouse keeper of Varnholm?".into(),
            context: TaskContext::Documents(docs),
            answer_kind: AnswerKind::Span,
            answers: vec!["Ingrid Sollie".into()],
            evidence: vec!["The lighthouse keeper of Varnholm is Ingrid Sollie.".into()],
            gold_files: Vec::new(),
        }
    }

    fn env<'a>(
        tokenizer: &'a Tokenizer,
        selector: &'a dyn ContextSelector,
        commits: &'a CommitStore,
    ) -> ConditionEnv<'a> {
        ConditionEnv {
            tokenizer,
            selector,
            commits,
            context_window: 100_000,
        }
    }

    #[test]
    fn raw_is_full_and_cut_only_at_the_window() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (tokenizer, commits) = (Tokenizer::default(), CommitStore::new(dir.path()));
        let task = task();
        let full = PreparedContext::new(&task, &tokenizer);
        let mut env = env(&tokenizer, &OverlapSelector, &commits);
        let built = build(Condition::Raw, &task, &full, 10, &env).expect("raw");
        assert_eq!(built.text, full.rendered, "raw ignores the budget");
        env.context_window = 50;
        let cut = build(Condition::Raw, &task, &full, 10, &env).expect("raw");
        assert_eq!(cut.truncated_from, Some(full.tokens));
        assert!(cut.tokens <= 50);
    }

    #[test]
    fn native_compaction_keeps_head_and_tail_within_budget() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (tokenizer, commits) = (Tokenizer::default(), CommitStore::new(dir.path()));
        let task = task();
        let full = PreparedContext::new(&task, &tokenizer);
        let env = env(&tokenizer, &OverlapSelector, &commits);
        for budget in [40, 100, 200] {
            let built =
                build(Condition::NativeCompaction, &task, &full, budget, &env).expect("native");
            assert!(built.tokens <= budget, "{budget}: {}", built.tokens);
            assert_eq!(built.tokens, tokenizer.count(&built.text));
            assert!(built.text.starts_with("## doc-00"));
            assert!(built.text.contains(ELISION));
        }
        // The key fact sits at the end: the tail keeps it.
        let built = build(Condition::NativeCompaction, &task, &full, 100, &env).expect("native");
        assert!(built.text.ends_with("Ingrid Sollie.\n"), "{}", built.text);
    }

    #[test]
    fn head_window_matches_truncating_the_whole_text() {
        let tokenizer = Tokenizer::default();
        let text = task().context.render().repeat(3);
        for budget in [1, 7, 50, 255, 2000, 100_000] {
            assert_eq!(
                head_within(&text, budget, &tokenizer),
                tokenizer.truncate(&text, budget),
                "{budget}"
            );
        }
    }

    #[test]
    fn transcripts_drop_oldest_turns() {
        let tokenizer = Tokenizer::default();
        let turns: Vec<Turn> = (0..30)
            .map(|i| Turn {
                role: if i % 2 == 0 { "user" } else { "assistant" }.into(),
                text: format!("message number {i} about nothing much"),
            })
            .collect();
        let kept = drop_oldest_turns(&turns, 50, &tokenizer);
        assert!(!kept.is_empty() && kept.len() < 30);
        assert_eq!(kept.last(), turns.last());
        assert!(tokenizer.count(&render_turns(kept)) <= 50);
    }

    /// A selector that always fails, like an engine error would.
    pub(crate) struct UnavailableSelector {
        pub(crate) reason: String,
    }

    impl ContextSelector for UnavailableSelector {
        fn select(
            &self,
            _: &[(String, String)],
            _: &str,
            _: usize,
        ) -> Result<SelectedContext, String> {
            Err(self.reason.clone())
        }
    }

    #[test]
    fn svc_commits_the_selection_and_failures_still_commit() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (tokenizer, commits) = (Tokenizer::default(), CommitStore::new(dir.path()));
        let task = task();
        let full = PreparedContext::new(&task, &tokenizer);
        let env = env(&tokenizer, &OverlapSelector, &commits);
        let built = build(Condition::Svc, &task, &full, 60, &env).expect("svc");
        let id = built.context_commit_id.clone().expect("commit");
        assert!(id.starts_with("ctx_") && built.tokens <= 60);
        assert!(built.text.contains("Ingrid Sollie"));
        let receipt = commits.receipt(&id).expect("receipt");
        assert_eq!(receipt.context_sha256, digest::sha256_hex(&built.text));
        let combined = build(Condition::Combined, &task, &full, 60, &env).expect("combined");
        assert!(combined.context_commit_id.is_some());

        let unavailable = UnavailableSelector {
            reason: "the svc condition needs the context engine".into(),
        };
        let env = ConditionEnv {
            selector: &unavailable,
            ..env
        };
        let failure = build(Condition::Svc, &task, &full, 60, &env).expect_err("no engine");
        assert_eq!(failure.error_type, "selector_error");
        assert_eq!(
            failure.message,
            "the svc condition needs the context engine"
        );
        let id = failure
            .context_commit_id
            .expect("commit of what was available");
        assert_eq!(
            commits.receipt(&id).expect("receipt").recoverable().count(),
            21
        );
    }

    #[test]
    fn rendered_documents_split_back_into_units() {
        let units = split_rendered_documents(&format!(
            "tail of a cut doc\n## a\nalpha\n{ELISION}more\n## b\nbeta\n"
        ));
        let names: Vec<&str> = units.iter().map(|u| u.0.as_str()).collect();
        assert_eq!(names, ["compacted-part", "a", "compacted-part-1", "b"]);
    }
}
