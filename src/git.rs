//! Running the `git` command line: the one place svc shells out to git (mining tasks from a
//! repository's history for workloads and for the localisation figures).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A git invocation that could not run or exited with an error.
#[derive(Debug, Clone, thiserror::Error)]
#[error("git {args} failed in {repo}: {message}")]
pub struct GitError {
    pub repo: PathBuf,
    pub args: String,
    pub message: String,
}

/// Runs `git -C repo ARGS…` and returns its standard output.
pub fn run(repo: &Path, args: &[&str]) -> Result<Vec<u8>, GitError> {
    let error = |message: String| GitError {
        repo: repo.to_path_buf(),
        args: args.join(" "),
        message,
    };
    let output = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| error(format!("cannot run git: {e} (is git installed?)")))?;
    if !output.status.success() {
        return Err(error(
            String::from_utf8_lossy(&output.stderr).trim().to_string(),
        ));
    }
    Ok(output.stdout)
}

/// The commit `HEAD` names in the work tree holding `dir`; `None` outside a work tree, before
/// the first commit, or when git cannot run (callers use it to notice that history moved).
pub fn head_commit(dir: &Path) -> Option<String> {
    let out = run(dir, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"]).ok()?;
    let id = String::from_utf8_lossy(&out).trim().to_string();
    (!id.is_empty()).then_some(id)
}

/// The blobs of `rev`'s tree that `keep(path, size)` accepts, as (path, exact bytes) in
/// `ls-tree` order, read in one `git cat-file --batch`.
pub fn tree_files(
    repo: &Path,
    rev: &str,
    keep: impl Fn(&str, u64) -> bool,
) -> Result<Vec<(String, Vec<u8>)>, GitError> {
    let listing = run(repo, &["ls-tree", "-r", "-l", rev])?;
    let listing = String::from_utf8_lossy(&listing);
    let mut wanted: Vec<(&str, &str)> = Vec::new();
    for line in listing.lines() {
        // <mode> SP <type> SP <object> SP+ <size> TAB <path>
        let Some((meta, path)) = line.split_once('\t') else {
            continue;
        };
        let fields: Vec<&str> = meta.split_whitespace().collect();
        if fields.len() == 4
            && fields[1] == "blob"
            && fields[3].parse::<u64>().is_ok_and(|size| keep(path, size))
        {
            wanted.push((path, fields[2]));
        }
    }
    let error = |message: String| GitError {
        repo: repo.to_path_buf(),
        args: "cat-file --batch".into(),
        message,
    };
    let mut child = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["cat-file", "--batch"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| error(format!("cannot run git: {e} (is git installed?)")))?;
    let (Some(mut stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(error("git's pipes were not opened".into()));
    };
    let objects: String = wanted
        .iter()
        .map(|(_, object)| format!("{object}\n"))
        .collect();
    // Writing from another thread avoids a pipe deadlock when the output is large.
    let writer = std::thread::spawn(move || stdin.write_all(objects.as_bytes()));
    let mut reader = BufReader::new(stdout);
    let mut files = Vec::with_capacity(wanted.len());
    for (path, _) in &wanted {
        let mut header = String::new();
        reader
            .read_line(&mut header)
            .map_err(|e| error(e.to_string()))?;
        let size: usize = header
            .split_whitespace()
            .nth(2)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| error(format!("unexpected header {header:?} for {path}")))?;
        // The object's bytes and the newline after them.
        let mut bytes = vec![0u8; size + 1];
        reader
            .read_exact(&mut bytes)
            .map_err(|e| error(e.to_string()))?;
        bytes.pop();
        files.push((path.to_string(), bytes));
    }
    let _ = writer.join();
    let _ = child.wait();
    Ok(files)
}

/// [`tree_files`] decoded: the files that are UTF-8 text, as (path, text) in `ls-tree` order.
pub fn tree_texts(
    repo: &Path,
    rev: &str,
    keep: impl Fn(&str, u64) -> bool,
) -> Result<Vec<(String, String)>, GitError> {
    Ok(tree_files(repo, rev, keep)?
        .into_iter()
        .filter_map(|(path, bytes)| String::from_utf8(bytes).ok().map(|text| (path, text)))
        .collect())
}

/// Runs `git -C repo ARGS…` for a test's throwaway repository, with a fixed author and date so
/// commits need no user configuration and their ids repeat; panics when git fails.
#[cfg(test)]
pub(crate) fn in_test_repo(repo: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .env("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .stdin(Stdio::null())
        .output()
        .expect("git runs");
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// One non-merge commit of a history walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedCommit {
    pub commit: String,
    pub parent: String,
    /// The whole message (subject and body), trimmed.
    pub message: String,
}

/// The commits `git log REVISIONS…` lists, newest first, keeping those a task can be mined
/// from: exactly one parent and a non-empty message.
pub fn single_parent_commits(
    repo: &Path,
    revisions: &[&str],
) -> Result<Vec<LoggedCommit>, GitError> {
    let mut args = vec!["log", "--no-merges", "--format=%H%x00%P%x00%B%x1e"];
    args.extend_from_slice(revisions);
    let log = run(repo, &args)?;
    let log = String::from_utf8_lossy(&log);
    let mut commits = Vec::new();
    for entry in log.split('\x1e') {
        let mut fields = entry.trim_start_matches('\n').splitn(3, '\0');
        let (Some(commit), Some(parents), Some(message)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let parents: Vec<&str> = parents.split_whitespace().collect();
        let message = message.trim();
        if parents.len() == 1 && !message.is_empty() {
            commits.push(LoggedCommit {
                commit: commit.to_string(),
                parent: parents[0].to_string(),
                message: message.to_string(),
            });
        }
    }
    Ok(commits)
}

/// One file of a `git diff -U0`: its path on each side (`None` for `/dev/null`) and its hunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileDiff {
    pub old_path: Option<String>,
    pub new_path: Option<String>,
    pub hunks: Vec<Hunk>,
}

/// A hunk header's `(start, count)` on the old and the new side (a count of 0 is a pure
/// insertion or deletion, whose start is the line before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hunk {
    pub old: (usize, usize),
    pub new: (usize, usize),
}

/// The files and hunk headers of a `git diff -U0` output. A hunk's body is skipped by its
/// counts, so a removed line reading `-- x` or an added `++ x` (shown as `--- x`, `+++ x`) is
/// never taken for a file header.
pub fn diff_files(diff: &str) -> Vec<FileDiff> {
    fn range(field: &str) -> (usize, usize) {
        match field.split_once(',') {
            Some((start, count)) => (start.parse().unwrap_or(0), count.parse().unwrap_or(0)),
            None => (field.parse().unwrap_or(0), 1),
        }
    }
    let side = |path: &str, prefix: &str| path.strip_prefix(prefix).map(str::to_string);
    let mut files: Vec<FileDiff> = Vec::new();
    let mut body = 0usize;
    for line in diff.lines() {
        if body > 0 {
            // "\ No newline at end of file" follows a body line without being one.
            if !line.starts_with('\\') {
                body -= 1;
            }
            continue;
        }
        if let Some(path) = line.strip_prefix("--- ") {
            files.push(FileDiff {
                old_path: side(path, "a/"),
                new_path: None,
                hunks: Vec::new(),
            });
        } else if let Some(path) = line.strip_prefix("+++ ") {
            if let Some(file) = files.last_mut() {
                file.new_path = side(path, "b/");
            }
        } else if let Some(header) = line.strip_prefix("@@ -") {
            let mut fields = header.split_whitespace();
            let old = range(fields.next().unwrap_or_default());
            let new = range(
                fields
                    .next()
                    .and_then(|f| f.strip_prefix('+'))
                    .unwrap_or_default(),
            );
            body = old.1 + new.1;
            if let Some(file) = files.last_mut() {
                file.hunks.push(Hunk { old, new });
            }
        }
    }
    files
}

#[cfg(test)]
mod tests {
    use super::*;

    fn init_repo(repo: &Path) {
        for args in [
            &["init", "--quiet", "--initial-branch=main"][..],
            &["config", "user.email", "t@example.com"],
            &["config", "user.name", "t"],
        ] {
            run(repo, args).expect("git");
        }
    }

    #[test]
    fn failures_name_the_command_and_repository() {
        let dir = tempfile::tempdir().expect("tempdir");
        let error = run(dir.path(), &["log", "-1"]).expect_err("not a repository");
        assert_eq!(error.args, "log -1");
        assert!(error.to_string().contains("failed in"), "{error}");
    }

    #[test]
    fn tree_files_reads_the_kept_blobs_of_a_revision() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = dir.path();
        let git = |args: &[&str]| run(repo, args).expect("git");
        init_repo(repo);
        std::fs::create_dir_all(repo.join("src")).expect("mkdir");
        std::fs::write(repo.join("src/a.rs"), "fn a() {}\r\n").expect("write");
        std::fs::write(repo.join("big.txt"), "x".repeat(100)).expect("write");
        git(&["add", "."]);
        git(&["commit", "--quiet", "-m", "files"]);
        let files = tree_files(repo, "HEAD", |_, size| size <= 50).expect("tree");
        assert_eq!(files, [("src/a.rs".to_string(), b"fn a() {}\r\n".to_vec())]);
        let error = tree_files(repo, "no-such-rev", |_, _| true).expect_err("bad rev");
        assert!(error.args.starts_with("ls-tree"), "{error}");
    }

    #[test]
    fn lists_single_parent_commits_with_messages_newest_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = dir.path();
        let git = |args: &[&str]| run(repo, args).expect("git");
        init_repo(repo);
        std::fs::write(repo.join("a.txt"), "one").expect("write");
        git(&["add", "."]);
        git(&["commit", "--quiet", "-m", "Root commit"]);
        std::fs::write(repo.join("a.txt"), "two").expect("write");
        git(&["commit", "--quiet", "-am", "Second\n\nWith a body."]);
        git(&[
            "commit",
            "--quiet",
            "--allow-empty",
            "--allow-empty-message",
            "-m",
            "",
        ]);
        let commits = single_parent_commits(repo, &["HEAD"]).expect("log");
        // The root has no parent and the last commit no message: only one is minable.
        assert_eq!(commits.len(), 1);
        assert_eq!(commits[0].message, "Second\n\nWith a body.");
        let parent = String::from_utf8(git(&["rev-parse", "HEAD~2"])).expect("utf8");
        assert_eq!(commits[0].parent, parent.trim());
    }

    #[test]
    fn diff_files_skip_hunk_bodies_that_look_like_headers() {
        // A removed SQL/Lua comment line `-- x` shows as `--- x`, an added `++ y` as `+++ y`.
        let diff = "diff --git a/q.sql b/q.sql\n--- a/q.sql\n+++ b/q.sql\n@@ -2,2 +2 @@ select\n--- x\n-y\n+++ y\n\\ No newline at end of file\n@@ -9 +8,0 @@\n-z\ndiff --git a/n.rs b/n.rs\nnew file mode 100644\n--- /dev/null\n+++ b/n.rs\n@@ -0,0 +1,2 @@\n+a\n+b\n";
        let files = diff_files(diff);
        assert_eq!(files.len(), 2, "{files:#?}");
        assert_eq!(files[0].old_path.as_deref(), Some("q.sql"));
        assert_eq!(files[0].new_path.as_deref(), Some("q.sql"));
        assert_eq!(
            files[0].hunks,
            vec![
                Hunk {
                    old: (2, 2),
                    new: (2, 1)
                },
                Hunk {
                    old: (9, 1),
                    new: (8, 0)
                }
            ]
        );
        assert_eq!(files[1].old_path, None);
        assert_eq!(files[1].new_path.as_deref(), Some("n.rs"));
        assert_eq!(files[1].hunks[0].new, (1, 2));
    }
}
