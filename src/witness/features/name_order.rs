//! Names made up from a passage's words: "the Day of Remembrance" where the evidence says
//! "Remembrance Day", "San Diego Gulls" where it names San Diego and, elsewhere, the Gulls.
//! Every word of such a name is in the evidence, so coverage cannot see it; what the evidence
//! lacks is the name itself, its words together and in the claim's order.
//!
//! A name is a run of at least two capitalised claim words, joined by spaces or by the
//! particles names are built with ("of", "de", "von"); a comma, a bracket or "and" ends it, so
//! each member of a list is a name of its own. The evidence holds the name when one of its
//! sentences has the name's words in order, each within [`MAX_GAP`] tokens of the one before:
//! a middle name or an initial may stand between ("Ekaterina Alexandrovna Gordeeva"). A title
//! before a name ("President Barack Obama") may stand elsewhere in the sentence when the rest
//! of the name is held in order.

use super::super::text::{self, Token, TokenKind};

/// Tokens allowed between two words of a name in the evidence (a middle name, an initial, a
/// particle).
const MAX_GAP: usize = 3;

/// Words that join the parts of one name ("Bank of America", "Ludwig van Beethoven").
const PARTICLES: &[&str] = &[
    "of", "the", "de", "del", "della", "der", "den", "di", "da", "du", "la", "le", "van", "von",
];

/// The claim's names: for each, the token indices of its capitalised words.
fn names(text: &str, tokens: &[Token]) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    let mut pending_particles = 0usize;
    let close = |current: &mut Vec<usize>, out: &mut Vec<Vec<usize>>| {
        if current.len() >= 2 {
            out.push(std::mem::take(current));
        } else {
            current.clear();
        }
    };
    for (i, token) in tokens.iter().enumerate() {
        let joined = i > 0
            && text[tokens[i - 1].end..token.start]
                .chars()
                .all(char::is_whitespace);
        if !joined {
            close(&mut current, &mut out);
            pending_particles = 0;
        }
        if token.kind == TokenKind::Entity && token.is_content() {
            current.push(i);
            pending_particles = 0;
        } else if !current.is_empty()
            && pending_particles < 2
            && PARTICLES
                .iter()
                .any(|p| p.eq_ignore_ascii_case(&text[token.start..token.end]))
        {
            pending_particles += 1;
        } else {
            close(&mut current, &mut out);
            pending_particles = 0;
        }
    }
    close(&mut current, &mut out);
    out
}

/// Whether `sentence` holds the words `name` in order, each within [`MAX_GAP`] tokens of the
/// one before.
fn holds_in_order(sentence: &[Token], name: &[&str]) -> bool {
    let Some((first, rest)) = name.split_first() else {
        return true;
    };
    sentence
        .iter()
        .enumerate()
        .filter(|(_, t)| text::fuzzy_eq(&t.norm, first))
        .any(|(start, _)| {
            let mut at = start;
            rest.iter().all(|word| {
                let next = sentence
                    .iter()
                    .enumerate()
                    .skip(at + 1)
                    .take(MAX_GAP + 1)
                    .find(|(_, t)| text::fuzzy_eq(&t.norm, word));
                next.map(|(j, _)| at = j).is_some()
            })
        })
}

/// The first claim name whose words the evidence all holds, though no sentence holds them
/// together in order; as its surface. `holding` gives the evidence sentences holding a claim
/// token's word (empty when none does): only those holding the name's last word can hold the
/// name, so long evidence is not scanned sentence by sentence.
pub(in crate::witness) fn scattered_name<'a>(
    claim_text: &str,
    claim: &[Token],
    sentences: &[Vec<Token>],
    holding: impl Fn(&Token) -> &'a [usize],
) -> Option<String> {
    names(claim_text, claim).into_iter().find_map(|name| {
        if name.iter().any(|&i| holding(&claim[i]).is_empty()) {
            return None;
        }
        let words: Vec<&str> = name.iter().map(|&i| claim[i].norm.as_str()).collect();
        let held = |s: &Vec<Token>| {
            holds_in_order(s, &words)
                // A title before a name ("President Barack Obama" against "Barack Obama was
                // the 44th President"): the name without its first word is held in order, and
                // the first word stands in the same sentence.
                || words.len() >= 3
                    && holds_in_order(s, &words[1..])
                    && s.iter().any(|t| text::fuzzy_eq(&t.norm, words[0]))
        };
        let last = &claim[name[name.len() - 1]];
        let candidates = holding(last);
        (!candidates
            .iter()
            .filter_map(|&s| sentences.get(s))
            .any(held))
        .then(|| {
            let first = &claim[name[0]];
            claim_text[first.start..last.end].to_string()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::super::super::text::{tokenize, tokenize_answer};
    use super::*;

    fn check(claim: &str, evidence: &[&str]) -> Option<String> {
        let sentences: Vec<Vec<Token>> = evidence.iter().map(|s| tokenize(s)).collect();
        let tokens = tokenize_answer(claim);
        let holding: Vec<Vec<usize>> = tokens
            .iter()
            .map(|t| {
                (0..sentences.len())
                    .filter(|&s| {
                        sentences[s]
                            .iter()
                            .any(|e| text::fuzzy_eq(&e.norm, &t.norm))
                    })
                    .collect()
            })
            .collect();
        let of = |t: &Token| {
            let i = tokens
                .iter()
                .position(|x| x.start == t.start)
                .expect("a claim token");
            holding[i].as_slice()
        };
        scattered_name(claim, &tokens, &sentences, of)
    }

    #[test]
    fn a_name_whose_words_stand_apart_or_reversed_is_scattered() {
        let evidence = [
            "The phrase is used on Remembrance Day and ANZAC Day.",
            "Anzac Day is observed on 25 April.",
        ];
        assert_eq!(
            check("The Day of Remembrance", &evidence).as_deref(),
            Some("Day of Remembrance")
        );
        assert!(
            check(
                "The San Diego Gulls",
                &["He played in San Diego for two long and happy years before the Gulls signed him."]
            )
            .is_some()
        );
    }

    #[test]
    fn names_the_evidence_holds_in_order_are_not_scattered() {
        let evidence = ["Ekaterina Alexandrovna Gordeeva won with Sergei Grinkov in 1988."];
        assert_eq!(check("Ekaterina Gordeeva", &evidence), None);
        assert_eq!(check("Sergei Grinkov", &evidence), None);
        assert_eq!(
            check(
                "The University of Toronto",
                &["He helped found the University of Toronto."]
            ),
            None
        );
        // A title before a name the sentence holds, the title standing elsewhere in it.
        assert_eq!(
            check(
                "It was signed by President Barack Obama",
                &["Barack Obama was the 44th President of the United States."]
            ),
            None
        );
        // A word found nowhere is for missing-name features; one-word names have no order.
        assert_eq!(check("Sergei Ivanov", &evidence), None);
        assert_eq!(check("Grinkov", &evidence), None);
        // Members of a list are names of their own.
        assert_eq!(
            check(
                "Paul Dano, Zooey Deschanel",
                &["Zooey Deschanel starred.", "Paul Dano starred."]
            ),
            None
        );
    }
}
