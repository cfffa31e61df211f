//! One test per rule of SPEC §3.1, the precedence of statuses, the errors, and the property that
//! the loop never leaves a final output less supported than the first draft.

use std::cell::RefCell;

use super::*;
use crate::proof::ModelCallError;
use crate::proof::errors::{self as proof_errors, FailureKind};
use crate::rng::SplitMix64;

const QUERY: &str = "When did the bridge open to traffic?";
/// At this budget the bridge section is sent and the other four sections are omitted.
const BUDGET: usize = 30;
const SUPPORTED: &str = "The bridge opened to traffic in 1932.";
/// Needs the omitted park section.
const NEEDS_PARK: &str = "The bridge opened to traffic in 1932. The botanic garden was founded in 1816 beside the harbour.";

fn docs() -> Vec<(String, String)> {
    vec![
        (
            "harbour.md".to_string(),
            "# Harbour\n\nThe harbour has two ferry wharves and a long sea wall built of sandstone.\n\n## Bridge\n\nThe bridge across the harbour opened to traffic in 1932 after eight years of work.\n\n## Tunnel\n\nA tunnel under the harbour opened in 1992 to relieve traffic on the bridge.\n".to_string(),
        ),
        (
            "city.md".to_string(),
            "# City\n\nThe city lies on the eastern coast. Its population passed five million in 2018.\n\n## Parks\n\nThe botanic garden was founded in 1816 beside the harbour.\n".to_string(),
        ),
    ]
}

struct Fixture {
    _dir: tempfile::TempDir,
    layer: VerifiedEfficiencyLayer,
    prepared: Prepared,
}

fn fixture(mode: ContextRiskMode, budget: usize) -> Fixture {
    let dir = tempfile::tempdir().expect("tempdir");
    let layer = VerifiedEfficiencyLayer::new(dir.path(), mode);
    let prepared = layer.prepare(&docs(), QUERY, budget).expect("prepare");
    Fixture {
        _dir: dir,
        layer,
        prepared,
    }
}

/// A scripted model: answers round i with `script[min(i, len - 1)]` and keeps every request.
struct Scripted {
    script: Vec<String>,
    requests: RefCell<Vec<ModelRequest>>,
}

impl Scripted {
    fn new(script: &[&str]) -> Self {
        Self {
            script: script.iter().map(|s| s.to_string()).collect(),
            requests: RefCell::new(Vec::new()),
        }
    }

    fn call(&self, request: &ModelRequest) -> Result<String, ModelCallError> {
        let mut requests = self.requests.borrow_mut();
        let i = requests.len().min(self.script.len() - 1);
        requests.push(request.clone());
        Ok(self.script[i].clone())
    }

    fn calls(&self) -> usize {
        self.requests.borrow().len()
    }
}

fn run(
    fixture: &Fixture,
    model: &Scripted,
    max_rounds: usize,
    recovery_budget: usize,
    max_chunks: usize,
) -> Result<FixedPointResult, ProofError> {
    fixture.layer.run_fixed_point(
        &fixture.prepared,
        |request| model.call(request),
        max_rounds,
        recovery_budget,
        max_chunks,
    )
}

/// Rule 1 (one status) and rule 2 (one call per round) hold for every result.
fn assert_well_formed(result: &FixedPointResult, model: &Scripted) {
    assert_eq!(
        model.calls(),
        result.rounds.len(),
        "one model call per round"
    );
    let stops: Vec<_> = result.rounds.iter().filter_map(|r| r.stop_reason).collect();
    assert_eq!(stops, vec![result.status], "exactly one terminal status");
    assert_eq!(
        result.rounds.last().and_then(|r| r.stop_reason),
        Some(result.status),
        "the last round carries it"
    );
    assert!(result.rounds.len() <= result.max_rounds);
    let recovered: usize = result
        .rounds
        .iter()
        .flat_map(|r| &r.recovered)
        .map(|c| c.receipt_token_count)
        .sum();
    assert_eq!(recovered, result.recovery_tokens_used);
    assert!(result.recovery_tokens_used <= result.recovery_token_budget);
}

#[test]
fn the_fixture_omits_the_park_section() {
    let f = fixture(ContextRiskMode::Strict, BUDGET);
    assert!(
        f.prepared
            .stable_context_prefix
            .contains("opened to traffic in 1932")
    );
    assert!(!f.prepared.stable_context_prefix.contains("botanic"));
    assert!(
        f.prepared
            .omitted
            .iter()
            .any(|c| c.chunk_id == "city.md#L5-7")
    );
}

#[test]
fn recovers_the_supporting_chunk_and_ends_supported() {
    let f = fixture(ContextRiskMode::Strict, BUDGET);
    let model = Scripted::new(&[NEEDS_PARK]);
    let result = run(&f, &model, 3, 500, 2).expect("run");
    assert_well_formed(&result, &model);
    assert_eq!(result.status, FixedPointStatus::Supported);
    assert_eq!(result.rounds.len(), 2);
    assert_eq!(result.recovered_chunk_ids(), vec!["city.md#L5-7"]);
    let first = &result.rounds[0];
    assert!(first.unsupported_claim_rate > 0.0);
    assert_eq!(first.obligations.len(), 1);
    let plan = first.plan.as_ref().expect("planned");
    assert_eq!(plan.selected, vec!["city.md#L5-7".to_string()]);
    assert_eq!(result.final_output.output, NEEDS_PARK);
    assert_eq!(result.rounds[1].unsupported_claim_rate, 0.0);
}

#[test]
fn committed_context_is_a_byte_identical_prefix_and_evidence_is_never_rewritten() {
    let f = fixture(ContextRiskMode::Strict, BUDGET);
    // A model that keeps adding claims from other omitted sections, so evidence accumulates.
    let model = Scripted::new(&[
        "The botanic garden was founded in 1816 beside the harbour.",
        "The botanic garden was founded in 1816. A tunnel under the harbour opened in 1992.",
        "The botanic garden was founded in 1816. A tunnel opened in 1992. The harbour has two ferry wharves.",
    ]);
    let result = run(&f, &model, 4, 1000, 1).expect("run");
    assert_well_formed(&result, &model);
    let requests = model.requests.borrow();
    assert!(requests.len() >= 3, "evidence accumulated over rounds");
    let blobs = f.layer.commits().blobs();
    for (t, request) in requests.iter().enumerate() {
        assert_eq!(
            request.stable_context_prefix.as_bytes(),
            f.prepared.stable_context_prefix.as_bytes()
        );
        assert!(
            request
                .full_context()
                .starts_with(&f.prepared.stable_context_prefix)
        );
        // Round t carries exactly the evidence recovered in rounds 0..t, in order.
        let expected: Vec<&str> = result.rounds[..t]
            .iter()
            .flat_map(|r| r.recovered.iter().map(|c| c.chunk_id.as_str()))
            .collect();
        let got: Vec<&str> = request
            .appended_evidence
            .iter()
            .map(|e| e.chunk_id.as_str())
            .collect();
        assert_eq!(got, expected, "round {t}");
        for item in &request.appended_evidence {
            let exact = blobs.get(&item.content_hash).expect("blob");
            assert_eq!(item.text.as_bytes(), exact.as_slice(), "exact bytes");
        }
        if t > 0 {
            let before = &requests[t - 1];
            assert_eq!(
                &request.appended_evidence[..before.appended_evidence.len()],
                before.appended_evidence.as_slice(),
                "earlier evidence unchanged"
            );
            assert!(request.full_context().starts_with(&before.full_context()));
            assert_eq!(
                request.previous_output.as_deref(),
                Some(result.rounds[t - 1].output.as_str())
            );
        }
    }
}

#[test]
fn each_terminal_status_is_reached_alone() {
    let cases: Vec<(&str, usize, &str, usize, usize, FixedPointStatus)> = vec![
        (
            "supported",
            BUDGET,
            SUPPORTED,
            3,
            500,
            FixedPointStatus::Supported,
        ),
        (
            "no claims",
            BUDGET,
            "Hello! Could you say more?",
            3,
            500,
            FixedPointStatus::NoVerifiableClaims,
        ),
        (
            "nothing omitted",
            2000,
            "The moon is made of green cheese.",
            3,
            500,
            FixedPointStatus::NoOmittedEvidence,
        ),
        (
            "nothing relevant",
            BUDGET,
            "Zebras graze quietly on Jupiter.",
            3,
            500,
            FixedPointStatus::NoSupportingOmittedEvidence,
        ),
        (
            "budget zero",
            BUDGET,
            NEEDS_PARK,
            3,
            0,
            FixedPointStatus::RecoveryBudgetExhausted,
        ),
        (
            "budget too small",
            BUDGET,
            NEEDS_PARK,
            3,
            5,
            FixedPointStatus::RecoveryBudgetExhausted,
        ),
        (
            "one call",
            BUDGET,
            NEEDS_PARK,
            1,
            500,
            FixedPointStatus::MaxRoundsReached,
        ),
    ];
    for (name, budget, draft, max_rounds, recovery, expected) in cases {
        let f = fixture(ContextRiskMode::Strict, budget);
        let model = Scripted::new(&[draft]);
        let result = run(&f, &model, max_rounds, recovery, 2).expect(name);
        assert_eq!(result.status, expected, "{name}");
        assert_well_formed(&result, &model);
    }
}

#[test]
fn status_precedence_when_several_conditions_hold() {
    // Recovery budget zero and one call: the budget is reported, not the round bound.
    let f = fixture(ContextRiskMode::Strict, BUDGET);
    let model = Scripted::new(&[NEEDS_PARK]);
    let result = run(&f, &model, 1, 0, 2).expect("run");
    assert_eq!(result.status, FixedPointStatus::RecoveryBudgetExhausted);
    // Nothing relevant, budget zero and one call: nothing relevant wins.
    let model = Scripted::new(&["Zebras graze quietly on Jupiter."]);
    let result = run(&f, &model, 1, 0, 2).expect("run");
    assert_eq!(result.status, FixedPointStatus::NoSupportingOmittedEvidence);
    // Nothing omitted and nothing relevant: nothing omitted wins.
    let big = fixture(ContextRiskMode::Strict, 2000);
    let model = Scripted::new(&["Zebras graze quietly on Jupiter."]);
    let result = run(&big, &model, 1, 0, 2).expect("run");
    assert_eq!(result.status, FixedPointStatus::NoOmittedEvidence);
    // Found by probing: with nothing omitted it said "every omitted chunk is already recovered".
    assert!(
        result.rounds[0]
            .decision
            .contains("the selection omitted nothing"),
        "{}",
        result.rounds[0].decision
    );
    // The order is the documented one.
    assert_eq!(FixedPointStatus::PRECEDENCE[0], FixedPointStatus::Supported);
    assert_eq!(
        FixedPointStatus::PRECEDENCE[5],
        FixedPointStatus::MaxRoundsReached
    );
}

#[test]
fn every_terminal_status_returns_the_safe_output() {
    let bad = "The bridge opened to traffic in 1932. The moon is made of green cheese.";
    for (budget, max_rounds, recovery) in [(BUDGET, 3, 500), (BUDGET, 1, 500), (2000, 3, 500)] {
        let f = fixture(ContextRiskMode::Strict, budget);
        let model = Scripted::new(&[bad]);
        let result = run(&f, &model, max_rounds, recovery, 2).expect("run");
        assert_ne!(result.status, FixedPointStatus::Supported);
        let output = &result.final_output.output;
        assert!(output.contains("1932"), "supported claim kept: {output}");
        assert!(
            !output.contains("cheese"),
            "unsupported claim removed: {output}"
        );
        assert_eq!(result.final_output.claims_flagged, 1);
        let last = result.rounds.last().expect("a round");
        assert_eq!(output, &last.verified_output, "the last round's output");

        let audit = fixture(ContextRiskMode::Audit, budget);
        let model = Scripted::new(&[bad]);
        let result = run(&audit, &model, max_rounds, recovery, 2).expect("run");
        let output = &result.final_output.output;
        assert!(
            output.contains("cheese") && output.contains("[unverified"),
            "{output}"
        );
    }
}

#[test]
fn a_tampered_blob_raises_a_recovery_error_with_a_signed_artifact() {
    let f = fixture(ContextRiskMode::Strict, BUDGET);
    let entry = f
        .prepared
        .bundle
        .entries
        .iter()
        .find(|e| e.chunk_id == "city.md#L5-7")
        .expect("entry");
    let hash = &entry.content_hash;
    let path = f
        .layer
        .state_dir()
        .join("blobs")
        .join(&hash[..2])
        .join(&hash[2..]);
    std::fs::remove_file(&path).expect("remove blob");
    std::fs::write(&path, "The botanic garden was founded in 1999.").expect("tamper");
    let model = Scripted::new(&[NEEDS_PARK]);
    let error = run(&f, &model, 3, 500, 2).expect_err("tampered");
    let ProofError::Recovery(error) = error else {
        panic!("expected a recovery error, got {error}");
    };
    assert_eq!(model.calls(), 1);
    let artifact = &error.artifact.artifact;
    assert_eq!(artifact.kind, FailureKind::Recovery);
    assert_eq!(
        artifact.completed_rounds.len(),
        1,
        "the round that was called"
    );
    // Found by probing: the artifact said round 1, the round after the one that failed.
    assert_eq!(artifact.round, 0, "the round whose recovery failed");
    assert!(error.to_string().contains("failed in round 0"), "{error}");
    assert!(
        artifact.message.contains("city.md#L5-7"),
        "{}",
        artifact.message
    );
    let checked =
        proof_errors::verify_artifact(f.layer.state_dir(), &error.artifact.path).expect("signed");
    assert_eq!(&checked.artifact, artifact);
}

#[test]
fn a_fingerprint_mismatch_raises_a_recovery_error() {
    let mut f = fixture(ContextRiskMode::Strict, BUDGET);
    for chunk in &mut f.prepared.receipt.chunks {
        if chunk.chunk_id == "city.md#L5-7" {
            chunk.fingerprint = crate::digest::sha256_hex("something else");
        }
    }
    let model = Scripted::new(&[NEEDS_PARK]);
    let error = run(&f, &model, 3, 500, 2).expect_err("mismatch");
    assert!(
        matches!(&error, ProofError::Recovery(e) if e.artifact.artifact.message.contains("fingerprint")),
        "{error}"
    );
}

#[test]
fn a_changed_committed_context_raises_a_verification_error() {
    let mut f = fixture(ContextRiskMode::Strict, BUDGET);
    f.prepared.stable_context_prefix.push(' ');
    let model = Scripted::new(&[SUPPORTED]);
    let error = run(&f, &model, 3, 500, 2).expect_err("changed");
    let ProofError::Verification(error) = error else {
        panic!("expected a verification error, got {error}");
    };
    assert_eq!(error.artifact.artifact.stage, "context_integrity");
    proof_errors::verify_artifact(f.layer.state_dir(), &error.artifact.path).expect("signed");
}

#[test]
fn a_failing_or_panicking_callback_raises_a_model_error_keeping_earlier_rounds() {
    let f = fixture(ContextRiskMode::Strict, BUDGET);
    let mut calls = 0;
    let error = f
        .layer
        .run_fixed_point(
            &f.prepared,
            |_request| {
                calls += 1;
                if calls == 1 {
                    Ok(NEEDS_PARK.to_string())
                } else {
                    Err("connection reset".into())
                }
            },
            3,
            500,
            2,
        )
        .expect_err("fails");
    let ProofError::Model(error) = error else {
        panic!("expected a model error, got {error}");
    };
    let artifact = &error.artifact.artifact;
    assert_eq!(artifact.round, 1);
    assert_eq!(artifact.completed_rounds.len(), 1);
    assert_eq!(
        artifact.recovered.len(),
        1,
        "safely completed recovery kept"
    );
    assert!(artifact.message.contains("connection reset"));

    let error = f
        .layer
        .run_fixed_point(
            &f.prepared,
            |_request| -> Result<String, ModelCallError> { panic!("boom") },
            3,
            500,
            2,
        )
        .expect_err("panics");
    assert!(matches!(&error, ProofError::Model(e) if e.artifact.artifact.message.contains("boom")));
}

#[test]
fn zero_bounds_are_refused() {
    let f = fixture(ContextRiskMode::Strict, BUDGET);
    let model = Scripted::new(&[SUPPORTED]);
    assert!(matches!(
        run(&f, &model, 0, 500, 2),
        Err(ProofError::ZeroBound { .. })
    ));
    assert!(matches!(
        run(&f, &model, 3, 500, 0),
        Err(ProofError::ZeroBound { .. })
    ));
    assert_eq!(model.calls(), 0);
    assert!(matches!(
        f.layer.prepare(&docs(), QUERY, 0),
        Err(ProofError::ZeroBound { .. })
    ));
}

/// Generated documents of facts, a budget that omits some, and a model that mixes true facts
/// (sent or omitted), false ones and filler at random in every round: under every context-risk
/// mode and every witness profile the layer verifies with, what the final output asserts,
/// verified against the final context, is never less supported than the first draft.
///
/// What the output asserts: in strict mode, all of it (unsupported claims are removed); in
/// audit mode, what is left once every claim marked `[unverified: …]` or `[contradicted: …]`
/// is taken out, as a reader who heeds the marks would. Each mode must also have done its job:
/// audit output keeps the last draft's every word, strict output holds no sentence the last
/// draft did not.
#[test]
fn property_the_final_output_is_never_less_supported_than_the_first_draft() {
    let mut rng = SplitMix64::new(1414);
    for mode in [ContextRiskMode::Strict, ContextRiskMode::Audit] {
        let mut improved = 0;
        let mut marked = 0;
        for profile in Profile::ALL {
            for case in 0..12 {
                let outcome = generated_case(&mut rng, mode, profile);
                let label = format!("{} / {} case {case}", mode.as_str(), profile.as_str());
                assert!(
                    outcome.final_rate <= outcome.first_rate,
                    "{label}: final {:?} asserts {:?} ({}), less supported than the first draft {:?} ({})",
                    outcome.final_output,
                    outcome.asserted,
                    outcome.final_rate,
                    outcome.first_draft,
                    outcome.first_rate
                );
                match mode {
                    ContextRiskMode::Audit => {
                        let unmarked = strip_marks(&outcome.final_output).1;
                        assert_eq!(
                            words(&unmarked),
                            words(&outcome.last_draft),
                            "{label}: audit output keeps the draft's words"
                        );
                        marked += usize::from(outcome.final_output != outcome.last_draft);
                    }
                    ContextRiskMode::Strict => {
                        if outcome.final_output != WITHHELD_NOTICE {
                            for sentence in sentences(&outcome.final_output) {
                                assert!(
                                    outcome.last_draft.contains(&sentence),
                                    "{label}: {sentence:?} is not from the last draft {:?}",
                                    outcome.last_draft
                                );
                            }
                        }
                    }
                }
                if outcome.first_rate > 0.0 && outcome.status == FixedPointStatus::Supported {
                    improved += 1;
                }
            }
        }
        assert!(
            improved > 0,
            "{}: some generated runs recovered their way to supported",
            mode.as_str()
        );
        if mode == ContextRiskMode::Audit {
            assert!(marked > 0, "some audit outputs carry marks");
        }
    }
}

/// One generated run of the property above.
struct CaseOutcome {
    status: FixedPointStatus,
    first_draft: String,
    first_rate: f64,
    last_draft: String,
    final_output: String,
    asserted: String,
    final_rate: f64,
}

fn generated_case(rng: &mut SplitMix64, mode: ContextRiskMode, profile: Profile) -> CaseOutcome {
    const SUBJECTS: [&str; 8] = [
        "Aldren", "Borvik", "Caspel", "Dunmore", "Elsworth", "Fenwick", "Garrow", "Halden",
    ];
    const RELATIONS: [&str; 4] = [
        "was founded in",
        "has a population of",
        "lies",
        "is twinned with",
    ];
    let facts: Vec<String> = (0..8)
        .map(|i| {
            let relation = RELATIONS[rng.below(RELATIONS.len())];
            let object = match relation {
                "lies" => format!("{} kilometres from the sea", 10 + rng.below(400)),
                "is twinned with" => SUBJECTS[rng.below(SUBJECTS.len())].to_string(),
                _ => (1000 + rng.below(1000)).to_string(),
            };
            format!("The town of {} {relation} {object}.", SUBJECTS[i])
        })
        .collect();
    let docs: Vec<(String, String)> = facts
        .chunks(2)
        .enumerate()
        .map(|(i, pair)| {
            (
                format!("towns{i}.md"),
                format!(
                    "# Towns {i}\n\n## First\n\n{}\n\n## Second\n\n{}\n",
                    pair[0], pair[1]
                ),
            )
        })
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let layer = VerifiedEfficiencyLayer::new(dir.path(), mode).with_profile(profile);
    let query = format!("Tell me about the town of {}.", SUBJECTS[rng.below(8)]);
    let prepared = layer
        .prepare(&docs, &query, 40 + rng.below(80))
        .expect("prepare");
    let mut draft_rng = SplitMix64::new(rng.next_u64());
    let mut drafts: Vec<String> = Vec::new();
    let result = layer
        .run_fixed_point(
            &prepared,
            |_request| {
                let mut sentences = Vec::new();
                for _ in 0..1 + draft_rng.below(3) {
                    sentences.push(match draft_rng.below(3) {
                        0 | 1 => facts[draft_rng.below(facts.len())].clone(),
                        _ => format!(
                            "The town of {} was founded in {}.",
                            SUBJECTS[draft_rng.below(8)],
                            2100 + draft_rng.below(50)
                        ),
                    });
                }
                let draft = sentences.join(" ");
                drafts.push(draft.clone());
                Ok(draft)
            },
            1 + rng.below(4),
            rng.below(200),
            1 + rng.below(3),
        )
        .expect("run");
    assert_eq!(drafts.len(), result.rounds.len(), "one call per round");
    let first = &result.rounds[0];
    let final_context = render_final_context(&prepared, &result, &layer);
    let final_output = result.final_output.output.clone();
    let asserted = match mode {
        ContextRiskMode::Audit => strip_marks(&final_output).0,
        ContextRiskMode::Strict => final_output.clone(),
    };
    // The withheld notice asserts nothing: no claim of it can be unsupported.
    let final_rate = if asserted == WITHHELD_NOTICE || asserted.trim().is_empty() {
        0.0
    } else {
        verify::check(&asserted, &final_context, Some(&query), profile).unsupported_claim_rate()
    };
    CaseOutcome {
        status: result.status,
        first_draft: first.output.clone(),
        first_rate: first.unsupported_claim_rate,
        last_draft: drafts.last().cloned().unwrap_or_default(),
        final_output,
        asserted,
        final_rate,
    }
}

/// An audit output split two ways: (the text without the marked claims, the text without the
/// marks only). A mark (` [unverified: …]`, ` [contradicted: …]`) follows the claim it marks.
fn strip_marks(output: &str) -> (String, String) {
    let mut kept = String::new();
    let mut unmarked = String::new();
    let mut rest = output;
    loop {
        let next = ["[unverified: ", "[contradicted: "]
            .iter()
            .filter_map(|tag| rest.find(tag))
            .min();
        let Some(at) = next else {
            kept.push_str(rest);
            unmarked.push_str(rest);
            break;
        };
        let claim = &rest[..at];
        unmarked.push_str(claim);
        // The marked claim is the last sentence before the mark.
        let sentence_start = claim
            .trim_end()
            .trim_end_matches('.')
            .rfind(". ")
            .map_or(0, |i| i + 2);
        kept.push_str(&claim[..sentence_start]);
        let close = rest[at..].find(']').map_or(rest.len(), |i| at + i + 1);
        rest = &rest[close..];
    }
    (kept, unmarked)
}

fn words(text: &str) -> Vec<&str> {
    text.split_whitespace().collect()
}

/// The generated drafts' sentences: each ends with a full stop.
fn sentences(text: &str) -> Vec<String> {
    text.split_inclusive(". ")
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

fn render_final_context(
    prepared: &Prepared,
    result: &FixedPointResult,
    layer: &VerifiedEfficiencyLayer,
) -> String {
    let evidence: Vec<EvidenceItem> = result
        .rounds
        .iter()
        .flat_map(|r| &r.recovered)
        .map(|c| EvidenceItem {
            chunk_id: c.chunk_id.clone(),
            source: c.source.clone(),
            recovered_in_round: 0,
            content_hash: c.content_hash.clone(),
            text: String::from_utf8(layer.commits().blobs().get(&c.content_hash).expect("blob"))
                .expect("utf-8"),
        })
        .collect();
    crate::proof::round::render_context(&prepared.stable_context_prefix, &evidence)
}
