//! The manifest of a run directory (`manifest.json`): what defines the matrix, what ran, and
//! the default run id derived from it.

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{BUDGET_SEPARATOR, RunError, RunSettings};
use crate::digest;
use crate::harness::condition::Condition;
use crate::harness::fixed_point::FixedPointSetting;
use crate::harness::summary::CompactionMode;
use crate::state;

/// The manifest of a run directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub run_id: String,
    pub svc_version: String,
    pub git_commit: Option<String>,
    pub workload: ManifestWorkload,
    pub runner: ManifestRunner,
    pub conditions: Vec<Condition>,
    /// How `native_compaction` compacted; manifests from before the setting are deterministic.
    #[serde(default)]
    pub native_compaction: CompactionMode,
    /// The fixed-point loop's bounds when `--fixed-point` was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_point: Option<FixedPointSetting>,
    /// `raw` trials went through the in-process proxy (`via_proxy`), at every budget.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub via_proxy: bool,
    /// `--cache-neutral`: how the run kept a provider's prefix cache out of latency.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_neutral: Option<CacheNeutral>,
    /// The judge of a model-graded scorer (`qa-judge-v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<ManifestJudge>,
    pub budgets: Vec<usize>,
    /// How a record's budget is recovered: `task_id` = `<task id><separator><budget>`.
    pub task_id_budget_separator: String,
    /// `raw` ran once per task: its records carry the plain task id and pair with every
    /// budget. False in manifests from before, whose `raw` ran at every budget.
    #[serde(default)]
    pub raw_once_per_task: bool,
    pub replicates: u64,
    pub scorer: String,
    /// The selector setting of the `svc` condition ([`SelectorName`]); manifests from before
    /// the setting used the context engine.
    #[serde(default = "default_selector_name")]
    pub selector: String,
    /// Ranking weights of the `svc` selector when not the defaults (`--ranking-weights`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ranking_weights: Option<crate::context::weights::RankingWeights>,
    /// The runner's sampling temperature (from its file).
    #[serde(default)]
    pub temperature: f64,
    pub seed: u64,
    pub shard: String,
    /// First start of this run directory (kept across resumes).
    pub started_at: String,
    /// End of the latest session; null while a session runs.
    pub ended_at: Option<String>,
    /// Trials of this shard's matrix.
    pub planned: u64,
    /// Trials the latest session found already written.
    pub skipped: u64,
    /// Records in trials.jsonl in total.
    pub written: u64,
    /// Error records in trials.jsonl in total.
    pub errors: u64,
    pub aborted: bool,
    /// Whether HTTP calls of the latest session went through the response cache.
    #[serde(default)]
    pub response_cache: bool,
    /// Settings that differed from an earlier session's and were resumed over with `--force`,
    /// as `field: earlier -> later`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forced_over: Vec<String>,
}

/// What `--cache-neutral` did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheNeutral {
    /// Each task's trials ran back to back in a seeded order, one call at a time.
    pub interleaved: bool,
    /// Requests carried `"cache_prompt": false` (a local OpenAI-compatible server); false when
    /// the runner's API has no such switch (hosted APIs, the fixture, commands).
    pub cache_prompt_false: bool,
}

/// The judge runner of a model-graded scorer and the rubric it was given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestJudge {
    pub runner: String,
    pub kind: String,
    pub model: String,
    pub file_sha256: String,
    /// SHA-256 of the judge's system prompt and rubric template (`svc::harness::judge`).
    pub prompt_sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestWorkload {
    pub name: String,
    pub version: String,
    pub kind: String,
    pub tasks: usize,
    pub prompt_sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ManifestRunner {
    pub name: String,
    pub kind: String,
    pub provider: String,
    pub model: String,
    pub file_sha256: String,
    pub cost_source: crate::trial::CostSource,
}

/// A default run id: workload, runner and a short hash of everything that defines the matrix,
/// so re-running the same command resumes the same directory.
pub fn default_run_id(settings: &RunSettings) -> String {
    let material = format!(
        "{}|{}|{}|{}|{:?}|{:?}|{}|{}|{}|{}",
        settings.workload.name(),
        settings.workload.version(),
        settings.runner.spec.name,
        settings.runner.file_sha256,
        settings.conditions,
        settings.budgets,
        settings.replicates,
        settings.scorer,
        settings.seed,
        settings.shard
    );
    // Appended only when not the default, so deterministic runs keep their existing ids.
    let material = match settings.native_compaction {
        CompactionMode::Deterministic => material,
        mode => format!("{material}|native_compaction={mode}"),
    };
    let material = match settings.selector.name() {
        "svc" => material,
        selector => format!("{material}|selector={selector}"),
    };
    let material = match settings.selector.ranking_weights() {
        None => material,
        Some(weights) => format!(
            "{material}|ranking_weights={}",
            serde_json::to_string(&weights).unwrap_or_default()
        ),
    };
    let material = match settings.fixed_point {
        None => material,
        Some(setting) => format!("{material}|fixed_point={setting}"),
    };
    let material = match settings.via_proxy {
        false => material,
        true => format!("{material}|via_proxy"),
    };
    let material = match settings.cache_neutral {
        false => material,
        true => format!("{material}|cache_neutral"),
    };
    let material = match &settings.judge {
        None => material,
        Some(judge) => format!(
            "{material}|judge={}:{}:{}",
            judge.runner.spec.name,
            judge.runner.file_sha256,
            crate::harness::judge::prompt_sha256()
        ),
    };
    let shard = if settings.shard.count > 1 {
        format!("-shard{}of{}", settings.shard.index, settings.shard.count)
    } else {
        String::new()
    };
    // Said in the name too, so a cache-neutral run is told apart at a glance.
    let shard = if settings.cache_neutral {
        format!("{shard}-cache-neutral")
    } else {
        shard
    };
    format!(
        "{}-{}{shard}-{}",
        path_safe(settings.workload.name()),
        path_safe(&settings.runner.spec.name),
        &digest::sha256_hex(material)[..10]
    )
}

/// `name` as one path component: a separator or other punctuation becomes `_`, and a leading
/// `.` gets a `_` before it, so a workload named `../../x` cannot put its run outside `runs/`.
/// Names of letters, digits, `.`, `_` and `-` (every name svc ships) are unchanged, so their
/// run ids are too.
fn path_safe(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if safe.starts_with('.') {
        format!("_{safe}")
    } else {
        safe
    }
}

/// The manifest of this session, before it is merged with an earlier one's.
pub(super) fn new_manifest(settings: &RunSettings, started_at: String) -> Manifest {
    Manifest {
        run_id: settings
            .out_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        svc_version: env!("CARGO_PKG_VERSION").to_string(),
        git_commit: git_commit(),
        workload: ManifestWorkload {
            name: settings.workload.name().to_string(),
            version: settings.workload.version().to_string(),
            kind: settings.workload.spec.kind.as_str().to_string(),
            tasks: settings.workload.tasks.len(),
            prompt_sha256: settings.workload.prompt_hash(),
        },
        runner: ManifestRunner {
            name: settings.runner.spec.name.clone(),
            kind: settings.runner.spec.kind.as_str().to_string(),
            provider: settings.runner.spec.provider.clone(),
            model: settings.runner.spec.model.clone(),
            file_sha256: settings.runner.file_sha256.clone(),
            cost_source: settings.runner.cost_source(),
        },
        conditions: settings.conditions.clone(),
        native_compaction: settings.native_compaction,
        fixed_point: settings.fixed_point,
        via_proxy: settings.via_proxy,
        cache_neutral: settings.cache_neutral.then(|| CacheNeutral {
            interleaved: true,
            cache_prompt_false: settings.runner.cache_prompt() == Some(false),
        }),
        judge: settings.judge.as_ref().map(|judge| ManifestJudge {
            runner: judge.runner.spec.name.clone(),
            kind: judge.runner.spec.kind.as_str().to_string(),
            model: judge.runner.spec.model.clone(),
            file_sha256: judge.runner.file_sha256.clone(),
            prompt_sha256: crate::harness::judge::prompt_sha256(),
        }),
        budgets: settings.budgets.clone(),
        task_id_budget_separator: BUDGET_SEPARATOR.into(),
        raw_once_per_task: !settings.via_proxy,
        replicates: settings.replicates,
        scorer: settings.scorer.as_str().to_string(),
        selector: settings.selector.name().to_string(),
        ranking_weights: settings.selector.ranking_weights(),
        temperature: settings.runner.spec.temperature,
        seed: settings.seed,
        shard: settings.shard.to_string(),
        started_at,
        ended_at: None,
        planned: 0,
        skipped: 0,
        written: 0,
        errors: 0,
        aborted: false,
        response_cache: settings.audit.cache.is_some() && settings.makes_http_calls(),
        forced_over: Vec::new(),
    }
}

fn default_selector_name() -> String {
    "svc".into()
}

pub(super) fn write_manifest(dir: &Path, manifest: &Manifest) -> Result<(), RunError> {
    let mut bytes =
        serde_json::to_vec_pretty(manifest).map_err(|e| RunError::Settings(e.to_string()))?;
    bytes.push(b'\n');
    state::atomic_write_shared(&dir.join("manifest.json"), &bytes)?;
    Ok(())
}

/// The manifest of a run directory, if it has a readable one.
pub fn read_manifest(dir: &Path) -> Option<Manifest> {
    load_manifest(dir).ok().flatten()
}

/// The manifest of `dir`: `None` when there is no `manifest.json`, an error naming the file
/// when it cannot be read as one (so a viewer can say why a run is not shown).
pub fn load_manifest(dir: &Path) -> Result<Option<Manifest>, String> {
    let path = dir.join("manifest.json");
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(format!("cannot read {}: {error}", path.display())),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|error| format!("{} is not a run manifest: {error}", path.display()))
}

fn git_commit() -> Option<String> {
    let output = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::path_safe;

    /// Regression (found by probing): a workload named `../../evil` put its run directory two
    /// levels above `runs/`.
    #[test]
    fn a_name_becomes_one_path_component_and_plain_names_are_unchanged() {
        assert_eq!(path_safe("../../evil"), "_.._.._evil");
        assert_eq!(path_safe("/etc/x"), "_etc_x");
        assert_eq!(path_safe(".hidden"), "_.hidden");
        for plain in ["qa-builtin", "needle_builtin", "v1.2", "données"] {
            assert_eq!(path_safe(plain), plain);
        }
        let id = format!("{}-fixture-0123456789", path_safe("../../evil"));
        assert_eq!(std::path::Path::new(&id).components().count(), 1);
    }
}
