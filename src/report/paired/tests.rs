use super::*;
use crate::report::{TestKind, build_report, generate, input};
use crate::trial::TrialRecord;
use crate::trial::record::Outcome;

fn write(records: &[TrialRecord]) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("t.jsonl");
    let text: String = records
        .iter()
        .map(|r| serde_json::to_string(r).expect("serialise") + "\n")
        .collect();
    std::fs::write(&path, text).expect("write");
    (dir, path)
}

fn dataset(records: &[TrialRecord]) -> Dataset {
    let (_dir, path) = write(records);
    input::load(&[path]).expect("load")
}

fn options() -> ReportOptions {
    ReportOptions {
        resamples: 200,
        ..ReportOptions::default()
    }
}

/// The pooled comparison of `condition` vs `baseline` (record set 0).
fn compare(data: &Dataset, condition: Condition, baseline: Condition) -> Comparison {
    let clustered = cluster::cluster(data);
    let arm = |condition| Arm { side: 0, condition };
    compare_all(
        data,
        &clustered,
        &[(arm(condition), arm(baseline))],
        &[],
        &options(),
    )
    .into_iter()
    .find(Comparison::pooled)
    .expect("pooled comparison")
}

#[test]
fn incomplete_and_duplicate_units_are_counted_and_named() {
    let mut records: Vec<TrialRecord> = generate::records(12, 1).collect();
    records.remove(6); // task 1 loses svc
    records.push(records[0].clone()); // duplicate raw of task 0
    let data = dataset(&records);
    let report = pairing_report(&data, &cluster::cluster(&data));
    assert_eq!(report.units, 3);
    assert_eq!(report.tasks, 3);
    assert_eq!(report.complete_units, 2);
    assert_eq!(report.duplicates, 1);
    assert_eq!(report.missing[&Condition::Svc], 1);
    assert_eq!(report.missing[&Condition::Raw], 0);
    assert_eq!(report.incomplete_examples.len(), 1);
    assert!(report.incomplete_examples[0].ends_with("lacks svc"));
}

#[test]
fn plan_compares_with_raw_and_the_named_baseline() {
    let present = Condition::ALL.to_vec();
    assert_eq!(comparison_plan(&present, None).len(), 3);
    let plan = comparison_plan(&present, Some(Condition::NativeCompaction));
    assert_eq!(plan.len(), 6);
    assert!(plan.contains(&(Condition::Svc, Condition::NativeCompaction)));
    assert!(comparison_plan(&[Condition::Svc], None).is_empty());
}

/// raw and svc records for 40 tasks; svc keeps scores and halves the tokens, then `adjust`
/// changes the svc record.
fn pairs(adjust: impl Fn(&mut TrialRecord)) -> Vec<TrialRecord> {
    let mut out = Vec::new();
    for record in generate::records(160, 5) {
        match record.condition {
            Condition::Raw => {
                let mut raw = record;
                raw.outcome = Outcome::Success;
                raw.error_type = None;
                out.push(raw)
            }
            Condition::Svc => {
                let raw = out.last().expect("raw comes first");
                let mut svc = record.clone();
                svc.outcome = Outcome::Success;
                svc.error_type = None;
                svc.task_score = raw.task_score;
                svc.evidence_recall = raw.evidence_recall;
                svc.unsupported_claim_rate = raw.unsupported_claim_rate;
                svc.context_tokens = raw.context_tokens / 2;
                svc.response_text = raw.response_text.clone();
                svc.response_sha256 = raw.response_sha256.clone();
                adjust(&mut svc);
                out.push(svc);
            }
            _ => {}
        }
    }
    out
}

#[test]
fn equal_quality_with_fewer_tokens_is_a_win() {
    let data = dataset(&pairs(|_| {}));
    let comparison = compare(&data, Condition::Svc, Condition::Raw);
    assert_eq!(comparison.pairs, 40);
    assert_eq!(comparison.tasks, 40);
    assert!(
        comparison.verdict.quality_preserving_context_win,
        "{comparison:?}"
    );
    let reduction = comparison.token_reduction.expect("reduction");
    assert!((reduction.estimate - 0.5).abs() < 0.01, "{reduction:?}");
    let quality = comparison.metric(Metric::TaskScore).expect("task_score");
    assert_eq!(quality.test.test, TestKind::NoDifference);
    assert!(!quality.significant);
}

#[test]
fn a_quality_drop_beyond_tolerance_is_not_a_win() {
    let data = dataset(&pairs(|svc| {
        svc.task_score = (svc.task_score - 0.2).max(0.0)
    }));
    let comparison = compare(&data, Condition::Svc, Condition::Raw);
    assert!(!comparison.verdict.quality_preserving_context_win);
    assert!(
        comparison.verdict.reasons[0].starts_with("fail: task score"),
        "{:?}",
        comparison.verdict.reasons
    );
    assert!(comparison.metric(Metric::TaskScore).expect("m").significant);
}

#[test]
fn no_pairs_gives_no_estimates_and_no_win() {
    let records: Vec<TrialRecord> = generate::records(8, 1)
        .filter(|r| r.condition != Condition::Raw)
        .collect();
    let mut with_one_raw = records.clone();
    let mut raw = generate::records(1, 9).next().expect("one");
    raw.task_id = "elsewhere".into();
    with_one_raw.push(raw);
    let comparison = compare(&dataset(&with_one_raw), Condition::Svc, Condition::Raw);
    assert_eq!(comparison.pairs, 0);
    assert_eq!(comparison.missing_baseline, 2);
    assert_eq!(comparison.missing_condition, 1);
    assert!(comparison.token_reduction.is_none());
    assert!(!comparison.verdict.quality_preserving_context_win);
}

/// Issue 11: the test was chosen from observed values (an all-0/1 column of a continuous
/// scorer got McNemar); now it is the scorer's declared type.
#[test]
fn issue_11_the_test_follows_the_scorers_declared_type() {
    let binary_looking = |scorer: &str| {
        pairs(|svc| {
            svc.task_score = f64::from(u8::from(svc.task_id.ends_with('1')));
        })
        .into_iter()
        .map(|mut r| {
            r.scorer = scorer.into();
            if r.condition == Condition::Raw {
                r.task_score = f64::from(u8::from(r.task_id.ends_with('2')));
            }
            r
        })
        .collect::<Vec<_>>()
    };
    let continuous = compare(
        &dataset(&binary_looking("qa-f1-v1")),
        Condition::Svc,
        Condition::Raw,
    );
    let test = continuous.metric(Metric::TaskScore).expect("m").test.test;
    assert_ne!(test, TestKind::McnemarExact);
    let binary = compare(
        &dataset(&binary_looking("needle-hit-v1")),
        Condition::Svc,
        Condition::Raw,
    );
    let test = binary.metric(Metric::TaskScore).expect("m").test;
    assert_eq!(test.test, TestKind::McnemarExact);
    assert_eq!(test.n_used, 8);
    // Evidence recall is continuous whatever its values; the error rate is binary.
    assert_ne!(
        binary.metric(Metric::EvidenceRecall).expect("m").test.test,
        TestKind::McnemarExact
    );
    assert_eq!(
        binary.metric(Metric::ErrorRate).expect("m").test.test,
        TestKind::McnemarExact
    );
}

/// Issue 11: an error trial recorded unsupported_claim_rate 0 and looked better than a wrong
/// answer; now it is a failure in every quality metric and the error rate is compared.
#[test]
fn issue_11_errors_count_as_failures_and_the_error_rate_is_compared() {
    let records = pairs(|svc| {
        if svc.task_id.ends_with('3') || svc.task_id.ends_with('7') {
            svc.outcome = Outcome::Error;
            svc.error_type = Some("timeout".into());
            svc.response_text = None;
            svc.response_sha256 = None;
            svc.task_score = 0.9;
            svc.evidence_recall = 1.0;
            svc.unsupported_claim_rate = 0.0;
        }
    });
    let comparison = compare(&dataset(&records), Condition::Svc, Condition::Raw);
    let errors = comparison.metric(Metric::ErrorRate).expect("error rate");
    assert_eq!(errors.condition_mean, Some(0.2));
    assert_eq!(errors.baseline_mean, Some(0.0));
    let unsupported = comparison
        .metric(Metric::UnsupportedClaimRate)
        .expect("unsupported");
    assert!(unsupported.delta.expect("delta").estimate > 0.1);
    let recall = comparison.metric(Metric::EvidenceRecall).expect("recall");
    assert!(recall.delta.expect("delta").estimate < -0.1);
    assert!(!comparison.verdict.quality_preserving_context_win);
}

/// Found by probing: when every trial errored, every delta was 0 (errors score 0 on both sides)
/// and the error records' context tokens gave a "reduction", so the report called it a win.
#[test]
fn sides_that_only_errored_are_not_a_win() {
    let errored = |r: &mut TrialRecord| {
        r.outcome = Outcome::Error;
        r.error_type = Some("timeout".into());
        r.response_text = None;
        r.response_sha256 = None;
    };
    let mut records = pairs(errored);
    for record in &mut records {
        errored(record);
    }
    let comparison = compare(&dataset(&records), Condition::Svc, Condition::Raw);
    assert!(comparison.token_reduction.expect("reduction").ci_low > 0.0);
    assert!(!comparison.verdict.quality_preserving_context_win);
    let reasons = comparison.verdict.reasons.join("\n");
    assert!(
        reasons.contains("fail: every paired trial of the condition errored")
            && reasons.contains("fail: every paired trial of the baseline errored"),
        "{reasons}"
    );
    // One side errored throughout: named, and still no win.
    let records = pairs(errored);
    let comparison = compare(&dataset(&records), Condition::Svc, Condition::Raw);
    let reasons = comparison.verdict.reasons.join("\n");
    assert!(
        reasons.contains("condition errored") && !reasons.contains("baseline errored"),
        "{reasons}"
    );
}

/// Issue 11: byte-identical replicates narrowed the interval for free; they collapse into one
/// observation, so three replicates give the same comparison as one.
#[test]
fn issue_11_identical_replicates_collapse_to_one_observation() {
    let one = pairs(|svc| svc.task_score = (svc.task_score - 0.05).max(0.0));
    let mut three = Vec::new();
    for replicate in 0..3 {
        for record in &one {
            let mut r = record.clone();
            r.replicate = replicate;
            r.latency_ms += replicate as f64;
            three.push(r);
        }
    }
    let single = compare(&dataset(&one), Condition::Svc, Condition::Raw);
    let data = dataset(&three);
    let collapsed = compare(&data, Condition::Svc, Condition::Raw);
    assert_eq!(collapsed.pairs, 40);
    assert_eq!(collapsed.tasks, 40);
    let interval = |c: &Comparison| c.metric(Metric::TaskScore).expect("m").delta;
    assert_eq!(interval(&single), interval(&collapsed));
    assert_eq!(cluster::cluster(&data).collapsed_replicates, 160);
    // Replicates that differ stay separate pairs within one task (cluster).
    let mut differing = three.clone();
    for r in differing.iter_mut().filter(|r| r.replicate == 1) {
        r.task_score = (r.task_score + 0.01).min(1.0);
    }
    let separate = compare(&dataset(&differing), Condition::Svc, Condition::Raw);
    assert_eq!(separate.tasks, 40);
    assert!(separate.pairs > 40);
}

fn with_budget(record: &TrialRecord, budget: usize) -> TrialRecord {
    let mut r = record.clone();
    r.task_id = crate::harness::run::budget_task_id(&record.task_id, budget);
    r
}

/// Contract with the harness: `raw` recorded once per task without the budget suffix pairs
/// with every budget; older runs with `raw` per budget give the same pairs and tasks.
#[test]
fn raw_once_per_task_pairs_with_every_budget_and_old_runs_agree() {
    let base = pairs(|_| {});
    let mut once = Vec::new();
    let mut per_budget = Vec::new();
    for record in &base {
        if record.condition == Condition::Raw {
            once.push(record.clone());
            per_budget.push(with_budget(record, 256));
            per_budget.push(with_budget(record, 512));
        } else {
            for budget in [256, 512] {
                let mut svc = with_budget(record, budget);
                if budget == 256 {
                    svc.context_tokens /= 2;
                }
                once.push(svc.clone());
                per_budget.push(svc);
            }
        }
    }
    let a = compare(&dataset(&once), Condition::Svc, Condition::Raw);
    let b = compare(&dataset(&per_budget), Condition::Svc, Condition::Raw);
    assert_eq!(a.pairs, 80);
    assert_eq!(a.tasks, 40);
    assert_eq!(a.missing_baseline, 0);
    assert_eq!(a, b);
    let data = dataset(&once);
    let clustered = cluster::cluster(&data);
    assert_eq!(clustered.shared_raw_tasks, 40);
    let report = pairing_report(&data, &clustered);
    assert_eq!(report.units, 80);
    assert_eq!(report.complete_units, 80);
    // Per-budget strata each pair the one raw observation.
    let arm = |condition| Arm { side: 0, condition };
    let all = compare_all(
        &data,
        &clustered,
        &[(arm(Condition::Svc), arm(Condition::Raw))],
        &[],
        &options(),
    );
    // Two workloads × two budgets.
    let budgets: Vec<Option<u64>> = all.iter().map(|c| c.budget).collect();
    assert_eq!(
        budgets,
        vec![None, Some(256), Some(512), Some(256), Some(512)]
    );
    let per_budget: u64 = all[1..].iter().map(|c| c.tasks).sum();
    assert_eq!(per_budget, 80);
    assert!(all[1..].iter().all(|c| c.tasks == c.pairs));
}

#[test]
fn the_report_holm_adjusts_every_test_and_says_how_many() {
    let (_dir, path) = write(&generate::records(400, 3).collect::<Vec<_>>());
    let report = build_report(&[path], &options()).expect("report");
    let tests: u64 = report
        .comparisons
        .iter()
        .map(|c| c.metrics.len() as u64)
        .sum();
    assert_eq!(report.pairing.tests, tests);
    // 3 pooled comparisons and 3 per workload stratum (two workloads).
    assert_eq!(report.comparisons.len(), 9);
    for comparison in &report.comparisons {
        for metric in &comparison.metrics {
            assert!(metric.p_holm >= metric.test.p_value);
            assert_eq!(metric.significant, metric.p_holm < 0.05);
        }
    }
}

/// Regression (found by probing): latency tests shared one Holm family with the quality
/// metrics, so two runs whose records differ only in latency (shards of one run, measured
/// again) gave the task score different adjusted p-values.
#[test]
fn latency_does_not_move_the_adjusted_p_of_other_metrics() {
    let records: Vec<TrialRecord> = generate::records(400, 5).collect();
    let mut slower = records.clone();
    for (i, record) in slower.iter_mut().enumerate() {
        record.latency_ms *= 1.0 + (i % 7) as f64 * 0.3;
    }
    let p_holm = |records: &[TrialRecord]| {
        let (_dir, path) = write(records);
        let report = build_report(&[path], &options()).expect("report");
        report
            .comparisons
            .iter()
            .flat_map(|c| c.metrics.iter())
            .map(|m| (m.metric, m.p_holm))
            .collect::<Vec<_>>()
    };
    let (before, after) = (p_holm(&records), p_holm(&slower));
    assert_eq!(before.len(), after.len());
    let mut latency_moved = false;
    for ((metric, a), (_, b)) in before.iter().zip(&after) {
        if *metric == Metric::LatencyMs {
            latency_moved |= a != b;
        } else {
            assert_eq!(a, b, "{metric:?}");
        }
    }
    assert!(latency_moved, "the latency tests saw the change");
}
