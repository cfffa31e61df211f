//! `svc proof`: the whole loop with a scripted model command, the durable protocol across a
//! killed process, idempotency through the CLI, and every bad input as a clear error.

use std::process::Stdio;
use std::time::Duration;

use svc::proof::FixedPointResult;
use svc::proof::FixedPointStatus;

use crate::harness::{run, svc};

const DOCS: &str = "fixtures/proof/docs";
const QUERY: &str = "When did the bridge open to traffic?";
const READER: &str = "fixtures/proof/reader.sh";

fn run_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["proof", "run", DOCS, "--query", QUERY, "--budget", "30"];
    args.extend_from_slice(extra);
    args
}

#[test]
fn proof_run_recovers_the_omitted_chunk_and_ends_supported() {
    let state = tempfile::tempdir().expect("state");
    let out =
        run(svc(state.path()).args(run_args(&["--format", "json", "--model-command", READER])));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let result: FixedPointResult = serde_json::from_str(&out.stdout).expect("result JSON");
    assert_eq!(result.status, FixedPointStatus::Supported);
    assert_eq!(result.rounds.len(), 2, "one draft, one revision");
    let first = &result.rounds[0];
    assert_eq!((first.supported_claims, first.verifiable_claims), (1, 2));
    assert!(first.output.contains("1900"), "the first draft guessed");
    let plan = first.plan.as_ref().expect("the first round planned");
    assert_eq!(plan.selected, vec!["city.md#L5-7".to_string()]);
    assert!(!first.obligations.is_empty() && !plan.candidates.is_empty());
    assert_eq!(result.recovered_chunk_ids(), vec!["city.md#L5-7"]);
    assert_eq!(result.recovery_tokens_used, 17);
    assert_eq!(
        result.final_output.output.trim(),
        "The bridge opened to traffic in 1932. The botanic garden was founded in 1816 beside the harbour."
    );

    // The human summary, and a bound that stops the loop: exit 1.
    let out =
        run(svc(state.path()).args(run_args(&["--max-rounds", "1", "--model-command", READER])));
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stdout
            .starts_with("status: max_rounds_reached after 1 model call(s)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("[contradicted") || out.stdout.contains("[unverified"),
        "{}",
        out.stdout
    );
}

#[test]
fn proof_run_model_command_failures_are_typed_errors_with_signed_artifacts() {
    let state = tempfile::tempdir().expect("state");
    let out = run(svc(state.path()).args(run_args(&["--model-command", "fixtures/proof/fail.sh"])));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("exited with exit status: 7"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("upstream refused the request"),
        "{}",
        out.stderr
    );
    let failures = state.path().join("proof/failures");
    let artifact = std::fs::read_dir(&failures)
        .expect("failures dir")
        .flatten()
        .next()
        .expect("an artifact")
        .path();
    let ok = run(svc(state.path()).args([
        "proof",
        "verify-artifact",
        artifact.to_str().expect("utf-8"),
    ]));
    assert_eq!(ok.code, 0, "{}{}", ok.stdout, ok.stderr);
    assert!(ok.stdout.starts_with("valid: pgf_"), "{}", ok.stdout);
    let text = std::fs::read_to_string(&artifact).expect("read");
    std::fs::write(&artifact, text.replace("\"round\": 0", "\"round\": 1")).expect("edit");
    let bad = run(svc(state.path()).args([
        "proof",
        "verify-artifact",
        artifact.to_str().expect("utf-8"),
    ]));
    assert_eq!(bad.code, 1, "{}", bad.stdout);
    assert!(
        bad.stdout.contains("changed after it was signed"),
        "{}",
        bad.stdout
    );

    // Found by probing: a timeout past what the clock holds panicked (exit 101), and 1e19
    // panicked after the model answered, losing the draft.
    for huge in ["1e30", "1e19"] {
        let out = run(svc(state.path()).args(run_args(&[
            "--timeout-seconds",
            huge,
            "--model-command",
            "/bin/true",
        ])));
        assert_eq!(out.code, 2, "{}", out.stderr);
        assert!(
            out.stderr
                .contains("--timeout-seconds must be a number of seconds from just above 0 to"),
            "{}",
            out.stderr
        );
    }

    let out = run(svc(state.path()).args(run_args(&[
        "--timeout-seconds",
        "0.3",
        "--model-command",
        "/bin/sh",
        "-c",
        "sleep 5",
    ])));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("did not finish within 0.3 s"),
        "{}",
        out.stderr
    );

    let out = run(svc(state.path()).args(run_args(&[
        "--model-command",
        "/bin/sh",
        "-c",
        "cat >/dev/null; printf 'ok\\377'",
    ])));
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("not UTF-8"), "{}", out.stderr);

    let out = run(svc(state.path()).args([
        "proof",
        "run",
        DOCS,
        "--query",
        QUERY,
        "--budget",
        "0",
        "--model-command",
        READER,
    ]));
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("token budget is 0"), "{}", out.stderr);
}

fn prepare(state: &std::path::Path, key: Option<&str>) -> (String, String) {
    let mut args = vec!["proof", "prepare", DOCS, "--query", QUERY, "--budget", "30"];
    if let Some(key) = key {
        args.extend(["--idempotency-key", key]);
    }
    let out = run(svc(state).args(args));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let value: serde_json::Value = serde_json::from_str(&out.stdout).expect("prepare JSON");
    let id = value["session_id"]
        .as_str()
        .expect("session id")
        .to_string();
    assert!(id.starts_with("pgs_"));
    (id, out.stdout)
}

fn inspect(state: &std::path::Path, id: &str) -> serde_json::Value {
    let out = run(svc(state).args(["proof", "inspect", id]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).expect("inspect JSON")
}

#[test]
fn a_killed_advance_leaves_the_session_resumable() {
    let state = tempfile::tempdir().expect("state");
    let (id, _) = prepare(state.path(), None);
    let work = tempfile::tempdir().expect("work");
    // An advance blocked reading its draft from a FIFO is killed outright.
    let fifo = work.path().join("draft.fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(made.success());
    let mut child = svc(state.path())
        .args([
            "proof",
            "advance",
            &id,
            "--output-file",
            fifo.to_str().expect("utf-8"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn advance");
    std::thread::sleep(Duration::from_millis(300));
    child.kill().expect("kill");
    child.wait().expect("reap");
    let view = inspect(state.path(), &id);
    assert_eq!(view["state"], "awaiting_draft");
    assert_eq!(view["revision"], 0);

    // A fresh process resumes: the scripted reader answers each pending request.
    let draft = work.path().join("draft.txt");
    let mut revision = 0;
    loop {
        let request = inspect(state.path(), &id)["pending_request"].to_string();
        let mut reader = std::process::Command::new(READER)
            .current_dir(crate::harness::root())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("reader");
        use std::io::Write;
        reader
            .stdin
            .take()
            .expect("stdin")
            .write_all(request.as_bytes())
            .expect("write request");
        let answer = reader.wait_with_output().expect("reader output");
        std::fs::write(&draft, &answer.stdout).expect("draft");
        let out = run(svc(state.path()).args([
            "proof",
            "advance",
            &id,
            "--output-file",
            draft.to_str().expect("utf-8"),
            "--idempotency-key",
            &format!("round-{revision}"),
        ]));
        assert_eq!(out.code, 0, "{}", out.stderr);
        revision += 1;
        let response: serde_json::Value = serde_json::from_str(&out.stdout).expect("advance JSON");
        if response["state"] == "finished" {
            assert_eq!(response["status"], "supported");
            break;
        }
        assert!(revision < 3, "the loop ends within its bound");
    }
    assert_eq!(revision, 2);
    // The first key replays its original response byte for byte at the later revision...
    let first_draft = work.path().join("first.txt");
    std::fs::write(
        &first_draft,
        "The bridge opened to traffic in 1932. The botanic garden was founded in 1900.\n",
    )
    .expect("write");
    let replay = run(svc(state.path()).args([
        "proof",
        "advance",
        &id,
        "--output-file",
        first_draft.to_str().expect("utf-8"),
        "--idempotency-key",
        "round-0",
    ]));
    assert_eq!(replay.code, 0, "{}", replay.stderr);
    let response: serde_json::Value = serde_json::from_str(&replay.stdout).expect("replay JSON");
    assert_eq!(response["revision"], 1);
    // ...and refuses other model text.
    let conflict = run(svc(state.path()).args([
        "proof",
        "advance",
        &id,
        "--output-file",
        draft.to_str().expect("utf-8"),
        "--idempotency-key",
        "round-0",
    ]));
    assert_eq!(conflict.code, 2);
    assert!(
        conflict.stderr.contains("already used"),
        "{}",
        conflict.stderr
    );
}

/// Regression (found by probing): an empty draft finished the session as
/// `no_verifiable_claims` for good, and an empty model output ended `proof run` the same way;
/// the docs promise `FixedPointModelError` for a model that gives no text.
#[test]
fn an_empty_draft_is_refused_and_the_session_is_unchanged() {
    let state = tempfile::tempdir().expect("state");
    let (id, _) = prepare(state.path(), None);
    let work = tempfile::tempdir().expect("work");
    let empty = work.path().join("empty.txt");
    // Found by probing: a zero-width space alone (which `trim` keeps) finished the session.
    for blank in [" \n", "\u{200b}\n"] {
        std::fs::write(&empty, blank).expect("write");
        let out = run(svc(state.path()).args([
            "proof",
            "advance",
            &id,
            "--output-file",
            empty.to_str().expect("utf-8"),
        ]));
        assert_eq!(out.code, 2, "{blank:?}: {}", out.stdout);
        assert!(
            out.stderr.contains("is empty: there is nothing to verify"),
            "{}",
            out.stderr
        );
    }
    let view = inspect(state.path(), &id);
    assert_eq!(view["state"], "awaiting_draft");
    assert_eq!(view["revision"], 0);

    let out = run(svc(state.path()).args(run_args(&[
        "--model-command",
        "/bin/sh",
        "-c",
        "cat >/dev/null",
    ])));
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(
        out.stderr
            .contains("model call failed in round 0: the model gave no text"),
        "{}",
        out.stderr
    );
}

/// Regression (found by probing): eight parallel prepares with one idempotency key made eight
/// sessions, and later replays named only one of them.
#[test]
fn parallel_prepares_with_one_key_make_one_session() {
    let state = tempfile::tempdir().expect("state");
    let children: Vec<_> = (0..6)
        .map(|_| {
            svc(state.path())
                .args(["proof", "prepare", DOCS, "--query", QUERY, "--budget", "30"])
                .args(["--idempotency-key", "same"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn")
        })
        .collect();
    let outputs: Vec<String> = children
        .into_iter()
        .map(|child| {
            let out = child.wait_with_output().expect("wait");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).expect("utf-8")
        })
        .collect();
    assert!(
        outputs.iter().all(|o| *o == outputs[0]),
        "every caller gets the one session"
    );
    let sessions = std::fs::read_dir(state.path().join("proof/sessions"))
        .expect("sessions")
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .count();
    assert_eq!(sessions, 1);
}

#[test]
fn prepare_keys_replay_and_bad_sessions_are_refused() {
    let state = tempfile::tempdir().expect("state");
    let (id, first) = prepare(state.path(), Some("k"));
    let (again_id, again) = prepare(state.path(), Some("k"));
    assert_eq!(
        (id.as_str(), first.as_str()),
        (again_id.as_str(), again.as_str())
    );

    let path = state
        .path()
        .join("proof/sessions")
        .join(format!("{id}.json"));
    let text = std::fs::read_to_string(&path).expect("session");
    std::fs::write(&path, text.replace("awaiting_draft", "finished")).expect("edit");
    let out = run(svc(state.path()).args(["proof", "inspect", &id]));
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("corrupted"), "{}", out.stderr);

    let out = run(svc(state.path()).args(["proof", "inspect", "pgs_00aa"]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("unknown session pgs_00aa"),
        "{}",
        out.stderr
    );
}

#[test]
fn svc_run_with_fixed_point_records_the_setting_rounds_and_commits() {
    let state = tempfile::tempdir().expect("state");
    let out = tempfile::tempdir().expect("out");
    let dir = out.path().join("loop");
    let result = run(svc(state.path()).args([
        "run",
        "--workload",
        "needle-builtin",
        "--conditions",
        "svc,combined",
        "--budget",
        "256",
        "--fixed-point",
        "2,512",
        "--out",
        dir.to_str().expect("utf-8"),
    ]));
    assert_eq!(result.code, 0, "{}", result.stderr);
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("manifest.json")).expect("manifest"),
    )
    .expect("manifest JSON");
    assert_eq!(
        manifest["fixed_point"],
        serde_json::json!({"max_rounds": 2, "recovery_token_budget": 512, "max_chunks_per_round": 4})
    );
    let records: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("trials.jsonl"))
        .expect("trials")
        .lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect();
    let notes: Vec<serde_json::Value> = std::fs::read_to_string(dir.join("notes.jsonl"))
        .expect("notes")
        .lines()
        .map(|l| serde_json::from_str(l).expect("note"))
        .collect();
    let loops: Vec<serde_json::Value> = notes
        .iter()
        .filter(|n| n["kind"] == "fixed_point")
        .map(|n| serde_json::from_str(n["detail"].as_str().expect("detail")).expect("detail JSON"))
        .collect();
    assert_eq!(
        loops.len(),
        records.len(),
        "one loop note per svc/combined trial"
    );
    for detail in &loops {
        let calls = detail["model_calls"].as_u64().expect("calls");
        assert!((1..=2).contains(&calls), "{detail}");
        assert_eq!(detail["rounds"].as_u64(), Some(calls), "one round per call");
        assert!(detail["status"].is_string() && detail["recovered_chunk_ids"].is_array());
    }
    let store = svc::context::CommitStore::new(state.path());
    for record in &records {
        let ctx = record["context_commit_id"].as_str().expect("commit id");
        assert!(
            store.receipt(ctx).is_ok(),
            "the loop's commit {ctx} is durable"
        );
    }

    let out = run(svc(state.path()).args([
        "run",
        "--workload",
        "needle-builtin",
        "--fixed-point",
        "0",
        "--out",
        "unused",
    ]));
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("ROUNDS[,BUDGET]"), "{}", out.stderr);
}

/// Two processes advance one session at once: they take turns under the session's lock, so
/// both revisions are kept (none lost, no fork). A lock held past the wait is a clear error
/// naming its holder; a holder line left by a process that died blocks nobody.
#[test]
fn concurrent_advances_of_one_session_take_turns_under_its_lock() {
    use std::io::Write;
    let state = tempfile::tempdir().expect("state");
    let (id, _) = prepare(state.path(), None);
    let work = tempfile::tempdir().expect("work");
    let draft = |name: &str, text: &str| {
        let path = work.path().join(name);
        std::fs::write(&path, text).expect("draft");
        path
    };
    let guess = draft(
        "guess.txt",
        "The bridge opened to traffic in 1932. The botanic garden was founded in 1900.\n",
    );
    let full = draft(
        "full.txt",
        "The bridge opened to traffic in 1932. The botanic garden was founded in 1816 beside the harbour.\n",
    );
    let lock_path = state
        .path()
        .join("proof/sessions")
        .join(format!("{id}.lock"));
    // This test holds the lock, as an advance in progress would, while two processes start.
    let mut holder = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .expect("lock file");
    holder.lock().expect("lock");
    writeln!(
        holder,
        "{{\"pid\":{},\"since\":\"2026-11-23T00:00:00Z\"}}",
        std::process::id()
    )
    .expect("holder line");
    let advance = |file: &std::path::Path, key: &str| {
        svc(state.path())
            .args(["proof", "advance", &id, "--idempotency-key", key])
            .arg("--output-file")
            .arg(file)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn advance")
    };
    let first = advance(&guess, "a");
    let second = advance(&full, "b");
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(
        inspect(state.path(), &id)["revision"],
        0,
        "both advances wait for the lock"
    );
    let impatient = run(svc(state.path())
        .args(["proof", "advance", &id, "--lock-wait-seconds", "0.2"])
        .arg("--output-file")
        .arg(&guess));
    assert_eq!(impatient.code, 2, "{}", impatient.stderr);
    assert!(
        impatient.stderr.contains(&format!(
            "being advanced by another process (pid {} since",
            std::process::id()
        )) && impatient.stderr.contains(&format!("{id}.lock")),
        "{}",
        impatient.stderr
    );
    holder.unlock().expect("unlock");
    drop(holder);

    let mut revisions = Vec::new();
    for child in [first, second] {
        let out = child.wait_with_output().expect("advance finishes");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let response: serde_json::Value =
            serde_json::from_slice(&out.stdout).expect("advance JSON");
        revisions.push(response["revision"].as_u64().expect("revision"));
    }
    revisions.sort();
    assert_eq!(revisions, vec![1, 2], "one revision each, in turn");
    let view = inspect(state.path(), &id);
    assert_eq!(view["revision"], 2);
    assert_eq!(
        view["rounds"], 2,
        "both drafts are rounds of the one session"
    );
    assert_eq!(view["idempotency_keys"], serde_json::json!(["a", "b"]));
    let released = std::fs::read_to_string(&lock_path).expect("lock file");
    assert!(
        released.is_empty(),
        "a clean release empties the holder line"
    );

    // A holder line without a lock (its process died mid-advance) is not a lock.
    let (other, _) = prepare(state.path(), None);
    std::fs::write(
        state
            .path()
            .join("proof/sessions")
            .join(format!("{other}.lock")),
        "{\"pid\":4194304,\"since\":\"2026-11-23T00:00:00Z\"}\n",
    )
    .expect("stale holder line");
    let out = run(svc(state.path())
        .args(["proof", "advance", &other, "--lock-wait-seconds", "1"])
        .arg("--output-file")
        .arg(&guess));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(inspect(state.path(), &other)["revision"], 1);
}

/// Regression (found by probing): the model command runs in a process group of its own, so a
/// SIGTERM (or a terminal's Ctrl-C) ended svc and left the command running. Now svc kills the
/// command's group, then ends as the signal would.
#[test]
fn an_interrupted_proof_run_ends_its_model_command() {
    use std::os::unix::process::ExitStatusExt;
    let state = tempfile::tempdir().expect("state");
    let pid_file = state.path().join("model.pid");
    let script = format!(
        "cat >/dev/null; echo $$ > '{}'; exec sleep 300",
        pid_file.display()
    );
    let mut child = svc(state.path())
        .args(run_args(&["--model-command", "/bin/sh", "-c", &script]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn svc");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let model = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
        {
            break pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the model never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let svc_pid = rustix::process::Pid::from_raw(child.id() as i32).expect("pid");
    rustix::process::kill_process(svc_pid, rustix::process::Signal::TERM).expect("signal");
    let status = child.wait().expect("wait");
    assert_eq!(status.signal(), Some(15), "{status:?}");
    // Gone, or a zombie no one has reaped yet (killed all the same).
    let alive = || {
        std::fs::read_to_string(format!("/proc/{model}/stat")).is_ok_and(|stat| {
            stat.rsplit(") ")
                .next()
                .is_some_and(|s| !s.starts_with('Z'))
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while alive() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(), "the model command {model} outlived svc");
}
