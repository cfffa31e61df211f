//! The recovery planner (SPEC §3.3): which omitted chunks to recover for the open proof
//! obligations of a draft, within the remaining recovery budget and the per-round chunk bound.
//!
//! A chunk's value is `Σ_c claim_risk(c) × lexical_coverage(c, chunk)` over the open claims plus
//! a small query-alignment prior. The value of a set is the sum of its chunks' values: coverage
//! of one claim by two chunks is counted twice, which over-values redundant chunks but keeps the
//! objective additive, so the choice is an exact knapsack rather than a heuristic cover.
//!
//! Only chunks that cover at least one obligation term are candidates (the prior alone never
//! justifies recovery); only candidates that fit the remaining budget on their own enter the
//! knapsack, and of those the [`MAX_CANDIDATES`] with the highest utility (value, then fewer
//! tokens, then chunk id). The knapsack is a 0/1 knapsack with a count bound, solved exactly
//! by dynamic programming over Pareto fronts (Nemhauser–Ullmann): for each count k the front
//! holds the non-dominated (tokens, value) sets of at most k chunks. Its work grows with the
//! front sizes, not with the budget, so a 100k-token budget costs no more than a 1k one.
//!
//! The estimate is lexical: it misses paraphrases and cross-lingual evidence (SPEC §3.3).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// Planner work per round (SPEC §8): at most this many candidates enter the knapsack. The
/// chosen set is held as a `u128` bit mask, one bit per candidate.
pub const MAX_CANDIDATES: usize = 128;
/// Weight of the query-alignment prior: the share of query terms a chunk holds, times this.
/// Small, so it only breaks near-ties between chunks that cover the obligations equally.
pub const QUERY_PRIOR_WEIGHT: f64 = 0.05;
/// Lowest risk of an unsupported claim: a claim the verifier scored high but not high enough is
/// still an open obligation.
pub const MIN_CLAIM_RISK: f64 = 0.2;
/// Weight, in lexical coverage, of an obligation term the context already holds (a missing one
/// weighs 1): a chunk repeating what was sent adds little.
pub const PRESENT_TERM_WEIGHT: f64 = 0.25;
/// Values closer than this are equal (sums of floats in another order differ in the last bits).
const EPSILON: f64 = 1e-9;

/// One open proof obligation: a verifiable claim of the draft that is not supported.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Obligation {
    /// Index of the claim in the draft's verification.
    pub claim_index: usize,
    pub claim: String,
    /// `unsupported` or `contradicted`.
    pub label: String,
    /// In (0, 1]: 1 for a contradicted claim, else `1 - support score` (at least
    /// [`MIN_CLAIM_RISK`]).
    pub risk: f64,
    /// Normalised content terms evidence must hold to support the claim (sorted): the claim's,
    /// and for a short answer read against the question, the question's too.
    pub terms: Vec<String>,
    /// Those of `terms` the context so far lacks (sorted). A chunk supports the obligation only
    /// if it holds one of them (any of `terms` when none is missing); held terms the context
    /// already has count [`PRESENT_TERM_WEIGHT`] in the coverage.
    #[serde(default)]
    pub missing: Vec<String>,
}

/// A chunk the planner may recover: its cost and its normalised content terms.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkTerms<'a> {
    pub chunk_id: &'a str,
    pub receipt_token_count: usize,
    /// Sorted, deduplicated normalised content terms of the chunk's exact bytes.
    pub terms: &'a [String],
}

/// How one chunk scored and what the planner did with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CandidateScore {
    pub chunk_id: String,
    pub receipt_token_count: usize,
    /// `Σ risk × coverage` over the obligations.
    pub coverage_value: f64,
    /// Query-alignment prior.
    pub query_prior: f64,
    /// `coverage_value + query_prior`: the knapsack value.
    pub value: f64,
    pub decision: CandidateDecision,
}

/// The fate of a scored chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateDecision {
    /// Chosen by the knapsack.
    Selected,
    /// In the knapsack, not chosen.
    NotChosen,
    /// Alone larger than the remaining recovery budget.
    OverBudget,
    /// Below the [`MAX_CANDIDATES`] highest-utility candidates.
    BeyondCandidateLimit,
}

/// The planner's answer for one round.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Chunks covering at least one obligation term, best value first.
    pub candidates: Vec<CandidateScore>,
    /// Chosen chunk ids, in candidate order.
    pub selected: Vec<String>,
    pub selected_tokens: usize,
    pub selected_value: f64,
    /// Omitted chunks scored (supporting or not).
    pub chunks_scored: usize,
    pub remaining_budget: usize,
    pub max_chunks: usize,
}

impl Plan {
    /// Whether any omitted chunk overlaps the obligations.
    pub fn has_supporting(&self) -> bool {
        !self.candidates.is_empty()
    }
}

/// Normalised content terms of `text`, sorted and deduplicated: the witness's own tokens
/// (lower-case, stemmed, numbers folded), stop words dropped.
pub fn terms(text: &str) -> Vec<String> {
    let set: BTreeSet<String> = crate::witness::text::tokenize(text)
        .into_iter()
        .filter(|t| t.is_content())
        .map(|t| t.norm)
        .collect();
    set.into_iter().collect()
}

/// Share of `needles` found in the sorted `haystack`.
fn coverage(needles: &[String], haystack: &[String]) -> f64 {
    if needles.is_empty() {
        return 0.0;
    }
    let found = needles
        .iter()
        .filter(|t| haystack.binary_search(t).is_ok())
        .count();
    found as f64 / needles.len() as f64
}

/// `(supports, weighted coverage)` of `obligation` by a chunk's sorted `terms`.
fn obligation_coverage(obligation: &Obligation, terms: &[String]) -> (bool, f64) {
    let has = |t: &String| terms.binary_search(t).is_ok();
    let supports = if obligation.missing.is_empty() {
        obligation.terms.iter().any(has)
    } else {
        obligation.missing.iter().any(has)
    };
    if !supports || obligation.terms.is_empty() {
        return (false, 0.0);
    }
    let weight = |t: &String| {
        if obligation.missing.binary_search(t).is_ok() || obligation.missing.is_empty() {
            1.0
        } else {
            PRESENT_TERM_WEIGHT
        }
    };
    let total: f64 = obligation.terms.iter().map(weight).sum();
    let held: f64 = obligation.terms.iter().filter(|t| has(t)).map(weight).sum();
    (true, held / total)
}

/// Scores every chunk against the obligations and solves the knapsack.
pub fn plan(
    obligations: &[Obligation],
    query_terms: &[String],
    chunks: &[ChunkTerms<'_>],
    remaining_budget: usize,
    max_chunks: usize,
) -> Plan {
    let mut candidates: Vec<CandidateScore> = chunks
        .iter()
        .filter_map(|chunk| {
            let mut supports = false;
            let mut coverage_value = 0.0;
            for obligation in obligations {
                let (supported, covered) = obligation_coverage(obligation, chunk.terms);
                supports |= supported;
                coverage_value += obligation.risk * covered;
            }
            if !supports || coverage_value <= 0.0 {
                return None;
            }
            let query_prior = QUERY_PRIOR_WEIGHT * coverage(query_terms, chunk.terms);
            Some(CandidateScore {
                chunk_id: chunk.chunk_id.to_string(),
                receipt_token_count: chunk.receipt_token_count,
                coverage_value,
                query_prior,
                value: coverage_value + query_prior,
                decision: CandidateDecision::NotChosen,
            })
        })
        .collect();
    candidates.sort_by(|a, b| {
        b.value
            .total_cmp(&a.value)
            .then(a.receipt_token_count.cmp(&b.receipt_token_count))
            .then_with(|| a.chunk_id.cmp(&b.chunk_id))
    });
    let mut entered: Vec<usize> = Vec::new();
    for (i, candidate) in candidates.iter_mut().enumerate() {
        if candidate.receipt_token_count > remaining_budget {
            candidate.decision = CandidateDecision::OverBudget;
        } else if entered.len() >= MAX_CANDIDATES {
            candidate.decision = CandidateDecision::BeyondCandidateLimit;
        } else {
            entered.push(i);
        }
    }
    let items: Vec<Item> = entered
        .iter()
        .map(|&i| Item {
            tokens: candidates[i].receipt_token_count,
            value: candidates[i].value,
        })
        .collect();
    let chosen = knapsack(&items, remaining_budget, max_chunks);
    let mut selected = Vec::new();
    let mut selected_tokens = 0;
    let mut selected_value = 0.0;
    for (bit, &i) in entered.iter().enumerate() {
        if chosen & (1u128 << bit) != 0 {
            candidates[i].decision = CandidateDecision::Selected;
            selected.push(candidates[i].chunk_id.clone());
            selected_tokens += candidates[i].receipt_token_count;
            selected_value += candidates[i].value;
        }
    }
    Plan {
        candidates,
        selected,
        selected_tokens,
        selected_value,
        chunks_scored: chunks.len(),
        remaining_budget,
        max_chunks,
    }
}

/// A knapsack item.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Item {
    pub tokens: usize,
    pub value: f64,
}

#[derive(Debug, Clone, Copy)]
struct State {
    tokens: usize,
    value: f64,
    count: u32,
    set: u128,
}

/// Exact 0/1 knapsack with a count bound: the set of at most `max_items` items (at most
/// [`MAX_CANDIDATES`] items are considered; later ones are ignored) with the largest total value
/// whose tokens sum to at most `capacity`. Returns the set as a bit mask. Among sets of equal
/// value the one with fewer tokens wins, then fewer items, then the smaller mask, so the answer
/// is deterministic.
///
/// Items are taken in descending value. A partial set is dropped when even the most valuable
/// items still to come, as many as its count allows, cannot lift it to the best complete set
/// known (a greedy fill at first): such a set can never become the answer, so the result stays
/// exact while the fronts stay small.
pub fn knapsack(items: &[Item], capacity: usize, max_items: usize) -> u128 {
    let items = &items[..items.len().min(MAX_CANDIDATES)];
    let bound = max_items.min(items.len());
    if bound == 0 {
        return 0;
    }
    let mut order: Vec<usize> = (0..items.len())
        .filter(|&i| items[i].tokens <= capacity && items[i].value > 0.0)
        .collect();
    order.sort_by(|&a, &b| items[b].value.total_cmp(&items[a].value).then(a.cmp(&b)));
    // suffix[p]: values of order[p..], for the bound on what a partial set can still gain.
    let values: Vec<f64> = order.iter().map(|&i| items[i].value).collect();
    let gain_bound = |position: usize, slots: usize| -> f64 {
        values[position.min(values.len())..]
            .iter()
            .take(slots)
            .sum()
    };
    let mut floor = {
        let (mut tokens, mut value, mut count) = (0usize, 0.0f64, 0usize);
        for &i in &order {
            if count < bound && tokens + items[i].tokens <= capacity {
                tokens += items[i].tokens;
                value += items[i].value;
                count += 1;
            }
        }
        value
    };
    let empty = State {
        tokens: 0,
        value: 0.0,
        count: 0,
        set: 0,
    };
    // fronts[k]: non-dominated sets of at most k items.
    let mut fronts: Vec<Vec<State>> = vec![vec![empty]; bound + 1];
    for (position, &i) in order.iter().enumerate() {
        let item = items[i];
        // Descending k: fronts[k - 1] still excludes item i when fronts[k] extends it.
        for k in (1..=bound).rev() {
            let extended: Vec<State> = fronts[k - 1]
                .iter()
                .filter(|s| s.tokens + item.tokens <= capacity)
                .map(|s| State {
                    tokens: s.tokens + item.tokens,
                    value: s.value + item.value,
                    count: s.count + 1,
                    set: s.set | (1u128 << i),
                })
                .collect();
            if extended.is_empty() {
                continue;
            }
            let mut merged = std::mem::take(&mut fronts[k]);
            merged.extend(extended);
            fronts[k] = pareto(merged);
        }
        if let Some(best) = fronts[bound].iter().map(|s| s.value).reduce(f64::max) {
            floor = floor.max(best);
        }
        let next = position + 1;
        for front in &mut fronts {
            front.retain(|s| {
                s.value + gain_bound(next, bound - s.count as usize) >= floor - EPSILON
            });
        }
    }
    fronts[bound]
        .iter()
        .copied()
        .reduce(|best, s| if better(&s, &best) { s } else { best })
        .map_or(0, |s| s.set)
}

/// Whether `a` is a better final answer than `b` (see [`knapsack`]).
fn better(a: &State, b: &State) -> bool {
    if (a.value - b.value).abs() > EPSILON {
        return a.value > b.value;
    }
    (a.tokens, a.count, a.set) < (b.tokens, b.count, b.set)
}

/// The states no other state beats on both tokens (fewer) and value (more), cheapest first.
fn pareto(mut states: Vec<State>) -> Vec<State> {
    states.sort_by(|a, b| {
        a.tokens
            .cmp(&b.tokens)
            .then(b.value.total_cmp(&a.value))
            .then(a.count.cmp(&b.count))
            .then(a.set.cmp(&b.set))
    });
    let mut front: Vec<State> = Vec::with_capacity(states.len());
    for state in states {
        match front.last() {
            Some(last) if state.value <= last.value + EPSILON => {}
            _ => front.push(state),
        }
    }
    front
}

#[cfg(test)]
mod tests;
