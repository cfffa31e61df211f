//! File localisation mined from git history: a commit's message is the query, its parent tree
//! the corpus, and the source files it modified the gold. The selector is judged by gold-file
//! recall (a gold file has a fragment sent `full` or `skeleton`) and changed-line coverage (the
//! share of the commit's parent-side changed lines whose fragment is sent `full`).
//!
//! Uses the `git` command line (read-only: `log`, `diff`, `ls-tree`, `cat-file`).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::commit::Resolution;
use super::index::{Index, Language};
use super::select::{self, SelectError, SelectOptions};

#[derive(Debug, thiserror::Error)]
pub enum LocalizeError {
    #[error("git {args} failed in {repo}: {message}")]
    Git {
        repo: PathBuf,
        args: String,
        message: String,
    },
    #[error(transparent)]
    Select(#[from] SelectError),
    #[error("the {selector} selector failed on commit {commit}: {message}")]
    Selector {
        selector: String,
        commit: String,
        message: String,
    },
}

impl From<crate::git::GitError> for LocalizeError {
    fn from(e: crate::git::GitError) -> Self {
        LocalizeError::Git {
            repo: e.repo,
            args: e.args,
            message: e.message,
        }
    }
}

/// Which part of the mined tasks a task belongs to: tuning decisions may look only at `tune`
/// tasks; `held-out` tasks are only reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Part {
    Tune,
    HeldOut,
}

impl Part {
    /// Commit ids are hashes, fixed before any tuning and uncorrelated with content, so this
    /// split cannot follow results: ids starting with `0`–`7` tune, `8`–`f` are held out.
    pub fn of_commit(commit: &str) -> Part {
        match commit.as_bytes().first() {
            Some(b'0'..=b'7') => Part::Tune,
            _ => Part::HeldOut,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Part::Tune => "tune",
            Part::HeldOut => "held-out",
        }
    }
}

/// One mined task.
#[derive(Debug, Clone, Serialize)]
pub struct LocalisationTask {
    pub commit: String,
    pub part: Part,
    pub parent: String,
    /// The commit message (subject and body).
    pub query: String,
    /// Source files the commit modified (present in the parent).
    pub gold_files: Vec<String>,
    /// Parent-side line numbers (1-based) the commit changed, per gold file.
    pub changed_lines: BTreeMap<String, Vec<usize>>,
}

/// Scores of one task at one budget.
#[derive(Debug, Clone, Serialize)]
pub struct LocalisationOutcome {
    pub commit: String,
    pub part: Part,
    pub budget: usize,
    pub gold_recall: f64,
    pub line_coverage: f64,
    pub seconds: f64,
}

fn git(repo: &Path, args: &[&str]) -> Result<Vec<u8>, LocalizeError> {
    Ok(crate::git::run(repo, args)?)
}

/// Mines up to `max_tasks` tasks from the history reachable from `revision` (e.g. `--all` or
/// `HEAD`): non-merge commits that modify between 1 and `max_files` existing source files.
pub fn mine_tasks(
    repo: &Path,
    revision: &str,
    max_tasks: usize,
    max_files: usize,
) -> Result<Vec<LocalisationTask>, LocalizeError> {
    let commits = crate::git::single_parent_commits(repo, &[revision])?;
    let mut tasks = Vec::new();
    for logged in commits {
        let (commit, parent) = (logged.commit.as_str(), logged.parent.as_str());
        let diff = git(
            repo,
            &["diff", "-U0", "--no-color", "--no-renames", parent, commit],
        )?;
        let changed = parse_diff(&String::from_utf8_lossy(&diff));
        let changed: BTreeMap<String, Vec<usize>> = changed
            .into_iter()
            .filter(|(path, lines)| Language::from_name(path).is_code() && !lines.is_empty())
            .collect();
        if changed.is_empty() || changed.len() > max_files {
            continue;
        }
        tasks.push(LocalisationTask {
            commit: commit.to_string(),
            part: Part::of_commit(commit),
            parent: parent.to_string(),
            query: logged.message.clone(),
            gold_files: changed.keys().cloned().collect(),
            changed_lines: changed,
        });
        if tasks.len() >= max_tasks {
            break;
        }
    }
    Ok(tasks)
}

/// Parent-side changed lines per modified file of a `-U0` diff. Files added by the commit have
/// no parent side and are left out; a pure insertion counts the parent line it follows.
fn parse_diff(diff: &str) -> HashMap<String, Vec<usize>> {
    let mut out: HashMap<String, Vec<usize>> = HashMap::new();
    for file in crate::git::diff_files(diff) {
        let (Some(path), false) = (file.old_path, file.hunks.is_empty()) else {
            continue;
        };
        let lines = out.entry(path).or_default();
        for hunk in file.hunks {
            match hunk.old {
                (start, 0) => lines.push(start.max(1)),
                (start, count) => lines.extend(start..start + count),
            }
        }
    }
    out
}

/// A commit's tree as `(path, text)` documents (UTF-8 files without NUL bytes, up to 1 MB): what
/// a localisation task (at its parent) and a repository's needles (at their commit) index.
pub fn tree_documents(
    repo: &Path,
    revision: &str,
) -> Result<Vec<(String, String)>, crate::git::GitError> {
    let mut documents = crate::git::tree_texts(repo, revision, |_, size| size <= 1_000_000)?;
    documents.retain(|(_, text)| !text.contains('\0'));
    Ok(documents)
}

/// First line, last line and how a fragment was sent.
type SentSpan = (usize, usize, Option<Resolution>);

/// What a selector sent: chunk id → resolution (unsent chunks absent).
pub type Sent = HashMap<String, Resolution>;

/// A selector under test: `(index, documents, query, budget)` → what it sent. The index is the
/// context engine's index of `documents` (chunk ids are stable, so a selector that builds its own
/// index from `documents` names the same chunks).
pub type SelectFn<'a> =
    dyn Fn(&Index, &[(String, String)], &str, usize) -> Result<Sent, String> + 'a;

/// svc's own selector with default options.
pub fn svc_selector(
    index: &Index,
    _: &[(String, String)],
    query: &str,
    budget: usize,
) -> Result<Sent, String> {
    svc_selector_with(&SelectOptions::default(), index, query, budget)
}

/// A naive baseline that reads only the history: the fragments the recent commits changed (see
/// [`super::recent`]), whole, code files first, in path order until the budget is spent; the
/// query is ignored.
/// It shows how much of a selector's figure recent history alone would give.
pub fn recent_selector(
    index: &Index,
    _: &[(String, String)],
    _: &str,
    budget: usize,
) -> Result<Sent, String> {
    let mut sent = Sent::new();
    let Some(recent) = index.recent_changes() else {
        return Ok(sent);
    };
    let mut spent = 0;
    let mut files: Vec<&super::index::IndexedFile> = index.files.iter().collect();
    files.sort_by_key(|f| (!f.language.is_code(), f.path.as_str()));
    for file in files {
        for f in &index.fragments[file.fragments.clone()] {
            let cost = f.header_tokens + f.text_tokens;
            if recent.touches(&file.path, f.lines.0, f.lines.1) == Some(true)
                && spent + cost <= budget
            {
                spent += cost;
                sent.insert(f.chunk_id.clone(), Resolution::Full);
            }
        }
    }
    Ok(sent)
}

/// Runs every task at every budget with svc's selector.
pub fn run_localisation(
    repo: &Path,
    tasks: &[LocalisationTask],
    budgets: &[usize],
) -> Result<Vec<LocalisationOutcome>, LocalizeError> {
    let selectors: [(&str, &SelectFn); 1] = [("svc", &svc_selector)];
    Ok(run_localisation_with(repo, tasks, budgets, &selectors)?
        .into_iter()
        .map(|(_, outcome)| outcome)
        .collect())
}

/// A task with its parent tree read and indexed, ready to be selected from many times.
pub struct PreparedTask {
    pub task: LocalisationTask,
    pub documents: Vec<(String, String)>,
    pub index: Index,
    /// Chunk id → fragment number, built once (a search scores thousands of selections).
    fragment_of: HashMap<String, u32>,
}

impl PreparedTask {
    /// Reads the task's parent tree from `repo` and indexes it.
    pub fn new(repo: &Path, task: &LocalisationTask) -> Result<PreparedTask, LocalizeError> {
        let documents = tree_documents(repo, &task.parent)?;
        let mut index = Index::from_documents(&documents);
        // The history a developer had at the parent: what the commits before it changed.
        index.set_recent_changes(super::recent::RecentChanges::at_revision(
            repo,
            &task.parent,
            super::recent::DEFAULT_COMMITS,
        )?);
        index.prepare();
        let fragment_of = index
            .fragments
            .iter()
            .enumerate()
            .map(|(i, f)| (f.chunk_id.clone(), i as u32))
            .collect();
        Ok(PreparedTask {
            task: task.clone(),
            documents,
            index,
            fragment_of,
        })
    }

    /// Runs one selector at one budget and scores what it sent.
    pub fn evaluate(
        &self,
        name: &str,
        selector: &SelectFn,
        budget: usize,
    ) -> Result<LocalisationOutcome, LocalizeError> {
        let start = std::time::Instant::now();
        let sent = selector(&self.index, &self.documents, &self.task.query, budget).map_err(
            |message| LocalizeError::Selector {
                selector: name.to_string(),
                commit: self.task.commit.clone(),
                message,
            },
        )?;
        let seconds = start.elapsed().as_secs_f64();
        Ok(self.score(&sent, budget, seconds))
    }
}

/// svc's selector with the given options (e.g. other ranking weights).
pub fn svc_selector_with(
    options: &SelectOptions,
    index: &Index,
    query: &str,
    budget: usize,
) -> Result<Sent, String> {
    let selection = select::select(index, query, budget, options).map_err(|e| e.to_string())?;
    Ok(selection
        .manifest
        .iter()
        .filter_map(|entry| Some((entry.chunk_id.clone(), entry.resolution?)))
        .collect())
}

/// Runs every task at every budget with every named selector; outcomes are tagged with the
/// selector's name. The parent tree is read and indexed once per task.
pub fn run_localisation_with(
    repo: &Path,
    tasks: &[LocalisationTask],
    budgets: &[usize],
    selectors: &[(&str, &SelectFn)],
) -> Result<Vec<(String, LocalisationOutcome)>, LocalizeError> {
    let mut outcomes = Vec::new();
    for task in tasks {
        let prepared = PreparedTask::new(repo, task)?;
        for &(name, selector) in selectors {
            for &budget in budgets {
                let outcome = prepared.evaluate(name, selector, budget)?;
                outcomes.push((name.to_string(), outcome));
            }
        }
    }
    Ok(outcomes)
}

impl PreparedTask {
    /// Gold-file recall and changed-line coverage of one selection.
    fn score(&self, sent: &Sent, budget: usize, seconds: f64) -> LocalisationOutcome {
        let task = &self.task;
        let mut by_path: HashMap<&str, Vec<SentSpan>> = HashMap::new();
        for (chunk_id, &resolution) in sent {
            if let Some(&fragment) = self.fragment_of.get(chunk_id.as_str()) {
                let f = &self.index.fragments[fragment as usize];
                by_path.entry(self.index.path(f)).or_default().push((
                    f.lines.0,
                    f.lines.1,
                    Some(resolution),
                ));
            }
        }
        let found = task
            .gold_files
            .iter()
            .filter(|gold| {
                by_path.get(gold.as_str()).is_some_and(|frags| {
                    frags
                        .iter()
                        .any(|f| matches!(f.2, Some(Resolution::Full | Resolution::Skeleton)))
                })
            })
            .count();
        let mut covered = 0;
        let mut total = 0;
        for (path, lines) in &task.changed_lines {
            let frags = by_path.get(path.as_str());
            for &line in lines {
                total += 1;
                if frags.is_some_and(|frags| {
                    frags
                        .iter()
                        .any(|f| f.0 <= line && line <= f.1 && f.2 == Some(Resolution::Full))
                }) {
                    covered += 1;
                }
            }
        }
        LocalisationOutcome {
            commit: task.commit.clone(),
            part: task.part,
            budget,
            gold_recall: found as f64 / task.gold_files.len().max(1) as f64,
            line_coverage: covered as f64 / total.max(1) as f64,
            seconds,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_part_follows_the_commit_ids_first_hex_digit() {
        assert_eq!(Part::of_commit("0abc"), Part::Tune);
        assert_eq!(Part::of_commit("7fff"), Part::Tune);
        assert_eq!(Part::of_commit("8000"), Part::HeldOut);
        assert_eq!(Part::of_commit("f123"), Part::HeldOut);
        assert_eq!(
            serde_json::to_value(Part::HeldOut).expect("json"),
            "held-out"
        );
    }

    #[test]
    fn diff_parsing_takes_parent_side_lines() {
        let diff = "diff --git a/src/a.rs b/src/a.rs\n--- a/src/a.rs\n+++ b/src/a.rs\n@@ -3,2 +3 @@ fn x\n-a\n-b\n+c\n@@ -10,0 +12 @@\n+d\ndiff --git a/src/new.rs b/src/new.rs\n--- /dev/null\n+++ b/src/new.rs\n@@ -0,0 +1,2 @@\n+x\n+y\n";
        let changed = parse_diff(diff);
        assert_eq!(changed.get("src/a.rs"), Some(&vec![3, 4, 10]));
        assert!(!changed.contains_key("src/new.rs"));
    }

    #[test]
    fn mines_and_scores_a_real_repository() {
        let repo = tempfile::tempdir().expect("repo");
        let run = |args: &[&str]| {
            crate::git::in_test_repo(repo.path(), args);
        };
        run(&["init", "-q"]);
        std::fs::write(
            repo.path().join("math.py"),
            "def add(a, b):\n    return a + b\n\n\ndef scale(v, k):\n    return v * k\n",
        )
        .expect("write");
        std::fs::write(
            repo.path().join("io.py"),
            "def read(p):\n    return open(p).read()\n",
        )
        .expect("write");
        run(&["add", "-A"]);
        run(&["commit", "-qm", "initial"]);
        std::fs::write(
            repo.path().join("math.py"),
            "def add(a, b):\n    return a + b\n\n\ndef scale(v, k):\n    return [x * k for x in v]\n",
        )
        .expect("write");
        run(&[
            "commit",
            "-qam",
            "scale multiplies every element of the vector",
        ]);
        let tasks = mine_tasks(repo.path(), "HEAD", 10, 5).expect("mine");
        assert_eq!(tasks.len(), 1);
        assert_eq!(tasks[0].gold_files, vec!["math.py".to_string()]);
        assert_eq!(tasks[0].part, Part::of_commit(&tasks[0].commit));
        let outcomes = run_localisation(repo.path(), &tasks, &[4000]).expect("run");
        assert_eq!(outcomes[0].gold_recall, 1.0);
        assert_eq!(outcomes[0].line_coverage, 1.0);
    }
}
