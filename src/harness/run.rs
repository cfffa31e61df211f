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
//! Records of one budget pair with each other. `raw` ignores the budget, so it runs once per
//! task and its records' `task_id` carry no suffix ([`record_task_id`]); the manifest says so
//! (`raw_once_per_task`) and the report pairs each `raw` record with every budget of the run.
//!
//! Resume: re-running into the same directory skips every trial whose (task_id with budget,
//! condition, replicate, scorer, provider, model) is already in `trials.jsonl`; a torn last line
//! from an interrupted run is cut off first. An error record counts as finished, so a resume is
//! cheap and deterministic; [`AuditSettings::retry_errors`] removes the error records (and
//! their lines in `requests.jsonl` and `notes.jsonl`) and runs those trials again, so each
//! trial keeps one record. A directory made by another svc version or with other settings
//! (see [`identity`]) is refused unless [`AuditSettings::force`], and a forced resume lists
//! what differed in the manifest's `forced_over`.
//!
//! Audit: every request is stored and every call logged with the run (see [`super::audit`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Instant;

use rayon::prelude::*;
use serde::Serialize;

use super::audit::{self, CallPurpose, Caller, RequestStore, TrialCalls};
use super::condition::{
    self, BuiltContext, Condition, ConditionEnv, ContextSelector, PreparedContext,
};
use super::fixed_point::{FixedPointSetting, LoopTrial, TrialLoop};
use super::judge::{self, Judge, JudgeCall};
use super::runner::cache::ResponseCache;
use super::runner::{ModelReply, Runner, RunnerError};
use super::scorer::{self, ClaimChecker, ScorerName};
use super::summary::{self, CompactionMode, Planned, SummaryPlan};
use super::via_proxy::{self, ProxiedCall, ViaProxy};
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

/// The record `task_id` of a trial: `raw` (which ignores the budget and runs once per task)
/// carries the plain task id, every other condition [`budget_task_id`].
pub fn record_task_id(task_id: &str, condition: Condition, budget: usize) -> String {
    if condition == Condition::Raw {
        task_id.to_string()
    } else {
        budget_task_id(task_id, budget)
    }
}

/// The record `task_id` of a trial of this run: [`record_task_id`], except that under
/// `via_proxy` `raw` depends on the budget (the proxy's) and carries it too.
fn trial_task_id(
    settings: &RunSettings,
    task_id: &str,
    condition: Condition,
    budget: usize,
) -> String {
    if settings.via_proxy {
        budget_task_id(task_id, budget)
    } else {
        record_task_id(task_id, condition, budget)
    }
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
    /// `--via-proxy` (or `via_proxy = true` in the runner file): `raw` trials go through the
    /// in-process proxy at each budget (see [`super::via_proxy`]).
    pub via_proxy: bool,
    /// Response cache and resume policy.
    pub audit: AuditSettings,
    /// `--cache-neutral`: each task's trials run back to back in a seeded order, one call at a
    /// time (see [`order`]); the runner should have been told with
    /// [`Runner::set_cache_neutral`] so local servers do not reuse prompt prefixes.
    pub cache_neutral: bool,
    /// The judge of a model-graded scorer (`qa-judge-v1`); required by it.
    pub judge: Option<Arc<Judge>>,
}

/// How a run uses the response cache and treats an existing run directory.
#[derive(Debug, Clone, Default)]
pub struct AuditSettings {
    /// The response cache HTTP calls go through; `None` calls upstream every time.
    pub cache: Option<Arc<ResponseCache>>,
    /// Resume a directory made by another svc version or with other settings.
    pub force: bool,
    /// Run the trials that have an error record again, replacing those records.
    pub retry_errors: bool,
}

impl RunSettings {
    /// Whether the run's runner or its judge calls a model over HTTP (then the response cache
    /// takes part).
    pub fn makes_http_calls(&self) -> bool {
        self.runner.is_http() || self.judge.as_ref().is_some_and(|j| j.runner.is_http())
    }
}

impl AuditSettings {
    /// Whether the cache is on by default for `runner`: HTTP runners at temperature 0, whose
    /// answer to a request is meant to be the same every time.
    pub fn cache_by_default(runner: &Runner) -> bool {
        runner.is_http() && runner.spec.temperature == 0.0
    }

    /// The default policy for `runner`: the response cache under `state_home` when
    /// [`Self::cache_by_default`], no forced resume, errors kept.
    pub fn defaults(runner: &Runner, state_home: &Path) -> Self {
        Self {
            cache: Self::cache_by_default(runner)
                .then(|| Arc::new(ResponseCache::open(state_home))),
            force: false,
            retry_errors: false,
        }
    }
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
    /// Model calls served by the response cache (no upstream request).
    pub cache_hits: u64,
    /// Error records removed by `retry_errors` (their trials ran again).
    pub retried_errors: u64,
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
    #[error(
        "{dir} holds a run made {differences}; records of both would mix in one run: pass another --out, or --force to resume anyway (the manifest's forced_over then lists what differed)"
    )]
    Mismatch { dir: PathBuf, differences: String },
    #[error(
        "{dir} holds trial records but {problem}, so whether they were made with these settings cannot be checked: restore manifest.json, pass another --out, or --force to resume anyway (the new manifest's forced_over then says so)"
    )]
    Unchecked { dir: PathBuf, problem: String },
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    #[error(
        "another svc run is writing {dir} (it holds {dir}/run.lock); wait for it to end, or pass another --out"
    )]
    Busy { dir: PathBuf },
    #[error(
        "{path} is a symbolic link: a run appends to its own files only (a link sent the records to the file it names); remove the link, or pass another --out"
    )]
    Linked { path: PathBuf },
    #[error(
        "cannot make the run's context commits durable: {0}; the records naming them were not written (free space or fix permissions, then re-run to resume)"
    )]
    Commit(String),
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
    /// Machine-readable figures of the note (`latency_split`, `secondary_score`).
    #[serde(skip_serializing_if = "Option::is_none")]
    values: Option<serde_json::Value>,
}

struct Finished {
    record: Option<TrialRecord>,
    notes: Vec<Note>,
    calls: TrialCalls,
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
    if settings.scorer.is_model_graded() && settings.judge.is_none() {
        return Err(RunError::Settings(format!(
            "scorer {} is model-graded and needs a judge runner (--judge RUNNER, an HTTP or command runner; the fixture cannot judge)",
            settings.scorer
        )));
    }
    let started = Instant::now();
    let started_at = utc_now();
    let trials_path = settings.out_dir.join("trials.jsonl");
    let workload = &settings.workload;
    let runner = &settings.runner;
    let mut manifest = new_manifest(settings, started_at);
    let _lock = lock::lock(&settings.out_dir)?;
    for name in ["trials.jsonl", "notes.jsonl", audit::REQUESTS_LOG] {
        let path = settings.out_dir.join(name);
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(RunError::Linked { path });
        }
    }
    // The directory's identity is checked before anything in it is touched.
    match load_manifest(&settings.out_dir) {
        Ok(Some(previous)) => resume::merge_previous(
            &mut manifest,
            &previous,
            &settings.out_dir,
            settings.audit.force,
        )?,
        // Records whose manifest is gone or damaged cannot be checked against these settings:
        // resuming would silently mix two experiments in one file.
        unknown if resume::has_records(&trials_path) => {
            let problem = match unknown {
                Err(problem) => problem,
                Ok(_) => format!(
                    "{} is missing",
                    settings.out_dir.join("manifest.json").display()
                ),
            };
            if !settings.audit.force {
                return Err(RunError::Unchecked {
                    dir: settings.out_dir.clone(),
                    problem,
                });
            }
            manifest
                .forced_over
                .push(format!("manifest: unreadable ({problem})"));
        }
        Ok(None) | Err(_) => {}
    }
    let existing = resume::existing_keys(&trials_path)?;
    let mut done_keys = existing.keys;
    let mut done_errors = existing.errors.len() as u64;
    let mut retried_errors = 0;
    if settings.audit.retry_errors && !existing.errors.is_empty() {
        retried_errors = resume::drop_errors(&settings.out_dir, &existing.errors)?;
        done_keys.retain(|key| !existing.errors.contains(key));
        done_errors = 0;
    }
    let mut cells: Vec<Cell> = Vec::new();
    for &budget in &settings.budgets {
        for (index, _) in workload.tasks.iter().enumerate() {
            if !settings.shard.contains(index) {
                continue;
            }
            for &condition in &settings.conditions {
                // raw's context does not depend on the budget: one trial per task, at the
                // first budget (see `record_task_id`).
                if condition == Condition::Raw
                    && budget != settings.budgets[0]
                    && !settings.via_proxy
                {
                    continue;
                }
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
        resume::record_key(
            &trial_task_id(
                settings,
                &workload.tasks[cell.task].id,
                cell.condition,
                cell.budget,
            ),
            cell.condition,
            cell.replicate,
            settings.scorer.as_str(),
            &runner.spec.provider,
            &runner.spec.model,
        )
    };
    cells.retain(|cell| !done_keys.contains(&key(cell)));
    let skipped = planned - cells.len() as u64;
    order::arrange(&mut cells, settings.seed, settings.cache_neutral);

    manifest.planned = planned;
    manifest.skipped = skipped;
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
    let requests = Arc::new(RequestStore::new(&settings.out_dir));
    let audit_sinks = AuditSinks {
        requests: requests.clone(),
        cache: settings
            .audit
            .cache
            .clone()
            .filter(|_| settings.makes_http_calls()),
        calls_path: settings.out_dir.join(audit::REQUESTS_LOG),
    };
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
            &audit_sinks,
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

    let cache = settings.audit.cache.as_deref().filter(|_| runner.is_http());
    let via = match settings.via_proxy {
        true => Some(
            ViaProxy::start(runner.clone(), &settings.budgets, &settings.state_home)
                .map_err(|error| RunError::Settings(error.to_string()))?,
        ),
        false => None,
    };
    let context = TrialContext {
        settings,
        via,
        prepared: prepared.clone(),
        commits,
        tokenizer,
        caller: Caller {
            runner,
            cache,
            store: requests.as_ref(),
        },
        judge: settings.judge.as_ref().map(|judge| Caller {
            runner: &judge.runner,
            cache: settings
                .audit
                .cache
                .as_deref()
                .filter(|_| judge.runner.is_http()),
            store: requests.as_ref(),
        }),
    };
    // A judge does I/O, so a judged run takes the async path even with a local runner.
    if runner.is_local() && settings.judge.is_none() {
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
        cache_hits: counts.cache_hits,
        retried_errors,
        aborted: counts.aborted,
        elapsed_seconds: started.elapsed().as_secs_f64(),
    })
}

struct TrialContext<'a> {
    settings: &'a RunSettings,
    via: Option<ViaProxy>,
    prepared: Arc<Vec<Option<PreparedContext>>>,
    commits: CommitStore,
    tokenizer: Tokenizer,
    caller: Caller<'a>,
    /// Makes the judge's calls (`qa-judge-v1`).
    judge: Option<Caller<'a>>,
}

/// A trial after its context is shaped, before any model call.
#[derive(Clone)]
struct Staged {
    cell: Cell,
    shape: Shape,
    /// Milliseconds of the condition's own context work (index, selection, compression,
    /// commit; the plan of a model summary), part of the trial's `latency_ms`.
    context_ms: f64,
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
    context_ms: f64,
    notes: Vec<(&'static str, String)>,
    summary: Option<SummaryAccount>,
}

impl TrialContext<'_> {
    fn task(&self, cell: &Cell) -> &Task {
        &self.settings.workload.tasks[cell.task]
    }

    /// The answer request of a shaped trial (none when it has no context).
    fn answer_request(&self, shaped: &Shaped) -> Option<super::runner::ModelRequest> {
        let task = self.task(&shaped.cell);
        match &shaped.built {
            Ok(built) if built.tokens > 0 => Some(self.settings.runner.request(
                &built.text,
                &task.question,
                task.answer_kind,
            )),
            _ => None,
        }
    }

    /// The proxy a trial's answer call goes through: `raw` under `via_proxy`.
    fn proxy_for(&self, cell: &Cell) -> Option<&ViaProxy> {
        self.via
            .as_ref()
            .filter(|_| cell.condition == Condition::Raw)
    }

    /// The judge's grading call of a successful answer, when the run has a judge.
    async fn judge_call(
        &self,
        cell: &Cell,
        reply: &Option<(Result<ModelReply, RunnerError>, f64)>,
        calls: &mut Vec<audit::CallRecord>,
    ) -> Option<JudgeCall> {
        let (judge, caller) = (self.settings.judge.as_ref()?, self.judge.as_ref()?);
        let Some((Ok(answer), _)) = reply else {
            return None;
        };
        let request = judge.request(self.task(cell), &answer.text);
        let called = caller
            .call(&request, cell.replicate, CallPurpose::Judge)
            .await;
        calls.push(called.record);
        Some(JudgeCall {
            result: called.result,
            latency_ms: called.latency_ms,
        })
    }

    /// Records a call made through the proxy; the trial's context becomes what the model got.
    fn proxied(
        &self,
        shaped: &mut Shaped,
        request: &super::runner::ModelRequest,
        call: ProxiedCall,
        count: impl Fn(&str) -> usize,
    ) -> audit::Called {
        if let Ok(built) = &mut shaped.built {
            shaped
                .notes
                .push(via_proxy::describe(&call, built, shaped.cell.budget, count));
        }
        self.caller.record_external(
            request,
            shaped.cell.replicate,
            CallPurpose::Answer,
            call.result,
            call.latency_ms,
            call.attempt,
        )
    }

    fn stage(&self, cell: &Cell) -> Staged {
        let start = Instant::now();
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
            context_ms: start.elapsed().as_secs_f64() * 1000.0,
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
            context_ms,
            mut notes,
        } = staged;
        let plan = match shape {
            Shape::Built(built) => {
                return Shaped {
                    cell,
                    built,
                    context_ms,
                    notes,
                    summary: None,
                };
            }
            Shape::Summarise(plan) => plan,
        };
        let Some(call) = call else {
            return Shaped {
                cell,
                context_ms,
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
                context_ms,
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
                    context_ms,
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
        let replicate = staged.cell.replicate;
        let mut calls = Vec::new();
        // Each trial pays for its own summary, as each stands for one client session.
        let call = self.summary_request(&staged).map(|(request, counted)| {
            let called = self
                .caller
                .call_local(&request, replicate, CallPurpose::Summary);
            calls.push(called.record);
            SummaryCall {
                reply: called.result,
                latency_ms: called.latency_ms,
                counted_input_tokens: counted,
            }
        });
        let mut shaped = self.resolve(staged, call);
        if let Some(started) = self.start_loop(&shaped) {
            let trial = match started {
                Err(trial) => *trial,
                Ok(mut trial_loop) => {
                    while let Some(request) = trial_loop.next_request() {
                        let called =
                            self.caller
                                .call_local(&request, replicate, CallPurpose::Answer);
                        calls.push(called.record);
                        trial_loop.answer(called.result, called.latency_ms);
                    }
                    trial_loop.finish()
                }
            };
            return self.finish_loop(shaped, trial, calls, None);
        }
        let reply = self.answer_request(&shaped).map(|request| {
            let called = match self.proxy_for(&shaped.cell) {
                Some(via) => {
                    let call = via.call_blocking(runner, &request, shaped.cell.budget);
                    self.proxied(&mut shaped, &request, call, |text| via.count(text))
                }
                None => self
                    .caller
                    .call_local(&request, replicate, CallPurpose::Answer),
            };
            calls.push(called.record);
            (called.result, called.latency_ms)
        });
        self.finish(shaped, reply, calls, None)
    }

    /// The fixed-point loop of a trial, when the run has the setting and the trial's condition
    /// selects (`svc`, `combined`) from a context that was built.
    fn start_loop(&self, shaped: &Shaped) -> Option<Result<TrialLoop<'_>, Box<LoopTrial>>> {
        let setting = self.settings.fixed_point?;
        let built = shaped.built.as_ref().ok()?;
        let full = self.prepared[shaped.cell.task].as_ref()?;
        let task = self.task(&shaped.cell);
        let units = condition::svc_units(
            shaped.cell.condition,
            task,
            full,
            shaped.cell.budget,
            &self.tokenizer,
        )?;
        Some(TrialLoop::start(
            setting,
            &self.settings.state_home,
            &self.settings.runner,
            task,
            &units,
            shaped.cell.budget,
            self.settings.selector.ranking_weights().unwrap_or_default(),
            built.context_commit_id.clone(),
            &self.tokenizer,
        ))
    }

    /// A trial the loop ran: its context and merged reply replace the condition's.
    fn finish_loop(
        &self,
        mut shaped: Shaped,
        trial: LoopTrial,
        calls: Vec<audit::CallRecord>,
        judged: Option<JudgeCall>,
    ) -> Finished {
        shaped.built = trial.built;
        shaped.notes.extend(trial.notes);
        let mut finished = self.finish(shaped, trial.reply, calls, judged);
        // A loop that failed in a later round still spent its earlier calls: the error record
        // bills them, as the record of a finished loop sums every call.
        if let (Some((context_tokens, spent)), Some(record)) = (trial.spent, &mut finished.record)
            && record.outcome == Outcome::Error
        {
            record.context_tokens = record.context_tokens.max(context_tokens as u64);
            record.output_tokens = spent.output_tokens;
            record.reasoning_tokens = spent.reasoning_tokens;
            record.billed_cost_usd = self.settings.runner.cost_usd(&spent);
        }
        finished
    }

    /// Turns a staged trial and the model's reply (None when the model was not called) into a
    /// record and notes; `judged` is the grading call of a model-graded scorer.
    fn finish(
        &self,
        shaped: Shaped,
        reply: Option<(Result<ModelReply, RunnerError>, f64)>,
        calls: Vec<audit::CallRecord>,
        judged: Option<JudgeCall>,
    ) -> Finished {
        let settings = self.settings;
        let cell = shaped.cell;
        let task = self.task(&cell);
        let runner = &settings.runner;
        let task_id = trial_task_id(settings, &task.id, cell.condition, cell.budget);
        let context_ms = shaped.context_ms;
        let mut notes = Vec::new();
        let note = |kind: &'static str, detail: String| Note {
            task_id: task_id.clone(),
            condition: cell.condition,
            replicate: cell.replicate,
            kind,
            detail,
            values: None,
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
                        // A model-graded score is set by the judge below.
                        record.task_score = settings
                            .scorer
                            .score(&reply.text, task)
                            .unwrap_or(0.0)
                            .clamp(0.0, 1.0);
                        // A path list is judged path by path against the context sent (see
                        // `scorer::unsupported_path_rate`); prose goes to the witness.
                        record.unsupported_claim_rate = match settings.scorer.answer_type() {
                            scorer::AnswerType::PathList => {
                                scorer::unsupported_path_rate(&reply.text, &built.text)
                            }
                            scorer::AnswerType::Text => {
                                settings.claim_checker.unsupported_claim_rate(
                                    &reply.text,
                                    &task.claim_evidence(),
                                    Some(&task.question),
                                )
                            }
                        }
                        .clamp(0.0, 1.0);
                        if let Some(secondary) = settings.scorer.secondary() {
                            let score = secondary
                                .score(&reply.text, task)
                                .unwrap_or(0.0)
                                .clamp(0.0, 1.0);
                            let mut secondary_note =
                                note("secondary_score", format!("{secondary} = {score}"));
                            secondary_note.values = Some(serde_json::json!({
                                "scorer": secondary.as_str(),
                                "score": score,
                            }));
                            notes.push(secondary_note);
                        }
                        if let Some(usage) = cache_state::CacheUsage::of(&reply) {
                            let mut cache_note = note(cache_state::NOTE_KIND, usage.detail());
                            cache_note.values = serde_json::to_value(&usage).ok();
                            notes.push(cache_note);
                        }
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
        if let Some(judge) = settings
            .judge
            .as_ref()
            .filter(|_| settings.scorer.is_model_graded())
        {
            for (kind, detail, values) in judge::grade(&mut record, judged, judge) {
                let mut judge_note = note(kind, detail);
                judge_note.values = values;
                notes.push(judge_note);
            }
        }
        // The summarisation call is part of the trial: its output, cost and time are the
        // trial's. Its input is not context of the answer call; notes.jsonl has it.
        let model_ms = record.latency_ms;
        let mut summary_ms = 0.0;
        if let Some(account) = shaped.summary {
            record.output_tokens += account.output_tokens;
            record.reasoning_tokens += account.reasoning_tokens;
            record.billed_cost_usd += account.cost_usd;
            record.latency_ms += account.latency_ms;
            summary_ms = account.latency_ms;
            if let Some(usage_source) = account.failed {
                record.usage_source = usage_source;
            }
        }
        // latency_ms is the whole trial as a client would wait for it: the condition's own
        // context work plus the model call(s). The split goes to notes.jsonl.
        record.latency_ms += context_ms;
        let mut split = note(
            "latency_split",
            format!(
                "latency_ms {:.3} = context {context_ms:.3} + model {model_ms:.3} + summary {summary_ms:.3}",
                record.latency_ms
            ),
        );
        split.values = Some(serde_json::json!({
            "latency_ms": record.latency_ms,
            "context_ms": context_ms,
            "model_ms": model_ms,
            "summary_ms": summary_ms,
        }));
        notes.push(split);
        let calls = TrialCalls {
            task_id: task_id.clone(),
            condition: cell.condition,
            replicate: cell.replicate,
            calls,
        };
        let violations = record.violations();
        if violations.is_empty() {
            Finished {
                record: Some(record),
                notes,
                calls,
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
                calls,
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
    // Cache-neutral runs make one call at a time, so each task's trials really run back to
    // back and no call's latency includes another's. A judged run may go as wide as its judge.
    let concurrency = match (&context.settings.judge, context.settings.cache_neutral) {
        (_, true) => 1,
        (Some(judge), false) => context
            .settings
            .runner
            .spec
            .concurrency
            .max(judge.runner.spec.concurrency),
        (None, false) => context.settings.runner.spec.concurrency,
    }
    .max(1);
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
            let runner = &context.settings.runner;
            let mut calls = Vec::new();
            let call = match context.summary_request(&staged) {
                Some((request, counted)) => {
                    let called = context
                        .caller
                        .call(&request, cell.replicate, CallPurpose::Summary)
                        .await;
                    calls.push(called.record);
                    Some(SummaryCall {
                        reply: called.result,
                        latency_ms: called.latency_ms,
                        counted_input_tokens: counted,
                    })
                }
                None => None,
            };
            let mut shaped = context.resolve(staged, call);
            if let Some(started) = context.start_loop(&shaped) {
                let trial = match started {
                    Err(trial) => *trial,
                    Ok(mut trial_loop) => {
                        while let Some(request) = trial_loop.next_request() {
                            let called = context
                                .caller
                                .call(&request, cell.replicate, CallPurpose::Answer)
                                .await;
                            calls.push(called.record);
                            trial_loop.answer(called.result, called.latency_ms);
                        }
                        trial_loop.finish()
                    }
                };
                let judged = context.judge_call(cell, &trial.reply, &mut calls).await;
                if sender
                    .send(context.finish_loop(shaped, trial, calls, judged))
                    .is_err()
                {
                    return;
                }
                continue;
            }
            let reply = match context.answer_request(&shaped) {
                Some(request) => {
                    let called = match context.proxy_for(cell) {
                        Some(via) => {
                            let call = via.call(runner, &request, cell.budget).await;
                            context.proxied(&mut shaped, &request, call, |text| via.count(text))
                        }
                        None => {
                            context
                                .caller
                                .call(&request, cell.replicate, CallPurpose::Answer)
                                .await
                        }
                    };
                    calls.push(called.record);
                    Some((called.result, called.latency_ms))
                }
                None => None,
            };
            let judged = context.judge_call(cell, &reply, &mut calls).await;
            let finished = context.finish(shaped, reply, calls, judged);
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

/// The current UTC time as RFC 3339 (`2026-11-21T12:00:00Z`).
pub fn utc_now() -> String {
    crate::clock::rfc3339_seconds(std::time::SystemTime::now())
}

pub mod cache_state;
mod lock;
pub use lock::is_being_written;
mod manifest;
mod order;
mod write;
use write::{AuditSinks, write_loop};
mod resume;
mod shard;
pub use manifest::{
    CacheNeutral, Manifest, ManifestJudge, ManifestRunner, ManifestWorkload, default_run_id,
    load_manifest, read_manifest,
};
use manifest::{new_manifest, write_manifest};
pub use resume::identity;
pub use shard::{ShardEnvError, ShardSpec};
#[cfg(test)]
mod tests;
