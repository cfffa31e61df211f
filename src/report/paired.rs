//! Paired comparisons: each condition against `raw` (and against a named baseline condition),
//! over the trials that share a pairing unit. Per metric: the mean paired delta (condition −
//! baseline) with a percentile-bootstrap CI and a significance test (exact McNemar when both
//! sides are 0/1, Wilcoxon signed-rank otherwise); the relative token and cost reductions with
//! CIs; and the non-inferiority verdict "quality-preserving context win".
//!
//! Every trial counts, including `outcome: error` trials with the scores their scorer gave:
//! dropping failures from one side only would bias the comparison.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::input::Dataset;
use super::stats::{self, Estimate, TestResult};
use super::{Metric, ReportOptions};
use crate::trial::record::Condition;

/// Pairing units listed by name when some condition is missing from them.
pub const INCOMPLETE_LISTED_MAX: usize = 20;

/// One metric's paired result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricDelta {
    pub metric: Metric,
    /// Means over the complete pairs; `None` without pairs.
    pub baseline_mean: Option<f64>,
    pub condition_mean: Option<f64>,
    /// Mean of (condition − baseline) with its bootstrap CI.
    pub delta: Option<Estimate>,
    pub test: TestResult,
    /// p-value below 1 − confidence.
    pub significant: bool,
}

/// The non-inferiority verdict and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub quality_preserving_context_win: bool,
    /// One line per criterion, passed or failed, with the numbers.
    pub reasons: Vec<String>,
}

/// A condition compared with a baseline condition over complete pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub condition: Condition,
    pub baseline: Condition,
    pub pairs: u64,
    /// Units that have the condition but not the baseline, and the reverse.
    pub missing_baseline: u64,
    pub missing_condition: u64,
    pub metrics: Vec<MetricDelta>,
    /// 1 − mean(condition context tokens) / mean(baseline context tokens), with CI.
    pub token_reduction: Option<Estimate>,
    /// The same for billed cost; `None` when the baseline cost is zero.
    pub cost_reduction: Option<Estimate>,
    pub verdict: Verdict,
}

impl Comparison {
    pub fn metric(&self, metric: Metric) -> Option<&MetricDelta> {
        self.metrics.iter().find(|m| m.metric == metric)
    }
}

/// Completeness of the pairing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairingReport {
    pub units: u64,
    /// Units that have every condition present in the data.
    pub complete_units: u64,
    /// Records with the same unit and condition as an earlier one (only the first is paired).
    pub duplicates: u64,
    /// Per condition: units that lack it.
    pub missing: BTreeMap<Condition, u64>,
    /// Some incomplete units by name, with the conditions they lack.
    pub incomplete_examples: Vec<String>,
}

/// Row index per unit and condition (first record wins).
struct Table {
    slots: Vec<[Option<u32>; 4]>,
    duplicates: u64,
    /// Unit indices in pairing-unit order, so pairs (and the bootstrap's draws over them) do
    /// not depend on the order records were read in: shards merged in any order give the
    /// report of one unsharded run.
    order: Vec<usize>,
}

fn condition_slot(condition: Condition) -> usize {
    Condition::ALL
        .iter()
        .position(|c| *c == condition)
        .unwrap_or(0)
}

fn table(dataset: &Dataset) -> Table {
    let mut slots = vec![[None; 4]; dataset.pairing_units.len()];
    let mut duplicates = 0;
    for (i, row) in dataset.rows.iter().enumerate() {
        let slot = &mut slots[row.unit as usize][condition_slot(row.condition)];
        if slot.is_some() {
            duplicates += 1;
        } else {
            *slot = Some(i as u32);
        }
    }
    let mut order: Vec<usize> = (0..dataset.pairing_units.len()).collect();
    order.sort_by(|&a, &b| dataset.pairing_units[a].cmp(&dataset.pairing_units[b]));
    Table {
        slots,
        duplicates,
        order,
    }
}

/// Conditions present in the data, in `Condition::ALL` order.
pub fn present_conditions(dataset: &Dataset) -> Vec<Condition> {
    let mut seen = [false; 4];
    for row in &dataset.rows {
        seen[condition_slot(row.condition)] = true;
    }
    Condition::ALL
        .into_iter()
        .filter(|c| seen[condition_slot(*c)])
        .collect()
}

/// Pairing completeness over the conditions present.
pub fn pairing_report(dataset: &Dataset) -> PairingReport {
    let table = table(dataset);
    let present = present_conditions(dataset);
    let mut missing: BTreeMap<Condition, u64> = present.iter().map(|c| (*c, 0)).collect();
    let mut complete = 0;
    let mut examples = Vec::new();
    for (unit, slots) in table.slots.iter().enumerate() {
        let lacking: Vec<Condition> = present
            .iter()
            .copied()
            .filter(|c| slots[condition_slot(*c)].is_none())
            .collect();
        if lacking.is_empty() {
            complete += 1;
            continue;
        }
        for c in &lacking {
            *missing.entry(*c).or_default() += 1;
        }
        if examples.len() < INCOMPLETE_LISTED_MAX {
            let names: Vec<&str> = lacking.iter().map(|c| c.as_str()).collect();
            examples.push(format!(
                "{} lacks {}",
                dataset.pairing_units[unit],
                names.join(", ")
            ));
        }
    }
    PairingReport {
        units: table.slots.len() as u64,
        complete_units: complete,
        duplicates: table.duplicates,
        missing,
        incomplete_examples: examples,
    }
}

/// Which (condition, baseline) pairs to compare: every other condition vs `raw`, and vs the
/// named baseline condition when it is not `raw`.
pub fn comparison_plan(
    present: &[Condition],
    baseline: Option<Condition>,
) -> Vec<(Condition, Condition)> {
    let mut plan = Vec::new();
    let mut baselines = vec![Condition::Raw];
    if let Some(b) = baseline
        && b != Condition::Raw
    {
        baselines.push(b);
    }
    for base in baselines {
        if !present.contains(&base) {
            continue;
        }
        for c in present {
            if *c != base {
                plan.push((*c, base));
            }
        }
    }
    plan
}

/// Bootstrap row layout: deltas of every metric, then the baseline's context tokens and cost.
const WIDTH: usize = Metric::COUNT + 2;
const BASE_TOKENS: usize = Metric::COUNT;
const BASE_COST: usize = Metric::COUNT + 1;

/// Compares `condition` with `baseline` over complete pairs.
pub fn compare(
    dataset: &Dataset,
    condition: Condition,
    baseline: Condition,
    options: &ReportOptions,
) -> Comparison {
    compare_all(dataset, &[(condition, baseline)], options)
        .into_iter()
        .next()
        .unwrap_or_else(|| unreachable!("one comparison planned, one returned"))
}

/// A comparison's complete pairs (record indices: condition, baseline) and its bootstrap rows.
struct Prepared {
    condition: Condition,
    baseline: Condition,
    pairs: Vec<(u32, u32)>,
    missing_baseline: u64,
    missing_condition: u64,
}

fn prepare(table: &Table, condition: Condition, baseline: Condition) -> Prepared {
    let (c_slot, b_slot) = (condition_slot(condition), condition_slot(baseline));
    let mut prepared = Prepared {
        condition,
        baseline,
        pairs: Vec::new(),
        missing_baseline: 0,
        missing_condition: 0,
    };
    for &unit in &table.order {
        let slots = &table.slots[unit];
        match (slots[c_slot], slots[b_slot]) {
            (Some(c), Some(b)) => prepared.pairs.push((c, b)),
            (Some(_), None) => prepared.missing_baseline += 1,
            (None, Some(_)) => prepared.missing_condition += 1,
            (None, None) => {}
        }
    }
    prepared
}

/// Runs every planned comparison. Comparisons with the same number of pairs share one
/// bootstrap pass: resample `i` draws the same positions for every list of `n` pairs (its
/// stream depends only on seed, `i` and `n`), so the result is exactly that of separate runs,
/// at a fraction of the cost.
pub fn compare_all(
    dataset: &Dataset,
    plan: &[(Condition, Condition)],
    options: &ReportOptions,
) -> Vec<Comparison> {
    let table = table(dataset);
    let prepared: Vec<Prepared> = plan.iter().map(|(c, b)| prepare(&table, *c, *b)).collect();
    let value = |row: u32, metric: Metric| dataset.rows[row as usize].values[metric.index()];
    let mut estimates: Vec<Vec<Option<Estimate>>> = vec![Vec::new(); prepared.len()];
    let mut sizes: Vec<usize> = prepared.iter().map(|p| p.pairs.len()).collect();
    sizes.sort_unstable();
    sizes.dedup();
    for size in sizes {
        let members: Vec<usize> = (0..prepared.len())
            .filter(|&i| prepared[i].pairs.len() == size)
            .collect();
        let width = WIDTH * members.len();
        let mut rows = Vec::with_capacity(size * width);
        for position in 0..size {
            for &member in &members {
                let (c, b) = prepared[member].pairs[position];
                for metric in Metric::ALL {
                    rows.push(value(c, metric) - value(b, metric));
                }
                rows.push(value(b, Metric::ContextTokens));
                rows.push(value(b, Metric::BilledCostUsd));
            }
        }
        let all = stats::bootstrap_means(
            &rows,
            width,
            options.resamples,
            options.confidence,
            options.seed,
            |means| {
                let mut out = Vec::with_capacity(members.len() * (Metric::COUNT + 2));
                for segment in means.chunks_exact(WIDTH) {
                    out.extend_from_slice(&segment[..Metric::COUNT]);
                    out.push(reduction(
                        segment[Metric::ContextTokens.index()],
                        segment[BASE_TOKENS],
                    ));
                    out.push(reduction(
                        segment[Metric::BilledCostUsd.index()],
                        segment[BASE_COST],
                    ));
                }
                out
            },
        );
        for (segment, &member) in all.chunks_exact(Metric::COUNT + 2).zip(&members) {
            estimates[member] = segment.to_vec();
        }
    }
    prepared
        .into_iter()
        .zip(estimates)
        .map(|(prepared, estimates)| finish(dataset, prepared, &estimates, options))
        .collect()
}

fn finish(
    dataset: &Dataset,
    prepared: Prepared,
    estimates: &[Option<Estimate>],
    options: &ReportOptions,
) -> Comparison {
    let value = |row: u32, metric: Metric| dataset.rows[row as usize].values[metric.index()];
    let pairs = &prepared.pairs;
    let alpha = 1.0 - options.confidence;
    let n = pairs.len();
    let metrics: Vec<MetricDelta> = Metric::ALL
        .into_iter()
        .map(|metric| {
            let base: Vec<f64> = pairs.iter().map(|&(_, b)| value(b, metric)).collect();
            let cond: Vec<f64> = pairs.iter().map(|&(c, _)| value(c, metric)).collect();
            let test = paired_test(&base, &cond);
            MetricDelta {
                metric,
                baseline_mean: stats::mean(&base),
                condition_mean: stats::mean(&cond),
                delta: estimates.get(metric.index()).copied().flatten(),
                significant: n > 0 && test.p_value < alpha,
                test,
            }
        })
        .collect();
    let token_reduction = estimates.get(Metric::COUNT).copied().flatten();
    let cost_reduction = estimates.get(Metric::COUNT + 1).copied().flatten();
    let verdict = verdict(n, &metrics, token_reduction, options.tolerance);
    Comparison {
        condition: prepared.condition,
        baseline: prepared.baseline,
        pairs: n as u64,
        missing_baseline: prepared.missing_baseline,
        missing_condition: prepared.missing_condition,
        metrics,
        token_reduction,
        cost_reduction,
        verdict,
    }
}

/// Relative reduction from a mean delta and the baseline mean; NaN when the baseline is zero.
fn reduction(mean_delta: f64, baseline_mean: f64) -> f64 {
    if baseline_mean == 0.0 {
        f64::NAN
    } else {
        -mean_delta / baseline_mean
    }
}

/// Exact McNemar when both sides are 0/1, otherwise Wilcoxon signed-rank on the differences.
pub fn paired_test(baseline: &[f64], condition: &[f64]) -> TestResult {
    let binary = |values: &[f64]| values.iter().all(|v| *v == 0.0 || *v == 1.0);
    if !baseline.is_empty() && binary(baseline) && binary(condition) {
        let (mut b, mut c) = (0, 0);
        for (x, y) in baseline.iter().zip(condition) {
            if *x == 1.0 && *y == 0.0 {
                b += 1;
            } else if *x == 0.0 && *y == 1.0 {
                c += 1;
            }
        }
        return stats::mcnemar_exact(b, c);
    }
    let differences: Vec<f64> = condition.iter().zip(baseline).map(|(y, x)| y - x).collect();
    stats::wilcoxon_signed_rank(&differences)
}

fn verdict(
    pairs: usize,
    metrics: &[MetricDelta],
    token_reduction: Option<Estimate>,
    tolerance: f64,
) -> Verdict {
    if pairs == 0 {
        return Verdict {
            quality_preserving_context_win: false,
            reasons: vec!["no complete pairs: nothing can be concluded".into()],
        };
    }
    let delta = |metric: Metric| {
        metrics
            .iter()
            .find(|m| m.metric == metric)
            .and_then(|m| m.delta)
    };
    let mut reasons = Vec::new();
    let mut win = true;
    let mut check = |passed: bool, text: String| {
        win &= passed;
        reasons.push(format!("{} {text}", if passed { "pass:" } else { "fail:" }));
    };
    for (metric, label) in [
        (Metric::TaskScore, "task score"),
        (Metric::EvidenceRecall, "evidence recall"),
    ] {
        match delta(metric) {
            Some(d) => check(
                d.ci_low >= -tolerance,
                format!(
                    "{label} delta CI lower bound {:+.4} {} -{tolerance}",
                    d.ci_low,
                    if d.ci_low >= -tolerance { ">=" } else { "<" }
                ),
            ),
            None => check(false, format!("{label} delta has no interval")),
        }
    }
    match delta(Metric::UnsupportedClaimRate) {
        Some(d) => check(
            d.ci_high <= tolerance,
            format!(
                "unsupported-claim-rate delta CI upper bound {:+.4} {} {tolerance}",
                d.ci_high,
                if d.ci_high <= tolerance { "<=" } else { ">" }
            ),
        ),
        None => check(false, "unsupported-claim-rate delta has no interval".into()),
    }
    match token_reduction {
        Some(r) => check(
            r.ci_low > 0.0,
            format!(
                "context-token reduction CI lower bound {:.4} {} 0",
                r.ci_low,
                if r.ci_low > 0.0 { ">" } else { "<=" }
            ),
        ),
        None => check(
            false,
            "context-token reduction undefined (baseline has zero tokens)".into(),
        ),
    }
    Verdict {
        quality_preserving_context_win: win,
        reasons,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{generate, input};
    use crate::trial::TrialRecord;

    fn dataset(records: &[TrialRecord]) -> Dataset {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("t.jsonl");
        let text: String = records
            .iter()
            .map(|r| serde_json::to_string(r).expect("serialise") + "\n")
            .collect();
        std::fs::write(&path, text).expect("write");
        input::load(&[path]).expect("load")
    }

    fn options() -> ReportOptions {
        ReportOptions {
            resamples: 200,
            ..ReportOptions::default()
        }
    }

    #[test]
    fn incomplete_and_duplicate_units_are_counted_and_named() {
        let mut records: Vec<TrialRecord> = generate::records(12, 1).collect();
        records.remove(6); // unit 1 loses svc
        records.push(records[0].clone()); // duplicate raw of unit 0
        let report = pairing_report(&dataset(&records));
        assert_eq!(report.units, 3);
        assert_eq!(report.complete_units, 2);
        assert_eq!(report.duplicates, 1);
        assert_eq!(report.missing[&Condition::Svc], 1);
        assert_eq!(report.missing[&Condition::Raw], 0);
        assert_eq!(report.incomplete_examples.len(), 1);
        assert!(report.incomplete_examples[0].ends_with("lacks svc"));
    }

    #[test]
    fn plan_compares_with_raw_and_the_named_baseline() {
        let present = Condition::ALL.to_vec();
        assert_eq!(comparison_plan(&present, None).len(), 3);
        let plan = comparison_plan(&present, Some(Condition::NativeCompaction));
        assert_eq!(plan.len(), 6);
        assert!(plan.contains(&(Condition::Svc, Condition::NativeCompaction)));
        assert!(comparison_plan(&[Condition::Svc], None).is_empty());
    }

    /// raw and svc records for 40 units; svc keeps scores and halves the tokens, then `adjust`
    /// changes the svc record.
    fn pairs(adjust: impl Fn(&mut TrialRecord)) -> Vec<TrialRecord> {
        let mut out = Vec::new();
        for record in generate::records(160, 5) {
            match record.condition {
                Condition::Raw => out.push(record),
                Condition::Svc => {
                    let raw = out.last().expect("raw comes first");
                    let mut svc = record.clone();
                    svc.task_score = raw.task_score;
                    svc.evidence_recall = raw.evidence_recall;
                    svc.unsupported_claim_rate = raw.unsupported_claim_rate;
                    svc.context_tokens = raw.context_tokens / 2;
                    adjust(&mut svc);
                    out.push(svc);
                }
                _ => {}
            }
        }
        out
    }

    #[test]
    fn equal_quality_with_fewer_tokens_is_a_win() {
        let data = dataset(&pairs(|_| {}));
        let comparison = compare(&data, Condition::Svc, Condition::Raw, &options());
        assert_eq!(comparison.pairs, 40);
        assert!(
            comparison.verdict.quality_preserving_context_win,
            "{comparison:?}"
        );
        let reduction = comparison.token_reduction.expect("reduction");
        assert!((reduction.estimate - 0.5).abs() < 0.01, "{reduction:?}");
        let quality = comparison.metric(Metric::TaskScore).expect("task_score");
        assert_eq!(quality.test.test, crate::report::TestKind::NoDifference);
        assert!(!quality.significant);
    }

    /// Found by the shard test (issue 12): merged shards gave other bootstrap intervals than
    /// one unsharded run, because pairs followed the order records were read in.
    #[test]
    fn comparisons_do_not_depend_on_record_order() {
        let records = pairs(|svc| svc.context_tokens += svc.task_score as u64 * 7);
        let mut reversed = records.clone();
        reversed.reverse();
        let forward = compare(
            &dataset(&records),
            Condition::Svc,
            Condition::Raw,
            &options(),
        );
        let backward = compare(
            &dataset(&reversed),
            Condition::Svc,
            Condition::Raw,
            &options(),
        );
        assert_eq!(forward, backward);
    }

    #[test]
    fn a_quality_drop_beyond_tolerance_is_not_a_win() {
        let data = dataset(&pairs(|svc| {
            svc.task_score = (svc.task_score - 0.2).max(0.0)
        }));
        let comparison = compare(&data, Condition::Svc, Condition::Raw, &options());
        assert!(!comparison.verdict.quality_preserving_context_win);
        assert!(
            comparison.verdict.reasons[0].starts_with("fail: task score"),
            "{:?}",
            comparison.verdict.reasons
        );
        assert!(comparison.metric(Metric::TaskScore).expect("m").significant);
    }

    #[test]
    fn no_pairs_gives_no_estimates_and_no_win() {
        let records: Vec<TrialRecord> = generate::records(8, 1)
            .filter(|r| r.condition != Condition::Raw)
            .collect();
        let mut with_one_raw = records.clone();
        let mut raw = generate::records(1, 9).next().expect("one");
        raw.task_id = "elsewhere".into();
        with_one_raw.push(raw);
        let comparison = compare(
            &dataset(&with_one_raw),
            Condition::Svc,
            Condition::Raw,
            &options(),
        );
        assert_eq!(comparison.pairs, 0);
        assert_eq!(comparison.missing_baseline, 2);
        assert_eq!(comparison.missing_condition, 1);
        assert!(comparison.token_reduction.is_none());
        assert!(!comparison.verdict.quality_preserving_context_win);
    }

    #[test]
    fn binary_scores_use_mcnemar() {
        let test = paired_test(&[1.0, 1.0, 0.0, 1.0], &[0.0, 1.0, 1.0, 0.0]);
        assert_eq!(test.test, crate::report::TestKind::McnemarExact);
        assert_eq!(test.n_used, 3);
        let test = paired_test(&[0.5, 1.0], &[0.0, 1.0]);
        assert_ne!(test.test, crate::report::TestKind::McnemarExact);
    }
}
