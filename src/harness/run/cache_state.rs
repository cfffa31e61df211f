//! A trial's provider prefix-cache state, from the cached-token counts of its answer call, as
//! the `cache_usage` note of `notes.jsonl` records it (the trial record has no field for it).
//!
//! A prefix-caching server (llama.cpp, OpenAI, Anthropic with cache control) answers a prompt
//! whose beginning it has just seen much faster, and hosted providers bill cached input at a
//! discount. That is a real effect, so it is measured rather than hidden: the report splits
//! latency and cost by this state per condition.

use serde::{Deserialize, Serialize};

use crate::harness::runner::ModelReply;

/// The `kind` of the note.
pub const NOTE_KIND: &str = "cache_usage";

/// Whether the provider served part of the prompt from its cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CacheState {
    /// At least one prompt token was read from the provider's cache.
    Cached,
    /// The provider reported zero cached tokens.
    Uncached,
    /// The provider did not report cached tokens (the fixture, a server without the field).
    NotReported,
}

impl CacheState {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheState::Cached => "cached",
            CacheState::Uncached => "uncached",
            CacheState::NotReported => "not_reported",
        }
    }
}

impl std::fmt::Display for CacheState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The `values` of a `cache_usage` note.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CacheUsage {
    pub cache_state: CacheState,
    pub input_tokens: Option<u64>,
    pub cached_input_tokens: Option<u64>,
    pub cache_write_tokens: Option<u64>,
}

impl CacheUsage {
    /// The usage of a reply that reports cached or cache-write tokens; `None` when it reports
    /// neither (then there is no note, and reports count the trial as `not_reported`).
    pub fn of(reply: &ModelReply) -> Option<Self> {
        if reply.cached_input_tokens.is_none() && reply.cache_write_tokens.is_none() {
            return None;
        }
        let cache_state = match reply.cached_input_tokens {
            Some(n) if n > 0 => CacheState::Cached,
            _ => CacheState::Uncached,
        };
        Some(Self {
            cache_state,
            input_tokens: reply.input_tokens,
            cached_input_tokens: reply.cached_input_tokens,
            cache_write_tokens: reply.cache_write_tokens,
        })
    }

    /// The note's human-readable detail.
    pub fn detail(&self) -> String {
        let show = |n: Option<u64>| n.map_or_else(|| "not reported".to_string(), |n| n.to_string());
        format!(
            "{}: {} of {} input tokens read from the provider's cache, {} written to it; billed_cost_usd prices them at the snapshot's cached and cache-write rates",
            self.cache_state,
            show(self.cached_input_tokens),
            show(self.input_tokens),
            show(self.cache_write_tokens),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trial::UsageSource;

    fn reply(cached: Option<u64>, write: Option<u64>) -> ModelReply {
        ModelReply {
            text: "x".into(),
            provider_request_id: "id".into(),
            input_tokens: Some(100),
            cached_input_tokens: cached,
            cache_write_tokens: write,
            output_tokens: 1,
            reasoning_tokens: 0,
            usage_source: UsageSource::ProviderResponse,
        }
    }

    #[test]
    fn states_follow_the_reported_counts() {
        assert_eq!(CacheUsage::of(&reply(None, None)), None);
        let state = |c, w| CacheUsage::of(&reply(c, w)).expect("reported").cache_state;
        assert_eq!(state(Some(64), None), CacheState::Cached);
        assert_eq!(state(Some(0), None), CacheState::Uncached);
        assert_eq!(state(None, Some(90)), CacheState::Uncached);
        let json = serde_json::to_value(CacheUsage::of(&reply(Some(64), None))).expect("json");
        assert_eq!(json["cache_state"], "cached");
        assert_eq!(json["cached_input_tokens"], 64);
    }
}
