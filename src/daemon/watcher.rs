//! The file watcher: a change under a repository re-indexes that repository incrementally
//! (files whose content hash is unchanged come from the persisted index; only changed files are
//! parsed again).
//!
//! Events are debounced ([`DEBOUNCE`]): an editor's save or a `git checkout` is a burst of
//! events and one rebuild. A burst that never pauses (a log appended to every 50 ms) is cut at
//! [`MAX_BURST`], so the index still follows the tree. Changes under `.git/` and paths the
//! repository's root `.gitignore` ignores (build output) trigger nothing, so a build running in
//! the repository does not keep the daemon busy; a change of that `.gitignore` takes effect at
//! once. A repository that failed to index or vanished is indexed again when the watcher
//! (re)starts.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use notify::{EventKind, RecursiveMode, Watcher};

use crate::dashboard::DashboardState;

/// Quiet time after the last event of a burst before the rebuild starts.
pub const DEBOUNCE: Duration = Duration::from_millis(100);

/// The longest a burst is drained before the rebuild starts anyway.
pub const MAX_BURST: Duration = Duration::from_millis(400);

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

    /// Whether `path` is this repository's root `.gitignore`.
    fn is_ignore_file(&self, path: &Path) -> bool {
        path.strip_prefix(&self.root)
            .is_ok_and(|relative| relative == Path::new(".gitignore"))
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
    // One whose last build failed (it vanished, or could not be read) may be back, with other
    // files: nothing would index it again until its next change.
    for repo in state.repos() {
        if repo.last_error.is_some() && repo.path.is_dir() {
            let worker = state.clone();
            let root = repo.path.clone();
            let _ = tokio::task::spawn_blocking(move || worker.reindex(&root)).await;
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
        // Drain the burst: until a quiet DEBOUNCE, or MAX_BURST after its first event.
        let mut burst = paths;
        let deadline = tokio::time::Instant::now() + MAX_BURST;
        loop {
            let quiet =
                DEBOUNCE.min(deadline.saturating_duration_since(tokio::time::Instant::now()));
            if quiet.is_zero() {
                break;
            }
            match tokio::time::timeout(quiet, receiver.recv()).await {
                Ok(Some(more)) => burst.extend(more),
                Ok(None) => return Err("the file watcher stopped delivering events".into()),
                Err(_) => break,
            }
        }
        let mut dirty = vec![false; watched.len()];
        for (i, repo) in watched.iter_mut().enumerate() {
            if burst.iter().any(|path| repo.is_ignore_file(path)) {
                // The rules changed: read them again before judging the burst's paths.
                *repo = Watched::new(&repo.root);
                dirty[i] = true;
            }
            if burst.iter().any(|path| repo.relevant(path)) {
                dirty[i] = true;
            }
        }
        for (i, repo) in watched.iter().enumerate() {
            if !dirty[i] {
                continue;
            }
            if !repo.root.is_dir() {
                // Recorded as the repository's error (the status shows it), and the restarted
                // task indexes it again when it is back.
                let worker = state.clone();
                let root = repo.root.clone();
                let _ = tokio::task::spawn_blocking(move || worker.reindex(&root)).await;
                return Err(format!(
                    "{} vanished; watching resumes when it is back",
                    repo.root.display()
                ));
            }
            let worker = state.clone();
            let root = repo.root.clone();
            let build = tokio::task::spawn_blocking(move || worker.reindex(&root));
            // A stop does not wait for the build (its writes are atomic).
            let status = tokio::select! {
                _ = &mut stop => return Ok(()),
                status = build => status,
            }
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

    /// A watcher over `repo` (indexed once) and the state it reports to.
    async fn watching(
        home: &Path,
        repo: &Path,
    ) -> (
        Arc<DashboardState>,
        tokio::task::JoinHandle<Result<(), String>>,
    ) {
        use crate::dashboard::{DashboardSettings, Role};
        let state = DashboardState::new(
            DashboardSettings::new(Role::Daemon, home.to_path_buf()),
            None,
        );
        let worker = state.clone();
        let root = repo.to_path_buf();
        tokio::task::spawn_blocking(move || worker.reindex(&root))
            .await
            .expect("reindex");
        let task = tokio::spawn(run(state.clone(), vec![repo.to_path_buf()]));
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while !state
            .log_tail(50)
            .iter()
            .any(|l| l.source == "watcher" && l.message.starts_with("watching /"))
        {
            assert!(std::time::Instant::now() < deadline, "never watched");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        (state, task)
    }

    fn rebuilds(state: &DashboardState) -> usize {
        state
            .log_tail(500)
            .iter()
            .filter(|l| l.source == "index")
            .count()
    }

    /// Regression (found by probing): the debounce restarted on every event, so a log appended
    /// to every 50 ms kept the index stale for as long as it was written.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_burst_that_never_pauses_still_reaches_the_index() {
        let home = tempfile::tempdir().expect("home");
        let repo = tempfile::tempdir().expect("repo");
        std::fs::write(repo.path().join("a.rs"), "fn a() {}\n").expect("write");
        let (state, task) = watching(home.path(), repo.path()).await;
        let writer_repo = repo.path().to_path_buf();
        let writing = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let keep_writing = writing.clone();
        let writer = tokio::spawn(async move {
            let mut n = 0;
            while keep_writing.load(std::sync::atomic::Ordering::Relaxed) {
                std::fs::write(writer_repo.join("server.txt"), format!("tick {n}\n"))
                    .expect("write");
                n += 1;
                tokio::time::sleep(Duration::from_millis(30)).await;
            }
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
        std::fs::write(repo.path().join("b.rs"), "fn b() {}\n").expect("write");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while state.repos()[0].files != 3 {
            assert!(
                std::time::Instant::now() < deadline,
                "not indexed while the writes go on: {:?}",
                state.repos()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(
            writing.load(std::sync::atomic::Ordering::Relaxed),
            "still writing"
        );
        writing.store(false, std::sync::atomic::Ordering::Relaxed);
        writer.await.expect("writer");
        state.request_stop();
        task.await.expect("join").expect("clean stop");
    }

    /// Regression (found by probing): the ignore rules were read once, so writes into a folder
    /// ignored after the daemon started rebuilt the index on every write.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_gitignore_changed_while_watching_takes_effect() {
        let home = tempfile::tempdir().expect("home");
        let repo = tempfile::tempdir().expect("repo");
        std::fs::write(repo.path().join("a.rs"), "fn a() {}\n").expect("write");
        let (state, task) = watching(home.path(), repo.path()).await;
        std::fs::write(repo.path().join(".gitignore"), "target/\n").expect("write");
        std::fs::create_dir(repo.path().join("target")).expect("mkdir");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while rebuilds(&state) < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "the .gitignore change was not indexed"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(600)).await;
        let before = rebuilds(&state);
        for i in 0..4 {
            std::fs::write(repo.path().join("target/out.o"), format!("{i}")).expect("write");
            tokio::time::sleep(Duration::from_millis(150)).await;
        }
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(rebuilds(&state), before, "{:?}", state.log_tail(50));
        state.request_stop();
        task.await.expect("join").expect("clean stop");
    }

    /// Regression (found by probing): a repository deleted and made again with other files kept
    /// the deleted one's index until its next change.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_repository_that_vanishes_and_returns_is_indexed_again() {
        let home = tempfile::tempdir().expect("home");
        let parent = tempfile::tempdir().expect("parent");
        let repo = parent.path().join("repo");
        std::fs::create_dir(&repo).expect("mkdir");
        std::fs::write(repo.join("old.rs"), "fn old() {}\n").expect("write");
        let (state, task) = watching(home.path(), &repo).await;
        std::fs::remove_dir_all(&repo).expect("remove");
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while state.repos()[0].last_error.is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "the loss was not reported"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let result = task.await.expect("join");
        assert!(result.is_err_and(|e| e.contains("vanished")));
        std::fs::create_dir(&repo).expect("mkdir");
        std::fs::write(repo.join("new.rs"), "fn new() {}\n").expect("write");
        std::fs::write(repo.join("n3.rs"), "fn n3() {}\n").expect("write");
        // The supervisor starts the task again.
        let task = tokio::spawn(run(state.clone(), vec![repo.clone()]));
        while state.repos()[0].files != 2 || state.repos()[0].last_error.is_some() {
            assert!(std::time::Instant::now() < deadline, "{:?}", state.repos());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        state.request_stop();
        task.await.expect("join").expect("clean stop");
    }
}
