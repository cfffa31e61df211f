//! `svc wrap [AGENT]`: plug svc into a coding tool (SPEC §4.5). Launch agents get the proxy and
//! their endpoint variables, then the tool replaces this process; MCP-config agents get the
//! tool server merged into their config file; snippet agents get what to paste where.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use svc::wrap::dirs::Dirs;
use svc::wrap::launch::{self, DEFAULT_PORT, LaunchPlan};
use svc::wrap::proxy_process::{self, Probe};
use svc::wrap::{AGENTS, Agent, Group, mcp_config, snippet};

#[derive(Debug, Args)]
pub struct WrapArgs {
    /// The agent's slug; without one, the grouped list of agents is printed.
    agent: Option<String>,
    /// Port of the proxy on 127.0.0.1 (launch agents start it there when nothing listens).
    /// Port 0 is refused: the tool must be told one fixed address.
    #[arg(long, default_value_t = DEFAULT_PORT, value_parser = clap::value_parser!(u16).range(1..))]
    port: u16,
    /// Launch agents: print the variables as `export` lines instead of running the tool
    /// (starts nothing, writes nothing).
    #[arg(long)]
    print_env: bool,
    /// MCP-config agents and pi: print the unified diff of the change and write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Seconds to wait for a proxy that wrap starts to answer.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    proxy_wait: u64,
    /// Arguments for the tool, after `--` (e.g. `svc wrap claude -- --model opus`).
    #[arg(
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "TOOL_ARGS"
    )]
    args: Vec<String>,
}

pub fn run(args: WrapArgs) -> anyhow::Result<ExitCode> {
    let Some(slug) = args.agent.clone() else {
        print!("{}", listing());
        return Ok(ExitCode::SUCCESS);
    };
    let agent = svc::wrap::find(&slug)?;
    if agent.group != Group::Launch && !args.args.is_empty() {
        bail!(
            "`svc wrap {slug}` runs nothing, so it takes no tool arguments ({:?})",
            args.args
        );
    }
    match agent.group {
        Group::Launch => run_launch(agent, &args),
        Group::McpConfig => run_mcp_config(agent, &args),
        Group::Snippet => run_snippet(agent, &args),
    }
}

fn listing() -> String {
    let mut out = String::from("svc wrap <agent>: plug svc into a coding tool.\n");
    for group in [Group::Launch, Group::McpConfig, Group::Snippet] {
        out.push_str(&format!("\n{}:\n", group.title()));
        for agent in AGENTS.iter().filter(|a| a.group == group) {
            out.push_str(&format!(
                "  {:<15} {}: {}\n",
                agent.slug, agent.name, agent.does
            ));
        }
    }
    out.push_str(&format!(
        "\n<proxy> is http://127.0.0.1:{DEFAULT_PORT} (--port). `svc wrap AGENT --print-env` or `--dry-run` shows what would change.\n"
    ));
    out
}

fn current_exe() -> anyhow::Result<String> {
    let exe = std::env::current_exe().context("finding the path of the running svc")?;
    Ok(exe.to_string_lossy().into_owned())
}

/// `NAME=value` quoted for a POSIX shell when needed.
fn shell_export(name: &str, value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:@%+=,-".contains(c));
    if plain {
        format!("export {name}={value}")
    } else {
        format!("export {name}='{}'", value.replace('\'', r"'\''"))
    }
}

fn run_launch(agent: &Agent, args: &WrapArgs) -> anyhow::Result<ExitCode> {
    let dirs = Dirs::from_env();
    let plan = launch::plan(agent.slug, args.port, &dirs, &|name| {
        std::env::var(name).ok()
    })?;
    if args.print_env || args.dry_run {
        print_launch(agent, &plan, args)?;
        return Ok(ExitCode::SUCCESS);
    }
    let program = launch::which(plan.program, std::env::var_os("PATH").as_deref()).ok_or(
        svc::wrap::WrapError::NotOnPath {
            program: plan.program,
            install: plan.install,
        },
    )?;
    if let Some(edit) = &plan.config {
        let change = mcp_config::plan(edit)?;
        if change.changes() {
            let applied = mcp_config::apply(&change)?;
            eprintln!(
                "svc wrap: set the proxy as {}'s endpoint in {}{}",
                agent.name,
                change.path.display(),
                backup_note(&applied)
            );
        }
    }
    ensure_proxy(agent, &plan, args)?;
    for note in &plan.notes {
        eprintln!("svc wrap: note: {note}");
    }
    for note in replaced(agent, &plan) {
        eprintln!("svc wrap: note: {note}");
    }
    exec(&program, &args.args, &plan.env)
}

/// A note for each endpoint variable already set to something else, which the plan replaces.
fn replaced(agent: &Agent, plan: &LaunchPlan) -> Vec<String> {
    plan.env
        .iter()
        .filter_map(|(name, value)| {
            let previous = std::env::var(name).ok()?;
            (previous != *value && !previous.is_empty()).then(|| {
                format!(
                    "{name} was {previous}; {} now talks to the proxy, which forwards to its own upstream (start the proxy with --upstream-… or SVC_UPSTREAM_… to keep that endpoint)",
                    agent.slug
                )
            })
        })
        .collect()
}

fn backup_note(applied: &mcp_config::Applied) -> String {
    match &applied.backup {
        Some(backup) => format!(" (previous file kept as {})", backup.display()),
        None => " (new file)".to_string(),
    }
}

fn print_launch(agent: &Agent, plan: &LaunchPlan, args: &WrapArgs) -> anyhow::Result<()> {
    println!(
        "# svc wrap {}: the proxy at {}",
        agent.slug,
        launch::proxy_url(args.port)
    );
    for (name, value) in &plan.env {
        println!("{}", shell_export(name, value));
    }
    if !plan.proxy_args.is_empty() {
        println!(
            "# a proxy started by wrap gets: svc proxy --port {} {}",
            args.port,
            plan.proxy_args.join(" ")
        );
    }
    for note in plan.notes.iter().cloned().chain(replaced(agent, plan)) {
        println!("# note: {note}");
    }
    if let Some(edit) = &plan.config {
        let change = mcp_config::plan(edit)?;
        if change.changes() {
            println!(
                "# {} reads its endpoints from {}; wrap would change it:",
                agent.name,
                change.path.display()
            );
            for line in change.diff().lines() {
                println!("# {line}");
            }
        } else {
            println!("# {} already points at the proxy", change.path.display());
        }
    }
    Ok(())
}

fn ensure_proxy(agent: &Agent, plan: &LaunchPlan, args: &WrapArgs) -> anyhow::Result<()> {
    let url = launch::proxy_url(args.port);
    match proxy_process::probe(args.port) {
        Probe::Svc => {
            eprintln!("svc wrap: using the svc proxy already running at {url}");
            if let Some(note) = &plan.reuse_note {
                eprintln!("svc wrap: note: {note}");
            }
            Ok(())
        }
        Probe::Other(what) => bail!(
            "127.0.0.1:{} is held by something that is not an svc proxy ({what}); stop it or pick another --port",
            args.port
        ),
        Probe::Closed => {
            let log = svc::state::home()?
                .join("logs")
                .join(format!("proxy-{}.log", args.port));
            let exe = std::env::current_exe().context("finding the path of the running svc")?;
            let started = proxy_process::spawn(
                &exe,
                args.port,
                &plan.proxy_args,
                &log,
                Duration::from_secs(args.proxy_wait.max(1)),
            )?;
            eprintln!(
                "svc wrap: started the svc proxy at {url} (pid {}, log {}); it keeps running after {} exits: stop it with `kill {}`",
                started.pid,
                started.log.display(),
                agent.slug,
                started.pid
            );
            Ok(())
        }
    }
}

#[cfg(unix)]
fn exec(
    program: &std::path::Path,
    args: &[String],
    env: &[(String, String)],
) -> anyhow::Result<ExitCode> {
    use std::os::unix::process::CommandExt;
    let error = std::process::Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .exec();
    Err(error).with_context(|| format!("cannot run {}", program.display()))
}

#[cfg(not(unix))]
fn exec(
    program: &std::path::Path,
    args: &[String],
    env: &[(String, String)],
) -> anyhow::Result<ExitCode> {
    // No exec(2): run the tool as a child and pass its exit code on.
    let status = std::process::Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .status()
        .with_context(|| format!("cannot run {}", program.display()))?;
    Ok(ExitCode::from(
        status.code().unwrap_or(1).clamp(0, 255) as u8
    ))
}

fn run_mcp_config(agent: &Agent, args: &WrapArgs) -> anyhow::Result<ExitCode> {
    if args.print_env {
        bail!(
            "--print-env is for launch agents; `svc wrap {} --dry-run` shows the config change",
            agent.slug
        );
    }
    let exe = std::env::current_exe().context("finding the path of the running svc")?;
    let edit = mcp_config::target(agent.slug, &Dirs::from_env(), &exe)?;
    let change = mcp_config::plan(&edit)?;
    if !change.changes() {
        println!(
            "{}: {} already has the svc tool server; nothing changed",
            agent.name,
            change.path.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    if args.dry_run {
        print!("{}", change.diff());
        eprintln!(
            "svc wrap: dry run: {} was not written",
            change.path.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let applied = mcp_config::apply(&change)?;
    println!(
        "{}: merged the svc tool server (`{} serve`) into {}{}; restart {} to load it",
        agent.name,
        exe.display(),
        change.path.display(),
        backup_note(&applied),
        agent.name
    );
    Ok(ExitCode::SUCCESS)
}

fn run_snippet(agent: &Agent, args: &WrapArgs) -> anyhow::Result<ExitCode> {
    if args.print_env || args.dry_run {
        bail!(
            "`svc wrap {}` only prints a snippet; --print-env and --dry-run do not apply",
            agent.slug
        );
    }
    let s = snippet::for_agent(agent.slug, &current_exe()?, args.port)?;
    println!(
        "# {}: svc does not edit this tool's settings; paste this yourself",
        agent.name
    );
    println!("file:  {}", s.file);
    println!("field: {}", s.field);
    println!();
    println!("{}", s.text);
    if let Some(note) = s.note {
        println!();
        println!("note: {note}");
    }
    Ok(ExitCode::SUCCESS)
}
