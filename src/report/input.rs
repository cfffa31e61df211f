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
use crate::harness::run::split_task_id;
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
    /// Index into [`Dataset::cells`]: the task this record belongs to (the cluster).
    pub cell: u32,
    /// Which record set the row came from: 0, or 1 for the second set of `--compare-runs`.
    pub side: u8,
    pub condition: Condition,
    pub workload: u32,
    pub model: u32,
    /// From the `task_id` suffix (`@b<budget>`), else the run manifest's single budget; `None`
    /// for a record that holds for every budget (`raw` recorded once per task).
    pub budget: Option<u64>,
    pub replicate: u64,
    pub success: bool,
    pub reasoning_tokens: u64,
    /// A hash of `response_sha256` (0 without a response), to tell identical replicates.
    pub response: u64,
    /// Indexed by [`Metric::index`]. Error trials count as failures in every quality metric
    /// (task score and evidence recall 0, unsupported-claim rate 1, error rate 1), whatever
    /// their record says: an error must not look better than a wrong answer.
    pub values: [f64; Metric::COUNT],
}

/// A task: the cluster of the paired analysis. Every condition, budget and replicate of one
/// task shares it: (workload, workload_version, task id without the budget suffix, provider,
/// model, scorer).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskCell {
    pub workload: String,
    pub workload_version: String,
    pub task_id: String,
    pub provider: String,
    pub model: String,
    pub scorer: String,
}

impl std::fmt::Display for TaskCell {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}@{}/{} {}/{} scorer {}",
            self.workload,
            self.workload_version,
            self.task_id,
            self.provider,
            self.model,
            self.scorer
        )
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
    pub cells: Vec<TaskCell>,
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
            error: source,
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
        error: source,
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
    let value = read_manifest(file)?;
    if let Some(budget) = value.get("budget").and_then(serde_json::Value::as_u64) {
        return Some(budget);
    }
    match value.get("budgets")?.as_array()?.as_slice() {
        [single] => single.as_u64(),
        _ => None,
    }
}

fn read_manifest(file: &Path) -> Option<serde_json::Value> {
    let manifest = file.parent()?.join("manifest.json");
    let text = std::fs::read_to_string(manifest).ok()?;
    serde_json::from_str(crate::text::without_bom(&text)).ok()
}

/// The budgets records of `file` get when their `task_id` has no `@b` suffix: the run's single
/// budget for every condition, except that a `raw` trial of a run that says
/// `raw_once_per_task` ran once for all budgets and has none of its own (nor does one without
/// a manifest, such as a Parquet export, where the harness's raw-once records are the only ones
/// without a suffix).
#[derive(Debug, Clone, Copy)]
struct FileBudgets {
    others: Option<u64>,
    raw: Option<u64>,
}

fn file_budgets(file: &Path) -> FileBudgets {
    let others = manifest_budget(file);
    let raw_once = read_manifest(file)
        .and_then(|m| m.get("raw_once_per_task")?.as_bool())
        .unwrap_or(false);
    FileBudgets {
        others,
        raw: if raw_once { None } else { others },
    }
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

fn parse(raw: RawRecord, validator: &RecordValidator, budget: FileBudgets) -> Parsed {
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
    // The acceptance rule every reader shares (validate, gate, resume).
    match crate::trial::accept::check(validator, &text) {
        Ok(record) => Parsed::Valid(Box::new(split(record, budget))),
        Err(problems) => {
            // `check` never returns an empty list.
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

/// A task cell with its hash computed on the parallel side, so the sequential side only
/// compares.
struct KeyedUnit {
    hash: u64,
    unit: TaskCell,
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

fn unit_hash(unit: &TaskCell) -> u64 {
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
    /// The record set being read.
    side: u8,
}

impl Absorber {
    fn absorb(&mut self, parsed: Vec<Parsed>, summary: &mut FileSummary) {
        let dataset = &mut self.dataset;
        for item in parsed {
            match item {
                Parsed::Valid(valid) => {
                    let ValidRecord {
                        unit,
                        mut row,
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
                    let id = match self.units.get(&unit) {
                        Some(id) => *id,
                        None => {
                            let id = dataset.cells.len() as u32;
                            self.unit_names.push((
                                self.workloads.id(&unit.unit.workload),
                                self.models.id(&unit.unit.model),
                            ));
                            dataset.cells.push(unit.unit.clone());
                            self.units.insert(unit, id);
                            id
                        }
                    };
                    (row.workload, row.model) = self.unit_names[id as usize];
                    row.cell = id;
                    row.side = self.side;
                    dataset.rows.push(row);
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

/// Reads and validates every record of `files` (one record set).
pub fn load(files: &[PathBuf]) -> Result<Dataset, ReportError> {
    load_sets(&[files.to_vec()])
}

/// Reads and validates every record of each record set; rows carry their set's index as
/// [`Row::side`], and tasks are shared across sets so they pair (`--compare-runs`).
///
/// A three-stage pipeline per file: this thread reads raw records (the reader is not `Send`),
/// a scoped thread parses batches on the rayon pool, and another absorbs them in order, so
/// reading and bookkeeping overlap the parallel parse.
pub fn load_sets(sets: &[Vec<PathBuf>]) -> Result<Dataset, ReportError> {
    let validator = RecordValidator::new()?;
    let mut absorber = Absorber::default();
    let files: Vec<(u8, &PathBuf)> = sets
        .iter()
        .enumerate()
        .flat_map(|(side, files)| files.iter().map(move |f| (side as u8, f)))
        .collect();
    for (side, path) in files {
        absorber.side = side;
        let io_error = |source| ReportError::Io {
            path: path.clone(),
            error: source,
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
        let budgets = file_budgets(path);
        let budget = budgets.others;
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
                        .map(|raw| parse(raw, validator, budgets))
                        .collect();
                    if parsed_tx.send(parsed).is_err() {
                        break;
                    }
                }
            });
            let absorbing = scope.spawn(|| {
                for parsed in parsed_rx {
                    absorber.absorb(parsed, &mut summary);
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
    let mut dataset = absorber.dataset;
    dataset.workloads = absorber.workloads.names;
    dataset.models = absorber.models.names;
    split_versions(&mut dataset);
    canonical_order(&mut dataset);
    Ok(dataset)
}

/// A workload recorded in several versions is summarised per version (`name@version`): its
/// pooled rows were the mean of neither version, and nothing said two were mixed. (Tasks and
/// pairs were already kept apart by version.)
fn split_versions(dataset: &mut Dataset) {
    let mut versions: BTreeMap<&str, std::collections::BTreeSet<&str>> = BTreeMap::new();
    for cell in &dataset.cells {
        versions
            .entry(cell.workload.as_str())
            .or_default()
            .insert(cell.workload_version.as_str());
    }
    let mixed: std::collections::BTreeSet<String> = versions
        .into_iter()
        .filter(|(_, v)| v.len() > 1)
        .map(|(name, _)| name.to_string())
        .collect();
    if mixed.is_empty() {
        return;
    }
    let mut index: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
    let mut names: Vec<String> = Vec::new();
    for row in &mut dataset.rows {
        let cell = &dataset.cells[row.cell as usize];
        let name = if mixed.contains(&cell.workload) {
            format!("{}@{}", cell.workload, cell.workload_version)
        } else {
            cell.workload.clone()
        };
        row.workload = *index.entry(name.clone()).or_insert_with(|| {
            names.push(name);
            (names.len() - 1) as u32
        });
    }
    dataset.workloads = names;
}

/// Numbers tasks, workloads and models in sorted order rather than in the order records were
/// read, so everything downstream (the bootstrap's draws over tasks, the order of strata) is
/// the same whatever order the inputs came in: shards merged in any order give the report of
/// one unsharded run.
fn canonical_order(dataset: &mut Dataset) {
    fn ranks<T: Ord>(items: &[T]) -> Vec<u32> {
        let mut order: Vec<usize> = (0..items.len()).collect();
        order.sort_by(|&a, &b| items[a].cmp(&items[b]));
        let mut rank = vec![0u32; items.len()];
        for (new, &old) in order.iter().enumerate() {
            rank[old] = new as u32;
        }
        rank
    }
    fn reorder<T: Clone>(items: &mut Vec<T>, rank: &[u32]) {
        let mut sorted = items.clone();
        for (old, item) in items.iter().enumerate() {
            sorted[rank[old] as usize] = item.clone();
        }
        *items = sorted;
    }
    let cells = ranks(&dataset.cells);
    let workloads = ranks(&dataset.workloads);
    let models = ranks(&dataset.models);
    for row in &mut dataset.rows {
        row.cell = cells[row.cell as usize];
        row.workload = workloads[row.workload as usize];
        row.model = models[row.model as usize];
    }
    reorder(&mut dataset.cells, &cells);
    reorder(&mut dataset.workloads, &workloads);
    reorder(&mut dataset.models, &models);
}

fn split(record: TrialRecord, manifest_budget: FileBudgets) -> ValidRecord {
    let success = record.outcome == Outcome::Success;
    let mut values = [0.0; Metric::COUNT];
    for metric in Metric::ALL {
        values[metric.index()] = match metric {
            Metric::TaskScore if !success => 0.0,
            Metric::EvidenceRecall if !success => 0.0,
            Metric::UnsupportedClaimRate if !success => 1.0,
            Metric::TaskScore => record.task_score,
            Metric::EvidenceRecall => record.evidence_recall,
            Metric::UnsupportedClaimRate => record.unsupported_claim_rate,
            Metric::ErrorRate => f64::from(u8::from(!success)),
            Metric::ContextTokens => record.context_tokens as f64,
            Metric::OutputTokens => record.output_tokens as f64,
            Metric::BilledCostUsd => record.billed_cost_usd,
            Metric::LatencyMs => record.latency_ms,
        };
    }
    let (task_id, suffix_budget) = split_task_id(&record.task_id);
    let budget = match suffix_budget {
        Some(budget) => Some(budget as u64),
        None if record.condition == Condition::Raw => manifest_budget.raw,
        None => manifest_budget.others,
    };
    let response = record.response_sha256.as_deref().map_or(0, |hash| {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        hash.hash(&mut hasher);
        hasher.finish() | 1
    });
    let unit = TaskCell {
        task_id: task_id.to_string(),
        workload: record.workload,
        workload_version: record.workload_version,
        provider: record.provider,
        model: record.model,
        scorer: record.scorer,
    };
    let row = Row {
        // Interned ids and the side are assigned on the sequential side.
        cell: 0,
        side: 0,
        condition: record.condition,
        workload: 0,
        model: 0,
        budget,
        replicate: record.replicate,
        success,
        reasoning_tokens: record.reasoning_tokens,
        response,
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
