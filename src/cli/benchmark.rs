//! `svc benchmark`: the main job. Runs the built-in workload suite through the trial runner,
//! aggregates the records and prints the paired comparison.
//!
//! - without `--compare-baseline`: the `svc` and `combined` conditions;
//! - `--compare-baseline`: also the `raw` and `native_compaction` baselines, and the paired
//!   comparison of every condition with `raw`;
//! - `--compare-baseline FILE`: the `svc` and `combined` conditions, compared with a stored
//!   `summary.json` (from `svc report` or `svc gate --update-baseline`).
//!
//! Every invocation writes to a new timestamped folder under `reports/out/` unless `--out` names
//! one; an existing `--out` folder resumes (trials already recorded are skipped).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use svc::harness::condition::{self, Condition};
use svc::harness::run::{self, RunSettings, Shard};
use svc::harness::runner::{Runner, runners_root};
use svc::harness::scorer;
use svc::harness::summary::CompactionMode;
use svc::harness::workload::{self, LoadOptions, workloads_root};
use svc::report::{self, Report, ReportOptions, render};

/// The built-in suite, in the order it runs. `halueval-distractor` reads a HaluEval file that is
/// not part of the repository; it is skipped with a note when the file is not found.
pub const SUITE: [&str; 5] = [
    "qa-builtin",
    "needle-builtin",
    "conversation-builtin",
    "code-localization-mini",
    "halueval-distractor",
];

#[derive(Debug, Args)]
pub struct BenchmarkArgs {
    /// Also run the raw and native_compaction baselines and print the paired comparison; with
    /// FILE, compare with that stored summary.json instead.
    #[arg(long, value_name = "FILE", num_args = 0..=1)]
    compare_baseline: Option<Option<PathBuf>>,
    /// Workloads to run (comma-separated or repeated) [default: the built-in suite].
    #[arg(long = "workload", value_delimiter = ',', num_args = 1..)]
    workloads: Vec<String>,
    /// Runner name or file.
    #[arg(long, default_value = "fixture")]
    runner: String,
    /// Context budgets in tokens (comma-separated or repeated).
    #[arg(long = "budget", value_delimiter = ',', num_args = 1.., default_values_t = vec![512usize])]
    budgets: Vec<usize>,
    /// Replicates of every (task, condition, budget).
    #[arg(long, default_value_t = 1)]
    replicates: u64,
    /// How the native_compaction baseline compacts (`deterministic` or `model-summary`).
    #[arg(long, value_enum, default_value_t)]
    native_compaction: CompactionMode,
    /// Run the proof-guided loop in the svc and combined conditions (ROUNDS[,BUDGET]; see
    /// `svc run --fixed-point`).
    #[arg(long, value_name = "ROUNDS[,BUDGET]")]
    fixed_point: Option<svc::harness::fixed_point::FixedPointSetting>,
    /// Output folder [default: reports/out/benchmark-<UTC timestamp>]; an existing folder
    /// resumes.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Seed of the trial order and of the bootstrap.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Bootstrap resamples of the paired statistics.
    #[arg(long, default_value_t = ReportOptions::default().resamples)]
    resamples: usize,
}

pub fn run(args: BenchmarkArgs) -> anyhow::Result<ExitCode> {
    let stored_baseline = args.compare_baseline.as_ref().and_then(Option::as_ref);
    let conditions = match (&args.compare_baseline, stored_baseline) {
        (Some(_), None) => Condition::ALL.to_vec(),
        _ => vec![Condition::Svc, Condition::Combined],
    };
    // Load the stored summary first: a wrong path should fail before minutes of trials.
    let baseline = stored_baseline
        .map(|path| {
            Report::load_summary(path)
                .with_context(|| format!("loading the stored baseline {}", path.display()))
        })
        .transpose()?;
    let out = args.out.clone().unwrap_or_else(default_out);
    let state_home = svc::state::home()?;
    let runner = Arc::new(
        Runner::load(&runners_root(), &args.runner)
            .with_context(|| format!("loading runner {}", args.runner))?,
    );
    let names: Vec<String> = if args.workloads.is_empty() {
        SUITE.iter().map(|s| s.to_string()).collect()
    } else {
        args.workloads.clone()
    };
    let explicit = !args.workloads.is_empty();
    let mut budgets = args.budgets.clone();
    budgets.sort_unstable();
    budgets.dedup();

    let mut run_dirs = Vec::new();
    for name in &names {
        let loaded = workload::load(
            &workloads_root(),
            name,
            &LoadOptions {
                cache_dir: state_home.join("cache"),
            },
        );
        let loaded = match loaded {
            Ok(loaded) => loaded,
            // The suite's external-data workload is optional; a named one is not.
            Err(error) if !explicit && name == "halueval-distractor" => {
                eprintln!("benchmark: skipping {name}: {error}");
                continue;
            }
            Err(error) => {
                return Err(anyhow::Error::from(error).context(format!("loading workload {name}")));
            }
        };
        let settings = RunSettings {
            scorer: loaded.scorer(),
            workload: Arc::new(loaded),
            runner: runner.clone(),
            conditions: conditions.clone(),
            native_compaction: args.native_compaction,
            budgets: budgets.clone(),
            replicates: args.replicates,
            shard: Shard::default(),
            out_dir: out.join("runs").join(name),
            max_error_rate: None,
            seed: args.seed,
            selector: condition::default_selector(),
            claim_checker: scorer::default_claim_checker(),
            state_home: state_home.clone(),
            threads: None,
            progress: None,
            fixed_point: args.fixed_point,
        };
        eprintln!(
            "benchmark: {name} ({} conditions, budgets {:?}, runner {})…",
            conditions.len(),
            budgets,
            args.runner
        );
        let summary = run::execute(&settings)
            .with_context(|| format!("running {name} into {}", settings.out_dir.display()))?;
        eprintln!(
            "benchmark: {name}: {} trials written ({} errors), {} already present, {:.1} s",
            summary.written, summary.errors, summary.skipped, summary.elapsed_seconds
        );
        run_dirs.push(settings.out_dir);
    }
    if run_dirs.is_empty() {
        anyhow::bail!("no workload ran; name one with --workload");
    }

    let options = ReportOptions {
        seed: args.seed,
        resamples: args.resamples,
        ..ReportOptions::default()
    };
    let mut report = report::build_report(&run_dirs, &options).context("building the report")?;
    if let Some(baseline) = &baseline {
        report.baseline_comparison = Some(report::compare_summaries(&report, baseline));
    }
    let report_dir = out.join("report");
    let written = render::write_all(&report, &report_dir)
        .with_context(|| format!("writing the report to {}", report_dir.display()))?;
    println!();
    print!("{}", render::comparison_table(&report));
    println!();
    println!("records: {}", out.join("runs").display());
    for path in written {
        println!("wrote {}", path.display());
    }
    println!("report: {}", report_dir.join("report.md").display());
    Ok(ExitCode::SUCCESS)
}

fn default_out() -> PathBuf {
    let stamp = svc::clock::rfc3339(std::time::SystemTime::now());
    // 2026-11-21T13:47:39Z -> 20261121-134739
    let compact: String = stamp
        .chars()
        .take(19)
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .map(|c| if c == 'T' { '-' } else { c })
        .collect();
    Path::new("reports")
        .join("out")
        .join(format!("benchmark-{compact}"))
}
