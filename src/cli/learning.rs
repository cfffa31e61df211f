//! `svc learning`: show, reset, update from feedback, and autotune the ranking weights.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use svc::context::localize::{self, PreparedTask};
use svc::context::weights::Feature;
use svc::daemon::learning::autotune::{self, AutotuneSettings};
use svc::daemon::learning::{WeightsSource, feedback, store};

#[derive(Debug, Subcommand)]
pub enum LearningCommand {
    /// Print the ranking weights in use (learned, or the defaults), their version and bounds.
    Show {
        #[arg(long)]
        json: bool,
    },
    /// Put the default weights back (as a new version; the old one stays in the history).
    Reset,
    /// Learn from fixed-point runs recorded since the last update (world-model ledger outcomes
    /// and pgs_ sessions: chunks the loop had to recover were ranked too low).
    Update {
        #[arg(long)]
        json: bool,
    },
    /// Search better weights on tasks mined from git history; adopt them only when the
    /// held-out tasks show a non-inferior win.
    Autotune(AutotuneArgs),
}

#[derive(Debug, Args)]
pub struct AutotuneArgs {
    /// Git repository or bundle to mine tasks from (repeatable).
    #[arg(long = "repo", required = true)]
    repos: Vec<PathBuf>,
    /// Tasks mined per repository (both parts together; at least 2, one to tune on and one to
    /// report on).
    #[arg(long, default_value_t = 60, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(2..))]
    max_tasks: usize,
    /// Budgets each weight vector is measured at.
    #[arg(long, value_delimiter = ',', default_value = "4000,8000", value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    budgets: Vec<usize>,
    /// Bound on objective evaluations of the search (at least 1).
    #[arg(long, default_value_t = 40, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    max_evaluations: usize,
    /// Non-inferiority margin of the held-out comparison (objective share).
    #[arg(long, default_value_t = 0.01)]
    margin: f64,
    /// Search and report, but keep the current weights whatever the result.
    #[arg(long)]
    dry_run: bool,
    /// Write autotune.md and autotune.json here.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(command: LearningCommand) -> anyhow::Result<ExitCode> {
    let home = svc::state::home()?;
    match command {
        LearningCommand::Show { json } => {
            let file =
                store::load(&home).with_context(|| "reading the learned weights".to_string())?;
            if json {
                let mut value = match &file {
                    Some(file) => serde_json::to_value(file)?,
                    None => serde_json::json!({
                        "status": "not_learned",
                        "weights": svc::context::weights::RankingWeights::default(),
                    }),
                };
                // As learning.md promises (and the text table shows): the defaults and the
                // bounds beside the weights in use.
                let defaults: serde_json::Map<String, serde_json::Value> = Feature::ALL
                    .iter()
                    .map(|f| (f.name().to_string(), serde_json::json!(f.default_value())))
                    .collect();
                let bounds: serde_json::Map<String, serde_json::Value> = Feature::ALL
                    .iter()
                    .map(|f| {
                        let (low, high) = f.bounds();
                        (f.name().to_string(), serde_json::json!([low, high]))
                    })
                    .collect();
                if let Some(object) = value.as_object_mut() {
                    object.insert("defaults".into(), defaults.into());
                    object.insert("bounds".into(), bounds.into());
                }
                println!("{}", serde_json::to_string_pretty(&value)?);
                return Ok(ExitCode::SUCCESS);
            }
            match &file {
                Some(file) => println!(
                    "ranking weights v{} ({}, {}); {} outcomes learned from, {} recovered chunks used, {} skipped",
                    file.version,
                    serde_json::to_value(file.source)?
                        .as_str()
                        .unwrap_or_default(),
                    file.updated_at,
                    file.feedback.outcomes_seen,
                    file.feedback.recovered_chunks_used,
                    file.feedback.recovered_chunks_skipped
                ),
                None => println!(
                    "no learned weights yet ({} does not exist): selection uses the defaults",
                    store::path_of(&home).display()
                ),
            }
            let weights = file.map(|f| f.weights).unwrap_or_default();
            println!("{:<16} {:>8} {:>8}  bounds", "weight", "value", "default");
            for feature in Feature::ALL {
                let (low, high) = feature.bounds();
                println!(
                    "{:<16} {:>8.4} {:>8.4}  [{low}, {high}]",
                    feature.name(),
                    weights.get(feature),
                    feature.default_value()
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        LearningCommand::Reset => {
            super::say_if_waiting(
                &store::path_of(&home).with_extension("lock"),
                "a learning update or reset",
            );
            let file = store::reset(&home)?;
            println!(
                "ranking weights reset to the defaults as v{} ({})",
                file.version,
                store::path_of(&home).display()
            );
            Ok(ExitCode::SUCCESS)
        }
        LearningCommand::Update { json } => {
            super::say_if_waiting(
                &store::path_of(&home).with_extension("lock"),
                "a learning update or reset",
            );
            let report = feedback::learn_from_runs(&home)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                // Chunks skipped and records that could not be read are two counts: one "0
                // skipped" beside lines saying "skipped session …" read as a contradiction.
                println!(
                    "read {} outcomes; {} recovered chunks moved the weights, {} recovered chunks skipped; {} unreadable record(s){}; v{} → v{}",
                    report.outcomes_read,
                    report.recovered_chunks_used,
                    report.recovered_chunks_skipped,
                    report.skipped.len(),
                    match report.runs_deferred {
                        0 => String::new(),
                        n => format!(
                            " ({n} run(s) whose commit could not be read, read again next time)"
                        ),
                    },
                    report.version_before,
                    report.version_after
                );
                for line in report.skipped.iter().take(10) {
                    eprintln!("svc: warning: {line}");
                }
                if report.skipped.len() > 10 {
                    eprintln!(
                        "svc: warning: … and {} more unreadable record(s)",
                        report.skipped.len() - 10
                    );
                }
                for feature in Feature::ALL {
                    let (before, after) = (
                        report.weights_before.get(feature),
                        report.weights_after.get(feature),
                    );
                    if before != after {
                        println!("  {:<16} {before:.4} → {after:.4}", feature.name());
                    }
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        LearningCommand::Autotune(args) => run_autotune(&home, args),
    }
}

fn run_autotune(home: &std::path::Path, args: AutotuneArgs) -> anyhow::Result<ExitCode> {
    // Checked before minutes of mining and indexing: NaN, a negative or a whole-objective
    // margin ran to the end with a comparison that could not mean anything.
    anyhow::ensure!(
        (0.0..1.0).contains(&args.margin),
        "--margin must be a share of the objective from 0 to just below 1, got {}",
        args.margin
    );
    let own = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut prepared: Vec<PreparedTask> = Vec::new();
    for repo in &args.repos {
        let (_clone, path, revision) = super::bench::open_history(repo, &own)?;
        let tasks = localize::mine_tasks(&path, revision, args.max_tasks, 8)
            .with_context(|| format!("mining tasks from {}", repo.display()))?;
        eprintln!(
            "autotune: {} tasks from {} ({} tune, {} held out); indexing their trees…",
            tasks.len(),
            repo.display(),
            tasks
                .iter()
                .filter(|t| t.part == localize::Part::Tune)
                .count(),
            tasks
                .iter()
                .filter(|t| t.part == localize::Part::HeldOut)
                .count()
        );
        for task in &tasks {
            prepared.push(PreparedTask::new(&path, task)?);
        }
    }
    let file = store::load_or_default(home).context("reading the learned weights")?;
    let settings = AutotuneSettings {
        budgets: args.budgets.clone(),
        max_evaluations: args.max_evaluations,
        margin: args.margin,
        ..AutotuneSettings::default()
    };
    let progress = |done: usize, bound: usize, objective: f64| {
        eprintln!("autotune: evaluation {done}/{bound}: tune objective {objective:.4}");
    };
    let report = autotune::autotune(&prepared, &file.weights, &settings, &progress)?;
    let markdown = autotune::render_markdown(&report);
    print!("{markdown}");
    if let Some(out) = &args.out {
        std::fs::create_dir_all(out)?;
        svc::state::atomic_write_shared(&out.join("autotune.md"), markdown.as_bytes())?;
        let mut json = serde_json::to_vec_pretty(&report)?;
        json.push(b'\n');
        svc::state::atomic_write_shared(&out.join("autotune.json"), &json)?;
    }
    if report.adopted && !args.dry_run {
        // Onto the file as it is now: feedback may have been learned while autotune ran.
        let file = store::update(home, |file| {
            file.advance(report.candidate, WeightsSource::Autotune);
            true
        })?;
        println!(
            "\nadopted as v{} ({})",
            file.version,
            store::path_of(home).display()
        );
    } else if report.adopted {
        println!("\n--dry-run: the current weights stay");
    }
    Ok(ExitCode::SUCCESS)
}
