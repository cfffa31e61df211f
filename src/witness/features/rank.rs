//! Ranks: "the largest city in the Midwest" against "the second-largest city in the Midwestern
//! United States". The superlative is in the evidence, so coverage sees nothing amiss; the
//! ordinal before it ("second-", "2nd", "third most") is a number the claim dropped or
//! changed. A superlative without an ordinal ranks first.
//!
//! A superlative is "most", "least", "best", "worst" or a word ending in "-est" of six letters
//! or more. The suffix alone also takes in nouns ("forest", "request"), which rank nothing; the
//! check can only misfire on such a noun when one side puts an ordinal before it ("a second
//! request") and the other names it bare, which the development data never showed.

use super::super::text::{Token, TokenKind};

/// Ordinal words up to ten; higher ranks are written as "11th" (a number token).
const ORDINALS: &[(&str, u32)] = &[
    ("first", 1),
    ("second", 2),
    ("third", 3),
    ("fourth", 4),
    ("fifth", 5),
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

fn is_superlative(lower: &str) -> bool {
    matches!(lower, "most" | "least" | "best" | "worst")
        || lower.len() >= 6 && lower.ends_with("est") && lower.chars().all(char::is_alphabetic)
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
    let rank = ORDINALS
        .iter()
        .find(|(w, _)| *w == surface)
        .map(|(_, r)| *r)
        .or_else(|| {
            // "2nd": the tokenizer strips the suffix, so the surface tells an ordinal from "2".
            let digits = surface.strip_suffix(|c: char| c.is_alphabetic())?;
            let digits = digits.strip_suffix(|c: char| c.is_alphabetic())?;
            (token.kind == TokenKind::Number && digits.chars().all(|c| c.is_ascii_digit()))
                .then(|| digits.parse().ok())
                .flatten()
        })?;
    Some((rank, previous))
}

/// The superlatives of a text: (lower-case word, rank, surface with its ordinal).
fn superlatives(text: &str, tokens: &[Token]) -> Vec<(String, u32, String)> {
    tokens
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let lower = text[t.start..t.end].to_lowercase();
            if !is_superlative(&lower) {
                return None;
            }
            let (rank, from) = ordinal_before(text, tokens, i).map_or((1, i), |(r, p)| (r, p));
            Some((lower, rank, text[tokens[from].start..t.end].to_string()))
        })
        .collect()
}

/// The first superlative of the claim whose rank the evidence sentences give otherwise: the
/// sentences hold the same superlative, never at the claim's rank.
pub(in crate::witness) fn rank_mismatch(
    claim_text: &str,
    claim: &[Token],
    sentences: &[(&str, &[Token])],
) -> Option<RankMismatch> {
    let claimed = superlatives(claim_text, claim);
    if claimed.is_empty() {
        return None;
    }
    let found: Vec<(String, u32, String)> = sentences
        .iter()
        .flat_map(|(text, tokens)| superlatives(text, tokens))
        .collect();
    claimed.into_iter().find_map(|(word, rank, surface)| {
        let same: Vec<&(String, u32, String)> = found.iter().filter(|f| f.0 == word).collect();
        (!same.is_empty() && same.iter().all(|f| f.1 != rank)).then(|| {
            let mut evidence: Vec<String> = same.iter().map(|f| f.2.clone()).collect();
            evidence.dedup();
            RankMismatch {
                claimed: surface,
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
        rank_mismatch(claim, &c, &[(sentence, &s)])
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
