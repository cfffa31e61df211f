//! Paired comparisons: each condition against `raw` (and against a named baseline condition),
//! or, with `--compare-runs`, each condition of the second record set against the same
//! condition of the first. Pairs come from [`super::cluster`]: within a task, per budget and
//! replicate, identical replicates collapsed and a budget-free `raw` paired with every budget.
//!
//! Comparisons are made pooled (all workloads, budgets and models) and, when the data holds
//! more than one, per workload × budget × model stratum. Per metric: the mean paired delta
//! (condition − baseline, pairs weighted equally) with a cluster-bootstrap CI (tasks resampled
//! with replacement), and a test on the task as the unit: exact McNemar when the metric is
//! declared binary (the scorer's declared type for `task_score`; `error_rate`) and every task
//! contributes one pair, else Wilcoxon signed-rank on the per-task mean differences. p-values
//! are Holm-adjusted over every test of the report, and significance uses the adjusted value.
//!
//! Every trial counts: error trials are failures in every quality metric (see `input::Row`),
//! and the error rate is compared like the other metrics.

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use super::cluster::{self, Arm, Clustered};
use super::input::Dataset;
use super::stats::{self, Estimate, TestResult};
use super::{Metric, ReportOptions};
use crate::harness::scorer::{ScoreType, declared_score_type};
use crate::trial::record::Condition;

/// Pairing units listed by name when some condition is missing from them.
pub const INCOMPLETE_LISTED_MAX: usize = 20;

/// One metric's paired result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricDelta {
    pub metric: Metric,
    /// Means over the pairs; `None` without pairs.
    pub baseline_mean: Option<f64>,
    pub condition_mean: Option<f64>,
    /// Mean of (condition − baseline) with its cluster-bootstrap CI.
    pub delta: Option<Estimate>,
    pub test: TestResult,
    /// The test's p-value after Holm's adjustment over every test of the report of its family:
    /// latency tests form one family, every other metric's the other.
    pub p_holm: f64,
    /// Holm-adjusted p-value below 1 − confidence.
    pub significant: bool,
}

/// The non-inferiority verdict and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub quality_preserving_context_win: bool,
    /// One line per criterion, passed or failed, with the numbers.
    pub reasons: Vec<String>,
}

/// A condition compared with a baseline over its pairs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub condition: Condition,
    pub baseline: Condition,
    /// With `--compare-runs`: the record set of each side; `None` within one record set.
    pub condition_run: Option<String>,
    pub baseline_run: Option<String>,
    /// The stratum; `None` in a field means pooled over it.
    pub workload: Option<String>,
    pub budget: Option<u64>,
    pub model: Option<String>,
    pub pairs: u64,
    /// Tasks with at least one pair: the clusters of the bootstrap and the test's n.
    pub tasks: u64,
    /// (task, budget) units that have the condition but not the baseline, and the reverse.
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

    /// Pooled over workloads, budgets and models.
    pub fn pooled(&self) -> bool {
        self.workload.is_none() && self.budget.is_none() && self.model.is_none()
    }

    /// "svc", or "svc [run-b]" when record sets are compared.
    pub fn condition_label(&self) -> String {
        label(self.condition, self.condition_run.as_deref())
    }

    pub fn baseline_label(&self) -> String {
        label(self.baseline, self.baseline_run.as_deref())
    }

    /// "qa-builtin · budget 512 · model", or "all workloads" when pooled.
    pub fn scope(&self) -> String {
        if self.pooled() {
            return "all workloads, budgets and models".into();
        }
        let mut parts = Vec::new();
        if let Some(w) = &self.workload {
            parts.push(w.clone());
        }
        if let Some(b) = self.budget {
            parts.push(format!("budget {b}"));
        }
        if let Some(m) = &self.model {
            parts.push(m.clone());
        }
        parts.join(" · ")
    }
}

fn label(condition: Condition, run: Option<&str>) -> String {
    match run {
        Some(run) => format!("{condition} [{run}]"),
        None => condition.to_string(),
    }
}

/// Completeness of the pairing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairingReport {
    /// (task, budget) units.
    pub units: u64,
    /// Units where every arm present in the data has an observation.
    pub complete_units: u64,
    /// Tasks (the clusters).
    pub tasks: u64,
    /// Records with the same task, condition, budget and replicate as an earlier one (only the
    /// first is used).
    pub duplicates: u64,
    /// Records merged into an identical replicate's observation (same response and scores).
    pub collapsed_replicates: u64,
    /// Tasks whose `raw` holds for every budget (recorded once, or identical at each budget).
    pub shared_raw_tasks: u64,
    /// Tests in the report's family, over which p-values are Holm-adjusted.
    pub tests: u64,
    /// Per condition: units that lack it.
    pub missing: BTreeMap<Condition, u64>,
    /// Some incomplete units by name, with the conditions they lack.
    pub incomplete_examples: Vec<String>,
}

/// Arms present in the data, in (record set, `Condition::ALL`) order.
pub fn present_arms(dataset: &Dataset) -> Vec<Arm> {
    let mut seen = [[false; 4]; 2];
    for row in &dataset.rows {
        seen[usize::from(row.side.min(1))][cluster::condition_slot(row.condition)] = true;
    }
    let mut out = Vec::new();
    for (side, conditions) in seen.iter().enumerate() {
        for (slot, present) in conditions.iter().enumerate() {
            if *present {
                out.push(Arm {
                    side: side as u8,
                    condition: Condition::ALL[slot],
                });
            }
        }
    }
    out
}

/// Conditions present in the data, in `Condition::ALL` order.
pub fn present_conditions(dataset: &Dataset) -> Vec<Condition> {
    let mut out: Vec<Condition> = present_arms(dataset).iter().map(|a| a.condition).collect();
    out.sort_by_key(|c| cluster::condition_slot(*c));
    out.dedup();
    out
}

/// Pairing completeness over the arms present.
pub fn pairing_report(dataset: &Dataset, clustered: &Clustered) -> PairingReport {
    let present = present_arms(dataset);
    let mut missing: BTreeMap<Condition, u64> = present.iter().map(|a| (a.condition, 0)).collect();
    let (mut units, mut complete) = (0, 0);
    let mut examples = Vec::new();
    for cell in 0..clustered.tasks() {
        let task = clustered.task(cell);
        for budget in cluster::task_budgets(task) {
            units += 1;
            let lacking: Vec<Arm> = present
                .iter()
                .copied()
                .filter(|a| !cluster::holds(task, *a, budget))
                .collect();
            if lacking.is_empty() {
                complete += 1;
                continue;
            }
            for a in &lacking {
                *missing.entry(a.condition).or_default() += 1;
            }
            if examples.len() < INCOMPLETE_LISTED_MAX {
                let names: Vec<String> = lacking
                    .iter()
                    .map(|a| {
                        if present.iter().any(|p| p.side == 1) {
                            format!("{} (set {})", a.condition, a.side + 1)
                        } else {
                            a.condition.to_string()
                        }
                    })
                    .collect();
                let at = budget.map(|b| format!(" budget {b}")).unwrap_or_default();
                examples.push(format!(
                    "{}{at} lacks {}",
                    dataset.cells[cell],
                    names.join(", ")
                ));
            }
        }
    }
    PairingReport {
        units,
        complete_units: complete,
        tasks: clustered.tasks() as u64,
        duplicates: clustered.duplicates,
        collapsed_replicates: clustered.collapsed_replicates,
        shared_raw_tasks: clustered.shared_raw_tasks,
        tests: 0,
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

/// The plan of `--compare-runs`: each condition of the second set against the same condition
/// of the first.
pub fn compare_runs_plan(present: &[Arm]) -> Vec<(Arm, Arm)> {
    present
        .iter()
        .filter(|a| a.side == 0)
        .filter_map(|a| {
            let b = Arm {
                side: 1,
                condition: a.condition,
            };
            present.contains(&b).then_some((b, *a))
        })
        .collect()
}

/// Bootstrap row layout per task: sums of the deltas of every metric, then the baseline's
/// context tokens and cost, then the number of pairs.
const WIDTH: usize = Metric::COUNT + 3;
const BASE_TOKENS: usize = Metric::COUNT;
const BASE_COST: usize = Metric::COUNT + 1;
const PAIRS: usize = Metric::COUNT + 2;

/// A comparison's bootstrap estimates: every metric's delta, then the token and cost reductions.
type Estimates = Vec<Option<Estimate>>;
/// (workload, budget, model) ids of a stratum.
type Stratum = (u32, Option<u64>, u32);
/// A (condition, baseline) pair of observations.
type ObservationPair<'a> = (&'a cluster::Observation, &'a cluster::Observation);

/// Accumulated pairs of one comparison.
#[derive(Default)]
struct Accumulator {
    arms: Option<(Arm, Arm)>,
    stratum: Option<Stratum>,
    /// One row of [`WIDTH`] per task.
    rows: Vec<f64>,
    /// The task (cell) of each row.
    task_ids: Vec<u32>,
    base_sums: [f64; Metric::COUNT],
    cond_sums: [f64; Metric::COUNT],
    pairs: u64,
    /// Discordant pairs of 0/1 metrics: (1 → 0, 0 → 1).
    discordant: [(u64, u64); Metric::COUNT],
    one_pair_per_task: bool,
    binary_scorer: bool,
    missing_baseline: u64,
    missing_condition: u64,
}

impl Accumulator {
    fn new(arms: (Arm, Arm), stratum: Option<Stratum>) -> Self {
        Self {
            arms: Some(arms),
            stratum,
            one_pair_per_task: true,
            binary_scorer: true,
            ..Self::default()
        }
    }

    fn tasks(&self) -> usize {
        self.rows.len() / WIDTH
    }

    fn add_task(&mut self, cell: usize, pairs: &[ObservationPair<'_>], binary: bool) {
        if pairs.is_empty() {
            return;
        }
        self.task_ids.push(cell as u32);
        let mut row = [0.0; WIDTH];
        for (c, b) in pairs {
            for metric in Metric::ALL {
                let i = metric.index();
                row[i] += c.values[i] - b.values[i];
                self.base_sums[i] += b.values[i];
                self.cond_sums[i] += c.values[i];
                let (x, y) = (b.values[i], c.values[i]);
                if x == 1.0 && y == 0.0 {
                    self.discordant[i].0 += 1;
                } else if x == 0.0 && y == 1.0 {
                    self.discordant[i].1 += 1;
                }
            }
            row[BASE_TOKENS] += b.values[Metric::ContextTokens.index()];
            row[BASE_COST] += b.values[Metric::BilledCostUsd.index()];
        }
        row[PAIRS] = pairs.len() as f64;
        self.pairs += pairs.len() as u64;
        self.one_pair_per_task &= pairs.len() == 1;
        self.binary_scorer &= binary;
        self.rows.extend_from_slice(&row);
    }
}

/// Runs every planned comparison, pooled and per stratum, then Holm-adjusts all p-values.
/// One cluster bootstrap over all tasks serves every comparison ([`joint_bootstrap`]).
pub fn compare_all(
    dataset: &Dataset,
    clustered: &Clustered,
    plan: &[(Arm, Arm)],
    labels: &[String],
    options: &ReportOptions,
) -> Vec<Comparison> {
    let binary_cells: Vec<bool> = {
        let mut cache: HashMap<&str, bool> = HashMap::new();
        dataset
            .cells
            .iter()
            .map(|cell| {
                *cache
                    .entry(cell.scorer.as_str())
                    .or_insert_with(|| declared_score_type(&cell.scorer) == Some(ScoreType::Binary))
            })
            .collect()
    };
    let mut pooled: Vec<Accumulator> = plan.iter().map(|p| Accumulator::new(*p, None)).collect();
    let mut strata: Vec<Accumulator> = Vec::new();
    let mut stratum_index: HashMap<(usize, Stratum), usize> = HashMap::new();
    let mut by_budget: Vec<(Option<u64>, Vec<ObservationPair<'_>>)> = Vec::new();
    for (cell, &binary_cell) in binary_cells.iter().enumerate().take(clustered.tasks()) {
        let task = clustered.task(cell);
        let (workload, model) = {
            let row_cell = &dataset.cells[cell];
            (
                dataset
                    .workloads
                    .iter()
                    .position(|w| *w == row_cell.workload)
                    .unwrap_or(0) as u32,
                dataset
                    .models
                    .iter()
                    .position(|m| *m == row_cell.model)
                    .unwrap_or(0) as u32,
            )
        };
        for (p, &(c, b)) in plan.iter().enumerate() {
            by_budget.clear();
            let found = cluster::pair_task(task, c, b, |budget, x, y| match by_budget.last_mut() {
                Some((last, pairs)) if *last == budget => pairs.push((x, y)),
                _ => by_budget.push((budget, vec![(x, y)])),
            });
            let acc = &mut pooled[p];
            acc.missing_baseline += found.missing_baseline;
            acc.missing_condition += found.missing_condition;
            let all: Vec<_> = by_budget
                .iter()
                .flat_map(|(_, v)| v.iter().copied())
                .collect();
            acc.add_task(cell, &all, binary_cell);
            for (budget, pairs) in &by_budget {
                let key = (workload, *budget, model);
                let index = *stratum_index.entry((p, key)).or_insert_with(|| {
                    strata.push(Accumulator::new((c, b), Some(key)));
                    strata.len() - 1
                });
                strata[index].add_task(cell, pairs, binary_cell);
            }
        }
    }
    let distinct_strata: std::collections::BTreeSet<_> =
        strata.iter().filter_map(|a| a.stratum).collect();
    strata.sort_by_key(|a| (a.stratum, a.arms));
    let (pooled_estimates, strata_estimates) =
        joint_bootstrap(&pooled, &strata, clustered.tasks(), options);
    let mut accumulators = pooled;
    let mut estimates = pooled_estimates;
    if distinct_strata.len() > 1 {
        accumulators.extend(strata);
        estimates.extend(strata_estimates);
    }
    let mut comparisons: Vec<Comparison> = accumulators
        .iter()
        .zip(estimates)
        .map(|(acc, estimates)| finish(dataset, acc, &estimates, labels, options))
        .collect();
    // Two Holm families: wall-clock latency apart from the rest. Latency is measured anew on
    // every run (timing noise, a busy machine), and in one family with the quality metrics its
    // tests moved their adjusted p-values: two runs with identical records but latency gave
    // task scores different p_holm, and could flip their significance.
    let latency = |m: &MetricDelta| m.metric == Metric::LatencyMs;
    let alpha = 1.0 - options.confidence;
    for family in [false, true] {
        let p_values: Vec<f64> = comparisons
            .iter()
            .flat_map(|c| c.metrics.iter())
            .filter(|m| latency(m) == family)
            .map(|m| m.test.p_value)
            .collect();
        let adjusted = stats::holm(&p_values);
        let mut k = 0;
        for comparison in &mut comparisons {
            let any_pairs = comparison.pairs > 0;
            for metric in comparison
                .metrics
                .iter_mut()
                .filter(|m| latency(m) == family)
            {
                metric.p_holm = adjusted[k];
                metric.significant = any_pairs && adjusted[k] < alpha;
                k += 1;
            }
        }
    }
    comparisons
}

/// Estimates of every pooled and stratum comparison from one cluster bootstrap over all
/// tasks: each stratum comparison is a segment of sums, and a pooled comparison adds up the
/// segments of its (condition, baseline) — every pair lies in exactly one stratum. Resampling
/// tasks jointly keeps a task's budgets together in pooled estimates, and one pass serves all.
fn joint_bootstrap(
    pooled: &[Accumulator],
    strata: &[Accumulator],
    tasks: usize,
    options: &ReportOptions,
) -> (Vec<Estimates>, Vec<Estimates>) {
    const OUT: usize = Metric::COUNT + 2;
    let mut order: Vec<(u32, u32, usize)> = Vec::new();
    for (segment, acc) in strata.iter().enumerate() {
        for (row, &task) in acc.task_ids.iter().enumerate() {
            order.push((task, segment as u32, row));
        }
    }
    order.sort_unstable();
    let entries: Vec<(u32, u32)> = order.iter().map(|&(t, s, _)| (t, s)).collect();
    let mut values = Vec::with_capacity(order.len() * WIDTH);
    for &(_, segment, row) in &order {
        values.extend_from_slice(&strata[segment as usize].rows[row * WIDTH..(row + 1) * WIDTH]);
    }
    let members: Vec<Vec<usize>> = pooled
        .iter()
        .map(|p| {
            (0..strata.len())
                .filter(|&s| strata[s].arms == p.arms)
                .collect()
        })
        .collect();
    let outputs = |sums: &[f64], out: &mut Vec<f64>| {
        let pairs = sums[PAIRS];
        out.extend(sums[..Metric::COUNT].iter().map(|s| s / pairs));
        out.push(reduction(
            sums[Metric::ContextTokens.index()],
            sums[BASE_TOKENS],
        ));
        out.push(reduction(
            sums[Metric::BilledCostUsd.index()],
            sums[BASE_COST],
        ));
    };
    let all = stats::bootstrap_segments(
        tasks,
        &entries,
        &values,
        WIDTH,
        strata.len(),
        options.resamples,
        options.confidence,
        options.seed,
        |means| {
            let mut out = Vec::with_capacity((pooled.len() + strata.len()) * OUT);
            for segments in &members {
                let mut sums = [0.0; WIDTH];
                for &s in segments {
                    for (sum, v) in sums.iter_mut().zip(&means[s * WIDTH..(s + 1) * WIDTH]) {
                        *sum += v;
                    }
                }
                outputs(&sums, &mut out);
            }
            for segment in means.chunks_exact(WIDTH) {
                outputs(segment, &mut out);
            }
            out
        },
    );
    let mut chunks = all.chunks_exact(OUT).map(<[Option<Estimate>]>::to_vec);
    let pooled_estimates = chunks.by_ref().take(pooled.len()).collect();
    let strata_estimates = chunks.collect();
    (pooled_estimates, strata_estimates)
}

/// Whether a metric is declared binary in this comparison.
fn declared_binary(metric: Metric, binary_scorer: bool) -> bool {
    match metric {
        Metric::TaskScore => binary_scorer,
        other => other.binary(),
    }
}

fn finish(
    dataset: &Dataset,
    acc: &Accumulator,
    estimates: &[Option<Estimate>],
    labels: &[String],
    options: &ReportOptions,
) -> Comparison {
    let (c, b) = acc
        .arms
        .unwrap_or_else(|| unreachable!("accumulators are built with arms"));
    let tasks = acc.tasks();
    let pairs = acc.pairs as f64;
    let metrics: Vec<MetricDelta> = Metric::ALL
        .into_iter()
        .map(|metric| {
            let i = metric.index();
            let test = if acc.pairs == 0 {
                stats::wilcoxon_signed_rank(&[])
            } else if declared_binary(metric, acc.binary_scorer) && acc.one_pair_per_task {
                let (x, y) = acc.discordant[i];
                stats::mcnemar_exact(x, y)
            } else {
                let differences: Vec<f64> = acc
                    .rows
                    .chunks_exact(WIDTH)
                    .map(|row| row[i] / row[PAIRS])
                    .collect();
                stats::wilcoxon_signed_rank(&differences)
            };
            MetricDelta {
                metric,
                baseline_mean: (acc.pairs > 0).then(|| acc.base_sums[i] / pairs),
                condition_mean: (acc.pairs > 0).then(|| acc.cond_sums[i] / pairs),
                delta: estimates.get(i).copied().flatten(),
                p_holm: test.p_value,
                significant: false,
                test,
            }
        })
        .collect();
    let token_reduction = estimates.get(Metric::COUNT).copied().flatten();
    let cost_reduction = estimates.get(Metric::COUNT + 1).copied().flatten();
    let verdict = verdict(tasks, &metrics, token_reduction, options.tolerance);
    let run = |arm: Arm| labels.get(usize::from(arm.side)).cloned();
    let (workload, budget, model) = match acc.stratum {
        Some((w, budget, m)) => (
            dataset.workloads.get(w as usize).cloned(),
            budget,
            dataset.models.get(m as usize).cloned(),
        ),
        None => (None, None, None),
    };
    Comparison {
        condition: c.condition,
        baseline: b.condition,
        condition_run: run(c),
        baseline_run: run(b),
        workload,
        budget,
        model,
        pairs: acc.pairs,
        tasks: tasks as u64,
        missing_baseline: acc.missing_baseline,
        missing_condition: acc.missing_condition,
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
    // Error trials score zero on both sides, so two sides that only errored have equal
    // "quality" and would pass every delta above without one answer having been scored.
    if let Some(errors) = metrics.iter().find(|m| m.metric == Metric::ErrorRate) {
        for (side, mean) in [
            ("condition", errors.condition_mean),
            ("baseline", errors.baseline_mean),
        ] {
            if mean.is_some_and(|m| m >= 1.0) {
                check(
                    false,
                    format!("every paired trial of the {side} errored: no quality was measured"),
                );
            }
        }
    }
    Verdict {
        quality_preserving_context_win: win,
        reasons,
    }
}

#[cfg(test)]
mod tests;
