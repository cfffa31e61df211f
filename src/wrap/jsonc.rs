//! JSON and JSON-with-comments documents edited in place: a reader that keeps the byte span of
//! every value, and an editor that sets one value at a key path by splicing text. Everything
//! else in the file (the user's comments, key order, indentation, other entries) stays
//! byte-identical, which a parse-and-reserialise round trip cannot promise.
//!
//! Every edit is checked by reading the new text back: it must parse, and its value must equal
//! the old value with exactly the one change. An edit that fails that check is refused.

use serde_json::{Map, Value};

/// What a file may contain beyond strict JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    /// RFC 8259 JSON: what `JSON.parse` accepts.
    Json,
    /// JSON with `//` and `/* */` comments and trailing commas (VS Code's and Zed's settings).
    Jsonc,
}

/// A syntax error, with the 1-based line and column where reading stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Why a value cannot be set.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error(transparent)]
    Parse(#[from] ParseError),
    #[error("`{path}` is {found}, not an object, so svc cannot add its entry inside it")]
    NotAnObject { path: String, found: &'static str },
    #[error("`{path}` appears more than once (line {line}); remove the duplicate first")]
    DuplicateKey { path: String, line: usize },
    #[error("the edit did not read back as intended ({0}); the file was left untouched")]
    Unverified(String),
}

/// A parsed value and where its text is.
#[derive(Debug, Clone)]
struct Node {
    start: usize,
    end: usize,
    kind: Kind,
    value: Value,
}

#[derive(Debug, Clone)]
enum Kind {
    Object {
        members: Vec<Member>,
        /// Byte offset of a comma after the last member (JSONC only).
        trailing_comma: Option<usize>,
    },
    Other,
}

#[derive(Debug, Clone)]
struct Member {
    key: String,
    key_start: usize,
    value: Node,
}

/// The value of a whole document (`None` for a file that holds only whitespace and comments).
pub fn parse(text: &str, syntax: Syntax) -> Result<Option<Value>, ParseError> {
    Ok(parse_document(text, syntax)?.map(|node| node.value))
}

/// Sets `path` to `value` in `text`, creating missing objects on the way. Returns the new text,
/// or `None` when the value is already there (nothing to change).
pub fn set(
    text: &str,
    syntax: Syntax,
    path: &[&str],
    value: &Value,
) -> Result<Option<String>, EditError> {
    assert!(!path.is_empty(), "set needs at least one key");
    // A file with Windows line ends throughout is edited as LF and given its CRLFs back, so
    // the inserted lines end as the others do. (A raw line end cannot occur inside a string.)
    if text.contains("\r\n") && !text.replace("\r\n", "").contains('\n') {
        let edited = set(&text.replace("\r\n", "\n"), syntax, path, value)?;
        return Ok(edited.map(|t| t.replace('\n', "\r\n")));
    }
    let Some(root) = parse_document(text, syntax)? else {
        // An empty file (or only comments): a new document with the nested value.
        let mut out = text.trim_end().to_string();
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&render(&nest(path, value), "", "  "));
        out.push('\n');
        return verify(text, out, syntax, path, value).map(Some);
    };
    let unit = indent_unit(text);
    let mut node = &root;
    for (depth, key) in path.iter().enumerate() {
        let Kind::Object {
            members,
            trailing_comma,
        } = &node.kind
        else {
            return Err(EditError::NotAnObject {
                path: dotted(&path[..depth]),
                found: type_name(&node.value),
            });
        };
        let found: Vec<&Member> = members.iter().filter(|m| m.key == *key).collect();
        if found.len() > 1 {
            return Err(EditError::DuplicateKey {
                path: dotted(&path[..=depth]),
                line: position(text, found[1].key_start).0,
            });
        }
        let Some(member) = found.first() else {
            let rest = nest(&path[depth + 1..], value);
            let edited = insert_member(text, node, members, *trailing_comma, key, &rest, &unit);
            return verify(text, edited, syntax, path, value).map(Some);
        };
        if depth + 1 == path.len() {
            if member.value.value == *value {
                return Ok(None);
            }
            let own_line = starts_line(text, member.key_start);
            let rendered = if own_line {
                render(value, line_indent(text, member.key_start), &unit)
            } else {
                compact(value)
            };
            let mut edited = String::with_capacity(text.len() + rendered.len());
            edited.push_str(&text[..member.value.start]);
            edited.push_str(&rendered);
            edited.push_str(&text[member.value.end..]);
            return verify(text, edited, syntax, path, value).map(Some);
        }
        node = &member.value;
    }
    unreachable!("the loop returns at the last key")
}

/// The edited text must parse and equal the old value with `path` set to `value`.
fn verify(
    before: &str,
    after: String,
    syntax: Syntax,
    path: &[&str],
    value: &Value,
) -> Result<String, EditError> {
    let mut expected = parse(before, syntax)?.unwrap_or_else(|| Value::Object(Map::new()));
    let mut cursor = &mut expected;
    for key in path {
        let Value::Object(map) = cursor else {
            return Err(EditError::Unverified(format!(
                "`{key}` has no object to go in"
            )));
        };
        cursor = map
            .entry((*key).to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    *cursor = value.clone();
    match parse(&after, syntax) {
        Ok(Some(got)) if got == expected => Ok(after),
        Ok(_) => Err(EditError::Unverified("the values differ".into())),
        Err(error) => Err(EditError::Unverified(error.to_string())),
    }
}

fn insert_member(
    text: &str,
    object: &Node,
    members: &[Member],
    trailing_comma: Option<usize>,
    key: &str,
    value: &Value,
    unit: &str,
) -> String {
    let key_text = Value::String(key.to_string()).to_string();
    // (offset, text) insertions, applied from the back so offsets stay valid.
    let mut inserts: Vec<(usize, String)> = Vec::new();
    match members.last() {
        Some(last) if starts_line(text, last.key_start) => {
            let indent = line_indent(text, last.key_start);
            let member = format!("\n{indent}{key_text}: {}", render(value, indent, unit));
            match trailing_comma {
                Some(comma) => inserts.push((after_same_line_comment(text, comma + 1), member)),
                None => {
                    inserts.push((last.value.end, ",".into()));
                    inserts.push((after_same_line_comment(text, last.value.end), member));
                }
            }
        }
        Some(last) => {
            let member = format!(" {key_text}: {}", compact(value));
            match trailing_comma {
                Some(comma) => inserts.push((comma + 1, format!("{member},"))),
                None => inserts.push((last.value.end, format!(",{member}"))),
            }
        }
        None => {
            let outer = line_indent(text, object.start);
            let indent = format!("{outer}{unit}");
            let member = format!("\n{indent}{key_text}: {}", render(value, &indent, unit));
            let interior = &text[object.start + 1..object.end - 1];
            if interior.trim().is_empty() {
                let mut out = String::new();
                out.push_str(&text[..object.start + 1]);
                out.push_str(&member);
                out.push('\n');
                out.push_str(outer);
                out.push_str(&text[object.end - 1..]);
                return out;
            }
            // Only comments inside: the member goes first, the comments stay below it.
            inserts.push((object.start + 1, member));
        }
    }
    let mut out = text.to_string();
    inserts.sort_by_key(|(offset, _)| *offset);
    for (offset, insert) in inserts.into_iter().rev() {
        out.insert_str(offset, &insert);
    }
    out
}

/// `offset`, moved past spaces and a comment that end the same line, so an inserted line does
/// not steal the comment of the line before it.
fn after_same_line_comment(text: &str, offset: usize) -> usize {
    let bytes = text.as_bytes();
    let mut at = offset;
    while at < bytes.len() && (bytes[at] == b' ' || bytes[at] == b'\t') {
        at += 1;
    }
    if bytes[at..].starts_with(b"//") {
        return text[at..].find('\n').map_or(text.len(), |n| at + n);
    }
    if bytes[at..].starts_with(b"/*")
        && let Some(close) = text[at + 2..].find("*/")
    {
        let end = at + 2 + close + 2;
        if !text[at..end].contains('\n') {
            return end;
        }
    }
    offset
}

fn nest(path: &[&str], value: &Value) -> Value {
    path.iter().rev().fold(value.clone(), |inner, key| {
        let mut map = Map::new();
        map.insert((*key).to_string(), inner);
        Value::Object(map)
    })
}

fn dotted(path: &[&str]) -> String {
    if path.is_empty() {
        "the top level".into()
    } else {
        path.join(".")
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Whether only whitespace precedes `offset` on its line.
fn starts_line(text: &str, offset: usize) -> bool {
    let line_start = text[..offset].rfind('\n').map_or(0, |n| n + 1);
    text[line_start..offset]
        .chars()
        .all(|c| c == ' ' || c == '\t')
}

/// The leading whitespace of the line holding `offset`.
fn line_indent(text: &str, offset: usize) -> &str {
    let line_start = text[..offset].rfind('\n').map_or(0, |n| n + 1);
    let line = &text[line_start..];
    let width = line.len() - line.trim_start_matches([' ', '\t']).len();
    &line[..width]
}

/// The file's indentation step: the leading whitespace of its first indented line.
fn indent_unit(text: &str) -> String {
    for line in text.lines() {
        let trimmed = line.trim_start_matches([' ', '\t']);
        if trimmed.is_empty() || trimmed.len() == line.len() {
            continue;
        }
        return line[..line.len() - trimmed.len()].to_string();
    }
    "  ".into()
}

/// Keys that the tools' documentation puts first, in that order; other keys follow sorted.
const KEY_ORDER: [&str; 4] = ["type", "command", "args", "env"];

fn ordered(map: &Map<String, Value>) -> Vec<(&String, &Value)> {
    let mut entries: Vec<_> = map.iter().collect();
    entries.sort_by_key(|(key, _)| {
        let rank = KEY_ORDER
            .iter()
            .position(|k| k == key)
            .unwrap_or(KEY_ORDER.len());
        (rank, (*key).clone())
    });
    entries
}

/// `value` as indented JSON whose continuation lines start with `indent`.
fn render(value: &Value, indent: &str, unit: &str) -> String {
    match value {
        Value::Object(map) if !map.is_empty() => {
            let inner = format!("{indent}{unit}");
            let members: Vec<String> = ordered(map)
                .into_iter()
                .map(|(key, value)| {
                    format!(
                        "{inner}{}: {}",
                        Value::String(key.clone()),
                        render(value, &inner, unit)
                    )
                })
                .collect();
            format!("{{\n{}\n{indent}}}", members.join(",\n"))
        }
        // Short arrays of scalars stay on one line, as people write `"args": ["serve"]`.
        Value::Array(items) if items.iter().any(|v| v.is_object() || v.is_array()) => {
            let inner = format!("{indent}{unit}");
            let items: Vec<String> = items
                .iter()
                .map(|item| format!("{inner}{}", render(item, &inner, unit)))
                .collect();
            format!("[\n{}\n{indent}]", items.join(",\n"))
        }
        other => compact(other),
    }
}

fn compact(value: &Value) -> String {
    match value {
        Value::Object(map) if !map.is_empty() => {
            let members: Vec<String> = ordered(map)
                .into_iter()
                .map(|(key, value)| format!("{}: {}", Value::String(key.clone()), compact(value)))
                .collect();
            format!("{{{}}}", members.join(", "))
        }
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(compact).collect();
            format!("[{}]", items.join(", "))
        }
        other => other.to_string(),
    }
}

/// 1-based (line, column) of a byte offset; the column counts characters.
pub fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |n| n + 1);
    (line, before[line_start..].chars().count() + 1)
}

fn parse_document(text: &str, syntax: Syntax) -> Result<Option<Node>, ParseError> {
    let mut reader = Reader {
        text,
        bytes: text.as_bytes(),
        at: 0,
        syntax,
    };
    if text.starts_with('\u{feff}') {
        reader.at = '\u{feff}'.len_utf8();
    }
    reader.skip_space()?;
    if reader.at == reader.bytes.len() {
        return Ok(None);
    }
    let node = reader.value(0)?;
    reader.skip_space()?;
    if reader.at != reader.bytes.len() {
        return Err(reader.error("unexpected text after the end of the document"));
    }
    Ok(Some(node))
}

/// Nesting deeper than this is refused instead of risking the stack on hostile input.
const MAX_DEPTH: usize = 256;

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    at: usize,
    syntax: Syntax,
}

impl Reader<'_> {
    fn error(&self, message: impl Into<String>) -> ParseError {
        let (line, column) = position(self.text, self.at);
        ParseError {
            line,
            column,
            message: message.into(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.at).copied()
    }

    fn skip_space(&mut self) -> Result<(), ParseError> {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.at += 1,
                Some(b'/') if self.bytes.get(self.at + 1) == Some(&b'/') => {
                    self.comment_allowed()?;
                    self.at = self.text[self.at..]
                        .find('\n')
                        .map_or(self.bytes.len(), |n| self.at + n);
                }
                Some(b'/') if self.bytes.get(self.at + 1) == Some(&b'*') => {
                    self.comment_allowed()?;
                    match self.text[self.at + 2..].find("*/") {
                        Some(n) => self.at += 2 + n + 2,
                        None => return Err(self.error("a /* comment is never closed")),
                    }
                }
                _ => return Ok(()),
            }
        }
    }

    fn comment_allowed(&self) -> Result<(), ParseError> {
        match self.syntax {
            Syntax::Jsonc => Ok(()),
            Syntax::Json => Err(self.error("comments are not allowed in this JSON file")),
        }
    }

    fn value(&mut self, depth: usize) -> Result<Node, ParseError> {
        if depth > MAX_DEPTH {
            return Err(self.error(format!("nested deeper than {MAX_DEPTH} levels")));
        }
        match self.peek() {
            Some(b'{') => self.object(depth),
            Some(b'[') => self.array(depth),
            Some(b'"') => {
                let start = self.at;
                let text = self.string()?;
                Ok(self.leaf(start, Value::String(text)))
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal("true", Value::Bool(true)),
            Some(b'f') => self.literal("false", Value::Bool(false)),
            Some(b'n') => self.literal("null", Value::Null),
            Some(_) => {
                Err(self
                    .error("expected a value (object, array, string, number, true, false or null)"))
            }
            None => Err(self.error("the file ends where a value was expected")),
        }
    }

    fn leaf(&self, start: usize, value: Value) -> Node {
        Node {
            start,
            end: self.at,
            kind: Kind::Other,
            value,
        }
    }

    fn literal(&mut self, word: &str, value: Value) -> Result<Node, ParseError> {
        if !self.text[self.at..].starts_with(word) {
            return Err(self.error("expected a value (a bare word is not JSON; quote strings)"));
        }
        let start = self.at;
        self.at += word.len();
        Ok(self.leaf(start, value))
    }

    fn number(&mut self) -> Result<Node, ParseError> {
        let start = self.at;
        while matches!(
            self.peek(),
            Some(b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
        ) {
            self.at += 1;
        }
        match serde_json::from_str::<Value>(&self.text[start..self.at]) {
            Ok(value @ Value::Number(_)) => Ok(self.leaf(start, value)),
            _ => {
                self.at = start;
                Err(self.error("malformed number"))
            }
        }
    }

    /// A string token, decoded by serde_json (escapes, surrogate pairs).
    fn string(&mut self) -> Result<String, ParseError> {
        let start = self.at;
        self.at += 1;
        loop {
            match self.peek() {
                None => {
                    self.at = start;
                    return Err(self.error("a string is never closed"));
                }
                Some(b'"') => {
                    self.at += 1;
                    break;
                }
                Some(b'\\') => self.at += 2,
                Some(byte) if byte < 0x20 => {
                    return Err(
                        self.error("a control character (e.g. a raw newline) inside a string")
                    );
                }
                Some(_) => self.at += 1,
            }
        }
        self.at = self.at.min(self.bytes.len());
        serde_json::from_str::<String>(&self.text[start..self.at]).map_err(|e| {
            let at = self.at;
            self.at = start;
            let error = self.error(format!("bad string escape ({e})"));
            self.at = at;
            error
        })
    }

    fn object(&mut self, depth: usize) -> Result<Node, ParseError> {
        let start = self.at;
        self.at += 1;
        let mut members = Vec::new();
        let mut map = Map::new();
        let mut trailing_comma = None;
        self.skip_space()?;
        if self.peek() == Some(b'}') {
            self.at += 1;
        } else {
            loop {
                if self.peek() != Some(b'"') {
                    return Err(self.error("expected a quoted key"));
                }
                let key_start = self.at;
                let key = self.string()?;
                self.skip_space()?;
                if self.peek() != Some(b':') {
                    return Err(self.error("expected `:` after the key"));
                }
                self.at += 1;
                self.skip_space()?;
                let value = self.value(depth + 1)?;
                map.insert(key.clone(), value.value.clone());
                members.push(Member {
                    key,
                    key_start,
                    value,
                });
                self.skip_space()?;
                match self.peek() {
                    Some(b',') => {
                        let comma = self.at;
                        self.at += 1;
                        self.skip_space()?;
                        if self.peek() == Some(b'}') {
                            if self.syntax == Syntax::Json {
                                self.at = comma;
                                return Err(self.error("a trailing comma before `}` is not JSON"));
                            }
                            trailing_comma = Some(comma);
                            self.at += 1;
                            break;
                        }
                    }
                    Some(b'}') => {
                        self.at += 1;
                        break;
                    }
                    _ => return Err(self.error("expected `,` or `}` after a value")),
                }
            }
        }
        Ok(Node {
            start,
            end: self.at,
            kind: Kind::Object {
                members,
                trailing_comma,
            },
            value: Value::Object(map),
        })
    }

    fn array(&mut self, depth: usize) -> Result<Node, ParseError> {
        let start = self.at;
        self.at += 1;
        let mut items = Vec::new();
        self.skip_space()?;
        if self.peek() == Some(b']') {
            self.at += 1;
        } else {
            loop {
                items.push(self.value(depth + 1)?.value);
                self.skip_space()?;
                match self.peek() {
                    Some(b',') => {
                        let comma = self.at;
                        self.at += 1;
                        self.skip_space()?;
                        if self.peek() == Some(b']') {
                            if self.syntax == Syntax::Json {
                                self.at = comma;
                                return Err(self.error("a trailing comma before `]` is not JSON"));
                            }
                            self.at += 1;
                            break;
                        }
                    }
                    Some(b']') => {
                        self.at += 1;
                        break;
                    }
                    _ => return Err(self.error("expected `,` or `]` after a value")),
                }
            }
        }
        Ok(Node {
            start,
            end: self.at,
            kind: Kind::Other,
            value: Value::Array(items),
        })
    }
}

#[cfg(test)]
mod tests;
