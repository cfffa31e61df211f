//! What a query says, before it is split into words: the words about the code, with the
//! bookkeeping a pasted commit message or issue carries taken out, and the text it quotes.
//!
//! - *Bookkeeping*: trailer lines (`Co-authored-by: Name <mail>`, `Signed-off-by: …`), e-mail
//!   addresses, URLs and issue references (`#7433`, `GH-12`). They name people, hosts and
//!   numbers, not code, and matched contributor lists, packaging metadata and any line holding
//!   the same number instead.
//! - *Quoted text*: what stands between backticks or double quotes (an error message, a flag,
//!   an expression) is the text a developer would search for verbatim.

/// The query with bookkeeping removed (see the module documentation).
pub fn searchable(query: &str) -> String {
    let mut out = String::with_capacity(query.len());
    for line in query.lines() {
        if is_trailer(line) {
            continue;
        }
        for (i, word) in line.split(' ').enumerate() {
            if i > 0 {
                out.push(' ');
            }
            if !is_bookkeeping(word) {
                out.push_str(word);
            }
        }
        out.push('\n');
    }
    out
}

/// `Key-by: value` lines git and forges append to a message.
fn is_trailer(line: &str) -> bool {
    let Some((key, _)) = line.trim_start().split_once(": ") else {
        return false;
    };
    let key = key.to_ascii_lowercase();
    !key.contains(' ')
        && key.chars().all(|c| c.is_ascii_alphabetic() || c == '-')
        && (key.ends_with("-by") || matches!(key.as_str(), "cc" | "change-id" | "co-authored"))
}

fn is_bookkeeping(word: &str) -> bool {
    let bare = word.trim_matches(|c: char| {
        matches!(c, '(' | ')' | '[' | ']' | '<' | '>' | ',' | '.' | ';' | ':')
    });
    let email = bare
        .split_once('@')
        .is_some_and(|(user, host)| !user.is_empty() && host.contains('.'));
    let url = bare.contains("://");
    let issue = bare
        .strip_prefix('#')
        .or_else(|| bare.strip_prefix("GH-"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    email || url || issue
}

/// Text the query quotes between backticks or double quotes, trimmed, of at least
/// [`MIN_PHRASE_CHARS`] characters and holding more than one word or a character that is
/// not part of an identifier (a single quoted identifier is already searched as a symbol).
pub fn quoted_phrases(query: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for quote in ['`', '"'] {
        let mut pieces = query.split(quote);
        // Text before the first quote is outside; then inside and outside alternate.
        pieces.next();
        while let Some(inside) = pieces.next() {
            if pieces.next().is_none() && !query.ends_with(quote) {
                // An unclosed quote quotes nothing.
                break;
            }
            let phrase = inside.trim();
            let identifier = phrase.chars().all(|c| c.is_alphanumeric() || c == '_');
            if phrase.chars().count() >= MIN_PHRASE_CHARS
                && !phrase.contains('\n')
                && !identifier
                && !out.iter().any(|p| p == phrase)
            {
                out.push(phrase.to_string());
            }
        }
    }
    out
}

/// Shorter quoted text (`-C`, `'@'`) is found in too many places to point anywhere.
pub const MIN_PHRASE_CHARS: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bookkeeping_leaves_the_query() {
        let query = "Fix `prepare_body` stream detection (#7433)\n\nSee https://example.com/x for more.\n\nCo-authored-by: Nate P <nate@example.com>\nSigned-off-by: someone <a@b.org>\nReported by mail to x@y.io";
        let clean = searchable(query);
        assert!(clean.contains("`prepare_body` stream detection"), "{clean}");
        for gone in ["7433", "example.com", "Nate", "someone", "x@y.io"] {
            assert!(!clean.contains(gone), "{gone} in {clean}");
        }
        assert!(clean.contains("Reported by mail to"));
        // A line that merely contains a colon stays.
        assert!(searchable("fix: flag path separators").contains("flag path separators"));
    }

    #[test]
    fn quoted_phrases_are_multi_word_or_punctuated() {
        let phrases = quoted_phrases(
            "Change `-E, --exclude <pattern>` and \"no such file\" but not `x` or `parse_body`",
        );
        assert_eq!(phrases, ["-E, --exclude <pattern>", "no such file"]);
        assert!(quoted_phrases("an `unclosed quote here").is_empty());
    }
}
