//! Byte spans of the string values of a JSON document, by path, so the proxy can replace a few
//! strings and leave every other byte of the client's request (key order, number spelling,
//! escapes, whitespace, unknown fields) exactly as received.

use std::collections::HashMap;
use std::ops::Range;

use serde_json::Value;

/// One step of a path into a JSON document.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Seg {
    Key(String),
    Index(usize),
}

/// A path: `["messages", 3, "content"]`.
pub type Path = Vec<Seg>;

/// `Seg::Key` from a literal.
pub fn key(name: &str) -> Seg {
    Seg::Key(name.to_string())
}

/// The value at `path`, if any.
pub fn get<'a>(value: &'a Value, path: &[Seg]) -> Option<&'a Value> {
    path.iter().try_fold(value, |current, seg| match seg {
        Seg::Key(name) => current.get(name),
        Seg::Index(index) => current.get(index),
    })
}

/// The string at `path`, if there is one.
pub fn get_str<'a>(value: &'a Value, path: &[Seg]) -> Option<&'a str> {
    get(value, path).and_then(Value::as_str)
}

/// The JSON document was not what the scanner expects (it only reads documents serde_json
/// already accepted, so this means a bug or a document changed in between).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed JSON at byte {0}")]
pub struct Malformed(pub usize);

/// Byte range of every string value (quotes included), by path.
pub fn string_spans(text: &str) -> Result<HashMap<Path, Range<usize>>, Malformed> {
    scan(text, false)
}

/// Byte range of every value (objects, arrays, strings with their quotes, numbers, literals),
/// by path; the document itself is at the empty path.
pub fn value_spans(text: &str) -> Result<HashMap<Path, Range<usize>>, Malformed> {
    scan(text, true)
}

fn scan(text: &str, every: bool) -> Result<HashMap<Path, Range<usize>>, Malformed> {
    let mut scanner = Scanner {
        text,
        bytes: text.as_bytes(),
        at: 0,
        path: Vec::new(),
        out: HashMap::new(),
        every,
    };
    scanner.value()?;
    Ok(scanner.out)
}

/// Replaces the values at the given spans with raw JSON texts. Spans must not overlap.
pub fn splice_raw(text: &str, mut edits: Vec<(Range<usize>, String)>) -> String {
    edits.sort_by_key(|(range, _)| range.start);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (range, replacement) in edits {
        out.push_str(&text[at..range.start]);
        out.push_str(&replacement);
        at = range.end;
    }
    out.push_str(&text[at..]);
    out
}

/// Replaces the strings at the given spans with the JSON encoding of the new texts. Spans must
/// not overlap.
pub fn splice(text: &str, mut edits: Vec<(Range<usize>, String)>) -> String {
    edits.sort_by_key(|(range, _)| range.start);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (range, replacement) in edits {
        out.push_str(&text[at..range.start]);
        // Serialising a string cannot fail.
        out.push_str(&serde_json::to_string(&replacement).unwrap_or_default());
        at = range.end;
    }
    out.push_str(&text[at..]);
    out
}

/// Inserts `"key": value` as the last member of the top-level object.
pub fn append_member(text: &str, key: &str, value: &Value) -> Option<String> {
    let end = text.rfind('}')?;
    let inner = text[..end].trim_end();
    let separator = if inner.ends_with('{') { "" } else { "," };
    let key = serde_json::to_string(key).ok()?;
    let value = serde_json::to_string(value).ok()?;
    Some(format!(
        "{}{separator}{key}:{value}{}",
        &text[..end],
        &text[end..]
    ))
}

struct Scanner<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    path: Path,
    out: HashMap<Path, Range<usize>>,
    /// Record every value, not only strings.
    every: bool,
}

impl Scanner<'_> {
    fn peek(&self) -> Result<u8, Malformed> {
        self.bytes.get(self.at).copied().ok_or(Malformed(self.at))
    }

    fn whitespace(&mut self) {
        while self
            .bytes
            .get(self.at)
            .is_some_and(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        {
            self.at += 1;
        }
    }

    fn expect(&mut self, byte: u8) -> Result<(), Malformed> {
        self.whitespace();
        if self.peek()? != byte {
            return Err(Malformed(self.at));
        }
        self.at += 1;
        Ok(())
    }

    fn string(&mut self) -> Result<Range<usize>, Malformed> {
        let start = self.at;
        if self.peek()? != b'"' {
            return Err(Malformed(self.at));
        }
        self.at += 1;
        loop {
            match self.peek()? {
                b'\\' => self.at += 2,
                b'"' => {
                    self.at += 1;
                    return Ok(start..self.at);
                }
                _ => self.at += 1,
            }
        }
    }

    fn value(&mut self) -> Result<(), Malformed> {
        self.whitespace();
        let start = self.at;
        let is_string = self.peek()? == b'"';
        self.inner_value()?;
        if self.every && !is_string {
            self.out.insert(self.path.clone(), start..self.at);
        }
        Ok(())
    }

    fn inner_value(&mut self) -> Result<(), Malformed> {
        match self.peek()? {
            b'{' => {
                self.at += 1;
                self.whitespace();
                if self.peek()? == b'}' {
                    self.at += 1;
                    return Ok(());
                }
                loop {
                    self.whitespace();
                    let range = self.string()?;
                    let name: String = serde_json::from_str(&self.text[range.clone()])
                        .map_err(|_| Malformed(range.start))?;
                    self.expect(b':')?;
                    self.path.push(Seg::Key(name));
                    self.value()?;
                    self.path.pop();
                    self.whitespace();
                    match self.peek()? {
                        b',' => self.at += 1,
                        b'}' => {
                            self.at += 1;
                            return Ok(());
                        }
                        _ => return Err(Malformed(self.at)),
                    }
                }
            }
            b'[' => {
                self.at += 1;
                self.whitespace();
                if self.peek()? == b']' {
                    self.at += 1;
                    return Ok(());
                }
                let mut index = 0;
                loop {
                    self.path.push(Seg::Index(index));
                    self.value()?;
                    self.path.pop();
                    index += 1;
                    self.whitespace();
                    match self.peek()? {
                        b',' => self.at += 1,
                        b']' => {
                            self.at += 1;
                            return Ok(());
                        }
                        _ => return Err(Malformed(self.at)),
                    }
                }
            }
            b'"' => {
                let range = self.string()?;
                self.out.insert(self.path.clone(), range);
                Ok(())
            }
            _ => {
                let start = self.at;
                while self.bytes.get(self.at).is_some_and(|b| {
                    !matches!(b, b',' | b']' | b'}' | b' ' | b'\t' | b'\r' | b'\n')
                }) {
                    self.at += 1;
                }
                if self.at == start {
                    return Err(Malformed(start));
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_and_splice_keep_every_other_byte() {
        let text = r#"{ "z": 1.0, "messages": [ {"role":"user","content":"a\"b"}, {"k": [true, null, "x"]} ], "t\u0041": "y" }"#;
        let spans = string_spans(text).expect("test input is valid");
        let path = vec![key("messages"), Seg::Index(0), key("content")];
        assert_eq!(&text[spans[&path].clone()], r#""a\"b""#);
        let inner = vec![key("messages"), Seg::Index(1), key("k"), Seg::Index(2)];
        assert_eq!(&text[spans[&inner].clone()], r#""x""#);
        assert!(spans.contains_key(&vec![key("tA")]));
        let out = splice(text, vec![(spans[&path].clone(), "new \"text\"".into())]);
        assert_eq!(
            out,
            text.replace(r#""a\"b""#, r#""new \"text\"""#),
            "only the one string changes"
        );
        let value: Value = serde_json::from_str(&out).expect("test input is valid");
        assert_eq!(get_str(&value, &path), Some("new \"text\""));
    }

    #[test]
    fn value_spans_cover_every_value() {
        let text = r#"{"a": [1, {"b": null}], "c": "x", "d": -2.5e3 }"#;
        let spans = value_spans(text).expect("test input is valid");
        let at = |path: Path| &text[spans[&path].clone()];
        assert_eq!(at(vec![]), text.trim_end());
        assert_eq!(at(vec![key("a")]), r#"[1, {"b": null}]"#);
        assert_eq!(at(vec![key("a"), Seg::Index(1), key("b")]), "null");
        assert_eq!(at(vec![key("c")]), r#""x""#);
        assert_eq!(at(vec![key("d")]), "-2.5e3");
        let out = splice_raw(text, vec![(spans[&vec![key("a")]].clone(), "[]".into())]);
        assert_eq!(out, r#"{"a": [], "c": "x", "d": -2.5e3 }"#);
    }

    #[test]
    fn append_member_adds_a_last_key() {
        let out = append_member(r#"{"a":1}"#, "svc", &serde_json::json!({"id": "x"}))
            .expect("test input is valid");
        assert_eq!(out, r#"{"a":1,"svc":{"id":"x"}}"#);
        assert_eq!(
            append_member("{ }", "k", &Value::Null).expect("test input is valid"),
            r#"{ "k":null}"#
        );
    }

    #[test]
    fn truncated_documents_are_errors_not_panics() {
        for text in [r#"{"a": "b"#, r#"{"a": [1, 2"#, "{", r#"["\"#] {
            assert!(string_spans(text).is_err(), "{text}");
        }
    }
}
