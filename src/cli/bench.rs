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
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    /// Git repository whose history the file-localisation figures are mined from [default:
    /// this source tree's repository, all branches].
    #[arg(long)]
    localize_repo: Option<PathBuf>,
    /// Tasks mined for the file-localisation figures.
    #[arg(long, default_value_t = 40)]
    localize_tasks: usize,
    /// Run only these groups (repeatable) [default: all].
    #[arg(long = "group", value_enum)]
    groups: Vec<Group>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Group {
    Records,
    Tokens,
    /// Index, selection, skeleton ratio, memory and needle figures on crate sources.
    Context,
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let mut figures: Vec<Figure> = Vec::new();
    let wants = |group: Group| args.groups.is_empty() || args.groups.contains(&group);
    if wants(Group::Records) {
        eprintln!("bench: records validate ({} records)…", args.records);
        figures.push(bench::records_validate(args.records)?);
    }
    let corpus_root = args.corpus.clone().unwrap_or_else(default_corpus);
    if wants(Group::Tokens) {
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
    }
    if wants(Group::Context) {
        eprintln!(
            "bench: context engine on crates under {}…",
            corpus_root.display()
        );
        let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/code");
        figures.extend(svc::context::bench::context_figures(
            &corpus_root,
            &fixtures,
        )?);
        let repo = args
            .localize_repo
            .clone()
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
        let revision = if args.localize_repo.is_some() {
            "HEAD"
        } else {
            "--all"
        };
        eprintln!("bench: file localisation on {} history…", repo.display());
        figures.extend(svc::context::bench::localisation_figures(
            &repo,
            revision,
            args.localize_tasks,
        )?);
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
