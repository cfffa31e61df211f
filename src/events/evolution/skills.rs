//! Skills: structural recipes that close a gap ("queries matching these terms should also
//! include these chunks"), their store (`learning/skills.json`, written atomically) and their
//! export.
//!
//! A skill is born `draft` and becomes `promoted` only through [`SkillStore::promote`], which
//! demands a passed benchmark of that same skill.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::benchmark::BenchmarkResult;
use crate::context::select::SelectOptions;
use crate::digest;
use crate::state;

/// The skill store, relative to the state directory.
pub const SKILLS_FILE: &str = "learning/skills.json";
/// Format tag of the store.
pub const SKILLS_FORMAT: &str = "svc.skills.v1";
/// Format tag of `svc skills export`.
pub const EXPORT_FORMAT: &str = "svc.skills-export.v1";
/// The external skill spec SPEC §9.2 names; its text is not available to us, so the export
/// documents its own shape and says which version it aims at.
pub const EXPORT_SPEC_VERSION: &str = "0.1";

/// Where a skill is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum SkillStatus {
    /// Synthesized, not (yet) shown to help.
    Draft,
    /// Passed its benchmark.
    Promoted,
}

impl SkillStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SkillStatus::Draft => "draft",
            SkillStatus::Promoted => "promoted",
        }
    }
}

/// How a skill was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SynthesisMethod {
    /// From recorded misses alone, without a model call: costs no tokens.
    Structural,
}

/// Which queries a skill applies to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trigger {
    /// Normalised query terms (lower-case, stemmed; see `proof::planner::terms`).
    pub terms: Vec<String>,
    /// A query matches when it has at least this many of `terms`.
    pub min_matches: usize,
}

impl Trigger {
    /// Whether `query` matches.
    pub fn matches(&self, query: &str) -> bool {
        let query_terms = crate::proof::planner::terms(query);
        let found = self
            .terms
            .iter()
            .filter(|t| query_terms.binary_search(t).is_ok())
            .count();
        found >= self.min_matches.max(1)
    }
}

/// Where a skill came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Origin {
    pub method: SynthesisMethod,
    /// Model tokens spent making it: 0.0 for structural synthesis.
    pub token_cost: f64,
    pub cycle_id: String,
    pub synthesized_at: String,
    /// Misses of the entity when it was synthesized.
    pub miss_count: usize,
    /// Recorded runs it was synthesized from.
    pub synthesized_from: usize,
}

/// One skill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Skill {
    /// `skl_` and 16 hex digits of the hash of entity, trigger and include.
    pub skill_id: String,
    pub status: SkillStatus,
    /// The file selection kept missing.
    pub entity: String,
    pub trigger: Trigger,
    /// Chunk ids (`path#Lfirst-last`) to send in full when the trigger matches.
    pub include: Vec<String>,
    pub origin: Origin,
    /// The last benchmark of this skill.
    pub benchmark: Option<BenchmarkResult>,
    pub updated_at: String,
}

impl Skill {
    /// A draft skill, its id derived from what it does.
    pub fn draft(entity: String, trigger: Trigger, include: Vec<String>, origin: Origin) -> Self {
        let identity = serde_json::json!({
            "entity": entity, "terms": trigger.terms, "min": trigger.min_matches, "include": include,
        });
        let hash = digest::sha256_hex(identity.to_string());
        Self {
            skill_id: format!("skl_{}", &hash[..16]),
            status: SkillStatus::Draft,
            entity,
            trigger,
            include,
            updated_at: origin.synthesized_at.clone(),
            origin,
            benchmark: None,
        }
    }

    /// `options` with this skill applied to `query`: its chunks pinned (sent in full) when the
    /// trigger matches and the chunk is one of `known` (ids of the index selected from).
    pub fn apply(
        &self,
        query: &str,
        options: &SelectOptions,
        known: &dyn Fn(&str) -> bool,
    ) -> SelectOptions {
        let mut applied = options.clone();
        if self.trigger.matches(query) {
            for chunk in &self.include {
                if known(chunk) && !applied.pinned.contains(chunk) {
                    applied.pinned.push(chunk.clone());
                }
            }
        }
        applied
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    // The cause is in the message (not a `source` too, which printed it twice).
    #[error("cannot read {path}: {error}")]
    Read { path: PathBuf, error: io::Error },
    #[error(
        "{path} is not a skill store: {error} (move it aside; the next dream cycle starts a new one)"
    )]
    Parse {
        path: PathBuf,
        error: serde_json::Error,
    },
    #[error(
        "{path}: skill {skill_id} {problem}; the store refuses it (fix or remove the entry, or move the file aside: the next dream cycle starts a new one)"
    )]
    Invalid {
        path: PathBuf,
        skill_id: String,
        problem: String,
    },
    #[error("{path} has format {found}, expected {SKILLS_FORMAT}")]
    Format { path: PathBuf, found: String },
    #[error("unknown skill {skill_id} (list them with `svc skills list`)")]
    Unknown { skill_id: String },
    #[error(
        "skill {skill_id} cannot be promoted: {reason}; a skill is promoted only after its own benchmark passed"
    )]
    NotBenchmarked { skill_id: String, reason: String },
    #[error(transparent)]
    State(#[from] state::StateError),
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreFile {
    format: String,
    skills: Vec<Skill>,
}

/// What makes a stored skill one the store would never have written (a hand edit, another
/// tool): it took effect as written (a promoted skill with a failed benchmark pinned its
/// chunks in serving).
fn contradiction(skill: &Skill, earlier: &BTreeMap<String, Skill>) -> Option<String> {
    if earlier.contains_key(&skill.skill_id) {
        return Some("appears twice".to_string());
    }
    if skill.status == SkillStatus::Promoted && !skill.benchmark.as_ref().is_some_and(|b| b.passed)
    {
        return Some("is promoted without a passed benchmark".to_string());
    }
    if let Some(bench) = &skill.benchmark
        && bench.passed
        && (bench.worsened > 0 || bench.misses_with >= bench.misses_without)
    {
        return Some(format!(
            "has a benchmark marked passed that did not pass (misses {} -> {}, {} got worse)",
            bench.misses_without, bench.misses_with, bench.worsened
        ));
    }
    if skill.include.is_empty() || skill.include.iter().any(|id| !id.contains("#L")) {
        return Some(
            "includes no chunk, or something that is not a chunk id (path#Lfirst-last)".to_string(),
        );
    }
    let trigger = &skill.trigger;
    let mut terms: Vec<&String> = trigger.terms.iter().collect();
    terms.sort();
    terms.dedup();
    if terms.len() < trigger.terms.len() || trigger.terms.iter().any(|t| t.trim().is_empty()) {
        return Some("has an empty or repeated trigger term".to_string());
    }
    if trigger.min_matches == 0 || trigger.min_matches > trigger.terms.len() {
        return Some(format!(
            "needs {} of its {} trigger term(s) (at least 1, at most all)",
            trigger.min_matches,
            trigger.terms.len()
        ));
    }
    None
}

/// The skills of a state directory, by id.
#[derive(Debug, Clone, Default)]
pub struct SkillStore {
    skills: BTreeMap<String, Skill>,
}

impl SkillStore {
    /// Loads `learning/skills.json` (empty when absent).
    pub fn load(home: &Path) -> Result<Self, SkillError> {
        let path = home.join(SKILLS_FILE);
        let bytes = match fs::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Self::default()),
            Err(error) => return Err(SkillError::Read { path, error }),
        };
        let file: StoreFile =
            serde_json::from_slice(&bytes).map_err(|error| SkillError::Parse {
                path: path.clone(),
                error,
            })?;
        if file.format != SKILLS_FORMAT {
            return Err(SkillError::Format {
                path,
                found: file.format,
            });
        }
        let mut skills = BTreeMap::new();
        for skill in file.skills {
            if let Some(problem) = contradiction(&skill, &skills) {
                return Err(SkillError::Invalid {
                    path,
                    skill_id: skill.skill_id,
                    problem,
                });
            }
            skills.insert(skill.skill_id.clone(), skill);
        }
        Ok(Self { skills })
    }

    /// Writes the store atomically.
    pub fn save(&self, home: &Path) -> Result<(), SkillError> {
        let file = StoreFile {
            format: SKILLS_FORMAT.to_string(),
            skills: self.skills.values().cloned().collect(),
        };
        // Strings, integers, booleans and finite floats serialise infallibly.
        let mut bytes = serde_json::to_vec_pretty(&file).unwrap_or_default();
        bytes.push(b'\n');
        state::atomic_write(&home.join(SKILLS_FILE), &bytes)?;
        Ok(())
    }

    pub fn all(&self) -> impl Iterator<Item = &Skill> {
        self.skills.values()
    }

    pub fn get(&self, skill_id: &str) -> Option<&Skill> {
        self.skills.get(skill_id)
    }

    /// The skills made for `entity`.
    pub fn for_entity<'a>(&'a self, entity: &'a str) -> impl Iterator<Item = &'a Skill> {
        self.skills.values().filter(move |s| s.entity == entity)
    }

    /// Adds a draft, or keeps the stored one with the same id (which may be promoted). A
    /// stored draft made again from a gap that has grown takes the new origin: it was made
    /// with that many misses, so the gap is not worked again until it grows further (its
    /// origin kept the old count, and every later cycle re-made the same draft).
    pub fn insert_draft(&mut self, skill: Skill) -> &Skill {
        let stored = self
            .skills
            .entry(skill.skill_id.clone())
            .or_insert_with(|| skill.clone());
        if stored.status == SkillStatus::Draft && stored.origin.miss_count < skill.origin.miss_count
        {
            stored.origin = skill.origin;
            stored.updated_at = crate::clock::rfc3339(std::time::SystemTime::now());
        }
        stored
    }

    /// Records a benchmark of `skill_id`.
    pub fn record_benchmark(
        &mut self,
        skill_id: &str,
        result: BenchmarkResult,
    ) -> Result<(), SkillError> {
        let skill = self
            .skills
            .get_mut(skill_id)
            .ok_or_else(|| SkillError::Unknown {
                skill_id: skill_id.to_string(),
            })?;
        skill.updated_at = crate::clock::rfc3339(std::time::SystemTime::now());
        skill.benchmark = Some(result);
        Ok(())
    }

    /// draft → promoted, only when the skill's recorded benchmark passed.
    pub fn promote(&mut self, skill_id: &str) -> Result<&Skill, SkillError> {
        let skill = self
            .skills
            .get_mut(skill_id)
            .ok_or_else(|| SkillError::Unknown {
                skill_id: skill_id.to_string(),
            })?;
        match &skill.benchmark {
            None => {
                return Err(SkillError::NotBenchmarked {
                    skill_id: skill_id.to_string(),
                    reason: "it has no benchmark".to_string(),
                });
            }
            Some(result) if !result.passed => {
                return Err(SkillError::NotBenchmarked {
                    skill_id: skill_id.to_string(),
                    reason: format!("its benchmark failed ({})", result.verdict),
                });
            }
            Some(_) => {}
        }
        skill.status = SkillStatus::Promoted;
        skill.updated_at = crate::clock::rfc3339(std::time::SystemTime::now());
        Ok(skill)
    }

    /// `options` with every promoted skill applied to `query` (see [`Skill::apply`]).
    pub fn apply_promoted(
        &self,
        query: &str,
        options: &SelectOptions,
        known: &dyn Fn(&str) -> bool,
    ) -> SelectOptions {
        self.skills
            .values()
            .filter(|s| s.status == SkillStatus::Promoted)
            .fold(options.clone(), |acc, s| s.apply(query, &acc, known))
    }
}

/// One exported skill (the shape is documented in docs/skills.md, "Skills, gaps and the dream
/// cycle").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportedSkill {
    pub id: String,
    pub name: String,
    pub description: String,
    pub status: SkillStatus,
    pub trigger: Trigger,
    pub action: ExportedAction,
    pub origin: Origin,
    /// Misses without and with the skill on its last benchmark, when it has one.
    pub evidence: Option<ExportedEvidence>,
}

/// What a skill does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportedAction {
    /// Always `include_chunks`: send these chunks in full.
    pub kind: String,
    pub chunk_ids: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportedEvidence {
    pub queries: usize,
    pub held_out: bool,
    pub misses_without: usize,
    pub misses_with: usize,
}

/// The document `svc skills export` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillExport {
    pub format: String,
    pub spec_version: String,
    pub exported_at: String,
    pub skills: Vec<ExportedSkill>,
}

/// Exports the promoted skills (and the drafts too with `include_drafts`).
pub fn export(store: &SkillStore, include_drafts: bool) -> SkillExport {
    let skills = store
        .all()
        .filter(|s| include_drafts || s.status == SkillStatus::Promoted)
        .map(|s| ExportedSkill {
            id: s.skill_id.clone(),
            name: format!("include {}", s.entity),
            description: format!(
                "Queries with at least {} of [{}] also need {} in full: selection kept leaving it out and the proof-guided loop had to recover it.",
                s.trigger.min_matches,
                s.trigger.terms.join(", "),
                s.include.join(", ")
            ),
            status: s.status,
            trigger: s.trigger.clone(),
            action: ExportedAction {
                kind: "include_chunks".to_string(),
                chunk_ids: s.include.clone(),
            },
            origin: s.origin.clone(),
            evidence: s.benchmark.as_ref().map(|b| ExportedEvidence {
                queries: b.queries,
                held_out: b.held_out,
                misses_without: b.misses_without,
                misses_with: b.misses_with,
            }),
        })
        .collect();
    SkillExport {
        format: EXPORT_FORMAT.to_string(),
        spec_version: EXPORT_SPEC_VERSION.to_string(),
        exported_at: crate::clock::rfc3339(std::time::SystemTime::now()),
        skills,
    }
}
