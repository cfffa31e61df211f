//! Streaming reader for record files: JSON Lines, a JSON array of records, or one (possibly
//! pretty-printed) object, and any concatenation of top-level values. Memory is bounded by the
//! largest single record, so multi-gigabyte files stream.
//!
//! Each item carries the 1-based line where the record starts, so problems can be reported as
//! `file:line`.

use std::io::{self, BufRead, Read};

/// One record's text and where it starts.
#[derive(Debug, Clone, PartialEq)]
pub struct RawRecord {
    /// 1-based line of the record's first byte.
    pub line: usize,
    /// The record's JSON text, or why it is not text (invalid UTF-8).
    pub text: Result<String, String>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// One record per line.
    Lines,
    /// Elements of one top-level array.
    Array,
    /// A sequence of top-level values (a single pretty-printed object is the common case).
    Values,
}

/// Iterator over the records of one input.
pub struct RecordReader<'a> {
    inner: Box<dyn BufRead + 'a>,
    mode: Mode,
    line: usize,
    done: bool,
    pending_first: Option<RawRecord>,
    /// Line of the last problem found while scanning values: later debris of the same line is
    /// skipped, so one broken line yields one problem.
    last_problem_line: Option<usize>,
    /// Whether the problem `next_value` just returned is an array element of exact extent,
    /// which is a problem of its own however many share its line.
    element_problem: bool,
}

impl<'a> RecordReader<'a> {
    /// `name_hint` is the file name, if any: `.jsonl`/`.ndjson` force line mode, so that one
    /// corrupt line cannot change how the rest of the file is read.
    pub fn new(mut reader: Box<dyn BufRead + 'a>, name_hint: Option<&str>) -> io::Result<Self> {
        skip_bom(&mut reader)?;
        let forced_lines =
            name_hint.is_some_and(|n| n.ends_with(".jsonl") || n.ends_with(".ndjson"));
        let first = first_significant_byte(&mut reader)?;
        if first == Some(b'[') && !forced_lines {
            let mut this = Self::with_mode(reader, Mode::Array);
            this.open_array()?;
            return Ok(this);
        }
        if forced_lines || first.is_none() {
            return Ok(Self::with_mode(reader, Mode::Lines));
        }
        // Sniff: if the first line holds a complete JSON value this is JSON Lines; otherwise it
        // is a multi-line document, read as a sequence of values.
        let mut first_line = Vec::new();
        reader.read_until(b'\n', &mut first_line)?;
        let trimmed = trim_line(&first_line);
        // A first line that opens and closes an object is a record of JSON Lines even when it
        // is broken inside: read as a multi-line document, its stray brace would derail every
        // following record.
        let looks_like_a_line = trimmed.first() == Some(&b'{') && trimmed.last() == Some(&b'}');
        if looks_like_a_line || serde_json::from_slice::<serde::de::IgnoredAny>(trimmed).is_ok() {
            let mut this = Self::with_mode(reader, Mode::Lines);
            this.line = 2;
            this.pending_first = Some(RawRecord {
                line: 1,
                text: to_text(trimmed.to_vec()),
            });
            return Ok(this);
        }
        let replay = io::Cursor::new(first_line).chain(reader);
        Ok(Self::with_mode(Box::new(replay), Mode::Values))
    }

    fn with_mode(inner: Box<dyn BufRead + 'a>, mode: Mode) -> Self {
        Self {
            inner,
            mode,
            line: 1,
            done: false,
            pending_first: None,
            last_problem_line: None,
            element_problem: false,
        }
    }

    fn open_array(&mut self) -> io::Result<()> {
        self.skip_whitespace()?;
        // first_significant_byte saw '['.
        self.inner.consume(1);
        Ok(())
    }

    fn skip_whitespace(&mut self) -> io::Result<Option<u8>> {
        loop {
            let available = self.inner.fill_buf()?;
            if available.is_empty() {
                return Ok(None);
            }
            let mut used = 0;
            let mut found = None;
            for &byte in available {
                match byte {
                    b'\n' => self.line += 1,
                    b' ' | b'\t' | b'\r' => {}
                    b',' if self.mode == Mode::Array => {}
                    other => {
                        found = Some(other);
                        break;
                    }
                }
                used += 1;
            }
            self.inner.consume(used);
            if found.is_some() {
                return Ok(found);
            }
        }
    }

    fn next_line(&mut self) -> io::Result<Option<RawRecord>> {
        let mut buffer = Vec::new();
        loop {
            buffer.clear();
            if self.inner.read_until(b'\n', &mut buffer)? == 0 {
                return Ok(None);
            }
            let line = self.line;
            self.line += 1;
            let trimmed = trim_line(&buffer);
            if trimmed.is_empty() {
                continue;
            }
            return Ok(Some(RawRecord {
                line,
                text: to_text(trimmed.to_vec()),
            }));
        }
    }

    fn next_value(&mut self) -> io::Result<Option<RawRecord>> {
        let Some(first) = self.skip_whitespace()? else {
            if self.mode == Mode::Array {
                self.done = true;
                return Ok(Some(RawRecord {
                    line: self.line,
                    text: Err("the JSON array is not closed with ']'".to_string()),
                }));
            }
            return Ok(None);
        };
        if self.mode == Mode::Array && first == b']' {
            self.inner.consume(1);
            self.done = true;
            return Ok(None);
        }
        let start_line = self.line;
        let mut buffer = Vec::new();
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        // Whether the value ended at its own closing bracket, so its extent is exact.
        let mut closed = false;
        'outer: loop {
            let available = self.inner.fill_buf()?;
            if available.is_empty() {
                break;
            }
            let mut used = 0;
            let mut finished = false;
            for &byte in available {
                if in_string {
                    if escaped {
                        escaped = false;
                    } else if byte == b'\\' {
                        escaped = true;
                    } else if byte == b'"' {
                        in_string = false;
                    }
                } else {
                    match byte {
                        b'"' => in_string = true,
                        b'{' | b'[' => depth += 1,
                        b'}' | b']' if depth == 0 => {
                            finished = true;
                            break;
                        }
                        b'}' | b']' => {
                            depth -= 1;
                            if depth == 0 {
                                used += 1;
                                finished = true;
                                closed = true;
                                break;
                            }
                        }
                        b',' | b' ' | b'\t' | b'\r' | b'\n' if depth == 0 => {
                            finished = true;
                            break;
                        }
                        _ => {}
                    }
                }
                if byte == b'\n' {
                    self.line += 1;
                }
                used += 1;
            }
            buffer.extend_from_slice(&available[..used]);
            self.inner.consume(used);
            if finished {
                break 'outer;
            }
        }
        if buffer.is_empty() {
            // A closer or a comma where a value should start: consume it with the rest of its
            // line, so the reader always advances.
            let byte = first;
            self.skip_rest_of_line()?;
            return Ok(Some(RawRecord {
                line: start_line,
                text: Err(format!(
                    "not valid JSON: unexpected `{}` where a record should start",
                    char::from(byte).escape_default()
                )),
            }));
        }
        // An element of an array whose extent is exact (a scalar that is JSON, or a value that
        // ended at its own closing bracket) is one problem, and the next element is read where
        // it ends: a one-line array (`json.dump`'s default) would otherwise lose every record
        // after it. Elsewhere what is left of the line is debris of the same broken record.
        let exact = self.mode == Mode::Array
            && (closed
                || first != b'{'
                    && serde_json::from_slice::<serde::de::IgnoredAny>(&buffer).is_ok());
        if first != b'{' {
            // A record is an object: a stray number or string is a problem of its own in an
            // array, and debris of a broken line elsewhere (reported once with its line).
            if exact {
                self.element_problem = true;
            } else {
                self.skip_rest_of_line()?;
            }
            let shown: String = String::from_utf8_lossy(&buffer).chars().take(40).collect();
            return Ok(Some(RawRecord {
                line: start_line,
                text: Err(format!(
                    "not a record: a record is a JSON object, found `{shown}`"
                )),
            }));
        }
        if let Err(error) = serde_json::from_slice::<serde::de::IgnoredAny>(&buffer) {
            // Resynchronise at the next line: what is left of this one is debris of the same
            // broken record.
            if exact {
                self.element_problem = true;
            } else {
                self.skip_rest_of_line()?;
            }
            return Ok(Some(RawRecord {
                line: start_line,
                text: Err(format!("not valid JSON: {error}")),
            }));
        }
        Ok(Some(RawRecord {
            line: start_line,
            text: to_text(buffer),
        }))
    }

    /// Consumes bytes up to and including the next newline (or the end of input).
    fn skip_rest_of_line(&mut self) -> io::Result<()> {
        let mut rest = Vec::new();
        if self.inner.read_until(b'\n', &mut rest)? > 0 && rest.last() == Some(&b'\n') {
            self.line += 1;
        }
        Ok(())
    }
}

impl Iterator for RecordReader<'_> {
    type Item = io::Result<RawRecord>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(first) = self.pending_first.take() {
            return Some(Ok(first));
        }
        if self.done {
            return None;
        }
        let result = match self.mode {
            Mode::Lines => self.next_line(),
            Mode::Array | Mode::Values => loop {
                match self.next_value() {
                    Ok(Some(record)) if record.text.is_err() => {
                        if std::mem::take(&mut self.element_problem) {
                            break Ok(Some(record));
                        }
                        if self.last_problem_line == Some(record.line) {
                            // An unclosed array ends the input; it has been reported already.
                            if self.done {
                                break Ok(None);
                            }
                            continue;
                        }
                        self.last_problem_line = Some(record.line);
                        break Ok(Some(record));
                    }
                    other => break other,
                }
            },
        };
        match result {
            Ok(Some(record)) => Some(Ok(record)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(error) => {
                self.done = true;
                Some(Err(error))
            }
        }
    }
}

fn skip_bom(reader: &mut Box<dyn BufRead + '_>) -> io::Result<()> {
    if reader.fill_buf()?.starts_with(&[0xEF, 0xBB, 0xBF]) {
        reader.consume(3);
    }
    Ok(())
}

/// Peeks (without consuming anything but leading whitespace on the first line) at the first
/// non-whitespace byte.
fn first_significant_byte(reader: &mut Box<dyn BufRead + '_>) -> io::Result<Option<u8>> {
    let buffer = reader.fill_buf()?;
    Ok(buffer
        .iter()
        .copied()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n')))
}

fn trim_line(line: &[u8]) -> &[u8] {
    let start = line
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(line.len());
    let end = line
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |i| i + 1);
    &line[start..end]
}

fn to_text(bytes: Vec<u8>) -> Result<String, String> {
    String::from_utf8(bytes).map_err(|e| format!("not valid UTF-8: {}", e.utf8_error()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(input: &str, name: Option<&str>) -> Vec<(usize, String)> {
        let reader = RecordReader::new(Box::new(io::Cursor::new(input.as_bytes().to_vec())), name)
            .expect("reader");
        reader
            .map(|r| {
                let r = r.expect("io");
                (r.line, r.text.unwrap_or_else(|e| format!("ERR {e}")))
            })
            .collect()
    }

    #[test]
    fn json_lines_with_blank_lines() {
        let got = read("{\"a\":1}\n\n{\"a\":2}\r\n  {\"a\":3}", None);
        assert_eq!(
            got,
            vec![
                (1, "{\"a\":1}".into()),
                (3, "{\"a\":2}".into()),
                (4, "{\"a\":3}".into())
            ]
        );
    }

    #[test]
    fn array_elements_with_lines() {
        let got = read("[\n  {\"a\": \"]}\\\"\"},\n  {\"b\": [1,\n 2]}\n]\n", None);
        assert_eq!(
            got,
            vec![
                (2, "{\"a\": \"]}\\\"\"}".into()),
                (3, "{\"b\": [1,\n 2]}".into())
            ]
        );
    }

    #[test]
    fn pretty_single_object() {
        let got = read("\n{\n  \"a\": 1,\n  \"b\": {\"c\": 2}\n}\n", None);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, 2);
        assert!(got[0].1.starts_with('{') && got[0].1.ends_with('}'));
    }

    #[test]
    fn unclosed_array_is_reported() {
        let got = read("[{\"a\":1},", None);
        assert_eq!(got.len(), 2);
        assert!(got[1].1.starts_with("ERR"), "{got:?}");
    }

    #[test]
    fn jsonl_name_forces_lines_even_if_first_line_is_broken() {
        let got = read("{\"a\":\n{\"b\":1}\n", Some("x.jsonl"));
        assert_eq!(got, vec![(1, "{\"a\":".into()), (2, "{\"b\":1}".into())]);
    }

    /// Issue 10: one stray `}` in a record read from a stream without a `.jsonl` name made the
    /// reader yield empty values forever.
    #[test]
    fn issue_10_a_stray_brace_yields_one_problem_and_the_reader_advances() {
        let good = r#"{"a":1,"latency_ms":3.25,"b":2}"#;
        let bad = r#"{"a":1,"latency_ms":} 3.25, "b":2}"#;
        let input = format!("{bad}\n{good}\n{good}\n");
        for name in [None, Some("-"), Some("x.json"), Some("x.jsonl")] {
            let got = read(&input, name);
            assert_eq!(got.len(), 3, "{name:?}: {got:?}");
            let first_is_json = serde_json::from_str::<serde_json::Value>(&got[0].1).is_ok();
            assert!(!first_is_json, "{got:?}");
            assert_eq!(got[0].0, 1);
            assert_eq!((got[1].0, got[2].0), (2, 3));
            assert_eq!(got[1].1, good);
        }
    }

    #[test]
    fn debris_in_a_document_gives_at_most_one_problem_per_line() {
        let input = "{\n  \"a\": 1 }} ]] ,, 3\n}\n,\n{\"b\": 2}\n";
        let got = read(input, None);
        let mut lines: Vec<usize> = got
            .iter()
            .filter(|(_, text)| text.starts_with("ERR"))
            .map(|(line, _)| *line)
            .collect();
        let problems = lines.len();
        lines.dedup();
        assert_eq!(lines.len(), problems, "one problem per line: {got:?}");
        assert!(got.iter().any(|(_, text)| text == "{\"b\": 2}"), "{got:?}");
    }

    /// Found by fuzzing: an unclosed array whose last problem was on its last line made the
    /// reader report the same end again and again without returning.
    #[test]
    fn an_unclosed_array_after_a_problem_on_the_same_line_ends() {
        // Two problems: the broken element and the missing `]`.
        let got = read("[{\"a\":}", None);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(
            got.iter().all(|(_, text)| text.starts_with("ERR")),
            "{got:?}"
        );
        let got = read("[\n{\"a\":1}, }", None);
        assert!(got.len() <= 3, "{got:?}");
    }

    /// Found by fuzzing: a number left over from a broken record and the junk after it gave
    /// two problems on one line.
    #[test]
    fn a_stray_scalar_and_its_debris_are_one_problem() {
        let got = read("\n-1 x\n-1 }}\n{\"b\":1}\n", None);
        assert_eq!(got.len(), 3, "{got:?}");
        let mut lines: Vec<usize> = got
            .iter()
            .filter(|(_, text)| text.starts_with("ERR") || !text.starts_with('{'))
            .map(|(line, _)| *line)
            .collect();
        let problems = lines.len();
        lines.dedup();
        assert_eq!(lines.len(), problems, "{got:?}");
        assert!(got.iter().any(|(_, text)| text == "{\"b\":1}"), "{got:?}");
    }

    #[test]
    fn an_invalid_array_element_does_not_end_the_array() {
        let got = read("[\n{\"a\":},\n{\"b\":1}\n]\n", None);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got[0].1.starts_with("ERR"));
        assert_eq!(got[1], (3, "{\"b\":1}".to_string()));
    }

    /// Found by probing: `json.dump` writes an array on one line, and one element that was not
    /// a record skipped the rest of that line, losing every record after it unreported.
    #[test]
    fn a_bad_element_of_a_one_line_array_is_one_problem_and_the_rest_is_read() {
        let input = r#"[{"a":1}, 7, null, "x ]", [1, {"z":2}], {"b":}, {"c":3}, 8]"#;
        let got = read(input, None);
        let shape: Vec<bool> = got.iter().map(|(_, t)| t.starts_with("ERR")).collect();
        assert_eq!(
            shape,
            [false, true, true, true, true, true, false, true],
            "{got:?}"
        );
        assert_eq!(got[6].1, r#"{"c":3}"#);
        assert!(got[1].1.contains("found `7`"), "{got:?}");
    }

    #[test]
    fn invalid_utf8_is_an_item_not_a_crash() {
        let bytes = b"{\"a\":\"\xff\"}\n{\"b\":1}\n".to_vec();
        let reader =
            RecordReader::new(Box::new(io::Cursor::new(bytes)), Some("x.jsonl")).expect("reader");
        let items: Vec<_> = reader.map(|r| r.expect("io")).collect();
        assert!(items[0].text.is_err());
        assert!(items[1].text.is_ok());
    }
}
