//! Tree-sitter outlines and skeletons: parse a source file, find its definitions, the bodies a
//! skeleton elides and its comments, and render the skeleton of any line range.
//!
//! What to capture lives in data files (`queries/<lang>/skeleton.scm`), compiled once per
//! process. A skeleton keeps every line outside elided bodies (signatures whole, however many
//! lines they span, visibility, `impl`/class headers, type definitions, imports), keeps only the
//! first line of each comment run (the first doc line), drops blank lines and attributes that
//! say how rather than what, and replaces each body with a `{...}` marker (a multi-line
//! initialiser with `…`); the piece's header names the recovery handle that holds the exact
//! bytes. Runs that are not API (private struct fields, private imports) become one counted
//! label such as `/* 3 private fields … */`; every function signature stays whole, trait-impl
//! methods included, except methods of standard traits whose signature the trait fixes
//! (`fmt`, `clone`, `next`, `poll`, … — see `queries/rust/skeleton.scm`).

use std::cell::RefCell;
use std::ops::Range;
use std::sync::OnceLock;

use tree_sitter::{Parser, Query, QueryCursor, StreamingIterator};

use super::index::Language;

/// Errors of the tree-sitter layer.
#[derive(Debug, thiserror::Error)]
pub enum SkeletonError {
    #[error("skeleton query for {language} does not compile: {message}")]
    Query { language: Language, message: String },
    #[error("grammar for {language} cannot be loaded: {message}")]
    Grammar { language: Language, message: String },
    #[error("{language} parser gave up on {name} (file too deeply nested or timed out)")]
    Parse { language: Language, name: String },
}

/// A language the tree-sitter layer understands.
pub fn has_grammar(language: Language) -> bool {
    grammar(language).is_some()
}

fn grammar(language: Language) -> Option<tree_sitter::Language> {
    Some(match language {
        Language::Rust => tree_sitter_rust::LANGUAGE.into(),
        Language::Python => tree_sitter_python::LANGUAGE.into(),
        Language::Javascript => tree_sitter_javascript::LANGUAGE.into(),
        Language::Typescript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
        Language::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
        Language::Go => tree_sitter_go::LANGUAGE.into(),
        Language::Java => tree_sitter_java::LANGUAGE.into(),
        Language::C => tree_sitter_c::LANGUAGE.into(),
        Language::Cpp => tree_sitter_cpp::LANGUAGE.into(),
        _ => return None,
    })
}

/// The query source of a language (a data file compiled into the binary).
pub fn query_source(language: Language) -> Option<&'static str> {
    Some(match language {
        Language::Rust => include_str!("../../queries/rust/skeleton.scm"),
        Language::Python => include_str!("../../queries/python/skeleton.scm"),
        Language::Javascript => include_str!("../../queries/javascript/skeleton.scm"),
        Language::Typescript | Language::Tsx => {
            include_str!("../../queries/typescript/skeleton.scm")
        }
        Language::Go => include_str!("../../queries/go/skeleton.scm"),
        Language::Java => include_str!("../../queries/java/skeleton.scm"),
        Language::C => include_str!("../../queries/c/skeleton.scm"),
        Language::Cpp => include_str!("../../queries/cpp/skeleton.scm"),
        _ => return None,
    })
}

/// Compiles the skeleton query of `language` against its grammar.
pub fn compile_query(language: Language) -> Result<Query, SkeletonError> {
    let (Some(grammar), Some(source)) = (grammar(language), query_source(language)) else {
        return Err(SkeletonError::Grammar {
            language,
            message: "no tree-sitter grammar for this language".into(),
        });
    };
    Query::new(&grammar, source).map_err(|e| SkeletonError::Query {
        language,
        message: format!("line {}: {}", e.row + 1, e.message),
    })
}

/// The compiled query of a language, shared process-wide.
fn cached_query(language: Language) -> Result<&'static Query, SkeletonError> {
    const LANGUAGES: usize = 10;
    static QUERIES: [OnceLock<Result<Query, String>>; LANGUAGES] =
        [const { OnceLock::new() }; LANGUAGES];
    let slot = match language {
        Language::Rust => 0,
        Language::Python => 1,
        Language::Javascript => 2,
        Language::Typescript => 3,
        Language::Tsx => 4,
        Language::Go => 5,
        Language::Java => 6,
        Language::C => 7,
        Language::Cpp => 8,
        _ => 9,
    };
    let compiled = QUERIES[slot].get_or_init(|| compile_query(language).map_err(|e| e.to_string()));
    compiled.as_ref().map_err(|message| SkeletonError::Query {
        language,
        message: message.clone(),
    })
}

/// What kind of definition an item is (from its `@item.<kind>` capture).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemKind {
    Function,
    Method,
    Class,
    Struct,
    Enum,
    Trait,
    Interface,
    Impl,
    Module,
    Type,
    Const,
    Macro,
}

impl ItemKind {
    fn from_capture(name: &str) -> Option<Self> {
        Some(match name.strip_prefix("item.")? {
            "function" => ItemKind::Function,
            "method" => ItemKind::Method,
            "class" => ItemKind::Class,
            "struct" => ItemKind::Struct,
            "enum" => ItemKind::Enum,
            "trait" => ItemKind::Trait,
            "interface" => ItemKind::Interface,
            "impl" => ItemKind::Impl,
            "module" => ItemKind::Module,
            "type" => ItemKind::Type,
            "const" => ItemKind::Const,
            "macro" => ItemKind::Macro,
            _ => return None,
        })
    }

    /// Whether the item's nested definitions may become fragments of their own.
    pub fn is_container(self) -> bool {
        matches!(
            self,
            ItemKind::Class
                | ItemKind::Trait
                | ItemKind::Interface
                | ItemKind::Impl
                | ItemKind::Module
                | ItemKind::Enum
                | ItemKind::Struct
        )
    }
}

/// One definition found by the query.
#[derive(Debug, Clone)]
pub struct Item {
    pub kind: ItemKind,
    pub name: Option<String>,
    pub range: Range<usize>,
    /// Index of the innermost enclosing item.
    pub parent: Option<usize>,
}

/// A region a skeleton replaces by a marker.
#[derive(Debug, Clone)]
pub struct Elision {
    pub range: Range<usize>,
    /// A docstring inside the region whose first line survives.
    pub doc: Option<Range<usize>>,
    /// Keep the node's first line (folds) instead of eliding from the region start.
    pub fold: bool,
    /// Text standing in for the region instead of the body marker (a counted run of private
    /// fields or imports).
    pub label: Option<String>,
}

/// The parsed structure of one file.
#[derive(Debug, Clone, Default)]
pub struct Outline {
    /// Sorted by start, outer before inner.
    pub items: Vec<Item>,
    /// Outermost elided regions, sorted and disjoint.
    pub elisions: Vec<Elision>,
    pub comments: Vec<Range<usize>>,
    /// Regions whose lines skeletons drop: comments that do not document (in languages whose
    /// query marks documentation with `@doc.marker`) and `@drop` captures.
    pub dropped: Vec<Range<usize>>,
    /// Whether the parser had to recover from syntax errors.
    pub has_errors: bool,
    /// Every region a body marker could stand for, nested ones included: function and method
    /// bodies, multi-line initialisers, and folded nodes after their first line. Sorted by
    /// start, outer before inner. `compress` elides code by these nodes, largest first.
    pub bodies: Vec<Range<usize>>,
    /// Docstrings (a string opening a body, or the module): their first line documents the
    /// item, like a doc comment's first line.
    pub docs: Vec<Range<usize>>,
}

thread_local! {
    static PARSER: RefCell<Parser> = RefCell::new(Parser::new());
}

/// Parses `text` and collects its outline.
pub fn outline(language: Language, name: &str, text: &str) -> Result<Outline, SkeletonError> {
    let query = cached_query(language)?;
    let mut raw = RawCaptures::default();
    let has_errors = collect(language, name, text, 0..text.len(), 0, &mut raw)?;
    let RawCaptures {
        mut items,
        bodies,
        values,
        labelled,
        docs,
        mut comments,
        mut doc_markers,
        mut dropped,
    } = raw;
    let names = query.capture_names();
    // Several patterns can match one node (a named and a generic function pattern): keep one
    // item per range, preferring the one with a name.
    items.sort_by(|a, b| {
        a.range
            .start
            .cmp(&b.range.start)
            .then(b.range.end.cmp(&a.range.end))
            .then(b.name.is_some().cmp(&a.name.is_some()))
    });
    items.dedup_by(|later, earlier| later.range == earlier.range);
    let mut stack: Vec<usize> = Vec::new();
    for index in 0..items.len() {
        while let Some(&top) = stack.last() {
            if items[top].range.end >= items[index].range.end
                && items[top].range.start <= items[index].range.start
            {
                break;
            }
            stack.pop();
        }
        items[index].parent = stack.last().copied();
        if items[index].kind == ItemKind::Function
            && items[index]
                .parent
                .is_some_and(|p| items[p].kind.is_container())
        {
            items[index].kind = ItemKind::Method;
        }
        stack.push(index);
    }
    let mut all_bodies: Vec<Range<usize>> = bodies
        .iter()
        .map(|(range, fold)| {
            if *fold {
                fold_range(range.clone(), text)
            } else {
                range.clone()
            }
        })
        .chain(values)
        .filter(|range| range.start < range.end)
        .collect();
    all_bodies.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
    all_bodies.dedup();
    let mut docs = docs;
    docs.sort_by_key(|r| (r.start, r.end));
    let elisions = outermost(bodies, labelled, &docs, text);
    // A docstring outside any elided body (a class docstring) reads like a comment run: only
    // its first line survives. Elisions are sorted and disjoint, so the one that can hold a
    // docstring is the last that starts at or before it (a scan per docstring made files of
    // many documented functions quadratic).
    for doc in &docs {
        let before = elisions.partition_point(|e| e.range.start <= doc.start);
        let inside = before > 0 && elisions[before - 1].range.end >= doc.end;
        if !inside {
            comments.push(doc.clone());
        }
    }
    comments.sort_by_key(|r| (r.start, r.end));
    comments.dedup();
    if names.contains(&"doc.marker") {
        doc_markers.sort_by_key(|r| (r.start, r.end));
        for comment in &comments {
            if doc_markers
                .binary_search_by_key(&(comment.start, comment.end), |r| (r.start, r.end))
                .is_err()
            {
                dropped.push(comment.clone());
            }
        }
    }
    dropped.sort_by_key(|r| (r.start, r.end));
    Ok(Outline {
        items,
        elisions,
        comments,
        dropped,
        has_errors,
        bodies: all_bodies,
        docs,
    })
}

/// Captures gathered over a file and the macro bodies re-parsed inside it.
#[derive(Default)]
struct RawCaptures {
    items: Vec<Item>,
    bodies: Vec<(Range<usize>, bool)>,
    /// Multi-line initialisers (also in `labelled`, as `…`).
    values: Vec<Range<usize>>,
    /// Runs replaced by a counted label (private fields, imports).
    labelled: Vec<(Range<usize>, String)>,
    docs: Vec<Range<usize>>,
    comments: Vec<Range<usize>>,
    doc_markers: Vec<Range<usize>>,
    dropped: Vec<Range<usize>>,
}

/// How deep macro bodies are re-parsed (`cfg_rt! { cfg_net! { … } }`).
const MACRO_DEPTH: usize = 3;

/// Parses `text[part]` and adds its captures (shifted to file offsets) to `raw`. A captured
/// `@macro.body` (a brace-delimited macro argument such as `cfg_rt! { … }`) is parsed again
/// as source, so the definitions inside become items; when it holds none it is folded.
fn collect(
    language: Language,
    name: &str,
    text: &str,
    part: Range<usize>,
    depth: usize,
    raw: &mut RawCaptures,
) -> Result<bool, SkeletonError> {
    let query = cached_query(language)?;
    let grammar = grammar(language).ok_or_else(|| SkeletonError::Grammar {
        language,
        message: "no tree-sitter grammar for this language".into(),
    })?;
    // A byte-order mark is not source to a grammar: it made the first line an error node and
    // split the first item from its attributes, decorators and docs. Spaces of the same byte
    // length keep every offset.
    let source: std::borrow::Cow<'_, str> = match text[part.clone()].strip_prefix('\u{FEFF}') {
        Some(rest) => format!("   {rest}").into(),
        None => text[part.clone()].into(),
    };
    let source = &*source;
    let base = part.start;
    let tree = PARSER.with(|parser| {
        let mut parser = parser.borrow_mut();
        parser
            .set_language(&grammar)
            .map_err(|e| SkeletonError::Grammar {
                language,
                message: e.to_string(),
            })?;
        parser
            .parse(source, None)
            .ok_or_else(|| SkeletonError::Parse {
                language,
                name: name.to_string(),
            })
    })?;
    let root = tree.root_node();
    let mut has_errors = depth == 0 && root.has_error();
    let names = query.capture_names();
    let mut macro_bodies = Vec::new();
    let mut imports = Vec::new();
    let mut cursor = QueryCursor::new();
    let mut matches = cursor.matches(query, root, source.as_bytes());
    while let Some(found) = matches.next() {
        let mut item: Option<(ItemKind, Range<usize>)> = None;
        let mut name_text: Option<String> = None;
        for capture in found.captures() {
            let local = capture.node.byte_range();
            let range = local.start + base..local.end + base;
            match names[capture.index as usize] {
                "name" => name_text = Some(source[local].trim().to_string()),
                "body" => raw.bodies.push((range, false)),
                "body.multiline" => {
                    if source[local].contains('\n') {
                        raw.bodies.push((range, false));
                    }
                }
                // An initialiser is a body too, but not a block: `const X: T = …;`.
                "value.multiline" => {
                    if source[local].contains('\n') {
                        raw.values.push(range.clone());
                        raw.labelled.push((range, "…".to_string()));
                    }
                }
                "fold" => raw.bodies.push((range, true)),
                "macro.body" => macro_bodies.push(range),
                "fields" => private_field_runs(capture.node, source, base, &mut raw.labelled),
                "import" => imports.push(range),
                "doc" => raw.docs.push(range),
                "comment" => raw.comments.push(range),
                "doc.marker" => raw.doc_markers.push(range),
                "drop" => raw.dropped.push(range),
                other => {
                    if let Some(kind) = ItemKind::from_capture(other) {
                        item = Some((kind, range));
                    }
                }
            }
        }
        if let Some((kind, range)) = item {
            let name = name_text.map(|n| first_line(&n).to_string());
            raw.items.push(Item {
                kind,
                name,
                range,
                parent: None,
            });
        }
    }
    import_runs(imports, text, &mut raw.labelled);
    for body in macro_bodies {
        let inner = &text[body.clone()];
        if !inner.contains('\n') {
            continue;
        }
        let before = raw.items.len();
        if depth < MACRO_DEPTH && inner.starts_with('{') && inner.ends_with('}') {
            has_errors |= collect(
                language,
                name,
                text,
                body.start + 1..body.end - 1,
                depth + 1,
                raw,
            )?;
        }
        if raw.items.len() == before {
            raw.bodies.push((body, true));
        }
    }
    Ok(has_errors)
}

/// Lines a counted run must span before it is replaced by its label (a one-line run costs
/// about what its label would).
const RUN_MIN_LINES: usize = 2;

/// Runs of private struct fields (with the docs and attributes above them) become one
/// `/* N private fields … */` label: they are not part of the type's API, and the marker says
/// how many the fragment's handle recovers.
fn private_field_runs(
    list: tree_sitter::Node<'_>,
    source: &str,
    base: usize,
    out: &mut Vec<(Range<usize>, String)>,
) {
    let mut flush = |run: &mut Option<(usize, usize, usize)>| {
        if let Some((start, end, count)) = run.take()
            && source[start..end].lines().count() >= RUN_MIN_LINES
        {
            let noun = if count == 1 { "field" } else { "fields" };
            out.push((
                start + base..end + base,
                format!("/* {count} private {noun} … */"),
            ));
        }
    };
    let mut run: Option<(usize, usize, usize)> = None;
    let mut leading: Option<usize> = None;
    let mut walker = list.walk();
    for child in list.named_children(&mut walker) {
        match child.kind() {
            "line_comment" | "block_comment" | "attribute_item" => {
                leading.get_or_insert(child.start_byte());
            }
            "field_declaration" => {
                let public = child
                    .child(0)
                    .is_some_and(|c| c.kind() == "visibility_modifier");
                if public {
                    flush(&mut run);
                } else {
                    let mut end = child.end_byte();
                    if let Some(next) = child.next_sibling()
                        && next.kind() == ","
                    {
                        end = next.end_byte();
                    }
                    let start = leading.unwrap_or(child.start_byte());
                    run = Some(match run {
                        Some((first, _, count)) => (first, end, count + 1),
                        None => (start, end, 1),
                    });
                }
                leading = None;
            }
            _ => {}
        }
    }
    flush(&mut run);
}

/// Runs of private imports separated only by whitespace become one `/* N imports … */` label:
/// imports name what a body uses, not what the file offers (`pub use` re-exports stay).
fn import_runs(mut imports: Vec<Range<usize>>, text: &str, out: &mut Vec<(Range<usize>, String)>) {
    imports.retain(|r| !text[r.clone()].starts_with("pub"));
    imports.sort_by_key(|r| r.start);
    let mut run: Option<(Range<usize>, usize)> = None;
    let mut flush = |run: Option<(Range<usize>, usize)>| {
        if let Some((range, count)) = run
            && text[range.clone()].lines().count() >= RUN_MIN_LINES
        {
            let noun = if count == 1 { "import" } else { "imports" };
            out.push((range, format!("/* {count} {noun} … */")));
        }
    };
    // An attribute (`#[cfg(unix)]`) says something about the import after it: it goes into
    // the run with that import, or a label after it read as if it covered the whole run.
    let attributes_only = |gap: &str| {
        gap.lines()
            .map(str::trim)
            .all(|line| line.is_empty() || (line.starts_with("#[") && line.ends_with(']')))
    };
    for import in imports {
        run = match run {
            Some((range, count))
                if range.end <= import.start && attributes_only(&text[range.end..import.start]) =>
            {
                Some((range.start..import.end, count + 1))
            }
            other => {
                flush(other);
                // Attribute lines right above the run's first import start the run.
                let mut start = import.start;
                while start > 0 {
                    let above = text[..start].trim_end();
                    let line_start = above.rfind('\n').map_or(0, |i| i + 1);
                    let line = above[line_start..].trim();
                    if line.starts_with("#[") && line.ends_with(']') {
                        start = line_start;
                    } else {
                        break;
                    }
                }
                Some((start..import.end, 1))
            }
        };
    }
    flush(run);
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

/// The part of a folded node that is elided: a single-line node has nothing to fold (an empty
/// range); otherwise everything from the end of the first line's content.
fn fold_range(range: Range<usize>, text: &str) -> Range<usize> {
    let start = match text[range.clone()].find('\n') {
        Some(i) => range.start + text[range.start..range.start + i].trim_end().len(),
        None => range.end,
    };
    start..range.end
}

/// Keeps the outermost regions, sorted; folds start after their node's first line.
fn outermost(
    mut bodies: Vec<(Range<usize>, bool)>,
    labelled: Vec<(Range<usize>, String)>,
    docs: &[Range<usize>],
    text: &str,
) -> Vec<Elision> {
    for (range, fold) in bodies.iter_mut() {
        if *fold {
            *range = fold_range(range.clone(), text);
        }
    }
    let mut regions: Vec<(Range<usize>, bool, Option<String>)> = bodies
        .into_iter()
        .map(|(range, fold)| (range, fold, None))
        .chain(
            labelled
                .into_iter()
                .map(|(range, label)| (range, false, Some(label))),
        )
        .filter(|(range, _, _)| range.start < range.end)
        .collect();
    regions.sort_by(|a, b| a.0.start.cmp(&b.0.start).then(b.0.end.cmp(&a.0.end)));
    let mut out: Vec<Elision> = Vec::new();
    for (range, fold, label) in regions {
        if out.last().is_some_and(|last| range.start < last.range.end) {
            continue;
        }
        // `docs` is sorted by start: the first inside the region is among those starting in it.
        let doc = label
            .is_none()
            .then(|| {
                docs[docs.partition_point(|d| d.start < range.start)..]
                    .iter()
                    .take_while(|d| d.start <= range.end)
                    .find(|d| d.end <= range.end)
                    .cloned()
            })
            .flatten();
        out.push(Elision {
            range,
            doc,
            fold,
            label,
        });
    }
    out
}

/// Per-file facts the skeleton renderer needs, computed once per file.
#[derive(Debug, Clone)]
pub struct LineMap {
    /// Byte offset of each line start; a final entry holds the text length.
    pub starts: Vec<usize>,
}

impl LineMap {
    pub fn new(text: &str) -> Self {
        let mut starts = Vec::with_capacity(text.len() / 32 + 2);
        starts.push(0);
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' && i + 1 < text.len() {
                starts.push(i + 1);
            }
        }
        starts.push(text.len());
        Self { starts }
    }

    /// Number of lines.
    pub fn len(&self) -> usize {
        self.starts.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Zero-based line holding byte `offset`.
    pub fn line_of(&self, offset: usize) -> usize {
        match self.starts.binary_search(&offset) {
            Ok(line) => line.min(self.len().saturating_sub(1)),
            Err(next) => next.saturating_sub(1),
        }
    }

    /// Byte range of line `line` including its newline.
    pub fn span(&self, line: usize) -> Range<usize> {
        self.starts[line]..self.starts[line + 1]
    }
}

/// How a skeleton treats a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineFlag {
    Code,
    /// A comment line: the first of a run that says something survives.
    Comment,
    /// Never in a skeleton (plain comments where docs are marked, noise attributes).
    Dropped,
}

/// Classifies every line of a parsed file.
pub fn line_flags(text: &str, lines: &LineMap, outline: &Outline) -> Vec<LineFlag> {
    let comments = comment_lines(text, lines, &outline.comments);
    let dropped = comment_lines(text, lines, &outline.dropped);
    comments
        .iter()
        .zip(&dropped)
        .map(|(&comment, &dropped)| {
            if dropped {
                LineFlag::Dropped
            } else if comment {
                LineFlag::Comment
            } else {
                LineFlag::Code
            }
        })
        .collect()
}

/// Which lines are comment-only (their code, ignoring whitespace, lies inside comments).
pub fn comment_lines(text: &str, lines: &LineMap, comments: &[Range<usize>]) -> Vec<bool> {
    let mut flags = vec![false; lines.len()];
    for comment in comments {
        let first = lines.line_of(comment.start);
        let last = lines.line_of(comment.end.saturating_sub(1).max(comment.start));
        for (line, flag) in flags.iter_mut().enumerate().take(last + 1).skip(first) {
            let span = lines.span(line);
            let content = &text[span.clone()];
            let lead = content.len() - content.trim_start().len();
            let trail = content.trim_end().len();
            if trail == 0 {
                continue;
            }
            let code = span.start + lead..span.start + trail;
            if comment.start <= code.start && comment.end >= code.end {
                *flag = true;
            }
        }
    }
    flags
}

/// One parsed file, as the skeleton renderer needs it.
#[derive(Debug, Clone, Copy)]
pub struct SkeletonSource<'a> {
    pub text: &'a str,
    pub lines: &'a LineMap,
    /// From [`line_flags`].
    pub line_flags: &'a [LineFlag],
    /// From [`Outline::elisions`].
    pub elisions: &'a [Elision],
    pub language: Language,
}

/// Renders the skeleton of lines `first..=last` (0-based) of a file. `marker` is added to each
/// elided body (usually empty; see [`marker_text`]).
pub fn render(source: &SkeletonSource<'_>, first: usize, last: usize, marker: &str) -> String {
    let SkeletonSource {
        text,
        lines,
        line_flags,
        elisions,
        language,
    } = *source;
    let mut out = String::new();
    let start = lines.starts[first];
    // The first elision that may touch the range.
    let mut next = elisions.partition_point(|e| e.range.end <= start);
    // A range that starts inside a comment run (a long doc comment cut into blocks) continues
    // it: the run's first line is in the range before, so none of these lines is kept.
    let mut comment_kept = first > 0
        && line_flags.get(first) == Some(&LineFlag::Comment)
        && line_flags.get(first - 1) == Some(&LineFlag::Comment);
    // The opener of a block comment or docstring whose own line said nothing (`/**`, `"""`):
    // the kept line after it is written inside a closed comment of that kind.
    let mut opener: Option<(String, String)> = None;
    for line in first..=last {
        let span = lines.span(line);
        let content_end = span.start + text[span.clone()].trim_end().len();
        while next < elisions.len() && elisions[next].range.end <= span.start {
            next += 1;
        }
        let mut built = String::new();
        let mut cursor = span.start;
        let mut touched = false;
        let mut index = next;
        while index < elisions.len() && elisions[index].range.start <= content_end {
            let elision = &elisions[index];
            if elision.range.end <= cursor {
                index += 1;
                continue;
            }
            touched = true;
            if elision.range.start >= span.start {
                built.push_str(&text[cursor..elision.range.start]);
                push_marker(&mut built, text, elision, marker, language);
            }
            cursor = cursor.max(elision.range.end);
            if elision.range.end > content_end {
                break;
            }
            index += 1;
        }
        if cursor < content_end {
            built.push_str(&text[cursor..content_end]);
        }
        if built.trim().is_empty() {
            continue;
        }
        let flag = line_flags.get(line).copied().unwrap_or(LineFlag::Code);
        // A dropped line goes even when a body marker touches it (a dropped method's `{...}`).
        if flag == LineFlag::Dropped {
            continue;
        }
        let is_comment = !touched && flag == LineFlag::Comment;
        if is_comment {
            // Keep the first line of a run that says something (not a bare `/**`).
            if comment_kept {
                continue;
            }
            let bare = comment_opener(built.trim())
                .filter(|(_, rest)| !rest.chars().any(char::is_alphanumeric));
            if let Some((open, _)) = bare {
                let indent = &built[..built.len() - built.trim_start().len()];
                opener = Some((indent.to_string(), open.to_string()));
                continue;
            }
            if !built.chars().any(char::is_alphanumeric) {
                continue;
            }
            comment_kept = true;
            built = match opener.take() {
                Some((indent, open)) => {
                    format!(
                        "{indent}{}",
                        closed_comment(built.trim_start(), Some(&open))
                    )
                }
                None => closed_comment(&built, None),
            };
        } else {
            comment_kept = false;
            opener = None;
        }
        let trimmed = built.trim();
        // A lone `;` or `)` left after a body ends joins the line that opened the body.
        if touched
            && trimmed.len() <= 2
            && !trimmed.bytes().any(|b| b.is_ascii_alphanumeric())
            && out.ends_with('\n')
            && !out.is_empty()
        {
            out.pop();
            out.push_str(trimmed);
            out.push('\n');
            continue;
        }
        out.push_str(built.trim_end());
        out.push('\n');
    }
    out
}

/// The opener at the start of a comment line that opens a block comment or a docstring, and the
/// rest of the line: `/**`, `/*!`, `/*`, or a triple quote with its string prefix (`r"""`).
fn comment_opener(line: &str) -> Option<(&str, &str)> {
    for open in ["/**", "/*!", "/*"] {
        if let Some(rest) = line.strip_prefix(open) {
            return Some((open, rest));
        }
    }
    let prefix = line
        .bytes()
        .take(2)
        .take_while(|b| b"rRbBuUfF".contains(b))
        .count();
    let after = &line[prefix..];
    ["\"\"\"", "'''"]
        .into_iter()
        .find(|quote| after.starts_with(quote))
        .map(|quote| (&line[..prefix + quote.len()], &after[quote.len()..]))
}

/// A kept comment line written so that it is a whole comment: a skeleton keeps one line of a
/// block comment or docstring, and that line alone left the comment open (`/** Options…` then
/// swallowed the signature after it; `"""Module docstring.` never closed), or was a bare
/// continuation (` * Add two ints.`). `opener` is the bare opener line's, when one came before.
fn closed_comment(line: &str, opener: Option<&str>) -> String {
    let body = line.trim_start();
    let indent = &line[..line.len() - body.len()];
    let body = body.trim_end();
    let close_of = |open: &str| {
        open.trim_start_matches(|c: char| c.is_ascii_alphabetic())
            .to_string()
    };
    let block = |text: &str, open: &str| {
        if text.ends_with("*/") {
            format!("{indent}{open} {text}")
        } else {
            format!("{indent}{open} {text} */")
        }
    };
    if let Some((open, rest)) = comment_opener(body) {
        if open.starts_with("/*") {
            return if rest.contains("*/") {
                line.to_string()
            } else {
                format!("{indent}{body} */")
            };
        }
        let close = close_of(open);
        return if rest.ends_with(close.as_str()) {
            line.to_string()
        } else {
            format!("{indent}{body}{close}")
        };
    }
    match opener {
        Some(open) if open.starts_with("/*") => block(body.trim_start_matches('*').trim(), open),
        Some(open) => {
            let close = close_of(open);
            let text = body.trim_end_matches(close.as_str());
            format!("{indent}{open}{text}{close}")
        }
        // A continuation line of a block comment whose opener line was not in the range.
        None if body.starts_with('*') && !body.starts_with("*/") => {
            block(body.trim_start_matches('*').trim(), "/*")
        }
        None => line.to_string(),
    }
}

fn push_marker(out: &mut String, text: &str, elision: &Elision, marker: &str, language: Language) {
    let indent: String = {
        let line_start = text[..elision.range.start].rfind('\n').map_or(0, |i| i + 1);
        text[line_start..elision.range.start]
            .chars()
            .take_while(|c| c.is_whitespace())
            .collect()
    };
    if let Some(label) = &elision.label {
        out.push_str(label);
        return;
    }
    if let Some(doc) = &elision.doc {
        let doc_line = text[doc.clone()]
            .trim_start_matches(['"', '\'', 'r', 'b', 'u', 'f'])
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or_default()
            .trim_end_matches(['"', '\''])
            .to_string();
        if !doc_line.is_empty() {
            out.push_str("# ");
            out.push_str(&doc_line);
            out.push('\n');
            out.push_str(&indent);
        }
    }
    out.push_str(&marker_text(marker, language, elision.fold));
}

/// The text standing in for an elided body. `marker` is usually empty: the skeleton piece's
/// header line already names the fragment's recovery handle, and repeating a path per body
/// would cost more tokens than many one-line bodies it replaces.
fn marker_text(marker: &str, language: Language, fold: bool) -> String {
    let inner = if marker.is_empty() {
        "…".to_string()
    } else {
        format!("… {marker}")
    };
    match language {
        Language::Python if !fold => {
            if marker.is_empty() {
                "...".to_string()
            } else {
                format!("...  # {marker}")
            }
        }
        Language::Python => format!(" # {inner}"),
        _ if fold => format!(" {inner}"),
        // `{...}` costs two o200k tokens where `{ … }` costs three, on every elided body.
        _ if marker.is_empty() => "{...}".to_string(),
        _ => format!("{{... {marker} }}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Language; 9] = [
        Language::Rust,
        Language::Python,
        Language::Javascript,
        Language::Typescript,
        Language::Tsx,
        Language::Go,
        Language::Java,
        Language::C,
        Language::Cpp,
    ];

    #[test]
    fn every_query_compiles_against_its_grammar() {
        for language in ALL {
            let query = compile_query(language).unwrap_or_else(|e| panic!("{language}: {e}"));
            assert!(
                query.capture_names().iter().any(|n| n.starts_with("item.")),
                "{language} query captures no items"
            );
        }
    }

    fn skeleton_of(language: Language, text: &str) -> String {
        let outline = outline(language, "test", text).expect("outline");
        let lines = LineMap::new(text);
        let flags = line_flags(text, &lines, &outline);
        let source = SkeletonSource {
            text,
            lines: &lines,
            line_flags: &flags,
            elisions: &outline.elisions,
            language,
        };
        render(&source, 0, lines.len() - 1, "")
    }

    #[test]
    fn rust_keeps_multiline_signatures_and_first_doc_line() {
        let text = "use std::fmt;\n\n/// Adds numbers.\n/// More detail here.\npub fn add(\n    a: u32,\n    b: u32,\n) -> u32 {\n    a + b\n}\n\nimpl Foo {\n    /// Makes one.\n    pub fn new() -> Self { Self }\n}\n";
        let skeleton = skeleton_of(Language::Rust, text);
        assert_eq!(
            skeleton,
            "use std::fmt;\n/// Adds numbers.\npub fn add(\n    a: u32,\n    b: u32,\n) -> u32 {...}\nimpl Foo {\n    /// Makes one.\n    pub fn new() -> Self {...}\n}\n"
        );
    }

    #[test]
    fn private_fields_and_imports_become_counted_labels_trait_methods_stay_whole() {
        let text = "use std::fmt;\nuse std::io;\npub use inner::Thing;\n\npub struct A {\n    pub open: u32,\n    /// Hidden.\n    hidden: u32,\n    other: u8,\n    pub last: u8,\n}\n\nimpl Render for A {\n    type X = u8;\n    /// Formats.\n    fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {\n        Ok(())\n    }\n}\n";
        let skeleton = skeleton_of(Language::Rust, text);
        assert_eq!(
            skeleton,
            "/* 2 imports … */\npub use inner::Thing;\npub struct A {\n    pub open: u32,\n    /* 2 private fields … */\n    pub last: u8,\n}\nimpl Render for A {\n    type X = u8;\n    /// Formats.\n    fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {...}\n}\n"
        );
    }

    /// Regression (found by probing): `#[cfg(unix)]` on one import of a run was shown before
    /// the label of the rest (`/* 5 imports … */ #[cfg(unix)] /* 3 imports … */`), as if it
    /// covered all of them; it now goes into the run with its import.
    #[test]
    fn an_attribute_on_an_import_goes_into_the_counted_run() {
        let text = "use std::fs;\nuse std::io;\n#[cfg(unix)]\nuse std::os::unix::fs::PermissionsExt;\nuse std::path::Path;\n\npub fn run() {\n    let _ = 1;\n}\n";
        assert_eq!(
            skeleton_of(Language::Rust, text),
            "/* 4 imports … */\npub fn run() {...}\n"
        );
        let first = "#[cfg(unix)]\nuse std::os::unix::fs::PermissionsExt;\nuse std::path::Path;\n\npub fn run() {\n    let _ = 1;\n}\n";
        assert_eq!(
            skeleton_of(Language::Rust, first),
            "/* 2 imports … */\npub fn run() {...}\n"
        );
    }

    #[test]
    fn noise_attributes_go_meaningful_ones_stay() {
        let text = "#![allow(dead_code)]\n#![cfg_attr(docsrs, feature(doc_cfg))]\n\n/// A.\n#[inline]\n#[must_use]\n#[deprecated(since = \"1.0\")]\npub fn a() -> u8 {\n    1\n}\n\n#[derive(Debug)]\n#[cfg_attr(docsrs, doc(cfg(feature = \"x\")))]\npub struct B;\n";
        assert_eq!(
            skeleton_of(Language::Rust, text),
            "/// A.\n#[deprecated(since = \"1.0\")]\npub fn a() -> u8 {...}\n#[derive(Debug)]\npub struct B;\n"
        );
    }

    #[test]
    fn cfg_attributes_stay_because_they_say_when_an_item_exists() {
        let text = "#![cfg(feature = \"net\")]\n\n#[cfg(unix)]\n#[inline]\npub fn a() -> u8 {\n    1\n}\n\n#[cfg(not(unix))]\npub fn a() -> u8 {\n    2\n}\n";
        assert_eq!(
            skeleton_of(Language::Rust, text),
            "#![cfg(feature = \"net\")]\n#[cfg(unix)]\npub fn a() -> u8 {...}\n#[cfg(not(unix))]\npub fn a() -> u8 {...}\n"
        );
    }

    #[test]
    fn methods_whose_signature_a_standard_trait_fixes_are_dropped() {
        let text = "impl fmt::Debug for A {\n    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {\n        f.write_str(\"A\")\n    }\n}\n\nimpl PartialEq<B> for A {\n    fn eq(&self, other: &B) -> bool {\n        true\n    }\n}\n\nimpl Drop for A {\n    fn drop(&mut self) {\n        self.close();\n    }\n}\n\nimpl Deref for A {\n    type Target = B;\n    fn deref(&self) -> &B {\n        &self.b\n    }\n}\n";
        let more = "impl Iterator for A {\n    type Item = u8;\n    fn next(&mut self) -> Option<u8> {\n        None\n    }\n}\nimpl io::Write for A {\n    fn flush(&mut self) -> io::Result<()> {\n        Ok(())\n    }\n}\nimpl Write for A {\n    fn flush(&mut self) -> io::Result<()> {\n        Ok(())\n    }\n}\n";
        assert_eq!(
            skeleton_of(Language::Rust, more),
            "impl Iterator for A {\n    type Item = u8;\n}\nimpl io::Write for A {\n}\nimpl Write for A {\n    fn flush(&mut self) -> io::Result<()> {...}\n}\n",
            "an unqualified `Write` may be the crate's own trait"
        );
        assert_eq!(
            skeleton_of(Language::Rust, text),
            "impl fmt::Debug for A {\n}\nimpl PartialEq<B> for A {\n    fn eq(&self, other: &B) -> bool {...}\n}\nimpl Drop for A {\n}\nimpl Deref for A {\n    type Target = B;\n}\n"
        );
    }

    #[test]
    fn multiline_initialisers_are_elided_short_ones_stay() {
        let text = "pub const TABLE: &[(char, char)] = &[\n    ('a', 'b'),\n    ('c', 'd'),\n];\nstatic MAX: usize = 8;\n";
        assert_eq!(
            skeleton_of(Language::Rust, text),
            "pub const TABLE: &[(char, char)] = …;\nstatic MAX: usize = 8;\n"
        );
    }

    #[test]
    fn only_the_first_line_of_a_doc_run_survives_even_when_a_range_starts_inside_it() {
        let text = "/// First.\n/// Second.\n///\n/// Third.\npub fn a() {\n    1;\n}\n";
        let outline = outline(Language::Rust, "test", text).expect("outline");
        let lines = LineMap::new(text);
        let flags = line_flags(text, &lines, &outline);
        let source = SkeletonSource {
            text,
            lines: &lines,
            line_flags: &flags,
            elisions: &outline.elisions,
            language: Language::Rust,
        };
        assert_eq!(render(&source, 0, 6, ""), "/// First.\npub fn a() {...}\n");
        // A range cut out of the middle of the run (a long doc comment split into blocks)
        // continues it: none of its lines is a first doc line.
        assert_eq!(render(&source, 1, 3, ""), "");
    }

    #[test]
    fn a_lone_private_field_stays() {
        let text = "struct B {\n    only: u32,\n}\n";
        assert_eq!(
            skeleton_of(Language::Rust, text),
            "struct B {\n    only: u32,\n}\n"
        );
    }

    /// Regression (found by probing): the one line kept of a block comment or docstring left it
    /// open (`/** Options…` swallowed the TypeScript signature after it; `r"""` never closed) or
    /// was a bare continuation line (` * Add two ints.`).
    #[test]
    fn kept_lines_of_block_comments_and_docstrings_are_closed_comments() {
        let ts = "/** Options for the client.\n * More.\n */\nexport function makeClient(retries: number): void {\n  return;\n}\n";
        assert_eq!(
            skeleton_of(Language::Typescript, ts),
            "/** Options for the client. */\nexport function makeClient(retries: number): void {...}\n"
        );
        let c = "/**\n * Add two ints.\n */\nint add_ints(int a, int b)\n{\n  return a + b;\n}\n";
        assert_eq!(
            skeleton_of(Language::C, c),
            "/** Add two ints. */\nint add_ints(int a, int b)\n{...}\n"
        );
        let py = "r\"\"\"\nModule summary.\n\nMore.\n\"\"\"\nimport os\n";
        assert_eq!(
            skeleton_of(Language::Python, py),
            "r\"\"\"Module summary.\"\"\"\nimport os\n"
        );
        let one = "\"\"\"One line.\"\"\"\nimport os\n";
        assert_eq!(skeleton_of(Language::Python, one), one);
    }

    #[test]
    fn python_keeps_docstring_first_line() {
        let text = "import os\n\nclass A:\n    \"\"\"An A.\n\n    Long.\n    \"\"\"\n    def f(self, x):\n        \"\"\"Does f.\"\"\"\n        return x\n";
        let skeleton = skeleton_of(Language::Python, text);
        assert_eq!(
            skeleton,
            "import os\nclass A:\n    \"\"\"An A.\"\"\"\n    def f(self, x):\n        # Does f.\n        ...\n"
        );
    }

    #[test]
    fn items_nest_and_methods_are_detected() {
        let text = "impl Foo {\n    fn a(&self) {}\n    fn b(&self) {}\n}\nfn c() {}\n";
        let outline = outline(Language::Rust, "x.rs", text).expect("outline");
        let kinds: Vec<_> = outline
            .items
            .iter()
            .map(|i| (i.kind, i.name.clone().unwrap_or_default(), i.parent))
            .collect();
        assert_eq!(
            kinds,
            vec![
                (ItemKind::Impl, "Foo".into(), None),
                (ItemKind::Method, "a".into(), Some(0)),
                (ItemKind::Method, "b".into(), Some(0)),
                (ItemKind::Function, "c".into(), None),
            ]
        );
    }
}
