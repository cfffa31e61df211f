//! Issue 11 end to end: selector settings of the `svc` condition recorded in the manifest,
//! `latency_ms` split in notes.jsonl, exact match beside F1, and path-list answers judged path
//! by path.

use std::path::Path;

use svc::trial::{Condition, TrialRecord};

use crate::harness::{run, svc};

const MINI: &str = "fixtures/harness/halueval-mini";

fn records(dir: &Path) -> Vec<TrialRecord> {
    std::fs::read_to_string(dir.join("trials.jsonl"))
        .expect("trials.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a valid record"))
        .collect()
}

fn notes(dir: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(dir.join("notes.jsonl"))
        .expect("notes.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a note"))
        .collect()
}

fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).expect("manifest"))
        .expect("json")
}

#[test]
fn every_selector_setting_commits_and_is_named_in_the_manifest() {
    let state = tempfile::tempdir().expect("tempdir");
    let mut tokens = Vec::new();
    for selector in ["svc", "bm25-topk", "random", "oracle-evidence"] {
        let out = state.path().join(selector);
        let done = run(svc(state.path())
            .args([
                "run",
                "--workload",
                MINI,
                "--conditions",
                "svc",
                "--budget",
                "96",
            ])
            .args(["--selector", selector, "--out"])
            .arg(&out));
        assert_eq!(done.code, 0, "{selector}: {}", done.stderr);
        assert_eq!(manifest(&out)["selector"], selector);
        assert_eq!(manifest(&out)["temperature"], 0.0);
        let records = records(&out);
        assert_eq!(records.len(), 12);
        for record in &records {
            assert!(
                record
                    .context_commit_id
                    .as_deref()
                    .is_some_and(|id| id.starts_with("ctx_")),
                "{selector}: every setting keeps the ctx_ rule"
            );
            assert!(record.context_tokens <= 96);
        }
        let recall: f64 = records.iter().map(|r| r.evidence_recall).sum::<f64>() / 12.0;
        tokens.push((selector, recall));
    }
    let recall = |name: &str| tokens.iter().find(|t| t.0 == name).expect("ran").1;
    assert_eq!(
        recall("oracle-evidence"),
        1.0,
        "the oracle sends the evidence"
    );
    assert!(recall("random") < recall("oracle-evidence"));
    // Another setting is another experiment: it cannot resume into a directory of the engine.
    let clash = run(svc(state.path())
        .args([
            "run",
            "--workload",
            MINI,
            "--conditions",
            "svc",
            "--budget",
            "96",
        ])
        .args(["--selector", "bm25-topk", "--out"])
        .arg(state.path().join("svc")));
    assert_eq!(clash.code, 2, "{}", clash.stdout);
    assert!(
        clash.stderr.contains("selector: svc -> bm25-topk"),
        "{}",
        clash.stderr
    );
}

#[test]
fn latency_is_context_work_plus_model_call_with_the_split_in_notes() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = state.path().join("run");
    let done = run(svc(state.path())
        .args([
            "run",
            "--workload",
            MINI,
            "--conditions",
            "raw,svc",
            "--budget",
            "96",
            "--out",
        ])
        .arg(&out));
    assert_eq!(done.code, 0, "{}", done.stderr);
    let notes = notes(&out);
    let records = records(&out);
    for record in &records {
        let split = notes
            .iter()
            .find(|n| {
                n["kind"] == "latency_split"
                    && n["task_id"] == record.task_id.as_str()
                    && n["condition"] == record.condition.as_str()
            })
            .expect("a latency_split note per trial");
        let values = &split["values"];
        let sum = values["context_ms"].as_f64().expect("context")
            + values["model_ms"].as_f64().expect("model")
            + values["summary_ms"].as_f64().expect("summary");
        assert!((sum - record.latency_ms).abs() < 1e-6, "{split}");
        if record.condition == Condition::Svc {
            assert!(values["context_ms"].as_f64().expect("context") > 0.0);
        }
        let secondary = notes
            .iter()
            .find(|n| n["kind"] == "secondary_score" && n["task_id"] == record.task_id.as_str())
            .expect("exact match beside F1");
        assert_eq!(secondary["values"]["scorer"], "qa-exact-v1");
    }
}

#[test]
fn issue_11_path_list_answers_name_only_files_they_were_shown() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = state.path().join("run");
    let done = run(svc(state.path())
        .args([
            "run",
            "--workload",
            "code-localization-mini",
            "--budget",
            "512",
            "--out",
        ])
        .arg(&out));
    assert_eq!(done.code, 0, "{}", done.stderr);
    // The fixture lists only files of the context it was given: no unsupported path.
    for record in records(&out) {
        assert_eq!(record.unsupported_claim_rate, 0.0, "{}", record.task_id);
    }
}

/// The contract with the report: `raw` runs once per task, without a budget in its task_id,
/// and the report pairs it with every budget of the run.
#[test]
fn raw_runs_once_per_task_and_pairs_with_every_budget() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = state.path().join("run");
    let done = run(svc(state.path())
        .args(["run", "--workload", MINI, "--conditions", "raw,svc"])
        .args(["--budget", "64,128", "--out"])
        .arg(&out));
    assert_eq!(done.code, 0, "{}", done.stderr);
    let records = records(&out);
    let raw: Vec<&TrialRecord> = records
        .iter()
        .filter(|r| r.condition == Condition::Raw)
        .collect();
    assert_eq!(raw.len(), 12, "once per task");
    assert!(raw.iter().all(|r| !r.task_id.contains("@b")));
    assert_eq!(records.len(), 12 + 24);
    assert_eq!(manifest(&out)["raw_once_per_task"], true);
    let report_dir = state.path().join("report");
    let report = run(svc(state.path())
        .args(["report", "--resamples", "50", "--out"])
        .arg(&report_dir)
        .arg(&out));
    assert_eq!(report.code, 0, "{}", report.stderr);
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(report_dir.join("summary.json")).expect("summary"),
    )
    .expect("json");
    let svc_vs_raw = summary["comparisons"]
        .as_array()
        .expect("comparisons")
        .iter()
        .find(|c| c["condition"] == "svc" && c["baseline"] == "raw")
        .expect("svc vs raw");
    assert_eq!(svc_vs_raw["pairs"], 24, "raw pairs with both budgets");
    // Resume: nothing runs twice.
    let again = run(svc(state.path())
        .args(["run", "--workload", MINI, "--conditions", "raw,svc"])
        .args(["--budget", "64,128", "--out"])
        .arg(&out));
    assert!(
        again.stdout.contains("0 trials written"),
        "{}",
        again.stdout
    );
}

/// Issue 11: `runners check` said "ok" for a runner that answered with empty text.
#[test]
fn issue_11_runners_check_fails_on_an_empty_answer() {
    let state = tempfile::tempdir().expect("tempdir");
    let file = state.path().join("silent.toml");
    std::fs::write(
        &file,
        r#"name = "silent"
kind = "command"
provider = "local-command"
model = "silent"
command = ["python3", "-c", "import sys, json; sys.stdin.read(); print(json.dumps({'text': '  ', 'usage': {'input_tokens': 3, 'output_tokens': 0}}))"]
context_window = 1000
[cost]
source = "self_hosted_no_api_fee"
"#,
    )
    .expect("write");
    let check = run(svc(state.path()).args(["runners", "check"]).arg(&file));
    assert_eq!(check.code, 1, "{}{}", check.stdout, check.stderr);
    assert!(check.stderr.contains("empty text"), "{}", check.stderr);
}
