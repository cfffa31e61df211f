use super::resume::record_key;
use super::*;
use std::fs;

#[test]
fn shards_and_task_ids() {
    assert_eq!("2/4".parse::<Shard>(), Ok(Shard { index: 2, count: 4 }));
    assert!("0/4".parse::<Shard>().is_err());
    assert!("5/4".parse::<Shard>().is_err());
    assert!("x".parse::<Shard>().is_err());
    let shard = Shard { index: 2, count: 3 };
    let mine: Vec<usize> = (0..7).filter(|&i| shard.contains(i)).collect();
    assert_eq!(mine, [1, 4]);
    assert_eq!(
        split_task_id(&budget_task_id("halueval-0001", 512)),
        ("halueval-0001", Some(512))
    );
    assert_eq!(split_task_id("plain"), ("plain", None));
}

use crate::harness::condition::tests::OverlapSelector;
use crate::harness::scorer::default_claim_checker;
use crate::harness::workload::{AnswerKind, Document, TaskContext, WorkloadKind, WorkloadSpec};
use crate::trial::read::RecordReader;

fn workload() -> Workload {
    let filler: Vec<Document> = (0..12)
        .map(|i| Document {
            name: format!("doc-{i:02}"),
            text: format!("Paragraph {i} is about the weather in the valley, the rivers and the old mill road."),
        })
        .collect();
    let tasks = (0..6)
        .map(|k| {
            let fact = format!("The keeper of lighthouse number {k} is called Keeper{k}.");
            let mut docs = filler.clone();
            docs.insert(
                k * 2,
                Document {
                    name: format!("fact-{k}"),
                    text: fact.clone(),
                },
            );
            Task {
                id: format!("t{k}"),
                question: format!("Who is the keeper of lighthouse number {k}?"),
                context: TaskContext::Documents(docs),
                answer_kind: AnswerKind::Span,
                answers: vec![format!("Keeper{k}")],
                evidence: vec![fact],
                gold_files: Vec::new(),
            }
        })
        .collect();
    let spec_text = "name = \"lighthouses\"\nversion = \"3\"\nkind = \"qa\"\nscorer = \"qa-exact-v1\"\n[qa]\nformat = \"builtin\"\ntasks = \"t\"\ndocuments = \"d\"\n";
    let spec: WorkloadSpec =
        crate::harness::workload::spec::parse(spec_text, Path::new("w.toml")).expect("spec");
    assert_eq!(spec.kind, WorkloadKind::Qa);
    Workload {
        spec,
        dir: PathBuf::from("."),
        tasks,
    }
}

fn settings(dir: &Path, shard: Shard) -> RunSettings {
    RunSettings {
        workload: Arc::new(workload()),
        runner: Arc::new(Runner::fixture()),
        conditions: Condition::ALL.to_vec(),
        native_compaction: CompactionMode::Deterministic,
        budgets: vec![60, 120],
        replicates: 2,
        shard,
        out_dir: dir.join("run"),
        max_error_rate: None,
        seed: 1,
        scorer: ScorerName::QaExactV1,
        selector: Arc::new(OverlapSelector),
        claim_checker: default_claim_checker(),
        state_home: dir.join("state"),
        threads: Some(2),
        progress: None,
        audit: Default::default(),
        cache_neutral: false,
        judge: None,
        fixed_point: None,
        via_proxy: false,
    }
}

fn records(dir: &Path) -> Vec<TrialRecord> {
    let text = fs::read_to_string(dir.join("run/trials.jsonl")).expect("trials");
    let validator = crate::trial::RecordValidator::new().expect("validator");
    let reader = RecordReader::new(
        Box::new(std::io::Cursor::new(text.clone().into_bytes())),
        Some("t.jsonl"),
    )
    .expect("reader");
    for item in reader {
        let item = item.expect("io");
        assert!(validator.check_str(&item.text.expect("utf8")).is_empty());
    }
    text.lines()
        .map(|l| serde_json::from_str(l).expect("record"))
        .collect()
}

#[test]
fn full_matrix_with_a_selector_double_pairs_and_resumes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let settings = settings(dir.path(), Shard::default());
    let summary = execute(&settings).expect("run");
    // raw runs once per task (its context ignores the budget); the others at both budgets.
    assert_eq!(summary.planned, 6 * (3 * 2 + 1) * 2);
    assert_eq!((summary.written, summary.errors), (84, 0));
    let records = records(dir.path());
    assert_eq!(records.len(), 84);
    let mut score = std::collections::HashMap::<(Condition, usize), (f64, f64, usize)>::new();
    for record in &records {
        let (task, budget) = split_task_id(&record.task_id);
        assert!(task.starts_with('t'));
        assert_eq!(
            budget.is_none(),
            record.condition == Condition::Raw,
            "raw records carry no budget, the others do"
        );
        let entry = score
            .entry((record.condition, budget.unwrap_or(0)))
            .or_default();
        entry.0 += record.task_score;
        entry.1 += record.evidence_recall;
        entry.2 += 1;
        if matches!(record.condition, Condition::Svc | Condition::Combined) {
            let id = record.context_commit_id.as_deref().expect("ctx");
            let receipt = CommitStore::new(&dir.path().join("state"))
                .receipt(id)
                .expect("receipt");
            assert_eq!(receipt.context_sha256, record.context_sha256);
        }
        if record.condition != Condition::Raw {
            assert!(record.context_tokens as usize <= budget.expect("budget"));
        }
    }
    let mean = |c, b| {
        let (s, r, n) = score[&(c, b)];
        (s / n as f64, r / n as f64)
    };
    assert_eq!(mean(Condition::Raw, 0), (1.0, 1.0));
    assert_eq!(
        mean(Condition::Svc, 60),
        (1.0, 1.0),
        "the selector keeps the fact"
    );
    assert!(
        mean(Condition::NativeCompaction, 60).1 < 1.0,
        "head and tail lose facts in the middle"
    );
    let manifest = read_manifest(&dir.path().join("run")).expect("manifest");
    assert_eq!(manifest.budgets, [60, 120]);
    assert_eq!(manifest.workload.version, "3");
    assert!(manifest.ended_at.is_some());
    assert!(manifest.raw_once_per_task);
    assert_eq!((manifest.written, manifest.planned), (84, 84));

    // Another budget into the same directory: the manifest lists both sessions' budgets.
    let mut wider = self::settings(dir.path(), Shard::default());
    wider.budgets = vec![200];
    wider.conditions = vec![Condition::Raw, Condition::Svc];
    wider.replicates = 1;
    let added = execute(&wider).expect("add a budget");
    assert_eq!(
        (added.skipped, added.written),
        (6, 6),
        "raw of every task is there already; svc runs at the new budget"
    );
    let manifest = read_manifest(&dir.path().join("run")).expect("manifest");
    assert_eq!(manifest.budgets, [60, 120, 200]);
    assert_eq!(manifest.conditions, Condition::ALL);
    assert_eq!(manifest.written, 90);
    let lines: Vec<String> = fs::read_to_string(dir.path().join("run/trials.jsonl"))
        .expect("read")
        .lines()
        .filter(|l| !l.contains("@b200"))
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(dir.path().join("run/trials.jsonl"), lines.concat()).expect("rewrite");

    // A different scorer is a different experiment: refused, nothing written.
    let mut other = self::settings(dir.path(), Shard::default());
    other.scorer = ScorerName::QaF1V1;
    let error = execute(&other).expect_err("different experiment");
    assert!(error.to_string().contains("pass another --out"), "{error}");

    // Resume: nothing left to do, nothing duplicated.
    let again = execute(&settings).expect("resume");
    assert_eq!((again.skipped, again.written), (84, 0));
    assert_eq!(self::records(dir.path()).len(), 84);
    assert_eq!(
        read_manifest(&dir.path().join("run"))
            .expect("manifest")
            .written,
        84
    );

    // An interrupted run: a torn last line and a missing tail are repaired and completed.
    let path = dir.path().join("run/trials.jsonl");
    let text = fs::read_to_string(&path).expect("read");
    let keep: Vec<&str> = text.lines().take(50).collect();
    fs::write(
        &path,
        format!("{}\n{{\"schema_version\":\"svc.con", keep.join("\n")),
    )
    .expect("tear");
    let resumed = execute(&settings).expect("resume torn");
    assert_eq!((resumed.skipped, resumed.written), (50, 34));
    let records = self::records(dir.path());
    let keys: HashSet<String> = records
        .iter()
        .map(|r| {
            record_key(
                &r.task_id,
                r.condition,
                r.replicate,
                &r.scorer,
                &r.provider,
                &r.model,
            )
        })
        .collect();
    assert_eq!((records.len(), keys.len()), (84, 84));
}

#[test]
fn shards_partition_the_matrix_and_keep_pairs_together() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut all = Vec::new();
    for index in 1..=3 {
        let shard_dir = dir.path().join(format!("s{index}"));
        let settings = settings(&shard_dir, Shard { index, count: 3 });
        execute(&settings).expect("shard");
        let records = records(&shard_dir);
        let tasks: HashSet<&str> = records
            .iter()
            .map(|r| split_task_id(&r.task_id).0)
            .collect();
        assert_eq!(tasks.len(), 2, "6 tasks over 3 shards");
        all.extend(
            records
                .into_iter()
                .map(|r| (r.task_id, r.condition, r.replicate)),
        );
    }
    let unique: HashSet<_> = all.iter().cloned().collect();
    assert_eq!((all.len(), unique.len()), (84, 84));
}

#[test]
fn unavailable_selector_gives_error_records_and_max_error_rate_aborts() {
    // The context engine is wired in now; a failing double stands for an engine error.
    let failing = || -> Arc<dyn ContextSelector> {
        Arc::new(crate::harness::condition::tests::UnavailableSelector {
            reason: "the context engine failed".into(),
        })
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let mut settings = settings(dir.path(), Shard::default());
    settings.selector = failing();
    let summary = execute(&settings).expect("run");
    assert_eq!((summary.written, summary.errors), (84, 48));
    for record in records(dir.path()) {
        if matches!(record.condition, Condition::Svc | Condition::Combined) {
            assert_eq!(record.outcome, Outcome::Error);
            assert_eq!(record.error_type.as_deref(), Some("selector_error"));
            assert!(
                record
                    .context_commit_id
                    .as_deref()
                    .is_some_and(|id| id.starts_with("ctx_"))
            );
        }
    }
    // Failing trials are fast now that commits do not wait on fsync, so a double that slows
    // down after ten groups (20 records) gives the writer time to see the error rate.
    struct FailingSlowly {
        calls: std::sync::atomic::AtomicUsize,
    }
    impl ContextSelector for FailingSlowly {
        fn select(
            &self,
            _: &[(String, String)],
            _: &str,
            _: usize,
        ) -> Result<crate::harness::condition::SelectedContext, String> {
            if self.calls.fetch_add(1, Ordering::SeqCst) >= 10 {
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            Err("the context engine failed".into())
        }
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let mut settings = self::settings(dir.path(), Shard::default());
    settings.selector = Arc::new(FailingSlowly {
        calls: Default::default(),
    });
    settings.conditions = vec![Condition::Svc];
    settings.max_error_rate = Some(0.1);
    settings.threads = Some(1);
    let summary = execute(&settings).expect("run");
    assert!(summary.aborted);
    assert!(summary.written < 24, "{}", summary.written);
}

/// Notes of a run directory as (kind, task_id, replicate, detail).
fn notes(dir: &Path) -> Vec<(String, String, u64, String)> {
    fs::read_to_string(dir.join("run/notes.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|line| {
            let note: serde_json::Value = serde_json::from_str(line).expect("note");
            (
                note["kind"].as_str().expect("kind").to_string(),
                note["task_id"].as_str().expect("task").to_string(),
                note["replicate"].as_u64().expect("replicate"),
                note["detail"].as_str().expect("detail").to_string(),
            )
        })
        .collect()
}

/// `name=value` from a note's detail.
fn field(detail: &str, name: &str) -> f64 {
    let start = detail.find(&format!("{name}=")).expect(name) + name.len() + 1;
    detail[start..]
        .split([' ', ',', ')', ';'])
        .next()
        .and_then(|v| v.trim_end_matches('.').parse().ok())
        .expect("number")
}

#[test]
fn model_summary_with_the_fixture_summarises_the_middle_and_accounts_for_the_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut settings = settings(dir.path(), Shard::default());
    settings.conditions = vec![Condition::NativeCompaction];
    settings.native_compaction = CompactionMode::ModelSummary;
    let mut same_but_deterministic = self::settings(dir.path(), Shard::default());
    same_but_deterministic.conditions = vec![Condition::NativeCompaction];
    assert_ne!(
        default_run_id(&settings),
        default_run_id(&same_but_deterministic),
        "another mode must not resume into the same directory"
    );
    let summary = execute(&settings).expect("run");
    assert_eq!((summary.written, summary.errors), (24, 0));
    let tokenizer = Tokenizer::default();
    let notes = notes(dir.path());
    for record in records(dir.path()) {
        assert_eq!(record.condition, Condition::NativeCompaction);
        let budget = split_task_id(&record.task_id).1.expect("budget");
        assert!(record.context_tokens as usize <= budget);
        let call = notes
            .iter()
            .find(|(kind, task, replicate, _)| {
                kind == "summary_call" && *task == record.task_id && *replicate == record.replicate
            })
            .expect("a summary_call note per trial");
        assert!(call.3.contains("counted by svc"), "{}", call.3);
        let summary_output = field(&call.3, "output_tokens") as u64;
        let answer = record.response_text.as_deref().expect("answer");
        assert_eq!(
            record.output_tokens,
            tokenizer.count(answer) as u64 + summary_output,
            "the summary's output tokens are the trial's"
        );
        assert_eq!(record.billed_cost_usd, 0.0);
    }
    let manifest = read_manifest(&dir.path().join("run")).expect("manifest");
    assert_eq!(manifest.native_compaction, CompactionMode::ModelSummary);
    let json = fs::read_to_string(dir.path().join("run/manifest.json")).expect("manifest");
    assert!(
        json.contains("\"native_compaction\": \"model-summary\""),
        "{json}"
    );

    // The same directory with the other mode is another experiment.
    let error = execute(&same_but_deterministic).expect_err("another mode");
    assert!(error.to_string().contains("native compaction"), "{error}");
}

/// An OpenAI-compatible endpoint on 127.0.0.1:0 that reports usage: summary requests (told
/// apart by the summarisation system prompt) use 200 input and 10 output tokens, or fail
/// with HTTP 400 when `fail_summaries`; answers use 100 and 5.
fn priced_endpoint(fail_summaries: bool) -> String {
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let handler = move |body: String| async move {
                let request: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
                let is_summary =
                    request["messages"][0]["content"].as_str() == Some(summary::SUMMARY_SYSTEM);
                let (text, input, output) = match (is_summary, fail_summaries) {
                    (true, true) => {
                        return (StatusCode::BAD_REQUEST, "{\"error\":\"no\"}").into_response();
                    }
                    (true, false) => ("The keepers of the lighthouses are listed.", 200, 10),
                    (false, _) => ("Keeper0", 100, 5),
                };
                let reply = serde_json::json!({
                    "id": if is_summary { "summary-1" } else { "answer-1" },
                    "choices": [{"message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": input, "completion_tokens": output}
                });
                (StatusCode::OK, reply.to_string()).into_response()
            };
            let app =
                axum::Router::new().route("/v1/chat/completions", axum::routing::post(handler));
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            sender
                .send(listener.local_addr().expect("address"))
                .expect("send");
            let _ = axum::serve(listener, app).await;
        });
    });
    format!("http://{}/v1", receiver.recv().expect("address"))
}

fn priced_runner(dir: &Path, base_url: &str) -> Runner {
    fs::write(
        dir.join("prices.toml"),
        "source = \"test\"\n[models.\"m\"]\ninput_usd_per_mtok = 1.0\noutput_usd_per_mtok = 2.0\n",
    )
    .expect("prices");
    let path = dir.join("priced.toml");
    fs::write(
        &path,
        format!(
            "name = \"priced\"\nkind = \"openai_compatible\"\nprovider = \"fake\"\nmodel = \"m\"\ncontext_window = 8192\nbase_url = \"{base_url}\"\ntimeout_ms = 5000\nretries = 0\nconcurrency = 2\n[cost]\nsource = \"pricing_snapshot\"\npricing = \"prices.toml\"\n"
        ),
    )
    .expect("runner");
    Runner::load(dir, &path.to_string_lossy()).expect("runner")
}

#[test]
fn model_summary_adds_the_summary_calls_tokens_cost_and_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut settings = settings(dir.path(), Shard::default());
    settings.runner = Arc::new(priced_runner(dir.path(), &priced_endpoint(false)));
    settings.conditions = vec![Condition::NativeCompaction];
    settings.native_compaction = CompactionMode::ModelSummary;
    settings.budgets = vec![60];
    settings.replicates = 1;
    let summary = execute(&settings).expect("run");
    assert_eq!((summary.written, summary.errors), (6, 0));
    let notes = notes(dir.path());
    for record in records(dir.path()) {
        assert_eq!(record.outcome, Outcome::Success);
        assert_eq!(record.provider_request_id, "answer-1");
        assert_eq!(record.output_tokens, 5 + 10);
        let expected = (100.0 + 2.0 * 5.0 + 200.0 + 2.0 * 10.0) / 1e6;
        assert!(
            (record.billed_cost_usd - expected).abs() < 1e-12,
            "{}",
            record.billed_cost_usd
        );
        assert!(record.context_tokens <= 60);
        let call = notes
            .iter()
            .find(|n| n.0 == "summary_call" && n.1 == record.task_id)
            .expect("note");
        assert_eq!(field(&call.3, "input_tokens"), 200.0);
        assert!(call.3.contains("reported by the provider") && call.3.contains("summary-1"));
        assert!(record.latency_ms >= field(&call.3, "latency_ms"));
    }
}

#[test]
fn a_failing_summary_call_is_a_summary_failed_error_record() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut settings = settings(dir.path(), Shard::default());
    settings.runner = Arc::new(priced_runner(dir.path(), &priced_endpoint(true)));
    settings.conditions = vec![Condition::Raw, Condition::NativeCompaction];
    settings.native_compaction = CompactionMode::ModelSummary;
    settings.budgets = vec![60];
    settings.replicates = 1;
    let summary = execute(&settings).expect("run");
    assert_eq!((summary.written, summary.errors), (12, 6));
    for record in records(dir.path()) {
        if record.condition == Condition::Raw {
            assert_eq!(record.outcome, Outcome::Success, "raw has no summary call");
            continue;
        }
        assert_eq!(record.outcome, Outcome::Error);
        assert_eq!(record.error_type.as_deref(), Some("summary_failed"));
        assert_eq!(record.usage_source, UsageSource::ProviderError);
        assert_eq!((record.output_tokens, record.billed_cost_usd), (0, 0.0));
        assert!(record.response_text.is_none());
    }
    let failed: Vec<_> = notes(dir.path())
        .into_iter()
        .filter(|n| n.0 == "summary_failed")
        .collect();
    assert_eq!(failed.len(), 6);
    assert!(failed[0].3.contains("HTTP 400"), "{}", failed[0].3);
}

/// Found by probing: a `trials.jsonl` replaced by a symbolic link sent a resumed run's records
/// into the file the link named, outside the run directory.
#[test]
fn a_linked_record_file_is_refused_not_written_through() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run_dir = dir.path().join("run");
    fs::create_dir_all(&run_dir).expect("mkdir");
    let outside = dir.path().join("outside.txt");
    fs::write(&outside, "").expect("write");
    std::os::unix::fs::symlink(&outside, run_dir.join("trials.jsonl")).expect("link");
    let error = execute(&settings(dir.path(), Shard::default())).expect_err("refused");
    assert!(matches!(error, RunError::Linked { .. }), "{error}");
    assert_eq!(fs::read_to_string(&outside).expect("read"), "");
}
