//! `svc bench`: throughput figures, printed as a table.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use svc::bench::{self, Figure};
use svc::tokens::Encoding;

use super::Format;

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Records generated for the validation benchmark.
    #[arg(long, default_value_t = 200_000)]
    records: usize,
    /// Source tree for the token-counting benchmark [default: the Rust crate sources under
    /// $CARGO_HOME/registry/src, else ./src].
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// Megabytes of source text for the token-counting benchmark.
    #[arg(long, default_value_t = 8)]
    corpus_mb: usize,
    /// Records generated for the report benchmark (aggregate + paired stats); 0 skips it.
    #[arg(long, default_value_t = 1_000_000)]
    report_records: usize,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let mut figures: Vec<Figure> = Vec::new();
    eprintln!("bench: records validate ({} records)…", args.records);
    figures.push(bench::records_validate(args.records)?);
    let corpus_root = args.corpus.clone().unwrap_or_else(default_corpus);
    let corpus = bench::load_source_corpus(&corpus_root, args.corpus_mb * 1_000_000);
    if corpus.is_empty() {
        anyhow::bail!(
            "no source files under {} for the token benchmark; pass --corpus DIR",
            corpus_root.display()
        );
    }
    for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
        eprintln!(
            "bench: token count ({encoding}) on {}…",
            corpus_root.display()
        );
        figures.push(bench::token_count(&corpus, encoding));
    }
    if args.report_records > 0 {
        eprintln!("bench: report ({} generated records)…", args.report_records);
        let dir = tempfile::tempdir()?;
        figures.push(svc::report::bench_figure(args.report_records, dir.path())?);
    }
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&figures)?),
        Format::Text => print!("{}", render_table(&figures)),
    }
    Ok(ExitCode::SUCCESS)
}

fn default_corpus() -> PathBuf {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    if let Some(registry) = cargo_home.map(|h| h.join("registry").join("src"))
        && registry.is_dir()
    {
        return registry;
    }
    PathBuf::from("src")
}

/// A Markdown table, readable in a terminal and pasteable into notes.
pub fn render_table(figures: &[Figure]) -> String {
    let mut out =
        String::from("| benchmark | value | unit | target | detail |\n|---|---:|---|---|---|\n");
    for figure in figures {
        out.push_str(&format!(
            "| {} | {:.1} | {} | {} | {} |\n",
            figure.name,
            figure.value,
            figure.unit,
            figure.target.as_deref().unwrap_or("-"),
            figure.detail
        ));
    }
    out
}
