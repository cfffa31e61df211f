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
}
