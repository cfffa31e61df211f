//! The run viewer (`svc view`): the Runs pages.
//!
//! | Path | Shows |
//! |---|---|
//! | `/runs` | every run and report directory under the viewer's folders |
//! | `/runs/show?id=` | a run: manifest, trial list (paged, filterable), its report (loaded after the page) |
//! | `/runs/report?id=` | the report: `svc report`'s tables and SVG plots inline |
//! | `/runs/trial?id=&task=` | one task side by side across conditions: requests, response, scores, witness certificate, `ctx_` commit |
//! | `/runs/chunk?ctx=&chunk=` | the exact bytes of one recoverable chunk of a commit |
//! | `/runs/compare?a=&b=` | two runs compared (`svc report --compare-runs` A B) |
//!
//! Reports of runs are computed once per state of `trials.jsonl` (size and modification time)
//! and kept in memory.

use std::collections::HashMap;
use std::fmt::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use axum::Router;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use serde::Deserialize;

use super::DashboardState;
use super::html::{self, Nav, count, escape, url_encode};
use super::runs::{self, Entry, EntryKind, TrialQuery};
use crate::context::CommitStore;
use crate::harness::audit::{self, TrialAudit, TrialFilter};
use crate::report::{self, Report, ReportOptions, render};
use crate::trial::{Condition, Outcome};
use crate::witness::{self, Mode, Profile, WitnessInput};

type CacheKey = (PathBuf, u64, Option<SystemTime>);

/// Runs up to this many records get their verdict computed when the run list is shown.
const EAGER_VERDICT_RECORDS: u64 = 5_000;

/// Reports computed for run directories, by directory and state of its records.
#[derive(Debug, Default)]
pub struct ViewerCache {
    reports: Mutex<HashMap<PathBuf, (CacheKey, Arc<Report>)>>,
}

impl ViewerCache {
    fn get(&self, key: &CacheKey) -> Option<Arc<Report>> {
        let reports = self.reports.lock().unwrap_or_else(|p| p.into_inner());
        reports
            .get(&key.0)
            .filter(|(k, _)| k == key)
            .map(|(_, r)| r.clone())
    }

    fn put(&self, key: CacheKey, report: Arc<Report>) {
        let mut reports = self.reports.lock().unwrap_or_else(|p| p.into_inner());
        reports.insert(key.0.clone(), (key, report));
    }
}

pub fn routes() -> Router<Arc<DashboardState>> {
    Router::new()
        .route("/runs", get(list))
        .route("/runs/show", get(show))
        .route("/runs/report", get(report_page))
        .route("/runs/trial", get(trial))
        .route("/runs/chunk", get(chunk))
        .route("/runs/compare", get(compare))
}

/// A page's query string: one that does not parse is the viewer's own 400 page, naming the
/// field (axum's `Query` answers in plain text).
struct PageQuery<T>(T);

impl<T, S> axum::extract::FromRequestParts<S> for PageQuery<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        Query::<T>::from_request_parts(parts, state)
            .await
            .map(|Query(value)| PageQuery(value))
            .map_err(|rejection| {
                problem(
                    StatusCode::BAD_REQUEST,
                    format!("the page's address is not valid: {}", rejection.body_text()),
                )
            })
    }
}

fn problem(status: StatusCode, message: String) -> Response {
    (
        status,
        Html(html::page(
            "Runs",
            Nav::Runs,
            &format!(
                "<section><p class=\"error\">{}</p><p><a href=\"/runs\">All runs</a></p></section>",
                escape(&message)
            ),
        )),
    )
        .into_response()
}

fn cache_key(entry: &Entry) -> CacheKey {
    let meta = std::fs::metadata(entry.dir.join("trials.jsonl")).ok();
    (
        entry.dir.clone(),
        meta.as_ref().map_or(0, |m| m.len()),
        meta.and_then(|m| m.modified().ok()),
    )
}

/// The report of an entry: the stored summary of a report directory, or the report of a run
/// (computed with `svc report`'s defaults, cached).
fn report_of(state: &DashboardState, entry: &Entry) -> Result<Arc<Report>, String> {
    match &entry.kind {
        EntryKind::Report => Report::load_summary(&entry.dir.join("summary.json"))
            .map(Arc::new)
            .map_err(|e| e.to_string()),
        EntryKind::Run(_) => {
            let key = cache_key(entry);
            if let Some(report) = state.viewer.get(&key) {
                return Ok(report);
            }
            let report =
                report::build_report(std::slice::from_ref(&entry.dir), &ReportOptions::default())
                    .map(Arc::new)
                    .map_err(|e| e.to_string())?;
            state.viewer.put(key, report.clone());
            Ok(report)
        }
        EntryKind::Unreadable(problem) => Err(problem.clone()),
    }
}

/// The report of a run when it is cached or cheap: small runs get theirs at once, larger ones
/// when first opened.
fn known_report(
    state: &DashboardState,
    entry: &Entry,
    manifest: &crate::harness::run::Manifest,
) -> Option<Arc<Report>> {
    cached_report(state, entry).or_else(|| {
        (manifest.written <= EAGER_VERDICT_RECORDS)
            .then(|| report_of(state, entry).ok())
            .flatten()
    })
}

fn cached_report(state: &DashboardState, entry: &Entry) -> Option<Arc<Report>> {
    match entry.kind {
        EntryKind::Run(_) => state.viewer.get(&cache_key(entry)),
        EntryKind::Report | EntryKind::Unreadable(_) => None,
    }
}

/// The records and error trials the file holds, which the table shows once the report is at
/// hand: a hand-edited or cut `trials.jsonl` no longer agrees with its manifest, and the
/// manifest's counts must not stand beside a verdict computed from the file.
fn record_counts(report: &Report) -> (u64, u64) {
    let errors = report.conditions.iter().map(|g| g.errors).sum();
    (
        report.inputs.valid_records + report.inputs.invalid_records,
        errors,
    )
}

/// One line per pooled comparison: "svc vs raw: quality-preserving context win".
fn verdict_line(report: &Report) -> String {
    let pooled: Vec<String> = report
        .comparisons
        .iter()
        .filter(|c| c.pooled())
        .map(|c| {
            format!(
                "{} vs {}: {}",
                c.condition_label(),
                c.baseline,
                if c.verdict.quality_preserving_context_win {
                    "win"
                } else {
                    "no win"
                }
            )
        })
        .collect();
    if pooled.is_empty() {
        "no paired comparison".into()
    } else {
        pooled.join("; ")
    }
}

fn conditions_text(conditions: &[Condition]) -> String {
    conditions
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

async fn list(State(state): State<Arc<DashboardState>>) -> Response {
    let worker = state.clone();
    let body = tokio::task::spawn_blocking(move || list_body(&worker)).await;
    match body {
        Ok(body) => Html(html::page("Runs", Nav::Runs, &body)).into_response(),
        Err(join) => problem(StatusCode::INTERNAL_SERVER_ERROR, join.to_string()),
    }
}

fn list_body(state: &DashboardState) -> String {
    let roots = &state.settings.run_roots;
    let entries = runs::discover(roots);
    let mut body = String::from("<section>");
    let _ = write!(
        body,
        "<p>Folders searched: {}.</p>",
        roots
            .iter()
            .map(|r| format!("<code>{}</code>", escape(&r.display().to_string())))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if entries.is_empty() {
        body.push_str("<p class=\"empty\">No run directory (manifest.json) or report directory (summary.json) here. <code>svc run</code> writes runs to <code>runs/</code>, <code>svc report</code> writes reports to <code>reports/out</code>; <code>svc view DIR…</code> looks elsewhere.</p></section>");
        return body;
    }
    body.push_str("<form class=\"filters\" action=\"/runs/compare\" method=\"get\"><strong>Compare two runs:</strong><select name=\"a\" id=\"compare-a\">");
    let options = |selected: usize| -> String {
        entries
            .iter()
            .filter(|e| matches!(e.kind, EntryKind::Run(_)))
            .enumerate()
            .map(|(i, e)| {
                format!(
                    "<option value=\"{}\"{}>{}</option>",
                    escape(&e.id),
                    if i == selected { " selected" } else { "" },
                    escape(&e.dir.display().to_string())
                )
            })
            .collect()
    };
    let _ = write!(
        body,
        "{}</select> vs <select name=\"b\" id=\"compare-b\">{}</select> <button type=\"submit\">Compare</button></form>",
        options(0),
        options(1)
    );
    body.push_str("<div class=\"scroll\"><table id=\"runs\"><thead><tr><th>run</th><th>workload</th><th>runner</th><th>conditions</th><th>budgets</th><th>n</th><th>errors</th><th>verdict</th><th>ended</th></tr></thead><tbody>");
    for entry in &entries {
        let link = format!(
            "<a href=\"/runs/show?id={}\">{}</a>",
            url_encode(&entry.id),
            escape(&entry.dir.display().to_string())
        );
        match &entry.kind {
            EntryKind::Run(m) => {
                let report = known_report(state, entry, m);
                let verdict = report.as_ref().map_or_else(
                    || "<span class=\"empty\">computed when the run is opened</span>".to_string(),
                    |r| escape(&verdict_line(r)),
                );
                let (n, errors) = report
                    .as_ref()
                    .map_or((m.written, m.errors), |r| record_counts(r));
                let disagree = if (n, errors) == (m.written, m.errors) {
                    String::new()
                } else {
                    format!(
                        " <span class=\"bad\" title=\"trials.jsonl disagrees with manifest.json\">(manifest: {} written, {} errors)</span>",
                        count(m.written),
                        count(m.errors)
                    )
                };
                let _ = write!(
                    body,
                    "<tr><td>{link}</td><td>{} v{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}{disagree}</td><td class=\"{}\">{}</td><td>{verdict}</td><td>{}</td></tr>",
                    escape(&m.workload.name),
                    escape(&m.workload.version),
                    escape(&m.runner.name),
                    escape(&conditions_text(&m.conditions)),
                    escape(
                        &m.budgets
                            .iter()
                            .map(|b| b.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    count(n),
                    if errors > 0 { "bad" } else { "" },
                    count(errors),
                    escape(m.ended_at.as_deref().unwrap_or("running or interrupted")),
                );
            }
            EntryKind::Unreadable(problem) => {
                let _ = write!(
                    body,
                    "<tr><td>{}</td><td colspan=\"8\" class=\"bad\">{}</td></tr>",
                    escape(&entry.dir.display().to_string()),
                    escape(problem)
                );
            }
            EntryKind::Report => {
                let summary = Report::load_summary(&entry.dir.join("summary.json"));
                match summary {
                    Ok(r) => {
                        let conditions: Vec<Condition> =
                            r.conditions.iter().map(|g| g.condition).collect();
                        let mut workloads: Vec<String> =
                            r.groups.iter().filter_map(|g| g.workload.clone()).collect();
                        workloads.sort();
                        workloads.dedup();
                        let mut budgets: Vec<u64> =
                            r.groups.iter().filter_map(|g| g.budget).collect();
                        budgets.sort_unstable();
                        budgets.dedup();
                        let _ = write!(
                            body,
                            "<tr><td>{link} <span class=\"tag\">report</span></td><td>{}</td><td></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td></td></tr>",
                            escape(&workloads.join(", ")),
                            escape(&conditions_text(&conditions)),
                            escape(
                                &budgets
                                    .iter()
                                    .map(|b| b.to_string())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                            count(r.inputs.valid_records),
                            count(r.inputs.invalid_records),
                            escape(&verdict_line(&r)),
                        );
                    }
                    Err(error) => {
                        let _ = write!(
                            body,
                            "<tr><td>{link}</td><td colspan=\"8\" class=\"bad\">{}</td></tr>",
                            escape(&error.to_string())
                        );
                    }
                }
            }
        }
    }
    body.push_str("</tbody></table></div></section>");
    body
}

#[derive(Debug, Deserialize)]
struct ShowQuery {
    id: String,
    condition: Option<String>,
    min_score: Option<String>,
    max_score: Option<String>,
    error: Option<String>,
    /// One error type (overrides `error`).
    error_type: Option<String>,
    task: Option<String>,
    /// Byte offset of the page in trials.jsonl.
    at: Option<u64>,
}

fn parse_query(query: &ShowQuery) -> Result<TrialQuery, String> {
    let score = |text: &Option<String>, name: &str| -> Result<Option<f64>, String> {
        match text.as_deref().map(str::trim) {
            None | Some("") => Ok(None),
            Some(t) => t
                .parse::<f64>()
                .ok()
                .filter(|v| (0.0..=1.0).contains(v))
                .map(Some)
                .ok_or_else(|| format!("{name} must be a number from 0 to 1, got {t:?}")),
        }
    };
    let condition = match query.condition.as_deref() {
        None | Some("") => None,
        Some(name) => Some(
            serde_json::from_value::<Condition>(serde_json::Value::String(name.into())).map_err(
                |_| {
                    format!(
                        "condition must be raw, native_compaction, svc or combined, got {name:?}"
                    )
                },
            )?,
        ),
    };
    Ok(TrialQuery {
        condition,
        min_score: score(&query.min_score, "min_score")?,
        max_score: score(&query.max_score, "max_score")?,
        error: match (
            query.error_type.as_deref().map(str::trim),
            query.error.as_deref(),
        ) {
            (Some(kind), _) if !kind.is_empty() => Some(kind.to_string()),
            (_, None | Some("")) => None,
            (_, Some(which @ ("none" | "any"))) => Some(which.to_string()),
            (_, Some(other)) => {
                return Err(format!(
                    "error must be none (successes only) or any (errors only), got {other:?}; one error type goes in error_type"
                ));
            }
        },
        task: query.task.clone().filter(|t| !t.is_empty()),
    })
}

async fn show(
    State(state): State<Arc<DashboardState>>,
    PageQuery(query): PageQuery<ShowQuery>,
) -> Response {
    let worker = state.clone();
    match tokio::task::spawn_blocking(move || show_body(&worker, &query)).await {
        Ok(Ok((title, body))) => Html(html::page(&title, Nav::Runs, &body)).into_response(),
        Ok(Err((status, message))) => problem(status, message),
        Err(join) => problem(StatusCode::INTERNAL_SERVER_ERROR, join.to_string()),
    }
}

type PageResult = Result<(String, String), (StatusCode, String)>;

fn find_entry(state: &DashboardState, id: &str) -> Result<Entry, (StatusCode, String)> {
    runs::find(&state.settings.run_roots, id).ok_or_else(|| {
        (
            StatusCode::NOT_FOUND,
            format!("no run {id:?} under the viewer's folders; /runs lists them"),
        )
    })
}

fn show_body(state: &DashboardState, query: &ShowQuery) -> PageResult {
    let entry = find_entry(state, &query.id)?;
    let manifest = match &entry.kind {
        EntryKind::Report => {
            let report =
                report_of(state, &entry).map_err(|e| (StatusCode::UNPROCESSABLE_ENTITY, e))?;
            return Ok((
                format!("Report {}", entry.dir.display()),
                report_html(&report),
            ));
        }
        EntryKind::Run(manifest) => manifest,
        EntryKind::Unreadable(problem) => {
            return Err((StatusCode::UNPROCESSABLE_ENTITY, problem.clone()));
        }
    };
    let filter = parse_query(query).map_err(|e| (StatusCode::BAD_REQUEST, e))?;
    let mut body = String::from("<section><h2>Run</h2><dl class=\"kv\">");
    let rows = [
        ("directory", entry.dir.display().to_string()),
        ("run id", manifest.run_id.clone()),
        (
            "workload",
            format!(
                "{} v{} ({}, {} tasks)",
                manifest.workload.name,
                manifest.workload.version,
                manifest.workload.kind,
                manifest.workload.tasks
            ),
        ),
        (
            "runner",
            format!(
                "{} ({} / {}, temperature {})",
                manifest.runner.name,
                manifest.runner.provider,
                manifest.runner.model,
                manifest.temperature
            ),
        ),
        ("conditions", conditions_text(&manifest.conditions)),
        (
            "budgets",
            manifest
                .budgets
                .iter()
                .map(|b| b.to_string())
                .collect::<Vec<_>>()
                .join(", "),
        ),
        ("selector", manifest.selector.clone()),
        ("replicates", manifest.replicates.to_string()),
        ("scorer", manifest.scorer.clone()),
        (
            "records",
            format!(
                "{} written of {} planned, {} errors{}{}",
                manifest.written,
                manifest.planned,
                manifest.errors,
                if manifest.aborted { ", aborted" } else { "" },
                known_report(state, &entry, manifest)
                    .map(|r| (record_counts(&r), r.inputs.invalid_records))
                    .filter(|((n, errors), _)| (*n, *errors) != (manifest.written, manifest.errors))
                    .map_or_else(String::new, |((n, errors), invalid)| format!(
                        " (manifest.json); trials.jsonl holds {n} records, {errors} errors, {invalid} invalid"
                    ))
            ),
        ),
        ("seed", manifest.seed.to_string()),
        ("shard", manifest.shard.clone()),
        (
            "svc",
            format!(
                "{} ({})",
                manifest.svc_version,
                manifest.git_commit.as_deref().unwrap_or("no git commit")
            ),
        ),
        (
            "time",
            format!(
                "{} → {}",
                manifest.started_at,
                manifest
                    .ended_at
                    .as_deref()
                    .unwrap_or("running or interrupted")
            ),
        ),
    ];
    for (key, value) in rows {
        let _ = write!(body, "<dt>{key}</dt><dd>{}</dd>", escape(&value));
    }
    body.push_str("</dl></section>");
    body.push_str(&trials_section(&entry, manifest, query, &filter)?);
    let _ = write!(
        body,
        "<section id=\"report\" data-load=\"/runs/report?id={id}&amp;fragment=1\"><h2>Report</h2><p class=\"empty\">Computing the report… (<a href=\"/runs/report?id={id}\">open it alone</a>)</p></section>",
        id = url_encode(&entry.id)
    );
    Ok((format!("Run {}", entry.dir.display()), body))
}

fn trials_section(
    entry: &Entry,
    manifest: &crate::harness::run::Manifest,
    query: &ShowQuery,
    filter: &TrialQuery,
) -> Result<String, (StatusCode, String)> {
    let trials = entry.dir.join("trials.jsonl");
    let mut body = String::from("<section><h2>Trials</h2>");
    // The filter form keeps the current values.
    let selected = |value: &str, current: Option<&str>| {
        if Some(value) == current {
            " selected"
        } else {
            ""
        }
    };
    let condition = query.condition.as_deref();
    let _ = write!(
        body,
        "<form class=\"filters\" method=\"get\" action=\"/runs/show\"><input type=\"hidden\" name=\"id\" value=\"{}\">\
<label>condition <select name=\"condition\" id=\"filter-condition\"><option value=\"\">all</option>",
        escape(&entry.id)
    );
    for c in &manifest.conditions {
        let name = c.to_string();
        let _ = write!(
            body,
            "<option value=\"{name}\"{}>{name}</option>",
            selected(&name, condition)
        );
    }
    let error = query.error.as_deref();
    let _ = write!(
        body,
        "</select></label> <label>score ≥ <input name=\"min_score\" size=\"4\" value=\"{}\"></label> <label>score ≤ <input name=\"max_score\" size=\"4\" value=\"{}\"></label>\
<label>errors <select name=\"error\" id=\"filter-error\"><option value=\"\">all trials</option><option value=\"none\"{}>successes only</option><option value=\"any\"{}>errors only</option></select></label>\
<label>error type <input name=\"error_type\" id=\"filter-error-type\" size=\"12\" value=\"{}\"></label>\
<label>task <input name=\"task\" size=\"14\" value=\"{}\"></label> <button type=\"submit\">Filter</button></form>",
        escape(query.min_score.as_deref().unwrap_or("")),
        escape(query.max_score.as_deref().unwrap_or("")),
        selected("none", error),
        selected("any", error),
        escape(query.error_type.as_deref().unwrap_or("")),
        escape(query.task.as_deref().unwrap_or("")),
    );
    if !trials.is_file() {
        body.push_str("<p class=\"empty\">No trials.jsonl in this run yet.</p></section>");
        return Ok(body);
    }
    let start = query.at.unwrap_or(0);
    let page =
        runs::page(&trials, start, filter).map_err(|e| (StatusCode::BAD_REQUEST, e.to_string()))?;
    if page.rows.is_empty() {
        body.push_str("<p class=\"empty\">No trial matches in this part of the file.</p>");
    } else {
        body.push_str("<div class=\"scroll\"><table id=\"trials\"><thead><tr><th>line</th><th>task</th><th>condition</th><th>replicate</th><th>outcome</th><th>task_score</th><th>evidence_recall</th><th>context_tokens</th><th>output_tokens</th><th>latency_ms</th><th>commit</th></tr></thead><tbody>");
        for row in &page.rows {
            let (task, _) = crate::harness::run::split_task_id(&row.task_id);
            let outcome = match row.outcome {
                Outcome::Success => "<td class=\"good\">success</td>".to_string(),
                Outcome::Error => format!(
                    "<td class=\"bad\">error: {}</td>",
                    escape(row.error_type.as_deref().unwrap_or(""))
                ),
            };
            let _ = write!(
                body,
                "<tr><td>{}</td><td><a href=\"/runs/trial?id={}&amp;task={}\">{}</a></td><td>{}</td><td>{}</td>{outcome}<td>{:.3}</td><td>{:.3}</td><td>{}</td><td>{}</td><td>{:.1}</td><td><code>{}</code></td></tr>",
                row.line,
                url_encode(&entry.id),
                url_encode(task),
                escape(&row.task_id),
                row.condition,
                row.replicate,
                row.task_score,
                row.evidence_recall,
                count(row.context_tokens),
                count(row.output_tokens),
                row.latency_ms,
                escape(row.context_commit_id.as_deref().unwrap_or("")),
            );
        }
        body.push_str("</tbody></table></div>");
    }
    let base = format!(
        "/runs/show?id={}&amp;condition={}&amp;min_score={}&amp;max_score={}&amp;error={}&amp;error_type={}&amp;task={}",
        url_encode(&entry.id),
        url_encode(query.condition.as_deref().unwrap_or("")),
        url_encode(query.min_score.as_deref().unwrap_or("")),
        url_encode(query.max_score.as_deref().unwrap_or("")),
        url_encode(query.error.as_deref().unwrap_or("")),
        url_encode(query.error_type.as_deref().unwrap_or("")),
        url_encode(query.task.as_deref().unwrap_or("")),
    );
    let _ = write!(
        body,
        "<div class=\"pager\"><span>{} shown, {} of {} scanned{}</span>",
        page.rows.len(),
        human_bytes(page.start + page.scanned),
        human_bytes(page.file_bytes),
        if page.unreadable > 0 {
            format!(
                " · {} unreadable lines (<code>svc records validate</code> explains them)",
                page.unreadable
            )
        } else {
            String::new()
        }
    );
    if start > 0 {
        let _ = write!(body, "<a href=\"{base}\">first page</a>");
    }
    if let Some(next) = page.next {
        let _ = write!(
            body,
            "<a id=\"next-page\" href=\"{base}&amp;at={next}\">next page →</a>"
        );
    }
    body.push_str("</div></section>");
    Ok(body)
}

fn human_bytes(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MB", bytes as f64 / (1 << 20) as f64)
    } else if bytes >= 1 << 10 {
        format!("{:.1} KB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

/// The report as HTML: `svc report`'s Markdown rendered, then the plots inline.
fn report_html(report: &Report) -> String {
    let mut body = format!(
        "<section class=\"report\"><p><strong>Verdict:</strong> {}</p>",
        escape(&verdict_line(report))
    );
    // The plots first: a person looks at them before reading the tables.
    match render::plots(report) {
        Ok(plots) if !plots.is_empty() => {
            body.push_str("<h2>Plots</h2><div class=\"plots\">");
            for (name, svg) in plots {
                // The SVG comes from our own renderer; its XML prolog is dropped for inlining.
                let start = svg.find("<svg").unwrap_or(0);
                let _ = write!(
                    body,
                    "<figure>{}<figcaption><code>{}</code></figcaption></figure>",
                    &svg[start..],
                    escape(&name)
                );
            }
            body.push_str("</div>");
        }
        Ok(_) => {}
        Err(error) => {
            let _ = write!(
                body,
                "<p class=\"error\">{}</p>",
                escape(&error.to_string())
            );
        }
    }
    body.push_str(&html::markdown(&render::markdown(report)));
    body.push_str("</section>");
    body
}

#[derive(Debug, Deserialize)]
struct ReportQuery {
    id: String,
    /// Only the section (the run page loads it into itself).
    fragment: Option<u8>,
}

async fn report_page(
    State(state): State<Arc<DashboardState>>,
    PageQuery(query): PageQuery<ReportQuery>,
) -> Response {
    let worker = state.clone();
    let fragment = query.fragment == Some(1);
    let built = tokio::task::spawn_blocking(move || {
        let entry = find_entry(&worker, &query.id)?;
        let report =
            report_of(&worker, &entry).map_err(|e| (StatusCode::UNPROCESSABLE_ENTITY, e))?;
        Ok::<_, (StatusCode, String)>((entry.dir.display().to_string(), report_html(&report)))
    })
    .await;
    match built {
        Ok(Ok((_, body))) if fragment => Html(format!("<h2>Report</h2>{body}")).into_response(),
        Ok(Ok((id, body))) => {
            Html(html::page(&format!("Report {id}"), Nav::Runs, &body)).into_response()
        }
        Ok(Err((status, message))) if fragment => (
            status,
            Html(format!(
                "<h2>Report</h2><p class=\"error\">{}</p>",
                escape(&message)
            )),
        )
            .into_response(),
        Ok(Err((status, message))) => problem(status, message),
        Err(join) => problem(StatusCode::INTERNAL_SERVER_ERROR, join.to_string()),
    }
}

#[derive(Debug, Deserialize)]
struct TrialQueryParams {
    id: String,
    task: String,
}

async fn trial(
    State(state): State<Arc<DashboardState>>,
    PageQuery(query): PageQuery<TrialQueryParams>,
) -> Response {
    let worker = state.clone();
    match tokio::task::spawn_blocking(move || trial_body(&worker, &query)).await {
        Ok(Ok((title, body))) => Html(html::page(&title, Nav::Runs, &body)).into_response(),
        Ok(Err((status, message))) => problem(status, message),
        Err(join) => problem(StatusCode::INTERNAL_SERVER_ERROR, join.to_string()),
    }
}

fn trial_body(state: &DashboardState, query: &TrialQueryParams) -> PageResult {
    let entry = find_entry(state, &query.id)?;
    let filter = TrialFilter {
        task_id: query.task.clone(),
        ..TrialFilter::default()
    };
    let mut trials = audit::trial_audits(&entry.dir, &filter)
        .map_err(|e| (StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))?;
    // Columns in the spec's condition order, then by replicate.
    let order = |c: Condition| Condition::ALL.iter().position(|x| *x == c);
    trials.sort_by_key(|t| (order(t.condition), t.replicate, t.task_id.clone()));
    if trials.is_empty() {
        return Err((
            StatusCode::NOT_FOUND,
            format!(
                "no trial of task {:?} with stored requests in {} (runs made before svc stored requests have none)",
                query.task,
                entry.dir.display()
            ),
        ));
    }
    let commits = CommitStore::new(&state.settings.state_home);
    let mut body = format!(
        "<p><a href=\"/runs/show?id={}\">← run {}</a> · every condition's trial of task <code>{}</code>, side by side</p><div class=\"side\">",
        url_encode(&entry.id),
        escape(&entry.dir.display().to_string()),
        escape(&query.task)
    );
    for trial in &trials {
        body.push_str(&trial_column(trial, &commits));
    }
    body.push_str("</div>");
    Ok((format!("Trial {}", query.task), body))
}

fn trial_column(trial: &TrialAudit, commits: &CommitStore) -> String {
    let mut out = format!(
        "<div class=\"trial\"><h2>{} <small>{} · replicate {}</small></h2>",
        trial.condition,
        escape(&trial.task_id),
        trial.replicate
    );
    match &trial.record {
        Some(r) => {
            let outcome = match r.outcome {
                Outcome::Success => "<span class=\"good\">success</span>".to_string(),
                Outcome::Error => format!(
                    "<span class=\"bad\">error: {}</span>",
                    escape(r.error_type.as_deref().unwrap_or(""))
                ),
            };
            let _ = write!(
                out,
                "<dl class=\"kv\"><dt>outcome</dt><dd>{outcome}</dd><dt>task_score</dt><dd>{:.3}</dd><dt>evidence_recall</dt><dd>{:.3}</dd><dt>unsupported_claim_rate</dt><dd>{:.3}</dd><dt>context_tokens</dt><dd>{}</dd><dt>output_tokens</dt><dd>{}</dd><dt>latency_ms</dt><dd>{:.1}</dd><dt>billed_cost_usd</dt><dd>{}</dd><dt>scorer</dt><dd>{}</dd></dl>",
                r.task_score,
                r.evidence_recall,
                r.unsupported_claim_rate,
                count(r.context_tokens),
                count(r.output_tokens),
                r.latency_ms,
                r.billed_cost_usd,
                escape(&r.scorer)
            );
        }
        None => out.push_str("<p class=\"empty\">No record written (notes.jsonl says why).</p>"),
    }
    let answer = trial
        .calls
        .iter()
        .find(|c| matches!(c.call.purpose, audit::CallPurpose::Answer));
    for call in &trial.calls {
        let _ = write!(
            out,
            "<h3>Request ({:?} call, {} attempts)</h3><p><small>model <code>{}</code> · request sha256 <code>{}</code></small></p><details><summary>system prompt</summary><pre>{}</pre></details><pre>{}</pre>",
            call.call.purpose,
            call.call.attempts.len(),
            escape(&call.request.model),
            escape(&call.call.request_sha256),
            escape(&call.request.system),
            escape(&call.request.prompt),
        );
    }
    let response = trial
        .record
        .as_ref()
        .and_then(|r| r.response_text.as_deref());
    match response {
        Some(text) => {
            let _ = write!(out, "<h3>Response</h3><pre>{}</pre>", escape(text));
            if let Some(call) = answer {
                out.push_str(&certificate_html(
                    &call.request.prompt,
                    &call.request.question,
                    text,
                ));
            }
        }
        None => out.push_str("<h3>Response</h3><p class=\"empty\">none</p>"),
    }
    if let Some(ctx) = trial
        .record
        .as_ref()
        .and_then(|r| r.context_commit_id.as_deref())
    {
        out.push_str(&commit_html(commits, ctx));
    }
    out.push_str("</div>");
    out
}

/// The witness certificate of the response against the prompt it answered, computed now
/// (audit mode, qa profile): the runs store no certificate of their own.
fn certificate_html(prompt: &str, question: &str, response: &str) -> String {
    let witnessed = witness::witness(&WitnessInput {
        context: prompt,
        context_source: "request",
        output: response,
        question: (!question.is_empty()).then_some(question),
        mode: Mode::Audit,
        profile: Profile::Qa,
    });
    let c = &witnessed.certificate;
    let mut out = format!(
        "<h3>Witness certificate</h3><p><small>checked now against the request (audit, qa)</small></p><dl class=\"kv\"><dt>status</dt><dd>{}</dd><dt>claims</dt><dd>{} ({} verifiable, {} supported, {} contradicted, {} unsupported)</dd></dl>",
        escape(
            &serde_json::to_value(c.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default()
        ),
        c.summary.claims,
        c.summary.verifiable,
        c.summary.supported,
        c.summary.contradicted,
        c.summary.unsupported
    );
    if !c.flagged_claims.is_empty() {
        out.push_str("<ul class=\"claims\">");
        for claim in &c.flagged_claims {
            let _ = write!(
                out,
                "<li><span class=\"tag\">{}</span> {} <small>{}</small></li>",
                escape(&format!("{:?}", claim.label).to_lowercase()),
                escape(&claim.text),
                escape(&claim.reason)
            );
        }
        out.push_str("</ul>");
    }
    let json = serde_json::to_string_pretty(c).unwrap_or_default();
    let _ = write!(
        out,
        "<details><summary>full certificate</summary><pre>{}</pre></details>",
        escape(&json)
    );
    out
}

fn commit_html(commits: &CommitStore, ctx: &str) -> String {
    let mut out = format!("<h3>Commit <code>{}</code></h3>", escape(ctx));
    match commits.receipt(ctx) {
        Ok(receipt) => {
            let recoverable: Vec<_> = receipt.recoverable().collect();
            let _ = write!(
                out,
                "<p>{} chunks, {} recoverable (not sent verbatim):</p>",
                receipt.chunks.len(),
                recoverable.len()
            );
            if !recoverable.is_empty() {
                out.push_str("<ul class=\"chunks\">");
                for chunk in recoverable.iter().take(50) {
                    let _ = write!(
                        out,
                        "<li><a href=\"/runs/chunk?ctx={}&amp;chunk={}\"><code>{}</code></a> <small>{} tokens, sent as {}</small></li>",
                        url_encode(ctx),
                        url_encode(&chunk.chunk_id),
                        escape(&chunk.chunk_id),
                        chunk.receipt_token_count,
                        chunk.resolution.map_or("omitted", |r| r.as_str())
                    );
                }
                if recoverable.len() > 50 {
                    let _ = write!(out, "<li>… {} more</li>", recoverable.len() - 50);
                }
                out.push_str("</ul>");
            }
        }
        Err(error) => {
            let _ = write!(
                out,
                "<p class=\"empty\">Not in this viewer's state directory: {}</p>",
                escape(&error.to_string())
            );
        }
    }
    out
}

#[derive(Debug, Deserialize)]
struct ChunkQuery {
    ctx: String,
    chunk: String,
}

async fn chunk(
    State(state): State<Arc<DashboardState>>,
    PageQuery(query): PageQuery<ChunkQuery>,
) -> Response {
    let worker = state.clone();
    let recovered = tokio::task::spawn_blocking(move || {
        CommitStore::new(&worker.settings.state_home)
            .recover(&query.ctx, &query.chunk)
            .map(|text| (query, text))
    })
    .await;
    match recovered {
        Ok(Ok((query, text))) => Html(html::page(
            &format!("Chunk {}", query.chunk),
            Nav::Runs,
            &format!(
                "<section><p>Exact bytes of chunk <code>{}</code> of <code>{}</code>, verified against the receipt's fingerprint and the bundle's content hash ({} bytes).</p><pre>{}</pre></section>",
                escape(&query.chunk),
                escape(&query.ctx),
                text.len(),
                escape(&text)
            ),
        ))
        .into_response(),
        Ok(Err(error)) => problem(StatusCode::NOT_FOUND, error.to_string()),
        Err(join) => problem(StatusCode::INTERNAL_SERVER_ERROR, join.to_string()),
    }
}

#[derive(Debug, Deserialize)]
struct CompareQuery {
    a: String,
    b: String,
}

async fn compare(
    State(state): State<Arc<DashboardState>>,
    PageQuery(query): PageQuery<CompareQuery>,
) -> Response {
    let worker = state.clone();
    let built = tokio::task::spawn_blocking(move || {
        let a = find_entry(&worker, &query.a)?;
        let b = find_entry(&worker, &query.b)?;
        let report = report::build_runs_report(
            std::slice::from_ref(&a.dir),
            std::slice::from_ref(&b.dir),
            &ReportOptions::default(),
        )
        .map_err(|e| (StatusCode::UNPROCESSABLE_ENTITY, e.to_string()))?;
        // As `svc report --compare-runs`: with nothing paired, every comparison is empty and
        // its "no win" verdict would read as a result.
        if report.pairing.complete_units == 0 {
            return Err((
                StatusCode::UNPROCESSABLE_ENTITY,
                "the two runs share no task (of the same workload, budget and model): a comparison needs two runs of the same tasks".to_string(),
            ));
        }
        Ok::<_, (StatusCode, String)>((
            a.dir.display().to_string(),
            b.dir.display().to_string(),
            report_html(&report),
        ))
    })
    .await;
    match built {
        Ok(Ok((a, b, body))) => Html(html::page(
            &format!("Compare {a} and {b}"),
            Nav::Runs,
            &body,
        ))
        .into_response(),
        Ok(Err((status, message))) => problem(status, message),
        Err(join) => problem(StatusCode::INTERNAL_SERVER_ERROR, join.to_string()),
    }
}
