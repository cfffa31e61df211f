//! `svc records validate|schema`.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};
use serde::Serialize;
use std::path::PathBuf;

use svc::trial::TrialRecord;
use svc::trial::accept;
use svc::trial::parquet;
use svc::trial::read::{RawRecord, RecordReader};
use svc::trial::validate::{Problem, RecordValidator, SCHEMA_JSON};

use super::Format;

#[derive(Debug, Subcommand)]
pub enum RecordsCommand {
    /// Validate trial records (JSON Lines, a JSON array, or one object; `-` reads stdin).
    ///
    /// Exit 0 when all records are valid, 1 when any is invalid, 2 when an input is unreadable.
    Validate(ValidateArgs),
    /// Print the trial-record JSON Schema (draft 2020-12).
    Schema,
    /// Write the records of files, run directories or folders of shards as one Parquet file
    /// (for DuckDB, polars, pyarrow, Spark); `svc report` reads it back.
    ///
    /// Exit 0 written; 1 an input record is invalid (nothing is written); 2 unreadable input.
    Export(ExportArgs),
    /// Write synthetic paired records (4 conditions) for report tests and benchmarks.
    #[command(hide = true)]
    Generate(super::report::GenerateArgs),
}

#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The Parquet file to write.
    #[arg(long, value_name = "FILE")]
    parquet: PathBuf,
    /// Record files (JSONL or Parquet), run directories, or folders of shards.
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Write an empty Parquet file for input with no records (by default that fails, exit 1,
    /// as `validate` does, so a step fed an empty or truncated file does not pass).
    #[arg(long)]
    allow_empty: bool,
}

#[derive(Debug, Args)]
pub struct ValidateArgs {
    /// Record files; `-` reads standard input.
    #[arg(required = true)]
    files: Vec<String>,
    /// `text` prints one line per problem; `json` prints JSON Lines: one object per problem and
    /// a final summary object.
    #[arg(long, value_enum, default_value_t)]
    format: Format,
    /// Print at most N problems, then only count the rest (the summary counts every invalid
    /// record). 0 prints none.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    max_problems: u64,
    /// Exit 0 on input with no records at all (by default that is a failed check, exit 1, so a
    /// CI step fed an empty or truncated file does not pass).
    #[arg(long)]
    allow_empty: bool,
}

pub fn run(command: RecordsCommand) -> anyhow::Result<ExitCode> {
    match command {
        RecordsCommand::Schema => {
            print!("{SCHEMA_JSON}");
            Ok(ExitCode::SUCCESS)
        }
        RecordsCommand::Validate(args) => validate(args),
        RecordsCommand::Export(args) => export(args),
        RecordsCommand::Generate(args) => super::report::run_generate(args),
    }
}

fn export(args: ExportArgs) -> anyhow::Result<ExitCode> {
    // `-` is standard input, as for `validate` and `report` (it was "No such file").
    let mut files: Vec<Option<PathBuf>> = Vec::new();
    for input in &args.inputs {
        if input.as_os_str() == "-" {
            files.push(None);
        } else {
            files.extend(
                svc::report::input::resolve_inputs(std::slice::from_ref(input))?
                    .into_iter()
                    .map(Some),
            );
        }
    }
    let mut records: Vec<TrialRecord> = Vec::new();
    for file in &files {
        let name = file
            .as_ref()
            .map_or_else(|| "stdin".to_string(), |path| path.display().to_string());
        let raw: Vec<RawRecord> = match file {
            Some(path) if parquet::is_parquet(path) => {
                let bytes = std::fs::read(path).with_context(|| format!("reading {name}"))?;
                parquet::raw_records(&bytes).with_context(|| format!("reading {name}"))?
            }
            _ => {
                let reader: Box<dyn io::Read> = match file {
                    Some(path) => {
                        Box::new(File::open(path).with_context(|| format!("reading {name}"))?)
                    }
                    None => Box::new(io::stdin()),
                };
                RecordReader::new(Box::new(BufReader::new(reader)), Some(&name))
                    .with_context(|| format!("reading {name}"))?
                    .collect::<io::Result<Vec<_>>>()
                    .with_context(|| format!("reading {name}"))?
            }
        };
        for item in raw {
            let parsed = item
                .text
                .map_err(|reason| reason.to_string())
                .and_then(|text| {
                    serde_json::from_str::<TrialRecord>(&text).map_err(|e| e.to_string())
                });
            match parsed {
                Ok(record) => records.push(record),
                Err(message) => {
                    eprintln!(
                        "svc: {name}:{}: not a valid trial record ({message}); nothing was written. `svc records validate {name}` lists every problem",
                        item.line
                    );
                    return Ok(ExitCode::from(1));
                }
            }
        }
    }
    if records.is_empty() && !args.allow_empty {
        eprintln!(
            "svc: no records in the inputs; nothing was written (pass --allow-empty to write an empty Parquet file)"
        );
        return Ok(ExitCode::from(1));
    }
    let bytes = parquet::write_records(&records);
    svc::state::atomic_write_shared(&args.parquet, &bytes)
        .with_context(|| format!("writing {}", args.parquet.display()))?;
    println!(
        "wrote {} records from {} files to {} ({} bytes)",
        records.len(),
        files.len(),
        args.parquet.display(),
        bytes.len()
    );
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct ProblemLine<'a> {
    r#type: &'static str,
    file: &'a str,
    line: usize,
    #[serde(flatten)]
    problem: &'a Problem,
}

#[derive(Serialize)]
struct Summary<'a> {
    r#type: &'static str,
    valid: u64,
    invalid: u64,
    unreadable: &'a [String],
    /// Problems found but not printed because of `--max-problems`.
    problems_not_shown: u64,
}

fn validate(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    // Its output cut short by its reader (`| head -1`) is how a pipe ends: exit quietly as a
    // shell's SIGPIPE would, as every other command does. (Only stdout is written here, so a
    // broken pipe is always that one.)
    match validate_to_stdout(args) {
        Err(error)
            if error.chain().any(|cause| {
                cause
                    .downcast_ref::<io::Error>()
                    .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
            }) =>
        {
            Ok(ExitCode::from(141))
        }
        other => other,
    }
}

fn validate_to_stdout(args: ValidateArgs) -> anyhow::Result<ExitCode> {
    let validator = RecordValidator::new()?;
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let (mut valid, mut invalid) = (0u64, 0u64);
    let (mut shown, mut not_shown) = (0u64, 0u64);
    let mut unreadable = Vec::new();
    for name in &args.files {
        // Parquet from `svc records export` is checked row by row, as `svc report` reads it.
        let items: Box<dyn Iterator<Item = io::Result<RawRecord>>> =
            if name != "-" && parquet::is_parquet(std::path::Path::new(name)) {
                let rows = std::fs::read(name)
                    .map_err(|e| e.to_string())
                    .and_then(|bytes| parquet::raw_records(&bytes).map_err(|e| e.to_string()));
                match rows {
                    Ok(rows) => Box::new(rows.into_iter().map(Ok)),
                    Err(error) => {
                        eprintln!("svc: cannot read {name} as Parquet: {error}");
                        unreadable.push(name.clone());
                        continue;
                    }
                }
            } else {
                let input: Box<dyn BufRead> = if name == "-" {
                    Box::new(BufReader::new(io::stdin()))
                } else {
                    match File::open(name) {
                        Ok(file) => Box::new(BufReader::with_capacity(1 << 16, file)),
                        Err(error) => {
                            eprintln!("svc: cannot read {name}: {error}");
                            unreadable.push(name.clone());
                            continue;
                        }
                    }
                };
                let reader = match RecordReader::new(input, Some(name)) {
                    Ok(reader) => reader,
                    Err(error) => {
                        eprintln!("svc: cannot read {name}: {error}");
                        unreadable.push(name.clone());
                        continue;
                    }
                };
                Box::new(reader)
            };
        for item in items {
            let item = match item {
                Ok(item) => item,
                Err(error) => {
                    eprintln!("svc: cannot read {name}: {error}");
                    unreadable.push(name.clone());
                    break;
                }
            };
            // The acceptance rule every reader shares (report, gate, resume).
            let problems = match &item.text {
                Ok(text) => match accept::check(&validator, text) {
                    Ok(_) => Vec::new(),
                    Err(problems) => problems,
                },
                Err(reason) => vec![Problem {
                    kind: svc::trial::ProblemKind::Json,
                    pointer: String::new(),
                    rule_id: "json".into(),
                    message: reason.clone(),
                    value: None,
                }],
            };
            if problems.is_empty() {
                valid += 1;
                continue;
            }
            invalid += 1;
            for problem in &problems {
                if shown < args.max_problems {
                    shown += 1;
                    write_problem(&mut out, args.format, name, item.line, problem)?;
                } else {
                    not_shown += 1;
                }
            }
        }
    }
    let empty = valid == 0 && invalid == 0 && unreadable.is_empty();
    match args.format {
        Format::Text => {
            if not_shown > 0 {
                writeln!(
                    out,
                    "… {not_shown} more problems not shown (--max-problems {})",
                    args.max_problems
                )?;
            }
            writeln!(out, "{valid} valid, {invalid} invalid")?;
        }
        Format::Json => {
            let summary = Summary {
                r#type: "summary",
                valid,
                invalid,
                unreadable: &unreadable,
                problems_not_shown: not_shown,
            };
            writeln!(out, "{}", serde_json::to_string(&summary)?)?;
        }
    }
    out.flush().context("writing the report")?;
    if empty && !args.allow_empty {
        eprintln!(
            "svc: no records in {}: an empty input fails the check (pass --allow-empty if that is expected)",
            args.files.join(", ")
        );
    }
    Ok(if !unreadable.is_empty() {
        ExitCode::from(2)
    } else if invalid > 0 || (empty && !args.allow_empty) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn write_problem(
    out: &mut impl Write,
    format: Format,
    file: &str,
    line: usize,
    problem: &Problem,
) -> anyhow::Result<()> {
    match format {
        Format::Text => {
            let pointer = if problem.pointer.is_empty() {
                "(record)"
            } else {
                &problem.pointer
            };
            write!(
                out,
                "{file}:{line}: {pointer}: {} [{}]",
                problem.message, problem.rule_id
            )?;
            if let Some(value) = &problem.value {
                write!(out, "; got {value}")?;
            }
            writeln!(out)?;
        }
        Format::Json => {
            let line = ProblemLine {
                r#type: "problem",
                file,
                line,
                problem,
            };
            writeln!(out, "{}", serde_json::to_string(&line)?)?;
        }
    }
    Ok(())
}
