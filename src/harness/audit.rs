//! What each trial sent and got, kept with its run so a user can audit and re-run it.
//!
//! - Every model request (system prompt, the user prompt as sent, the context and question it
//!   was built from, model and sampling settings) is stored content-addressed in the run
//!   directory's group-commit packs (`<run>/packs/`, keys `requests/<aa>/<rest of sha256>`):
//!   two files per session, however many trials, and replicates of one request share a blob.
//! - `<run>/requests.jsonl` has one line per trial: its key (task_id with budget, condition,
//!   replicate) and each model call (`answer`, and `summary` for model-summary compaction)
//!   with the request's SHA-256, whether the response cache served it, and every HTTP attempt
//!   (start time, outcome, `Retry-After`, wait).
//! - [`Caller`] makes a trial's model calls through the response cache
//!   ([`super::runner::cache`]) and stores what was sent.
//!
//! A cache hit is recorded as the original call: the same reply, usage, cost and latency (the
//! original call's), so a run's records do not depend on what was cached; `requests.jsonl`
//! says `"cache": "hit"` with the original call's time.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::runner::cache::{self, CachedResponse, ResponseCache};
use super::runner::http::Attempt;
use super::runner::{ModelReply, ModelRequest, Runner, RunnerError};
use super::workload::AnswerKind;
use crate::digest;
use crate::state::{GroupCommit, Packs, StateError};
use crate::trial::Condition;

/// The per-trial call log of a run directory.
pub const REQUESTS_LOG: &str = "requests.jsonl";
/// Folder of the request blobs (inside the run directory's packs).
pub const REQUESTS_DIR: &str = "requests";

/// One model request exactly as the runner sent it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestBlob {
    /// The runner kind (`fixture`, `openai_compatible`, `anthropic`, `command`).
    pub runner_kind: String,
    pub model: String,
    pub temperature: f64,
    pub max_output_tokens: usize,
    pub answer_kind: AnswerKind,
    /// The system prompt (empty when none was sent).
    pub system: String,
    /// The user message as sent: the runner's template filled with instruction, context and
    /// question.
    pub prompt: String,
    /// The context part of `prompt`, as the condition shaped it.
    pub context: String,
    pub question: String,
    /// llama.cpp's `cache_prompt` as sent (`--cache-neutral`); absent otherwise, so blobs of
    /// other runs keep their hashes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_prompt: Option<bool>,
}

impl RequestBlob {
    pub fn new(runner: &Runner, request: &ModelRequest) -> Self {
        Self {
            runner_kind: runner.spec.kind.as_str().to_string(),
            model: request.model.clone(),
            temperature: runner.spec.temperature,
            max_output_tokens: request.max_output_tokens,
            answer_kind: request.answer_kind,
            system: request.system.clone(),
            prompt: request.prompt.clone(),
            context: request.context.clone(),
            question: request.question.clone(),
            cache_prompt: runner.cache_prompt(),
        }
    }

    /// The canonical bytes (fields in declaration order) and their SHA-256.
    pub fn encode(&self) -> (Vec<u8>, String) {
        // Serialising plain strings and numbers cannot fail.
        let bytes = serde_json::to_vec(self).unwrap_or_default();
        let sha = digest::sha256_hex(&bytes);
        (bytes, sha)
    }
}

/// Which call of a trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallPurpose {
    /// The call that answers the task.
    Answer,
    /// The summarisation call of model-summary compaction.
    Summary,
    /// The grading call of the `qa-judge-v1` scorer (made with the judge runner).
    Judge,
}

/// How the response cache took part in a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheUse {
    /// No cache for this run (a local runner, `--no-cache`, or sampling at temperature > 0).
    Off,
    /// Asked upstream; a success was stored.
    Miss,
    /// Served from the cache: no upstream request.
    Hit,
}

/// One model call of a trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallRecord {
    pub purpose: CallPurpose,
    pub request_sha256: String,
    pub cache: CacheUse,
    /// Upstream attempts of this call (none for a cache hit).
    pub attempts: Vec<Attempt>,
    /// For a cache hit: when the original call was made.
    pub cached_at: Option<String>,
}

/// One line of `requests.jsonl`: a trial's model calls.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrialCalls {
    /// The record's task_id (with its budget suffix).
    pub task_id: String,
    pub condition: Condition,
    pub replicate: u64,
    /// Empty when the model was not called (the condition failed or left no context).
    pub calls: Vec<CallRecord>,
}

/// Errors reading a run's audit trail.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    #[error(transparent)]
    State(#[from] StateError),
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}: not a call line: {message}")]
    Line {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error(
        "{path}:{line}: not a trial record: {message} (`svc records validate {path}` lists every problem)"
    )]
    Record {
        path: PathBuf,
        line: usize,
        message: String,
    },
    #[error(
        "request {sha256} is not in {run}'s packs; the run was made before requests were stored, or its packs/ folder is incomplete"
    )]
    MissingRequest { run: PathBuf, sha256: String },
    #[error("request {sha256} in {run} is damaged: its bytes hash to {actual}")]
    DamagedRequest {
        run: PathBuf,
        sha256: String,
        actual: String,
    },
}

/// The request blobs of one run directory.
#[derive(Debug)]
pub struct RequestStore {
    run_dir: PathBuf,
    group: GroupCommit,
}

impl RequestStore {
    pub fn new(run_dir: &Path) -> Self {
        Self {
            run_dir: run_dir.to_path_buf(),
            group: GroupCommit::new(run_dir),
        }
    }

    fn path(run_dir: &Path, sha256: &str) -> PathBuf {
        let (head, tail) = sha256.split_at(2.min(sha256.len()));
        run_dir.join(REQUESTS_DIR).join(head).join(tail)
    }

    /// Stages `blob` (durable at the next [`sync`](Self::sync)) and returns its SHA-256.
    pub fn put(&self, blob: &RequestBlob) -> Result<String, StateError> {
        let (bytes, sha) = blob.encode();
        let path = Self::path(&self.run_dir, &sha);
        if !self.group.contains(&path) {
            self.group.stage(&path, &bytes)?;
        }
        Ok(sha)
    }

    pub fn sync(&self) -> Result<(), StateError> {
        self.group.sync().map(|_| ())
    }

    /// Reads and verifies the request `sha256` of the run in `run_dir`.
    pub fn read(run_dir: &Path, sha256: &str) -> Result<RequestBlob, AuditError> {
        let bytes = Packs::new(run_dir)
            .read(&Self::path(run_dir, sha256))?
            .ok_or_else(|| AuditError::MissingRequest {
                run: run_dir.to_path_buf(),
                sha256: sha256.to_string(),
            })?;
        let actual = digest::sha256_hex(&bytes);
        let damaged = || AuditError::DamagedRequest {
            run: run_dir.to_path_buf(),
            sha256: sha256.to_string(),
            actual: actual.clone(),
        };
        if actual != sha256 {
            return Err(damaged());
        }
        serde_json::from_slice(&bytes).map_err(|_| damaged())
    }
}

/// Reads `requests.jsonl` of `run_dir` (empty when the run has none); a later line for the
/// same trial replaces an earlier one. A torn last line (an interrupted write) is skipped.
pub fn read_calls(run_dir: &Path) -> Result<Vec<TrialCalls>, AuditError> {
    let path = run_dir.join(REQUESTS_LOG);
    let io = |source| AuditError::Io {
        path: path.clone(),
        source,
    };
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(error) => return Err(io(error)),
    };
    let mut lines: Vec<String> = Vec::new();
    for line in std::io::BufReader::new(file).lines() {
        lines.push(line.map_err(io)?);
    }
    let mut calls: Vec<TrialCalls> = Vec::new();
    let mut at: std::collections::HashMap<(String, Condition, u64), usize> =
        std::collections::HashMap::new();
    let count = lines.len();
    for (index, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let parsed: TrialCalls = match serde_json::from_str(line) {
            Ok(parsed) => parsed,
            Err(_) if index + 1 == count => break,
            Err(error) => {
                return Err(AuditError::Line {
                    path: path.clone(),
                    line: index + 1,
                    message: error.to_string(),
                });
            }
        };
        let key = (parsed.task_id.clone(), parsed.condition, parsed.replicate);
        match at.get(&key) {
            Some(&i) => calls[i] = parsed,
            None => {
                at.insert(key, calls.len());
                calls.push(parsed);
            }
        }
    }
    Ok(calls)
}

/// A model call's result with what the audit trail keeps of it.
#[derive(Debug)]
pub struct Called {
    pub result: Result<ModelReply, RunnerError>,
    /// The original call's latency for a cache hit.
    pub latency_ms: f64,
    pub record: CallRecord,
}

/// Makes a trial's model calls: stores the request, asks the cache, calls the runner.
pub struct Caller<'a> {
    pub runner: &'a Runner,
    pub cache: Option<&'a ResponseCache>,
    pub store: &'a RequestStore,
}

impl Caller<'_> {
    /// Stores the request; returns its hash and, when the cache takes part, its cache key.
    fn prepare(
        &self,
        request: &ModelRequest,
        replicate: u64,
    ) -> Result<(String, Option<String>), RunnerError> {
        let blob = RequestBlob::new(self.runner, request);
        let sha = self
            .store
            .put(&blob)
            .map_err(|error| RunnerError::InvalidResponse {
                url: self.runner.spec.name.clone(),
                message: format!("cannot store the request for the audit trail: {error}"),
            })?;
        let key = self.cache.map(|_| cache::key(self.runner, &sha, replicate));
        Ok((sha, key))
    }

    fn failed(purpose: CallPurpose, error: RunnerError) -> Called {
        Called {
            result: Err(error),
            latency_ms: 0.0,
            record: CallRecord {
                purpose,
                request_sha256: String::new(),
                cache: CacheUse::Off,
                attempts: Vec::new(),
                cached_at: None,
            },
        }
    }

    /// One call (async runners), through the cache when there is one.
    pub async fn call(
        &self,
        request: &ModelRequest,
        replicate: u64,
        purpose: CallPurpose,
    ) -> Called {
        let (sha, key) = match self.prepare(request, replicate) {
            Ok(prepared) => prepared,
            Err(error) => return Self::failed(purpose, error),
        };
        if let (Some(cache), Some(key)) = (self.cache, &key)
            && let Some(hit) = cache.get(key)
        {
            return Called {
                result: Ok(hit.reply()),
                latency_ms: hit.latency_ms,
                record: CallRecord {
                    purpose,
                    request_sha256: sha,
                    cache: CacheUse::Hit,
                    attempts: Vec::new(),
                    cached_at: Some(hit.created_at),
                },
            };
        }
        // The jitter of this call's retries is a function of the call, so a re-run waits alike.
        let seed = u64::from_str_radix(&digest::sha256_hex(format!("{sha}|{replicate}"))[..16], 16)
            .unwrap_or(0);
        let start = Instant::now();
        let (result, attempts) = self.runner.call_traced(request, seed).await;
        let latency_ms = start.elapsed().as_secs_f64() * 1000.0;
        let mut cache_use = CacheUse::Off;
        if let (Some(cache), Some(key)) = (self.cache, key) {
            cache_use = CacheUse::Miss;
            if let Ok(reply) = &result {
                // A cache that cannot stage is only a missed saving; the sync reports real I/O
                // errors.
                let _ = cache.put(CachedResponse {
                    key,
                    text: reply.text.clone(),
                    provider_request_id: reply.provider_request_id.clone(),
                    input_tokens: reply.input_tokens,
                    cached_input_tokens: reply.cached_input_tokens,
                    cache_write_tokens: reply.cache_write_tokens,
                    output_tokens: reply.output_tokens,
                    reasoning_tokens: reply.reasoning_tokens,
                    usage_source: reply.usage_source,
                    latency_ms,
                    created_at: super::run::utc_now(),
                });
            }
        }
        Called {
            result,
            latency_ms,
            record: CallRecord {
                purpose,
                request_sha256: sha,
                cache: cache_use,
                attempts,
                cached_at: None,
            },
        }
    }

    /// One call of a local runner (no I/O, no cache).
    pub fn call_local(
        &self,
        request: &ModelRequest,
        replicate: u64,
        purpose: CallPurpose,
    ) -> Called {
        let sha = match self.prepare(request, replicate) {
            Ok((sha, _)) => sha,
            Err(error) => return Self::failed(purpose, error),
        };
        let (mut attempt, started) = Attempt::starting();
        let result = self
            .runner
            .call_local(request)
            .ok_or_else(|| RunnerError::InvalidResponse {
                url: self.runner.spec.name.clone(),
                message: "not a local runner".into(),
            });
        attempt.finish(started, &result);
        Called {
            latency_ms: attempt.elapsed_ms,
            result,
            record: CallRecord {
                purpose,
                request_sha256: sha,
                cache: CacheUse::Off,
                attempts: vec![attempt],
                cached_at: None,
            },
        }
    }

    /// Stores `request` and records a call that was made without the runner's client (the
    /// in-process proxy of `via_proxy`), never through the cache.
    pub fn record_external(
        &self,
        request: &ModelRequest,
        replicate: u64,
        purpose: CallPurpose,
        result: Result<ModelReply, RunnerError>,
        latency_ms: f64,
        attempt: Attempt,
    ) -> Called {
        let sha = match self.prepare(request, replicate) {
            Ok((sha, _)) => sha,
            Err(error) => return Self::failed(purpose, error),
        };
        Called {
            latency_ms,
            result,
            record: CallRecord {
                purpose,
                request_sha256: sha,
                cache: CacheUse::Off,
                attempts: vec![attempt],
                cached_at: None,
            },
        }
    }
}

/// Which trials of a run to show.
#[derive(Debug, Clone, Default)]
pub struct TrialFilter {
    /// A workload task id (every budget) or a record task_id (`<task>@b<budget>`).
    pub task_id: String,
    pub condition: Option<Condition>,
    pub replicate: Option<u64>,
    pub budget: Option<usize>,
}

impl TrialFilter {
    fn matches(&self, task_id: &str, condition: Condition, replicate: u64) -> bool {
        let (task, budget) = super::run::split_task_id(task_id);
        (task_id == self.task_id || task == self.task_id)
            && self.condition.is_none_or(|c| c == condition)
            && self.replicate.is_none_or(|r| r == replicate)
            && self.budget.is_none_or(|b| Some(b) == budget)
    }
}

/// One model call with the request it sent.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallAudit {
    #[serde(flatten)]
    pub call: CallRecord,
    pub request: RequestBlob,
}

/// One trial: its record and its calls with their requests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrialAudit {
    pub task_id: String,
    pub condition: Condition,
    pub replicate: u64,
    /// The trial's record (null when none was written; notes.jsonl says why).
    pub record: Option<crate::trial::TrialRecord>,
    pub calls: Vec<CallAudit>,
}

/// The trials of the run in `run_dir` that `filter` selects, in `requests.jsonl` order, each
/// with its record and its requests (read from the run's packs and verified by hash).
pub fn trial_audits(run_dir: &Path, filter: &TrialFilter) -> Result<Vec<TrialAudit>, AuditError> {
    let mut records: std::collections::HashMap<
        (String, Condition, u64),
        crate::trial::TrialRecord,
    > = std::collections::HashMap::new();
    let trials = run_dir.join("trials.jsonl");
    if let Ok(text) = std::fs::read_to_string(&trials) {
        // A last line without its newline was cut off mid-write: the run repairs it on resume,
        // so it is not a record yet.
        let torn = !text.is_empty() && !text.ends_with('\n');
        let count = text.lines().count();
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let record: crate::trial::TrialRecord = match serde_json::from_str(line) {
                Ok(record) => record,
                Err(_) if torn && index + 1 == count => break,
                Err(error) => {
                    return Err(AuditError::Record {
                        path: trials.clone(),
                        line: index + 1,
                        message: error.to_string(),
                    });
                }
            };
            if filter.matches(&record.task_id, record.condition, record.replicate) {
                records.insert(
                    (record.task_id.clone(), record.condition, record.replicate),
                    record,
                );
            }
        }
    }
    let mut out = Vec::new();
    for trial in read_calls(run_dir)? {
        if !filter.matches(&trial.task_id, trial.condition, trial.replicate) {
            continue;
        }
        let calls = trial
            .calls
            .into_iter()
            .map(|call| {
                let request = RequestStore::read(run_dir, &call.request_sha256)?;
                Ok(CallAudit { call, request })
            })
            .collect::<Result<Vec<_>, AuditError>>()?;
        out.push(TrialAudit {
            record: records.remove(&(trial.task_id.clone(), trial.condition, trial.replicate)),
            task_id: trial.task_id,
            condition: trial.condition,
            replicate: trial.replicate,
            calls,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_round_trip_and_damage_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let runner = Runner::fixture();
        let request = runner.request("The sky is green.", "Sky colour?", AnswerKind::Span);
        let blob = RequestBlob::new(&runner, &request);
        let store = RequestStore::new(dir.path());
        let sha = store.put(&blob).expect("put");
        assert_eq!(store.put(&blob).expect("again"), sha, "content-addressed");
        assert!(matches!(
            RequestStore::read(dir.path(), &sha),
            Err(AuditError::MissingRequest { .. })
        ));
        store.sync().expect("sync");
        let read = RequestStore::read(dir.path(), &sha).expect("read");
        assert_eq!(read, blob);
        assert!(read.prompt.contains("The sky is green.") && read.prompt.contains("Sky colour?"));
        let other = "0".repeat(64);
        assert!(matches!(
            RequestStore::read(dir.path(), &other),
            Err(AuditError::MissingRequest { .. })
        ));
    }

    #[test]
    fn later_call_lines_replace_earlier_ones_and_a_torn_tail_is_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let line = |replicate: u64, sha: &str| {
            serde_json::to_string(&TrialCalls {
                task_id: "t@b64".into(),
                condition: Condition::Raw,
                replicate,
                calls: vec![CallRecord {
                    purpose: CallPurpose::Answer,
                    request_sha256: sha.into(),
                    cache: CacheUse::Off,
                    attempts: Vec::new(),
                    cached_at: None,
                }],
            })
            .expect("json")
        };
        let text = format!(
            "{}\n{}\n{}\n{{\"task_id\":",
            line(0, "a"),
            line(1, "b"),
            line(0, "c")
        );
        std::fs::write(dir.path().join(REQUESTS_LOG), text).expect("write");
        let calls = read_calls(dir.path()).expect("read");
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].calls[0].request_sha256, "c");
        assert_eq!(calls[1].calls[0].request_sha256, "b");
    }
}
