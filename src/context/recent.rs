//! Recent changes: the lines of a git tree that its last commits (and, in a working tree, its
//! uncommitted edits) touched. A developer asked about a repository looks at what changed lately
//! first: follow-up commits ("improve patch", "cargo fmt", "fixes for review comments") touch the
//! code the commits before them touched, and their messages name nothing else. The selector turns
//! these lines into a small, query-independent lift (see [`super::terms::score_with`]), so a
//! query that names its code still ranks by what it names.
//!
//! Uses the `git` command line, read-only (`rev-parse`, `diff`, `ls-files`).

use std::collections::HashMap;
use std::path::Path;

use crate::git::{self, GitError};

/// How many first-parent commits back the window reaches by default. Chosen on the tune part
/// of the localisation tasks (3, 5, 10 and 20 tried; docs/context-engine.md, *Localisation on real history*).
pub const DEFAULT_COMMITS: usize = 10;

/// Environment variable that sets the window for every command (`0` turns the lift off).
pub const COMMITS_ENV: &str = "SVC_RECENT_COMMITS";

/// `SVC_RECENT_COMMITS` holds something other than a count.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "{COMMITS_ENV}={value:?} is not a number of commits; set it to a count such as 10, or 0 to turn the recent-change lift off"
)]
pub struct BadCommits {
    pub value: String,
}

/// The window from [`COMMITS_ENV`], or [`DEFAULT_COMMITS`] when it is unset.
pub fn commits_from_env() -> Result<usize, BadCommits> {
    match std::env::var(COMMITS_ENV) {
        Ok(value) => value.trim().parse().map_err(|_| BadCommits { value }),
        Err(_) => Ok(DEFAULT_COMMITS),
    }
}

/// Lines changed per file, as 1-based inclusive ranges of the current (post-change) text. A
/// file with an empty list changed as a whole (untracked, or added with no line ranges).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecentChanges {
    files: HashMap<String, Vec<(usize, usize)>>,
    /// How many commits the window spans (for reasons and reports).
    commits: usize,
}

impl RecentChanges {
    /// Changes from `revision~commits` to `revision` in a repository (bare or not): what the
    /// history says at a commit, with no working tree involved (localisation tasks read the
    /// parent of the commit they ask about). A history shorter than the window starts at its
    /// root commit.
    pub fn at_revision(repo: &Path, revision: &str, commits: usize) -> Result<Self, GitError> {
        if commits == 0 {
            return Ok(Self::default());
        }
        let base = window_base(repo, revision, commits)?;
        let diff = git::run(
            repo,
            &["diff", "-U0", "--no-color", "--no-renames", &base, revision],
        )?;
        Ok(Self {
            files: parse_new_side(&String::from_utf8_lossy(&diff)),
            commits,
        })
    }

    /// Changes in the working tree at `root`: from `HEAD~commits` to the files on disk (so
    /// uncommitted edits count as the most recent), plus untracked files as wholly changed. Paths
    /// are relative to `root`, which may be a subdirectory of the work tree. `Ok(None)` when
    /// `root` is not inside a git work tree or the repository has no commit yet (there is no
    /// history to read, which is not an error).
    pub fn in_work_tree(root: &Path, commits: usize) -> Result<Option<Self>, GitError> {
        if commits == 0 {
            return Ok(None);
        }
        let inside = git::run(root, &["rev-parse", "--is-inside-work-tree"]);
        if !matches!(inside, Ok(out) if out.starts_with(b"true")) {
            return Ok(None);
        }
        // The diff and the untracked listing are independent: run both git processes at once
        // (each costs a few milliseconds of start-up, on the path of every select).
        let diff_against = |base: &str| {
            git::run(
                root,
                &[
                    "diff",
                    "-U0",
                    "--no-color",
                    "--no-renames",
                    "--relative",
                    base,
                ],
            )
        };
        let back = format!("HEAD~{commits}");
        let (diff, untracked) = std::thread::scope(|scope| {
            let untracked = scope
                .spawn(|| git::run(root, &["ls-files", "--others", "--exclude-standard", "-z"]));
            let diff = diff_against(&back);
            // A panic in the listing thread is a bug in git::run; report it as git's failure.
            let untracked = untracked.join().unwrap_or_else(|_| {
                Err(GitError {
                    repo: root.to_path_buf(),
                    args: "ls-files --others".into(),
                    message: "the listing thread panicked".into(),
                })
            });
            (diff, untracked)
        });
        let diff = match diff {
            Ok(diff) => diff,
            // No `HEAD~N`: a history shorter than the window, or no commit at all.
            Err(_) => {
                if git::head_commit(root).is_none() {
                    return Ok(None);
                }
                diff_against(&root_commit(root, "HEAD")?)?
            }
        };
        let mut files = parse_new_side(&String::from_utf8_lossy(&diff));
        for path in untracked?.split(|&b| b == 0).filter(|p| !p.is_empty()) {
            files.insert(String::from_utf8_lossy(path).into_owned(), Vec::new());
        }
        Ok(Some(Self { files, commits }))
    }

    /// An explicit set of changes (tests, and callers that know them already).
    pub fn from_files(files: HashMap<String, Vec<(usize, usize)>>, commits: usize) -> Self {
        Self { files, commits }
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// How many commits the window spans.
    pub fn commits(&self) -> usize {
        self.commits
    }

    /// How the lines `first..=last` of `path` changed lately: `Some(true)` when a changed line
    /// falls inside them (or the whole file changed), `Some(false)` when the file changed
    /// elsewhere, `None` when the file did not change.
    pub fn touches(&self, path: &str, first: usize, last: usize) -> Option<bool> {
        let ranges = self.files.get(path)?;
        Some(ranges.is_empty() || ranges.iter().any(|&(a, b)| a <= last && first <= b))
    }
}

/// The commit the window starts from: `revision~commits`, or the root commit of a shorter
/// first-parent history.
fn window_base(repo: &Path, revision: &str, commits: usize) -> Result<String, GitError> {
    let back = format!("{revision}~{commits}^{{commit}}");
    if let Ok(out) = git::run(repo, &["rev-parse", "--verify", "--quiet", &back]) {
        return Ok(String::from_utf8_lossy(&out).trim().to_string());
    }
    root_commit(repo, revision)
}

/// The first commit of `revision`'s first-parent history.
fn root_commit(repo: &Path, revision: &str) -> Result<String, GitError> {
    let roots = git::run(
        repo,
        &["rev-list", "--first-parent", "--max-parents=0", revision],
    )?;
    let roots = String::from_utf8_lossy(&roots);
    Ok(roots.lines().next().unwrap_or(revision).trim().to_string())
}

/// New-side changed line ranges per file of a `-U0` diff. A pure deletion marks the line after
/// it (the code around the removed lines changed); deleted files are left out.
fn parse_new_side(diff: &str) -> HashMap<String, Vec<(usize, usize)>> {
    let mut out = HashMap::new();
    for file in git::diff_files(diff) {
        let Some(path) = file.new_path else { continue };
        let ranges = file
            .hunks
            .iter()
            .map(|hunk| match hunk.new {
                (start, 0) => (start.max(1), start.max(1) + 1),
                (start, count) => (start.max(1), start + count - 1),
            })
            .collect();
        out.insert(path, ranges);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_side_ranges_of_a_diff() {
        let diff = "\
diff --git a/src/a.rs b/src/a.rs
--- a/src/a.rs
+++ b/src/a.rs
@@ -3,2 +3,3 @@ fn x
-a
-b
+a
+b
+c
@@ -10 +11 @@
--- a removed comment line that looks like a header
+++ an added line that looks like one
@@ -20,4 +21,0 @@
-w
-x
-y
-z
diff --git a/gone.rs b/gone.rs
--- a/gone.rs
+++ /dev/null
@@ -1,3 +0,0 @@
-p
-q
-r
";
        let files = parse_new_side(diff);
        assert_eq!(files.len(), 1);
        assert_eq!(files["src/a.rs"], vec![(3, 5), (11, 11), (21, 22)]);
        let recent = RecentChanges::from_files(files, 3);
        assert_eq!(recent.touches("src/a.rs", 1, 2), Some(false));
        assert_eq!(recent.touches("src/a.rs", 5, 9), Some(true));
        assert_eq!(recent.touches("src/a.rs", 22, 30), Some(true));
        assert_eq!(recent.touches("src/b.rs", 1, 100), None);
    }

    #[test]
    fn history_at_a_revision_and_in_a_work_tree() {
        use crate::git::in_test_repo as git;
        let dir = tempfile::tempdir().expect("temp dir");
        let repo = dir.path();
        git(repo, &["init", "-q"]);
        std::fs::write(repo.join("old.py"), "def a():\n    return 1\n").expect("write");
        std::fs::write(repo.join("new.py"), "def b():\n    return 2\n").expect("write");
        git(repo, &["add", "."]);
        git(repo, &["commit", "-qm", "first"]);
        std::fs::write(repo.join("new.py"), "def b():\n    return 3\n").expect("write");
        git(repo, &["commit", "-qam", "second"]);

        // One commit back: only new.py's line 2 changed; the whole history reaches old.py.
        let one = RecentChanges::at_revision(repo, "HEAD", 1).expect("git");
        assert_eq!(one.touches("new.py", 2, 2), Some(true));
        assert_eq!(one.touches("new.py", 1, 1), Some(false));
        assert_eq!(one.touches("old.py", 1, 2), None);
        // A window longer than the history starts at the root commit.
        let all = RecentChanges::at_revision(repo, "HEAD", 10).expect("git");
        assert_eq!(all.touches("new.py", 2, 2), Some(true));

        // The work tree adds uncommitted edits and untracked files.
        std::fs::write(repo.join("old.py"), "def a():\n    return 9\n").expect("write");
        std::fs::write(repo.join("draft.py"), "x = 1\n").expect("write");
        let tree = RecentChanges::in_work_tree(repo, 1)
            .expect("git")
            .expect("a work tree");
        assert_eq!(tree.touches("old.py", 2, 2), Some(true));
        assert_eq!(tree.touches("draft.py", 1, 1), Some(true));
        assert_eq!(tree.touches("new.py", 2, 2), Some(true));
        assert!(RecentChanges::in_work_tree(repo, 0).expect("git").is_none());

        let plain = tempfile::tempdir().expect("temp dir");
        assert!(
            RecentChanges::in_work_tree(plain.path(), 10)
                .expect("git")
                .is_none()
        );
    }
}
