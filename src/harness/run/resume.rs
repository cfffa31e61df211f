//! Resuming a run directory: which trials are already recorded, whether the directory's
//! earlier sessions were made with the same svc version and settings, and removing error
//! records so their trials run again (`retry_errors`).

use std::collections::HashSet;
use std::fs;
use std::path::Path;

use super::{Manifest, RunError};
use crate::harness::audit::REQUESTS_LOG;
use crate::state;
use crate::trial::{Condition, Outcome, TrialRecord};

/// The resume key of a record: a trial is recorded once per key.
pub(super) fn record_key(
    task_id: &str,
    condition: Condition,
    replicate: u64,
    scorer: &str,
    provider: &str,
    model: &str,
) -> String {
    format!(
        "{task_id}\u{1f}{condition}\u{1f}{replicate}\u{1f}{scorer}\u{1f}{provider}\u{1f}{model}"
    )
}

fn key_of(record: &TrialRecord) -> String {
    record_key(
        &record.task_id,
        record.condition,
        record.replicate,
        &record.scorer,
        &record.provider,
        &record.model,
    )
}

/// The records already in a run directory.
#[derive(Debug, Default)]
pub(super) struct Existing {
    /// Keys of every record (errors included).
    pub keys: HashSet<String>,
    /// Keys of the error records.
    pub errors: HashSet<String>,
}

/// Whether `path` holds anything but blank space (a file that is missing or empty holds no
/// record to protect).
pub(super) fn has_records(path: &Path) -> bool {
    use std::io::Read;
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    // Stops at the first byte that is not blank: a large file is not read whole.
    std::io::BufReader::new(file)
        .bytes()
        .map_while(Result::ok)
        .any(|b| !b.is_ascii_whitespace())
}

/// Keys of the records already in `path`; cuts off a torn last line first.
pub(super) fn existing_keys(path: &Path) -> Result<Existing, RunError> {
    let mut existing = Existing::default();
    let bytes = match fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(existing),
        Err(source) => {
            return Err(RunError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(at) => at + 1,
        None => 0,
    };
    if complete < bytes.len() {
        // An interrupted write left part of a line: drop it, the trial runs again.
        state::append::cut_to(path, complete as u64).map_err(|source| RunError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    }
    let text = String::from_utf8_lossy(&bytes[..complete]);
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        // The acceptance rule every reader shares (validate, report, gate).
        let record: TrialRecord =
            crate::trial::accept::accept(line).map_err(|error| RunError::Existing {
                path: path.to_path_buf(),
                line: index + 1,
                message: error.to_string(),
            })?;
        let key = key_of(&record);
        if record.outcome == Outcome::Error {
            existing.errors.insert(key.clone());
        }
        existing.keys.insert(key);
    }
    Ok(existing)
}

/// Removes the error records named by `errors` from `trials.jsonl`, and the lines of those
/// trials from `requests.jsonl` and `notes.jsonl`, each file rewritten atomically. Returns the
/// records removed. A crash between the rewrites leaves lines of trials that run again; their
/// new lines come later and win.
pub(super) fn drop_errors(dir: &Path, errors: &HashSet<String>) -> Result<u64, RunError> {
    let trials = dir.join("trials.jsonl");
    let mut removed = 0u64;
    let mut trials_of_errors: HashSet<(String, Condition, u64)> = HashSet::new();
    let kept = filter_lines(&trials, |line| {
        let Ok(record) = crate::trial::accept::accept(line) else {
            return true;
        };
        if errors.contains(&key_of(&record)) {
            removed += 1;
            trials_of_errors.insert((record.task_id, record.condition, record.replicate));
            return false;
        }
        true
    })?;
    state::atomic_write_shared(&trials, &kept)?;
    // requests.jsonl and notes.jsonl lines carry the trial as task_id, condition, replicate.
    #[derive(serde::Deserialize)]
    struct TrialOf {
        task_id: String,
        condition: Condition,
        replicate: u64,
    }
    for name in [REQUESTS_LOG, "notes.jsonl"] {
        let path = dir.join(name);
        if !path.is_file() {
            continue;
        }
        let kept = filter_lines(&path, |line| {
            serde_json::from_str::<TrialOf>(line).map_or(true, |of| {
                !trials_of_errors.contains(&(of.task_id, of.condition, of.replicate))
            })
        })?;
        state::atomic_write_shared(&path, &kept)?;
    }
    Ok(removed)
}

fn filter_lines(path: &Path, mut keep: impl FnMut(&str) -> bool) -> Result<Vec<u8>, RunError> {
    let text = fs::read_to_string(path).map_err(|source| RunError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut out = Vec::with_capacity(text.len());
    for line in text.lines() {
        if !line.trim().is_empty() && keep(line) {
            out.extend_from_slice(line.as_bytes());
            out.push(b'\n');
        }
    }
    Ok(out)
}

/// What makes two sessions one experiment, as (what, value) pairs: the svc version, the
/// workload (name, version, hash of its rendered prompts), the runner (name, file hash), the
/// scorer, the shard and how native_compaction compacts. Conditions, budgets and replicates
/// may grow between sessions; the seed only orders trials.
pub fn identity(manifest: &Manifest) -> Vec<(&'static str, String)> {
    vec![
        ("svc version", manifest.svc_version.clone()),
        ("workload", manifest.workload.name.clone()),
        ("workload version", manifest.workload.version.clone()),
        (
            "workload prompt sha256",
            manifest.workload.prompt_sha256.clone(),
        ),
        ("runner", manifest.runner.name.clone()),
        ("runner file sha256", manifest.runner.file_sha256.clone()),
        ("scorer", manifest.scorer.clone()),
        ("shard", manifest.shard.clone()),
        ("native compaction", manifest.native_compaction.to_string()),
        ("selector", manifest.selector.clone()),
        (
            "ranking weights",
            manifest.ranking_weights.map_or_else(
                || "default".to_string(),
                |w| serde_json::to_string(&w).unwrap_or_default(),
            ),
        ),
        (
            "fixed point",
            manifest
                .fixed_point
                .map_or_else(|| "off".to_string(), |setting| setting.to_string()),
        ),
        (
            "via proxy",
            if manifest.via_proxy { "on" } else { "off" }.to_string(),
        ),
        (
            "cache neutral",
            manifest.cache_neutral.as_ref().map_or_else(
                || "off".to_string(),
                |c| format!("on (cache_prompt false: {})", c.cache_prompt_false),
            ),
        ),
        (
            "judge",
            manifest.judge.as_ref().map_or_else(
                || "none".to_string(),
                |j| format!("{} {} prompt {}", j.runner, j.file_sha256, j.prompt_sha256),
            ),
        ),
    ]
}

/// A run directory holds one experiment (see [`identity`]). Within it, a later session may add
/// conditions, budgets or replicates; the manifest then lists the union, so every record's
/// budget and condition stay described. With `force`, a differing identity is resumed over
/// and listed in `forced_over`.
pub(super) fn merge_previous(
    manifest: &mut Manifest,
    previous: &Manifest,
    dir: &Path,
    force: bool,
) -> Result<(), RunError> {
    let differences: Vec<String> = identity(previous)
        .into_iter()
        .zip(identity(manifest))
        .filter(|((_, before), (_, now))| before != now)
        .map(|((what, before), (_, now))| format!("{what}: {before} -> {now}"))
        .collect();
    if !differences.is_empty() && !force {
        return Err(RunError::Mismatch {
            dir: dir.to_path_buf(),
            differences: format!(
                "with other settings ({}; earlier -> this run)",
                differences.join("; ")
            ),
        });
    }
    manifest.forced_over = previous.forced_over.clone();
    manifest.forced_over.extend(differences);
    for condition in &previous.conditions {
        if !manifest.conditions.contains(condition) {
            manifest.conditions.push(*condition);
        }
    }
    manifest.conditions.sort();
    for budget in &previous.budgets {
        if !manifest.budgets.contains(budget) {
            manifest.budgets.push(*budget);
        }
    }
    manifest.budgets.sort_unstable();
    manifest.replicates = manifest.replicates.max(previous.replicates);
    manifest.started_at = previous.started_at.clone();
    Ok(())
}
