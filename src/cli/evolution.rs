//! `svc gaps`, `svc skills [list|export]`, `svc dream`: the evolution loop from the command
//! line; `svc federation [show|send]`: the opt-in weight sharing. Exit codes: 0 ok; 2 bad input or unreadable state. `svc dream` delivers its events to
//! the configured webhooks (and bot chat) before it exits, waiting up to --deliver-timeout.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use svc::events::evolution::{self, DreamSettings, skills};
use svc::events::federation;
use svc::events::notify::{Notifier, NotifySettings};
use svc::state;

use super::Format;

#[derive(Debug, Args)]
pub struct GapsArgs {
    /// A file recovered in at least this many runs is a gap (at least 1: 0 made every file of
    /// every run a gap).
    #[arg(long, default_value_t = evolution::DEFAULT_THRESHOLD, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    threshold: usize,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

#[derive(Debug, Args)]
pub struct SkillsArgs {
    #[command(subcommand)]
    command: Option<SkillsCommand>,
}

#[derive(Debug, Subcommand)]
enum SkillsCommand {
    /// List the skills with their status (the default).
    List {
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
    },
    /// Print the promoted skills as a JSON document (format svc.skills-export.v1).
    Export {
        /// Export drafts too.
        #[arg(long)]
        all: bool,
        /// Write to this file (atomically) instead of stdout.
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub struct DreamArgs {
    /// A file recovered in at least this many runs is a gap (at least 1: 0 made every file of
    /// every run a gap).
    #[arg(long, default_value_t = evolution::DEFAULT_THRESHOLD, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    threshold: usize,
    /// Seconds to wait for webhook deliveries before exiting.
    #[arg(long, default_value_t = 10.0)]
    deliver_timeout: f64,
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

pub fn run_gaps(args: GapsArgs) -> anyhow::Result<ExitCode> {
    let home = state::home()?;
    let (observed, gaps) = evolution::current_gaps(&home, args.threshold)?;
    for warning in &observed.warnings {
        eprintln!("svc: warning: {warning}");
    }
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&gaps)?),
        Format::Text => {
            println!(
                "{} gap(s) in {} recorded run(s) (threshold {})",
                gaps.len(),
                observed.observations.len(),
                args.threshold
            );
            for gap in &gaps {
                println!(
                    "{:<40} missed {:>3}  {}",
                    gap.entity,
                    gap.miss_count,
                    gap.chunk_ids.join(" ")
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_skills(args: SkillsArgs) -> anyhow::Result<ExitCode> {
    let home = state::home()?;
    let store = skills::SkillStore::load(&home)?;
    match args.command.unwrap_or(SkillsCommand::List {
        format: Format::Text,
    }) {
        SkillsCommand::List { format } => match format {
            Format::Json => {
                let all: Vec<&skills::Skill> = store.all().collect();
                println!("{}", serde_json::to_string_pretty(&all)?);
            }
            Format::Text => {
                let all: Vec<&skills::Skill> = store.all().collect();
                println!("{} skill(s)", all.len());
                for skill in all {
                    let bench =
                        skill
                            .benchmark
                            .as_ref()
                            .map_or("not benchmarked".to_string(), |b| {
                                format!(
                                    "misses {} -> {} over {} {} {}{}",
                                    b.misses_without,
                                    b.misses_with,
                                    b.queries,
                                    if b.held_out { "held-out" } else { "recorded" },
                                    if b.queries == 1 { "query" } else { "queries" },
                                    // Fewer misses alone read as a success.
                                    if b.passed {
                                        String::new()
                                    } else {
                                        format!("; benchmark failed: {}", b.verdict)
                                    }
                                )
                            });
                    println!(
                        "{} {:<8} include {} when {} of [{}]; {bench}",
                        skill.skill_id,
                        skill.status.as_str(),
                        skill.include.join(", "),
                        skill.trigger.min_matches,
                        skill.trigger.terms.join(", ")
                    );
                }
            }
        },
        SkillsCommand::Export { all, out } => {
            let exported = skills::export(&store, all);
            let mut json = serde_json::to_string_pretty(&exported)?;
            json.push('\n');
            match out {
                Some(path) => {
                    state::atomic_write_shared(&path, json.as_bytes())?;
                    eprintln!(
                        "svc: wrote {} skill(s) to {}",
                        exported.skills.len(),
                        path.display()
                    );
                }
                None => print!("{json}"),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run_dream(args: DreamArgs) -> anyhow::Result<ExitCode> {
    let deliver_timeout = super::seconds("--deliver-timeout", args.deliver_timeout, true)?;
    let home = state::home()?;
    let notify = NotifySettings::from_env().map_err(anyhow::Error::msg)?;
    super::say_if_waiting(&home.join("learning/dream.lock"), "a dream cycle");
    let report = evolution::dream(
        &home,
        DreamSettings {
            threshold: args.threshold,
        },
    )
    .context("dream cycle")?;
    if !report.events.is_empty() && !notify.targets.is_empty() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        runtime.block_on(async {
            let notifier = Notifier::start(
                notify,
                std::sync::Arc::new(|line: String| eprintln!("svc: {line}")),
            );
            for event in &report.events {
                notifier.emit(event.clone());
            }
            if !notifier.flush(deliver_timeout).await {
                // Which target and how many: "some" left the user nothing to act on.
                let pending: Vec<String> = notifier
                    .stats()
                    .into_iter()
                    .filter(|s| s.queued > 0 || s.delivered + s.failed + s.dropped < report.events.len() as u64)
                    .map(|s| {
                        let undelivered = (report.events.len() as u64)
                            .saturating_sub(s.delivered + s.failed + s.dropped);
                        format!("{} ({undelivered} of {} event(s))", s.target, report.events.len())
                    })
                    .collect();
                eprintln!(
                    "svc: warning: notifications still pending at exit were not sent: {}; a longer --deliver-timeout gives them time",
                    pending.join(", ")
                );
            }
        });
    }
    for warning in &report.warnings {
        eprintln!("svc: warning: {warning}");
    }
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Text => {
            println!(
                "dream cycle {}: {} recorded run(s), {} gap(s), {} worked on, {} synthesized, {} promoted",
                report.cycle_id,
                report.observations,
                report.gaps.len(),
                report.worked.len(),
                report.synthesized,
                report.promoted
            );
            for worked in &report.worked {
                println!(
                    "  {} (missed {}): {} {}",
                    worked.entity,
                    worked.miss_count,
                    worked.skill_id.as_deref().unwrap_or("-"),
                    worked.outcome
                );
            }
            println!(
                "learning spend {} tokens this cycle, {} lifetime, limit {:.0} (5% of {} tokens saved over {} commits)",
                report.spend_tokens,
                report.lifetime_spend,
                evolution::spend::TAU * report.lifetime_savings.tokens_saved as f64,
                report.lifetime_savings.tokens_saved,
                report.lifetime_savings.commits
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Subcommand)]
pub enum FederationCommand {
    /// Print the anonymous payload that would be shared (JSON) and whether sharing is on.
    Show,
    /// Share the payload now; refused (exit 2) without SVC_FEDERATION=1 and SVC_FEDERATION_URL.
    Send,
}

pub fn run_federation(command: FederationCommand) -> anyhow::Result<ExitCode> {
    let home = state::home()?;
    let settings = federation::settings_from_env()?;
    let payload = federation::payload(&home)?;
    match command {
        FederationCommand::Show => {
            match &settings {
                Some(s) => eprintln!("svc: federation is on: payloads go to {}", s.url),
                None => eprintln!(
                    "svc: federation is off (set SVC_FEDERATION=1 and SVC_FEDERATION_URL to share); nothing is sent"
                ),
            }
            println!("{}", serde_json::to_string_pretty(&payload)?);
        }
        FederationCommand::Send => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(federation::send(settings.as_ref(), &payload))?;
            eprintln!(
                "svc: shared weights version {} ({} weights)",
                payload.weights_version,
                payload.weights.len()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
