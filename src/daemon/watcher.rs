//! The file watcher: a change under a repository re-indexes that repository incrementally
//! (files whose content hash is unchanged come from the persisted index; only changed files are
//! parsed again).
//!
//! Events are debounced ([`DEBOUNCE`]): an editor's save or a `git checkout` is a burst of
//! events and one rebuild. Changes under `.git/` and paths the repository's root `.gitignore`
//! ignores (build output) trigger nothing, so a build running in the repository does not keep
//! the daemon busy.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use notify::{EventKind, RecursiveMode, Watcher};

use crate::dashboard::DashboardState;

/// Quiet time after the last event of a burst before the rebuild starts.
pub const DEBOUNCE: Duration = Duration::from_millis(100);

/// A repository being watched.
struct Watched {
    root: PathBuf,
    ignore: Gitignore,
}

impl Watched {
    fn new(root: &Path) -> Self {
        let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        let mut builder = GitignoreBuilder::new(&root);
        // A missing .gitignore is fine: nothing is ignored but `.git/`.
        let _ = builder.add(root.join(".gitignore"));
        let ignore = builder.build().unwrap_or_else(|_| Gitignore::empty());
        Self { root, ignore }
    }

    /// Whether a change at `path` can change the index of this repository.
    fn relevant(&self, path: &Path) -> bool {
        let Ok(relative) = path.strip_prefix(&self.root) else {
            return false;
        };
        if relative.components().any(|c| c.as_os_str() == ".git") {
            return false;
        }
        let is_dir = path.is_dir();
        !self
            .ignore
            .matched_path_or_any_parents(path, is_dir)
            .is_ignore()
    }
}

/// Watches `repos`, and every repository added to the state's list later (the repository
/// manager), until the state asks to stop. Returns an error (the supervisor restarts the task
/// after a back-off) when a repository cannot be watched, e.g. because it vanished.
pub async fn run(state: Arc<DashboardState>, repos: Vec<PathBuf>) -> Result<(), String> {
    let mut watched: Vec<Watched> = repos.iter().map(|r| Watched::new(r)).collect();
    // Repositories already in the list (added before a restart of this task) are watched too.
    for repo in state.repos() {
        let candidate = Watched::new(&repo.path);
        if candidate.root.is_dir() && !watched.iter().any(|w| w.root == candidate.root) {
            watched.push(candidate);
        }
    }
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<Vec<PathBuf>>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event
            && !matches!(event.kind, EventKind::Access(_))
        {
            // The receiver is gone only when the task ends.
            let _ = sender.send(event.paths);
        }
    })
    .map_err(|e| format!("cannot start the file watcher: {e}"))?;
    for repo in &watched {
        watcher
            .watch(&repo.root, RecursiveMode::Recursive)
            .map_err(|e| format!("cannot watch {}: {e}", repo.root.display()))?;
    }
    state.log(
        "watcher",
        if watched.is_empty() {
            "no repository to watch yet; one added from the repository manager will be".into()
        } else {
            format!(
                "watching {}",
                watched
                    .iter()
                    .map(|w| w.root.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        },
    );
    let mut stop = Box::pin(state.stopped());
    loop {
        let paths = tokio::select! {
            _ = &mut stop => return Ok(()),
            _ = state.repo_added() => {
                for repo in state.repos() {
                    let candidate = Watched::new(&repo.path);
                    if watched.iter().any(|w| w.root == candidate.root) || !candidate.root.is_dir() {
                        continue;
                    }
                    watcher
                        .watch(&candidate.root, RecursiveMode::Recursive)
                        .map_err(|e| format!("cannot watch {}: {e}", candidate.root.display()))?;
                    state.log("watcher", format!("watching {}", candidate.root.display()));
                    watched.push(candidate);
                }
                continue;
            }
            paths = receiver.recv() => match paths {
                Some(paths) => paths,
                None => return Err("the file watcher stopped delivering events".into()),
            },
        };
        let mut dirty = vec![false; watched.len()];
        let mut mark = |paths: &[PathBuf]| {
            for path in paths {
                for (i, repo) in watched.iter().enumerate() {
                    if repo.relevant(path) {
                        dirty[i] = true;
                    }
                }
            }
        };
        mark(&paths);
        // Drain the burst.
        loop {
            match tokio::time::timeout(DEBOUNCE, receiver.recv()).await {
                Ok(Some(more)) => mark(&more),
                Ok(None) => return Err("the file watcher stopped delivering events".into()),
                Err(_) => break,
            }
        }
        for (i, repo) in watched.iter().enumerate() {
            if !dirty[i] {
                continue;
            }
            if !repo.root.is_dir() {
                return Err(format!(
                    "{} vanished; watching resumes when it is back",
                    repo.root.display()
                ));
            }
            let worker = state.clone();
            let root = repo.root.clone();
            let status = tokio::task::spawn_blocking(move || worker.reindex(&root))
                .await
                .map_err(|e| format!("re-indexing {}: {e}", repo.root.display()))?;
            if let Some(error) = status.last_error {
                state.log("watcher", format!("{}: {error}", repo.root.display()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_internals_and_ignored_build_output_are_not_relevant() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(".gitignore"), "target/\n*.log\n").expect("write");
        std::fs::create_dir_all(dir.path().join("target/debug")).expect("mkdir");
        let watched = Watched::new(dir.path());
        let root = &watched.root;
        assert!(watched.relevant(&root.join("src/main.rs")));
        assert!(!watched.relevant(&root.join(".git/index")));
        assert!(!watched.relevant(&root.join("target/debug/svc")));
        assert!(!watched.relevant(&root.join("build.log")));
        assert!(!watched.relevant(Path::new("/elsewhere/file.rs")));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_repository_added_later_is_watched_too() {
        use crate::dashboard::{DashboardSettings, Role};
        let home = tempfile::tempdir().expect("home");
        let repo = tempfile::tempdir().expect("repo");
        std::fs::write(repo.path().join("a.rs"), "fn a() {}\n").expect("write");
        let state = DashboardState::new(
            DashboardSettings::new(Role::Daemon, home.path().to_path_buf()),
            None,
        );
        let task = tokio::spawn(run(state.clone(), Vec::new()));
        // Added from the repository manager, after the watcher started with nothing to watch.
        let worker = state.clone();
        let root = repo.path().to_path_buf();
        let first = tokio::task::spawn_blocking(move || worker.reindex(&root))
            .await
            .expect("reindex");
        assert_eq!(first.files, 1);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let watching = |state: &DashboardState| {
            state
                .log_tail(50)
                .iter()
                .any(|l| l.source == "watcher" && l.message.starts_with("watching /"))
        };
        while !watching(&state) {
            assert!(std::time::Instant::now() < deadline, "never watched");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        std::fs::write(repo.path().join("b.rs"), "fn b() {}\n").expect("write");
        while state.repos()[0].files != 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the change was not indexed: {:?}",
                state.repos()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        state.request_stop();
        task.await.expect("join").expect("clean stop");
    }
}
