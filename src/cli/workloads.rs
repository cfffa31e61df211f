//! `svc workloads list|show|mine-git`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde::Serialize;
use svc::harness::workload::{self, LoadOptions, code, workloads_root};

use super::Format;

#[derive(Debug, Subcommand)]
pub enum WorkloadsCommand {
    /// List the workloads under ./workloads (or $SVC_WORKLOADS_DIR).
    List {
        #[arg(long, value_enum, default_value_t)]
        format: Format,
    },
    /// Load a workload and show its tasks.
    Show(ShowArgs),
    /// Mine code-localization tasks from a git repository's history (JSON Lines on stdout or
    /// to --out): the commit message is the query, the modified non-test source files are the
    /// gold, the parent commit's tree is the context.
    MineGit(MineArgs),
}

#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Workload name or path.
    workload: String,
    /// Tasks to list.
    #[arg(long, default_value_t = 10)]
    tasks: usize,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
}

#[derive(Debug, Args)]
pub struct MineArgs {
    /// The repository.
    repo: PathBuf,
    /// At most this many tasks (newest first).
    #[arg(long, default_value_t = 50)]
    max: usize,
    /// Only commits after this revision.
    #[arg(long)]
    since: Option<String>,
    /// Write the tasks here instead of stdout.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(command: WorkloadsCommand) -> anyhow::Result<ExitCode> {
    match command {
        WorkloadsCommand::List { format } => list(format),
        WorkloadsCommand::Show(args) => show(args),
        WorkloadsCommand::MineGit(args) => mine(args),
    }
}

#[derive(Serialize)]
struct ListRow {
    name: String,
    version: String,
    kind: String,
    scorer: String,
    description: String,
}

fn list(format: Format) -> anyhow::Result<ExitCode> {
    let root = workloads_root();
    let specs = workload::list(&root)?;
    let mut rows = Vec::new();
    let mut broken = 0;
    for spec in specs {
        match spec {
            Ok(spec) => rows.push(ListRow {
                name: spec.name,
                version: spec.version,
                kind: spec.kind.to_string(),
                scorer: spec.scorer.to_string(),
                description: spec.description,
            }),
            Err(error) => {
                broken += 1;
                eprintln!("svc: {error}");
            }
        }
    }
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
        Format::Text => {
            println!("| workload | version | kind | scorer | description |\n|---|---|---|---|---|");
            for row in &rows {
                println!(
                    "| {} | {} | {} | {} | {} |",
                    row.name, row.version, row.kind, row.scorer, row.description
                );
            }
        }
    }
    Ok(if broken > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

#[derive(Serialize)]
struct TaskRow {
    id: String,
    question: String,
    context_tokens: usize,
    answers: Vec<String>,
    gold_files: Vec<String>,
}

#[derive(Serialize)]
struct ShowOutput {
    name: String,
    version: String,
    kind: String,
    scorer: String,
    path: String,
    description: String,
    tasks: usize,
    prompt_sha256: String,
    first_tasks: Vec<TaskRow>,
}

fn show(args: ShowArgs) -> anyhow::Result<ExitCode> {
    let state = svc::state::home()?;
    let loaded = workload::load(
        &workloads_root(),
        &args.workload,
        &LoadOptions {
            cache_dir: state.join("cache"),
        },
    )?;
    let tokenizer = svc::tokens::Tokenizer::default();
    let output = ShowOutput {
        name: loaded.name().to_string(),
        version: loaded.version().to_string(),
        kind: loaded.spec.kind.to_string(),
        scorer: loaded.scorer().to_string(),
        path: loaded.spec.path.display().to_string(),
        description: loaded.spec.description.clone(),
        tasks: loaded.tasks.len(),
        prompt_sha256: loaded.prompt_hash(),
        first_tasks: loaded
            .tasks
            .iter()
            .take(args.tasks)
            .map(|t| TaskRow {
                id: t.id.clone(),
                question: t.question.clone(),
                context_tokens: tokenizer.count(&t.context.render()),
                answers: t.answers.clone(),
                gold_files: t.gold_files.clone(),
            })
            .collect(),
    };
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&output)?),
        Format::Text => {
            println!("workload:  {} (version {})", output.name, output.version);
            println!("kind:      {}", output.kind);
            println!("scorer:    {}", output.scorer);
            println!("file:      {}", output.path);
            println!("tasks:     {}", output.tasks);
            println!("prompts:   sha256 {}", output.prompt_sha256);
            if !output.description.is_empty() {
                println!("about:     {}", output.description);
            }
            println!();
            for task in &output.first_tasks {
                let gold = if task.gold_files.is_empty() {
                    task.answers.join(" | ")
                } else {
                    task.gold_files.join(", ")
                };
                println!(
                    "{}  ({} tokens)  {}  -> {}",
                    task.id,
                    task.context_tokens,
                    task.question.lines().next().unwrap_or(""),
                    gold
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn mine(args: MineArgs) -> anyhow::Result<ExitCode> {
    // A `.bundle` is cloned bare to a temporary folder first, as `svc bench` does.
    let (_clone, repo, tip) = super::bench::open_history(&args.repo, std::path::Path::new(""))?;
    let tasks = code::mine_git_from(&repo, tip, args.max, args.since.as_deref())?;
    let mut text = String::new();
    for task in &tasks {
        text.push_str(&serde_json::to_string(task)?);
        text.push('\n');
    }
    match &args.out {
        Some(path) => {
            svc::state::atomic_write_shared(path, text.as_bytes())
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!("svc: {} tasks written to {}", tasks.len(), path.display());
        }
        None => print!("{text}"),
    }
    Ok(ExitCode::SUCCESS)
}
