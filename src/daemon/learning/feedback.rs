//! Online learning from fixed-point runs: a chunk the loop had to recover was evidence the
//! selection needed and ranked too low. Each one is a pairwise preference (the recovered chunk
//! over the fully sent chunks that out-ranked it), and the weights take one bounded
//! perceptron step towards ranking it higher:
//!
//! `w_k += RATE × range_k × (φ_k(recovered) − mean φ_k(out-rankers)) / best score`
//!
//! where `φ_k` is the evidence the weight multiplies ([`Evidence::along`]). Dividing by the
//! query's best score makes a step independent of how large BM25 scores run for a query; the
//! range makes it independent of each weight's scale; the clamp keeps every weight in bounds.
//! Only ranking weights move (knapsack values are for `autotune`).

use std::collections::HashMap;
use std::path::Path;

use crate::context::commit::{CommitError, CommitStore, Resolution};
use crate::context::index::Index;
use crate::context::terms::{Evidence, score_with};
use crate::context::weights::{Feature, RankingWeights};
use crate::events::evolution::gaps::{self, GapError};

use super::store::{self, StoreError, WeightsFile, WeightsSource};

/// Share of a weight's range one fully contrary preference moves it.
pub const RATE: f64 = 0.02;

#[derive(Debug, thiserror::Error)]
pub enum FeedbackError {
    #[error(transparent)]
    Runs(#[from] GapError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What one pass learned.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct FeedbackReport {
    pub outcomes_read: u64,
    pub recovered_chunks_used: u64,
    pub recovered_chunks_skipped: u64,
    /// Runs whose commit could not be read: not marked learned, read again next time.
    pub runs_deferred: u64,
    /// Why chunks were skipped (commit gone, chunk not re-found, ...), one line each.
    pub skipped: Vec<String>,
    pub version_before: u64,
    pub version_after: u64,
    pub weights_before: RankingWeights,
    pub weights_after: RankingWeights,
}

/// One pairwise step for a recovered chunk given the evidence of the chunks that out-ranked it.
pub fn step(
    weights: &mut RankingWeights,
    recovered: &Evidence,
    out_rankers: &[Evidence],
    best_score: f64,
) {
    if out_rankers.is_empty() || best_score <= 0.0 {
        return;
    }
    for feature in Feature::ALL.into_iter().filter(|f| f.is_ranking()) {
        let mean =
            out_rankers.iter().map(|e| e.along(feature)).sum::<f64>() / out_rankers.len() as f64;
        let gradient = ((recovered.along(feature) - mean) / best_score).clamp(-1.0, 1.0);
        if gradient == 0.0 {
            continue;
        }
        let (low, high) = feature.bounds();
        // The record prior is a factor: it rises when record files were needed and falls when
        // they took the place of what was needed, whichever side carries them.
        let value = weights.get(feature) + RATE * (high - low) * gradient;
        weights.set_clamped(feature, value);
    }
}

/// Reads the recorded runs not learned from yet (fixed-point outcomes in the world-model
/// ledger, and `pgs_` sessions, the same run counted once), takes a step per usable recovered
/// chunk, and saves the weights as a new version when anything moved. A session still running
/// is learned from again only for the chunks it recovered since.
pub fn learn_from_runs(home: &Path) -> Result<FeedbackReport, FeedbackError> {
    let _held = store::lock(home)?;
    let mut file = store::load_or_default(home)?;
    let observed = gaps::observations(home)?;
    let commits = CommitStore::new(home);
    let mut report = FeedbackReport {
        version_before: file.version,
        weights_before: file.weights,
        ..FeedbackReport::default()
    };
    report.skipped.extend(observed.warnings);
    let mut weights = file.weights;
    let mut learned = file.feedback.learned.clone();
    // Runs learned from for the first time: a session read while running and again when it
    // finished was counted twice.
    let mut first_seen = 0u64;
    for run in &observed.observations {
        let before = learned.get(&run.id).copied();
        let done = match before {
            Some(read) if read >= run.recovered.len() => continue,
            Some(read) => read,
            None => 0,
        };
        report.outcomes_read += 1;
        let new: Vec<String> = run.recovered[done..]
            .iter()
            .map(|(chunk, _)| chunk.clone())
            .collect();
        if !new.is_empty() {
            match learn_from_commit(&commits, &run.ctx_id, &new, &mut weights) {
                Ok((used, missing)) => {
                    report.recovered_chunks_used += used;
                    report.recovered_chunks_skipped += missing.len() as u64;
                    report.skipped.extend(
                        missing
                            .into_iter()
                            .map(|c| format!("{} {c}: not found again in the commit", run.ctx_id)),
                    );
                }
                Err(error) => {
                    // Not marked learned: a commit that cannot be read now (its directory
                    // moved, a disk error) is learned from once it can; marking it lost the
                    // run's signal for good.
                    report.runs_deferred += 1;
                    report.skipped.push(format!(
                        "{}: {error}; the run is read again next time",
                        run.ctx_id
                    ));
                    continue;
                }
            }
        }
        first_seen += u64::from(before.is_none());
        learned.insert(run.id.clone(), run.recovered.len());
    }
    if report.outcomes_read == report.runs_deferred {
        return Ok(finish(report, &file));
    }
    file.feedback.learned = learned;
    file.feedback.outcomes_seen += first_seen;
    file.feedback.recovered_chunks_used += report.recovered_chunks_used;
    file.feedback.recovered_chunks_skipped += report.recovered_chunks_skipped;
    if weights != file.weights {
        file.advance(weights, WeightsSource::Feedback);
    }
    store::save(home, &file)?;
    Ok(finish(report, &file))
}

fn finish(mut report: FeedbackReport, file: &WeightsFile) -> FeedbackReport {
    report.version_after = file.version;
    report.weights_after = file.weights;
    report
}

/// Rebuilds the documents of a commit from its exact chunks, scores its query with the current
/// weights, and steps for each recovered chunk. Returns the chunks used and those not found.
fn learn_from_commit(
    commits: &CommitStore,
    ctx_id: &str,
    recovered: &[String],
    weights: &mut RankingWeights,
) -> Result<(u64, Vec<String>), CommitError> {
    let receipt = commits.receipt(ctx_id)?;
    let query = receipt
        .parameters
        .get("query")
        .and_then(|q| q.as_str())
        .unwrap_or_default()
        .to_string();
    let documents = commits.documents(&receipt)?;
    let index = Index::from_documents(&documents);
    let scores = score_with(&index, &query, weights);
    let id_of: HashMap<&str, u32> = index
        .fragments
        .iter()
        .enumerate()
        .map(|(i, f)| (f.chunk_id.as_str(), i as u32))
        .collect();
    let best = scores.values().map(|s| s.score).fold(0.0, f64::max);
    let sent_full: Vec<u32> = receipt
        .chunks
        .iter()
        .filter(|c| c.resolution == Some(Resolution::Full))
        .filter_map(|c| id_of.get(c.chunk_id.as_str()).copied())
        .collect();
    let mut used = 0;
    let mut missing = Vec::new();
    for chunk_id in recovered {
        let Some(&fragment) = id_of.get(chunk_id.as_str()) else {
            missing.push(chunk_id.clone());
            continue;
        };
        let own = scores.get(&fragment).map(|s| (s.score, s.evidence));
        let (own_score, own_evidence) = own.unwrap_or((0.0, Evidence::default()));
        let out_rankers: Vec<Evidence> = sent_full
            .iter()
            .filter_map(|f| scores.get(f))
            .filter(|s| s.score > own_score)
            .map(|s| s.evidence)
            .collect();
        step(weights, &own_evidence, &out_rankers, best);
        used += 1;
    }
    Ok((used, missing))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_moves_weights_towards_the_recovered_chunks_evidence_within_bounds() {
        let mut weights = RankingWeights::default();
        let recovered = Evidence {
            bm25: 1.0,
            callee: 4.0,
            ..Evidence::default()
        };
        let out_ranker = Evidence {
            bm25: 6.0,
            same_file: 6.0,
            ..Evidence::default()
        };
        step(&mut weights, &recovered, &[out_ranker], 6.0);
        assert!(weights.get(Feature::Callee) > Feature::Callee.default_value());
        assert!(weights.get(Feature::SameFile) < Feature::SameFile.default_value());
        assert_eq!(
            weights.get(Feature::Definition),
            Feature::Definition.default_value(),
            "no evidence either side: no move"
        );
        assert_eq!(
            weights.get(Feature::SkeletonValue),
            Feature::SkeletonValue.default_value(),
            "knapsack values are not ranking feedback"
        );
        for _ in 0..1000 {
            step(&mut weights, &recovered, &[out_ranker], 6.0);
        }
        assert_eq!(weights.get(Feature::Callee), Feature::Callee.bounds().1);
        assert_eq!(weights.get(Feature::SameFile), Feature::SameFile.bounds().0);
    }

    #[test]
    fn no_out_rankers_no_step() {
        let mut weights = RankingWeights::default();
        step(
            &mut weights,
            &Evidence {
                caller: 3.0,
                ..Evidence::default()
            },
            &[],
            3.0,
        );
        assert_eq!(weights, RankingWeights::default());
    }
}
