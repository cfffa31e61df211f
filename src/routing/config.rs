//! The routing config, `routing.toml` in the state directory. Routing is off unless this file
//! exists and says `enabled = true`.
//!
//! ```toml
//! enabled = true
//! min_observations = 30      # labelled outcomes of a class before it may be routed
//! min_lower_bound = 0.8      # the Wilson 95% lower bound of its success rate must reach this
//! high_risk_keywords = ["ledger close"]   # added to the built-in list
//! shadow_observations = 10   # try the cheap model in the shadow first (0, the default: no)
//!
//! [anthropic.cheap_model]
//! "claude-opus-4-1" = "claude-haiku-4-5"
//! [openai.cheap_model]
//! "gpt-5" = "gpt-5-mini"
//! [openai]
//! extra_models = ["qwen2.5-coder-7b-instruct"]   # models of a local OpenAI-compatible server
//! [gemini.cheap_model]
//! "gemini-2.5-pro" = "gemini-2.5-flash"
//! ```
//!
//! A cheap model must be known: its name starts with a model family of its provider style
//! ([`KNOWN_FAMILIES`]) or is listed in that style's `extra_models`. An unknown or empty name,
//! an unknown key, or a bound outside (0, 1] is an error naming the file and field; the proxy
//! then serves with routing off and says why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::proxy::provider::Provider;

/// The config file, relative to the state directory.
pub const CONFIG_FILE: &str = "routing.toml";
pub const DEFAULT_MIN_OBSERVATIONS: u64 = 30;
pub const DEFAULT_MIN_LOWER_BOUND: f64 = 0.8;

/// Model-name families each provider style serves; a cheap model outside them must be listed
/// in `extra_models` (a typo such as `cluade-haiku` is then caught at load, not at the first
/// routed request).
pub const KNOWN_FAMILIES: &[(Provider, &[&str])] = &[
    (Provider::Anthropic, &["claude-"]),
    (
        Provider::Openai,
        &["gpt-", "o1", "o3", "o4", "chatgpt-", "codex-"],
    ),
    (Provider::Gemini, &["gemini-", "gemma-"]),
];

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the routing config {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: field {field}: {message}")]
    Invalid {
        path: PathBuf,
        field: String,
        message: String,
    },
}

/// The file as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RoutingSpec {
    #[serde(default)]
    enabled: bool,
    min_observations: Option<u64>,
    min_lower_bound: Option<f64>,
    #[serde(default)]
    high_risk_keywords: Vec<String>,
    #[serde(default)]
    shadow_observations: u64,
    #[serde(default)]
    anthropic: StyleSpec,
    #[serde(default)]
    openai: StyleSpec,
    #[serde(default)]
    gemini: StyleSpec,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StyleSpec {
    #[serde(default)]
    cheap_model: BTreeMap<String, String>,
    #[serde(default)]
    extra_models: Vec<String>,
}

/// The resolved config.
#[derive(Debug, Clone, PartialEq)]
pub struct RoutingConfig {
    pub enabled: bool,
    pub min_observations: u64,
    pub min_lower_bound: f64,
    pub high_risk_keywords: Vec<String>,
    /// Requested model → cheaper model, per provider style.
    pub cheap_models: BTreeMap<(ProviderKey, String), String>,
    /// Answers of the cheaper model on a class, tried in the shadow, before it serves the
    /// class (0: no shadow trials).
    pub shadow_observations: u64,
}

/// A provider style as a map key.
pub type ProviderKey = &'static str;

fn provider_key(provider: Provider) -> ProviderKey {
    match provider {
        Provider::Anthropic => "anthropic",
        Provider::Openai => "openai",
        Provider::Gemini => "gemini",
    }
}

impl Default for RoutingConfig {
    fn default() -> Self {
        RoutingConfig {
            enabled: false,
            min_observations: DEFAULT_MIN_OBSERVATIONS,
            min_lower_bound: DEFAULT_MIN_LOWER_BOUND,
            high_risk_keywords: Vec::new(),
            cheap_models: BTreeMap::new(),
            shadow_observations: 0,
        }
    }
}

impl RoutingConfig {
    /// The cheaper model configured for `requested` in `provider`'s style.
    pub fn cheap_model(&self, provider: Provider, requested: &str) -> Option<&str> {
        self.cheap_models
            .get(&(provider_key(provider), requested.to_string()))
            .map(String::as_str)
    }

    /// Reads `path`; `Ok(None)` when there is no file (routing is then off).
    pub fn load(path: &Path) -> Result<Option<RoutingConfig>, ConfigError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => {
                return Err(ConfigError::Read {
                    path: path.to_path_buf(),
                    source,
                });
            }
        };
        RoutingConfig::parse(&text, path).map(Some)
    }

    /// Parses and checks the text of a config file (`path` names it in errors).
    pub fn parse(text: &str, path: &Path) -> Result<RoutingConfig, ConfigError> {
        let spec: RoutingSpec = toml::from_str(text).map_err(|e| ConfigError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let invalid = |field: &str, message: String| ConfigError::Invalid {
            path: path.to_path_buf(),
            field: field.to_string(),
            message,
        };
        let min_observations = spec.min_observations.unwrap_or(DEFAULT_MIN_OBSERVATIONS);
        if min_observations == 0 {
            return Err(invalid(
                "min_observations",
                "must be at least 1 (a class is never routed on no evidence)".into(),
            ));
        }
        let min_lower_bound = spec.min_lower_bound.unwrap_or(DEFAULT_MIN_LOWER_BOUND);
        if !(min_lower_bound > 0.0 && min_lower_bound <= 1.0) {
            return Err(invalid(
                "min_lower_bound",
                format!(
                    "{min_lower_bound} is outside (0, 1]; e.g. 0.8 routes a class once its success rate is at least 80% with 95% confidence"
                ),
            ));
        }
        let mut cheap_models = BTreeMap::new();
        for (provider, style) in [
            (Provider::Anthropic, &spec.anthropic),
            (Provider::Openai, &spec.openai),
            (Provider::Gemini, &spec.gemini),
        ] {
            let key = provider_key(provider);
            let families = KNOWN_FAMILIES
                .iter()
                .find(|(p, _)| *p == provider)
                .map_or(&[][..], |(_, f)| *f);
            for (requested, cheap) in &style.cheap_model {
                let field = format!("{key}.cheap_model.{requested:?}");
                if requested.trim().is_empty() {
                    return Err(invalid(&field, "the requested model name is empty".into()));
                }
                if cheap.trim().is_empty() {
                    return Err(invalid(
                        &field,
                        "the cheap model is empty; name the model to route to".into(),
                    ));
                }
                let known = families.iter().any(|f| cheap.starts_with(f))
                    || style.extra_models.iter().any(|m| m == cheap);
                if !known {
                    return Err(invalid(
                        &field,
                        format!(
                            "unknown model {cheap:?}: {key} models start with {}; add it to {key}.extra_models if your server serves it",
                            families.join(", ")
                        ),
                    ));
                }
                if cheap == requested {
                    return Err(invalid(
                        &field,
                        "routes a model to itself; remove the line".into(),
                    ));
                }
                cheap_models.insert((key, requested.clone()), cheap.clone());
            }
        }
        Ok(RoutingConfig {
            enabled: spec.enabled,
            min_observations,
            min_lower_bound,
            high_risk_keywords: spec.high_risk_keywords,
            cheap_models,
            shadow_observations: spec.shadow_observations,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<RoutingConfig, ConfigError> {
        RoutingConfig::parse(text, Path::new("routing.toml"))
    }

    #[test]
    fn a_good_config_resolves_with_defaults() {
        let config = parse(
            "enabled = true\n[openai.cheap_model]\n\"gpt-5\" = \"gpt-5-mini\"\n[gemini]\ncheap_model = { \"gemini-2.5-pro\" = \"local-flash\" }\nextra_models = [\"local-flash\"]\n",
        )
        .expect("valid");
        assert!(config.enabled);
        assert_eq!(config.min_observations, DEFAULT_MIN_OBSERVATIONS);
        assert_eq!(
            config.cheap_model(Provider::Openai, "gpt-5"),
            Some("gpt-5-mini")
        );
        assert_eq!(config.cheap_model(Provider::Anthropic, "gpt-5"), None);
        assert_eq!(
            config.cheap_model(Provider::Gemini, "gemini-2.5-pro"),
            Some("local-flash")
        );
    }

    #[test]
    fn bad_configs_name_the_file_and_field() {
        let cases = [
            (
                "[anthropic.cheap_model]\n\"claude-opus-4-1\" = \"cluade-haiku\"\n",
                "anthropic.cheap_model.\"claude-opus-4-1\": unknown model \"cluade-haiku\"",
            ),
            (
                "[openai.cheap_model]\n\"gpt-5\" = \"\"\n",
                "the cheap model is empty",
            ),
            (
                "min_lower_bound = 1.5\n",
                "field min_lower_bound: 1.5 is outside (0, 1]",
            ),
            (
                "min_observations = 0\n",
                "field min_observations: must be at least 1",
            ),
            ("enabeld = true\n", "unknown field `enabeld`"),
            ("enabled = \n", "routing.toml"),
        ];
        for (text, expected) in cases {
            let error = parse(text).expect_err(text).to_string();
            assert!(error.contains(expected), "{text:?}: {error}");
            assert!(error.starts_with("routing.toml"), "{error}");
        }
    }
}
