//! Clustered pairing: the records of each task become observations per arm (record set ×
//! condition), budget and replicate, and two arms are paired within a task.
//!
//! Why: trials of one task are not independent. Byte-identical replicates of a deterministic
//! runner, and `raw` run once per budget, would otherwise narrow intervals for free. So:
//! - replicates of one (task, arm, budget) whose responses and quality scores are all identical
//!   collapse into one observation (their token, cost and latency values are averaged);
//! - `raw` recorded once per task (a `task_id` without the `@b<budget>` suffix) holds for every
//!   budget of the task; `raw` recorded per budget with identical responses and scores (older
//!   runs) collapses to that same single observation;
//! - the task is the cluster of the bootstrap and the unit of the tests (see `paired`).

use rayon::prelude::*;

use super::Metric;
use super::input::Dataset;
use crate::trial::record::Condition;

/// Quality metrics that must agree (with the response) for replicates to collapse.
const QUALITY: [Metric; 4] = [
    Metric::TaskScore,
    Metric::EvidenceRecall,
    Metric::UnsupportedClaimRate,
    Metric::ErrorRate,
];

/// One arm of a comparison: a condition in one record set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Arm {
    pub side: u8,
    pub condition: Condition,
}

impl Arm {
    fn code(self) -> u8 {
        self.side * 4 + condition_slot(self.condition) as u8
    }
}

pub fn condition_slot(condition: Condition) -> usize {
    Condition::ALL
        .iter()
        .position(|c| *c == condition)
        .unwrap_or(0)
}

/// One observation of a task under an arm.
#[derive(Debug, Clone)]
pub struct Observation {
    pub arm: u8,
    /// `None`: holds for every budget of the task.
    pub budget: Option<u64>,
    /// `None` for collapsed identical replicates.
    pub replicate: Option<u64>,
    pub response: u64,
    pub values: [f64; Metric::COUNT],
}

/// Every observation, grouped by task.
#[derive(Debug, Default)]
pub struct Clustered {
    /// Sorted by (cell, arm, budget, replicate).
    pub observations: Vec<Observation>,
    /// `observations[offsets[c]..offsets[c + 1]]` belong to cell `c`.
    pub offsets: Vec<usize>,
    /// Records with the same task, arm, budget and replicate as an earlier one (left out).
    pub duplicates: u64,
    /// Records merged into an identical replicate's observation.
    pub collapsed_replicates: u64,
    /// Tasks whose `raw` holds for every budget (recorded once, or identical per budget).
    pub shared_raw_tasks: u64,
}

impl Clustered {
    pub fn task(&self, cell: usize) -> &[Observation] {
        &self.observations[self.offsets[cell]..self.offsets[cell + 1]]
    }

    pub fn tasks(&self) -> usize {
        self.offsets.len().saturating_sub(1)
    }
}

fn same_quality(a: &[f64; Metric::COUNT], b: &[f64; Metric::COUNT]) -> bool {
    QUALITY.iter().all(|m| a[m.index()] == b[m.index()])
}

/// Per-metric means; a metric whose values are all equal keeps that exact value (a sum and a
/// division would move it by an ulp and break ties in the tests).
fn mean_values<'a>(values: impl Iterator<Item = &'a [f64; Metric::COUNT]>) -> [f64; Metric::COUNT] {
    let mut sums = [0.0; Metric::COUNT];
    let mut first: Option<[f64; Metric::COUNT]> = None;
    let mut equal = [true; Metric::COUNT];
    let mut n = 0.0;
    for v in values {
        let head = *first.get_or_insert(*v);
        for i in 0..Metric::COUNT {
            sums[i] += v[i];
            equal[i] &= v[i] == head[i];
        }
        n += 1.0;
    }
    let head = first.unwrap_or([f64::NAN; Metric::COUNT]);
    std::array::from_fn(|i| if equal[i] { head[i] } else { sums[i] / n })
}

/// Builds the observations of every task of `dataset`.
pub fn cluster(dataset: &Dataset) -> Clustered {
    let rows = &dataset.rows;
    let mut order: Vec<u32> = (0..rows.len() as u32).collect();
    order.par_sort_unstable_by_key(|&i| {
        let r = &rows[i as usize];
        (
            r.cell,
            Arm {
                side: r.side,
                condition: r.condition,
            }
            .code(),
            r.budget,
            r.replicate,
            i,
        )
    });
    let mut out = Clustered {
        offsets: Vec::with_capacity(dataset.cells.len() + 1),
        observations: Vec::with_capacity(rows.len()),
        ..Clustered::default()
    };
    let raw = condition_slot(Condition::Raw) as u8;
    let arm_of = |r: &super::input::Row| {
        Arm {
            side: r.side,
            condition: r.condition,
        }
        .code()
    };
    out.offsets.push(0);
    let mut start = 0;
    for cell in 0..dataset.cells.len() as u32 {
        let from = out.observations.len();
        while start < order.len() && rows[order[start] as usize].cell == cell {
            let first = &rows[order[start] as usize];
            let arm = arm_of(first);
            let mut end = start;
            while end < order.len() {
                let r = &rows[order[end] as usize];
                if r.cell != cell || arm_of(r) != arm || r.budget != first.budget {
                    break;
                }
                end += 1;
            }
            push_group(&mut out, rows, &order[start..end], arm);
            start = end;
        }
        fold_raw(&mut out, from, raw);
        out.offsets.push(out.observations.len());
    }
    out
}

/// One (task, arm, budget) group: duplicate replicates dropped, then collapsed if identical.
fn push_group(out: &mut Clustered, rows: &[super::input::Row], indices: &[u32], arm: u8) {
    let mut group: Vec<&super::input::Row> = Vec::with_capacity(indices.len());
    for &i in indices {
        let r = &rows[i as usize];
        if group
            .last()
            .is_some_and(|last| last.replicate == r.replicate)
        {
            out.duplicates += 1;
        } else {
            group.push(r);
        }
    }
    let head = group[0];
    let identical = group.len() > 1
        && group
            .iter()
            .all(|r| r.response == head.response && same_quality(&r.values, &head.values));
    if identical {
        out.collapsed_replicates += group.len() as u64 - 1;
        out.observations.push(Observation {
            arm,
            budget: head.budget,
            replicate: None,
            response: head.response,
            values: mean_values(group.iter().map(|r| &r.values)),
        });
    } else {
        for r in &group {
            out.observations.push(Observation {
                arm,
                budget: r.budget,
                replicate: Some(r.replicate),
                response: r.response,
                values: r.values,
            });
        }
    }
}

/// Within the observations from `from` (one task), replaces each record set's `raw` at several
/// budgets by one budget-free observation when they are single and identical; counts tasks
/// whose raw is budget-free.
fn fold_raw(out: &mut Clustered, from: usize, raw_slot: u8) {
    for side in 0..2u8 {
        let arm = side * 4 + raw_slot;
        let positions: Vec<usize> = out.observations[from..]
            .iter()
            .enumerate()
            .filter(|(_, o)| o.arm == arm)
            .map(|(i, _)| from + i)
            .collect();
        if positions.is_empty() {
            continue;
        }
        let observations = &out.observations;
        let budgets: Vec<Option<u64>> = positions.iter().map(|&i| observations[i].budget).collect();
        if budgets.iter().any(Option::is_none) {
            // Budget-free raw beside budgeted conditions: recorded once for every budget.
            if observations[from..].iter().any(|o| o.budget.is_some()) {
                out.shared_raw_tasks += 1;
            }
            continue;
        }
        let mut distinct = budgets.clone();
        distinct.dedup();
        let one_each = distinct.len() == budgets.len();
        let head = &observations[positions[0]];
        let identical = positions.iter().all(|&i| {
            observations[i].response == head.response
                && same_quality(&observations[i].values, &head.values)
        });
        if distinct.len() < 2 || !one_each || !identical {
            continue;
        }
        let merged = Observation {
            arm,
            budget: None,
            replicate: head.replicate,
            response: head.response,
            values: mean_values(positions.iter().map(|&i| &observations[i].values)),
        };
        out.collapsed_replicates += positions.len() as u64 - 1;
        out.shared_raw_tasks += 1;
        // Positions are contiguous (sorted by arm): replace the run by the merged observation.
        out.observations
            .splice(positions[0]..=positions[positions.len() - 1], [merged]);
        // The budget-free observation sorts first within its arm.
    }
}

/// Observations of `arm` in a task slice (contiguous, sorted by budget then replicate).
fn arm_slice(task: &[Observation], arm: u8) -> &[Observation] {
    let start = task.partition_point(|o| o.arm < arm);
    let end = task.partition_point(|o| o.arm <= arm);
    &task[start..end]
}

fn at_budget(observations: &[Observation], budget: Option<u64>) -> &[Observation] {
    let start = observations.partition_point(|o| o.budget < budget);
    let end = observations.partition_point(|o| o.budget <= budget);
    &observations[start..end]
}

/// What pairing one task found for a comparison.
#[derive(Debug, Default, Clone, Copy)]
pub struct TaskPairing {
    /// Budgets where the condition had observations but the baseline none, and the reverse.
    pub missing_baseline: u64,
    pub missing_condition: u64,
}

/// The budgets of a task: every specific budget of either arm, or `[None]` when both arms are
/// budget-free.
fn budgets(a: &[Observation], b: &[Observation]) -> Vec<Option<u64>> {
    let mut out: Vec<Option<u64>> = a
        .iter()
        .chain(b)
        .filter_map(|o| o.budget.map(Some))
        .collect();
    out.sort_unstable();
    out.dedup();
    if out.is_empty() {
        out.push(None);
    }
    out
}

/// The observations of `observations` that hold at `budget`: those recorded at it, else the
/// budget-free ones.
fn holding_at(observations: &[Observation], budget: Option<u64>) -> &[Observation] {
    let exact = at_budget(observations, budget);
    if exact.is_empty() && budget.is_some() {
        at_budget(observations, None)
    } else {
        exact
    }
}

/// Calls `pair(budget, condition, baseline)` for every pair of `condition` vs `baseline` in one
/// task: per budget, the observations holding there; replicates match by number, and a
/// single (or collapsed) observation pairs with each of the other side's.
pub fn pair_task<'a>(
    task: &'a [Observation],
    condition: Arm,
    baseline: Arm,
    mut pair: impl FnMut(Option<u64>, &'a Observation, &'a Observation),
) -> TaskPairing {
    let c_all = arm_slice(task, condition.code());
    let b_all = arm_slice(task, baseline.code());
    let mut result = TaskPairing::default();
    if c_all.is_empty() && b_all.is_empty() {
        return result;
    }
    for budget in budgets(c_all, b_all) {
        let c = holding_at(c_all, budget);
        let b = holding_at(b_all, budget);
        match (c.is_empty(), b.is_empty()) {
            (true, true) => continue,
            (false, true) => {
                result.missing_baseline += 1;
                continue;
            }
            (true, false) => {
                result.missing_condition += 1;
                continue;
            }
            (false, false) => {}
        }
        if c.len() == 1 || b.len() == 1 {
            for x in c {
                for y in b {
                    pair(budget, x, y);
                }
            }
        } else {
            let (mut i, mut j) = (0, 0);
            while i < c.len() && j < b.len() {
                match c[i].replicate.cmp(&b[j].replicate) {
                    std::cmp::Ordering::Less => i += 1,
                    std::cmp::Ordering::Greater => j += 1,
                    std::cmp::Ordering::Equal => {
                        pair(budget, &c[i], &b[j]);
                        i += 1;
                        j += 1;
                    }
                }
            }
        }
    }
    result
}

/// Whether `arm` has an observation holding at `budget` in the task.
pub fn holds(task: &[Observation], arm: Arm, budget: Option<u64>) -> bool {
    !holding_at(arm_slice(task, arm.code()), budget).is_empty()
}

/// The budgets of a task over all its observations (`[None]` when all are budget-free).
pub fn task_budgets(task: &[Observation]) -> Vec<Option<u64>> {
    budgets(task, &[])
}

/// Per-task means of one arm at each budget where it holds: (budget, replicate-averaged
/// values). Used for the gate's per-task scores.
pub fn task_means(task: &[Observation], arm: Arm) -> Vec<(Option<u64>, [f64; Metric::COUNT])> {
    let observations = arm_slice(task, arm.code());
    let mut out = Vec::new();
    let mut i = 0;
    while i < observations.len() {
        let budget = observations[i].budget;
        let group = at_budget(observations, budget);
        out.push((budget, mean_values(group.iter().map(|o| &o.values))));
        i += group.len();
    }
    out
}
