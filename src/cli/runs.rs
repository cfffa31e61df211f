//! `svc runs list|show`: the run directories under a folder, and the exact requests of one
//! trial.
//!
//! Exit codes: 0 shown; 2 no such run, no matching trial, or an unreadable audit trail.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde::Serialize;
use svc::harness::audit::{self, CacheUse, CallPurpose, TrialAudit, TrialFilter};
use svc::harness::run::{self, Manifest};
use svc::trial::{Condition, Outcome};

use super::Format;

#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// List the run directories (folders with a manifest.json) under a folder.
    List(ListArgs),
    /// Show the exact requests (system prompt, prompt, context, question), calls and record
    /// of one task's trials.
    Show(ShowArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Folder to search (two levels deep).
    #[arg(default_value = "runs")]
    dir: PathBuf,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The run directory.
    run: PathBuf,
    /// A task id (all its budgets) or a record task_id (`<task>@b<budget>`).
    task_id: String,
    #[arg(long, value_enum)]
    condition: Option<Condition>,
    #[arg(long)]
    replicate: Option<u64>,
    #[arg(long)]
    budget: Option<usize>,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

pub fn run(command: RunsCommand) -> anyhow::Result<ExitCode> {
    match command {
        RunsCommand::List(args) => list(args),
        RunsCommand::Show(args) => show(args),
    }
}

#[derive(Serialize)]
struct Listed {
    dir: PathBuf,
    #[serde(flatten)]
    entry: ListedEntry,
}

#[derive(Serialize)]
#[serde(untagged)]
enum ListedEntry {
    Run {
        #[serde(flatten)]
        manifest: Box<Manifest>,
        /// Complete lines of trials.jsonl now, when they differ from the manifest's `written`
        /// (the run is going on, was interrupted, or the file was cut or edited since).
        #[serde(skip_serializing_if = "Option::is_none")]
        records_in_file: Option<u64>,
    },
    /// A `manifest.json` that cannot be read: listed with why (leaving it out hid the run).
    Unreadable { unreadable: String },
}

/// Complete lines (newline-terminated, not blank) of the run's trials.jsonl; a torn last line
/// is not a record. `None` when the file cannot be read. Streamed: a run's file can be large,
/// and a listing reads every run's.
fn records_in_file(dir: &Path) -> Option<u64> {
    use std::io::Read;
    let mut file = std::fs::File::open(dir.join("trials.jsonl")).ok()?;
    let mut buffer = vec![0u8; 1 << 16];
    let (mut records, mut blank) = (0u64, true);
    loop {
        let read = file.read(&mut buffer).ok()?;
        if read == 0 {
            return Some(records);
        }
        for &byte in &buffer[..read] {
            if byte == b'\n' {
                records += u64::from(!blank);
                blank = true;
            } else if !byte.is_ascii_whitespace() {
                blank = false;
            }
        }
    }
}

fn find_runs(dir: &Path, depth: usize, out: &mut Vec<Listed>) {
    match run::load_manifest(dir) {
        Ok(Some(manifest)) => {
            let in_file = records_in_file(dir).unwrap_or(0);
            out.push(Listed {
                dir: dir.to_path_buf(),
                entry: ListedEntry::Run {
                    records_in_file: (in_file != manifest.written).then_some(in_file),
                    manifest: Box::new(manifest),
                },
            });
            return;
        }
        Err(problem) => {
            out.push(Listed {
                dir: dir.to_path_buf(),
                entry: ListedEntry::Unreadable {
                    unreadable: problem,
                },
            });
            return;
        }
        Ok(None) => {}
    }
    if depth == 0 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut children: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    children.sort();
    for child in children {
        find_runs(&child, depth - 1, out);
    }
}

fn list(args: ListArgs) -> anyhow::Result<ExitCode> {
    if !args.dir.is_dir() {
        anyhow::bail!(
            "{} is not a folder; pass the folder holding run directories (default: runs)",
            args.dir.display()
        );
    }
    let mut runs = Vec::new();
    find_runs(&args.dir, 2, &mut runs);
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&runs)?),
        Format::Text => {
            if runs.is_empty() {
                println!("no run directories under {}", args.dir.display());
            }
            for listed in &runs {
                match &listed.entry {
                    ListedEntry::Run {
                        manifest: m,
                        records_in_file,
                    } => {
                        // The manifest's error count is of the records it counted; beside a
                        // file that disagrees it would pass for the file's.
                        let records = match records_in_file {
                            None => format!("{} records ({} errors)", m.written, m.errors),
                            Some(n) => format!(
                                "{n} records in trials.jsonl (the manifest says {} records, {} errors: running, interrupted, or the file changed since)",
                                m.written, m.errors
                            ),
                        };
                        println!(
                            "{}  {} v{} × {}  shard {}  {records}  svc {}  ended {}",
                            listed.dir.display(),
                            m.workload.name,
                            m.workload.version,
                            m.runner.name,
                            m.shard,
                            m.svc_version,
                            m.ended_at.as_deref().unwrap_or("(running or interrupted)")
                        );
                    }
                    ListedEntry::Unreadable { unreadable } => {
                        println!("{}  unreadable: {unreadable}", listed.dir.display());
                    }
                }
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn show(args: ShowArgs) -> anyhow::Result<ExitCode> {
    if run::read_manifest(&args.run).is_none() {
        anyhow::bail!(
            "{} is not a run directory (no readable manifest.json); list them with `svc runs list`",
            args.run.display()
        );
    }
    let filter = TrialFilter {
        task_id: args.task_id.clone(),
        condition: args.condition,
        replicate: args.replicate,
        budget: args.budget,
    };
    let trials = audit::trial_audits(&args.run, &filter)
        .with_context(|| format!("reading the audit trail of {}", args.run.display()))?;
    if trials.is_empty() {
        let known: Vec<String> = audit::read_calls(&args.run)?
            .into_iter()
            .map(|t| t.task_id)
            .take(3)
            .collect();
        anyhow::bail!(
            "no trial of task {} (with the given --condition/--replicate/--budget) in {}'s {}; task ids there look like {}",
            args.task_id,
            args.run.display(),
            audit::REQUESTS_LOG,
            if known.is_empty() {
                "(none: the run has no call log; it was made before svc stored requests)".into()
            } else {
                known.join(", ")
            }
        );
    }
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&trials)?),
        Format::Text => {
            for trial in &trials {
                print_trial(trial);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn print_trial(trial: &TrialAudit) {
    println!(
        "== {} {} replicate {}",
        trial.task_id, trial.condition, trial.replicate
    );
    match &trial.record {
        Some(r) => println!(
            "record: {}{}  task_score {}  context_tokens {}  output_tokens {}  latency_ms {:.1}  provider_request_id {}",
            match r.outcome {
                Outcome::Success => "success",
                Outcome::Error => "error",
            },
            r.error_type
                .as_deref()
                .map(|e| format!(" ({e})"))
                .unwrap_or_default(),
            r.task_score,
            r.context_tokens,
            r.output_tokens,
            r.latency_ms,
            r.provider_request_id
        ),
        None => println!("record: none written (see notes.jsonl)"),
    }
    if trial.calls.is_empty() {
        println!("calls: none (the model was not called; see notes.jsonl)");
    }
    for call in &trial.calls {
        let cache = match call.call.cache {
            CacheUse::Off => "off".to_string(),
            CacheUse::Miss => "miss (stored)".to_string(),
            CacheUse::Hit => format!(
                "hit (original call at {})",
                call.call.cached_at.as_deref().unwrap_or("?")
            ),
        };
        println!(
            "-- {} call: request sha256 {}  cache {}  model {}  temperature {}  max_output_tokens {}",
            match call.call.purpose {
                CallPurpose::Answer => "answer",
                CallPurpose::Summary => "summary",
                CallPurpose::Judge => "judge",
            },
            call.call.request_sha256,
            cache,
            call.request.model,
            call.request.temperature,
            call.request.max_output_tokens
        );
        for (n, attempt) in call.call.attempts.iter().enumerate() {
            let started =
                std::time::UNIX_EPOCH + std::time::Duration::from_millis(attempt.started_at_ms);
            println!(
                "   attempt {}: {} at {}, {:.1} ms{}{}",
                n + 1,
                attempt.outcome,
                svc::clock::rfc3339(started),
                attempt.elapsed_ms,
                attempt
                    .retry_after_ms
                    .map(|ms| format!(", Retry-After {ms} ms"))
                    .unwrap_or_default(),
                attempt
                    .wait_ms
                    .map(|ms| format!(", waited {ms} ms"))
                    .unwrap_or_default()
            );
        }
        println!("--- system:");
        println!("{}", call.request.system);
        println!("--- prompt (as sent):");
        println!("{}", call.request.prompt);
        println!("--- question:");
        println!("{}", call.request.question);
    }
    if let Some(text) = trial.record.as_ref().and_then(|r| r.response_text.as_ref()) {
        println!("--- response:");
        println!("{text}");
    }
    println!();
}
