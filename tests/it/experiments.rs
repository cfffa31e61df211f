//! Experimental design for real models (issue 11, item 3(c)), end to end with the built binary
//! against fake providers on 127.0.0.1: cached input tokens read from OpenAI- and
//! Anthropic-shaped usage, priced at the snapshot's cached rate and split by cache state in the
//! report; `--cache-neutral` (interleaved order, `"cache_prompt": false`); the `qa-judge-v1`
//! scorer with a fake HTTP judge.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::harness::{run, svc};

const MINI: &str = "fixtures/harness/halueval-mini";

/// What a fake provider saw.
#[derive(Default)]
struct Seen {
    bodies: Mutex<Vec<Value>>,
    prompts: Mutex<Vec<String>>,
    count: AtomicUsize,
}

/// How the fake answers.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// An answering model with a prefix cache: a prompt sharing at least 200 characters with
    /// an earlier prompt has that prefix (in 4-character tokens) reported as cached, unless
    /// the request says `"cache_prompt": false`.
    Model,
    /// A judge: `SCORE: 1` when the answer holds a gold answer, else `SCORE: 0`.
    Judge,
    /// A judge that never gives a score line.
    Rambling,
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

fn answer(mode: Mode, prompt: &str) -> String {
    match mode {
        Mode::Model => format!("answer {}", &svc::digest::sha256_hex(prompt)[..8]),
        Mode::Rambling => "The answer looks fine to me.".into(),
        Mode::Judge => {
            let line = |head: &str| {
                prompt
                    .lines()
                    .find_map(|l| l.strip_prefix(head))
                    .unwrap_or_default()
                    .to_lowercase()
            };
            let graded = line("Answer to grade: ");
            let right = line("Gold answer(s): ")
                .split(" or ")
                .map(|g| g.trim_matches('"').to_string())
                .any(|g| !g.is_empty() && graded.contains(&g));
            format!("SCORE: {}", u8::from(right))
        }
    }
}

/// Starts a fake on 127.0.0.1:0 serving `/v1/chat/completions` (OpenAI shape) and
/// `/v1/messages` (Anthropic shape); returns its base URL (without `/v1`).
fn fake(mode: Mode) -> (String, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let state = seen.clone();
    let handle = move |anthropic: bool, body: String| {
        let seen = state.clone();
        async move {
            let n = seen.count.fetch_add(1, Ordering::SeqCst);
            let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            let prompt = request["messages"]
                .as_array()
                .and_then(|m| m.last())
                .and_then(|m| m["content"].as_str())
                .unwrap_or_default()
                .to_string();
            let reuse = request["cache_prompt"].as_bool() != Some(false);
            let shared = {
                let prompts = seen.prompts.lock().expect("lock");
                prompts
                    .iter()
                    .map(|p| common_prefix(p, &prompt))
                    .max()
                    .unwrap_or(0)
            };
            let total = (prompt.len() / 4).max(1) as u64;
            let cached = if reuse && shared >= 200 {
                (shared / 4) as u64
            } else {
                0
            };
            seen.prompts.lock().expect("lock").push(prompt.clone());
            seen.bodies.lock().expect("lock").push(request);
            let text = answer(mode, &prompt);
            let reply = if anthropic {
                json!({
                    "id": format!("msg_{n}"),
                    "content": [{"type": "text", "text": text}],
                    "usage": {"input_tokens": total - cached, "cache_read_input_tokens": cached,
                              "cache_creation_input_tokens": 0, "output_tokens": 3}
                })
            } else {
                json!({
                    "id": format!("chatcmpl-{n}"),
                    "choices": [{"message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": total, "completion_tokens": 3,
                              "prompt_tokens_details": {"cached_tokens": cached}}
                })
            };
            (axum::http::StatusCode::OK, reply.to_string())
        }
    };
    let openai = handle.clone();
    let app = axum::Router::new()
        .route(
            "/v1/chat/completions",
            axum::routing::post(move |body: String| openai(false, body)),
        )
        .route(
            "/v1/messages",
            axum::routing::post(move |body: String| handle(true, body)),
        );
    let address = crate::serve_on_thread(app);
    (format!("http://{address}"), seen)
}

/// Prices in USD per million tokens of the fake model "m": input 2, cached input 0.5, output 10.
const PRICES: (f64, f64, f64) = (2.0, 0.5, 10.0);

fn runner_file(dir: &Path, name: &str, kind: &str, base_url: &str) -> PathBuf {
    std::fs::write(
        dir.join("prices.toml"),
        format!(
            "source = \"test\"\n[models.m]\ninput_usd_per_mtok = {}\ncached_input_usd_per_mtok = {}\noutput_usd_per_mtok = {}\n",
            PRICES.0, PRICES.1, PRICES.2
        ),
    )
    .expect("prices");
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            "name = \"{name}\"\nkind = \"{kind}\"\nprovider = \"fake\"\nmodel = \"m\"\ncontext_window = 8192\nbase_url = \"{base_url}\"\ntimeout_ms = 5000\nretries = 0\nconcurrency = 1\n[cost]\nsource = \"pricing_snapshot\"\npricing = \"prices.toml\"\n"
        ),
    )
    .expect("runner file");
    path
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect()
}

/// The notes of `kind` by (task_id, condition, replicate).
fn notes(dir: &Path, kind: &str) -> std::collections::HashMap<(String, String, u64), Value> {
    lines(&dir.join("notes.jsonl"))
        .into_iter()
        .filter(|n| n["kind"] == kind)
        .map(|n| {
            (
                (
                    n["task_id"].as_str().unwrap_or_default().to_string(),
                    n["condition"].as_str().unwrap_or_default().to_string(),
                    n["replicate"].as_u64().unwrap_or_default(),
                ),
                n,
            )
        })
        .collect()
}

fn key(record: &Value) -> (String, String, u64) {
    (
        record["task_id"].as_str().unwrap_or_default().to_string(),
        record["condition"].as_str().unwrap_or_default().to_string(),
        record["replicate"].as_u64().unwrap_or_default(),
    )
}

/// Runs the mini workload against a fake of `kind` with two replicates and no response cache,
/// so the second of two identical prompts is served from the fake's prefix cache.
fn cached_run(kind: &str) {
    let state = tempfile::tempdir().expect("tempdir");
    let (base, seen) = fake(Mode::Model);
    let base = if kind == "openai_compatible" {
        format!("{base}/v1")
    } else {
        base
    };
    let runner = runner_file(state.path(), "fake", kind, &base);
    let out = state.path().join("run");
    let result = run(svc(state.path())
        .args(["run", "--workload", MINI, "--conditions", "raw,svc"])
        .args(["--replicates", "2", "--no-cache", "--runner"])
        .arg(&runner)
        .arg("--out")
        .arg(&out));
    assert_eq!(result.code, 0, "{}", result.stderr);
    let records = lines(&out.join("trials.jsonl"));
    assert_eq!(records.len(), 48);
    assert_eq!(seen.count.load(Ordering::SeqCst), 48);
    let usage = notes(&out, "cache_usage");
    let mut cached = 0;
    for record in &records {
        assert_eq!(record["outcome"], "success", "{record}");
        let note = &usage[&key(record)]["values"];
        let input = note["input_tokens"].as_f64().expect("input");
        let read = note["cached_input_tokens"].as_f64().expect("cached");
        // Anthropic's uncached input_tokens plus its cache reads: every prompt token.
        let prompt = record["context_tokens"].as_f64().expect("tokens");
        assert!(input >= read && input > prompt / 4.0, "{note}");
        let expected = ((input - read) * PRICES.0 + read * PRICES.1 + 3.0 * PRICES.2) / 1e6;
        let billed = record["billed_cost_usd"].as_f64().expect("cost");
        assert!((billed - expected).abs() < 1e-12, "{billed} vs {expected}");
        let state = note["cache_state"].as_str().expect("state");
        assert_eq!(state == "cached", read > 0.0, "{note}");
        cached += usize::from(read > 0.0);
    }
    // Each identical prompt is sent twice (two replicates); the later one is cached.
    assert!((24..48).contains(&cached), "{cached} cached trials");

    let report_dir = state.path().join("report");
    let result = run(svc(state.path())
        .arg("report")
        .arg(&out)
        .arg("--out")
        .arg(&report_dir)
        .args(["--resamples", "100"]));
    assert_eq!(result.code, 0, "{}", result.stderr);
    let summary: Value = serde_json::from_str(
        &std::fs::read_to_string(report_dir.join("summary.json")).expect("summary"),
    )
    .expect("json");
    let rows = summary["cache_split"].as_array().expect("a cache split");
    for condition in ["raw", "svc"] {
        let of = |state: &str| {
            rows.iter()
                .find(|r| r["condition"] == condition && r["cache_state"] == state)
                .unwrap_or_else(|| panic!("{condition} {state}: {rows:?}"))
        };
        let (hit, miss) = (of("cached"), of("uncached"));
        assert_eq!(
            hit["trials"].as_u64().expect("n") + miss["trials"].as_u64().expect("n"),
            24
        );
        // Cached input is billed at a quarter of the input rate.
        assert!(
            hit["mean_billed_cost_usd"].as_f64() < miss["mean_billed_cost_usd"].as_f64(),
            "{hit} {miss}"
        );
        assert!(hit["mean_cached_share"].as_f64().expect("share") > 0.5);
        assert_eq!(miss["mean_cached_share"].as_f64(), Some(0.0));
    }
    let markdown = std::fs::read_to_string(report_dir.join("report.md")).expect("report.md");
    assert!(
        markdown.contains("## Latency and cost by provider cache state"),
        "{markdown}"
    );
    let schema: Value =
        serde_json::from_str(svc::report::SUMMARY_SCHEMA_JSON).expect("summary schema");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    let problems: Vec<String> = validator
        .iter_errors(&summary)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(problems.is_empty(), "{problems:?}");
}

#[test]
fn openai_cached_tokens_are_priced_at_the_cached_rate_and_split_in_the_report() {
    cached_run("openai_compatible");
}

#[test]
fn anthropic_cache_reads_are_priced_at_the_cached_rate_and_split_in_the_report() {
    cached_run("anthropic");
}

#[test]
fn cache_neutral_interleaves_each_task_and_asks_the_server_not_to_reuse_prefixes() {
    let state = tempfile::tempdir().expect("tempdir");
    let (base, seen) = fake(Mode::Model);
    let runner = runner_file(
        state.path(),
        "fake",
        "openai_compatible",
        &format!("{base}/v1"),
    );
    let out = state.path().join("run");
    let result = run(svc(state.path())
        .args([
            "run",
            "--workload",
            MINI,
            "--conditions",
            "raw,svc,combined,native_compaction",
        ])
        .args([
            "--budget",
            "256,512",
            "--cache-neutral",
            "--no-cache",
            "--runner",
        ])
        .arg(&runner)
        .arg("--out")
        .arg(&out));
    assert_eq!(result.code, 0, "{}", result.stderr);
    let bodies = seen.bodies.lock().expect("lock").clone();
    assert_eq!(bodies.len(), 12 * 7);
    assert!(
        bodies.iter().all(|b| b["cache_prompt"] == false),
        "{:?}",
        bodies[0]
    );
    // The server was asked not to reuse prefixes, so it reported no cached tokens.
    let usage = notes(&out, "cache_usage");
    assert!(
        usage
            .values()
            .all(|n| n["values"]["cache_state"] == "uncached")
    );
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("manifest.json")).expect("manifest"),
    )
    .expect("json");
    assert_eq!(
        manifest["cache_neutral"],
        json!({"interleaved": true, "cache_prompt_false": true})
    );
    // One call at a time, so requests.jsonl is in run order: each task's seven trials
    // (raw once, three conditions at two budgets) are contiguous, and raw never follows raw.
    let order: Vec<(String, String)> = lines(&out.join("requests.jsonl"))
        .iter()
        .map(|l| {
            let task = l["task_id"].as_str().unwrap_or_default();
            let task = task.split("@b").next().unwrap_or_default().to_string();
            (
                task,
                l["condition"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    assert_eq!(order.len(), 84);
    for chunk in order.chunks(7) {
        assert!(chunk.iter().all(|(t, _)| *t == chunk[0].0), "{chunk:?}");
    }
    assert!(
        order
            .windows(2)
            .all(|w| !(w[0].1 == "raw" && w[1].1 == "raw"))
    );
    let firsts: std::collections::HashSet<&str> =
        order.chunks(7).map(|c| c[0].1.as_str()).collect();
    assert!(
        firsts.len() >= 3,
        "the first condition of a task varies: {firsts:?}"
    );

    // The default run id says so; without the flag the request carries no cache_prompt.
    let plain = state.path().join("plain");
    let result = run(svc(state.path())
        .args([
            "run",
            "--workload",
            MINI,
            "--conditions",
            "raw",
            "--no-cache",
            "--runner",
        ])
        .arg(&runner)
        .arg("--out")
        .arg(&plain));
    assert_eq!(result.code, 0, "{}", result.stderr);
    let bodies = seen.bodies.lock().expect("lock").clone();
    assert!(bodies[84..].iter().all(|b| b.get("cache_prompt").is_none()));
    let plain_manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(plain.join("manifest.json")).expect("m"))
            .expect("json");
    assert!(plain_manifest.get("cache_neutral").is_none());
}

#[test]
fn cache_neutral_is_part_of_the_default_run_id_and_the_runs_identity() {
    let state = tempfile::tempdir().expect("tempdir");
    let runs = state.path().join("runs");
    std::fs::create_dir_all(&runs).expect("runs");
    let result = run(svc(state.path())
        .args([
            "run",
            "--workload",
            MINI,
            "--conditions",
            "raw",
            "--cache-neutral",
            "--out",
        ])
        .arg(runs.join("x")));
    assert_eq!(result.code, 0, "{}", result.stderr);
    // Resuming the same directory without the flag is another experiment.
    let result = run(svc(state.path())
        .args(["run", "--workload", MINI, "--conditions", "raw", "--out"])
        .arg(runs.join("x")));
    assert_eq!(result.code, 2, "{}", result.stdout);
    assert!(result.stderr.contains("cache neutral"), "{}", result.stderr);
    let id = run(svc(state.path())
        .current_dir(state.path())
        .env(
            "SVC_WORKLOADS_DIR",
            crate::harness::root().join("fixtures/harness"),
        )
        .env("SVC_RUNNERS_DIR", crate::harness::root().join("runners"))
        .args([
            "run",
            "--workload",
            "halueval-mini",
            "--conditions",
            "raw",
            "--cache-neutral",
        ]));
    assert_eq!(id.code, 0, "{}", id.stderr);
    assert!(id.stdout.contains("-cache-neutral-"), "{}", id.stdout);
}

fn judged(state: &Path, judge: &Path, out: &Path) -> crate::harness::Run {
    run(svc(state)
        .args(["run", "--workload", MINI, "--conditions", "raw,svc"])
        .args(["--scorer", "qa-judge-v1", "--judge"])
        .arg(judge)
        .arg("--out")
        .arg(out))
}

#[test]
fn qa_judge_grades_with_an_http_judge_counts_its_cost_and_caches_its_calls() {
    let state = tempfile::tempdir().expect("tempdir");
    let (base, seen) = fake(Mode::Judge);
    let judge = runner_file(
        state.path(),
        "judge",
        "openai_compatible",
        &format!("{base}/v1"),
    );
    let out = state.path().join("a");
    let result = judged(state.path(), &judge, &out);
    assert_eq!(result.code, 0, "{}", result.stderr);
    let records = lines(&out.join("trials.jsonl"));
    assert_eq!(records.len(), 24);
    // Raw and svc often give the fixture the same answer; an identical grading request is
    // served from the response cache unless its twin is still in flight (the fixture runner
    // has four workers), so upstream sees each distinct answer once or a few times.
    let distinct: std::collections::HashSet<(String, String)> = records
        .iter()
        .map(|r| {
            let task = r["task_id"].as_str().unwrap_or_default();
            let task = task.split("@b").next().unwrap_or_default().to_string();
            (
                task,
                r["response_text"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let graded = seen.count.load(Ordering::SeqCst);
    assert!(
        graded >= distinct.len() && graded < 24,
        "{graded} calls, {} distinct",
        distinct.len()
    );
    let calls = notes(&out, "judge_call");
    let prompts = seen.prompts.lock().expect("lock").clone();
    let mut right = 0;
    for record in &records {
        assert_eq!(record["outcome"], "success", "{record}");
        assert_eq!(record["scorer"], "qa-judge-v1");
        let note = &calls[&key(record)]["values"];
        let score = record["task_score"].as_f64().expect("score");
        assert_eq!(note["score"].as_f64(), Some(score));
        right += usize::from(score == 1.0);
        // The fixture's answer cost nothing; the judge's call is the trial's cost.
        // The rubric is a shared prefix: the fake serves it from its cache after the first call.
        let input = note["input_tokens"].as_f64().expect("input");
        let read = note["cached_input_tokens"].as_f64().expect("cached");
        let expected = ((input - read) * PRICES.0 + read * PRICES.1 + 3.0 * PRICES.2) / 1e6;
        assert!((record["billed_cost_usd"].as_f64().expect("cost") - expected).abs() < 1e-12);
        // The judge saw the answer the record holds.
        let answer = record["response_text"].as_str().expect("answer").trim();
        assert!(
            prompts
                .iter()
                .any(|p| p.contains(&format!("Answer to grade: {answer}\n"))),
            "{answer}"
        );
    }
    assert!(right > 0 && right < 24, "{right} of 24 graded right");
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("manifest.json")).expect("manifest"),
    )
    .expect("json");
    assert_eq!(
        manifest["judge"]["prompt_sha256"],
        svc::harness::judge::prompt_sha256()
    );
    let purposes: Vec<Value> = lines(&out.join("requests.jsonl"))
        .iter()
        .flat_map(|l| l["calls"].as_array().cloned().unwrap_or_default())
        .map(|c| c["purpose"].clone())
        .collect();
    assert_eq!(purposes.iter().filter(|p| *p == "judge").count(), 24);
    let hits = lines(&out.join("requests.jsonl"))
        .iter()
        .flat_map(|l| l["calls"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["purpose"] == "judge" && c["cache"] == "hit")
        .count();
    assert_eq!(hits, 24 - graded);

    // A second run into another directory: every grading call comes from the response cache.
    let again = state.path().join("b");
    let result = judged(state.path(), &judge, &again);
    assert_eq!(result.code, 0, "{}", result.stderr);
    assert_eq!(
        seen.count.load(Ordering::SeqCst),
        graded,
        "no upstream request"
    );
    let scores = |dir: &Path| -> Vec<(String, String, f64)> {
        let mut v: Vec<_> = lines(&dir.join("trials.jsonl"))
            .iter()
            .map(|r| {
                let (t, c, _) = key(r);
                (t, c, r["task_score"].as_f64().unwrap_or(-1.0))
            })
            .collect();
        v.sort_by(|a, b| a.partial_cmp(b).expect("ordered"));
        v
    };
    assert_eq!(scores(&out), scores(&again));
}

#[test]
fn an_unparseable_judge_is_an_error_record_and_a_fixture_judge_is_refused() {
    let state = tempfile::tempdir().expect("tempdir");
    let (base, _) = fake(Mode::Rambling);
    let judge = runner_file(
        state.path(),
        "judge",
        "openai_compatible",
        &format!("{base}/v1"),
    );
    let out = state.path().join("a");
    let result = judged(state.path(), &judge, &out);
    assert_eq!(result.code, 0, "{}", result.stderr);
    let records = lines(&out.join("trials.jsonl"));
    assert_eq!(records.len(), 24);
    let failures = notes(&out, "judge_unparseable");
    for record in &records {
        assert_eq!(record["outcome"], "error");
        assert_eq!(record["error_type"], "judge_unparseable");
        assert!(record["response_text"].is_null());
        let note = &failures[&key(record)];
        assert_eq!(
            note["values"]["judge_reply"],
            "The answer looks fine to me."
        );
        assert!(note["values"]["answer"].is_string(), "the answer is kept");
        assert!(
            record["billed_cost_usd"].as_f64() > Some(0.0),
            "grading was paid for"
        );
    }
    let validate = run(svc(state.path())
        .args(["records", "validate"])
        .arg(out.join("trials.jsonl")));
    assert_eq!(validate.code, 0, "{}", validate.stdout);

    // The fixture cannot judge: the run's own fixture runner, or one named with --judge.
    for extra in [&[][..], &["--judge", "fixture"][..]] {
        let refused = run(svc(state.path())
            .args(["run", "--workload", MINI, "--scorer", "qa-judge-v1"])
            .args(extra)
            .arg("--out")
            .arg(state.path().join("refused")));
        assert_eq!(refused.code, 2, "{}", refused.stdout);
        assert!(
            refused.stderr.contains("cannot grade"),
            "{}",
            refused.stderr
        );
    }
    assert!(!state.path().join("refused").join("trials.jsonl").exists());
}
