//! Claim extraction: split an answer into the units the verifier judges — sentences, list items
//! and table rows — skipping fenced code, and decide which of them are verifiable.
//!
//! A claim is verifiable when it carries something evidence can confirm or refute: a name, a
//! number or date, a code identifier, or a claim verb. Questions, greetings and hedges are not.
//! When the caller gives the question, a short answer ("Delhi") is one claim read in the
//! context of that question.

use serde::{Deserialize, Serialize};

use super::text::{self, Token, TokenKind};

/// How a claim was cut from the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimKind {
    Sentence,
    ListItem,
    TableRow,
    /// A short answer (a name, a number, yes/no) read against the question.
    ShortAnswer,
}

/// One claim of an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    /// Position among the answer's claims, from 0.
    pub index: usize,
    pub kind: ClaimKind,
    pub text: String,
    /// Byte offsets of the claim in the answer.
    pub start: usize,
    pub end: usize,
    pub verifiable: bool,
}

/// Words an answer uses to hedge or converse rather than to assert.
const NON_ASSERTIVE_OPENERS: &[&str] = &[
    "i hope",
    // Well-wishing without the "I" ("Hope this helps!"); "Hope Diamond" is a name.
    "hope this",
    "hope that",
    "hope it ",
    "hope you",
    "let me",
    "feel free",
    "sure",
    "here is",
    "here's",
    "here are",
    "thanks",
    "thank you",
    "hello",
    "hi ",
    "i'm not sure",
    "i am not sure",
    "i don't know",
    "i do not know",
    "please",
];

const CLAIM_VERBS: &[&str] = &[
    "is", "are", "was", "were", "has", "have", "had", "will", "can", "does", "did", "won", "born",
    "died", "made", "became", "become", "wrote", "led", "held", "began", "includes", "contains",
    "returns", "takes", "uses", "runs", "lasted",
];

/// The longest answer, in words, still read as a short answer to the question.
const SHORT_ANSWER_MAX_WORDS: usize = 8;

/// Split `answer` into claims. `with_question` turns a one-line answer without a sentence verb
/// into a [`ClaimKind::ShortAnswer`].
pub fn extract(answer: &str, with_question: bool) -> Vec<Claim> {
    let mut claims = Vec::new();
    let trimmed = answer.trim();
    if with_question && is_short_answer(trimmed) {
        let start = answer.len() - answer.trim_start().len();
        let text = trimmed.to_string();
        let verifiable = short_answer_verifiable(&text);
        claims.push(Claim {
            index: 0,
            kind: ClaimKind::ShortAnswer,
            start,
            end: start + text.len(),
            text,
            verifiable,
        });
        return claims;
    }
    let mut in_fence = false;
    let mut paragraph: Option<(usize, usize)> = None;
    let mut offset = 0;
    for line in answer.split_inclusive('\n') {
        let line_start = offset;
        offset += line.len();
        let content = line.trim_end_matches(['\n', '\r']);
        // A byte-order mark before the first line is no text of it (a fence behind it was
        // taken for prose).
        let stripped = content.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
        let indent = content.len() - stripped.len();
        if stripped.starts_with("```") || stripped.starts_with("~~~") {
            flush_paragraph(answer, &mut paragraph, &mut claims);
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        if stripped.is_empty() || stripped.starts_with('#') {
            flush_paragraph(answer, &mut paragraph, &mut claims);
            continue;
        }
        let body_start = line_start + indent;
        if stripped.starts_with('|') {
            flush_paragraph(answer, &mut paragraph, &mut claims);
            let is_separator = stripped
                .chars()
                .all(|c| matches!(c, '|' | '-' | ':' | ' ' | '\t'));
            if !is_separator {
                push_claim(
                    answer,
                    body_start,
                    body_start + stripped.len(),
                    ClaimKind::TableRow,
                    &mut claims,
                );
            }
            continue;
        }
        if let Some(marker) = list_marker(stripped) {
            flush_paragraph(answer, &mut paragraph, &mut claims);
            let item_start = body_start + marker;
            let item = &answer[item_start..body_start + stripped.len()];
            // A long list item may hold several sentences; each is a claim.
            for span in text::sentences(item) {
                push_claim(
                    answer,
                    item_start + span.start,
                    item_start + span.end,
                    ClaimKind::ListItem,
                    &mut claims,
                );
            }
            continue;
        }
        let end = body_start + stripped.len();
        paragraph = Some(match paragraph {
            Some((start, _)) => (start, end),
            None => (body_start, end),
        });
    }
    flush_paragraph(answer, &mut paragraph, &mut claims);
    claims
}

fn flush_paragraph(answer: &str, paragraph: &mut Option<(usize, usize)>, claims: &mut Vec<Claim>) {
    if let Some((start, end)) = paragraph.take() {
        for span in text::sentences(&answer[start..end]) {
            push_claim(
                answer,
                start + span.start,
                start + span.end,
                ClaimKind::Sentence,
                claims,
            );
        }
    }
}

fn push_claim(answer: &str, start: usize, end: usize, kind: ClaimKind, claims: &mut Vec<Claim>) {
    let text = answer[start..end].to_string();
    let verifiable = is_verifiable(&text);
    claims.push(Claim {
        index: claims.len(),
        kind,
        text,
        start,
        end,
        verifiable,
    });
}

/// Byte length of a list marker (`- `, `* `, `+ `, `1. `, `2) `) at the start of `line`.
fn list_marker(line: &str) -> Option<usize> {
    let bytes = line.as_bytes();
    if bytes.len() >= 2 && matches!(bytes[0], b'-' | b'*' | b'+') && bytes[1] == b' ' {
        return Some(2);
    }
    let digits = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    if (1..=3).contains(&digits)
        && bytes.len() > digits + 1
        && matches!(bytes[digits], b'.' | b')')
        && bytes[digits + 1] == b' '
    {
        return Some(digits + 2);
    }
    None
}

fn is_short_answer(answer: &str) -> bool {
    if answer.is_empty() || answer.contains('\n') {
        return false;
    }
    let words = answer.split_whitespace().count();
    if words > SHORT_ANSWER_MAX_WORDS {
        return false;
    }
    // One sentence at most, and no sentence verb: "Delhi", "the American Chemical Society",
    // "25 June 1961", "yes". "Delhi is the capital." is a sentence claim instead.
    // A longer line ending like a sentence is read as one even without a known verb.
    if words > 4 && answer.ends_with(['.', '!']) {
        return false;
    }
    let tokens = text::tokenize(answer);
    text::sentences(answer).len() <= 1 && !tokens.iter().any(|t| is_claim_verb(&t.norm))
}

/// Whether a short answer is a polarity answer ("yes", "No.").
pub fn is_polarity(answer: &str) -> Option<bool> {
    let word = answer
        .trim()
        .trim_end_matches(['.', '!', ','])
        .to_ascii_lowercase();
    match word.as_str() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

fn short_answer_verifiable(text: &str) -> bool {
    // A courtesy ("Thanks!", "Hope this helps!") answers nothing, also when a question is known
    // (it was read as a short answer and flagged as unsupported).
    if opens_non_assertively(text) {
        return false;
    }
    is_polarity(text).is_some() || text::tokenize_answer(text).iter().any(Token::is_content)
}

fn is_claim_verb(norm: &str) -> bool {
    CLAIM_VERBS.contains(&norm)
}

fn is_code_identifier(surface: &str) -> bool {
    surface.contains('_') || surface.contains("::") || surface.contains("()")
}

/// Whether a claim opens with a hedge or courtesy ("Thanks!", "Sure, …", "I hope …"). The
/// opener must end at a word boundary ("Pleased with the result, …" and "Surely …" are not
/// "please" and "sure"), and "Thanks to X, <clause>" credits X for a stated fact rather than
/// thanking anyone.
fn opens_non_assertively(claim: &str) -> bool {
    let lower = claim.to_lowercase();
    let Some(opener) = NON_ASSERTIVE_OPENERS.iter().find(|o| {
        lower.strip_prefix(*o).is_some_and(|rest| {
            o.ends_with(' ') || !rest.starts_with(|c: char| c.is_alphanumeric() || c == '\'')
        })
    }) else {
        return false;
    };
    let causal = *opener == "thanks"
        && lower["thanks".len()..].trim_start().starts_with("to ")
        && lower
            .split_once(',')
            .is_some_and(|(_, clause)| text::tokenize(clause).iter().any(Token::is_content));
    !causal
}

/// Whether a sentence, list item or table row asserts something checkable.
pub fn is_verifiable(claim: &str) -> bool {
    let trimmed = claim.trim();
    if trimmed.ends_with('?') {
        return false;
    }
    if opens_non_assertively(trimmed) {
        return false;
    }
    let tokens = text::tokenize(trimmed);
    let content = tokens.iter().filter(|t| t.is_content()).count();
    if content == 0 {
        return false;
    }
    if trimmed.contains('`')
        || trimmed.split_whitespace().any(is_code_identifier)
        || tokens
            .iter()
            .any(|t| t.is_content() && matches!(t.kind, TokenKind::Entity | TokenKind::Number))
    {
        return true;
    }
    // A declarative sentence with a few content words asserts something even without a verb
    // this list knows ("It sells tickets online.").
    content >= 3
        || tokens.iter().any(|t| {
            is_claim_verb(&t.norm)
                || (t.end - t.start > 4 && trimmed[t.start..t.end].ends_with("ed"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(claims: &[Claim]) -> Vec<(&str, ClaimKind, bool)> {
        claims
            .iter()
            .map(|c| (c.text.as_str(), c.kind, c.verifiable))
            .collect()
    }

    #[test]
    fn sentences_list_items_and_table_rows_skip_code() {
        let answer = "Paris is the capital of France. It has 2.1 million residents.\n\n\
                      - The Seine flows through it.\n\
                      2. Lyon is smaller.\n\n\
                      | city | population |\n|---|---|\n| Paris | 2100000 |\n\n\
                      ```rust\nlet x = \"Berlin is the capital.\";\n```\n\
                      Do you want more?\n";
        let claims = extract(answer, false);
        assert_eq!(
            texts(&claims),
            [
                ("Paris is the capital of France.", ClaimKind::Sentence, true),
                ("It has 2.1 million residents.", ClaimKind::Sentence, true),
                ("The Seine flows through it.", ClaimKind::ListItem, true),
                ("Lyon is smaller.", ClaimKind::ListItem, true),
                ("| city | population |", ClaimKind::TableRow, false),
                ("| Paris | 2100000 |", ClaimKind::TableRow, true),
                ("Do you want more?", ClaimKind::Sentence, false),
            ]
        );
        for claim in &claims {
            assert_eq!(&answer[claim.start..claim.end], claim.text);
        }
    }

    #[test]
    fn short_answers_are_claims_only_with_a_question() {
        let with = extract("Delhi", true);
        assert_eq!(texts(&with), [("Delhi", ClaimKind::ShortAnswer, true)]);
        let yes = extract("Yes.", true);
        assert_eq!(texts(&yes), [("Yes.", ClaimKind::ShortAnswer, true)]);
        let sentence = extract("Delhi is the capital of India.", true);
        assert_eq!(sentence[0].kind, ClaimKind::Sentence);
        // Regression (found by probing): with a question, courtesies were short answers, and
        // verifiable ones ("Hope this helps!" flagged as unsupported).
        for courtesy in ["Hope this helps!", "Thanks!", "Sure!", "I hope this helps."] {
            assert!(
                extract(courtesy, true).iter().all(|c| !c.verifiable),
                "{courtesy}"
            );
        }
        let name = extract("Hope Diamond", true);
        assert_eq!(
            texts(&name),
            [("Hope Diamond", ClaimKind::ShortAnswer, true)]
        );
    }

    #[test]
    fn hedges_and_greetings_are_not_verifiable() {
        assert!(!is_verifiable("I hope this helps!"));
        assert!(!is_verifiable("Let me know if you need more."));
        assert!(is_verifiable("The function `parse_config` returns a map."));
        assert!(is_verifiable("The committee approved the budget."));
        assert!(!is_verifiable("Thanks to everyone who helped!"));
        assert!(!is_verifiable("Thanks, that settles it."));
        assert!(!is_verifiable("Sure, the cache is cleared on restart."));
    }

    #[test]
    fn a_fact_opening_like_a_courtesy_is_verifiable() {
        // Regression: a prefix match read these as "thanks", "please" and "sure", so the
        // witness never checked them (a changed "100%" passed unseen).
        assert!(is_verifiable(
            "Thanks to urllib3, keep-alive is 100% automatic inside a session."
        ));
        assert!(is_verifiable(
            "Pleased with the design, the board approved it in 1990."
        ));
        assert!(is_verifiable("Surely Paris has 2.1 million residents."));
    }
}
