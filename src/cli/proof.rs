//! `svc proof`: the proof-guided fixed-point loop from the command line: the durable
//! prepare/advance/inspect protocol, a whole run with a local model command, and the check of
//! a signed failure artifact.
//!
//! Exit codes: `run` exits 0 when the result is `supported`, 1 for any other terminal status
//! (the answer is not proven), 2 on errors; `verify-artifact` exits 1 when the signature does
//! not match; the protocol commands exit 0 on success.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use svc::proof::command::ModelCommand;
use svc::proof::errors::{self, ArtifactError};
use svc::proof::{
    Bounds, ContextRiskMode, FixedPointResult, FixedPointStatus, Protocol, VerifiedEfficiencyLayer,
};
use svc::state;
use svc::witness::Profile;

use super::Format;

#[derive(Debug, Subcommand)]
pub enum ProofCommand {
    /// Select and commit context for a query, open a pgs_ session, and print the prepared
    /// request (JSON) for the model.
    Prepare(PrepareArgs),
    /// Submit the model's draft for a session's pending request; prints the next request or
    /// the result (JSON).
    Advance(AdvanceArgs),
    /// Print a session's state.
    Inspect(InspectArgs),
    /// Run the whole loop with a local model command (request JSON on its stdin, draft on its
    /// stdout); exit 0 when the result is supported, 1 otherwise.
    Run(RunArgs),
    /// Check the signature of a failure artifact (exit 0 valid, 1 changed).
    VerifyArtifact(VerifyArtifactArgs),
    /// Append a finished session's outcome and an external signal to the world-model ledger
    /// (proof/world-model.jsonl, hash-chained) and check the chain.
    RecordOutcome(RecordOutcomeArgs),
}

#[derive(Debug, Args)]
pub struct RecordOutcomeArgs {
    /// A finished session (pgs_…).
    session: String,
    /// What the signal is, e.g. user_accepted, tests_passed.
    #[arg(long)]
    signal: String,
    /// The signal's value in [0, 1] (1 = best).
    #[arg(long)]
    value: f64,
    /// Where the signal came from.
    #[arg(long)]
    detail: Option<String>,
}

#[derive(Debug, Args)]
struct SourceArgs {
    /// A document, or a directory of documents (text files; .gitignore is honoured).
    path: PathBuf,
    /// What the answer is for.
    #[arg(long)]
    query: String,
    /// Token budget of the committed context (o200k_base tokens).
    #[arg(long)]
    budget: usize,
    /// Hard bound on model calls.
    #[arg(long, default_value_t = Bounds::default().max_rounds)]
    max_rounds: usize,
    /// Total receipt tokens that may be recovered over the run.
    #[arg(long, default_value_t = Bounds::default().recovery_token_budget)]
    recovery_token_budget: usize,
    /// Chunks recovered per round at most.
    #[arg(long, default_value_t = Bounds::default().max_chunks_per_round)]
    max_chunks_per_round: usize,
    /// audit: unsupported claims of the final output are marked; strict: removed.
    #[arg(long, value_enum, default_value_t = ContextRiskMode::Audit)]
    mode: ContextRiskMode,
    /// Verification profile (its support threshold).
    #[arg(long, value_enum, default_value_t = Profile::Rag)]
    profile: Profile,
}

impl SourceArgs {
    fn bounds(&self) -> Bounds {
        Bounds {
            max_rounds: self.max_rounds,
            recovery_token_budget: self.recovery_token_budget,
            max_chunks_per_round: self.max_chunks_per_round,
        }
    }

    fn layer(&self) -> anyhow::Result<VerifiedEfficiencyLayer> {
        Ok(VerifiedEfficiencyLayer::new(state::home()?, self.mode).with_profile(self.profile))
    }
}

#[derive(Debug, Args)]
pub struct PrepareArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// Replays the original response when prepare is repeated with this key and the same
    /// input; refused with different input.
    #[arg(long)]
    idempotency_key: Option<String>,
}

#[derive(Debug, Args)]
pub struct AdvanceArgs {
    /// Session id (pgs_…).
    session: String,
    /// File holding the model's draft (UTF-8).
    #[arg(long, value_name = "PATH")]
    output_file: PathBuf,
    /// Replays the original response when this key comes again with the same text, at any
    /// later revision; refused with different text.
    #[arg(long)]
    idempotency_key: Option<String>,
    /// Seconds to wait while another process advances the same session.
    #[arg(long, default_value_t = svc::proof::session::LOCK_WAIT.as_secs_f64())]
    lock_wait_seconds: f64,
}

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Session id (pgs_…).
    session: String,
    #[arg(long, value_enum, default_value_t = Format::Json)]
    format: Format,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    source: SourceArgs,
    /// Seconds one model call may take before it is killed.
    #[arg(long, default_value_t = 120.0)]
    timeout_seconds: f64,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    /// The model command and its arguments: everything after this flag. Run without a shell;
    /// it reads the request JSON on stdin and prints the draft on stdout.
    #[arg(long, required = true, num_args = 1.., allow_hyphen_values = true, value_name = "CMD")]
    model_command: Vec<String>,
}

#[derive(Debug, Args)]
pub struct VerifyArtifactArgs {
    /// A failure artifact (proof/failures/pgf_….json under the state directory).
    file: PathBuf,
}

pub fn run(command: ProofCommand) -> anyhow::Result<ExitCode> {
    match command {
        ProofCommand::Prepare(args) => prepare(args),
        ProofCommand::Advance(args) => advance(args),
        ProofCommand::Inspect(args) => inspect(args),
        ProofCommand::Run(args) => run_loop(args),
        ProofCommand::VerifyArtifact(args) => verify_artifact(args),
        ProofCommand::RecordOutcome(args) => record_outcome(args),
    }
}

/// The documents under `path` (see [`svc::proof::sources::read_sources`]).
fn read_sources(path: &Path) -> anyhow::Result<Vec<(String, String)>> {
    Ok(svc::proof::sources::read_sources(path)?)
}

fn prepare(args: PrepareArgs) -> anyhow::Result<ExitCode> {
    let sources = read_sources(&args.source.path)?;
    let protocol = Protocol::new(args.source.layer()?);
    let response = protocol.prepare(
        &sources,
        &args.source.query,
        args.source.budget,
        args.source.bounds(),
        args.idempotency_key.as_deref(),
    )?;
    print!("{response}");
    Ok(ExitCode::SUCCESS)
}

fn protocol() -> anyhow::Result<Protocol> {
    // The session carries its own mode, profile and bounds; the layer only names the state.
    Ok(Protocol::new(VerifiedEfficiencyLayer::new(
        state::home()?,
        ContextRiskMode::Audit,
    )))
}

fn advance(args: AdvanceArgs) -> anyhow::Result<ExitCode> {
    let draft = super::read_text_file(&args.output_file, "draft")?;
    let wait = super::seconds("--lock-wait-seconds", args.lock_wait_seconds, true)?;
    let response = protocol()?.with_lock_wait(wait).advance(
        &args.session,
        &draft,
        args.idempotency_key.as_deref(),
    )?;
    print!("{response}");
    Ok(ExitCode::SUCCESS)
}

fn inspect(args: InspectArgs) -> anyhow::Result<ExitCode> {
    let view = protocol()?.inspect(&args.session)?;
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&view)?),
        Format::Text => {
            println!("session   {} (revision {})", view.session_id, view.revision);
            println!("state     {}", view.state.as_str());
            println!("context   {}", view.ctx_id);
            println!("query     {}", view.query);
            println!(
                "rounds    {} of {}; recovered {} tokens of {} ({})",
                view.rounds,
                view.bounds.max_rounds,
                view.recovery_tokens_used,
                view.bounds.recovery_token_budget,
                if view.recovered_chunk_ids.is_empty() {
                    "none".to_string()
                } else {
                    view.recovered_chunk_ids.join(", ")
                }
            );
            if let Some(result) = &view.result {
                println!("status    {}", result.status);
            }
            if let Some(failure) = &view.failure {
                println!("failure   {}", failure.message);
            }
            println!("file      {}", view.path);
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn run_loop(args: RunArgs) -> anyhow::Result<ExitCode> {
    let timeout = super::seconds("--timeout-seconds", args.timeout_seconds, false)?;
    let (program, rest) = args
        .model_command
        .split_first()
        .context("--model-command needs a command")?;
    let command = ModelCommand {
        program: PathBuf::from(program),
        args: rest.to_vec(),
        timeout,
    };
    let sources = read_sources(&args.source.path)?;
    let layer = args.source.layer()?;
    let prepared = layer.prepare(&sources, &args.source.query, args.source.budget)?;
    let bounds = args.source.bounds();
    let result = layer.run_fixed_point(
        &prepared,
        |request| command.call(request).map_err(Into::into),
        bounds.max_rounds,
        bounds.recovery_token_budget,
        bounds.max_chunks_per_round,
    )?;
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&result)?),
        Format::Text => print!("{}", summary(&result)),
    }
    Ok(if result.status == FixedPointStatus::Supported {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The short human summary of a run.
fn summary(result: &FixedPointResult) -> String {
    let mut out = format!(
        "status: {} after {} model call(s); recovered {} of {} tokens ({})\n",
        result.status,
        result.rounds.len(),
        result.recovery_tokens_used,
        result.recovery_token_budget,
        result.ctx_id
    );
    for round in &result.rounds {
        let recovered: Vec<String> = round
            .recovered
            .iter()
            .map(|c| format!("{} ({} tokens)", c.chunk_id, c.receipt_token_count))
            .collect();
        out.push_str(&format!(
            "round {}: {}/{} claims supported; {}{}\n",
            round.round,
            round.supported_claims,
            round.verifiable_claims,
            round.decision,
            if recovered.is_empty() {
                String::new()
            } else {
                format!(" -> recovered {}", recovered.join(", "))
            }
        ));
    }
    out.push_str("final output:\n");
    out.push_str(&result.final_output.output);
    if !result.final_output.output.ends_with('\n') {
        out.push('\n');
    }
    out
}

fn verify_artifact(args: VerifyArtifactArgs) -> anyhow::Result<ExitCode> {
    match errors::verify_artifact(&state::home()?, &args.file) {
        Ok(signed) => {
            let a = &signed.artifact;
            println!(
                "valid: {} ({:?} failure at stage {} in round {}; {} completed round(s), {} recovered chunk(s)); signed by key {}",
                a.artifact_id,
                a.kind,
                a.stage,
                a.round,
                a.completed_rounds.len(),
                a.recovered.len(),
                signed.key_id
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(
            error @ (ArtifactError::BadSignature { .. }
            | ArtifactError::Altered { .. }
            | ArtifactError::OtherKey { .. }),
        ) => {
            println!("invalid: {error}");
            Ok(ExitCode::from(1))
        }
        Err(error) => Err(error.into()),
    }
}

fn record_outcome(args: RecordOutcomeArgs) -> anyhow::Result<ExitCode> {
    let state_dir = state::home()?;
    let view = protocol()?.inspect(&args.session)?;
    let result = view.result.with_context(|| {
        format!(
            "session {} is {} and has no result yet; record an outcome once it is finished",
            args.session,
            view.state.as_str()
        )
    })?;
    let layer = VerifiedEfficiencyLayer::new(&state_dir, ContextRiskMode::Audit);
    let entry = layer.record_verified_outcome(
        &result,
        &svc::proof::OutcomeSignal {
            name: args.signal,
            value: args.value,
            detail: args.detail,
        },
    )?;
    let entries = svc::proof::ledger::verify_chain(&state_dir)?;
    println!(
        "recorded entry {} ({} {}) in {}; chain of {} entries verified",
        entry.sequence,
        entry.signal.name,
        entry.signal.value,
        state_dir.join(svc::proof::ledger::LEDGER_FILE).display(),
        entries.len()
    );
    Ok(ExitCode::SUCCESS)
}
