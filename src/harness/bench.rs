//! The `harness` group of `svc bench`: fixture-runner throughput of the full trial pipeline
//! (condition, model, scorers, validated JSONL writing) on a workload at one budget.

use std::sync::Arc;
use std::time::Instant;

use super::condition::{Condition, ContextSelector};
use super::run::{self, RunError, RunSettings, Shard};
use super::runner::Runner;
use super::scorer;
use super::workload::Workload;
use crate::bench::Figure;

/// Whether `selector` can select at all (the `svc` seam may be unplugged).
pub fn selector_available(selector: &dyn ContextSelector) -> Result<(), String> {
    selector
        .select(&[("probe".into(), "probe text".into())], "probe", 64)
        .map(|_| ())
}

/// Runs `workload` × `conditions` × `replicates` at `budget` with the fixture runner into a
/// fresh temporary directory `repeats` times and reports the median trials per second of wall
/// time (the whole run: context preparation, conditions, model, scorers, validated writing).
pub fn fixture_throughput(
    workload: Workload,
    conditions: Vec<Condition>,
    budget: usize,
    replicates: u64,
    repeats: usize,
    threads: Option<usize>,
    selector: Arc<dyn ContextSelector>,
) -> Result<Figure, RunError> {
    let name = workload.name().to_string();
    let tasks = workload.tasks.len();
    let workload = Arc::new(workload);
    let mut rates = Vec::new();
    let mut last = None;
    for _ in 0..repeats.max(1) {
        let (summary, seconds) = once(
            &workload,
            &conditions,
            budget,
            replicates,
            threads,
            &selector,
        )?;
        rates.push(summary.written as f64 / seconds);
        last = Some((summary, seconds));
    }
    rates.sort_by(f64::total_cmp);
    let median = rates[rates.len() / 2];
    let (summary, _) = last.ok_or_else(|| RunError::Settings("no benchmark run".into()))?;
    let threads = threads.unwrap_or_else(rayon::current_num_threads);
    Ok(Figure {
        name: format!("harness fixture trials ({name}, budget {budget})"),
        value: median,
        unit: "trials/s".into(),
        target: Some(">= 500".into()),
        detail: format!(
            "median of {} runs (min {:.0}, max {:.0}) of {} trials ({tasks} tasks x {} x {replicates} replicates), {} errors, {threads} threads",
            rates.len(),
            rates[0],
            rates[rates.len() - 1],
            summary.written,
            conditions
                .iter()
                .map(|c| c.as_str())
                .collect::<Vec<_>>()
                .join("+"),
            summary.errors
        ),
    })
}

fn once(
    workload: &Arc<Workload>,
    conditions: &[Condition],
    budget: usize,
    replicates: u64,
    threads: Option<usize>,
    selector: &Arc<dyn ContextSelector>,
) -> Result<(run::RunSummary, f64), RunError> {
    let dir = tempfile::tempdir().map_err(|source| RunError::Io {
        path: std::env::temp_dir(),
        source,
    })?;
    let settings = RunSettings {
        scorer: workload.scorer(),
        workload: workload.clone(),
        runner: Arc::new(Runner::fixture()),
        conditions: conditions.to_vec(),
        budgets: vec![budget],
        replicates,
        shard: Shard::default(),
        out_dir: dir.path().join("run"),
        max_error_rate: None,
        seed: 0,
        selector: selector.clone(),
        claim_checker: scorer::default_claim_checker(),
        state_home: dir.path().join("state"),
        threads,
        progress: None,
    };
    let start = Instant::now();
    let summary = run::execute(&settings)?;
    Ok((summary, start.elapsed().as_secs_f64()))
}
