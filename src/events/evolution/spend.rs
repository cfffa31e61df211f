//! The learning spend invariant (SPEC §6.2, §8): tokens spent on learning stay at most
//! [`TAU`] × lifetime savings.
//!
//! **Lifetime savings** are the tokens selection kept out of prompts, as the context commits
//! under the state directory record them (loose or packed): per commit (its receipt) the
//! tokens of every chunk's exact bytes minus the tokens actually sent. Every selection the
//! proxy forwards, `svc context select` and the proof-guided `prepare` commit one; the
//! proxy's in-memory counters (`GET /svc/status`) are the same figure for its requests but
//! are not persisted. Trial runs' commits (they name a condition and a task) are experiments,
//! not savings, and are not counted; a commit id made twice counts once (conservative).
//!
//! **Learning spend** is the sum of the `tokens` of allowed `spend` steps in the trace.
//! [`authorize`] refuses any spend that would break the invariant; structural synthesis
//! spends 0 tokens, which the invariant always allows.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::trace::{self, Step, TraceError};
use crate::context::CommitStore;

/// The bound on learning spend as a share of lifetime savings.
pub const TAU: f64 = 0.05;

/// Lifetime savings, summed over the commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Savings {
    pub commits: u64,
    /// Σ tokens of the exact bytes of every committed chunk.
    pub tokens_full: u64,
    /// Σ tokens sent.
    pub tokens_sent: u64,
    pub tokens_saved: u64,
}

/// Sums the savings of every readable commit under `home` (unreadable ones are skipped and
/// counted in the second value).
pub fn lifetime_savings(home: &Path) -> (Savings, usize) {
    let store = CommitStore::new(home);
    let mut savings = Savings::default();
    let mut unreadable = 0;
    let mut ids: std::collections::BTreeSet<String> = fs::read_dir(home.join("commits"))
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.file_name().to_str().map(str::to_string))
                .filter(|id| id.starts_with("ctx_"))
                .collect()
        })
        .unwrap_or_default();
    // `svc context select` and the MCP tools group-commit into packs; so do trial runs, whose
    // commits name their condition and task and are left out below.
    let packs = crate::state::Packs::new(home);
    if let Ok(keys) = packs.keys_with_prefix("commits/ctx_") {
        ids.extend(keys.iter().filter_map(|key| {
            key.strip_prefix("commits/")?
                .strip_suffix("/receipt.json")
                .map(str::to_string)
        }));
    }
    for ctx_id in ids {
        match store.receipt(&ctx_id) {
            Ok(receipt) => {
                let trial = receipt.parameters.get("condition").is_some()
                    && receipt.parameters.get("task_id").is_some();
                if trial {
                    continue;
                }
                let full: u64 = receipt
                    .chunks
                    .iter()
                    .map(|c| c.receipt_token_count as u64)
                    .sum();
                let sent: u64 = receipt
                    .chunks
                    .iter()
                    .map(|c| c.sent_token_count as u64)
                    .sum();
                savings.commits += 1;
                savings.tokens_full += full;
                savings.tokens_sent += sent;
                savings.tokens_saved += full.saturating_sub(sent);
            }
            Err(_) => unreadable += 1,
        }
    }
    (savings, unreadable)
}

/// Learning tokens spent so far: allowed spend steps of the trace.
pub fn lifetime_spend(lines: &[trace::TraceLine]) -> u64 {
    lines
        .iter()
        .map(|l| match &l.step {
            Step::Spend {
                tokens,
                allowed: true,
                ..
            } => *tokens,
            _ => 0,
        })
        .sum()
}

/// A spend the invariant refuses.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "learning spend of {tokens} tokens refused: {spent} already spent + {tokens} would exceed {tau} x {savings} lifetime savings = {limit:.0} tokens"
)]
pub struct SpendRefused {
    pub tokens: u64,
    pub spent: u64,
    pub savings: u64,
    pub tau: f64,
    pub limit: f64,
}

/// Whether spending `tokens` more keeps `spent + tokens ≤ TAU × savings`.
pub fn authorize(spent: u64, tokens: u64, savings: u64) -> Result<(), SpendRefused> {
    let limit = TAU * savings as f64;
    if (spent.saturating_add(tokens)) as f64 <= limit {
        Ok(())
    } else {
        Err(SpendRefused {
            tokens,
            spent,
            savings,
            tau: TAU,
            limit,
        })
    }
}

/// The spend step of a cycle that wants to spend `tokens`: checked against the trace's
/// lifetime spend and `savings`; a refused spend is recorded with `allowed: false` and adds
/// nothing. Returns the step and, when refused, why.
pub fn spend_step(
    home: &Path,
    tokens: u64,
    savings: u64,
) -> Result<(Step, Option<SpendRefused>), TraceError> {
    let spent = lifetime_spend(&trace::read(home)?);
    let refused = authorize(spent, tokens, savings).err();
    let allowed = refused.is_none();
    Ok((
        Step::Spend {
            tokens,
            allowed,
            lifetime_spend: if allowed { spent + tokens } else { spent },
            lifetime_savings: savings,
            tau: TAU,
        },
        refused,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: `svc context select` and the MCP tools pack their commits; savings must
    /// count them (and still leave trial runs' commits out).
    #[test]
    fn packed_and_loose_commits_count_and_trial_commits_do_not() {
        use crate::context::commit::{ChunkInput, Resolution};
        let dir = tempfile::tempdir().expect("tempdir");
        let tokenizer = crate::tokens::Tokenizer::default();
        let chunks = vec![
            ChunkInput {
                chunk_id: "a.md#L1-1".into(),
                source: "a.md".into(),
                full_text: "sent text\n".into(),
                resolution: Some(Resolution::Full),
                sent_tokens: 2,
                full_tokens: None,
            },
            ChunkInput {
                chunk_id: "a.md#L2-2".into(),
                source: "a.md".into(),
                full_text: "omitted text that nobody had to read\n".into(),
                resolution: None,
                sent_tokens: 0,
                full_tokens: None,
            },
        ];
        let packed = CommitStore::grouped(dir.path());
        let commit = |store: &CommitStore, parameters: serde_json::Value| {
            store
                .commit(&chunks, parameters, "sent text\n", &tokenizer)
                .expect("commit")
        };
        commit(&packed, serde_json::json!({"query": "q", "budget": 10}));
        commit(
            &packed,
            serde_json::json!({"condition": "svc", "task_id": "t1", "query": "q", "budget": 10}),
        );
        packed.sync().expect("sync");
        commit(
            &CommitStore::new(dir.path()),
            serde_json::json!({"query": "q", "budget": 20}),
        );
        let (savings, unreadable) = lifetime_savings(dir.path());
        assert_eq!(unreadable, 0);
        assert_eq!(
            savings.commits, 2,
            "the packed and the loose selection, not the trial"
        );
        assert!(savings.tokens_saved > 0);
    }

    #[test]
    fn spend_beyond_five_percent_of_savings_is_refused() {
        assert!(authorize(0, 0, 0).is_ok(), "structural synthesis spends 0");
        assert!(authorize(0, 1, 0).is_err(), "no savings, no spend");
        assert!(authorize(40, 10, 1000).is_ok(), "50 = 5% of 1000");
        let refused = authorize(40, 11, 1000).expect_err("51 > 50");
        assert_eq!(refused.limit, 50.0);
        assert!(refused.to_string().contains("would exceed"));
    }

    #[test]
    fn a_refused_spend_is_recorded_and_adds_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut trace = trace::CycleTrace::new(dir.path(), "dream_a");
        let (step, refused) = spend_step(dir.path(), 30, 1000).expect("step");
        assert!(refused.is_none());
        trace.append(step).expect("append");
        let mut trace = trace::CycleTrace::new(dir.path(), "dream_b");
        let (step, refused) = spend_step(dir.path(), 30, 1000).expect("step");
        assert!(refused.is_some(), "30 + 30 > 50");
        assert!(matches!(
            step,
            Step::Spend {
                allowed: false,
                lifetime_spend: 30,
                ..
            }
        ));
        trace.append(step).expect("append");
        assert_eq!(lifetime_spend(&trace::read(dir.path()).expect("read")), 30);
    }
}
