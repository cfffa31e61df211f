//! Command-line definitions (clap derive). One module per command group.

mod bench;
mod benchmark;
mod compress;
mod context;
mod daemon;
mod demo;
mod evolution;
mod learning;
mod proof;
mod proxy;
mod ravs;
mod records;
mod report;
mod run;
mod runners;
mod runs;
mod serve;
mod verify_claims;
mod witness;
mod workloads;
mod wrap;

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
    /// The main job: run the built-in workload suite through the trial runner and report.
    ///
    /// With --compare-baseline the raw and native_compaction baselines run too and the paired
    /// comparison is printed; with --compare-baseline FILE the run is compared with a stored
    /// summary.json instead.
    Benchmark(benchmark::BenchmarkArgs),
    /// Validate trial records and print their schema.
    #[command(subcommand)]
    Records(records::RecordsCommand),
    /// Measure throughput figures (record validation, token counting, ...) and print a table.
    Bench(bench::BenchArgs),
    /// Verify an answer against its evidence, record a certificate; show, list, give feedback,
    /// evaluate.
    Witness(witness::WitnessArgs),
    /// Compress a file (code, JSON, logs, prose) or a conversation to a token budget; every
    /// elision is recoverable with `svc context recover CTX_ID CHUNK`.
    Compress(compress::CompressArgs),
    /// Strip filler from a model's prose answer (lite, full, ultra); code stays byte-identical.
    Distill(compress::DistillArgs),
    /// Compress every file of a directory, or every job of a JSON Lines file, to a budget.
    ///
    /// Exit 0 when every job ran; 1 with --fail-over-budget when a job cannot fit its budget;
    /// 2 when a job line or input is bad (the other jobs still run).
    Batch(compress::BatchArgs),
    /// Run a workload's paired trial matrix (conditions × budgets × replicates) and write
    /// trial records to runs/<run-id>/.
    Run(run::RunArgs),
    /// List run directories and show the exact requests of a trial.
    #[command(subcommand)]
    Runs(runs::RunsCommand),
    /// List, show and mine workloads.
    #[command(subcommand)]
    Workloads(workloads::WorkloadsCommand),
    /// List and check model runners.
    #[command(subcommand)]
    Runners(runners::RunnersCommand),
    /// Index a tree, select context under a token budget, recover exact chunks of a commit.
    #[command(subcommand)]
    Context(context::ContextCommand),
    /// The proof-guided loop: prepare/advance/inspect sessions, run the loop with a local model
    /// command, check a signed failure artifact.
    #[command(subcommand)]
    Proof(proof::ProofCommand),
    /// Aggregate trial records, compare conditions pairwise, and write report.md, CSV, JSON, SVG.
    Report(report::ReportArgs),
    /// Gate runs against a stored baseline summary: exit 1 naming each breach.
    Gate(report::GateArgs),
    /// Run the local provider proxy (Anthropic, OpenAI and Gemini styles on one port): shrink
    /// long prompts, check answers with the witness, serve /witness certificates.
    Proxy(proxy::ProxyArgs),
    /// The RAVS outcome log of routing and verification: `svc ravs report --since 7d`.
    #[command(subcommand)]
    Ravs(ravs::RavsCommand),
    /// Run everything in one process: proxy, dashboard and control API (127.0.0.1:9378), file
    /// watcher; restarts a failed part, stops on Ctrl-C, SIGTERM or POST /api/control/stop.
    Daemon(daemon::DaemonArgs),
    /// Run the dashboard and control API alone (no proxy).
    Dashboard(daemon::DashboardArgs),
    /// Browse runs: every run under runs/ and reports/out (or the folders given), its report,
    /// its trials (paged, filterable), one trial across conditions, two runs compared.
    View(daemon::ViewArgs),
    /// In a project directory: index it, start the daemon, print the URLs and the line each
    /// coding agent needs, open the dashboard.
    Go(daemon::GoArgs),
    /// The MCP tool server: select_context, compress, compress_messages, recover_chunk,
    /// verify_answer and the proof-guided session tools, over stdio (default) or streamable
    /// HTTP on 127.0.0.1 (--http PORT).
    Serve(serve::ServeArgs),
    /// A tour on a built-in sample (no network, no model): selection, compression, witness and
    /// one proof-guided fixed-point run, with the figures measured on the spot.
    Demo(demo::DemoArgs),
    /// Measure svc's claims about itself on a repository (token reduction at the default
    /// budget, selection latency, byte-exact recovery, deterministic witness) and write
    /// .svc_verification.json; exit 1 when a claim fails.
    VerifyClaims(verify_claims::VerifyClaimsArgs),
    /// The selector's ranking weights: show, reset, learn from recorded fixed-point outcomes,
    /// autotune on mined tasks (adopted only when held-out tasks agree).
    #[command(subcommand)]
    Learning(learning::LearningCommand),
    /// Plug svc into a coding tool: launch agents run through the proxy, MCP-config agents get
    /// the tool server merged into their config (with a .svc-backup), snippet agents get what to
    /// paste where. Without an agent, lists them all.
    Wrap(wrap::WrapArgs),
    /// Files selection keeps missing: recovered by the proof-guided loop in at least
    /// --threshold recorded runs (world-model ledger and pgs_ sessions).
    Gaps(evolution::GapsArgs),
    /// The skills made from gaps (draft or promoted); `export` prints them as JSON.
    Skills(evolution::SkillsArgs),
    /// Run one dream cycle: detect gaps, synthesize skills, benchmark them on held-out recorded
    /// queries, promote those that pass, account the learning spend; notify the chats.
    Dream(evolution::DreamArgs),
    /// Opt-in anonymous sharing of the learned ranking weights (SVC_FEDERATION=1 and
    /// SVC_FEDERATION_URL): show the payload, or send it.
    #[command(subcommand)]
    Federation(evolution::FederationCommand),
}

/// A command ends quietly when the reader of its standard output goes away (`svc … | head`),
/// as Unix tools do, instead of panicking in `println!` ("failed printing to stdout: Broken
/// pipe"). SIGPIPE itself stays ignored: in-process servers and HTTP clients (`svc bench`,
/// `svc run` with an HTTP runner) write to sockets, and a peer that hangs up must not kill the
/// process. Exit status 141 is what a shell reports for a process a closed pipe ended.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| info.payload().downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to stdout") && message.contains("Broken pipe") {
            std::process::exit(141);
        }
        default(info);
    }));
}

/// Most bootstrap resamples a report takes: far more than any interval needs (the default is
/// 2,000), and a bound before a huge count exhausts memory.
pub(crate) const MAX_RESAMPLES: u64 = 1_000_000;
/// Most replicates a run takes: a bound before a matrix of billions of trials exhausts memory.
pub(crate) const MAX_REPLICATES: u64 = 1_000;

/// The longest wait a seconds flag takes: a year. Far beyond it a deadline overflows the clock
/// (`Instant + Duration` panics), and no wait that long is meant.
const MAX_WAIT_SECONDS: f64 = 365.0 * 86_400.0;

/// Says on stderr that the command waits for `lock`, when another process holds it (`what`
/// names the holder's kind): the wait itself is unbounded and was silent.
pub(crate) fn say_if_waiting(lock: &std::path::Path, what: &str) {
    if svc::state::append::is_held(lock) {
        eprintln!(
            "svc: waiting for {what} in another process to finish (it holds {})…",
            lock.display()
        );
    }
}

/// A `--…-seconds` flag as a duration: a finite number of seconds, positive (or zero when
/// `zero_ok`), at most a year.
pub(crate) fn seconds(
    flag: &str,
    value: f64,
    zero_ok: bool,
) -> anyhow::Result<std::time::Duration> {
    let low_ok = if zero_ok { value >= 0.0 } else { value > 0.0 };
    anyhow::ensure!(
        value.is_finite() && low_ok && value <= MAX_WAIT_SECONDS,
        "{flag} must be a number of seconds from {} to {MAX_WAIT_SECONDS} (a year), got {value}",
        if zero_ok { "0" } else { "just above 0" }
    );
    Ok(std::time::Duration::from_secs_f64(value))
}

/// Parses the command line and runs the command.
pub fn run() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    quiet_on_closed_stdout();
    match cli.command {
        Command::Benchmark(args) => benchmark::run(args),
        Command::Records(command) => records::run(command),
        Command::Bench(args) => bench::run(args),
        Command::Witness(args) => witness::run(args),
        Command::Compress(args) => compress::run_compress(args),
        Command::Distill(args) => compress::run_distill(args),
        Command::Batch(args) => compress::run_batch(args),
        Command::Run(args) => run::run(args),
        Command::Runs(command) => runs::run(command),
        Command::Workloads(command) => workloads::run(command),
        Command::Runners(command) => runners::run(command),
        Command::Context(command) => context::run(command),
        Command::Proof(command) => proof::run(command),
        Command::Report(args) => report::run_report(args),
        Command::Gate(args) => report::run_gate(args),
        Command::Proxy(args) => proxy::run(args),
        Command::Ravs(command) => ravs::run(command),
        Command::Daemon(args) => daemon::run_daemon(args),
        Command::Dashboard(args) => daemon::run_dashboard(args),
        Command::View(args) => daemon::run_view(args),
        Command::Go(args) => daemon::run_go(args),
        Command::Serve(args) => serve::run(args),
        Command::Demo(args) => demo::run(args),
        Command::VerifyClaims(args) => verify_claims::run(args),
        Command::Learning(command) => learning::run(command),
        Command::Wrap(args) => wrap::run(args),
        Command::Gaps(args) => evolution::run_gaps(args),
        Command::Skills(args) => evolution::run_skills(args),
        Command::Dream(args) => evolution::run_dream(args),
        Command::Federation(command) => evolution::run_federation(command),
    }
}

/// Output format shared by commands that print results.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    #[default]
    Text,
    Json,
}

/// A text file's contents; bytes that are not UTF-8 are an error naming the file, the line and
/// the column, so the user can find and fix them (nothing is guessed or replaced).
fn read_text_file(path: &std::path::Path, what: &str) -> anyhow::Result<String> {
    use anyhow::Context;
    let bytes =
        std::fs::read(path).with_context(|| format!("reading the {what} {}", path.display()))?;
    String::from_utf8(bytes).map_err(|e| {
        let (line, column) = svc::text::utf8_error_position(&e);
        anyhow::anyhow!(
            "the {what} {}:{line}:{column} is not UTF-8 text (an invalid byte there); save it as UTF-8",
            path.display()
        )
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_text_file_that_is_not_utf8_is_named_with_its_line_and_column() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("context.txt");
        std::fs::write(&path, b"first line\nca\xe9 au lait\n").expect("write");
        let err = super::read_text_file(&path, "context file").expect_err("latin-1");
        let text = err.to_string();
        assert!(text.contains("context.txt:2:3 is not UTF-8"), "{text}");
        // The column counts characters: "\u{e9}t\u{e9} " is four characters, six bytes.
        std::fs::write(&path, b"\xc3\xa9t\xc3\xa9 \xe9\n").expect("write");
        let err = super::read_text_file(&path, "context file").expect_err("latin-1");
        assert!(err.to_string().contains("context.txt:1:5 is not"), "{err}");
        std::fs::write(&path, "caf\u{e9}\n").expect("write");
        assert_eq!(
            super::read_text_file(&path, "context file").expect("utf-8"),
            "caf\u{e9}\n"
        );
        let missing = super::read_text_file(&dir.path().join("none.txt"), "output file");
        assert!(
            missing
                .expect_err("missing")
                .to_string()
                .contains("reading the output file")
        );
    }
}
