use super::*;
use crate::proof::{ContextRiskMode, OutcomeSignal, VerifiedEfficiencyLayer};

const HARBOUR: &str = "# Harbour\n\nThe harbour has two ferry wharves and a long sea wall built of sandstone.\n\n## Bridge\n\nThe bridge across the harbour opened to traffic in 1932 after eight years of work.\n\n## Tunnel\n\nA tunnel under the harbour opened in 1992 to relieve traffic on the bridge.\n";
const CITY: &str = "# City\n\nThe city lies on the eastern coast. Its population passed five million in 2018.\n\n## Parks\n\nThe botanic garden was founded in 1816 beside the harbour.\n";

fn docs() -> Vec<(String, String)> {
    vec![
        ("harbour.md".to_string(), HARBOUR.to_string()),
        ("city.md".to_string(), CITY.to_string()),
    ]
}

/// A scripted model like `fixtures/proof/reader.sh`: it volunteers the garden's founding
/// year, right only when the context holds it.
fn reader(request: &crate::proof::ModelRequest) -> Result<String, crate::proof::ModelCallError> {
    let context = request.full_context();
    let mut answer = "The bridge opened to traffic in 1932.".to_string();
    if context.contains("botanic garden was founded in 1816") {
        answer.push_str(" The botanic garden was founded in 1816 beside the harbour.");
    } else {
        answer.push_str(" The botanic garden was founded in 1900.");
    }
    Ok(answer)
}

/// Runs the loop for `query` and records its outcome in the ledger; returns what it recovered.
pub(crate) fn record_run(home: &Path, query: &str, budget: usize) -> Vec<String> {
    let layer = VerifiedEfficiencyLayer::new(home, ContextRiskMode::Audit);
    let prepared = layer.prepare(&docs(), query, budget).expect("prepare");
    let result = layer
        .run_fixed_point(&prepared, reader, 3, 500, 2)
        .expect("run");
    let signal = OutcomeSignal {
        name: "user_accepted".to_string(),
        value: 1.0,
        detail: None,
    };
    layer
        .record_verified_outcome(&result, &signal)
        .expect("record");
    result
        .recovered_chunk_ids()
        .into_iter()
        .map(str::to_string)
        .collect()
}

/// Sends the bridge and tunnel sections in full and leaves the parks section out (it shares
/// no term with these queries): the garden's year has to be recovered. Pinning the parks
/// section still leaves both bridge sections in full.
pub(crate) const BUDGET: usize = 85;

pub(crate) const BRIDGE_QUERIES: [&str; 4] = [
    "When did the bridge open to traffic?",
    "What year did the bridge open?",
    "Which year did the bridge open to traffic?",
    "Did the bridge open to cars and traffic early?",
];

#[test]
fn a_gap_becomes_a_skill_promoted_on_held_out_queries_and_the_trace_is_in_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    for query in BRIDGE_QUERIES {
        assert_eq!(
            record_run(home, query, BUDGET),
            vec!["city.md#L5-7"],
            "{query}"
        );
    }
    let (_, gaps) = current_gaps(home, DEFAULT_THRESHOLD).expect("gaps");
    assert_eq!(gaps.len(), 1);
    assert_eq!(
        (gaps[0].entity.as_str(), gaps[0].miss_count),
        ("city.md", 4)
    );

    let report = dream(home, DreamSettings::default()).expect("dream");
    assert_eq!((report.synthesized, report.promoted), (1, 1), "{report:#?}");
    let store = SkillStore::load(home).expect("skills");
    let skill = store.all().next().expect("one skill");
    assert_eq!(skill.status, SkillStatus::Promoted);
    assert_eq!(skill.include, vec!["city.md#L5-7"]);
    assert_eq!(skill.origin.token_cost, 0.0);
    assert_eq!(skill.origin.synthesized_from, 2, "the older half");
    let bench = skill.benchmark.as_ref().expect("benchmarked");
    assert!(bench.held_out && bench.passed, "{bench:#?}");
    // Measured on the two runs not used to synthesize it.
    assert_eq!(
        (bench.queries, bench.misses_without, bench.misses_with),
        (2, 2, 0)
    );

    let kinds: Vec<trace::StepKind> = trace::read(home)
        .expect("trace")
        .iter()
        .map(|l| l.step.kind())
        .collect();
    use trace::StepKind::*;
    assert_eq!(kinds, vec![Detect, Synthesize, Benchmark, Promote, Spend]);
    let kinds_of_events: Vec<_> = report.events.iter().map(|e| e.kind()).collect();
    use crate::events::EventKind as K;
    assert_eq!(
        kinds_of_events,
        vec![
            K::GapDetected,
            K::SkillSynthesized,
            K::SkillBenchmarked,
            K::SkillPromoted,
            K::DreamCycle
        ]
    );

    // Nothing new: the next cycle works on nothing and writes nothing.
    let idle = dream(home, DreamSettings::default()).expect("dream");
    assert!(!idle.changed && idle.events.is_empty() && idle.worked.is_empty());
    assert_eq!(trace::read(home).expect("trace").len(), 5);
    assert_eq!(
        last_dream(home).expect("read").expect("kept").cycle_id,
        idle.cycle_id
    );

    // Serving applies the promoted skill: the next bridge question gets the parks section
    // in the prepared context and the loop recovers nothing.
    for query in BRIDGE_QUERIES {
        assert!(record_run(home, query, BUDGET).is_empty(), "{query}");
    }
}

#[test]
fn a_skill_that_pushes_a_strong_chunk_out_of_full_stays_draft() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    // Five tokens less: pinning the parks section now reduces the tunnel section (scored
    // 0.76 of the best) to a reference. The misses drop, but something else got worse.
    for query in BRIDGE_QUERIES {
        assert_eq!(
            record_run(home, query, BUDGET - 5),
            vec!["city.md#L5-7"],
            "{query}"
        );
    }
    let report = dream(home, DreamSettings::default()).expect("dream");
    assert_eq!((report.synthesized, report.promoted), (1, 0), "{report:#?}");
    let store = SkillStore::load(home).expect("skills");
    let skill = store.all().next().expect("one skill");
    assert_eq!(skill.status, SkillStatus::Draft);
    let bench = skill.benchmark.as_ref().expect("benchmarked");
    assert!(
        !bench.passed && bench.misses_with < bench.misses_without,
        "{bench:#?}"
    );
    assert_eq!(bench.worsened, 2, "{bench:#?}");
    let why = bench.per_query[0].worsened.as_deref().expect("a reason");
    assert!(why.starts_with("harbour.md#L9-11"), "{why}");
    let last = trace::read(home).expect("trace");
    assert!(matches!(
        &last[last.len() - 2].step,
        Step::Promote {
            promoted: false,
            ..
        }
    ));

    // And it cannot be promoted by hand.
    let mut store = store;
    let id = store.all().next().expect("skill").skill_id.clone();
    assert!(matches!(
        store.promote(&id),
        Err(skills::SkillError::NotBenchmarked { .. })
    ));
}

/// Found by probing: a draft made again (same trigger and chunks) from a gap that had grown
/// kept its first miss count, so every later cycle worked the gap again, re-made the same
/// draft and sent the same four notifications, forever.
#[test]
fn a_draft_made_again_from_a_grown_gap_is_not_remade_every_cycle() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    for query in BRIDGE_QUERIES.iter().chain(&BRIDGE_QUERIES[..1]) {
        record_run(home, query, BUDGET - 5);
    }
    let first = dream(home, DreamSettings::default()).expect("dream");
    assert_eq!((first.synthesized, first.promoted), (1, 0), "{first:#?}");
    record_run(home, BRIDGE_QUERIES[1], BUDGET - 5);
    let grown = dream(home, DreamSettings::default()).expect("dream");
    assert_eq!(grown.worked.len(), 1, "the gap grew: worked again");
    let idle = dream(home, DreamSettings::default()).expect("dream");
    assert!(
        !idle.changed && idle.events.is_empty() && idle.worked.is_empty(),
        "{idle:#?}"
    );
    let store = SkillStore::load(home).expect("skills");
    let most = store.all().map(|s| s.origin.miss_count).max();
    assert_eq!(most, Some(6));
}

#[test]
fn a_draft_without_a_benchmark_cannot_be_promoted() {
    let mut store = SkillStore::default();
    let skill = Skill::draft(
        "a.md".into(),
        Trigger {
            terms: vec!["bridg".into()],
            min_matches: 1,
        },
        vec!["a.md#L1-2".into()],
        Origin {
            method: SynthesisMethod::Structural,
            token_cost: 0.0,
            cycle_id: "dream_x".into(),
            synthesized_at: "2026-01-01T00:00:00.000Z".into(),
            miss_count: 3,
            synthesized_from: 3,
        },
    );
    let id = store.insert_draft(skill).skill_id.clone();
    let error = store.promote(&id).expect_err("no benchmark");
    assert!(error.to_string().contains("no benchmark"), "{error}");
    assert_eq!(store.get(&id).expect("kept").status, SkillStatus::Draft);
}

#[test]
fn export_carries_structural_origin_with_zero_token_cost() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    for query in BRIDGE_QUERIES {
        record_run(home, query, BUDGET);
    }
    dream(home, DreamSettings::default()).expect("dream");
    let store = SkillStore::load(home).expect("skills");
    let exported = skills::export(&store, false);
    assert_eq!(exported.format, skills::EXPORT_FORMAT);
    assert_eq!(exported.skills.len(), 1);
    let json = serde_json::to_value(&exported).expect("json");
    assert_eq!(
        json["skills"][0]["origin"]["token_cost"],
        serde_json::json!(0.0)
    );
    assert_eq!(json["skills"][0]["origin"]["method"], "structural");
    assert_eq!(json["skills"][0]["action"]["kind"], "include_chunks");
    let back: skills::SkillExport = serde_json::from_value(json).expect("round trip");
    assert_eq!(back, exported);
}

/// Found by probing: a hand-edited store with a promoted skill whose benchmark failed loaded,
/// and serving applied the skill; so did a trigger of 0 terms and a duplicated entry.
#[test]
fn a_store_the_dream_cycle_would_never_write_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    for query in BRIDGE_QUERIES {
        record_run(home, query, BUDGET);
    }
    dream(home, DreamSettings::default()).expect("dream");
    let path = home.join(skills::SKILLS_FILE);
    let original: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("store")).expect("json");
    type Edit = fn(&mut serde_json::Value);
    let edits: [(&str, Edit); 6] = [
        ("a benchmark marked passed that did not pass", |v| {
            v["skills"][0]["benchmark"]["worsened"] = 2.into()
        }),
        ("includes no chunk", |v| {
            v["skills"][0]["include"] = serde_json::json!(["not a chunk id"])
        }),
        ("an empty or repeated trigger term", |v| {
            let first = v["skills"][0]["trigger"]["terms"][0].clone();
            v["skills"][0]["trigger"]["terms"][1] = first
        }),
        ("is promoted without a passed benchmark", |v| {
            v["skills"][0]["benchmark"]["passed"] = false.into()
        }),
        ("needs 0 of its", |v| {
            v["skills"][0]["trigger"]["min_matches"] = 0.into()
        }),
        ("appears twice", |v| {
            let first = v["skills"][0].clone();
            v["skills"].as_array_mut().expect("list").push(first)
        }),
    ];
    for (expected, edit) in edits {
        let mut edited = original.clone();
        edit(&mut edited);
        std::fs::write(&path, edited.to_string()).expect("write");
        let error = SkillStore::load(home).expect_err(expected).to_string();
        assert!(error.contains(expected), "{error}");
        assert!(error.contains("the store refuses it"), "{error}");
    }
    std::fs::write(&path, original.to_string()).expect("write");
    SkillStore::load(home).expect("the store as written loads");
}

/// Found by probing: with a file named `learning` in the state directory, the dream cycle
/// failed with "dream.lock: File exists", naming neither the file in the way nor what to do.
#[test]
fn a_file_in_the_way_of_the_learning_folder_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("learning"), "").expect("write");
    let error = dream(dir.path(), DreamSettings::default())
        .expect_err("refused")
        .to_string();
    assert!(
        error.contains("learning is in the way: it exists and is not a directory"),
        "{error}"
    );
}
