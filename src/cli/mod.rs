//! Command-line definitions (clap derive). One module per command group.

mod bench;
mod records;
mod run;
mod runners;
mod workloads;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// svc makes prompts to language models smaller without losing the evidence they need, proves
/// it, and measures it.
#[derive(Debug, Parser)]
#[command(name = "svc", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Validate trial records and print their schema.
    #[command(subcommand)]
    Records(records::RecordsCommand),
    /// Measure throughput figures (record validation, token counting, ...) and print a table.
    Bench(bench::BenchArgs),
    /// Run a workload's paired trial matrix (conditions × budgets × replicates) and write
    /// trial records to runs/<run-id>/.
    Run(run::RunArgs),
    /// List, show and mine workloads.
    #[command(subcommand)]
    Workloads(workloads::WorkloadsCommand),
    /// List and check model runners.
    #[command(subcommand)]
    Runners(runners::RunnersCommand),
}

/// Parses the command line and runs the command.
pub fn run() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Records(command) => records::run(command),
        Command::Bench(args) => bench::run(args),
        Command::Run(args) => run::run(args),
        Command::Workloads(command) => workloads::run(command),
        Command::Runners(command) => runners::run(command),
    }
}

/// Output format shared by commands that print results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Text,
    Json,
}
