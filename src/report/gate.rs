//! Regression gates that compare like with like: a run's per-task scores against a stored
//! baseline's, per unit (workload, workload version, budget, model, condition), with thresholds
//! from a TOML file (default `reports/gate.toml`).
//!
//! Within a unit, the run and the baseline are paired by task. A breach is called only when the
//! cluster bootstrap over tasks puts the change beyond the threshold at the stated α (one-sided:
//! the 1 − α bound of a drop is below −threshold, the α bound of a rise or growth is above
//! +threshold), not when noise moves a mean across it. A unit present on one side only, or with
//! no task in common, is "not comparable": listed, never a breach.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::task_scores::{GateUnit, TaskScoreTable};
use super::{Metric, ReportError, ReportOptions, stats};

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
    /// Largest allowed rise of the error rate (share of `outcome: error` trials).
    pub error_rate_rise: f64,
    /// Largest allowed relative growth of mean context_tokens (0.05 = 5 %).
    pub context_tokens_growth: f64,
    /// Largest allowed relative growth of mean billed_cost_usd.
    pub billed_cost_usd_growth: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Self {
            task_score_drop: 0.02,
            evidence_recall_drop: 0.02,
            unsupported_claim_rate_rise: 0.01,
            error_rate_rise: 0.01,
            context_tokens_growth: 0.05,
            billed_cost_usd_growth: 0.05,
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
            ("error_rate_rise", thresholds.error_rate_rise),
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

/// How a metric is gated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Absolute drop of the mean (quality).
    Drop,
    /// Absolute rise of the mean.
    Rise,
    /// Relative growth of the mean.
    Growth,
}

impl Thresholds {
    /// The gated metrics with their rule and threshold.
    pub fn rules(&self) -> Vec<(Metric, Rule, f64)> {
        vec![
            (Metric::TaskScore, Rule::Drop, self.task_score_drop),
            (
                Metric::EvidenceRecall,
                Rule::Drop,
                self.evidence_recall_drop,
            ),
            (
                Metric::UnsupportedClaimRate,
                Rule::Rise,
                self.unsupported_claim_rate_rise,
            ),
            (Metric::ErrorRate, Rule::Rise, self.error_rate_rise),
            (
                Metric::ContextTokens,
                Rule::Growth,
                self.context_tokens_growth,
            ),
            (
                Metric::BilledCostUsd,
                Rule::Growth,
                self.billed_cost_usd_growth,
            ),
        ]
    }
}

/// One gated (unit, metric).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Check {
    pub unit: GateUnit,
    pub metric: Metric,
    pub rule: Rule,
    pub threshold: f64,
    /// Tasks in both the run and the baseline.
    pub tasks: usize,
    pub baseline_mean: f64,
    pub current_mean: f64,
    /// Drop/rise: current − baseline; growth: current / baseline − 1.
    pub change: f64,
    /// The one-sided bound at 1 − α nearest to "no regression": the upper bound of a drop's
    /// delta, the lower bound of a rise or growth.
    pub bound: f64,
    pub breached: bool,
}

impl std::fmt::Display for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (what, limit) = match self.rule {
            Rule::Drop => (
                "upper bound",
                format!("< -{} (drop beyond the threshold)", self.threshold),
            ),
            Rule::Rise => (
                "lower bound",
                format!("> +{} (rise beyond the threshold)", self.threshold),
            ),
            Rule::Growth => (
                "lower bound",
                format!(
                    "> +{:.1}% (growth beyond the threshold)",
                    self.threshold * 100.0
                ),
            ),
        };
        // Growth from a zero baseline is no percentage: it is said in words.
        let growth = |value: f64| {
            if value.is_infinite() {
                "from a zero baseline".to_string()
            } else {
                super::svg::without_negative_zero(format!("{:+.1}%", value * 100.0))
            }
        };
        let (change, bound) = match self.rule {
            Rule::Growth => (growth(self.change), growth(self.bound)),
            _ => (
                format!("{:+.4}", self.change),
                format!("{:+.4}", self.bound),
            ),
        };
        write!(
            f,
            "{}: {} {:.4} -> {:.4} ({change}; {what} {bound} {limit}; {} tasks)",
            self.unit, self.metric, self.baseline_mean, self.current_mean, self.tasks
        )
    }
}

/// A unit that cannot be gated, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotComparable {
    pub unit: GateUnit,
    pub reason: String,
}

impl std::fmt::Display for NotComparable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.unit, self.reason)
    }
}

/// The gate's findings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateOutcome {
    /// One-sided significance level of every check.
    pub alpha: f64,
    pub checks: Vec<Check>,
    pub not_comparable: Vec<NotComparable>,
    /// Units gated on the tasks both sides have, although this run lacks some of the
    /// baseline's: dropping the tasks that regressed must not pass the gate unnoticed.
    pub missing_tasks: Vec<NotComparable>,
    /// Units gated (present on both sides with tasks in common).
    pub units: usize,
}

impl GateOutcome {
    pub fn breaches(&self) -> impl Iterator<Item = &Check> {
        self.checks.iter().filter(|c| c.breached)
    }
}

/// Gates `current` against `baseline` unit by unit. `options` gives the bootstrap's seed and
/// resamples and α = 1 − confidence.
pub fn evaluate(
    current: &TaskScoreTable,
    baseline: &TaskScoreTable,
    thresholds: &Thresholds,
    options: &ReportOptions,
) -> GateOutcome {
    let alpha = 1.0 - options.confidence;
    let index = |table: &TaskScoreTable| -> BTreeMap<GateUnit, usize> {
        table
            .units
            .iter()
            .enumerate()
            .map(|(i, u)| (u.unit.clone(), i))
            .collect()
    };
    let (now, base) = (index(current), index(baseline));
    let mut all: Vec<&GateUnit> = now.keys().chain(base.keys()).collect();
    all.sort();
    all.dedup();
    let mut outcome = GateOutcome {
        alpha,
        checks: Vec::new(),
        not_comparable: Vec::new(),
        missing_tasks: Vec::new(),
        units: 0,
    };
    for unit in all {
        let (Some(&c), Some(&b)) = (now.get(unit), base.get(unit)) else {
            outcome.not_comparable.push(NotComparable {
                unit: unit.clone(),
                reason: if now.contains_key(unit) {
                    "not in the baseline".into()
                } else {
                    "in the baseline but not in this run".into()
                },
            });
            continue;
        };
        let (c_tasks, b_tasks) = (&current.units[c].tasks, &baseline.units[b].tasks);
        let common: Vec<(&Vec<f64>, &Vec<f64>)> = c_tasks
            .iter()
            .filter_map(|(task, values)| b_tasks.get(task).map(|base| (values, base)))
            .collect();
        if common.is_empty() {
            outcome.not_comparable.push(NotComparable {
                unit: unit.clone(),
                reason: format!(
                    "no task in common ({} in this run, {} in the baseline)",
                    c_tasks.len(),
                    b_tasks.len()
                ),
            });
            continue;
        }
        if common.len() < b_tasks.len() {
            outcome.missing_tasks.push(NotComparable {
                unit: unit.clone(),
                reason: format!(
                    "this run lacks {} of the baseline's {} tasks",
                    b_tasks.len() - common.len(),
                    b_tasks.len()
                ),
            });
        }
        outcome.units += 1;
        for (metric, rule, threshold) in thresholds.rules() {
            let (Some(ci), Some(bi)) = (current.column(metric), baseline.column(metric)) else {
                continue;
            };
            let pairs: Vec<(f64, f64)> = common
                .iter()
                .filter_map(|(now, base)| Some((*now.get(ci)?, *base.get(bi)?)))
                .collect();
            if let Some(check) = check(unit, metric, rule, threshold, &pairs, alpha, options) {
                outcome.checks.push(check);
            }
        }
    }
    outcome
}

fn check(
    unit: &GateUnit,
    metric: Metric,
    rule: Rule,
    threshold: f64,
    pairs: &[(f64, f64)],
    alpha: f64,
    options: &ReportOptions,
) -> Option<Check> {
    if pairs.is_empty() {
        return None;
    }
    let n = pairs.len() as f64;
    let current_mean = pairs.iter().map(|p| p.0).sum::<f64>() / n;
    let baseline_mean = pairs.iter().map(|p| p.1).sum::<f64>() / n;
    let rows: Vec<f64> = pairs.iter().flat_map(|(c, b)| [*c, *b]).collect();
    // A two-sided interval at 1 − 2α has the one-sided 1 − α bounds at its ends.
    let confidence = (1.0 - 2.0 * alpha).clamp(f64::EPSILON, 1.0 - f64::EPSILON);
    let statistic = |means: &[f64]| match rule {
        Rule::Drop | Rule::Rise => vec![means[0] - means[1]],
        Rule::Growth => vec![if means[1] == 0.0 {
            f64::NAN
        } else {
            means[0] / means[1] - 1.0
        }],
    };
    let estimate = stats::bootstrap_means(
        &rows,
        2,
        options.resamples,
        confidence,
        options.seed,
        statistic,
    )[0];
    let (change, bound, breached) = match (rule, estimate) {
        (Rule::Drop, Some(e)) => (e.estimate, e.ci_high, e.ci_high < -threshold),
        (Rule::Rise, Some(e)) => (e.estimate, e.ci_low, e.ci_low > threshold),
        (Rule::Growth, Some(e)) => (e.estimate, e.ci_low, e.ci_low > threshold),
        // Growth from a zero baseline: any cost or tokens where there were none is a breach.
        (Rule::Growth, None) if baseline_mean == 0.0 => {
            let grew = pairs.iter().all(|p| p.0 > 0.0);
            (
                if current_mean > 0.0 {
                    f64::INFINITY
                } else {
                    0.0
                },
                if grew { f64::INFINITY } else { 0.0 },
                grew,
            )
        }
        _ => return None,
    };
    Some(Check {
        unit: unit.clone(),
        metric,
        rule,
        threshold,
        tasks: pairs.len(),
        baseline_mean,
        current_mean,
        change,
        bound,
        breached,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::task_scores::UnitScores;
    use crate::trial::record::Condition;

    fn unit(workload: &str, condition: Condition) -> GateUnit {
        GateUnit {
            workload: workload.into(),
            workload_version: "1".into(),
            budget: Some(512),
            model: "fixture".into(),
            condition,
        }
    }

    /// `n` tasks with task score `score(i)`, 100 context tokens and no cost.
    fn scores(unit: GateUnit, n: usize, score: impl Fn(usize) -> f64) -> UnitScores {
        let metrics = Metric::ALL;
        UnitScores {
            unit,
            tasks: (0..n)
                .map(|i| {
                    let values = metrics
                        .iter()
                        .map(|m| match m {
                            Metric::TaskScore => score(i),
                            Metric::ContextTokens => 100.0,
                            _ => 0.0,
                        })
                        .collect();
                    (format!("t{i:03}"), values)
                })
                .collect(),
        }
    }

    fn table(units: Vec<UnitScores>) -> TaskScoreTable {
        TaskScoreTable {
            metrics: Metric::ALL.to_vec(),
            units,
        }
    }

    fn options() -> ReportOptions {
        ReportOptions {
            resamples: 400,
            ..ReportOptions::default()
        }
    }

    /// Found by probing: growth from a zero baseline was printed `+inf%`.
    #[test]
    fn growth_from_a_zero_baseline_is_said_in_words() {
        let check = Check {
            unit: unit("qa", Condition::Svc),
            metric: Metric::BilledCostUsd,
            rule: Rule::Growth,
            threshold: 0.05,
            tasks: 3,
            baseline_mean: 0.0,
            current_mean: 2.0,
            change: f64::INFINITY,
            bound: f64::INFINITY,
            breached: true,
        };
        let text = check.to_string();
        assert!(
            text.contains("(from a zero baseline; lower bound from a zero baseline >")
                && !text.contains("inf"),
            "{text}"
        );
    }

    #[test]
    fn unchanged_scores_pass_and_a_clear_drop_breaches() {
        let base = table(vec![scores(unit("qa", Condition::Svc), 40, |i| {
            (i % 5) as f64 / 4.0
        })]);
        let same = evaluate(&base, &base, &Thresholds::default(), &options());
        assert_eq!(same.units, 1);
        assert_eq!(same.breaches().count(), 0);
        assert!(same.not_comparable.is_empty());
        let dropped = table(vec![scores(unit("qa", Condition::Svc), 40, |i| {
            ((i % 5) as f64 / 4.0 - 0.25).max(0.0)
        })]);
        let outcome = evaluate(&dropped, &base, &Thresholds::default(), &options());
        let breaches: Vec<_> = outcome.breaches().collect();
        assert_eq!(breaches.len(), 1, "{outcome:?}");
        assert_eq!(breaches[0].metric, Metric::TaskScore);
        assert!(breaches[0].bound < -0.02);
        assert!(
            breaches[0]
                .to_string()
                .starts_with("qa@1 budget 512 model fixture svc: task_score")
        );
    }

    #[test]
    fn noise_that_moves_the_mean_past_the_threshold_is_not_a_breach() {
        // Five tasks lose 0.2 each out of 40: mean drop 0.025 > 0.02, but the bootstrap cannot
        // rule out a drop within the threshold.
        let base = table(vec![scores(unit("qa", Condition::Svc), 40, |_| 0.6)]);
        let noisy = table(vec![scores(unit("qa", Condition::Svc), 40, |i| {
            if i < 5 { 0.4 } else { 0.6 }
        })]);
        let outcome = evaluate(&noisy, &base, &Thresholds::default(), &options());
        let check = outcome
            .checks
            .iter()
            .find(|c| c.metric == Metric::TaskScore)
            .expect("task score checked");
        assert!(check.change < -0.02, "{check:?}");
        assert!(!check.breached, "{check:?}");
    }

    #[test]
    fn units_on_one_side_are_not_comparable_never_breaches() {
        let base = table(vec![
            scores(unit("qa", Condition::Svc), 10, |_| 0.8),
            scores(unit("needle", Condition::Svc), 10, |_| 1.0),
        ]);
        let only_qa = table(vec![scores(unit("qa", Condition::Svc), 10, |_| 0.8)]);
        let outcome = evaluate(&only_qa, &base, &Thresholds::default(), &options());
        assert_eq!(outcome.breaches().count(), 0);
        assert_eq!(outcome.units, 1);
        assert_eq!(outcome.not_comparable.len(), 1);
        assert_eq!(outcome.not_comparable[0].unit.workload, "needle");
        let disjoint = table(vec![UnitScores {
            unit: unit("qa", Condition::Svc),
            tasks: [("other".to_string(), vec![0.0; Metric::COUNT])].into(),
        }]);
        let outcome = evaluate(&disjoint, &only_qa, &Thresholds::default(), &options());
        assert!(
            outcome.not_comparable[0]
                .reason
                .starts_with("no task in common")
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
