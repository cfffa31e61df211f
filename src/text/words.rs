//! Word splitters. Two, because prose and code disagree on what a word is:
//! - [`plain`]: lower-cased runs of letters and digits; an apostrophe or underscore splits
//!   ("Arthur's" → `arthur`, `s`). For answers, questions and evidence in prose (`harness`).
//! - [`identifiers`]: runs of letters, digits and underscores, case kept, so `parse_config`
//!   stays one word for identifier splitting (`context::terms`). Over-long runs (minified code,
//!   hashes) are skipped.
//!
//! Claim verification needs offsets, kinds and numbers too: see [`super::facts`].

use super::stopwords;

/// Lowercase alphanumeric words of `text`, in order. Apostrophes split words, so "Arthur's"
/// yields "arthur" and "s".
pub fn plain(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for ch in text.chars() {
        if ch.is_alphanumeric() {
            current.extend(ch.to_lowercase());
        } else if !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// Content words: [`plain`] without stop words.
pub fn content_words(text: &str) -> Vec<String> {
    plain(text)
        .into_iter()
        .filter(|w| !stopwords::is_english(w))
        .collect()
}

/// SQuAD-style answer normalisation: lowercase, drop punctuation and the articles a/an/the,
/// collapse whitespace.
pub fn normalize_answer(text: &str) -> String {
    plain(text)
        .into_iter()
        .filter(|w| !matches!(w.as_str(), "a" | "an" | "the"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `text` with every run of whitespace replaced by one space and the ends trimmed.
pub fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Words of a text: maximal runs of letters, digits and underscores.
pub fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty() && w.len() <= 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_and_normalisation() {
        assert_eq!(
            plain("Arthur's Magazine (1844)"),
            ["arthur", "s", "magazine", "1844"]
        );
        assert_eq!(normalize_answer("The  Oberoi Group."), "oberoi group");
        assert_eq!(
            content_words("What is the capital of France?"),
            ["capital", "france"]
        );
    }

    #[test]
    fn identifiers_keep_underscores_and_case() {
        let words: Vec<&str> = identifiers("call parse_config(loadConfig)").collect();
        assert_eq!(words, ["call", "parse_config", "loadConfig"]);
    }
}
