//! `svc run`: run a workload's paired trial matrix and write schema-valid trial records.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use anyhow::Context;
use clap::Args;
use svc::harness::condition::Condition;
use svc::harness::judge::Judge;
use svc::harness::run::{self, AuditSettings, Progress, RunSettings, ShardSpec};
use svc::harness::runner::cache::ResponseCache;
use svc::harness::runner::{Runner, runners_root};
use svc::harness::scorer::{self, ScorerName};
use svc::harness::selector::{self, SelectorName};
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
    /// Send every raw request through an in-process proxy (optimisation on, its budget = the
    /// trial's budget) to the runner; raw then runs at every budget. Also `via_proxy = true` in
    /// the runner file. Compare with the same run direct: svc report --compare-runs DIRECT VIA.
    #[arg(long)]
    via_proxy: bool,
    /// Context budgets in tokens (comma-separated or repeated); each record's task_id carries
    /// its budget as `<task>@b<budget>`.
    #[arg(long = "budget", value_delimiter = ',', num_args = 1.., default_values_t = vec![512usize])]
    budgets: Vec<usize>,
    /// Replicates of every (task, condition, budget).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=super::MAX_REPLICATES))]
    replicates: u64,
    /// Run one shard K/N of the tasks (1-based), or `auto/N` to take the index from
    /// JOB_COMPLETION_INDEX (Kubernetes Indexed Job, 0-based) or SLURM_ARRAY_TASK_ID (minus
    /// SLURM_ARRAY_TASK_MIN).
    #[arg(long, default_value = "1/1")]
    shard: ShardSpec,
    /// Run directory [default: runs/<run-id>, derived from the settings so a re-run resumes].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Abort when more than this fraction of finished trials are errors (after 20 trials).
    #[arg(long)]
    max_error_rate: Option<f64>,
    /// Seed for the trial order, recorded in the manifest.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// How the `svc` condition selects: the context engine (`svc`), plain BM25 top-k chunks
    /// (`bm25-topk`), a seeded random selection (`random`) or the gold-evidence oracle
    /// (`oracle-evidence`, an upper bound). Recorded in the manifest (`selector`).
    #[arg(long, value_enum, default_value_t)]
    selector: SelectorName,
    /// Ranking weights of the `svc` selector: a weights file (`svc learning show --json`, or
    /// the state home's learning/weights.json) or a JSON object of weight names and values.
    /// Recorded in the manifest (`ranking_weights`); compare runs with `svc report
    /// --compare-runs`.
    #[arg(long, value_name = "FILE")]
    ranking_weights: Option<PathBuf>,
    /// When stderr is not a terminal, print a progress line every this many seconds (0: never).
    #[arg(long, default_value_t = 30)]
    progress_every: u64,
    /// Scorer [default: the workload's]. `qa-judge-v1` is graded by a model: see --judge.
    #[arg(long, value_enum)]
    scorer: Option<ScorerName>,
    /// The runner that grades answers for a model-graded scorer (`qa-judge-v1`) [default: the
    /// run's runner]. The fixture cannot judge: naming it is an error.
    #[arg(long, value_name = "RUNNER")]
    judge: Option<String>,
    /// For latency claims: run each task's conditions back to back in a seeded order (no
    /// condition systematically follows itself), one call at a time, and ask local
    /// OpenAI-compatible servers not to reuse prompt prefixes (`"cache_prompt": false`, as
    /// llama.cpp's server takes it). Recorded in the manifest and the run id.
    #[arg(long)]
    cache_neutral: bool,
    /// Worker threads for local work, at least 1 [default: all cores].
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    threads: Option<usize>,
    /// Call upstream for every HTTP request: neither read nor write the response cache.
    #[arg(long, conflicts_with = "cache")]
    no_cache: bool,
    /// Use the response cache even when the runner samples (temperature > 0); each replicate
    /// keeps its own cached sample.
    #[arg(long)]
    cache: bool,
    /// Resume a run directory made by another svc version or with other settings (the
    /// manifest's forced_over lists what differed).
    #[arg(long)]
    force: bool,
    /// Run again the trials whose record is an error, replacing those records.
    #[arg(long)]
    retry_errors: bool,
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
    let shard = args.shard.resolve(|name| std::env::var(name).ok())?;
    let workload = workload::load(
        &workloads_root(),
        &args.workload,
        &LoadOptions {
            cache_dir: state_home.join("cache"),
        },
    )
    .with_context(|| format!("loading workload {}", args.workload))?;
    let mut runner = Runner::load(&runners_root(), &args.runner)
        .with_context(|| format!("loading runner {}", args.runner))?;
    if args.cache_neutral {
        runner.set_cache_neutral();
    }
    let scorer_name = args.scorer.unwrap_or(workload.scorer());
    if args.judge.is_some() && !scorer_name.is_model_graded() {
        anyhow::bail!(
            "--judge grades answers for a model-graded scorer; the scorer is {scorer_name} (pass --scorer qa-judge-v1)"
        );
    }
    let runner = Arc::new(runner);
    let judge = match (scorer_name.is_model_graded(), &args.judge) {
        (false, _) => None,
        (true, None) => Some(Arc::new(Judge::new(runner.clone())?)),
        (true, Some(name)) => {
            let mut judge = Runner::load(&runners_root(), name)
                .with_context(|| format!("loading judge runner {name}"))?;
            if args.cache_neutral {
                judge.set_cache_neutral();
            }
            Some(Arc::new(Judge::new(Arc::new(judge))?))
        }
    };
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
        periodic_progress(String::new(), args.progress_every)
    };
    let via_proxy = args.via_proxy || runner.spec.via_proxy;
    let mut settings = RunSettings {
        via_proxy,
        scorer: scorer_name,
        workload: Arc::new(workload),
        runner,
        conditions,
        native_compaction: args.native_compaction,
        budgets,
        replicates: args.replicates,
        shard,
        out_dir: PathBuf::new(),
        max_error_rate: args.max_error_rate,
        seed: args.seed,
        selector: match &args.ranking_weights {
            None => selector::build(args.selector, args.seed),
            Some(path) => {
                if args.selector != SelectorName::Svc {
                    anyhow::bail!(
                        "--ranking-weights sets the weights of the svc selector; drop --selector {}",
                        args.selector
                    );
                }
                engine_with_weights(path)?
            }
        },
        claim_checker: scorer::default_claim_checker(),
        state_home,
        threads: args.threads,
        progress,
        fixed_point: args.fixed_point,
        audit: AuditSettings::default(),
        cache_neutral: args.cache_neutral,
        judge,
    };
    // A judge's calls use the cache like the answers': on when either runner would have it on.
    let use_cache = !args.no_cache
        && settings.makes_http_calls()
        && (args.cache
            || AuditSettings::cache_by_default(&settings.runner)
            || settings
                .judge
                .as_ref()
                .is_some_and(|j| AuditSettings::cache_by_default(&j.runner)));
    settings.audit = AuditSettings {
        cache: use_cache.then(|| Arc::new(ResponseCache::open(&settings.state_home))),
        force: args.force,
        retry_errors: args.retry_errors,
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
                "run {}: {} trials written ({} errors), {} already present, {} planned, {:.2} s ({})",
                summary.run_dir.display(),
                summary.written,
                summary.errors,
                summary.skipped,
                summary.planned,
                summary.elapsed_seconds,
                rate(summary.written, summary.elapsed_seconds)
            );
            if settings.makes_http_calls() {
                println!(
                    "cache:    {} ({} calls served from it)",
                    if settings.audit.cache.is_some() {
                        "on"
                    } else {
                        "off"
                    },
                    summary.cache_hits
                );
            }
            if summary.retried_errors > 0 {
                println!(
                    "retried:  {} error records replaced",
                    summary.retried_errors
                );
            }
            println!(
                "records:  {}",
                summary.run_dir.join("trials.jsonl").display()
            );
            println!(
                "manifest: {}",
                summary.run_dir.join("manifest.json").display()
            );
            println!(
                "requests: {} (show one with `svc runs show {} TASK_ID`)",
                summary
                    .run_dir
                    .join(svc::harness::audit::REQUESTS_LOG)
                    .display(),
                summary.run_dir.display()
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

/// A trial rate people can read: trials per second when that is at least one, else seconds per
/// trial (a real model takes seconds; "0 trials/s" says nothing).
pub(crate) fn rate(trials: u64, seconds: f64) -> String {
    if trials == 0 {
        return "no trials".into();
    }
    let per_second = trials as f64 / seconds.max(1e-9);
    if per_second >= 1.0 {
        format!("{per_second:.0} trials/s")
    } else {
        format!("{:.1} s/trial", seconds / trials as f64)
    }
}

/// For stderr that is not a terminal (CI, logs, `make bench-real` in a pipe): a progress line at
/// most every `every_seconds`, and one at the end. `None` when `every_seconds` is 0.
pub(crate) fn periodic_progress(
    label: String,
    every_seconds: u64,
) -> Option<Arc<dyn Fn(Progress) + Send + Sync>> {
    if every_seconds == 0 {
        return None;
    }
    let started = std::time::Instant::now();
    let last = Mutex::new(started);
    Some(Arc::new(move |p: Progress| {
        let Ok(mut last) = last.lock() else { return };
        let finished = p.done >= p.total;
        if !finished && last.elapsed().as_secs() < every_seconds {
            return;
        }
        *last = std::time::Instant::now();
        let elapsed = started.elapsed().as_secs_f64();
        eprintln!(
            "progress: {label}{}/{} trials, {} errors, {:.0} s elapsed, {}",
            p.done,
            p.total,
            p.errors,
            elapsed,
            rate(p.done, elapsed)
        );
    }))
}

/// The context engine's selector with the ranking weights of `path` (`--ranking-weights`).
pub(crate) fn engine_with_weights(
    path: &std::path::Path,
) -> anyhow::Result<std::sync::Arc<dyn svc::harness::condition::ContextSelector>> {
    let weights = svc::daemon::learning::store::read_weights(path)
        .with_context(|| "reading --ranking-weights".to_string())?;
    Ok(std::sync::Arc::new(
        svc::harness::condition::EngineSelector {
            options: svc::context::select::SelectOptions {
                weights,
                ..Default::default()
            },
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::rate;

    #[test]
    fn rates_read_well_for_slow_and_fast_runs() {
        assert_eq!(rate(184, 960.0), "5.2 s/trial");
        assert_eq!(rate(1000, 2.0), "500 trials/s");
        assert_eq!(rate(0, 1.0), "no trials");
    }
}
