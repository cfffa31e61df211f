//! `svc context`: index a tree, select under a budget (and commit the selection), recover exact
//! chunks of a commit.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;
use clap::{Args, Subcommand};
use serde::Serialize;
use svc::context::CommitStore;
use svc::context::index::{Index, IndexOptions, IndexStats, Skipped};
use svc::context::select::{self, ManifestEntry, SelectOptions};
use svc::state;

use super::Format;

#[derive(Debug, Subcommand)]
pub enum ContextCommand {
    /// Index a directory (honours .gitignore and .svcignore); later runs re-parse only changed
    /// files.
    Index(IndexArgs),
    /// Select what to send for a query within a token budget, commit it, and print the ctx_ id
    /// and manifest.
    Select(SelectArgs),
    /// Print the exact bytes of one chunk of a committed selection.
    Recover(RecoverArgs),
}

#[derive(Debug, Args)]
pub struct WalkArgs {
    /// Directory to index.
    path: PathBuf,
    /// Skip files larger than this many bytes.
    #[arg(long, default_value_t = 1_000_000)]
    max_file_bytes: u64,
    /// Do not read or write the persisted index.
    #[arg(long)]
    no_cache: bool,
}

#[derive(Debug, Args)]
pub struct IndexArgs {
    #[command(flatten)]
    walk: WalkArgs,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

#[derive(Debug, Args)]
pub struct SelectArgs {
    #[command(flatten)]
    walk: WalkArgs,
    /// What the context is for (a question, a task, a commit message).
    #[arg(long)]
    query: String,
    /// Token budget of the rendered context (o200k_base tokens).
    #[arg(long)]
    budget: usize,
    /// Keep these in full: a chunk id, a path, or a directory prefix ending in `/`. Repeatable.
    #[arg(long = "pin")]
    pins: Vec<String>,
    /// Write the rendered context (the exact text to send) to this file.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Omitted fragments to list in the text manifest.
    #[arg(long, default_value_t = 10)]
    show_omitted: usize,
    /// Lift the lines the last N commits (and uncommitted edits) changed, when the directory is
    /// in a git work tree; 0 turns it off [default: $SVC_RECENT_COMMITS, else 10].
    #[arg(long)]
    recent_commits: Option<usize>,
    /// Print where the time went (index, term index, selection, commit, output) to stderr.
    #[arg(long)]
    timings: bool,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

#[derive(Debug, Args)]
pub struct RecoverArgs {
    /// The commit id printed by `svc context select` (ctx_…).
    ctx_id: String,
    /// The chunk id from the manifest, e.g. src/lib.rs#L10-42.
    chunk: String,
}

pub fn run(command: ContextCommand) -> anyhow::Result<ExitCode> {
    match command {
        ContextCommand::Index(args) => index(args),
        ContextCommand::Select(args) => select(args),
        ContextCommand::Recover(args) => recover(args),
    }
}

fn build(walk: &WalkArgs) -> anyhow::Result<Index> {
    let options = IndexOptions {
        max_file_bytes: walk.max_file_bytes,
        persist: !walk.no_cache,
        ..IndexOptions::default()
    };
    index_with_progress(&walk.path, options)
}

/// Indexes `path` with a progress bar on a terminal (`svc context`, `svc go`).
pub(crate) fn index_with_progress(
    path: &std::path::Path,
    mut options: IndexOptions,
) -> anyhow::Result<Index> {
    let bar = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(0);
        bar.set_style(
            indicatif::ProgressStyle::with_template("indexing {pos}/{len} files {wide_bar} {eta}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    options.progress = bar.clone().map(|bar| {
        Arc::new(move |done: usize, total: usize| {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }) as svc::context::index::ProgressFn
    });
    let index =
        Index::build(path, &options).with_context(|| format!("indexing {}", path.display()))?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    Ok(index)
}

fn index(args: IndexArgs) -> anyhow::Result<ExitCode> {
    let index = build(&args.walk)?;
    let stats = &index.stats;
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(stats)?),
        Format::Text => print!("{}", index_summary(stats)),
    }
    Ok(ExitCode::SUCCESS)
}

fn index_summary(stats: &IndexStats) -> String {
    let mut out = format!(
        "indexed {} files ({} parsed, {} unchanged): {} fragments, {} tokens, {:.1} MB\n",
        stats.files,
        stats.parsed,
        stats.reused,
        stats.fragments,
        stats.tokens,
        stats.bytes as f64 / 1e6
    );
    if let Some(path) = &stats.persisted {
        out.push_str(&format!(
            "index: {} ({:.1} MB)\n",
            path.display(),
            stats.persisted_bytes as f64 / 1e6
        ));
    }
    if !stats.skipped.is_empty() {
        out.push_str(&format!("skipped {} files:\n", stats.skipped.len()));
        for skipped in stats.skipped.iter().take(20) {
            out.push_str(&format!("  {}: {}\n", skipped.path, skipped.reason));
        }
        if stats.skipped.len() > 20 {
            out.push_str(&format!("  … and {} more\n", stats.skipped.len() - 20));
        }
    }
    out
}

#[derive(Serialize)]
struct SelectOutput<'a> {
    ctx_id: &'a str,
    query: &'a str,
    budget: usize,
    tokens: usize,
    rendered: &'a str,
    manifest: &'a [ManifestEntry],
    /// Files the index skipped (present only when some were).
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    skipped: &'a [Skipped],
}

fn select(args: SelectArgs) -> anyhow::Result<ExitCode> {
    let started = std::time::Instant::now();
    // No tokenizer warm-up: a warm index sums the selection's count from its own counts, and
    // loading the rank tables (~0.1 s of CPU) would only compete with the walk for the cores.
    let mut phases: Vec<(&str, std::time::Duration)> = Vec::new();
    let mut lap = {
        let mut last = started;
        move |name: &'static str, phases: &mut Vec<(&str, std::time::Duration)>| {
            let now = std::time::Instant::now();
            phases.push((name, now - last));
            last = now;
        }
    };
    let commits = match args.recent_commits {
        Some(commits) => commits,
        None => svc::context::recent::commits_from_env()?,
    };
    let mut index = build(&args.walk)?;
    lap("index", &mut phases);
    warn_skipped(&index.stats);
    attach_recent_changes(&mut index, &args.walk.path, commits);
    lap("history", &mut phases);
    index.prepare();
    lap("terms", &mut phases);
    let home = state::home()?;
    let (weights, broken) = svc::daemon::learning::active_weights(&home);
    if let Some(error) = broken {
        eprintln!("warning: {error}; selecting with the default weights");
    }
    let options = SelectOptions {
        pinned: args.pins.clone(),
        weights,
        ..SelectOptions::default()
    };
    let selection = select::select(&index, &args.query, args.budget, &options)?;
    lap("select", &mut phases);
    // Group-committed: the commit's new blobs, receipt and bundle go into one pack with one
    // fsync (a first select of a 200-file repository wrote ~2,000 files with two fsyncs each),
    // made durable before the id is printed.
    let store = CommitStore::grouped(&home);
    let receipt = select::commit_selection(&index, &selection, &options, &store)
        .context("committing the selection")?;
    store.sync().context("making the commit durable")?;
    lap("commit", &mut phases);
    if let Some(path) = &args.output {
        std::fs::write(path, &selection.rendered)
            .with_context(|| format!("writing the rendered context to {}", path.display()))?;
    }
    match args.format {
        Format::Json => {
            let output = SelectOutput {
                ctx_id: &receipt.ctx_id,
                query: &selection.query,
                budget: selection.budget,
                tokens: selection.tokens,
                rendered: &selection.rendered,
                manifest: &selection.manifest,
                skipped: &index.stats.skipped,
            };
            println!("{}", serde_json::to_string_pretty(&output)?);
        }
        Format::Text => {
            let written = write_manifest(&receipt.ctx_id, &selection, args.show_omitted);
            // A reader that stops early (`| head`) is not an error.
            if let Err(error) = written
                && error.kind() != std::io::ErrorKind::BrokenPipe
            {
                return Err(error.into());
            }
        }
    }
    lap("output", &mut phases);
    if args.timings {
        let counted = if selection.counted_from_index() {
            "tokens summed from the index"
        } else {
            "tokens counted by the tokenizer"
        };
        let parts: Vec<String> = phases
            .iter()
            .map(|(name, took)| format!("{name} {:.1} ms", took.as_secs_f64() * 1e3))
            .collect();
        eprintln!(
            "timings: {} (total {:.1} ms; {counted})",
            parts.join(", "),
            started.elapsed().as_secs_f64() * 1e3
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Says which files the selection could not draw from (not UTF-8, too large, …): they were
/// left out without a word, and a query about them found nothing.
fn warn_skipped(stats: &IndexStats) {
    if stats.skipped.is_empty() {
        return;
    }
    let shown: Vec<String> = stats
        .skipped
        .iter()
        .take(3)
        .map(|s| format!("{} ({})", s.path, s.reason))
        .collect();
    let more = match stats.skipped.len() {
        n if n > 3 => format!(" and {} more", n - 3),
        _ => String::new(),
    };
    eprintln!(
        "note: {} file(s) skipped and not selectable: {}{more}; `svc context index` lists them all",
        stats.skipped.len(),
        shown.join(", ")
    );
}

/// Attaches what git says changed lately. History is a ranking hint, not a requirement: a
/// directory outside a work tree has none, and a git that fails is reported and selection goes on.
fn attach_recent_changes(index: &mut Index, root: &std::path::Path, commits: usize) {
    match svc::context::recent::RecentChanges::in_work_tree(root, commits) {
        Ok(Some(recent)) => index.set_recent_changes(recent),
        Ok(None) => {}
        Err(error) => {
            eprintln!(
                "warning: {error}; selecting without recent changes (--recent-commits 0 skips this)"
            )
        }
    }
}

fn write_manifest(
    ctx_id: &str,
    selection: &select::Selection,
    show_omitted: usize,
) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    let sent = selection.sent().count();
    writeln!(
        out,
        "{} · {} of {} tokens · {} sent, {} omitted",
        ctx_id,
        selection.tokens,
        selection.budget,
        sent,
        selection.manifest.len() - sent
    )?;
    writeln!(out, "resolution  tokens    score  chunk  reason")?;
    for entry in selection.sent() {
        write_entry(&mut out, entry)?;
    }
    let omitted: Vec<_> = selection
        .manifest
        .iter()
        .filter(|e| e.resolution.is_none() && e.score > 0.0)
        .take(show_omitted)
        .collect();
    for entry in &omitted {
        write_entry(&mut out, entry)?;
    }
    writeln!(out, "recover any chunk: svc context recover {ctx_id} CHUNK")?;
    Ok(())
}

fn write_entry(out: &mut impl Write, entry: &ManifestEntry) -> std::io::Result<()> {
    writeln!(
        out,
        "{:<10}  {:>6}  {:>7.2}  {}  {}",
        entry.resolution.map_or("omitted", |r| r.as_str()),
        entry.tokens,
        entry.score,
        entry.chunk_id,
        entry.reason
    )
}

fn recover(args: RecoverArgs) -> anyhow::Result<ExitCode> {
    let store = CommitStore::new(&state::home()?);
    let recovered = store.recover(&args.ctx_id, &args.chunk);
    // Damaged pack index lines do not stop recovery of the rest, but the user must hear of them.
    for skipped in store.pack_warnings() {
        eprintln!("svc: warning: {skipped}");
    }
    let text =
        recovered.with_context(|| format!("recovering {} from {}", args.chunk, args.ctx_id))?;
    let mut out = std::io::stdout().lock();
    let written = out.write_all(text.as_bytes()).and_then(|()| out.flush());
    match written {
        Err(error) if error.kind() != std::io::ErrorKind::BrokenPipe => Err(error.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}
