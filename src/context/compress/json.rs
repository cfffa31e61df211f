//! JSON: keep the structure and the keys; sample long arrays (first items plus a
//! `"… 480 more items · recover J3"` element), truncate long strings with a count, and at the
//! harshest levels summarise deep containers. The output is itself valid JSON. A ladder of limits
//! goes from generous to harsh; the least harsh level that fits the budget wins.
//!
//! The document is parsed with byte spans (after `serde_json` has validated it), so every elided
//! item range or string is recoverable as the exact original bytes.

use std::ops::Range;

use super::units::Minimum;
use super::{CompressError, Part, fits, thousands};
use crate::context::commit::Resolution;
use crate::tokens::Tokenizer;

/// Checks that `content` is JSON, with the position of the first problem.
pub(crate) fn validate(content: &str, source: &str) -> Result<(), CompressError> {
    serde_json::from_str::<serde::de::IgnoredAny>(crate::text::without_bom(content))
        .map(|_| ())
        .map_err(|error| CompressError::InvalidJson {
            source_name: source.to_string(),
            line: error.line(),
            column: error.column(),
            message: error.to_string(),
        })
}

/// Where the document starts: behind a byte-order mark (kept out of every span, so recovered
/// ranges stay the file's exact bytes).
fn bom_len(source: &str) -> usize {
    source.len() - crate::text::without_bom(source).len()
}

#[derive(Debug)]
enum Node {
    Scalar(Range<usize>),
    Str(Range<usize>),
    Array {
        span: Range<usize>,
        items: Vec<Node>,
    },
    Object {
        span: Range<usize>,
        members: Vec<(Range<usize>, Node)>,
    },
}

impl Node {
    fn span(&self) -> Range<usize> {
        match self {
            Node::Scalar(r) | Node::Str(r) => r.clone(),
            Node::Array { span, .. } | Node::Object { span, .. } => span.clone(),
        }
    }

    fn is_container(&self) -> bool {
        matches!(self, Node::Array { .. } | Node::Object { .. })
    }
}

/// Containers nested deeper than this are kept as one opaque value. The parser, the renderer
/// and the tree's drop all recurse, so 20,000 nested `[` (a 40 KB file) overflowed the stack;
/// no document a person reads nests anywhere near this.
const MAX_DEPTH: usize = 256;

/// A span parser for text `serde_json` already accepted.
struct Parser<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Containers open around the value being parsed.
    depth: usize,
}

impl Parser<'_> {
    /// Skips the container opening at `self.at` (strings inside it are skipped whole), for
    /// one nested past [`MAX_DEPTH`].
    fn opaque(&mut self) -> Node {
        let start = self.at;
        let mut open = 0usize;
        while self.at < self.bytes.len() {
            match self.bytes[self.at] {
                b'"' => {
                    self.string();
                    continue;
                }
                b'[' | b'{' => open += 1,
                b']' | b'}' => {
                    open -= 1;
                    if open == 0 {
                        self.at += 1;
                        break;
                    }
                }
                _ => {}
            }
            self.at += 1;
        }
        Node::Scalar(start..self.at.min(self.bytes.len()))
    }

    fn skip_ws(&mut self) {
        while self.at < self.bytes.len() && self.bytes[self.at].is_ascii_whitespace() {
            self.at += 1;
        }
    }

    fn string(&mut self) -> Range<usize> {
        let start = self.at;
        self.at += 1;
        while self.at < self.bytes.len() {
            match self.bytes[self.at] {
                b'\\' => self.at += 2,
                b'"' => {
                    self.at += 1;
                    break;
                }
                _ => self.at += 1,
            }
        }
        start..self.at.min(self.bytes.len())
    }

    fn value(&mut self) -> Node {
        self.skip_ws();
        let start = self.at;
        if self.depth >= MAX_DEPTH && matches!(self.bytes.get(self.at), Some(b'[' | b'{')) {
            return self.opaque();
        }
        self.depth += 1;
        let node = self.container_or_scalar(start);
        self.depth -= 1;
        node
    }

    fn container_or_scalar(&mut self, start: usize) -> Node {
        match self.bytes.get(self.at) {
            Some(b'"') => Node::Str(self.string()),
            Some(b'[') => {
                self.at += 1;
                let mut items = Vec::new();
                loop {
                    self.skip_ws();
                    match self.bytes.get(self.at) {
                        Some(b']') | None => {
                            self.at += 1;
                            break;
                        }
                        Some(b',') => self.at += 1,
                        Some(_) => items.push(self.value()),
                    }
                }
                Node::Array {
                    span: start..self.at.min(self.bytes.len()),
                    items,
                }
            }
            Some(b'{') => {
                self.at += 1;
                let mut members = Vec::new();
                loop {
                    self.skip_ws();
                    match self.bytes.get(self.at) {
                        Some(b'}') | None => {
                            self.at += 1;
                            break;
                        }
                        Some(b',') => self.at += 1,
                        Some(b'"') => {
                            let key = self.string();
                            self.skip_ws();
                            // The colon between key and value.
                            self.at += 1;
                            let value = self.value();
                            members.push((key, value));
                        }
                        Some(_) => self.at += 1,
                    }
                }
                Node::Object {
                    span: start..self.at.min(self.bytes.len()),
                    members,
                }
            }
            _ => {
                while self.at < self.bytes.len()
                    && !matches!(self.bytes[self.at], b',' | b']' | b'}')
                    && !self.bytes[self.at].is_ascii_whitespace()
                {
                    self.at += 1;
                }
                Node::Scalar(start..self.at)
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Limits {
    items: usize,
    members: usize,
    string: usize,
    depth: usize,
}

fn ladder() -> Vec<Limits> {
    const M: usize = usize::MAX;
    let steps: [(usize, usize, usize); 12] = [
        (M, M, M),
        (64, M, 1000),
        (32, M, 400),
        (16, M, 200),
        (10, 256, 120),
        (6, 128, 80),
        (4, 64, 60),
        (3, 32, 40),
        (2, 16, 30),
        (1, 8, 20),
        (1, 4, 12),
        (0, 2, 8),
    ];
    let mut out: Vec<Limits> = steps
        .iter()
        .map(|&(items, members, string)| Limits {
            items,
            members,
            string,
            depth: M,
        })
        .collect();
    for depth in [8, 6, 4, 3, 2, 1, 0] {
        out.push(Limits {
            items: 0,
            members: 2,
            string: 8,
            depth,
        });
    }
    out
}

/// Levels for tight budgets, tried when the ladder's first fit fills the budget poorly: the
/// ladder drops members before depth, so a small budget kept two top-level keys and nothing
/// else (55 of 200 tokens on `fixtures/compress/orders.json`); summarising below a depth
/// keeps every key in sight instead.
fn tight_levels() -> Vec<Limits> {
    let mut out = Vec::new();
    for depth in 1..=4 {
        for (items, members, string) in [
            (2, 32, 40),
            (1, 32, 24),
            (1, 16, 16),
            (0, 64, 16),
            (0, 16, 12),
            (0, 8, 8),
        ] {
            out.push(Limits {
                items,
                members,
                string,
                depth,
            });
        }
    }
    out
}

struct Renderer<'a> {
    source: &'a str,
    prefix: &'a str,
    limits: Limits,
    out: String,
    parts: Vec<Part>,
}

fn child_path(path: &str, key_raw: &str) -> String {
    let key: String = serde_json::from_str(key_raw).unwrap_or_else(|_| key_raw.to_string());
    if !key.is_empty() && key.chars().all(|c| c.is_alphanumeric() || c == '_') {
        format!("{path}.{key}")
    } else {
        format!("{path}[{key_raw}]")
    }
}

impl Renderer<'_> {
    /// Records an elided span and returns its id.
    fn elide(&mut self, span: Range<usize>, locator: String) -> String {
        let id = format!("{}J{}", self.prefix, self.parts.len() + 1);
        self.parts.push(Part {
            chunk_id: id.clone(),
            locator,
            original: self.source[span].to_string(),
            resolution: None,
        });
        id
    }

    fn push_string(&mut self, text: &str) {
        // Serialising a string cannot fail.
        self.out
            .push_str(&serde_json::to_string(text).unwrap_or_default());
    }

    fn newline(&mut self, indent: usize) {
        self.out.push('\n');
        for _ in 0..indent {
            self.out.push_str("  ");
        }
    }

    fn node(&mut self, node: &Node, path: &str, depth: usize, indent: usize) {
        match node {
            Node::Scalar(r) => self.out.push_str(&self.source[r.clone()]),
            Node::Str(r) => self.string(r.clone(), path),
            Node::Array { span, items } => {
                if items.is_empty() {
                    self.out.push_str("[]");
                    return;
                }
                if depth >= self.limits.depth {
                    let id = self.elide(span.clone(), path.to_string());
                    let noun = if items.len() == 1 { "item" } else { "items" };
                    self.push_string(&format!(
                        "[… array of {} {noun} · recover {id}]",
                        thousands(items.len())
                    ));
                    return;
                }
                let keep = items.len().min(self.limits.items);
                let inline = items[..keep].iter().all(|n| !n.is_container());
                self.out.push('[');
                for (i, item) in items[..keep].iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                        if inline {
                            self.out.push(' ');
                        }
                    }
                    if !inline {
                        self.newline(indent + 1);
                    }
                    self.node(item, &format!("{path}[{i}]"), depth + 1, indent + 1);
                }
                if keep < items.len() {
                    let rest = items.len() - keep;
                    let elided = items[keep].span().start..items[items.len() - 1].span().end;
                    let id = self.elide(elided, format!("{path}[{keep}..{}]", items.len()));
                    if keep > 0 {
                        self.out.push(',');
                        if inline {
                            self.out.push(' ');
                        }
                    }
                    if !inline {
                        self.newline(indent + 1);
                    }
                    let more = if keep > 0 { " more" } else { "" };
                    let noun = if rest == 1 { "item" } else { "items" };
                    self.push_string(&format!(
                        "… {}{more} {noun} · recover {id}",
                        thousands(rest)
                    ));
                }
                if !inline {
                    self.newline(indent);
                }
                self.out.push(']');
            }
            Node::Object { span, members } => {
                if members.is_empty() {
                    self.out.push_str("{}");
                    return;
                }
                if depth >= self.limits.depth {
                    let id = self.elide(span.clone(), path.to_string());
                    let keys: Vec<String> = members
                        .iter()
                        .take(4)
                        .map(|(k, _)| {
                            serde_json::from_str::<String>(&self.source[k.clone()])
                                .unwrap_or_default()
                                .chars()
                                .take(24)
                                .collect()
                        })
                        .collect();
                    let etc = if members.len() > 4 { ", …" } else { "" };
                    self.push_string(&format!(
                        "{{… object with {} keys: {}{etc} · recover {id}}}",
                        thousands(members.len()),
                        keys.join(", ")
                    ));
                    return;
                }
                let keep = members.len().min(self.limits.members.max(1));
                self.out.push('{');
                for (i, (key, value)) in members[..keep].iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.newline(indent + 1);
                    let key_raw = &self.source[key.clone()];
                    self.out.push_str(key_raw);
                    self.out.push_str(": ");
                    let child = child_path(path, key_raw);
                    self.node(value, &child, depth + 1, indent + 1);
                }
                if keep < members.len() {
                    let rest = members.len() - keep;
                    let elided = members[keep].0.start..members[members.len() - 1].1.span().end;
                    let id = self.elide(elided, format!("{path}{{{keep}..{}}}", members.len()));
                    self.out.push(',');
                    self.newline(indent + 1);
                    self.out.push_str("\"…\": ");
                    self.push_string(&format!("{} more keys · recover {id}", thousands(rest)));
                }
                self.newline(indent);
                self.out.push('}');
            }
        }
    }

    fn string(&mut self, span: Range<usize>, path: &str) {
        let raw = &self.source[span.clone()];
        // The raw literal has at least as many chars as the decoded string (escapes only shrink).
        if raw.chars().count() <= self.limits.string.saturating_add(2) {
            self.out.push_str(raw);
            return;
        }
        let decoded: String = serde_json::from_str(raw).unwrap_or_else(|_| raw.to_string());
        let total = decoded.chars().count();
        if total <= self.limits.string {
            self.out.push_str(raw);
            return;
        }
        let prefix: String = decoded.chars().take(self.limits.string).collect();
        let id = self.elide(span, path.to_string());
        self.push_string(&format!(
            "{prefix}… (+{} chars · recover {id})",
            thousands(total - self.limits.string)
        ));
    }
}

fn render(source: &str, root: &Node, limits: Limits, prefix: &str) -> (String, Vec<Part>) {
    let mut renderer = Renderer {
        source,
        prefix,
        limits,
        out: String::new(),
        parts: Vec::new(),
    };
    renderer.node(root, "$", 0, 0);
    renderer.out.push('\n');
    (renderer.out, renderer.parts)
}

pub(crate) fn reduce(
    source: &str,
    budget: usize,
    tokenizer: &Tokenizer,
    prefix: &str,
) -> Result<(String, usize, Vec<Part>), Minimum> {
    let mut parser = Parser {
        bytes: source.as_bytes(),
        at: bom_len(source),
        depth: 0,
    };
    let root = parser.value();
    let levels = ladder();
    let last = levels.len() - 1;
    let (text, parts) = render(source, &root, levels[last], prefix);
    let Some(tokens) = fits(tokenizer, &text, budget) else {
        return Err(Minimum(tokenizer.count(&text)));
    };
    let mut best = (text, tokens, parts);
    // Smallest index (least harsh) that fits; `hi` fits, `lo` is unknown below.
    let (mut lo, mut hi) = (0usize, last);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let (text, parts) = render(source, &root, levels[mid], prefix);
        match fits(tokenizer, &text, budget) {
            Some(tokens) => {
                hi = mid;
                best = (text, tokens, parts);
            }
            None => lo = mid + 1,
        }
    }
    // A fill under 80 % means the ladder stepped past a good level: try the tight ones and keep
    // the fullest that fits (the first of equals, so the choice is deterministic).
    if best.1 * 5 < budget * 4 {
        for limits in tight_levels() {
            let (text, parts) = render(source, &root, limits, prefix);
            if let Some(tokens) = fits(tokenizer, &text, budget)
                && tokens > best.1
            {
                best = (text, tokens, parts);
            }
        }
    }
    let (text, tokens, mut parts) = best;
    let whole = Part {
        chunk_id: format!("{prefix}doc"),
        locator: "whole document".into(),
        original: source.to_string(),
        resolution: Some(Resolution::Skeleton),
    };
    parts.insert(0, whole);
    Ok((text, tokens, parts))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parser_spans_cover_values() {
        let source = r#" {"a": [1, "x\"y", {"b": null}], "c d": true} "#;
        let mut parser = Parser {
            bytes: source.as_bytes(),
            at: bom_len(source),
            depth: 0,
        };
        let root = parser.value();
        let Node::Object { span, members } = &root else {
            panic!("object expected");
        };
        assert_eq!(
            &source[span.clone()],
            r#"{"a": [1, "x\"y", {"b": null}], "c d": true}"#
        );
        assert_eq!(&source[members[1].0.clone()], r#""c d""#);
        let Node::Array { items, .. } = &members[0].1 else {
            panic!("array expected");
        };
        assert_eq!(&source[items[1].span()], r#""x\"y""#);
        assert_eq!(&source[items[2].span()], r#"{"b": null}"#);
    }

    #[test]
    fn tight_budgets_keep_every_top_level_key() {
        let source = include_str!("../../../fixtures/compress/orders.json");
        let tokenizer = Tokenizer::default();
        for budget in [120, 160, 200, 240] {
            let (text, tokens, parts) = reduce(source, budget, &tokenizer, "").expect("fits");
            assert!(tokens <= budget && tokens == tokenizer.count(&text));
            // At least half the budget is used, not the 55 tokens of two keys.
            assert!(
                tokens * 2 >= budget,
                "budget {budget}: {tokens} tokens\n{text}"
            );
            let value: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
            let keys: Vec<&String> = value.as_object().expect("object").keys().collect();
            assert!(
                ["api_version", "query", "results", "total"]
                    .iter()
                    .all(|k| keys.iter().any(|key| key == k)),
                "budget {budget}: {keys:?}"
            );
            for part in &parts[1..] {
                assert!(source.contains(&part.original));
            }
        }
    }

    #[test]
    fn every_level_renders_valid_json() {
        let source = serde_json::json!({
            "items": (0..50).map(|i| serde_json::json!({"id": i, "name": format!("item {i} ").repeat(20)})).collect::<Vec<_>>(),
            "meta": {"deep": {"deeper": {"deepest": [1, 2, 3]}}},
        })
        .to_string();
        let mut parser = Parser {
            bytes: source.as_bytes(),
            at: bom_len(&source),
            depth: 0,
        };
        let root = parser.value();
        for limits in ladder().into_iter().chain(tight_levels()) {
            let (text, parts) = render(&source, &root, limits, "");
            serde_json::from_str::<serde_json::Value>(&text).expect("valid JSON");
            for part in parts {
                assert!(source.contains(&part.original));
            }
        }
    }
}
