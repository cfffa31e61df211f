//! Exact token counts of joined text, from counts of the parts.
//!
//! A selection's rendered text joins a piece header to a fragment's text, and adjacent
//! fragments of one file to each other. Its exact count is the sum of the parts' counts plus,
//! at each seam the tokenizer does not split at anyway ([`counts_add`]), a correction: the
//! tokens of the few lines around the seam joined, minus those of the same lines apart. The
//! index computes the corrections once, when it counts the fragments, so a warm selection can
//! give its exact count without loading the tokenizer's rank tables (about 0.1 s of CPU, most
//! of a warm `svc context select` of a large tree).
//!
//! Why a window is enough: a line start where [`counts_add`] holds splits the text's tokens
//! into those before and after it, so `count(left + right) − count(left) − count(right)` is the
//! same computed on `left` from its last such split and `right` up to its first. Corrections of
//! two seams around one fragment stay independent when the fragment has such a split between
//! them (its first split for the seam before, its last for the seam after).

use crate::tokens::{Tokenizer, counts_add};

/// How far from a seam (in lines) a split is looked for before giving up.
const MAX_LINES: usize = 16;

/// Line starts of `text` (after each `\n`, excluding 0 and the end).
fn line_starts(text: &str) -> impl DoubleEndedIterator<Item = usize> + '_ {
    text.match_indices('\n')
        .map(|(at, _)| at + 1)
        .filter(move |&at| at < text.len())
}

/// Whether `at` (a line start) splits `text`'s tokens, with a character of the first part's
/// last line before the break (so the split does not depend on what precedes the text) and
/// a non-blank character in the second part (so its leading white space, which decides the
/// split, is the same whatever follows the text). Indented lines split too.
fn splits_at(text: &str, at: usize) -> bool {
    let (head, tail) = text.split_at(at);
    !head.trim_end_matches(['\r', '\n']).is_empty()
        && !tail.trim_start().is_empty()
        && counts_add(head, tail)
}

/// The first split of `text` (within [`MAX_LINES`] lines of its start).
pub fn first_split(text: &str) -> Option<usize> {
    line_starts(text)
        .take(MAX_LINES)
        .find(|&at| splits_at(text, at))
}

/// The last split of `text` (within [`MAX_LINES`] lines of its end).
pub fn last_split(text: &str) -> Option<usize> {
    line_starts(text)
        .rev()
        .take(MAX_LINES)
        .find(|&at| splits_at(text, at))
}

/// How much of `left` a seam's window may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Left {
    /// `left` stands alone (a piece header): its whole text may be the window.
    Whole,
    /// `left` is a fragment whose start splits the tokens in every rendering (each seam that
    /// can precede it adds with no correction): when it has no split of its own (a one-line
    /// `mod job;`), its whole text may be the window, since no other window reaches into it.
    CleanStart,
    /// The window starts at `left`'s last split, and there must be one.
    FromLastSplit,
}

/// `count(left + right) − count(left) − count(right)`, from the lines around the seam.
/// `None` when the correction would not be independent of a neighbouring seam (no split where
/// one is needed, a `left` not ending in a line break, or a `left` of line breaks only).
pub fn correction(left: &str, right: &str, window: Left, tokenizer: &Tokenizer) -> Option<i32> {
    if !left.ends_with('\n') || left.trim_end_matches(['\r', '\n']).is_empty() {
        return None;
    }
    if counts_add(left, right) {
        return Some(0);
    }
    let window_left = match (window, last_split(left)) {
        (Left::Whole, _) => left,
        (_, Some(at)) => &left[at..],
        (Left::CleanStart, None) => left,
        (Left::FromLastSplit, None) => return None,
    };
    let window_right = &right[..first_split(right).unwrap_or(right.len())];
    let joined = tokenizer.count(&format!("{window_left}{window_right}"));
    let apart = tokenizer.count(window_left) + tokenizer.count(window_right);
    Some(joined as i32 - apart as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exact(left: &str, right: &str, tokenizer: &Tokenizer) -> i32 {
        tokenizer.count(&format!("{left}{right}")) as i32
            - tokenizer.count(left) as i32
            - tokenizer.count(right) as i32
    }

    #[test]
    fn corrections_equal_the_whole_texts_counts() {
        let tokenizer = Tokenizer::default();
        let left = "impl A {\n    fn a(&self) -> u8 {\n        1\n    }\n}\n\n";
        let right = "/// Doc of b.\n/// More.\npub fn b() {}\n";
        let joined =
            correction(left, right, Left::FromLastSplit, &tokenizer).expect("a split in left");
        assert_ne!(joined, 0, "`}}\\n\\n///` is one piece");
        assert_eq!(joined, exact(left, right, &tokenizer));
        // A header stands alone: its whole text is the window.
        let header = ">>> src/a.rs#L3-9 (in impl A)\n";
        assert_eq!(
            correction(header, right, Left::Whole, &tokenizer),
            Some(exact(header, right, &tokenizer))
        );
        assert_eq!(
            correction(header, right, Left::FromLastSplit, &tokenizer),
            None
        );
        assert_eq!(correction("\n\n", right, Left::Whole, &tokenizer), None);
        assert_eq!(
            correction("x\n", "y\n", Left::FromLastSplit, &tokenizer),
            Some(0),
            "an additive seam needs no window"
        );
    }

    #[test]
    fn corrections_hold_on_every_seam_of_real_sources() {
        let tokenizer = Tokenizer::default();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut checked = 0;
        for file in ["src/context/index.rs", "src/witness/verify.rs", "README.md"] {
            let text = std::fs::read_to_string(root.join(file)).expect("source");
            // Seams at every 7th line start, as fragment boundaries fall.
            let starts: Vec<usize> = line_starts(&text).step_by(7).collect();
            for pair in starts.windows(3) {
                let (left, right) = (&text[pair[0]..pair[1]], &text[pair[1]..pair[2]]);
                if let Some(joined) = correction(left, right, Left::FromLastSplit, &tokenizer) {
                    assert_eq!(joined, exact(left, right, &tokenizer), "{file}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 200, "{checked}");
    }
}
