//! Scorers: turn a response into numbers. Task scorers are looked up by versioned name (a
//! scorer's behaviour never changes under the same name); every trial also gets
//! `evidence_recall` (how much gold evidence survived into the context sent) and
//! `unsupported_claim_rate` (from a [`ClaimChecker`]).
//!
//! The claim checker is a seam so engine tests can script it; trials use the witness
//! (`svc::witness::verify`) through [`default_claim_checker`].

use std::collections::HashSet;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::text;
use super::workload::Task;
use crate::witness::profile::Profile;
use crate::witness::verify;

/// `k` of `file-recall-at-k-v1`: how many listed files count.
pub const FILE_RECALL_K: usize = 5;

/// The closed set of task scorers, by their versioned wire names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
pub enum ScorerName {
    /// 1 when the normalised response equals a normalised gold answer, or the response contains
    /// the gold answer as whole words (extractive answers often carry a few extra words).
    #[serde(rename = "qa-exact-v1")]
    #[value(name = "qa-exact-v1")]
    QaExactV1,
    /// SQuAD token F1 against the best gold answer.
    #[serde(rename = "qa-f1-v1")]
    #[value(name = "qa-f1-v1")]
    QaF1V1,
    /// 1 when the normalised response contains the planted answer.
    #[serde(rename = "needle-hit-v1")]
    #[value(name = "needle-hit-v1")]
    NeedleHitV1,
    /// Fraction of gold files among the first `FILE_RECALL_K` paths of the response.
    #[serde(rename = "file-recall-at-k-v1")]
    #[value(name = "file-recall-at-k-v1")]
    FileRecallAtKV1,
    /// Model-graded: a judge runner scores the answer against the gold answers with a fixed
    /// rubric, 0, 0.5 or 1 (see [`crate::harness::judge`]).
    #[serde(rename = "qa-judge-v1")]
    #[value(name = "qa-judge-v1")]
    QaJudgeV1,
}

impl ScorerName {
    pub const ALL: [ScorerName; 5] = [
        ScorerName::QaExactV1,
        ScorerName::QaF1V1,
        ScorerName::NeedleHitV1,
        ScorerName::FileRecallAtKV1,
        ScorerName::QaJudgeV1,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ScorerName::QaExactV1 => "qa-exact-v1",
            ScorerName::QaF1V1 => "qa-f1-v1",
            ScorerName::NeedleHitV1 => "needle-hit-v1",
            ScorerName::FileRecallAtKV1 => "file-recall-at-k-v1",
            ScorerName::QaJudgeV1 => "qa-judge-v1",
        }
    }

    /// Whether a model grades the answer (the run needs a judge runner).
    pub fn is_model_graded(self) -> bool {
        self == ScorerName::QaJudgeV1
    }

    /// What kind of answer the scorer reads, which decides how unsupported claims are counted.
    pub fn answer_type(self) -> AnswerType {
        match self {
            ScorerName::FileRecallAtKV1 => AnswerType::PathList,
            _ => AnswerType::Text,
        }
    }

    /// A scorer reported beside this one in notes.jsonl (`secondary_score`): exact match beside
    /// token F1, since F1 gives partial credit to a wrong answer sharing a word with the gold,
    /// and beside the model judge, so its grades can be checked against a rule.
    pub fn secondary(self) -> Option<ScorerName> {
        match self {
            ScorerName::QaF1V1 | ScorerName::QaJudgeV1 => Some(ScorerName::QaExactV1),
            _ => None,
        }
    }

    /// The task score in `0..=1`, or `None` for a model-graded scorer, whose score comes from
    /// its judge's call (see [`crate::harness::judge`]).
    pub fn score(self, response: &str, task: &Task) -> Option<f64> {
        Some(match self {
            ScorerName::QaExactV1 => best(&task.answers, |gold| qa_exact(response, gold)),
            ScorerName::QaF1V1 => best(&task.answers, |gold| qa_f1(response, gold)),
            ScorerName::NeedleHitV1 => best(&task.answers, |gold| needle_hit(response, gold)),
            ScorerName::FileRecallAtKV1 => {
                file_recall_at_k(response, &task.gold_files, FILE_RECALL_K)
            }
            ScorerName::QaJudgeV1 => return None,
        })
    }
}

/// The answer type a scorer declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerType {
    /// Prose: its claims are checked by the witness against the gold evidence.
    Text,
    /// A list of repository paths, one per line.
    PathList,
}

/// What a task scorer's values are, declared per scorer (not inferred from observed values):
/// reports choose the paired test by it (McNemar only for binary scores).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScoreType {
    /// Every score is 0 or 1.
    Binary,
    /// Scores anywhere in `0..=1`.
    Continuous,
}

impl ScorerName {
    /// The declared type of this scorer's `task_score`.
    pub fn score_type(self) -> ScoreType {
        match self {
            ScorerName::QaExactV1 | ScorerName::NeedleHitV1 => ScoreType::Binary,
            // The judge's 0.5 makes its scores three-valued, not binary.
            ScorerName::QaF1V1 | ScorerName::FileRecallAtKV1 | ScorerName::QaJudgeV1 => {
                ScoreType::Continuous
            }
        }
    }
}

/// The declared score type of a scorer by its record name; `None` for a name this build does
/// not know (records from another version), which reports treat as continuous.
pub fn declared_score_type(scorer: &str) -> Option<ScoreType> {
    ScorerName::ALL
        .into_iter()
        .find(|s| s.as_str() == scorer)
        .map(ScorerName::score_type)
}

impl std::fmt::Display for ScorerName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

fn best(answers: &[String], score: impl Fn(&str) -> f64) -> f64 {
    answers.iter().map(|a| score(a)).fold(0.0, f64::max)
}

fn contains_words(haystack: &str, needle: &str) -> bool {
    if needle.is_empty() {
        return false;
    }
    format!(" {haystack} ").contains(&format!(" {needle} "))
}

fn qa_exact(response: &str, gold: &str) -> f64 {
    let (response, gold) = (
        text::normalize_answer(response),
        text::normalize_answer(gold),
    );
    f64::from(u8::from(
        response == gold || contains_words(&response, &gold),
    ))
}

fn qa_f1(response: &str, gold: &str) -> f64 {
    let response = text::normalize_answer(response);
    let gold = text::normalize_answer(gold);
    let predicted: Vec<&str> = response.split(' ').filter(|w| !w.is_empty()).collect();
    let truth: Vec<&str> = gold.split(' ').filter(|w| !w.is_empty()).collect();
    if predicted.is_empty() || truth.is_empty() {
        return f64::from(u8::from(predicted.is_empty() && truth.is_empty()));
    }
    let mut remaining = truth.clone();
    let mut common = 0usize;
    for word in &predicted {
        if let Some(at) = remaining.iter().position(|w| w == word) {
            remaining.swap_remove(at);
            common += 1;
        }
    }
    if common == 0 {
        return 0.0;
    }
    let precision = common as f64 / predicted.len() as f64;
    let recall = common as f64 / truth.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

fn needle_hit(response: &str, gold: &str) -> f64 {
    let (response, gold) = (
        text::normalize_answer(response),
        text::normalize_answer(gold),
    );
    f64::from(u8::from(contains_words(&response, &gold)))
}

/// Paths named in a response, in order: each line's first path-like token (with a dot or a
/// slash), without list markers or quotes.
pub fn listed_files(response: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in response.lines() {
        let token = line
            .split_whitespace()
            .map(|t| t.trim_matches(|c: char| "`'\"*-,;:()[]".contains(c)))
            .find(|t| t.contains('/') || (t.contains('.') && !t.ends_with('.')));
        if let Some(token) = token
            && !token.is_empty()
            && !out.iter().any(|o| o == token)
        {
            out.push(token.to_string());
        }
    }
    out
}

fn file_recall_at_k(response: &str, gold: &[String], k: usize) -> f64 {
    if gold.is_empty() {
        return 0.0;
    }
    let listed = listed_files(response);
    let top: HashSet<&str> = listed.iter().take(k).map(String::as_str).collect();
    let hits = gold.iter().filter(|g| top.contains(g.as_str())).count();
    hits as f64 / gold.len() as f64
}

/// `unsupported_claim_rate` of a path-list answer: the share of listed paths (as
/// [`listed_files`] reads them) that the context sent does not name. A path-list answer claims
/// "these files are where the change goes"; a path the model was never shown is a claim
/// without support, while a shown path that is not gold is a wrong answer, which the task score
/// already counts. A response that lists no path makes no claim: 0.
pub fn unsupported_path_rate(response: &str, context_sent: &str) -> f64 {
    let listed = listed_files(response);
    if listed.is_empty() {
        return 0.0;
    }
    let unsupported = listed
        .iter()
        .filter(|path| !names_path(context_sent, path))
        .count();
    unsupported as f64 / listed.len() as f64
}

/// Whether `text` names `path` as a whole path (not as part of a longer one: `a.py` is not
/// named by `lib/a.py` or `a.pyc`).
fn names_path(text: &str, path: &str) -> bool {
    let inside = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '/' | '.');
    text.match_indices(path).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let mut after = text[at + path.len()..].chars();
        let next = after.next();
        let before_ok = before.is_none_or(|c| !inside(c));
        // A full stop ends a sentence unless a path character follows it.
        let after_ok = match next {
            None => true,
            Some('.') => after.next().is_none_or(|c| !c.is_alphanumeric()),
            Some(c) => !inside(c),
        };
        before_ok && after_ok
    })
}

/// Fraction of gold evidence spans fully present in the context sent. Whitespace runs are
/// compared as one space, so re-wrapping does not count as a loss; any other change does.
/// A task without evidence spans has nothing to lose: 1.
pub fn evidence_recall(context_sent: &str, evidence: &[String]) -> f64 {
    if evidence.is_empty() {
        return 1.0;
    }
    let context = text::collapse_whitespace(context_sent);
    let present = evidence
        .iter()
        .filter(|span| context.contains(&text::collapse_whitespace(span)))
        .count();
    present as f64 / evidence.len() as f64
}

/// Judges how much of a response the evidence does not support. The witness implements this for
/// real; see [`default_claim_checker`].
pub trait ClaimChecker: Send + Sync {
    /// Fraction in `0..=1` of the response's checkable claims that `evidence` does not support;
    /// 0 when the response makes no checkable claim.
    fn unsupported_claim_rate(&self, response: &str, evidence: &str, question: Option<&str>)
    -> f64;
}

/// The claim checker trials use: the witness, with the `benchmark_qa` profile.
pub fn default_claim_checker() -> Arc<dyn ClaimChecker> {
    Arc::new(WitnessClaimChecker {
        profile: Profile::BenchmarkQa,
    })
}

/// The witness's deterministic verification as a claim checker: the rate is the fraction of the
/// response's verifiable claims that are not `supported` by the evidence (0 with none).
#[derive(Debug, Clone, Copy)]
pub struct WitnessClaimChecker {
    pub profile: Profile,
}

impl ClaimChecker for WitnessClaimChecker {
    fn unsupported_claim_rate(
        &self,
        response: &str,
        evidence: &str,
        question: Option<&str>,
    ) -> f64 {
        // The witness's notice that an answer was withheld (strict mode, the fixed-point loop)
        // asserts nothing about the evidence; read as prose it would be one unsupported claim.
        if response.trim() == crate::witness::rewrite::WITHHELD_NOTICE {
            return 0.0;
        }
        verify::check(response, evidence, question, self.profile).unsupported_claim_rate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(scorer: ScorerName, response: &str, task: &Task) -> f64 {
        scorer.score(response, task).expect("a rule scorer")
    }
    use crate::harness::workload::{AnswerKind, TaskContext};

    fn task(answers: &[&str], files: &[&str]) -> Task {
        Task {
            id: "t".into(),
            question: "q".into(),
            context: TaskContext::Documents(Vec::new()),
            answer_kind: AnswerKind::Span,
            answers: answers.iter().map(|s| s.to_string()).collect(),
            evidence: Vec::new(),
            gold_files: files.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn the_withheld_notice_makes_no_claim() {
        let checker = default_claim_checker();
        let evidence = "The bridge opened in 1932.";
        let notice = crate::witness::rewrite::WITHHELD_NOTICE;
        assert!(verify::check(notice, evidence, None, Profile::BenchmarkQa).has_unsupported());
        assert_eq!(checker.unsupported_claim_rate(notice, evidence, None), 0.0);
        assert_eq!(
            checker.unsupported_claim_rate("The bridge opened in 1990.", evidence, None),
            1.0
        );
    }

    #[test]
    fn exact_and_f1() {
        let t = task(&["The Oberoi Group", "Oberoi"], &[]);
        assert_eq!(rule(ScorerName::QaExactV1, "the oberoi group.", &t), 1.0);
        assert_eq!(rule(ScorerName::QaExactV1, "Taj", &t), 0.0);
        let f1 = rule(ScorerName::QaF1V1, "Oberoi hotels", &t);
        assert!((f1 - 2.0 / 3.0).abs() < 1e-9, "{f1}");
        assert_eq!(
            rule(
                ScorerName::NeedleHitV1,
                "code is 4817",
                &task(&["4817"], &[])
            ),
            1.0
        );
        assert_eq!(
            rule(
                ScorerName::NeedleHitV1,
                "code is 48170",
                &task(&["4817"], &[])
            ),
            0.0
        );
    }

    #[test]
    fn file_recall_reads_listed_paths() {
        let t = task(&[], &["src/a.rs", "src/b.rs"]);
        assert_eq!(
            rule(
                ScorerName::FileRecallAtKV1,
                "1. `src/a.rs`\n- src/c.rs\nsrc/b.rs",
                &t
            ),
            1.0
        );
        assert_eq!(
            rule(ScorerName::FileRecallAtKV1, "src/a.rs\nnothing else", &t),
            0.5
        );
        let many: String =
            (0..6).map(|i| format!("src/x{i}.rs\n")).collect::<String>() + "src/a.rs";
        assert_eq!(
            rule(ScorerName::FileRecallAtKV1, &many, &t),
            0.0,
            "only the first k count"
        );
    }

    #[test]
    fn scorer_names_are_the_wire_names() {
        for name in ScorerName::ALL {
            let json = serde_json::to_string(&name).expect("json");
            assert_eq!(json, format!("\"{}\"", name.as_str()));
        }
    }

    #[test]
    fn evidence_recall_counts_whole_spans() {
        let spans = vec!["alpha beta".to_string(), "gamma delta".to_string()];
        assert_eq!(evidence_recall("x alpha\n beta y gamma", &spans), 0.5);
        assert_eq!(evidence_recall("alpha beta gamma delta", &spans), 1.0);
        assert_eq!(evidence_recall("anything", &[]), 1.0);
    }

    #[test]
    fn witness_checker_flags_unsupported_claims() {
        let checker = default_claim_checker();
        let evidence = "The Oberoi Group is a hotel company with its head office in Delhi.";
        let question = Some("Where is the head office of the Oberoi Group?");
        assert_eq!(
            checker.unsupported_claim_rate("Delhi", evidence, question),
            0.0
        );
        assert_eq!(
            checker.unsupported_claim_rate("Mumbai", evidence, question),
            1.0
        );
        assert_eq!(
            checker.unsupported_claim_rate(
                "It is in Delhi. It was founded by pirates.",
                evidence,
                question
            ),
            0.5
        );
        assert_eq!(
            checker.unsupported_claim_rate("The Oberoi Group.", evidence, question),
            0.0
        );
    }

    /// Regression (issue 11): raw's path-list answers named only files of the context yet got
    /// an unsupported-claim rate of 0.75 from the prose witness.
    #[test]
    fn issue_11_path_lists_are_judged_against_the_context_sent() {
        assert_eq!(
            ScorerName::FileRecallAtKV1.answer_type(),
            AnswerType::PathList
        );
        assert_eq!(ScorerName::QaF1V1.answer_type(), AnswerType::Text);
        let context = ">>> src/parse.py#L1-3\ndef parse(): pass\n## lib/a.py\nx = 1\n";
        assert_eq!(
            unsupported_path_rate("src/parse.py\nlib/a.py", context),
            0.0
        );
        // `a.py` is not named by `lib/a.py`; `src/parse.pyc` is not `src/parse.py`.
        assert_eq!(unsupported_path_rate("a.py\nsrc/parse.py", context), 0.5);
        assert_eq!(unsupported_path_rate("src/parse.pyc", context), 1.0);
        assert_eq!(unsupported_path_rate("unknown", context), 0.0);
        assert!(names_path("see src/parse.py.", "src/parse.py"));
    }

    #[test]
    fn exact_match_is_reported_beside_f1() {
        assert_eq!(ScorerName::QaF1V1.secondary(), Some(ScorerName::QaExactV1));
        assert_eq!(ScorerName::FileRecallAtKV1.secondary(), None);
        // "The MS Ternen" for "MS Lomvi": F1 gives credit, exact match does not.
        let t = task(&["MS Lomvi"], &[]);
        assert!(rule(ScorerName::QaF1V1, "The MS Ternen", &t) > 0.0);
        assert_eq!(rule(ScorerName::QaExactV1, "The MS Ternen", &t), 0.0);
    }
}
