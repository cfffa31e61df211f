//! The second fixture reader (`reader = "in-order"`): it reads the context from the top and
//! answers from the first sentence that both concerns the question and holds a match of the
//! answer type the question asks for. It never ranks sentences by how many question words they
//! share, so a benchmark run under both readers shows which results come from svc and which
//! from a reader that happens to mirror svc's BM25 ranking.
//!
//! - Answer type, from the question: a number (`how many`, `how much`, `how long`, `what year`,
//!   …), a date (`when`), a name (`who`, `where`, `which`/`what` + a noun) — names are runs of
//!   capitalised words, joined by `of`/`de`/`the`/`and`.
//! - "Concerns the question": the sentence names one of the question's proper nouns (capitalised
//!   words after its first); a question without proper nouns needs two of its content words
//!   (one when it has only one). A gate, not a ranking: the first sentence through it wins.
//! - The answer is the first match of the type in that sentence whose words are not all in
//!   the question. With no such sentence it answers `unknown`.
//!
//! File answers: the first [`FILES_LISTED`](super::fixture::FILES_LISTED) files, in context
//! order, whose path or text holds a content word of the question.

use std::collections::HashSet;

use crate::harness::text;

/// What a question asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerType {
    Number,
    Date,
    Name,
    /// `what`/`which` without a clear type: a name or a number, whichever comes first.
    Entity,
}

/// The answer type of `question`.
pub fn answer_type(question: &str) -> AnswerType {
    let words = text::words(question);
    let pair = |a: &str, b: &str| words.windows(2).any(|w| w[0] == a && w[1] == b);
    let number_words = [
        "many", "much", "long", "old", "far", "tall", "big", "large", "high", "often",
    ];
    if number_words.iter().any(|w| pair("how", w))
        || pair("what", "year")
        || pair("which", "year")
        || pair("what", "percentage")
        || pair("what", "number")
    {
        return AnswerType::Number;
    }
    if words.iter().any(|w| w == "when") || pair("what", "date") {
        return AnswerType::Date;
    }
    if words
        .iter()
        .any(|w| matches!(w.as_str(), "who" | "whom" | "whose" | "where"))
    {
        return AnswerType::Name;
    }
    AnswerType::Entity
}

fn trim(token: &str) -> &str {
    token.trim_matches(|c: char| !c.is_alphanumeric() && c != '%' && c != '$')
}

fn capitalised(token: &str) -> bool {
    trim(token).chars().next().is_some_and(char::is_uppercase)
}

fn numeric(token: &str) -> bool {
    trim(token).chars().any(|c| c.is_ascii_digit())
}

const MONTHS: &[&str] = &[
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];

/// The stems of a text's words.
fn stems(text_: &str) -> HashSet<String> {
    text::words(text_)
        .iter()
        .map(|w| text::stem(w).to_string())
        .collect()
}

/// Whether every word of `span` is a question word or a stop word (then it restates the
/// question rather than answering it).
fn restates(span: &str, question: &HashSet<String>) -> bool {
    text::words(span)
        .iter()
        .all(|w| question.contains(text::stem(w)) || text::is_stop_word(w))
}

/// Matches of `kind` in `sentence`, in order, as spans of its tokens.
fn matches(sentence: &str, kind: AnswerType) -> Vec<String> {
    let tokens: Vec<&str> = sentence.split_whitespace().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        let token = tokens[i];
        let lower = trim(token).to_lowercase();
        let is_number = numeric(token);
        let is_month = MONTHS.contains(&lower.as_str());
        let is_name = capitalised(token) && !text::is_stop_word(&lower) && !is_month;
        let take_number = matches!(kind, AnswerType::Number | AnswerType::Entity) && is_number;
        let take_date = kind == AnswerType::Date && (is_number || is_month);
        let take_name = matches!(kind, AnswerType::Name | AnswerType::Entity) && is_name;
        if take_number || take_date {
            let mut end = i + 1;
            // "35 minutes", "12 March 1994": a unit word or the rest of a date.
            while end < tokens.len() && !tokens[end - 1].ends_with([',', ';', '.']) {
                let next = trim(tokens[end]).to_lowercase();
                let date_part = kind == AnswerType::Date
                    && (numeric(tokens[end]) || MONTHS.contains(&next.as_str()));
                let unit = end == i + 1
                    && kind != AnswerType::Date
                    && next.chars().all(char::is_alphabetic)
                    && !next.is_empty()
                    && !text::is_stop_word(&next)
                    && !capitalised(tokens[end]);
                if date_part || unit {
                    end += 1;
                } else {
                    break;
                }
            }
            out.push(tokens[i..end].join(" "));
            i = end;
            continue;
        }
        if take_name {
            let mut end = i + 1;
            while end < tokens.len() && !tokens[end - 1].ends_with([',', ';', '.', ':']) {
                let next = trim(tokens[end]).to_lowercase();
                if capitalised(tokens[end]) && !MONTHS.contains(&next.as_str()) {
                    end += 1;
                } else if end + 1 < tokens.len()
                    && matches!(next.as_str(), "of" | "de" | "the" | "and")
                    && capitalised(tokens[end + 1])
                {
                    end += 2;
                } else {
                    break;
                }
            }
            out.push(tokens[i..end].join(" "));
            i = end;
            continue;
        }
        i += 1;
    }
    out.into_iter()
        .map(|span| trim(&span).to_string())
        .filter(|span| !span.is_empty())
        .collect()
}

/// The question's proper nouns: capitalised words after its first, as stems.
fn proper_nouns(question: &str) -> HashSet<String> {
    question
        .split_whitespace()
        .skip(1)
        .filter(|t| capitalised(t))
        .flat_map(text::words)
        .filter(|w| !text::is_stop_word(w))
        .map(|w| text::stem(&w).to_string())
        .collect()
}

/// The in-order reader's span answer.
pub fn span_answer(context: &str, question: &str) -> String {
    let kind = answer_type(question);
    let question_stems = stems(question);
    let names = proper_nouns(question);
    let content: HashSet<String> = text::content_words(question)
        .iter()
        .map(|w| text::stem(w).to_string())
        .collect();
    let needed = content.len().min(2);
    for sentence in text::sentences(context) {
        if sentence.starts_with('#') || sentence.starts_with(">>>") {
            continue;
        }
        let words = stems(sentence);
        let concerns = if names.is_empty() {
            needed > 0 && content.iter().filter(|w| words.contains(*w)).count() >= needed
        } else {
            names.iter().any(|n| words.contains(n))
        };
        if !concerns {
            continue;
        }
        if let Some(span) = matches(sentence, kind)
            .into_iter()
            .find(|span| !restates(span, &question_stems))
        {
            return span;
        }
    }
    "unknown".into()
}

/// The in-order reader's file answer: `sections` are (path, words) in context order.
pub fn files_answer(
    sections: &[(String, HashSet<String>)],
    question: &str,
    limit: usize,
) -> String {
    let question_words: HashSet<String> = text::content_words(question).into_iter().collect();
    let listed: Vec<&str> = sections
        .iter()
        .filter(|(_, words)| question_words.iter().any(|w| words.contains(w)))
        .map(|(path, _)| path.as_str())
        .take(limit)
        .collect();
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
    fn answer_types_follow_the_question() {
        assert_eq!(
            answer_type("How many moons does Mars have?"),
            AnswerType::Number
        );
        assert_eq!(answer_type("When did the ferry start?"), AnswerType::Date);
        assert_eq!(
            answer_type("Who is the keeper of Varnholm?"),
            AnswerType::Name
        );
        assert_eq!(answer_type("What is the vault code?"), AnswerType::Entity);
    }

    #[test]
    fn the_first_sentence_through_the_gate_answers_not_the_best_overlap() {
        // The second sentence shares more question words, but the first already concerns
        // Varnholm and holds a name: the in-order reader stops there.
        let context =
            "Varnholm lies north of Bergen. The lighthouse keeper of Varnholm is Ingrid Sollie.";
        assert_eq!(
            span_answer(context, "Who is the lighthouse keeper of Varnholm?"),
            "Bergen"
        );
        assert_eq!(
            span_answer(
                "The keeper of Varnholm is Ingrid Sollie.",
                "Who is the keeper of Varnholm?"
            ),
            "Ingrid Sollie"
        );
        assert_eq!(
            span_answer(
                "The crossing of the Lomvi ferry takes 35 minutes each way.",
                "How long does the Lomvi ferry crossing take?"
            ),
            "35 minutes"
        );
        assert_eq!(
            span_answer(
                "The market in Tromsø opened on 12 March 1994 after a long wait.",
                "When did the market in Tromsø open?"
            ),
            "12 March 1994"
        );
        assert_eq!(
            span_answer("Nothing here.", "Who is the mayor of Oslo?"),
            "unknown"
        );
    }

    #[test]
    fn files_in_context_order() {
        let sections = vec![
            ("src/a.py".to_string(), stems_raw("def render rows")),
            ("src/b.py".to_string(), stems_raw("def parse line")),
            ("src/c.py".to_string(), stems_raw("render again")),
        ];
        assert_eq!(
            files_answer(&sections, "Render one row per line", 5),
            "src/a.py\nsrc/b.py\nsrc/c.py"
        );
        assert_eq!(files_answer(&sections, "zeppelin", 5), "unknown");
    }

    fn stems_raw(text_: &str) -> HashSet<String> {
        text::words(text_).into_iter().collect()
    }
}
