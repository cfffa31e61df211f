//! `svc compress`, `svc distill`, `svc batch`: golden outputs for people, exact recovery of
//! every elision, and the exit codes of the budget gate.

use std::fs;
use std::path::Path;

use serde::Deserialize;
use svc::context::commit::CommitStore;
use svc::context::compress::{Compressed, CompressedMessages};
use svc::context::distill::Distilled;

use crate::harness::{assert_text_eq, root, run, svc};

/// Compares `got` with a golden file; `SVC_UPDATE_GOLDEN=1` rewrites it.
fn golden(name: &str, got: &str) {
    let path = root().join("fixtures/compress").join(name);
    if std::env::var_os("SVC_UPDATE_GOLDEN").is_some() {
        fs::write(&path, got).expect("write golden");
        return;
    }
    let expected = fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with SVC_UPDATE_GOLDEN=1)", path.display()));
    assert_text_eq(&expected, got);
}

fn compress_json(state: &Path, args: &[&str]) -> Compressed {
    let out = run(svc(state)
        .arg("compress")
        .args(args)
        .args(["--format", "json"]));
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    serde_json::from_str(&out.stdout).expect("Compressed JSON")
}

fn assert_recoverable(state: &Path, result: &Compressed, original: &str) {
    let store = CommitStore::new(state);
    assert!(!result.elisions.is_empty());
    for elision in &result.elisions {
        let bytes = store
            .recover(&result.ctx_id, &elision.chunk_id)
            .expect("recover");
        assert!(
            original.contains(&bytes),
            "{} is original text",
            elision.chunk_id
        );
        assert!(
            result
                .text
                .contains(&format!("recover {}", elision.chunk_id))
        );
    }
}

#[test]
fn compress_log_golden_and_recoverable() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = run(svc(state.path()).args([
        "compress",
        "fixtures/compress/service.log",
        "--budget",
        "400",
    ]));
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    assert!(out.stderr.contains("logs 26376 → "), "{}", out.stderr);
    assert!(
        out.stderr.contains("svc context recover ctx_"),
        "{}",
        out.stderr
    );
    golden("service.log.400.golden", &out.stdout);

    let original = fs::read_to_string(root().join("fixtures/compress/service.log")).expect("log");
    let result = compress_json(
        state.path(),
        &["fixtures/compress/service.log", "--budget", "400"],
    );
    assert_eq!(result.text, out.stdout);
    assert!(result.tokens <= 400);
    assert_recoverable(state.path(), &result, &original);
    // Line-range chunks reassemble the log byte for byte.
    let store = CommitStore::new(state.path());
    let receipt = store.receipt(&result.ctx_id).expect("receipt");
    let whole: String = receipt
        .chunks
        .iter()
        .map(|c| store.recover(&result.ctx_id, &c.chunk_id).expect("chunk"))
        .collect();
    assert_eq!(whole, original);
}

#[test]
fn compress_json_golden_and_recoverable() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = run(svc(state.path()).args([
        "compress",
        "fixtures/compress/orders.json",
        "--budget",
        "600",
    ]));
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    serde_json::from_str::<serde_json::Value>(&out.stdout).expect("still JSON");
    golden("orders.json.600.golden", &out.stdout);
    let original = fs::read_to_string(root().join("fixtures/compress/orders.json")).expect("json");
    let result = compress_json(
        state.path(),
        &["fixtures/compress/orders.json", "--budget", "600"],
    );
    assert_recoverable(state.path(), &result, &original);
    let store = CommitStore::new(state.path());
    assert_eq!(store.recover(&result.ctx_id, "doc").expect("doc"), original);
}

#[test]
fn compress_prose_with_query_golden() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = run(svc(state.path()).args([
        "compress",
        "fixtures/compress/report.md",
        "--budget",
        "250",
        "--query",
        "Lisbon warehouse",
    ]));
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    assert!(
        out.stdout
            .contains("The Lisbon warehouse shipped 18,240 orders")
    );
    golden("report.md.250.golden", &out.stdout);
}

#[test]
fn compress_messages_golden() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = run(svc(state.path()).args([
        "compress",
        "--messages",
        "fixtures/compress/conversation.json",
        "--budget",
        "1500",
    ]));
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    golden("conversation.json.1500.golden", &out.stdout);
    // The input is a request object (`{"messages": [...]}`): it comes back as one.
    let request: serde_json::Value = serde_json::from_str(&out.stdout).expect("request");
    let messages = request["messages"].as_array().expect("messages");
    let original: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(root().join("fixtures/compress/conversation.json")).expect("read"),
    )
    .expect("json");
    assert_eq!(
        messages[0], original["messages"][0],
        "system prompt verbatim"
    );
    assert_eq!(
        messages[6], original["messages"][6],
        "latest user turn verbatim"
    );

    let out = run(svc(state.path()).args([
        "compress",
        "--messages",
        "fixtures/compress/conversation.json",
        "--budget",
        "1500",
        "--format",
        "json",
    ]));
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    let result: CompressedMessages = serde_json::from_str(&out.stdout).expect("result");
    let rendered = serde_json::to_string(&result.messages).expect("json");
    let store = CommitStore::new(state.path());
    assert!(!result.elisions.is_empty());
    for elision in &result.elisions {
        assert!(rendered.contains(&format!("recover {}", elision.chunk_id)));
        let bytes = store
            .recover(&result.ctx_id, &elision.chunk_id)
            .expect("recover");
        assert_eq!(bytes.len(), elision.bytes);
    }
}

#[test]
fn compress_reads_stdin_and_reports_bad_input() {
    let state = tempfile::tempdir().expect("tempdir");
    let mut command = svc(state.path());
    command.args(["compress", "-", "--budget", "50"]);
    command.stdin(fs::File::open(root().join("fixtures/compress/service.log")).expect("open"));
    let out = run(&mut command);
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    assert!(out.stdout.contains("lines elided"));

    let out =
        run(svc(state.path()).args(["compress", "fixtures/compress/service.log", "--budget", "0"]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("--budget must be at least 1"),
        "{}",
        out.stderr
    );

    let out =
        run(svc(state.path()).args(["compress", "fixtures/compress/service.log", "--budget", "5"]));
    assert_eq!(out.code, 1, "over budget is a failed gate");
    assert!(
        out.stderr.contains(
            "cannot fit fixtures/compress/service.log (logs, 26376 tokens) into 5 tokens"
        ),
        "{}",
        out.stderr
    );
    assert!(out.stdout.is_empty(), "no silent truncation");

    let binary = state.path().join("blob.bin");
    fs::write(&binary, b"text then \xff\xfe\x00").expect("write");
    let out = run(svc(state.path())
        .args(["compress"])
        .arg(&binary)
        .args(["--budget", "10"]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("is not UTF-8 text (invalid byte at offset 10)"),
        "{}",
        out.stderr
    );

    let out = run(svc(state.path()).args([
        "compress",
        "fixtures/compress/report.md",
        "--kind",
        "json",
        "--budget",
        "10",
    ]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("is not valid JSON (line 1, column 1"),
        "{}",
        out.stderr
    );
}

#[test]
fn distill_golden_keeps_code_identical() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = run(svc(state.path()).args([
        "distill",
        "--level",
        "ultra",
        "fixtures/compress/verbose-answer.md",
    ]));
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    assert!(out.stderr.contains("distilled (ultra)"));
    golden("verbose-answer.ultra.golden", &out.stdout);
    let fence = "```toml\n[database]\n# basically the very important setting\nmax_connections = 50\ntimeout_ms = 5000\n```\n";
    assert!(out.stdout.contains(fence));
    assert!(out.stdout.contains("`timeout_ms`"));

    let mut tokens = Vec::new();
    for level in ["lite", "full", "ultra"] {
        let out = run(svc(state.path()).args([
            "distill",
            "--format",
            "json",
            "--level",
            level,
            "fixtures/compress/verbose-answer.md",
        ]));
        assert_eq!(out.code, 0);
        let distilled: Distilled = serde_json::from_str(&out.stdout).expect("json");
        assert!(distilled.text.contains(fence));
        tokens.push(distilled.tokens_after);
    }
    assert!(tokens[0] > tokens[1] && tokens[1] > tokens[2], "{tokens:?}");
    let out = run(svc(state.path()).args([
        "distill",
        "--level",
        "max",
        "fixtures/compress/verbose-answer.md",
    ]));
    assert_eq!(out.code, 2, "unknown level is a usage error");
}

/// One row of `svc batch --format json`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct JobLine {
    r#type: String,
    id: String,
    kind: Option<String>,
    tokens_before: Option<usize>,
    tokens_after: Option<usize>,
    ratio: Option<f64>,
    status: String,
    ctx_id: Option<String>,
    elisions: usize,
    budget: usize,
    location: String,
    error: Option<String>,
    #[serde(default)]
    text: Option<String>,
}

#[test]
fn batch_over_a_directory() {
    let state = tempfile::tempdir().expect("tempdir");
    let tree = tempfile::tempdir().expect("tree");
    let fixtures = root().join("fixtures/compress");
    fs::copy(
        fixtures.join("service.log"),
        tree.path().join("service.log"),
    )
    .expect("copy");
    fs::create_dir(tree.path().join("data")).expect("mkdir");
    fs::copy(
        fixtures.join("orders.json"),
        tree.path().join("data/orders.json"),
    )
    .expect("copy");
    fs::write(tree.path().join("notes.txt"), "Short note.\n").expect("write");
    fs::write(
        tree.path().join("logo.png"),
        b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR",
    )
    .expect("write");
    fs::write(tree.path().join(".gitignore"), "ignored/\n").expect("write");
    fs::create_dir(tree.path().join("ignored")).expect("mkdir");
    fs::write(tree.path().join("ignored/big.log"), "x\n".repeat(10)).expect("write");

    let out = run(svc(state.path())
        .arg("batch")
        .arg(tree.path())
        .args(["--budget", "500"]));
    assert_eq!(
        out.code, 0,
        "stdout: {}\nstderr: {}",
        out.stdout, out.stderr
    );
    assert!(
        out.stdout
            .starts_with("| id | kind | tokens before | tokens after | ratio | status | ctx id |")
    );
    for id in [
        "| data/orders.json | json |",
        "| notes.txt | prose |",
        "| service.log | logs | 26376 |",
    ] {
        assert!(out.stdout.contains(id), "{id} in\n{}", out.stdout);
    }
    assert!(!out.stdout.contains("big.log"), ".gitignore honoured");
    assert!(
        out.stderr.contains("skipped 1 binary file(s)"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("3 jobs: 3 ok, 0 over budget, 0 errors"));

    let out = run(svc(state.path()).arg("batch").arg(tree.path()).args([
        "--budget",
        "8",
        "--fail-over-budget",
        "--format",
        "json",
    ]));
    assert_eq!(out.code, 1, "stderr: {}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    let jobs: Vec<JobLine> = lines[..lines.len() - 1]
        .iter()
        .map(|l| serde_json::from_str(l).expect("job line"))
        .collect();
    let over: Vec<&str> = jobs
        .iter()
        .filter(|j| j.status == "over_budget")
        .map(|j| j.id.as_str())
        .collect();
    assert_eq!(over, vec!["data/orders.json", "service.log"]);
    assert!(
        out.stderr.contains(
            "2 job(s) cannot fit their budget: data/orders.json (8 tokens), service.log (8 tokens)"
        ),
        "{}",
        out.stderr
    );
    let summary: serde_json::Value = serde_json::from_str(lines[lines.len() - 1]).expect("summary");
    assert_eq!(summary["over_budget"], 2);
    // Regression (found by probing): the totals counted the over-budget jobs' size before but
    // not after.
    let note = lines
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("line"))
        .find(|l| l["id"] == "notes.txt")
        .expect("note");
    assert_eq!(summary["tokens_before"], note["tokens_before"]);

    // Regression (found by probing): the compressed output was nowhere; JSON lines carry it,
    // and its elisions recover from its commit.
    let out = run(svc(state.path())
        .arg("batch")
        .arg(tree.path())
        .args(["--budget", "500", "--format", "json"]));
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    let log = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("line"))
        .find(|l| l["id"] == "service.log")
        .expect("log job");
    let text = log["text"].as_str().expect("text");
    assert!(text.contains("recover "), "{text}");
    assert!(log["tokens_after"].as_u64().expect("after") <= 500);
    // Found by probing: every job wrote its commit as loose files with two fsyncs each (12,000
    // tiny files: 40 s, 36,000 state files). They are packed now, and still recover.
    assert!(
        !state.path().join("commits").exists(),
        "no loose commit files"
    );
    let ctx = log["ctx_id"].as_str().expect("ctx id");
    let chunk = text
        .split("recover ")
        .nth(1)
        .and_then(|t| t.split(']').next())
        .expect("a marker");
    let recovered = run(svc(state.path()).args(["context", "recover", ctx, chunk]));
    assert_eq!(recovered.code, 0, "{chunk}: {}", recovered.stderr);
    assert!(!recovered.stdout.is_empty());
}

/// Regression (found by probing): a source file given as the job file was a table of one
/// "not valid JSON" error per line.
#[test]
fn batch_of_a_file_that_is_not_json_lines_is_one_clear_error() {
    let state = tempfile::tempdir().expect("tempdir");
    let dir = tempfile::tempdir().expect("dir");
    let source = dir.path().join("app.py");
    fs::write(&source, "import os\n\ndef main():\n    print(os.name)\n").expect("write");
    let out = run(svc(state.path())
        .arg("batch")
        .arg(&source)
        .args(["--budget", "100"]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert!(
        out.stderr.contains("app.py: not a JSON Lines file of jobs"),
        "{}",
        out.stderr
    );
}

#[test]
fn batch_jsonl_with_a_bad_line() {
    let state = tempfile::tempdir().expect("tempdir");
    let dir = tempfile::tempdir().expect("jobs");
    fs::copy(
        root().join("fixtures/compress/service.log"),
        dir.path().join("service.log"),
    )
    .expect("copy");
    let jobs = dir.path().join("jobs.jsonl");
    let conversation: serde_json::Value = serde_json::from_str(
        &fs::read_to_string(root().join("fixtures/compress/conversation.json")).expect("read"),
    )
    .expect("json");
    let lines = [
        serde_json::json!({"id": "log", "path": "service.log"}).to_string(),
        serde_json::json!({"id": "note", "text": "A short note about 3 servers in Lisbon.", "query": "Lisbon"}).to_string(),
        "{\"id\": \"broken\", \"txt\": \"typo\"}".to_string(),
        serde_json::json!({"id": "chat", "messages": conversation["messages"]}).to_string(),
        serde_json::json!({"id": "tree", "path": "."}).to_string(),
        serde_json::json!({"id": "code", "path": root().join("fixtures/code"), "query": "parse a duration"}).to_string(),
    ];
    fs::write(&jobs, lines.join("\n") + "\n").expect("write");
    let out = run(svc(state.path())
        .arg("batch")
        .arg(&jobs)
        .args(["--budget", "1500"]));
    assert_eq!(
        out.code, 2,
        "bad lines make the run fail at the end\n{}",
        out.stderr
    );
    assert!(
        out.stdout.contains("| log | logs | 26376 |"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("| note | prose |"));
    assert!(out.stdout.contains("| chat | messages | 16935 |"));
    assert!(out.stdout.contains("| code | tree |"), "{}", out.stdout);
    assert!(
        out.stdout
            .contains("| line 3 | - | - | - | - | error | - |")
    );
    assert!(
        out.stderr
            .contains("jobs.jsonl:3: field `txt`: unknown field"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("a directory job needs a `query`"),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains("6 jobs: 4 ok, 0 over budget, 2 errors"),
        "{}",
        out.stdout
    );
}

/// Found by probing: `--query` was ignored in silence on code, JSON and logs (only prose reads
/// it), and with `--messages`.
#[test]
fn a_query_on_input_that_does_not_read_it_is_refused_or_noted() {
    let state = tempfile::tempdir().expect("tempdir");
    let code = root().join("src/lib.rs");
    let code = code.to_string_lossy();
    let out = run(svc(state.path()).args([
        "compress", &code, "--budget", "200", "--kind", "code", "--query", "tokens",
    ]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("--query applies to prose only"),
        "{}",
        out.stderr
    );
    let out =
        run(svc(state.path()).args(["compress", &code, "--budget", "200", "--query", "tokens"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("svc: note: --query applies to prose only; this input was read as code"),
        "{}",
        out.stderr
    );
    let out = run(svc(state.path()).args([
        "compress",
        "--messages",
        &code,
        "--budget",
        "200",
        "--query",
        "tokens",
    ]));
    assert_eq!(out.code, 2, "{}", out.stderr);
}

/// Found by probing: a log whose records carry a date alone (`2024-01-01 INFO …`) was read as
/// prose, and its one ERROR line was cut with the rest.
#[test]
fn a_log_of_date_only_stamps_keeps_its_error_line() {
    let state = tempfile::tempdir().expect("tempdir");
    let mut log: String = (1..=400)
        .map(|i| format!("2024-01-01 INFO step {i} ok\n"))
        .collect();
    log.push_str("2024-01-01 ERROR failed at step 401\n");
    let path = state.path().join("t.txt");
    fs::write(&path, log).expect("write");
    let compressed = compress_json(
        state.path(),
        &[path.to_str().expect("utf8"), "--budget", "100"],
    );
    assert_eq!(compressed.kind.to_string(), "logs");
    assert!(
        compressed.text.contains("ERROR failed at step 401"),
        "{}",
        compressed.text
    );
}
