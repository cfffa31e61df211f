//! Small, deterministic text helpers shared by the fixture model, the scorers and the coverage
//! claim checker: word splitting, normalisation, stop words and sentence splitting. Keeping them
//! in one place means "a word" means the same thing to the model that answers and to the scorer
//! that grades it.

/// English function words that carry no content. Kept short on purpose: content words are what
/// a question and its evidence must share.
const STOP_WORDS: &[&str] = &[
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been",
    "before", "but", "by", "can", "could", "did", "do", "does", "for", "from", "had", "has",
    "have", "he", "her", "his", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my",
    "no", "not", "of", "on", "or", "our", "s", "she", "so", "than", "that", "the", "their", "them",
    "then", "there", "these", "they", "this", "those", "to", "under", "up", "was", "we", "were",
    "what", "when", "where", "which", "who", "whom", "whose", "why", "will", "with", "would",
    "you", "your",
];

/// Whether `word` (lowercase) is a stop word.
pub fn is_stop_word(word: &str) -> bool {
    STOP_WORDS.binary_search(&word).is_ok()
}

/// Lowercase alphanumeric words of `text`, in order. Apostrophes split words, so "Arthur's"
/// yields "arthur" and "s".
pub fn words(text: &str) -> Vec<String> {
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

/// A light suffix stripper so "thickens"/"thicken" and "brewed"/"brews" meet: drops a final
/// `ing`, `ed`, `es` or `s` from words longer than four letters. Deterministic and crude on
/// purpose; it is used for matching, never shown.
pub fn stem(word: &str) -> &str {
    if word.len() <= 4 || !word.is_ascii() {
        return word;
    }
    for suffix in ["ing", "ed", "es", "s"] {
        if let Some(rest) = word.strip_suffix(suffix)
            && !rest.ends_with('s')
            && rest.len() >= 3
        {
            return rest;
        }
    }
    word
}

/// Content words: [`words`] without stop words.
pub fn content_words(text: &str) -> Vec<String> {
    words(text)
        .into_iter()
        .filter(|w| !is_stop_word(w))
        .collect()
}

/// SQuAD-style answer normalisation: lowercase, drop punctuation and the articles a/an/the,
/// collapse whitespace.
pub fn normalize_answer(text: &str) -> String {
    words(text)
        .into_iter()
        .filter(|w| !matches!(w.as_str(), "a" | "an" | "the"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `text` with every run of whitespace replaced by one space and the ends trimmed.
pub fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Sentences of `text` as byte ranges into it: split after `.`, `?` or `!` followed by
/// whitespace or an uppercase letter (HaluEval glues paragraphs as "century.First"), and at
/// line breaks. Empty pieces are dropped.
pub fn sentences(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut start = 0usize;
    let mut i = 0usize;
    while i < bytes.len() {
        let b = bytes[i];
        let boundary = match b {
            b'\n' => Some(i),
            b'.' | b'?' | b'!' => {
                let next = bytes.get(i + 1).copied();
                let after_next = bytes.get(i + 2).copied();
                // "U.S." and "J. Smith": a single capital letter before the dot is an initial.
                let initial = b == b'.'
                    && i > 0
                    && bytes[i - 1].is_ascii_uppercase()
                    && (i == 1 || !bytes[i - 2].is_ascii_alphanumeric());
                match next {
                    _ if initial => None,
                    None => Some(i + 1),
                    Some(n) if n.is_ascii_whitespace() => Some(i + 1),
                    // "century.First": a glued paragraph; "3.5" is a number, not a boundary.
                    Some(n) if n.is_ascii_uppercase() => {
                        // "U.S." style abbreviations are single letters between dots.
                        if after_next == Some(b'.') {
                            None
                        } else {
                            Some(i + 1)
                        }
                    }
                    _ => None,
                }
            }
            _ => None,
        };
        if let Some(end) = boundary {
            let piece = text[start..end].trim();
            if !piece.is_empty() {
                out.push(piece);
            }
            start = end;
            if b == b'\n' {
                start = i + 1;
            }
        }
        i += 1;
    }
    let piece = text[start.min(text.len())..].trim();
    if !piece.is_empty() {
        out.push(piece);
    }
    out
}

pub use crate::rng::SplitMix64;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_words_are_sorted_for_binary_search() {
        let mut sorted = STOP_WORDS.to_vec();
        sorted.sort_unstable();
        assert_eq!(sorted, STOP_WORDS);
        assert!(is_stop_word("the") && !is_stop_word("delhi"));
    }

    #[test]
    fn words_and_normalisation() {
        assert_eq!(
            words("Arthur's Magazine (1844)"),
            ["arthur", "s", "magazine", "1844"]
        );
        assert_eq!(normalize_answer("The  Oberoi Group."), "oberoi group");
        assert_eq!(
            content_words("What is the capital of France?"),
            ["capital", "france"]
        );
    }

    #[test]
    fn sentences_split_glued_paragraphs_but_not_numbers() {
        let text = "It cost 3.5 dollars. It was built in 1844.First for Women is new.\nNext line";
        assert_eq!(
            sentences(text),
            [
                "It cost 3.5 dollars.",
                "It was built in 1844.",
                "First for Women is new.",
                "Next line"
            ]
        );
        assert_eq!(
            sentences("Published in the U.S. in 1990.Then"),
            ["Published in the U.S. in 1990.", "Then"]
        );
        let glued = "in the 19th century.First for Women";
        assert_eq!(
            sentences(glued),
            ["in the 19th century.", "First for Women"]
        );
    }

    #[test]
    fn splitmix_is_deterministic() {
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        let xs: Vec<u64> = (0..5).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..5).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        let mut items: Vec<u32> = (0..10).collect();
        SplitMix64::new(1).shuffle(&mut items);
        let mut sorted = items.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
    }
}
