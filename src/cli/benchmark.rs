//! `svc benchmark`: the main job. Runs the built-in workload suite through the trial runner,
//! aggregates the records and prints the paired comparison.
//!
//! - without `--compare-baseline`: the `svc` and `combined` conditions;
//! - `--compare-baseline`: also the `raw` and `native_compaction` baselines, and the paired
//!   comparison of every condition with `raw`;
//! - `--compare-baseline FILE`: the `svc` and `combined` conditions, compared with a stored
//!   `summary.json` (from `svc report` or `svc gate --update-baseline`).
//!
//! - `--selectors bm25-topk,random,oracle-evidence`: the `svc` condition again under each
//!   selector setting, into `selectors/<setting>/<workload>` (outside `runs/`, so the report
//!   and the gate see the engine's runs only), then a table of each setting beside the engine
//!   (with `--compare-baseline`, `bm25-topk` runs unless `--selectors` says otherwise);
//! - `--readers fixture,fixture-in-order`: the whole benchmark under each runner (into
//!   `readers/<runner>/`), then the comparisons side by side, flagging a result that holds under
//!   one reader only.
//!
//! Every invocation writes to a new timestamped folder under `reports/out/` unless `--out` names
//! one; an existing `--out` folder resumes (trials already recorded are skipped).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::Args;
use svc::harness::arms;
use svc::harness::condition::Condition;
use svc::harness::run::{self, RunSettings, Shard};
use svc::harness::runner::{Runner, runners_root};
use svc::harness::scorer;
use svc::harness::selector::{self, SelectorName};
use svc::harness::summary::CompactionMode;
use svc::harness::workload::{self, LoadOptions, workloads_root};
use svc::report::{self, Metric, Report, ReportOptions, render};

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
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=super::MAX_REPLICATES))]
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
    #[arg(long, default_value_t = ReportOptions::default().resamples, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=super::MAX_RESAMPLES))]
    resamples: usize,
    /// Selector settings to run the `svc` condition under besides the context engine
    /// [default with --compare-baseline: bm25-topk; else none].
    #[arg(long, value_enum, value_delimiter = ',', num_args = 1..)]
    selectors: Vec<SelectorName>,
    /// Run the benchmark under each of these runners (e.g. `fixture,fixture-in-order`) and flag
    /// a result that holds under one only; replaces --runner.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    readers: Vec<String>,
    /// When stderr is not a terminal, print a progress line every this many seconds (0: never).
    #[arg(long, default_value_t = 30)]
    progress_every: u64,
    /// Ranking weights of the svc condition's selector (see `svc run --ranking-weights`).
    #[arg(long, value_name = "FILE")]
    ranking_weights: Option<PathBuf>,
    /// For latency claims: run each task's conditions back to back in a seeded order, one call
    /// at a time, and ask local OpenAI-compatible servers not to reuse prompt prefixes
    /// (`"cache_prompt": false`); see `svc run --cache-neutral`.
    #[arg(long)]
    cache_neutral: bool,
}

/// What one reader's benchmark produced.
struct ReaderRun {
    runner: String,
    report: Report,
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
            let baseline = Report::load_summary(path)
                .with_context(|| format!("loading the stored baseline {}", path.display()))?;
            super::report::warn_if_partial_baseline(path, &baseline);
            anyhow::Ok(baseline)
        })
        .transpose()?;
    // The report's options are checked before any trial runs: a bad --resamples failed only
    // after every trial had been paid for.
    report::check_options(&ReportOptions {
        seed: args.seed,
        resamples: args.resamples,
        ..ReportOptions::default()
    })
    .context("--resamples")?;
    let out = match &args.out {
        Some(out) => out.clone(),
        None => default_out()?,
    };
    let selectors: Vec<SelectorName> = if args.selectors.is_empty() {
        match (&args.compare_baseline, stored_baseline) {
            (Some(_), None) => vec![SelectorName::Bm25Topk],
            _ => Vec::new(),
        }
    } else {
        let mut chosen = args.selectors.clone();
        chosen.retain(|s| *s != SelectorName::Svc);
        chosen.dedup();
        chosen
    };
    let readers: Vec<String> = if args.readers.is_empty() {
        vec![args.runner.clone()]
    } else {
        args.readers.clone()
    };
    let mut done: Vec<ReaderRun> = Vec::new();
    for reader in &readers {
        let reader_out = if readers.len() == 1 {
            out.clone()
        } else {
            out.join("readers").join(reader_label(reader))
        };
        if readers.len() > 1 {
            println!();
            println!("== reader {reader} ==");
        }
        let report = run_reader(
            &args,
            reader,
            &reader_out,
            &conditions,
            &selectors,
            baseline.as_ref(),
        )?;
        done.push(ReaderRun {
            runner: reader.clone(),
            report,
        });
    }
    if done.len() > 1 {
        println!();
        print!("{}", reader_agreement(&done));
    }
    Ok(ExitCode::SUCCESS)
}

/// The benchmark under one runner: the suite's runs, the selector settings' runs, the report
/// and the tables.
fn run_reader(
    args: &BenchmarkArgs,
    runner_name: &str,
    out: &Path,
    conditions: &[Condition],
    selectors: &[SelectorName],
    baseline: Option<&Report>,
) -> anyhow::Result<Report> {
    let state_home = svc::state::home()?;
    let mut runner = Runner::load(&runners_root(), runner_name)
        .with_context(|| format!("loading runner {runner_name}"))?;
    if args.cache_neutral {
        runner.set_cache_neutral();
    }
    let runner = Arc::new(runner);
    let names: Vec<String> = if args.workloads.is_empty() {
        SUITE.iter().map(|s| s.to_string()).collect()
    } else {
        args.workloads.clone()
    };
    let explicit = !args.workloads.is_empty();
    let mut budgets = args.budgets.clone();
    budgets.sort_unstable();
    budgets.dedup();

    // Every workload is loaded before the first trial: a misspelt name failed only after the
    // workloads before it had run.
    let mut workloads = Vec::new();
    for name in &names {
        let loaded = workload::load(
            &workloads_root(),
            name,
            &LoadOptions {
                cache_dir: state_home.join("cache"),
            },
        );
        match loaded {
            Ok(loaded) => workloads.push((name, loaded)),
            // The suite's external-data workload is optional; a named one is not.
            Err(error) if !explicit && name == "halueval-distractor" => {
                eprintln!("benchmark: skipping {name}: {error}");
            }
            Err(error) => {
                return Err(anyhow::Error::from(error).context(format!("loading workload {name}")));
            }
        }
    }
    let mut run_dirs = Vec::new();
    let mut arm_dirs: Vec<Vec<PathBuf>> = Vec::new();
    for (name, loaded) in workloads {
        let workload = Arc::new(loaded);
        let settings = RunSettings {
            scorer: workload.scorer(),
            workload: workload.clone(),
            runner: runner.clone(),
            conditions: conditions.to_vec(),
            native_compaction: args.native_compaction,
            budgets: budgets.clone(),
            replicates: args.replicates,
            shard: Shard::default(),
            out_dir: out.join("runs").join(name),
            max_error_rate: None,
            seed: args.seed,
            selector: match &args.ranking_weights {
                Some(path) => super::run::engine_with_weights(path)?,
                None => selector::build(SelectorName::Svc, args.seed),
            },
            claim_checker: scorer::default_claim_checker(),
            state_home: state_home.clone(),
            threads: None,
            progress: super::run::periodic_progress(format!("{name}: "), args.progress_every),
            audit: run::AuditSettings::defaults(&runner, &state_home),
            fixed_point: args.fixed_point,
            via_proxy: false,
            cache_neutral: args.cache_neutral,
            judge: None,
        };
        eprintln!(
            "benchmark: {name} ({} conditions, budgets {:?}, runner {runner_name})…",
            conditions.len(),
            budgets,
        );
        let summary = run::execute(&settings)
            .with_context(|| format!("running {name} into {}", settings.out_dir.display()))?;
        eprintln!(
            "benchmark: {name}: {} trials written ({} errors), {} already present, {:.1} s",
            summary.written, summary.errors, summary.skipped, summary.elapsed_seconds
        );
        let mut arms = vec![settings.out_dir.clone()];
        for &setting in selectors {
            let arm = RunSettings {
                conditions: vec![Condition::Svc],
                out_dir: out.join("selectors").join(setting.as_str()).join(name),
                selector: selector::build(setting, args.seed),
                progress: super::run::periodic_progress(
                    format!("{name} ({setting}): "),
                    args.progress_every,
                ),
                scorer: settings.scorer,
                workload: workload.clone(),
                runner: runner.clone(),
                native_compaction: args.native_compaction,
                budgets: budgets.clone(),
                replicates: args.replicates,
                shard: Shard::default(),
                max_error_rate: None,
                seed: args.seed,
                claim_checker: scorer::default_claim_checker(),
                state_home: state_home.clone(),
                threads: None,
                audit: run::AuditSettings::defaults(&runner, &state_home),
                // Like for like: the baselines run with the same loop setting as svc.
                fixed_point: args.fixed_point,
                via_proxy: false,
                cache_neutral: args.cache_neutral,
                judge: None,
            };
            let summary = run::execute(&arm).with_context(|| {
                format!("running {name} ({setting}) into {}", arm.out_dir.display())
            })?;
            eprintln!(
                "benchmark: {name} (svc condition, selector {setting}): {} trials written ({} errors), {:.1} s",
                summary.written, summary.errors, summary.elapsed_seconds
            );
            arms.push(arm.out_dir);
        }
        arm_dirs.push(arms);
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
    if let Some(baseline) = baseline {
        report.baseline_comparison = Some(
            report::compare_summaries(&report, baseline)
                .context(
                    "comparing with the stored summary: run the workloads, budgets and model it covers (--workload, --budget, --runner)",
                )?,
        );
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
    if !selectors.is_empty() {
        println!();
        print!("{}", selector_table(&arm_dirs)?);
    }
    Ok(report)
}

/// A runner name or file as a folder name.
fn reader_label(runner: &str) -> String {
    Path::new(runner)
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| runner.to_string())
}

/// The `svc` condition under each selector setting, per workload: means and the paired mean
/// difference in task score against the engine.
fn selector_table(arm_dirs: &[Vec<PathBuf>]) -> anyhow::Result<String> {
    let mut out = String::from(
        "svc condition by selector (means; Δ task_score paired with the engine over shared tasks; intervals: svc report --compare-runs)\n",
    );
    out.push_str(&format!(
        "{:<28} {:<16} {:>6} {:>6} {:>10} {:>10} {:>10} {:>10}\n",
        "workload", "selector", "trials", "errors", "tokens", "task", "evidence", "Δ task"
    ));
    for arms in arm_dirs {
        let rows = arms::arm_rows(arms)?;
        for row in rows {
            let workload = row
                .run_dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.push_str(&format!(
                "{:<28} {:<16} {:>6} {:>6} {:>10.1} {:>10.4} {:>10.4} {:>10}\n",
                workload,
                row.selector,
                row.trials,
                row.errors,
                row.context_tokens,
                row.task_score,
                row.evidence_recall,
                row.paired_delta
                    .map_or_else(|| "-".into(), |(d, n)| format!("{d:+.4} ({n})"))
            ));
        }
    }
    if let (Some(first), Some(_)) = (arm_dirs.first(), arm_dirs.first().and_then(|a| a.get(1))) {
        out.push_str(&format!(
            "paired: svc report --compare-runs {} {}\n",
            first[0].display(),
            first[1].display()
        ));
    }
    Ok(out)
}

/// How a comparison's Δ task score reads: better, worse or no difference at the report's
/// confidence (by its interval).
fn direction(report: &Report, condition: Condition) -> &'static str {
    let delta = report
        .comparisons
        .iter()
        .find(|c| c.condition == condition)
        .and_then(|c| c.metric(Metric::TaskScore))
        .and_then(|m| m.delta);
    match delta {
        None => "n/a",
        Some(d) if d.ci_low > 0.0 => "better",
        Some(d) if d.ci_high < 0.0 => "worse",
        Some(_) => "no difference",
    }
}

/// Each condition's Δ task score against the baseline under every reader, flagged when the
/// readers disagree: such a result belongs to the reader, not to the condition.
fn reader_agreement(runs: &[ReaderRun]) -> String {
    let mut out = String::from("Δ task score vs the baseline condition, by reader\n");
    let mut conditions: Vec<Condition> = Vec::new();
    for run in runs {
        for c in &run.report.comparisons {
            if !conditions.contains(&c.condition) {
                conditions.push(c.condition);
            }
        }
    }
    let mut flagged = 0;
    for condition in conditions {
        let verdicts: Vec<(String, &'static str)> = runs
            .iter()
            .map(|r| (r.runner.clone(), direction(&r.report, condition)))
            .collect();
        let agree = verdicts.windows(2).all(|w| w[0].1 == w[1].1);
        flagged += usize::from(!agree);
        out.push_str(&format!(
            "{:<20} {}{}\n",
            condition.to_string(),
            verdicts
                .iter()
                .map(|(runner, v)| format!("{runner}: {v}"))
                .collect::<Vec<_>>()
                .join("; "),
            if agree {
                String::new()
            } else {
                "  <- FLAG: holds under one reader only".into()
            }
        ));
    }
    out.push_str(&format!("{flagged} result(s) differ between readers\n"));
    out
}

/// A new folder of its own, `reports/out/benchmark-<UTC timestamp>`, made now: two runs
/// started in the same second shared (and resumed into) one folder. The second gets `-2`.
fn default_out() -> anyhow::Result<PathBuf> {
    let stamp = svc::clock::rfc3339(std::time::SystemTime::now());
    // 2026-11-21T13:47:39Z -> 20261121-134739
    let compact: String = stamp
        .chars()
        .take(19)
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .map(|c| if c == 'T' { '-' } else { c })
        .collect();
    fresh_folder(
        &Path::new("reports").join("out"),
        &format!("benchmark-{compact}"),
    )
}

/// `parent/stem`, or `parent/stem-2`, `-3`, … when taken: a folder made now, for this run only.
fn fresh_folder(parent: &Path, stem: &str) -> anyhow::Result<PathBuf> {
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    for attempt in 1..1000 {
        let name = match attempt {
            1 => stem.to_string(),
            n => format!("{stem}-{n}"),
        };
        let out = parent.join(name);
        // create_dir, not create_dir_all: taking the name is atomic between two runs.
        match std::fs::create_dir(&out) {
            Ok(()) => return Ok(out),
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(error) => {
                return Err(error).with_context(|| format!("creating {}", out.display()));
            }
        }
    }
    anyhow::bail!(
        "no free benchmark folder name under {}; pass --out",
        parent.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by probing: two benchmarks started in the same second shared one folder, and the
    /// second resumed into the first's records.
    #[test]
    fn each_run_gets_a_folder_of_its_own() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = fresh_folder(dir.path(), "benchmark-20261125-131954").expect("first");
        let second = fresh_folder(dir.path(), "benchmark-20261125-131954").expect("second");
        assert_ne!(first, second);
        assert!(first.is_dir() && second.is_dir());
        assert!(
            second.ends_with("benchmark-20261125-131954-2"),
            "{second:?}"
        );
    }
}
