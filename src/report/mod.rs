//! Reports over trial records: aggregation (polars), paired statistics, human and machine
//! outputs, and regression gates against a stored summary.
//!
//! Entry points: [`build_report`] turns record files into a [`Report`] (which is also the
//! `summary.json` document, schema `schemas/report-summary.v2.json`); [`render::write_all`]
//! writes `report.md`, `summary.csv`, `summary.json` and the SVG plots;
//! [`build_runs_report`] pairs two record sets (`--compare-runs`); [`compare_summaries`] and
//! [`gate::evaluate`] compare a report with a stored baseline.

pub mod aggregate;
pub mod cache_split;
pub mod cluster;
pub mod compare;
pub mod gate;
pub mod generate;
pub mod input;
pub mod paired;
pub mod pricing;
pub mod render;
pub mod stats;
mod svg;
pub mod task_scores;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use aggregate::{Descriptive, GroupSummary};
pub use input::{FileSummary, InvalidRecord};
pub use paired::{Comparison, MetricDelta, PairingReport, Verdict};
pub use pricing::{PricingInfo, PricingSnapshot};
pub use stats::{Estimate, TestKind, TestResult};

use crate::trial::record::Condition;
use crate::trial::validate::SchemaError;

/// `schema_version` of `summary.json`.
pub const SUMMARY_SCHEMA_VERSION: &str = "svc.report-summary.v2";
/// The published summary schema (JSON Schema draft 2020-12).
pub const SUMMARY_SCHEMA_JSON: &str = include_str!("../../schemas/report-summary.v2.json");

/// The per-trial numbers a report summarises, in a fixed order.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum Metric {
    TaskScore,
    EvidenceRecall,
    UnsupportedClaimRate,
    /// 1 for an `outcome: error` trial, else 0 (not a record field; derived from `outcome`).
    ErrorRate,
    ContextTokens,
    OutputTokens,
    BilledCostUsd,
    LatencyMs,
}

impl Metric {
    pub const COUNT: usize = 8;
    pub const ALL: [Metric; Metric::COUNT] = [
        Metric::TaskScore,
        Metric::EvidenceRecall,
        Metric::UnsupportedClaimRate,
        Metric::ErrorRate,
        Metric::ContextTokens,
        Metric::OutputTokens,
        Metric::BilledCostUsd,
        Metric::LatencyMs,
    ];

    pub fn index(self) -> usize {
        self as usize
    }

    /// Whether the metric's values are 0/1 by construction; the task score's type is the
    /// scorer's declared type instead ([`crate::harness::scorer::declared_score_type`]).
    pub fn binary(self) -> bool {
        self == Metric::ErrorRate
    }

    /// The record field name (`error_rate` is derived from `outcome`).
    pub fn as_str(self) -> &'static str {
        match self {
            Metric::TaskScore => "task_score",
            Metric::EvidenceRecall => "evidence_recall",
            Metric::UnsupportedClaimRate => "unsupported_claim_rate",
            Metric::ErrorRate => "error_rate",
            Metric::ContextTokens => "context_tokens",
            Metric::OutputTokens => "output_tokens",
            Metric::BilledCostUsd => "billed_cost_usd",
            Metric::LatencyMs => "latency_ms",
        }
    }
}

impl std::fmt::Display for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Settings of one report; [`Default`] is the single place defaults are decided.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// Seed of the bootstrap's generator.
    pub seed: u64,
    /// Bootstrap resamples.
    pub resamples: usize,
    /// Confidence level of the intervals; 1 − confidence is the significance level.
    pub confidence: f64,
    /// Non-inferiority margin for quality, recall and unsupported rate (absolute).
    pub tolerance: f64,
    /// A condition to compare every other condition with, besides `raw`.
    pub baseline_condition: Option<Condition>,
    /// Pricing snapshot for the projected-cost column, and the file it came from.
    pub pricing: Option<(PricingSnapshot, PathBuf)>,
    /// Keep per-task scores in the report (the gate's baseline needs them; large for big runs).
    pub task_scores: bool,
}

impl Default for ReportOptions {
    fn default() -> Self {
        Self {
            seed: 42,
            resamples: 2000,
            confidence: 0.95,
            tolerance: 0.02,
            baseline_condition: None,
            pricing: None,
            task_scores: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("no inputs: pass record files or run directories")]
    NoInputs,
    /// The cause is in the message and not a `source`: `{:#}` would print it twice.
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parquet { path: PathBuf, message: String },
    #[error("{path}: no *.jsonl or *.parquet record files in this directory")]
    NoRecordFiles { path: PathBuf },
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error("aggregation failed: {message}")]
    Polars { message: String },
    #[error("pricing snapshot {path}: {message}")]
    Pricing { path: PathBuf, message: String },
    #[error("summary {path}: {message}")]
    Summary { path: PathBuf, message: String },
    #[error("gate thresholds {path}: {message}")]
    Thresholds { path: PathBuf, message: String },
    #[error("options: {0}")]
    Options(String),
    /// Two summaries of different trials (workloads, budgets or models).
    #[error("{0}")]
    NotComparable(String),
    #[error("writing {path}: {message}")]
    Write { path: PathBuf, message: String },
    #[error("drawing the plot \"{plot}\": {message}")]
    Plot { plot: String, message: String },
}

/// The settings a report was computed with, stated in every output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReportSettings {
    pub seed: u64,
    pub resamples: usize,
    pub confidence: f64,
    pub tolerance: f64,
    pub baseline_condition: Option<Condition>,
}

/// What was read and what was left out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputReport {
    pub files: Vec<FileSummary>,
    pub valid_records: u64,
    pub invalid_records: u64,
    /// The first invalid records, with file and line (at most [`input::INVALID_LISTED_MAX`]).
    pub invalid: Vec<InvalidRecord>,
    /// Records per `schema_version` (invalid records included when they carry one).
    pub schema_versions: BTreeMap<String, u64>,
    pub zero_cost_records: u64,
}

impl InputReport {
    pub fn mixed_schema_versions(&self) -> bool {
        self.schema_versions.len() > 1
    }
}

/// A report: what `summary.json` holds and what the other outputs render.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub schema_version: String,
    pub settings: ReportSettings,
    pub inputs: InputReport,
    /// Per condition, all workloads, budgets and models pooled.
    pub conditions: Vec<GroupSummary>,
    /// Per condition × workload × budget × model.
    pub groups: Vec<GroupSummary>,
    pub pairing: PairingReport,
    pub comparisons: Vec<Comparison>,
    /// Conditions not dominated on (task_score ↑, evidence_recall ↑, unsupported_claim_rate ↓,
    /// context_tokens ↓, billed_cost_usd ↓), using per-condition means.
    pub pareto_frontier: Vec<Condition>,
    pub pricing: Option<PricingInfo>,
    /// Set by callers that compare with a stored summary (`svc report --baseline`).
    #[serde(default)]
    pub baseline_comparison: Option<SummaryComparison>,
    /// `--compare-runs A B`: the two record sets and what differs in their manifests.
    #[serde(default)]
    pub compared_runs: Option<compare::RunsCompared>,
    /// Per-task scores per (workload, version, budget, model, condition), when asked for
    /// (`svc gate --update-baseline` stores them so the gate can pair tasks).
    #[serde(default)]
    pub task_scores: Option<task_scores::TaskScoreTable>,
    /// Latency and cost per condition split by provider cache state, when a run recorded
    /// cached-token usage (`cache_usage` notes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_split: Option<Vec<cache_split::CacheSplitRow>>,
}

impl Report {
    pub fn condition(&self, condition: Condition) -> Option<&GroupSummary> {
        self.conditions.iter().find(|g| g.condition == condition)
    }

    /// Reads a `summary.json` written by [`render::write_all`].
    pub fn load_summary(path: &Path) -> Result<Report, ReportError> {
        let error = |message: String| ReportError::Summary {
            path: path.to_path_buf(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
        let report: Report = serde_json::from_str(crate::text::without_bom(&text))
            .map_err(|e| error(e.to_string()))?;
        if report.schema_version != SUMMARY_SCHEMA_VERSION {
            return Err(error(format!(
                "schema_version is {:?}, expected {SUMMARY_SCHEMA_VERSION:?}",
                report.schema_version
            )));
        }
        if let Some(table) = &report.task_scores {
            table.check().map_err(error)?;
        }
        Ok(report)
    }
}

/// Whether `options` can make a report (resamples, confidence, tolerance in range), before
/// any record is read.
pub fn check_options(options: &ReportOptions) -> Result<(), ReportError> {
    if options.resamples == 0 {
        return Err(ReportError::Options("resamples must be >= 1".into()));
    }
    if !(options.confidence > 0.0 && options.confidence < 1.0) {
        return Err(ReportError::Options(
            "confidence must be between 0 and 1".into(),
        ));
    }
    // A percentile interval needs a draw in each tail: with fewer, it is the extreme draws (or
    // one draw), and can leave out its own estimate (found by probing at 1 and 3 resamples).
    let least = (2.0 / (1.0 - options.confidence) - 1e-9).ceil() as usize;
    if options.resamples < least {
        return Err(ReportError::Options(format!(
            "resamples must be at least {least} at confidence {} (each tail of a percentile interval needs a draw), got {}",
            options.confidence, options.resamples
        )));
    }
    // Scores are in [0, 1]: a tolerance above 1 would call any loss non-inferior.
    if !(0.0..=1.0).contains(&options.tolerance) {
        return Err(ReportError::Options(
            "tolerance must be from 0 to 1 (scores are in [0, 1])".into(),
        ));
    }
    Ok(())
}

/// Reads, validates, aggregates and compares the records of `inputs` (files, run directories or
/// folders of shards).
pub fn build_report(inputs: &[PathBuf], options: &ReportOptions) -> Result<Report, ReportError> {
    check_options(options)?;
    let files = input::resolve_inputs(inputs)?;
    let dataset = input::load(&files)?;
    let present = paired::present_conditions(&dataset);
    let plan: Vec<_> = paired::comparison_plan(&present, options.baseline_condition)
        .into_iter()
        .map(|(c, b)| {
            (
                cluster::Arm {
                    side: 0,
                    condition: c,
                },
                cluster::Arm {
                    side: 0,
                    condition: b,
                },
            )
        })
        .collect();
    let mut report = assemble(&dataset, &plan, &[], options)?;
    report.cache_split = cache_split::split(&files);
    Ok(report)
}

/// `--compare-runs A B`: the records of `b` paired with those of `a` by task, condition, budget
/// and replicate; each condition of `b` is compared with the same condition of `a`.
pub fn build_runs_report(
    a: &[PathBuf],
    b: &[PathBuf],
    options: &ReportOptions,
) -> Result<Report, ReportError> {
    check_options(options)?;
    let sets = [input::resolve_inputs(a)?, input::resolve_inputs(b)?];
    let dataset = input::load_sets(&sets)?;
    let mut compared = compare::runs_compared(a, b, &compare::labels(a, b));
    compare::name_selectors(&mut compared);
    let labels = [compared.a.label.clone(), compared.b.label.clone()];
    let plan = paired::compare_runs_plan(&paired::present_arms(&dataset));
    let mut report = assemble(&dataset, &plan, &labels, options)?;
    report.compared_runs = Some(compared);
    Ok(report)
}

fn assemble(
    dataset: &input::Dataset,
    plan: &[(cluster::Arm, cluster::Arm)],
    labels: &[String],
    options: &ReportOptions,
) -> Result<Report, ReportError> {
    let pricing = options.pricing.as_ref().map(|(snapshot, _)| snapshot);
    let (conditions, groups) = aggregate::summarise(dataset, pricing, labels)?;
    let clustered = cluster::cluster(dataset);
    let comparisons = paired::compare_all(dataset, &clustered, plan, labels, options);
    let mut pairing = paired::pairing_report(dataset, &clustered);
    pairing.tests = comparisons.iter().map(|c| c.metrics.len() as u64).sum();
    let pareto_frontier = if labels.is_empty() {
        pareto(&conditions)
    } else {
        Vec::new()
    };
    let task_scores = options
        .task_scores
        .then(|| task_scores::table(dataset, &clustered));
    let pricing = options
        .pricing
        .as_ref()
        .map(|(snapshot, path)| PricingInfo {
            source: snapshot.source.clone(),
            path: path.to_string_lossy().to_string(),
            zero_cost_records: dataset.zero_cost_records,
            models_without_price: dataset
                .models
                .iter()
                .filter(|m| snapshot.price(m).is_none())
                .cloned()
                .collect(),
        });
    Ok(Report {
        schema_version: SUMMARY_SCHEMA_VERSION.into(),
        settings: ReportSettings {
            seed: options.seed,
            resamples: options.resamples,
            confidence: options.confidence,
            tolerance: options.tolerance,
            baseline_condition: options.baseline_condition,
        },
        inputs: InputReport {
            valid_records: dataset.rows.len() as u64,
            invalid_records: dataset.invalid_count,
            invalid: dataset.invalid.clone(),
            schema_versions: dataset.schema_versions.clone(),
            zero_cost_records: dataset.zero_cost_records,
            files: dataset.files.clone(),
        },
        pairing,
        conditions,
        groups,
        comparisons,
        pareto_frontier,
        pricing,
        baseline_comparison: None,
        compared_runs: None,
        task_scores,
        cache_split: None,
    })
}

fn pareto(conditions: &[GroupSummary]) -> Vec<Condition> {
    use stats::Direction::{Maximise, Minimise};
    let objectives = [
        (Metric::TaskScore, Maximise),
        (Metric::EvidenceRecall, Maximise),
        (Metric::UnsupportedClaimRate, Minimise),
        (Metric::ContextTokens, Minimise),
        (Metric::BilledCostUsd, Minimise),
    ];
    let points: Vec<Vec<f64>> = conditions
        .iter()
        .map(|g| {
            objectives
                .iter()
                .map(|(m, _)| g.mean(*m).unwrap_or(f64::NAN))
                .collect()
        })
        .collect();
    let directions: Vec<_> = objectives.iter().map(|(_, d)| *d).collect();
    stats::pareto_frontier(&points, &directions)
        .into_iter()
        .map(|i| conditions[i].condition)
        .collect()
}

/// One condition-level metric, now and in the baseline summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryDelta {
    pub condition: Condition,
    pub metric: Metric,
    pub baseline: f64,
    pub current: f64,
    /// current − baseline.
    pub delta: f64,
    /// delta / baseline; `None` when the baseline is zero.
    pub relative: Option<f64>,
}

/// A report's per-condition means next to a stored summary's. Runs are not paired across
/// summaries, so this compares means, not paired deltas.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SummaryComparison {
    pub rows: Vec<SummaryDelta>,
    /// Conditions in the baseline that the current report lacks, and the reverse.
    pub missing_in_current: Vec<Condition>,
    pub missing_in_baseline: Vec<Condition>,
}

impl SummaryComparison {
    pub fn get(&self, condition: Condition, metric: Metric) -> Option<&SummaryDelta> {
        self.rows
            .iter()
            .find(|r| r.condition == condition && r.metric == metric)
    }
}

/// Compares per-condition means of `current` with those of `baseline`.
pub fn compare_summaries(
    current: &Report,
    baseline: &Report,
) -> Result<SummaryComparison, ReportError> {
    // Per-condition means are only comparable over the same trials' kind: a baseline of
    // another workload, budget or model would give a confident, meaningless delta.
    // Only over the conditions both have: `svc benchmark --compare-baseline FILE` runs `svc`
    // and `combined` alone, and a stored summary's `raw` units (of no single budget) would
    // otherwise make every full baseline "another scope".
    let shared: std::collections::BTreeSet<Condition> = current
        .conditions
        .iter()
        .map(|g| g.condition)
        .filter(|c| baseline.condition(*c).is_some())
        .collect();
    let (now_scope, base_scope) = (scope(current, &shared), scope(baseline, &shared));
    if now_scope != base_scope {
        return Err(ReportError::NotComparable(format!(
            "the stored summary covers {}, this report {}: compare summaries of the same workloads, budgets and models (or gate per unit with `svc gate`)",
            describe_scope(&base_scope),
            describe_scope(&now_scope)
        )));
    }
    let mut rows = Vec::new();
    let mut missing_in_current = Vec::new();
    for base in &baseline.conditions {
        let Some(now) = current.condition(base.condition) else {
            missing_in_current.push(base.condition);
            continue;
        };
        for metric in Metric::ALL {
            if let (Some(b), Some(c)) = (base.mean(metric), now.mean(metric)) {
                let delta = c - b;
                rows.push(SummaryDelta {
                    condition: base.condition,
                    metric,
                    baseline: b,
                    current: c,
                    delta,
                    relative: (b != 0.0).then(|| delta / b),
                });
            }
        }
    }
    let missing_in_baseline = current
        .conditions
        .iter()
        .map(|g| g.condition)
        .filter(|c| baseline.condition(*c).is_none())
        .collect();
    Ok(SummaryComparison {
        rows,
        missing_in_current,
        missing_in_baseline,
    })
}

/// What a report's trials were: each (workload, budget, model) its groups name.
type Scope = std::collections::BTreeSet<(Option<String>, Option<u64>, Option<String>)>;

fn scope(report: &Report, conditions: &std::collections::BTreeSet<Condition>) -> Scope {
    report
        .groups
        .iter()
        .filter(|g| conditions.contains(&g.condition))
        .map(|g| (g.workload.clone(), g.budget, g.model.clone()))
        .collect()
}

fn describe_scope(scope: &Scope) -> String {
    let parts: Vec<String> = scope
        .iter()
        .map(|(workload, budget, model)| {
            format!(
                "{} at budget {} with {}",
                workload.as_deref().unwrap_or("(no workload)"),
                budget.map_or("any".to_string(), |b| b.to_string()),
                model.as_deref().unwrap_or("(no model)")
            )
        })
        .collect();
    if parts.is_empty() {
        "no trials".to_string()
    } else {
        parts.join("; ")
    }
}

/// The `svc bench` figure for reports: aggregate + paired statistics over `records` generated
/// records (written to `dir` first; generation is not timed), with default options.
pub fn bench_figure(records: usize, dir: &Path) -> Result<crate::bench::Figure, ReportError> {
    let path = dir.join("report-bench.jsonl");
    let io_error = |source| ReportError::Io {
        path: path.clone(),
        error: source,
    };
    let file = std::fs::File::create(&path).map_err(io_error)?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    generate::write_records(&mut out, records, 1).map_err(io_error)?;
    drop(out);
    let bytes = std::fs::metadata(&path).map_err(io_error)?.len();
    let options = ReportOptions::default();
    let start = std::time::Instant::now();
    let report = build_report(std::slice::from_ref(&path), &options)?;
    let seconds = start.elapsed().as_secs_f64();
    Ok(crate::bench::Figure {
        name: "report (aggregate + paired stats)".into(),
        value: seconds,
        unit: "s".into(),
        target: Some("<= 10 for 1,000,000 records".into()),
        detail: format!(
            "{} records ({:.0} MB JSONL), {} comparisons, {} resamples, {} threads",
            report.inputs.valid_records,
            bytes as f64 / 1e6,
            report.comparisons.len(),
            options.resamples,
            rayon::current_num_threads()
        ),
    })
}
