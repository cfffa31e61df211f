//! Arguments exchanged across a relation: "session parameters override method-level ones"
//! against "method-level parameters override session ones". Every word of such a claim is in
//! the evidence sentence, so coverage cannot see it; only which side of the relation word each
//! argument stands on differs.
//!
//! The test is relative to a pivot, a relation word the claim and the sentence each hold once:
//! the claim exchanges arguments when its nearest words on either side of the pivot (of those
//! both texts hold once) are the sentence's nearest on the other sides. Only the nearest count:
//! paraphrase reorders further out (a clause moved to the other end, "the server's content"
//! as "content from the server", an adverb moved), and a looser test that let any word cross
//! fired on right paraphrases as often as on reversals. A pivot after an article is a noun
//! ("starting the server gives an error" against "an error when the server starts"), whose
//! neighbours a paraphrase rearranges freely. A change of voice ("X is used by Y"
//! against "Y uses X") exchanges the arguments and keeps the meaning, so it does not count.

use super::super::text::{self, Token, TokenKind};

/// Function words that order their two arguments ("from the oldest to the newest", "more
/// than"): pivots like a content word, though stop words otherwise.
const ORDERING_WORDS: &[&str] = &["to", "than"];

/// Claims longer than this are not sentences: the pairwise search is skipped on them.
const MAX_CLAIM_TOKENS: usize = 80;

/// An exchange found: the claim's token indices of the pivot, of a word it moved from the
/// pivot's left to its right, and of one it moved the other way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::witness) struct Exchange {
    pub(in crate::witness) pivot: usize,
    pub(in crate::witness) rightward: usize,
    pub(in crate::witness) leftward: usize,
}

/// The first exchange of arguments between `claim` and the evidence `sentence`, if any.
pub(in crate::witness) fn exchanged_arguments(
    claim: &[Token],
    sentence: &[Token],
) -> Option<Exchange> {
    if claim.len() > MAX_CLAIM_TOKENS {
        return None;
    }
    // The one place of a claim token in the sentence, when it occurs once on each side:
    // a repeated word has no side.
    let place = |i: usize| -> Option<usize> {
        let norm = &claim[i].norm;
        if claim.iter().filter(|t| &t.norm == norm).count() != 1 {
            return None;
        }
        let mut hits = sentence
            .iter()
            .enumerate()
            .filter(|(_, e)| text::fuzzy_eq(&e.norm, norm));
        let (at, _) = hits.next()?;
        hits.next().is_none().then_some(at)
    };
    let places: Vec<Option<usize>> = (0..claim.len())
        .map(|i| claim[i].is_content().then(|| place(i)).flatten())
        .collect();
    // The claim word placed at each sentence position.
    let mut placed_from: Vec<Option<usize>> = vec![None; sentence.len()];
    for (k, p) in places.iter().enumerate() {
        if let Some(p) = *p {
            placed_from[p] = Some(k);
        }
    }
    // The arguments next to a position: the nearest words both texts hold once, on each side.
    let claim_side =
        |from: usize, forward: bool| nearest(claim.len(), from, forward, |k| places[k].is_some());
    let sentence_side = |from: usize, forward: bool| {
        nearest(sentence.len(), from, forward, |p| placed_from[p].is_some())
            .and_then(|p| placed_from[p])
    };
    for (pivot, token) in claim.iter().enumerate() {
        let is_relation = (token.is_content() && token.kind == TokenKind::Word)
            || ORDERING_WORDS.contains(&token.norm.as_str());
        if !is_relation {
            continue;
        }
        // Content words were placed above; only an ordering word needs placing here.
        let placed = if token.is_content() {
            places[pivot]
        } else {
            place(pivot)
        };
        let Some(at) = placed else {
            continue;
        };
        if after_article(claim, pivot) || after_article(sentence, at) {
            continue;
        }
        if passive_after(claim, pivot) != passive_after(sentence, at) {
            continue;
        }
        let (Some(left), Some(right)) = (claim_side(pivot, false), claim_side(pivot, true)) else {
            continue;
        };
        let (Some(before), Some(after)) = (sentence_side(at, false), sentence_side(at, true))
        else {
            continue;
        };
        // Both texts' neighbours of the pivot stand on the other side in the other text.
        let crossed = |k: usize, left_in_claim: bool| {
            places[k].is_some_and(|p| (p < at) != left_in_claim) && (k < pivot) == left_in_claim
        };
        if crossed(left, true)
            && crossed(right, false)
            && crossed(before, false)
            && crossed(after, true)
        {
            return Some(Exchange {
                pivot,
                rightward: left,
                leftward: right,
            });
        }
    }
    None
}

/// Whether the token at `i` follows an article: a noun, an argument rather than a relation.
fn after_article(tokens: &[Token], i: usize) -> bool {
    i.checked_sub(1)
        .is_some_and(|k| matches!(tokens[k].norm.as_str(), "the" | "a" | "an"))
}

/// The nearest index before (or after, when `forward`) `from` in `0..len` that `keep` accepts.
fn nearest(len: usize, from: usize, forward: bool, keep: impl Fn(usize) -> bool) -> Option<usize> {
    if forward {
        (from + 1..len).find(|&k| keep(k))
    } else {
        (0..from).rev().find(|&k| keep(k))
    }
}

/// Whether "by" follows the word at `i` within two tokens: the passive voice names its agent
/// after the verb, on the other side from the active voice.
fn passive_after(tokens: &[Token], i: usize) -> bool {
    tokens.iter().skip(i + 1).take(2).any(|t| t.norm == "by")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exchange(claim: &str, sentence: &str) -> Option<(String, String, String)> {
        let claim_tokens = text::tokenize(claim);
        let found = exchanged_arguments(&claim_tokens, &text::tokenize(sentence))?;
        let surface = |i: usize| claim[claim_tokens[i].start..claim_tokens[i].end].to_string();
        Some((
            surface(found.pivot),
            surface(found.rightward),
            surface(found.leftward),
        ))
    }

    #[test]
    fn arguments_on_opposite_sides_of_the_relation_are_an_exchange() {
        let (pivot, _, _) = exchange(
            "Session parameters override method-level parameters.",
            "The method-level parameters override session parameters.",
        )
        .expect("exchange");
        assert_eq!(pivot, "override");
        let (pivot, right, left) = exchange(
            "The list is sorted from the newest to the oldest response.",
            "The list is sorted from the oldest to the newest response.",
        )
        .expect("exchange");
        assert_eq!(
            (pivot.as_str(), right.as_str(), left.as_str()),
            ("to", "newest", "oldest")
        );
    }

    #[test]
    fn the_same_order_a_moved_clause_or_another_voice_is_no_exchange() {
        assert_eq!(
            exchange(
                "Method-level parameters override session parameters.",
                "The method-level parameters override session parameters.",
            ),
            None
        );
        // A clause moved to the other end crosses every pivot in one direction only.
        assert_eq!(
            exchange(
                "By default the body of the response is downloaded immediately.",
                "The body of the response is downloaded immediately by default.",
            ),
            None
        );
        assert_eq!(
            exchange(
                "When the cache is cold, the server reads every file.",
                "The server reads every file when the cache is cold.",
            ),
            None
        );
        // The passive names its agent on the other side and means the same.
        assert_eq!(
            exchange(
                "Session parameters are overridden by method-level parameters.",
                "Method-level parameters override session parameters.",
            ),
            None
        );
    }
}
