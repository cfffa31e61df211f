//! Code elision by syntax tree, for the languages the context engine parses (its tree-sitter
//! grammars and `queries/<lang>/skeleton.scm`, through `context::skeleton::outline`).
//!
//! Every line unit gets a rank; [`units::fit`] keeps the best-ranked prefix that fits, so the
//! chunks still partition the input and every marker recovers exact bytes. Ranks, best first:
//! 1. declarations that say what the file offers: item headers (a signature however many lines
//!    it spans, `impl`/class/struct first lines), the first lines of the attributes and
//!    decorators glued above them, imports, and the lines that close a body or a container (so a kept signature keeps
//!    its braces balanced); shallow before deep;
//! 2. the first line of each item's doc comment or docstring;
//! 3. the fields and variants of type definitions (structs, enums, type aliases, interfaces);
//! 4. other declarations outside bodies (class attributes, module-level statements, blanks);
//! 5. the rest of doc comments and docstrings outside bodies;
//! 6. body lines, grouped by their outermost body (a function or method body, a multi-line
//!    initialiser): the smallest body first, so the largest is elided first; inside a body its
//!    own lines (with nested definitions' signatures) before the bodies nested in it.
//!
//! The brace/indentation reducer of `code` is the fallback for other languages and for text
//! the grammar cannot take (a parse that gives up, or errors with no body found).

use std::ops::Range;

use super::units::Unit;
use crate::context::index::Language;
use crate::context::skeleton::{self, ItemKind, Outline};

/// The rank order of `units` (every index once, best first), or why the syntax tree cannot
/// be used.
pub(crate) fn order(
    source: &str,
    units: &[Unit],
    language: Language,
    name: &str,
) -> Result<Vec<usize>, String> {
    let outline = skeleton::outline(language, name, source).map_err(|e| e.to_string())?;
    if outline.has_errors && outline.bodies.is_empty() {
        return Err(format!(
            "the {language} parser found syntax errors and no function body"
        ));
    }
    Ok(rank(source, units, &outline))
}

/// The non-blank content of a unit (bytes), or `None` for a blank unit.
fn content(source: &str, unit: &Unit) -> Option<Range<usize>> {
    let text = &source[unit.start..unit.end];
    let trimmed = text.trim_start();
    if trimmed.trim_end().is_empty() {
        return None;
    }
    let start = unit.start + (text.len() - trimmed.len());
    Some(start..start + trimmed.trim_end().len())
}

/// The part of a body its lines live in: a block's delimiters (`{ … }`, `[ … ]`, `( … )`)
/// belong to the lines of the signature and of the closer, not to the body.
fn inner(source: &str, body: &Range<usize>) -> Range<usize> {
    let text = &source[body.clone()];
    let delimited = [("{", "}"), ("[", "]"), ("(", ")")]
        .iter()
        .any(|(open, close)| text.starts_with(open) && text.ends_with(close));
    if delimited && text.len() >= 2 {
        body.start + 1..body.end - 1
    } else {
        body.clone()
    }
}

/// Indexes of the units a byte range touches (by their byte spans).
fn touched(units: &[Unit], range: &Range<usize>) -> Range<usize> {
    let first = units.partition_point(|u| u.end <= range.start);
    let last = units.partition_point(|u| u.start < range.end.max(range.start + 1));
    first..last.max(first)
}

/// Whether a unit lies inside `range`: its content does, or, blank, its start does.
fn inside(source: &str, unit: &Unit, range: &Range<usize>) -> bool {
    match content(source, unit) {
        Some(c) => c.start >= range.start && c.end <= range.end,
        None => unit.start >= range.start && unit.start < range.end,
    }
}

const DECLARATION: u8 = 0;
const DOC_HEAD: u8 = 1;
const TYPE_MEMBER: u8 = 2;
const OTHER_DECLARATION: u8 = 3;
const DOC_TAIL: u8 = 4;
const BODY: u8 = 5;

fn rank(source: &str, units: &[Unit], outline: &Outline) -> Vec<usize> {
    let n = units.len();
    // Body nesting: how deep each unit is, its outermost body and the size of that body.
    let mut depth = vec![0usize; n];
    let mut root: Vec<Option<usize>> = vec![None; n];
    let inners: Vec<Range<usize>> = outline.bodies.iter().map(|b| inner(source, b)).collect();
    for (index, body) in inners.iter().enumerate() {
        for u in touched(units, body) {
            if inside(source, &units[u], body) {
                depth[u] += 1;
                root[u].get_or_insert(index);
            }
        }
    }
    // Container nesting of declarations (an impl's methods, a class's members).
    let mut nesting = vec![0usize; n];
    for item in outline.items.iter().filter(|i| i.kind.is_container()) {
        for u in touched(units, &item.range) {
            // The closing line ranks with the opener, at the container's own depth.
            if units[u].start > item.range.start && units[u].end < item.range.end {
                nesting[u] += 1;
            }
        }
    }
    let comment = comment_units(source, units, &outline.comments);
    let mut tier = vec![OTHER_DECLARATION; n];
    // Fields and variants: what a type is made of is part of what the file offers.
    for item in &outline.items {
        if matches!(
            item.kind,
            ItemKind::Struct | ItemKind::Enum | ItemKind::Type | ItemKind::Interface
        ) {
            for u in touched(units, &item.range) {
                if depth[u] == 0 && content(source, &units[u]).is_some() {
                    tier[u] = TYPE_MEMBER;
                }
            }
        }
    }
    // Headers: from an item's start to where its own body begins (a whole signature), or the
    // first line of a container, or the whole item when it has no body (a one-line const, a
    // signature in a trait). Type definitions keep their first line here; their fields and
    // variants are other declarations.
    // Bodies by start, so an item's own body is found by bisection (a scan per item made
    // files of many small functions quadratic).
    let mut by_start: Vec<usize> = (0..outline.bodies.len()).collect();
    by_start.sort_by_key(|&b| (outline.bodies[b].start, b));
    // Where the items that end before a given offset end, for the glued-lines walk below.
    let mut ends: Vec<usize> = outline.items.iter().map(|i| i.range.end).collect();
    ends.sort_unstable();
    for item in &outline.items {
        let from = by_start.partition_point(|&b| outline.bodies[b].start < item.range.start);
        let body = by_start[from..]
            .iter()
            .take_while(|&&b| outline.bodies[b].start <= item.range.end)
            .filter(|&&b| outline.bodies[b].end <= item.range.end)
            .min()
            .copied();
        let header_end = match item.kind {
            ItemKind::Class
            | ItemKind::Impl
            | ItemKind::Trait
            | ItemKind::Interface
            | ItemKind::Module
            | ItemKind::Struct
            | ItemKind::Enum => line_end(source, item.range.start),
            _ => body.map_or(item.range.end, |b| inners[b].start),
        };
        for u in touched(units, &(item.range.start..header_end)) {
            tier[u] = DECLARATION;
        }
        // What is glued above the item (attributes, decorators, a doc comment) belongs to it;
        // only the first line of a comment run is a header line.
        let first = touched(units, &(item.range.start..item.range.start + 1)).start;
        // The walk stops at the item before: its lines are not glued to this one (walking on
        // through them made a file of one-line functions quadratic).
        let before = ends[..ends.partition_point(|&e| e <= item.range.start)]
            .last()
            .copied();
        let mut u = first;
        while u > 0 {
            u -= 1;
            if depth[u] > 0
                || before.is_some_and(|end| units[u].end <= end)
                || content(source, &units[u]).is_none()
            {
                break;
            }
            let text = source[units[u].start..units[u].end].trim_start();
            if comment[u] {
                if u == 0 || !comment[u - 1] {
                    tier[u] = DOC_HEAD;
                }
            } else if text.starts_with('@') || text.starts_with("#[") {
                tier[u] = DECLARATION;
            }
            // Other glued lines continue a multi-line attribute or decorator: its arguments
            // (test parameters, option tables) are data, ranked with other declarations.
        }
        // The line that closes a container.
        if item.kind.is_container() {
            for u in touched(units, &(item.range.end - 1..item.range.end)) {
                if depth[u] == 0 {
                    tier[u] = DECLARATION;
                }
            }
        }
    }
    // The lines that close a body, so a kept signature keeps its closing brace.
    for (body, inner) in outline.bodies.iter().zip(&inners) {
        if inner.end < body.end {
            for u in touched(units, &(inner.end..body.end)) {
                if depth[u] == 0 {
                    tier[u] = DECLARATION;
                }
            }
        }
    }
    for (u, unit) in units.iter().enumerate() {
        let text = source[unit.start..unit.end].trim_start();
        if depth[u] == 0 && super::code::IMPORTS.iter().any(|k| text.starts_with(k)) {
            tier[u] = DECLARATION;
        }
    }
    // Comment runs: the first line of a run is worth what its item's header is (set above for
    // glued runs); the rest waits until all declarations are in.
    for u in 0..n {
        if comment[u] && depth[u] == 0 && tier[u] > DOC_HEAD && u > 0 && comment[u - 1] {
            tier[u] = DOC_TAIL;
        }
    }
    // A docstring's first line stays with its item: in an outermost body it ranks with the
    // body's owner (deeper ones with their body's lines, so an elided body stays one run);
    // outside bodies (a module or class docstring) its other lines are doc tails.
    let mut doc_head = vec![false; n];
    for doc in &outline.docs {
        let lines = touched(units, doc);
        if lines.is_empty() {
            continue;
        }
        doc_head[lines.start] = true;
        tier[lines.start] = DOC_HEAD;
        for u in lines.start + 1..lines.end {
            if depth[u] == 0 {
                tier[u] = DOC_TAIL;
            }
        }
    }
    let body_size: Vec<usize> = inners.iter().map(|r| r.end - r.start).collect();
    let mut keys: Vec<(u8, usize, usize, usize, usize)> = (0..n)
        .map(|u| match root[u] {
            // A docstring's first line in an outermost body ranks as its owner's doc line.
            Some(_) if doc_head[u] && depth[u] == 1 => (DOC_HEAD, nesting[u], 0, 0, u),
            None => (tier[u], nesting[u], 0, 0, u),
            Some(r) => (BODY, body_size[r], outline.bodies[r].start, depth[u], u),
        })
        .collect();
    // A blank line between declarations is kept only with both its neighbours: alone it
    // would split an elided run in two, each with its own marker.
    let blank: Vec<bool> = units.iter().map(|u| content(source, u).is_none()).collect();
    let mut previous: Option<usize> = None;
    let mut pending: Vec<usize> = Vec::new();
    for u in 0..=n {
        if u < n && blank[u] {
            if root[u].is_none() {
                pending.push(u);
            }
            continue;
        }
        let next = (u < n).then_some(u);
        for &b in &pending {
            let neighbour = [previous, next]
                .into_iter()
                .flatten()
                .map(|v| keys[v])
                .max()
                .unwrap_or(keys[b]);
            keys[b] = (neighbour.0, neighbour.1, neighbour.2, neighbour.3, b);
        }
        pending.clear();
        previous = next;
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&u| keys[u]);
    order
}

/// The end of the line holding `offset` (before its line break).
fn line_end(source: &str, offset: usize) -> usize {
    source[offset..]
        .find('\n')
        .map_or(source.len(), |i| offset + i)
}

/// Units whose content lies inside a comment.
fn comment_units(source: &str, units: &[Unit], comments: &[Range<usize>]) -> Vec<bool> {
    let mut flags = vec![false; units.len()];
    for comment in comments {
        for u in touched(units, comment) {
            if content(source, &units[u]).is_some() && inside(source, &units[u], comment) {
                flags[u] = true;
            }
        }
    }
    flags
}

#[cfg(test)]
mod tests;
