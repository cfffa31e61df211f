//! The response cache of HTTP runners: a successful reply stored under a key made of the
//! endpoint, the exact request and the replicate, so re-running a trial (a resume, a re-run
//! into a new directory, another shard layout) does not pay for the same call twice.
//!
//! Entries live under the state directory in group-commit packs
//! (`$SVC_HOME/responses/packs/`, keys `responses/<aa>/<rest of the key>`), so a run of 10k
//! trials adds two files per process, not 10k. The replicate is part of the key: replicates
//! are separate samples by design, so replicate 1 never reuses replicate 0's answer; a re-run
//! of replicate 1 reuses replicate 1's. Only successes are cached: an error is re-tried by the
//! next run that asks.
//!
//! An entry keeps the original call's reply, latency and time, and a reader checks that the
//! entry names the key it was looked up by (a damaged pack cannot serve another request's
//! answer).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::{ModelReply, Runner};
use crate::digest;
use crate::state::{GroupCommit, Packs, StateError};
use crate::trial::UsageSource;

/// Folder of the cache under the state directory.
pub const CACHE_DIR: &str = "responses";

/// Version of the key derivation; bumping it orphans old entries rather than misreading them.
const KEY_VERSION: &str = "svc-response-cache-v1";

/// One cached reply and how it was first obtained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CachedResponse {
    pub key: String,
    pub text: String,
    pub provider_request_id: String,
    pub input_tokens: Option<u64>,
    /// Entries stored before cached-token accounting have none.
    #[serde(default)]
    pub cached_input_tokens: Option<u64>,
    #[serde(default)]
    pub cache_write_tokens: Option<u64>,
    pub output_tokens: u64,
    pub reasoning_tokens: u64,
    pub usage_source: UsageSource,
    /// Latency of the original call (all attempts), in milliseconds.
    pub latency_ms: f64,
    /// When the original call was made (RFC 3339).
    pub created_at: String,
}

impl CachedResponse {
    pub fn reply(&self) -> ModelReply {
        ModelReply {
            text: self.text.clone(),
            provider_request_id: self.provider_request_id.clone(),
            input_tokens: self.input_tokens,
            cached_input_tokens: self.cached_input_tokens,
            cache_write_tokens: self.cache_write_tokens,
            output_tokens: self.output_tokens,
            reasoning_tokens: self.reasoning_tokens,
            usage_source: self.usage_source,
        }
    }
}

/// The cache key of `request_sha256` (see `harness::audit`) at `replicate` on `runner`'s
/// endpoint. The API key is not part of it: the same request to the same endpoint is the same
/// call whoever pays for it.
pub fn key(runner: &Runner, request_sha256: &str, replicate: u64) -> String {
    digest::sha256_hex(format!(
        "{KEY_VERSION}\u{1f}{}\u{1f}{}\u{1f}{request_sha256}\u{1f}{replicate}",
        runner.spec.kind.as_str(),
        runner.spec.base_url.as_deref().unwrap_or_default(),
    ))
}

/// An open cache.
#[derive(Debug)]
pub struct ResponseCache {
    home: PathBuf,
    group: GroupCommit,
    packs: Packs,
    /// Entries stored by this process, readable before their sync.
    session: Mutex<HashMap<String, CachedResponse>>,
}

impl ResponseCache {
    /// The cache under the state directory `state_home`.
    pub fn open(state_home: &Path) -> Self {
        let home = state_home.join(CACHE_DIR);
        Self {
            group: GroupCommit::new(&home),
            packs: Packs::new(&home),
            home,
            session: Mutex::new(HashMap::new()),
        }
    }

    fn path(&self, key: &str) -> PathBuf {
        let (head, tail) = key.split_at(2.min(key.len()));
        self.home.join(CACHE_DIR).join(head).join(tail)
    }

    /// The entry for `key`, if any. A damaged entry reads as a miss (the call is made again and
    /// stored afresh) rather than an error: the cache only ever saves money.
    pub fn get(&self, key: &str) -> Option<CachedResponse> {
        if let Some(hit) = self.lock().get(key) {
            return Some(hit.clone());
        }
        let bytes = self.packs.read_known(&self.path(key)).ok()??;
        let entry: CachedResponse = serde_json::from_slice(&bytes).ok()?;
        (entry.key == key).then_some(entry)
    }

    /// Stages `entry`; it is durable after the next [`sync`](Self::sync).
    pub fn put(&self, entry: CachedResponse) -> Result<(), StateError> {
        let bytes = serde_json::to_vec(&entry).unwrap_or_default();
        self.group.stage(&self.path(&entry.key), &bytes)?;
        self.lock().insert(entry.key.clone(), entry);
        Ok(())
    }

    /// Makes every staged entry durable.
    pub fn sync(&self) -> Result<(), StateError> {
        self.group.sync().map(|_| ())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, CachedResponse>> {
        // Inserts and reads only: a poisoned map is still consistent.
        self.session.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str) -> CachedResponse {
        CachedResponse {
            key: key.into(),
            text: "green".into(),
            provider_request_id: "chatcmpl-1".into(),
            input_tokens: Some(10),
            cached_input_tokens: Some(4),
            cache_write_tokens: None,
            output_tokens: 1,
            reasoning_tokens: 0,
            usage_source: UsageSource::ProviderResponse,
            latency_ms: 12.5,
            created_at: "2026-11-23T00:00:00Z".into(),
        }
    }

    #[test]
    fn entries_survive_a_new_process_and_keys_are_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let key = "ab".repeat(32);
        {
            let cache = ResponseCache::open(dir.path());
            assert!(cache.get(&key).is_none());
            cache.put(entry(&key)).expect("put");
            assert_eq!(cache.get(&key), Some(entry(&key)), "readable before sync");
            cache.sync().expect("sync");
        }
        let reopened = ResponseCache::open(dir.path());
        assert_eq!(reopened.get(&key), Some(entry(&key)));
        assert!(reopened.get(&"cd".repeat(32)).is_none());
        // Two packs files (pack + index) for any number of entries.
        let packs = dir.path().join(CACHE_DIR).join("packs");
        assert_eq!(std::fs::read_dir(packs).expect("packs").count(), 2);
    }

    #[test]
    fn keys_separate_replicates_and_endpoints() {
        let runner = Runner::fixture();
        let a = key(&runner, "r1", 0);
        assert_eq!(a, key(&runner, "r1", 0));
        assert_ne!(a, key(&runner, "r1", 1));
        assert_ne!(a, key(&runner, "r2", 0));
        let mut spec = runner.spec.clone();
        spec.base_url = Some("http://elsewhere/v1".into());
        let other = Runner::from_spec(spec, "sha".into()).expect("runner");
        assert_ne!(a, key(&other, "r1", 0));
    }
}
