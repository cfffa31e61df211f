//! Throughput benchmarks behind `svc bench`. Each returns a [`Figure`]; the command renders the
//! table. Timings are wall-clock over real work on generated or on-disk inputs, never inside unit
//! tests.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;

use crate::digest;
use crate::tokens::{Encoding, Tokenizer};
use crate::trial::read::RecordReader;
use crate::trial::record::{
    Condition, CostSource, Outcome, SCHEMA_VERSION, TrialRecord, UsageSource,
};
use crate::trial::validate::{RecordValidator, SchemaError};

/// Errors of a benchmark run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error("reading benchmark input: {0}")]
    Io(#[from] std::io::Error),
}

/// One measured figure.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    /// What was measured, e.g. `records validate`.
    pub name: String,
    pub value: f64,
    /// Unit of `value`, e.g. `records/s`.
    pub unit: String,
    /// Target from the issue, if any, e.g. `>= 100000`.
    pub target: Option<String>,
    /// Input size and conditions.
    pub detail: String,
}

/// `n` distinct valid records, as JSON Lines, for throughput runs and generators.
pub fn synthetic_records(n: usize) -> Vec<TrialRecord> {
    (0..n)
        .map(|i| {
            let condition = Condition::ALL[i % 4];
            let success = i % 17 != 0;
            let response = format!(
                "The answer to task {i} is {} according to the evidence.",
                i * 7
            );
            TrialRecord {
                schema_version: SCHEMA_VERSION.into(),
                workload: "synthetic".into(),
                workload_version: "1".into(),
                task_id: format!("task-{}", i / 4),
                provider: "fixture".into(),
                model: "extractive-v1".into(),
                provider_request_id: format!("req_{i:08}"),
                usage_source: UsageSource::DeterministicFixture,
                cost_source: CostSource::ZeroCostFixture,
                cost_source_reference: "zero-cost-fixture".into(),
                outcome: if success {
                    Outcome::Success
                } else {
                    Outcome::Error
                },
                error_type: (!success).then(|| "timeout".into()),
                context_sha256: digest::sha256_hex(format!("context {i}")),
                response_sha256: success.then(|| digest::sha256_hex(&response)),
                response_text: success.then_some(response),
                replicate: 0,
                condition,
                scorer: "qa-f1-v1".into(),
                task_score: (i % 11) as f64 / 10.0,
                evidence_recall: (i % 5) as f64 / 4.0,
                unsupported_claim_rate: (i % 3) as f64 / 4.0,
                context_tokens: 100 + (i % 900) as u64,
                reasoning_tokens: 0,
                output_tokens: 12,
                billed_cost_usd: 0.0,
                latency_ms: (i % 50) as f64 + 0.5,
                context_commit_id: matches!(condition, Condition::Svc | Condition::Combined)
                    .then(|| format!("ctx_{i:012x}")),
            }
        })
        .collect()
}

/// `records validate` throughput on one thread: read JSONL, parse, schema, integrity.
pub fn records_validate(n: usize) -> Result<Figure, BenchError> {
    let mut jsonl = String::new();
    for record in synthetic_records(n) {
        // Serialising our own record type cannot fail.
        jsonl.push_str(&serde_json::to_string(&record).unwrap_or_default());
        jsonl.push('\n');
    }
    let validator = RecordValidator::new()?;
    let bytes = jsonl.len();
    let start = Instant::now();
    let reader = RecordReader::new(Box::new(std::io::Cursor::new(jsonl.into_bytes())), None)?;
    let mut valid = 0usize;
    for item in reader {
        let Ok(item) = item else { continue };
        if let Ok(text) = item.text
            && validator.check_str(&text).is_empty()
        {
            valid += 1;
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(Figure {
        name: "records validate".into(),
        value: valid as f64 / seconds,
        unit: "records/s".into(),
        target: Some(">= 100000".into()),
        detail: format!(
            "{valid}/{n} valid, {:.1} MB JSONL, 1 thread, {seconds:.2} s",
            bytes as f64 / 1e6
        ),
    })
}

/// Token-counting throughput on source code text.
pub fn token_count(corpus: &[String], encoding: Encoding) -> Figure {
    let tokenizer = Tokenizer::new(encoding);
    // Load the rank tables before timing.
    tokenizer.count("warm up");
    let bytes: usize = corpus.iter().map(String::len).sum();
    let start = Instant::now();
    let tokens: usize = corpus.iter().map(|text| tokenizer.count(text)).sum();
    let seconds = start.elapsed().as_secs_f64();
    Figure {
        name: format!("token count ({encoding})"),
        value: bytes as f64 / 1e6 / seconds,
        unit: "MB/s".into(),
        target: None,
        detail: format!(
            "{} files, {:.1} MB source, {tokens} tokens ({:.2} bytes/token), 1 thread",
            corpus.len(),
            bytes as f64 / 1e6,
            bytes as f64 / tokens.max(1) as f64
        ),
    }
}

/// Source files under `root` (sorted, so runs are comparable), up to `max_bytes` in total.
pub fn load_source_corpus(root: &Path, max_bytes: usize) -> Vec<String> {
    const EXTENSIONS: [&str; 10] = ["rs", "py", "js", "ts", "go", "java", "c", "h", "cpp", "md"];
    load_files(root, &EXTENSIONS, max_bytes)
}

/// The UTF-8 files under `root` with one of `extensions`, in sorted path order (so runs are
/// comparable), until `max_bytes` of text have been read.
pub fn load_files(root: &Path, extensions: &[&str], max_bytes: usize) -> Vec<String> {
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => stack.push(path),
                Ok(t)
                    if t.is_file()
                        && path
                            .extension()
                            .and_then(|e| e.to_str())
                            .is_some_and(|e| extensions.contains(&e)) =>
                {
                    paths.push(path)
                }
                _ => {}
            }
        }
    }
    paths.sort();
    let mut total = 0;
    let mut corpus = Vec::new();
    for path in paths {
        if total >= max_bytes {
            break;
        }
        if let Ok(text) = std::fs::read_to_string(&path) {
            total += text.len();
            corpus.push(text);
        }
    }
    corpus
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_records_are_valid() {
        let validator = RecordValidator::new().expect("schema");
        for record in synthetic_records(40) {
            assert!(record.violations().is_empty());
            let value = serde_json::to_value(&record).expect("serialise");
            assert!(validator.check_value(&value).is_empty());
        }
    }
}
