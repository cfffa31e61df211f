//! The fixture model: a deterministic extractive reader that answers only from the context it
//! is given, so its score depends on what the condition kept.
//!
//! Span answers: pick the context sentence sharing the most distinct question content words
//! (ties: the earliest), then extract from it the span that fills the question's slot: the
//! run of words not in the question nearest to the matched words, preferring names and numbers.
//! File answers: split the context at path-like header lines and list the paths of the sections
//! that share the most question words. With no overlap at all it answers `unknown`.
//!
//! That is the `overlap` reader (the default). A runner file can pick the `in-order` reader
//! instead ([`super::in_order`]), which does not rank by question-word overlap.

use std::collections::HashSet;

use super::{ModelReply, ModelRequest};
use crate::digest;
use crate::harness::text;
use crate::harness::workload::AnswerKind;
use crate::tokens::Tokenizer;
use crate::trial::UsageSource;

/// How many files a file answer lists.
pub const FILES_LISTED: usize = 5;

/// The closed set of fixture readers (`reader` in a fixture runner file).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FixtureReader {
    /// The sentence sharing the most (idf-weighted) question words, then its slot.
    #[default]
    Overlap,
    /// The first sentence, in reading order, that concerns the question and holds a match of
    /// the answer type.
    InOrder,
}

/// Answers `request` deterministically with `reader`.
pub fn call(request: &ModelRequest, reader: FixtureReader) -> ModelReply {
    let text = match reader {
        FixtureReader::Overlap => answer(&request.context, &request.question, request.answer_kind),
        FixtureReader::InOrder => match request.answer_kind {
            AnswerKind::Span => super::in_order::span_answer(&request.context, &request.question),
            AnswerKind::Files => super::in_order::files_answer(
                &sections(&request.context),
                &request.question,
                FILES_LISTED,
            ),
        },
    };
    let tokenizer = Tokenizer::default();
    ModelReply {
        provider_request_id: format!(
            "fixture_{}",
            &digest::sha256_hex(format!("{}\n{}\n{}", request.model, request.prompt, text))[..24]
        ),
        input_tokens: None,
        cached_input_tokens: None,
        cache_write_tokens: None,
        output_tokens: tokenizer.count(&text) as u64,
        reasoning_tokens: 0,
        usage_source: UsageSource::DeterministicFixture,
        text,
    }
}

/// The fixture's answer to `question` from `context`.
pub fn answer(context: &str, question: &str, kind: AnswerKind) -> String {
    match kind {
        AnswerKind::Span => span_answer(context, question),
        AnswerKind::Files => files_answer(context, question),
    }
}

fn stems(words: Vec<String>) -> HashSet<String> {
    words.iter().map(|w| text::stem(w).to_string()).collect()
}

fn span_answer(context: &str, question: &str) -> String {
    let question_content = stems(text::content_words(question));
    let question_all = stems(text::words(question));
    let candidates: Vec<(&str, HashSet<String>)> = text::sentences(context)
        .into_iter()
        .filter(|s| !s.starts_with('#'))
        .map(|s| (s, stems(text::words(s))))
        .collect();
    // Rare question words say more about which sentence answers than common ones: weight each
    // by its inverse sentence frequency in this context.
    let total = candidates.len().max(1) as f64;
    let weight = |word: &String| {
        let df = candidates.iter().filter(|(_, w)| w.contains(word)).count();
        if df == 0 {
            0.0
        } else {
            (1.0 + total / df as f64).ln()
        }
    };
    let weights: Vec<(&String, f64)> = question_content.iter().map(|w| (w, weight(w))).collect();
    let mut best: Option<(&str, f64)> = None;
    for (sentence, words) in &candidates {
        let score: f64 = weights
            .iter()
            .filter(|(w, _)| words.contains(*w))
            .map(|(_, weight)| weight)
            .sum();
        if score > 0.0 && best.is_none_or(|(_, b)| score > b + 1e-9) {
            best = Some((sentence, score));
        }
    }
    let Some((sentence, _)) = best else {
        return "unknown".into();
    };
    slot(sentence, &question_all, &left_of_wh(question)).unwrap_or_else(|| sentence.to_string())
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Class {
    /// All its words occur in the question.
    Question,
    Stop,
    Candidate,
}

fn trim_token(token: &str) -> &str {
    token.trim_matches(|c: char| !c.is_alphanumeric())
}

const WH_WORDS: &[&str] = &[
    "how", "what", "when", "where", "which", "who", "whom", "whose",
];

/// Up to two question words right before its wh-word: "head office in [what city]" gives
/// `["office", "in"]`. In the evidence the slot usually follows the same words.
fn left_of_wh(question: &str) -> Vec<String> {
    let words = text::words(question);
    match words.iter().position(|w| WH_WORDS.contains(&w.as_str())) {
        Some(at) => words[at.saturating_sub(2)..at].to_vec(),
        None => Vec::new(),
    }
}

/// The span of `sentence` that fills the question's slot.
fn slot(sentence: &str, question_words: &HashSet<String>, left: &[String]) -> Option<String> {
    let tokens: Vec<&str> = sentence.split_whitespace().collect();
    let classes: Vec<Class> = tokens
        .iter()
        .map(|token| {
            let words = text::words(token);
            if words.is_empty() || words.iter().all(|w| text::is_stop_word(w)) {
                Class::Stop
            } else if words
                .iter()
                .all(|w| question_words.contains(text::stem(w)) || text::is_stop_word(w))
            {
                Class::Question
            } else {
                Class::Candidate
            }
        })
        .collect();
    let capitalised = |t: &str| {
        trim_token(t)
            .chars()
            .next()
            .is_some_and(|c| c.is_uppercase() || c.is_ascii_digit())
    };
    let upper = |t: &str| trim_token(t).chars().next().is_some_and(char::is_uppercase);
    let lower_of = |t: &str| trim_token(t).to_lowercase();
    // Runs of candidate tokens; a stop word joins two capitalised candidates ("Bank of England").
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if classes[i] != Class::Candidate {
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i + 1;
        loop {
            // A clause ends at a comma or semicolon: "Sollia, eleven kilometres north".
            if tokens[end - 1].ends_with([',', ';', ':']) {
                break;
            }
            if end < tokens.len() && classes[end] == Class::Candidate {
                end += 1;
            } else if end + 1 < tokens.len()
                && classes[end] == Class::Stop
                && matches!(
                    lower_of(tokens[end]).as_str(),
                    "of" | "and" | "the" | "de" | "for" | "on"
                )
                && classes[end + 1] == Class::Candidate
                && upper(tokens[end - 1])
                && upper(tokens[end + 1])
                && !tokens[end - 1].ends_with([',', '.', ';', ':'])
            {
                end += 2;
            } else {
                break;
            }
        }
        // "takes 35 minutes", "later named Brekkehill": when a run holds a name or a number,
        // the words before it are the verb, not the answer.
        let first_named = (start..end).find(|&k| capitalised(tokens[k]));
        runs.push((first_named.unwrap_or(start), end));
        i = end;
    }
    let anchors: Vec<usize> = (0..tokens.len())
        .filter(|&k| classes[k] == Class::Question)
        .collect();
    let lower: Vec<String> = tokens
        .iter()
        .map(|t| trim_token(t).to_lowercase())
        .collect();
    let follows_left = |start: usize| -> f64 {
        let Some(last) = left.last() else { return 0.0 };
        // Allow one article between the context words and the slot ("in the Bronx").
        let before = match start.checked_sub(1) {
            Some(k) if matches!(lower[k].as_str(), "a" | "an" | "the") => k.checked_sub(1),
            other => other,
        };
        match before {
            Some(k) if &lower[k] == last => {
                let second = left.len() == 2 && k >= 1 && lower[k - 1] == left[0];
                2.0 + if second { 0.5 } else { 0.0 }
            }
            _ => 0.0,
        }
    };
    let mut best: Option<((usize, usize), f64)> = None;
    for &(start, end) in &runs {
        let distance = anchors
            .iter()
            .map(|&a| {
                if a < start {
                    start - a
                } else {
                    a.saturating_sub(end - 1)
                }
            })
            .min()
            .unwrap_or(tokens.len());
        let named = tokens[start..end].iter().any(|t| capitalised(t));
        // With no words before the wh-word ("What colour is X painted?") the slot tends to
        // follow the question's words in a declarative sentence ("X is painted green").
        let after = left.is_empty() && anchors.last().is_some_and(|&a| start > a);
        let score = follows_left(start)
            + f64::from(u8::from(named))
            + 1.0 / (1.0 + distance as f64)
            + if after { 0.5 } else { 0.0 };
        if best.is_none_or(|(_, b)| score > b) {
            best = Some(((start, end), score));
        }
    }
    let ((start, end), _) = best?;
    let span = tokens[start..end].join(" ");
    let trimmed = span.trim_matches(|c: char| !c.is_alphanumeric() && c != '%' && c != '$');
    (!trimmed.is_empty()).then(|| trimmed.to_string())
}

/// A header line naming a file: `## path`, `### path`, `File: path`, `// path` and the like,
/// where the path has a dot or a slash and no spaces; also the context engine's piece headers
/// `>>> path#La-b [skeleton|reference] (in …)`, whose path ends at the `#L` anchor.
fn header_path(line: &str) -> Option<&str> {
    let trimmed = line.trim();
    if let Some(piece) = trimmed.strip_prefix(">>> ") {
        let chunk_id = piece.split_whitespace().next()?;
        let path = chunk_id
            .rsplit_once("#L")
            .map_or(chunk_id, |(path, _)| path);
        return (!path.is_empty() && (path.contains('/') || path.contains('.'))).then_some(path);
    }
    let rest = trimmed.trim_start_matches(['#', '/', '=', '-', '>', '*', ' ']);
    let rest = rest
        .strip_prefix("File:")
        .or_else(|| rest.strip_prefix("FILE:"))
        .or_else(|| rest.strip_prefix("file:"))
        .unwrap_or(rest)
        .trim()
        .trim_matches('`');
    let marked = trimmed.len() != rest.len();
    (marked
        && !rest.is_empty()
        && !rest.contains(char::is_whitespace)
        && (rest.contains('/') || rest.contains('.'))
        && !rest.ends_with('.'))
    .then_some(rest)
}

/// The file sections of a context, in order: (path, words of the path and the body); a file
/// split into several pieces is one section.
fn sections(context: &str) -> Vec<(String, HashSet<String>)> {
    let mut sections: Vec<(String, HashSet<String>)> = Vec::new();
    // Index into `sections` of the section being read; a file split into several pieces is
    // one section.
    let mut current: Option<usize> = None;
    for line in context.lines() {
        if let Some(path) = header_path(line) {
            current = Some(match sections.iter().position(|(p, _)| p == path) {
                Some(existing) => existing,
                None => {
                    // Path words count: a query about "parser" points at parse.py.
                    let words: HashSet<String> = text::words(path).into_iter().collect();
                    sections.push((path.to_string(), words));
                    sections.len() - 1
                }
            });
        } else if let Some(index) = current {
            sections[index].1.extend(text::words(line));
        }
    }
    sections
}

fn files_answer(context: &str, question: &str) -> String {
    let question_words: HashSet<String> = text::content_words(question).into_iter().collect();
    let sections = sections(context);
    let mut scored: Vec<(usize, usize)> = sections
        .iter()
        .enumerate()
        .map(|(i, (path, words))| {
            let body = question_words.iter().filter(|w| words.contains(*w)).count();
            let in_path = text::words(path)
                .iter()
                .filter(|w| {
                    question_words
                        .iter()
                        .any(|q| q.starts_with(w.as_str()) || w.starts_with(q.as_str()))
                })
                .count();
            (i, body + 2 * in_path)
        })
        .filter(|(_, score)| *score > 0)
        .collect();
    scored.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut listed: Vec<&str> = Vec::new();
    for (i, _) in scored {
        let path = sections[i].0.as_str();
        if !listed.contains(&path) {
            listed.push(path);
        }
        if listed.len() == FILES_LISTED {
            break;
        }
    }
    if listed.is_empty() {
        "unknown".into()
    } else {
        listed.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extracts_the_slot_from_the_best_sentence() {
        let context = "## passage-01\nThe Oberoi family is an Indian family famous for hotels.The Oberoi Group is a hotel company with its head office in Delhi.\n## passage-02\nParis is in France.";
        let q = "The Oberoi family is part of a hotel company that has a head office in what city?";
        assert_eq!(answer(context, q, AnswerKind::Span), "Delhi");
        assert_eq!(
            answer(
                "The vault code is 4817. Weather is mild.",
                "What is the vault code?",
                AnswerKind::Span
            ),
            "4817"
        );
        assert_eq!(
            answer(
                "The treaty was signed at the Bank of England in 1694.",
                "Where was the treaty signed?",
                AnswerKind::Span
            ),
            "Bank of England"
        );
    }

    #[test]
    fn answers_only_from_context() {
        assert_eq!(
            answer(
                "Nothing relevant here.",
                "Who is the mayor of Oslo?",
                AnswerKind::Span
            ),
            "unknown"
        );
        let without = answer(
            "## a\nThe mayor of Bergen is Ola.",
            "Who is the mayor of Oslo?",
            AnswerKind::Span,
        );
        assert_ne!(without, "Marit");
    }

    #[test]
    fn lists_files_by_overlap() {
        let engine = ">>> src/report.py#L1-2 (in module)\ndef render(rows): pass\n>>> src/parse.py#L1-3\ndef parse(line):\n>>> src/report.py#L3-4 skeleton\ndef row(r): ...\n";
        assert_eq!(
            answer(engine, "Render one report row per line", AnswerKind::Files)
                .lines()
                .next(),
            Some("src/report.py"),
            "engine piece headers name files; pieces of one file are one section"
        );
        let context = "## src/parse.py\ndef parse(line):\n    return line.split(',')\n\n## src/report.py\ndef render(rows): pass\n";
        assert_eq!(
            answer(
                context,
                "Strip whitespace around parsed fields",
                AnswerKind::Files
            ),
            "src/parse.py"
        );
        let listed = answer(context, "Render one report row per line", AnswerKind::Files);
        assert_eq!(listed.lines().next(), Some("src/report.py"), "{listed}");
    }
}
