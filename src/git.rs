//! Running the `git` command line: the one place svc shells out to git (mining tasks from a
//! repository's history for workloads and for the localisation figures).

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_name_the_command_and_repository() {
        let dir = tempfile::tempdir().expect("tempdir");
        let error = run(dir.path(), &["log", "-1"]).expect_err("not a repository");
        assert_eq!(error.args, "log -1");
        assert!(error.to_string().contains("failed in"), "{error}");
    }

    #[test]
    fn lists_single_parent_commits_with_messages_newest_first() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = dir.path();
        let git = |args: &[&str]| run(repo, args).expect("git");
        git(&["init", "--quiet", "--initial-branch=main"]);
        git(&["config", "user.email", "t@example.com"]);
        git(&["config", "user.name", "t"]);
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
}
