//! `svc report`, `svc gate` and the hidden `svc records generate`.
//!
//! Exit codes: 0 done (gate passed); 1 the gate found breaches; 2 unreadable or invalid inputs
//! or options, or units of the gate that are not comparable (without `--allow-partial`).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use svc::report::gate::{self, Thresholds};
use svc::report::{self, PricingSnapshot, Report, ReportOptions, render};
use svc::trial::record::Condition;

mod costs;

/// Default thresholds file of `svc gate`.
pub const DEFAULT_THRESHOLDS: &str = "reports/gate.toml";
/// Default baseline summary of `svc gate`.
pub const DEFAULT_BASELINE: &str = "reports/baseline/summary.json";

/// Options shared by `svc report` and `svc gate` that decide how statistics are computed.
#[derive(Debug, Args)]
pub struct StatisticsArgs {
    /// Seed of the bootstrap generator.
    #[arg(long, default_value_t = ReportOptions::default().seed)]
    seed: u64,
    /// Bootstrap resamples.
    #[arg(long, default_value_t = ReportOptions::default().resamples, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=super::MAX_RESAMPLES))]
    resamples: usize,
    /// Confidence level of the intervals.
    #[arg(long, default_value_t = ReportOptions::default().confidence)]
    confidence: f64,
    /// Non-inferiority tolerance for quality, recall and unsupported rate.
    #[arg(long, default_value_t = ReportOptions::default().tolerance)]
    tolerance: f64,
    /// Also compare every condition with this one (besides `raw`).
    #[arg(long, value_enum)]
    baseline_condition: Option<Condition>,
    /// Pricing snapshot (TOML or JSON: model → $/Mtok in/out, `input_per_mtok` or a runner
    /// snapshot's `input_usd_per_mtok`) for a projected-cost column.
    #[arg(long)]
    pricing: Option<PathBuf>,
}

impl StatisticsArgs {
    fn settings(&self) -> anyhow::Result<ReportOptions> {
        let pricing = match &self.pricing {
            Some(path) => Some((PricingSnapshot::load(path)?, path.clone())),
            None => None,
        };
        Ok(ReportOptions {
            seed: self.seed,
            resamples: self.resamples,
            confidence: self.confidence,
            tolerance: self.tolerance,
            baseline_condition: self.baseline_condition,
            pricing,
            task_scores: false,
        })
    }
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Record files, run directories (`runs/<id>/`) or folders of shards.
    #[arg(
        required_unless_present = "compare_runs",
        conflicts_with = "compare_runs"
    )]
    runs: Vec<PathBuf>,
    /// Compare two record sets (run directories, `runs/` trees or record files) with the same
    /// tasks: every condition of B against the same condition of A, paired by task, budget and
    /// replicate; the report lists what differs in their manifests, and a second table what B
    /// buys and costs (task score, unsupported-claim rate, context tokens, model calls).
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    compare_runs: Option<Vec<PathBuf>>,
    /// Output directory for report.md, summary.csv, comparisons.csv, summary.json and SVGs.
    #[arg(long, default_value = "reports/out")]
    out: PathBuf,
    /// A stored summary.json to compare per-condition means with.
    #[arg(long)]
    baseline: Option<PathBuf>,
    #[command(flatten)]
    statistics: StatisticsArgs,
}

#[derive(Debug, Args)]
pub struct GateArgs {
    /// Record files, run directories or folders of shards.
    #[arg(required = true)]
    runs: Vec<PathBuf>,
    /// The stored baseline summary.
    #[arg(long, default_value = DEFAULT_BASELINE)]
    baseline: PathBuf,
    /// Gate thresholds (TOML).
    #[arg(long, default_value = DEFAULT_THRESHOLDS)]
    thresholds: PathBuf,
    /// Write the runs' summary as the new baseline instead of gating.
    #[arg(long)]
    update_baseline: bool,
    /// Gate the units present on both sides and list the others, instead of exiting 2 when a
    /// unit (workload, version, budget, model, condition) is on one side only.
    #[arg(long)]
    allow_partial: bool,
    #[command(flatten)]
    statistics: StatisticsArgs,
}

#[derive(Debug, Args)]
pub struct GenerateArgs {
    /// Number of records (a multiple of 4 gives complete pairs).
    #[arg(long)]
    n: usize,
    /// Output JSONL file.
    #[arg(long)]
    out: PathBuf,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn usage_error(error: anyhow::Error) -> ExitCode {
    eprintln!("svc: {error:#}");
    ExitCode::from(2)
}

/// Where the problems `warn_about_inputs` counts are listed in full.
const LISTED_IN_REPORT: &str = "report.md";
const LISTED_BY_VALIDATE: &str = "`svc records validate` lists them";

fn warn_about_inputs(report: &Report, listed: &str) {
    let inputs = &report.inputs;
    if inputs.invalid_records > 0 {
        eprintln!(
            "svc: {} invalid record(s) excluded ({listed}), e.g.:",
            inputs.invalid_records
        );
        for invalid in inputs.invalid.iter().take(5) {
            eprintln!("  {}:{}: {}", invalid.file, invalid.line, invalid.message);
        }
    }
    if inputs.mixed_schema_versions() {
        let versions: Vec<String> = inputs
            .schema_versions
            .iter()
            .map(|(v, n)| format!("{v} ({n})"))
            .collect();
        eprintln!("svc: mixed schema versions: {}", versions.join(", "));
    }
    if inputs.valid_records == 0 {
        eprintln!("svc: no valid records in the inputs");
    }
    let pairing = &report.pairing;
    if pairing.duplicates > 0 {
        eprintln!(
            "svc: {} duplicate record(s) (same task, condition, budget and replicate): the paired statistics keep the first of each, the per-condition table counts all; was a run given twice, or written twice into one folder?",
            pairing.duplicates
        );
    }
    if pairing.complete_units < pairing.units {
        eprintln!(
            "svc: {} of {} pairing units are incomplete{}",
            pairing.units - pairing.complete_units,
            pairing.units,
            if listed == LISTED_IN_REPORT {
                " (see report.md)"
            } else {
                ""
            }
        );
    }
}

pub fn run_report(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let options = match args.statistics.settings() {
        Ok(options) => options,
        Err(error) => return Ok(usage_error(error)),
    };
    // Ignored in silence before: with --compare-runs each condition of B is compared with the
    // same condition of A, never with another condition.
    if args.compare_runs.is_some() && options.baseline_condition.is_some() {
        return Ok(usage_error(anyhow::anyhow!(
            "--baseline-condition has no effect with --compare-runs, which compares each condition of the second set with the same condition of the first; drop one of them"
        )));
    }
    // `-` reads records from stdin, as `svc records validate -` does: spooled to a file named
    // stdin.jsonl, which is what the report's input list then names.
    let mut runs = args.runs.clone();
    let mut _spool = None;
    if let Some(slot) = runs.iter_mut().find(|p| p.as_os_str() == "-") {
        let spool = tempfile::tempdir().context("creating a folder for stdin's records")?;
        let path = spool.path().join("stdin.jsonl");
        _spool = Some(spool);
        let mut file =
            File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        std::io::copy(&mut std::io::stdin().lock(), &mut file).context("reading stdin")?;
        *slot = path;
    }
    let built = match &args.compare_runs {
        Some(sets) => report::build_runs_report(&sets[..1], &sets[1..], &options),
        None => report::build_report(&runs, &options),
    };
    let mut report = match built {
        Ok(report) => report,
        Err(error) => return Ok(usage_error(error.into())),
    };
    if let Some(path) = &args.baseline {
        match Report::load_summary(path) {
            Ok(baseline) => {
                warn_if_partial_baseline(path, &baseline);
                match report::compare_summaries(&report, &baseline) {
                    Ok(comparison) => report.baseline_comparison = Some(comparison),
                    Err(error) => {
                        return Ok(usage_error(
                            anyhow::Error::from(error).context(format!("{}", path.display())),
                        ));
                    }
                }
            }
            Err(error) => return Ok(usage_error(error.into())),
        }
    }
    warn_about_inputs(&report, LISTED_IN_REPORT);
    warn_about_live_runs(&runs);
    if let Some(sets) = &args.compare_runs {
        warn_about_live_runs(sets);
    }
    if args.compare_runs.is_some() && report.pairing.complete_units == 0 {
        // Nothing pairs: every comparison would be empty, and "main vs this commit" fed the
        // wrong folder must not read as a pass.
        return Ok(usage_error(anyhow::anyhow!(
            "the two record sets share no task (of the same workload, budget and model): --compare-runs needs two runs of the same tasks"
        )));
    }
    if args.compare_runs.is_some() && report.comparisons.is_empty() {
        // An empty (or wholly invalid) second set pairs nothing either; its first set alone
        // made every unit "complete" and the run exit 0.
        return Ok(usage_error(anyhow::anyhow!(
            "no condition of the second record set pairs with the first (is it empty, or of other conditions?): --compare-runs needs two runs of the same tasks and conditions"
        )));
    }
    let written = render::write_all(&report, &args.out)?;
    print!("{}", render::comparison_table(&report));
    if let Some(sets) = &args.compare_runs
        && let Some(table) = costs::table(&report, &sets[0], &sets[1])?
    {
        print!("{table}");
    }
    for path in written {
        println!("wrote {}", path.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// A baseline taken from a partial run (by an older build, or with --allow-partial) holds a
/// run to part of its tasks: said every time one is used (gate, report, benchmark).
pub(crate) fn warn_if_partial_baseline(path: &Path, baseline: &Report) {
    if baseline.pairing.complete_units < baseline.pairing.units {
        eprintln!(
            "svc: warning: the baseline {} has {} of {} pairing units incomplete (taken from a partial run); regenerate it from a whole run with `svc gate --update-baseline RUN…`",
            path.display(),
            baseline.pairing.units - baseline.pairing.complete_units,
            baseline.pairing.units
        );
    }
}

/// The run directories among `inputs` that a running `svc run` is still writing.
fn live_runs(inputs: &[PathBuf]) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    for input in inputs {
        if input.is_dir() {
            // A folder of runs or shards holds the run directories (found by probing: a
            // live shard inside one was gated as if it had ended).
            run_dirs_under(input, 3, &mut dirs);
        } else if let Some(parent) = input.parent() {
            dirs.push(parent.to_path_buf());
        }
    }
    dirs.sort();
    dirs.dedup();
    dirs.retain(|dir| svc::harness::run::is_being_written(dir));
    dirs
}

/// `dir` and its subdirectories down to `depth` levels: the places a run directory can be.
fn run_dirs_under(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    out.push(dir.to_path_buf());
    if depth == 0 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        // Not followed through links: a run writes its own directory.
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            run_dirs_under(&entry.path(), depth - 1, out);
        }
    }
}

/// Says which inputs are still being written: their figures are partial.
fn warn_about_live_runs(inputs: &[PathBuf]) {
    for live in live_runs(inputs) {
        eprintln!(
            "svc: {} is still being written (a running `svc run` holds its run.lock): these figures are partial",
            live.display()
        );
    }
}

pub fn run_gate(args: GateArgs) -> anyhow::Result<ExitCode> {
    let mut options = match args.statistics.settings() {
        Ok(options) => options,
        Err(error) => return Ok(usage_error(error)),
    };
    options.task_scores = true;
    let report = match report::build_report(&args.runs, &options) {
        Ok(report) => report,
        Err(error) => return Ok(usage_error(error.into())),
    };
    warn_about_inputs(&report, LISTED_BY_VALIDATE);
    warn_about_live_runs(&args.runs);
    if report.inputs.valid_records == 0 {
        return Ok(usage_error(anyhow::anyhow!("no valid records to gate on")));
    }
    if report.inputs.invalid_records > 0 {
        // A gate (or a baseline) must not rest on records it could not read: a torn last line
        // or a foreign file would otherwise pass unseen.
        return Ok(usage_error(anyhow::anyhow!(
            "{} invalid record(s) in the inputs: fix or remove them before gating (`svc records validate` lists them)",
            report.inputs.invalid_records
        )));
    }
    if report.pairing.duplicates > 0 {
        // Which copy the pairing keeps depends on the order of the inputs, so a duplicated
        // regression could pass or fail by file order alone.
        return Ok(usage_error(anyhow::anyhow!(
            "{} duplicate record(s) in the inputs (same task, condition, budget and replicate): the gate cannot tell which to use; remove them (a run given twice, or two runs written into one folder)",
            report.pairing.duplicates
        )));
    }
    if args.update_baseline {
        // A baseline is what later runs are held to: one taken from a run still being written,
        // or with units missing a condition, held them to a few hundred records and passed.
        if let Some(live) = live_runs(&args.runs).first() {
            return Ok(usage_error(anyhow::anyhow!(
                "{} is still being written (a running `svc run` holds its run.lock): a baseline from it would be partial; update the baseline when the run has ended",
                live.display()
            )));
        }
        let pairing = &report.pairing;
        if pairing.complete_units < pairing.units && !args.allow_partial {
            return Ok(usage_error(anyhow::anyhow!(
                "{} of {} pairing units are incomplete (a truncated or interrupted run?): resume the run (`svc run … --out` again), or pass --allow-partial to take this baseline anyway",
                pairing.units - pairing.complete_units,
                pairing.units
            )));
        }
        let json = serde_json::to_string_pretty(&report)? + "\n";
        if let Some(parent) = args.baseline.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating {}", parent.display()))?;
        }
        svc::state::atomic_write_shared(&args.baseline, json.as_bytes())
            .with_context(|| format!("writing {}", args.baseline.display()))?;
        println!("baseline written: {}", args.baseline.display());
        return Ok(ExitCode::SUCCESS);
    }
    let thresholds = if args.thresholds.exists() || args.thresholds != Path::new(DEFAULT_THRESHOLDS)
    {
        match Thresholds::load(&args.thresholds) {
            Ok(thresholds) => thresholds,
            Err(error) => return Ok(usage_error(error.into())),
        }
    } else {
        Thresholds::default()
    };
    let baseline = match Report::load_summary(&args.baseline) {
        Ok(baseline) => baseline,
        Err(error) => {
            return Ok(usage_error(anyhow::Error::from(error).context(
                "no usable baseline; create one deliberately with `svc gate --update-baseline RUN…`",
            )));
        }
    };
    warn_if_partial_baseline(&args.baseline, &baseline);
    let (Some(current_scores), Some(baseline_scores)) =
        (&report.task_scores, &baseline.task_scores)
    else {
        return Ok(usage_error(anyhow::anyhow!(
            "{}: the baseline has no per-task scores; regenerate it with `make baseline` (svc gate --update-baseline)",
            args.baseline.display()
        )));
    };
    let outcome = gate::evaluate(current_scores, baseline_scores, &thresholds, &options);
    // Units on one side only are listed before anything is gated; units lacking tasks after
    // the overlap is known to hold a unit at all.
    if let Some(code) = list_partial(
        &outcome.not_comparable,
        args.allow_partial,
        [
            "not comparable",
            "not comparable (left out, --allow-partial)",
        ],
        "are on one side only or share no task with the baseline; gate the overlap with --allow-partial, or regenerate the baseline",
    ) {
        return Ok(code);
    }
    if outcome.units == 0 {
        return Ok(usage_error(anyhow::anyhow!(
            "no unit of this run is in the baseline: nothing to gate"
        )));
    }
    if let Some(code) = list_partial(
        &outcome.missing_tasks,
        args.allow_partial,
        [
            "missing tasks",
            "gated on the tasks both sides have (--allow-partial)",
        ],
        "lack tasks the baseline has (a partial or truncated run?); gate the tasks both sides have with --allow-partial, or regenerate the baseline",
    ) {
        return Ok(code);
    }
    let breaches: Vec<_> = outcome.breaches().collect();
    if breaches.is_empty() {
        println!(
            "gate passed: {} unit(s), {} check(s) within thresholds of {} (one-sided cluster bootstrap over tasks, α = {:.2})",
            outcome.units,
            outcome.checks.len(),
            args.baseline.display(),
            outcome.alpha
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "gate failed: {} breach(es) of {} check(s) in {} unit(s) (one-sided cluster bootstrap over tasks, α = {:.2})",
        breaches.len(),
        outcome.checks.len(),
        outcome.units,
        outcome.alpha
    );
    for breach in breaches {
        println!("  {breach}");
    }
    Ok(ExitCode::from(1))
}

/// Prints the units a gate cannot take whole, under the heading for `allow_partial`
/// (`[without, with]`); without `--allow-partial` they end the gate: exit 2, saying what they
/// `problem` and what to do.
fn list_partial(
    units: &[gate::NotComparable],
    allow_partial: bool,
    headings: [&str; 2],
    problem: &str,
) -> Option<ExitCode> {
    if units.is_empty() {
        return None;
    }
    println!(
        "{}: {} unit(s)",
        headings[usize::from(allow_partial)],
        units.len()
    );
    for unit in units {
        println!("  {unit}");
    }
    if allow_partial {
        return None;
    }
    eprintln!("svc: {} unit(s) {problem}", units.len());
    Some(ExitCode::from(2))
}

pub fn run_generate(args: GenerateArgs) -> anyhow::Result<ExitCode> {
    let file =
        File::create(&args.out).with_context(|| format!("creating {}", args.out.display()))?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    report::generate::write_records(&mut out, args.n, args.seed)
        .with_context(|| format!("writing {}", args.out.display()))?;
    out.flush()?;
    eprintln!("wrote {} records to {}", args.n, args.out.display());
    Ok(ExitCode::SUCCESS)
}
