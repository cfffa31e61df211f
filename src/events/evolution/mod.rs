//! The evolution loop: gaps → skills (SPEC §6.2, §8, §9.2).
//!
//! A **dream cycle** is one offline pass over the recorded runs of a state directory:
//!
//! 1. `detect` ([`gaps`]): files selection kept missing (recovered by the fixed-point loop in
//!    at least `threshold` runs);
//! 2. `synthesize` ([`skills`]): a draft skill per gap, structurally (no model call, token
//!    cost 0.0): the query terms shared by the runs that missed it trigger the inclusion of
//!    the chunks they recovered. With at least [`MIN_FOR_HOLDOUT`] misses, only the older half
//!    is used to synthesize;
//! 3. `benchmark` ([`benchmark`]): the skill replayed through real selection, with and without
//!    it, on the runs *not* used to synthesize it (the held-out half and every other recorded
//!    run its trigger matches); with fewer misses, on all of them (`held_out: false`);
//! 4. `promote`: draft → promoted only when that benchmark passed;
//! 5. `spend` ([`spend`]): the tokens the cycle spent on learning, refused if they would break
//!    spend ≤ 5 % of lifetime savings.
//!
//! Each step is appended to the trace ([`trace`]) in that order. A gap already covered by a
//! promoted skill, or by a draft made when it had as many misses, is not worked again, so an
//! idle cycle writes nothing. The cycle's summary is kept in `learning/dream.json`; the events
//! it returns are for the caller to deliver.

pub mod benchmark;
pub mod gaps;
pub mod skills;
pub mod spend;
pub mod trace;

use std::collections::{BTreeMap, HashSet};
use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use self::gaps::{Gap, Observation};
use self::skills::{Origin, Skill, SkillStatus, SkillStore, SynthesisMethod, Trigger};
use self::trace::{CycleTrace, Step};
use super::{Event, EventPayload};
use crate::context::CommitStore;
use crate::state;

/// A file missed in this many runs is a gap.
pub const DEFAULT_THRESHOLD: usize = 3;
/// With at least this many misses, synthesis uses the older half and the benchmark the rest.
pub const MIN_FOR_HOLDOUT: usize = 4;
/// Chunks one skill includes at most.
pub const MAX_INCLUDE: usize = 3;
/// Trigger terms one skill has at most.
pub const MAX_TRIGGER_TERMS: usize = 4;
/// Time between the daemon's dream cycles.
pub const DEFAULT_DREAM_INTERVAL: Duration = Duration::from_secs(3600);
/// The last cycle's summary, relative to the state directory.
pub const DREAM_FILE: &str = "learning/dream.json";

/// Settings of a cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DreamSettings {
    pub threshold: usize,
}

impl Default for DreamSettings {
    fn default() -> Self {
        Self {
            threshold: DEFAULT_THRESHOLD,
        }
    }
}

/// What happened to one gap in a cycle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GapOutcome {
    pub entity: String,
    pub miss_count: usize,
    pub skill_id: Option<String>,
    /// `promoted`, `draft`, or why no skill was made.
    pub outcome: String,
}

/// The summary of one cycle (`learning/dream.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DreamReport {
    pub cycle_id: String,
    pub started_at: String,
    pub finished_at: String,
    /// Recorded runs read.
    pub observations: usize,
    /// Every gap found, worked or not.
    pub gaps: Vec<Gap>,
    /// The gaps worked on in this cycle.
    pub worked: Vec<GapOutcome>,
    pub synthesized: usize,
    pub promoted: usize,
    pub spend_tokens: u64,
    pub lifetime_spend: u64,
    pub lifetime_savings: spend::Savings,
    /// Whether the cycle changed anything (new skills or promotions).
    pub changed: bool,
    pub warnings: Vec<String>,
    /// Events for the caller to deliver.
    #[serde(skip)]
    pub events: Vec<Event>,
}

#[derive(Debug, thiserror::Error)]
pub enum EvolutionError {
    #[error(transparent)]
    Gaps(#[from] gaps::GapError),
    #[error(transparent)]
    Skills(#[from] skills::SkillError),
    #[error(transparent)]
    Trace(#[from] trace::TraceError),
    #[error(transparent)]
    State(#[from] state::StateError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is not a dream summary: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

/// The recorded runs and the gaps among them (read-only; `svc gaps`).
pub fn current_gaps(
    home: &Path,
    threshold: usize,
) -> Result<(gaps::Observed, Vec<Gap>), EvolutionError> {
    let observed = gaps::observations(home)?;
    let found = gaps::detect(&observed.observations, threshold);
    Ok((observed, found))
}

/// The last cycle's summary, if a cycle ran.
pub fn last_dream(home: &Path) -> Result<Option<DreamReport>, EvolutionError> {
    let path = home.join(DREAM_FILE);
    match fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| EvolutionError::Parse { path, source }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(EvolutionError::Io { path, source }),
    }
}

fn new_cycle_id() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let seed = format!("{}:{}", now.as_nanos(), std::process::id());
    format!(
        "dream_{}_{}",
        now.as_secs(),
        &crate::digest::sha256_hex(seed)[..8]
    )
}

/// Terms in at least half of `queries` (most shared first, at most [`MAX_TRIGGER_TERMS`]).
fn trigger_of(queries: &[&str]) -> Option<Trigger> {
    if queries.is_empty() {
        return None;
    }
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for query in queries {
        for term in crate::proof::planner::terms(query) {
            *counts.entry(term).or_default() += 1;
        }
    }
    let needed = queries.len().div_ceil(2);
    let mut shared: Vec<(String, usize)> =
        counts.into_iter().filter(|(_, n)| *n >= needed).collect();
    shared.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    shared.truncate(MAX_TRIGGER_TERMS);
    if shared.is_empty() {
        return None;
    }
    let terms: Vec<String> = shared.into_iter().map(|(t, _)| t).collect();
    Some(Trigger {
        min_matches: terms.len().div_ceil(2),
        terms,
    })
}

/// A gap being worked on in this cycle.
struct Work<'a> {
    gap: &'a Gap,
    skill: Option<Skill>,
    synthesized_from: Vec<&'a Observation>,
    held_out: bool,
    outcome: String,
}

/// Runs one dream cycle over `home` (see the module docs). Cycles of one state directory take
/// turns (an OS lock on `learning/dream.lock`).
pub fn dream(home: &Path, settings: DreamSettings) -> Result<DreamReport, EvolutionError> {
    let lock_path = home.join("learning/dream.lock");
    let io_error = |source| EvolutionError::Io {
        path: lock_path.clone(),
        source,
    };
    crate::state::create_dir_durable(&home.join("learning")).map_err(io_error)?;
    let lock = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .map_err(io_error)?;
    lock.lock().map_err(io_error)?;

    let started_at = crate::clock::rfc3339(std::time::SystemTime::now());
    let cycle_id = new_cycle_id();
    let observed = gaps::observations(home)?;
    let found = gaps::detect(&observed.observations, settings.threshold);
    let mut store = SkillStore::load(home)?;
    let by_id: BTreeMap<&str, &Observation> = observed
        .observations
        .iter()
        .map(|o| (o.id.as_str(), o))
        .collect();
    let mut trace = CycleTrace::new(home, &cycle_id);
    let mut events = Vec::new();

    // Gaps with something new to learn from.
    let active: Vec<&Gap> = found
        .iter()
        .filter(|gap| {
            let mut known = store.for_entity(&gap.entity);
            !known
                .any(|s| s.status == SkillStatus::Promoted || s.origin.miss_count >= gap.miss_count)
        })
        .collect();

    // detect
    for gap in &active {
        trace.append(Step::Detect {
            entity: gap.entity.clone(),
            miss_count: gap.miss_count,
            threshold: settings.threshold,
            chunk_ids: gap.chunk_ids.clone(),
        })?;
        events.push(Event::now(EventPayload::GapDetected {
            entity: gap.entity.clone(),
            miss_count: gap.miss_count,
            threshold: settings.threshold,
            chunk_ids: gap.chunk_ids.clone(),
        }));
    }

    // synthesize
    let mut work: Vec<Work> = Vec::new();
    for gap in &active {
        let missed: Vec<&Observation> = gap
            .observations
            .iter()
            .filter_map(|id| by_id.get(id.as_str()).copied())
            .collect();
        let held_out = missed.len() >= MIN_FOR_HOLDOUT;
        let synthesized_from: Vec<&Observation> = if held_out {
            missed[..missed.len().div_ceil(2)].to_vec()
        } else {
            missed.clone()
        };
        let queries: Vec<&str> = synthesized_from
            .iter()
            .filter_map(|o| o.query.as_deref())
            .collect();
        let mut entry = Work {
            gap,
            skill: None,
            synthesized_from,
            held_out,
            outcome: String::new(),
        };
        let Some(trigger) = trigger_of(&queries) else {
            entry.outcome = "no skill: the runs that missed it share no query term".to_string();
            work.push(entry);
            continue;
        };
        let recovered_here: HashSet<&str> = entry
            .synthesized_from
            .iter()
            .flat_map(|o| o.recovered.iter())
            .filter(|(_, source)| *source == gap.entity)
            .map(|(id, _)| id.as_str())
            .collect();
        let include: Vec<String> = gap
            .chunk_ids
            .iter()
            .filter(|id| recovered_here.contains(id.as_str()))
            .take(MAX_INCLUDE)
            .cloned()
            .collect();
        let skill = Skill::draft(
            gap.entity.clone(),
            trigger,
            include,
            Origin {
                method: SynthesisMethod::Structural,
                token_cost: 0.0,
                cycle_id: cycle_id.clone(),
                synthesized_at: crate::clock::rfc3339(std::time::SystemTime::now()),
                miss_count: gap.miss_count,
                synthesized_from: entry.synthesized_from.len(),
            },
        );
        let stored = store.insert_draft(skill).clone();
        trace.append(Step::Synthesize {
            skill_id: stored.skill_id.clone(),
            entity: stored.entity.clone(),
            trigger_terms: stored.trigger.terms.clone(),
            include: stored.include.clone(),
            synthesized_from: entry
                .synthesized_from
                .iter()
                .map(|o| o.id.clone())
                .collect(),
            token_cost: stored.origin.token_cost,
        })?;
        events.push(Event::now(EventPayload::SkillSynthesized {
            skill_id: stored.skill_id.clone(),
            entity: stored.entity.clone(),
            trigger_terms: stored.trigger.terms.clone(),
            include: stored.include.clone(),
            token_cost: stored.origin.token_cost,
        }));
        entry.skill = Some(stored);
        work.push(entry);
    }

    // benchmark
    let commits = CommitStore::new(home);
    let mut results = BTreeMap::new();
    for entry in work.iter() {
        let Some(skill) = &entry.skill else { continue };
        let used: HashSet<&str> = entry
            .synthesized_from
            .iter()
            .map(|o| o.id.as_str())
            .collect();
        let missed: HashSet<&str> = entry.gap.observations.iter().map(String::as_str).collect();
        let replay: Vec<&Observation> = observed
            .observations
            .iter()
            .filter(|o| !entry.held_out || !used.contains(o.id.as_str()))
            .filter(|o| {
                missed.contains(o.id.as_str())
                    || o.query.as_deref().is_some_and(|q| skill.trigger.matches(q))
            })
            .collect();
        let result = benchmark::run(&commits, skill, &replay, entry.held_out);
        trace.append(Step::Benchmark {
            skill_id: skill.skill_id.clone(),
            queries: result.queries,
            held_out: result.held_out,
            misses_without: result.misses_without,
            misses_with: result.misses_with,
            worsened: result.worsened,
            passed: result.passed,
            verdict: result.verdict.clone(),
        })?;
        events.push(Event::now(EventPayload::SkillBenchmarked {
            skill_id: skill.skill_id.clone(),
            passed: result.passed,
            held_out: result.held_out,
            queries: result.queries,
            misses_without: result.misses_without,
            misses_with: result.misses_with,
            worsened: result.worsened,
        }));
        store.record_benchmark(&skill.skill_id, result.clone())?;
        results.insert(skill.skill_id.clone(), result);
    }

    // promote
    let mut promoted = 0;
    for entry in work.iter_mut() {
        let Some(skill) = &entry.skill else { continue };
        let passed = results.get(&skill.skill_id).is_some_and(|r| r.passed);
        let reason = results
            .get(&skill.skill_id)
            .map(|r| r.verdict.clone())
            .unwrap_or_default();
        let status = if passed {
            store.promote(&skill.skill_id)?;
            promoted += 1;
            events.push(Event::now(EventPayload::SkillPromoted {
                skill_id: skill.skill_id.clone(),
                entity: skill.entity.clone(),
            }));
            SkillStatus::Promoted
        } else {
            SkillStatus::Draft
        };
        trace.append(Step::Promote {
            skill_id: skill.skill_id.clone(),
            promoted: passed,
            status: status.as_str().to_string(),
            reason: reason.clone(),
        })?;
        entry.outcome = format!("{}: {reason}", status.as_str());
    }
    store.save(home)?;

    // spend
    let synthesized = work.iter().filter(|w| w.skill.is_some()).count();
    let spend_tokens: u64 = work
        .iter()
        .filter_map(|w| w.skill.as_ref())
        .map(|s| s.origin.token_cost.ceil() as u64)
        .sum();
    let (savings, unreadable) = spend::lifetime_savings(home);
    let mut warnings = observed.warnings.clone();
    if unreadable > 0 {
        warnings.push(format!(
            "{unreadable} commit(s) unreadable: not counted in lifetime savings"
        ));
    }
    let mut lifetime_spend = spend::lifetime_spend(&trace::read(home)?);
    if !active.is_empty() {
        let (step, refused) = spend::spend_step(home, spend_tokens, savings.tokens_saved)?;
        if let Step::Spend {
            lifetime_spend: after,
            ..
        } = &step
        {
            lifetime_spend = *after;
        }
        if let Some(refused) = refused {
            warnings.push(refused.to_string());
        }
        trace.append(step)?;
    }

    let changed = synthesized > 0 || promoted > 0;
    if changed {
        events.push(Event::now(EventPayload::DreamCycle {
            cycle_id: cycle_id.clone(),
            gaps: active.len(),
            synthesized,
            promoted,
            spend_tokens,
        }));
    }
    let report = DreamReport {
        cycle_id,
        started_at,
        finished_at: crate::clock::rfc3339(std::time::SystemTime::now()),
        observations: observed.observations.len(),
        worked: work
            .iter()
            .map(|w| GapOutcome {
                entity: w.gap.entity.clone(),
                miss_count: w.gap.miss_count,
                skill_id: w.skill.as_ref().map(|s| s.skill_id.clone()),
                outcome: w.outcome.clone(),
            })
            .collect(),
        gaps: found.clone(),
        synthesized,
        promoted,
        spend_tokens,
        lifetime_spend,
        lifetime_savings: savings,
        changed,
        warnings,
        events,
    };
    let mut bytes = serde_json::to_vec_pretty(&report).unwrap_or_default();
    bytes.push(b'\n');
    state::atomic_write(&home.join(DREAM_FILE), &bytes)?;
    drop(lock);
    Ok(report)
}

#[cfg(test)]
pub(crate) mod tests;
