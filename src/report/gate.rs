//! Regression gates: a report's per-condition means against a stored baseline summary, with
//! thresholds from a TOML file (default `reports/gate.toml`). Each breach names the condition,
//! the metric, both values and the threshold.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Metric, ReportError, SummaryComparison};
use crate::trial::record::Condition;

/// Gate thresholds. Quality thresholds are absolute (scores are in [0, 1]); growth thresholds
/// are relative to the baseline mean.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Thresholds {
    /// Largest allowed drop of mean task_score.
    pub task_score_drop: f64,
    /// Largest allowed drop of mean evidence_recall.
    pub evidence_recall_drop: f64,
    /// Largest allowed rise of mean unsupported_claim_rate.
    pub unsupported_claim_rate_rise: f64,
    /// Largest allowed relative growth of mean context_tokens (0.05 = 5 %).
    pub context_tokens_growth: f64,
    /// Largest allowed relative growth of mean billed_cost_usd.
    pub billed_cost_usd_growth: f64,
    /// Fail when a condition of the baseline is missing from the current run.
    pub require_all_conditions: bool,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            task_score_drop: 0.02,
            evidence_recall_drop: 0.02,
            unsupported_claim_rate_rise: 0.01,
            context_tokens_growth: 0.05,
            billed_cost_usd_growth: 0.05,
            require_all_conditions: true,
        }
    }
}

impl Thresholds {
    pub fn load(path: &Path) -> Result<Self, ReportError> {
        let error = |message: String| ReportError::Thresholds {
            path: path.to_path_buf(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
        let thresholds: Thresholds = toml::from_str(&text).map_err(|e| error(e.to_string()))?;
        for (field, value) in [
            ("task_score_drop", thresholds.task_score_drop),
            ("evidence_recall_drop", thresholds.evidence_recall_drop),
            (
                "unsupported_claim_rate_rise",
                thresholds.unsupported_claim_rate_rise,
            ),
            ("context_tokens_growth", thresholds.context_tokens_growth),
            ("billed_cost_usd_growth", thresholds.billed_cost_usd_growth),
        ] {
            if !(value >= 0.0 && value.is_finite()) {
                return Err(error(format!(
                    "{field} must be a finite number >= 0, got {value}"
                )));
            }
        }
        Ok(thresholds)
    }
}

/// One failed gate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Breach {
    pub condition: Condition,
    /// `None` for a missing condition.
    pub metric: Option<Metric>,
    pub message: String,
}

impl std::fmt::Display for Breach {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Every breach of `thresholds` in `comparison` (empty when the gate passes).
pub fn evaluate(comparison: &SummaryComparison, thresholds: &Thresholds) -> Vec<Breach> {
    let mut breaches = Vec::new();
    if thresholds.require_all_conditions {
        for condition in &comparison.missing_in_current {
            breaches.push(Breach {
                condition: *condition,
                metric: None,
                message: format!(
                    "{condition}: present in the baseline but missing from the current run"
                ),
            });
        }
    }
    for row in &comparison.rows {
        let (breached, limit) = match row.metric {
            Metric::TaskScore => (
                -row.delta > thresholds.task_score_drop,
                format!("drop > {}", thresholds.task_score_drop),
            ),
            Metric::EvidenceRecall => (
                -row.delta > thresholds.evidence_recall_drop,
                format!("drop > {}", thresholds.evidence_recall_drop),
            ),
            Metric::UnsupportedClaimRate => (
                row.delta > thresholds.unsupported_claim_rate_rise,
                format!("rise > {}", thresholds.unsupported_claim_rate_rise),
            ),
            Metric::ContextTokens => (
                growth(row.baseline, row.current) > thresholds.context_tokens_growth,
                format!("growth > {:.1}%", thresholds.context_tokens_growth * 100.0),
            ),
            Metric::BilledCostUsd => (
                growth(row.baseline, row.current) > thresholds.billed_cost_usd_growth,
                format!("growth > {:.1}%", thresholds.billed_cost_usd_growth * 100.0),
            ),
            Metric::OutputTokens | Metric::LatencyMs => (false, String::new()),
        };
        if breached {
            let relative = row
                .relative
                .map(|r| format!(", {:+.1}%", r * 100.0))
                .unwrap_or_default();
            breaches.push(Breach {
                condition: row.condition,
                metric: Some(row.metric),
                message: format!(
                    "{}: {} {:.4} -> {:.4} ({:+.4}{relative}); threshold: {limit}",
                    row.condition, row.metric, row.baseline, row.current, row.delta
                ),
            });
        }
    }
    breaches
}

/// Relative growth; growth from zero to anything positive is infinite.
fn growth(baseline: f64, current: f64) -> f64 {
    if baseline == 0.0 {
        if current > 0.0 { f64::INFINITY } else { 0.0 }
    } else {
        (current - baseline) / baseline
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::SummaryDelta;

    fn row(metric: Metric, baseline: f64, current: f64) -> SummaryDelta {
        SummaryDelta {
            condition: Condition::Svc,
            metric,
            baseline,
            current,
            delta: current - baseline,
            relative: (baseline != 0.0).then(|| (current - baseline) / baseline),
        }
    }

    #[test]
    fn each_threshold_breaches_only_beyond_its_limit() {
        let comparison = SummaryComparison {
            rows: vec![
                row(Metric::TaskScore, 0.80, 0.79),           // drop 0.01: ok
                row(Metric::EvidenceRecall, 0.90, 0.85),      // drop 0.05: breach
                row(Metric::UnsupportedClaimRate, 0.1, 0.12), // rise 0.02: breach
                row(Metric::ContextTokens, 1000.0, 1040.0),   // +4 %: ok
                row(Metric::BilledCostUsd, 0.0, 0.01),        // from zero: breach
                row(Metric::LatencyMs, 10.0, 100.0),          // not gated
            ],
            missing_in_current: vec![Condition::Combined],
            missing_in_baseline: vec![],
        };
        let breaches = evaluate(&comparison, &Thresholds::default());
        let metrics: Vec<_> = breaches.iter().map(|b| b.metric).collect();
        assert_eq!(
            metrics,
            vec![
                None,
                Some(Metric::EvidenceRecall),
                Some(Metric::UnsupportedClaimRate),
                Some(Metric::BilledCostUsd)
            ]
        );
        assert!(
            breaches[1]
                .message
                .starts_with("svc: evidence_recall 0.9000 -> 0.8500")
        );
    }

    #[test]
    fn thresholds_file_rejects_unknown_keys() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("gate.toml");
        std::fs::write(&path, "task_score_dorp = 0.1\n").expect("write");
        let error = Thresholds::load(&path).expect_err("unknown").to_string();
        assert!(error.contains("task_score_dorp"), "{error}");
        std::fs::write(&path, "task_score_drop = 0.1\n").expect("write");
        let thresholds = Thresholds::load(&path).expect("load");
        assert_eq!(thresholds.task_score_drop, 0.1);
        assert_eq!(thresholds.evidence_recall_drop, 0.02);
    }
}
