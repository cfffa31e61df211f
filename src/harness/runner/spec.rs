//! Runner files (`runners/<name>.toml`) and pricing snapshots.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::digest;
use crate::harness::workload::spec::describe_toml_error;
use crate::trial::CostSource;

/// The closed set of runner kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunnerKind {
    Fixture,
    OpenaiCompatible,
    Anthropic,
    Command,
}

impl RunnerKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RunnerKind::Fixture => "fixture",
            RunnerKind::OpenaiCompatible => "openai_compatible",
            RunnerKind::Anthropic => "anthropic",
            RunnerKind::Command => "command",
        }
    }
}

/// `[cost]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostSpec {
    pub source: CostSource,
    /// Pricing snapshot file (TOML), for `pricing_snapshot`; relative to the runner file.
    pub pricing: Option<String>,
}

/// `[prompt]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PromptSpec {
    #[serde(default)]
    pub system: String,
    /// With `{instruction}`, `{context}` and `{question}` placeholders.
    pub template: Option<String>,
}

fn default_timeout_ms() -> u64 {
    60_000
}
fn default_retries() -> u32 {
    2
}
fn default_backoff_ms() -> u64 {
    500
}
fn default_concurrency() -> usize {
    4
}
fn default_max_output_tokens() -> usize {
    64
}

/// A parsed runner file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunnerSpec {
    pub name: String,
    pub kind: RunnerKind,
    /// The record's `provider`.
    pub provider: String,
    /// The record's `model`, and the model sent to the endpoint.
    pub model: String,
    #[serde(default)]
    pub description: String,
    /// The model's context window in tokens.
    pub context_window: usize,
    #[serde(default = "default_max_output_tokens")]
    pub max_output_tokens: usize,
    #[serde(default)]
    pub temperature: f64,
    /// fixture: which deterministic reader answers (`overlap`, the default, or `in-order`).
    #[serde(default)]
    pub reader: super::fixture::FixtureReader,
    /// HTTP: the base URL (`…/v1` for OpenAI-compatible; the host for Anthropic).
    pub base_url: Option<String>,
    /// HTTP: the environment variable holding the API key (none for local servers).
    pub api_key_env: Option<String>,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// Retries after the first attempt, for timeouts, refused connections, 429 and 5xx.
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// Backoff step before retry n is `backoff_ms * 2^(n-1)`, jittered and floored by
    /// `Retry-After` (see `runner::http`).
    #[serde(default = "default_backoff_ms")]
    pub backoff_ms: u64,
    /// Calls in flight at once.
    #[serde(default = "default_concurrency")]
    pub concurrency: usize,
    /// command: the program and its arguments (no shell).
    pub command: Option<Vec<String>>,
    pub cost: CostSpec,
    #[serde(default)]
    pub prompt: PromptSpec,
    /// Send `raw` requests through the in-process proxy (as `svc run --via-proxy`).
    #[serde(default)]
    pub via_proxy: bool,
    /// openai_compatible: whether the endpoint is a local server that takes llama.cpp's
    /// `cache_prompt` request field (sent as `false` under `--cache-neutral`). Default: true
    /// when `base_url` is on a loopback host (127.0.0.0/8, ::1, localhost), false otherwise —
    /// hosted APIs reject unknown fields and offer no switch to turn their prefix cache off.
    #[serde(default)]
    pub local_server: Option<bool>,
    /// The folder of the runner file, for relative paths.
    #[serde(skip)]
    pub dir: PathBuf,
}

impl RunnerSpec {
    /// Whether requests may carry llama.cpp's `cache_prompt` field (see `local_server`).
    pub fn takes_cache_prompt(&self) -> bool {
        self.kind == RunnerKind::OpenaiCompatible
            && self
                .local_server
                .unwrap_or_else(|| self.base_url.as_deref().is_some_and(is_loopback_url))
    }

    /// The built-in fixture declaration (same as `runners/fixture.toml`).
    pub fn fixture() -> Self {
        Self {
            name: "fixture".into(),
            kind: RunnerKind::Fixture,
            provider: "svc-fixture".into(),
            model: "extractive-v1".into(),
            description: "deterministic extractive model".into(),
            context_window: 1_000_000,
            max_output_tokens: default_max_output_tokens(),
            temperature: 0.0,
            reader: super::fixture::FixtureReader::Overlap,
            base_url: None,
            api_key_env: None,
            timeout_ms: default_timeout_ms(),
            retries: 0,
            backoff_ms: 0,
            concurrency: 1,
            command: None,
            cost: CostSpec {
                source: CostSource::ZeroCostFixture,
                pricing: None,
            },
            prompt: PromptSpec::default(),
            via_proxy: false,
            local_server: None,
            dir: PathBuf::from("."),
        }
    }
}

/// Whether `url`'s host is a loopback address or `localhost`.
pub fn is_loopback_url(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split('/').next().unwrap_or_default();
    let authority = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.split(':').next().unwrap_or_default(),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Errors reading a runner file or its pricing snapshot.
#[derive(Debug, thiserror::Error)]
pub enum RunnerSpecError {
    #[error("unknown runner `{name}`: no {path} (known runners: {known}; see `svc runners list`)")]
    Unknown {
        name: String,
        path: PathBuf,
        known: String,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: malformed runner file: {message}")]
    Malformed {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}:{line}: field `{field}`: {message}")]
    Field {
        path: PathBuf,
        line: usize,
        field: String,
        message: String,
    },
    #[error("runner {runner}: {message}")]
    Setup { runner: String, message: String },
}

/// Runner names under `root` (file stems of `*.toml`), sorted.
pub fn names(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "toml"))
                .filter_map(|p| p.file_stem().map(|s| s.to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// `name_or_path` as a file: an existing path, else `root/<name>.toml`.
pub fn resolve(root: &Path, name_or_path: &str) -> Result<PathBuf, RunnerSpecError> {
    let direct = Path::new(name_or_path);
    if direct.is_file() {
        return Ok(direct.to_path_buf());
    }
    let path = root.join(format!("{name_or_path}.toml"));
    if path.is_file() {
        return Ok(path);
    }
    let known = names(root);
    Err(RunnerSpecError::Unknown {
        name: name_or_path.to_string(),
        path,
        known: if known.is_empty() {
            format!("none under {}", root.display())
        } else {
            known.join(", ")
        },
    })
}

/// Parses a runner file's text; `path` is used in errors and for relative paths.
pub fn parse(text: &str, path: &Path) -> Result<RunnerSpec, RunnerSpecError> {
    let mut spec: RunnerSpec = toml::from_str(text).map_err(|error| {
        let (line, column, message) = describe_toml_error(text, &error);
        RunnerSpecError::Malformed {
            path: path.to_path_buf(),
            line,
            column,
            message,
        }
    })?;
    spec.dir = path
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."));
    let field = |field: &str, message: &str| RunnerSpecError::Field {
        path: path.to_path_buf(),
        line: crate::harness::workload::line_of(text, &format!("{field} =")),
        field: field.to_string(),
        message: message.to_string(),
    };
    for (name, value) in [
        ("name", &spec.name),
        ("provider", &spec.provider),
        ("model", &spec.model),
    ] {
        if value.trim().is_empty() {
            return Err(field(name, "must not be empty"));
        }
    }
    // Zero made every call fail ("no response within 0 ms") or ask for nothing.
    for (name, value) in [
        ("concurrency", spec.concurrency as u64),
        ("timeout_ms", spec.timeout_ms),
        ("max_output_tokens", spec.max_output_tokens as u64),
        ("context_window", spec.context_window as u64),
    ] {
        if value == 0 {
            return Err(field(name, "must be at least 1"));
        }
    }
    // Providers take 0 to 2 (OpenAI) or 0 to 1 (Anthropic); a negative or non-finite value was
    // sent as it was, and every trial came back an error.
    if !(spec.temperature.is_finite() && (0.0..=2.0).contains(&spec.temperature)) {
        return Err(field(
            "temperature",
            "must be a number from 0 to 2 (0 for deterministic answers)",
        ));
    }
    match spec.kind {
        RunnerKind::OpenaiCompatible | RunnerKind::Anthropic if spec.base_url.is_none() => {
            return Err(field("base_url", "an HTTP runner needs base_url"));
        }
        RunnerKind::Command if spec.command.as_ref().is_none_or(Vec::is_empty) => {
            return Err(field(
                "command",
                "a command runner needs command = [program, args…]",
            ));
        }
        _ => {}
    }
    if spec.kind != RunnerKind::Fixture && spec.reader != super::fixture::FixtureReader::Overlap {
        return Err(field(
            "reader",
            "only a fixture runner has a reader; remove `reader` or set kind = \"fixture\"",
        ));
    }
    match (spec.kind, spec.cost.source) {
        (RunnerKind::Fixture, CostSource::ZeroCostFixture) => {}
        (RunnerKind::Fixture, _) | (_, CostSource::ZeroCostFixture) => {
            return Err(field(
                "source",
                "zero_cost_fixture is for the fixture runner only, and the fixture costs nothing",
            ));
        }
        (_, CostSource::PricingSnapshot) if spec.cost.pricing.is_none() => {
            return Err(field(
                "pricing",
                "cost source pricing_snapshot needs pricing = \"file.toml\"",
            ));
        }
        _ => {}
    }
    Ok(spec)
}

/// Per-model prices of a pricing snapshot, in USD per million tokens.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Pricing {
    /// Where and when the prices were taken (informational).
    #[serde(default)]
    pub source: String,
    pub models: BTreeMap<String, ModelPrice>,
}

/// A model's prices. Cached input (a provider's prefix-cache read) and cache writes have their
/// own rates where the provider bills them apart; a snapshot that gives none bills them at the
/// input rate, which is what a provider without a discount charges.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    pub input_usd_per_mtok: f64,
    pub output_usd_per_mtok: f64,
    /// Input tokens read from the provider's cache; default: `input_usd_per_mtok`.
    #[serde(default)]
    pub cached_input_usd_per_mtok: Option<f64>,
    /// Input tokens written to the provider's cache (Anthropic); default: `input_usd_per_mtok`.
    #[serde(default)]
    pub cache_write_usd_per_mtok: Option<f64>,
}

/// The token counts one call is billed for. `cached_input` and `cache_write` are parts of
/// `input`, not additions to it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TokenUsage {
    pub input: u64,
    pub cached_input: u64,
    pub cache_write: u64,
    pub output: u64,
}

impl ModelPrice {
    /// USD for `usage`: uncached input at the input rate, cache reads and writes at theirs.
    pub fn cost_usd(&self, usage: &TokenUsage) -> f64 {
        // A provider reporting more cached than total tokens is billed for what it reported.
        let uncached = usage
            .input
            .saturating_sub(usage.cached_input.saturating_add(usage.cache_write));
        let (cached, write) = (usage.cached_input, usage.cache_write);
        (uncached as f64 * self.input_usd_per_mtok
            + cached as f64
                * self
                    .cached_input_usd_per_mtok
                    .unwrap_or(self.input_usd_per_mtok)
            + write as f64
                * self
                    .cache_write_usd_per_mtok
                    .unwrap_or(self.input_usd_per_mtok)
            + usage.output as f64 * self.output_usd_per_mtok)
            / 1e6
    }
}

impl Pricing {
    pub fn cost_usd(&self, model: &str, usage: &TokenUsage) -> f64 {
        self.models
            .get(model)
            .map(|p| p.cost_usd(usage))
            .unwrap_or(0.0)
    }
}

/// Reads the runner's pricing snapshot; returns it with the SHA-256 of its bytes.
pub fn read_pricing(spec: &RunnerSpec) -> Result<(Pricing, String), RunnerSpecError> {
    let setup = |message: String| RunnerSpecError::Setup {
        runner: spec.name.clone(),
        message,
    };
    let file = spec
        .cost
        .pricing
        .as_deref()
        .ok_or_else(|| setup("cost source pricing_snapshot needs a pricing file".into()))?;
    let path = spec.dir.join(file);
    let bytes = std::fs::read(&path).map_err(|source| RunnerSpecError::Read {
        path: path.clone(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let pricing: Pricing = toml::from_str(&text).map_err(|error| {
        let (line, column, message) = describe_toml_error(&text, &error);
        RunnerSpecError::Malformed {
            path: path.clone(),
            line,
            column,
            message,
        }
    })?;
    if !pricing.models.contains_key(&spec.model) {
        return Err(setup(format!(
            "pricing snapshot {} has no price for model {}; add [models.\"{}\"]",
            path.display(),
            spec.model,
            spec.model
        )));
    }
    Ok((pricing, digest::sha256_hex(&bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_checks_fields() {
        let text = "name = \"x\"\nkind = \"openai_compatible\"\nprovider = \"p\"\nmodel = \"m\"\ncontext_window = 8192\nbase_url = \"http://127.0.0.1:1/v1\"\n[cost]\nsource = \"self_hosted_no_api_fee\"\n";
        let spec = parse(text, Path::new("runners/x.toml")).expect("parse");
        assert_eq!(spec.retries, 2);
        assert_eq!(spec.dir, Path::new("runners"));
        let bad = text.replace("base_url = \"http://127.0.0.1:1/v1\"\n", "");
        let error = parse(&bad, Path::new("x.toml"))
            .expect_err("no url")
            .to_string();
        assert!(error.contains("base_url"), "{error}");
        let bad = text.replace("8192", "\"big\"");
        let error = parse(&bad, Path::new("x.toml"))
            .expect_err("type")
            .to_string();
        assert!(error.starts_with("x.toml:5:"), "{error}");
        let bad = text.replace("self_hosted_no_api_fee", "zero_cost_fixture");
        assert!(parse(&bad, Path::new("x.toml")).is_err());
        // Regression (found by probing): a zero that fails every call was accepted, and the
        // error named line 1 when the key had no spaces around `=`.
        for key in ["timeout_ms", "max_output_tokens", "concurrency"] {
            let bad = text.replace("[cost]", &format!("{key}=0\n[cost]"));
            let error = parse(&bad, Path::new("x.toml"))
                .expect_err("zero")
                .to_string();
            assert!(
                error.starts_with("x.toml:7:") && error.contains(key),
                "{error}"
            );
        }
        // Regression (found by probing): a negative temperature was accepted and sent.
        for temperature in ["-1.0", "2.5", "nan"] {
            let bad = text.replace("[cost]", &format!("temperature = {temperature}\n[cost]"));
            let error = parse(&bad, Path::new("x.toml"))
                .expect_err("temperature")
                .to_string();
            assert!(
                error.contains("temperature") && error.contains("from 0 to 2"),
                "{error}"
            );
        }
        assert!(
            spec.takes_cache_prompt(),
            "a loopback server takes cache_prompt"
        );
        let hosted = parse(
            &text.replace("http://127.0.0.1:1/v1", "https://api.openai.com/v1"),
            Path::new("x.toml"),
        )
        .expect("parse");
        assert!(!hosted.takes_cache_prompt(), "a hosted API is not sent it");
        let declared = parse(
            &text
                .replace("http://127.0.0.1:1/v1", "http://10.0.0.5:8080/v1")
                .replace("[cost]", "local_server = true\n[cost]"),
            Path::new("x.toml"),
        )
        .expect("parse");
        assert!(declared.takes_cache_prompt(), "declared local");
    }

    #[test]
    fn loopback_hosts() {
        for url in [
            "http://127.0.0.1:8091/v1",
            "http://localhost/v1",
            "http://[::1]:80/v1",
            "http://127.3.2.1",
        ] {
            assert!(is_loopback_url(url), "{url}");
        }
        for url in [
            "https://api.openai.com/v1",
            "http://10.0.0.5:8080/v1",
            "http://localhost.example.com/v1",
        ] {
            assert!(!is_loopback_url(url), "{url}");
        }
    }

    #[test]
    fn cached_rates_default_to_the_input_rate() {
        let price: ModelPrice =
            toml::from_str("input_usd_per_mtok = 2.0\noutput_usd_per_mtok = 10.0\n")
                .expect("price");
        let usage = TokenUsage {
            input: 1_000_000,
            cached_input: 600_000,
            cache_write: 100_000,
            output: 100_000,
        };
        assert!(
            (price.cost_usd(&usage) - 3.0).abs() < 1e-9,
            "no discount: 2 + 1"
        );
        let discounted: ModelPrice = toml::from_str(
            "input_usd_per_mtok = 2.0\noutput_usd_per_mtok = 10.0\ncached_input_usd_per_mtok = 0.5\ncache_write_usd_per_mtok = 2.5\n",
        )
        .expect("price");
        // 300k uncached at 2 + 600k cached at 0.5 + 100k written at 2.5 + 100k out at 10.
        let expected = 0.6 + 0.3 + 0.25 + 1.0;
        assert!((discounted.cost_usd(&usage) - expected).abs() < 1e-9);
    }
}
