//! Per-task scores per gate unit (workload, workload version, budget, model, condition): what a
//! baseline stores so `svc gate` can pair a run with it task by task. Replicates of a task are
//! averaged (identical ones were already collapsed), errors count as failures.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Metric;
use super::cluster::{self, Arm, Clustered};
use super::input::Dataset;
use crate::trial::record::Condition;

/// The gate's unit of comparison.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GateUnit {
    pub workload: String,
    pub workload_version: String,
    /// `None`: `raw` recorded once for every budget.
    pub budget: Option<u64>,
    pub model: String,
    pub condition: Condition,
}

impl std::fmt::Display for GateUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}@{} budget {} model {} {}",
            self.workload,
            self.workload_version,
            self.budget
                .map_or_else(|| "any".to_string(), |b| b.to_string()),
            self.model,
            self.condition
        )
    }
}

/// One unit's tasks: task id → values in the order of [`TaskScoreTable::metrics`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnitScores {
    #[serde(flatten)]
    pub unit: GateUnit,
    pub tasks: BTreeMap<String, Vec<f64>>,
}

/// Per-task scores of every unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskScoreTable {
    pub metrics: Vec<Metric>,
    pub units: Vec<UnitScores>,
}

impl TaskScoreTable {
    /// Why a stored table cannot be gated against, if it cannot: a metric missing from
    /// `metrics` would silently go ungated, and a vector of another length would be read
    /// against the wrong names.
    pub fn check(&self) -> Result<(), String> {
        let missing: Vec<String> = Metric::ALL
            .iter()
            .filter(|m| self.column(**m).is_none())
            .map(ToString::to_string)
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "task_scores.metrics lacks {}; write the baseline again with `svc gate --update-baseline`",
                missing.join(", ")
            ));
        }
        if self.metrics.len() != Metric::ALL.len() {
            return Err(format!(
                "task_scores.metrics names {} metrics ({} distinct are known); write the baseline again with `svc gate --update-baseline`",
                self.metrics.len(),
                Metric::ALL.len()
            ));
        }
        for unit in &self.units {
            if let Some((task, values)) = unit
                .tasks
                .iter()
                .find(|(_, v)| v.len() != self.metrics.len())
            {
                return Err(format!(
                    "task_scores unit {}, task {task:?}: {} values for {} metrics",
                    unit.unit,
                    values.len(),
                    self.metrics.len()
                ));
            }
        }
        Ok(())
    }

    /// Column of `metric` in the task vectors.
    pub fn column(&self, metric: Metric) -> Option<usize> {
        self.metrics.iter().position(|m| *m == metric)
    }
}

/// The task id a unit keys by: the workload's task id, plus provider and scorer when a unit
/// mixes them (they are part of the task cell).
fn task_key(dataset: &Dataset, cell: usize) -> String {
    let c = &dataset.cells[cell];
    format!("{} {}/{}", c.task_id, c.provider, c.scorer)
}

/// Builds the table from the clustered observations of the first record set.
pub fn table(dataset: &Dataset, clustered: &Clustered) -> TaskScoreTable {
    let mut units: BTreeMap<GateUnit, BTreeMap<String, Vec<f64>>> = BTreeMap::new();
    for cell in 0..clustered.tasks() {
        let task = clustered.task(cell);
        let info = &dataset.cells[cell];
        for condition in Condition::ALL {
            let arm = Arm { side: 0, condition };
            for (budget, values) in cluster::task_means(task, arm) {
                let unit = GateUnit {
                    workload: info.workload.clone(),
                    workload_version: info.workload_version.clone(),
                    budget,
                    model: info.model.clone(),
                    condition,
                };
                units
                    .entry(unit)
                    .or_default()
                    .insert(task_key(dataset, cell), values.to_vec());
            }
        }
    }
    TaskScoreTable {
        metrics: Metric::ALL.to_vec(),
        units: units
            .into_iter()
            .map(|(unit, tasks)| UnitScores { unit, tasks })
            .collect(),
    }
}
