//! `code-localization` workloads and the git miner behind `svc workloads mine-git`.
//!
//! A task is one commit of real history: its message is the query, the non-test source files it
//! modified are the gold, and the context is the parent commit's tree. Git is driven through the
//! `git` command line (no library), and a repository can be shipped as a git bundle, unpacked
//! once into the state cache.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde::{Deserialize, Serialize};

use super::spec::CodeSource;
use super::{
    AnswerKind, Document, LoadOptions, Task, TaskContext, TaskIds, WorkloadError, data_path,
    read_text,
};
use crate::digest;

const SOURCE_EXTENSIONS: &[&str] = &[
    "c", "cc", "cpp", "cs", "go", "h", "hpp", "java", "js", "jsx", "kt", "php", "py", "rb", "rs",
    "scala", "sh", "swift", "ts", "tsx",
];
const TEXT_EXTENSIONS: &[&str] = &["md", "toml", "json", "yaml", "yml", "txt", "cfg", "ini"];
const DEFAULT_MAX_FILE_BYTES: usize = 65_536;

/// One mined task, as written by `svc workloads mine-git` (one JSON object per line).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MinedTask {
    pub id: String,
    pub commit: String,
    pub parent: String,
    pub query: String,
    pub gold_files: Vec<String>,
}

fn extension(path: &str) -> &str {
    Path::new(path)
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
}

/// Whether a path is source code (by extension).
pub fn is_source(path: &str) -> bool {
    SOURCE_EXTENSIONS.contains(&extension(path))
}

/// Whether a path is a test: under a `test(s)`/`spec`/`__tests__` folder or named like one.
pub fn is_test(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let mut components = lower.split('/');
    let file = lower.rsplit('/').next().unwrap_or("");
    components.any(|c| {
        matches!(
            c,
            "test" | "tests" | "testing" | "__tests__" | "spec" | "specs" | "testdata"
        )
    }) || file.starts_with("test_")
        || file.contains("_test.")
        || file.contains(".test.")
        || file.contains(".spec.")
        || file.contains("_spec.")
}

fn git(repo: &Path, args: &[&str]) -> Result<String, WorkloadError> {
    let stdout = crate::git::run(repo, args)?;
    Ok(String::from_utf8_lossy(&stdout).into_owned())
}

/// Mines up to `max` tasks from the history of `repo` (newest first), optionally only commits
/// after `since` (`since..HEAD`). Merge commits, commits whose message is empty and commits that
/// modify no non-test source file are skipped.
pub fn mine_git(
    repo: &Path,
    max: usize,
    since: Option<&str>,
) -> Result<Vec<MinedTask>, WorkloadError> {
    mine_git_from(repo, "HEAD", max, since)
}

/// [`mine_git`] from the tip `tip`: a revision, or `--all` for every branch (a repository
/// cloned from a bundle may have a `HEAD` that names no branch it holds).
pub fn mine_git_from(
    repo: &Path,
    tip: &str,
    max: usize,
    since: Option<&str>,
) -> Result<Vec<MinedTask>, WorkloadError> {
    let revisions: Vec<String> = match (tip, since) {
        ("HEAD", None) => Vec::new(),
        ("--all", since) => std::iter::once("--all".to_string())
            .chain(since.map(|rev| format!("^{rev}")))
            .collect(),
        (tip, Some(rev)) => vec![format!("{rev}..{tip}")],
        (tip, None) => vec![tip.to_string()],
    };
    let revisions: Vec<&str> = revisions.iter().map(String::as_str).collect();
    let commits = crate::git::single_parent_commits(repo, &revisions)?;
    let mut tasks = Vec::new();
    for logged in commits {
        if tasks.len() >= max {
            break;
        }
        let (commit, parent) = (logged.commit.as_str(), logged.parent.as_str());
        let changed = git(
            repo,
            &[
                "diff-tree",
                "--no-commit-id",
                "-r",
                "--name-only",
                "--diff-filter=M",
                parent,
                commit,
            ],
        )?;
        let mut gold_files: Vec<String> = changed
            .lines()
            .filter(|p| is_source(p) && !is_test(p))
            .map(str::to_string)
            .collect();
        gold_files.sort();
        if gold_files.is_empty() {
            continue;
        }
        tasks.push(MinedTask {
            id: commit[..12.min(commit.len())].to_string(),
            commit: commit.to_string(),
            parent: parent.to_string(),
            query: logged.message.clone(),
            gold_files,
        });
    }
    Ok(tasks)
}

/// Where a workload's repository is: `$repo_env` when set, else `repo` (relative to the
/// workload folder).
pub fn repo_path(dir: &Path, source: &CodeSource) -> PathBuf {
    if let Some(var) = &source.repo_env
        && let Some(value) = std::env::var_os(var).filter(|v| !v.is_empty())
    {
        return PathBuf::from(value);
    }
    data_path(dir, &source.repo)
}

/// The repository a workload names: a folder as it is, or a bundle cloned (bare) once into
/// `cache_dir/git/<bundle hash>`.
fn open_repo(
    dir: &Path,
    source: &CodeSource,
    options: &LoadOptions,
) -> Result<PathBuf, WorkloadError> {
    open_named_repo(dir, &source.repo, source.repo_env.as_deref(), options)
}

/// A repository named by `repo` (relative to the workload folder `dir`) or by the variable
/// `repo_env`: a folder as it is, or a bundle cloned (bare) once into
/// `cache_dir/git/<bundle hash>`.
pub(super) fn open_named_repo(
    dir: &Path,
    repo: &str,
    repo_env: Option<&str>,
    options: &LoadOptions,
) -> Result<PathBuf, WorkloadError> {
    let source = CodeSource {
        repo: repo.to_string(),
        repo_env: repo_env.map(str::to_string),
        tasks: String::new(),
        max_file_bytes: None,
    };
    let source = &source;
    let path = repo_path(dir, source);
    if path.is_dir() {
        return Ok(path);
    }
    let bytes = std::fs::read(&path).map_err(|error| WorkloadError::Data {
        path: path.clone(),
        message: format!(
            "cannot read the repository ({error}): the workload names `repo = \"{}\"` relative to {}{}; clone or copy the bundle there{}",
            source.repo,
            dir.display(),
            source
                .repo_env
                .as_ref()
                .map(|var| format!(" or set {var} to its path"))
                .unwrap_or_default(),
            source
                .repo_env
                .as_ref()
                .filter(|var| std::env::var_os(var).is_some())
                .map(|var| format!(" ({var} is set and was used)"))
                .unwrap_or_default(),
        ),
    })?;
    let target = options
        .cache_dir
        .join("git")
        .join(&digest::sha256_hex(&bytes)[..16]);
    if target.join("HEAD").is_file() {
        return Ok(target);
    }
    let partial = target.with_extension("partial");
    let _ = std::fs::remove_dir_all(&partial);
    if let Some(parent) = partial.parent() {
        std::fs::create_dir_all(parent).map_err(|source| WorkloadError::Read {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    let output = Command::new("git")
        .args(["clone", "--bare", "--quiet"])
        .arg(&path)
        .arg(&partial)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| WorkloadError::Git {
            repo: path.clone(),
            args: "clone --bare".into(),
            message: format!("cannot run git: {e}"),
        })?;
    if !output.status.success() {
        return Err(WorkloadError::Git {
            repo: path,
            args: "clone --bare".into(),
            message: String::from_utf8_lossy(&output.stderr).trim().to_string(),
        });
    }
    // A rename makes the unpacked repository appear whole or not at all.
    std::fs::rename(&partial, &target).or_else(|error| {
        if target.join("HEAD").is_file() {
            Ok(())
        } else {
            Err(WorkloadError::Read {
                path: target.clone(),
                source: error,
            })
        }
    })?;
    Ok(target)
}

/// The text files of `rev`'s tree (source and text extensions, at most `max_bytes` each),
/// sorted by path, read in one `git cat-file --batch`.
pub fn tree_documents(
    repo: &Path,
    rev: &str,
    max_bytes: usize,
) -> Result<Vec<Document>, WorkloadError> {
    let files = crate::git::tree_texts(repo, rev, |path, size| {
        let ext = extension(path);
        size <= max_bytes as u64
            && (SOURCE_EXTENSIONS.contains(&ext) || TEXT_EXTENSIONS.contains(&ext))
    })?;
    let mut documents: Vec<Document> = files
        .into_iter()
        .map(|(name, text)| Document { name, text })
        .collect();
    documents.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(documents)
}

pub(super) fn load(
    dir: &Path,
    _spec_path: &Path,
    source: &CodeSource,
    options: &LoadOptions,
) -> Result<Vec<Task>, WorkloadError> {
    let repo = open_repo(dir, source, options)?;
    let tasks_path = data_path(dir, &source.tasks);
    let text = read_text(&tasks_path)?;
    let max_bytes = source.max_file_bytes.unwrap_or(DEFAULT_MAX_FILE_BYTES);
    let mut trees: HashMap<String, Vec<Document>> = HashMap::new();
    let mut tasks = Vec::new();
    let mut ids = TaskIds::default();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mined: MinedTask =
            serde_json::from_str(crate::text::without_bom(line)).map_err(|error| {
                WorkloadError::Task {
                    path: tasks_path.clone(),
                    line: index + 1,
                    task_id: "?".into(),
                    message: format!(
                        "not a mined task (id, commit, parent, query, gold_files): {error}"
                    ),
                }
            })?;
        ids.check(&mined.id, &tasks_path, index + 1)?;
        let task_error = |message: String| WorkloadError::Task {
            path: tasks_path.clone(),
            line: index + 1,
            task_id: mined.id.clone(),
            message,
        };
        // A task without a query or a gold file measures nothing: every run of it scored 0 or
        // failed at selection (found by probing).
        if mined.query.trim().is_empty() {
            return Err(task_error(
                "field `query` is empty; give the commit message (or the question) to localise"
                    .into(),
            ));
        }
        if mined.gold_files.is_empty() {
            return Err(task_error(
                "field `gold_files` is empty; list the files the commit changed".into(),
            ));
        }
        if !trees.contains_key(&mined.parent) {
            let documents = tree_documents(&repo, &mined.parent, max_bytes).map_err(|error| {
                task_error(format!(
                    "cannot read the parent tree {}: {error}",
                    mined.parent
                ))
            })?;
            trees.insert(mined.parent.clone(), documents);
        }
        let documents = trees.get(&mined.parent).cloned().unwrap_or_default();
        for gold in &mined.gold_files {
            if !documents.iter().any(|d| &d.name == gold) {
                return Err(WorkloadError::Task {
                    path: tasks_path.clone(),
                    line: index + 1,
                    task_id: mined.id.clone(),
                    message: format!(
                        "gold file {gold} is not in the parent tree {}",
                        mined.parent
                    ),
                });
            }
        }
        // The gold files' full text is the evidence: recall counts whole files that survived.
        let evidence = mined
            .gold_files
            .iter()
            .filter_map(|gold| documents.iter().find(|d| &d.name == gold))
            .map(|d| d.text.clone())
            .collect();
        tasks.push(Task {
            id: mined.id,
            question: mined.query,
            context: TaskContext::Documents(documents),
            answer_kind: AnswerKind::Files,
            answers: Vec::new(),
            evidence,
            gold_files: mined.gold_files,
        });
    }
    Ok(tasks)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Builds a small git repository with known history in `dir`.
    pub(crate) fn fixture_repo(dir: &Path) {
        let run = |args: &[&str]| {
            crate::git::in_test_repo(dir, args);
        };
        run(&["init", "--quiet", "-b", "main"]);
        std::fs::create_dir_all(dir.join("src")).expect("mkdir");
        std::fs::create_dir_all(dir.join("tests")).expect("mkdir");
        std::fs::write(
            dir.join("src/parse.py"),
            "def parse(line):\n    return line.split(',')\n",
        )
        .expect("w");
        std::fs::write(
            dir.join("src/report.py"),
            "def render(rows):\n    return str(rows)\n",
        )
        .expect("w");
        run(&["add", "-A"]);
        run(&["commit", "--quiet", "-m", "Initial parser and report"]);
        std::fs::write(
            dir.join("src/parse.py"),
            "def parse(line):\n    return [f.strip() for f in line.split(',')]\n",
        )
        .expect("w");
        std::fs::write(dir.join("tests/test_parse.py"), "assert True\n").expect("w");
        run(&["add", "-A"]);
        run(&[
            "commit",
            "--quiet",
            "-m",
            "Strip whitespace around parsed fields",
        ]);
        std::fs::write(dir.join("tests/test_parse.py"), "assert 1\n").expect("w");
        run(&["add", "-A"]);
        run(&["commit", "--quiet", "-m", "Tidy parser test"]);
        std::fs::write(
            dir.join("src/report.py"),
            "def render(rows):\n    return '\\n'.join(map(str, rows))\n",
        )
        .expect("w");
        run(&["add", "-A"]);
        run(&["commit", "--quiet", "-m", "Render one report row per line"]);
    }

    #[test]
    fn mines_message_gold_and_parent() {
        let dir = tempfile::tempdir().expect("tempdir");
        fixture_repo(dir.path());
        let tasks = mine_git(dir.path(), 10, None).expect("mine");
        let queries: Vec<&str> = tasks.iter().map(|t| t.query.as_str()).collect();
        // Newest first; the test-only commit and the root commit are skipped.
        assert_eq!(
            queries,
            [
                "Render one report row per line",
                "Strip whitespace around parsed fields"
            ]
        );
        assert_eq!(tasks[0].gold_files, ["src/report.py"]);
        assert_eq!(tasks[1].gold_files, ["src/parse.py"]);
        let limited = mine_git(dir.path(), 1, None).expect("mine");
        assert_eq!(limited.len(), 1);
        let since = mine_git(dir.path(), 10, Some(&tasks[1].commit)).expect("mine");
        assert_eq!(since.len(), 1);
        // Found by probing: a repository cloned from a bundle may have a HEAD naming no branch
        // it holds (here, one that does not exist); mining every branch finds the same tasks.
        crate::git::in_test_repo(dir.path(), &["symbolic-ref", "HEAD", "refs/heads/nowhere"]);
        assert!(mine_git(dir.path(), 10, None).is_err());
        let all = mine_git_from(dir.path(), "--all", 10, None).expect("mine --all");
        assert_eq!(all, tasks);
        let all_since =
            mine_git_from(dir.path(), "--all", 10, Some(&tasks[1].commit)).expect("mine");
        assert_eq!(all_since, since);
        crate::git::in_test_repo(dir.path(), &["symbolic-ref", "HEAD", "refs/heads/main"]);
        let docs = tree_documents(dir.path(), &tasks[0].parent, 1000).expect("tree");
        let names: Vec<&str> = docs.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(
            names,
            ["src/parse.py", "src/report.py", "tests/test_parse.py"]
        );
        assert!(
            docs[1].text.contains("return str(rows)"),
            "parent tree, not the commit's"
        );
    }

    #[test]
    fn a_missing_repository_says_where_it_looked_and_what_to_set() {
        let dir = tempfile::tempdir().expect("tempdir");
        let source = CodeSource {
            repo: "../nowhere/requests.bundle".into(),
            repo_env: Some("SVC_TEST_UNSET_BUNDLE_VARIABLE".into()),
            tasks: "tasks.jsonl".into(),
            max_file_bytes: None,
        };
        let options = LoadOptions {
            cache_dir: dir.path().join("cache"),
        };
        let error = open_repo(dir.path(), &source, &options).expect_err("missing");
        let message = error.to_string();
        assert!(message.contains("nowhere/requests.bundle"), "{message}");
        assert!(
            message.contains("set SVC_TEST_UNSET_BUNDLE_VARIABLE to its path"),
            "{message}"
        );
        // A folder given directly is used as it is.
        fixture_repo(dir.path());
        let direct = CodeSource {
            repo: ".".into(),
            ..source
        };
        assert_eq!(
            open_repo(dir.path(), &direct, &options).expect("folder"),
            dir.path().join(".")
        );
    }

    /// Regression (found by probing): a task with an empty query or no gold file was loaded
    /// (every run of it scored 0 or failed at selection), and a bad parent gave git's raw error
    /// without the task's line.
    #[test]
    fn tasks_that_measure_nothing_are_refused_with_their_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        fixture_repo(dir.path());
        let mined = mine_git(dir.path(), 1, None).expect("mine").remove(0);
        let source = CodeSource {
            repo: ".".into(),
            repo_env: None,
            tasks: "tasks.jsonl".into(),
            max_file_bytes: None,
        };
        let options = LoadOptions {
            cache_dir: dir.path().join("cache"),
        };
        let good = serde_json::to_string(&mined).expect("json");
        let cases = [
            (
                MinedTask {
                    query: " ".into(),
                    ..mined.clone()
                },
                "field `query` is empty",
            ),
            (
                MinedTask {
                    gold_files: Vec::new(),
                    ..mined.clone()
                },
                "field `gold_files` is empty",
            ),
            (
                MinedTask {
                    parent: "0000000000000000000000000000000000000000".into(),
                    ..mined.clone()
                },
                "cannot read the parent tree 0000000",
            ),
        ];
        for (bad, says) in cases {
            let mut bad = bad;
            bad.id = "bad".into();
            let text = format!("{good}\n{}\n", serde_json::to_string(&bad).expect("json"));
            std::fs::write(dir.path().join("tasks.jsonl"), text).expect("write");
            let error = load(dir.path(), Path::new("w.toml"), &source, &options)
                .expect_err(says)
                .to_string();
            assert!(error.contains(":2:") && error.contains(says), "{error}");
        }
    }

    #[test]
    fn test_paths_are_recognised() {
        for path in [
            "tests/a.rs",
            "src/foo_test.go",
            "web/a.spec.ts",
            "pkg/test_x.py",
        ] {
            assert!(is_test(path), "{path}");
        }
        for path in ["src/lib.rs", "src/contest.rs", "src/testing_utils_not.rs"] {
            assert!(!is_test(path), "{path}");
        }
    }
}
