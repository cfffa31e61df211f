//! `svc daemon`, `svc dashboard`, `svc view` and `svc go`: the long-running processes.
//!
//! Exit codes: 0 stopped cleanly (signal or `POST /api/control/stop`); 2 could not start (a port
//! in use, another daemon on the same state directory, bad flags).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use svc::context::index::{Index, IndexOptions, Language};
use svc::daemon::{self, DaemonSettings};
use svc::dashboard::{self, DashboardSettings, DashboardState, Quality, Role};
use svc::witness::Mode;

use super::proxy::{self, ProxyArgs};

#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// Do not run the proxy (dashboard, control API and watcher only).
    #[arg(long)]
    no_proxy: bool,
    /// Quality mode at start: fast halves the proxy's optimisation budget, balanced keeps
    /// it, max doubles it (switchable at run time on /controls).
    #[arg(long, value_enum, default_value_t)]
    quality: Quality,
    /// Port of the dashboard and control API on 127.0.0.1.
    #[arg(long, default_value_t = dashboard::DEFAULT_PORT)]
    dashboard_port: u16,
    /// Port of the MCP tool server (streamable HTTP at /mcp) on 127.0.0.1.
    #[arg(long, default_value_t = svc::mcp::DEFAULT_HTTP_PORT)]
    mcp_port: u16,
    /// Do not run the MCP tool server.
    #[arg(long)]
    no_mcp: bool,
    /// A repository to index at start and re-index when its files change (repeatable).
    #[arg(long = "repo", value_name = "DIR")]
    repos: Vec<PathBuf>,
    /// Folders the Runs pages list [default: runs and reports/out].
    #[arg(long = "runs", value_name = "DIR")]
    run_roots: Vec<PathBuf>,
    /// The proxy's options (as for `svc proxy`; --port is the proxy's port).
    #[command(flatten)]
    proxy: ProxyArgs,
}

#[derive(Debug, Args)]
pub struct DashboardArgs {
    /// Port on 127.0.0.1.
    #[arg(long, default_value_t = dashboard::DEFAULT_PORT)]
    port: u16,
    /// Folders the Runs pages list [default: runs and reports/out].
    #[arg(long = "runs", value_name = "DIR")]
    run_roots: Vec<PathBuf>,
    /// State directory with certificates and commits [default: $SVC_HOME or ~/.svc].
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct ViewArgs {
    /// Run directories or folders holding them [default: runs and reports/out].
    runs: Vec<PathBuf>,
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = dashboard::DEFAULT_PORT)]
    port: u16,
    /// State directory holding the runs' `ctx_` commits [default: $SVC_HOME or ~/.svc].
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Open the viewer in a browser when one is available.
    #[arg(long)]
    open: bool,
}

#[derive(Debug, Args)]
pub struct GoArgs {
    /// Do not open the dashboard in a browser.
    #[arg(long)]
    no_browser: bool,
    #[command(flatten)]
    daemon: DaemonArgs,
}

/// The folders the Runs pages list: those given (each must be a directory, as `svc view`
/// demands; the dashboard and daemon had started on a typo and listed nothing), else `runs`
/// and `reports/out`.
fn run_roots(given: Vec<PathBuf>) -> anyhow::Result<Vec<PathBuf>> {
    for path in &given {
        if !path.is_dir() {
            anyhow::bail!(
                "{} is not a directory; pass run directories (runs/<id>) or folders holding them",
                path.display()
            );
        }
    }
    Ok(if given.is_empty() {
        vec![PathBuf::from("runs"), PathBuf::from("reports/out")]
    } else {
        given
    })
}

fn state_home(flag: &Option<PathBuf>) -> anyhow::Result<PathBuf> {
    match flag {
        Some(dir) => Ok(svc::state::checked_home(dir.clone()).context("--state-dir")?),
        None => Ok(svc::state::home()?),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// Serves the app alone (`svc dashboard`, `svc view`) until Ctrl-C or `POST /api/control/stop`.
fn serve_alone(
    settings: DashboardSettings,
    port: u16,
    open: bool,
    announce: impl FnOnce(&str),
) -> anyhow::Result<ExitCode> {
    let runtime = runtime()?;
    let result = runtime.block_on(async move {
        let listener = daemon::ports::bind("dashboard", port)?;
        let url = format!("http://{}", listener.local_addr()?);
        let mut settings = settings;
        settings.urls.insert("dashboard".into(), url.clone());
        let state = DashboardState::new(settings, None);
        announce(&url);
        if open {
            open_browser(&url);
        }
        let socket =
            svc::own_user::OwnUserListener::new(tokio::net::TcpListener::from_std(listener)?);
        let stopping = state.clone();
        axum::serve(socket, dashboard::app(state))
            .with_graceful_shutdown(async move {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = stopping.stopped() => {}
                }
            })
            .await
            .context("serving the dashboard")?;
        anyhow::Ok(ExitCode::SUCCESS)
    });
    // As for the daemon: an index build the API started does not hold the exit.
    runtime.shutdown_background();
    result
}

pub fn run_dashboard(args: DashboardArgs) -> anyhow::Result<ExitCode> {
    let mut settings = DashboardSettings::new(Role::Dashboard, state_home(&args.state_dir)?);
    settings.run_roots = run_roots(args.run_roots)?;
    serve_alone(settings, args.port, false, |url| {
        eprintln!(
            "svc dashboard: {url}/ (controls {url}/controls, runs {url}/runs, API {url}/api/openapi.json); no proxy in this process: `svc daemon` runs both"
        )
    })
}

pub fn run_view(args: ViewArgs) -> anyhow::Result<ExitCode> {
    let roots = run_roots(args.runs)?;
    let mut settings = DashboardSettings::new(Role::Viewer, state_home(&args.state_dir)?);
    settings.run_roots = roots;
    let roots = settings.run_roots.clone();
    serve_alone(settings, args.port, args.open, |url| {
        let found = dashboard::runs::discover(&roots).len();
        eprintln!(
            "svc view: {url}/runs ({found} runs and reports under {}); Ctrl-C stops",
            roots
                .iter()
                .map(|r| r.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )
    })
}

fn daemon_settings(args: &DaemonArgs) -> anyhow::Result<DaemonSettings> {
    let state_home = state_home(&args.proxy.state_dir)?;
    let proxy = if args.no_proxy {
        // The witness runs in the proxy: asked for without one, it was dropped in silence.
        if let Some(mode) = args.proxy.witness {
            anyhow::bail!(
                "--witness {} needs the proxy, which --no-proxy leaves out; drop one of them",
                mode.as_str()
            );
        }
        None
    } else {
        Some(proxy::settings(&args.proxy)?)
    };
    let mut repos: Vec<PathBuf> = Vec::new();
    for repo in &args.repos {
        if !repo.is_dir() {
            anyhow::bail!("--repo {} is not a directory", repo.display());
        }
        // Absolute, so `--repo .` and the same tree named otherwise are one entry.
        let repo = repo.canonicalize().unwrap_or_else(|_| repo.clone());
        if !repos.contains(&repo) {
            repos.push(repo);
        }
    }
    Ok(DaemonSettings {
        state_home,
        proxy,
        proxy_port: args.proxy.port,
        dashboard_port: args.dashboard_port,
        mcp_port: (!args.no_mcp).then_some(args.mcp_port),
        quality: args.quality,
        repos,
        run_roots: run_roots(args.run_roots.clone())?,
    })
}

fn run_daemon_with(
    settings: DaemonSettings,
    on_started: impl FnOnce(&daemon::Started, &Arc<DashboardState>),
) -> anyhow::Result<ExitCode> {
    run_daemon_prepared(settings, || Ok(()), on_started)
}

fn run_daemon_prepared(
    settings: DaemonSettings,
    prepare: impl FnOnce() -> Result<(), String>,
    on_started: impl FnOnce(&daemon::Started, &Arc<DashboardState>),
) -> anyhow::Result<ExitCode> {
    let runtime = runtime()?;
    let result = runtime.block_on(daemon::run_prepared(settings, prepare, on_started));
    // Dropping the runtime waits for blocking work still running, such as an index build of a
    // large tree (13-18 s after a stop). The daemon has given its tasks their grace period and
    // released its lock; index writes are atomic, so that work can end with the process.
    runtime.shutdown_background();
    result?;
    eprintln!("svc daemon: stopped");
    Ok(ExitCode::SUCCESS)
}

fn print_started(started: &daemon::Started) {
    eprintln!(
        "svc daemon: pid {} ({})",
        std::process::id(),
        started.pid_file.display()
    );
    if let Some(replaced) = &started.replaced_stale {
        eprintln!("svc daemon: {replaced}");
    }
    eprintln!("  dashboard    {}/", started.dashboard_url);
    eprintln!("  controls     {}/controls", started.dashboard_url);
    eprintln!("  runs         {}/runs", started.dashboard_url);
    eprintln!(
        "  control API  {}/api/control/status",
        started.dashboard_url
    );
    match &started.proxy_url {
        Some(url) => eprintln!("  proxy        {url}"),
        None => eprintln!("  proxy        off (--no-proxy)"),
    }
    match &started.mcp_url {
        Some(url) => eprintln!("  MCP server   {url}"),
        None => eprintln!("  MCP server   off (--no-mcp)"),
    }
    eprintln!("Ctrl-C or POST /api/control/stop stops it.");
}

pub fn run_daemon(args: DaemonArgs) -> anyhow::Result<ExitCode> {
    let settings = daemon_settings(&args)?;
    run_daemon_with(settings, |started, _| print_started(started))
}

/// Files that mark a project root.
const PROJECT_MARKERS: &[&str] = &[
    ".git",
    "Cargo.toml",
    "package.json",
    "pyproject.toml",
    "setup.py",
    "requirements.txt",
    "go.mod",
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
    "CMakeLists.txt",
    "Makefile",
    "Gemfile",
    "composer.json",
    "mix.exs",
    "deno.json",
];

/// What makes `dir` a codebase: a project marker, else a source file in its top two levels.
pub fn detect_codebase(dir: &Path) -> Option<String> {
    if let Some(marker) = PROJECT_MARKERS.iter().find(|m| dir.join(m).exists()) {
        return Some(format!("{marker} found"));
    }
    let mut stack = vec![(dir.to_path_buf(), 0)];
    while let Some((folder, depth)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().to_string();
            if name.starts_with('.') {
                continue;
            }
            if path.is_dir() {
                if depth < 1 {
                    stack.push((path, depth + 1));
                }
            } else if Language::from_name(&name).is_code() {
                return Some(format!("source file {} found", path.display()));
            }
        }
    }
    None
}

/// Coding agents on PATH and the line each needs to use the proxy at `proxy`.
fn agent_lines(proxy: &str) -> Vec<(String, String)> {
    let on_path = |name: &str| {
        std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(name).is_file()))
    };
    let catalog = [
        ("claude", format!("ANTHROPIC_BASE_URL={proxy} claude")),
        ("codex", format!("OPENAI_BASE_URL={proxy}/v1 codex")),
        ("aider", format!("aider --openai-api-base {proxy}/v1")),
        ("gemini", format!("GOOGLE_GEMINI_BASE_URL={proxy} gemini")),
        ("qwen", format!("OPENAI_BASE_URL={proxy}/v1 qwen")),
    ];
    catalog
        .into_iter()
        .filter(|(name, _)| on_path(name))
        .map(|(name, line)| (name.to_string(), line))
        .collect()
}

/// Opens `url` in the desktop's browser, when there is a desktop.
fn open_browser(url: &str) -> bool {
    let opener = if cfg!(target_os = "macos") {
        Some("open")
    } else if std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some()
    {
        Some("xdg-open")
    } else {
        None
    };
    let Some(opener) = opener else {
        return false;
    };
    std::process::Command::new(opener)
        .arg(url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .is_ok()
}

fn index_with_progress(dir: &Path, state_home: &Path) -> anyhow::Result<Index> {
    let options = IndexOptions {
        state_home: Some(state_home.to_path_buf()),
        ..IndexOptions::default()
    };
    super::context::index_with_progress(dir, options)
}

pub fn run_go(mut args: GoArgs) -> anyhow::Result<ExitCode> {
    let here = std::env::current_dir().context("reading the current directory")?;
    let Some(why) = detect_codebase(&here) else {
        eprintln!(
            "svc go: warning: no codebase detected in {} (no project file such as Cargo.toml, package.json, pyproject.toml, go.mod or .git, and no source file in the top two levels).",
            here.display()
        );
        eprintln!("  cd into a project and run `svc go` there, or start the parts yourself:");
        eprintln!("    svc daemon --repo DIR     proxy, dashboard and a watched index of DIR");
        eprintln!("    svc proxy                 the proxy alone");
        eprintln!("    svc view runs/            the run viewer");
        return Ok(ExitCode::from(1));
    };
    // `svc go` records certificates by default (audit never changes an answer), so the
    // dashboard has something to show from the first request.
    if !args.daemon.no_proxy && args.daemon.proxy.witness.is_none() {
        args.daemon.proxy.witness = Some(Mode::Audit);
    }
    let mut settings = daemon_settings(&args.daemon)?;
    eprintln!("svc go: {} ({why})", here.display());
    let home = settings.state_home.clone();
    let root = here.clone();
    // The index is built once the daemon holds its lock and ports: a daemon already running or
    // a port in use is reported at once, not after indexing a large tree.
    let prepare = move || -> Result<(), String> {
        let index = index_with_progress(&root, &home).map_err(|e| format!("{e:#}"))?;
        eprintln!(
            "svc go: indexed {} files, {} tokens ({} parsed, {} unchanged)",
            index.stats.files, index.stats.tokens, index.stats.parsed, index.stats.reused
        );
        Ok(())
    };
    if !settings.repos.contains(&here) {
        settings.repos.push(here.clone());
    }
    let no_browser = args.no_browser;
    run_daemon_prepared(settings, prepare, move |started, _| {
        print_started(started);
        if let Some(proxy) = &started.proxy_url {
            let agents = agent_lines(proxy);
            if agents.is_empty() {
                eprintln!("No coding agent found on PATH. Point any client at the proxy:");
                eprintln!("  Anthropic SDKs:  ANTHROPIC_BASE_URL={proxy}");
                eprintln!("  OpenAI SDKs:     OPENAI_BASE_URL={proxy}/v1");
                eprintln!("  Gemini:          base URL {proxy}/v1beta");
            } else {
                eprintln!("Use it from your agents:");
                for (name, line) in agents {
                    eprintln!("  {name:<8} {line}");
                }
            }
        }
        let url = format!("{}/", started.dashboard_url);
        if !no_browser && open_browser(&url) {
            eprintln!("Opened {url} in your browser.");
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codebases_are_detected_by_marker_or_source_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(detect_codebase(dir.path()), None);
        std::fs::write(dir.path().join("notes.txt"), "hello").expect("write");
        assert_eq!(detect_codebase(dir.path()), None);
        std::fs::create_dir(dir.path().join("src")).expect("mkdir");
        std::fs::write(dir.path().join("src/lib.rs"), "fn main() {}").expect("write");
        assert!(detect_codebase(dir.path()).is_some_and(|w| w.contains("lib.rs")));
        std::fs::write(dir.path().join("go.mod"), "module x").expect("write");
        assert_eq!(detect_codebase(dir.path()).as_deref(), Some("go.mod found"));
    }
}
