//! `svc compress`, `svc distill` and `svc batch`: budgeted compression with recoverable
//! elisions, response distillation, and many compressions at once.

use std::io::{self, IsTerminal, Read};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use svc::context::commit::CommitStore;
use svc::context::compress::batch::{self, BatchJob, BatchRecord, JobStatus};
use svc::context::compress::{self, CompressError, CompressOptions, ContentKind, compress_bytes};
use svc::context::distill::{self, Level};
use svc::state;
use svc::tokens::{Encoding, Tokenizer};

use super::Format;

#[derive(Debug, Args)]
pub struct CompressArgs {
    /// File to compress; `-` reads standard input.
    input: String,
    /// Token budget for the output (exact count, see --encoding).
    #[arg(long)]
    budget: usize,
    /// Content kind [default: from the file name (extension), else detected from the content].
    #[arg(long, value_enum)]
    kind: Option<ContentKind>,
    /// Terms that make a sentence worth keeping (prose only: with --kind code|json|logs it is
    /// an error; a detected non-prose input gets a note).
    #[arg(long)]
    query: Option<String>,
    /// The input is a conversation: a JSON array of {role, content} messages, or an object
    /// with a `messages` array.
    #[arg(long, conflicts_with_all = ["kind", "query"])]
    messages: bool,
    /// `text` prints the compressed content (summary on stderr); `json` prints the full result
    /// with the commit id and every elision.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    #[arg(long, value_enum, default_value_t)]
    encoding: Encoding,
}

#[derive(Debug, Args)]
pub struct DistillArgs {
    /// Response to distill; `-` reads standard input.
    input: String,
    /// How hard to distill.
    #[arg(long, value_enum, default_value_t)]
    level: Level,
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    #[arg(long, value_enum, default_value_t)]
    encoding: Encoding,
}

#[derive(Debug, Args)]
pub struct BatchArgs {
    /// A directory (every file, honouring .gitignore) or a JSON Lines file of
    /// {id, query?, path | text | messages, kind?, budget?} jobs.
    input: PathBuf,
    /// Token budget for each job.
    #[arg(long)]
    budget: usize,
    /// Exit 1 when any job cannot fit its budget.
    #[arg(long)]
    fail_over_budget: bool,
    /// `text` prints a table; `json` prints one JSON object per job and a summary line.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    #[arg(long, value_enum, default_value_t)]
    encoding: Encoding,
}

fn read_input(input: &str) -> anyhow::Result<Vec<u8>> {
    if input == "-" {
        let mut bytes = Vec::new();
        io::stdin()
            .read_to_end(&mut bytes)
            .context("cannot read standard input")?;
        return Ok(bytes);
    }
    std::fs::read(input).with_context(|| format!("cannot read {input}"))
}

fn store() -> anyhow::Result<CommitStore> {
    Ok(CommitStore::new(&state::home()?))
}

fn check_budget(budget: usize) -> anyhow::Result<()> {
    if budget == 0 {
        anyhow::bail!("--budget must be at least 1 token");
    }
    Ok(())
}

/// Budget errors are a failed gate (exit 1); everything else is an error (exit 2).
fn budget_failure(error: &CompressError) -> bool {
    matches!(
        error,
        CompressError::OverBudget { .. }
            | CompressError::ProtectedOverBudget { .. }
            | CompressError::MessagesOverBudget { .. }
    )
}

pub fn run_compress(args: CompressArgs) -> anyhow::Result<ExitCode> {
    check_budget(args.budget)?;
    // Ignored in silence before: only prose is cut by the query's terms.
    if let (Some(kind), Some(_)) = (args.kind, &args.query)
        && kind != ContentKind::Prose
    {
        anyhow::bail!(
            "--query applies to prose only; --kind {kind} does not read it: drop one of them"
        );
    }
    let bytes = read_input(&args.input)?;
    let tokenizer = Tokenizer::new(args.encoding);
    let store = store()?;
    if args.messages {
        return run_compress_messages(&args, &bytes, &store, &tokenizer);
    }
    let options = CompressOptions {
        kind: args.kind,
        query: args.query.clone(),
        source: args.input.clone(),
    };
    let result = match compress_bytes(&bytes, args.budget, &options, &store, &tokenizer) {
        Ok(result) => result,
        Err(error) if budget_failure(&error) => {
            eprintln!("svc: {error}");
            return Ok(ExitCode::from(1));
        }
        Err(error) => return Err(error.into()),
    };
    if args.query.is_some() && result.kind != ContentKind::Prose {
        eprintln!(
            "svc: note: --query applies to prose only; this input was read as {} and compressed without it",
            result.kind
        );
    }
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&result)?),
        Format::Text => {
            print!("{}", result.text);
            eprintln!(
                "svc: {}{} {} → {} tokens ({:.1}x), {} elisions, commit {}{}",
                result.kind,
                result
                    .code
                    .as_ref()
                    .map(|how| format!(" ({how})"))
                    .unwrap_or_default(),
                result.original_tokens,
                result.tokens,
                ratio(result.original_tokens, result.tokens),
                result.elisions.len(),
                result.ctx_id,
                if result.elisions.is_empty() {
                    String::new()
                } else {
                    format!(
                        "; recover with `svc context recover {} CHUNK`",
                        result.ctx_id
                    )
                }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn run_compress_messages(
    args: &CompressArgs,
    bytes: &[u8],
    store: &CommitStore,
    tokenizer: &Tokenizer,
) -> anyhow::Result<ExitCode> {
    let text = compress::decode(bytes, &args.input)?;
    let conversation = compress::parse_conversation(text, &args.input)?;
    let result = match compress::compress_conversation(&conversation, args.budget, store, tokenizer)
    {
        Ok(result) => result,
        Err(error) if budget_failure(&error) => {
            eprintln!("svc: {error}");
            return Ok(ExitCode::from(1));
        }
        Err(error) => return Err(error.into()),
    };
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&result)?),
        Format::Text => {
            // A request object comes back whole (its `system`, `model`, `tools`, … as given).
            println!("{}", conversation.request_json(&result.messages)?);
            eprintln!(
                "svc: messages {} → {} tokens ({:.1}x), {} elisions, commit {}",
                result.original_tokens,
                result.tokens,
                ratio(result.original_tokens, result.tokens),
                result.elisions.len(),
                result.ctx_id
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn ratio(before: usize, after: usize) -> f64 {
    if after == 0 {
        1.0
    } else {
        before as f64 / after as f64
    }
}

pub fn run_distill(args: DistillArgs) -> anyhow::Result<ExitCode> {
    let bytes = read_input(&args.input)?;
    let text = compress::decode(&bytes, &args.input)?;
    let result = distill::distill(text, args.level, &Tokenizer::new(args.encoding));
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&result)?),
        Format::Text => {
            print!("{}", result.text);
            let saved = result.tokens_before.saturating_sub(result.tokens_after);
            eprintln!(
                "svc: distilled ({}) {} → {} tokens (-{:.1}%)",
                result.level,
                result.tokens_before,
                result.tokens_after,
                100.0 * saved as f64 / result.tokens_before.max(1) as f64
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct JobLine<'a> {
    r#type: &'static str,
    #[serde(flatten)]
    record: &'a BatchRecord,
}

#[derive(Serialize)]
struct Summary {
    r#type: &'static str,
    jobs: usize,
    ok: usize,
    over_budget: usize,
    errors: usize,
    tokens_before: usize,
    tokens_after: usize,
}

pub fn run_batch(args: BatchArgs) -> anyhow::Result<ExitCode> {
    check_budget(args.budget)?;
    let tokenizer = Tokenizer::new(args.encoding);
    // Group-committed: each job's files go to a pack, made durable in batches, instead of a
    // file and two fsyncs each (12,000 tiny files took 40 s, 27 of them in the kernel, and left
    // 36,000 files in the state directory).
    let store = CommitStore::grouped(&state::home()?);
    let mut records: Vec<BatchRecord> = Vec::new();
    let jobs: Vec<BatchJob> = if args.input.is_dir() {
        let found = batch::jobs_from_dir(&args.input)?;
        if !found.skipped_binary.is_empty() {
            eprintln!(
                "svc: skipped {} binary file(s), e.g. {}",
                found.skipped_binary.len(),
                found.skipped_binary[0].display()
            );
        }
        found.jobs
    } else {
        let mut jobs = Vec::new();
        let lines = batch::jobs_from_jsonl(&args.input)?;
        // A source file given by mistake was a table of one "not valid JSON" error per line.
        if lines.len() > 1 && lines.iter().all(Result::is_err) {
            let first = std::fs::read_to_string(&args.input).unwrap_or_default();
            let first = first.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            if serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(
                svc::text::without_bom(first),
            )
            .is_err()
            {
                anyhow::bail!(
                    "{}: not a JSON Lines file of jobs (its first line is not a JSON object); give a directory to compress every file in it, or one job per line: {{\"id\", \"path\" | \"text\" | \"messages\", …}}",
                    args.input.display()
                );
            }
        }
        for job in lines {
            match job {
                Ok(job) => jobs.push(job),
                Err(error) => records.push(BatchRecord {
                    id: format!("line {}", error.line),
                    kind: None,
                    tokens_before: None,
                    tokens_after: None,
                    ratio: None,
                    status: JobStatus::Error,
                    ctx_id: None,
                    elisions: 0,
                    budget: args.budget,
                    location: format!("{}:{}", error.path.display(), error.line),
                    error: Some(error.to_string()),
                    text: None,
                }),
            }
        }
        jobs
    };
    let progress = progress_bar(jobs.len());
    records.extend(run_parallel(
        &jobs,
        args.budget,
        &store,
        &tokenizer,
        &progress,
    )?);
    progress.finish_and_clear();
    // No ctx id is printed before its commit is durable.
    store
        .sync()
        .context("making the batch's commits durable (nothing was printed; run it again)")?;
    // Bad lines first were collected before the jobs; show everything in input order.
    records.sort_by_key(|r| location_key(&r.location));
    let count = |status| records.iter().filter(|r| r.status == status).count();
    let (ok, over, errors) = (
        count(JobStatus::Ok),
        count(JobStatus::OverBudget),
        count(JobStatus::Error),
    );
    let summary = Summary {
        r#type: "summary",
        jobs: records.len(),
        ok,
        over_budget: over,
        errors,
        // Over the jobs that have both counts: an over-budget job's size before, with no size
        // after, made the totals read as a compression it never had.
        tokens_before: records
            .iter()
            .filter(|r| r.tokens_after.is_some())
            .filter_map(|r| r.tokens_before)
            .sum(),
        tokens_after: records.iter().filter_map(|r| r.tokens_after).sum(),
    };
    match args.format {
        Format::Json => {
            for record in &records {
                println!(
                    "{}",
                    serde_json::to_string(&JobLine {
                        r#type: "job",
                        record
                    })?
                );
            }
            println!("{}", serde_json::to_string(&summary)?);
        }
        Format::Text => {
            print!("{}", render_table(&records));
            println!(
                "{} jobs: {ok} ok, {over} over budget, {errors} errors; {} → {} tokens",
                summary.jobs, summary.tokens_before, summary.tokens_after
            );
        }
    }
    for record in &records {
        if record.status != JobStatus::Ok {
            let label = if record.status == JobStatus::OverBudget {
                "over budget"
            } else {
                "error"
            };
            eprintln!(
                "svc: {label}: {} ({}): {}",
                record.id,
                record.location,
                record.error.as_deref().unwrap_or_default()
            );
        }
    }
    if errors > 0 {
        return Ok(ExitCode::from(2));
    }
    if args.fail_over_budget && over > 0 {
        // Each job names its own budget (a job line may set one).
        eprintln!(
            "svc: {over} job(s) cannot fit their budget: {}",
            records
                .iter()
                .filter(|r| r.status == JobStatus::OverBudget)
                .map(|r| format!("{} ({} tokens)", r.id, r.budget))
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs the jobs on all cores (jobs are independent; commits are content-addressed and
/// written atomically, so concurrent commits are safe). Records come back in job order.
/// Jobs between two syncs of the group-committed store: what is staged in memory stays
/// bounded on a large tree.
const SYNC_EVERY: usize = 512;

fn run_parallel(
    jobs: &[BatchJob],
    budget: usize,
    store: &CommitStore,
    tokenizer: &Tokenizer,
    progress: &indicatif::ProgressBar,
) -> anyhow::Result<Vec<BatchRecord>> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let failed_sync: Mutex<Option<String>> = Mutex::new(None);
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(jobs.len().max(1));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, BatchRecord)>> = Mutex::new(Vec::with_capacity(jobs.len()));
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| {
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(index) else { break };
                    progress.set_message(job.id.clone());
                    let record = batch::run_job(job, budget, store, tokenizer);
                    progress.inc(1);
                    if (index + 1).is_multiple_of(SYNC_EVERY)
                        && let Err(error) = store.sync()
                    {
                        failed_sync
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .get_or_insert(error.to_string());
                    }
                    // A poisoned lock means another worker panicked; its panic propagates from
                    // the scope anyway, so keep going with the data.
                    results
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((index, record));
                }
            });
        }
    });
    if let Some(error) = failed_sync.into_inner().unwrap_or_else(|e| e.into_inner()) {
        anyhow::bail!(
            "making the batch's commits durable: {error} (nothing was printed; run it again)"
        );
    }
    let mut results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.sort_by_key(|(index, _)| *index);
    Ok(results.into_iter().map(|(_, record)| record).collect())
}

/// Sorts `file:line` locations by line number, plain paths by name.
fn location_key(location: &str) -> (String, usize) {
    match location.rsplit_once(':') {
        Some((file, line)) if line.bytes().all(|b| b.is_ascii_digit()) && !line.is_empty() => {
            (file.to_string(), line.parse().unwrap_or(0))
        }
        _ => (location.to_string(), 0),
    }
}

fn progress_bar(jobs: usize) -> indicatif::ProgressBar {
    // Only worth drawing for long runs, and only for a person watching a terminal.
    if jobs < 20 || !io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(jobs as u64);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} jobs {elapsed} {wide_msg}")
    {
        bar.set_style(style);
    }
    bar
}

/// The batch table (Markdown, readable in a terminal and pasteable into notes).
pub fn render_table(records: &[BatchRecord]) -> String {
    let mut out = String::from(
        "| id | kind | tokens before | tokens after | ratio | status | ctx id |\n|---|---|---:|---:|---:|---|---|\n",
    );
    let dash = || "-".to_string();
    for r in records {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            r.id,
            r.kind.clone().unwrap_or_else(dash),
            r.tokens_before.map(|t| t.to_string()).unwrap_or_else(dash),
            r.tokens_after.map(|t| t.to_string()).unwrap_or_else(dash),
            r.ratio.map(|x| format!("{x:.1}x")).unwrap_or_else(dash),
            r.status.as_str(),
            r.ctx_id.clone().unwrap_or_else(dash),
        ));
    }
    out
}
