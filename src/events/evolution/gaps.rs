//! Gaps: files that selection keeps leaving out although the answer needed them.
//!
//! Every recorded proof-guided run is an [`Observation`]: the world-model ledger's entries
//! (`proof/world-model.jsonl`) and the `pgs_` sessions (`proof/sessions/`), the same run seen
//! in both counted once (same `ctx_id` and final output). A chunk the fixed-point loop had to
//! recover was needed but not sent in full: a miss of its file. A file missed in at least
//! `threshold` runs is a [`Gap`].

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::context::CommitStore;
use crate::proof::{ledger, session};

/// Where an observation was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ObservationSource {
    Ledger,
    Session,
}

/// One recorded run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// `ledger:<sequence>` or the session id.
    pub id: String,
    pub source: ObservationSource,
    pub recorded_at: String,
    pub ctx_id: String,
    /// The query, from the session or the commit's receipt (`None` when neither is readable).
    pub query: Option<String>,
    /// Recovered chunks (needed, not sent in full) and their files, in recovery order.
    pub recovered: Vec<(String, String)>,
}

/// A file selection keeps missing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gap {
    /// The file (or document) path.
    pub entity: String,
    /// Runs in which a chunk of it was recovered.
    pub miss_count: usize,
    /// Its recovered chunks, most often recovered first.
    pub chunk_ids: Vec<String>,
    /// Ids of the observations that missed it, oldest first.
    pub observations: Vec<String>,
}

/// What [`observations`] read, and what it had to skip.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub observations: Vec<Observation>,
    /// Unreadable sessions and the like, in words.
    pub warnings: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum GapError {
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
}

/// Reads every recorded run of `home`, oldest first.
pub fn observations(home: &Path) -> Result<Observed, GapError> {
    let mut observed = Observed::default();
    let commits = CommitStore::new(home);
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut queries: BTreeMap<String, Option<String>> = BTreeMap::new();
    let mut receipt_query = |ctx_id: &str| -> Option<String> {
        queries
            .entry(ctx_id.to_string())
            .or_insert_with(|| {
                commits.receipt(ctx_id).ok().and_then(|r| {
                    r.parameters
                        .get("query")
                        .and_then(|q| q.as_str())
                        .map(str::to_string)
                })
            })
            .clone()
    };

    let sessions_dir = home.join(session::SESSION_DIR);
    let mut ids: Vec<String> = fs::read_dir(&sessions_dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter_map(|name| name.strip_suffix(".json").map(str::to_string))
                .filter(|id| id.starts_with("pgs_"))
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    for id in ids {
        let body = match session::load(home, &id) {
            Ok(body) => body,
            Err(e) => {
                observed.warnings.push(format!("skipped session {id}: {e}"));
                continue;
            }
        };
        let recovered: Vec<(String, String)> = body
            .run
            .rounds
            .iter()
            .flat_map(|r| r.recovered.iter())
            .map(|c| (c.chunk_id.clone(), c.source.clone()))
            .collect();
        if let Some(result) = &body.run.result {
            seen.insert((
                body.prepared.ctx_id.clone(),
                result.final_output.output_sha256.clone(),
            ));
        }
        observed.observations.push(Observation {
            id: id.clone(),
            source: ObservationSource::Session,
            recorded_at: body.updated_at.clone(),
            ctx_id: body.prepared.ctx_id.clone(),
            query: Some(body.prepared.query.clone()),
            recovered,
        });
    }

    for entry in ledger::verify_chain(home)? {
        if seen.contains(&(entry.ctx_id.clone(), entry.final_output_sha256.clone())) {
            continue;
        }
        let receipt = commits.receipt(&entry.ctx_id).ok();
        let recovered = entry
            .recovered_chunk_ids
            .iter()
            .map(|id| {
                let source = receipt
                    .as_ref()
                    .and_then(|r| r.chunk(id))
                    .map(|c| c.source.clone())
                    .unwrap_or_else(|| source_of(id).to_string());
                (id.clone(), source)
            })
            .collect();
        observed.observations.push(Observation {
            id: format!("ledger:{}", entry.sequence),
            source: ObservationSource::Ledger,
            recorded_at: entry.recorded_at.clone(),
            query: receipt_query(&entry.ctx_id),
            ctx_id: entry.ctx_id,
            recovered,
        });
    }
    // RFC 3339 UTC strings of one width sort as time.
    observed
        .observations
        .sort_by(|a, b| a.recorded_at.cmp(&b.recorded_at).then(a.id.cmp(&b.id)));
    Ok(observed)
}

/// The file part of a chunk id (`path#L3-9` → `path`).
pub fn source_of(chunk_id: &str) -> &str {
    chunk_id
        .rsplit_once("#L")
        .map_or(chunk_id, |(path, _)| path)
}

/// Files missed in at least `threshold` observations, most missed first.
pub fn detect(observations: &[Observation], threshold: usize) -> Vec<Gap> {
    let mut by_entity: BTreeMap<&str, (Vec<&str>, BTreeMap<&str, usize>)> = BTreeMap::new();
    for observation in observations {
        let mut entities_here: HashSet<&str> = HashSet::new();
        for (chunk_id, source) in &observation.recovered {
            let (runs, chunks) = by_entity.entry(source.as_str()).or_default();
            if entities_here.insert(source.as_str()) {
                runs.push(&observation.id);
            }
            *chunks.entry(chunk_id.as_str()).or_default() += 1;
        }
    }
    let mut gaps: Vec<Gap> = by_entity
        .into_iter()
        .filter(|(_, (runs, _))| runs.len() >= threshold.max(1))
        .map(|(entity, (runs, chunks))| {
            let mut chunk_ids: Vec<(&str, usize)> = chunks.into_iter().collect();
            chunk_ids.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            Gap {
                entity: entity.to_string(),
                miss_count: runs.len(),
                chunk_ids: chunk_ids.into_iter().map(|(c, _)| c.to_string()).collect(),
                observations: runs.into_iter().map(str::to_string).collect(),
            }
        })
        .collect();
    gaps.sort_by(|a, b| {
        b.miss_count
            .cmp(&a.miss_count)
            .then(a.entity.cmp(&b.entity))
    });
    gaps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observation(id: &str, recovered: &[&str]) -> Observation {
        Observation {
            id: id.to_string(),
            source: ObservationSource::Ledger,
            recorded_at: format!("2026-01-01T00:00:0{id}.000Z"),
            ctx_id: "ctx_00".to_string(),
            query: Some("q".to_string()),
            recovered: recovered
                .iter()
                .map(|c| (c.to_string(), source_of(c).to_string()))
                .collect(),
        }
    }

    #[test]
    fn a_file_missed_in_threshold_runs_is_a_gap_counted_once_per_run() {
        let runs = vec![
            observation("1", &["a.md#L1-2", "a.md#L5-7"]),
            observation("2", &["a.md#L5-7"]),
            observation("3", &["a.md#L5-7", "b.md#L1-1"]),
            observation("4", &[]),
        ];
        let gaps = detect(&runs, 3);
        assert_eq!(gaps.len(), 1, "b.md was missed once only");
        assert_eq!(gaps[0].entity, "a.md");
        assert_eq!(gaps[0].miss_count, 3, "two chunks of one run are one miss");
        assert_eq!(gaps[0].chunk_ids, vec!["a.md#L5-7", "a.md#L1-2"]);
        assert_eq!(gaps[0].observations, vec!["1", "2", "3"]);
        assert!(detect(&runs, 4).is_empty());
        assert_eq!(source_of("dir/x.rs#L10-20"), "dir/x.rs");
    }
}
