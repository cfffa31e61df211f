//! The `compress` group of `svc bench`: compression ratio and throughput on a large generated
//! log, a large JSON document and real prose, and distillation token reduction per level on
//! verbose answers. Timings include kind detection, reduction and the commit (blob writes).

use std::time::Instant;

use super::{CompressOptions, ContentKind, compress, sample};
use crate::bench::Figure;
use crate::context::commit::CommitStore;
use crate::context::distill::{Level, distill};
use crate::tokens::Tokenizer;

/// Verbose model answers (fixtures/distill), for the distillation figures.
pub const VERBOSE_ANSWERS: [&str; 5] = [
    include_str!("../../../fixtures/distill/pool-timeout.md"),
    include_str!("../../../fixtures/distill/rust-lifetimes.md"),
    include_str!("../../../fixtures/distill/git-rebase.md"),
    include_str!("../../../fixtures/distill/python-perf.md"),
    include_str!("../../../fixtures/distill/sql-index.md"),
];

/// Compression figures for one input: ratio and throughput.
pub fn compress_figures(
    label: &str,
    content: &str,
    kind: ContentKind,
    budget: usize,
    store: &CommitStore,
) -> Vec<Figure> {
    let tokenizer = Tokenizer::default();
    tokenizer.count("warm up");
    // A code input is named by its label (`code.py`, `code.js`): the extension picks the
    // grammar, as a file's does.
    let source = if kind == ContentKind::Code {
        label.to_string()
    } else {
        format!("bench:{label}")
    };
    let options = CompressOptions {
        kind: Some(kind),
        query: None,
        source,
    };
    let start = Instant::now();
    let reduced_ok = super::reduce(content, budget, &options, &tokenizer).is_ok();
    let reduce_seconds = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let outcome = compress(content, budget, &options, store, &tokenizer);
    let seconds = start.elapsed().as_secs_f64();
    let mb = content.len() as f64 / 1e6;
    match outcome {
        Ok(result) => vec![
            Figure {
                name: format!("compress {label} ratio"),
                value: result.original_tokens as f64 / result.tokens.max(1) as f64,
                unit: "x".into(),
                target: None,
                detail: format!(
                    "{:.1} MB, {} → {} tokens at budget {budget}, {} elisions",
                    mb,
                    result.original_tokens,
                    result.tokens,
                    result.elisions.len()
                ),
            },
            Figure {
                name: format!("compress {label} throughput"),
                value: mb / seconds,
                unit: "MB/s".into(),
                target: None,
                detail: format!(
                    "{mb:.1} MB in {seconds:.2} s, 1 thread, end to end: detect, reduce, commit (blobs fsynced, every chunk re-counted for the receipt)"
                ),
            },
            Figure {
                name: format!("compress {label} reduce-only throughput"),
                value: if reduced_ok {
                    mb / reduce_seconds
                } else {
                    f64::NAN
                },
                unit: "MB/s".into(),
                target: None,
                detail: format!(
                    "{mb:.1} MB in {reduce_seconds:.2} s, 1 thread, without the commit (incl. the exact count of the original)"
                ),
            },
        ],
        Err(error) => vec![Figure {
            name: format!("compress {label}"),
            value: f64::NAN,
            unit: "error".into(),
            target: None,
            detail: error.to_string(),
        }],
    }
}

/// Generated log and JSON of about `megabytes` each, and the given prose (real Markdown).
pub fn figures(megabytes: usize, prose: &str, store: &CommitStore) -> Vec<Figure> {
    let mut out = Vec::new();
    // About 110 bytes per generated log line and 700 bytes per JSON record.
    let log = sample::log(megabytes * 1_000_000 / 110, 1);
    out.extend(compress_figures(
        "logs",
        &log,
        ContentKind::Logs,
        8000,
        store,
    ));
    drop(log);
    let json = sample::json(megabytes * 1_000_000 / 700, 1);
    out.extend(compress_figures(
        "json",
        &json,
        ContentKind::Json,
        8000,
        store,
    ));
    drop(json);
    // Files of many small functions, each item one line apart: compressing them by syntax tree
    // was quadratic in the number of items (1.5 MB of JavaScript took 27 s, 11 MB of Python
    // 43 s). A quarter of the size keeps the group quick; the MB/s figure shows a relapse.
    let functions = megabytes * 1_000_000 / 4 / 75;
    let python: String = (0..functions)
        .map(|i| format!("def f{i}(x):\n    \"\"\"doc {i}\"\"\"\n    return x + {i}\n\n"))
        .collect();
    out.extend(compress_figures(
        "code.py",
        &python,
        ContentKind::Code,
        8000,
        store,
    ));
    drop(python);
    let javascript: String = (0..functions)
        .map(|i| {
            format!("function f{i}(a,b){{var c=a+b*{i};if(c>{i}){{return c}}return f{i}(b,a)}}\n")
        })
        .collect();
    out.extend(compress_figures(
        "code.js",
        &javascript,
        ContentKind::Code,
        8000,
        store,
    ));
    drop(javascript);
    if !prose.is_empty() {
        out.extend(compress_figures(
            "prose",
            prose,
            ContentKind::Prose,
            8000,
            store,
        ));
    }
    out.extend(distill_figures());
    out
}

/// Token reduction per distillation level over the verbose answers.
pub fn distill_figures() -> Vec<Figure> {
    let tokenizer = Tokenizer::default();
    Level::ALL
        .iter()
        .map(|&level| {
            let (mut before, mut after) = (0usize, 0usize);
            for answer in VERBOSE_ANSWERS {
                let result = distill(answer, level, &tokenizer);
                before += result.tokens_before;
                after += result.tokens_after;
            }
            Figure {
                name: format!("distill {level} reduction"),
                value: 100.0 * (before - after.min(before)) as f64 / before.max(1) as f64,
                unit: "% tokens".into(),
                target: None,
                detail: format!(
                    "{} verbose answers, {before} → {after} tokens, code blocks byte-identical",
                    VERBOSE_ANSWERS.len()
                ),
            }
        })
        .collect()
}

/// Real prose for the prose figure: Markdown files under `root` (sorted paths, so runs are
/// comparable), concatenated up to `max_bytes`.
pub fn load_markdown(root: &std::path::Path, max_bytes: usize) -> String {
    crate::bench::load_files(root, &["md"], max_bytes)
        .into_iter()
        .map(|text| text + "\n\n")
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_produced_on_small_inputs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = CommitStore::new(dir.path());
        let figures = figures(1, &sample::prose(200, 1), &store);
        let names: Vec<&str> = figures.iter().map(|f| f.name.as_str()).collect();
        assert!(names.contains(&"compress logs ratio"), "{names:?}");
        assert!(names.contains(&"compress json throughput"));
        assert!(names.contains(&"compress prose ratio"));
        assert!(names.contains(&"compress code.py throughput"), "{names:?}");
        assert!(names.contains(&"compress code.js ratio"), "{names:?}");
        assert!(names.contains(&"distill ultra reduction"));
        for figure in &figures {
            assert!(figure.value.is_finite() && figure.value > 0.0, "{figure:?}");
        }
    }
}
