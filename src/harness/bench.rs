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
/// temporary directory and reports trials per second of wall time.
pub fn fixture_throughput(
    workload: Workload,
    conditions: Vec<Condition>,
    budget: usize,
    replicates: u64,
    threads: Option<usize>,
    selector: Arc<dyn ContextSelector>,
) -> Result<Figure, RunError> {
    let dir = tempfile::tempdir().map_err(|source| RunError::Io {
        path: std::env::temp_dir(),
        source,
    })?;
    let name = workload.name().to_string();
    let tasks = workload.tasks.len();
    let settings = RunSettings {
        scorer: workload.scorer(),
        workload: Arc::new(workload),
        runner: Arc::new(Runner::fixture()),
        conditions: conditions.clone(),
        budgets: vec![budget],
        replicates,
        shard: Shard::default(),
        out_dir: dir.path().join("run"),
        max_error_rate: None,
        seed: 0,
        selector,
        claim_checker: scorer::default_claim_checker(),
        state_home: dir.path().join("state"),
        threads,
        progress: None,
    };
    let start = Instant::now();
    let summary = run::execute(&settings)?;
    let seconds = start.elapsed().as_secs_f64();
    let threads = threads.unwrap_or_else(rayon::current_num_threads);
    Ok(Figure {
        name: format!("harness fixture trials ({name}, budget {budget})"),
        value: summary.written as f64 / seconds,
        unit: "trials/s".into(),
        target: Some(">= 500".into()),
        detail: format!(
            "{} trials ({tasks} tasks x {} x {replicates} replicates), {} errors, {threads} threads, {seconds:.2} s",
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
