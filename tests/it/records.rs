//! `svc records validate|schema` end to end, over the committed fixtures.

use std::collections::BTreeSet;
use std::fs;

use serde::Deserialize;
use svc::trial::TrialRecord;
use svc::trial::read::RecordReader;
use svc::trial::validate::RecordValidator;

use crate::harness::{assert_text_eq, root, run, run_with_stdin, svc};

fn expected_errors() -> Vec<(String, String, String)> {
    let text = fs::read_to_string(root().join("fixtures/records/expected-errors.tsv"))
        .expect("expected-errors.tsv");
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let mut parts = l.split('\t');
            let mut next = || parts.next().expect("three columns").to_string();
            (next(), next(), next())
        })
        .collect()
}

fn fixture_files(folder: &str) -> Vec<String> {
    let mut files: Vec<String> = fs::read_dir(root().join("fixtures/records").join(folder))
        .expect("fixture folder")
        .map(|e| {
            format!(
                "fixtures/records/{folder}/{}",
                e.expect("entry").file_name().to_string_lossy()
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn valid_fixtures_pass_and_cover_every_condition_and_outcome() {
    let state = tempfile::tempdir().expect("tempdir");
    let files = fixture_files("valid");
    let out = run(svc(state.path()).args(["records", "validate"]).args(&files));
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout.ends_with("15 valid, 0 invalid\n"),
        "{}",
        out.stdout
    );
    let validator = RecordValidator::new().expect("schema");
    let mut seen = BTreeSet::new();
    for file in files {
        let input = fs::File::open(root().join(&file)).expect("open");
        let reader =
            RecordReader::new(Box::new(std::io::BufReader::new(input)), Some(&file)).expect("read");
        for item in reader {
            let text = item.expect("io").text.expect("utf-8");
            let record: TrialRecord = serde_json::from_str(&text).expect("type accepts");
            assert!(validator.check_str(&text).is_empty());
            seen.insert((record.condition, record.outcome));
        }
    }
    assert_eq!(seen.len(), 8, "every condition x outcome: {seen:?}");
}

#[test]
fn every_invalid_fixture_names_its_broken_rule() {
    let state = tempfile::tempdir().expect("tempdir");
    let expected = expected_errors();
    let files = fixture_files("invalid");
    assert_eq!(
        files.len(),
        expected.len(),
        "one expectation per invalid fixture"
    );
    let out = run(svc(state.path())
        .args(["records", "validate", "--format", "json"])
        .args(&files));
    assert_eq!(out.code, 1, "{}", out.stderr);

    #[derive(Deserialize)]
    struct Line {
        r#type: String,
        file: Option<String>,
        line: Option<usize>,
        pointer: Option<String>,
        rule_id: Option<String>,
        message: Option<String>,
        valid: Option<u64>,
        invalid: Option<u64>,
    }
    let lines: Vec<Line> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    for (file, pointer, rule) in &expected {
        let path = format!("fixtures/records/{file}");
        let found: Vec<&Line> = lines
            .iter()
            .filter(|l| l.r#type == "problem" && l.file.as_deref() == Some(path.as_str()))
            .collect();
        assert!(
            found
                .iter()
                .any(|l| l.pointer.as_deref() == Some(pointer.as_str())
                    && l.rule_id.as_deref() == Some(rule.as_str())
                    && l.line == Some(1)
                    && !l.message.as_deref().unwrap_or_default().is_empty()),
            "{file}: expected {pointer} [{rule}], got {:?}",
            found
                .iter()
                .map(|l| (l.pointer.clone(), l.rule_id.clone()))
                .collect::<Vec<_>>()
        );
    }
    let summary = lines.last().expect("summary");
    assert_eq!(summary.r#type, "summary");
    assert_eq!(
        (summary.valid, summary.invalid),
        (Some(0), Some(expected.len() as u64))
    );
}

#[test]
fn rust_type_and_schema_agree_on_every_fixture() {
    let validator = RecordValidator::new().expect("schema");
    let mut checked = 0;
    for file in fixture_files("valid")
        .into_iter()
        .chain(fixture_files("invalid"))
    {
        let input = fs::File::open(root().join(&file)).expect("open");
        let reader =
            RecordReader::new(Box::new(std::io::BufReader::new(input)), Some(&file)).expect("read");
        for item in reader {
            let Ok(text) = item.expect("io").text else {
                continue;
            };
            let Ok(value) = serde_json::from_str::<serde_json::Value>(&text) else {
                continue;
            };
            let schema_ok = validator
                .check_value(&value)
                .iter()
                .all(|p| p.rule_id == "integrity");
            let type_ok = serde_json::from_value::<TrialRecord>(value).is_ok();
            assert_eq!(
                type_ok, schema_ok,
                "{file}: type {type_ok}, schema {schema_ok}"
            );
            checked += 1;
        }
    }
    assert!(checked > 80, "checked {checked}");
}

#[test]
fn text_output_names_file_line_pointer_rule_and_value() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = run(svc(state.path()).args([
        "records",
        "validate",
        "fixtures/records/invalid/enum-outcome.jsonl",
        "fixtures/records/valid/svc-success.jsonl",
    ]));
    assert_eq!(out.code, 1);
    assert_text_eq(
        "fixtures/records/invalid/enum-outcome.jsonl:1: /outcome: must be one of: success, error [enum]; got \"other\"\n1 valid, 1 invalid\n",
        &out.stdout,
    );
}

#[test]
fn stdin_and_unreadable_input() {
    let state = tempfile::tempdir().expect("tempdir");
    let record =
        fs::read(root().join("fixtures/records/valid/raw-success.jsonl")).expect("fixture");
    let output = run_with_stdin(
        svc(state.path()).args(["records", "validate", "-"]),
        &record,
    );
    assert_eq!(output.code, 0);
    assert_eq!(output.stdout, "1 valid, 0 invalid\n");

    let out = run(svc(state.path()).args(["records", "validate", "no/such/file.jsonl"]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("cannot read no/such/file.jsonl"),
        "{}",
        out.stderr
    );
}

#[test]
fn schema_command_prints_the_committed_schema() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = run(svc(state.path()).args(["records", "schema"]));
    assert_eq!(out.code, 0);
    let committed = fs::read_to_string(root().join("schemas/context-efficiency-trial.v1.json"))
        .expect("schema");
    assert_eq!(out.stdout, committed);
    let schema: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(schema["required"].as_array().map(Vec::len), Some(27));
}

/// Runs `svc records validate ARGS -` with `input` on stdin, with a time limit: the bug this
/// guards against was an endless loop.
fn validate_stdin(args: &[&str], input: &[u8]) -> (Option<i32>, String, String) {
    use std::io::Write;
    let state = tempfile::tempdir().expect("tempdir");
    let mut child = svc(state.path())
        .args(["records", "validate"])
        .args(args)
        .arg("-")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if child.try_wait().expect("wait").is_some() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("svc records validate did not finish within 60 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    writer.join().expect("writer");
    let output = child.wait_with_output().expect("output");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Issue 10: one record with a stray `}` made `svc records validate -` print problems forever.
#[test]
fn issue_10_a_stray_brace_on_stdin_is_one_problem() {
    let good = fs::read_to_string(root().join("fixtures/records/valid/raw-success.jsonl"))
        .expect("fixture");
    let good = good.trim_end();
    let bad = good.replacen("\"latency_ms\":", "\"latency_ms\":} ", 1);
    assert_ne!(bad, good, "the fixture has a latency_ms field");
    let input = format!("{bad}\n{good}\n{good}\n");
    let (code, stdout, _) = validate_stdin(&[], input.as_bytes());
    assert_eq!(code, Some(1), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "one problem and the summary: {stdout}");
    assert!(lines[0].starts_with("-:1: "), "{stdout}");
    assert_eq!(lines[1], "2 valid, 1 invalid");
}

#[test]
fn problems_are_capped_and_counted() {
    let line = r#"{"schema_version": 1}"#;
    let input = format!("{line}\n").repeat(50);
    let (code, stdout, _) = validate_stdin(&["--max-problems", "5"], input.as_bytes());
    assert_eq!(code, Some(1));
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 7, "{stdout}");
    assert!(lines[5].contains("more problems not shown"), "{stdout}");
    assert_eq!(lines[6], "0 valid, 50 invalid");
}

#[test]
fn empty_input_fails_unless_allowed() {
    let (code, stdout, stderr) = validate_stdin(&[], b"\n\n");
    assert_eq!(code, Some(1), "{stdout}{stderr}");
    assert!(stderr.contains("--allow-empty"), "{stderr}");
    let (code, _, _) = validate_stdin(&["--allow-empty"], b"");
    assert_eq!(code, Some(0));
}

/// Issue 10: `412.0` passed validation and then vanished from `svc report`. Both now accept it.
#[test]
fn issue_10_integral_floats_count_in_validate_and_report() {
    let state = tempfile::tempdir().expect("tempdir");
    let text = fs::read_to_string(root().join("fixtures/records/valid/raw-success.jsonl"))
        .expect("fixture");
    let mut value: serde_json::Value = serde_json::from_str(text.trim()).expect("json");
    let tokens = value["context_tokens"].as_u64().expect("count");
    value["context_tokens"] = serde_json::json!(tokens as f64);
    let rendered = value.to_string();
    assert!(rendered.contains(".0"), "{rendered}");
    let file = state.path().join("float.jsonl");
    fs::write(&file, format!("{rendered}\n")).expect("write");
    let out = run(svc(state.path()).args(["records", "validate"]).arg(&file));
    assert_eq!(out.code, 0, "{}", out.stdout);
    let report = state.path().join("report");
    let out = run(svc(state.path())
        .args(["report", "--out"])
        .arg(&report)
        .arg(&file));
    assert!(
        out.code == 0 || out.code == 1,
        "{}{}",
        out.stdout,
        out.stderr
    );
    let summary = fs::read_to_string(report.join("summary.json")).expect("summary");
    let summary: serde_json::Value = serde_json::from_str(&summary).expect("json");
    assert_eq!(summary["inputs"]["valid_records"], 1, "{summary}");
    assert_eq!(summary["inputs"]["invalid_records"], 0, "{summary}");
}

/// Found by probing: `svc records validate bad.jsonl | head -1` printed "svc: error: Broken
/// pipe (os error 32)" and exited 2, where every other command ends quietly.
#[test]
fn validate_ends_quietly_when_its_reader_goes_away() {
    let state = tempfile::tempdir().expect("tempdir");
    let bad = state.path().join("bad.jsonl");
    fs::write(&bad, "{}\n".repeat(5_000)).expect("write");
    let mut child = svc(state.path())
        .args(["records", "validate"])
        .arg(&bad)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    // The reader goes away before reading anything: every write fails with a broken pipe.
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(141), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
}

/// Found by probing: `svc records export --parquet OUT -` said "-: No such file or directory",
/// where `validate -` and `report -` read standard input.
#[test]
fn export_reads_standard_input_as_dash() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = state.path().join("out.parquet");
    let input = fs::read(root().join("fixtures/report/paired.jsonl")).expect("fixture");
    let output = run_with_stdin(
        svc(state.path())
            .args(["records", "export", "--parquet"])
            .arg(&out)
            .arg("-"),
        &input,
    );
    assert_eq!(output.code, 0, "{}", output.stderr);
    let lines = input
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    let validated = run(svc(state.path()).args(["records", "validate"]).arg(&out));
    assert_eq!(validated.code, 0, "{}", validated.stderr);
    assert!(
        validated
            .stdout
            .contains(&format!("{lines} valid, 0 invalid")),
        "{}",
        validated.stdout
    );
}

/// Found by probing: `records export` of an empty file wrote an empty Parquet file and exited
/// 0 where `records validate` fails an empty input.
#[test]
fn export_of_no_records_fails_like_validate_unless_allowed() {
    let state = tempfile::tempdir().expect("tempdir");
    let empty = state.path().join("empty.jsonl");
    fs::write(&empty, "").expect("write");
    let out = state.path().join("out.parquet");
    let export = |extra: &[&str]| {
        run(svc(state.path())
            .args(["records", "export", "--parquet"])
            .arg(&out)
            .arg(&empty)
            .args(extra))
    };
    let refused = export(&[]);
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("--allow-empty"),
        "{}",
        refused.stderr
    );
    assert!(!out.exists());
    let allowed = export(&["--allow-empty"]);
    assert_eq!(allowed.code, 0, "{}", allowed.stderr);
    assert!(out.exists());
}
