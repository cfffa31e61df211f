//! `svc witness`: verify an answer against its evidence and record a certificate; show and list
//! certificates, give feedback, and evaluate on HaluEval-format data.
//!
//! Output contract of the check: stdout carries exactly the (possibly rewritten) output, so it
//! can be piped on; the certificate id and the flagged claims go to stderr, the id on a line
//! `witness-id: wit_…`. With `--json`, stdout carries the certificate instead.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use svc::witness::certificate::Certificate;
use svc::witness::nli::{self, NliSettings};
use svc::witness::store::{Store, Verdict};
use svc::witness::{Mode, Profile, WitnessInput, eval};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct WitnessArgs {
    #[command(subcommand)]
    command: Option<WitnessCommand>,
    #[command(flatten)]
    check: CheckArgs,
}

#[derive(Debug, Subcommand)]
enum WitnessCommand {
    /// Print a stored certificate (JSON).
    Show {
        /// Certificate id (wit_…).
        id: String,
    },
    /// List recent certificates, newest first.
    List {
        #[arg(long, default_value_t = 20)]
        limit: usize,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Record feedback on a certificate and print the feedback totals.
    Feedback {
        /// Certificate id (wit_…).
        id: String,
        /// false_positive: flagged a supported claim; false_negative: passed a wrong claim;
        /// correct: verdicts right; wrong_evidence: right verdict, wrong evidence cited.
        #[arg(long, value_enum)]
        verdict: Verdict,
        /// The claim (index in the certificate) the feedback is about.
        #[arg(long)]
        claim: Option<usize>,
        /// A free-text note.
        #[arg(long)]
        note: Option<String>,
    },
    /// Score HaluEval-format QA items (JSONL: knowledge, question, right_answer,
    /// hallucinated_answer) and print accuracy, AUROC and flag rates beside the
    /// content-word-coverage baseline.
    Eval(EvalArgs),
    /// Cross-validate the scoring rule on the committed tuning data (data/witness/): choose
    /// the L2 penalty by held-out log-loss, show the out-of-fold scores the qa threshold is
    /// placed on, and print each tuning file's figures at the qa threshold, in-sample and
    /// cross-validated.
    Fit(FitArgs),
}

#[derive(Debug, Args)]
struct FitArgs {
    /// Number of folds (items go to folds by the hash of their knowledge text); at least 3,
    /// as each fold's fit places its threshold by cross-validating the other folds.
    #[arg(long = "cv", default_value_t = svc::witness::cv::DEFAULT_FOLDS as u64,
          value_parser = clap::value_parser!(u64).range(3..100))]
    folds: u64,
    /// The repository root holding data/witness/.
    #[arg(long, default_value = ".")]
    root: PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Also run nested cross-validation: each fold scored by a rule whose penalty was chosen
    /// and threshold placed on the other folds alone (takes about `--cv` times longer).
    #[arg(long)]
    nested: bool,
}

#[derive(Debug, Args)]
struct CheckArgs {
    /// The evidence the output must be supported by.
    #[arg(long, value_name = "PATH")]
    context_file: Option<PathBuf>,
    /// The model's output to check.
    #[arg(long, value_name = "PATH")]
    output_file: Option<PathBuf>,
    /// audit: output untouched; annotate: flagged claims marked inline; strict: flagged
    /// claims removed.
    #[arg(long, value_enum, default_value_t = Mode::Audit)]
    mode: Mode,
    /// rag, qa, benchmark_qa, code fail closed in strict mode; summary, chat, dialogue remove
    /// contradictions and only warn on unknown claims.
    #[arg(long, value_enum, default_value_t = Profile::Rag)]
    profile: Profile,
    /// The question the output answers; short answers ("Delhi") are read against it.
    #[arg(long)]
    question: Option<String>,
    /// Print the certificate (JSON) on stdout instead of the output.
    #[arg(long)]
    json: bool,
    /// Do not store the certificate.
    #[arg(long)]
    no_store: bool,
    /// Ask an OpenAI-compatible endpoint to judge the claims the deterministic pass leaves
    /// uncertain; falls back to the deterministic verdicts on any failure.
    #[arg(long)]
    witness_nli: bool,
    /// Base URL of the NLI endpoint (ending in /v1).
    #[arg(long, default_value = nli::DEFAULT_BASE_URL)]
    nli_base_url: String,
    /// Model name sent to the NLI endpoint.
    #[arg(long, default_value = nli::DEFAULT_MODEL)]
    nli_model: String,
    /// Environment variable holding the NLI endpoint's API key (sent only when set).
    #[arg(long, default_value = nli::DEFAULT_API_KEY_ENV)]
    nli_api_key_env: String,
    /// Latency budget for all NLI requests together, in milliseconds.
    #[arg(long, default_value_t = nli::DEFAULT_BUDGET.as_millis() as u64)]
    nli_budget_ms: u64,
    /// Claims per NLI request.
    #[arg(long, default_value_t = nli::DEFAULT_BATCH_SIZE)]
    nli_batch_size: usize,
}

#[derive(Debug, Args)]
struct EvalArgs {
    /// JSONL file of HaluEval QA items.
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
        Some(WitnessCommand::Show { id }) => {
            let certificate = Store::open_default()?.get(&id)?;
            println!("{}", serde_json::to_string_pretty(&certificate)?);
            Ok(ExitCode::SUCCESS)
        }
        Some(WitnessCommand::List { limit, json }) => run_list(limit, json),
        Some(WitnessCommand::Feedback {
            id,
            verdict,
            claim,
            note,
        }) => run_feedback(&id, verdict, claim, note),
        Some(WitnessCommand::Eval(args)) => run_eval(args),
        Some(WitnessCommand::Fit(args)) => run_fit(args),
        None => run_check(args.check),
    }
}

fn run_check(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let (Some(context_file), Some(output_file)) = (&args.context_file, &args.output_file) else {
        anyhow::bail!(
            "svc witness needs --context-file PATH and --output-file PATH (or a subcommand: show, list, feedback, eval, fit)"
        );
    };
    let context = super::read_text_file(context_file, "context file")?;
    let output = super::read_text_file(output_file, "output file")?;
    let source = context_file.display().to_string();
    let input = WitnessInput {
        context: &context,
        context_source: &source,
        output: &output,
        question: args.question.as_deref(),
        mode: args.mode,
        profile: args.profile,
    };
    let witnessed = if args.witness_nli {
        let settings = NliSettings {
            base_url: args.nli_base_url.clone(),
            model: args.nli_model.clone(),
            api_key_env: args.nli_api_key_env.clone(),
            budget: Duration::from_millis(args.nli_budget_ms),
            batch_size: args.nli_batch_size.max(1),
        };
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the runtime for the NLI check")?;
        runtime.block_on(svc::witness::witness_with_nli(&input, &settings))
    } else {
        svc::witness::witness(&input)
    };
    let certificate = &witnessed.certificate;
    if !args.no_store {
        Store::open_default()?
            .save(certificate)
            .context("storing the certificate")?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(certificate)?);
    } else {
        // A file's last line break stays when strict mode cut its last line or withheld it all.
        let ending = if output.ends_with('\n') && !witnessed.output.ends_with('\n') {
            "\n"
        } else {
            ""
        };
        print!("{}{ending}", witnessed.output);
    }
    let mut report = render_report(certificate);
    if args.no_store {
        // `svc witness show` cannot find it, so the line says so.
        report = report.trim_end().to_string() + " (not stored: --no-store)\n";
    }
    eprint!("{report}");
    Ok(ExitCode::SUCCESS)
}

/// The stderr report: one line per flagged claim, then the id.
fn render_report(certificate: &Certificate) -> String {
    let s = &certificate.summary;
    let mut out = format!(
        "witness: {} — {} of {} verifiable claims supported ({} contradicted, {} unsupported); mode {}, profile {}\n",
        match certificate.status {
            svc::witness::certificate::CertificateStatus::Supported => "supported",
            svc::witness::certificate::CertificateStatus::Flagged => "flagged",
            svc::witness::certificate::CertificateStatus::NoVerifiableClaims =>
                "no verifiable claims",
        },
        s.supported,
        s.verifiable,
        s.contradicted,
        s.unsupported,
        certificate.mode,
        certificate.profile,
    );
    for flagged in &certificate.flagged_claims {
        out.push_str(&format!(
            "  claim {} [{}, {}] {:?}: {}\n",
            flagged.claim_index,
            flagged.label.as_str(),
            serde_json::to_value(flagged.action)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            flagged.text,
            flagged.reason
        ));
    }
    if let Some(why) = &certificate.suppression.untouched_because {
        out.push_str(&format!("  output untouched: {why}\n"));
    }
    if let Some(error) = &certificate.nli.error {
        out.push_str(&format!(
            "  nli fell back to deterministic verdicts: {error}\n"
        ));
    }
    out.push_str(&format!("witness-id: {}\n", certificate.id));
    out
}

fn run_list(limit: usize, json: bool) -> anyhow::Result<ExitCode> {
    let page = Store::open_default()?.list(limit)?;
    for skipped in &page.skipped {
        eprintln!("warning: left out: {skipped}");
    }
    let listings = page.items;
    if json {
        println!("{}", serde_json::to_string_pretty(&listings)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "| id | created_at | mode | profile | status | verifiable | flagged | unsupported_claim_rate |"
    );
    println!("|---|---|---|---|---|---:|---:|---:|");
    for l in listings {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {:.2} |",
            l.id,
            l.created_at,
            l.mode,
            l.profile,
            serde_json::to_value(l.status)?.as_str().unwrap_or_default(),
            l.verifiable,
            l.flagged,
            l.unsupported_claim_rate
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn run_feedback(
    id: &str,
    verdict: Verdict,
    claim: Option<usize>,
    note: Option<String>,
) -> anyhow::Result<ExitCode> {
    let store = Store::open_default()?;
    let feedback = store.add_feedback(id, verdict, claim, note)?;
    let totals = store.feedback_totals()?;
    println!(
        "recorded {} on {}\nfeedback totals: {} false_positive, {} false_negative, {} correct, {} wrong_evidence ({} in all)",
        feedback.verdict.as_str(),
        feedback.certificate_id,
        totals.false_positive,
        totals.false_negative,
        totals.correct,
        totals.wrong_evidence,
        totals.total
    );
    Ok(ExitCode::SUCCESS)
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
                    if hallucinated {
                        "MISSED hallucinated"
                    } else {
                        "FLAGGED right"
                    },
                    verification.score(),
                    item.question.trim(),
                    if hallucinated {
                        &item.hallucinated_answer
                    } else {
                        &item.right_answer
                    },
                );
                for claim in verification.verifiable() {
                    eprintln!(
                        "  - [{}] {:.3} {:?}",
                        claim.label.as_str(),
                        claim.score,
                        claim.claim.text
                    );
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

fn run_fit(args: FitArgs) -> anyhow::Result<ExitCode> {
    use svc::witness::cv;
    // Parsed in 3..100, so it fits.
    let folds = args.folds as usize;
    let sets = cv::load(&args.root, folds).with_context(|| {
        format!(
            "reading the tuning data under {} (pass --root with the repository root)",
            args.root.display()
        )
    })?;
    let scored_only = cv::load_scored_only(&args.root, folds).with_context(|| {
        format!(
            "reading the scored-only development data under {} (pass --root with the repository root)",
            args.root.display()
        )
    })?;
    let report = cv::cross_validate(&sets, &scored_only, folds).with_context(|| {
        format!(
            "--cv needs 3 folds or more (it was {folds}): each fold's fit places its threshold by cross-validating the other folds"
        )
    })?;
    let nested = if args.nested {
        Some(
            cv::nested_cross_validate(&sets, &scored_only, folds).with_context(|| {
                format!(
                    "--nested needs --cv 3 or more (it was {folds}): each outer fold is scored by a rule chosen by cross-validating the other folds"
                )
            })?,
        )
    } else {
        None
    };
    if args.json {
        let mut value = serde_json::to_value(&report)?;
        if let (Some(nested), Some(fields)) = (&nested, value.as_object_mut()) {
            fields.insert("nested".into(), serde_json::to_value(nested)?);
        }
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{}-fold cross-validation (folds by hash of the knowledge text); held-out log-loss ± standard error per L2 penalty (chosen: the strongest within one standard error of the least):",
        report.folds
    );
    for p in &report.penalties {
        let mark = if p.l2 == report.chosen_l2 {
            "  <- chosen"
        } else {
            ""
        };
        println!(
            "  l2 {:<6} {:.4} ± {:.4}{mark}",
            p.l2, p.log_loss, p.std_error
        );
    }
    let cal = &report.calibration;
    println!(
        "qa threshold placed on the out-of-fold scores of the answers to questions ({} right, {} wrong), at most {} % false flags:",
        cal.answers[0],
        cal.answers[1],
        cal.target * 100.0
    );
    for p in &cal.curve {
        let chosen = cal.chosen.is_some_and(|c| c.right_below == p.right_below);
        println!(
            "  {:>2} right below  false flags {:>5.1} %  flagged {:>5.1} %{}",
            p.right_below,
            p.false_flags * 100.0,
            p.flagged * 100.0,
            if chosen { "  <- chosen" } else { "" }
        );
    }
    println!("figures at the qa threshold (AUROC, hallucinated flagged, right flagged):");
    // Each rate with its 95 % Wilson interval: a fold of 40-odd items, or all 248, says a rate
    // only to within points.
    let row = |f: &cv::Figures| {
        let interval = |share: f64| {
            let n = f.items as u64;
            let (low, high) = svc::ravs::stats::wilson95((share * n as f64).round() as u64, n)
                .unwrap_or((0.0, 1.0));
            format!("[{:>4.1}, {:>5.1}]", low * 100.0, high * 100.0)
        };
        format!(
            "{:>4} items  AUROC {:.4}  flagged {:>5.1} % {}  false flags {:>5.1} % {}",
            f.items,
            f.auroc,
            f.flagged * 100.0,
            interval(f.flagged),
            f.false_flags * 100.0,
            interval(f.false_flags)
        )
    };
    for file in &report.files {
        println!(
            "{}{}",
            file.file,
            if file.fitted { "" } else { "  (not fitted on)" }
        );
        for (name, figures) in [
            ("in-sample", &file.in_sample),
            ("cross-validated", &file.cross_validated),
        ] {
            println!("  {name:<16} all      {}", row(&figures.all));
            println!("  {:<16} matched  {}", "", row(&figures.length_matched));
        }
    }
    if let Some(nested) = nested {
        println!(
            "nested cross-validation (penalty chosen and threshold placed per fold on the other folds' out-of-fold scores; figures on the fold's answers to questions):"
        );
        for c in &nested.choices {
            let placed = c.calibration.map_or_else(
                || "no cut".to_string(),
                |p| {
                    format!(
                        "cut at {:>4.1} % / {:>5.1} %",
                        p.false_flags * 100.0,
                        p.flagged * 100.0
                    )
                },
            );
            println!(
                "  fold {}  l2 {:<6} {placed}  {}",
                c.fold,
                c.l2,
                row(&c.figures)
            );
        }
        for file in &nested.files {
            println!(
                "{}{}",
                file.file,
                if file.fitted { "" } else { "  (not fitted on)" }
            );
            println!("  {:<16} all      {}", "nested", row(&file.figures.all));
            println!(
                "  {:<16} matched  {}",
                "",
                row(&file.figures.length_matched)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn render_eval(report: &eval::EvalReport) -> String {
    let c = report.confusion;
    let m = report.length_matched;
    let matched = if m.items == 0 {
        format!(
            "length-matched pairs (|Δ words| ≤ {}): none\n",
            eval::LENGTH_MATCH_WORDS
        )
    } else {
        format!(
            "length-matched pairs (|Δ words| ≤ {}): {} items\n\
         \x20 AUROC {:.4}, hallucinated flagged {:.4} [{:.3}, {:.3}], right flagged {:.4} [{:.3}, {:.3}]\n\
         \x20 baselines: content-word coverage AUROC {:.4}, answer length AUROC {:.4}\n",
            eval::LENGTH_MATCH_WORDS,
            m.items,
            m.auroc,
            m.flag_rate_hallucinated,
            m.flag_rate_interval.0,
            m.flag_rate_interval.1,
            m.false_positive_rate,
            m.false_positive_interval.0,
            m.false_positive_interval.1,
            m.baseline_auroc,
            m.length_baseline_auroc,
        )
    };
    let all = format!(
        "items: {} ({} answers), profile {}, mode {}\n\
         AUROC:                     {:.4}   (baselines: content-word coverage {:.4}, answer length {:.4})\n\
         accuracy:                  {:.4}\n\
         hallucinated flagged:      {:.4}   ({}/{}; 95 % Wilson interval {:.3}–{:.3})\n\
         right flagged (FP rate):   {:.4}   ({}/{}; 95 % Wilson interval {:.3}–{:.3})\n\
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
        report.length_baseline_auroc,
        report.accuracy,
        report.flag_rate_hallucinated,
        c.true_positive,
        report.items,
        report.flag_rate_interval.0,
        report.flag_rate_interval.1,
        report.false_positive_rate,
        c.false_positive,
        report.items,
        report.false_positive_interval.0,
        report.false_positive_interval.1,
        c.true_positive,
        c.false_negative,
        c.false_positive,
        c.true_negative,
    );
    format!("{all}{matched}")
}
