//! Model runners, declared in `runners/*.toml`: the deterministic `fixture` model, any
//! OpenAI-compatible `/chat/completions` endpoint, Anthropic's `/v1/messages`, and an external
//! `command` (request JSON on stdin, response JSON on stdout).
//!
//! A runner turns a [`ModelRequest`] into a [`ModelReply`] with usage, or a [`RunnerError`]
//! whose `error_type` becomes the error record's. Cost comes from the runner file: a pricing
//! snapshot (referenced by its SHA-256), self-hosted (no API fee), or the fixture's zero cost.

pub mod cache;
pub mod command;
pub mod fixture;
pub mod http;
pub mod in_order;
pub mod spec;

use std::path::{Path, PathBuf};
use std::sync::Once;

use serde::Serialize;

use crate::digest;
use crate::harness::workload::AnswerKind;
use crate::trial::{CostSource, UsageSource};
pub use spec::{Pricing, RunnerKind, RunnerSpec, RunnerSpecError};

/// Environment variable naming the runners directory (default `./runners`).
pub const SVC_RUNNERS_DIR: &str = "SVC_RUNNERS_DIR";

/// The runners directory: `$SVC_RUNNERS_DIR`, else `./runners`.
pub fn runners_root() -> PathBuf {
    std::env::var_os(SVC_RUNNERS_DIR)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("runners"))
}

/// The prompt template used when a runner file gives none.
pub const DEFAULT_TEMPLATE: &str =
    "{instruction}\n\nContext:\n{context}\n\nQuestion: {question}\nAnswer:";

/// What a runner is asked.
#[derive(Debug, Clone, Serialize)]
pub struct ModelRequest {
    pub model: String,
    pub system: String,
    /// The full user prompt (template applied).
    pub prompt: String,
    /// The context part of the prompt, as the condition shaped it.
    pub context: String,
    pub question: String,
    pub answer_kind: AnswerKind,
    pub max_output_tokens: usize,
}

/// What a runner answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelReply {
    pub text: String,
    /// The provider's id, or a stable hash when it gave none.
    pub provider_request_id: String,
    /// Every prompt token, cached or not (Anthropic's three counts added up).
    pub input_tokens: Option<u64>,
    /// Of `input_tokens`, those the provider served from its prefix cache (OpenAI
    /// `prompt_tokens_details.cached_tokens`, Anthropic `cache_read_input_tokens`, llama.cpp
    /// `timings.cache_n`); `None` when the response does not say.
    pub cached_input_tokens: Option<u64>,
    /// Of `input_tokens`, those written to the provider's cache (Anthropic
    /// `cache_creation_input_tokens`), billed at the cache-write rate.
    pub cache_write_tokens: Option<u64>,
    pub output_tokens: u64,
    pub reasoning_tokens: u64,
    pub usage_source: UsageSource,
}

/// A failed model call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RunnerError {
    #[error("{url}: no response within {after_ms} ms")]
    Timeout { url: String, after_ms: u64 },
    /// The connection failed: not made, or broken before the whole response arrived.
    #[error("{url}: {message}")]
    Connect { url: String, message: String },
    #[error("{url}: HTTP {status}: {body}")]
    Status {
        url: String,
        status: u16,
        body: String,
    },
    #[error("{url}: invalid response: {message}")]
    InvalidResponse { url: String, message: String },
    #[error("{url}: the response has no usage counts; the trial cannot report tokens")]
    MissingUsage { url: String },
    #[error("command {program}: {message}")]
    Command { program: String, message: String },
}

impl RunnerError {
    /// The record's `error_type`.
    pub fn error_type(&self) -> String {
        match self {
            RunnerError::Timeout { .. } => "timeout".into(),
            RunnerError::Connect { .. } => "connection_error".into(),
            RunnerError::Status { status, .. } => format!("http_{status}"),
            RunnerError::InvalidResponse { .. } => "invalid_response".into(),
            RunnerError::MissingUsage { .. } => "missing_usage".into(),
            RunnerError::Command { .. } => "command_failed".into(),
        }
    }

    /// The record's `usage_source`: the provider said no, or the runner could not get an answer.
    pub fn usage_source(&self) -> UsageSource {
        match self {
            RunnerError::Status { .. } => UsageSource::ProviderError,
            _ => UsageSource::RunnerError,
        }
    }

    /// Whether a retry may help (timeouts, refused connections, 429 and 5xx).
    pub fn is_retryable(&self) -> bool {
        match self {
            RunnerError::Timeout { .. } | RunnerError::Connect { .. } => true,
            RunnerError::Status { status, .. } => *status == 429 || *status >= 500,
            _ => false,
        }
    }
}

enum Backend {
    Fixture(fixture::FixtureReader),
    OpenAi(http::HttpBackend),
    Anthropic(http::HttpBackend),
    Command(command::CommandBackend),
}

/// A loaded runner.
pub struct Runner {
    pub spec: RunnerSpec,
    /// SHA-256 of the runner file, for the manifest.
    pub file_sha256: String,
    pricing: Option<(Pricing, String)>,
    backend: Backend,
}

impl std::fmt::Debug for Runner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runner")
            .field("name", &self.spec.name)
            .field("kind", &self.spec.kind)
            .finish()
    }
}

/// Installs rustls' ring provider once per process; reqwest is built without a default one.
pub fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err means another part of the process installed one already, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

impl Runner {
    /// Loads a runner by name (`runners/<name>.toml`) or path.
    pub fn load(root: &Path, name_or_path: &str) -> Result<Self, RunnerSpecError> {
        let path = spec::resolve(root, name_or_path)?;
        let bytes = std::fs::read(&path).map_err(|source| RunnerSpecError::Read {
            path: path.clone(),
            source,
        })?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let spec = spec::parse(&text, &path)?;
        Self::from_spec(spec, digest::sha256_hex(&bytes))
    }

    /// A runner from a parsed spec; `file_sha256` identifies the file in manifests.
    pub fn from_spec(spec: RunnerSpec, file_sha256: String) -> Result<Self, RunnerSpecError> {
        let pricing = match spec.cost.source {
            CostSource::PricingSnapshot => Some(spec::read_pricing(&spec)?),
            _ => None,
        };
        let backend = match spec.kind {
            RunnerKind::Fixture => Backend::Fixture(spec.reader),
            RunnerKind::OpenaiCompatible => {
                install_crypto_provider();
                Backend::OpenAi(http::HttpBackend::new(&spec)?)
            }
            RunnerKind::Anthropic => {
                install_crypto_provider();
                Backend::Anthropic(http::HttpBackend::new(&spec)?)
            }
            RunnerKind::Command => Backend::Command(command::CommandBackend::new(&spec)?),
        };
        Ok(Self {
            spec,
            file_sha256,
            pricing,
            backend,
        })
    }

    /// A fixture runner without a file (tests, benchmarks).
    pub fn fixture() -> Self {
        let spec = RunnerSpec::fixture();
        let sha = digest::sha256_hex(format!("{spec:?}"));
        Self {
            spec,
            file_sha256: sha,
            pricing: None,
            backend: Backend::Fixture(fixture::FixtureReader::Overlap),
        }
    }

    /// Whether calls run in-process without I/O (then the matrix uses rayon, not async).
    pub fn is_local(&self) -> bool {
        matches!(self.backend, Backend::Fixture(_))
    }

    /// Context tokens the model can take: its window minus output and a prompt reserve.
    pub fn context_window(&self) -> usize {
        // Templates and system prompts cost tokens too; a third of their bytes over-estimates.
        let template = self
            .spec
            .prompt
            .template
            .as_deref()
            .unwrap_or(DEFAULT_TEMPLATE);
        let template_reserve = 256 + (self.spec.prompt.system.len() + template.len()) / 3;
        self.spec
            .context_window
            .saturating_sub(self.spec.max_output_tokens + template_reserve)
            .max(1)
    }

    /// The request for a shaped context and a question.
    pub fn request(&self, context: &str, question: &str, answer_kind: AnswerKind) -> ModelRequest {
        let template = self
            .spec
            .prompt
            .template
            .as_deref()
            .unwrap_or(DEFAULT_TEMPLATE);
        let instruction = answer_kind.instruction();
        // A single pass, so text inside the context that looks like a placeholder stays as it is.
        let mut prompt =
            String::with_capacity(template.len() + context.len() + question.len() + 128);
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            prompt.push_str(&rest[..open]);
            let after = &rest[open..];
            let (value, len) = if after.starts_with("{context}") {
                (context, "{context}".len())
            } else if after.starts_with("{question}") {
                (question, "{question}".len())
            } else if after.starts_with("{instruction}") {
                (instruction, "{instruction}".len())
            } else {
                ("{", 1)
            };
            prompt.push_str(value);
            rest = &after[len..];
        }
        prompt.push_str(rest);
        ModelRequest {
            model: self.spec.model.clone(),
            system: self.spec.prompt.system.clone(),
            prompt,
            context: context.to_string(),
            question: question.to_string(),
            answer_kind,
            max_output_tokens: self.spec.max_output_tokens,
        }
    }

    /// Calls the model. The fixture answers at once; the others do I/O with retries.
    pub async fn call(&self, request: &ModelRequest) -> Result<ModelReply, RunnerError> {
        self.call_traced(request, 0).await.0
    }

    /// [`Runner::call`] with every attempt (one for runners that do not retry); `jitter_seed`
    /// seeds the HTTP backoff jitter.
    pub async fn call_traced(
        &self,
        request: &ModelRequest,
        jitter_seed: u64,
    ) -> (Result<ModelReply, RunnerError>, Vec<http::Attempt>) {
        let (mut attempt, started) = http::Attempt::starting();
        let result = match &self.backend {
            Backend::OpenAi(backend) => {
                return backend
                    .call_with_retries(request, http::Api::OpenAi, jitter_seed)
                    .await;
            }
            Backend::Anthropic(backend) => {
                return backend
                    .call_with_retries(request, http::Api::Anthropic, jitter_seed)
                    .await;
            }
            Backend::Command(backend) => backend.call(request).await,
            Backend::Fixture(reader) => Ok(fixture::call(request, *reader)),
        };
        attempt.finish(started, &result);
        (result, vec![attempt])
    }

    /// `--cache-neutral`: asks the server not to reuse cached prompt prefixes where its API
    /// allows (`"cache_prompt": false` to a local OpenAI-compatible server such as llama.cpp's;
    /// see [`RunnerSpec::takes_cache_prompt`]). Returns whether the request changed; hosted
    /// APIs have no such switch, so their prefix cache stays on and is measured instead.
    pub fn set_cache_neutral(&mut self) -> bool {
        match &mut self.backend {
            Backend::OpenAi(backend) if self.spec.takes_cache_prompt() => {
                backend.cache_prompt = Some(false);
                true
            }
            _ => false,
        }
    }

    /// The `cache_prompt` value the runner sends, if any.
    pub fn cache_prompt(&self) -> Option<bool> {
        match &self.backend {
            Backend::OpenAi(backend) => backend.cache_prompt,
            _ => None,
        }
    }

    /// Whether the runner calls a model over HTTP (the calls the response cache serves).
    pub fn is_http(&self) -> bool {
        matches!(self.backend, Backend::OpenAi(_) | Backend::Anthropic(_))
    }

    /// Calls a local runner without a runtime (the fixture); `None` for runners that do I/O.
    pub fn call_local(&self, request: &ModelRequest) -> Option<ModelReply> {
        match self.backend {
            Backend::Fixture(reader) => Some(fixture::call(request, reader)),
            _ => None,
        }
    }

    pub fn cost_source(&self) -> CostSource {
        self.spec.cost.source
    }

    /// `cost_source_reference`: the pricing snapshot's SHA-256, or a fixed label.
    pub fn cost_reference(&self) -> String {
        match (&self.pricing, self.spec.cost.source) {
            (Some((_, sha)), _) => format!("sha256:{sha}"),
            (None, CostSource::SelfHostedNoApiFee) => {
                format!("self_hosted_no_api_fee:{}", self.spec.model)
            }
            (None, CostSource::ZeroCostFixture) => "zero_cost_fixture".into(),
            (None, other) => format!("{other:?}:{}", self.spec.name),
        }
    }

    /// What a reply cost in USD under the runner's cost source.
    pub fn cost_usd(&self, reply: &ModelReply) -> f64 {
        match &self.pricing {
            Some((pricing, _)) => pricing.cost_usd(
                &self.spec.model,
                &spec::TokenUsage {
                    input: reply.input_tokens.unwrap_or(0),
                    cached_input: reply.cached_input_tokens.unwrap_or(0),
                    cache_write: reply.cache_write_tokens.unwrap_or(0),
                    // Reasoning tokens are billed at the output rate (OpenAI counts them inside
                    // completion_tokens; the record keeps them apart). Leaving them out priced a
                    // reasoning model's thinking at nothing.
                    output: reply.output_tokens.saturating_add(reply.reasoning_tokens),
                },
            ),
            None => 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (found by probing): reasoning tokens were kept apart from the output tokens
    /// and then left out of the price, so a reasoning model's thinking cost nothing.
    #[test]
    fn reasoning_tokens_are_billed_at_the_output_rate() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("runners");
        let runner = Runner::load(&root, "openai-compatible").expect("runner");
        let price = runner.pricing.as_ref().expect("pricing").0.models["gpt-4o-mini"].clone();
        let reply = ModelReply {
            text: "Lake Sollia".into(),
            provider_request_id: "r".into(),
            input_tokens: Some(1000),
            cached_input_tokens: None,
            cache_write_tokens: None,
            output_tokens: 2,
            reasoning_tokens: 1000,
            usage_source: UsageSource::ProviderResponse,
        };
        let expected =
            (1000.0 * price.input_usd_per_mtok + 1002.0 * price.output_usd_per_mtok) / 1e6;
        assert!((runner.cost_usd(&reply) - expected).abs() < 1e-12);
    }

    #[test]
    fn templates_fill_once_and_leave_other_braces() {
        let runner = Runner::fixture();
        let request = runner.request("a {question} b {x}", "Q?", AnswerKind::Span);
        assert!(
            request.prompt.contains("Context:\na {question} b {x}\n"),
            "{}",
            request.prompt
        );
        assert!(request.prompt.ends_with("Question: Q?\nAnswer:"));
        assert!(request.prompt.starts_with(AnswerKind::Span.instruction()));
    }

    #[test]
    fn error_types_and_usage_sources() {
        let status = RunnerError::Status {
            url: "u".into(),
            status: 503,
            body: String::new(),
        };
        assert_eq!(status.error_type(), "http_503");
        assert_eq!(status.usage_source(), UsageSource::ProviderError);
        assert!(status.is_retryable());
        let invalid = RunnerError::InvalidResponse {
            url: "u".into(),
            message: "x".into(),
        };
        assert_eq!(invalid.usage_source(), UsageSource::RunnerError);
        assert!(!invalid.is_retryable());
    }
}
