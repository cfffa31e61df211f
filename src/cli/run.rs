//! `svc run`: run a workload's paired trial matrix and write schema-valid trial records.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use clap::Args;
use svc::harness::condition::{self, Condition};
use svc::harness::run::{self, Progress, RunSettings, Shard};
use svc::harness::runner::{Runner, runners_root};
use svc::harness::scorer::{self, ScorerName};
use svc::harness::summary::CompactionMode;
use svc::harness::workload::{self, LoadOptions, workloads_root};

use super::Format;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Workload name (under ./workloads or $SVC_WORKLOADS_DIR) or path to a workload folder.
    #[arg(long)]
    workload: String,
    /// Runner name (under ./runners or $SVC_RUNNERS_DIR) or path to a runner file.
    #[arg(long, default_value = "fixture")]
    runner: String,
    /// Conditions to run (comma-separated or repeated).
    #[arg(long, value_enum, value_delimiter = ',', num_args = 1..,
          default_values_t = Condition::ALL.to_vec())]
    conditions: Vec<Condition>,
    /// How native_compaction compacts: `deterministic` drops the oldest turns / keeps head and
    /// tail; `model-summary` summarises what would be dropped with the runner's model (the
    /// summary call's output tokens, cost and latency are added to the trial).
    #[arg(long, value_enum, default_value_t)]
    native_compaction: CompactionMode,
    /// Run the proof-guided loop in the svc and combined conditions: ROUNDS[,BUDGET] = bound on
    /// model calls per trial and recovered tokens (default 1024); the runner answers each round.
    #[arg(long, value_name = "ROUNDS[,BUDGET]")]
    fixed_point: Option<svc::harness::fixed_point::FixedPointSetting>,
    /// Context budgets in tokens (comma-separated or repeated); each record's task_id carries
    /// its budget as `<task>@b<budget>`.
    #[arg(long = "budget", value_delimiter = ',', num_args = 1.., default_values_t = vec![512usize])]
    budgets: Vec<usize>,
    /// Replicates of every (task, condition, budget).
    #[arg(long, default_value_t = 1)]
    replicates: u64,
    /// Run one shard K/N of the tasks (1-based).
    #[arg(long, default_value = "1/1")]
    shard: Shard,
    /// Run directory [default: runs/<run-id>, derived from the settings so a re-run resumes].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Abort when more than this fraction of finished trials are errors (after 20 trials).
    #[arg(long)]
    max_error_rate: Option<f64>,
    /// Seed for the trial order, recorded in the manifest.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Scorer [default: the workload's].
    #[arg(long, value_enum)]
    scorer: Option<ScorerName>,
    /// Worker threads for local work [default: all cores].
    #[arg(long)]
    threads: Option<usize>,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    if let Some(rate) = args.max_error_rate
        && !(0.0..=1.0).contains(&rate)
    {
        anyhow::bail!("--max-error-rate must be between 0 and 1, got {rate}");
    }
    let state_home = svc::state::home()?;
    let workload = workload::load(
        &workloads_root(),
        &args.workload,
        &LoadOptions {
            cache_dir: state_home.join("cache"),
        },
    )
    .with_context(|| format!("loading workload {}", args.workload))?;
    let runner = Runner::load(&runners_root(), &args.runner)
        .with_context(|| format!("loading runner {}", args.runner))?;
    let mut conditions = args.conditions.clone();
    conditions.dedup();
    let mut budgets = args.budgets.clone();
    budgets.sort_unstable();
    budgets.dedup();
    let bar = Arc::new(Mutex::new(None::<indicatif::ProgressBar>));
    let progress: Option<Arc<dyn Fn(Progress) + Send + Sync>> = if std::io::stderr().is_terminal() {
        let bar = bar.clone();
        Some(Arc::new(move |p: Progress| {
            let Ok(mut slot) = bar.lock() else { return };
            let bar = slot.get_or_insert_with(|| {
                let bar = indicatif::ProgressBar::new(p.total);
                if let Ok(style) = indicatif::ProgressStyle::with_template(
                    "{bar:30} {pos}/{len} trials  {per_sec}  ETA {eta}  {msg}",
                ) {
                    bar.set_style(style);
                }
                bar
            });
            bar.set_position(p.done);
            bar.set_message(format!("{} errors", p.errors));
        }))
    } else {
        None
    };
    let mut settings = RunSettings {
        scorer: args.scorer.unwrap_or(workload.scorer()),
        workload: Arc::new(workload),
        runner: Arc::new(runner),
        conditions,
        native_compaction: args.native_compaction,
        budgets,
        replicates: args.replicates,
        shard: args.shard,
        out_dir: PathBuf::new(),
        max_error_rate: args.max_error_rate,
        seed: args.seed,
        selector: condition::default_selector(),
        claim_checker: scorer::default_claim_checker(),
        state_home,
        threads: args.threads,
        progress,
        fixed_point: args.fixed_point,
    };
    settings.out_dir = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("runs").join(run::default_run_id(&settings)));
    let summary = run::execute(&settings)
        .with_context(|| format!("running into {}", settings.out_dir.display()))?;
    if let Ok(mut slot) = bar.lock()
        && let Some(bar) = slot.take()
    {
        bar.finish_and_clear();
    }
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&summary)?),
        Format::Text => {
            println!(
                "run {}: {} trials written ({} errors), {} already present, {} planned, {:.2} s ({:.0} trials/s)",
                summary.run_dir.display(),
                summary.written,
                summary.errors,
                summary.skipped,
                summary.planned,
                summary.elapsed_seconds,
                summary.trials_per_second()
            );
            println!(
                "records:  {}",
                summary.run_dir.join("trials.jsonl").display()
            );
            println!(
                "manifest: {}",
                summary.run_dir.join("manifest.json").display()
            );
            if summary.run_dir.join("notes.jsonl").is_file() {
                println!(
                    "notes:    {}",
                    summary.run_dir.join("notes.jsonl").display()
                );
            }
        }
    }
    if summary.aborted {
        eprintln!(
            "svc: run aborted: the error rate exceeded --max-error-rate {}; see {}",
            args.max_error_rate.unwrap_or_default(),
            summary.run_dir.join("notes.jsonl").display()
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
