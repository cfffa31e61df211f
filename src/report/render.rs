//! Report outputs: `report.md` (for people), `summary.csv` and `comparisons.csv` (for
//! spreadsheets), `summary.json` (the [`Report`] itself, schema `report-summary.v2`), two SVG
//! plots, and the terminal comparison table. All renderers are pure functions of the report, so
//! their output is byte-stable for golden tests.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use super::svg::{self, Curve, PlanePoint};
use super::{Comparison, GroupSummary, Metric, Report, ReportError};
use crate::state;

/// Files written by [`write_all`].
pub const REPORT_MD: &str = "report.md";
pub const SUMMARY_CSV: &str = "summary.csv";
pub const COMPARISONS_CSV: &str = "comparisons.csv";
pub const SUMMARY_JSON: &str = "summary.json";
/// Plot file names: `quality-cost-<workload>.svg` and `budget-curves-<workload>.svg`.
pub const QUALITY_COST_PREFIX: &str = "quality-cost-";
pub const BUDGET_CURVES_PREFIX: &str = "budget-curves-";

/// Writes every output into `out_dir` (created if needed), each file atomically. Returns the
/// paths written.
pub fn write_all(report: &Report, out_dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(out_dir).map_err(|e| ReportError::Write {
        path: out_dir.to_path_buf(),
        message: e.to_string(),
    })?;
    let json = serde_json::to_string_pretty(report).map_err(|e| ReportError::Write {
        path: out_dir.join(SUMMARY_JSON),
        message: e.to_string(),
    })? + "\n";
    let mut outputs = vec![
        (REPORT_MD.to_string(), markdown(report)),
        (SUMMARY_CSV.to_string(), summary_csv(report)),
        (COMPARISONS_CSV.to_string(), comparisons_csv(report)),
        (SUMMARY_JSON.to_string(), json),
    ];
    outputs.extend(plots(report)?);
    let mut written = Vec::new();
    for (name, text) in outputs {
        let path = out_dir.join(name);
        state::atomic_write_shared(&path, text.as_bytes()).map_err(|e| ReportError::Write {
            path: path.clone(),
            message: e.to_string(),
        })?;
        written.push(path);
    }
    Ok(written)
}

/// Fixed decimals per metric, so tables line up and golden files are stable.
fn number(metric: Metric, value: f64) -> String {
    if !value.is_finite() {
        return "-".into();
    }
    match metric {
        Metric::TaskScore
        | Metric::EvidenceRecall
        | Metric::UnsupportedClaimRate
        | Metric::ErrorRate => {
            format!("{value:.4}")
        }
        Metric::ContextTokens | Metric::OutputTokens | Metric::LatencyMs => format!("{value:.1}"),
        Metric::BilledCostUsd => format!("{value:.6}"),
    }
}

fn signed(metric: Metric, value: f64) -> String {
    let text = svg::without_negative_zero(number(metric, value));
    if value >= 0.0 && value.is_finite() {
        format!("+{text}")
    } else {
        text
    }
}

fn p_value(p: f64) -> String {
    if p < 0.0001 {
        "< 0.0001".into()
    } else {
        format!("{p:.4}")
    }
}

/// Text from the records (a workload, a model, a file name) made safe for a Markdown table
/// cell or heading: a `|` split the row into more columns, a line break split the row, and
/// HTML in a record (`<img onerror=…>`) was rendered by previewers that allow inline HTML
/// (records come from runs others share).
fn md(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('|', "\\|")
        .replace(['\r', '\n'], " ")
}

fn percent(value: f64) -> String {
    svg::without_negative_zero(format!("{:.1}%", value * 100.0))
}

fn budget(value: Option<u64>) -> String {
    value.map_or_else(|| "none".into(), |b| b.to_string())
}

fn optional_cost(value: Option<f64>) -> String {
    value.map_or_else(|| "-".into(), |v| format!("{v:.6}"))
}

fn summary_row(out: &mut String, group: &GroupSummary, detailed: bool, pricing: bool) {
    let m = |metric: Metric| group.metrics.get(&metric).copied();
    let triple = |metric: Metric| {
        m(metric).map_or_else(
            || "-".to_string(),
            |d| {
                format!(
                    "{} / {} / {}",
                    number(metric, d.mean),
                    number(metric, d.median),
                    number(metric, d.p90)
                )
            },
        )
    };
    let mean = |metric: Metric| m(metric).map_or_else(|| "-".into(), |d| number(metric, d.mean));
    let _ = write!(out, "| {} ", group.condition);
    if detailed {
        let _ = write!(
            out,
            "| {} | {} | {} ",
            md(group.workload.as_deref().unwrap_or("-")),
            budget(group.budget),
            md(group.model.as_deref().unwrap_or("-"))
        );
    }
    let _ = write!(
        out,
        "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
        group.n,
        group.successes,
        group.errors,
        triple(Metric::TaskScore),
        triple(Metric::EvidenceRecall),
        triple(Metric::UnsupportedClaimRate),
        triple(Metric::ContextTokens),
        mean(Metric::OutputTokens),
        mean(Metric::BilledCostUsd),
        triple(Metric::LatencyMs),
    );
    if pricing {
        let _ = write!(out, " {} |", optional_cost(group.projected_cost_usd));
    }
    out.push('\n');
}

fn summary_table(out: &mut String, groups: &[GroupSummary], detailed: bool, pricing: bool) {
    out.push_str("| condition ");
    if detailed {
        out.push_str("| workload | budget | model ");
    }
    out.push_str(
        "| n | successes | errors | task_score mean / median / p90 | evidence_recall mean / median / p90 | unsupported_claim_rate mean / median / p90 | context_tokens mean / median / p90 | output_tokens mean | billed_cost_usd mean | latency_ms mean / median / p90 |",
    );
    if pricing {
        out.push_str(" projected cost/trial (USD, projection) |");
    }
    out.push('\n');
    let columns = 11 + if detailed { 3 } else { 0 } + usize::from(pricing);
    out.push('|');
    for i in 0..columns {
        out.push_str(if i == 0 || (detailed && i <= 3) {
            "---|"
        } else {
            "---:|"
        });
    }
    out.push('\n');
    for group in groups {
        summary_row(out, group, detailed, pricing);
    }
}

fn comparison_section(out: &mut String, comparison: &Comparison, report: &Report) {
    let (c, b) = (
        md(&comparison.condition_label()),
        md(&comparison.baseline_label()),
    );
    let confidence = percent(report.settings.confidence);
    let _ = writeln!(
        out,
        "### {c} vs {b}: {} (n = {} tasks, {} pairs)\n",
        md(&comparison.scope()),
        comparison.tasks,
        comparison.pairs
    );
    if comparison.missing_baseline + comparison.missing_condition > 0 {
        let _ = writeln!(
            out,
            "Incomplete: {} (task, budget) unit(s) have {c} but no {b}, {} have {b} but no {c}; they are left out of this comparison.\n",
            comparison.missing_baseline, comparison.missing_condition
        );
    }
    if comparison.pairs == 0 {
        out.push_str("No complete pairs: nothing to compare.\n\n");
        return;
    }
    let _ = writeln!(
        out,
        "| metric | {b} mean | {c} mean | delta ({c} − {b}) | {confidence} CI | test | p | p (Holm) | significant |"
    );
    out.push_str("|---|---:|---:|---:|---|---|---:|---:|---|\n");
    for delta in &comparison.metrics {
        let metric = delta.metric;
        let (estimate, ci) = match delta.delta {
            Some(e) => (
                signed(metric, e.estimate),
                format!(
                    "[{}, {}]",
                    signed(metric, e.ci_low),
                    signed(metric, e.ci_high)
                ),
            ),
            None => ("-".into(), "-".into()),
        };
        let _ = writeln!(
            out,
            "| {metric} | {} | {} | {estimate} | {ci} | {} | {} | {} | {} |",
            delta
                .baseline_mean
                .map_or_else(|| "-".into(), |v| number(metric, v)),
            delta
                .condition_mean
                .map_or_else(|| "-".into(), |v| number(metric, v)),
            delta.test.test.label(),
            p_value(delta.test.p_value),
            p_value(delta.p_holm),
            if delta.significant { "yes" } else { "no" }
        );
    }
    out.push('\n');
    for (label, estimate) in [
        ("Context-token reduction", comparison.token_reduction),
        ("Billed-cost reduction", comparison.cost_reduction),
    ] {
        match estimate {
            Some(e) => {
                let _ = writeln!(
                    out,
                    "- {label}: {} ({confidence} CI {} to {}).",
                    percent(e.estimate),
                    percent(e.ci_low),
                    percent(e.ci_high)
                );
            }
            None => {
                let _ = writeln!(out, "- {label}: undefined ({b} total is zero).");
            }
        }
    }
    let not_significant: Vec<String> = comparison
        .metrics
        .iter()
        .filter(|d| !d.significant)
        .map(|d| format!("{} (Holm p = {})", d.metric, p_value(d.p_holm)))
        .collect();
    if !not_significant.is_empty() {
        let _ = writeln!(
            out,
            "- Not significant at α = {:.2} after Holm's correction: {}. These differences are not distinguishable from noise at this n.",
            1.0 - report.settings.confidence,
            not_significant.join(", ")
        );
    }
    let verdict = &comparison.verdict;
    let _ = writeln!(
        out,
        "\n**Verdict: {}** (tolerance {}).\n",
        if verdict.quality_preserving_context_win {
            "quality-preserving context win"
        } else {
            "not shown to be a quality-preserving context win"
        },
        report.settings.tolerance
    );
    for reason in &verdict.reasons {
        let _ = writeln!(out, "- {reason}");
    }
    out.push('\n');
}

/// `report.md`.
pub fn markdown(report: &Report) -> String {
    let mut out = String::from("# svc context-efficiency report\n\n");
    let inputs = &report.inputs;
    let settings = &report.settings;
    let _ = writeln!(
        out,
        "{} valid records from {} file(s); {} invalid record(s) excluded. {} tasks in {} (task, budget) units, {} complete. Bootstrap: seed {}, {} resamples, {} percentile intervals. Non-inferiority tolerance {}.\n",
        inputs.valid_records,
        inputs.files.len(),
        inputs.invalid_records,
        report.pairing.tasks,
        report.pairing.units,
        report.pairing.complete_units,
        settings.seed,
        settings.resamples,
        percent(settings.confidence),
        settings.tolerance
    );
    out.push_str("## Inputs\n\n| file | valid | invalid | budget |\n|---|---:|---:|---|\n");
    for file in &inputs.files {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            file.path,
            file.valid,
            file.invalid,
            budget(file.budget)
        );
    }
    out.push('\n');
    if inputs.invalid_records > 0 {
        out.push_str("### Excluded records\n\n");
        for invalid in &inputs.invalid {
            let _ = writeln!(
                out,
                "- `{}:{}`: {}",
                invalid.file, invalid.line, invalid.message
            );
        }
        let unlisted = inputs.invalid_records - inputs.invalid.len() as u64;
        if unlisted > 0 {
            let _ = writeln!(out, "- … and {unlisted} more (not listed).");
        }
        out.push('\n');
    }
    if inputs.mixed_schema_versions() {
        out.push_str("### Mixed schema versions\n\n");
        for (version, count) in &inputs.schema_versions {
            let _ = writeln!(out, "- `{version}`: {count} record(s)");
        }
        let _ = writeln!(
            out,
            "\nOnly `{}` records are valid; the others are excluded above.\n",
            crate::trial::record::SCHEMA_VERSION
        );
    }
    if inputs.valid_records == 0 {
        out.push_str("No valid records: there is nothing to summarise.\n");
        return out;
    }
    let pricing = report.pricing.is_some();
    out.push_str("## Per-condition summary\n\n");
    summary_table(&mut out, &report.conditions, false, pricing);
    out.push_str("\n## Per condition, workload, budget and model\n\n");
    summary_table(&mut out, &report.groups, true, pricing);
    out.push('\n');
    if let Some(info) = &report.pricing {
        out.push_str("### Cost projection\n\n");
        let _ = writeln!(
            out,
            "The projected cost column is a **projection** from the pricing snapshot `{}`{}, not a billed amount.",
            info.path,
            info.source
                .as_ref()
                .map(|s| format!(" ({s})"))
                .unwrap_or_default()
        );
        if info.zero_cost_records > 0 {
            let _ = writeln!(
                out,
                "{} record(s) carry zero-cost fixtures (`billed_cost_usd` = 0 by construction), so billed cost says nothing about price there; the projection is the only cost estimate.",
                info.zero_cost_records
            );
        }
        if !info.models_without_price.is_empty() {
            let _ = writeln!(
                out,
                "Models without a price in the snapshot (no projection): {}.",
                info.models_without_price.join(", ")
            );
        }
        out.push('\n');
    }
    if let Some(rows) = &report.cache_split {
        out.push_str(&super::cache_split::markdown(rows));
    }
    if let Some(runs) = &report.compared_runs {
        out.push_str("## Compared record sets\n\n");
        let _ = writeln!(
            out,
            "A = `{}` ({}), B = `{}` ({}). Each condition of B is compared with the same condition of A, paired by task, budget and replicate.\n",
            runs.a.label,
            runs.a.paths.join(", "),
            runs.b.label,
            runs.b.paths.join(", ")
        );
        if runs.differences.is_empty() {
            out.push_str("The run manifests do not differ (beyond ids and times).\n\n");
        } else {
            differences_table(&mut out, &runs.differences);
        }
    }
    out.push_str("## Paired comparisons\n\n");
    let pairing = &report.pairing;
    let _ = writeln!(
        out,
        "The task is the unit: pairs share the task (workload, version, task id, provider, model, scorer), the budget and the replicate; byte-identical replicates with equal scores are collapsed into one observation ({} record(s) collapsed), and `raw` recorded once per task (or identically per budget: {} task(s)) is paired with every budget. Error trials count as failures in every quality metric (task score and evidence recall 0, unsupported-claim rate 1) and the error rate is compared like the other metrics. Deltas are condition − baseline means over pairs with percentile intervals from a cluster bootstrap over tasks (one set of resamples of all tasks serves every comparison, so a task's budgets stay together). Tests take one value per task: exact McNemar when the metric is declared binary (the scorer's declared type; the error rate) and each task gives one pair, else Wilcoxon signed-rank (scipy's defaults) on per-task mean differences. **{} tests are made in this report; p-values are Holm-adjusted over all of them in two families** (latency, which is measured anew on every run, apart from the other metrics, so timing noise cannot move their adjusted p-values) and significance uses the adjusted value. The verdict requires task-score and evidence-recall CI lower bounds ≥ −tolerance, an unsupported-claim-rate CI upper bound ≤ tolerance and a context-token reduction CI lower bound > 0.\n",
        pairing.collapsed_replicates, pairing.shared_raw_tasks, pairing.tests
    );
    let files = plot_files(report);
    if !files.is_empty() {
        let _ = writeln!(out, "Plots: {}.\n", files.join(", "));
    }
    if report.comparisons.is_empty() {
        out.push_str(
            "No comparisons: the records hold no `raw` condition (or only one condition), so there are no plots either (they draw the comparisons).\n\n",
        );
    }
    for comparison in &report.comparisons {
        comparison_section(&mut out, comparison, report);
    }
    out.push_str("## Pareto frontier\n\n");
    let frontier: Vec<&str> = report.pareto_frontier.iter().map(|c| c.as_str()).collect();
    let _ = writeln!(
        out,
        "Not dominated on (task_score ↑, evidence_recall ↑, unsupported_claim_rate ↓, context_tokens ↓, billed_cost_usd ↓) by per-condition means: {}.\n",
        if frontier.is_empty() {
            "none".to_string()
        } else {
            frontier.join(", ")
        }
    );
    out.push_str("## Pairing completeness\n\n");
    let _ = writeln!(
        out,
        "{} tasks; {} of {} (task, budget) units have every condition; {} duplicate record(s) (same task, condition, budget and replicate) were not paired.",
        pairing.tasks, pairing.complete_units, pairing.units, pairing.duplicates
    );
    for (condition, missing) in &pairing.missing {
        if *missing > 0 {
            let _ = writeln!(out, "- {missing} unit(s) lack {condition}");
        }
    }
    for example in &pairing.incomplete_examples {
        let _ = writeln!(out, "- {}", md(example));
    }
    out.push('\n');
    if let Some(baseline) = &report.baseline_comparison {
        out.push_str("## Against the stored baseline summary\n\nPer-condition means (runs are not paired across summaries).\n\n| condition | metric | baseline | current | delta | relative |\n|---|---|---:|---:|---:|---:|\n");
        for row in &baseline.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                row.condition,
                row.metric,
                number(row.metric, row.baseline),
                number(row.metric, row.current),
                signed(row.metric, row.delta),
                row.relative
                    .map_or_else(|| "-".into(), |r| format!("{:+.1}%", r * 100.0))
            );
        }
        for condition in &baseline.missing_in_current {
            let _ = writeln!(out, "\n{condition} is in the baseline but not in this run.");
        }
        out.push('\n');
    }
    out
}

/// Ten decimals, trailing zeros trimmed: enough for any metric here, and immune to last-bit
/// differences in summation order between machines (golden files stay stable).
/// The table of manifest fields that differ. A value joined from several manifests holds " | ",
/// which is escaped so the table keeps three columns.
fn differences_table(out: &mut String, differences: &[super::compare::ManifestDifference]) {
    let cell = |value: Option<&str>| md(value.unwrap_or("(absent)"));
    out.push_str("What differs in the run manifests:\n\n| field | A | B |\n|---|---|---|\n");
    for d in differences {
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            cell(Some(&d.field)),
            cell(d.a.as_deref()),
            cell(d.b.as_deref())
        );
    }
    out.push('\n');
}

fn csv_number(value: Option<f64>) -> String {
    match value {
        Some(v) if v.is_finite() => {
            let text = format!("{v:.10}");
            let text = text.trim_end_matches('0').trim_end_matches('.');
            if text == "-0" {
                "0".into()
            } else {
                text.into()
            }
        }
        _ => String::new(),
    }
}

fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// `summary.csv`: one row per condition (scope `condition`) and per group (scope `group`).
pub fn summary_csv(report: &Report) -> String {
    let mut out = String::from("scope,condition,workload,budget,model,n,successes,errors");
    for metric in Metric::ALL {
        let _ = write!(out, ",{metric}_mean,{metric}_median,{metric}_p90");
    }
    out.push_str(",projected_cost_usd_mean\n");
    let scoped = report
        .conditions
        .iter()
        .map(|g| ("condition", g))
        .chain(report.groups.iter().map(|g| ("group", g)));
    for (scope, group) in scoped {
        let _ = write!(
            out,
            "{scope},{},{},{},{},{},{},{}",
            group.condition,
            csv_field(group.workload.as_deref().unwrap_or("")),
            group.budget.map(|b| b.to_string()).unwrap_or_default(),
            csv_field(group.model.as_deref().unwrap_or("")),
            group.n,
            group.successes,
            group.errors
        );
        for metric in Metric::ALL {
            let d = group.metrics.get(&metric);
            let _ = write!(
                out,
                ",{},{},{}",
                csv_number(d.map(|d| d.mean)),
                csv_number(d.map(|d| d.median)),
                csv_number(d.map(|d| d.p90))
            );
        }
        let _ = writeln!(out, ",{}", csv_number(group.projected_cost_usd));
    }
    out
}

/// `comparisons.csv`: one row per comparison and metric, plus the reduction rows.
pub fn comparisons_csv(report: &Report) -> String {
    let mut out = String::from(
        "condition,baseline,condition_run,baseline_run,workload,budget,model,tasks,pairs,statistic,estimate,ci_low,ci_high,test,test_statistic,p_value,p_holm,significant,quality_preserving_context_win\n",
    );
    for comparison in &report.comparisons {
        let optional = |v: Option<&str>| v.map(csv_field).unwrap_or_default();
        let prefix = format!(
            "{},{},{},{},{},{},{},{},{}",
            comparison.condition,
            comparison.baseline,
            optional(comparison.condition_run.as_deref()),
            optional(comparison.baseline_run.as_deref()),
            optional(comparison.workload.as_deref()),
            comparison.budget.map(|b| b.to_string()).unwrap_or_default(),
            optional(comparison.model.as_deref()),
            comparison.tasks,
            comparison.pairs
        );
        let win = comparison.verdict.quality_preserving_context_win;
        for delta in &comparison.metrics {
            let test = delta.test.test.as_str();
            let _ = writeln!(
                out,
                "{prefix},{}_delta,{},{},{},{test},{},{},{},{},{win}",
                delta.metric,
                csv_number(delta.delta.map(|e| e.estimate)),
                csv_number(delta.delta.map(|e| e.ci_low)),
                csv_number(delta.delta.map(|e| e.ci_high)),
                csv_number(Some(delta.test.statistic)),
                csv_number(Some(delta.test.p_value)),
                csv_number(Some(delta.p_holm)),
                delta.significant
            );
        }
        for (name, estimate) in [
            ("context_tokens_reduction", comparison.token_reduction),
            ("billed_cost_usd_reduction", comparison.cost_reduction),
        ] {
            let _ = writeln!(
                out,
                "{prefix},{name},{},{},{},,,,,,{win}",
                csv_number(estimate.map(|e| e.estimate)),
                csv_number(estimate.map(|e| e.ci_low)),
                csv_number(estimate.map(|e| e.ci_high))
            );
        }
    }
    out
}

/// Workloads with comparisons, in order of first appearance.
fn plotted_workloads(report: &Report) -> Vec<Option<String>> {
    let stratified = report.comparisons.iter().any(|c| !c.pooled());
    let mut out: Vec<Option<String>> = Vec::new();
    if stratified {
        for c in report.comparisons.iter().filter(|c| !c.pooled()) {
            if !out.contains(&c.workload) {
                out.push(c.workload.clone());
            }
        }
    } else if !report.comparisons.is_empty() {
        // One stratum: the pooled comparisons are that workload's.
        let workloads: Vec<&String> = report
            .groups
            .iter()
            .filter_map(|g| g.workload.as_ref())
            .collect();
        out.push(workloads.first().map(|w| (*w).clone()));
    }
    out
}

fn file_stem(workload: &Option<String>) -> String {
    let name = workload.as_deref().unwrap_or("all");
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Budgets of a workload's groups (specific budgets only).
fn workload_budgets(report: &Report, workload: &Option<String>) -> Vec<u64> {
    let mut budgets: Vec<u64> = report
        .groups
        .iter()
        .filter(|g| &g.workload == workload)
        .filter_map(|g| g.budget)
        .collect();
    budgets.sort_unstable();
    budgets.dedup();
    budgets
}

/// The plot files [`plots`] writes, by name.
pub fn plot_files(report: &Report) -> Vec<String> {
    let mut out = Vec::new();
    for workload in plotted_workloads(report) {
        let stem = file_stem(&workload);
        out.push(format!("{QUALITY_COST_PREFIX}{stem}.svg"));
        if workload_budgets(report, &workload).len() > 1 {
            out.push(format!("{BUDGET_CURVES_PREFIX}{stem}.svg"));
        }
    }
    out
}

/// Every plot as (file name, SVG): per workload the quality–cost plane, and budget curves when
/// the workload ran at several budgets.
pub fn plots(report: &Report) -> Result<Vec<(String, String)>, ReportError> {
    let mut out = Vec::new();
    let stratified = report.comparisons.iter().any(|c| !c.pooled());
    let several_budgets = |w: &Option<String>| workload_budgets(report, w).len() > 1;
    for workload in plotted_workloads(report) {
        let stem = file_stem(&workload);
        let name = workload.as_deref().unwrap_or("all workloads");
        let mut series: Vec<String> = Vec::new();
        let points: Vec<PlanePoint> = report
            .comparisons
            .iter()
            .filter(|c| {
                if stratified {
                    c.workload == workload
                } else {
                    true
                }
            })
            .map(|c| {
                let label = format!("{} vs {}", c.condition_label(), c.baseline_label());
                let index = match series.iter().position(|s| *s == label) {
                    Some(index) => index,
                    None => {
                        series.push(label);
                        series.len() - 1
                    }
                };
                let tag = match c.budget {
                    Some(b) if several_budgets(&workload) => b.to_string(),
                    _ => String::new(),
                };
                let triple = |e: Option<super::Estimate>| {
                    e.map_or((f64::NAN, f64::NAN, f64::NAN), |e| {
                        (e.estimate, e.ci_low, e.ci_high)
                    })
                };
                PlanePoint {
                    series: index,
                    tag,
                    x: triple(c.token_reduction),
                    y: triple(c.metric(Metric::TaskScore).and_then(|m| m.delta)),
                }
            })
            .collect();
        let title = format!(
            "{name}: quality vs context cost ({} CI)",
            percent(report.settings.confidence)
        );
        out.push((
            format!("{QUALITY_COST_PREFIX}{stem}.svg"),
            svg::quality_cost(&title, report.settings.tolerance, &series, &points)?,
        ));
        let budgets = workload_budgets(report, &workload);
        if budgets.len() > 1 {
            let curves = |metric: Metric| -> Vec<Curve> {
                let mut labels: Vec<(Option<String>, super::Condition)> = Vec::new();
                for g in report.groups.iter().filter(|g| g.workload == workload) {
                    if !labels.contains(&(g.run.clone(), g.condition)) {
                        labels.push((g.run.clone(), g.condition));
                    }
                }
                labels
                    .into_iter()
                    .map(|(run, condition)| {
                        let groups: Vec<&GroupSummary> = report
                            .groups
                            .iter()
                            .filter(|g| {
                                g.workload == workload && g.run == run && g.condition == condition
                            })
                            .collect();
                        // A budget-free group (raw recorded once) holds at every budget.
                        let points = budgets
                            .iter()
                            .filter_map(|&b| {
                                let g = groups
                                    .iter()
                                    .find(|g| g.budget == Some(b))
                                    .or_else(|| groups.iter().find(|g| g.budget.is_none()))?;
                                Some((b as f64, g.mean(metric)?))
                            })
                            .collect();
                        Curve {
                            label: match &run {
                                Some(run) => format!("{condition} [{run}]"),
                                None => condition.to_string(),
                            },
                            points,
                        }
                    })
                    .collect()
            };
            out.push((
                format!("{BUDGET_CURVES_PREFIX}{stem}.svg"),
                svg::budget_curves(
                    &format!("{name}: quality vs budget (means)"),
                    &curves(Metric::TaskScore),
                    &curves(Metric::EvidenceRecall),
                )?,
            ));
        }
    }
    Ok(out)
}

/// A compact comparison table for the terminal.
pub fn comparison_table(report: &Report) -> String {
    let mut rows: Vec<[String; 8]> = vec![[
        "condition".into(),
        "vs".into(),
        "scope".into(),
        "tasks".into(),
        "Δ task_score [CI]".into(),
        "Δ evidence_recall [CI]".into(),
        "token reduction [CI]".into(),
        "verdict".into(),
    ]];
    let delta = |c: &Comparison, metric: Metric| {
        c.metric(metric).and_then(|d| d.delta).map_or_else(
            || "-".into(),
            |e| {
                format!(
                    "{} [{}, {}]",
                    signed(metric, e.estimate),
                    signed(metric, e.ci_low),
                    signed(metric, e.ci_high)
                )
            },
        )
    };
    for c in &report.comparisons {
        rows.push([
            c.condition_label(),
            c.baseline_label(),
            if c.pooled() { "all".into() } else { c.scope() },
            c.tasks.to_string(),
            delta(c, Metric::TaskScore),
            delta(c, Metric::EvidenceRecall),
            c.token_reduction.map_or_else(
                || "-".into(),
                |e| {
                    format!(
                        "{} [{}, {}]",
                        percent(e.estimate),
                        percent(e.ci_low),
                        percent(e.ci_high)
                    )
                },
            ),
            if c.verdict.quality_preserving_context_win {
                "quality-preserving win".into()
            } else {
                "win not shown".into()
            },
        ]);
    }
    let mut out = if report.comparisons.is_empty() {
        "(no paired comparisons: they pair each condition with raw, which these records lack)\n"
            .to_string()
    } else {
        aligned(&rows)
    };
    if let Some(baseline) = &report.baseline_comparison {
        out.push_str("\nAgainst the stored baseline summary (per-condition means; runs are not paired across summaries):\n");
        let mut rows = vec![
            [
                "condition",
                "metric",
                "baseline",
                "current",
                "delta",
                "relative",
            ]
            .map(String::from),
        ];
        for row in &baseline.rows {
            rows.push([
                row.condition.to_string(),
                row.metric.to_string(),
                number(row.metric, row.baseline),
                number(row.metric, row.current),
                signed(row.metric, row.delta),
                row.relative
                    .map_or_else(|| "-".into(), |r| format!("{:+.1}%", r * 100.0)),
            ]);
        }
        out.push_str(&aligned(&rows));
        for condition in &baseline.missing_in_current {
            let _ = writeln!(out, "{condition} is in the baseline but not in this run.");
        }
    }
    out
}

/// Rows as left-aligned columns two spaces apart.
fn aligned<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell}{}", " ".repeat(w - cell.chars().count())))
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{PricingSnapshot, ReportOptions, build_report, generate};
    use crate::trial::record::CostSource;

    fn fixture_report() -> Report {
        let options = ReportOptions {
            resamples: 200,
            ..ReportOptions::default()
        };
        build_report(&["fixtures/report/paired.jsonl".into()], &options).expect("report")
    }

    /// Found by probing: a `|` in a workload name shifted every column of its row, and a line
    /// break split the row.
    #[test]
    fn record_text_in_markdown_tables_is_escaped() {
        let mut report = fixture_report();
        for group in &mut report.groups {
            group.workload = Some("qa|pipe\nnext".into());
        }
        let markdown = markdown(&report);
        assert!(markdown.contains("| qa\\|pipe next |"), "{markdown}");
        assert!(!markdown.contains("qa|pipe"));
        // Found by probing: HTML in a record reached report.md as HTML.
        for group in &mut report.groups {
            group.model = Some("<img src=x onerror=alert(1)>&".into());
        }
        let markdown = super::markdown(&report);
        assert!(
            markdown.contains("&lt;img src=x onerror=alert(1)&gt;&amp;"),
            "{markdown}"
        );
        assert!(!markdown.contains("<img"), "{markdown}");
    }

    #[test]
    fn plots_show_one_labelled_point_per_comparison_and_are_byte_stable() {
        use crate::report::svg::tests::{assert_well_formed, texts};
        let report = fixture_report();
        let plots = plots(&report).expect("plots");
        let names: Vec<&str> = plots.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, plot_files(&report));
        // The fixture has two workloads at one budget: one plane each (workloads in sorted
        // order, whatever order the records came in), no budget curves.
        assert_eq!(
            names,
            vec![
                "quality-cost-code-needle.svg",
                "quality-cost-qa-distractor.svg"
            ]
        );
        for (name, svg) in &plots {
            assert_well_formed(svg);
            let workload = name
                .trim_start_matches(QUALITY_COST_PREFIX)
                .trim_end_matches(".svg");
            let labels = texts(svg);
            let mut count = 0;
            for c in report
                .comparisons
                .iter()
                .filter(|c| c.workload.as_deref() == Some(workload))
            {
                count += 1;
                let label = format!("{} vs {}", c.condition, c.baseline);
                assert!(labels.contains(&label), "{name}: {label} in {labels:?}");
            }
            assert_eq!(count, 3, "{name}");
        }
        assert_eq!(plots, super::plots(&fixture_report()).expect("again"));
    }

    #[test]
    fn zero_cost_fixtures_make_the_projection_the_only_cost_estimate() {
        let dir = tempfile::tempdir().expect("tempdir");
        let records = dir.path().join("zero.jsonl");
        let text: String = generate::records(40, 2)
            .map(|mut r| {
                r.cost_source = CostSource::ZeroCostFixture;
                r.billed_cost_usd = 0.0;
                serde_json::to_string(&r).expect("serialise") + "\n"
            })
            .collect();
        std::fs::write(&records, text).expect("write");
        let pricing_path = dir.path().join("pricing.json");
        std::fs::write(
            &pricing_path,
            r#"{"models":{"other-model":{"input_per_mtok":1,"output_per_mtok":2}}}"#,
        )
        .expect("write");
        let options = ReportOptions {
            resamples: 50,
            pricing: Some((
                PricingSnapshot::load(&pricing_path).expect("pricing"),
                pricing_path.clone(),
            )),
            ..ReportOptions::default()
        };
        let report = build_report(&[records], &options).expect("report");
        let markdown = markdown(&report);
        assert!(
            markdown.contains("40 record(s) carry zero-cost fixtures"),
            "{markdown}"
        );
        assert!(
            markdown.contains(
                "Models without a price in the snapshot (no projection): synthetic-large."
            )
        );
        // Zero billed cost everywhere: the cost reduction is undefined, not 0 % or NaN.
        assert!(markdown.contains("Billed-cost reduction: undefined (raw total is zero)."));
        assert!(
            report
                .conditions
                .iter()
                .all(|g| g.projected_cost_usd.is_none())
        );
        let table = comparison_table(&report);
        // Header, three pooled comparisons, three per workload (two workloads).
        assert_eq!(table.lines().count(), 10, "{table}");
    }

    #[test]
    fn joined_manifest_values_keep_the_differences_table_three_columns() {
        // Regression: values of several manifests are joined with " | ", which split the cell.
        let mut out = String::new();
        differences_table(
            &mut out,
            &[crate::report::compare::ManifestDifference {
                field: "git_commit".into(),
                a: Some("abc | def".into()),
                b: None,
            }],
        );
        let row = out
            .lines()
            .find(|l| l.starts_with("| git_commit"))
            .expect("row");
        assert_eq!(row, "| git_commit | abc \\| def | (absent) |");
        let unescaped = row.replace("\\|", "");
        assert_eq!(unescaped.matches('|').count(), 4, "{row}");
    }
}
