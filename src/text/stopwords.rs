//! Stopword lists. Each list exists because its user needs a different notion of "a word that
//! carries nothing":
//! - [`ENGLISH`]: short English function words. For matching a question or query against text
//!   by content words: the fixture model and scorers (`harness`), and the query terms that make
//!   a prose sentence worth keeping (`compress`).
//! - [`FACTS`] (with [`NEGATIONS`]): a longer list for verifying claims (`witness`). It also
//!   drops words that are vague in an encyclopedic claim ("known", "named", "answer",
//!   "about") and keeps negations visible as their own set, since they flip a claim.
//! - [`CODE_SEARCH`]: English function words plus programming keywords (`fn`, `def`, `impl`,
//!   `import`…), which are everywhere in code and so say nothing to BM25 over identifiers
//!   (`context::terms`).

use std::collections::HashSet;
use std::sync::LazyLock;

/// English function words that carry no content. Kept short on purpose: content words are what
/// a question and its evidence must share. Sorted (binary search).
pub const ENGLISH: &[&str] = &[
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been",
    "before", "but", "by", "can", "could", "did", "do", "does", "for", "from", "had", "has",
    "have", "he", "her", "his", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my",
    "no", "not", "of", "on", "or", "our", "s", "she", "so", "than", "that", "the", "their", "them",
    "then", "there", "these", "they", "this", "those", "to", "under", "up", "was", "we", "were",
    "what", "when", "where", "which", "who", "whom", "whose", "why", "will", "with", "would",
    "you", "your",
];

/// Whether `word` (lowercase) is one of [`ENGLISH`].
pub fn is_english(word: &str) -> bool {
    ENGLISH.binary_search(&word).is_ok()
}

/// Claim verification's stop words (see the module docs). They are looked up by the
/// normalised (stemmed) token, so each is written as [`super::stem::facts`] leaves it; a test
/// keeps it so. The list once also held 35 words the stemmer changes ("does", "there",
/// "where", "because", "including", "false", "approximately" …), which never matched; they were
/// taken out so the list says what the witness does. Matching them by their spelling was
/// measured twice and not kept (design AUROC down 0.006–0.008 with the weights refitted):
/// relation words such as "where", "because" and "does" are what the exchange and negation
/// features read, so they stay content words (docs/witness.md).
pub const FACTS: &[&str] = &[
    "a", "about", "after", "again", "against", "all", "also", "am", "an", "and", "any", "are",
    "as", "at", "be", "been", "being", "below", "between", "both", "but", "by", "can", "could",
    "did", "do", "doing", "down", "during", "each", "either", "etc", "every", "few", "for", "from",
    "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him",
    "himself", "his", "how", "however", "i", "if", "in", "into", "is", "it", "its", "itself",
    "just", "let", "may", "me", "might", "mine", "must", "my", "myself", "now", "of", "off", "on",
    "once", "one", "only", "onto", "or", "other", "our", "ours", "out", "over", "own", "per",
    "same", "shall", "she", "should", "so", "some", "such", "than", "that", "the", "their",
    "theirs", "them", "then", "they", "this", "through", "thus", "to", "too", "under", "until",
    "up", "upon", "us", "very", "via", "was", "we", "were", "what", "whatever", "when", "whether",
    "which", "who", "whom", "why", "will", "with", "within", "would", "yes", "you", "your",
    "yours", "s", "t", "known", "named", "name", "well", "many", "much", "most", "more", "less",
    "least", "still", "yet", "already", "ever", "often", "based", "like", "among", "across",
    "around", "along", "toward", "towards", "another", "several", "various", "certain", "kind",
    "type", "sort", "part", "overall", "answer", "question", "correct", "true", "almost",
];

/// Words that flip a claim's polarity. They are stop words for coverage but are tracked.
pub const NEGATIONS: &[&str] = &[
    "not", "no", "never", "neither", "nor", "none", "nobody", "cannot", "without", "n't",
];

static STOP_SET: LazyLock<HashSet<&'static str>> =
    LazyLock::new(|| FACTS.iter().chain(NEGATIONS).copied().collect());

/// Whether a normalised word is a stop word (negations included). Single letters (initials,
/// the pieces of "U.S.") carry too little to verify.
pub fn is_fact_stop(norm: &str) -> bool {
    STOP_SET.contains(norm)
        || (norm.chars().count() == 1 && !norm.starts_with(|c: char| c.is_ascii_digit()))
}

/// Words BM25 over code skips (see the module docs).
pub const CODE_SEARCH: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "if", "in", "into", "is", "it",
    "its", "of", "on", "or", "that", "the", "this", "to", "with", "fn", "def", "let", "mut", "pub",
    "self", "use", "return", "else", "var", "const", "function", "impl", "struct", "class", "true",
    "false", "none", "null", "void", "int", "str", "string", "crate", "super", "where", "which",
    "what", "how", "does", "do", "when", "then", "there", "we", "you", "can", "will", "should",
    "would", "given", "code", "func", "package", "import",
];

/// Whether a lower-cased, stemmed identifier part is one of [`CODE_SEARCH`].
pub fn is_code_search(word: &str) -> bool {
    CODE_SEARCH.contains(&word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn english_is_sorted_for_binary_search() {
        let mut sorted = ENGLISH.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, ENGLISH);
        assert!(is_english("the") && !is_english("delhi"));
    }

    #[test]
    fn fact_stop_words_are_searchable() {
        for word in FACTS.iter().chain(NEGATIONS) {
            assert!(is_fact_stop(word), "{word}");
        }
        assert!(!is_fact_stop("magazine"));
        // Looked up by stem: a word the stemmer changes could never match.
        for word in FACTS.iter().chain(NEGATIONS) {
            let stem = super::super::stem::facts(word);
            assert!(
                is_fact_stop(&stem),
                "{word} stems to {stem}, which is not listed"
            );
        }
        assert!(is_code_search("impl") && !is_code_search("parse"));
    }
}
