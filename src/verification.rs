//! `svc verify-claims`: measures, on a repository, the claims svc makes about itself, and
//! writes the verdicts as `.svc_verification.json`.
//!
//! The claims:
//! - `token_reduction`: selecting for a query at the default budget sends at least
//!   [`Thresholds::min_reduction_percent`] fewer tokens than the whole repository (queries are
//!   mined from the repository's own definitions: their names and first doc line; the share of
//!   them whose definition was sent is reported beside it). Skipped when the repository is
//!   smaller than twice the budget (everything fits; there is nothing to reduce).
//! - `selection_latency`: the median selection on a warm index takes at most
//!   [`Thresholds::max_select_p50_ms`].
//! - `byte_exact_recovery`: every chunk of a committed selection (sent or omitted, up to
//!   [`MAX_RECOVERED`]) comes back from the commit byte for byte as it is in the file.
//! - `deterministic_witness`: the witness gives the same verdicts twice on the same inputs
//!   (answers built from the repository's text, one faithful and one with a changed number).
//!
//! Commits go to a private temporary state directory, so the check leaves only its report.

use std::path::Path;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::context::commit::{CommitError, CommitStore};
use crate::context::index::{Index, IndexError, IndexOptions};
use crate::context::select::{self, SelectError, SelectOptions};
use crate::state::{self, StateError};
use crate::witness::{self, Mode, Profile, WitnessInput};

/// The report's file name, written in the checked directory.
pub const REPORT_FILE: &str = ".svc_verification.json";
/// Schema version of the report.
pub const SCHEMA_VERSION: &str = "svc.verification.v1";
/// The default selection budget: the one svc's own context figures use (8K tokens).
pub const DEFAULT_BUDGET: usize = 8_000;
/// Queries mined for the reduction and latency claims.
pub const QUERIES: usize = 20;
/// Chunks recovered for the recovery claim at most.
pub const MAX_RECOVERED: usize = 2_000;
/// Witness cases for the determinism claim at most.
pub const WITNESS_CASES: usize = 20;

/// The claims, by their report names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimName {
    TokenReduction,
    SelectionLatency,
    ByteExactRecovery,
    DeterministicWitness,
}

/// A claim's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClaimStatus {
    Pass,
    Fail,
    /// The repository cannot test the claim (the reason is in `detail`); not a failure.
    Skipped,
}

/// The pass thresholds (flags of `svc verify-claims`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    pub min_reduction_percent: f64,
    pub max_select_p50_ms: f64,
}

impl Default for Thresholds {
    /// Half the tokens saved at the default budget; the README's warm selection target.
    fn default() -> Self {
        Self {
            min_reduction_percent: 50.0,
            max_select_p50_ms: 30.0,
        }
    }
}

/// One claim as measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimResult {
    pub claim: ClaimName,
    /// The claim in words.
    pub statement: String,
    pub status: ClaimStatus,
    pub value: f64,
    pub unit: String,
    /// The pass condition on `value`, e.g. `>= 50`.
    pub target: String,
    /// How it was measured, and what was seen.
    pub detail: String,
}

/// What the index saw.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepositorySummary {
    /// The checked directory's name (not its absolute path: reports get committed).
    pub name: String,
    pub files: usize,
    pub fragments: usize,
    pub tokens: usize,
}

/// The report written to [`REPORT_FILE`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerificationReport {
    pub schema_version: String,
    pub svc_version: String,
    pub created_at: String,
    pub repository: RepositorySummary,
    pub budget: usize,
    pub thresholds: Thresholds,
    /// True when no claim failed.
    pub passed: bool,
    pub claims: Vec<ClaimResult>,
}

#[derive(Debug, thiserror::Error)]
pub enum VerificationError {
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Select(#[from] SelectError),
    #[error(transparent)]
    Commit(#[from] CommitError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error("a temporary state directory: {0}")]
    Io(#[from] std::io::Error),
    #[error(
        "{path} holds no text file svc can index; run verify-claims in a repository or document folder"
    )]
    Empty { path: String },
}

/// Query and target fragment mined from a definition: its symbol names split into words and
/// the first line of its doc comment.
fn mine_queries(index: &Index, count: usize) -> Vec<(String, String)> {
    let mut candidates: Vec<(String, String)> = index
        .fragments
        .iter()
        .filter(|f| f.kind.is_definition() && !f.symbols.is_empty())
        .filter_map(|f| {
            let mut words: Vec<String> =
                f.symbols.iter().flat_map(|s| split_identifier(s)).collect();
            if let Some(doc) = index
                .text(f)
                .lines()
                .map(str::trim)
                .find(|l| l.starts_with("///") || l.starts_with("#") || l.starts_with("\"\"\""))
            {
                words.push(
                    doc.trim_start_matches(['/', '#', '"', '!', ' '])
                        .to_string(),
                );
            }
            let query = words.join(" ").trim().to_string();
            (query.split_whitespace().count() >= 2).then(|| (query, f.chunk_id.clone()))
        })
        .collect();
    candidates.sort_by(|a, b| a.1.cmp(&b.1));
    if candidates.len() <= count {
        return candidates;
    }
    // Evenly spread over the repository, deterministically.
    let stride = candidates.len() as f64 / count as f64;
    (0..count)
        .map(|i| candidates[(i as f64 * stride) as usize].clone())
        .collect()
}

fn split_identifier(symbol: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut current = String::new();
    for c in symbol.chars() {
        if c == '_' || c == ':' || c == '.' {
            if !current.is_empty() {
                words.push(std::mem::take(&mut current).to_lowercase());
            }
        } else if c.is_uppercase() && !current.is_empty() {
            words.push(std::mem::take(&mut current).to_lowercase());
            current.push(c);
        } else {
            current.push(c);
        }
    }
    if !current.is_empty() {
        words.push(current.to_lowercase());
    }
    words
}

fn percentile(sorted: &[f64], p: usize) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// Measures every claim on the repository at `root`.
pub fn verify(
    root: &Path,
    budget: usize,
    thresholds: Thresholds,
) -> Result<VerificationReport, VerificationError> {
    let scratch = tempfile::tempdir()?;
    let options = IndexOptions {
        state_home: Some(scratch.path().to_path_buf()),
        persist: false,
        ..IndexOptions::default()
    };
    let index = Index::build(root, &options)?;
    if index.fragments.is_empty() {
        return Err(VerificationError::Empty {
            path: root.display().to_string(),
        });
    }
    index.prepare();
    let store = CommitStore::new(scratch.path());
    let queries = mine_queries(&index, QUERIES);
    let repository_tokens = index.total_tokens();
    let options = SelectOptions::default();

    // Reduction and latency: every mined query, three times (the first pass warms caches).
    let mut reductions = Vec::new();
    let mut kept = 0;
    let mut latencies = Vec::new();
    let mut first_selection = None;
    for round in 0..3 {
        for (query, target) in &queries {
            let start = Instant::now();
            let selection = select::select(&index, query, budget, &options)?;
            let elapsed = start.elapsed().as_secs_f64() * 1e3;
            if round > 0 {
                latencies.push(elapsed);
            } else {
                reductions.push(1.0 - selection.tokens as f64 / repository_tokens.max(1) as f64);
                if selection
                    .entry(target)
                    .is_some_and(|e| e.resolution.is_some())
                {
                    kept += 1;
                }
                if first_selection.is_none() {
                    first_selection = Some(selection);
                }
            }
        }
    }
    latencies.sort_by(f64::total_cmp);
    let mut claims = Vec::new();
    let mean_reduction = if reductions.is_empty() {
        0.0
    } else {
        100.0 * reductions.iter().sum::<f64>() / reductions.len() as f64
    };
    let too_small = repository_tokens < 2 * budget;
    claims.push(ClaimResult {
        claim: ClaimName::TokenReduction,
        statement: format!(
            "Selecting for a query at the default budget ({budget} tokens) sends at least {}% fewer tokens than the whole repository.",
            thresholds.min_reduction_percent
        ),
        status: if queries.is_empty() || too_small {
            ClaimStatus::Skipped
        } else if mean_reduction >= thresholds.min_reduction_percent {
            ClaimStatus::Pass
        } else {
            ClaimStatus::Fail
        },
        value: mean_reduction,
        unit: "% fewer tokens".into(),
        target: format!(">= {}", thresholds.min_reduction_percent),
        detail: if queries.is_empty() {
            "no named definition to mine a query from".into()
        } else if too_small {
            format!(
                "the repository has {repository_tokens} tokens, under twice the budget: everything fits, nothing to reduce"
            )
        } else {
            format!(
                "mean over {} queries mined from the repository's definitions (names and first doc line); the queried definition was sent in {kept} of them; repository {repository_tokens} tokens",
                queries.len()
            )
        },
    });
    let p50 = percentile(&latencies, 50);
    claims.push(ClaimResult {
        claim: ClaimName::SelectionLatency,
        statement: format!(
            "A selection on a warm index takes at most {} ms at the median.",
            thresholds.max_select_p50_ms
        ),
        status: if latencies.is_empty() {
            ClaimStatus::Skipped
        } else if p50 <= thresholds.max_select_p50_ms {
            ClaimStatus::Pass
        } else {
            ClaimStatus::Fail
        },
        value: p50,
        unit: "ms".into(),
        target: format!("<= {}", thresholds.max_select_p50_ms),
        detail: format!(
            "p95 {:.1} ms over {} selections (budget {budget}) on the warm in-memory index of {} files; this build and this machine",
            percentile(&latencies, 95),
            latencies.len(),
            index.files.len()
        ),
    });

    // Recovery: commit one selection, then recover its chunks and compare with the files.
    let selection = match first_selection {
        Some(selection) => selection,
        None => select::select(&index, "main entry point", budget, &options)?,
    };
    let receipt = select::commit_selection(&index, &selection, &options, &store)?;
    let step = (index.fragments.len() / MAX_RECOVERED).max(1);
    let mut checked = 0;
    let mut mismatched = Vec::new();
    for fragment in index.fragments.iter().step_by(step).take(MAX_RECOVERED) {
        checked += 1;
        let recovered = store.recover(&receipt.ctx_id, &fragment.chunk_id);
        if recovered.as_deref().ok() != Some(index.text(fragment)) {
            mismatched.push(fragment.chunk_id.clone());
        }
    }
    claims.push(ClaimResult {
        claim: ClaimName::ByteExactRecovery,
        statement:
            "Every chunk of a committed selection, sent or omitted, is recoverable byte for byte."
                .into(),
        status: if mismatched.is_empty() {
            ClaimStatus::Pass
        } else {
            ClaimStatus::Fail
        },
        value: (checked - mismatched.len()) as f64,
        unit: format!("of {checked} chunks exact"),
        target: format!("= {checked}"),
        detail: if mismatched.is_empty() {
            format!(
                "{checked} chunks of commit {} recovered and compared with the file bytes",
                receipt.ctx_id
            )
        } else {
            format!(
                "{} chunks differ, e.g. {}",
                mismatched.len(),
                mismatched[..mismatched.len().min(5)].join(", ")
            )
        },
    });

    claims.push(witness_claim(&index));
    let passed = claims.iter().all(|c| c.status != ClaimStatus::Fail);
    Ok(VerificationReport {
        schema_version: SCHEMA_VERSION.into(),
        svc_version: env!("CARGO_PKG_VERSION").into(),
        created_at: crate::clock::rfc3339(std::time::SystemTime::now()),
        repository: RepositorySummary {
            name: root
                .canonicalize()
                .ok()
                .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                .unwrap_or_else(|| root.display().to_string()),
            files: index.files.len(),
            fragments: index.fragments.len(),
            tokens: repository_tokens,
        },
        budget,
        thresholds,
        passed,
        claims,
    })
}

/// Sentences of the repository's prose and comments that state a number: the witness's cases.
fn witness_cases(index: &Index) -> Vec<(String, String, String)> {
    let mut cases = Vec::new();
    for fragment in &index.fragments {
        if cases.len() >= WITNESS_CASES {
            break;
        }
        let text = index.text(fragment);
        let Some(sentence) = text
            .split(['.', '\n'])
            .map(|s| s.trim().trim_start_matches(['/', '#', '*', '-', ' ']))
            .find(|s| {
                s.split_whitespace().count() >= 5
                    && s.split_whitespace().any(|w| w.parse::<u32>().is_ok())
            })
        else {
            continue;
        };
        let faithful = format!("{sentence}.");
        let changed = sentence
            .split_whitespace()
            .map(|w| match w.parse::<u32>() {
                Ok(n) => (n.wrapping_add(7) % 1000 + 1).to_string(),
                Err(_) => w.to_string(),
            })
            .collect::<Vec<_>>()
            .join(" ");
        cases.push((text.to_string(), faithful, format!("{changed}.")));
    }
    cases
}

fn witness_claim(index: &Index) -> ClaimResult {
    let cases = witness_cases(index);
    let mut checks = 0;
    let mut differing = 0;
    for (evidence, faithful, changed) in &cases {
        for answer in [faithful, changed] {
            let input = WitnessInput {
                context: evidence,
                context_source: "repository",
                output: answer,
                question: None,
                mode: Mode::Strict,
                profile: Profile::Rag,
            };
            let first = witness::witness(&input);
            let second = witness::witness(&input);
            checks += 1;
            let same = first.output == second.output
                && serde_json::to_value(&first.certificate.claims).ok()
                    == serde_json::to_value(&second.certificate.claims).ok()
                && serde_json::to_value(&first.certificate.flagged_claims).ok()
                    == serde_json::to_value(&second.certificate.flagged_claims).ok();
            if !same {
                differing += 1;
            }
        }
    }
    ClaimResult {
        claim: ClaimName::DeterministicWitness,
        statement: "The witness gives the same verdicts and output every time on the same evidence and answer.".into(),
        status: if checks == 0 {
            ClaimStatus::Skipped
        } else if differing == 0 {
            ClaimStatus::Pass
        } else {
            ClaimStatus::Fail
        },
        value: (checks - differing) as f64,
        unit: format!("of {checks} checks identical"),
        target: format!("= {checks}"),
        detail: if checks == 0 {
            "no sentence with a number in the repository to build answers from".into()
        } else {
            format!(
                "{} evidence texts from the repository, each with a faithful answer and one with its numbers changed, checked twice in strict mode",
                cases.len()
            )
        },
    }
}

/// Writes the report atomically (temp file, fsync, rename) as `dir/.svc_verification.json`.
pub fn write_report(dir: &Path, report: &VerificationReport) -> Result<(), StateError> {
    // Plain data serialises infallibly.
    let mut text = serde_json::to_string_pretty(report).unwrap_or_default();
    text.push('\n');
    state::atomic_write_shared(&dir.join(REPORT_FILE), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_split_into_words() {
        assert_eq!(
            split_identifier("parse_duration"),
            vec!["parse", "duration"]
        );
        assert_eq!(
            split_identifier("HttpRequest::send"),
            vec!["http", "request", "send"]
        );
    }

    #[test]
    fn a_repository_passes_and_the_thresholds_decide() {
        let dir = tempfile::tempdir().expect("dir");
        for i in 0..40 {
            std::fs::write(
                dir.path().join(format!("module_{i}.rs")),
                format!(
                    "//! Module {i}.\n\n/// Retries request {i} up to 3 times with a {i} ms backoff.\npub fn retry_request_{i}(attempt: u32) -> u32 {{\n    let wait = attempt * {i};\n    wait + 3\n}}\n\n/// Formats value {i} for the status page.\npub fn format_value_{i}(value: u64) -> String {{\n    format!(\"{{value}} items\")\n}}\n"
                ),
            )
            .expect("write");
        }
        let report = verify(dir.path(), 300, Thresholds::default()).expect("verify");
        let status = |name| {
            report
                .claims
                .iter()
                .find(|c| c.claim == name)
                .expect("claim")
                .status
        };
        assert_eq!(status(ClaimName::TokenReduction), ClaimStatus::Pass);
        assert_eq!(status(ClaimName::ByteExactRecovery), ClaimStatus::Pass);
        assert_eq!(status(ClaimName::DeterministicWitness), ClaimStatus::Pass);
        assert_eq!(report.repository.files, 40);

        let strict = Thresholds {
            min_reduction_percent: 100.0,
            max_select_p50_ms: 0.0,
        };
        let report = verify(dir.path(), 300, strict).expect("verify");
        assert!(!report.passed);
        let failed: Vec<ClaimName> = report
            .claims
            .iter()
            .filter(|c| c.status == ClaimStatus::Fail)
            .map(|c| c.claim)
            .collect();
        assert_eq!(
            failed,
            vec![ClaimName::TokenReduction, ClaimName::SelectionLatency]
        );
        write_report(dir.path(), &report).expect("write");
        let text = std::fs::read_to_string(dir.path().join(REPORT_FILE)).expect("read");
        let back: VerificationReport = serde_json::from_str(&text).expect("the shape");
        assert_eq!(back, report);
    }

    #[test]
    fn a_small_repository_skips_the_reduction_claim() {
        let dir = tempfile::tempdir().expect("dir");
        std::fs::write(
            dir.path().join("lib.rs"),
            "/// Adds 2 numbers for the 3 callers.\npub fn add_numbers(a: u32, b: u32) -> u32 {\n    a + b\n}\n",
        )
        .expect("write");
        let report = verify(dir.path(), DEFAULT_BUDGET, Thresholds::default()).expect("verify");
        assert_eq!(report.claims[0].status, ClaimStatus::Skipped);
        assert!(report.claims[0].detail.contains("under twice the budget"));
        assert_eq!(report.claims[2].status, ClaimStatus::Pass);
        let empty = tempfile::tempdir().expect("dir");
        assert!(matches!(
            verify(empty.path(), DEFAULT_BUDGET, Thresholds::default()),
            Err(VerificationError::Empty { .. })
        ));
    }
}
