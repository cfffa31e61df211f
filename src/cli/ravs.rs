//! `svc ravs report`: the RAVS outcome log summarised per task class.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::SystemTime;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use svc::ravs::{EventLog, report};

#[derive(Debug, Subcommand)]
pub enum RavsCommand {
    /// Per task class: label coverage, success rate (Wilson 95% interval), retry rate,
    /// escalation rate and routed share, over the events of the last `--since`.
    Report(ReportArgs),
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// The window: a whole number and a unit m, h, d or w (30m, 12h, 7d, 2w).
    #[arg(long, default_value = "7d")]
    since: String,
    /// Print the report as JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// State directory whose ravs/events.jsonl is read [default: $SVC_HOME or ~/.svc].
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Read this log file instead of the state directory's.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
}

pub fn run(command: RavsCommand) -> anyhow::Result<ExitCode> {
    match command {
        RavsCommand::Report(args) => run_report(args),
    }
}

fn run_report(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let window = svc::ravs::duration::parse(&args.since).context("--since")?;
    let log = match (&args.log, &args.state_dir) {
        (Some(file), _) => EventLog::at(file),
        (None, Some(dir)) => EventLog::in_state_dir(dir),
        (None, None) => EventLog::in_state_dir(&svc::state::home()?),
    };
    let read = log.read()?;
    // A log of which not one line reads is not "no events": it is the wrong file, or damaged.
    if read.entries.is_empty() && !read.warnings.is_empty() {
        for warning in read.warnings.iter().take(3) {
            eprintln!("warning: {warning}");
        }
        anyhow::bail!(
            "none of the {} line(s) of {} is a RAVS event: is it the right file (--log)? Move a damaged log away; the proxy starts a new one",
            read.warnings.len(),
            log.path().display()
        );
    }
    for warning in &read.warnings {
        eprintln!("warning: {warning}");
    }
    if !read.warnings.is_empty() {
        eprintln!(
            "warning: {} unreadable line(s) of {} skipped; the other events are counted",
            read.warnings.len(),
            log.path().display()
        );
    }
    let report = report::build(
        &read.entries,
        SystemTime::now(),
        window,
        read.warnings.len(),
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
        return Ok(ExitCode::SUCCESS);
    }
    if read.missing {
        println!(
            "No RAVS events yet: {} does not exist. The proxy writes it as it serves prompt requests (routing decisions, and witness verdicts with --witness).",
            log.path().display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    if report.events == 0 {
        println!(
            "No RAVS events in the last {} ({} holds {} older event(s)); widen --since.",
            args.since,
            log.path().display(),
            read.entries.len()
        );
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", report::render(&report));
    Ok(ExitCode::SUCCESS)
}
