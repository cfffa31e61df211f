//! Workloads: versioned, declarative task sets. Each lives in `workloads/<name>/` with a
//! `workload.toml` (name, version, kind, default scorer and the kind's section), a README and
//! its data. Loading turns the declaration into [`Task`]s with gold answers, gold evidence spans
//! and, for code, gold files.
//!
//! Kinds: `qa` (built-in documents or a HaluEval-format file with distractors), `needle`
//! (planted facts in deterministic haystacks), `code-localization` (tasks mined from git
//! history) and `conversation` (long transcripts whose last question needs an early turn).

pub mod code;
pub mod conversation;
pub mod needle;
pub mod qa;
pub mod spec;

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::digest;
use crate::harness::scorer::ScorerName;
pub use spec::{WorkloadKind, WorkloadSpec};

/// Environment variable naming the workloads directory (default `./workloads`).
pub const SVC_WORKLOADS_DIR: &str = "SVC_WORKLOADS_DIR";

/// One named document of a task's context.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    pub name: String,
    pub text: String,
}

/// One turn of a conversation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    pub role: String,
    pub text: String,
}

/// The full context of a task, before any condition shapes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskContext {
    Documents(Vec<Document>),
    Transcript(Vec<Turn>),
}

impl TaskContext {
    /// The canonical full rendering, as the `raw` condition sends it.
    pub fn render(&self) -> String {
        match self {
            TaskContext::Documents(docs) => render_documents(docs),
            TaskContext::Transcript(turns) => render_turns(turns),
        }
    }

    /// The context as (name, text) pairs, the selector's input: documents as they are, turns as
    /// `turn-0001` … named units so a selector can keep or drop each.
    pub fn units(&self) -> Vec<(String, String)> {
        match self {
            TaskContext::Documents(docs) => docs
                .iter()
                .map(|d| (d.name.clone(), d.text.clone()))
                .collect(),
            TaskContext::Transcript(turns) => turns
                .iter()
                .enumerate()
                .map(|(i, t)| (format!("turn-{:04}", i + 1), render_turn(t)))
                .collect(),
        }
    }
}

/// Documents as `## name` sections separated by a blank line.
pub fn render_documents(docs: &[Document]) -> String {
    let mut out = String::new();
    for (i, doc) in docs.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        out.push_str("## ");
        out.push_str(&doc.name);
        out.push('\n');
        out.push_str(doc.text.trim_end());
        out.push('\n');
    }
    out
}

fn render_turn(turn: &Turn) -> String {
    format!("{}: {}", turn.role, turn.text)
}

/// Turns as `role: text` lines.
pub fn render_turns(turns: &[Turn]) -> String {
    let mut out = String::new();
    for turn in turns {
        out.push_str(&render_turn(turn));
        out.push('\n');
    }
    out
}

/// What shape of answer a task expects; the instruction sent to the model follows from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerKind {
    /// A short span copied from the context.
    Span,
    /// The paths of the files to change, one per line.
    Files,
}

impl AnswerKind {
    /// The instruction given to a model for this kind of answer.
    pub fn instruction(self) -> &'static str {
        match self {
            AnswerKind::Span => {
                "Answer the question with a short phrase copied from the context. Use only the context."
            }
            AnswerKind::Files => {
                "List the paths of the files that must change to do the task, one per line, most likely first. Use only the context."
            }
        }
    }
}

/// One task of a workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    pub id: String,
    /// The question or request.
    pub question: String,
    pub context: TaskContext,
    pub answer_kind: AnswerKind,
    /// Accepted answers (span tasks).
    pub answers: Vec<String>,
    /// Exact spans of the context that support the answer.
    pub evidence: Vec<String>,
    /// Files that must change (code tasks).
    pub gold_files: Vec<String>,
}

impl Task {
    /// The evidence the claim checker judges a response against: the gold spans, or the whole
    /// context when a task has none.
    pub fn claim_evidence(&self) -> String {
        if self.answer_kind == AnswerKind::Files {
            // A file answer claims that files exist: the evidence is the list of the repository's
            // files (a listed path that is not there is unsupported).
            if let TaskContext::Documents(docs) = &self.context {
                return docs.iter().map(|d| format!("{}.\n", d.name)).collect();
            }
        }
        if self.evidence.is_empty() {
            self.context.render()
        } else {
            self.evidence.join("\n")
        }
    }
}

/// A loaded workload.
#[derive(Debug, Clone)]
pub struct Workload {
    pub spec: WorkloadSpec,
    /// The folder of `workload.toml`.
    pub dir: PathBuf,
    pub tasks: Vec<Task>,
}

impl Workload {
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    pub fn version(&self) -> &str {
        &self.spec.version
    }

    pub fn scorer(&self) -> ScorerName {
        self.spec.scorer
    }

    /// SHA-256 over every task's rendered prompt material (id, question, full context, gold).
    /// A committed table of these hashes fails a test when prompts change without a version bump.
    pub fn prompt_hash(&self) -> String {
        let mut material = String::new();
        for task in &self.tasks {
            material.push_str(&format!(
                "task {}\nquestion {}\nanswer_kind {:?}\ncontext\n{}\nanswers {:?}\nevidence {:?}\nfiles {:?}\n\n",
                task.id,
                task.question,
                task.answer_kind,
                task.context.render(),
                task.answers,
                task.evidence,
                task.gold_files
            ));
        }
        digest::sha256_hex(material)
    }
}

/// Errors loading a workload. Every variant names the file, and where it can, the line and
/// field or task.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error(
        "unknown workload `{name}`: no {path} (known workloads: {known}; see `svc workloads list`)"
    )]
    Unknown {
        name: String,
        path: PathBuf,
        known: String,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path}:{line}:{column}: malformed workload file: {message}")]
    Malformed {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}:{line}: field `{field}`: {message}")]
    Field {
        path: PathBuf,
        line: usize,
        field: String,
        message: String,
    },
    #[error("{path}:{line}: task `{task_id}`: {message}")]
    Task {
        path: PathBuf,
        line: usize,
        task_id: String,
        message: String,
    },
    #[error("{path}: {message}")]
    Data { path: PathBuf, message: String },
    #[error("git {args} in {repo}: {message}")]
    Git {
        repo: PathBuf,
        args: String,
        message: String,
    },
}

impl From<crate::git::GitError> for WorkloadError {
    fn from(e: crate::git::GitError) -> Self {
        WorkloadError::Git {
            repo: e.repo,
            args: e.args,
            message: e.message,
        }
    }
}

/// The workloads directory: `$SVC_WORKLOADS_DIR`, else `./workloads`.
pub fn workloads_root() -> PathBuf {
    std::env::var_os(SVC_WORKLOADS_DIR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("workloads"))
}

/// Options that affect loading but not the tasks themselves.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Where git repositories from bundles are unpacked (under the state directory).
    pub cache_dir: PathBuf,
}

/// Declarations of every workload under `root`, sorted by name. A malformed declaration is
/// returned as an error in its slot so one bad file does not hide the others.
pub fn list(root: &Path) -> Result<Vec<Result<WorkloadSpec, WorkloadError>>, WorkloadError> {
    let entries = std::fs::read_dir(root).map_err(|source| WorkloadError::Read {
        path: root.to_path_buf(),
        source,
    })?;
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("workload.toml").is_file())
        .collect();
    dirs.sort();
    Ok(dirs
        .iter()
        .map(|dir| spec::read(&dir.join("workload.toml")))
        .collect())
}

/// Resolves `name_or_path` to a `workload.toml`: a folder or file path if it exists, else the
/// folder `root/<name>`.
pub fn resolve(root: &Path, name_or_path: &str) -> Result<PathBuf, WorkloadError> {
    let direct = Path::new(name_or_path);
    if direct.is_file() {
        return Ok(direct.to_path_buf());
    }
    if direct.join("workload.toml").is_file() && name_or_path.contains('/') {
        return Ok(direct.join("workload.toml"));
    }
    let path = root.join(name_or_path).join("workload.toml");
    if path.is_file() {
        return Ok(path);
    }
    let known = list(root)
        .map(|specs| {
            specs
                .into_iter()
                .flatten()
                .map(|s| s.name)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    Err(WorkloadError::Unknown {
        name: name_or_path.to_string(),
        path,
        known: if known.is_empty() {
            // Typically `svc` run outside its repository: say where it looked and how to point
            // it at the workloads.
            let absolute = std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf());
            format!(
                "none under {}; run from the svc repository, set {SVC_WORKLOADS_DIR}=/path/to/svc/workloads, or give the path of a workload folder",
                absolute.display()
            )
        } else {
            known
        },
    })
}

/// Loads a workload by name (under `root`) or path.
pub fn load(
    root: &Path,
    name_or_path: &str,
    options: &LoadOptions,
) -> Result<Workload, WorkloadError> {
    let path = resolve(root, name_or_path)?;
    load_file(&path, options)
}

/// Loads the workload declared in `path` (a `workload.toml`).
pub fn load_file(path: &Path, options: &LoadOptions) -> Result<Workload, WorkloadError> {
    let spec = spec::read(path)?;
    let dir = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let tasks = match &spec.source {
        spec::Source::Qa(qa) => qa::load(&dir, path, qa, options)?,
        spec::Source::Needle(needle) => needle::load(&dir, path, needle)?,
        spec::Source::Code(code) => code::load(&dir, path, code, options)?,
        spec::Source::Conversation(conversation) => conversation::load(&dir, path, conversation)?,
    };
    if tasks.is_empty() {
        return Err(WorkloadError::Data {
            path: path.to_path_buf(),
            message: "the workload has no tasks".into(),
        });
    }
    let mut seen = std::collections::HashSet::new();
    for task in &tasks {
        if !seen.insert(task.id.as_str()) {
            return Err(WorkloadError::Data {
                path: path.to_path_buf(),
                message: format!("duplicate task id `{}`", task.id),
            });
        }
    }
    Ok(Workload { spec, dir, tasks })
}

/// The ids already read from one task file, with the line each was declared on.
#[derive(Default)]
pub(crate) struct TaskIds(std::collections::HashMap<String, usize>);

impl TaskIds {
    /// Checks the id of a task declared at `path:line`: not empty, not seen before. Records name
    /// their task by id, so an empty or repeated one would lose trials of every run.
    pub(crate) fn check(
        &mut self,
        id: &str,
        path: &Path,
        line: usize,
    ) -> Result<(), WorkloadError> {
        let problem = |message: String| WorkloadError::Task {
            path: path.to_path_buf(),
            line,
            task_id: id.to_string(),
            message,
        };
        if id.trim().is_empty() {
            return Err(problem(
                "the id is empty: give every task a unique, non-empty id".into(),
            ));
        }
        if let Some((_, budget)) = id.rsplit_once("@b")
            && !budget.is_empty()
            && budget.bytes().all(|b| b.is_ascii_digit())
        {
            // Records carry the budget as this suffix of the task id; the reports read it back.
            return Err(problem(format!(
                "the id ends in `@b{budget}`, the suffix records use for a budget: rename the task"
            )));
        }
        if let Some(first) = self.0.get(id) {
            return Err(problem(format!(
                "duplicate task id (first declared on line {first}): give every task a unique id"
            )));
        }
        self.0.insert(id.to_string(), line);
        Ok(())
    }
}

/// The 1-based line of byte `offset` of `text`.
pub(crate) fn line_at(text: &str, offset: usize) -> usize {
    text.get(..offset).unwrap_or(text).matches('\n').count() + 1
}

/// A path from a workload file: absolute, or relative to the workload's folder.
pub(crate) fn data_path(dir: &Path, value: &str) -> PathBuf {
    let path = Path::new(value);
    if path.is_absolute() {
        path.to_path_buf()
    } else {
        dir.join(path)
    }
}

pub(crate) fn read_text(path: &Path) -> Result<String, WorkloadError> {
    std::fs::read_to_string(path).map_err(|source| WorkloadError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// 1-based line of the first occurrence of `needle` in `text` (1 when absent), for errors in
/// data files that are not parsed with spans.
pub(crate) fn line_of(text: &str, needle: &str) -> usize {
    // `key =` also finds `key=` and `key  =` (TOML allows any spacing; runner errors pointed at
    // line 1 for `concurrency=0`).
    if let Some(key) = needle.strip_suffix(" =") {
        for (index, line) in text.lines().enumerate() {
            if line
                .trim_start()
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
            {
                return index + 1;
            }
        }
    }
    text.find(needle)
        .map(|at| text[..at].matches('\n').count() + 1)
        .unwrap_or(1)
}

/// Checks every gold evidence span occurs in the task's context, so a typo in a data file fails
/// at load time instead of silently scoring recall 0.
pub(crate) fn check_evidence(task: &Task, path: &Path, line: usize) -> Result<(), WorkloadError> {
    let rendered = task.context.render();
    for span in &task.evidence {
        if !rendered.contains(span.as_str()) {
            return Err(WorkloadError::Task {
                path: path.to_path_buf(),
                line,
                task_id: task.id.clone(),
                message: format!(
                    "evidence span {span:?} does not occur in the task's documents; copy it exactly"
                ),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASHES: &str = "workloads/prompt-hashes.tsv";
    const UPDATE: &str = "SVC_UPDATE_PROMPT_HASHES";

    fn repo() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
    }

    /// Workloads whose data is in the repository (HaluEval data and the real repositories live
    /// outside it), plus the
    /// HaluEval adapter's fixture.
    fn pinned_workloads(cache: &Path) -> Vec<Workload> {
        let options = LoadOptions {
            cache_dir: cache.to_path_buf(),
        };
        let mut out = Vec::new();
        for spec in list(&repo().join("workloads")).expect("workloads") {
            let spec = spec.expect("every committed workload parses");
            if matches!(&spec.source, spec::Source::Qa(qa) if qa.format == spec::QaFormat::Halueval)
            {
                continue;
            }
            // Repositories kept outside the project (named through an environment variable).
            if matches!(&spec.source, spec::Source::Code(code) if code.repo_env.is_some())
                || matches!(&spec.source, spec::Source::Qa(qa) if qa.repo_env.is_some())
            {
                continue;
            }
            out.push(load_file(&spec.path, &options).expect("every committed workload loads"));
        }
        out.push(
            load_file(
                &repo().join("fixtures/harness/halueval-mini/workload.toml"),
                &options,
            )
            .expect("fixture"),
        );
        out
    }

    /// Changing a workload's prompts without bumping its version fails here. After a bump,
    /// `SVC_UPDATE_PROMPT_HASHES=1 cargo test prompt_hashes` rewrites the table.
    #[test]
    fn prompt_hashes_change_only_with_a_version_bump() {
        let cache = tempfile::tempdir().expect("tempdir");
        let current: Vec<(String, String, String)> = pinned_workloads(cache.path())
            .iter()
            .map(|w| {
                (
                    w.name().to_string(),
                    w.version().to_string(),
                    w.prompt_hash(),
                )
            })
            .collect();
        let mut table = String::from(
            "# workload\tversion\tsha256 of rendered prompts (see src/harness/workload/mod.rs)\n",
        );
        for (name, version, hash) in &current {
            table.push_str(&format!("{name}\t{version}\t{hash}\n"));
        }
        let path = repo().join(HASHES);
        if std::env::var_os(UPDATE).is_some() {
            std::fs::write(&path, &table).expect("write table");
            return;
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        let mut problems = Vec::new();
        for (name, version, hash) in &current {
            let row = committed
                .lines()
                .map(|l| l.split('\t').collect::<Vec<_>>())
                .find(|cols| cols.len() == 3 && cols[0] == name);
            match row {
                None => problems.push(format!("{name}: not in {HASHES}")),
                Some(cols) if cols[1] == version && cols[2] != hash => problems.push(format!(
                    "{name}: its rendered prompts changed but its version is still {version}: bump `version` in its workload.toml"
                )),
                Some(cols) if cols[1] != version => problems.push(format!(
                    "{name}: version {version} is not recorded (table has {})",
                    cols[1]
                )),
                Some(_) => {}
            }
        }
        assert!(
            problems.is_empty(),
            "{}\nthen run `{UPDATE}=1 cargo test prompt_hashes` and commit {HASHES}",
            problems.join("\n")
        );
    }

    #[test]
    fn committed_code_tasks_are_what_mining_the_bundle_gives() {
        let dir = tempfile::tempdir().expect("tempdir");
        let workload = repo().join("workloads/code-localization-mini");
        let clone = dir.path().join("clone");
        let status = std::process::Command::new("git")
            .arg("clone")
            .arg("--quiet")
            .arg(workload.join("repo.bundle"))
            .arg(&clone)
            .status()
            .expect("git");
        assert!(status.success());
        let mined = code::mine_git(&clone, 50, None).expect("mine");
        let committed: Vec<code::MinedTask> = std::fs::read_to_string(workload.join("tasks.jsonl"))
            .expect("tasks")
            .lines()
            .map(|l| serde_json::from_str(l).expect("task"))
            .collect();
        assert_eq!(mined, committed);
    }

    #[test]
    fn unknown_workloads_list_the_known_ones() {
        let error = resolve(&repo().join("workloads"), "nope").expect_err("unknown");
        let text = error.to_string();
        assert!(
            text.contains("unknown workload `nope`") && text.contains("qa-builtin"),
            "{text}"
        );
    }

    #[test]
    fn evidence_typos_fail_at_load() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("documents")).expect("mkdir");
        std::fs::write(dir.path().join("documents/a.md"), "The sky is green.").expect("write");
        std::fs::write(
            dir.path().join("tasks.toml"),
            "[[task]]\nid = \"t1\"\nquestion = \"q\"\nanswers = [\"green\"]\nevidence = [\"The sky is blue.\"]\n",
        )
        .expect("write");
        std::fs::write(
            dir.path().join("workload.toml"),
            "name = \"x\"\nversion = \"1\"\nkind = \"qa\"\nscorer = \"qa-exact-v1\"\n[qa]\nformat = \"builtin\"\ntasks = \"tasks.toml\"\ndocuments = \"documents\"\n",
        )
        .expect("write");
        let options = LoadOptions {
            cache_dir: dir.path().join("cache"),
        };
        let error = load_file(&dir.path().join("workload.toml"), &options).expect_err("typo");
        let text = error.to_string();
        assert!(
            text.contains("tasks.toml:2: task `t1`") && text.contains("The sky is blue."),
            "{text}"
        );
    }

    /// Found by probing: a task with `id = ""` loaded, and every run then lost one trial of
    /// it (its record refused) while exiting 0; a repeated id named workload.toml, no line.
    #[test]
    fn an_empty_or_repeated_task_id_fails_at_load_naming_its_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("documents")).expect("mkdir");
        std::fs::write(dir.path().join("documents/a.md"), "The sky is blue.").expect("write");
        std::fs::write(
            dir.path().join("workload.toml"),
            "name = \"x\"\nversion = \"1\"\nkind = \"qa\"\nscorer = \"qa-exact-v1\"\n[qa]\nformat = \"builtin\"\ntasks = \"tasks.toml\"\ndocuments = \"documents\"\n",
        )
        .expect("write");
        let task = |id: &str| {
            format!(
                "[[task]]\nid = \"{id}\"\nquestion = \"q\"\nanswers = [\"blue\"]\nevidence = [\"The sky is blue.\"]\n"
            )
        };
        let options = LoadOptions {
            cache_dir: dir.path().join("cache"),
        };
        for (tasks, expected) in [
            (
                format!("{}{}", task("t1"), task("")),
                "tasks.toml:7: task ``: the id is empty",
            ),
            (
                format!("{}{}{}", task("t1"), task("t2"), task("t1")),
                "tasks.toml:12: task `t1`: duplicate task id (first declared on line 2)",
            ),
            // Found by probing: the reports read such an id's tail as the trial's budget.
            (
                task("water-01@b256"),
                "tasks.toml:2: task `water-01@b256`: the id ends in `@b256`",
            ),
        ] {
            std::fs::write(dir.path().join("tasks.toml"), tasks).expect("write");
            let error = load_file(&dir.path().join("workload.toml"), &options).expect_err("id");
            let text = error.to_string();
            assert!(text.contains(expected), "{text}");
        }
    }
}
