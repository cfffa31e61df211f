//! Per-group descriptive statistics with polars (the only polars user in svc).
//!
//! Records arrive already validated from [`super::input`] (polars' own NDJSON reader would skip
//! our validation and the streaming scan is not built, see BUILD.md); they are turned into one
//! DataFrame of columns, then grouped lazily: per condition, and per condition × workload ×
//! budget × model. Quantiles use linear interpolation, as numpy's default does.

use std::collections::BTreeMap;

use polars::prelude::*;
use serde::{Deserialize, Serialize};

use super::input::Dataset;
use super::pricing::PricingSnapshot;
use super::{Metric, ReportError};
use crate::trial::record::Condition;

/// Mean, median and 90th percentile of one metric in one group.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Descriptive {
    pub mean: f64,
    pub median: f64,
    pub p90: f64,
}

/// One group's summary. `workload`, `budget` and `model` are `None` in the per-condition
/// summaries (all of them pooled); `budget` is also `None` when the run names no single budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupSummary {
    pub condition: Condition,
    /// With `--compare-runs`: which record set; `None` within one record set.
    pub run: Option<String>,
    pub workload: Option<String>,
    pub budget: Option<u64>,
    pub model: Option<String>,
    pub n: u64,
    pub successes: u64,
    pub errors: u64,
    pub metrics: BTreeMap<Metric, Descriptive>,
    /// Mean cost per trial projected from a pricing snapshot (not billed); `None` without a
    /// snapshot or when no record's model has a price in it.
    pub projected_cost_usd: Option<f64>,
}

impl GroupSummary {
    pub fn mean(&self, metric: Metric) -> Option<f64> {
        self.metrics.get(&metric).map(|d| d.mean)
    }
}

fn polars_error(error: PolarsError) -> ReportError {
    ReportError::Polars {
        message: error.to_string(),
    }
}

/// Builds the record frame: one row per valid record.
fn frame(dataset: &Dataset, pricing: Option<&PricingSnapshot>) -> PolarsResult<DataFrame> {
    let rows = &dataset.rows;
    let mut columns: Vec<Column> = vec![
        Column::new(
            "side".into(),
            rows.iter().map(|r| u32::from(r.side)).collect::<Vec<_>>(),
        ),
        Column::new(
            "condition".into(),
            rows.iter()
                .map(|r| r.condition.as_str())
                .collect::<Vec<_>>(),
        ),
        Column::new(
            "workload".into(),
            rows.iter()
                .map(|r| dataset.workloads[r.workload as usize].as_str())
                .collect::<Vec<_>>(),
        ),
        Column::new(
            "budget".into(),
            rows.iter().map(|r| r.budget).collect::<Vec<Option<u64>>>(),
        ),
        Column::new(
            "model".into(),
            rows.iter()
                .map(|r| dataset.models[r.model as usize].as_str())
                .collect::<Vec<_>>(),
        ),
        Column::new(
            "success".into(),
            rows.iter()
                .map(|r| u64::from(r.success))
                .collect::<Vec<_>>(),
        ),
    ];
    for metric in Metric::ALL {
        columns.push(Column::new(
            metric.as_str().into(),
            rows.iter()
                .map(|r| r.values[metric.index()])
                .collect::<Vec<_>>(),
        ));
    }
    let projected: Vec<Option<f64>> = rows
        .iter()
        .map(|r| {
            let price = pricing?.price(&dataset.models[r.model as usize])?;
            Some(price.project(
                r.values[Metric::ContextTokens.index()],
                r.values[Metric::OutputTokens.index()] + r.reasoning_tokens as f64,
            ))
        })
        .collect();
    columns.push(Column::new("projected_cost_usd".into(), projected));
    DataFrame::new_infer_height(columns)
}

fn aggregations() -> Vec<Expr> {
    let mut out = vec![
        len().cast(DataType::UInt64).alias("n"),
        col("success")
            .sum()
            .cast(DataType::UInt64)
            .alias("successes"),
        col("projected_cost_usd").mean().alias("projected_mean"),
    ];
    for metric in Metric::ALL {
        let name = metric.as_str();
        out.push(col(name).mean().alias(format!("{name}__mean")));
        out.push(col(name).median().alias(format!("{name}__median")));
        out.push(
            col(name)
                .quantile(lit(0.9), QuantileMethod::Linear)
                .alias(format!("{name}__p90")),
        );
    }
    out
}

fn grouped(frame: &DataFrame, keys: &[&str]) -> PolarsResult<DataFrame> {
    let by: Vec<Expr> = keys.iter().map(|k| col(*k)).collect();
    let sort_by: Vec<PlSmallStr> = keys.iter().map(|k| PlSmallStr::from(*k)).collect();
    frame
        .clone()
        .lazy()
        .group_by(by)
        .agg(aggregations())
        .sort(
            sort_by,
            SortMultipleOptions::default().with_nulls_last(true),
        )
        .collect()
}

fn read_groups(
    frame: &DataFrame,
    pooled: bool,
    labels: &[String],
) -> PolarsResult<Vec<GroupSummary>> {
    let side = frame.column("side")?.u32()?;
    let condition = frame.column("condition")?.str()?;
    let n = frame.column("n")?.u64()?;
    let successes = frame.column("successes")?.u64()?;
    let projected = frame.column("projected_mean")?.f64()?;
    let (workload, budget, model) = if pooled {
        (None, None, None)
    } else {
        (
            Some(frame.column("workload")?.str()?),
            Some(frame.column("budget")?.u64()?),
            Some(frame.column("model")?.str()?),
        )
    };
    let mut metric_columns = Vec::new();
    for metric in Metric::ALL {
        let name = metric.as_str();
        metric_columns.push((
            metric,
            frame.column(&format!("{name}__mean"))?.f64()?,
            frame.column(&format!("{name}__median"))?.f64()?,
            frame.column(&format!("{name}__p90"))?.f64()?,
        ));
    }
    let mut out = Vec::with_capacity(frame.height());
    for i in 0..frame.height() {
        let Some(condition) = condition
            .get(i)
            .and_then(|c| Condition::ALL.into_iter().find(|k| k.as_str() == c))
        else {
            continue;
        };
        let n = n.get(i).unwrap_or(0);
        let successes = successes.get(i).unwrap_or(0);
        let metrics = metric_columns
            .iter()
            .map(|(metric, mean, median, p90)| {
                (
                    *metric,
                    Descriptive {
                        mean: mean.get(i).unwrap_or(f64::NAN),
                        median: median.get(i).unwrap_or(f64::NAN),
                        p90: p90.get(i).unwrap_or(f64::NAN),
                    },
                )
            })
            .collect();
        out.push(GroupSummary {
            condition,
            run: side.get(i).and_then(|s| labels.get(s as usize)).cloned(),
            workload: workload.and_then(|w| w.get(i)).map(str::to_string),
            budget: budget.and_then(|b| b.get(i)),
            model: model.and_then(|m| m.get(i)).map(str::to_string),
            n,
            successes,
            errors: n - successes,
            metrics,
            projected_cost_usd: projected.get(i),
        });
    }
    // Condition order (raw first) rather than alphabetical; record sets in input order.
    out.sort_by_key(|g| {
        (
            Condition::ALL
                .iter()
                .position(|c| *c == g.condition)
                .unwrap_or(usize::MAX),
            g.run
                .as_ref()
                .and_then(|r| labels.iter().position(|l| l == r)),
        )
    });
    Ok(out)
}

/// Per-condition summaries (all groups pooled) and per condition × workload × budget × model.
pub fn summarise(
    dataset: &Dataset,
    pricing: Option<&PricingSnapshot>,
    labels: &[String],
) -> Result<(Vec<GroupSummary>, Vec<GroupSummary>), ReportError> {
    if dataset.rows.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let frame = frame(dataset, pricing).map_err(polars_error)?;
    let pooled = grouped(&frame, &["side", "condition"]).map_err(polars_error)?;
    let detailed = grouped(
        &frame,
        &["side", "condition", "workload", "budget", "model"],
    )
    .map_err(polars_error)?;
    Ok((
        read_groups(&pooled, true, labels).map_err(polars_error)?,
        read_groups(&detailed, false, labels).map_err(polars_error)?,
    ))
}
