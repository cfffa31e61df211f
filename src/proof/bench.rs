//! The planner figure behind `svc bench --group proof`: time per round of
//! [`super::planner::plan`] (scoring every omitted chunk, then the exact knapsack over the 128
//! highest-utility candidates) at a 100k-token recovery budget.

use std::time::Instant;

use super::planner::{self, ChunkTerms, MAX_CANDIDATES, Obligation};
use crate::bench::Figure;
use crate::rng::SplitMix64;

/// Omitted chunks per generated round: more than [`MAX_CANDIDATES`] cover the obligations, so
/// the candidate cap is exercised.
const CHUNKS: usize = 400;
const BUDGET: usize = 100_000;
/// Chunks per round: with chunks of 500 to 12,000 tokens, 16 of them can exceed the budget, so
/// both the count bound and the budget bind.
const MAX_CHUNKS: usize = 16;
const VOCABULARY: usize = 2000;

struct Case {
    obligations: Vec<Obligation>,
    query: Vec<String>,
    chunks: Vec<(String, usize, Vec<String>)>,
}

fn word(rng: &mut SplitMix64) -> String {
    format!("term{}", rng.below(VOCABULARY))
}

fn sorted(mut terms: Vec<String>) -> Vec<String> {
    terms.sort();
    terms.dedup();
    terms
}

fn case(seed: u64) -> Case {
    let mut rng = SplitMix64::new(seed);
    let obligations: Vec<Obligation> = (0..6)
        .map(|i| Obligation {
            claim_index: i,
            claim: String::new(),
            label: "unsupported".to_string(),
            risk: 0.2 + 0.8 * rng.unit(),
            terms: sorted((0..6).map(|_| format!("term{}", rng.below(200))).collect()),
            missing: Vec::new(),
        })
        .collect();
    let query = sorted((0..5).map(|_| word(&mut rng)).collect());
    let chunks = (0..CHUNKS)
        .map(|i| {
            // Obligation terms come from a small range so most chunks cover some.
            let mut terms: Vec<String> = (0..60).map(|_| word(&mut rng)).collect();
            terms.extend((0..8).map(|_| format!("term{}", rng.below(200))));
            (
                format!("doc{}.md#L{}-{}", i / 10, i * 10, i * 10 + 9),
                500 + rng.below(11_500),
                sorted(terms),
            )
        })
        .collect();
    Case {
        obligations,
        query,
        chunks,
    }
}

/// Median milliseconds per planner round over `rounds` generated rounds.
pub fn planner_figure(rounds: usize) -> Figure {
    let rounds = rounds.max(1);
    let cases: Vec<Case> = (0..rounds as u64).map(|seed| case(seed + 1)).collect();
    let mut times = Vec::with_capacity(rounds);
    let mut entered = 0usize;
    let mut selected = 0usize;
    for case in &cases {
        let chunks: Vec<ChunkTerms<'_>> = case
            .chunks
            .iter()
            .map(|(id, tokens, terms)| ChunkTerms {
                chunk_id: id,
                receipt_token_count: *tokens,
                terms,
            })
            .collect();
        let started = Instant::now();
        let plan = planner::plan(&case.obligations, &case.query, &chunks, BUDGET, MAX_CHUNKS);
        times.push(started.elapsed().as_secs_f64() * 1000.0);
        entered += plan
            .candidates
            .iter()
            .filter(|c| c.decision != planner::CandidateDecision::BeyondCandidateLimit)
            .count()
            .min(MAX_CANDIDATES);
        selected += plan.selected.len();
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    let worst = times[times.len() - 1];
    Figure {
        name: "proof planner".to_string(),
        value: median,
        unit: "ms/round".to_string(),
        target: Some("<= 5".to_string()),
        detail: format!(
            "median of {rounds} rounds (max {worst:.2} ms); {CHUNKS} omitted chunks, {} candidates in the knapsack on average, budget {BUDGET} tokens, <= {MAX_CHUNKS} chunks/round ({} chosen on average)",
            entered / rounds,
            selected / rounds
        ),
    }
}
