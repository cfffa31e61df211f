//! A quick look at several runs of one workload side by side: per run, the `svc`-condition
//! means (context tokens, task score, evidence recall, error share) and the paired mean
//! difference in task score against a reference run, over the (task, replicate) units both
//! hold. `svc benchmark` prints it for its selector settings; the paired statistics with
//! intervals are `svc report --compare-runs`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::trial::{Condition, Outcome, TrialRecord};

/// One run's row.
#[derive(Debug, Clone, PartialEq)]
pub struct ArmRow {
    pub run_dir: PathBuf,
    /// The manifest's selector setting (`svc` when the manifest predates it).
    pub selector: String,
    pub trials: usize,
    pub errors: usize,
    pub context_tokens: f64,
    pub task_score: f64,
    pub evidence_recall: f64,
    /// Mean of (this run − reference) task score over shared units, and how many.
    pub paired_delta: Option<(f64, usize)>,
}

/// Why a run could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ArmError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: not a trial record: {message}")]
    Record {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

fn svc_records(dir: &Path) -> Result<Vec<TrialRecord>, ArmError> {
    let path = dir.join("trials.jsonl");
    let text = std::fs::read_to_string(&path).map_err(|source| ArmError::Read {
        path: path.clone(),
        source,
    })?;
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record: TrialRecord = serde_json::from_str(line).map_err(|e| ArmError::Record {
            path: path.clone(),
            line: index + 1,
            message: e.to_string(),
        })?;
        if record.condition == Condition::Svc {
            out.push(record);
        }
    }
    Ok(out)
}

/// Rows for `runs` (the first is the reference of the paired differences). Errors count as
/// failures: task score and evidence recall 0, as their records say.
pub fn arm_rows(runs: &[PathBuf]) -> Result<Vec<ArmRow>, ArmError> {
    let mut rows = Vec::new();
    let mut reference: Option<HashMap<(String, u64), f64>> = None;
    for dir in runs {
        let records = svc_records(dir)?;
        let n = records.len().max(1) as f64;
        let mean = |f: &dyn Fn(&TrialRecord) -> f64| records.iter().map(f).sum::<f64>() / n;
        let scores: HashMap<(String, u64), f64> = records
            .iter()
            .map(|r| ((r.task_id.clone(), r.replicate), r.task_score))
            .collect();
        let paired_delta = reference.as_ref().map(|base| {
            let shared: Vec<f64> = scores
                .iter()
                .filter_map(|(key, score)| base.get(key).map(|b| score - b))
                .collect();
            let count = shared.len();
            (shared.iter().sum::<f64>() / count.max(1) as f64, count)
        });
        rows.push(ArmRow {
            run_dir: dir.clone(),
            selector: super::run::read_manifest(dir)
                .map(|m| m.selector)
                .unwrap_or_else(|| "svc".into()),
            trials: records.len(),
            errors: records
                .iter()
                .filter(|r| r.outcome == Outcome::Error)
                .count(),
            context_tokens: mean(&|r| r.context_tokens as f64),
            task_score: mean(&|r| r.task_score),
            evidence_recall: mean(&|r| r.evidence_recall),
            paired_delta,
        });
        if reference.is_none() {
            reference = Some(scores);
        }
    }
    Ok(rows)
}
