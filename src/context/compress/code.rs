//! Code, language-agnostic: each line gets a nesting depth (braces outside strings and comments,
//! or indentation for brace-less languages such as Python); shallow lines (imports, signatures,
//! doc lines, type definitions, closing braces) are kept before deeper ones, so bodies are elided
//! first, innermost first. Where the file name names a language with a tree-sitter grammar,
//! bodies are found by syntax node instead (`syntax`); this layout reducer is the fallback.

use std::ops::Range;

use serde::{Deserialize, Serialize};

use super::Part;
use super::units::{self, Minimum, Style, Unit};
use crate::context::index::Language;
use crate::tokens::Tokenizer;

const KEYWORDS: [&str; 24] = [
    "fn ",
    "pub ",
    "def ",
    "class ",
    "struct ",
    "enum ",
    "impl ",
    "trait ",
    "func ",
    "function ",
    "interface ",
    "import ",
    "from ",
    "use ",
    "package ",
    "#include",
    "return ",
    "const ",
    "let ",
    "var ",
    "if ",
    "for ",
    "while ",
    "type ",
];

pub(crate) const IMPORTS: [&str; 9] = [
    "use ",
    "pub use ",
    "import ",
    "from ",
    "#include",
    "package ",
    "require ",
    "using ",
    "extern crate ",
];

/// True when lines look like source code (code keywords, lines ending in `;`, `{`, `}`, `:`).
pub(crate) fn looks_like_code(content: &str) -> bool {
    let mut total = 0usize;
    let mut hits = 0usize;
    for line in content.lines().filter(|l| !l.trim().is_empty()).take(400) {
        total += 1;
        let trimmed = line.trim();
        if KEYWORDS.iter().any(|k| trimmed.starts_with(k))
            || trimmed.ends_with(';')
            || trimmed.ends_with('{')
            || trimmed.ends_with('}')
            || trimmed.ends_with("};")
            || trimmed.starts_with("//")
            || (trimmed.ends_with(':') && trimmed.contains('('))
        {
            hits += 1;
        }
    }
    total > 0 && hits * 10 >= total * 4
}

/// True for brace-less languages: more block-opening colons than braces.
fn indent_mode(lines: &[&str]) -> bool {
    let braces = lines.iter().filter(|l| l.trim_end().ends_with('{')).count();
    let colons = lines
        .iter()
        .filter(|l| {
            let t = l.trim();
            t.ends_with(':')
                && (t.starts_with("def ")
                    || t.starts_with("class ")
                    || t.starts_with("async def ")
                    || t.starts_with("if ")
                    || t.starts_with("for "))
        })
        .count();
    colons > braces
}

/// Where a line sits: in declarations (at a container depth) or inside a body (function,
/// method, initialiser) rooted at the line that opened the outermost body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Declaration(usize),
    Body(usize),
}

/// Keywords that open a container of declarations rather than a body of statements.
fn opens_container(statement: &str) -> bool {
    const CONTAINERS: [&str; 16] = [
        "impl",
        "trait",
        "mod",
        "class",
        "interface",
        "struct",
        "enum",
        "union",
        "namespace",
        "extern",
        "object",
        "record",
        "module",
        "protocol",
        "extension",
        "type",
    ];
    // Attributes and decorators (`#[derive(...)]`, `@Entity(...)`) say nothing about the block.
    let mut plain = String::with_capacity(statement.len());
    let mut depth = 0usize;
    let mut chars = statement.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '#' && chars.peek() == Some(&'[') {
            depth += 1;
            chars.next();
        } else if depth > 0 && c == '[' {
            depth += 1;
        } else if depth > 0 && c == ']' {
            depth -= 1;
        } else if depth == 0 {
            plain.push(c);
        }
    }
    let trimmed = plain.trim_start();
    // `use a::{b, c}` and `import { a } from "b"`: the braces hold names, not statements.
    if IMPORTS.iter().any(|k| trimmed.starts_with(k)) || trimmed.starts_with("export {") {
        return true;
    }
    if plain.contains('=') && !plain.contains("=>") || plain.contains("fn ") {
        return false;
    }
    plain
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .any(|word| CONTAINERS.contains(&word))
}

/// Places for brace languages, ignoring braces in strings and comments. A line that starts by
/// closing a block is placed after the close, so the `}` stays with its opener.
fn brace_places(lines: &[&str]) -> (Vec<Place>, Vec<bool>) {
    let mut places = Vec::with_capacity(lines.len());
    // Lines of a statement that opens a block (signature, its doc comments and attributes).
    let mut signature = vec![false; lines.len()];
    let mut statement_start = 0usize;
    // (is container, opener line)
    let mut stack: Vec<(bool, usize)> = Vec::new();
    // Stack depths of open import blocks.
    let mut import_blocks: Vec<usize> = Vec::new();
    let mut in_block_comment = false;
    let mut statement = String::new();
    let place = |stack: &[(bool, usize)]| match stack.iter().find(|(container, _)| !container) {
        Some(&(_, root)) => Place::Body(root),
        None => Place::Declaration(stack.len()),
    };
    for (index, line) in lines.iter().enumerate() {
        let bytes = line.as_bytes();
        let mut i = 0;
        // Leading closers belong before the line's place is decided.
        if !in_block_comment {
            while i < bytes.len() && (bytes[i] == b' ' || bytes[i] == b'\t') {
                i += 1;
            }
            while i < bytes.len() && bytes[i] == b'}' {
                stack.pop();
                import_blocks.retain(|&d| d <= stack.len());
                statement.clear();
                statement_start = index + 1;
                signature[index] = true;
                i += 1;
            }
        }
        places.push(place(&stack));
        // Names inside `use a::{…}` are imports: keep them with the signatures.
        if import_blocks.last() == Some(&stack.len()) && !stack.is_empty() {
            signature[index] = true;
        }
        let mut quote: Option<u8> = None;
        while i < bytes.len() {
            let b = bytes[i];
            if in_block_comment {
                if b == b'*' && bytes.get(i + 1) == Some(&b'/') {
                    in_block_comment = false;
                    i += 1;
                }
            } else if let Some(q) = quote {
                if b == b'\\' {
                    i += 1;
                } else if b == q {
                    quote = None;
                }
            } else {
                match b {
                    b'/' if bytes.get(i + 1) == Some(&b'/') => break,
                    b'/' if bytes.get(i + 1) == Some(&b'*') => {
                        in_block_comment = true;
                        i += 1;
                    }
                    b'"' | b'`' => quote = Some(b),
                    // A quote after an identifier character is a Rust lifetime, not a char.
                    b'\'' if i == 0 || !bytes[i - 1].is_ascii_alphanumeric() => {
                        if bytes.get(i + 2) == Some(&b'\'')
                            || (bytes.get(i + 1) == Some(&b'\\')
                                && bytes.get(i + 3) == Some(&b'\''))
                        {
                            quote = Some(b'\'');
                        }
                    }
                    b'{' => {
                        let container =
                            stack.iter().all(|(c, _)| *c) && opens_container(&statement);
                        let trimmed = statement.trim_start();
                        if IMPORTS.iter().any(|k| trimmed.starts_with(k)) {
                            import_blocks.push(stack.len() + 1);
                        }
                        stack.push((container, index));
                        statement.clear();
                        for flag in &mut signature[statement_start.min(index)..=index] {
                            *flag = true;
                        }
                        statement_start = index + 1;
                    }
                    b'}' => {
                        stack.pop();
                        import_blocks.retain(|&d| d <= stack.len());
                        statement.clear();
                        statement_start = index + 1;
                    }
                    b';' => {
                        statement.clear();
                        statement_start = index + 1;
                    }
                    _ => {
                        if statement.len() < 400 {
                            statement.push(b as char);
                        }
                    }
                }
            }
            i += 1;
        }
        statement.push(' ');
    }
    (places, signature)
}

fn indent_width(line: &str) -> usize {
    line.chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .map(|c| if c == '\t' { 4 } else { 1 })
        .sum()
}

/// Places for indentation languages: `class` blocks are containers, other blocks are bodies.
/// Blank lines take the place of the next non-blank line.
fn indent_places(lines: &[&str]) -> (Vec<Place>, Vec<bool>) {
    let mut places = vec![Place::Declaration(0); lines.len()];
    let mut signature = vec![false; lines.len()];
    // (indent, is container, opener line)
    let mut stack: Vec<(usize, bool, usize)> = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let width = indent_width(line);
        while stack.last().is_some_and(|top| top.0 >= width) {
            stack.pop();
        }
        places[index] = match stack.iter().find(|(_, container, _)| !container) {
            Some(&(_, _, root)) => Place::Body(root),
            None => Place::Declaration(stack.len()),
        };
        let trimmed = line.trim();
        if trimmed.starts_with('@') {
            signature[index] = true;
        }
        if trimmed.ends_with(':') && !trimmed.starts_with('#') {
            signature[index] = true;
            let container = stack.iter().all(|(_, c, _)| *c) && trimmed.starts_with("class ");
            stack.push((width, container, index));
        }
    }
    let mut next = Place::Declaration(0);
    for index in (0..lines.len()).rev() {
        if lines[index].trim().is_empty() {
            places[index] = next;
        } else {
            next = places[index];
        }
    }
    (places, signature)
}

struct CodeStyle {
    comment: &'static str,
    indents: Vec<String>,
}

impl Style for CodeStyle {
    fn fill_slack(&self) -> bool {
        false
    }

    fn chunk_id(&self, units: &[Unit], run: Range<usize>) -> String {
        units::line_id(units, run)
    }

    fn locator(&self, units: &[Unit], run: Range<usize>) -> String {
        units::line_locator(units, run)
    }

    fn marker(&self, _source: &str, all: &[Unit], run: Range<usize>, id: &str) -> String {
        format!(
            "{}{} … {} elided · recover {id}",
            self.indents[run.start],
            self.comment,
            units::amount(all, run)
        )
    }
}

/// How code was reduced: by syntax tree, or by the brace/indentation fallback and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeReduction {
    pub method: CodeMethod,
    /// The grammar used, or the language named by the source when it has no grammar.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<Language>,
    /// Why the syntax tree was not used (fallback methods only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_reason: Option<String>,
}

/// The elision method of a code reduction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CodeMethod {
    /// Bodies elided by tree-sitter node (`context::skeleton` grammars).
    Syntax,
    /// Nesting from braces outside strings and comments (the fallback).
    Braces,
    /// Nesting from indentation, for brace-less text (the fallback).
    Indentation,
}

impl CodeMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            CodeMethod::Syntax => "syntax",
            CodeMethod::Braces => "braces",
            CodeMethod::Indentation => "indentation",
        }
    }
}

impl std::fmt::Display for CodeReduction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.method, self.language, &self.fallback_reason) {
            (CodeMethod::Syntax, Some(language), _) => write!(f, "{language} syntax tree"),
            (method, _, Some(reason)) => write!(f, "{} fallback: {reason}", method.as_str()),
            (method, _, None) => f.write_str(method.as_str()),
        }
    }
}

/// Reduces code: by syntax tree when `name` (a path or `-`) names a language with a grammar
/// and the parse is usable, else by braces or indentation.
pub(crate) fn reduce(
    source: &str,
    budget: usize,
    tokenizer: &Tokenizer,
    prefix: &str,
    name: &str,
) -> Result<(String, usize, Vec<Part>, CodeReduction), Minimum> {
    let units = units::line_pieces(source);
    let lines: Vec<&str> = units
        .iter()
        .map(|u| source[u.start..u.end].trim_end_matches(['\n', '\r']))
        .collect();
    let indents: Vec<String> = lines
        .iter()
        .map(|l| l.chars().take_while(|c| c.is_whitespace()).collect())
        .collect();
    let language = (name != "-").then(|| Language::from_name(name));
    let syntax = match language {
        Some(language) if language.is_code() => {
            super::syntax::order(source, &units, language, name).map(|order| (language, order))
        }
        None => Err("no file name to take the language from".to_string()),
        Some(Language::Text) => Err("no tree-sitter grammar for this file type".to_string()),
        Some(language) => Err(format!("no tree-sitter grammar for {language}")),
    };
    let (order, python_like, reduction) = match syntax {
        Ok((language, order)) => (
            order,
            language == Language::Python,
            CodeReduction {
                method: CodeMethod::Syntax,
                language: Some(language),
                fallback_reason: None,
            },
        ),
        Err(reason) => {
            let python_like = indent_mode(&lines);
            let method = if python_like {
                CodeMethod::Indentation
            } else {
                CodeMethod::Braces
            };
            (
                layout_order(&lines, python_like),
                python_like,
                CodeReduction {
                    method,
                    language: language.filter(|l| *l != Language::Text),
                    fallback_reason: Some(reason),
                },
            )
        }
    };
    let style = CodeStyle {
        comment: if python_like { "#" } else { "//" },
        indents,
    };
    let (text, tokens, parts) =
        units::fit(source, &units, &order, budget, tokenizer, &style, prefix)?;
    Ok((text, tokens, parts, reduction))
}

/// The brace/indentation rank order of the lines (every index once, best first).
fn layout_order(lines: &[&str], python_like: bool) -> Vec<usize> {
    let (places, mut signature) = if python_like {
        indent_places(lines)
    } else {
        brace_places(lines)
    };
    for (flag, line) in signature.iter_mut().zip(lines) {
        let t = line.trim_start();
        if IMPORTS.iter().any(|k| t.starts_with(k)) {
            *flag = true;
        }
    }
    let n = lines.len();
    let mut body_size = vec![0usize; n];
    for place in &places {
        if let Place::Body(root) = place {
            body_size[*root] += 1;
        }
    }
    // A doc comment's first line says what the item is; the rest (details, examples) waits.
    let comment = |line: &str| {
        let t = line.trim_start();
        if python_like {
            t.starts_with('#')
        } else {
            t.starts_with("//") || t.starts_with("/*") || t.starts_with('*')
        }
    };
    let doc_tail: Vec<bool> = (0..n)
        .map(|i| i > 0 && comment(lines[i]) && comment(lines[i - 1]))
        .collect();
    // Declarations first: signatures (with the first line of their doc comment and their
    // attributes), imports and closing braces, shallow before deep; then other declarations
    // (fields, variants); then the rest of doc comments; then whole bodies, the smallest first
    // (so the largest bodies are elided first), each in line order.
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| match places[i] {
        Place::Declaration(depth) if doc_tail[i] => (2, depth, 0, i),
        Place::Declaration(depth) => (usize::from(!signature[i]), depth, 0, i),
        Place::Body(root) => (3, body_size[root], root, i),
    });
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn braces_in_strings_and_comments_do_not_count() {
        let lines = [
            "impl A {",
            "    fn a() {",
            "        let s = \"{{\"; // }",
            "        let c = '{';",
            "        /* { */",
            "    }",
            "}",
            "fn b<'a>(x: &'a str)",
            "    -> &'a str",
            "{",
            "    x",
            "}",
        ];
        use Place::*;
        assert_eq!(
            brace_places(&lines).0,
            vec![
                Declaration(0),
                Declaration(1),
                Body(1),
                Body(1),
                Body(1),
                Declaration(1),
                Declaration(0),
                Declaration(0),
                Declaration(0),
                Declaration(0),
                Body(9),
                Declaration(0),
            ]
        );
    }

    #[test]
    fn python_uses_indentation() {
        let lines = [
            "class A:",
            "    def f(self):",
            "",
            "        return 1",
            "",
            "x = 1",
        ];
        assert!(indent_mode(&lines));
        use Place::*;
        assert_eq!(
            indent_places(&lines).0,
            vec![
                Declaration(0),
                Declaration(1),
                Body(1),
                Body(1),
                Declaration(0),
                Declaration(0)
            ]
        );
    }

    #[test]
    fn detects_code() {
        assert!(looks_like_code(
            "use std::io;\nfn main() {\n    let x = 1;\n}\n"
        ));
        assert!(!looks_like_code(
            "The quick brown fox jumps over the lazy dog.\nIt was a sunny day.\n"
        ));
    }
}
