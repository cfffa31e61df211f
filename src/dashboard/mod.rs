//! The browser dashboard, the control API (SPEC §4.3) and the run viewer, as one axum app.
//!
//! Layout: [`control`] (the JSON routes under `/api/control/` and the OpenAPI document),
//! [`guard`] (loopback Host and same-origin checks), [`pages`] (`/` and `/controls`),
//! [`runs`] (finding run directories and paging their trial records without loading them whole),
//! [`viewer`] (the Runs pages of `svc view`), [`html`] (escaping, the page frame, inline SVG
//! charts, a small Markdown-table renderer). Assets (CSS, JS, the OpenAPI document) are embedded
//! with `include_str!`: the pages load nothing from elsewhere.
//!
//! The state is shared with the daemon: when a proxy runs in the same process the optimisation
//! switch and the quality mode act on its [`ProxyState`], and its counters feed the dashboard;
//! without one those routes answer 409 and the pages say that no proxy runs.

pub mod bench;
pub mod control;
pub mod evolution;
pub mod guard;
pub mod html;
pub mod learning;
pub mod pages;
pub mod runs;
pub mod viewer;

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Instant, SystemTime};

use axum::Router;
use axum::routing::get;
use serde::{Deserialize, Serialize};

use crate::context::index::{Index, IndexOptions};
use crate::proxy::ProxyState;

/// Default port of the dashboard and control API (SPEC §8).
pub const DEFAULT_PORT: u16 = 9378;
/// Lines kept by the log viewer.
pub const LOG_LINES: usize = 500;

/// Quality mode of the optimisation (the wire values of `POST /api/control/quality`).
///
/// The mode scales the proxy's optimisation budget: `fast` halves it (smaller, cheaper prompts),
/// `balanced` keeps the configured budget, `max` doubles it (more context kept verbatim).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum Quality {
    Fast,
    #[default]
    Balanced,
    Max,
}

impl Quality {
    pub const ALL: [Quality; 3] = [Quality::Fast, Quality::Balanced, Quality::Max];

    pub fn as_str(self) -> &'static str {
        match self {
            Quality::Fast => "fast",
            Quality::Balanced => "balanced",
            Quality::Max => "max",
        }
    }

    /// The optimisation budget this mode gives a configured budget of `base` tokens.
    pub fn budget(self, base: usize) -> usize {
        match self {
            Quality::Fast => (base / 2).max(1),
            Quality::Balanced => base,
            Quality::Max => base.saturating_mul(2),
        }
    }
}

/// What process serves the app; the pages show the parts that exist in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// `svc daemon`: proxy (unless `--no-proxy`), dashboard, tool server, watcher.
    Daemon,
    /// `svc dashboard`: the dashboard and control API alone.
    Dashboard,
    /// `svc view`: the run viewer (the same app).
    Viewer,
}

/// Resolved settings of the app.
#[derive(Debug, Clone)]
pub struct DashboardSettings {
    pub role: Role,
    /// State directory: witness certificates and `ctx_` commits are read from it.
    pub state_home: PathBuf,
    /// Repositories indexed (and, in the daemon, watched).
    pub repos: Vec<PathBuf>,
    /// Folders searched for run directories (`svc view`), two levels deep.
    pub run_roots: Vec<PathBuf>,
    /// Quality mode at start.
    pub quality: Quality,
    /// Other services of the process, by name, shown on the pages (e.g. `proxy` →
    /// `http://127.0.0.1:9377`).
    pub urls: BTreeMap<String, String>,
}

impl DashboardSettings {
    pub fn new(role: Role, state_home: PathBuf) -> Self {
        Self {
            role,
            state_home,
            repos: Vec::new(),
            run_roots: Vec::new(),
            quality: Quality::default(),
            urls: BTreeMap::new(),
        }
    }
}

/// State of one supervised task, as the daemon reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStatus {
    pub state: TaskState,
    pub restarts: u32,
    pub last_error: Option<String>,
    /// RFC 3339, UTC: when the task entered its state.
    pub since: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Running,
    /// Failed; restarts after a back-off.
    Restarting,
    Stopped,
    /// Failed and not restarted (e.g. its port is taken by another process).
    Failed,
}

/// What the last index build of a repository did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RepoStatus {
    pub path: PathBuf,
    pub files: usize,
    pub fragments: usize,
    pub tokens: usize,
    /// Files re-parsed by the last build (the others were unchanged).
    pub parsed: usize,
    /// RFC 3339, UTC; null before the first build finished.
    pub indexed_at: Option<String>,
    pub duration_ms: Option<f64>,
    pub last_error: Option<String>,
}

impl RepoStatus {
    fn pending(path: PathBuf) -> Self {
        Self {
            path,
            files: 0,
            fragments: 0,
            tokens: 0,
            parsed: 0,
            indexed_at: None,
            duration_ms: None,
            last_error: None,
        }
    }
}

/// One line of the log viewer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogLine {
    /// RFC 3339, UTC.
    pub at: String,
    pub source: String,
    pub message: String,
}

/// Shared state of the app.
#[derive(Debug)]
pub struct DashboardState {
    pub settings: DashboardSettings,
    proxy: Option<Arc<ProxyState>>,
    quality: Mutex<Quality>,
    started: Instant,
    started_at: String,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Mutex<BTreeMap<String, TaskStatus>>,
    repos: Mutex<Vec<RepoStatus>>,
    log: Mutex<VecDeque<LogLine>>,
    viewer: viewer::ViewerCache,
    pub(crate) autotune: learning::AutotuneSlot,
    /// Woken when the repository list grows (the watcher starts watching the new one).
    repo_added: tokio::sync::Notify,
}

/// A lock whose holder panicked still guards consistent data here (every write is one
/// assignment), so poisoning is ignored.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// The current time as RFC 3339, UTC.
pub fn now() -> String {
    crate::clock::rfc3339_seconds(SystemTime::now())
}

impl DashboardState {
    /// The state; `proxy` is the proxy of the same process, when one runs. The proxy's budget
    /// is set from the quality mode at once.
    pub fn new(settings: DashboardSettings, proxy: Option<Arc<ProxyState>>) -> Arc<Self> {
        let (stop, _) = tokio::sync::watch::channel(false);
        if let Some(proxy) = &proxy {
            proxy.set_budget(settings.quality.budget(proxy.settings.budget));
        }
        let mut repos: Vec<RepoStatus> = Vec::new();
        for path in &settings.repos {
            let path = canonical(path);
            if !repos.iter().any(|r| r.path == path) {
                repos.push(RepoStatus::pending(path));
            }
        }
        Arc::new(Self {
            quality: Mutex::new(settings.quality),
            proxy,
            started: Instant::now(),
            started_at: now(),
            stop,
            tasks: Mutex::new(BTreeMap::new()),
            repos: Mutex::new(repos),
            log: Mutex::new(VecDeque::new()),
            viewer: viewer::ViewerCache::default(),
            autotune: learning::AutotuneSlot::default(),
            repo_added: tokio::sync::Notify::new(),
            settings,
        })
    }

    pub fn proxy(&self) -> Option<&Arc<ProxyState>> {
        self.proxy.as_ref()
    }

    pub fn quality(&self) -> Quality {
        *lock(&self.quality)
    }

    /// Switches the quality mode; with a proxy, its budget follows.
    pub fn set_quality(&self, quality: Quality) {
        *lock(&self.quality) = quality;
        if let Some(proxy) = &self.proxy {
            proxy.set_budget(quality.budget(proxy.settings.budget));
        }
        self.log("control", format!("quality set to {}", quality.as_str()));
    }

    pub fn uptime_seconds(&self) -> u64 {
        self.started.elapsed().as_secs()
    }

    pub fn started_at(&self) -> &str {
        &self.started_at
    }

    /// Asks everything serving this state to stop (`POST /api/control/stop`).
    pub fn request_stop(&self) {
        self.stop.send_replace(true);
    }

    /// Resolves when a stop was asked for.
    pub async fn stopped(&self) {
        let mut receiver = self.stop.subscribe();
        // An error means the sender is gone, which cannot happen while `self` lives.
        let _ = receiver.wait_for(|stop| *stop).await;
    }

    pub fn stop_requested(&self) -> bool {
        *self.stop.borrow()
    }

    pub fn set_task(&self, name: &str, status: TaskStatus) {
        lock(&self.tasks).insert(name.to_string(), status);
    }

    pub fn tasks(&self) -> BTreeMap<String, TaskStatus> {
        lock(&self.tasks).clone()
    }

    pub fn repos(&self) -> Vec<RepoStatus> {
        lock(&self.repos).clone()
    }

    /// Adds a line to the log viewer (the oldest goes past [`LOG_LINES`]).
    pub fn log(&self, source: &str, message: impl Into<String>) {
        let mut log = lock(&self.log);
        if log.len() == LOG_LINES {
            log.pop_front();
        }
        log.push_back(LogLine {
            at: now(),
            source: source.to_string(),
            message: message.into(),
        });
    }

    /// The last `limit` log lines, oldest first.
    pub fn log_tail(&self, limit: usize) -> Vec<LogLine> {
        let log = lock(&self.log);
        log.iter()
            .skip(log.len().saturating_sub(limit))
            .cloned()
            .collect()
    }

    /// Re-indexes `path` (incrementally: unchanged files come from the persisted index) and
    /// records the result; a path not yet listed joins the repository list. Blocking: call it
    /// from a blocking thread.
    pub fn reindex(&self, path: &Path) -> RepoStatus {
        // One entry per repository however it is named (`.`, a trailing slash, a relative
        // path from the API): the list is keyed by the absolute path, as the watcher is.
        let canonical = canonical(path);
        let path = canonical.as_path();
        let started = Instant::now();
        let options = IndexOptions {
            state_home: Some(self.settings.state_home.clone()),
            ..IndexOptions::default()
        };
        let mut status = RepoStatus::pending(path.to_path_buf());
        match Index::build(path, &options) {
            Ok(index) => {
                let stats = &index.stats;
                status.files = stats.files;
                status.fragments = stats.fragments;
                status.tokens = stats.tokens;
                status.parsed = stats.parsed;
                status.indexed_at = Some(now());
            }
            Err(error) => status.last_error = Some(error.to_string()),
        }
        status.duration_ms = Some(started.elapsed().as_secs_f64() * 1000.0);
        match &status.last_error {
            None => self.log(
                "index",
                format!(
                    "{}: {} files, {} tokens, {} re-parsed in {:.0} ms",
                    path.display(),
                    status.files,
                    status.tokens,
                    status.parsed,
                    status.duration_ms.unwrap_or_default()
                ),
            ),
            Some(error) => self.log("index", format!("{}: {error}", path.display())),
        }
        let added = {
            let mut repos = lock(&self.repos);
            match repos.iter_mut().find(|r| r.path == path) {
                Some(slot) => {
                    if status.last_error.is_some() {
                        // Keep the last good figures next to the error.
                        slot.last_error = status.last_error.clone();
                        slot.duration_ms = status.duration_ms;
                    } else {
                        *slot = status.clone();
                    }
                    false
                }
                None => {
                    repos.push(status.clone());
                    true
                }
            }
        };
        if added {
            // A permit is kept if the watcher is busy, so the addition is never missed.
            self.repo_added.notify_one();
        }
        status
    }

    /// Resolves when a repository joined the list (see [`Self::reindex`]).
    pub async fn repo_added(&self) {
        self.repo_added.notified().await;
    }
}

/// The app: pages, control API, run viewer and assets on one router.
pub fn app(state: Arc<DashboardState>) -> Router {
    Router::new()
        .route("/", get(pages::dashboard))
        .route("/controls", get(pages::controls))
        .route("/assets/style.css", get(pages::style))
        .route("/assets/app.js", get(pages::script))
        .merge(control::routes())
        .merge(viewer::routes())
        .fallback(control::not_found)
        .method_not_allowed_fallback(control::method_not_allowed)
        .layer(axum::middleware::from_fn(guard::guard))
        .with_state(state)
}

/// The absolute form of a repository path, which keys the repository list (the watcher uses
/// the same): `.`, a trailing slash or a relative path name one entry.
fn canonical(path: &Path) -> PathBuf {
    path.canonicalize().unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by probing: `svc daemon --repo .` listed the repository twice (as `.` and by its
    /// absolute path once the watcher re-indexed it), one row out of date.
    #[test]
    fn a_repository_named_two_ways_is_one_entry() {
        let dir = tempfile::tempdir().expect("tempdir");
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join("sub")).expect("mkdir");
        std::fs::write(repo.join("main.py"), "def f():\n    return 1\n").expect("write");
        let mut settings = DashboardSettings::new(Role::Daemon, dir.path().join("home"));
        settings.repos = vec![repo.join("."), repo.join("sub/..")];
        let state = DashboardState::new(settings, None);
        assert_eq!(state.repos().len(), 1);
        state.reindex(&repo.join("sub").join(".."));
        state.reindex(&repo);
        let repos = state.repos();
        assert_eq!(repos.len(), 1, "{repos:?}");
        assert_eq!(repos[0].files, 1);
    }
}
