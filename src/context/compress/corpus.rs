//! Figures of `svc compress` on real repositories (`svc bench --group compress
//! --compress-corpus DIR`): which kind each file of a mixed corpus gets against what a person
//! would call it (`fixtures/compress/kind-truth.tsv` plus generated logs), and code elision by
//! syntax tree against the brace/indentation reducer at the same budgets.

use std::collections::BTreeMap;
use std::path::Path;

use super::{CompressOptions, ContentKind, reduce, sample};
use crate::bench::Figure;
use crate::tokens::Tokenizer;

/// What a person calls a file: the four kinds, plus configuration (reduced as code, its
/// sections and keys being lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Truth {
    Code,
    Prose,
    Json,
    Logs,
    Config,
}

impl Truth {
    pub fn parse(text: &str) -> Option<Truth> {
        Some(match text {
            "code" => Truth::Code,
            "prose" => Truth::Prose,
            "json" => Truth::Json,
            "logs" => Truth::Logs,
            "config" => Truth::Config,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Truth::Code => "code",
            Truth::Prose => "prose",
            Truth::Json => "json",
            Truth::Logs => "logs",
            Truth::Config => "config",
        }
    }

    /// The kind that handles such a file right.
    pub fn right_kind(self) -> ContentKind {
        match self {
            Truth::Code | Truth::Config => ContentKind::Code,
            Truth::Prose => ContentKind::Prose,
            Truth::Json => ContentKind::Json,
            Truth::Logs => ContentKind::Logs,
        }
    }
}

/// Counts of (truth, detected kind), by name and by content alone, with the misses by name.
#[derive(Debug, Clone, Default)]
pub struct KindConfusion {
    pub by_name: BTreeMap<(Truth, ContentKind), usize>,
    pub by_content: BTreeMap<(Truth, ContentKind), usize>,
    pub misses: Vec<(String, Truth, ContentKind)>,
    pub files: usize,
}

impl KindConfusion {
    pub fn right_by_name(&self) -> usize {
        Self::right(&self.by_name)
    }

    pub fn right_by_content(&self) -> usize {
        Self::right(&self.by_content)
    }

    fn right(counts: &BTreeMap<(Truth, ContentKind), usize>) -> usize {
        counts
            .iter()
            .filter(|((truth, kind), _)| truth.right_kind() == *kind)
            .map(|(_, n)| n)
            .sum()
    }

    /// The confusion table in Markdown: one row per (truth, detected) pair seen.
    pub fn table(&self) -> String {
        let mut pairs: Vec<&(Truth, ContentKind)> =
            self.by_name.keys().chain(self.by_content.keys()).collect();
        pairs.sort();
        pairs.dedup();
        let mut out =
            String::from("| truth → detected | by name | content only |\n|---|---:|---:|\n");
        for pair in pairs {
            out.push_str(&format!(
                "| {} → {} | {} | {} |\n",
                pair.0.as_str(),
                pair.1,
                self.by_name.get(pair).copied().unwrap_or(0),
                self.by_content.get(pair).copied().unwrap_or(0)
            ));
        }
        out
    }
}

/// Reads the truth table: `path<TAB>truth` lines, `#` comments.
pub fn parse_truth(text: &str) -> Result<Vec<(String, Truth)>, String> {
    let mut out = Vec::new();
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let (path, truth) = line
            .split_once('\t')
            .ok_or_else(|| format!("line {}: expected `path<TAB>kind`", number + 1))?;
        let truth = Truth::parse(truth.trim()).ok_or_else(|| {
            format!(
                "line {}: unknown kind `{truth}` (code, prose, json, logs, config)",
                number + 1
            )
        })?;
        out.push((path.to_string(), truth));
    }
    Ok(out)
}

/// Classifies every file: the truth table's files under `root` (a file missing or not UTF-8
/// is skipped and counted out) and the `logs` given in memory.
pub fn kind_confusion(
    root: &Path,
    truth: &[(String, Truth)],
    logs: &[(String, String)],
) -> KindConfusion {
    let mut confusion = KindConfusion::default();
    let mut classify = |name: &str, content: &str, truth: Truth| {
        let by_name = ContentKind::for_source(name, content);
        let by_content = ContentKind::for_source("-", content);
        *confusion.by_name.entry((truth, by_name)).or_default() += 1;
        *confusion.by_content.entry((truth, by_content)).or_default() += 1;
        if truth.right_kind() != by_name {
            confusion.misses.push((name.to_string(), truth, by_name));
        }
        confusion.files += 1;
    };
    for (path, truth) in truth {
        let Ok(content) = std::fs::read_to_string(root.join(path)) else {
            continue;
        };
        classify(path, &content, *truth);
    }
    for (name, content) in logs {
        classify(name, content, Truth::Logs);
    }
    confusion
}

/// The seeded logs the kind figure adds to the repositories' files.
pub fn generated_logs() -> Vec<(String, String)> {
    sample::log_files(24, 7)
}

/// What one reducer did over many files at one budget fraction.
#[derive(Debug, Clone, Default)]
pub struct ElisionTotals {
    pub files: usize,
    pub budget: usize,
    pub tokens: usize,
    /// Lines that start a definition (`def`, `class`, `fn`, `struct`, …) in the original, and
    /// how many of them are kept verbatim.
    pub signature_lines: usize,
    pub signatures_kept: usize,
    /// Files that could not be reduced to the budget at all.
    pub over_budget: usize,
    /// Files the syntax reducer handed to the fallback.
    pub fallbacks: usize,
}

/// Whether a line starts a definition: what a reader of compressed code needs to see.
pub fn is_signature_line(line: &str) -> bool {
    let mut t = line.trim_start();
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "async ",
        "const ",
        "unsafe ",
        "extern \"C\" ",
    ] {
        if let Some(rest) = t.strip_prefix(prefix) {
            t = rest;
        }
    }
    [
        "def ", "class ", "fn ", "struct ", "enum ", "trait ", "impl ", "impl<",
    ]
    .iter()
    .any(|k| t.starts_with(k))
}

/// Reduces each file to `fraction` of its tokens with the syntax reducer (the file's name) and
/// with the layout reducer (no name: what the reducer was before), and adds up tokens and
/// kept signature lines.
pub fn elision_comparison(
    files: &[(String, String)],
    fraction: f64,
    tokenizer: &Tokenizer,
) -> (ElisionTotals, ElisionTotals) {
    let mut syntax = ElisionTotals::default();
    let mut layout = ElisionTotals::default();
    for (name, content) in files {
        let original = tokenizer.count(content);
        let budget = ((original as f64 * fraction) as usize).max(1);
        if original <= budget {
            continue;
        }
        let signatures: Vec<usize> = content
            .lines()
            .enumerate()
            .filter(|(_, l)| is_signature_line(l))
            .map(|(i, _)| i)
            .collect();
        for (totals, source) in [(&mut syntax, name.as_str()), (&mut layout, "-")] {
            totals.files += 1;
            totals.budget += budget;
            totals.signature_lines += signatures.len();
            let options = CompressOptions {
                kind: Some(ContentKind::Code),
                query: None,
                source: source.to_string(),
            };
            let Ok(reduced) = reduce(content, budget, &options, tokenizer) else {
                totals.over_budget += 1;
                continue;
            };
            if source != "-"
                && reduced
                    .code
                    .as_ref()
                    .is_some_and(|c| c.fallback_reason.is_some())
            {
                totals.fallbacks += 1;
            }
            totals.tokens += reduced.tokens;
            let kept = kept_lines(&reduced.parts);
            totals.signatures_kept += signatures.iter().filter(|&&i| kept[i]).count();
        }
    }
    (syntax, layout)
}

/// Per original line (0-based), whether a kept part holds it whole.
fn kept_lines(parts: &[super::Part]) -> Vec<bool> {
    let mut kept = Vec::new();
    let mut at_line_start = true;
    for part in parts {
        for piece in part.original.split_inclusive('\n') {
            if at_line_start {
                kept.push(part.resolution.is_some());
            } else if part.resolution.is_none()
                && let Some(last) = kept.last_mut()
            {
                // A line cut into pieces is kept only when every piece is.
                *last = false;
            }
            at_line_start = piece.ends_with('\n');
        }
    }
    kept
}

/// The figures for a directory holding clones of the truth table's repositories, and the
/// kind confusion table (Markdown).
pub fn figures(root: &Path, truth_table: &str) -> Result<(Vec<Figure>, String), String> {
    let truth = parse_truth(truth_table)?;
    // Every file the table names must be there: a missing or partial corpus was measured on
    // what it had (the generated logs alone: 24/24 files, "100 %").
    let missing: Vec<&str> = truth
        .iter()
        .map(|(path, _)| path.as_str())
        .filter(|path| !root.join(path).is_file())
        .collect();
    if !missing.is_empty() {
        let roots: std::collections::BTreeSet<&str> = truth
            .iter()
            .filter_map(|(path, _)| path.split('/').next())
            .collect();
        return Err(format!(
            "{} of its {} files are not under {} (e.g. {}); the corpus is the repositories {} checked out at the commits the table names",
            missing.len(),
            truth.len(),
            root.display(),
            missing[0],
            roots
                .into_iter()
                .map(|r| format!("{r}/"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let confusion = kind_confusion(root, &truth, &generated_logs());
    let mut out = vec![Figure {
        name: "compress kind right by name".into(),
        value: 100.0 * confusion.right_by_name() as f64 / confusion.files.max(1) as f64,
        unit: "%".into(),
        target: Some(">= 99".into()),
        detail: format!(
            "{}/{} files ({} by content alone); misses: {}",
            confusion.right_by_name(),
            confusion.files,
            confusion.right_by_content(),
            confusion
                .misses
                .iter()
                .map(|(path, truth, kind)| format!("{path} ({} as {kind})", truth.as_str()))
                .collect::<Vec<_>>()
                .join(", "),
        ),
    }];
    let code: Vec<(String, String)> = truth
        .iter()
        .filter(|(path, truth)| {
            *truth == Truth::Code && crate::context::index::Language::from_name(path).is_code()
        })
        .filter_map(|(path, _)| {
            let text = std::fs::read_to_string(root.join(path)).ok()?;
            Some((path.clone(), text))
        })
        .collect();
    let tokenizer = Tokenizer::default();
    for fraction in [0.5, 0.25, 0.1] {
        let (syntax, layout) = elision_comparison(&code, fraction, &tokenizer);
        for (label, totals) in [("syntax tree", &syntax), ("braces/indentation", &layout)] {
            out.push(Figure {
                name: format!(
                    "compress code at {:.0}% budget, {label}: signatures kept",
                    fraction * 100.0
                ),
                value: 100.0 * totals.signatures_kept as f64
                    / totals.signature_lines.max(1) as f64,
                unit: "%".into(),
                target: None,
                detail: format!(
                    "{} files, {}/{} def/fn/class lines kept, {} of {} budget tokens used, {} over budget, {} fell back",
                    totals.files,
                    totals.signatures_kept,
                    totals.signature_lines,
                    totals.tokens,
                    totals.budget,
                    totals.over_budget,
                    totals.fallbacks
                ),
            });
        }
    }
    Ok((out, confusion.table()))
}
