//! The `viewer` group of `svc bench`: how long the run viewer takes to open a large run, over
//! HTTP through the real app (socket, router, page rendering), on generated records.

use std::path::Path;
use std::time::Instant;

use serde_json::json;

use super::{DashboardSettings, DashboardState, Role, app};
use crate::bench::{BenchError, Figure};

fn write_run(dir: &Path, records: usize) -> Result<u64, BenchError> {
    std::fs::create_dir_all(dir)?;
    let trials = dir.join("trials.jsonl");
    let file = std::fs::File::create(&trials)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    crate::report::generate::write_records(&mut out, records, 1)?;
    drop(out);
    let manifest = json!({
        "run_id": "viewer-bench", "svc_version": env!("CARGO_PKG_VERSION"), "git_commit": null,
        "workload": {"name": "generated", "version": "1", "kind": "qa", "tasks": records / 4, "prompt_sha256": "0".repeat(64)},
        "runner": {"name": "fixture", "kind": "fixture", "provider": "fixture", "model": "generated",
                   "file_sha256": "0".repeat(64), "cost_source": "zero_cost_fixture"},
        "conditions": ["raw", "native_compaction", "svc", "combined"],
        "budgets": [512], "task_id_budget_separator": "@b", "replicates": 1, "scorer": "generated",
        "seed": 1, "shard": "1/1", "started_at": "2026-01-01T00:00:00Z", "ended_at": "2026-01-01T00:00:01Z",
        "planned": records, "skipped": 0, "written": records, "errors": 0, "aborted": false
    });
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_vec_pretty(&manifest).map_err(std::io::Error::other)?,
    )?;
    Ok(std::fs::metadata(&trials)?.len())
}

/// Opens a generated run of `records` trial records: the run page (first page of trials), a
/// filtered page, and a page from the middle of the file.
pub fn figures(records: usize) -> Result<Vec<Figure>, BenchError> {
    let dir = tempfile::tempdir()?;
    let runs = dir.path().join("runs");
    let bytes = write_run(&runs.join("big"), records)?;
    let mut settings = DashboardSettings::new(Role::Viewer, dir.path().join("home"));
    settings.run_roots = vec![runs.clone()];
    let state = DashboardState::new(settings, None);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app(state)).await;
        });
        crate::witness::nli::install_crypto_provider();
        let client = reqwest::Client::new();
        // A cursor is a line's first byte (one inside a line is a 400): the line after the
        // middle of the file.
        let text = std::fs::read(runs.join("big/trials.jsonl"))?;
        let half = (bytes as usize / 2).min(text.len());
        let middle = text[half..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(0, |at| half + at + 1);
        let pages = [
            (
                "viewer: open a run (first page)",
                "/runs/show?id=0%2Fbig".to_string(),
            ),
            (
                // Generated runs hold few errors (none when small): a filter that matches.
                "viewer: filtered page (svc, no errors)",
                "/runs/show?id=0%2Fbig&condition=svc&error=none".to_string(),
            ),
            (
                "viewer: page from the middle",
                format!("/runs/show?id=0%2Fbig&at={middle}"),
            ),
        ];
        let mut out = Vec::new();
        for (name, path) in pages {
            let start = Instant::now();
            let response = client
                .get(format!("{url}{path}"))
                .send()
                .await
                .map_err(std::io::Error::other)?;
            let status = response.status();
            let body = response.text().await.map_err(std::io::Error::other)?;
            let ms = start.elapsed().as_secs_f64() * 1000.0;
            if !status.is_success() || !body.contains("<table id=\"trials\">") {
                return Err(BenchError::Io(std::io::Error::other(format!(
                    "{path} answered {status} without a trial table"
                ))));
            }
            out.push(Figure {
                name: name.into(),
                value: ms,
                unit: "ms".into(),
                target: Some("<= 1000".into()),
                detail: format!(
                    "{records} records ({:.0} MB trials.jsonl), {} rows on the page",
                    bytes as f64 / 1e6,
                    body.matches("<tr><td>").count()
                ),
            });
        }
        Ok(out)
    })
}

#[cfg(test)]
mod tests {
    /// Found by probing: every page the bench opens had become an error (a cursor inside a
    /// line is a 400; an errors-only filter of a run without errors has no table), so the
    /// group, and a plain `svc bench`, always failed.
    #[test]
    fn the_viewer_group_measures_its_three_pages() {
        let figures = super::figures(200).expect("figures");
        assert_eq!(figures.len(), 3, "{figures:?}");
        assert!(figures.iter().all(|f| f.detail.contains("200 records")));
    }
}
