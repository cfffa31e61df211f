//! `svc runners list|check`.
//!
//! `list` exits 1 when a runner file does not load (each is listed with its problem).

use std::process::ExitCode;
use std::time::Instant;

use clap::Subcommand;
use serde::Serialize;
use svc::harness::runner::{Runner, runners_root, spec};
use svc::harness::workload::AnswerKind;

use super::Format;

#[derive(Debug, Subcommand)]
pub enum RunnersCommand {
    /// List the runner files under ./runners (or $SVC_RUNNERS_DIR).
    List {
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Load a runner and send it one small question; exit 1 when it fails.
    Check {
        /// Runner name or path.
        runner: String,
    },
}

#[derive(Serialize)]
struct Row {
    name: String,
    kind: String,
    provider: String,
    model: String,
    cost_source: String,
    problem: Option<String>,
}

pub fn run(command: RunnersCommand) -> anyhow::Result<ExitCode> {
    match command {
        RunnersCommand::List { format } => list(format),
        RunnersCommand::Check { runner } => check(&runner),
    }
}

fn list(format: Format) -> anyhow::Result<ExitCode> {
    let root = runners_root();
    let mut rows = Vec::new();
    for name in spec::names(&root) {
        let path = root.join(format!("{name}.toml"));
        let parsed = std::fs::read_to_string(&path)
            .map_err(|e| e.to_string())
            .and_then(|text| spec::parse(&text, &path).map_err(|e| e.to_string()));
        rows.push(match parsed {
            Ok(spec) => {
                // The pricing snapshot is part of what must load (a missing file or an unpriced
                // model made `run` fail while `list` said nothing).
                let problem = match spec.cost.source {
                    svc::trial::CostSource::PricingSnapshot => {
                        spec::read_pricing(&spec).err().map(|e| e.to_string())
                    }
                    _ => None,
                };
                Row {
                    name,
                    kind: spec.kind.as_str().into(),
                    cost_source: serde_json::to_value(spec.cost.source)?
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    provider: spec.provider,
                    model: spec.model,
                    problem,
                }
            }
            Err(problem) => Row {
                name,
                kind: "?".into(),
                provider: "?".into(),
                model: "?".into(),
                cost_source: "?".into(),
                problem: Some(problem),
            },
        });
    }
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
        Format::Text => {
            println!("| runner | kind | provider | model | cost source |\n|---|---|---|---|---|");
            for row in &rows {
                println!(
                    "| {} | {} | {} | {} | {} |",
                    row.name, row.kind, row.provider, row.model, row.cost_source
                );
            }
            for row in rows.iter().filter(|r| r.problem.is_some()) {
                eprintln!("svc: {}", row.problem.as_deref().unwrap_or_default());
            }
        }
    }
    // As `svc workloads list`: a file that does not load is a failed check (exit 1), listed
    // with its problem, not a success with `?` rows.
    Ok(if rows.iter().any(|r| r.problem.is_some()) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn check(name: &str) -> anyhow::Result<ExitCode> {
    let runner = Runner::load(&runners_root(), name)?;
    let request = runner.request(
        "The lighthouse on Varnholm island is painted green and white.",
        "What colours is the lighthouse on Varnholm painted?",
        AnswerKind::Span,
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let start = Instant::now();
    let result = runtime.block_on(runner.call(&request));
    let latency = start.elapsed().as_secs_f64() * 1000.0;
    match result {
        Ok(reply) if reply.text.trim().is_empty() => {
            // A runner that answers nothing would score 0 on every trial: that is a broken
            // setup (wrong template, stop sequence, model), not a working runner.
            eprintln!(
                "svc: runner {} answered with empty text after {latency:.0} ms ({} output tokens); check its prompt template, max_output_tokens and the model",
                runner.spec.name, reply.output_tokens
            );
            Ok(ExitCode::from(1))
        }
        Ok(reply) => {
            println!(
                "runner {} ({} {}): ok in {latency:.0} ms",
                runner.spec.name, runner.spec.provider, runner.spec.model
            );
            println!("answer: {}", reply.text.trim());
            println!(
                "usage: input {} output {} reasoning {} ({:?}); request id {}",
                reply
                    .input_tokens
                    .map_or_else(|| "-".to_string(), |n| n.to_string()),
                reply.output_tokens,
                reply.reasoning_tokens,
                reply.usage_source,
                reply.provider_request_id
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(error) => {
            eprintln!(
                "svc: runner {} failed after {latency:.0} ms ({}): {error}",
                runner.spec.name,
                error.error_type()
            );
            Ok(ExitCode::from(1))
        }
    }
}
