//! Command-line definitions (clap derive). One module per command group.

mod bench;
mod records;
mod report;

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
    /// Aggregate trial records, compare conditions pairwise, and write report.md, CSV, JSON, SVG.
    Report(report::ReportArgs),
    /// Gate runs against a stored baseline summary: exit 1 naming each breach.
    Gate(report::GateArgs),
}

/// Parses the command line and runs the command.
pub fn run() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    match cli.command {
        Command::Records(command) => records::run(command),
        Command::Bench(args) => bench::run(args),
        Command::Report(args) => report::run_report(args),
        Command::Gate(args) => report::run_gate(args),
    }
}

/// Output format shared by commands that print results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Text,
    Json,
}
