//! Ranks: "the largest city in the Midwest" against "the second-largest city in the Midwestern
//! United States". The superlative is in the evidence, so coverage sees nothing amiss; the
//! ordinal before it ("second-", "2nd", "third most") is a number the claim dropped or
//! changed. A superlative without an ordinal ranks first.
//!
//! A superlative is "most", "least", "best", "worst" or a word ending in "-est" of six letters
//! or more. The suffix alone also takes in nouns ("forest", "request"), which rank nothing; the
//! check can only misfire on such a noun when one side puts an ordinal before it ("a second
//! request") and the other names it bare, which the development data never showed.

use super::super::text::{Token, TokenKind, strip_ordinal};

/// Ordinal words the tokenizer leaves as words: it already folds "first" to "fifth" into
/// number tokens ("second" has the norm "2nd"), and higher ranks are written "11th".
const ORDINALS: &[(&str, u32)] = &[
    ("sixth", 6),
    ("seventh", 7),
    ("eighth", 8),
    ("ninth", 9),
    ("tenth", 10),
];

/// A rank that disagrees: the claim's superlative with its ordinal, if any ("largest"), and the
/// evidence's occurrences of the same superlative with theirs ("second-largest").
#[derive(Debug, Clone, PartialEq, Eq)]
pub(in crate::witness) struct RankMismatch {
    pub(in crate::witness) claimed: String,
    pub(in crate::witness) evidence: Vec<String>,
}

/// One superlative of a text: the word in lower case, its rank, and its surface with the
/// ordinal ("second-largest").
struct Superlative {
    word: String,
    rank: u32,
    surface: String,
}

fn is_superlative(surface: &str) -> bool {
    ["most", "least", "best", "worst"]
        .iter()
        .any(|w| w.eq_ignore_ascii_case(surface))
        || surface.len() >= 6
            && surface.is_char_boundary(surface.len() - 3)
            && surface[surface.len() - 3..].eq_ignore_ascii_case("est")
            && surface.chars().all(char::is_alphabetic)
}

/// The ordinal right before token `i` ("second-largest", "2nd largest"), as a rank and the
/// index of its token.
fn ordinal_before(text: &str, tokens: &[Token], i: usize) -> Option<(u32, usize)> {
    let previous = i.checked_sub(1)?;
    let token = &tokens[previous];
    let between = &text[token.end..tokens[i].start];
    if !(between == "-" || between.chars().all(char::is_whitespace) && !between.is_empty()) {
        return None;
    }
    let surface = text[token.start..token.end].to_lowercase();
    let rank = match ORDINALS.iter().find(|(w, _)| *w == surface) {
        Some((_, rank)) => *rank,
        // A folded ordinal word keeps its suffix in the norm ("second" → "2nd"); a written one
        // ("2nd") is folded to the number 2, and only its surface tells it from "2".
        None if token.kind == TokenKind::Number => [token.norm.as_str(), surface.as_str()]
            .into_iter()
            .find_map(|form| {
                let digits = strip_ordinal(form);
                (digits != form).then(|| digits.parse().ok()).flatten()
            })?,
        None => return None,
    };
    Some((rank, previous))
}

/// The superlatives of the tokens of `text`.
fn superlatives(text: &str, tokens: &[Token]) -> Vec<Superlative> {
    tokens
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let word = &text[t.start..t.end];
            if !is_superlative(word) {
                return None;
            }
            let (rank, from) = ordinal_before(text, tokens, i).unwrap_or((1, i));
            Some(Superlative {
                word: word.to_lowercase(),
                rank,
                surface: text[tokens[from].start..t.end].to_string(),
            })
        })
        .collect()
}

/// The first superlative of the claim whose rank the evidence sentences (token lists of
/// `evidence_text`) give otherwise: they hold the same superlative, never at the claim's rank.
pub(in crate::witness) fn rank_mismatch(
    claim_text: &str,
    claim: &[Token],
    evidence_text: &str,
    sentences: &[&[Token]],
) -> Option<RankMismatch> {
    let claimed = superlatives(claim_text, claim);
    if claimed.is_empty() {
        return None;
    }
    let found: Vec<Superlative> = sentences
        .iter()
        .flat_map(|tokens| superlatives(evidence_text, tokens))
        .collect();
    claimed.into_iter().find_map(|claimed| {
        let same: Vec<&Superlative> = found.iter().filter(|f| f.word == claimed.word).collect();
        (!same.is_empty() && same.iter().all(|f| f.rank != claimed.rank)).then(|| {
            // Each surface once, in the order the evidence gives them: the same rank is often
            // repeated a sentence apart, with another one between.
            let mut evidence: Vec<String> = Vec::new();
            for f in &same {
                if !evidence.contains(&f.surface) {
                    evidence.push(f.surface.clone());
                }
            }
            RankMismatch {
                claimed: claimed.surface,
                evidence,
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use super::super::super::text::tokenize;
    use super::*;

    fn check(claim: &str, sentence: &str) -> Option<RankMismatch> {
        let (c, s) = (tokenize(claim), tokenize(sentence));
        rank_mismatch(claim, &c, sentence, &[&s])
    }

    #[test]
    fn a_dropped_or_changed_ordinal_is_a_rank_mismatch() {
        let evidence = "Columbus is the second-largest city in the Midwestern United States.";
        let found = check("Columbus is the largest city in the Midwest.", evidence)
            .expect("a dropped ordinal is a mismatch");
        assert_eq!(found.claimed, "largest");
        assert_eq!(found.evidence, ["second-largest"]);
        assert!(check("It is the third largest city in the Midwest.", evidence).is_some());
        assert!(check("It is the 2nd largest city.", "It is the largest city.").is_some());
        // Ordinal words past "fifth" stay words for the tokenizer; the rank still reads them.
        assert!(check("It is the seventh largest city.", evidence).is_some());
        // Named once each, in order, however often the evidence repeats them.
        let repeated = "It is the second-largest city, not the third-largest; the second-largest.";
        let found = check("It is the largest city.", repeated).expect("no rank agrees");
        assert_eq!(found.evidence, ["second-largest", "third-largest"]);
        assert_eq!(
            check(
                "It is the seventh largest city.",
                "It is the 7th largest city."
            ),
            None
        );
    }

    #[test]
    fn the_same_rank_in_other_words_agrees() {
        let evidence = "Columbus is the second-largest city in the Midwestern United States.";
        assert_eq!(check("It is the second largest city.", evidence), None);
        assert_eq!(check("It is the 2nd largest city.", evidence), None);
        assert_eq!(
            check("It is the largest city.", "It is the largest city."),
            None
        );
        // A superlative the evidence never uses is coverage's business, not a rank.
        assert_eq!(check("It is the oldest city.", evidence), None);
        // Both ranks in the evidence: the claim's is among them.
        assert_eq!(
            check(
                "It is the largest city.",
                "It is the largest city and the second-largest port."
            ),
            None
        );
    }
}
