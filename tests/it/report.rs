//! `svc report` and `svc gate` end to end over `fixtures/report/`, plus the check of every
//! statistic against scipy's values (`fixtures/report/scipy_expected.{py,json}`).

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;
use svc::report::{self, Metric, Report, ReportOptions, TestKind};
use svc::trial::TrialRecord;
use svc::trial::record::Condition;

use crate::harness::{assert_text_eq, root, run, svc};

const GOLDEN_ENV: &str = "SVC_UPDATE_GOLDEN";

fn fixture(path: &str) -> PathBuf {
    root().join("fixtures/report").join(path)
}

#[track_caller]
fn close(expected: f64, got: f64, what: &str) {
    let tolerance = 1e-9 * expected.abs().max(1.0);
    assert!(
        (expected - got).abs() <= tolerance,
        "{what}: scipy {expected} vs svc {got}"
    );
}

fn test_name(kind: TestKind) -> &'static str {
    kind.as_str()
}

fn check_estimate(expected: &Value, got: Option<report::Estimate>, what: &str) {
    if expected.is_null() {
        assert!(
            got.is_none(),
            "{what}: scipy has no estimate, svc has {got:?}"
        );
        return;
    }
    let got = got.unwrap_or_else(|| panic!("{what}: svc has no estimate"));
    close(
        expected["estimate"].as_f64().expect("estimate"),
        got.estimate,
        &format!("{what} estimate"),
    );
    close(
        expected["ci_low"].as_f64().expect("ci_low"),
        got.ci_low,
        &format!("{what} ci_low"),
    );
    close(
        expected["ci_high"].as_f64().expect("ci_high"),
        got.ci_high,
        &format!("{what} ci_high"),
    );
}

#[test]
fn every_statistic_matches_scipy() {
    let expected: Value = serde_json::from_str(
        &fs::read_to_string(fixture("scipy_expected.json")).expect("scipy_expected.json"),
    )
    .expect("json");
    let settings = &expected["settings"];
    let options = ReportOptions {
        seed: settings["seed"].as_u64().expect("seed"),
        resamples: settings["resamples"].as_u64().expect("resamples") as usize,
        confidence: settings["confidence"].as_f64().expect("confidence"),
        ..ReportOptions::default()
    };
    let files = expected["files"].as_object().expect("files");
    assert_eq!(files.len(), 2);
    let mut tests_seen = std::collections::BTreeSet::new();
    for (name, expected) in files {
        let report = report::build_report(&[fixture(name)], &options).expect("report");
        for (condition, summary) in expected["conditions"].as_object().expect("conditions") {
            let got = report
                .conditions
                .iter()
                .find(|g| g.condition.as_str() == condition)
                .unwrap_or_else(|| panic!("{name}: no {condition} summary"));
            assert_eq!(
                got.n,
                summary["n"].as_u64().expect("n"),
                "{name} {condition} n"
            );
            assert_eq!(
                got.successes,
                summary["successes"].as_u64().expect("successes")
            );
            for metric in Metric::ALL {
                let e = &summary["metrics"][metric.as_str()];
                let d = got.metrics[&metric];
                let what = format!("{name} {condition} {metric}");
                close(
                    e["mean"].as_f64().expect("mean"),
                    d.mean,
                    &format!("{what} mean"),
                );
                close(
                    e["median"].as_f64().expect("median"),
                    d.median,
                    &format!("{what} median"),
                );
                close(
                    e["p90"].as_f64().expect("p90"),
                    d.p90,
                    &format!("{what} p90"),
                );
            }
        }
        let comparisons = expected["comparisons"].as_array().expect("comparisons");
        let pooled = report.comparisons.iter().filter(|c| c.pooled()).count();
        assert_eq!(comparisons.len(), pooled, "{name}");
        for e in comparisons {
            let condition = e["condition"].as_str().expect("condition");
            let got = report
                .comparisons
                .iter()
                .find(|c| {
                    c.pooled() && c.condition.as_str() == condition && c.baseline == Condition::Raw
                })
                .unwrap_or_else(|| panic!("{name}: no {condition} vs raw"));
            assert_eq!(got.pairs, e["pairs"].as_u64().expect("pairs"));
            for metric in Metric::ALL {
                let em = &e["metrics"][metric.as_str()];
                let gm = got.metric(metric).expect("metric");
                let what = format!("{name} {condition} vs raw {metric}");
                close(
                    em["baseline_mean"].as_f64().expect("b"),
                    gm.baseline_mean.expect("b"),
                    &what,
                );
                close(
                    em["condition_mean"].as_f64().expect("c"),
                    gm.condition_mean.expect("c"),
                    &what,
                );
                check_estimate(&em["delta"], gm.delta, &what);
                assert_eq!(
                    em["test"].as_str(),
                    Some(test_name(gm.test.test)),
                    "{what} test"
                );
                tests_seen.insert(test_name(gm.test.test));
                close(
                    em["statistic"].as_f64().expect("statistic"),
                    gm.test.statistic,
                    &format!("{what} statistic"),
                );
                close(
                    em["p_value"].as_f64().expect("p"),
                    gm.test.p_value,
                    &format!("{what} p-value"),
                );
            }
            check_estimate(
                &e["token_reduction"],
                got.token_reduction,
                &format!("{name} {condition} token reduction"),
            );
            check_estimate(
                &e["cost_reduction"],
                got.cost_reduction,
                &format!("{name} {condition} cost reduction"),
            );
        }
    }
    // The fixtures exercise each test.
    assert_eq!(
        tests_seen.into_iter().collect::<Vec<_>>(),
        vec!["mcnemar_exact", "wilcoxon_exact", "wilcoxon_normal"]
    );
}

fn summary_schema_errors(summary: &Value) -> Vec<String> {
    let schema: Value = serde_json::from_str(report::SUMMARY_SCHEMA_JSON).expect("schema json");
    let validator = jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .build(&schema)
        .expect("schema compiles");
    validator
        .iter_errors(summary)
        .map(|e| format!("{}: {e}", e.instance_path().as_str()))
        .collect()
}

/// `svc report INPUT --resamples 50 --out <state>/out`: the result and the output folder.
/// The lines of `text` that `keep` accepts, each ending in a newline.
fn lines_where(text: &str, keep: impl Fn(&str) -> bool) -> String {
    text.lines()
        .filter(|l| keep(l))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn report_into(state: &Path, input: &str) -> (crate::harness::Run, PathBuf) {
    let out = state.join("out");
    let result = run(svc(state)
        .args(["report", input, "--resamples", "50", "--out"])
        .arg(&out));
    (result, out)
}

fn read_summary(dir: &Path) -> Value {
    let summary: Value =
        serde_json::from_str(&fs::read_to_string(dir.join("summary.json")).expect("summary.json"))
            .expect("summary json");
    let errors = summary_schema_errors(&summary);
    assert!(
        errors.is_empty(),
        "summary.json breaks its schema: {errors:#?}"
    );
    summary
}

#[track_caller]
fn assert_golden(name: &str, got: &str) {
    let path = fixture("golden").join(name);
    if std::env::var_os(GOLDEN_ENV).is_some() {
        fs::write(&path, got).expect("write golden");
        return;
    }
    let expected = fs::read_to_string(&path)
        .unwrap_or_else(|_| panic!("{} missing; run with {GOLDEN_ENV}=1", path.display()));
    assert_text_eq(&expected, got);
}

#[test]
fn report_outputs_match_golden_files_and_schema() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = state.path().join("out");
    let result = run(svc(state.path())
        .args([
            "report",
            "fixtures/report/paired.jsonl",
            "--pricing",
            "fixtures/report/pricing.toml",
            "--resamples",
            "200",
            "--seed",
            "7",
            "--out",
        ])
        .arg(&out));
    assert_eq!(result.code, 0, "{}", result.stderr);
    assert!(
        result.stdout.contains("svc                raw"),
        "{}",
        result.stdout
    );
    for file in [
        "report.md",
        "summary.csv",
        "comparisons.csv",
        "summary.json",
        "quality-cost-qa-distractor.svg",
        "quality-cost-code-needle.svg",
    ] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    let markdown = fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(markdown.contains("seed 7, 200 resamples"));
    assert!(markdown.contains("**projection**"));
    assert_golden("report.md", &markdown);
    assert_golden(
        "summary.csv",
        &fs::read_to_string(out.join("summary.csv")).expect("csv"),
    );
    assert_golden(
        "comparisons.csv",
        &fs::read_to_string(out.join("comparisons.csv")).expect("csv"),
    );
    let summary = read_summary(&out);
    let report: Report =
        serde_json::from_value(summary).expect("summary.json reads back as a Report");
    assert_eq!(report.settings.seed, 7);
    let svg = fs::read_to_string(out.join("quality-cost-qa-distractor.svg")).expect("svg");
    assert!(
        svg.starts_with("<svg") && svg.ends_with("</svg>\n"),
        "{svg}"
    );
    assert!(svg.contains(">\nsvc vs raw\n</text>"), "{svg}");
    assert!(
        svg.contains("qa-distractor: quality vs context cost"),
        "{svg}"
    );
    assert!(markdown.contains("tests are made in this report; p-values are Holm-adjusted"));
}

#[test]
fn bad_records_are_excluded_counted_and_named() {
    let state = tempfile::tempdir().expect("tempdir");
    let (result, out) = report_into(state.path(), "fixtures/report/bad/mixed.jsonl");
    assert_eq!(result.code, 0, "{}", result.stderr);
    assert!(
        result.stderr.contains("4 invalid record(s) excluded"),
        "{}",
        result.stderr
    );
    assert!(
        result.stderr.contains("mixed schema versions"),
        "{}",
        result.stderr
    );
    let markdown = fs::read_to_string(out.join("report.md")).expect("report.md");
    for expected in [
        "10 valid records from 1 file(s); 4 invalid record(s) excluded.",
        "`fixtures/report/bad/mixed.jsonl:9`: /: json: not valid JSON",
        "`fixtures/report/bad/mixed.jsonl:10`: /schema_version: const",
        "`fixtures/report/bad/mixed.jsonl:11`: /latency_ms: required",
        "`fixtures/report/bad/mixed.jsonl:12`: /response_sha256: integrity",
        "- `svc.context-efficiency-trial.v2`: 1 record(s)",
        "2 of 3 (task, budget) units have every condition",
        "lacks native_compaction, combined",
        "Incomplete: 0 (task, budget) unit(s) have combined but no raw, 1 have raw but no combined",
        "### svc vs raw: all workloads, budgets and models (n = 3 tasks, 3 pairs)",
        "### combined vs raw: all workloads, budgets and models (n = 2 tasks, 2 pairs)",
    ] {
        assert!(
            markdown.contains(expected),
            "report.md lacks {expected:?}:\n{markdown}"
        );
    }
    let summary = read_summary(&out);
    assert_eq!(summary["inputs"]["invalid_records"], 4);
    assert_eq!(summary["pairing"]["missing"]["combined"], 1);
}

#[test]
fn empty_input_renders_an_empty_report() {
    let state = tempfile::tempdir().expect("tempdir");
    let out = state.path().join("out");
    let result = run(svc(state.path())
        .args(["report", "fixtures/report/bad/empty.jsonl", "--out"])
        .arg(&out));
    assert_eq!(result.code, 0, "{}", result.stderr);
    assert!(
        result.stderr.contains("no valid records"),
        "{}",
        result.stderr
    );
    assert!(
        result
            .stdout
            .contains("(no paired comparisons: they pair each condition with raw")
    );
    let markdown = fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(markdown.contains("No valid records: there is nothing to summarise."));
    let summary = read_summary(&out);
    assert_eq!(summary["comparisons"], Value::Array(vec![]));
}

#[test]
fn run_directories_are_merged_with_their_manifest_budget() {
    let state = tempfile::tempdir().expect("tempdir");
    let (result, out) = report_into(state.path(), "fixtures/report/runs");
    assert_eq!(result.code, 0, "{}", result.stderr);
    let summary = read_summary(&out);
    let files = summary["inputs"]["files"].as_array().expect("files");
    assert_eq!(files.len(), 2);
    assert_eq!(files[0]["budget"], 512);
    assert_eq!(summary["inputs"]["valid_records"], 80);
    assert_eq!(summary["pairing"]["complete_units"], 20);
    assert!(
        summary["groups"]
            .as_array()
            .expect("groups")
            .iter()
            .all(|g| g["budget"] == 512)
    );
}

#[test]
fn unreadable_input_exits_2_naming_it() {
    let state = tempfile::tempdir().expect("tempdir");
    let result = run(svc(state.path()).args(["report", "fixtures/report/nope.jsonl"]));
    assert_eq!(result.code, 2);
    assert!(
        result.stderr.contains("fixtures/report/nope.jsonl"),
        "{}",
        result.stderr
    );
    let result = run(svc(state.path()).args([
        "report",
        "fixtures/report/paired.jsonl",
        "--pricing",
        "fixtures/report/paired.jsonl",
    ]));
    assert_eq!(result.code, 2);
    assert!(
        result.stderr.contains("pricing snapshot"),
        "{}",
        result.stderr
    );
}

/// Writes a copy of paired.jsonl where `condition`'s records are made worse.
fn degraded(dir: &Path, condition: Condition) -> PathBuf {
    let text = fs::read_to_string(fixture("paired.jsonl")).expect("paired");
    let mut out = String::new();
    for line in text.lines() {
        let mut record: TrialRecord = serde_json::from_str(line).expect("record");
        if record.condition == condition {
            record.task_score = (record.task_score - 0.2).max(0.0);
            record.context_tokens *= 2;
        }
        out.push_str(&serde_json::to_string(&record).expect("serialise"));
        out.push('\n');
    }
    let path = dir.join("degraded.jsonl");
    fs::write(&path, out).expect("write");
    path
}

/// Found by probing: `gate --update-baseline` on a run still being written took a few hundred
/// of its records as the baseline (every unit incomplete) and exited 0.
#[test]
fn a_baseline_is_not_taken_from_a_live_or_partial_run() {
    let state = tempfile::tempdir().expect("tempdir");
    let runs = tempfile::tempdir().expect("tempdir");
    let live = runs.path().join("live");
    fs::create_dir_all(&live).expect("mkdir");
    fs::copy(fixture("paired.jsonl"), live.join("trials.jsonl")).expect("copy");
    let baseline = state.path().join("baseline/summary.json");
    let update = |dir: &Path, extra: &[&str]| {
        run(svc(state.path())
            .args([
                "gate",
                "--update-baseline",
                "--resamples",
                "50",
                "--baseline",
            ])
            .arg(&baseline)
            .arg(dir)
            .args(extra))
    };
    // A running `svc run` holds the lock.
    let lock = fs::File::create(live.join("run.lock")).expect("lock file");
    lock.lock().expect("lock");
    let out = update(&live, &[]);
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(
        out.stderr
            .contains("is still being written (a running `svc run` holds its run.lock)"),
        "{}",
        out.stderr
    );
    assert!(!baseline.exists());
    // Also inside a folder of runs or shards (found by a second probe).
    let out = update(runs.path(), &[]);
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(
        out.stderr.contains("is still being written"),
        "{}",
        out.stderr
    );
    assert!(!baseline.exists());
    let report = run(svc(state.path())
        .args(["report", "--resamples", "50", "--out"])
        .arg(runs.path().join("report"))
        .arg(&live));
    assert_eq!(report.code, 0, "{}", report.stderr);
    assert!(
        report.stderr.contains("these figures are partial"),
        "{}",
        report.stderr
    );
    drop(lock);

    // A run whose last trial is missing (a unit lacks a condition) is a partial baseline:
    // refused unless asked for.
    let text = fs::read_to_string(live.join("trials.jsonl")).expect("read");
    let cut_dir = runs.path().join("cut");
    fs::create_dir_all(&cut_dir).expect("mkdir");
    let mut lines = text.lines().collect::<Vec<_>>();
    lines.truncate(lines.len() - 1);
    fs::write(cut_dir.join("trials.jsonl"), lines.join("\n") + "\n").expect("write");
    let out = update(&cut_dir, &[]);
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(
        out.stderr.contains("pairing units are incomplete"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("--allow-partial"), "{}", out.stderr);
    let out = update(&cut_dir, &["--allow-partial"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(baseline.exists());
    // Such a baseline (or one an older build took from a live run) says so whenever it is used.
    let gated = run(svc(state.path())
        .args(["gate", "--resamples", "50", "--allow-partial", "--baseline"])
        .arg(&baseline)
        .arg(&cut_dir));
    assert!(
        gated
            .stderr
            .contains("pairing units incomplete (taken from a partial run)"),
        "{}",
        gated.stderr
    );
    // And by `report --baseline` (found by a second probe: only the gate said it).
    let reported = run(svc(state.path())
        .args(["report", "--resamples", "50", "--baseline"])
        .arg(&baseline)
        .arg("--out")
        .arg(runs.path().join("report2"))
        .arg(&cut_dir));
    assert!(
        reported
            .stderr
            .contains("pairing units incomplete (taken from a partial run)"),
        "{}",
        reported.stderr
    );
}

#[test]
fn gate_passes_on_its_baseline_and_names_each_breach() {
    let state = tempfile::tempdir().expect("tempdir");
    let baseline = state.path().join("baseline/summary.json");
    let gate = |runs: &Path, extra: &[&str]| {
        run(svc(state.path())
            .arg("gate")
            .arg(runs)
            .arg("--baseline")
            .arg(&baseline)
            .args(["--resamples", "50"])
            .args(extra))
    };
    let paired = fixture("paired.jsonl");
    let missing = gate(&paired, &[]);
    assert_eq!(missing.code, 2, "{}", missing.stdout);
    assert!(
        missing.stderr.contains("--update-baseline"),
        "{}",
        missing.stderr
    );

    let update = gate(&paired, &["--update-baseline"]);
    assert_eq!(update.code, 0, "{}", update.stderr);
    read_summary(baseline.parent().expect("parent"));

    let pass = gate(&paired, &[]);
    assert_eq!(pass.code, 0, "{}\n{}", pass.stdout, pass.stderr);
    assert!(pass.stdout.contains("gate passed"));

    let worse = degraded(state.path(), Condition::Svc);
    let fail = gate(&worse, &[]);
    assert_eq!(fail.code, 1, "{}\n{}", fail.stdout, fail.stderr);
    // svc is worse in both workloads: task score and context tokens breach in each unit.
    assert!(
        fail.stdout.contains("gate failed: 4 breach(es)"),
        "{}",
        fail.stdout
    );
    assert!(
        fail.stdout
            .contains("qa-distractor@1 budget any model synthetic-large svc: task_score"),
        "{}",
        fail.stdout
    );
    assert!(
        fail.stdout
            .contains("code-needle@1 budget any model synthetic-large svc: context_tokens"),
        "{}",
        fail.stdout
    );
    assert!(
        fail.stdout
            .contains("> +5.0% (growth beyond the threshold)"),
        "{}",
        fail.stdout
    );
    assert!(fail.stdout.contains("α = 0.05"), "{}", fail.stdout);

    // Issue 11: gating one workload against a baseline of several was a false alarm (pooled
    // means); now the other workloads' units are "not comparable", never breaches.
    let one_workload = state.path().join("qa-only.jsonl");
    let text = fs::read_to_string(&paired).expect("paired");
    let kept = lines_where(&text, |l| l.contains("\"workload\":\"qa-distractor\""));
    assert!(!kept.is_empty());
    fs::write(&one_workload, kept).expect("write");
    let partial = gate(&one_workload, &[]);
    assert_eq!(partial.code, 2, "{}\n{}", partial.stdout, partial.stderr);
    assert!(
        partial.stdout.contains("not comparable: 4 unit(s)"),
        "{}",
        partial.stdout
    );
    assert!(
        partial
            .stdout
            .contains("code-needle@1 budget any model synthetic-large raw: in the baseline but not in this run"),
        "{}",
        partial.stdout
    );
    assert!(!partial.stdout.contains("breach"), "{}", partial.stdout);
    let overlap = gate(&one_workload, &["--allow-partial"]);
    assert_eq!(overlap.code, 0, "{}\n{}", overlap.stdout, overlap.stderr);
    assert!(
        overlap.stdout.contains("gate passed: 4 unit(s)"),
        "{}",
        overlap.stdout
    );

    // Found by probing: a torn last record was excluded and the gate still passed (exit 0),
    // and a run lacking most of a unit's tasks passed on the few it had.
    let torn = state.path().join("torn.jsonl");
    let cut = text.len() - text.lines().last().map_or(0, |l| l.len() / 2 + 1);
    fs::write(&torn, &text[..cut]).expect("write");
    let torn_gate = gate(&torn, &[]);
    assert_eq!(
        torn_gate.code, 2,
        "{}\n{}",
        torn_gate.stdout, torn_gate.stderr
    );
    assert!(
        torn_gate.stderr.contains("invalid record(s) in the inputs")
            && !torn_gate.stderr.contains("report.md"),
        "{}",
        torn_gate.stderr
    );
    // Found by probing: with every record twice, which copy the pairing kept depended on the
    // order of the inputs, so a duplicated regression passed or failed by file order alone.
    let doubled = state.path().join("doubled.jsonl");
    fs::write(&doubled, format!("{text}{text}")).expect("write");
    let doubled_gate = gate(&doubled, &[]);
    assert_eq!(
        doubled_gate.code, 2,
        "{}\n{}",
        doubled_gate.stdout, doubled_gate.stderr
    );
    assert!(
        doubled_gate.stderr.contains(
            "duplicate record(s) in the inputs (same task, condition, budget and replicate)"
        ),
        "{}",
        doubled_gate.stderr
    );
    let first_task = text
        .lines()
        .next()
        .and_then(|l| serde_json::from_str::<Value>(l).ok())
        .and_then(|v| v["task_id"].as_str().map(str::to_string))
        .expect("a task id");
    let lacking = state.path().join("lacking.jsonl");
    let kept = lines_where(&text, |l| {
        !l.contains(&format!("\"task_id\":\"{first_task}\""))
    });
    assert!(kept.len() < text.len());
    fs::write(&lacking, kept).expect("write");
    let lacking_gate = gate(&lacking, &[]);
    assert_eq!(
        lacking_gate.code, 2,
        "{}\n{}",
        lacking_gate.stdout, lacking_gate.stderr
    );
    assert!(
        lacking_gate.stdout.contains("missing tasks:")
            && lacking_gate
                .stdout
                .contains("this run lacks 1 of the baseline's"),
        "{}",
        lacking_gate.stdout
    );
    let overlap = gate(&lacking, &["--allow-partial"]);
    assert_eq!(overlap.code, 0, "{}\n{}", overlap.stdout, overlap.stderr);

    let thresholds = state.path().join("gate.toml");
    fs::write(
        &thresholds,
        "task_score_drop = 0.5\ncontext_tokens_growth = 2.0\n",
    )
    .expect("write");
    let lenient = gate(
        &worse,
        &["--thresholds", thresholds.to_str().expect("utf-8")],
    );
    assert_eq!(lenient.code, 0, "{}", lenient.stdout);

    fs::write(&thresholds, "task_score_drop = \"high\"\n").expect("write");
    let invalid = gate(
        &worse,
        &["--thresholds", thresholds.to_str().expect("utf-8")],
    );
    assert_eq!(invalid.code, 2);
    assert!(
        invalid.stderr.contains("gate thresholds"),
        "{}",
        invalid.stderr
    );

    // Found by probing: a baseline whose task table lacked a metric gated the rest and passed,
    // so a collapse of that metric went unseen.
    let mut stored: Value =
        serde_json::from_str(&fs::read_to_string(&baseline).expect("baseline")).expect("json");
    let table = &mut stored["task_scores"];
    let column = table["metrics"]
        .as_array()
        .and_then(|m| m.iter().position(|v| v == "evidence_recall"))
        .expect("evidence_recall column");
    table["metrics"]
        .as_array_mut()
        .expect("metrics")
        .remove(column);
    for unit in table["units"].as_array_mut().expect("units") {
        for values in unit["tasks"].as_object_mut().expect("tasks").values_mut() {
            values.as_array_mut().expect("values").remove(column);
        }
    }
    fs::write(&baseline, stored.to_string()).expect("write");
    let lacking_metric = gate(&worse, &[]);
    assert_eq!(lacking_metric.code, 2, "{}", lacking_metric.stdout);
    assert!(
        lacking_metric
            .stderr
            .contains("task_scores.metrics lacks evidence_recall"),
        "{}",
        lacking_metric.stderr
    );
}

#[test]
fn report_compares_with_a_stored_summary() {
    let state = tempfile::tempdir().expect("tempdir");
    let (result, out) = report_into(state.path(), "fixtures/report/paired.jsonl");
    assert_eq!(result.code, 0, "{}", result.stderr);
    let worse = degraded(state.path(), Condition::Combined);
    let out2 = state.path().join("out2");
    let result = run(svc(state.path())
        .arg("report")
        .arg(&worse)
        .args(["--resamples", "50", "--baseline"])
        .arg(out.join("summary.json"))
        .arg("--out")
        .arg(&out2));
    assert_eq!(result.code, 0, "{}", result.stderr);
    let markdown = fs::read_to_string(out2.join("report.md")).expect("report.md");
    assert!(markdown.contains("## Against the stored baseline summary"));
    assert!(
        markdown.contains("| combined | context_tokens |"),
        "{markdown}"
    );
    assert!(markdown.contains("+100.0%"), "{markdown}");
    // Found by probing: a stored summary of another workload was compared all the same,
    // giving a confident, meaningless delta.
    let other = state.path().join("other.jsonl");
    let text = fs::read_to_string(fixture("paired.jsonl")).expect("paired");
    let kept = lines_where(&text, |l| l.contains("\"workload\":\"qa-distractor\""));
    fs::write(&other, kept).expect("write");
    let mismatched = run(svc(state.path())
        .arg("report")
        .arg(&other)
        .args(["--resamples", "50", "--baseline"])
        .arg(out.join("summary.json"))
        .arg("--out")
        .arg(state.path().join("out3")));
    assert_eq!(mismatched.code, 2, "{}", mismatched.stderr);
    assert!(
        mismatched.stderr.contains("the stored summary covers")
            && mismatched.stderr.contains("code-needle"),
        "{}",
        mismatched.stderr
    );
    // Regression: `svc benchmark --compare-baseline FILE` runs svc and combined alone, and the
    // scope check above counted the stored summary's raw units (of no single budget) as
    // another scope, so the README's command always failed.
    let two = state.path().join("two.jsonl");
    let kept = lines_where(&text, |l| {
        l.contains("\"condition\":\"svc\"") || l.contains("\"condition\":\"combined\"")
    });
    fs::write(&two, kept).expect("write");
    let out4 = state.path().join("out4");
    let two_conditions = run(svc(state.path())
        .arg("report")
        .arg(&two)
        .args(["--resamples", "50", "--baseline"])
        .arg(out.join("summary.json"))
        .arg("--out")
        .arg(&out4));
    assert_eq!(two_conditions.code, 0, "{}", two_conditions.stderr);
    let markdown = fs::read_to_string(out4.join("report.md")).expect("report.md");
    assert!(
        markdown.contains("| combined | context_tokens |") && markdown.contains("| svc |"),
        "{markdown}"
    );
    // Found by probing: with no raw to pair, stdout said only "(no paired comparisons)" and the
    // comparison asked for was in report.md alone.
    let stdout = &two_conditions.stdout;
    assert!(
        stdout.contains("Against the stored baseline summary")
            && stdout
                .lines()
                .any(|l| l.starts_with("combined") && l.contains("context_tokens")),
        "{stdout}"
    );
    read_summary(&out2);
}

/// Found by probing: 1 or 3 resamples gave intervals that left out their own estimate, and the
/// verdicts were printed from them.
#[test]
fn too_few_resamples_for_the_confidence_are_refused() {
    let state = tempfile::tempdir().expect("tempdir");
    let result = run(svc(state.path())
        .args(["report", "--resamples", "3"])
        .arg(fixture("paired.jsonl"))
        .arg("--out")
        .arg(state.path().join("out")));
    assert_eq!(result.code, 2, "{}", result.stdout);
    assert!(
        result
            .stderr
            .contains("resamples must be at least 40 at confidence 0.95"),
        "{}",
        result.stderr
    );
}

/// Found by probing: records of two versions of one workload were pooled into one summary row,
/// the mean of neither, without a word.
#[test]
fn two_versions_of_a_workload_are_summarised_apart() {
    let state = tempfile::tempdir().expect("tempdir");
    let text = fs::read_to_string(fixture("paired.jsonl")).expect("paired");
    let qa = lines_where(&text, |l| l.contains("\"workload\":\"qa-distractor\""));
    let version_two = qa.replace("\"workload_version\":\"1\"", "\"workload_version\":\"2\"");
    assert_ne!(qa, version_two);
    let mixed = state.path().join("mixed.jsonl");
    fs::write(&mixed, format!("{qa}{version_two}")).expect("write");
    let out = state.path().join("out");
    let result = run(svc(state.path())
        .args(["report", "--resamples", "50"])
        .arg(&mixed)
        .arg("--out")
        .arg(&out));
    assert_eq!(result.code, 0, "{}", result.stderr);
    let summary = read_summary(&out);
    let mut workloads: Vec<String> = summary["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .filter_map(|g| g["workload"].as_str().map(str::to_string))
        .collect();
    workloads.sort();
    workloads.dedup();
    assert_eq!(workloads, ["qa-distractor@1", "qa-distractor@2"]);
}

#[test]
fn generated_records_are_valid_for_records_validate() {
    let state = tempfile::tempdir().expect("tempdir");
    let file = state.path().join("g.jsonl");
    let result = run(svc(state.path())
        .args(["records", "generate", "--n", "200", "--seed", "3", "--out"])
        .arg(&file));
    assert_eq!(result.code, 0, "{}", result.stderr);
    let validate = run(svc(state.path()).args(["records", "validate"]).arg(&file));
    assert_eq!(validate.code, 0, "{}{}", validate.stdout, validate.stderr);
}

#[test]
fn compare_runs_pairs_two_record_sets_and_states_what_differs() {
    let state = tempfile::tempdir().expect("tempdir");
    let worse = degraded(state.path(), Condition::Svc);
    let out = state.path().join("out");
    let result = run(svc(state.path())
        .args(["report", "--resamples", "50", "--compare-runs"])
        .arg(fixture("paired.jsonl"))
        .arg(&worse)
        .arg("--out")
        .arg(&out));
    assert_eq!(result.code, 0, "{}", result.stderr);
    let markdown = fs::read_to_string(out.join("report.md")).expect("report.md");
    assert!(markdown.contains("## Compared record sets"), "{markdown}");
    // Found by probing: two record sets with no task in common gave empty tables and exit 0.
    let text = fs::read_to_string(fixture("paired.jsonl")).expect("paired");
    let split = |workload: &str, name: &str| {
        let path = state.path().join(name);
        let kept = lines_where(&text, |l| {
            l.contains(&format!("\"workload\":\"{workload}\""))
        });
        fs::write(&path, kept).expect("write");
        path
    };
    let (qa, needle) = (
        split("qa-distractor", "qa.jsonl"),
        split("code-needle", "needle.jsonl"),
    );
    let disjoint = run(svc(state.path())
        .args(["report", "--resamples", "50", "--compare-runs"])
        .arg(&qa)
        .arg(&needle)
        .arg("--out")
        .arg(state.path().join("disjoint")));
    assert_eq!(disjoint.code, 2, "{}", disjoint.stderr);
    assert!(
        disjoint.stderr.contains("share no task"),
        "{}",
        disjoint.stderr
    );
    // Found by probing: --baseline-condition was ignored in silence with --compare-runs.
    let both = run(svc(state.path())
        .args([
            "report",
            "--resamples",
            "50",
            "--baseline-condition",
            "svc",
            "--compare-runs",
        ])
        .arg(&qa)
        .arg(&qa)
        .arg("--out")
        .arg(state.path().join("both")));
    assert_eq!(both.code, 2, "{}", both.stdout);
    assert!(
        both.stderr
            .contains("--baseline-condition has no effect with --compare-runs"),
        "{}",
        both.stderr
    );
    // Found by probing: an empty second set exited 0 with "(no paired comparisons)", its first
    // set alone making every unit "complete".
    let empty = state.path().join("empty.jsonl");
    fs::write(&empty, "").expect("write");
    let against_empty = run(svc(state.path())
        .args(["report", "--resamples", "50", "--compare-runs"])
        .arg(&qa)
        .arg(&empty)
        .arg("--out")
        .arg(state.path().join("against-empty")));
    assert_eq!(against_empty.code, 2, "{}", against_empty.stdout);
    assert!(
        against_empty
            .stderr
            .contains("no condition of the second record set pairs with the first"),
        "{}",
        against_empty.stderr
    );
    assert!(
        markdown.contains(
            "### svc [degraded.jsonl] vs svc [paired.jsonl]: all workloads, budgets and models (n = 30 tasks, 30 pairs)"
        ),
        "{markdown}"
    );
    let summary = read_summary(&out);
    let report: Report = serde_json::from_value(summary).expect("report");
    let svc = report
        .comparisons
        .iter()
        .find(|c| c.pooled() && c.condition == Condition::Svc)
        .expect("svc compared");
    let tokens = svc.token_reduction.expect("tokens");
    assert!((tokens.estimate + 1.0).abs() < 1e-9, "{tokens:?}");
    // Unchanged conditions pair exactly: no difference at all.
    let raw = report
        .comparisons
        .iter()
        .find(|c| c.pooled() && c.condition == Condition::Raw)
        .expect("raw compared");
    assert_eq!(
        raw.metric(Metric::TaskScore).expect("m").test.test,
        TestKind::NoDifference
    );
    assert!(out.join("quality-cost-qa-distractor.svg").is_file());
}

/// Found by probing: a missing input's cause was printed twice ("No such file or directory
/// (os error 2): No such file or directory (os error 2)").
#[test]
fn a_missing_input_is_named_once() {
    let state = tempfile::tempdir().expect("state");
    let out = run(svc(state.path()).args([
        "report",
        "no-such-records.jsonl",
        "--out",
        &state.path().join("r").display().to_string(),
    ]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("no-such-records.jsonl"),
        "{}",
        out.stderr
    );
    assert_eq!(
        out.stderr.matches("No such file or directory").count(),
        1,
        "{}",
        out.stderr
    );
}

/// Found by probing: `svc records validate -` read stdin, `svc report -` looked for a file
/// named "-".
#[test]
fn report_reads_records_from_stdin() {
    let state = tempfile::tempdir().expect("state");
    let out = state.path().join("from-stdin");
    let input = fs::File::open(fixture("paired.jsonl")).expect("fixture");
    let result = run(svc(state.path())
        .args(["report", "-", "--resamples", "50", "--out"])
        .arg(&out)
        .stdin(input));
    assert_eq!(result.code, 0, "{}", result.stderr);
    let summary = read_summary(&out);
    assert!(
        summary["inputs"]["valid_records"].as_u64().unwrap_or(0) > 0,
        "{summary}"
    );
}
