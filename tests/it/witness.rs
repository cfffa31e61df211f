//! `svc witness` end to end: the three modes on fixture files, structured output, short answers
//! with a question, the certificate on `--json`, show/list/feedback, and `eval`.

use std::fs;

use serde_json::Value;
use svc::witness::certificate::{Certificate, SCHEMA_JSON};

use crate::harness::{assert_text_eq, root, run, svc};

const CONTEXT: &str = "fixtures/witness/context.txt";
const ANSWER: &str = "fixtures/witness/answer.md";

fn check(state: &std::path::Path, output: &str, extra: &[&str]) -> crate::harness::Run {
    run(svc(state)
        .args([
            "witness",
            "--context-file",
            CONTEXT,
            "--output-file",
            output,
        ])
        .args(extra))
}

fn witness_id(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.strip_prefix("witness-id: "))
        .unwrap_or_else(|| panic!("no witness-id line in {stderr}"))
        .to_string()
}

/// Found by probing: `--no-store` printed a witness id that `svc witness show` then could not
/// find, without a word.
#[test]
fn no_store_says_its_id_was_not_stored() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = check(state.path(), ANSWER, &["--no-store"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let line = out
        .stderr
        .lines()
        .find(|l| l.starts_with("witness-id: "))
        .expect("an id line");
    assert!(line.ends_with(" (not stored: --no-store)"), "{line}");
    let id = line
        .trim_start_matches("witness-id: ")
        .split(' ')
        .next()
        .expect("id");
    let shown = run(svc(state.path()).args(["witness", "show", id]));
    assert_eq!(shown.code, 2, "{}", shown.stdout);
}

#[test]
fn three_modes_on_the_readme_example() {
    let state = tempfile::tempdir().expect("tempdir");
    for mode in ["audit", "annotate", "strict"] {
        let out = check(state.path(), ANSWER, &["--mode", mode]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let expected =
            fs::read_to_string(root().join(format!("fixtures/witness/expected/answer.{mode}.md")))
                .expect("expected output");
        assert_text_eq(&expected, &out.stdout);
        // Which claims are flagged, and why, is on stderr with the certificate id.
        assert!(
            out.stderr.contains("claim 1 [contradicted, ")
                && out
                    .stderr
                    .contains("claim says 1978, the evidence says 1968"),
            "{}",
            out.stderr
        );
        assert!(
            out.stderr
                .contains("the aligned evidence negates what the claim states")
        );
        assert!(
            out.stderr.contains("claim 3 [unsupported, ")
                && out
                    .stderr
                    .contains("not in the evidence: Visitors, tour, planetarium, weekend"),
            "{}",
            out.stderr
        );
        assert!(witness_id(&out.stderr).starts_with("wit_"));
    }
    let audit = fs::read_to_string(root().join(ANSWER)).expect("answer");
    assert_text_eq(
        &audit,
        &fs::read_to_string(root().join("fixtures/witness/expected/answer.audit.md"))
            .expect("audit"),
    );
}

#[test]
fn conversational_profiles_remove_contradictions_and_warn_on_unknown_claims() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = check(
        state.path(),
        ANSWER,
        &["--mode", "strict", "--profile", "chat"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("Visitors can tour its planetarium every weekend.")
    );
    assert!(!out.stdout.contains("1978"));
    assert!(
        out.stderr.contains("claim 3 [unsupported, warned]"),
        "{}",
        out.stderr
    );
}

#[test]
fn json_prints_a_schema_valid_certificate_and_stores_it() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = check(state.path(), ANSWER, &["--mode", "strict", "--json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let value: Value = serde_json::from_str(&out.stdout).expect("certificate JSON");
    let schema: Value = serde_json::from_str(SCHEMA_JSON).expect("schema");
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(&schema)
        .expect("schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .map(|e| e.to_string())
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
    let certificate: Certificate = serde_json::from_value(value).expect("type accepts");
    assert_eq!(certificate.summary.verifiable, 5);
    assert_eq!(certificate.summary.contradicted, 2);
    assert_eq!(certificate.summary.unsupported, 1);
    assert_eq!(certificate.suppression.removed, 3);
    assert_eq!(certificate.flagged_claims.len(), 3);
    assert!(certificate.output.rewritten);
    // Evidence snippets point at the exact bytes of the context file.
    let context = fs::read_to_string(root().join(CONTEXT)).expect("context");
    for snippet in &certificate.evidence {
        assert_eq!(&context[snippet.start..snippet.end], snippet.text);
        assert_eq!(snippet.source, CONTEXT);
    }
    assert_eq!(
        certificate.context.sha256,
        svc::digest::sha256_hex(context.as_bytes())
    );

    let shown = run(svc(state.path()).args(["witness", "show", &certificate.id]));
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let again: Certificate = serde_json::from_str(&shown.stdout).expect("stored certificate");
    assert_eq!(again, certificate);
}

#[test]
fn structured_output_stays_byte_valid_in_strict_mode() {
    let state = tempfile::tempdir().expect("tempdir");
    let path = "fixtures/witness/answer.json";
    let out = check(state.path(), path, &["--mode", "strict"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let original = fs::read_to_string(root().join(path)).expect("answer.json");
    assert_eq!(out.stdout, original);
    assert!(out.stderr.contains("never rewritten"), "{}", out.stderr);
}

#[test]
fn short_answers_are_read_against_the_question() {
    let state = tempfile::tempdir().expect("tempdir");
    let question = "Who founded the Halden Observatory?";
    let right = check(
        state.path(),
        "fixtures/witness/short-right.txt",
        &[
            "--mode",
            "strict",
            "--profile",
            "qa",
            "--question",
            question,
        ],
    );
    assert_eq!(right.stdout, "Ingrid Solberg");
    assert!(right.stderr.contains("1 of 1 verifiable claims supported"));
    let wrong = check(
        state.path(),
        "fixtures/witness/short-wrong.txt",
        &[
            "--mode",
            "strict",
            "--profile",
            "qa",
            "--question",
            question,
        ],
    );
    assert_eq!(
        wrong.stdout,
        svc::witness::rewrite::WITHHELD_NOTICE,
        "{}",
        wrong.stderr
    );
    assert!(
        wrong.stderr.contains("names Ingrid Solberg instead"),
        "{}",
        wrong.stderr
    );
}

/// Regression (found by probing): strict mode dropped the file's last line break when it cut
/// the last line or withheld the whole answer.
#[test]
fn strict_output_keeps_the_files_last_line_break() {
    let state = tempfile::tempdir().expect("tempdir");
    let answer = state.path().join("answer.txt");
    fs::write(
        &answer,
        "The observatory also operates a radio telescope.\n",
    )
    .expect("write");
    let out = check(
        state.path(),
        answer.to_str().expect("utf-8 path"),
        &["--mode", "strict", "--no-store"],
    );
    assert_eq!(
        out.stdout,
        format!("{}\n", svc::witness::rewrite::WITHHELD_NOTICE),
        "{}",
        out.stderr
    );
}

#[test]
fn list_and_feedback() {
    let state = tempfile::tempdir().expect("tempdir");
    let first = witness_id(&check(state.path(), ANSWER, &[]).stderr);
    let second = witness_id(&check(state.path(), ANSWER, &["--mode", "annotate"]).stderr);
    let listed = run(svc(state.path()).args(["witness", "list", "--limit", "1", "--json"]));
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let rows: Vec<Value> = serde_json::from_str(&listed.stdout).expect("list JSON");
    assert_eq!(rows.len(), 1);
    assert!(rows[0]["id"] == second.as_str() || rows[0]["id"] == first.as_str());
    let table = run(svc(state.path()).args(["witness", "list"]));
    assert!(table.stdout.contains(&first) && table.stdout.contains(&second));

    let feedback = run(svc(state.path()).args([
        "witness",
        "feedback",
        &first,
        "--verdict",
        "false_positive",
        "--claim",
        "2",
    ]));
    assert_eq!(feedback.code, 0, "{}", feedback.stderr);
    // Found by probing: a false_positive on a claim the witness supported (a slip of the claim
    // number) was recorded and counted; so was a false_negative on a flagged claim.
    for (verdict, claim) in [("false_positive", "0"), ("false_negative", "1")] {
        let slip = run(svc(state.path()).args([
            "witness",
            "feedback",
            &first,
            "--verdict",
            verdict,
            "--claim",
            claim,
        ]));
        assert_eq!(slip.code, 2, "{}", slip.stdout);
        assert!(
            slip.stderr
                .contains(&format!("so it cannot be a {verdict}")),
            "{}",
            slip.stderr
        );
    }
    let feedback =
        run(svc(state.path()).args(["witness", "feedback", &second, "--verdict", "correct"]));
    assert!(
        feedback
            .stdout
            .contains("1 false_positive, 0 false_negative, 1 correct, 0 wrong_evidence (2 in all)"),
        "{}",
        feedback.stdout
    );
    let unknown = run(svc(state.path()).args([
        "witness",
        "feedback",
        "wit_000000000000000000000000",
        "--verdict",
        "correct",
    ]));
    assert_eq!(unknown.code, 2);
    assert!(
        unknown
            .stderr
            .contains("no certificate wit_000000000000000000000000")
    );
    let bad = run(svc(state.path()).args(["witness", "feedback", &first, "--verdict", "meh"]));
    assert_eq!(bad.code, 2);
}

#[test]
fn eval_prints_figures_beside_the_baseline() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = run(svc(state.path()).args(["witness", "eval", "fixtures/witness/qa.jsonl"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let expected = fs::read_to_string(root().join("fixtures/witness/expected/qa.eval.txt"))
        .expect("expected eval");
    assert_text_eq(&expected, &out.stdout);
    let json =
        run(svc(state.path()).args(["witness", "eval", "fixtures/witness/qa.jsonl", "--json"]));
    let report: Value = serde_json::from_str(&json.stdout).expect("report JSON");
    assert_eq!(report["auroc"], 1.0);
    assert_eq!(report["confusion"]["true_positive"], 4);
    // 4 of 4 flagged: the Wilson interval still admits a lower rate, and never exceeds 1.
    let interval = &report["flag_rate_interval"];
    assert!(interval[0].as_f64().expect("low") < 0.6, "{interval}");
    assert_eq!(interval[1].as_f64().expect("high"), 1.0);
}

/// `svc witness eval FILE --profile PROFILE --json` on a committed file: the report, with its
/// AUROC and the content-word baseline's.
fn eval_report(file: &str, profile: &str) -> (Value, f64, f64) {
    let state = tempfile::tempdir().expect("tempdir");
    let out =
        run(svc(state.path()).args(["witness", "eval", file, "--profile", profile, "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).expect("report JSON");
    let auroc = report["auroc"].as_f64().expect("auroc");
    let baseline = report["baseline_auroc"].as_f64().expect("baseline");
    (report, auroc, baseline)
}

/// The repository-documentation development set reads as `svc witness eval` input (empty
/// questions, extra provenance fields): every pair is length-matched, and the fitted witness
/// ranks right claims above altered ones better than chance on the held-out part.
#[test]
fn eval_reads_the_repo_doc_claims() {
    let (report, auroc, baseline) = eval_report("data/witness/repo-docs/heldout.jsonl", "rag");
    assert_eq!(report["items"], 96);
    assert_eq!(report["length_matched"]["items"], 96);
    assert!(auroc > 0.5 && auroc > baseline, "{report}");
}

/// A regression gate on the documentation design set (tuning data the fit never reads): the
/// committed rule ranks its right claims above the altered ones at AUROC 0.836 (session 13), far
/// above content-word overlap (0.678). A change that loses ground here must say so and move
/// this floor on purpose.
#[test]
fn the_design_set_ranking_does_not_regress() {
    let (report, auroc, baseline) = eval_report("data/witness/repo-docs/design.jsonl", "qa");
    assert_eq!(report["items"], 159);
    assert!(auroc >= 0.83 && auroc > baseline + 0.1, "{report}");
}

/// The documentation questions (evaluation only) read as `svc witness eval` input, and the
/// committed rule stays above content-word overlap on them (0.852 against 0.782, session 14).
/// A floor, not a target: the set is never tuned on.
#[test]
fn documentation_questions_rank_above_overlap() {
    let (report, auroc, baseline) = eval_report("data/witness/docs-qa/qa.jsonl", "qa");
    assert_eq!(report["items"], 153);
    assert!(auroc >= 0.84 && auroc > baseline + 0.05, "{report}");
}

#[test]
fn missing_inputs_are_clear_errors() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = run(svc(state.path()).args(["witness"]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("--context-file PATH and --output-file PATH")
    );
    let out = check(state.path(), "fixtures/witness/nope.txt", &[]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("fixtures/witness/nope.txt"),
        "{}",
        out.stderr
    );
    // An answer saved in Latin-1: the error names the file, line and column, and no
    // certificate is written.
    let latin1 = state.path().join("answer.txt");
    fs::write(
        &latin1,
        b"The observatory opened in 1921.\nCaf\xe9 owners founded it.\n",
    )
    .expect("write");
    let out = check(state.path(), latin1.to_str().expect("utf-8 path"), &[]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("answer.txt:2:4 is not UTF-8 text"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("witness-id"), "{}", out.stderr);
}

#[test]
fn nli_endpoint_down_falls_back_to_deterministic_verdicts() {
    let state = tempfile::tempdir().expect("tempdir");
    // A loopback port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let base = format!("http://127.0.0.1:{port}/v1");
    // "managed its daily work" for "directed it": a paraphrase the deterministic pass is unsure
    // of. At qa it falls below the threshold (at rag, whose cut for free-standing claims is
    // calibrated more leniently, it passes just above it).
    let out = check(
        state.path(),
        "fixtures/witness/paraphrase.md",
        &[
            "--mode",
            "annotate",
            "--profile",
            "qa",
            "--witness-nli",
            "--nli-base-url",
            &base,
            "--nli-budget-ms",
            "3000",
            "--json",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let certificate: Certificate = serde_json::from_str(&out.stdout).expect("certificate");
    assert_eq!(
        serde_json::to_value(certificate.nli.status).expect("status"),
        "fallback"
    );
    assert_eq!(certificate.nli.claims_sent, 1);
    assert!(
        out.stderr
            .contains("nli fell back to deterministic verdicts"),
        "{}",
        out.stderr
    );
    // The verdict is the deterministic one, and annotate mode marked it.
    assert_eq!(certificate.summary.unsupported, 1);
    assert_eq!(certificate.suppression.marked, 1);
}

/// A fake OpenAI-compatible judge on a loopback port that calls every claim supported.
fn fake_judge() -> (String, std::thread::JoinHandle<()>) {
    use axum::routing::post;
    use axum::{Json, Router};
    let (sender, receiver) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let app = Router::new().route(
                "/v1/chat/completions",
                post(|Json(body): Json<Value>| async move {
                    let user = body["messages"][1]["content"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    let verdicts: Vec<Value> = user
                        .split("Claims:\n")
                        .nth(1)
                        .unwrap_or_default()
                        .lines()
                        .filter_map(|l| l.split(':').next()?.trim().parse::<usize>().ok())
                        .map(|id| serde_json::json!({"id": id, "label": "supported"}))
                        .collect();
                    let content = serde_json::json!({ "verdicts": verdicts }).to_string();
                    Json(serde_json::json!({"choices": [{"message": {"content": content}}]}))
                }),
            );
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            sender
                .send(listener.local_addr().expect("address"))
                .expect("send address");
            // Serve until the test process ends.
            let _ = axum::serve(listener, app).await;
        });
    });
    let address = receiver.recv().expect("judge address");
    (format!("http://{address}/v1"), handle)
}

#[test]
fn nli_judge_decides_uncertain_claims() {
    let state = tempfile::tempdir().expect("tempdir");
    let (base, _judge) = fake_judge();
    let out = check(
        state.path(),
        "fixtures/witness/paraphrase.md",
        &[
            "--mode",
            "annotate",
            // Below the qa threshold deterministically (see the fallback test).
            "--profile",
            "qa",
            "--witness-nli",
            "--nli-base-url",
            &base,
            "--json",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let certificate: Certificate = serde_json::from_str(&out.stdout).expect("certificate");
    assert_eq!(
        serde_json::to_value(certificate.nli.status).expect("status"),
        "applied"
    );
    assert_eq!(certificate.nli.claims_changed, 1);
    assert_eq!(certificate.summary.supported, 1);
    assert_eq!(certificate.suppression.marked, 0);
}

/// `svc witness fit` cross-validates the committed fit: it names the chosen penalty (the
/// committed weights' own), the out-of-fold curve its qa threshold is placed on, and reports
/// every tuning file in-sample and cross-validated.
#[test]
fn fit_prints_cross_validated_figures_for_every_tuning_file() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = run(svc(state.path()).args(["witness", "fit", "--cv", "5", "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).expect("report JSON");
    assert_eq!(report["folds"], 5);
    let weights: Value = serde_json::from_str(
        &fs::read_to_string(root().join("src/witness/weights.json")).expect("weights"),
    )
    .expect("weights JSON");
    assert_eq!(report["chosen_l2"], weights["l2"]);
    let calibration = &report["calibration"];
    assert_eq!(calibration["target"], weights["max_false_flags"]);
    let target = calibration["target"].as_f64().expect("target");
    let chosen = calibration["chosen"]["false_flags"]
        .as_f64()
        .expect("a cut within the target");
    assert!(chosen <= target, "{calibration}");
    let curve = calibration["curve"].as_array().expect("curve");
    assert!(curve.len() >= 2, "{calibration}");
    // More false flags never flag fewer wrong answers.
    let flagged: Vec<f64> = curve
        .iter()
        .map(|p| p["flagged"].as_f64().expect("flagged"))
        .collect();
    assert!(flagged.windows(2).all(|w| w[0] <= w[1]), "{flagged:?}");
    let files = report["files"].as_array().expect("files");
    // Two tuning files, then the length-matched swaps and the documentation design set,
    // which the fit only scores.
    assert_eq!(files.len(), 4);
    let fitted: Vec<bool> = files.iter().map(|f| f["fitted"] == true).collect();
    assert_eq!(fitted, [true, true, false, false]);
    assert_eq!(files[3]["file"], "data/witness/repo-docs/design.jsonl");
    // The text prints each rate with its 95 % Wilson interval.
    let text = run(svc(state.path()).args(["witness", "fit", "--cv", "3"]));
    assert_eq!(text.code, 0, "{}", text.stderr);
    let row = text
        .stdout
        .lines()
        .find(|l| l.trim_start().starts_with("cross-validated  all"))
        .expect("a cross-validated row");
    assert_eq!(row.matches(" % [").count(), 2, "{row}");
    assert_eq!(files[2]["file"], "data/witness/halueval-dev/swaps.jsonl");
    for file in files {
        for part in ["in_sample", "cross_validated"] {
            let flagged = file[part]["all"]["flagged"].as_f64().expect("flagged");
            assert!((0.0..=1.0).contains(&flagged), "{file}");
        }
    }
    let text = run(svc(state.path()).args(["witness", "fit", "--cv", "3"]));
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(text.stdout.contains("<- chosen") && text.stdout.contains("cross-validated"));
    assert!(
        text.stdout.contains("swaps.jsonl  (not fitted on)"),
        "{}",
        text.stdout
    );

    let elsewhere =
        run(svc(state.path()).args(["witness", "fit", "--root", "/nonexistent-svc-root"]));
    assert_eq!(elsewhere.code, 2, "{}", elsewhere.stdout);
    assert!(elsewhere.stderr.contains("--root"), "{}", elsewhere.stderr);
    // Each fold's fit cross-validates the other folds to place its threshold: 2 is too few.
    for few in ["1", "2"] {
        let out = run(svc(state.path()).args(["witness", "fit", "--cv", few]));
        assert_eq!(out.code, 2, "--cv {few}: {}", out.stdout);
    }
}

/// `svc witness fit --nested` adds figures in which each fold's penalty was chosen and its
/// threshold placed on the other folds alone.
#[test]
fn fit_nested_reports_per_fold_choices_and_figures() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = run(svc(state.path()).args(["witness", "fit", "--cv", "3", "--nested", "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).expect("report JSON");
    assert_eq!(
        report["folds"], 3,
        "the plain report stays at the top level"
    );
    let nested = &report["nested"];
    let choices = nested["choices"].as_array().expect("choices");
    assert_eq!(choices.len(), 3);
    let mut fold_items = 0;
    for c in choices {
        assert!(c["l2"].as_f64().is_some_and(|l2| l2 > 0.0), "{c}");
        assert!(
            c["calibration"]["false_flags"]
                .as_f64()
                .is_some_and(|f| f <= 0.02),
            "{c}"
        );
        fold_items += c["figures"]["items"].as_u64().expect("fold figures");
    }
    let files = nested["files"].as_array().expect("files");
    assert_eq!(files.len(), 4);
    for file in files {
        let all = &file["figures"]["all"];
        assert!(all["items"].as_u64().is_some_and(|n| n > 0), "{file}");
        let flagged = all["flagged"].as_f64().expect("flagged");
        assert!((0.0..=1.0).contains(&flagged), "{file}");
    }
    // The folds' answers to questions are every answer to a question, once.
    let questions = fs::read_to_string(root().join("data/witness/halueval-dev/dev.jsonl"))
        .expect("dev split")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count() as u64;
    assert_eq!(fold_items, questions);
    let plain = run(svc(state.path()).args(["witness", "fit", "--cv", "3", "--json"]));
    let plain: Value = serde_json::from_str(&plain.stdout).expect("report JSON");
    assert!(plain.get("nested").is_none(), "nested only when asked");
    // Two folds cannot nest: it was computed on a third, empty fold before (regression).
    let two = run(svc(state.path()).args(["witness", "fit", "--cv", "2", "--nested"]));
    assert_eq!(two.code, 2, "{}", two.stdout);
    assert!(two.stderr.contains("--cv"), "{}", two.stderr);
}
