//! Batch jobs: many contents compressed under one budget, from a directory (every regular file,
//! honouring `.gitignore`) or from a JSON Lines file of `{id, query?, path | text | messages}`
//! jobs. A bad line or an unreadable file becomes an error record naming the file, line and
//! field; the other jobs still run.

use std::collections::HashMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{
    CompressError, CompressOptions, ContentKind, Message, compress_bytes, compress_messages,
};
use crate::context::commit::CommitStore;
use crate::context::index::{Index, IndexOptions};
use crate::context::select::{self, SelectError, SelectOptions};
use crate::tokens::Tokenizer;

/// What a job compresses.
#[derive(Debug, Clone, PartialEq)]
pub enum JobInput {
    /// A file (compressed) or a directory (indexed and selected against the job's query).
    Path(PathBuf),
    Text(String),
    Messages(Vec<Message>),
}

/// One batch job.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchJob {
    pub id: String,
    pub query: Option<String>,
    pub input: JobInput,
    /// Overrides the detected kind.
    pub kind: Option<ContentKind>,
    /// Overrides the batch budget for this job.
    pub budget: Option<usize>,
    /// Where the job was defined (`jobs.jsonl:3`, or the file path).
    pub location: String,
}

/// How a job ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Compressed within the budget (or already within it).
    Ok,
    /// Cannot fit the budget even at the minimum representation.
    OverBudget,
    /// Bad job definition or unreadable input.
    Error,
}

impl JobStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Ok => "ok",
            JobStatus::OverBudget => "over_budget",
            JobStatus::Error => "error",
        }
    }
}

/// The outcome of one job: a row of the batch table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchRecord {
    pub id: String,
    /// `code`, `json`, `logs`, `prose` or `messages`; null when the input could not be read.
    pub kind: Option<String>,
    pub tokens_before: Option<usize>,
    pub tokens_after: Option<usize>,
    /// `tokens_before / tokens_after`.
    pub ratio: Option<f64>,
    pub status: JobStatus,
    pub ctx_id: Option<String>,
    pub elisions: usize,
    pub budget: usize,
    pub location: String,
    /// What went wrong, for `over_budget` and `error`.
    pub error: Option<String>,
    /// The compressed output (the text, the conversation as JSON, or the rendered selection),
    /// for `ok`; its elisions name their `recover` handles in `ctx_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

impl BatchRecord {
    fn failed(id: &str, location: &str, budget: usize, status: JobStatus, error: String) -> Self {
        BatchRecord {
            id: id.to_string(),
            kind: None,
            tokens_before: None,
            tokens_after: None,
            ratio: None,
            status,
            ctx_id: None,
            elisions: 0,
            budget,
            location: location.to_string(),
            error: Some(error),
            text: None,
        }
    }
}

/// A job line that could not be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}:{line}: {}{problem}", path.display(), field.as_ref().map(|f| format!("field `{f}`: ")).unwrap_or_default())]
pub struct JobLineError {
    pub path: PathBuf,
    pub line: usize,
    /// The offending field, when one is to blame.
    pub field: Option<String>,
    pub problem: String,
}

#[derive(Debug, thiserror::Error)]
pub enum BatchError {
    #[error("cannot read batch input {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot walk {path}: {source}")]
    Walk {
        path: PathBuf,
        #[source]
        source: ignore::Error,
    },
}

/// The jobs of a directory, and the binary files that were skipped.
#[derive(Debug, Clone, Default)]
pub struct DirectoryJobs {
    pub jobs: Vec<BatchJob>,
    /// Files with a NUL byte in their first 8 KiB: not text, so not compressed.
    pub skipped_binary: Vec<PathBuf>,
}

fn looks_binary(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 8192];
    let Ok(mut file) = fs::File::open(path) else {
        // Unreadable files become error records when the job runs.
        return false;
    };
    let n = file.read(&mut head).unwrap_or(0);
    head[..n].contains(&0)
}

/// Every regular text file under `root`, recursively, honouring `.gitignore` (also outside a
/// git repository), `.ignore` and hidden-file rules; sorted by path so runs are reproducible.
pub fn jobs_from_dir(root: &Path) -> Result<DirectoryJobs, BatchError> {
    let mut out = DirectoryJobs::default();
    let walker = ignore::WalkBuilder::new(root)
        .require_git(false)
        .sort_by_file_path(|a, b| a.cmp(b))
        .build();
    for entry in walker {
        let entry = entry.map_err(|source| BatchError::Walk {
            path: root.to_path_buf(),
            source,
        })?;
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path().to_path_buf();
        if looks_binary(&path) {
            out.skipped_binary.push(path);
            continue;
        }
        let id = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .to_string_lossy()
            .replace('\\', "/");
        out.jobs.push(BatchJob {
            id,
            query: None,
            location: path.display().to_string(),
            input: JobInput::Path(path),
            kind: None,
            budget: None,
        });
    }
    Ok(out)
}

const FIELDS: [&str; 7] = ["id", "query", "path", "text", "messages", "kind", "budget"];

/// Parses a JSON Lines job file. Relative `path`s are resolved against the file's directory.
/// Each line gives a job or an error naming the line and field; blank lines are skipped.
pub fn jobs_from_jsonl(path: &Path) -> Result<Vec<Result<BatchJob, JobLineError>>, BatchError> {
    let text = fs::read_to_string(path).map_err(|source| BatchError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let number = index + 1;
        let error = |field: Option<String>, problem: String| JobLineError {
            path: path.to_path_buf(),
            line: number,
            field,
            problem,
        };
        let job = parse_job(line, base, &format!("{}:{number}", path.display()))
            .map_err(|(field, problem)| error(field, problem))
            .and_then(|job| match seen.get(&job.id) {
                Some(first) => Err(error(
                    Some("id".to_string()),
                    format!(
                        "duplicate id `{}` (first used on line {first}); ids must be unique",
                        job.id
                    ),
                )),
                None => {
                    seen.insert(job.id.clone(), number);
                    Ok(job)
                }
            });
        out.push(job);
    }
    Ok(out)
}

type FieldProblem = (Option<String>, String);

fn parse_job(line: &str, base: &Path, location: &str) -> Result<BatchJob, FieldProblem> {
    let value: Value = serde_json::from_str(crate::text::without_bom(line)).map_err(|e| {
        (
            None,
            format!("not valid JSON ({e}); each line must be one job object"),
        )
    })?;
    let Value::Object(object) = value else {
        return Err((
            None,
            "a job must be a JSON object like {\"id\": \"a\", \"path\": \"a.log\"}".into(),
        ));
    };
    if let Some(unknown) = object.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err((
            Some(unknown.clone()),
            format!("unknown field; job fields are {}", FIELDS.join(", ")),
        ));
    }
    let id = match object.get("id") {
        Some(Value::String(id)) if !id.trim().is_empty() => id.clone(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => return Err((Some("id".to_string()), "must be a non-empty string".into())),
        None => {
            return Err((
                Some("id".to_string()),
                "is missing; every job needs an id".into(),
            ));
        }
    };
    let query = match object.get("query") {
        None | Some(Value::Null) => None,
        Some(Value::String(q)) => Some(q.clone()),
        Some(_) => return Err((Some("query".to_string()), "must be a string".into())),
    };
    let kind = match object.get("kind") {
        None | Some(Value::Null) => None,
        Some(value) => Some(
            serde_json::from_value::<ContentKind>(value.clone()).map_err(|_| {
                (
                    Some("kind".to_string()),
                    format!("must be one of code, json, logs, prose (got {value})"),
                )
            })?,
        ),
    };
    let budget = match object.get("budget") {
        None | Some(Value::Null) => None,
        Some(value) => match value.as_u64() {
            Some(b) if b > 0 => Some(b as usize),
            _ => {
                return Err((
                    Some("budget".to_string()),
                    format!("must be a positive integer (got {value})"),
                ));
            }
        },
    };
    let given: Vec<&str> = ["path", "text", "messages"]
        .into_iter()
        .filter(|k| object.get(*k).is_some_and(|v| !v.is_null()))
        .collect();
    let input = match given.as_slice() {
        [] => {
            return Err((
                Some("path | text | messages".to_string()),
                "one of `path`, `text` or `messages` is required".into(),
            ));
        }
        [_, _, ..] => {
            return Err((
                Some("path | text | messages".to_string()),
                format!(
                    "give only one of `path`, `text`, `messages` (got {})",
                    given.join(", ")
                ),
            ));
        }
        ["path"] => match object.get("path") {
            Some(Value::String(p)) if !p.is_empty() => JobInput::Path(base.join(p)),
            _ => {
                return Err((
                    Some("path".to_string()),
                    "must be a non-empty string".into(),
                ));
            }
        },
        ["text"] => match object.get("text") {
            Some(Value::String(t)) => JobInput::Text(t.clone()),
            _ => return Err((Some("text".to_string()), "must be a string".into())),
        },
        _ => {
            let messages = object.get("messages").cloned().unwrap_or(Value::Null);
            JobInput::Messages(serde_json::from_value(messages).map_err(|e| {
                (
                    Some("messages".to_string()),
                    format!("must be an array of {{\"role\", \"content\"}} messages ({e})"),
                )
            })?)
        }
    };
    Ok(BatchJob {
        id,
        query,
        input,
        kind,
        budget,
        location: location.to_string(),
    })
}

/// Runs one job. Errors become records; only the store failing is the caller's problem too,
/// and it is recorded the same way so the batch goes on.
pub fn run_job(
    job: &BatchJob,
    default_budget: usize,
    store: &CommitStore,
    tokenizer: &Tokenizer,
) -> BatchRecord {
    let budget = job.budget.unwrap_or(default_budget);
    let failed =
        |status, error: String| BatchRecord::failed(&job.id, &job.location, budget, status, error);
    let options = CompressOptions {
        kind: job.kind,
        query: job.query.clone(),
        source: match &job.input {
            JobInput::Path(p) => p.display().to_string(),
            _ => job.id.clone(),
        },
    };
    let outcome = match &job.input {
        JobInput::Path(path) => {
            if path.is_dir() {
                return run_tree_job(job, path, budget, store);
            }
            let bytes = match fs::read(path) {
                Ok(bytes) => bytes,
                Err(e) => {
                    return failed(
                        JobStatus::Error,
                        format!("cannot read {}: {e}", path.display()),
                    );
                }
            };
            compress_bytes(&bytes, budget, &options, store, tokenizer).map(|c| {
                (
                    c.kind.to_string(),
                    c.original_tokens,
                    c.tokens,
                    c.ctx_id,
                    c.elisions.len(),
                    c.text,
                )
            })
        }
        JobInput::Text(text) => compress_bytes(text.as_bytes(), budget, &options, store, tokenizer)
            .map(|c| {
                (
                    c.kind.to_string(),
                    c.original_tokens,
                    c.tokens,
                    c.ctx_id,
                    c.elisions.len(),
                    c.text,
                )
            }),
        JobInput::Messages(messages) => {
            compress_messages(messages, budget, store, tokenizer).map(|c| {
                (
                    "messages".to_string(),
                    c.original_tokens,
                    c.tokens,
                    c.ctx_id,
                    c.elisions.len(),
                    serde_json::to_string(&c.messages).unwrap_or_default(),
                )
            })
        }
    };
    match outcome {
        Ok((kind, before, after, ctx_id, elisions, text)) => BatchRecord {
            id: job.id.clone(),
            kind: Some(kind),
            tokens_before: Some(before),
            tokens_after: Some(after),
            ratio: Some(if after == 0 {
                1.0
            } else {
                before as f64 / after as f64
            }),
            status: JobStatus::Ok,
            ctx_id: Some(ctx_id),
            elisions,
            budget,
            location: job.location.clone(),
            error: None,
            text: Some(text),
        },
        Err(error) => {
            let status = match error {
                CompressError::OverBudget { .. }
                | CompressError::ProtectedOverBudget { .. }
                | CompressError::MessagesOverBudget { .. } => JobStatus::OverBudget,
                _ => JobStatus::Error,
            };
            let mut record = failed(status, error.to_string());
            if let CompressError::OverBudget {
                kind,
                original_tokens,
                ..
            } = error
            {
                record.kind = Some(kind.to_string());
                record.tokens_before = Some(original_tokens);
            }
            record
        }
    }
}

/// A directory job: index the tree and select against the job's query under the budget, as
/// `svc context select` does; the selection is committed so every omitted chunk is recoverable.
fn run_tree_job(job: &BatchJob, root: &Path, budget: usize, store: &CommitStore) -> BatchRecord {
    let failed = |status, error: String| {
        let mut record = BatchRecord::failed(&job.id, &job.location, budget, status, error);
        record.kind = Some("tree".into());
        record
    };
    let Some(query) = job.query.as_deref().filter(|q| !q.trim().is_empty()) else {
        return failed(
            JobStatus::Error,
            format!(
                "{} is a directory: a directory job needs a `query` to select against",
                root.display()
            ),
        );
    };
    let index_options = IndexOptions {
        state_home: Some(store.state_home().to_path_buf()),
        ..IndexOptions::default()
    };
    let index = match Index::build(root, &index_options) {
        Ok(index) => index,
        Err(error) => return failed(JobStatus::Error, error.to_string()),
    };
    let options = SelectOptions::default();
    let selection = match select::select(&index, query, budget, &options) {
        Ok(selection) => selection,
        Err(error @ SelectError::PinnedOverBudget { .. }) => {
            return failed(JobStatus::OverBudget, error.to_string());
        }
        Err(error) => return failed(JobStatus::Error, error.to_string()),
    };
    let receipt = match select::commit_selection(&index, &selection, &options, store) {
        Ok(receipt) => receipt,
        Err(error) => return failed(JobStatus::Error, error.to_string()),
    };
    let before = index.total_tokens();
    BatchRecord {
        id: job.id.clone(),
        kind: Some("tree".into()),
        tokens_before: Some(before),
        tokens_after: Some(selection.tokens),
        ratio: Some(before as f64 / selection.tokens.max(1) as f64),
        status: JobStatus::Ok,
        elisions: receipt.recoverable().count(),
        ctx_id: Some(receipt.ctx_id),
        budget,
        location: job.location.clone(),
        error: None,
        text: Some(selection.rendered),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(lines: &str) -> Vec<Result<BatchJob, JobLineError>> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("jobs.jsonl");
        fs::write(&path, lines).expect("write");
        jobs_from_jsonl(&path).expect("read")
    }

    #[test]
    fn bad_lines_name_line_and_field() {
        let jobs = parse(concat!(
            "{\"id\": \"a\", \"text\": \"hello\"}\n",
            "\n",
            "{\"text\": \"no id\"}\n",
            "{\"id\": \"b\"}\n",
            "{\"id\": \"c\", \"text\": \"x\", \"path\": \"y\"}\n",
            "{\"id\": \"d\", \"text\": \"x\", \"colour\": 1}\n",
            "not json\n",
            "{\"id\": \"a\", \"text\": \"again\"}\n",
            "{\"id\": \"e\", \"text\": \"x\", \"kind\": \"yaml\"}\n",
            "{\"id\": \"f\", \"messages\": [{\"content\": \"no role\"}]}\n",
            "{\"id\": \"g\", \"text\": \"x\", \"budget\": 0}\n",
        ));
        assert!(jobs[0].is_ok());
        let errors: Vec<(usize, Option<String>)> = jobs
            .iter()
            .filter_map(|j| j.as_ref().err())
            .map(|e| (e.line, e.field.clone()))
            .collect();
        assert_eq!(
            errors,
            vec![
                (3, Some("id".into())),
                (4, Some("path | text | messages".into())),
                (5, Some("path | text | messages".into())),
                (6, Some("colour".into())),
                (7, None),
                (8, Some("id".into())),
                (9, Some("kind".into())),
                (10, Some("messages".into())),
                (11, Some("budget".into())),
            ]
        );
        let message = jobs[1].as_ref().expect_err("line 3").to_string();
        assert!(
            message.ends_with("jobs.jsonl:3: field `id`: is missing; every job needs an id"),
            "{message}"
        );
    }

    #[test]
    fn directory_walk_honours_gitignore_and_directory_jobs_select_against_the_query() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join(".gitignore"), "ignored.log\n").expect("write");
        fs::write(dir.path().join("kept.log"), "2024-01-01 10:00:00 INFO hi\n").expect("write");
        fs::write(dir.path().join("ignored.log"), "nope\n").expect("write");
        fs::create_dir(dir.path().join("sub")).expect("mkdir");
        fs::write(dir.path().join("sub").join("b.txt"), "Some prose.\n").expect("write");
        fs::write(
            dir.path().join("image.png"),
            b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
        )
        .expect("write");
        let found = jobs_from_dir(dir.path()).expect("walk");
        let ids: Vec<String> = found.jobs.into_iter().map(|j| j.id).collect();
        assert_eq!(ids, vec!["kept.log", "sub/b.txt"]);
        assert_eq!(found.skipped_binary, vec![dir.path().join("image.png")]);

        let store = CommitStore::new(&dir.path().join("state"));
        let mut job = BatchJob {
            id: "tree".into(),
            query: None,
            input: JobInput::Path(dir.path().join("sub")),
            kind: None,
            budget: None,
            location: "jobs.jsonl:1".into(),
        };
        let record = run_job(&job, 100, &store, &Tokenizer::default());
        assert_eq!(record.status, JobStatus::Error);
        assert!(
            record
                .error
                .as_deref()
                .is_some_and(|e| e.contains("needs a `query`")),
            "{record:?}"
        );
        job.query = Some("prose".into());
        let record = run_job(&job, 100, &store, &Tokenizer::default());
        assert_eq!(record.status, JobStatus::Ok, "{record:?}");
        assert_eq!(record.kind.as_deref(), Some("tree"));
        let ctx_id = record.ctx_id.expect("committed");
        let receipt = store.receipt(&ctx_id).expect("receipt");
        let chunk = &receipt.chunks[0].chunk_id;
        assert_eq!(
            store.recover(&ctx_id, chunk).expect("recover"),
            "Some prose.\n"
        );
    }
}
