//! The world-model ledger: one JSON line per verified outcome (`proof/world-model.jsonl`), each
//! chained to the one before by hash, so a removed, reordered or edited line is detected by
//! [`verify_chain`]. The learning loop reads it; nothing here learns.
//!
//! `entry_sha256` is the SHA-256 of the entry's compact JSON with `entry_sha256` set to the
//! empty string; `previous_sha256` is the previous entry's `entry_sha256` (64 zeros for the
//! first). Appends are serialised by an OS lock on a file beside the ledger and fsynced.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::round::{FixedPointResult, FixedPointStatus};
use crate::digest;

/// Ledger file, relative to the state directory.
pub const LEDGER_FILE: &str = "proof/world-model.jsonl";
/// Format tag of each line.
pub const LEDGER_FORMAT: &str = "svc.world-model.v1";
const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// An external judgement of a run's final output (a user accepted it, a test passed, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutcomeSignal {
    /// What the signal is, e.g. `user_accepted`, `tests_passed`, `exact_match`.
    pub name: String,
    /// In [0, 1]: 1 is the best outcome.
    pub value: f64,
    /// Free text: where the signal came from.
    #[serde(default)]
    pub detail: Option<String>,
}

/// One ledger line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerEntry {
    pub format: String,
    pub sequence: u64,
    pub recorded_at: String,
    pub ctx_id: String,
    pub query_sha256: String,
    pub status: FixedPointStatus,
    pub rounds: usize,
    pub recovered_chunk_ids: Vec<String>,
    pub recovery_tokens_used: usize,
    pub final_output_sha256: String,
    pub final_unsupported_claim_rate: f64,
    pub signal: OutcomeSignal,
    pub previous_sha256: String,
    pub entry_sha256: String,
}

#[derive(Debug, thiserror::Error)]
pub enum LedgerError {
    #[error("signal value {value} of {name} is outside [0, 1]")]
    SignalOutOfRange { name: String, value: f64 },
    #[error("the signal needs a name (e.g. user_accepted, tests_passed)")]
    EmptySignal,
    #[error("cannot write the ledger {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read the ledger {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{path}:{line}: {message}; the ledger is hash-chained, so it cannot be mended in place: restore it, or move it aside (the next recorded outcome starts a new one)"
    )]
    Broken {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

fn entry_hash(entry: &LedgerEntry) -> String {
    let mut unsigned = entry.clone();
    unsigned.entry_sha256 = String::new();
    digest::sha256_hex(serde_json::to_vec(&unsigned).unwrap_or_default())
}

/// The ledger's text and the length of its complete part: a last line without its line break
/// that is not an entry is an append a crash cut short, never acknowledged, so it is not part
/// of the chain (and the next append cuts it off).
fn read_ledger(path: &Path) -> Result<(String, usize), LedgerError> {
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((String::new(), 0)),
        Err(source) => {
            return Err(LedgerError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let text = String::from_utf8(bytes).map_err(|e| LedgerError::Broken {
        path: path.to_path_buf(),
        line: crate::text::utf8_error_position(&e).0,
        message: "not UTF-8 text".into(),
    })?;
    let complete = match text.rfind('\n') {
        _ if text.ends_with('\n') => text.len(),
        cut => {
            let start = cut.map_or(0, |n| n + 1);
            if serde_json::from_str::<LedgerEntry>(&text[start..]).is_ok() {
                text.len()
            } else {
                start
            }
        }
    };
    Ok((text, complete))
}

/// Reads and checks the whole chain; returns its entries.
pub fn verify_chain(state_dir: &Path) -> Result<Vec<LedgerEntry>, LedgerError> {
    let path = state_dir.join(LEDGER_FILE);
    let (text, complete) = read_ledger(&path)?;
    checked_entries(&path, &text[..complete])
}

/// The entries of the ledger text `complete` (its complete lines), each checked against the
/// one before.
fn checked_entries(path: &Path, complete: &str) -> Result<Vec<LedgerEntry>, LedgerError> {
    let mut previous = GENESIS.to_string();
    let mut entries = Vec::new();
    for (i, line) in complete.lines().enumerate() {
        let broken = |message: String| LedgerError::Broken {
            path: path.to_path_buf(),
            line: i + 1,
            message,
        };
        let entry: LedgerEntry =
            serde_json::from_str(line).map_err(|e| broken(format!("not a ledger entry: {e}")))?;
        if entry.previous_sha256 != previous {
            return Err(broken(
                "previous_sha256 does not match the line before: a line was removed, reordered or inserted"
                    .to_string(),
            ));
        }
        if entry.sequence != i as u64 {
            return Err(broken(format!(
                "sequence {} where {i} was expected",
                entry.sequence
            )));
        }
        if entry_hash(&entry) != entry.entry_sha256 {
            return Err(broken(
                "entry_sha256 does not match: the line was edited".to_string(),
            ));
        }
        previous = entry.entry_sha256.clone();
        entries.push(entry);
    }
    Ok(entries)
}

/// Appends `result` and `signal` to the ledger of `state_dir`.
pub fn append(
    state_dir: &Path,
    result: &FixedPointResult,
    signal: &OutcomeSignal,
) -> Result<LedgerEntry, LedgerError> {
    if signal.name.trim().is_empty() {
        return Err(LedgerError::EmptySignal);
    }
    if !(0.0..=1.0).contains(&signal.value) {
        return Err(LedgerError::SignalOutOfRange {
            name: signal.name.clone(),
            value: signal.value,
        });
    }
    let path = state_dir.join(LEDGER_FILE);
    let io_error = |source| LedgerError::Io {
        path: path.clone(),
        source,
    };
    let held = crate::state::append::lock(&path).map_err(io_error)?;
    // One read: the chain is checked from the same text whose torn tail is cut.
    let (text, complete) = read_ledger(&path)?;
    let existing = checked_entries(&path, &text[..complete])?;
    if complete < text.len() {
        crate::state::append::cut_to(&path, complete as u64).map_err(io_error)?;
    }
    let previous = existing
        .last()
        .map_or(GENESIS.to_string(), |e| e.entry_sha256.clone());
    let last_round = result.rounds.last();
    let mut entry = LedgerEntry {
        format: LEDGER_FORMAT.to_string(),
        sequence: existing.len() as u64,
        recorded_at: crate::clock::rfc3339(std::time::SystemTime::now()),
        ctx_id: result.ctx_id.clone(),
        query_sha256: digest::sha256_hex(&result.query),
        status: result.status,
        rounds: result.rounds.len(),
        recovered_chunk_ids: result
            .recovered_chunk_ids()
            .into_iter()
            .map(str::to_string)
            .collect(),
        recovery_tokens_used: result.recovery_tokens_used,
        final_output_sha256: result.final_output.output_sha256.clone(),
        final_unsupported_claim_rate: last_round.map_or(0.0, |r| r.unsupported_claim_rate),
        signal: signal.clone(),
        previous_sha256: previous,
        entry_sha256: String::new(),
    };
    entry.entry_sha256 = entry_hash(&entry);
    let mut line = serde_json::to_vec(&entry).unwrap_or_default();
    line.push(b'\n');
    crate::state::append::append(&held, &path, &line, true).map_err(io_error)?;
    Ok(entry)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proof::{ContextRiskMode, VerifiedEfficiencyLayer};

    /// A layer on `dir` and one supported fixed-point result to record outcomes of.
    fn supported_run(dir: &Path) -> (VerifiedEfficiencyLayer, FixedPointResult) {
        let layer = VerifiedEfficiencyLayer::new(dir, ContextRiskMode::Strict);
        let docs = vec![(
            "a.md".to_string(),
            "# A\n\nThe bridge opened to traffic in 1932.\n".to_string(),
        )];
        let prepared = layer
            .prepare(&docs, "When did the bridge open?", 200)
            .expect("prepare");
        let result = layer
            .run_fixed_point(
                &prepared,
                |_| Ok("The bridge opened to traffic in 1932.".to_string()),
                2,
                100,
                2,
            )
            .expect("run");
        (layer, result)
    }

    /// The signal the tests record: the user accepted the output.
    fn accepted() -> OutcomeSignal {
        OutcomeSignal {
            name: "user_accepted".to_string(),
            value: 1.0,
            detail: None,
        }
    }

    #[test]
    fn outcomes_are_hash_chained_and_edits_are_detected() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (layer, result) = supported_run(dir.path());
        let signal = accepted();
        let first = layer
            .record_verified_outcome(&result, &signal)
            .expect("append");
        let second = layer
            .record_verified_outcome(&result, &signal)
            .expect("append");
        assert_eq!(first.previous_sha256, GENESIS);
        assert_eq!(second.previous_sha256, first.entry_sha256);
        assert_eq!(verify_chain(dir.path()).expect("chain").len(), 2);

        let bad = OutcomeSignal {
            value: 1.5,
            ..signal
        };
        assert!(layer.record_verified_outcome(&result, &bad).is_err());

        let path = dir.path().join(LEDGER_FILE);
        let text = fs::read_to_string(&path).expect("read");
        fs::write(&path, text.replace("user_accepted", "user_rejected")).expect("edit");
        assert!(matches!(
            verify_chain(dir.path()),
            Err(LedgerError::Broken { line: 1, .. })
        ));
    }

    /// Found by probing: an append cut short by a crash (a last line without its line break)
    /// made every reader (`svc gaps`, `learning update`, `dream`, `record-outcome`) fail for
    /// good; and text that is not UTF-8 was reported as "cannot write".
    #[test]
    fn an_append_cut_short_is_not_part_of_the_chain_and_the_next_append_removes_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (layer, result) = supported_run(dir.path());
        let signal = accepted();
        for _ in 0..2 {
            layer
                .record_verified_outcome(&result, &signal)
                .expect("append");
        }
        let path = dir.path().join(LEDGER_FILE);
        let whole = fs::read(&path).expect("read");
        fs::write(&path, &whole[..whole.len() - 10]).expect("tear");
        assert_eq!(verify_chain(dir.path()).expect("chain").len(), 1);
        let third = layer
            .record_verified_outcome(&result, &signal)
            .expect("append after the tear");
        assert_eq!(third.sequence, 1);
        assert_eq!(verify_chain(dir.path()).expect("chain").len(), 2);
        // A complete last line that lost only its line break is still an entry.
        let whole = fs::read(&path).expect("read");
        fs::write(&path, &whole[..whole.len() - 1]).expect("cut the break");
        assert_eq!(verify_chain(dir.path()).expect("chain").len(), 2);

        fs::write(&path, b"\xff\xfe garbage").expect("garbage");
        let message = verify_chain(dir.path()).expect_err("garbage").to_string();
        assert!(
            message.contains("world-model.jsonl:1: not UTF-8 text")
                && message.contains("move it aside"),
            "{message}"
        );
    }

    #[test]
    fn concurrent_appends_keep_one_chain_and_a_crashed_holders_lock_file_never_blocks() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (layer, result) = supported_run(dir.path());
        // Regression: a lock file left by a crashed writer refused every later append.
        fs::create_dir_all(dir.path().join(LEDGER_FILE).parent().expect("parent")).expect("dir");
        fs::write(dir.path().join(LEDGER_FILE).with_extension("lock"), "").expect("stale lock");
        let signal = OutcomeSignal {
            name: "tests_passed".to_string(),
            value: 1.0,
            detail: None,
        };
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..5 {
                        layer
                            .record_verified_outcome(&result, &signal)
                            .expect("append waits its turn");
                    }
                });
            }
        });
        let chain = verify_chain(dir.path()).expect("one intact chain");
        assert_eq!(chain.len(), 20);
        let sequences: Vec<u64> = chain.iter().map(|e| e.sequence).collect();
        assert_eq!(sequences, (0..20).collect::<Vec<u64>>());
    }
}
