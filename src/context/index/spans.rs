//! Splitting a file into spans: code by tree-sitter definitions, Markdown by sections,
//! JSON/YAML/TOML by top-level keys, logs by line groups, prose by paragraphs.

use super::skeleton::{self, LineMap, Outline};
use super::{
    FragmentKind, MAX_BLOCK_LINES, MIN_PARAGRAPH_BYTES, SPLIT_BYTES, Span, is_leading_line,
};

/// Splits a code file into spans: definitions (with their leading docs and attributes),
/// module-level blocks between them, and large containers into their members.
pub(super) fn code_spans(text: &str, lines: &LineMap, outline: &Outline) -> Vec<Span> {
    let flags: Vec<bool> = skeleton::line_flags(text, lines, outline)
        .into_iter()
        .map(|f| f != skeleton::LineFlag::Code)
        .collect();
    let items = &outline.items;
    let mut children: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
    let mut roots = Vec::new();
    for (index, item) in items.iter().enumerate() {
        match item.parent {
            Some(parent) => children[parent].push(index),
            None => roots.push(index),
        }
    }
    let builder = SpanBuilder {
        text,
        lines,
        outline,
        flags: &flags,
        children: &children,
    };
    let mut spans = Vec::new();
    builder.partition(&roots, 0, lines.len() - 1, None, &mut spans);
    spans
}

struct SpanBuilder<'a> {
    text: &'a str,
    lines: &'a LineMap,
    outline: &'a Outline,
    flags: &'a [bool],
    children: &'a [Vec<usize>],
}

impl SpanBuilder<'_> {
    /// A line's text; a byte-order mark is not part of the first line's code (an attribute
    /// after it still joins the item below).
    fn line_text(&self, line: usize) -> &str {
        self.text[self.lines.span(line)].trim_start_matches('\u{FEFF}')
    }

    fn is_blank(&self, line: usize) -> bool {
        self.line_text(line).trim().is_empty()
    }

    /// First line of an item including the docs and attributes directly above it.
    fn extended_start(&self, item: usize, floor: usize) -> usize {
        let mut first = self.lines.line_of(self.outline.items[item].range.start);
        while first > floor
            && !self.is_blank(first - 1)
            && is_leading_line(self.line_text(first - 1), self.flags[first - 1])
        {
            first -= 1;
        }
        first
    }

    fn item_last(&self, item: usize) -> usize {
        let range = &self.outline.items[item].range;
        self.lines
            .line_of(range.end.saturating_sub(1).max(range.start))
    }

    fn header(&self, item: usize) -> String {
        let mut start = self.outline.items[item].range.start;
        let mut line = self.lines.line_of(start);
        // An item that starts with its annotations or attributes (`@SuppressWarnings(…)` before
        // a Java class) is named by the line that declares it.
        let last = self.item_last(item);
        while line < last && {
            let text = self.text[start..self.lines.span(line).end].trim_start();
            is_leading_line(text, false) && !text.starts_with("@interface")
        } {
            line += 1;
            start = self.lines.starts[line];
        }
        let mut header = self.text[start..self.lines.span(line).end]
            .trim()
            .trim_end_matches(['{', ':'])
            .trim()
            .to_string();
        if header.len() > 80 {
            let mut cut = 80;
            while !header.is_char_boundary(cut) {
                cut -= 1;
            }
            header.truncate(cut);
            header.push('…');
        }
        header
    }

    /// The header of `item` as the context of what it holds, under `context` when nested.
    fn nested_header(&self, item: usize, context: Option<&str>) -> String {
        match context {
            Some(outer) => format!("{outer} > {}", self.header(item)),
            None => self.header(item),
        }
    }

    fn member_names(&self, item: usize, out: &mut Vec<String>) {
        if !self.outline.items[item].kind.is_container() {
            return;
        }
        for &member in &self.children[item] {
            if let Some(name) = &self.outline.items[member].name
                && !out.contains(name)
            {
                out.push(name.clone());
            }
            self.member_names(member, out);
        }
    }

    fn partition(
        &self,
        items: &[usize],
        low: usize,
        high: usize,
        context: Option<&str>,
        out: &mut Vec<Span>,
    ) {
        let mut cursor = low;
        for &item in items {
            let last = self.item_last(item).min(high);
            if last < cursor {
                // Shares a line with the previous fragment: that fragment defines it too.
                if let (Some(span), Some(name)) =
                    (out.last_mut(), self.outline.items[item].name.clone())
                {
                    span.symbols.push(name);
                }
                continue;
            }
            let first = self.extended_start(item, cursor).max(cursor);
            if first > cursor {
                self.gap(cursor, first - 1, context, out);
            }
            let node = &self.outline.items[item];
            let kind = FragmentKind::from_item(node.kind);
            let symbols: Vec<String> = node.name.iter().cloned().collect();
            let members = &self.children[item];
            let size = self.lines.starts[last + 1] - self.lines.starts[first];
            if node.kind.is_container() && !members.is_empty() && size > SPLIT_BYTES {
                let member_first = self.extended_start(members[0], first + 1).max(first + 1);
                out.push(Span {
                    kind,
                    first,
                    last: member_first - 1,
                    symbols,
                    context: context.map(str::to_string),
                });
                let header = self.nested_header(item, context);
                let before = out.len();
                self.partition(members, member_first, last, Some(&header), out);
                if out.len() == before
                    && let Some(span) = out.last_mut()
                {
                    span.last = last;
                }
            } else if node.kind.is_container() && members.is_empty() && size > SPLIT_BYTES * 2 {
                // A record with no member items (a struct's fields, an enum's variants) that
                // is too big to send whole is cut into runs of members like module-level
                // code: the run a query names can then be sent in full instead of the whole
                // record going out as a one-line reference.
                let header = self.nested_header(item, context);
                for (part, mut span) in runs(self.text, self.lines, first, last, kind, ends_member)
                    .into_iter()
                    .enumerate()
                {
                    if part == 0 {
                        span.symbols = symbols.clone();
                        span.context = context.map(str::to_string);
                    } else {
                        span.context = Some(header.clone());
                    }
                    out.push(span);
                }
            } else {
                // An unsplit container defines its members too.
                let mut symbols = symbols;
                self.member_names(item, &mut symbols);
                out.push(Span {
                    kind,
                    first,
                    last,
                    symbols,
                    context: context.map(str::to_string),
                });
            }
            cursor = last + 1;
        }
        if cursor <= high {
            self.gap(cursor, high, context, out);
        }
    }

    /// Lines between definitions: blank lines and closing braces join the fragment above;
    /// anything else becomes module-level blocks.
    fn gap(&self, first: usize, last: usize, context: Option<&str>, out: &mut Vec<Span>) {
        let trivial = (first..=last).all(|line| {
            let content = self.line_text(line).trim();
            content.is_empty() || content.bytes().all(|b| b"{}()[];,".contains(&b))
        });
        if trivial && let Some(previous) = out.last_mut() {
            previous.last = last;
            return;
        }
        if trivial {
            out.push(Span {
                kind: FragmentKind::Block,
                first,
                last,
                symbols: Vec::new(),
                context: context.map(str::to_string),
            });
            return;
        }
        for mut span in block_spans(self.text, self.lines, first, last, FragmentKind::Block) {
            span.context = context.map(str::to_string);
            out.push(span);
        }
    }
}

/// Cuts lines `first..=last` into blocks of at most [`MAX_BLOCK_LINES`], preferring to cut
/// after a blank line.
pub(super) fn block_spans(
    text: &str,
    lines: &LineMap,
    first: usize,
    last: usize,
    kind: FragmentKind,
) -> Vec<Span> {
    runs(text, lines, first, last, kind, |_| false)
}

/// Whether a record's line (trimmed) ends a member (`,` or `;`): a record is cut there when no
/// blank line offers, so a cut falls between fields or variants rather than inside one.
fn ends_member(line: &str) -> bool {
    line.ends_with([',', ';'])
}

/// Runs of at most [`MAX_BLOCK_LINES`] lines, each cut in its second half after the last blank
/// line, or failing one after the last line `ends_member` accepts (trimmed), or else at the
/// limit.
fn runs(
    text: &str,
    lines: &LineMap,
    first: usize,
    last: usize,
    kind: FragmentKind,
    ends_member: fn(&str) -> bool,
) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut start = first;
    while start <= last {
        let mut end = (start + MAX_BLOCK_LINES - 1).min(last);
        if end < last {
            let window = start + MAX_BLOCK_LINES / 2..=end;
            let line = |l: usize| text[lines.span(l)].trim();
            if let Some(cut) = window
                .clone()
                .rev()
                .find(|&l| line(l).is_empty())
                .or_else(|| window.rev().find(|&l| ends_member(line(l))))
            {
                end = cut;
            }
        }
        spans.push(Span {
            kind,
            first: start,
            last: end,
            symbols: Vec::new(),
            context: None,
        });
        start = end + 1;
    }
    spans
}

pub(super) fn markdown_spans(text: &str, lines: &LineMap) -> Vec<Span> {
    let mut heads: Vec<(usize, String)> = Vec::new();
    let mut fenced = false;
    for line in 0..lines.len() {
        let content = &text[lines.span(line)];
        let trimmed = content.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let hashes = content.bytes().take_while(|&b| b == b'#').count();
        if (1..=6).contains(&hashes) && content[hashes..].starts_with(' ') {
            heads.push((line, content[hashes..].trim().to_string()));
        }
    }
    let mut spans = Vec::new();
    let first_head = heads.first().map_or(lines.len(), |h| h.0);
    if first_head > 0 {
        spans.extend(paragraph_spans_range(text, lines, 0, first_head - 1));
    }
    for (i, (line, title)) in heads.iter().enumerate() {
        let end = heads.get(i + 1).map_or(lines.len(), |h| h.0) - 1;
        let size = lines.starts[end + 1] - lines.starts[*line];
        if size > SPLIT_BYTES * 2 {
            let mut parts = block_spans(text, lines, *line, end, FragmentKind::Section);
            for part in &mut parts {
                part.symbols = vec![title.clone()];
            }
            spans.extend(parts);
        } else {
            spans.push(Span {
                kind: FragmentKind::Section,
                first: *line,
                last: end,
                symbols: vec![title.clone()],
                context: None,
            });
        }
    }
    spans
}

pub(super) fn paragraph_spans(text: &str, lines: &LineMap) -> Vec<Span> {
    paragraph_spans_range(text, lines, 0, lines.len() - 1)
}

/// Paragraphs (runs separated by blank lines), merged until each holds
/// [`MIN_PARAGRAPH_BYTES`]; long runs are cut at [`MAX_BLOCK_LINES`].
pub(super) fn paragraph_spans_range(
    text: &str,
    lines: &LineMap,
    first: usize,
    last: usize,
) -> Vec<Span> {
    let mut spans: Vec<Span> = Vec::new();
    let mut start = first;
    let mut line = first;
    while line <= last {
        let blank = text[lines.span(line)].trim().is_empty();
        let size = lines.starts[line + 1] - lines.starts[start];
        let long = line + 1 - start >= MAX_BLOCK_LINES;
        if (blank && size >= MIN_PARAGRAPH_BYTES) || long || line == last {
            spans.push(Span {
                kind: FragmentKind::Paragraph,
                first: start,
                last: line,
                symbols: Vec::new(),
                context: None,
            });
            start = line + 1;
        }
        line += 1;
    }
    spans
}

pub(super) fn log_spans(lines: &LineMap) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut start = 0;
    while start < lines.len() {
        let end = (start + 40 - 1).min(lines.len() - 1);
        spans.push(Span {
            kind: FragmentKind::LogGroup,
            first: start,
            last: end,
            symbols: Vec::new(),
            context: None,
        });
        start = end + 1;
    }
    spans
}

/// Spans starting at each `(line, key)`; text before the first key joins the first span.
pub(super) fn keyed_spans(text: &str, lines: &LineMap, keys: Vec<(usize, String)>) -> Vec<Span> {
    if keys.is_empty() {
        return block_spans(text, lines, 0, lines.len() - 1, FragmentKind::Key);
    }
    let mut spans = Vec::new();
    for (i, (line, key)) in keys.iter().enumerate() {
        let first = if i == 0 { 0 } else { *line };
        let last = keys.get(i + 1).map_or(lines.len(), |k| k.0) - 1;
        spans.push(Span {
            kind: FragmentKind::Key,
            first,
            last,
            symbols: vec![key.clone()],
            context: None,
        });
    }
    spans
}

/// Top-level keys of a JSON object, found by a string-aware scan.
pub(super) fn json_spans(text: &str, lines: &LineMap) -> Vec<Span> {
    let bytes = text.as_bytes();
    let mut depth = 0usize;
    let mut keys = Vec::new();
    let mut i = 0;
    let mut expect_key = false;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    if bytes[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                if depth == 1 && expect_key {
                    let key = text.get(start + 1..i.min(text.len())).unwrap_or_default();
                    let line = lines.line_of(start);
                    if keys.last().is_none_or(|(l, _): &(usize, String)| *l < line) {
                        keys.push((line, key.to_string()));
                    }
                    expect_key = false;
                }
            }
            b'{' | b'[' => {
                depth += 1;
                expect_key = depth == 1 && bytes[i] == b'{';
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            b',' if depth == 1 => expect_key = true,
            _ => {}
        }
        i += 1;
    }
    keyed_spans(text, lines, keys)
}

pub(super) fn yaml_spans(text: &str, lines: &LineMap) -> Vec<Span> {
    let keys = (0..lines.len())
        .filter_map(|line| {
            let content = &text[lines.span(line)];
            let first = content.chars().next()?;
            if first.is_whitespace() || matches!(first, '#' | '-' | '\'' | '"' | '{' | '[') {
                return None;
            }
            let (key, _) = content.split_once(':')?;
            Some((line, key.trim().to_string()))
        })
        .collect();
    keyed_spans(text, lines, keys)
}

pub(super) fn toml_spans(text: &str, lines: &LineMap) -> Vec<Span> {
    let mut keys: Vec<(usize, String)> = (0..lines.len())
        .filter_map(|line| {
            let content = text[lines.span(line)].trim();
            let table = content.strip_prefix('[')?;
            let name = table.trim_start_matches('[').split(']').next()?.trim();
            Some((line, name.to_string()))
        })
        .collect();
    if keys.first().is_some_and(|(line, _)| *line > 0) {
        let root_has_keys = (0..keys[0].0).any(|l| {
            let c = text[lines.span(l)].trim();
            !c.is_empty() && !c.starts_with('#')
        });
        if root_has_keys {
            keys.insert(0, (0, "(top level)".to_string()));
        }
    }
    keyed_spans(text, lines, keys)
}
