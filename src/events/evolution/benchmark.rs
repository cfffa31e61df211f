//! The benchmark of a skill: replay recorded queries through the real selector over each
//! run's committed context, once as recorded and once with the skill applied, and count the
//! misses (chunks the run needed, i.e. recovered, that were not sent in full).
//!
//! The corpus of a run is rebuilt from its commit: every fragment's exact bytes are recovered
//! (hash-checked) and each file is the concatenation of its fragments in line order (fragments
//! partition a file by whole lines), so the selector sees what it saw when the run was made.
//!
//! A skill passes when the misses drop overall and nothing worsens: no query gets more misses,
//! no query's selection fails (pinned chunks over its budget), and no strongly relevant chunk
//! the recorded selection sent in full (score at least [`STRONG_SHARE`] of the best) is pushed
//! out of full resolution.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::gaps::Observation;
use super::skills::Skill;
use crate::context::CommitStore;
use crate::context::commit::{ContextReceipt, Resolution};
use crate::context::index::Index;
use crate::context::select::{self, SelectOptions, Selection};

/// A chunk the recorded selection sent in full and scored at least this share of the best
/// score must stay in full with the skill.
pub const STRONG_SHARE: f64 = 0.5;

/// One replayed query.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryReplay {
    pub observation: String,
    pub misses_without: usize,
    pub misses_with: usize,
    /// Why this query got worse with the skill, when it did.
    pub worsened: Option<String>,
}

/// The result of a benchmark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BenchmarkResult {
    /// Queries replayed.
    pub queries: usize,
    /// Whether the replayed queries were all left out of synthesis.
    pub held_out: bool,
    pub misses_without: usize,
    pub misses_with: usize,
    /// Queries that got worse.
    pub worsened: usize,
    pub passed: bool,
    /// Why it passed or failed, in words.
    pub verdict: String,
    pub per_query: Vec<QueryReplay>,
    /// Observations that could not be replayed (commit gone, no query), with the reason.
    pub skipped: Vec<String>,
}

/// A run's corpus and recorded selection parameters, rebuilt from its commit.
struct Replayable {
    index: Index,
    query: String,
    budget: usize,
    pinned: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
enum ReplayError {
    #[error("{0}")]
    Commit(#[from] crate::context::CommitError),
    #[error("{0}")]
    Select(#[from] select::SelectError),
    #[error("its receipt has no {0} parameter (not a selection commit)")]
    Parameter(&'static str),
}

fn rebuild(store: &CommitStore, receipt: &ContextReceipt) -> Result<Replayable, ReplayError> {
    let parameters = &receipt.parameters;
    let query = parameters
        .get("query")
        .and_then(|q| q.as_str())
        .ok_or(ReplayError::Parameter("query"))?
        .to_string();
    let budget = parameters
        .get("budget")
        .and_then(|b| b.as_u64())
        .ok_or(ReplayError::Parameter("budget"))? as usize;
    let pinned = parameters
        .get("pinned")
        .and_then(|p| p.as_array())
        .map(|items| {
            items
                .iter()
                .filter_map(|p| p.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    let docs = store.documents(receipt)?;
    Ok(Replayable {
        index: Index::from_documents(&docs),
        query,
        budget,
        pinned,
    })
}

fn misses(selection: &Selection, needed: &[&str]) -> usize {
    needed
        .iter()
        .filter(|id| {
            selection
                .entry(id)
                .is_none_or(|e| e.resolution != Some(Resolution::Full))
        })
        .count()
}

/// Replays `observations` with and without `skill` (see the module docs).
pub fn run(
    store: &CommitStore,
    skill: &Skill,
    observations: &[&Observation],
    held_out: bool,
) -> BenchmarkResult {
    let mut cache: HashMap<String, Result<Replayable, String>> = HashMap::new();
    let mut per_query = Vec::new();
    let mut skipped = Vec::new();
    for observation in observations {
        let replayable = cache.entry(observation.ctx_id.clone()).or_insert_with(|| {
            store
                .receipt(&observation.ctx_id)
                .map_err(ReplayError::from)
                .and_then(|receipt| rebuild(store, &receipt))
                .map_err(|e| e.to_string())
        });
        let replayable = match replayable {
            Ok(r) => &*r,
            Err(reason) => {
                skipped.push(format!("{}: {reason}", observation.id));
                continue;
            }
        };
        let needed: Vec<&str> = observation
            .recovered
            .iter()
            .map(|(id, _)| id.as_str())
            .collect();
        let options = SelectOptions {
            pinned: replayable.pinned.clone(),
            ..SelectOptions::default()
        };
        let query = observation.query.as_deref().unwrap_or(&replayable.query);
        let without = match select::select(&replayable.index, query, replayable.budget, &options) {
            Ok(selection) => selection,
            Err(e) => {
                skipped.push(format!(
                    "{}: the recorded selection fails: {e}",
                    observation.id
                ));
                continue;
            }
        };
        let known = |id: &str| without.entry(id).is_some();
        let applied = skill.apply(query, &options, &known);
        let misses_without = misses(&without, &needed);
        let (misses_with, worsened) =
            match select::select(&replayable.index, query, replayable.budget, &applied) {
                Err(e) => (misses_without, Some(format!("selection fails: {e}"))),
                Ok(with) => {
                    let misses_with = misses(&with, &needed);
                    let best = without.manifest.first().map_or(0.0, |e| e.score);
                    let displaced = without.manifest.iter().find(|e| {
                        e.resolution == Some(Resolution::Full)
                            && e.score >= STRONG_SHARE * best
                            && best > 0.0
                            && with
                                .entry(&e.chunk_id)
                                .is_none_or(|w| w.resolution != Some(Resolution::Full))
                    });
                    let worsened = if misses_with > misses_without {
                        Some(format!("misses rose {misses_without} -> {misses_with}"))
                    } else {
                        displaced.map(|e| {
                            format!(
                                "{} (score {:.2}) is no longer sent in full",
                                e.chunk_id, e.score
                            )
                        })
                    };
                    (misses_with, worsened)
                }
            };
        per_query.push(QueryReplay {
            observation: observation.id.clone(),
            misses_without,
            misses_with,
            worsened,
        });
    }
    let misses_without: usize = per_query.iter().map(|q| q.misses_without).sum();
    let misses_with: usize = per_query.iter().map(|q| q.misses_with).sum();
    let worsened = per_query.iter().filter(|q| q.worsened.is_some()).count();
    let (passed, verdict) = if per_query.is_empty() {
        (false, "no query could be replayed".to_string())
    } else if worsened > 0 {
        (false, format!("{worsened} quer(ies) got worse"))
    } else if misses_with >= misses_without {
        (
            false,
            format!("misses did not drop ({misses_without} -> {misses_with})"),
        )
    } else {
        (
            true,
            format!("misses dropped {misses_without} -> {misses_with} and nothing got worse"),
        )
    };
    BenchmarkResult {
        queries: per_query.len(),
        held_out,
        misses_without,
        misses_with,
        worsened,
        passed,
        verdict,
        per_query,
        skipped,
    }
}
