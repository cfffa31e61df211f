//! What B buys and what it costs against A, for `svc report --compare-runs A B`: per paired
//! comparison, the means of task score, unsupported-claim rate and context tokens on each side
//! (with the delta's CI), and model calls per trial, counted from each run's `requests.jsonl`
//! (the record has no call count; a trial of the fixed-point loop makes one call per round).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use svc::harness::audit;
use svc::harness::run::{read_manifest, split_task_id};
use svc::report::paired::Comparison;
use svc::report::{Metric, Report};
use svc::trial::record::Condition;

/// (workload, budget, condition) → (trials, model calls).
type CallCounts = BTreeMap<(String, Option<u64>, Condition), (u64, u64)>;

/// Model calls of every run directory under `root` (a run directory, or a tree of them).
fn call_counts(root: &Path) -> anyhow::Result<CallCounts> {
    let mut counts = CallCounts::new();
    let mut dirs: Vec<PathBuf> = Vec::new();
    if root.is_dir() {
        for entry in ignore::WalkBuilder::new(root)
            .standard_filters(false)
            .build()
            .flatten()
        {
            if entry.file_name() == audit::REQUESTS_LOG
                && let Some(dir) = entry.path().parent()
            {
                dirs.push(dir.to_path_buf());
            }
        }
    }
    for dir in dirs {
        let Some(manifest) = read_manifest(&dir) else {
            continue;
        };
        for trial in audit::read_calls(&dir)? {
            let (_, budget) = split_task_id(&trial.task_id);
            let entry = counts
                .entry((
                    manifest.workload.name.clone(),
                    budget.map(|b| b as u64),
                    trial.condition,
                ))
                .or_default();
            entry.0 += 1;
            entry.1 += trial.calls.len() as u64;
        }
    }
    Ok(counts)
}

/// Calls per trial in a comparison's scope (`None` when the side logged no calls there).
fn calls_per_trial(
    counts: &CallCounts,
    comparison: &Comparison,
    condition: Condition,
) -> Option<f64> {
    let (trials, calls) = counts
        .iter()
        .filter(|((workload, budget, c), _)| {
            *c == condition
                && comparison.workload.as_ref().is_none_or(|w| w == workload)
                && comparison.budget.is_none_or(|b| Some(b) == *budget)
        })
        .fold((0, 0), |(t, n), (_, (trials, calls))| {
            (t + trials, n + calls)
        });
    (trials > 0).then(|| calls as f64 / trials as f64)
}

/// The table, or `None` when the report compares no record sets.
pub fn table(report: &Report, a: &Path, b: &Path) -> anyhow::Result<Option<String>> {
    if report.compared_runs.is_none() {
        return Ok(None);
    }
    let (calls_a, calls_b) = (call_counts(a)?, call_counts(b)?);
    let mut rows: Vec<Vec<String>> = vec![
        [
            "condition",
            "scope",
            "tasks",
            "task_score A → B (Δ [CI])",
            "unsupported_claim_rate A → B (Δ [CI])",
            "context_tokens/trial A → B (Δ [CI])",
            "model calls/trial A → B",
        ]
        .map(String::from)
        .to_vec(),
    ];
    let metric = |c: &Comparison, metric: Metric, digits: usize| {
        c.metric(metric).map_or_else(
            || "-".to_string(),
            |m| {
                let side = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.digits$}"));
                let delta = m.delta.as_ref().map_or(String::new(), |e| {
                    format!(
                        " ({:+.digits$} [{:+.digits$}, {:+.digits$}])",
                        e.estimate, e.ci_low, e.ci_high
                    )
                });
                format!(
                    "{} → {}{delta}",
                    side(m.baseline_mean),
                    side(m.condition_mean)
                )
            },
        )
    };
    for c in report
        .comparisons
        .iter()
        .filter(|c| c.condition == c.baseline)
    {
        let calls = |counts: &CallCounts| {
            calls_per_trial(counts, c, c.condition).map_or("-".into(), |v| format!("{v:.2}"))
        };
        rows.push(vec![
            c.condition.to_string(),
            if c.pooled() { "all".into() } else { c.scope() },
            c.tasks.to_string(),
            metric(c, Metric::TaskScore, 3),
            metric(c, Metric::UnsupportedClaimRate, 3),
            metric(c, Metric::ContextTokens, 1),
            format!("{} → {}", calls(&calls_a), calls(&calls_b)),
        ]);
    }
    let mut widths = vec![0usize; rows[0].len()];
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::from("\nwhat B buys and costs against A (means per trial):\n");
    for row in &rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    Ok(Some(out))
}
