//! The trial matrix: tasks × conditions × replicates at one or more budgets, for one workload
//! and one runner. Trials sharing (workload, workload_version, task_id, provider, model,
//! replicate, scorer) form a pairing unit and differ only in condition.
//!
//! Execution: local runners (the fixture) run on a rayon pool; runners that do I/O run on tokio
//! with at most the runner's `concurrency` calls in flight. One writer thread validates and
//! appends every record (via [`TrialWriter`]), so a failed trial is an `outcome: error` record
//! and the matrix goes on. Output: `<run dir>/trials.jsonl`, `manifest.json` and, when a trial
//! has something the record cannot say (raw cut at the context window, a record that could not
//! be built), `notes.jsonl`.
//!
//! Budgets: the trial record has no budget field, so each record's `task_id` carries it as a
//! suffix, `<task id>@b<budget>` ([`BUDGET_SEPARATOR`]), and the manifest lists the budgets.
//! Records of one budget pair with each other; `raw` is run at every budget so each budget has
//! complete pairs.
//!
//! Resume: re-running into the same directory skips every trial whose (task_id with budget,
//! condition, replicate, scorer, provider, model) is already in `trials.jsonl`; a torn last line
//! from an interrupted run is cut off first.

use std::collections::HashSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Instant;

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::condition::{
    self, BuiltContext, Condition, ConditionEnv, ContextSelector, PreparedContext,
};
use super::fixed_point::{self, FixedPointSetting};
use super::runner::{ModelReply, Runner, RunnerError};
use super::scorer::{self, ClaimChecker, ScorerName};
use super::summary::{self, CompactionMode, Planned, SummaryPlan};
use super::workload::{Task, Workload};
use crate::context::CommitStore;
use crate::digest;
use crate::state;
use crate::tokens::Tokenizer;
use crate::trial::writer::WriteError;
use crate::trial::{Outcome, SCHEMA_VERSION, TrialRecord, TrialWriter, UsageSource};

/// Separates a task id from its budget in records: `halueval-0001@b512`.
pub const BUDGET_SEPARATOR: &str = "@b";

/// The record `task_id` of `task_id` at `budget`.
pub fn budget_task_id(task_id: &str, budget: usize) -> String {
    format!("{task_id}{BUDGET_SEPARATOR}{budget}")
}

/// Splits a record `task_id` into the workload's task id and the budget.
pub fn split_task_id(record_task_id: &str) -> (&str, Option<usize>) {
    match record_task_id.rsplit_once(BUDGET_SEPARATOR) {
        Some((task, budget)) => match budget.parse() {
            Ok(budget) => (task, Some(budget)),
            Err(_) => (record_task_id, None),
        },
        None => (record_task_id, None),
    }
}

/// One shard of a matrix: `K/N`, 1-based. Tasks are dealt by index, so every pairing unit (all
/// conditions of a task) lands in one shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Default for Shard {
    fn default() -> Self {
        Self { index: 1, count: 1 }
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let error = || format!("shard `{text}` is not K/N with 1 <= K <= N (e.g. 2/4)");
        let (k, n) = text.split_once('/').ok_or_else(error)?;
        let index: usize = k.trim().parse().map_err(|_| error())?;
        let count: usize = n.trim().parse().map_err(|_| error())?;
        if count == 0 || index == 0 || index > count {
            return Err(error());
        }
        Ok(Self { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    pub fn contains(&self, task_index: usize) -> bool {
        task_index % self.count == self.index - 1
    }
}

/// Live counts for a progress display.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    pub done: u64,
    pub total: u64,
    pub errors: u64,
}

/// Everything a run needs, resolved. The CLI builds this; tests build it directly.
pub struct RunSettings {
    pub workload: Arc<Workload>,
    pub runner: Arc<Runner>,
    pub conditions: Vec<Condition>,
    /// How `native_compaction` compacts (the record's condition stays `native_compaction`).
    pub native_compaction: CompactionMode,
    pub budgets: Vec<usize>,
    pub replicates: u64,
    pub shard: Shard,
    /// The run directory (`runs/<run-id>`).
    pub out_dir: PathBuf,
    /// Abort when errors / finished trials exceed this (checked after 20 trials).
    pub max_error_rate: Option<f64>,
    /// Orders the trials (so condition order cannot bias latency); recorded in the manifest.
    pub seed: u64,
    pub scorer: ScorerName,
    pub selector: Arc<dyn ContextSelector>,
    pub claim_checker: Arc<dyn ClaimChecker>,
    /// State directory for context commits.
    pub state_home: PathBuf,
    /// Worker threads for local work (default: all cores).
    pub threads: Option<usize>,
    /// Called from the writer thread after each trial.
    pub progress: Option<Arc<dyn Fn(Progress) + Send + Sync>>,
    /// `--fixed-point`: `svc` and `combined` trials run the proof-guided loop.
    pub fixed_point: Option<FixedPointSetting>,
}

/// What a run did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSummary {
    pub run_dir: PathBuf,
    pub planned: u64,
    pub skipped: u64,
    pub written: u64,
    pub errors: u64,
    /// Records that could not be written (see notes.jsonl).
    pub unwritten: u64,
    pub aborted: bool,
    pub elapsed_seconds: f64,
}

impl RunSummary {
    pub fn trials_per_second(&self) -> f64 {
        self.written as f64 / self.elapsed_seconds.max(1e-9)
    }
}

/// Errors that stop a run (a failed trial does not: it is a record).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(
        "{path}:{line}: an existing record cannot be read ({message}); move the file away or pass a new --out"
    )]
    Existing {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error("cannot use {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error(transparent)]
    State(#[from] state::StateError),
    #[error("the run settings are invalid: {0}")]
    Settings(String),
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error(
        "cannot make the run's context commits durable: {0}; the records naming them were not written (free space or fix permissions, then re-run to resume)"
    )]
    Commit(String),
}

/// The manifest of a run directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub run_id: String,
    pub svc_version: String,
    pub git_commit: Option<String>,
    pub workload: ManifestWorkload,
    pub runner: ManifestRunner,
    pub conditions: Vec<Condition>,
    /// How `native_compaction` compacted; manifests from before the setting are deterministic.
    #[serde(default)]
    pub native_compaction: CompactionMode,
    /// The fixed-point loop's bounds when `--fixed-point` was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_point: Option<FixedPointSetting>,
    pub budgets: Vec<usize>,
    /// How a record's budget is recovered: `task_id` = `<task id><separator><budget>`.
    pub task_id_budget_separator: String,
    pub replicates: u64,
    pub scorer: String,
    pub seed: u64,
    pub shard: String,
    /// First start of this run directory (kept across resumes).
    pub started_at: String,
    /// End of the latest session; null while a session runs.
    pub ended_at: Option<String>,
    /// Trials of this shard's matrix.
    pub planned: u64,
    /// Trials the latest session found already written.
    pub skipped: u64,
    /// Records in trials.jsonl in total.
    pub written: u64,
    /// Error records in trials.jsonl in total.
    pub errors: u64,
    pub aborted: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestWorkload {
    pub name: String,
    pub version: String,
    pub kind: String,
    pub tasks: usize,
    pub prompt_sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestRunner {
    pub name: String,
    pub kind: String,
    pub provider: String,
    pub model: String,
    pub file_sha256: String,
    pub cost_source: crate::trial::CostSource,
}

/// A default run id: workload, runner and a short hash of everything that defines the matrix,
/// so re-running the same command resumes the same directory.
pub fn default_run_id(settings: &RunSettings) -> String {
    let material = format!(
        "{}|{}|{}|{}|{:?}|{:?}|{}|{}|{}|{}",
        settings.workload.name(),
        settings.workload.version(),
        settings.runner.spec.name,
        settings.runner.file_sha256,
        settings.conditions,
        settings.budgets,
        settings.replicates,
        settings.scorer,
        settings.seed,
        settings.shard
    );
    // Appended only when not the default, so deterministic runs keep their existing ids.
    let material = match settings.native_compaction {
        CompactionMode::Deterministic => material,
        mode => format!("{material}|native_compaction={mode}"),
    };
    let material = match settings.fixed_point {
        None => material,
        Some(setting) => format!("{material}|fixed_point={setting}"),
    };
    let shard = if settings.shard.count > 1 {
        format!("-shard{}of{}", settings.shard.index, settings.shard.count)
    } else {
        String::new()
    };
    format!(
        "{}-{}{shard}-{}",
        settings.workload.name(),
        settings.runner.spec.name,
        &digest::sha256_hex(material)[..10]
    )
}

/// One cell of the matrix.
#[derive(Debug, Clone, Copy)]
struct Cell {
    task: usize,
    condition: Condition,
    budget: usize,
    replicate: u64,
}

/// Something the record cannot say, written to notes.jsonl.
#[derive(Debug, Clone, Serialize)]
struct Note {
    task_id: String,
    condition: Condition,
    replicate: u64,
    kind: &'static str,
    detail: String,
}

struct Finished {
    record: Option<TrialRecord>,
    notes: Vec<Note>,
}

/// Runs the matrix described by `settings`.
pub fn execute(settings: &RunSettings) -> Result<RunSummary, RunError> {
    if settings.conditions.is_empty() || settings.budgets.is_empty() || settings.replicates == 0 {
        return Err(RunError::Settings(
            "need at least one condition, one budget and one replicate".into(),
        ));
    }
    if settings.budgets.contains(&0) {
        return Err(RunError::Settings("budgets must be > 0 tokens".into()));
    }
    if settings.fixed_point.is_some() && !settings.runner.is_local() {
        return Err(RunError::Settings(format!(
            "--fixed-point drives the loop with local runners only for now; runner {} calls a server",
            settings.runner.spec.name
        )));
    }
    let started = Instant::now();
    let started_at = utc_now();
    let trials_path = settings.out_dir.join("trials.jsonl");
    let (done_keys, done_errors) = existing_keys(&trials_path)?;
    let workload = &settings.workload;
    let runner = &settings.runner;
    let mut cells: Vec<Cell> = Vec::new();
    for &budget in &settings.budgets {
        for (index, _) in workload.tasks.iter().enumerate() {
            if !settings.shard.contains(index) {
                continue;
            }
            for &condition in &settings.conditions {
                for replicate in 0..settings.replicates {
                    cells.push(Cell {
                        task: index,
                        condition,
                        budget,
                        replicate,
                    });
                }
            }
        }
    }
    let planned = cells.len() as u64;
    let key = |cell: &Cell| {
        record_key(
            &budget_task_id(&workload.tasks[cell.task].id, cell.budget),
            cell.condition,
            cell.replicate,
            settings.scorer.as_str(),
            &runner.spec.provider,
            &runner.spec.model,
        )
    };
    cells.retain(|cell| !done_keys.contains(&key(cell)));
    let skipped = planned - cells.len() as u64;
    crate::harness::text::SplitMix64::new(settings.seed).shuffle(&mut cells);

    let mut manifest = Manifest {
        run_id: settings
            .out_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        svc_version: env!("CARGO_PKG_VERSION").to_string(),
        git_commit: git_commit(),
        workload: ManifestWorkload {
            name: workload.name().to_string(),
            version: workload.version().to_string(),
            kind: workload.spec.kind.as_str().to_string(),
            tasks: workload.tasks.len(),
            prompt_sha256: workload.prompt_hash(),
        },
        runner: ManifestRunner {
            name: runner.spec.name.clone(),
            kind: runner.spec.kind.as_str().to_string(),
            provider: runner.spec.provider.clone(),
            model: runner.spec.model.clone(),
            file_sha256: runner.file_sha256.clone(),
            cost_source: runner.cost_source(),
        },
        conditions: settings.conditions.clone(),
        native_compaction: settings.native_compaction,
        fixed_point: settings.fixed_point,
        budgets: settings.budgets.clone(),
        task_id_budget_separator: BUDGET_SEPARATOR.into(),
        replicates: settings.replicates,
        scorer: settings.scorer.as_str().to_string(),
        seed: settings.seed,
        shard: settings.shard.to_string(),
        started_at,
        ended_at: None,
        planned,
        skipped,
        written: 0,
        errors: 0,
        aborted: false,
    };
    if let Some(previous) = read_manifest(&settings.out_dir) {
        merge_previous(&mut manifest, &previous, &settings.out_dir)?;
    }
    write_manifest(&settings.out_dir, &manifest)?;

    // Every task's full context is rendered and counted once, not once per trial.
    let tokenizer = Tokenizer::default();
    let needed: HashSet<usize> = cells.iter().map(|c| c.task).collect();
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(settings.threads.unwrap_or(0))
        .build()
        .map_err(|e| RunError::Settings(format!("cannot start worker threads: {e}")))?;
    let prepared: Vec<Option<PreparedContext>> = pool.install(|| {
        workload
            .tasks
            .par_iter()
            .enumerate()
            .map(|(i, task)| {
                needed
                    .contains(&i)
                    .then(|| PreparedContext::new(task, &tokenizer))
            })
            .collect()
    });
    let prepared = Arc::new(prepared);

    let writer = TrialWriter::append(&trials_path)?;
    let notes_path = settings.out_dir.join("notes.jsonl");
    let (sender, receiver) = mpsc::sync_channel::<Finished>(1024);
    let abort = Arc::new(AtomicBool::new(false));
    let total = cells.len() as u64;
    let progress = settings.progress.clone();
    let max_error_rate = settings.max_error_rate;
    let writer_abort = abort.clone();
    // Commits are group-committed: the writer makes each batch's commits durable before it
    // writes the records that name them, so workers never wait on fsync.
    let commits = CommitStore::grouped(&settings.state_home);
    let writer_commits = commits.clone();
    let writer_thread = std::thread::spawn(move || {
        let result = write_loop(
            writer,
            &writer_commits,
            &notes_path,
            receiver,
            total,
            progress,
            max_error_rate,
            &writer_abort,
        );
        // A writer that failed (disk full, …) stops the workers; its error is the run's.
        if result.is_err() {
            writer_abort.store(true, Ordering::Relaxed);
        }
        result
    });

    let context = TrialContext {
        settings,
        prepared: prepared.clone(),
        commits,
        tokenizer,
    };
    if runner.is_local() {
        // Replicates of one (task, budget, condition) share one context build.
        let mut groups: Vec<(Cell, Vec<u64>)> = Vec::new();
        let mut index: std::collections::HashMap<(usize, usize, Condition), usize> =
            std::collections::HashMap::new();
        for cell in &cells {
            let key = (cell.task, cell.budget, cell.condition);
            match index.get(&key) {
                Some(&at) => groups[at].1.push(cell.replicate),
                None => {
                    index.insert(key, groups.len());
                    groups.push((*cell, vec![cell.replicate]));
                }
            }
        }
        pool.install(|| {
            groups
                .par_iter()
                .for_each_with(sender, |sender, (cell, replicates)| {
                    if abort.load(Ordering::Relaxed) {
                        return;
                    }
                    for finished in context.run_local_group(cell, replicates) {
                        let _ = sender.send(finished);
                    }
                });
        });
    } else {
        run_async(&context, &cells, sender, &abort)?;
    }
    let counts = writer_thread
        .join()
        .unwrap_or_else(|_| Err(RunError::Settings("the writer thread panicked".into())))?;
    manifest.ended_at = Some(utc_now());
    manifest.written = counts.written;
    manifest.errors = counts.errors;
    manifest.aborted = counts.aborted;
    // The manifest reports the totals of the directory, not only this session.
    manifest.written += done_keys.len() as u64;
    manifest.errors += done_errors;
    write_manifest(&settings.out_dir, &manifest)?;
    Ok(RunSummary {
        run_dir: settings.out_dir.clone(),
        planned,
        skipped,
        written: counts.written,
        errors: counts.errors,
        unwritten: counts.unwritten,
        aborted: counts.aborted,
        elapsed_seconds: started.elapsed().as_secs_f64(),
    })
}

struct TrialContext<'a> {
    settings: &'a RunSettings,
    prepared: Arc<Vec<Option<PreparedContext>>>,
    commits: CommitStore,
    tokenizer: Tokenizer,
}

/// A trial after its context is shaped, before any model call.
#[derive(Clone)]
struct Staged {
    cell: Cell,
    shape: Shape,
    /// What shaping could not say in the record, as (kind, detail).
    notes: Vec<(&'static str, String)>,
}

#[derive(Clone)]
enum Shape {
    Built(Result<BuiltContext, condition::ConditionFailure>),
    /// A model-summary compaction: the summary call comes before the answer call.
    Summarise(Arc<SummaryPlan>),
}

/// The summarisation call of a model-summary trial.
struct SummaryCall {
    reply: Result<ModelReply, RunnerError>,
    latency_ms: f64,
    /// The request's tokens as svc counts them, for runners that report no input usage.
    counted_input_tokens: u64,
}

/// What the summarisation call adds to the trial's record.
#[derive(Debug, Clone, Copy, PartialEq)]
struct SummaryAccount {
    output_tokens: u64,
    reasoning_tokens: u64,
    cost_usd: f64,
    latency_ms: f64,
    /// The usage source of a failed summary call (the record's, as no answer call follows).
    failed: Option<UsageSource>,
}

/// A trial with its final context (or why there is none), before the answer call.
struct Shaped {
    cell: Cell,
    built: Result<BuiltContext, condition::ConditionFailure>,
    notes: Vec<(&'static str, String)>,
    summary: Option<SummaryAccount>,
}

fn not_local(runner: &Runner) -> RunnerError {
    RunnerError::InvalidResponse {
        url: runner.spec.name.clone(),
        message: "not a local runner".into(),
    }
}

impl TrialContext<'_> {
    fn task(&self, cell: &Cell) -> &Task {
        &self.settings.workload.tasks[cell.task]
    }

    fn stage(&self, cell: &Cell) -> Staged {
        let task = self.task(cell);
        let mut notes = Vec::new();
        let shape = match &self.prepared[cell.task] {
            Some(full)
                if cell.condition == Condition::NativeCompaction
                    && self.settings.native_compaction == CompactionMode::ModelSummary =>
            {
                match summary::plan(
                    &task.context,
                    full,
                    cell.budget,
                    self.settings.runner.context_window(),
                    &self.tokenizer,
                ) {
                    Planned::Ready { text, tokens, note } => {
                        notes.extend(note.map(|note| ("summary_skipped", note)));
                        Shape::Built(Ok(BuiltContext {
                            text,
                            tokens,
                            context_commit_id: None,
                            truncated_from: None,
                        }))
                    }
                    Planned::Summarise(plan) => {
                        if let Some(from) = plan.source_truncated_from {
                            notes.push((
                                "summary_input_truncated",
                                format!(
                                    "the text to summarise ({from} tokens) was cut to the model's window of {} tokens; the rest was dropped unsummarised",
                                    self.settings.runner.context_window()
                                ),
                            ));
                        }
                        Shape::Summarise(Arc::new(plan))
                    }
                }
            }
            Some(full) => {
                let env = ConditionEnv {
                    tokenizer: &self.tokenizer,
                    selector: self.settings.selector.as_ref(),
                    commits: &self.commits,
                    context_window: self.settings.runner.context_window(),
                };
                Shape::Built(condition::build(
                    cell.condition,
                    task,
                    full,
                    cell.budget,
                    &env,
                ))
            }
            None => Shape::Built(Err(condition::ConditionFailure {
                error_type: "internal_error",
                message: "the task's context was not prepared".into(),
                context_commit_id: None,
            })),
        };
        Staged {
            cell: *cell,
            shape,
            notes,
        }
    }

    /// The summarisation request of a model-summary trial, with svc's count of its tokens.
    fn summary_request(&self, staged: &Staged) -> Option<(super::runner::ModelRequest, u64)> {
        let Shape::Summarise(plan) = &staged.shape else {
            return None;
        };
        let request = plan.request(&self.settings.runner);
        let counted = self.tokenizer.count(&request.system) + self.tokenizer.count(&request.prompt);
        Some((request, counted as u64))
    }

    /// Puts the summary in place (or turns its failure into the trial's failure) and accounts
    /// for the summarisation call.
    fn resolve(&self, staged: Staged, call: Option<SummaryCall>) -> Shaped {
        let Staged {
            cell,
            shape,
            mut notes,
        } = staged;
        let plan = match shape {
            Shape::Built(built) => {
                return Shaped {
                    cell,
                    built,
                    notes,
                    summary: None,
                };
            }
            Shape::Summarise(plan) => plan,
        };
        let Some(call) = call else {
            return Shaped {
                cell,
                built: Err(condition::ConditionFailure {
                    error_type: "internal_error",
                    message: "the summary call of a model-summary trial was not made".into(),
                    context_commit_id: None,
                }),
                notes,
                summary: None,
            };
        };
        let runner = &self.settings.runner;
        match call.reply {
            Err(error) => Shaped {
                cell,
                built: Err(condition::ConditionFailure {
                    error_type: "summary_failed",
                    message: format!(
                        "the summary call of model-summary compaction failed ({}): {error}; the answer call was not made",
                        error.error_type()
                    ),
                    context_commit_id: None,
                }),
                notes,
                summary: Some(SummaryAccount {
                    output_tokens: 0,
                    reasoning_tokens: 0,
                    cost_usd: 0.0,
                    latency_ms: call.latency_ms,
                    failed: Some(error.usage_source()),
                }),
            },
            Ok(reply) => {
                let spliced = plan.splice(&reply.text, &self.tokenizer);
                let (input_tokens, input_source) = match reply.input_tokens {
                    Some(tokens) => (tokens, "reported by the provider"),
                    None => (call.counted_input_tokens, "counted by svc"),
                };
                let cost_usd = runner.cost_usd(&reply);
                if spliced.kept_summary_tokens < spliced.summary_tokens {
                    notes.push((
                        "summary_truncated",
                        format!(
                            "the summary of {} tokens was cut to {} tokens so the context fits the budget of {} tokens",
                            spliced.summary_tokens, spliced.kept_summary_tokens, cell.budget
                        ),
                    ));
                }
                notes.push((
                    "summary_call",
                    format!(
                        "model-summary compaction summarised {} into {} tokens ({} kept); summary call {}: input_tokens={input_tokens} ({input_source}), output_tokens={}, reasoning_tokens={}, billed_cost_usd={cost_usd}, latency_ms={:.3}. The record's output_tokens, reasoning_tokens, billed_cost_usd and latency_ms include this call; its input tokens are not in context_tokens, which counts the context of the answer call only",
                        plan.what(),
                        spliced.summary_tokens,
                        spliced.kept_summary_tokens,
                        reply.provider_request_id,
                        reply.output_tokens,
                        reply.reasoning_tokens,
                        call.latency_ms,
                    ),
                ));
                Shaped {
                    cell,
                    built: Ok(BuiltContext {
                        text: spliced.text,
                        tokens: spliced.tokens,
                        context_commit_id: None,
                        truncated_from: None,
                    }),
                    notes,
                    summary: Some(SummaryAccount {
                        output_tokens: reply.output_tokens,
                        reasoning_tokens: reply.reasoning_tokens,
                        cost_usd,
                        latency_ms: call.latency_ms,
                        failed: None,
                    }),
                }
            }
        }
    }

    /// Runs every replicate of one (task, budget, condition) on a local runner. The context is
    /// shaped once: conditions are deterministic, so replicates differ only in the model calls.
    fn run_local_group(&self, cell: &Cell, replicates: &[u64]) -> Vec<Finished> {
        let staged = self.stage(cell);
        replicates
            .iter()
            .map(|&replicate| {
                let mut staged = staged.clone();
                staged.cell.replicate = replicate;
                self.run_local(staged)
            })
            .collect()
    }

    fn run_local(&self, staged: Staged) -> Finished {
        let runner = &self.settings.runner;
        // Each trial pays for its own summary, as each stands for one client session.
        let call = self.summary_request(&staged).map(|(request, counted)| {
            let start = Instant::now();
            let reply = runner.call_local(&request).ok_or_else(|| not_local(runner));
            SummaryCall {
                reply,
                latency_ms: start.elapsed().as_secs_f64() * 1000.0,
                counted_input_tokens: counted,
            }
        });
        let mut shaped = self.resolve(staged, call);
        if let Some(setting) = self.settings.fixed_point
            && let Ok(built) = &shaped.built
            && let Some(full) = self.prepared[shaped.cell.task].as_ref()
            && let Some(units) = condition::svc_units(
                shaped.cell.condition,
                self.task(&shaped.cell),
                full,
                shaped.cell.budget,
                &self.tokenizer,
            )
        {
            let trial = fixed_point::run_trial(
                setting,
                &self.settings.state_home,
                runner,
                self.task(&shaped.cell),
                &units,
                shaped.cell.budget,
                built.context_commit_id.clone(),
                &self.tokenizer,
            );
            shaped.built = trial.built;
            shaped.notes.extend(trial.notes);
            return self.finish(shaped, trial.reply);
        }
        let cell = &shaped.cell;
        let reply = match &shaped.built {
            Ok(built) if built.tokens > 0 => {
                let request = runner.request(
                    &built.text,
                    &self.task(cell).question,
                    self.task(cell).answer_kind,
                );
                let start = Instant::now();
                let reply = runner.call_local(&request);
                let latency = start.elapsed().as_secs_f64() * 1000.0;
                Some((reply.ok_or_else(|| not_local(runner)), latency))
            }
            _ => None,
        };
        self.finish(shaped, reply)
    }

    /// Turns a staged trial and the model's reply (None when the model was not called) into a
    /// record and notes.
    fn finish(
        &self,
        shaped: Shaped,
        reply: Option<(Result<ModelReply, RunnerError>, f64)>,
    ) -> Finished {
        let settings = self.settings;
        let cell = shaped.cell;
        let task = self.task(&cell);
        let runner = &settings.runner;
        let task_id = budget_task_id(&task.id, cell.budget);
        let mut notes = Vec::new();
        let note = |kind: &'static str, detail: String| Note {
            task_id: task_id.clone(),
            condition: cell.condition,
            replicate: cell.replicate,
            kind,
            detail,
        };
        notes.extend(
            shaped
                .notes
                .into_iter()
                .map(|(kind, detail)| note(kind, detail)),
        );
        let mut record = TrialRecord {
            schema_version: SCHEMA_VERSION.into(),
            workload: settings.workload.name().to_string(),
            workload_version: settings.workload.version().to_string(),
            task_id: task_id.clone(),
            provider: runner.spec.provider.clone(),
            model: runner.spec.model.clone(),
            provider_request_id: String::new(),
            usage_source: crate::trial::UsageSource::RunnerError,
            cost_source: runner.cost_source(),
            cost_source_reference: runner.cost_reference(),
            outcome: Outcome::Error,
            error_type: None,
            context_sha256: digest::sha256_hex(""),
            response_text: None,
            response_sha256: None,
            replicate: cell.replicate,
            condition: cell.condition,
            scorer: settings.scorer.as_str().to_string(),
            task_score: 0.0,
            evidence_recall: 0.0,
            unsupported_claim_rate: 0.0,
            context_tokens: 0,
            reasoning_tokens: 0,
            output_tokens: 0,
            billed_cost_usd: 0.0,
            latency_ms: 0.0,
            context_commit_id: None,
        };
        let stable_id = |what: &str| {
            format!(
                "{what}_{}",
                &digest::sha256_hex(format!(
                    "{}|{}|{}|{}|{}",
                    settings.workload.name(),
                    task_id,
                    cell.condition,
                    cell.replicate,
                    runner.spec.model
                ))[..24]
            )
        };
        match shaped.built {
            Err(failure) => {
                record.error_type = Some(failure.error_type.to_string());
                record.provider_request_id = stable_id("not_called");
                record.context_commit_id = failure.context_commit_id;
                notes.push(note(failure.error_type, failure.message));
            }
            Ok(built) => {
                record.context_sha256 = digest::sha256_hex(&built.text);
                record.context_tokens = built.tokens as u64;
                record.context_commit_id = built.context_commit_id.clone();
                record.evidence_recall = scorer::evidence_recall(&built.text, &task.evidence);
                if let Some(full) = built.truncated_from {
                    notes.push(note(
                        "truncated_at_context_window",
                        format!(
                            "raw context of {full} tokens cut to {} tokens",
                            built.tokens
                        ),
                    ));
                }
                match reply {
                    None => {
                        record.error_type = Some("empty_context".into());
                        record.provider_request_id = stable_id("not_called");
                        notes.push(note(
                            "empty_context",
                            "the condition left no context; the model was not called".into(),
                        ));
                    }
                    Some((Err(error), latency)) => {
                        record.error_type = Some(error.error_type());
                        record.usage_source = error.usage_source();
                        record.provider_request_id = stable_id("failed");
                        record.latency_ms = latency;
                        notes.push(note("runner_error", error.to_string()));
                    }
                    Some((Ok(reply), latency)) => {
                        record.outcome = Outcome::Success;
                        record.usage_source = reply.usage_source;
                        record.provider_request_id = reply.provider_request_id.clone();
                        record.task_score =
                            settings.scorer.score(&reply.text, task).clamp(0.0, 1.0);
                        record.unsupported_claim_rate = settings
                            .claim_checker
                            .unsupported_claim_rate(
                                &reply.text,
                                &task.claim_evidence(),
                                Some(&task.question),
                            )
                            .clamp(0.0, 1.0);
                        record.output_tokens = reply.output_tokens;
                        record.reasoning_tokens = reply.reasoning_tokens;
                        record.billed_cost_usd = runner.cost_usd(&reply);
                        record.latency_ms = latency;
                        record.response_sha256 = Some(digest::sha256_hex(&reply.text));
                        record.response_text = Some(reply.text);
                    }
                }
            }
        }
        // The summarisation call is part of the trial: its output, cost and time are the
        // trial's. Its input is not context of the answer call; notes.jsonl has it.
        if let Some(account) = shaped.summary {
            record.output_tokens += account.output_tokens;
            record.reasoning_tokens += account.reasoning_tokens;
            record.billed_cost_usd += account.cost_usd;
            record.latency_ms += account.latency_ms;
            if let Some(usage_source) = account.failed {
                record.usage_source = usage_source;
            }
        }
        let violations = record.violations();
        if violations.is_empty() {
            Finished {
                record: Some(record),
                notes,
            }
        } else {
            notes.push(note(
                "record_not_written",
                violations
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; "),
            ));
            Finished {
                record: None,
                notes,
            }
        }
    }
}

fn run_async(
    context: &TrialContext<'_>,
    cells: &[Cell],
    sender: mpsc::SyncSender<Finished>,
    abort: &AtomicBool,
) -> Result<(), RunError> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(RunError::Runtime)?;
    let concurrency = context.settings.runner.spec.concurrency.max(1);
    let next = std::sync::atomic::AtomicUsize::new(0);
    // `concurrency` workers pull cells from a shared counter, so at most that many calls are in
    // flight. The futures borrow the run's context, so they are polled on this thread rather
    // than spawned; context building is short next to a model call.
    let worker = || async {
        loop {
            if abort.load(Ordering::Relaxed) {
                return;
            }
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(cell) = cells.get(i) else { return };
            let staged = context.stage(cell);
            let task = context.task(cell);
            let runner = &context.settings.runner;
            let call = match context.summary_request(&staged) {
                Some((request, counted)) => {
                    let start = Instant::now();
                    let reply = runner.call(&request).await;
                    Some(SummaryCall {
                        reply,
                        latency_ms: start.elapsed().as_secs_f64() * 1000.0,
                        counted_input_tokens: counted,
                    })
                }
                None => None,
            };
            let shaped = context.resolve(staged, call);
            let reply = match &shaped.built {
                Ok(built) if built.tokens > 0 => {
                    let request = runner.request(&built.text, &task.question, task.answer_kind);
                    let start = Instant::now();
                    let reply = runner.call(&request).await;
                    Some((reply, start.elapsed().as_secs_f64() * 1000.0))
                }
                _ => None,
            };
            let finished = context.finish(shaped, reply);
            // A send error means the writer stopped early (an I/O error it reports).
            if sender.send(finished).is_err() {
                return;
            }
        }
    };
    runtime.block_on(join_all((0..concurrency).map(|_| worker()).collect()));
    Ok(())
}

/// Polls every future to completion on the current task.
async fn join_all<F: std::future::Future<Output = ()>>(futures: Vec<F>) {
    let mut futures: Vec<std::pin::Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    std::future::poll_fn(move |cx| {
        futures.retain_mut(|f| f.as_mut().poll(cx).is_pending());
        if futures.is_empty() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}

struct Counts {
    written: u64,
    errors: u64,
    unwritten: u64,
    aborted: bool,
}

/// Most trials one batch of the write loop takes: one commit sync and one write per batch.
const WRITE_BATCH: usize = 4096;

/// Writes finished trials as they arrive, in batches: every commit staged by the batch's trials
/// is made durable first (one group sync), then the batch's records are written (one write), so
/// a record on disk never names a commit that is not.
#[allow(clippy::too_many_arguments)]
fn write_loop(
    mut writer: TrialWriter,
    commits: &CommitStore,
    notes_path: &Path,
    receiver: mpsc::Receiver<Finished>,
    total: u64,
    progress: Option<Arc<dyn Fn(Progress) + Send + Sync>>,
    max_error_rate: Option<f64>,
    abort: &AtomicBool,
) -> Result<Counts, RunError> {
    let mut counts = Counts {
        written: 0,
        errors: 0,
        unwritten: 0,
        aborted: false,
    };
    let mut notes: Option<fs::File> = None;
    let mut done = 0u64;
    let mut batch = Vec::with_capacity(WRITE_BATCH);
    while let Ok(first) = receiver.recv() {
        let mut next = Some(first);
        while let Some(finished) = next.take() {
            // The error rate is judged as trials arrive, so an abort does not wait for a sync.
            done += 1;
            let failed = finished
                .record
                .as_ref()
                .is_none_or(|record| record.outcome == Outcome::Error);
            counts.errors += u64::from(failed);
            if let Some(limit) = max_error_rate
                && done >= 20.min(total)
                && counts.errors as f64 / done as f64 > limit
                && !counts.aborted
            {
                counts.aborted = true;
                abort.store(true, Ordering::Relaxed);
            }
            batch.push(finished);
            if batch.len() < WRITE_BATCH {
                next = receiver.try_recv().ok();
            }
        }
        // The trials of this batch committed before they were sent.
        commits
            .sync()
            .map_err(|error| RunError::Commit(error.to_string()))?;
        for finished in batch.drain(..) {
            if !finished.notes.is_empty() {
                if notes.is_none() {
                    notes = Some(
                        fs::OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(notes_path)
                            .map_err(|source| RunError::Io {
                                path: notes_path.to_path_buf(),
                                source,
                            })?,
                    );
                }
                if let Some(file) = notes.as_mut() {
                    for note in &finished.notes {
                        let line = serde_json::to_string(note).unwrap_or_default();
                        writeln!(file, "{line}").map_err(|source| RunError::Io {
                            path: notes_path.to_path_buf(),
                            source,
                        })?;
                    }
                }
            }
            match finished.record {
                Some(record) => {
                    writer.push(&record)?;
                    counts.written += 1;
                }
                None => counts.unwritten += 1,
            }
        }
        writer.flush()?;
        if let Some(callback) = &progress {
            callback(Progress {
                done,
                total,
                errors: counts.errors,
            });
        }
    }
    Ok(counts)
}

fn record_key(
    task_id: &str,
    condition: Condition,
    replicate: u64,
    scorer: &str,
    provider: &str,
    model: &str,
) -> String {
    format!(
        "{task_id}\u{1f}{condition}\u{1f}{replicate}\u{1f}{scorer}\u{1f}{provider}\u{1f}{model}"
    )
}

/// Keys of the records already in `path` and how many are errors; cuts off a torn last line
/// first.
fn existing_keys(path: &Path) -> Result<(HashSet<String>, u64), RunError> {
    let mut keys = HashSet::new();
    let mut errors = 0u64;
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok((keys, 0)),
        Err(source) => {
            return Err(RunError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(at) => at + 1,
        None => 0,
    };
    if complete < bytes.len() {
        // An interrupted write left part of a line: drop it, the trial runs again.
        let file = fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|source| RunError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        file.set_len(complete as u64)
            .map_err(|source| RunError::Io {
                path: path.to_path_buf(),
                source,
            })?;
    }
    let text = String::from_utf8_lossy(&bytes[..complete]);
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let record: TrialRecord =
            serde_json::from_str(line).map_err(|error| RunError::Existing {
                path: path.to_path_buf(),
                line: index + 1,
                message: error.to_string(),
            })?;
        errors += u64::from(record.outcome == Outcome::Error);
        keys.insert(record_key(
            &record.task_id,
            record.condition,
            record.replicate,
            &record.scorer,
            &record.provider,
            &record.model,
        ));
    }
    Ok((keys, errors))
}

/// A run directory holds one experiment: the same workload (version and prompts), runner file
/// and scorer. Within it, a later session may add conditions, budgets or replicates; the
/// manifest then lists the union, so every record's budget and condition stay described.
fn merge_previous(
    manifest: &mut Manifest,
    previous: &Manifest,
    dir: &Path,
) -> Result<(), RunError> {
    let identity = |m: &Manifest| {
        (
            m.workload.name.clone(),
            m.workload.version.clone(),
            m.workload.prompt_sha256.clone(),
            m.runner.name.clone(),
            m.runner.file_sha256.clone(),
            m.scorer.clone(),
            m.shard.clone(),
            m.native_compaction,
        )
    };
    if identity(manifest) != identity(previous) {
        return Err(RunError::Settings(format!(
            "{} holds a run of workload {} version {} with runner {} (scorer {}, shard {}, native compaction {}); \
             this run is workload {} version {} with runner {} (scorer {}, shard {}, native compaction {}): pass another --out",
            dir.display(),
            previous.workload.name,
            previous.workload.version,
            previous.runner.name,
            previous.scorer,
            previous.shard,
            previous.native_compaction,
            manifest.workload.name,
            manifest.workload.version,
            manifest.runner.name,
            manifest.scorer,
            manifest.shard,
            manifest.native_compaction,
        )));
    }
    for condition in &previous.conditions {
        if !manifest.conditions.contains(condition) {
            manifest.conditions.push(*condition);
        }
    }
    manifest.conditions.sort();
    for budget in &previous.budgets {
        if !manifest.budgets.contains(budget) {
            manifest.budgets.push(*budget);
        }
    }
    manifest.budgets.sort_unstable();
    manifest.replicates = manifest.replicates.max(previous.replicates);
    manifest.started_at = previous.started_at.clone();
    Ok(())
}

fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), RunError> {
    let mut bytes =
        serde_json::to_vec_pretty(manifest).map_err(|e| RunError::Settings(e.to_string()))?;
    bytes.push(b'\n');
    state::atomic_write_shared(&dir.join("manifest.json"), &bytes)?;
    Ok(())
}

/// The manifest of a run directory, if it has a readable one.
pub fn read_manifest(dir: &Path) -> Option<Manifest> {
    let bytes = fs::read(dir.join("manifest.json")).ok()?;
    serde_json::from_slice(&bytes).ok()
}

fn git_commit() -> Option<String> {
    let output = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

/// The current UTC time as RFC 3339 (`2026-11-21T12:00:00Z`).
pub fn utc_now() -> String {
    crate::clock::rfc3339_seconds(std::time::SystemTime::now())
}

#[cfg(test)]
mod tests;
