//! `svc verify-claims`: measure svc's claims about itself on a repository (default: the
//! current directory), print the verdicts and write `.svc_verification.json` there. Exit 0
//! when no claim failed, 1 when one did, 2 on errors.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use svc::verification::{self, ClaimStatus, Thresholds, VerificationReport};

use super::Format;

#[derive(Debug, Args)]
pub struct VerifyClaimsArgs {
    /// The repository to measure on (the report is written into it).
    #[arg(default_value = ".")]
    path: PathBuf,
    /// Selection budget of the reduction and latency claims (tokens).
    #[arg(long, default_value_t = verification::DEFAULT_BUDGET)]
    budget: usize,
    /// The token_reduction claim passes at this mean reduction or more (percent).
    #[arg(long, default_value_t = Thresholds::default().min_reduction_percent)]
    min_reduction_percent: f64,
    /// The selection_latency claim passes at this median or less (milliseconds).
    #[arg(long, default_value_t = Thresholds::default().max_select_p50_ms)]
    max_select_p50_ms: f64,
    /// `text` prints a table; `json` prints the report as written.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

pub fn run(args: VerifyClaimsArgs) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(args.budget > 0, "--budget must be at least 1 token");
    anyhow::ensure!(
        args.min_reduction_percent.is_finite() && args.max_select_p50_ms.is_finite(),
        "--min-reduction-percent and --max-select-p50-ms must be numbers"
    );
    // A threshold no measurement can meet (or every one meets) makes the verdict meaningless.
    anyhow::ensure!(
        (0.0..=100.0).contains(&args.min_reduction_percent),
        "--min-reduction-percent is {}: give a percentage from 0 to 100",
        args.min_reduction_percent
    );
    anyhow::ensure!(
        args.max_select_p50_ms > 0.0,
        "--max-select-p50-ms is {}: give a positive number of milliseconds",
        args.max_select_p50_ms
    );
    let thresholds = Thresholds {
        min_reduction_percent: args.min_reduction_percent,
        max_select_p50_ms: args.max_select_p50_ms,
    };
    let report = verification::verify(&args.path, args.budget, thresholds)
        .with_context(|| format!("verifying svc's claims on {}", args.path.display()))?;
    verification::write_report(&args.path, &report)?;
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Text => print!("{}", render(&report)),
    }
    eprintln!(
        "svc: wrote {}",
        args.path.join(verification::REPORT_FILE).display()
    );
    Ok(if report.passed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn render(report: &VerificationReport) -> String {
    let r = &report.repository;
    let mut out = format!(
        "svc {} on {} ({} files, {} fragments, {} tokens), budget {}\n| claim | status | value | target | detail |\n|---|---|---:|---|---|\n",
        report.svc_version, r.name, r.files, r.fragments, r.tokens, report.budget
    );
    for claim in &report.claims {
        let status = match claim.status {
            ClaimStatus::Pass => "pass",
            ClaimStatus::Fail => "FAIL",
            ClaimStatus::Skipped => "skipped",
        };
        out.push_str(&format!(
            "| {} | {status} | {:.1} {} | {} | {} |\n",
            serde_json::to_value(claim.claim)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            claim.value,
            claim.unit,
            claim.target,
            claim.detail
        ));
    }
    let failed = report
        .claims
        .iter()
        .filter(|c| c.status == ClaimStatus::Fail)
        .count();
    let skipped = report
        .claims
        .iter()
        .filter(|c| c.status == ClaimStatus::Skipped)
        .count();
    // "all claims hold" over a repository where most were skipped overstated what was checked.
    out.push_str(&match (failed, skipped) {
        (0, 0) => "all claims hold\n".to_string(),
        (0, skipped) => format!(
            "the claims checked hold; {skipped} of {} skipped (see their detail)\n",
            report.claims.len()
        ),
        (failed, _) => format!("{failed} claim(s) failed\n"),
    });
    out
}
