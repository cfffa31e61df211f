//! `svc witness`: verify an answer against evidence, manage certificates, evaluate.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use svc::witness::eval;
use svc::witness::{Mode, Profile};

#[derive(Debug, Args)]
pub struct WitnessArgs {
    #[command(subcommand)]
    command: Option<WitnessCommand>,
}

#[derive(Debug, Subcommand)]
enum WitnessCommand {
    /// Score HaluEval-format QA items (JSONL: knowledge, question, right_answer,
    /// hallucinated_answer) and print accuracy, AUROC and flag rates beside the baseline.
    Eval(EvalArgs),
}

#[derive(Debug, Args)]
struct EvalArgs {
    file: PathBuf,
    #[arg(long, value_enum, default_value_t = Profile::Qa)]
    profile: Profile,
    #[arg(long, value_enum, default_value_t = Mode::Strict)]
    mode: Mode,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Also list every misclassified answer with the witness's reasons (on stderr).
    #[arg(long)]
    explain: bool,
}

pub fn run(args: WitnessArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        Some(WitnessCommand::Eval(args)) => run_eval(args),
        None => anyhow::bail!("not yet"),
    }
}

fn run_eval(args: EvalArgs) -> anyhow::Result<ExitCode> {
    let items = eval::read_items(&args.file).context("reading evaluation items")?;
    let report = eval::evaluate_with(
        &items,
        args.profile,
        args.mode,
        |index, hallucinated, verification, flagged| {
            if args.explain && flagged != hallucinated {
                let item = &items[index];
                eprintln!(
                    "#{index} {} score {:.3}\n  Q: {}\n  A: {}",
                    if hallucinated { "MISSED hallucinated" } else { "FLAGGED right" },
                    verification.score(),
                    item.question.trim(),
                    if hallucinated { &item.hallucinated_answer } else { &item.right_answer },
                );
                for claim in verification.verifiable() {
                    eprintln!("  - [{}] {:.3} {:?}", claim.label.as_str(), claim.score, claim.claim.text);
                    for reason in &claim.reasons {
                        eprintln!("      {:?}: {}", reason.kind, reason.detail);
                    }
                    for span in &claim.evidence {
                        eprintln!("      E: {}", span.text);
                    }
                }
            }
        },
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render_eval(&report));
    }
    Ok(ExitCode::SUCCESS)
}

fn render_eval(report: &eval::EvalReport) -> String {
    let c = report.confusion;
    format!(
        "items: {} ({} answers), profile {}, mode {}\n\
         AUROC:                     {:.4}   (baseline, content-word coverage: {:.4})\n\
         accuracy:                  {:.4}\n\
         hallucinated flagged:      {:.4}   ({}/{})\n\
         right flagged (FP rate):   {:.4}   ({}/{})\n\
         confusion (positive = hallucinated):\n\
         \x20                  flagged  passed\n\
         \x20 hallucinated    {:>7}  {:>6}\n\
         \x20 right           {:>7}  {:>6}\n",
        report.items,
        report.items * 2,
        report.profile,
        report.mode,
        report.auroc,
        report.baseline_auroc,
        report.accuracy,
        report.flag_rate_hallucinated,
        c.true_positive,
        report.items,
        report.false_positive_rate,
        c.false_positive,
        report.items,
        c.true_positive,
        c.false_negative,
        c.false_positive,
        c.true_negative,
    )
}
