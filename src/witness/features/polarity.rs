//! Polarity: a claim that negates what its evidence states, or states the opposite word
//! ("case-sensitive" against "case-insensitive", "younger" against "older").
//!
//! An evidence sentence negates the claim only where a word of the claim stands in it under a
//! negation alone ([`text::negated_tokens`]: the rest of the negation's clause), not also
//! outside one. "By default the app doesn't know what host(s) it is allowed to be accessed
//! through, and assumes any host is valid" negates "know … host", but states "host" too, so it
//! does not negate the claim "By default the app assumes that any host is valid"; a negation
//! anywhere in the span used to flip that claim. A negation in the claim counts wherever it
//! is, as before, and a capitalised "None" inside a sentence is Python's value, not a
//! negation. For the same reason an opposite word under a negation agrees with the claim
//! ("will not be accepted" is "will be rejected").

use std::collections::BTreeSet;

use super::super::text;
use super::super::verify::{Alignment, Evidence, Reason, ReasonKind};
use super::{ClaimKind, ClaimView, Features, reason};

pub(super) fn polarity_and_antonyms(
    evidence: &Evidence,
    claim: &ClaimView<'_>,
    span: &[usize],
    alignment: Alignment,
    f: &mut Features,
    reasons: &mut Vec<Reason>,
) {
    let claim_scope = text::negated_tokens(claim.text, claim.tokens);
    let span_tokens = || span.iter().flat_map(|&s| evidence.tokens[s].iter());
    let claim_negated = claim
        .tokens
        .iter()
        .any(|t| text::is_negation(claim.text, t));
    // Each distinct claim word judged once, in one pass over the sentence: evidence pasted
    // without punctuation makes sentences of thousands of tokens.
    let mut claim_words: Vec<&str> = claim
        .tokens
        .iter()
        .filter(|c| c.is_content())
        .map(|c| c.norm.as_str())
        .collect();
    claim_words.sort_unstable();
    claim_words.dedup();
    let span_negated = span.iter().any(|&s| {
        let sentence = || evidence.tokens[s].iter().zip(&evidence.negated[s]);
        claim_words
            .iter()
            .any(|w| text::denied(sentence(), |t| text::same_word(w, &t.norm)))
    });
    if claim_negated != span_negated
        && alignment.focus >= 0.75
        && claim.kind != ClaimKind::ShortAnswer
    {
        f.negation_flip = 1.0;
        reasons.push(reason(
            ReasonKind::NegationFlip,
            if claim_negated {
                "the claim negates what the aligned evidence states"
            } else {
                "the aligned evidence negates what the claim states"
            },
        ));
    }
    let span_words: BTreeSet<&str> = span_tokens().map(|t| t.norm.as_str()).collect();
    // Whether every occurrence of `norm` in the span stands under a negation.
    let negated_in_span = |norm: &str| {
        text::denied(
            span.iter()
                .flat_map(|&s| evidence.tokens[s].iter().zip(&evidence.negated[s])),
            |t| t.norm == norm,
        )
    };
    for (index, token) in claim.tokens.iter().enumerate() {
        if span_words.contains(token.norm.as_str()) {
            continue;
        }
        let opposite = antonym_of(&token.norm)
            .filter(|o| span_words.contains(o.as_str()))
            .or_else(|| {
                NEGATING_PREFIXES.iter().find_map(|p| {
                    let word = token.norm.as_str();
                    let plain = word
                        .strip_prefix(p)
                        .map(|r| r.trim_start_matches('-').to_string());
                    [
                        Some(format!("{p}{word}")),
                        Some(format!("{p}-{word}")),
                        plain,
                    ]
                    .into_iter()
                    .flatten()
                    .find(|w| span_words.contains(w.as_str()) && prefix_opposites(w, word))
                })
            });
        let Some(opposite) = opposite else { continue };
        // Two negations agree: "not rejected" is "accepted", "rejected" is "not accepted".
        if claim_scope[index] != negated_in_span(&opposite) {
            continue;
        }
        f.antonym_flip = 1.0;
        reasons.push(reason(
            ReasonKind::AntonymFlip,
            format!(
                "claim says \"{}\", the evidence says \"{opposite}\"",
                &claim.text[token.start..token.end]
            ),
        ));
    }
}

const ANTONYMS: &[(&str, &str)] = &[
    ("older", "younger"),
    ("oldest", "youngest"),
    ("oldest", "newest"),
    ("before", "after"),
    ("earlier", "later"),
    ("first", "last"),
    ("larger", "smaller"),
    ("largest", "smallest"),
    ("bigger", "smaller"),
    ("higher", "lower"),
    ("highest", "lowest"),
    ("longer", "shorter"),
    ("increase", "decrease"),
    ("increased", "decreased"),
    ("won", "lost"),
    ("win", "lose"),
    ("alive", "dead"),
    ("north", "south"),
    ("east", "west"),
    ("northern", "southern"),
    ("eastern", "western"),
    ("male", "female"),
    ("public", "private"),
    ("true", "false"),
    ("accept", "reject"),
    ("accepted", "rejected"),
    ("allow", "forbid"),
    ("minimum", "maximum"),
    ("above", "below"),
    ("inside", "outside"),
    ("success", "failure"),
    ("succeeded", "failed"),
    ("enabled", "disabled"),
    ("include", "exclude"),
    ("prefix", "suffix"),
    ("uppercase", "lowercase"),
    ("upwards", "downwards"),
    ("upward", "downward"),
    ("recommended", "discouraged"),
    ("same", "different"),
    ("start", "end"),
];

/// The opposite of a word, by the list above, compared on normalised forms.
fn antonym_of(norm: &str) -> Option<String> {
    ANTONYM_NORMS.iter().find_map(|(a, b)| {
        if a == norm {
            Some(b.clone())
        } else if b == norm {
            Some(a.clone())
        } else {
            None
        }
    })
}

static ANTONYM_NORMS: std::sync::LazyLock<Vec<(String, String)>> = std::sync::LazyLock::new(|| {
    let norm = |w: &str| {
        text::tokenize(w)
            .into_iter()
            .next()
            .map_or_else(|| w.to_string(), |t| t.norm)
    };
    ANTONYMS.iter().map(|(a, b)| (norm(a), norm(b))).collect()
});

/// Negating prefixes that make a word's opposite (sensitive / insensitive, blocking /
/// non-blocking, able / unable).
const NEGATING_PREFIXES: &[&str] = &["in", "un", "non", "dis", "im", "ir", "il"];

/// Whether one word is the other with a negating prefix (at least four letters remain, so
/// "in" + "to" is not an opposite).
pub(super) fn prefix_opposites(a: &str, b: &str) -> bool {
    let (long, short) = if a.len() > b.len() { (a, b) } else { (b, a) };
    short.chars().count() >= 4
        && NEGATING_PREFIXES.iter().any(|p| {
            long.strip_prefix(p)
                .map(|rest| rest.trim_start_matches('-'))
                .is_some_and(|rest| rest == short)
        })
}
