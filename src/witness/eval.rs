//! Evaluation on HaluEval-format question answering data: each item's right and hallucinated
//! answer is verified against its knowledge, and the verdicts are scored as a detector of
//! hallucinations (the positive class).
//!
//! Beside the witness it scores the obvious baseline — the fraction of an answer's content
//! words found anywhere in the knowledge — so every report shows what the witness adds.

use std::collections::HashSet;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::profile::{Mode, Profile};
use super::text;
use super::verify::{self, Evidence, Verification};
use crate::ravs::stats::wilson95;

/// One HaluEval QA item.
#[derive(Debug, Clone, Deserialize)]
pub struct EvalItem {
    pub knowledge: String,
    pub question: String,
    pub right_answer: String,
    pub hallucinated_answer: String,
}

/// Errors reading evaluation data.
#[derive(Debug, thiserror::Error)]
pub enum EvalError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path}:{line}: not a HaluEval QA item ({source}); each line needs the string fields knowledge, question, right_answer, hallucinated_answer"
    )]
    Item {
        path: PathBuf,
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{path}:{line}: not UTF-8 text (invalid byte at column {column}); save the file as UTF-8"
    )]
    NotUtf8 {
        path: PathBuf,
        line: usize,
        column: usize,
    },
    #[error("{path}: no items")]
    Empty { path: PathBuf },
}

/// Read a JSONL file of items; blank lines are skipped.
pub fn read_items(path: &Path) -> Result<Vec<EvalItem>, EvalError> {
    let file = std::fs::File::open(path).map_err(|source| EvalError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut items = Vec::new();
    for (i, line) in std::io::BufReader::new(file).split(b'\n').enumerate() {
        let line = line.map_err(|source| EvalError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let line = String::from_utf8(line).map_err(|e| EvalError::NotUtf8 {
            path: path.to_path_buf(),
            line: i + 1,
            column: crate::text::utf8_error_position(&e).1,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let item = serde_json::from_str(crate::text::without_bom(&line)).map_err(|source| {
            EvalError::Item {
                path: path.to_path_buf(),
                line: i + 1,
                source,
            }
        })?;
        items.push(item);
    }
    if items.is_empty() {
        return Err(EvalError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(items)
}

/// Counts of flagged answers; hallucinated answers are the positive class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Confusion {
    /// Hallucinated answers flagged.
    pub true_positive: usize,
    /// Right answers flagged.
    pub false_positive: usize,
    /// Right answers passed.
    pub true_negative: usize,
    /// Hallucinated answers passed.
    pub false_negative: usize,
}

/// The figures of one evaluation run.
#[derive(Debug, Clone, Serialize)]
pub struct EvalReport {
    pub items: usize,
    pub profile: Profile,
    pub mode: Mode,
    /// Share of all answers classified correctly (flagged iff hallucinated).
    pub accuracy: f64,
    /// Area under the ROC curve of (1 - support score) as a hallucination detector.
    pub auroc: f64,
    /// Share of hallucinated answers flagged.
    pub flag_rate_hallucinated: f64,
    /// 95 % Wilson interval of [`Self::flag_rate_hallucinated`]: with a few hundred items a
    /// rate moves by points from one sample to another, and zero false flags out of 54 is not
    /// a zero rate.
    pub flag_rate_interval: (f64, f64),
    /// Share of right answers flagged.
    pub false_positive_rate: f64,
    /// 95 % Wilson interval of [`Self::false_positive_rate`].
    pub false_positive_interval: (f64, f64),
    pub confusion: Confusion,
    /// AUROC of the content-word-coverage baseline on the same items.
    pub baseline_auroc: f64,
    /// AUROC of answer length alone (longer = hallucinated): HaluEval's hallucinated answers
    /// are often longer than the right ones, so a detector must beat this to mean anything.
    pub length_baseline_auroc: f64,
    /// The same figures on the items whose two answers differ by at most one word, where
    /// length says nothing.
    pub length_matched: SubsetFigures,
}

/// The detector's figures on a subset of the items.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct SubsetFigures {
    pub items: usize,
    pub auroc: f64,
    pub flag_rate_hallucinated: f64,
    /// 95 % Wilson interval of [`Self::flag_rate_hallucinated`].
    pub flag_rate_interval: (f64, f64),
    pub false_positive_rate: f64,
    /// 95 % Wilson interval of [`Self::false_positive_rate`].
    pub false_positive_interval: (f64, f64),
    pub baseline_auroc: f64,
    pub length_baseline_auroc: f64,
}

/// Answers whose word counts differ by at most this many are length-matched.
pub const LENGTH_MATCH_WORDS: usize = 1;

/// What one item contributed: per answer (right, hallucinated) whether it was flagged, its
/// support score, its baseline score and its length in words.
#[derive(Debug, Clone, Copy)]
struct Scored {
    flagged: [bool; 2],
    score: [f64; 2],
    baseline: [f64; 2],
    words: [usize; 2],
}

fn subset_figures(scored: &[&Scored]) -> SubsetFigures {
    let n = scored.len();
    if n == 0 {
        return SubsetFigures::default();
    }
    let column = |f: &dyn Fn(&Scored, usize) -> f64, side: usize| -> Vec<f64> {
        scored.iter().map(|s| f(s, side)).collect()
    };
    let score = |s: &Scored, side: usize| s.score[side];
    let baseline = |s: &Scored, side: usize| s.baseline[side];
    // Support falls as length grows.
    let length = |s: &Scored, side: usize| -(s.words[side] as f64);
    let count = |side: usize| scored.iter().filter(|s| s.flagged[side]).count();
    // n > 0 here, so the interval exists.
    let interval = |side: usize| wilson95(count(side) as u64, n as u64).unwrap_or((0.0, 1.0));
    SubsetFigures {
        items: n,
        auroc: auroc(&column(&score, 0), &column(&score, 1)),
        flag_rate_hallucinated: count(1) as f64 / n as f64,
        flag_rate_interval: interval(1),
        false_positive_rate: count(0) as f64 / n as f64,
        false_positive_interval: interval(0),
        baseline_auroc: auroc(&column(&baseline, 0), &column(&baseline, 1)),
        length_baseline_auroc: auroc(&column(&length, 0), &column(&length, 1)),
    }
}

fn word_count(text: &str) -> usize {
    text.split_whitespace().count()
}

/// Whether the witness would flag an answer under `mode` and `profile`: fail-closed profiles
/// flag any verifiable claim not supported; the others flag contradictions only, since unknown
/// claims only raise a warning there. The mode changes what is done to the output, not the
/// verdicts, so it does not change what is flagged.
pub fn flagged(verification: &Verification, profile: Profile) -> bool {
    if profile.fails_closed() {
        verification.has_unsupported()
    } else {
        verification.has_contradiction()
    }
}

/// Score every item. Deterministic.
pub fn evaluate(items: &[EvalItem], profile: Profile, mode: Mode) -> EvalReport {
    evaluate_with(items, profile, mode, |_, _, _, _| {})
}

/// As [`evaluate`], calling `observe(item index, is_hallucinated, verification, flagged)` for
/// every answer (the command uses it to list misclassified answers).
pub fn evaluate_with(
    items: &[EvalItem],
    profile: Profile,
    mode: Mode,
    mut observe: impl FnMut(usize, bool, &Verification, bool),
) -> EvalReport {
    let mut confusion = Confusion::default();
    let mut scored = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let evidence = Evidence::new(&item.knowledge);
        let right =
            verify::check_with(&evidence, &item.right_answer, Some(&item.question), profile);
        let wrong = verify::check_with(
            &evidence,
            &item.hallucinated_answer,
            Some(&item.question),
            profile,
        );
        observe(index, false, &right, flagged(&right, profile));
        observe(index, true, &wrong, flagged(&wrong, profile));
        if flagged(&right, profile) {
            confusion.false_positive += 1;
        } else {
            confusion.true_negative += 1;
        }
        if flagged(&wrong, profile) {
            confusion.true_positive += 1;
        } else {
            confusion.false_negative += 1;
        }
        scored.push(Scored {
            flagged: [flagged(&right, profile), flagged(&wrong, profile)],
            score: [right.score(), wrong.score()],
            baseline: [
                coverage_baseline(&item.right_answer, &item.knowledge),
                coverage_baseline(&item.hallucinated_answer, &item.knowledge),
            ],
            words: [
                word_count(&item.right_answer),
                word_count(&item.hallucinated_answer),
            ],
        });
    }
    let n = items.len();
    let all = subset_figures(&scored.iter().collect::<Vec<_>>());
    let matched: Vec<&Scored> = scored
        .iter()
        .filter(|s| s.words[0].abs_diff(s.words[1]) <= LENGTH_MATCH_WORDS)
        .collect();
    EvalReport {
        items: n,
        profile,
        mode,
        accuracy: (confusion.true_positive + confusion.true_negative) as f64 / (2 * n) as f64,
        auroc: all.auroc,
        flag_rate_hallucinated: confusion.true_positive as f64 / n as f64,
        flag_rate_interval: all.flag_rate_interval,
        false_positive_rate: confusion.false_positive as f64 / n as f64,
        false_positive_interval: all.false_positive_interval,
        confusion,
        baseline_auroc: all.baseline_auroc,
        length_baseline_auroc: all.length_baseline_auroc,
        length_matched: subset_figures(&matched),
    }
}

/// The baseline: share of the answer's content words found anywhere in the knowledge (1.0 for
/// an answer without content words).
pub fn coverage_baseline(answer: &str, knowledge: &str) -> f64 {
    let known: HashSet<String> = text::tokenize(knowledge)
        .into_iter()
        .map(|t| t.norm)
        .collect();
    let words: Vec<String> = text::tokenize(answer)
        .into_iter()
        .filter(|t| t.is_content())
        .map(|t| t.norm)
        .collect();
    if words.is_empty() {
        return 1.0;
    }
    words.iter().filter(|w| known.contains(*w)).count() as f64 / words.len() as f64
}

/// AUROC of a detector whose input is a support score (low = hallucinated): the probability
/// that a random right answer scores higher than a random hallucinated one, ties counting half
/// (the Mann-Whitney U statistic over both groups' sizes).
pub fn auroc(right: &[f64], hallucinated: &[f64]) -> f64 {
    if right.is_empty() || hallucinated.is_empty() {
        return 0.5;
    }
    // Rank-based: sort all scores once, give tied runs their average rank.
    let mut all: Vec<(f64, bool)> = right
        .iter()
        .map(|&s| (s, true))
        .chain(hallucinated.iter().map(|&s| (s, false)))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut rank_sum_right = 0.0;
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let average_rank = (i + j) as f64 / 2.0 + 1.0;
        for entry in &all[i..=j] {
            if entry.1 {
                rank_sum_right += average_rank;
            }
        }
        i = j + 1;
    }
    let n_right = right.len() as f64;
    let u = rank_sum_right - n_right * (n_right + 1.0) / 2.0;
    u / (n_right * hallucinated.len() as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_items_names_the_line_of_bytes_that_are_not_utf8() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("items.jsonl");
        let item =
            r#"{"knowledge":"k","question":"q","right_answer":"a","hallucinated_answer":"b"}"#;
        // CRLF line ends still read (the carriage return is JSON whitespace).
        std::fs::write(&path, format!("{item}\r\n{item}\r\n")).expect("write");
        assert_eq!(read_items(&path).expect("items").len(), 2);
        let mut bytes = format!("{item}\n").into_bytes();
        bytes.extend_from_slice(b"{\"knowledge\":\"\xc3\xa9caf\xe9\"}\n");
        std::fs::write(&path, bytes).expect("write");
        let err = read_items(&path).expect_err("latin-1 byte");
        // Column 19 in characters ("é" is one), 20 in bytes.
        assert!(
            matches!(
                err,
                EvalError::NotUtf8 {
                    line: 2,
                    column: 19,
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string().contains("items.jsonl:2: not UTF-8"),
            "{err}"
        );
    }

    #[test]
    fn auroc_handles_ties_with_half_credit() {
        assert_eq!(auroc(&[1.0, 0.9], &[0.1, 0.2]), 1.0);
        assert_eq!(auroc(&[0.1], &[0.9]), 0.0);
        assert_eq!(auroc(&[0.5, 0.5], &[0.5, 0.5]), 0.5);
        // One win, one tie out of two pairs: (1 + 0.5) / 2.
        assert_eq!(auroc(&[0.7], &[0.2, 0.7]), 0.75);
    }

    #[test]
    fn baseline_counts_content_words() {
        let knowledge = "The Oberoi Group is a hotel company with its head office in Delhi.";
        assert_eq!(coverage_baseline("Delhi", knowledge), 1.0);
        assert_eq!(coverage_baseline("Mumbai, India", knowledge), 0.0);
        assert_eq!(coverage_baseline("yes", knowledge), 1.0);
    }

    #[test]
    fn evaluate_flags_the_hallucinated_answer() {
        let item = EvalItem {
            knowledge: "The Oberoi Group is a hotel company with its head office in Delhi.".into(),
            question: "The Oberoi Group has a head office in what city?".into(),
            right_answer: "Delhi".into(),
            hallucinated_answer: "Mumbai, the financial capital of India.".into(),
        };
        let report = evaluate(&[item], Profile::Qa, Mode::Strict);
        assert_eq!(report.confusion.true_positive, 1);
        assert_eq!(report.confusion.true_negative, 1);
        assert_eq!(report.auroc, 1.0);
        // The longer answer is the hallucinated one: length alone separates this item, and
        // the pair is not length-matched.
        assert_eq!(report.length_baseline_auroc, 1.0);
        assert_eq!(report.length_matched.items, 0);
    }

    #[test]
    fn an_empty_question_checks_the_answers_as_free_standing_claims() {
        let item = EvalItem {
            knowledge: "The Oberoi Group is a hotel company with its head office in Delhi. It \
                was founded in 1934."
                .into(),
            question: String::new(),
            right_answer: "The Oberoi Group was founded in 1934.".into(),
            hallucinated_answer: "The Oberoi Group was founded in 1943.".into(),
        };
        let report = evaluate(&[item], Profile::Rag, Mode::Strict);
        assert_eq!(report.confusion.true_positive, 1, "{report:?}");
        assert_eq!(report.confusion.true_negative, 1, "{report:?}");
        assert_eq!(report.length_matched.items, 1);
    }

    #[test]
    fn length_matched_subset_keeps_pairs_within_one_word() {
        let item = |right: &str, wrong: &str| EvalItem {
            knowledge: "The Oberoi Group is a hotel company with its head office in Delhi.".into(),
            question: "The Oberoi Group has a head office in what city?".into(),
            right_answer: right.into(),
            hallucinated_answer: wrong.into(),
        };
        let items = [
            item("Delhi", "Mumbai"),
            item("in Delhi", "Mumbai"),
            item("Delhi", "in Mumbai, India"),
        ];
        let report = evaluate(&items, Profile::Qa, Mode::Strict);
        assert_eq!(report.length_matched.items, 2);
        assert_eq!(report.length_matched.flag_rate_hallucinated, 1.0);
        assert_eq!(report.length_matched.false_positive_rate, 0.0);
    }
}
