//! Sentence splitters. Four, because their users need different things from a sentence:
//! - [`per_line`]: every line is a sentence too, and pieces are trimmed `&str`s. For the
//!   fixture model and scorers (`harness`), whose contexts hold one fact per line.
//! - [`evidence`]: byte spans of trimmed sentences where only a blank line ends a paragraph
//!   (evidence pasted from web pages wraps lines mid-sentence), with common abbreviations
//!   (`Dr.`, `Inc.`, `etc.`) kept whole. For claim verification (`witness`).
//! - [`markdown`]: a partition of the whole text (every byte in exactly one piece, trailing
//!   whitespace included) where headings, list items, quotes and table rows are pieces of
//!   their own. For prose compression (`compress`), whose elided pieces must concatenate back
//!   to the original.
//! - [`in_line`]: a partition of one line, each sentence with its punctuation (`…` too) and
//!   the spaces after it. For distillation (`context::distill`), which drops whole sentences
//!   of a line and must leave every other byte as it was.
//!
//! All four end a sentence at `.`, `!` or `?` followed by white space; they differ in what
//! else ends one, as said above.

/// Sentences of `text` as byte ranges into it: split after `.`, `?` or `!` followed by
/// whitespace or an uppercase letter (HaluEval glues paragraphs as "century.First"), and at
/// line breaks. Empty pieces are dropped.
pub fn per_line(text: &str) -> Vec<&str> {
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

/// A sentence of a text, by byte range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

/// Split `text` into sentences. A sentence ends at `.`, `!` or `?` followed by white space or an
/// upper-case letter (evidence pasted from several pages often lacks the space), at a
/// full-width `。`, `！` or `？`, or at a blank line. Abbreviation-like periods (a single capital before the dot, or a digit after it) do not
/// end a sentence.
pub fn evidence(text: &str) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut start = 0;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (pos, c) = chars[i];
        let next = chars.get(i + 1).map(|x| x.1);
        let boundary = match c {
            '.' | '!' | '?' => {
                let prev_word: String = chars[..i]
                    .iter()
                    .rev()
                    .take_while(|(_, ch)| ch.is_alphanumeric())
                    .map(|(_, ch)| *ch)
                    .collect();
                let abbreviation = c == '.'
                    && (prev_word.chars().count() == 1
                        && prev_word.chars().all(char::is_uppercase)
                        || matches!(
                            prev_word.chars().rev().collect::<String>().as_str(),
                            "Mr" | "Mrs"
                                | "Ms"
                                | "Dr"
                                | "St"
                                | "Jr"
                                | "Sr"
                                | "vs"
                                | "No"
                                | "Co"
                                | "Inc"
                                | "Ltd"
                                | "Mt"
                                | "Ph"
                                | "etc"
                        ));
                !abbreviation
                    && match next {
                        None => true,
                        Some(n) => n.is_whitespace() || n.is_uppercase() || n == '"',
                    }
            }
            '\n' => next == Some('\n'),
            // Full-width terminators (Chinese, Japanese): writing without spaces, they end a
            // sentence whatever follows.
            '。' | '！' | '？' => true,
            _ => false,
        };
        if boundary {
            let end = pos + c.len_utf8();
            push_trimmed(text, start, end, &mut spans);
            start = end;
        }
        i += 1;
    }
    push_trimmed(text, start, text.len(), &mut spans);
    spans
}

fn push_trimmed(text: &str, start: usize, end: usize, spans: &mut Vec<Span>) {
    let slice = &text[start..end];
    let trimmed_start = start + (slice.len() - slice.trim_start().len());
    let trimmed_end = end - (slice.len() - slice.trim_end().len());
    if trimmed_end > trimmed_start {
        spans.push(Span {
            start: trimmed_start,
            end: trimmed_end,
        });
    }
}

/// One piece of a [`markdown`] partition: bytes `start..end`, lines `first_line..=last_line`
/// (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece {
    pub start: usize,
    pub end: usize,
    pub first_line: usize,
    pub last_line: usize,
}

/// Each line (with its line break) as a piece.
fn line_pieces(source: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut start = 0;
    for (index, line) in source.split_inclusive('\n').enumerate() {
        out.push(Piece {
            start,
            end: start + line.len(),
            first_line: index + 1,
            last_line: index + 1,
        });
        start += line.len();
    }
    out
}

fn is_structural(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with('#')
        || t.starts_with("- ")
        || t.starts_with("* ")
        || t.starts_with("> ")
        || t.starts_with('|')
        || t.starts_with("```")
        || t.split_once(". ")
            .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Sentences as a partition of `source`, each with its trailing whitespace. A sentence ends at `.`, `!` or `?`
/// followed by whitespace, at a blank line, or where a structural line (heading, list item,
/// quote, table row) starts or ends.
pub fn markdown(source: &str) -> Vec<Piece> {
    let lines = line_pieces(source);
    let mut out: Vec<Piece> = Vec::new();
    let mut open: Option<(usize, usize)> = None; // (start byte, first line)
    let close =
        |out: &mut Vec<Piece>, open: &mut Option<(usize, usize)>, end: usize, line: usize| {
            if let Some((start, first_line)) = open.take()
                && end > start
            {
                out.push(Piece {
                    start,
                    end,
                    first_line,
                    last_line: line,
                });
            }
        };
    for (index, line_unit) in lines.iter().enumerate() {
        let line = &source[line_unit.start..line_unit.end];
        let number = line_unit.first_line;
        if line.trim().is_empty() {
            // Blank lines attach to the sentence before them (or start the first unit).
            if open.is_none() {
                if let Some(last) = out.last_mut() {
                    last.end = line_unit.end;
                    last.last_line = number;
                    continue;
                }
                open = Some((line_unit.start, number));
            }
            close(&mut out, &mut open, line_unit.end, number);
            continue;
        }
        let structural = is_structural(line);
        if structural {
            close(
                &mut out,
                &mut open,
                line_unit.start,
                number.saturating_sub(1).max(1),
            );
            out.push(*line_unit);
            continue;
        }
        if open.is_none() {
            open = Some((line_unit.start, number));
        }
        let bytes = line.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if matches!(bytes[i], b'.' | b'!' | b'?') {
                let mut j = i + 1;
                while j < bytes.len() && matches!(bytes[j], b'"' | b'\'' | b')' | b']') {
                    j += 1;
                }
                let mut k = j;
                while k < bytes.len() && (bytes[k] == b' ' || bytes[k] == b'\t') {
                    k += 1;
                }
                let at_line_end = k >= bytes.len() || bytes[k] == b'\n' || bytes[k] == b'\r';
                if at_line_end {
                    close(&mut out, &mut open, line_unit.end, number);
                    break;
                }
                if k > j
                    && (bytes[k].is_ascii_uppercase()
                        || bytes[k].is_ascii_digit()
                        || !bytes[k].is_ascii())
                {
                    close(&mut out, &mut open, line_unit.start + k, number);
                    open = Some((line_unit.start + k, number));
                    i = k;
                    continue;
                }
            }
            i += 1;
        }
        let _ = index;
    }
    if let Some(last) = lines.last() {
        close(&mut out, &mut open, last.end, last.last_line);
    }
    out
}

/// Sentences of a line, each with its closing punctuation and the spaces after it: a sentence
/// ends at `.`, `!`, `?` or `…` followed by a space or the end of the line (so `4.2.1` and
/// `e.g.x` do not split).
pub fn in_line(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = line.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if !matches!(c, '.' | '!' | '?' | '…') {
            continue;
        }
        let mut end = i + c.len_utf8();
        while let Some(&(j, next)) = chars.peek() {
            if matches!(next, '.' | '!' | '?' | '…') {
                end = j + next.len_utf8();
                chars.next();
            } else {
                break;
            }
        }
        let at_break = chars
            .peek()
            .is_none_or(|&(_, next)| next == ' ' || next == '\t');
        if !at_break {
            continue;
        }
        while let Some(&(j, next)) = chars.peek() {
            if next == ' ' || next == '\t' {
                end = j + 1;
                chars.next();
            } else {
                break;
            }
        }
        out.push(&line[start..end]);
        start = end;
    }
    if start < line.len() {
        out.push(&line[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_line_splits_glued_paragraphs_but_not_numbers() {
        let text = "It cost 3.5 dollars. It was built in 1844.First for Women is new.\nNext line";
        assert_eq!(
            per_line(text),
            [
                "It cost 3.5 dollars.",
                "It was built in 1844.",
                "First for Women is new.",
                "Next line"
            ]
        );
        assert_eq!(
            per_line("Published in the U.S. in 1990.Then"),
            ["Published in the U.S. in 1990.", "Then"]
        );
    }

    #[test]
    fn evidence_splits_glued_pages_and_keeps_abbreviations() {
        let split = |text: &'static str| -> Vec<&'static str> {
            evidence(text)
                .iter()
                .map(|s| &text[s.start..s.end])
                .collect()
        };
        let text = "It was founded in 1844.First for Women is a magazine. Dr. Smith wrote it in the U.S. in 2001.";
        assert_eq!(
            split(text),
            [
                "It was founded in 1844.",
                "First for Women is a magazine.",
                "Dr. Smith wrote it in the U.S. in 2001."
            ]
        );
        // Regression (found by probing): a full-width stop ended nothing, so a Japanese
        // sentence and the next one were one claim.
        let text = "東京タワーは1958年に完成した。高さは333メートルです！Café Zoë opened in 2001.";
        assert_eq!(
            split(text),
            [
                "東京タワーは1958年に完成した。",
                "高さは333メートルです！",
                "Café Zoë opened in 2001."
            ]
        );
    }

    #[test]
    fn markdown_pieces_cover_the_text_in_order() {
        let text = "# Title\n\nFirst one. Second one! Third?\nStill third. \n\n- item one\n- item two\nLast words";
        let pieces = markdown(text);
        let mut end = 0;
        for piece in &pieces {
            assert_eq!(piece.start, end, "pieces are contiguous");
            end = piece.end;
        }
        assert_eq!(end, text.len());
        let texts: Vec<&str> = pieces.iter().map(|p| text[p.start..p.end].trim()).collect();
        assert_eq!(
            texts,
            vec![
                "# Title",
                "First one.",
                "Second one!",
                "Third?",
                "Still third.",
                "- item one",
                "- item two",
                "Last words"
            ]
        );
    }
}
