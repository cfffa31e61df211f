//! Events and the evolution loop (SPEC §6, §8, §9.2).
//!
//! - [`Event`]: what svc tells the outside world (gap detections, skill synthesis, benchmark
//!   and promotion, dream-cycle changes), one JSON object with `type` and `at`;
//! - [`notify`]: webhook delivery (`SVC_WEBHOOK_CHAT_A`, `SVC_WEBHOOK_CHAT_B`) by background
//!   workers with bounded queues and bounded retries, never blocking the caller;
//! - [`bot`]: the two-way chat bot (`SVC_BOT_TOKEN`, Telegram Bot API shape) answering
//!   `/status`, `/skills`, `/gaps`, `/dream` from real state;
//! - [`evolution`]: gaps → skills: detect, synthesize, benchmark, promote, spend (the dream
//!   cycle), its append-only trace and the skill store;
//! - [`federation`]: the opt-in export of anonymous ranking-weight updates.
//!
//! ## Event JSON shape
//!
//! ```json
//! {"type": "gap_detected", "at": "2026-11-23T23:59:00.123Z",
//!  "entity": "city.md", "miss_count": 4, "threshold": 3, "chunk_ids": ["city.md#L5-7"]}
//! ```
//!
//! `type` is one of `gap_detected`, `skill_synthesized`, `skill_benchmarked`,
//! `skill_promoted`, `dream_cycle`; the other fields are the payload of that type (see
//! [`EventPayload`]).

pub mod bot;
pub mod evolution;
pub mod federation;
pub mod notify;
pub mod service;

use serde::{Deserialize, Serialize};

/// Webhook URL environment variables (each optional; both may be set).
pub const SVC_WEBHOOK_CHAT_A: &str = "SVC_WEBHOOK_CHAT_A";
pub const SVC_WEBHOOK_CHAT_B: &str = "SVC_WEBHOOK_CHAT_B";
/// The chat bot's token; the bot runs only when it is set.
pub const SVC_BOT_TOKEN: &str = "SVC_BOT_TOKEN";
/// The bot API's base URL (default [`bot::DEFAULT_BOT_API`]).
pub const SVC_BOT_API: &str = "SVC_BOT_API";
/// A chat the bot pushes events to (besides answering commands in any chat).
pub const SVC_BOT_CHAT_ID: &str = "SVC_BOT_CHAT_ID";
/// Seconds between the daemon's dream cycles (default [`evolution::DEFAULT_DREAM_INTERVAL`]).
pub const SVC_DREAM_INTERVAL: &str = "SVC_DREAM_INTERVAL";

/// One event: when it happened and what.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// RFC 3339 UTC with milliseconds.
    pub at: String,
    #[serde(flatten)]
    pub payload: EventPayload,
}

impl Event {
    /// An event stamped now.
    pub fn now(payload: EventPayload) -> Self {
        Self {
            at: crate::clock::rfc3339(std::time::SystemTime::now()),
            payload,
        }
    }

    /// The wire name of its type.
    pub fn kind(&self) -> EventKind {
        match &self.payload {
            EventPayload::GapDetected { .. } => EventKind::GapDetected,
            EventPayload::SkillSynthesized { .. } => EventKind::SkillSynthesized,
            EventPayload::SkillBenchmarked { .. } => EventKind::SkillBenchmarked,
            EventPayload::SkillPromoted { .. } => EventKind::SkillPromoted,
            EventPayload::DreamCycle { .. } => EventKind::DreamCycle,
        }
    }

    /// One line for a chat.
    pub fn summary(&self) -> String {
        match &self.payload {
            EventPayload::GapDetected {
                entity,
                miss_count,
                threshold,
                ..
            } => format!(
                "svc: gap detected: {entity} was needed but not sent {miss_count} times (threshold {threshold})"
            ),
            EventPayload::SkillSynthesized {
                skill_id,
                entity,
                trigger_terms,
                ..
            } => format!(
                "svc: skill {skill_id} synthesized (draft): include {entity} for queries about {}",
                trigger_terms.join(", ")
            ),
            EventPayload::SkillBenchmarked {
                skill_id,
                passed,
                queries,
                misses_without,
                misses_with,
                held_out,
                worsened,
            } => format!(
                "svc: skill {skill_id} benchmark {}: misses {misses_without} -> {misses_with} over {queries} {} quer{}{}",
                if *passed { "passed" } else { "failed" },
                if *held_out { "held-out" } else { "recorded" },
                if *queries == 1 { "y" } else { "ies" },
                // Fewer misses read as a success when the reason it failed was this.
                match worsened {
                    0 => String::new(),
                    n => format!(", {n} got worse"),
                }
            ),
            EventPayload::SkillPromoted { skill_id, entity } => {
                format!("svc: skill {skill_id} promoted (includes {entity})")
            }
            EventPayload::DreamCycle {
                cycle_id,
                gaps,
                synthesized,
                promoted,
                spend_tokens,
                ..
            } => format!(
                "svc: dream cycle {cycle_id}: {gaps} gap(s), {synthesized} skill(s) synthesized, {promoted} promoted, {spend_tokens} tokens spent"
            ),
        }
    }
}

/// The closed set of event types (the `type` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    GapDetected,
    SkillSynthesized,
    SkillBenchmarked,
    SkillPromoted,
    DreamCycle,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventPayload {
    /// An entity (a file) selection keeps missing: recovered by the fixed-point loop in
    /// `miss_count` runs, at or above `threshold`.
    GapDetected {
        entity: String,
        miss_count: usize,
        threshold: usize,
        chunk_ids: Vec<String>,
    },
    /// A draft skill was made for a gap.
    SkillSynthesized {
        skill_id: String,
        entity: String,
        trigger_terms: Vec<String>,
        include: Vec<String>,
        token_cost: f64,
    },
    /// A skill was replayed through selection with and without it.
    SkillBenchmarked {
        skill_id: String,
        passed: bool,
        held_out: bool,
        queries: usize,
        misses_without: usize,
        misses_with: usize,
        worsened: usize,
    },
    /// A skill moved from draft to promoted (only after a passed benchmark).
    SkillPromoted { skill_id: String, entity: String },
    /// A dream cycle changed something (new gaps, skills or promotions).
    DreamCycle {
        cycle_id: String,
        gaps: usize,
        synthesized: usize,
        promoted: usize,
        spend_tokens: u64,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by probing: a benchmark that failed because queries got worse read "misses 2 -> 0",
    /// like a success.
    #[test]
    fn a_failed_benchmark_says_what_got_worse() {
        let event = Event::now(EventPayload::SkillBenchmarked {
            skill_id: "skl_1".into(),
            passed: false,
            held_out: true,
            queries: 2,
            misses_without: 2,
            misses_with: 0,
            worsened: 2,
        });
        assert_eq!(
            event.summary(),
            "svc: skill skl_1 benchmark failed: misses 2 -> 0 over 2 held-out queries, 2 got worse"
        );
    }
}
