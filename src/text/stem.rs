//! Suffix strippers. Three, because three users need different trade-offs, and each is frozen
//! by figures measured with it:
//! - [`crude`]: `ing`/`ed`/`es`/`s` off words longer than four letters, for the fixture model
//!   and scorers (`harness`); the committed benchmark baselines are defined with it.
//! - [`search_in_place`]: also `ies` → `y` and a final `e`, in place on a reused buffer, for
//!   identifier parts in BM25 (`context::terms`), where every byte of a million-token index
//!   is stemmed and `parse`/`parsing`/`parsed` must meet.
//! - [`facts`]: possessives, `ation`/`ment`/`ly`/`edly` and doubled consonants too, for claim
//!   verification (`witness`), where "starred"/"starring"/"stars" must meet.

/// A light suffix stripper so "thickens"/"thicken" and "brewed"/"brews" meet: drops a final
/// `ing`, `ed`, `es` or `s` from words longer than four letters. Deterministic and crude on
/// purpose; it is used for matching, never shown.
pub fn crude(word: &str) -> &str {
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

/// A light suffix stemmer so `parse`, `parses`, `parsing` and `parsed` all meet at `pars`.
pub fn search_in_place(word: &mut String) {
    if !word.is_ascii() || word.len() <= 3 {
        return;
    }
    if word.ends_with("ies") && word.len() >= 5 {
        word.truncate(word.len() - 3);
        word.push('y');
        return;
    }
    for suffix in ["ing", "ed", "es", "s"] {
        if word.ends_with(suffix) {
            let base = word.len() - suffix.len();
            if base >= 3 && !(suffix == "s" && word.as_bytes()[base - 1] == b's') {
                word.truncate(base);
                break;
            }
        }
    }
    if word.len() > 3 && word.ends_with('e') {
        word.pop();
    }
}

/// Light suffix stripping: plural, possessive and common inflectional forms share a stem
/// ("starred", "starring" and "stars" all become "star"; "located" and "locates" "locat").
pub fn facts(word: &str) -> String {
    let word = word
        .strip_suffix("'s")
        .or_else(|| word.strip_suffix("\u{2019}s"))
        .unwrap_or(word);
    let word = word.trim_end_matches(['\'', '\u{2019}']);
    if !word.is_ascii() {
        return word.to_string();
    }
    let mut w = word.to_string();
    if w.len() > 4 && w.ends_with("ies") {
        w.truncate(w.len() - 3);
        w.push('y');
        return w;
    }
    if w.len() > 3
        && w.ends_with('s')
        && !w.ends_with("ss")
        && !w.ends_with("us")
        && !w.ends_with("is")
    {
        w.pop();
    }
    for suffix in ["ations", "ation", "ings", "ing", "edly", "ed", "ly", "ment"] {
        if w.len() >= suffix.len() + 4 && w.ends_with(suffix) {
            w.truncate(w.len() - suffix.len());
            // "starr" -> "star", "located" -> "locat"; a final "e" goes too ("produce").
            let b = w.as_bytes();
            if b.len() >= 2
                && b[b.len() - 1] == b[b.len() - 2]
                && !matches!(b[b.len() - 1], b'l' | b's' | b'z')
            {
                w.pop();
            }
            return w;
        }
    }
    if w.len() > 4 && w.ends_with('e') {
        w.pop();
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_variant_meets_its_inflections() {
        assert_eq!(crude("thickens"), "thicken");
        assert_eq!(crude("brewed"), "brew");
        let mut word = String::from("parsing");
        search_in_place(&mut word);
        assert_eq!(word, "pars");
        assert_eq!(facts("starred"), "star");
        assert_eq!(facts("locates"), "locat");
    }
}
