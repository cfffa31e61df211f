//! Fuzzing that stays: every parser a user feeds gets mutated inputs derived from real seeds
//! (the committed fixtures, workloads, runners and gate files), and each input must end
//! without a panic, within a time limit, with output bounded by its size, and, when refused,
//! with an error that says where (a line and column, a field path, a message index or a file).
//!
//! `make test` gives each parser a second or so (`SVC_FUZZ_SECONDS`, default 1); `make fuzz`
//! gives each ten minutes. The mutator is a seeded byte-level one with a syntax dictionary
//! (SplitMix64, so a failing run is replayed by its seed): bit flips, byte sets, inserted
//! tokens, deleted, duplicated and spliced ranges, truncation. A failing input is written to
//! `$CARGO_TARGET_DIR/fuzz-failures/` (or the temp dir) and its path is in the panic message.

use std::fs;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use svc::context::CommitStore;
use svc::context::compress::{self, CompressOptions, ContentKind};
use svc::context::distill::{self, Level};
use svc::harness::runner::spec as runner_spec;
use svc::harness::workload::spec as workload_spec;
use svc::report::PricingSnapshot;
use svc::report::gate::Thresholds;
use svc::rng::SplitMix64;
use svc::tokens::{Encoding, Tokenizer};
use svc::trial::accept;
use svc::trial::read::RecordReader;
use svc::trial::validate::RecordValidator;
use svc::witness::{Mode, Profile, WitnessInput};

use crate::harness::root;

/// One input taking longer than this is a hang: 5 s by default (debug build, 2 cores, other
/// tests running), `SVC_FUZZ_HANG_SECONDS` for a loaded machine or a niced long run.
fn hang_limit() -> Duration {
    let seconds = std::env::var("SVC_FUZZ_HANG_SECONDS")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(5.0);
    Duration::from_secs_f64(seconds)
}

/// Tokens the mutator inserts: the syntax of JSON, TOML and the prose/code/log readers.
const DICTIONARY: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b",",
    b":",
    b"=",
    b"\n",
    b"\r\n",
    b"#",
    b".",
    b"0",
    b"-1",
    b"1e999",
    b"412.0",
    b"null",
    b"true",
    b"false",
    b"\\u0000",
    b"\\",
    b"'",
    b"[[x]]",
    b"\t",
    b"\xff",
    b"\xe2\x80",
    b"```",
    b"fn ",
    b"}\n}",
    b"ERROR ",
    b" not ",
    b"1921",
    b"\"a\":",
    b"[workload]",
    b"name = ",
    b"\"\"\"",
    b"{\"role\":\"user\",\"content\":",
];

/// How long each parser is fuzzed.
fn budget() -> Duration {
    let seconds = std::env::var("SVC_FUZZ_SECONDS")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(1.0);
    Duration::from_secs_f64(seconds)
}

fn seed_value() -> u64 {
    std::env::var("SVC_FUZZ_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed)
}

/// The input under test and when it started, for the watchdog.
type Running = Option<(Instant, Vec<u8>)>;

struct Mutator {
    rng: SplitMix64,
}

impl Mutator {
    fn mutate(&mut self, seeds: &[Vec<u8>]) -> Vec<u8> {
        let rng = &mut self.rng;
        let mut data = seeds[rng.below(seeds.len())].clone();
        let steps = 1 + rng.below(8);
        for _ in 0..steps {
            let len = data.len();
            match rng.below(8) {
                0 if len > 0 => {
                    let at = rng.below(len);
                    data[at] ^= 1 << rng.below(8);
                }
                1 if len > 0 => {
                    let at = rng.below(len);
                    data[at] = (rng.next_u64() & 0xff) as u8;
                }
                2 | 3 => {
                    let token = DICTIONARY[rng.below(DICTIONARY.len())];
                    let at = rng.below(len + 1);
                    data.splice(at..at, token.iter().copied());
                }
                4 if len > 0 => {
                    let start = rng.below(len);
                    let end = (start + 1 + rng.below(64)).min(len);
                    data.drain(start..end);
                }
                5 if len > 0 => {
                    let start = rng.below(len);
                    let end = (start + 1 + rng.below(256)).min(len);
                    let piece: Vec<u8> = data[start..end].to_vec();
                    let at = rng.below(len + 1);
                    data.splice(at..at, piece);
                }
                6 => {
                    let other = &seeds[rng.below(seeds.len())];
                    if !other.is_empty() {
                        let start = rng.below(other.len());
                        let end = (start + 1 + rng.below(512)).min(other.len());
                        let at = rng.below(len + 1);
                        data.splice(at..at, other[start..end].iter().copied());
                    }
                }
                _ if len > 0 => data.truncate(rng.below(len)),
                _ => data.push(b'{'),
            }
        }
        data
    }
}

fn failure_dir() -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    base.join("fuzz-failures")
}

/// Runs `target` on mutated seeds for the fuzz budget; a panic, a hang or a broken invariant
/// (`Err`) fails the test with the input saved. Returns the number of inputs run.
fn fuzz(name: &str, seeds: Vec<Vec<u8>>, mut target: impl FnMut(&[u8]) -> Result<(), String>) {
    assert!(!seeds.is_empty(), "{name}: no seeds");
    let mut mutator = Mutator {
        rng: SplitMix64::new(seed_value() ^ name.len() as u64),
    };
    // A parser that never returns cannot be timed after the fact: a watchdog saves the input
    // and aborts the test process when one input runs far past the limit.
    let current: std::sync::Arc<std::sync::Mutex<Running>> = std::sync::Arc::default();
    let hang = hang_limit();
    let watched = current.clone();
    let watchdog_name = name.to_string();
    let finished = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watchdog_finished = finished.clone();
    let watchdog = std::thread::spawn(move || {
        while !watchdog_finished.load(std::sync::atomic::Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(100));
            let guard = watched.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((since, input)) = guard.as_ref()
                && since.elapsed() > hang * 6
            {
                let dir = failure_dir();
                let _ = fs::create_dir_all(&dir);
                let path = dir.join(format!("{watchdog_name}-hang.bin"));
                let _ = fs::write(&path, input);
                eprintln!(
                    "fuzz {watchdog_name}: an input has run for {:?} (a hang); saved to {}",
                    since.elapsed(),
                    path.display()
                );
                std::process::abort();
            }
        }
    });
    let started = Instant::now();
    let (budget, mut runs) = (budget(), 0u64);
    // The seeds themselves first, then mutants.
    let mut pending: Vec<Vec<u8>> = seeds.clone();
    while started.elapsed() < budget || !pending.is_empty() {
        let input = pending.pop().unwrap_or_else(|| mutator.mutate(&seeds));
        let one = Instant::now();
        *current.lock().unwrap_or_else(|e| e.into_inner()) = Some((one, input.clone()));
        let outcome = catch_unwind(AssertUnwindSafe(|| target(&input)));
        *current.lock().unwrap_or_else(|e| e.into_inner()) = None;
        let took = one.elapsed();
        let problem = match outcome {
            Err(_) => Some("panicked".to_string()),
            Ok(Err(broken)) => Some(broken),
            Ok(Ok(())) if took > hang => Some(format!("took {took:?} (a hang)")),
            Ok(Ok(())) => None,
        };
        if let Some(problem) = problem {
            let dir = failure_dir();
            let _ = fs::create_dir_all(&dir);
            let path = dir.join(format!("{name}-{runs}.bin"));
            let _ = fs::write(&path, &input);
            panic!(
                "fuzz {name}: input {runs} {problem}; saved to {}",
                path.display()
            );
        }
        runs += 1;
    }
    finished.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = watchdog.join();
    // The figures `make fuzz` reports (visible with --nocapture / nextest's output on success).
    println!(
        "fuzz {name}: {runs} inputs in {:.1} s ({:.0}/s), no failure",
        started.elapsed().as_secs_f64(),
        runs as f64 / started.elapsed().as_secs_f64()
    );
}

fn read_seeds(paths: &[PathBuf]) -> Vec<Vec<u8>> {
    paths
        .iter()
        .filter_map(|p| fs::read(p).ok())
        .filter(|b| b.len() < 200_000)
        .collect()
}

fn files_in(dir: &str, extension: Option<&str>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root().join(dir)];
    while let Some(dir) = stack.pop() {
        let Ok(listing) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in listing.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if extension.is_none_or(|e| path.extension().is_some_and(|x| x == e)) {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// A refusal must say where: a line (and column), a JSON pointer / field path, or a file.
fn locates(message: &str) -> bool {
    message.contains("line")
        || message.contains('/')
        || message.contains('.')
        || message.contains("message ")
        || message.contains("field")
        || message.contains('`')
}

/// Whether the reader takes `input` (named `name`) as a JSON array of records.
fn array_of(input: &[u8], name: Option<&str>) -> bool {
    let forced_lines = name.is_some_and(|n| n.ends_with(".jsonl"));
    let body = input.strip_prefix(&[0xEF, 0xBB, 0xBF]).unwrap_or(input);
    let first = body
        .iter()
        .find(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n'));
    !forced_lines && first == Some(&b'[')
}

#[test]
fn fuzz_trial_records() {
    let validator = RecordValidator::new().expect("schema");
    let seeds = read_seeds(&files_in("fixtures/records", None));
    fuzz("records", seeds, |input| {
        for name in [Some("input.jsonl"), Some("input.json"), None] {
            // Bounded output: an item per line, or per object of a line holding several.
            let bound = input.iter().filter(|&&b| b == b'\n' || b == b'{').count() + 2;
            let reader = RecordReader::new(Box::new(std::io::Cursor::new(input.to_vec())), name)
                .map_err(|e| e.to_string())?;
            let (mut items, mut last_broken_line) = (0usize, None);
            for item in reader {
                items += 1;
                if items > bound {
                    return Err(format!(
                        "{items} items from {bound} lines and objects ({name:?})"
                    ));
                }
                let item = item.map_err(|e| e.to_string())?;
                let Ok(text) = item.text else {
                    // One broken line is one problem; in an array each bad element is one
                    // (a one-line array holds many).
                    if last_broken_line == Some(item.line) && !array_of(input, name) {
                        return Err(format!("two problems for line {} ({name:?})", item.line));
                    }
                    last_broken_line = Some(item.line);
                    continue;
                };
                let schema_ok = validator.check_str(&text).is_empty();
                match accept::check(&validator, &text) {
                    Ok(_) if !schema_ok => {
                        return Err("accepted a record the schema refuses".to_string());
                    }
                    Ok(_) => {}
                    Err(problems) => {
                        let stricter = problems.iter().any(|p| {
                            p.message.contains("64 bits") || p.message.contains("duplicate")
                        });
                        if schema_ok && !stricter {
                            return Err(format!("refused a schema-valid record: {problems:?}"));
                        }
                        if problems.is_empty() {
                            return Err("refused without a problem".to_string());
                        }
                        for problem in &problems {
                            let located = !problem.pointer.is_empty()
                                || problem.message.contains("line")
                                || problem.rule_id == "required"
                                || problem.rule_id.starts_with("cross-field")
                                || problem.rule_id == "type";
                            if !located {
                                return Err(format!("a problem without a place: {problem:?}"));
                            }
                        }
                    }
                }
            }
        }
        Ok(())
    });
}

fn toml_target(name: &str, seeds: Vec<Vec<u8>>, parse: impl Fn(&str, &Path) -> Result<(), String>) {
    let path = Path::new("fuzzed/input.toml");
    fuzz(name, seeds, |input| {
        let Ok(text) = std::str::from_utf8(input) else {
            return Ok(()); // files are read as UTF-8 first; that refusal names the file
        };
        match parse(text, path) {
            Ok(()) => Ok(()),
            Err(message) if message.contains("fuzzed/input.toml") || locates(&message) => Ok(()),
            Err(message) => Err(format!("an error without a place: {message}")),
        }
    });
}

#[test]
fn fuzz_workload_toml() {
    toml_target(
        "workload-toml",
        read_seeds(&files_in("workloads", Some("toml"))),
        |text, path| {
            workload_spec::parse(text, path)
                .map(|_| ())
                .map_err(|e| e.to_string())
        },
    );
}

#[test]
fn fuzz_runner_toml() {
    toml_target(
        "runner-toml",
        read_seeds(&files_in("runners", Some("toml"))),
        |text, path| {
            runner_spec::parse(text, path)
                .map(|_| ())
                .map_err(|e| e.to_string())
        },
    );
}

/// Pricing snapshots and gate thresholds are read from files: each mutant is written to a
/// temporary file (as `.toml` and, for pricing, `.json`).
fn file_target<T>(
    name: &str,
    seeds: Vec<Vec<u8>>,
    extensions: &[&str],
    load: impl Fn(&Path) -> Result<T, String>,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    fuzz(name, seeds, |input| {
        for extension in extensions {
            let path = dir.path().join(format!("input.{extension}"));
            fs::write(&path, input).map_err(|e| e.to_string())?;
            if let Err(message) = load(&path)
                && !message.contains(&path.display().to_string())
            {
                return Err(format!("an error that does not name the file: {message}"));
            }
        }
        Ok(())
    });
}

#[test]
fn fuzz_pricing_files() {
    let mut seeds = read_seeds(&files_in("runners/pricing", None));
    seeds.extend(read_seeds(&[root().join("fixtures/report/pricing.toml")]));
    file_target("pricing", seeds, &["toml", "json"], |path| {
        PricingSnapshot::load(path).map_err(|e| e.to_string())
    });
}

#[test]
fn fuzz_gate_thresholds() {
    file_target(
        "thresholds",
        read_seeds(&[root().join("reports/gate.toml")]),
        &["toml"],
        |path| Thresholds::load(path).map_err(|e| e.to_string()),
    );
}

fn tokenizer() -> Tokenizer {
    Tokenizer::new(Encoding::O200kBase)
}

#[test]
fn fuzz_compress_every_kind() {
    let tokenizer = tokenizer();
    let state = tempfile::tempdir().expect("tempdir");
    let mut seeds = read_seeds(&files_in("fixtures/compress", None));
    seeds.extend(read_seeds(&files_in("fixtures/code", None)));
    let kinds = [
        None,
        Some(ContentKind::Code),
        Some(ContentKind::Json),
        Some(ContentKind::Logs),
        Some(ContentKind::Prose),
    ];
    let mut turn = 0usize;
    fuzz("compress", seeds, |input| {
        turn += 1;
        let kind = kinds[turn % kinds.len()];
        let budget = [1usize, 16, 64, 250, 4000][turn % 5];
        let options = CompressOptions {
            kind,
            query: None,
            source: "fuzzed".to_string(),
        };
        // Staged in memory and dropped: nothing is written per input.
        let store = CommitStore::grouped(state.path());
        match compress::compress_bytes(input, budget, &options, &store, &tokenizer) {
            Ok(done) => {
                if done.tokens > budget {
                    return Err(format!("{} tokens over a budget of {budget}", done.tokens));
                }
                if tokenizer.count(&done.text) != done.tokens {
                    return Err("the reported token count is not the text's".to_string());
                }
                if done.text.len() > 2 * input.len() + 4096 {
                    return Err(format!(
                        "output of {} bytes from {} bytes",
                        done.text.len(),
                        input.len()
                    ));
                }
                Ok(())
            }
            Err(error) => {
                let message = error.to_string();
                if message.is_empty() {
                    return Err("an empty error".to_string());
                }
                Ok(())
            }
        }
    });
}

#[test]
fn fuzz_conversations() {
    let tokenizer = tokenizer();
    let state = tempfile::tempdir().expect("tempdir");
    let seeds = read_seeds(&[root().join("fixtures/compress/conversation.json")]);
    let mut turn = 0usize;
    fuzz("messages", seeds, |input| {
        turn += 1;
        let Ok(text) = std::str::from_utf8(input) else {
            return Ok(());
        };
        let conversation = match compress::parse_conversation(text, "fuzzed") {
            Ok(conversation) => conversation,
            Err(error) => {
                let message = error.to_string();
                return if locates(&message) || message.contains("fuzzed") {
                    Ok(())
                } else {
                    Err(format!("an error without a place: {message}"))
                };
            }
        };
        let store = CommitStore::grouped(state.path());
        let budget = [1usize, 100, 1500][turn % 3];
        if let Ok(done) = compress::compress_conversation(&conversation, budget, &store, &tokenizer)
        {
            let size = serde_json::to_string(&done.messages)
                .map_err(|e| e.to_string())?
                .len();
            if size > 2 * input.len() + 4096 {
                return Err(format!("output of {size} bytes from {} bytes", input.len()));
            }
        }
        Ok(())
    });
}

#[test]
fn fuzz_witness_inputs() {
    let mut seeds = read_seeds(&files_in("fixtures/witness", None));
    seeds.extend(read_seeds(&files_in("fixtures/distill", None)));
    let modes = [Mode::Audit, Mode::Annotate, Mode::Strict];
    let profiles = [Profile::Rag, Profile::Qa, Profile::Summary, Profile::Code];
    let tokenizer = tokenizer();
    let mut turn = 0usize;
    fuzz("witness", seeds, |input| {
        turn += 1;
        let text = String::from_utf8_lossy(input);
        // The first part is the evidence, the rest the answer (the CLI reads two files).
        let cut = text
            .char_indices()
            .nth(text.chars().count() / 2)
            .map_or(0, |(i, _)| i);
        let (context, output) = text.split_at(cut);
        let witnessed = svc::witness::witness(&WitnessInput {
            context,
            context_source: "fuzzed",
            output,
            question: turn.is_multiple_of(2).then_some("When was it founded?"),
            mode: modes[turn % modes.len()],
            profile: profiles[turn % profiles.len()],
        });
        if witnessed.output.len() > 4 * output.len() + 4096 {
            return Err(format!(
                "witness output of {} bytes from {} bytes",
                witnessed.output.len(),
                output.len()
            ));
        }
        let level = [Level::Lite, Level::Full, Level::Ultra][turn % 3];
        let distilled = distill::distill(output, level, &tokenizer);
        if distilled.text.len() > output.len() + 64 {
            return Err(format!(
                "distill grew {} bytes to {}",
                output.len(),
                distilled.text.len()
            ));
        }
        Ok(())
    });
}

/// The commands people feed files to, end to end on mutated files: exit 0, 1 or 2 (never a
/// panic or a signal), and output bounded by the input.
#[test]
fn fuzz_commands_exit_cleanly() {
    let cases: usize = std::env::var("SVC_FUZZ_CLI_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(6);
    let state = tempfile::tempdir().expect("tempdir");
    let input = state.path().join("input");
    let commands: Vec<(&str, Vec<&str>, Vec<PathBuf>)> = vec![
        (
            "records",
            vec!["records", "validate"],
            files_in("fixtures/records/valid", None),
        ),
        (
            "compress",
            vec!["compress", "--budget", "60"],
            files_in("fixtures/compress", None),
        ),
        (
            "messages",
            vec!["compress", "--messages", "--budget", "200"],
            vec![root().join("fixtures/compress/conversation.json")],
        ),
        (
            "distill",
            vec!["distill"],
            vec![root().join("fixtures/compress/verbose-answer.md")],
        ),
        (
            "witness",
            vec![
                "witness",
                "--context-file",
                "fixtures/witness/context.txt",
                "--mode",
                "strict",
                "--output-file",
            ],
            files_in("fixtures/witness", Some("md")),
        ),
    ];
    let mut mutator = Mutator {
        rng: SplitMix64::new(seed_value()),
    };
    for (name, args, seed_files) in commands {
        let seeds = read_seeds(&seed_files);
        assert!(!seeds.is_empty(), "{name}: no seeds");
        for case in 0..cases {
            let bytes = mutator.mutate(&seeds);
            fs::write(&input, &bytes).expect("write input");
            let out = crate::harness::run(
                crate::harness::svc(&state.path().join("state"))
                    .args(&args)
                    .arg(&input),
            );
            let saved = || {
                let dir = failure_dir();
                let _ = fs::create_dir_all(&dir);
                let path = dir.join(format!("cli-{name}-{case}.bin"));
                let _ = fs::write(&path, &bytes);
                path
            };
            assert!(
                matches!(out.code, 0..=2) && !out.stderr.contains("panicked"),
                "svc {name} exited {} on {}: {}",
                out.code,
                saved().display(),
                out.stderr
            );
            assert!(
                out.stdout.len() + out.stderr.len() <= 4 * bytes.len() + 16_384,
                "svc {name}: {} bytes of output from {} bytes, input {}",
                out.stdout.len() + out.stderr.len(),
                bytes.len(),
                saved().display()
            );
        }
    }
}

/// Proxy request bodies of every provider route: the request's text parts are found or the
/// request is declared not safely rewritable, and a rewrite never has more tokens than the
/// request it replaces (the proxy's first invariant).
#[test]
fn fuzz_proxy_request_bodies() {
    use svc::proxy::optimize::{self, Outcome};
    use svc::proxy::provider::Route;
    let long = "The deployment log says the checkout service failed at 09:14 after the cache node restarted. "
        .repeat(40);
    let seeds: Vec<Vec<u8>> = vec![
        serde_json::json!({"model": "m", "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "What failed?"},
            {"role": "tool", "tool_call_id": "t1", "content": long},
            {"role": "user", "content": "When did it fail?"}]}),
        serde_json::json!({"model": "m", "max_tokens": 100, "system": "Be terse.", "messages": [
            {"role": "user", "content": [{"type": "text", "text": long, "cache_control": {"type": "ephemeral"}}]},
            {"role": "assistant", "content": "Noted."},
            {"role": "user", "content": "When did it fail?"}]}),
        serde_json::json!({"model": "m", "input": [
            {"role": "user", "content": [{"type": "input_text", "text": long}]},
            {"role": "user", "content": "When did it fail?"}]}),
        serde_json::json!({"contents": [
            {"role": "user", "parts": [{"text": long}]},
            {"role": "model", "parts": [{"text": "Noted."}]},
            {"role": "user", "parts": [{"text": "When did it fail?"}]}]}),
    ]
    .into_iter()
    .map(|v| v.to_string().into_bytes())
    .chain(read_seeds(&[root().join("fixtures/proxy/agent-transcript.json")]))
    .collect();
    let tokenizer = tokenizer();
    let state = tempfile::tempdir().expect("tempdir");
    let routes = [
        Route::AnthropicMessages,
        Route::OpenaiChat,
        Route::OpenaiResponses,
        Route::GeminiGenerate,
    ];
    let mut turn = 0usize;
    fuzz("proxy-requests", seeds, |input| {
        turn += 1;
        let Ok(body) = std::str::from_utf8(input) else {
            return Ok(()); // answered 400 in the provider's shape
        };
        let Ok(request) = serde_json::from_str::<serde_json::Value>(body) else {
            return Ok(());
        };
        let route = routes[turn % routes.len()];
        let Ok(units) = route.units(&request) else {
            return Ok(()); // forwarded unchanged, with the reason in a header
        };
        let store = CommitStore::grouped(state.path());
        let budget = [50usize, 300, 2000][turn % 3];
        match optimize::optimize(body, &request, &units, budget, &store, &tokenizer) {
            Outcome::Rewritten {
                body: rewritten,
                tokens_before,
                tokens_after,
                ..
            } => {
                if tokens_after > tokens_before {
                    return Err(format!("rewritten to {tokens_after} from {tokens_before}"));
                }
                if tokenizer.count(&rewritten) > tokenizer.count(body) {
                    return Err("the forwarded body has more tokens than the received".into());
                }
                serde_json::from_str::<serde_json::Value>(&rewritten)
                    .map_err(|e| format!("the rewritten body is not JSON: {e}"))?;
                Ok(())
            }
            Outcome::Unchanged { .. } | Outcome::Skipped { .. } => Ok(()),
        }
    });
}

/// Proof session files: a damaged file loads only if its body still matches its hash, and
/// every refusal names the file.
#[test]
fn fuzz_proof_session_files() {
    let state = tempfile::tempdir().expect("tempdir");
    let prepared = crate::harness::run(crate::harness::svc(state.path()).args([
        "proof",
        "prepare",
        "fixtures/proof/docs",
        "--query",
        "When did the bridge open to traffic?",
        "--budget",
        "30",
    ]));
    assert_eq!(prepared.code, 0, "{}", prepared.stderr);
    let value: serde_json::Value = serde_json::from_str(&prepared.stdout).expect("json");
    let id = value["session_id"].as_str().expect("id").to_string();
    let path = svc::proof::session::path_of(state.path(), &id).expect("path");
    let seeds = read_seeds(std::slice::from_ref(&path));
    assert_eq!(seeds.len(), 1, "{}", path.display());
    let shown = path.display().to_string();
    fuzz("proof-sessions", seeds, |input| {
        fs::write(&path, input).map_err(|e| e.to_string())?;
        match svc::proof::session::load(state.path(), &id) {
            Ok(_) => Ok(()),
            Err(error) => {
                let message = error.to_string();
                if message.contains(&shown) || message.contains(&id) {
                    Ok(())
                } else {
                    Err(format!(
                        "an error that does not name the session: {message}"
                    ))
                }
            }
        }
    });
}

/// `svc wrap`'s config editor: strict JSON is read exactly as serde_json reads it (its
/// recursion limit and a leading BOM aside), and a merge is either refused with a line and
/// column or yields text that reads back with the svc entry in place.
#[test]
fn fuzz_wrap_config_merge() {
    use svc::wrap::jsonc::{self, EditError, Syntax};
    let entry = serde_json::json!({"command": "/usr/local/bin/svc", "args": ["serve"]});
    let seeds = read_seeds(&files_in("fixtures/wrap", None));
    fuzz("wrap-config", seeds, |input| {
        let Ok(text) = std::str::from_utf8(input) else {
            return Ok(());
        };
        let ours = jsonc::parse(text, Syntax::Json);
        let theirs = serde_json::from_str::<serde_json::Value>(text);
        match (&ours, &theirs) {
            (Ok(Some(a)), Ok(b)) if a != b => {
                return Err(format!("read {a} where serde_json reads {b}"));
            }
            (Ok(Some(_)), Err(e)) if !e.to_string().contains("recursion limit") => {
                return Err(format!("accepted what serde_json refuses ({e})"));
            }
            (Err(e), Ok(_)) if !text.starts_with('\u{feff}') => {
                return Err(format!("refused what serde_json accepts ({e})"));
            }
            _ => {}
        }
        for syntax in [Syntax::Json, Syntax::Jsonc] {
            match jsonc::set(text, syntax, &["mcpServers", "svc"], &entry) {
                Ok(None) => {}
                Ok(Some(edited)) => {
                    let value = jsonc::parse(&edited, syntax)
                        .map_err(|e| format!("the edited text does not parse: {e}"))?
                        .ok_or("the edited text is empty")?;
                    if value["mcpServers"]["svc"] != entry {
                        return Err(format!("the entry is not in the edited text: {edited}"));
                    }
                }
                Err(EditError::Parse(e)) if e.line == 0 || e.column == 0 => {
                    return Err(format!("a syntax error without a position: {e}"));
                }
                Err(EditError::Unverified(message)) => {
                    return Err(format!("an edit failed its own read-back: {message}"));
                }
                Err(error) if !locates(&error.to_string()) => {
                    return Err(format!("an error that does not say where: {error}"));
                }
                Err(_) => {}
            }
        }
        Ok(())
    });
}
