//! `svc run`, `svc workloads`, `svc runners` end to end: the built binary over the fixture
//! HaluEval-format workload, resume, shards, error records from a failing local endpoint, and
//! clear errors for bad input.

use std::collections::HashSet;
use std::path::Path;

use svc::trial::{Condition, Outcome, TrialRecord, UsageSource};

use crate::harness::{root, run, svc};

const MINI: &str = "fixtures/harness/halueval-mini";

/// Records of a run directory; deserialising into `TrialRecord` rejects unknown fields and any
/// broken schema rule.
fn records(dir: &Path) -> Vec<TrialRecord> {
    std::fs::read_to_string(dir.join("trials.jsonl"))
        .expect("trials.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a valid record"))
        .collect()
}

#[test]
fn fixture_run_end_to_end_then_resume_without_duplicates() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = state.path().join("run");
    let args = [
        "run",
        "--workload",
        MINI,
        "--conditions",
        "raw,native_compaction",
        "--budget",
        "64",
        "--budget",
        "128",
        "--replicates",
        "2",
        "--out",
    ];
    let first = run(svc(state.path()).args(args).arg(&out));
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(
        first
            .stdout
            .contains("72 trials written (0 errors), 0 already present"),
        "{}",
        first.stdout
    );
    let records = records(&out);
    // raw once per task (it ignores the budget), native_compaction at both budgets.
    assert_eq!(records.len(), 12 * 2 + 12 * 2 * 2);
    for record in &records {
        assert_eq!(record.outcome, Outcome::Success);
        assert_eq!(record.usage_source, UsageSource::DeterministicFixture);
        assert_eq!(
            (record.workload.as_str(), record.workload_version.as_str()),
            ("halueval-mini", "1")
        );
        if record.condition == Condition::Raw {
            assert!(!record.task_id.contains("@b"), "{}", record.task_id);
            continue;
        }
        let budget: usize = record
            .task_id
            .rsplit_once("@b")
            .expect("budget suffix")
            .1
            .parse()
            .expect("number");
        assert!(record.context_tokens as usize <= budget);
    }
    let raw_score: f64 = records
        .iter()
        .filter(|r| r.condition == Condition::Raw)
        .map(|r| r.task_score)
        .sum();
    assert!(raw_score > 0.0, "the fixture answers from the raw context");
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("manifest.json")).expect("manifest"),
    )
    .expect("json");
    assert_eq!(manifest["budgets"], serde_json::json!([64, 128]));
    assert_eq!(manifest["task_id_budget_separator"], "@b");
    assert_eq!(manifest["workload"]["version"], "1");
    assert_eq!(manifest["runner"]["name"], "fixture");
    assert!(manifest["ended_at"].is_string() && manifest["started_at"].is_string());

    let second = run(svc(state.path()).args(args).arg(&out));
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(
        second
            .stdout
            .contains("0 trials written (0 errors), 72 already present"),
        "{}",
        second.stdout
    );
    assert_eq!(self::records(&out).len(), 72);

    // More replicates into the same directory add only the new ones.
    let mut more: Vec<&str> = args.to_vec();
    // The value after --replicates (index 9 was the flag itself, which made "3" a budget).
    assert_eq!(more[9], "--replicates");
    more[10] = "3";
    let third = run(svc(state.path()).args(&more).arg(&out));
    assert!(
        third.stdout.contains("36 trials written"),
        "{}",
        third.stdout
    );
    let keys: HashSet<(String, Condition, u64)> = self::records(&out)
        .into_iter()
        .map(|r| (r.task_id, r.condition, r.replicate))
        .collect();
    assert_eq!(keys.len(), 108);
}

/// Regression (found by probing): two runs into one `--out` at once both ran every trial, and
/// every record was written twice. A run holds `<out>/run.lock`; a second one is refused.
#[test]
fn a_second_run_into_a_directory_in_use_is_refused() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = state.path().join("run");
    std::fs::create_dir_all(&out).expect("out");
    let held = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(out.join("run.lock"))
        .expect("lock file");
    held.lock()
        .expect("hold the lock as a running svc run would");
    let args = ["run", "--workload", MINI, "--conditions", "raw", "--out"];
    let refused = run(svc(state.path()).args(args).arg(&out));
    assert_eq!(refused.code, 2, "{}", refused.stdout);
    assert!(
        refused.stderr.contains("another svc run is writing")
            && refused.stderr.contains("pass another --out"),
        "{}",
        refused.stderr
    );
    assert!(!out.join("trials.jsonl").exists(), "nothing was written");
    held.unlock().expect("unlock");
    let ran = run(svc(state.path()).args(args).arg(&out));
    assert_eq!(ran.code, 0, "{}", ran.stderr);
}

#[test]
fn shards_split_the_tasks() {
    let state = tempfile::tempdir().expect("tempdir");
    let mut seen = Vec::new();
    for shard in ["1/2", "2/2"] {
        let out = state.path().join(shard.replace('/', "of"));
        let result = run(svc(state.path())
            .args([
                "run",
                "--workload",
                MINI,
                "--conditions",
                "raw",
                "--shard",
                shard,
                "--out",
            ])
            .arg(&out));
        assert_eq!(result.code, 0, "{}", result.stderr);
        let records = records(&out);
        assert_eq!(records.len(), 6);
        seen.extend(records.into_iter().map(|r| r.task_id));
    }
    let unique: HashSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), 12);
}

/// A provider that always answers 500, on 127.0.0.1:0, served from a background thread.
fn failing_endpoint() -> String {
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(|| async {
            (
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "{\"error\":\"down\"}",
            )
        }),
    );
    let address = crate::serve_on_thread(app);
    format!("http://{address}/v1")
}

#[test]
fn failing_endpoint_gives_error_records_and_max_error_rate_aborts() {
    let state = tempfile::tempdir().expect("tempdir");
    let runner = state.path().join("failing.toml");
    std::fs::write(
        &runner,
        format!(
            "name = \"failing\"\nkind = \"openai_compatible\"\nprovider = \"fake\"\nmodel = \"m\"\ncontext_window = 8192\nbase_url = \"{}\"\ntimeout_ms = 2000\nretries = 1\nbackoff_ms = 5\nconcurrency = 2\n[cost]\nsource = \"self_hosted_no_api_fee\"\n",
            failing_endpoint()
        ),
    )
    .expect("runner file");
    let out = state.path().join("run");
    let result = run(svc(state.path())
        .args(["run", "--workload", MINI, "--conditions", "raw", "--runner"])
        .arg(&runner)
        .arg("--out")
        .arg(&out));
    assert_eq!(result.code, 0, "{}", result.stderr);
    assert!(
        result.stdout.contains("12 trials written (12 errors)"),
        "{}",
        result.stdout
    );
    for record in records(&out) {
        assert_eq!(record.outcome, Outcome::Error);
        assert_eq!(record.error_type.as_deref(), Some("http_500"));
        assert_eq!(record.usage_source, UsageSource::ProviderError);
        assert!(record.response_text.is_none() && record.context_tokens > 0);
    }
    let notes = std::fs::read_to_string(out.join("notes.jsonl")).expect("notes");
    assert!(notes.contains("HTTP 500"), "{notes}");

    let aborted = run(svc(state.path())
        .args([
            "run",
            "--workload",
            MINI,
            "--conditions",
            "raw",
            "--max-error-rate",
            "0.5",
            "--runner",
        ])
        .arg(&runner)
        .arg("--out")
        .arg(state.path().join("aborted")));
    assert_eq!(aborted.code, 1, "{}", aborted.stderr);
    assert!(
        aborted.stderr.contains("--max-error-rate"),
        "{}",
        aborted.stderr
    );
}

#[test]
fn bad_input_gives_clear_errors() {
    let state = tempfile::tempdir().expect("tempdir");
    let malformed =
        run(svc(state.path()).args(["run", "--workload", "fixtures/harness/broken-workload"]));
    assert_eq!(malformed.code, 2);
    assert!(
        malformed.stderr.contains(
            "fixtures/harness/broken-workload/workload.toml:9:15: malformed workload file: field `distractors`: invalid type: string \"six\", expected usize"
        ),
        "{}",
        malformed.stderr
    );
    let unknown = run(svc(state.path()).args(["run", "--workload", "no-such-workload"]));
    assert_eq!(unknown.code, 2);
    assert!(
        unknown
            .stderr
            .contains("unknown workload `no-such-workload`")
            && unknown.stderr.contains("qa-builtin"),
        "{}",
        unknown.stderr
    );
    let runner =
        run(svc(state.path()).args(["run", "--workload", MINI, "--runner", "no-such-runner"]));
    assert_eq!(runner.code, 2);
    assert!(
        runner.stderr.contains("unknown runner `no-such-runner`")
            && runner.stderr.contains("fixture"),
        "{}",
        runner.stderr
    );
    let shard = run(svc(state.path()).args(["run", "--workload", MINI, "--shard", "3/2"]));
    assert_eq!(shard.code, 2);
    assert!(shard.stderr.contains("K/N"), "{}", shard.stderr);
}

#[test]
fn svc_conditions_commit_their_selection_and_omitted_chunks_are_recoverable() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = state.path().join("run");
    let result = run(svc(state.path())
        .args([
            "run",
            "--workload",
            MINI,
            "--conditions",
            "svc,combined",
            "--budget",
            "64",
            "--out",
        ])
        .arg(&out));
    assert_eq!(result.code, 0, "{}", result.stderr);
    let records = records(&out);
    assert!(!records.is_empty());
    let mut recovered = 0;
    for record in records {
        assert_eq!(record.error_type, None, "{record:?}");
        let ctx_id = record.context_commit_id.expect("svc conditions commit");
        // Trial runs group-commit into packs: read the receipt the way `recover` does.
        let receipt = svc::context::CommitStore::new(state.path())
            .receipt(&ctx_id)
            .expect("receipt");
        let receipt = serde_json::to_value(receipt).expect("json");
        // A chunk the budget left out is recoverable through the CLI.
        let omitted = receipt["chunks"]
            .as_array()
            .expect("chunks")
            .iter()
            .find(|c| c["resolution"].is_null());
        if let Some(chunk) = omitted {
            let chunk_id = chunk["chunk_id"].as_str().expect("id");
            let recovered_text =
                run(svc(state.path()).args(["context", "recover", &ctx_id, chunk_id]));
            assert_eq!(recovered_text.code, 0, "{}", recovered_text.stderr);
            assert!(!recovered_text.stdout.is_empty());
            recovered += 1;
        }
    }
    assert!(recovered > 0, "a 64-token budget omits something");
}

#[test]
fn workloads_and_runners_are_listed_and_shown() {
    let state = tempfile::tempdir().expect("tempdir");
    let list = run(svc(state.path()).args(["workloads", "list"]));
    assert_eq!(list.code, 0, "{}", list.stderr);
    for name in [
        "qa-builtin",
        "halueval-distractor",
        "needle-builtin",
        "conversation-builtin",
        "code-localization-mini",
    ] {
        assert!(
            list.stdout.contains(&format!("| {name} | 1 |")),
            "{}",
            list.stdout
        );
    }
    let show = run(svc(state.path()).args([
        "workloads",
        "show",
        "code-localization-mini",
        "--format",
        "json",
    ]));
    assert_eq!(show.code, 0, "{}", show.stderr);
    let shown: serde_json::Value = serde_json::from_str(&show.stdout).expect("json");
    assert_eq!(shown["tasks"], 8);
    assert_eq!(
        shown["first_tasks"][0]["gold_files"][0],
        "inventory/csv_import.py"
    );
    let runners = run(svc(state.path()).args(["runners", "list"]));
    assert_eq!(runners.code, 0, "{}", runners.stderr);
    assert!(
        runners
            .stdout
            .contains("| fixture | fixture | svc-fixture | extractive-v1 | zero_cost_fixture |"),
        "{}",
        runners.stdout
    );
    // Found by probing: a runner file that does not load was listed with `?` and exit 0,
    // where `workloads list` exits 1.
    let elsewhere = tempfile::tempdir().expect("runners");
    std::fs::copy(
        root().join("runners/fixture.toml"),
        elsewhere.path().join("fixture.toml"),
    )
    .expect("copy");
    std::fs::write(elsewhere.path().join("broken.toml"), "name = ").expect("write");
    let listed = run(svc(state.path())
        .env("SVC_RUNNERS_DIR", elsewhere.path())
        .args(["runners", "list"]));
    assert_eq!(listed.code, 1, "{}", listed.stdout);
    assert!(
        listed.stdout.contains("| broken | ? |"),
        "{}",
        listed.stdout
    );
    assert!(listed.stderr.contains("broken.toml"), "{}", listed.stderr);
    // Found by probing: a runner whose pricing snapshot is missing listed as fine (exit 0)
    // while `run` refused it.
    std::fs::remove_file(elsewhere.path().join("broken.toml")).expect("remove");
    std::fs::write(
        elsewhere.path().join("unpriced.toml"),
        "name = \"unpriced\"\nkind = \"openai_compatible\"\nprovider = \"p\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:9/v1\"\ncontext_window = 1000\nmax_output_tokens = 8\ntimeout_ms = 1000\n\n[cost]\nsource = \"pricing_snapshot\"\npricing = \"pricing/does-not-exist.toml\"\n",
    )
    .expect("write");
    let listed = run(svc(state.path())
        .env("SVC_RUNNERS_DIR", elsewhere.path())
        .args(["runners", "list"]));
    assert_eq!(listed.code, 1, "{}\n{}", listed.stdout, listed.stderr);
    assert!(
        listed
            .stdout
            .contains("| unpriced | openai_compatible | p | m | pricing_snapshot |"),
        "{}",
        listed.stdout
    );
    assert!(
        listed.stderr.contains("does-not-exist.toml"),
        "{}",
        listed.stderr
    );
    let check = run(svc(state.path()).args(["runners", "check", "fixture"]));
    assert_eq!(check.code, 0, "{}", check.stderr);
    assert!(check.stdout.contains("answer: green"), "{}", check.stdout);
    assert!(root().join("runners/gemma3-setup.sh").is_file());
}

#[test]
fn model_summary_native_compaction_on_a_conversation_with_the_fixture() {
    let state = tempfile::tempdir().expect("tempdir");
    let run_with = |mode: &str| {
        let out = state.path().join(mode);
        let result = run(svc(state.path())
            .args([
                "run",
                "--workload",
                "conversation-builtin",
                "--conditions",
                "native_compaction",
                "--native-compaction",
                mode,
                "--budget",
                "256",
                "--out",
            ])
            .arg(&out));
        assert_eq!(result.code, 0, "{}", result.stderr);
        out
    };
    let summarised = run_with("model-summary");
    let deterministic = run_with("deterministic");
    let records = records(&summarised);
    assert!(!records.is_empty());
    let notes = std::fs::read_to_string(summarised.join("notes.jsonl")).expect("notes");
    let plain: std::collections::HashMap<String, TrialRecord> = self::records(&deterministic)
        .into_iter()
        .map(|r| (r.task_id.clone(), r))
        .collect();
    for record in &records {
        assert_eq!(record.condition, Condition::NativeCompaction);
        assert_eq!(record.outcome, Outcome::Success);
        assert!(record.context_tokens <= 256);
        assert!(
            notes.contains(&format!(
                "\"task_id\":\"{}\",\"condition\":\"native_compaction\",\"replicate\":0,\"kind\":\"summary_call\"",
                record.task_id
            )),
            "{notes}"
        );
        let other = &plain[&record.task_id];
        assert_ne!(
            record.context_sha256, other.context_sha256,
            "the summary replaces the oldest turns"
        );
        assert!(
            record.output_tokens > 0 && record.latency_ms >= 0.0,
            "the summary call is accounted"
        );
    }
    assert!(notes.contains("summarised the ") && notes.contains("oldest turns"));
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(summarised.join("manifest.json")).expect("manifest"),
    )
    .expect("json");
    assert_eq!(manifest["native_compaction"], "model-summary");
    let plain_notes =
        std::fs::read_to_string(deterministic.join("notes.jsonl")).expect("latency notes");
    assert!(!plain_notes.contains("summary_call"), "{plain_notes}");

    let bad = run(svc(state.path()).args([
        "run",
        "--workload",
        "conversation-builtin",
        "--native-compaction",
        "llm",
    ]));
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("model-summary"), "{}", bad.stderr);
}

/// Regression (found by probing): a body cut off after the headers was reported as "cannot
/// connect", sending the user after a network problem; `svc runners check` end to end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_cut_off_is_not_called_a_failure_to_connect() {
    let upstream = crate::proxy::raw_upstream(
        b"HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\n{\"id\":".to_vec(),
    )
    .await;
    let state = tempfile::tempdir().expect("state");
    let runners = tempfile::tempdir().expect("runners");
    std::fs::write(
        runners.path().join("cut.toml"),
        format!(
            "name = \"cut\"\nkind = \"openai_compatible\"\nprovider = \"p\"\nmodel = \"m\"\nbase_url = \"{upstream}/v1\"\ncontext_window = 1000\nmax_output_tokens = 8\ntimeout_ms = 2000\nretries = 0\n\n[cost]\nsource = \"self_hosted_no_api_fee\"\n"
        ),
    )
    .expect("runner");
    let home = state.path().to_path_buf();
    let dir = runners.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || {
        run(svc(&home)
            .env("SVC_RUNNERS_DIR", &dir)
            .args(["runners", "check", "cut"]))
    })
    .await
    .expect("join");
    assert_ne!(out.code, 0, "{}", out.stdout);
    let said = format!("{}{}", out.stdout, out.stderr);
    assert!(
        said.contains("the connection broke while the response body was read"),
        "{said}"
    );
    assert!(!said.contains("cannot connect"), "{said}");
}
