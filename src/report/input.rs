//! Reading trial records for a report: resolving inputs (files, run directories, shard
//! folders), validating every record with the trial module's rules, and keeping a compact
//! columnar view of the valid ones. Invalid records are excluded, counted and remembered with
//! `file:line` and the first broken rule.
//!
//! Records are parsed in parallel batches: the typed parse (`TrialRecord`'s own checks plus the
//! response-hash integrity rule) is the fast path; only a record that fails it goes through the
//! JSON Schema validator, to name the broken rule the way `svc records validate` does.

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{Metric, ReportError};
use crate::trial::read::{RawRecord, RecordReader};
use crate::trial::record::{Condition, CostSource, Outcome, TrialRecord};
use crate::trial::validate::RecordValidator;

const BATCH: usize = 16_384;
/// Invalid records listed individually; the rest are counted.
pub const INVALID_LISTED_MAX: usize = 100;

/// One input file and what it held.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileSummary {
    pub path: String,
    pub valid: u64,
    pub invalid: u64,
    /// The budget from the run's `manifest.json`, when it names exactly one.
    pub budget: Option<u64>,
}

/// An excluded record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvalidRecord {
    pub file: String,
    pub line: usize,
    pub message: String,
}

/// One valid record, reduced to what the report needs.
#[derive(Debug, Clone)]
pub struct Row {
    /// Index into [`Dataset::pairing_units`].
    pub unit: u32,
    pub condition: Condition,
    pub workload: u32,
    pub model: u32,
    pub budget: Option<u64>,
    pub success: bool,
    pub reasoning_tokens: u64,
    /// Indexed by [`Metric::index`].
    pub values: [f64; Metric::COUNT],
}

/// The pairing unit, owned: (workload, workload_version, task_id, provider, model, replicate,
/// scorer), plus the budget the record ran at, since trials at different budgets are not pairs.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PairingUnit {
    pub workload: String,
    pub workload_version: String,
    pub task_id: String,
    pub provider: String,
    pub model: String,
    pub replicate: u64,
    pub scorer: String,
    pub budget: Option<u64>,
}

impl std::fmt::Display for PairingUnit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}@{}/{} {}/{} replicate {} scorer {}",
            self.workload,
            self.workload_version,
            self.task_id,
            self.provider,
            self.model,
            self.replicate,
            self.scorer
        )?;
        if let Some(budget) = self.budget {
            write!(f, " budget {budget}")?;
        }
        Ok(())
    }
}

/// The valid records of all inputs, plus the account of what was left out.
#[derive(Debug, Default)]
pub struct Dataset {
    pub files: Vec<FileSummary>,
    pub rows: Vec<Row>,
    pub invalid: Vec<InvalidRecord>,
    pub invalid_count: u64,
    /// Records per `schema_version` value, including invalid records that carry one.
    pub schema_versions: BTreeMap<String, u64>,
    pub pairing_units: Vec<PairingUnit>,
    pub workloads: Vec<String>,
    pub models: Vec<String>,
    /// Valid records whose cost is a zero-cost fixture (so real cost is unknown).
    pub zero_cost_records: u64,
}

/// Expands inputs into record files: a file is used as is; a directory contributes every
/// `*.jsonl`/`*.ndjson`/`*.parquet` file below it (a run directory's `trials.jsonl` — not its
/// `notes.jsonl` — shard files, or a whole `runs/` tree), sorted so reports are reproducible.
pub fn resolve_inputs(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, ReportError> {
    if inputs.is_empty() {
        return Err(ReportError::NoInputs);
    }
    let mut files = Vec::new();
    for input in inputs {
        let metadata = std::fs::metadata(input).map_err(|source| ReportError::Io {
            path: input.clone(),
            source,
        })?;
        if metadata.is_dir() {
            let before = files.len();
            collect_record_files(input, &mut files)?;
            if files.len() == before {
                return Err(ReportError::NoRecordFiles {
                    path: input.clone(),
                });
            }
        } else {
            files.push(input.clone());
        }
    }
    Ok(files)
}

fn collect_record_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), ReportError> {
    let io_error = |source| ReportError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(io_error)?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(io_error)?;
    entries.sort();
    // A run directory (it has a manifest) keeps its records in trials.jsonl; its other JSONL
    // files (notes.jsonl) describe trials but are not records.
    let run_directory = dir.join("manifest.json").is_file();
    for path in entries {
        if run_directory && path.is_file() && path.file_name() != Some("trials.jsonl".as_ref()) {
            continue;
        }
        if path.is_dir() {
            collect_record_files(&path, out)?;
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| e == "jsonl" || e == "ndjson" || e == "parquet")
        {
            out.push(path);
        }
    }
    Ok(())
}

/// The single budget a run ran at, from `manifest.json` beside the records (`budget: N` or
/// `budgets: [N]`). Several budgets in one file cannot be told apart per record, so they give
/// `None`.
fn manifest_budget(file: &Path) -> Option<u64> {
    let manifest = file.parent()?.join("manifest.json");
    let text = std::fs::read_to_string(manifest).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    if let Some(budget) = value.get("budget").and_then(serde_json::Value::as_u64) {
        return Some(budget);
    }
    match value.get("budgets")?.as_array()?.as_slice() {
        [single] => single.as_u64(),
        _ => None,
    }
}

/// The budgets a run's once-per-task `raw` trials pair with: the manifest's `budgets` when it
/// says `raw_once_per_task`, else none.
fn manifest_raw_budgets(file: &Path) -> Vec<u64> {
    let Some(manifest) = file.parent().map(|dir| dir.join("manifest.json")) else {
        return Vec::new();
    };
    let Ok(text) = std::fs::read_to_string(manifest) else {
        return Vec::new();
    };
    let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Vec::new();
    };
    if value
        .get("raw_once_per_task")
        .and_then(serde_json::Value::as_bool)
        != Some(true)
    {
        return Vec::new();
    }
    value
        .get("budgets")
        .and_then(serde_json::Value::as_array)
        .map(|budgets| {
            budgets
                .iter()
                .filter_map(serde_json::Value::as_u64)
                .collect()
        })
        .unwrap_or_default()
}

/// A valid record split, on the parallel side, into its pairing unit (strings moved, not
/// copied) and the row without its interned ids.
struct ValidRecord {
    unit: KeyedUnit,
    row: Row,
    zero_cost: bool,
    schema_version: String,
}

enum Parsed {
    Valid(Box<ValidRecord>),
    Invalid {
        line: usize,
        message: String,
        schema_version: Option<String>,
    },
}

fn parse(raw: RawRecord, validator: &RecordValidator, budget: Option<u64>) -> Parsed {
    let text = match raw.text {
        Ok(text) => text,
        Err(message) => {
            return Parsed::Invalid {
                line: raw.line,
                message,
                schema_version: None,
            };
        }
    };
    match crate::trial::accept::check(validator, &text) {
        Ok(record) => Parsed::Valid(Box::new(split(record, budget))),
        Err(problems) => {
            // `accept` never returns an empty list.
            let message = match problems.first() {
                Some(problem) => {
                    let more = match problems.len() {
                        1 => String::new(),
                        n => format!(" (and {} more)", n - 1),
                    };
                    format!(
                        "{}: {}: {}{more}",
                        if problem.pointer.is_empty() {
                            "/"
                        } else {
                            &problem.pointer
                        },
                        problem.rule_id,
                        problem.message
                    )
                }
                None => "refused".to_string(),
            };
            let schema_version = serde_json::from_str::<serde_json::Value>(&text)
                .ok()
                .and_then(|v| v.get("schema_version")?.as_str().map(str::to_string));
            Parsed::Invalid {
                line: raw.line,
                message,
                schema_version,
            }
        }
    }
}

#[derive(Default)]
struct Interner {
    ids: HashMap<String, u32>,
    names: Vec<String>,
}

impl Interner {
    fn id(&mut self, name: &str) -> u32 {
        if let Some(id) = self.ids.get(name) {
            return *id;
        }
        let id = self.names.len() as u32;
        self.ids.insert(name.to_string(), id);
        self.names.push(name.to_string());
        id
    }
}

/// A pairing unit with its hash computed on the parallel side, so the sequential side only
/// compares.
struct KeyedUnit {
    hash: u64,
    unit: PairingUnit,
}

impl PartialEq for KeyedUnit {
    fn eq(&self, other: &Self) -> bool {
        self.hash == other.hash && self.unit == other.unit
    }
}

impl Eq for KeyedUnit {}

impl std::hash::Hash for KeyedUnit {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.hash);
    }
}

/// Passes a precomputed 64-bit hash through (only `KeyedUnit` is hashed with it).
#[derive(Default)]
struct PassThrough(u64);

impl std::hash::Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Not reached for KeyedUnit; fold anything else in so the hasher stays correct.
        for byte in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*byte);
        }
    }
    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

type UnitMap = HashMap<KeyedUnit, u32, std::hash::BuildHasherDefault<PassThrough>>;

fn unit_hash(unit: &PairingUnit) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    unit.hash(&mut hasher);
    hasher.finish()
}

/// The sequential side of loading: ids for units, workloads and models, and the counts.
#[derive(Default)]
struct Absorber {
    dataset: Dataset,
    units: UnitMap,
    /// Per unit: interned workload and model.
    unit_names: Vec<(u32, u32)>,
    workloads: Interner,
    models: Interner,
    /// `raw` trials run once per task whose budgets no manifest names (record files on their
    /// own, Parquet exports): paired at the end with every budget the other conditions of
    /// their task ran at.
    pending_raw: Vec<(PairingUnit, Row)>,
}

impl Absorber {
    /// Adds one row under its pairing unit.
    fn insert(&mut self, unit: KeyedUnit, mut row: Row) {
        let dataset = &mut self.dataset;
        let id = match self.units.get(&unit) {
            Some(id) => *id,
            None => {
                let id = dataset.pairing_units.len() as u32;
                self.unit_names.push((
                    self.workloads.id(&unit.unit.workload),
                    self.models.id(&unit.unit.model),
                ));
                dataset.pairing_units.push(unit.unit.clone());
                self.units.insert(unit, id);
                id
            }
        };
        (row.workload, row.model) = self.unit_names[id as usize];
        row.unit = id;
        dataset.rows.push(row);
    }

    /// Pairs the pending once-per-task `raw` rows with every budget their task ran at
    /// elsewhere in the inputs; a raw row whose task ran at no budget stays as it is.
    fn finish_pending_raw(&mut self) {
        type TaskKey = (String, String, String, String, String, u64, String);
        let key = |unit: &PairingUnit, task: &str| -> TaskKey {
            (
                unit.workload.clone(),
                unit.workload_version.clone(),
                task.to_string(),
                unit.provider.clone(),
                unit.model.clone(),
                unit.replicate,
                unit.scorer.clone(),
            )
        };
        let mut budgets: HashMap<TaskKey, std::collections::BTreeSet<u64>> = HashMap::new();
        for unit in &self.dataset.pairing_units {
            if let (task, Some(budget)) = crate::harness::run::split_task_id(&unit.task_id) {
                budgets
                    .entry(key(unit, task))
                    .or_default()
                    .insert(budget as u64);
            }
        }
        for (unit, row) in std::mem::take(&mut self.pending_raw) {
            let found = budgets.get(&key(&unit, &unit.task_id)).cloned();
            match found {
                Some(found) if !found.is_empty() => {
                    for budget in found {
                        let mut unit = unit.clone();
                        unit.task_id =
                            crate::harness::run::budget_task_id(&unit.task_id, budget as usize);
                        unit.budget = Some(budget);
                        let hash = unit_hash(&unit);
                        let mut row = row.clone();
                        row.budget = Some(budget);
                        self.insert(KeyedUnit { hash, unit }, row);
                    }
                }
                _ => {
                    let hash = unit_hash(&unit);
                    self.insert(KeyedUnit { hash, unit }, row);
                }
            }
        }
    }

    fn absorb(&mut self, parsed: Vec<Parsed>, summary: &mut FileSummary, raw_budgets: &[u64]) {
        for item in parsed {
            let dataset = &mut self.dataset;
            match item {
                Parsed::Valid(valid) => {
                    let ValidRecord {
                        unit,
                        row,
                        zero_cost,
                        schema_version,
                    } = *valid;
                    summary.valid += 1;
                    if zero_cost {
                        dataset.zero_cost_records += 1;
                    }
                    match dataset.schema_versions.get_mut(&schema_version) {
                        Some(count) => *count += 1,
                        None => {
                            dataset.schema_versions.insert(schema_version, 1);
                        }
                    }
                    // A `raw` trial run once per task (no budget in its task_id) pairs with
                    // the trials of every budget of its run.
                    let once = row.condition == Condition::Raw
                        && crate::harness::run::split_task_id(&unit.unit.task_id)
                            .1
                            .is_none();
                    if once && raw_budgets.is_empty() {
                        self.pending_raw.push((unit.unit, row));
                        continue;
                    }
                    if once {
                        for &budget in raw_budgets {
                            let mut unit = unit.unit.clone();
                            unit.task_id =
                                crate::harness::run::budget_task_id(&unit.task_id, budget as usize);
                            // The other conditions' units carry the budget of their task_id
                            // suffix (see `split`).
                            unit.budget = Some(budget);
                            let hash = unit_hash(&unit);
                            let mut row = row.clone();
                            row.budget = Some(budget);
                            self.insert(KeyedUnit { hash, unit }, row);
                        }
                    } else {
                        self.insert(unit, row);
                    }
                }
                Parsed::Invalid {
                    line,
                    message,
                    schema_version,
                } => {
                    summary.invalid += 1;
                    dataset.invalid_count += 1;
                    if let Some(version) = schema_version {
                        *dataset.schema_versions.entry(version).or_default() += 1;
                    }
                    if dataset.invalid.len() < INVALID_LISTED_MAX {
                        dataset.invalid.push(InvalidRecord {
                            file: summary.path.clone(),
                            line,
                            message,
                        });
                    }
                }
            }
        }
    }
}

/// Batches in flight between the pipeline stages.
const PIPELINE_DEPTH: usize = 2;

/// Reads and validates every record of `files`.
///
/// A three-stage pipeline per file: this thread reads raw records (the reader is not `Send`),
/// a scoped thread parses batches on the rayon pool, and another absorbs them in order, so
/// reading and bookkeeping overlap the parallel parse.
pub fn load(files: &[PathBuf]) -> Result<Dataset, ReportError> {
    let validator = RecordValidator::new()?;
    let mut absorber = Absorber::default();
    for path in files {
        let io_error = |source| ReportError::Io {
            path: path.clone(),
            source,
        };
        // Parquet (as `svc records export` writes it) becomes JSON text rows, so both formats
        // go through the same validation.
        let reader: Box<dyn Iterator<Item = std::io::Result<RawRecord>>> =
            if crate::trial::parquet::is_parquet(path) {
                let bytes = std::fs::read(path).map_err(io_error)?;
                let rows = crate::trial::parquet::raw_records(&bytes).map_err(|error| {
                    ReportError::Parquet {
                        path: path.clone(),
                        message: error.to_string(),
                    }
                })?;
                Box::new(rows.into_iter().map(Ok))
            } else {
                let file = File::open(path).map_err(io_error)?;
                Box::new(
                    RecordReader::new(
                        Box::new(BufReader::with_capacity(1 << 20, file)),
                        path.file_name().and_then(|n| n.to_str()),
                    )
                    .map_err(io_error)?,
                )
            };
        let budget = manifest_budget(path);
        let raw_budgets = manifest_raw_budgets(path);
        let mut summary = FileSummary {
            path: path.to_string_lossy().to_string(),
            valid: 0,
            invalid: 0,
            budget,
        };
        let validator = &validator;
        let read_result: Result<(), std::io::Error> = std::thread::scope(|scope| {
            let (raw_tx, raw_rx) = std::sync::mpsc::sync_channel::<Vec<RawRecord>>(PIPELINE_DEPTH);
            let (parsed_tx, parsed_rx) =
                std::sync::mpsc::sync_channel::<Vec<Parsed>>(PIPELINE_DEPTH);
            scope.spawn(move || {
                for batch in raw_rx {
                    let parsed: Vec<Parsed> = batch
                        .into_par_iter()
                        .map(|raw| parse(raw, validator, budget))
                        .collect();
                    if parsed_tx.send(parsed).is_err() {
                        break;
                    }
                }
            });
            let absorbing = scope.spawn(|| {
                for parsed in parsed_rx {
                    absorber.absorb(parsed, &mut summary, &raw_budgets);
                }
            });
            let mut reader = reader;
            let mut outcome = Ok(());
            loop {
                let mut batch = Vec::with_capacity(BATCH);
                for item in reader.by_ref().take(BATCH) {
                    match item {
                        Ok(raw) => batch.push(raw),
                        Err(error) => {
                            outcome = Err(error);
                            break;
                        }
                    }
                }
                let last = batch.len() < BATCH || outcome.is_err();
                if !batch.is_empty() && raw_tx.send(batch).is_err() {
                    break;
                }
                if last {
                    break;
                }
            }
            drop(raw_tx);
            // A panic in the absorbing thread is a bug; surface it rather than lose records.
            if absorbing.join().is_err() {
                outcome = Err(std::io::Error::other(
                    "internal error while reading records",
                ));
            }
            outcome
        });
        read_result.map_err(io_error)?;
        absorber.dataset.files.push(summary);
    }
    absorber.finish_pending_raw();
    let mut dataset = absorber.dataset;
    dataset.workloads = absorber.workloads.names;
    dataset.models = absorber.models.names;
    Ok(dataset)
}

/// `budget` is the run's single budget from its manifest; without one (several budgets, or a
/// record file on its own such as an exported shard) the budget is read from the record's
/// `task_id` suffix (`<task>@b<budget>`), as the harness writes it.
fn split(record: TrialRecord, budget: Option<u64>) -> ValidRecord {
    let budget = budget.or_else(|| {
        crate::harness::run::split_task_id(&record.task_id)
            .1
            .map(|b| b as u64)
    });
    let mut values = [0.0; Metric::COUNT];
    for metric in Metric::ALL {
        values[metric.index()] = match metric {
            Metric::TaskScore => record.task_score,
            Metric::EvidenceRecall => record.evidence_recall,
            Metric::UnsupportedClaimRate => record.unsupported_claim_rate,
            Metric::ContextTokens => record.context_tokens as f64,
            Metric::OutputTokens => record.output_tokens as f64,
            Metric::BilledCostUsd => record.billed_cost_usd,
            Metric::LatencyMs => record.latency_ms,
        };
    }
    let unit = PairingUnit {
        workload: record.workload,
        workload_version: record.workload_version,
        task_id: record.task_id,
        provider: record.provider,
        model: record.model,
        replicate: record.replicate,
        scorer: record.scorer,
        budget,
    };
    let row = Row {
        // Interned ids are assigned on the sequential side.
        unit: 0,
        condition: record.condition,
        workload: 0,
        model: 0,
        budget,
        success: record.outcome == Outcome::Success,
        reasoning_tokens: record.reasoning_tokens,
        values,
    };
    ValidRecord {
        zero_cost: record.cost_source == CostSource::ZeroCostFixture,
        schema_version: record.schema_version,
        unit: KeyedUnit {
            hash: unit_hash(&unit),
            unit,
        },
        row,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_budget_needs_exactly_one_budget() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("trials.jsonl");
        assert_eq!(manifest_budget(&file), None);
        let manifest = dir.path().join("manifest.json");
        std::fs::write(&manifest, r#"{"budgets":[512]}"#).expect("write");
        assert_eq!(manifest_budget(&file), Some(512));
        std::fs::write(&manifest, r#"{"budgets":[256,512]}"#).expect("write");
        assert_eq!(manifest_budget(&file), None);
        std::fs::write(&manifest, r#"{"budget":128}"#).expect("write");
        assert_eq!(manifest_budget(&file), Some(128));
    }

    /// Found wiring `svc benchmark`: a run directory's notes.jsonl was read as records.
    #[test]
    fn directories_contribute_their_jsonl_files_sorted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let empty = dir.path().join("empty");
        std::fs::create_dir_all(&empty).expect("mkdir");
        assert!(matches!(
            resolve_inputs(std::slice::from_ref(&empty)),
            Err(ReportError::NoRecordFiles { .. })
        ));
        for name in [
            "b/trials.jsonl",
            "a/trials.jsonl",
            "a/manifest.json",
            "a/notes.jsonl",
            "c.ndjson",
        ] {
            let path = dir.path().join(name);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, "").expect("write");
        }
        let files = resolve_inputs(&[dir.path().to_path_buf()]).expect("resolve");
        let names: Vec<String> = files
            .iter()
            .map(|f| {
                f.strip_prefix(dir.path())
                    .expect("prefix")
                    .display()
                    .to_string()
            })
            .collect();
        assert_eq!(names, vec!["a/trials.jsonl", "b/trials.jsonl", "c.ndjson"]);
        assert!(matches!(resolve_inputs(&[]), Err(ReportError::NoInputs)));
    }
}
