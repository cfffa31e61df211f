//! The daemon (SPEC §1.5): one process supervising the proxy, the dashboard and control API,
//! the tool server, the file watcher and the events task (notifications, chat bot, dream cycle).
//!
//! Each part is a task under [`supervise`]: a task that fails is restarted after a back-off
//! (1 s, doubling to 30 s), and its state shows on the dashboard and in
//! `GET /api/control/status`. The ports are bound once, before anything starts, so a port in
//! use is reported up front with the process holding it, and a restarted server reuses its
//! socket. A pid/lock file keeps a second daemon on the same state directory from starting.
//! SIGINT, SIGTERM and `POST /api/control/stop` shut everything down cleanly.

pub mod bench;
pub mod learning;
pub mod pidfile;
pub mod ports;
pub mod watcher;

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use crate::dashboard::{self, DashboardSettings, DashboardState, Role, TaskState, TaskStatus};
use crate::own_user::OwnUserListener;
use crate::proxy::server::Logger;
use crate::proxy::{ProxySettings, ProxyState};

/// First back-off after a task fails; it doubles up to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How long tasks get to finish after a stop before the daemon exits anyway.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(
        "another svc daemon (pid {pid}) holds {path}; stop it (`svc daemon` prints its dashboard URL; POST /api/control/stop) or use another --state-dir"
    )]
    AlreadyRunning { pid: u32, path: PathBuf },
    #[error("the {what} port 127.0.0.1:{port} is in use{}; stop that process or pick another port", owner.as_ref().map(|o| format!(" by {o}")).unwrap_or_default())]
    PortInUse {
        what: &'static str,
        port: u16,
        owner: Option<ports::Owner>,
    },
    #[error(
        "{first} and {second} are both port {port}; give each its own port (0 picks a free one)"
    )]
    SamePort {
        first: &'static str,
        second: &'static str,
        port: u16,
    },
    #[error("{0}")]
    Prepare(String),
    #[error("cannot listen on 127.0.0.1:{port} for the {what}: {source}")]
    Bind {
        what: &'static str,
        port: u16,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("starting the proxy: {0}")]
    Proxy(String),
}

/// Resolved settings of the daemon.
#[derive(Debug, Clone)]
pub struct DaemonSettings {
    pub state_home: PathBuf,
    /// The proxy's settings; `None` with `--no-proxy`.
    pub proxy: Option<ProxySettings>,
    pub proxy_port: u16,
    pub dashboard_port: u16,
    /// Port of the MCP tool server (streamable HTTP at `/mcp`); `None` with `--no-mcp`.
    pub mcp_port: Option<u16>,
    pub quality: dashboard::Quality,
    /// Repositories indexed at start and watched.
    pub repos: Vec<PathBuf>,
    /// Folders the Runs pages list.
    pub run_roots: Vec<PathBuf>,
}

/// What the daemon bound, for the command to print.
#[derive(Debug, Clone)]
pub struct Started {
    pub dashboard_url: String,
    pub proxy_url: Option<String>,
    /// The MCP tool server's endpoint (`http://127.0.0.1:PORT/mcp`), when it runs.
    pub mcp_url: Option<String>,
    pub pid_file: PathBuf,
    /// How a stale pid file was replaced (naming the pid it held), when one was.
    pub replaced_stale: Option<String>,
}

/// Runs `make` until the state stops, restarting it after a back-off when it fails (or ends
/// on its own). Its state is published under `name`.
pub async fn supervise<F, Fut>(state: Arc<DashboardState>, name: &'static str, mut make: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let mut backoff = FIRST_BACKOFF;
    let mut restarts = 0;
    let status = |state: TaskState, restarts: u32, last_error: Option<String>| TaskStatus {
        state,
        restarts,
        last_error,
        since: dashboard::now(),
    };
    loop {
        state.set_task(name, status(TaskState::Running, restarts, None));
        let started = tokio::time::Instant::now();
        let result = make().await;
        if state.stop_requested() {
            state.set_task(name, status(TaskState::Stopped, restarts, None));
            return;
        }
        let error = match result {
            Ok(()) => "ended unexpectedly".to_string(),
            Err(error) => error,
        };
        // A task that ran a good while before failing starts over with the short back-off.
        if started.elapsed() > MAX_BACKOFF * 2 {
            backoff = FIRST_BACKOFF;
        }
        state.log(
            name,
            format!("failed: {error}; restarting in {} s", backoff.as_secs()),
        );
        state.set_task(
            name,
            status(TaskState::Restarting, restarts, Some(error.clone())),
        );
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = state.stopped() => {
                state.set_task(name, status(TaskState::Stopped, restarts, Some(error)));
                return;
            }
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
        restarts += 1;
    }
}

/// A clone of `listener` that serves this user only ([`OwnUserListener`]).
fn own_socket(listener: &std::net::TcpListener) -> Result<OwnUserListener, String> {
    listener
        .try_clone()
        .and_then(tokio::net::TcpListener::from_std)
        .map(OwnUserListener::new)
        .map_err(|e| format!("reusing the listening socket: {e}"))
}

/// Serves `router` on a clone of `listener` until the state stops.
async fn serve(
    state: Arc<DashboardState>,
    listener: &std::net::TcpListener,
    router: axum::Router,
) -> Result<(), String> {
    let socket = own_socket(listener)?;
    axum::serve(socket, router)
        .with_graceful_shutdown(async move { state.stopped().await })
        .await
        .map_err(|e| e.to_string())
}

/// Serves the proxy like [`serve`], with each connection's addresses, which the proxy's
/// `/proof` sidecar needs to admit only local callers.
async fn serve_proxy(
    state: Arc<DashboardState>,
    listener: &std::net::TcpListener,
    proxy: Arc<crate::proxy::ProxyState>,
) -> Result<(), String> {
    let socket = own_socket(listener)?;
    let stopping = proxy.clone();
    let served = axum::serve(socket, crate::proxy::make_service(proxy.clone()))
        .with_graceful_shutdown(async move {
            state.stopped().await;
            stopping.set_stopping();
        })
        .await
        .map_err(|e| e.to_string());
    // The RAVS log is written in the background: its last lines before the daemon exits.
    proxy.routing.flush();
    served
}

/// Serves the MCP tool server (streamable HTTP) on a clone of `listener` until the state stops.
async fn serve_mcp(
    state: Arc<DashboardState>,
    listener: &std::net::TcpListener,
    home: PathBuf,
) -> Result<(), String> {
    let socket = own_socket(listener)?;
    crate::mcp::serve_http(socket, home, async move { state.stopped().await })
        .await
        .map_err(|e| e.to_string())
}

/// Waits for SIGINT or SIGTERM.
async fn signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// Starts the daemon: takes the lock, binds the ports, starts every task. `on_started` is
/// called once everything listens. Returns when the daemon has stopped.
pub async fn run(
    settings: DaemonSettings,
    on_started: impl FnOnce(&Started, &Arc<DashboardState>),
) -> Result<(), DaemonError> {
    run_prepared(settings, || Ok(()), on_started).await
}

/// The flags' names of the ports the daemon binds, with the port each asks for.
fn asked_ports(settings: &DaemonSettings) -> Vec<(&'static str, u16)> {
    let mut ports = vec![("--dashboard-port", settings.dashboard_port)];
    if settings.proxy.is_some() {
        ports.push(("--port", settings.proxy_port));
    }
    if let Some(port) = settings.mcp_port {
        ports.push(("--mcp-port", port));
    }
    ports
}

/// As [`run`], with `prepare` run once the lock is held and the ports are bound, before any task
/// starts (`svc go` indexes there: a daemon already running or a port in use is an error before
/// a long index build, not after it).
pub async fn run_prepared(
    settings: DaemonSettings,
    prepare: impl FnOnce() -> Result<(), String>,
    on_started: impl FnOnce(&Started, &Arc<DashboardState>),
) -> Result<(), DaemonError> {
    // One port for two roles failed on the second bind, blaming "svc (pid <this one>)".
    let ports = asked_ports(&settings);
    for (i, &(first, port)) in ports.iter().enumerate() {
        if let Some(&(second, _)) = ports[i + 1..].iter().find(|&&(_, p)| p == port && p != 0) {
            return Err(DaemonError::SamePort {
                first,
                second,
                port,
            });
        }
    }
    let (lock, previous) = pidfile::PidLock::acquire(&settings.state_home)?;
    let dashboard_listener = ports::bind("dashboard", settings.dashboard_port)?;
    let dashboard_url = format!(
        "http://{}",
        dashboard_listener
            .local_addr()
            .map_err(|source| DaemonError::Bind {
                what: "dashboard",
                port: settings.dashboard_port,
                source,
            })?
    );
    let proxy_listener = match &settings.proxy {
        Some(_) => Some(ports::bind("proxy", settings.proxy_port)?),
        None => None,
    };
    let proxy_url = proxy_listener
        .as_ref()
        .and_then(|l| l.local_addr().ok())
        .map(|a| format!("http://{a}"));
    let mcp_listener = match settings.mcp_port {
        Some(port) => Some(ports::bind("mcp", port)?),
        None => None,
    };
    let mcp_url = mcp_listener
        .as_ref()
        .and_then(|l| l.local_addr().ok())
        .map(|a| format!("http://{a}/mcp"));
    prepare().map_err(DaemonError::Prepare)?;

    // The proxy's log lines go to the dashboard's log viewer; the dashboard state is made after
    // the proxy, so the logger finds it through a cell.
    let sink: Arc<OnceLock<Weak<DashboardState>>> = Arc::new(OnceLock::new());
    let proxy = match &settings.proxy {
        Some(proxy_settings) => {
            let logger_sink = sink.clone();
            let logger = Logger(Box::new(move |log| {
                if let Some(state) = logger_sink.get().and_then(Weak::upgrade) {
                    state.log("proxy", log.to_string());
                }
            }));
            Some(
                ProxyState::new(proxy_settings.clone(), Some(logger))
                    .map_err(|e| DaemonError::Proxy(e.to_string()))?,
            )
        }
        None => None,
    };
    let mut dashboard_settings = DashboardSettings::new(Role::Daemon, settings.state_home.clone());
    dashboard_settings.repos = settings.repos.clone();
    dashboard_settings.run_roots = settings.run_roots.clone();
    dashboard_settings.quality = settings.quality;
    dashboard_settings
        .urls
        .insert("dashboard".into(), dashboard_url.clone());
    if let Some(url) = &proxy_url {
        dashboard_settings.urls.insert("proxy".into(), url.clone());
    }
    let state = DashboardState::new(dashboard_settings, proxy.clone());
    let _ = sink.set(Arc::downgrade(&state));
    if let Some(replaced) = previous.describe() {
        state.log("daemon", replaced);
    }

    let mut tasks = tokio::task::JoinSet::new();
    {
        let state = state.clone();
        tasks.spawn(async move {
            let router = dashboard::app(state.clone());
            supervise(state.clone(), "dashboard", || {
                serve(state.clone(), &dashboard_listener, router.clone())
            })
            .await;
        });
    }
    if let (Some(proxy), Some(listener)) = (proxy, proxy_listener) {
        let state = state.clone();
        tasks.spawn(async move {
            supervise(state.clone(), "proxy", || {
                serve_proxy(state.clone(), &listener, proxy.clone())
            })
            .await;
        });
    }
    if let Some(listener) = mcp_listener {
        let state = state.clone();
        let home = settings.state_home.clone();
        tasks.spawn(async move {
            supervise(state.clone(), "mcp", || {
                serve_mcp(state.clone(), &listener, home.clone())
            })
            .await;
        });
    }
    if !settings.repos.is_empty() {
        // The first index build runs in the background: the servers answer at once.
        let initial = state.clone();
        let repos = settings.repos.clone();
        tasks.spawn(async move {
            // A stop does not wait for a build of a large tree (the build's writes are atomic).
            let mut stop = Box::pin(initial.stopped());
            for repo in repos {
                let worker = initial.clone();
                tokio::select! {
                    _ = &mut stop => return,
                    _ = tokio::task::spawn_blocking(move || worker.reindex(&repo)) => {}
                }
            }
        });
    }
    {
        // Runs with no repository too: one added from the repository manager is watched.
        let state = state.clone();
        let repos = settings.repos.clone();
        tasks.spawn(async move {
            supervise(state.clone(), "watcher", || {
                watcher::run(state.clone(), repos.clone())
            })
            .await;
        });
    }

    {
        let state = state.clone();
        let home = settings.state_home.clone();
        tasks.spawn(async move {
            supervise(state.clone(), "learning", || {
                learning::run(state.clone(), home.clone())
            })
            .await;
        });
    }
    {
        // Event delivery, the chat bot and the periodic dream cycle (crate::events::service).
        let state = state.clone();
        let home = settings.state_home.clone();
        tasks.spawn(async move {
            supervise(state.clone(), "events", || {
                let weak = Arc::downgrade(&state);
                let log: crate::events::notify::Log = Arc::new(move |line: String| {
                    if let Some(state) = weak.upgrade() {
                        state.log("events", line);
                    }
                });
                let stopping = state.clone();
                crate::events::service::run_from_env(home.clone(), log, async move {
                    stopping.stopped().await
                })
            })
            .await;
        });
    }

    state.log("daemon", format!("started, pid {}", std::process::id()));
    on_started(
        &Started {
            dashboard_url,
            proxy_url,
            mcp_url,
            pid_file: lock.path().to_path_buf(),
            replaced_stale: previous.describe(),
        },
        &state,
    );

    tokio::select! {
        _ = signal() => state.log("daemon", "signal received, stopping"),
        _ = state.stopped() => {}
    }
    state.request_stop();
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tasks.abort_all();
    }
    drop(lock);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    fn settings(home: &std::path::Path) -> DaemonSettings {
        DaemonSettings {
            state_home: home.to_path_buf(),
            proxy: None,
            proxy_port: 0,
            dashboard_port: 0,
            mcp_port: None,
            quality: dashboard::Quality::default(),
            repos: Vec::new(),
            run_roots: Vec::new(),
        }
    }

    /// Regressions (found by probing): one port given for two roles blamed this very daemon
    /// ("in use by svc (pid <its own>)"); `svc go` indexed a large tree before finding that a
    /// daemon already held the lock.
    #[tokio::test]
    async fn a_shared_port_and_a_held_lock_are_refused_before_prepare_runs() {
        let home = tempfile::tempdir().expect("home");
        let mut same = settings(home.path());
        same.dashboard_port = 21_011;
        same.mcp_port = Some(21_011);
        let prepared = std::sync::atomic::AtomicBool::new(false);
        let prepare = || {
            prepared.store(true, Ordering::SeqCst);
            Ok(())
        };
        match run_prepared(same, prepare, |_, _| {}).await {
            Err(error @ DaemonError::SamePort { .. }) => assert_eq!(
                error.to_string(),
                "--dashboard-port and --mcp-port are both port 21011; give each its own port (0 picks a free one)"
            ),
            other => panic!("expected SamePort, got {other:?}"),
        }
        let _held = pidfile::PidLock::acquire(home.path()).expect("lock");
        let prepare = || {
            prepared.store(true, Ordering::SeqCst);
            Ok(())
        };
        let result = run_prepared(settings(home.path()), prepare, |_, _| {}).await;
        assert!(
            matches!(result, Err(DaemonError::AlreadyRunning { .. })),
            "{result:?}"
        );
        assert!(
            !prepared.load(Ordering::SeqCst),
            "prepare ran before the checks"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_task_is_restarted_with_backoff_and_stops_on_request() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = DashboardState::new(
            DashboardSettings::new(Role::Daemon, dir.path().to_path_buf()),
            None,
        );
        let runs = Arc::new(AtomicU32::new(0));
        let counter = runs.clone();
        let task = tokio::spawn(supervise(state.clone(), "flaky", move || {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                Err::<(), String>("boom".into())
            }
        }));
        // Back-offs of 1, 2 and 4 s: three restarts within 7.5 s.
        tokio::time::sleep(Duration::from_millis(7_500)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 4);
        let status = state.tasks()["flaky"].clone();
        assert_eq!(status.state, TaskState::Restarting);
        assert_eq!(status.restarts, 3);
        assert_eq!(status.last_error.as_deref(), Some("boom"));
        state.request_stop();
        task.await.expect("supervisor ends");
        assert_eq!(state.tasks()["flaky"].state, TaskState::Stopped);
    }
}
