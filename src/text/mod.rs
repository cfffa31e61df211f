//! The one text toolkit: word and identifier splitting, stopwords, stemming, sentence
//! splitting and claim tokens, shared by the witness, the harness's fixture model and scorers,
//! BM25 over code (`context::terms`) and prose compression.
//!
//! Where users need different behaviour there is one named variant per purpose, and each
//! submodule says why its variants exist. Behaviour is frozen where figures were measured with
//! it: changing a variant moves the figures of its users (witness flags, localisation, the
//! benchmark gate), so a change is measured first.

pub mod facts;
pub mod sentences;
pub mod stem;
pub mod stopwords;
pub mod words;

/// Where text stops being UTF-8: the 1-based line and column (in characters, as editors count
/// them) of the first invalid byte, from the error of `String::from_utf8`.
pub fn utf8_error_position(error: &std::string::FromUtf8Error) -> (usize, usize) {
    let valid = &error.as_bytes()[..error.utf8_error().valid_up_to()];
    let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = valid.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    // The prefix is valid UTF-8 by construction, so the lossy read is exact.
    let column = String::from_utf8_lossy(&valid[line_start..])
        .chars()
        .count()
        + 1;
    (line, column)
}

/// `text` without a leading byte-order mark: a file's encoding signature, not its content (a
/// JSON parser refuses it at line 1, column 1, and a line reader takes it for text).
pub fn without_bom(text: &str) -> &str {
    text.strip_prefix('\u{feff}').unwrap_or(text)
}

/// Whether `text` shows nothing: only white space and invisible format characters (zero-width
/// space and joiners, word joiner, byte-order mark), which `str::trim` keeps.
pub fn is_blank(text: &str) -> bool {
    text.chars().all(|c| {
        c.is_whitespace() || matches!(c, '\u{200B}'..='\u{200D}' | '\u{2060}' | '\u{FEFF}')
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn blank_text_includes_invisible_format_characters() {
        assert!(super::is_blank(" \t\u{a0}\n"));
        assert!(super::is_blank("\u{200b}\n\u{feff}"));
        assert!(!super::is_blank("\u{200b}a"));
    }

    #[test]
    fn utf8_errors_are_placed_by_line_and_character_column() {
        let at = |bytes: &[u8]| {
            super::utf8_error_position(&String::from_utf8(bytes.to_vec()).expect_err("invalid"))
        };
        assert_eq!(at(b"\xe9"), (1, 1));
        assert_eq!(at(b"first line\nca\xe9 au lait\n"), (2, 3));
        // "\u{e9}t\u{e9} " is four characters, six bytes.
        assert_eq!(at(b"\xc3\xa9t\xc3\xa9 \xe9\n"), (1, 5));
    }
}
