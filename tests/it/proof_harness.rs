//! `svc run --fixed-point` with an HTTP (OpenAI-compatible) runner: a fake model on 127.0.0.1:0
//! that guesses a fact unless the request holds its evidence. Each round is a real HTTP call;
//! the record adds up the calls' tokens and latency, requests.jsonl logs each call, and
//! notes.jsonl has the loop's rounds, status and recovered chunk ids.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use svc::trial::{Outcome, TrialRecord};

use crate::harness::{run, svc};

const WORKLOAD: &str = "fixtures/proof/workload";
/// The text of the section a budget of 30 tokens leaves out.
const PARK: &str = "botanic garden was founded in 1816";
const OUTPUT_TOKENS: u64 = 12;

/// An OpenAI-compatible fake that answers like `fixtures/proof/reader.sh` and keeps every
/// prompt it was sent. Usage: a prompt token per 4 bytes, [`OUTPUT_TOKENS`] output tokens.
/// With `fail_with_evidence`, a prompt holding the recovered evidence gets a 500.
fn fake_model(fail_with_evidence: bool) -> (String, Arc<Mutex<Vec<String>>>) {
    let prompts = Arc::new(Mutex::new(Vec::new()));
    let seen = prompts.clone();
    let handler = move |body: String| {
        let seen = seen.clone();
        async move {
            let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            let prompt = request["messages"]
                .as_array()
                .and_then(|m| m.last())
                .and_then(|m| m["content"].as_str())
                .unwrap_or("")
                .to_string();
            let year = if prompt.contains(PARK) { 1816 } else { 1900 };
            let answer = format!(
                "The bridge opened to traffic in 1932. The botanic garden was founded in {year} beside the harbour."
            );
            let n = {
                let mut seen = seen.lock().expect("lock");
                seen.push(prompt.clone());
                seen.len()
            };
            if fail_with_evidence && prompt.contains(PARK) {
                return (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "down".into());
            }
            let reply = serde_json::json!({
                "id": format!("chatcmpl-{n}"),
                "choices": [{"message": {"role": "assistant", "content": answer}}],
                "usage": {"prompt_tokens": prompt.len() / 4, "completion_tokens": OUTPUT_TOKENS}
            });
            (axum::http::StatusCode::OK, reply.to_string())
        }
    };
    let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(handler));
    let address = crate::serve_on_thread(app);
    (format!("http://{address}/v1"), prompts)
}

fn runner_file(dir: &Path, base_url: &str) -> std::path::PathBuf {
    let path = dir.join("fake.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"fake\"\nkind = \"openai_compatible\"\nprovider = \"fake\"\nmodel = \"m\"\ncontext_window = 8192\nbase_url = \"{base_url}\"\ntimeout_ms = 5000\nretries = 0\nconcurrency = 2\n[cost]\nsource = \"self_hosted_no_api_fee\"\n"
        ),
    )
    .expect("runner file");
    path
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect()
}

fn only_record(dir: &Path) -> TrialRecord {
    let text = std::fs::read_to_string(dir.join("trials.jsonl")).expect("trials");
    let records: Vec<TrialRecord> = text
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect();
    assert_eq!(records.len(), 1, "{text}");
    records.into_iter().next().expect("one record")
}

fn svc_run(state: &Path, runner: &Path, out: &Path, extra: &[&str]) {
    let result = run(svc(state)
        .args([
            "run",
            "--workload",
            WORKLOAD,
            "--conditions",
            "svc",
            "--budget",
            "30",
            "--no-cache",
            "--runner",
        ])
        .arg(runner)
        .arg("--out")
        .arg(out)
        .args(extra));
    assert_eq!(result.code, 0, "{}\n{}", result.stdout, result.stderr);
}

#[test]
fn fixed_point_with_an_http_runner_recovers_the_evidence_and_adds_up_the_calls() {
    let state = tempfile::tempdir().expect("state");
    let (base, prompts) = fake_model(false);
    let runner = runner_file(state.path(), &base);

    // Without the loop: one call, the founding year is guessed, an unsupported claim.
    let without = state.path().join("without");
    svc_run(state.path(), &runner, &without, &[]);
    assert_eq!(prompts.lock().expect("lock").len(), 1);
    let plain = only_record(&without);
    assert_eq!(plain.outcome, Outcome::Success);
    assert!(
        plain
            .response_text
            .as_deref()
            .unwrap_or("")
            .contains("1900"),
        "{plain:?}"
    );
    assert!(plain.unsupported_claim_rate > 0.0, "{plain:?}");

    // With the loop: the first draft guesses, the loop recovers the park section, the second
    // call is asked with it and answers from it.
    let with = state.path().join("with");
    svc_run(state.path(), &runner, &with, &["--fixed-point", "3,1024"]);
    let sent: Vec<String> = prompts.lock().expect("lock")[1..].to_vec();
    assert_eq!(sent.len(), 2, "two rounds, two HTTP calls: {sent:#?}");
    assert!(
        !sent[0].contains(PARK) && sent[1].contains(PARK),
        "{sent:#?}"
    );
    let record = only_record(&with);
    assert_eq!(record.outcome, Outcome::Success, "{record:?}");
    let answer = record.response_text.as_deref().unwrap_or("");
    assert!(
        answer.contains("1816") && !answer.contains("1900"),
        "{answer}"
    );
    assert_eq!(record.unsupported_claim_rate, 0.0, "{record:?}");
    // F1 against "1932" gives the long answer partial credit, the same with or without the loop.
    assert!(record.task_score > 0.0 && record.task_score == plain.task_score);
    assert_eq!(
        record.evidence_recall, 1.0,
        "the last context holds both spans"
    );
    assert_eq!(
        record.output_tokens,
        2 * OUTPUT_TOKENS,
        "both calls' output"
    );
    assert_eq!(
        record.provider_request_id, "chatcmpl-3",
        "the last call's id"
    );
    assert!(
        record.context_tokens > 2 * plain.context_tokens,
        "the context of both calls, the second with the evidence: {} vs {}",
        record.context_tokens,
        plain.context_tokens
    );

    // Each round is a logged call with its own stored request.
    let calls = lines(&with.join("requests.jsonl"));
    assert_eq!(calls.len(), 1);
    let calls = calls[0]["calls"].as_array().expect("calls");
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_ne!(calls[0]["request_sha256"], calls[1]["request_sha256"]);
    assert!(calls.iter().all(|c| c["purpose"] == "answer"
        && c["cache"] == "off"
        && c["attempts"].as_array().is_some_and(|a| a.len() == 1)));
    let attempt_ms: f64 = calls
        .iter()
        .map(|c| c["attempts"][0]["elapsed_ms"].as_f64().expect("elapsed"))
        .sum();
    let notes = lines(&with.join("notes.jsonl"));
    let split = notes
        .iter()
        .find(|n| n["kind"] == "latency_split")
        .expect("latency split");
    let model_ms = split["values"]["model_ms"].as_f64().expect("model_ms");
    // A call's time includes its attempts and what the client does around them.
    assert!(
        model_ms >= attempt_ms,
        "model time is both calls': {model_ms} vs their attempts' {attempt_ms}"
    );
    let detail: Value = serde_json::from_str(
        notes
            .iter()
            .find(|n| n["kind"] == "fixed_point")
            .and_then(|n| n["detail"].as_str())
            .expect("fixed_point note"),
    )
    .expect("detail JSON");
    assert_eq!(detail["status"], "supported", "{detail}");
    assert_eq!(detail["model_calls"], 2);
    assert_eq!(detail["rounds"], 2);
    let recovered = detail["recovered_chunk_ids"].as_array().expect("ids");
    assert!(
        recovered.len() == 1
            && recovered[0]
                .as_str()
                .is_some_and(|id| id.starts_with("city.md#")),
        "{detail}"
    );
    assert!(
        detail["first_draft"]
            .as_str()
            .is_some_and(|d| d.contains("1900"))
    );
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(with.join("manifest.json")).expect("manifest"),
    )
    .expect("manifest JSON");
    assert_eq!(manifest["fixed_point"]["max_rounds"], 3);

    // The two runs pair in a report: the loop removed the unsupported claim, at one more call.
    let report = run(svc(state.path())
        .args(["report", "--compare-runs"])
        .arg(&without)
        .arg(&with)
        .arg("--out")
        .arg(state.path().join("report")));
    assert_eq!(report.code, 0, "{}", report.stderr);
    let row = report
        .stdout
        .lines()
        .skip_while(|l| !l.starts_with("what B buys and costs"))
        .find(|l| l.starts_with("svc ") && l.contains(" all "))
        .unwrap_or_else(|| panic!("no cost row: {}", report.stdout));
    assert!(
        row.contains("→ 0.000 (")
            && row.ends_with("1.00 → 2.00")
            && row.contains(&format!("{:.1} → ", plain.context_tokens as f64)),
        "unsupported rate to 0 at one more call per trial: {row}"
    );
}

/// Found by probing: when a later round's call failed, the error record dropped the output
/// tokens (and cost) of the rounds that had answered.
#[test]
fn a_loop_that_fails_in_a_later_round_still_bills_the_calls_that_answered() {
    let state = tempfile::tempdir().expect("state");
    let (base, prompts) = fake_model(true);
    let runner = runner_file(state.path(), &base);
    let out = state.path().join("run");
    svc_run(state.path(), &runner, &out, &["--fixed-point", "3,1024"]);
    assert_eq!(
        prompts.lock().expect("lock").len(),
        2,
        "round 0, then the failing round 1"
    );
    let record = only_record(&out);
    assert_eq!(record.outcome, Outcome::Error, "{record:?}");
    assert_eq!(
        record.output_tokens, OUTPUT_TOKENS,
        "round 0's output: {record:?}"
    );
    assert!(record.context_tokens > 0, "{record:?}");
}
