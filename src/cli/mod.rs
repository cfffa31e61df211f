//! Command-line definitions (clap derive). One module per command group.

mod bench;
mod context;
mod records;

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
    /// Index a tree, select context under a token budget, recover exact chunks of a commit.
    #[command(subcommand)]
    Context(context::ContextCommand),
}

/// Parses the command line and runs the command.
pub fn run() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Records(command) => records::run(command),
        Command::Bench(args) => bench::run(args),
        Command::Context(command) => context::run(command),
    }
}

/// Output format shared by commands that print results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Text,
    Json,
}
