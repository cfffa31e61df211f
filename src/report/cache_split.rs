//! Latency and cost split by provider cache state, per workload, model and condition.
//!
//! The trial record has no cache field, so the state comes from the `cache_usage` notes a run
//! writes beside its records (`notes.jsonl` in the record file's folder; see
//! [`crate::harness::run::cache_state`]). A successful trial without such a note is
//! `not_reported` (the fixture, or a server that does not say). Error trials have no answer
//! call to be cached and are left out. When no input has a single `cache_usage` note the
//! split is absent: there is nothing to split.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::harness::run::cache_state::{self, CacheState, CacheUsage};
use crate::trial::Condition;

/// One (workload, model, condition, cache state) cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheSplitRow {
    pub workload: String,
    pub model: String,
    pub condition: Condition,
    pub cache_state: CacheState,
    /// Successful trials in this cell.
    pub trials: u64,
    pub mean_latency_ms: f64,
    pub median_latency_ms: f64,
    pub mean_billed_cost_usd: f64,
    /// Mean share of the prompt read from the provider's cache (`None` when not reported).
    pub mean_cached_share: Option<f64>,
}

#[derive(Deserialize)]
struct NoteLine {
    task_id: String,
    condition: Condition,
    replicate: u64,
    kind: String,
    #[serde(default)]
    values: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct RecordLine {
    workload: String,
    model: String,
    task_id: String,
    condition: Condition,
    replicate: u64,
    outcome: String,
    latency_ms: f64,
    billed_cost_usd: f64,
}

type TrialKey = (String, Condition, u64);

/// The `cache_usage` notes of the run whose records are in `record_file`.
fn notes_beside(record_file: &Path) -> HashMap<TrialKey, CacheUsage> {
    let mut out = HashMap::new();
    let Some(dir) = record_file.parent() else {
        return out;
    };
    let Ok(file) = std::fs::File::open(dir.join("notes.jsonl")) else {
        return out;
    };
    for line in std::io::BufReader::new(file).lines().map_while(Result::ok) {
        let Ok(note) = serde_json::from_str::<NoteLine>(&line) else {
            continue;
        };
        if note.kind != cache_state::NOTE_KIND {
            continue;
        }
        if let Some(usage) = note
            .values
            .and_then(|v| serde_json::from_value::<CacheUsage>(v).ok())
        {
            out.insert((note.task_id, note.condition, note.replicate), usage);
        }
    }
    out
}

#[derive(Default)]
struct Cell {
    latencies: Vec<f64>,
    cost: f64,
    shares: Vec<f64>,
}

/// The split over the JSON Lines record files of `files` (Parquet exports carry no notes), or
/// `None` when no run among them recorded a cache state.
pub fn split(files: &[PathBuf]) -> Option<Vec<CacheSplitRow>> {
    let mut cells: BTreeMap<(String, String, Condition, CacheState), Cell> = BTreeMap::new();
    let mut any_note = false;
    for path in files {
        if crate::trial::parquet::is_parquet(path) {
            continue;
        }
        let notes = notes_beside(path);
        any_note |= !notes.is_empty();
        let Ok(file) = std::fs::File::open(path) else {
            continue;
        };
        // Records that do not parse are the report's invalid records, listed there.
        for line in std::io::BufReader::new(file).lines().map_while(Result::ok) {
            let Ok(record) = serde_json::from_str::<RecordLine>(&line) else {
                continue;
            };
            if record.outcome != "success" {
                continue;
            }
            let usage = notes.get(&(record.task_id.clone(), record.condition, record.replicate));
            let state = usage.map_or(CacheState::NotReported, |u| u.cache_state);
            let cell = cells
                .entry((record.workload, record.model, record.condition, state))
                .or_default();
            cell.latencies.push(record.latency_ms);
            cell.cost += record.billed_cost_usd;
            if let Some(CacheUsage {
                input_tokens: Some(input),
                cached_input_tokens: Some(cached),
                ..
            }) = usage
                && *input > 0
            {
                cell.shares.push(*cached as f64 / *input as f64);
            }
        }
    }
    if !any_note {
        return None;
    }
    Some(
        cells
            .into_iter()
            .map(|((workload, model, condition, cache_state), mut cell)| {
                let n = cell.latencies.len();
                cell.latencies.sort_by(f64::total_cmp);
                let median = if n % 2 == 1 {
                    cell.latencies[n / 2]
                } else {
                    (cell.latencies[n / 2 - 1] + cell.latencies[n / 2]) / 2.0
                };
                CacheSplitRow {
                    workload,
                    model,
                    condition,
                    cache_state,
                    trials: n as u64,
                    mean_latency_ms: cell.latencies.iter().sum::<f64>() / n as f64,
                    median_latency_ms: median,
                    mean_billed_cost_usd: cell.cost / n as f64,
                    mean_cached_share: (!cell.shares.is_empty())
                        .then(|| cell.shares.iter().sum::<f64>() / cell.shares.len() as f64),
                }
            })
            .collect(),
    )
}

/// The report.md section.
pub fn markdown(rows: &[CacheSplitRow]) -> String {
    use std::fmt::Write;
    let mut out = String::from(
        "## Latency and cost by provider cache state\n\nPer condition, successful trials whose answer call the provider served partly from its prefix cache (`cached`), reported as not cached (`uncached`), or without a report (`not_reported`), from the `cache_usage` notes of each run. Cached input is billed at the pricing snapshot's cached rate. A condition whose trials are mostly `cached` has its latency lowered by the server's cache, not by its context: compare within a state, or run with `--cache-neutral`.\n\n| workload | model | condition | cache state | trials | mean latency ms | median latency ms | mean billed cost USD | mean cached share |\n|---|---|---|---|---:|---:|---:|---:|---:|\n",
    );
    for row in rows {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {:.1} | {:.1} | {:.6} | {} |",
            row.workload,
            row.model,
            row.condition,
            row.cache_state,
            row.trials,
            row.mean_latency_ms,
            row.median_latency_ms,
            row.mean_billed_cost_usd,
            row.mean_cached_share
                .map_or_else(|| "—".to_string(), |s| format!("{:.1}%", s * 100.0)),
        );
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(task: &str, condition: &str, latency: f64, cost: f64) -> String {
        serde_json::json!({"workload": "w", "model": "m", "task_id": task, "condition": condition,
            "replicate": 0, "outcome": "success", "latency_ms": latency, "billed_cost_usd": cost})
        .to_string()
    }

    #[test]
    fn splits_by_the_notes_beside_the_records_and_counts_the_rest_as_not_reported() {
        let dir = tempfile::tempdir().expect("tempdir");
        let trials = dir.path().join("trials.jsonl");
        std::fs::write(
            &trials,
            [
                record("a", "raw", 100.0, 0.002),
                record("b", "raw", 300.0, 0.004),
                record("c", "raw", 50.0, 0.001),
                record("a@b512", "svc", 40.0, 0.001),
            ]
            .join("\n"),
        )
        .expect("trials");
        assert_eq!(
            split(std::slice::from_ref(&trials)),
            None,
            "no notes: no split"
        );
        let note = |task: &str, cached: u64| {
            serde_json::json!({"task_id": task, "condition": "raw", "replicate": 0,
                "kind": "cache_usage", "detail": "",
                "values": {"cache_state": if cached > 0 { "cached" } else { "uncached" },
                    "input_tokens": 100, "cached_input_tokens": cached, "cache_write_tokens": null}})
            .to_string()
        };
        std::fs::write(
            dir.path().join("notes.jsonl"),
            [note("a", 80), note("c", 90), note("b", 0)].join("\n"),
        )
        .expect("notes");
        let rows = split(&[trials]).expect("a split");
        let find = |condition: Condition, state: CacheState| {
            rows.iter()
                .find(|r| r.condition == condition && r.cache_state == state)
                .expect("row")
        };
        let cached = find(Condition::Raw, CacheState::Cached);
        assert_eq!(cached.trials, 2);
        assert!((cached.mean_latency_ms - 75.0).abs() < 1e-9);
        assert!((cached.median_latency_ms - 75.0).abs() < 1e-9);
        assert!((cached.mean_cached_share.expect("share") - 0.85).abs() < 1e-9);
        let uncached = find(Condition::Raw, CacheState::Uncached);
        assert_eq!(
            (uncached.trials, uncached.mean_cached_share),
            (1, Some(0.0))
        );
        let svc = find(Condition::Svc, CacheState::NotReported);
        assert_eq!((svc.trials, svc.mean_cached_share), (1, None));
        assert_eq!(rows.len(), 3);
        assert!(markdown(&rows).contains("| w | m | raw | cached | 2 | 75.0 | 75.0 |"));
    }
}
