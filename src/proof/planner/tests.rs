use super::*;
use crate::rng::SplitMix64;

fn brute_force(items: &[Item], capacity: usize, max_items: usize) -> f64 {
    let mut best = 0.0f64;
    for set in 0u32..(1 << items.len()) {
        if set.count_ones() as usize > max_items {
            continue;
        }
        let (tokens, value) = items
            .iter()
            .enumerate()
            .filter(|(i, _)| set & (1 << i) != 0)
            .fold((0usize, 0.0f64), |(t, v), (_, item)| {
                (t + item.tokens, v + item.value)
            });
        if tokens <= capacity && value > best {
            best = value;
        }
    }
    best
}

fn value_of(items: &[Item], set: u128) -> (usize, f64, u32) {
    items
        .iter()
        .enumerate()
        .filter(|(i, _)| set & (1u128 << i) != 0)
        .fold((0, 0.0, 0), |(t, v, c), (_, item)| {
            (t + item.tokens, v + item.value, c + 1)
        })
}

#[test]
fn knapsack_equals_brute_force_on_random_instances() {
    let mut rng = SplitMix64::new(14);
    for case in 0..600 {
        let n = 1 + rng.below(12);
        let items: Vec<Item> = (0..n)
            .map(|_| Item {
                tokens: 1 + rng.below(60),
                // Some cases use few distinct values so ties are common.
                value: if case % 3 == 0 {
                    (1 + rng.below(4)) as f64 * 0.25
                } else {
                    rng.unit() * 3.0
                },
            })
            .collect();
        let capacity = rng.below(200);
        let max_items = rng.below(n + 2);
        let set = knapsack(&items, capacity, max_items);
        let (tokens, value, count) = value_of(&items, set);
        assert!(tokens <= capacity, "case {case}: over capacity");
        assert!(
            count as usize <= max_items,
            "case {case}: over the count bound"
        );
        let best = brute_force(&items, capacity, max_items);
        assert!(
            (value - best).abs() < 1e-6,
            "case {case}: dp {value} vs brute force {best} ({items:?}, cap {capacity}, k {max_items})"
        );
        assert_eq!(knapsack(&items, capacity, max_items), set, "deterministic");
    }
}

#[test]
fn knapsack_prefers_fewer_tokens_among_equal_values() {
    let items = [
        Item {
            tokens: 30,
            value: 1.0,
        },
        Item {
            tokens: 10,
            value: 1.0,
        },
    ];
    assert_eq!(knapsack(&items, 100, 1), 0b10);
    assert_eq!(knapsack(&items, 5, 2), 0);
    assert_eq!(knapsack(&items, 100, 0), 0);
}

fn obligation(claim: &str, risk: f64) -> Obligation {
    Obligation {
        claim_index: 0,
        claim: claim.to_string(),
        label: "unsupported".to_string(),
        risk,
        terms: terms(claim),
        missing: Vec::new(),
    }
}

#[test]
fn plan_selects_the_covering_chunk_and_explains_every_candidate() {
    let a = terms("The bridge was finished in 1932 by the Harbour Trust.");
    let b = terms("Opening day drew a crowd of 750000 people.");
    let c = terms("Unrelated text about cheese.");
    let chunks = [
        ChunkTerms {
            chunk_id: "doc#a",
            receipt_token_count: 20,
            terms: &a,
        },
        ChunkTerms {
            chunk_id: "doc#b",
            receipt_token_count: 15,
            terms: &b,
        },
        ChunkTerms {
            chunk_id: "doc#c",
            receipt_token_count: 5,
            terms: &c,
        },
    ];
    let obligations = [obligation("The bridge was finished in 1932.", 1.0)];
    let plan = plan(
        &obligations,
        &terms("When was the bridge finished?"),
        &chunks,
        100,
        1,
    );
    assert_eq!(plan.selected, vec!["doc#a".to_string()]);
    assert_eq!(plan.chunks_scored, 3);
    // doc#c covers nothing: not a candidate at all.
    assert!(plan.candidates.iter().all(|c| c.chunk_id != "doc#c"));
    let first = &plan.candidates[0];
    assert_eq!(first.decision, CandidateDecision::Selected);
    assert!(first.query_prior > 0.0 && first.query_prior <= QUERY_PRIOR_WEIGHT);

    let tight = super::plan(&obligations, &[], &chunks, 10, 1);
    assert!(tight.selected.is_empty());
    assert!(tight.has_supporting());
    assert!(
        tight
            .candidates
            .iter()
            .all(|c| c.decision == CandidateDecision::OverBudget)
    );
}

#[test]
fn plan_caps_the_knapsack_at_128_candidates() {
    let owned: Vec<Vec<String>> = (0..200)
        .map(|i| terms(&format!("alpha beta gamma item{i}")))
        .collect();
    let ids: Vec<String> = (0..200).map(|i| format!("c{i:03}")).collect();
    let chunks: Vec<ChunkTerms<'_>> = owned
        .iter()
        .zip(&ids)
        .map(|(t, id)| ChunkTerms {
            chunk_id: id,
            receipt_token_count: 10,
            terms: t,
        })
        .collect();
    let plan = plan(&[obligation("alpha beta", 1.0)], &[], &chunks, 1000, 3);
    let beyond = plan
        .candidates
        .iter()
        .filter(|c| c.decision == CandidateDecision::BeyondCandidateLimit)
        .count();
    assert_eq!(beyond, 200 - MAX_CANDIDATES);
    assert_eq!(plan.selected.len(), 3);
    assert_eq!(plan.selected_tokens, 30);
}
