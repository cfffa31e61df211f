//! `svc run --via-proxy` end to end: `raw` requests through the in-process proxy to the fixture
//! model and to HTTP fakes (OpenAI-compatible and Anthropic), the manifest, the records (what
//! the model got, recoverable to the byte), and `svc report --compare-runs` against the same run
//! made direct.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use svc::trial::{Condition, Outcome, TrialRecord, UsageSource};

use crate::harness::{run, svc};

const WORKLOAD: &str = "needle-builtin";

fn records(dir: &Path) -> Vec<TrialRecord> {
    std::fs::read_to_string(dir.join("trials.jsonl"))
        .expect("trials.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a valid record"))
        .collect()
}

fn notes(dir: &Path, kind: &str) -> Vec<Value> {
    std::fs::read_to_string(dir.join("notes.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).expect("a note"))
        .filter(|note| note["kind"] == kind)
        .collect()
}

fn manifest(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).expect("manifest"))
        .expect("manifest JSON")
}

#[test]
fn via_proxy_fixture_run_pairs_with_the_direct_run_and_every_elision_is_recoverable() {
    let state = tempfile::tempdir().expect("tempdir");
    let (direct, via) = (state.path().join("direct"), state.path().join("via"));
    let args = |out: &Path| {
        let mut command = svc(state.path());
        command
            .args(["run", "--workload", WORKLOAD, "--runner", "fixture"])
            .args(["--conditions", "raw,svc", "--budget", "512", "--out"])
            .arg(out);
        command
    };
    let out = run(&mut args(&direct));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = run(args(&via).arg("--via-proxy"));
    assert_eq!(out.code, 0, "{}", out.stderr);

    let recorded = manifest(&via);
    assert_eq!(recorded["via_proxy"], true);
    assert_eq!(recorded["raw_once_per_task"], false);
    assert!(manifest(&direct).get("via_proxy").is_none());

    let direct_records = records(&direct);
    let raw_direct = |task: &str| {
        direct_records
            .iter()
            .find(|r| r.condition == Condition::Raw && r.task_id == task)
            .expect("the same task direct")
    };
    let via_records = records(&via);
    let raw_via: Vec<&TrialRecord> = via_records
        .iter()
        .filter(|r| r.condition == Condition::Raw)
        .collect();
    assert_eq!(raw_via.len(), 36);
    let (mut before, mut after) = (0, 0);
    for record in &raw_via {
        assert_eq!(record.outcome, Outcome::Success, "{record:?}");
        assert_eq!(record.usage_source, UsageSource::DeterministicFixture);
        let task = record
            .task_id
            .strip_suffix("@b512")
            .expect("raw carries the proxy's budget");
        let direct = raw_direct(task);
        assert!(record.context_tokens <= direct.context_tokens);
        before += direct.context_tokens;
        after += record.context_tokens;
    }
    // The needle contexts are 1K-3K tokens: the proxy keeps the question and cuts the rest
    // towards its 512-token budget.
    assert!(after * 2 < before, "{before} -> {after} context tokens");
    let said = notes(&via, "via_proxy");
    assert_eq!(said.len(), 36);
    assert!(
        said.iter().all(|n| n["detail"]
            .as_str()
            .is_some_and(|d| d.contains("rewritten") || d.contains("unchanged"))),
        "{said:?}"
    );

    // A rewritten trial: its commit gives back the direct run's context byte for byte.
    let rewritten = raw_via
        .iter()
        .find(|r| r.context_commit_id.is_some())
        .expect("a rewritten raw trial");
    let ctx = rewritten.context_commit_id.as_deref().expect("ctx");
    let receipt: Value = serde_json::from_slice(
        &std::fs::read(state.path().join("commits").join(ctx).join("receipt.json"))
            .expect("the proxy's commit"),
    )
    .expect("receipt JSON");
    let mut context = Vec::new();
    for chunk in receipt["chunks"].as_array().expect("chunks") {
        let id = chunk["chunk_id"].as_str().expect("chunk id");
        // The context is the request's second text part (after the instruction).
        if id == "m1" || id.starts_with("m1.") {
            let out = run(svc(state.path()).args(["context", "recover", ctx, id]));
            assert_eq!(out.code, 0, "{}", out.stderr);
            context.extend_from_slice(out.stdout.as_bytes());
        }
    }
    let task = rewritten.task_id.trim_end_matches("@b512");
    assert_eq!(
        svc::digest::sha256_hex(&context),
        raw_direct(task).context_sha256
    );

    // The comparison: raw via the proxy against raw direct, paired by task.
    let report = state.path().join("report");
    let out = run(svc(state.path())
        .arg("report")
        .arg("--compare-runs")
        .arg(&direct)
        .arg(&via)
        .arg("--out")
        .arg(&report));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let row = out
        .stdout
        .lines()
        .find(|line| line.starts_with("raw [via]"))
        .unwrap_or_else(|| panic!("a raw row: {}", out.stdout));
    assert!(
        row.contains("raw [direct]") && row.contains(" 36 "),
        "{row}"
    );
    let summary = std::fs::read_to_string(report.join("summary.json")).expect("summary");
    assert!(
        summary.contains("\"via_proxy\""),
        "the manifests' difference is named"
    );
}

type Seen = Arc<Mutex<Vec<(String, Option<String>, Value)>>>;

/// A provider on 127.0.0.1:0 answering both APIs with usage; keeps (path, auth, body).
fn fake_provider(seen: Seen) -> String {
    let handler = move |request: axum::extract::Request| {
        let seen = seen.clone();
        async move {
            let path = request.uri().path().to_string();
            let headers = request.headers().clone();
            let auth = headers
                .get("authorization")
                .or_else(|| headers.get("x-api-key"))
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let bytes = axum::body::to_bytes(request.into_body(), usize::MAX)
                .await
                .expect("body");
            let body: Value = serde_json::from_slice(&bytes).expect("JSON body");
            seen.lock().expect("lock").push((path.clone(), auth, body));
            let answer = if path == "/v1/messages" {
                serde_json::json!({"id": "msg_fake", "type": "message", "role": "assistant",
                    "content": [{"type": "text", "text": "the answer"}],
                    "usage": {"input_tokens": 100, "output_tokens": 3}})
            } else {
                serde_json::json!({"id": "chatcmpl-fake", "object": "chat.completion",
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": "the answer"}, "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 100, "completion_tokens": 3}})
            };
            axum::Json(answer)
        }
    };
    let app = axum::Router::new().fallback(handler);
    format!("http://{}", crate::serve_on_thread(app))
}

#[test]
fn via_proxy_http_runners_send_the_proxys_request_to_their_endpoint() {
    for (kind, suffix, path) in [
        ("openai_compatible", "/v1", "/v1/chat/completions"),
        ("anthropic", "", "/v1/messages"),
    ] {
        let seen: Seen = Arc::default();
        let root = fake_provider(seen.clone());
        let state = tempfile::tempdir().expect("tempdir");
        let runner = state.path().join("fake.toml");
        std::fs::write(
            &runner,
            format!(
                "name = \"fake\"\nkind = \"{kind}\"\nprovider = \"fake\"\nmodel = \"m\"\ncontext_window = 8192\nbase_url = \"{root}{suffix}\"\napi_key_env = \"SVC_TEST_FAKE_KEY\"\ntimeout_ms = 5000\nretries = 0\nconcurrency = 4\nvia_proxy = true\n[cost]\nsource = \"self_hosted_no_api_fee\"\n"
            ),
        )
        .expect("runner file");
        let out_dir = state.path().join("run");
        let out = run(svc(state.path())
            .env("SVC_TEST_FAKE_KEY", "k-123")
            .args(["run", "--workload", WORKLOAD, "--conditions", "raw,svc"])
            .args(["--budget", "512", "--no-cache", "--runner"])
            .arg(&runner)
            .arg("--out")
            .arg(&out_dir));
        assert_eq!(out.code, 0, "{kind}: {}", out.stderr);
        assert_eq!(
            manifest(&out_dir)["via_proxy"],
            true,
            "the runner file's setting"
        );

        let seen = seen.lock().expect("lock").clone();
        assert_eq!(
            seen.len(),
            72,
            "{kind}: 36 raw through the proxy, 36 svc direct"
        );
        let mut split = 0;
        let mut compressed = 0;
        for (at, auth, body) in &seen {
            assert_eq!(at, path);
            assert!(
                auth.as_deref().is_some_and(|a| a.contains("k-123")),
                "{kind}: the key reaches the provider"
            );
            assert!(body.get("svc_trial").is_none(), "no harness field leaks");
            let messages = body["messages"].as_array().expect("messages");
            if messages.len() >= 3 {
                split += 1;
                let last = messages.last().expect("a last message")["content"]
                    .as_str()
                    .expect("text");
                assert!(last.ends_with("Answer:"), "{kind}: the question stays last");
                compressed += usize::from(messages.iter().any(|m| {
                    m["content"]
                        .as_str()
                        .is_some_and(|t| t.contains("· recover m"))
                }));
            }
        }
        assert_eq!(split, 36, "{kind}: raw requests come split at the context");
        assert!(
            compressed >= 30,
            "{kind}: {compressed} of 36 were compressed"
        );
        for record in records(&out_dir) {
            assert_eq!(record.outcome, Outcome::Success, "{kind}: {record:?}");
            assert_eq!(record.usage_source, UsageSource::ProviderResponse);
            if record.condition == Condition::Raw {
                assert!(record.task_id.ends_with("@b512"));
            }
        }
        assert!(
            records(&out_dir)
                .iter()
                .any(|r| r.condition == Condition::Raw && r.context_commit_id.is_some())
        );
    }
}

/// Regression: a runner endpoint nobody listens on failed direct trials as `connection_error`
/// but proxied ones as `http_502` (the proxy's own provider-shaped answer), so the two arms of
/// one run disagreed on what went wrong.
#[test]
fn via_proxy_unreachable_endpoint_is_a_connection_error_like_the_direct_call() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let root = format!("http://{}", closed.local_addr().expect("address"));
    drop(closed);
    let state = tempfile::tempdir().expect("tempdir");
    let runner = state.path().join("down.toml");
    std::fs::write(
        &runner,
        format!(
            "name = \"down\"\nkind = \"openai_compatible\"\nprovider = \"fake\"\nmodel = \"m\"\ncontext_window = 8192\nbase_url = \"{root}/v1\"\ntimeout_ms = 2000\nretries = 0\nconcurrency = 4\nvia_proxy = true\n[cost]\nsource = \"self_hosted_no_api_fee\"\n"
        ),
    )
    .expect("runner file");
    let out_dir = state.path().join("run");
    let out = run(svc(state.path())
        .args(["run", "--workload", WORKLOAD, "--conditions", "raw,svc"])
        .args(["--budget", "512", "--no-cache", "--runner"])
        .arg(&runner)
        .arg("--out")
        .arg(&out_dir));
    assert!(
        out.code <= 1,
        "the run completes with failed trials: {}",
        out.stderr
    );
    let records = records(&out_dir);
    assert_eq!(records.len(), 72);
    for record in &records {
        assert_eq!(record.outcome, Outcome::Error, "{record:?}");
        assert_eq!(
            record.error_type.as_deref(),
            Some("connection_error"),
            "{:?} trial {}",
            record.condition,
            record.task_id
        );
    }
}
