//! Auditable, cached, resumable runs that scale out (issue 12), end to end with the built
//! binary: the response cache against a fake model that counts requests, resume refusing
//! another svc version or other settings and `--retry-errors` re-running only errors, `svc runs
//! show`, and shard processes (`--shard auto/N`) whose outputs `svc report` merges into the
//! same records and report as one unsharded run, from JSONL and from Parquet.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;
use svc::trial::{Outcome, TrialRecord};

use crate::harness::{run, svc};

const MINI: &str = "fixtures/harness/halueval-mini";

fn records(dir: &Path) -> Vec<TrialRecord> {
    std::fs::read_to_string(dir.join("trials.jsonl"))
        .expect("trials.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).expect("a valid record"))
        .collect()
}

/// An OpenAI-compatible fake on 127.0.0.1:0 that counts requests and answers 500 to the first
/// `fail_first` of them. Its answer is a function of the prompt, as a deterministic model's is.
fn fake_model(fail_first: usize) -> (String, Arc<AtomicUsize>) {
    let count = Arc::new(AtomicUsize::new(0));
    let served = count.clone();
    let handler = move |body: String| {
        let served = served.clone();
        async move {
            let n = served.fetch_add(1, Ordering::SeqCst);
            if n < fail_first {
                return (
                    axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                    "{}".to_string(),
                );
            }
            let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
            let prompt = request["messages"][0]["content"].as_str().unwrap_or("");
            let answer = format!("answer {}", &svc::digest::sha256_hex(prompt)[..8]);
            let reply = serde_json::json!({
                "id": format!("chatcmpl-{n}"),
                "choices": [{"message": {"role": "assistant", "content": answer}}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 3}
            });
            (axum::http::StatusCode::OK, reply.to_string())
        }
    };
    let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(handler));
    let address = crate::serve_on_thread(app);
    (format!("http://{address}/v1"), count)
}

fn runner_file(dir: &Path, base_url: &str, extra: &str) -> PathBuf {
    let path = dir.join("fake.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"fake\"\nkind = \"openai_compatible\"\nprovider = \"fake\"\nmodel = \"m\"\ncontext_window = 8192\nbase_url = \"{base_url}\"\ntimeout_ms = 5000\nretries = 0\nconcurrency = 2\n{extra}[cost]\nsource = \"self_hosted_no_api_fee\"\n"
        ),
    )
    .expect("runner file");
    path
}

fn run_mini(state: &Path, runner: &Path, out: &Path, extra: &[&str]) -> crate::harness::Run {
    run(svc(state)
        .args(["run", "--workload", MINI, "--conditions", "raw", "--runner"])
        .arg(runner)
        .arg("--out")
        .arg(out)
        .args(extra))
}

#[test]
fn the_response_cache_serves_a_second_run_without_upstream_requests() {
    let state = tempfile::tempdir().expect("tempdir");
    let (base, upstream) = fake_model(0);
    let runner = runner_file(state.path(), &base, "");
    let first = run_mini(state.path(), &runner, &state.path().join("a"), &[]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(upstream.load(Ordering::SeqCst), 12);
    assert!(
        first
            .stdout
            .contains("cache:    on (0 calls served from it)"),
        "{}",
        first.stdout
    );

    // Another run directory, same requests: all served from the cache.
    let second = run_mini(state.path(), &runner, &state.path().join("b"), &[]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert_eq!(upstream.load(Ordering::SeqCst), 12, "no upstream request");
    assert!(
        second.stdout.contains("(12 calls served from it)"),
        "{}",
        second.stdout
    );
    // A hit is recorded as the original call: the records are the same, but for the
    // condition's own context work, which latency_ms includes and which is measured anew.
    let sorted = |dir: &str| {
        let mut records = records(&state.path().join(dir));
        records.sort_by(|a, b| a.task_id.cmp(&b.task_id));
        for record in &mut records {
            record.latency_ms = 0.0;
        }
        records
    };
    assert_eq!(sorted("a"), sorted("b"));
    let calls = std::fs::read_to_string(state.path().join("b/requests.jsonl")).expect("calls");
    assert_eq!(calls.matches("\"cache\":\"hit\"").count(), 12, "{calls}");

    // --no-cache asks upstream for every trial.
    let third = run_mini(
        state.path(),
        &runner,
        &state.path().join("c"),
        &["--no-cache"],
    );
    assert_eq!(third.code, 0, "{}", third.stderr);
    assert_eq!(upstream.load(Ordering::SeqCst), 24);
    assert!(third.stdout.contains("cache:    off"), "{}", third.stdout);

    // A sampling runner (temperature > 0) does not use the cache unless asked.
    let sampling = runner_file(state.path(), &base, "temperature = 0.7\n");
    let fourth = run_mini(state.path(), &sampling, &state.path().join("d"), &[]);
    assert_eq!(fourth.code, 0, "{}", fourth.stderr);
    assert_eq!(upstream.load(Ordering::SeqCst), 36);
}

/// A finished run of the mini workload against a model that never fails: the state folder,
/// the run directory and the task id of its first record.
fn finished_run() -> (tempfile::TempDir, PathBuf, String) {
    let state = tempfile::tempdir().expect("tempdir");
    let (base, _) = fake_model(0);
    let runner = runner_file(state.path(), &base, "");
    let out = state.path().join("run");
    let result = run_mini(state.path(), &runner, &out, &[]);
    assert_eq!(result.code, 0, "{}", result.stderr);
    let record = records(&out).remove(0);
    // raw runs once per task: its task_id has no `@b<budget>` suffix.
    let task = svc::harness::run::split_task_id(&record.task_id)
        .0
        .to_string();
    (state, out, task)
}

#[test]
fn runs_show_prints_the_exact_request_of_a_trial() {
    let (state, out, task) = finished_run();
    let shown = run(svc(state.path())
        .args(["runs", "show"])
        .arg(&out)
        .arg(&task)
        .args(["--condition", "raw", "--format", "json"]));
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let trials: Vec<Value> = serde_json::from_str(&shown.stdout).expect("json");
    assert_eq!(trials.len(), 1);
    let call = &trials[0]["calls"][0];
    let prompt = call["request"]["prompt"].as_str().expect("prompt");
    let context = call["request"]["context"].as_str().expect("context");
    assert!(prompt.contains(context) && !context.is_empty());
    // What was sent hashes to what the record says the context was.
    assert_eq!(
        svc::digest::sha256_hex(context),
        trials[0]["record"]["context_sha256"]
            .as_str()
            .expect("hash")
    );
    assert_eq!(call["attempts"][0]["outcome"], "ok");
    let text = run(svc(state.path())
        .args(["runs", "show"])
        .arg(&out)
        .arg(&task));
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout.contains("--- prompt (as sent):"),
        "{}",
        text.stdout
    );
    let missing = run(svc(state.path())
        .args(["runs", "show"])
        .arg(&out)
        .arg("no-such-task"));
    assert_eq!(missing.code, 2);
    assert!(
        missing.stderr.contains("task ids there look like"),
        "{}",
        missing.stderr
    );
    let listed = run(svc(state.path()).args(["runs", "list"]).arg(state.path()));
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(
        listed.stdout.contains("halueval-mini v1 × fake"),
        "{}",
        listed.stdout
    );
    assert!(
        !listed.stdout.contains("records in trials.jsonl"),
        "{}",
        listed.stdout
    );
}

/// Regressions (found by probing): a truncated trials.jsonl was listed with the manifest's
/// count, and `runs show` then called a trial record "not a call line"; a damaged manifest hid
/// the run from `runs list`.
#[test]
fn runs_list_counts_the_file_and_names_a_damaged_manifest() {
    let (state, out, task) = finished_run();
    let trials = out.join("trials.jsonl");
    let text = std::fs::read_to_string(&trials).expect("trials");
    let lines: Vec<&str> = text.lines().collect();
    let written = lines.len();

    // Cut off in the middle of the fourth record: three records, and a torn line.
    let cut = format!(
        "{}\n{}",
        lines[..3].join("\n"),
        &lines[3][..lines[3].len() / 2]
    );
    std::fs::write(&trials, &cut).expect("cut");
    let listed = run(svc(state.path()).args(["runs", "list"]).arg(state.path()));
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(
        listed.stdout.contains(&format!(
            "3 records in trials.jsonl (the manifest says {written}"
        )),
        "{}",
        listed.stdout
    );
    let json = run(svc(state.path())
        .args(["runs", "list", "--format", "json"])
        .arg(state.path()));
    let json: Value = serde_json::from_str(&json.stdout).expect("json");
    assert_eq!(json[0]["records_in_file"], 3);
    assert_eq!(json[0]["written"], written);
    // The torn last line is not a record, and not an error.
    let shown = run(svc(state.path())
        .args(["runs", "show"])
        .arg(&out)
        .arg(&task));
    assert_eq!(shown.code, 0, "{}", shown.stderr);

    // A broken record before the end is named as a record, with its line.
    let broken = format!("{}\n{{\"task_id\": 1}}\n{}\n", lines[0], lines[1]);
    std::fs::write(&trials, broken).expect("break");
    let shown = run(svc(state.path())
        .args(["runs", "show"])
        .arg(&out)
        .arg(&task));
    assert_eq!(shown.code, 2, "{}", shown.stdout);
    assert!(
        shown.stderr.contains("trials.jsonl:2: not a trial record"),
        "{}",
        shown.stderr
    );

    // A damaged manifest: listed, with why.
    std::fs::write(out.join("manifest.json"), "{\"workload\": ").expect("damage");
    let listed = run(svc(state.path()).args(["runs", "list"]).arg(state.path()));
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(
        listed.stdout.contains("unreadable: ") && listed.stdout.contains("is not a run manifest"),
        "{}",
        listed.stdout
    );
}

#[test]
fn resume_refuses_another_version_or_settings_and_retry_errors_reruns_only_errors() {
    let state = tempfile::tempdir().expect("tempdir");
    let (base, upstream) = fake_model(5);
    let runner = runner_file(state.path(), &base, "");
    let out = state.path().join("run");
    let first = run_mini(state.path(), &runner, &out, &[]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(
        first.stdout.contains("12 trials written (5 errors)"),
        "{}",
        first.stdout
    );
    assert_eq!(upstream.load(Ordering::SeqCst), 12);

    // A plain resume keeps errors as finished: nothing runs.
    let again = run_mini(state.path(), &runner, &out, &[]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert!(
        again
            .stdout
            .contains("0 trials written (0 errors), 12 already present"),
        "{}",
        again.stdout
    );
    assert_eq!(upstream.load(Ordering::SeqCst), 12);

    // Another svc version made the directory: refused, naming the difference.
    let manifest_path = out.join("manifest.json");
    let original = std::fs::read_to_string(&manifest_path).expect("manifest");
    let version = env!("CARGO_PKG_VERSION");
    let older = original.replace(
        &format!("\"svc_version\": \"{version}\""),
        "\"svc_version\": \"0.0.1\"",
    );
    assert_ne!(older, original);
    std::fs::write(&manifest_path, older).expect("tamper");
    let refused = run_mini(state.path(), &runner, &out, &[]);
    assert_eq!(refused.code, 2, "{}", refused.stdout);
    assert!(
        refused
            .stderr
            .contains(&format!("svc version: 0.0.1 -> {version}"))
            && refused.stderr.contains("--force"),
        "{}",
        refused.stderr
    );
    // Found by probing: a damaged or deleted manifest skipped the check above, so another
    // runner's records joined the file. Now refused, naming the manifest; nothing is called.
    for damage in [Some("garbage"), None] {
        match damage {
            Some(text) => std::fs::write(&manifest_path, text).expect("damage"),
            None => std::fs::remove_file(&manifest_path).expect("remove"),
        }
        let refused = run_mini(state.path(), &runner, &out, &[]);
        assert_eq!(refused.code, 2, "{}", refused.stdout);
        assert!(
            refused.stderr.contains("holds trial records but")
                && refused.stderr.contains("manifest.json")
                && refused.stderr.contains("--force"),
            "{}",
            refused.stderr
        );
        assert_eq!(
            std::fs::read_to_string(&manifest_path).ok().as_deref(),
            damage,
            "the damaged manifest is left as it was"
        );
    }
    std::fs::write(&manifest_path, &original).expect("restore");

    // Other settings (the runner file changed): refused, then --force resumes and says so.
    let changed = runner_file(state.path(), &base, "description = \"edited\"\n");
    let refused = run_mini(state.path(), &changed, &out, &[]);
    assert_eq!(refused.code, 2, "{}", refused.stdout);
    assert!(
        refused.stderr.contains("runner file sha256:"),
        "{}",
        refused.stderr
    );
    let forced = run_mini(state.path(), &changed, &out, &["--force"]);
    assert_eq!(forced.code, 0, "{}", forced.stderr);
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).expect("manifest"))
            .expect("json");
    assert!(
        manifest["forced_over"][0]
            .as_str()
            .is_some_and(|s| s.starts_with("runner file sha256:")),
        "{manifest}"
    );
    assert_eq!(
        upstream.load(Ordering::SeqCst),
        12,
        "refusals and a full resume call nothing"
    );

    // --retry-errors re-runs exactly the 5 errors and replaces their records.
    let retried = run_mini(state.path(), &changed, &out, &["--retry-errors"]);
    assert_eq!(retried.code, 0, "{}", retried.stderr);
    assert!(
        retried
            .stdout
            .contains("5 trials written (0 errors), 7 already present"),
        "{}",
        retried.stdout
    );
    assert!(
        retried
            .stdout
            .contains("retried:  5 error records replaced"),
        "{}",
        retried.stdout
    );
    assert_eq!(upstream.load(Ordering::SeqCst), 17);
    let records = records(&out);
    assert_eq!(records.len(), 12, "one record per trial");
    assert!(records.iter().all(|r| r.outcome == Outcome::Success));
    let calls = std::fs::read_to_string(out.join("requests.jsonl")).expect("calls");
    assert_eq!(calls.lines().count(), 12, "one call line per trial");
}

/// Drops what legitimately differs between two runs of the same trials: wall-clock latency,
/// the input file list, and the Holm-adjusted p-values, which depend on every test of the
/// report, the latency tests included.
fn scrub(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|key, _| !key.contains("latency") && key != "files" && key != "p_holm");
            map.values_mut().for_each(scrub);
        }
        Value::Array(items) => {
            items.retain(|item| {
                !item
                    .get("metric")
                    .and_then(Value::as_str)
                    .is_some_and(|m| m.contains("latency"))
            });
            items.iter_mut().for_each(scrub);
        }
        _ => {}
    }
}

fn record_set(dirs: &[PathBuf]) -> BTreeMap<String, Value> {
    let mut set = BTreeMap::new();
    for dir in dirs {
        for mut record in records(dir)
            .into_iter()
            .map(|r| serde_json::to_value(r).expect("json"))
        {
            record["latency_ms"] = Value::from(0.0);
            let key = format!(
                "{}|{}|{}",
                record["task_id"], record["condition"], record["replicate"]
            );
            assert!(
                set.insert(key, record).is_none(),
                "a trial is in one shard only"
            );
        }
    }
    set
}

fn report_summary(state: &Path, inputs: &[&Path], out: &Path) -> Value {
    let result = run(svc(state)
        .arg("report")
        .args(inputs)
        .arg("--out")
        .arg(out)
        .args(["--resamples", "200"]));
    assert_eq!(result.code, 0, "{}", result.stderr);
    let mut summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).expect("summary"))
            .expect("json");
    scrub(&mut summary);
    summary
}

#[test]
fn shard_processes_merged_by_report_equal_one_unsharded_run() {
    let state = tempfile::tempdir().expect("tempdir");
    let workload = [
        "run",
        "--workload",
        "qa-builtin",
        "--conditions",
        "raw,svc",
        "--budget",
        "256",
    ];
    let whole = state.path().join("whole");
    let result = run(svc(state.path()).args(workload).arg("--out").arg(&whole));
    assert_eq!(result.code, 0, "{}", result.stderr);

    // Three processes as a Kubernetes Indexed Job starts them.
    let shards = state.path().join("shards");
    let mut dirs = Vec::new();
    for index in 0..3 {
        let dir = shards.join(format!("shard-{index}"));
        let result = run(svc(state.path())
            .args(workload)
            .args(["--shard", "auto/3", "--out"])
            .arg(&dir)
            .env("JOB_COMPLETION_INDEX", index.to_string()));
        assert_eq!(result.code, 0, "{}", result.stderr);
        let manifest: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.join("manifest.json")).expect("manifest"),
        )
        .expect("json");
        assert_eq!(manifest["shard"], format!("{}/3", index + 1));
        dirs.push(dir);
    }
    let unsharded = record_set(std::slice::from_ref(&whole));
    assert!(unsharded.len() > 20, "{}", unsharded.len());
    assert_eq!(record_set(&dirs), unsharded);

    let reference = report_summary(state.path(), &[&whole], &state.path().join("report-whole"));
    let merged = report_summary(
        state.path(),
        &[&shards],
        &state.path().join("report-shards"),
    );
    assert_eq!(merged, reference);

    // The same shards as Parquet, one file per shard, merged by `svc report`.
    let parquet = state.path().join("parquet");
    for (index, dir) in dirs.iter().enumerate() {
        let file = parquet.join(format!("shard-{index}.parquet"));
        let exported = run(svc(state.path())
            .args(["records", "export", "--parquet"])
            .arg(&file)
            .arg(dir));
        assert_eq!(exported.code, 0, "{}", exported.stderr);
    }
    let from_parquet = report_summary(
        state.path(),
        &[&parquet],
        &state.path().join("report-parquet"),
    );
    assert_eq!(from_parquet, reference);
    // Found by probing: `svc records validate` read the Parquet it exports as JSON Lines and
    // refused every "line" of it.
    let file = parquet.join("shard-0.parquet");
    let validated = run(svc(state.path()).args(["records", "validate"]).arg(&file));
    assert_eq!(
        validated.code, 0,
        "{}{}",
        validated.stdout, validated.stderr
    );
    assert!(
        validated.stdout.contains(" valid, 0 invalid") && !validated.stdout.contains("PAR1"),
        "{}",
        validated.stdout
    );

    // Without a job engine, auto/N says what to do.
    let unset = run(svc(state.path())
        .args(workload)
        .args(["--shard", "auto/3", "--out"])
        .arg(state.path().join("nowhere"))
        .env_remove("JOB_COMPLETION_INDEX")
        .env_remove("SLURM_ARRAY_TASK_ID"));
    assert_eq!(unset.code, 2);
    assert!(
        unset.stderr.contains("JOB_COMPLETION_INDEX"),
        "{}",
        unset.stderr
    );
}
