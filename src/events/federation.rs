//! Federation (SPEC §4.6): the opt-in export of anonymous ranking-weight updates.
//!
//! Off unless `SVC_FEDERATION=1` **and** `SVC_FEDERATION_URL` names an endpoint. The payload is
//! built only from closed sets and numbers: the learned weights of `learning/weights.json`
//! (`crate::daemon::learning`), each named by a [`crate::context::weights::Feature`] (a closed
//! enum) with its value, its hand-tuned default and the difference, the weights' version, and
//! integer counts of what they were learned from. No path, chunk id, query, identifier, session
//! or skill id, host name, time or install id is part of it, so nothing of the code or of the
//! questions asked about it can leave the machine; a test checks that no string of a learning
//! corpus appears in a payload built after learning on it.
//!
//! Payload (POST, `content-type: application/json`):
//!
//! ```json
//! {"format": "svc.federation.v1", "weights_version": 3,
//!  "weights": [{"feature": "definition", "value": 1.08, "default": 1.0, "delta": 0.08}, …],
//!  "counts": {"outcomes_seen": 4, "recovered_chunks_used": 4, "recorded_runs": 4, "gaps": 1,
//!             "skills_promoted": 1, "skills_draft": 0}}
//! ```

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::evolution::{self, skills::SkillStatus, skills::SkillStore};
use crate::context::weights::Feature;
use crate::daemon::learning::store as weights_store;

/// `1` opts in; unset, empty or `0` stays out.
pub const SVC_FEDERATION: &str = "SVC_FEDERATION";
/// The endpoint payloads are POSTed to.
pub const SVC_FEDERATION_URL: &str = "SVC_FEDERATION_URL";
/// Format tag of the payload.
pub const PAYLOAD_FORMAT: &str = "svc.federation.v1";

/// Where payloads go, once opted in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FederationSettings {
    pub url: String,
}

#[derive(Debug, thiserror::Error)]
pub enum FederationError {
    #[error(
        "{SVC_FEDERATION} is {0:?}: set it to 1 to opt in to anonymous weight sharing, or unset it (or 0) to stay out"
    )]
    BadOptIn(String),
    #[error(
        "{SVC_FEDERATION}=1 but {SVC_FEDERATION_URL} is not set: name the endpoint to send anonymous weight updates to"
    )]
    MissingUrl,
    #[error("{SVC_FEDERATION_URL} is {0:?}, not an http(s) URL")]
    BadUrl(String),
    #[error(
        "federation is off: set {SVC_FEDERATION}=1 and {SVC_FEDERATION_URL} to share anonymous weight updates"
    )]
    NotOptedIn,
    #[error("the federation endpoint {host} {message}")]
    Send { host: String, message: String },
    #[error(transparent)]
    Evolution(#[from] evolution::EvolutionError),
    #[error(transparent)]
    Weights(#[from] weights_store::StoreError),
}

/// The opt-in from variables read through `var` (`std::env::var` in the program; a map in
/// tests): `None` unless `SVC_FEDERATION=1`.
pub fn settings(
    var: impl Fn(&str) -> Option<String>,
) -> Result<Option<FederationSettings>, FederationError> {
    let opt_in = var(SVC_FEDERATION).unwrap_or_default();
    match opt_in.trim() {
        "" | "0" => return Ok(None),
        "1" => {}
        other => return Err(FederationError::BadOptIn(other.to_string())),
    }
    let url = var(SVC_FEDERATION_URL)
        .filter(|u| !u.trim().is_empty())
        .ok_or(FederationError::MissingUrl)?;
    let parsed =
        reqwest::Url::parse(url.trim()).map_err(|_| FederationError::BadUrl(url.clone()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(FederationError::BadUrl(url));
    }
    Ok(Some(FederationSettings {
        url: url.trim().to_string(),
    }))
}

/// The opt-in from the process environment.
pub fn settings_from_env() -> Result<Option<FederationSettings>, FederationError> {
    settings(|name| std::env::var(name).ok())
}

/// One weight as shared.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightUpdate {
    pub feature: Feature,
    pub value: f64,
    pub default: f64,
    /// `value - default`.
    pub delta: f64,
}

/// Counts of what the weights were learned from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Counts {
    /// Ledger outcomes the weights learned from, and recovered chunks that moved them.
    pub outcomes_seen: u64,
    pub recovered_chunks_used: u64,
    pub recorded_runs: u64,
    pub gaps: u64,
    pub skills_promoted: u64,
    pub skills_draft: u64,
}

/// What is sent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Payload {
    pub format: String,
    /// 0: nothing learned yet (the defaults).
    pub weights_version: u64,
    pub weights: Vec<WeightUpdate>,
    pub counts: Counts,
}

/// The payload for the learned weights and the learning state of `home`. A weights file that
/// cannot be read is an error (nothing is sent rather than the defaults in its place).
pub fn payload(home: &Path) -> Result<Payload, FederationError> {
    let file = weights_store::load_or_default(home)?;
    let weights = file.weights;
    let (observed, gaps) = evolution::current_gaps(home, evolution::DEFAULT_THRESHOLD)?;
    let store = SkillStore::load(home).map_err(evolution::EvolutionError::from)?;
    let promoted = store
        .all()
        .filter(|s| s.status == SkillStatus::Promoted)
        .count() as u64;
    Ok(Payload {
        format: PAYLOAD_FORMAT.to_string(),
        weights_version: file.version,
        weights: Feature::ALL
            .iter()
            .map(|&feature| {
                let value = weights.get(feature);
                let default = feature.default_value();
                WeightUpdate {
                    feature,
                    value,
                    default,
                    delta: value - default,
                }
            })
            .collect(),
        counts: Counts {
            outcomes_seen: file.feedback.outcomes_seen,
            recovered_chunks_used: file.feedback.recovered_chunks_used,
            recorded_runs: observed.observations.len() as u64,
            gaps: gaps.len() as u64,
            skills_promoted: promoted,
            skills_draft: store.all().count() as u64 - promoted,
        },
    })
}

/// POSTs `payload` to the endpoint; `settings` is `None` without the opt-in, and then nothing
/// is sent (`NotOptedIn`).
pub async fn send(
    settings: Option<&FederationSettings>,
    payload: &Payload,
) -> Result<(), FederationError> {
    let settings = settings.ok_or(FederationError::NotOptedIn)?;
    let host = reqwest::Url::parse(&settings.url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap_or_else(|_| reqwest::Client::new());
    match client.post(&settings.url).json(payload).send().await {
        Ok(response) if response.status().is_success() => Ok(()),
        Ok(response) => Err(FederationError::Send {
            host,
            message: format!("answered {}", response.status()),
        }),
        Err(e) => Err(FederationError::Send {
            host,
            message: if e.is_timeout() {
                "timed out".to_string()
            } else {
                "cannot be reached".to_string()
            },
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn resolve(vars: &[(&str, &str)]) -> Result<Option<FederationSettings>, FederationError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        settings(|name| map.get(name).cloned())
    }

    #[test]
    fn federation_is_off_unless_opted_in_with_an_endpoint() {
        let url = (SVC_FEDERATION_URL, "http://127.0.0.1:9/federation");
        assert!(resolve(&[]).expect("unset").is_none());
        assert!(resolve(&[url]).expect("a URL alone").is_none());
        assert!(resolve(&[(SVC_FEDERATION, "0"), url]).expect("0").is_none());
        assert!(matches!(
            resolve(&[(SVC_FEDERATION, "yes"), url]),
            Err(FederationError::BadOptIn(_))
        ));
        assert!(matches!(
            resolve(&[(SVC_FEDERATION, "1")]),
            Err(FederationError::MissingUrl)
        ));
        assert!(matches!(
            resolve(&[(SVC_FEDERATION, "1"), (SVC_FEDERATION_URL, "ftp://x/y")]),
            Err(FederationError::BadUrl(_))
        ));
        let on = resolve(&[(SVC_FEDERATION, "1"), url])
            .expect("on")
            .expect("some");
        assert_eq!(on.url, "http://127.0.0.1:9/federation");
    }
}
