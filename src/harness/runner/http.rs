//! HTTP runners: OpenAI-compatible `POST {base_url}/chat/completions` and Anthropic
//! `POST {base_url}/v1/messages` (base URLs as the providers' SDKs take them). Usage is read
//! from the response, never estimated.
//!
//! Retries: timeouts, refused connections, 429 and 5xx are retried up to the runner's `retries`.
//! The wait before retry n (0-based) is "equal jitter" over an exponential step,
//! `step/2 + uniform[0, step/2]` with `step = min(backoff_ms * 2^n, MAX_BACKOFF_MS)`, so
//! concurrent workers that failed together do not retry together. A `Retry-After` header
//! (delay-seconds or an HTTP-date) is a floor: the wait is `Retry-After + uniform[0, step/2]`.
//! A server asking for more than [`MAX_RETRY_AFTER_MS`] is not waited for: the call fails with
//! its status. The jitter comes from a [`SplitMix64`] seeded by the caller (the trial passes a
//! hash of its request and replicate), so a re-run waits the same way. Every attempt, with its
//! start time, `Retry-After` and wait, is returned as an [`Attempt`] for the audit trail.

use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::spec::{RunnerSpec, RunnerSpecError};
use super::{ModelReply, ModelRequest, RunnerError};
use crate::digest;
use crate::rng::SplitMix64;
use crate::trial::UsageSource;

/// Longest exponential backoff step.
pub const MAX_BACKOFF_MS: u64 = 60_000;
/// Longest `Retry-After` svc waits for; a longer one fails the call.
pub const MAX_RETRY_AFTER_MS: u64 = 120_000;

/// One attempt of a model call, as the run's audit trail (`requests.jsonl`) records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// When the attempt started, in milliseconds since the Unix epoch.
    pub started_at_ms: u64,
    /// How long the attempt took.
    pub elapsed_ms: f64,
    /// `ok`, or the error type of the failed attempt (`http_429`, `timeout`, …).
    pub outcome: String,
    /// The server's `Retry-After`, in milliseconds, when it sent one.
    pub retry_after_ms: Option<u64>,
    /// The wait before the next attempt; null for the last attempt.
    pub wait_ms: Option<u64>,
}

impl Attempt {
    /// Starts an attempt record now.
    pub fn starting() -> (Self, Instant) {
        let started_at_ms = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        (
            Self {
                started_at_ms,
                elapsed_ms: 0.0,
                outcome: String::new(),
                retry_after_ms: None,
                wait_ms: None,
            },
            Instant::now(),
        )
    }

    /// Closes the record with the attempt's result.
    pub fn finish<T>(&mut self, started: Instant, result: &Result<T, RunnerError>) {
        self.elapsed_ms = started.elapsed().as_secs_f64() * 1000.0;
        self.outcome = match result {
            Ok(_) => "ok".into(),
            Err(error) => error.error_type(),
        };
    }
}

/// A `Retry-After` value in milliseconds from `now`: delay-seconds (`120`) or an HTTP-date
/// (`Wed, 21 Oct 2026 07:28:00 GMT`; a date in the past is 0). `None` when unreadable.
pub fn parse_retry_after(value: &str, now: SystemTime) -> Option<u64> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(seconds.saturating_mul(1000));
    }
    // Delay-seconds past u64 are still "wait a very long time", not unreadable (which retried at
    // once a server that had asked to be left alone).
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(u64::MAX);
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).map_or(0, |d| d.as_millis() as u64))
}

/// The wait before retry `retry` (0-based), or `None` when the server asked for longer than
/// [`MAX_RETRY_AFTER_MS`]. See the module docs for the formula.
pub fn retry_wait_ms(
    backoff_ms: u64,
    retry: u32,
    retry_after_ms: Option<u64>,
    rng: &mut SplitMix64,
) -> Option<u64> {
    let step = backoff_ms
        .saturating_mul(1u64 << retry.min(16))
        .min(MAX_BACKOFF_MS);
    let half = step / 2;
    // Uniform in [0, half]; `unit()` < 1, so the product stays below half + 1.
    let jitter = ((rng.unit() * (half + 1) as f64) as u64).min(half);
    match retry_after_ms {
        Some(ms) if ms > MAX_RETRY_AFTER_MS => None,
        Some(ms) => Some(ms + jitter),
        None => Some(step - half + jitter),
    }
}

/// Which wire format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    OpenAi,
    Anthropic,
}

/// A configured HTTP client for one runner.
pub struct HttpBackend {
    client: reqwest::Client,
    base_url: String,
    api_key: Option<String>,
    timeout_ms: u64,
    retries: u32,
    backoff_ms: u64,
    temperature: f64,
    /// llama.cpp's `cache_prompt` request field, sent when set (`--cache-neutral`).
    pub cache_prompt: Option<bool>,
}

/// The key in `value` of variable `var`: surrounding whitespace is not part of it (a secret
/// written with `echo` ends in a newline, which made every request a retried "connection
/// error"); an empty key, or one a header cannot carry, is a setup error naming the variable.
fn api_key(var: &str, value: &str) -> Result<String, String> {
    let key = value.trim();
    if key.is_empty() {
        return Err(format!(
            "the API key variable {var} named by api_key_env is empty; export the key or remove api_key_env for a local server"
        ));
    }
    if reqwest::header::HeaderValue::from_str(&format!("Bearer {key}")).is_err() {
        return Err(format!(
            "the API key in {var} holds a character an HTTP header cannot carry (a control character or non-ASCII); check how the variable was set"
        ));
    }
    Ok(key.to_string())
}

impl HttpBackend {
    pub fn new(spec: &RunnerSpec) -> Result<Self, RunnerSpecError> {
        let setup = |message: String| RunnerSpecError::Setup {
            runner: spec.name.clone(),
            message,
        };
        let api_key = match &spec.api_key_env {
            Some(var) if !var.is_empty() => {
                let value = std::env::var(var).map_err(|_| {
                    setup(format!(
                        "the API key variable {var} named by api_key_env is not set; export it or remove api_key_env for a local server"
                    ))
                })?;
                Some(api_key(var, &value).map_err(setup)?)
            }
            _ => None,
        };
        let client = reqwest::Client::builder()
            // A provider's redirect is an error of the run, not a hop to take with its key.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_millis(spec.timeout_ms))
            .connect_timeout(Duration::from_millis(spec.timeout_ms.min(10_000)))
            .build()
            .map_err(|e| setup(format!("cannot build the HTTP client: {e}")))?;
        Ok(Self {
            client,
            base_url: spec
                .base_url
                .clone()
                .unwrap_or_default()
                .trim_end_matches('/')
                .to_string(),
            api_key,
            timeout_ms: spec.timeout_ms,
            retries: spec.retries,
            backoff_ms: spec.backoff_ms,
            temperature: spec.temperature,
            cache_prompt: None,
        })
    }

    fn url(&self, api: Api) -> String {
        match api {
            Api::OpenAi => format!("{}/chat/completions", self.base_url),
            Api::Anthropic => format!("{}/v1/messages", self.base_url),
        }
    }

    /// One call, retried on timeouts, refused connections, 429 and 5xx (see the module docs),
    /// with every attempt. `jitter_seed` seeds the backoff jitter.
    pub async fn call_with_retries(
        &self,
        request: &ModelRequest,
        api: Api,
        jitter_seed: u64,
    ) -> (Result<ModelReply, RunnerError>, Vec<Attempt>) {
        let mut rng = SplitMix64::new(jitter_seed);
        let mut attempts = Vec::new();
        let mut retry = 0u32;
        loop {
            let (mut attempt, started) = Attempt::starting();
            let (result, retry_after_ms) = self.call_once(request, api).await;
            attempt.finish(started, &result);
            attempt.retry_after_ms = retry_after_ms;
            let wait = match &result {
                Err(error) if error.is_retryable() && retry < self.retries => {
                    retry_wait_ms(self.backoff_ms, retry, retry_after_ms, &mut rng)
                }
                _ => None,
            };
            attempt.wait_ms = wait;
            attempts.push(attempt);
            match wait {
                Some(wait) => {
                    tokio::time::sleep(Duration::from_millis(wait)).await;
                    retry += 1;
                }
                None => return (result, attempts),
            }
        }
    }

    /// One attempt, and the response's `Retry-After` in milliseconds when it had one.
    async fn call_once(
        &self,
        request: &ModelRequest,
        api: Api,
    ) -> (Result<ModelReply, RunnerError>, Option<u64>) {
        let mut retry_after_ms = None;
        let result = self.attempt(request, api, &mut retry_after_ms).await;
        (result, retry_after_ms)
    }

    async fn attempt(
        &self,
        request: &ModelRequest,
        api: Api,
        retry_after_ms: &mut Option<u64>,
    ) -> Result<ModelReply, RunnerError> {
        let url = self.url(api);
        let body = match api {
            Api::OpenAi => {
                let mut messages = Vec::new();
                if !request.system.is_empty() {
                    messages.push(json!({"role": "system", "content": request.system}));
                }
                messages.push(json!({"role": "user", "content": request.prompt}));
                let mut body = json!({
                    "model": request.model,
                    "messages": messages,
                    "max_tokens": request.max_output_tokens,
                    "temperature": self.temperature,
                });
                if let Some(cache_prompt) = self.cache_prompt {
                    body["cache_prompt"] = json!(cache_prompt);
                }
                body
            }
            Api::Anthropic => {
                let mut body = json!({
                    "model": request.model,
                    "max_tokens": request.max_output_tokens,
                    "temperature": self.temperature,
                    "messages": [{"role": "user", "content": request.prompt}],
                });
                if !request.system.is_empty() {
                    body["system"] = json!(request.system);
                }
                body
            }
        };
        let mut builder = self.client.post(&url).json(&body);
        builder = match (api, &self.api_key) {
            (Api::OpenAi, Some(key)) => builder.bearer_auth(key),
            (Api::Anthropic, Some(key)) => builder.header("x-api-key", key),
            (_, None) => builder,
        };
        if api == Api::Anthropic {
            builder = builder.header("anthropic-version", "2023-06-01");
        }
        let transport = |what: &str, error: reqwest::Error| {
            if error.is_timeout() {
                RunnerError::Timeout {
                    url: url.clone(),
                    after_ms: self.timeout_ms,
                }
            } else {
                RunnerError::Connect {
                    url: url.clone(),
                    message: format!("{what}: {error}"),
                }
            }
        };
        let response = builder
            .send()
            .await
            .map_err(|e| transport("cannot connect", e))?;
        let status = response.status();
        *retry_after_ms = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, SystemTime::now()));
        let header_id = response
            .headers()
            .get("x-request-id")
            .or_else(|| response.headers().get("request-id"))
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        // The connection was made; a body cut off is not "cannot connect".
        let bytes = response
            .bytes()
            .await
            .map_err(|e| transport("the connection broke while the response body was read", e))?;
        parse_reply(api, &url, status.as_u16(), header_id, &bytes)
    }
}

/// A provider's answer to one call, as a reply with usage, or the error it amounts to (a
/// non-2xx status, a body without the answer text or without usage counts).
pub fn parse_reply(
    api: Api,
    url: &str,
    status: u16,
    header_id: Option<String>,
    bytes: &[u8],
) -> Result<ModelReply, RunnerError> {
    let url = url.to_string();
    if !(200..300).contains(&status) {
        let mut body = String::from_utf8_lossy(bytes).into_owned();
        body.truncate(300);
        return Err(RunnerError::Status { url, status, body });
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| RunnerError::InvalidResponse {
        url: url.clone(),
        message: format!("not JSON: {e}"),
    })?;
    let invalid = |message: &str| RunnerError::InvalidResponse {
        url: url.clone(),
        message: message.to_string(),
    };
    let (text, input, output, reasoning, cached, cache_write) = match api {
        Api::OpenAi => {
            let text = value
                .pointer("/choices/0/message/content")
                .and_then(Value::as_str)
                .ok_or_else(|| invalid("no choices[0].message.content string"))?;
            let usage = value.get("usage").filter(|u| u.is_object());
            let input = usage
                .and_then(|u| u.get("prompt_tokens"))
                .and_then(Value::as_u64);
            let output = usage
                .and_then(|u| u.get("completion_tokens"))
                .and_then(Value::as_u64);
            // Part of completion_tokens: never more than it (the record's output and reasoning
            // add up to what was billed).
            let reasoning = usage
                .and_then(|u| u.pointer("/completion_tokens_details/reasoning_tokens"))
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .min(output.unwrap_or(0));
            (
                text.to_string(),
                input,
                output,
                reasoning,
                openai_cached_tokens(&value),
                None,
            )
        }
        Api::Anthropic => {
            let blocks = value
                .get("content")
                .and_then(Value::as_array)
                .ok_or_else(|| invalid("no content array"))?;
            let text: String = blocks
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .collect();
            let usage = value.get("usage");
            let count = |field: &str| usage.and_then(|u| u.get(field)).and_then(Value::as_u64);
            let output = count("output_tokens");
            // Anthropic's input_tokens are the uncached ones only; cache reads and writes are
            // counted apart. The reply's input is every prompt token, as OpenAI reports it.
            let read = count("cache_read_input_tokens");
            let write = count("cache_creation_input_tokens");
            let input =
                count("input_tokens").map(|input| input + read.unwrap_or(0) + write.unwrap_or(0));
            (text, input, output, 0, read, write)
        }
    };
    let (Some(input), Some(output)) = (input, output) else {
        return Err(RunnerError::MissingUsage { url });
    };
    let id = value
        .get("id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .or(header_id)
        .unwrap_or_else(|| format!("sha256:{}", digest::sha256_hex(bytes)));
    Ok(ModelReply {
        text,
        provider_request_id: id,
        input_tokens: Some(input),
        cached_input_tokens: cached,
        cache_write_tokens: cache_write,
        // OpenAI counts reasoning inside completion_tokens; the record keeps them apart.
        output_tokens: output.saturating_sub(reasoning),
        reasoning_tokens: reasoning,
        usage_source: UsageSource::ProviderResponse,
    })
}

/// Cached prompt tokens of an OpenAI-compatible response: OpenAI's
/// `usage.prompt_tokens_details.cached_tokens`, else llama.cpp server's `timings.cache_n`
/// (prompt tokens reused from its KV cache), else a top-level or usage `tokens_cached` (the
/// llama.cpp native field some proxies pass through). `None` when the response says nothing.
pub fn openai_cached_tokens(value: &Value) -> Option<u64> {
    [
        "/usage/prompt_tokens_details/cached_tokens",
        "/timings/cache_n",
        "/usage/tokens_cached",
        "/tokens_cached",
    ]
    .iter()
    .find_map(|pointer| value.pointer(pointer).and_then(Value::as_u64))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::Router;
    use axum::http::StatusCode;
    use axum::response::IntoResponse;
    use axum::routing::post;

    use super::*;
    use crate::harness::runner::{Runner, RunnerKind};
    use crate::harness::workload::AnswerKind;

    /// A fake provider on 127.0.0.1:0; `mode` picks its behaviour; returns the base URL.
    async fn fake(mode: &'static str, calls: Arc<AtomicUsize>) -> String {
        let handler = move |body: String| {
            let calls = calls.clone();
            async move {
                let n = calls.fetch_add(1, Ordering::SeqCst);
                let request: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                let ok_openai = json!({
                    "id": "chatcmpl-42",
                    "choices": [{"message": {"role": "assistant", "content": format!("echo {}", request["model"].as_str().unwrap_or(""))}}],
                    "usage": {"prompt_tokens": 120, "completion_tokens": 7, "completion_tokens_details": {"reasoning_tokens": 2}}
                });
                match mode {
                    "ok" => (StatusCode::OK, ok_openai.to_string()).into_response(),
                    "anthropic" => (
                        StatusCode::OK,
                        json!({"id": "msg_1", "content": [{"type": "text", "text": "green"}], "usage": {"input_tokens": 50, "output_tokens": 3}}).to_string(),
                    )
                        .into_response(),
                    "flaky" if n == 0 => (StatusCode::SERVICE_UNAVAILABLE, "busy").into_response(),
                    "retry-after-seconds" if n == 0 => (
                        StatusCode::TOO_MANY_REQUESTS,
                        [("retry-after", "1".to_string())],
                        "slow down",
                    )
                        .into_response(),
                    "retry-after-date" if n == 0 => {
                        let at = std::time::SystemTime::now() + Duration::from_secs(2);
                        (
                            StatusCode::TOO_MANY_REQUESTS,
                            [("retry-after", httpdate::fmt_http_date(at))],
                            "slow down",
                        )
                            .into_response()
                    }
                    "retry-after-too-long" => (
                        StatusCode::TOO_MANY_REQUESTS,
                        [("retry-after", "3600".to_string())],
                        "come back in an hour",
                    )
                        .into_response(),
                    "retry-after-seconds" | "retry-after-date" => {
                        (StatusCode::OK, ok_openai.to_string()).into_response()
                    }
                    "flaky" => (StatusCode::OK, ok_openai.to_string()).into_response(),
                    "500" => (StatusCode::INTERNAL_SERVER_ERROR, "{\"error\":\"boom\"}").into_response(),
                    "400" => (StatusCode::BAD_REQUEST, "{\"error\":\"bad\"}").into_response(),
                    "invalid" => (StatusCode::OK, "{not json").into_response(),
                    "no-usage" => (
                        StatusCode::OK,
                        json!({"id": "x", "choices": [{"message": {"content": "hi"}}]}).to_string(),
                    )
                        .into_response(),
                    _ => {
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        (StatusCode::OK, ok_openai.to_string()).into_response()
                    }
                }
            }
        };
        let app = Router::new()
            .route("/v1/chat/completions", post(handler.clone()))
            .route("/v1/messages", post(handler));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        format!("http://{address}")
    }

    fn runner(kind: RunnerKind, base_url: String) -> Runner {
        let mut spec = crate::harness::runner::RunnerSpec::fixture();
        spec.name = "fake".into();
        spec.kind = kind;
        spec.provider = "fake".into();
        spec.model = "m1".into();
        spec.base_url = Some(base_url);
        spec.timeout_ms = 300;
        spec.retries = 1;
        spec.backoff_ms = 10;
        spec.cost.source = crate::trial::CostSource::SelfHostedNoApiFee;
        Runner::from_spec(spec, "sha".into()).expect("runner")
    }

    async fn call(
        mode: &'static str,
        kind: RunnerKind,
    ) -> (Result<ModelReply, RunnerError>, usize) {
        let calls = Arc::new(AtomicUsize::new(0));
        let base = fake(mode, calls.clone()).await;
        let base = if kind == RunnerKind::OpenaiCompatible {
            format!("{base}/v1")
        } else {
            base
        };
        let runner = runner(kind, base);
        let request = runner.request(
            "The sky is green.",
            "What colour is the sky?",
            AnswerKind::Span,
        );
        let result = runner.call(&request).await;
        (result, calls.load(Ordering::SeqCst))
    }

    #[tokio::test]
    async fn openai_success_reads_usage_and_id() {
        let (reply, calls) = call("ok", RunnerKind::OpenaiCompatible).await;
        let reply = reply.expect("ok");
        assert_eq!(calls, 1);
        assert_eq!(reply.text, "echo m1");
        assert_eq!(reply.provider_request_id, "chatcmpl-42");
        assert_eq!(
            (
                reply.input_tokens,
                reply.output_tokens,
                reply.reasoning_tokens
            ),
            (Some(120), 5, 2)
        );
        assert_eq!(reply.usage_source, UsageSource::ProviderResponse);
    }

    #[test]
    fn cached_tokens_are_read_from_each_providers_usage() {
        let openai = |body: Value| {
            parse_reply(Api::OpenAi, "u", 200, None, body.to_string().as_bytes()).expect("reply")
        };
        let choices = json!([{"message": {"content": "x"}}]);
        let reply = openai(json!({"choices": choices, "usage": {"prompt_tokens": 100,
            "completion_tokens": 2, "prompt_tokens_details": {"cached_tokens": 64}}}));
        assert_eq!(
            (reply.input_tokens, reply.cached_input_tokens),
            (Some(100), Some(64))
        );
        // llama.cpp's server: the KV-cache reuse in its timings.
        let reply = openai(json!({"choices": choices, "usage": {"prompt_tokens": 100,
            "completion_tokens": 2}, "timings": {"cache_n": 90, "prompt_n": 10}}));
        assert_eq!(reply.cached_input_tokens, Some(90));
        let reply = openai(json!({"choices": choices, "usage": {"prompt_tokens": 100,
            "completion_tokens": 2}}));
        assert_eq!(reply.cached_input_tokens, None, "not reported is not zero");
        // Anthropic counts uncached input apart from cache reads and writes.
        let reply = parse_reply(
            Api::Anthropic,
            "u",
            200,
            None,
            json!({"content": [{"type": "text", "text": "x"}], "usage": {"input_tokens": 10,
                "cache_read_input_tokens": 70, "cache_creation_input_tokens": 20, "output_tokens": 1}})
            .to_string()
            .as_bytes(),
        )
        .expect("reply");
        assert_eq!(
            (
                reply.input_tokens,
                reply.cached_input_tokens,
                reply.cache_write_tokens
            ),
            (Some(100), Some(70), Some(20))
        );
    }

    #[tokio::test]
    async fn anthropic_success() {
        let (reply, _) = call("anthropic", RunnerKind::Anthropic).await;
        let reply = reply.expect("ok");
        assert_eq!(
            (reply.text.as_str(), reply.input_tokens, reply.output_tokens),
            ("green", Some(50), 3)
        );
    }

    #[tokio::test]
    async fn retries_a_503_then_succeeds() {
        let (reply, calls) = call("flaky", RunnerKind::OpenaiCompatible).await;
        assert!(reply.is_ok(), "{reply:?}");
        assert_eq!(calls, 2);
    }

    #[tokio::test]
    async fn failures_become_typed_errors() {
        let (error, calls) = call("500", RunnerKind::OpenaiCompatible).await;
        assert_eq!(error.expect_err("5xx").error_type(), "http_500");
        assert_eq!(calls, 2, "5xx is retried once");
        let (error, calls) = call("400", RunnerKind::OpenaiCompatible).await;
        assert_eq!(error.expect_err("4xx").error_type(), "http_400");
        assert_eq!(calls, 1, "4xx is not retried");
        let (error, _) = call("invalid", RunnerKind::OpenaiCompatible).await;
        assert_eq!(error.expect_err("invalid").error_type(), "invalid_response");
        let (error, _) = call("no-usage", RunnerKind::OpenaiCompatible).await;
        assert_eq!(error.expect_err("usage").error_type(), "missing_usage");
        let (error, _) = call("slow", RunnerKind::OpenaiCompatible).await;
        assert_eq!(error.expect_err("slow").error_type(), "timeout");
    }

    async fn traced(mode: &'static str) -> (Result<ModelReply, RunnerError>, Vec<Attempt>, usize) {
        let calls = Arc::new(AtomicUsize::new(0));
        let base = fake(mode, calls.clone()).await;
        let mut spec = runner(RunnerKind::OpenaiCompatible, format!("{base}/v1")).spec;
        spec.retries = 2;
        spec.timeout_ms = 5_000;
        let runner = Runner::from_spec(spec, "sha".into()).expect("runner");
        let request = runner.request("c", "q", AnswerKind::Span);
        let (result, attempts) = runner.call_traced(&request, 7).await;
        (result, attempts, calls.load(Ordering::SeqCst))
    }

    /// The waits are checked on the recorded attempt start times, not on a wall-clock budget.
    #[tokio::test]
    async fn retry_after_seconds_and_dates_are_honoured() {
        let (result, attempts, calls) = traced("retry-after-seconds").await;
        assert!(result.is_ok(), "{result:?}");
        assert_eq!((calls, attempts.len()), (2, 2));
        assert_eq!(attempts[0].outcome, "http_429");
        assert_eq!(attempts[0].retry_after_ms, Some(1000));
        let wait = attempts[0].wait_ms.expect("a wait");
        assert!(
            (1000..=1005).contains(&wait),
            "Retry-After plus jitter of at most backoff/2: {wait}"
        );
        assert!(attempts[1].started_at_ms >= attempts[0].started_at_ms + 1000);
        assert_eq!(
            (attempts[1].outcome.as_str(), attempts[1].wait_ms),
            ("ok", None)
        );

        let (result, attempts, _) = traced("retry-after-date").await;
        assert!(result.is_ok(), "{result:?}");
        let asked = attempts[0].retry_after_ms.expect("a date was read");
        // An HTTP-date has whole seconds: 2 s ahead, truncated, is at most 2 s away, and more
        // than 0 unless the reply took over a second to be read (a loaded machine).
        assert!((1..=2000).contains(&asked), "{asked}");
        assert!(attempts[1].started_at_ms >= attempts[0].started_at_ms + asked);

        let (result, attempts, calls) = traced("retry-after-too-long").await;
        assert_eq!(result.expect_err("not waited for").error_type(), "http_429");
        assert_eq!((calls, attempts[0].wait_ms), (1, None));
    }

    #[test]
    fn backoff_has_bounded_seeded_jitter() {
        let waits = |seed: u64| -> Vec<u64> {
            let mut rng = SplitMix64::new(seed);
            (0..6)
                .map(|retry| retry_wait_ms(100, retry, None, &mut rng).expect("wait"))
                .collect()
        };
        let first = waits(1);
        assert_eq!(first, waits(1), "the same seed waits the same");
        assert_ne!(first, waits(2), "another seed spreads the retries");
        for (retry, wait) in first.iter().enumerate() {
            let step = 100u64 << retry;
            assert!((step / 2..=step).contains(wait), "retry {retry}: {wait}");
        }
        let mut rng = SplitMix64::new(3);
        let capped = retry_wait_ms(100, 40, None, &mut rng).expect("wait");
        assert!(capped <= MAX_BACKOFF_MS);
        assert_eq!(
            retry_wait_ms(100, 0, Some(MAX_RETRY_AFTER_MS + 1), &mut rng),
            None
        );
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        assert_eq!(parse_retry_after(" 7 ", now), Some(7000));
        assert_eq!(
            parse_retry_after(&httpdate::fmt_http_date(now + Duration::from_secs(30)), now),
            Some(30_000)
        );
        assert_eq!(
            parse_retry_after(&httpdate::fmt_http_date(now), now + Duration::from_secs(5)),
            Some(0)
        );
        assert_eq!(parse_retry_after("soon", now), None);
        // Regression (found by probing): delay-seconds past u64 were unreadable, so a server
        // asking to be left alone was retried at once.
        assert_eq!(
            parse_retry_after("99999999999999999999", now),
            Some(u64::MAX)
        );
    }

    #[tokio::test]
    async fn a_down_endpoint_is_a_connection_error() {
        // Bind then drop: the port is very likely closed now.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        drop(listener);
        let runner = runner(RunnerKind::OpenaiCompatible, format!("http://{address}/v1"));
        let request = runner.request("c", "q", AnswerKind::Span);
        let error = runner.call(&request).await.expect_err("down");
        assert_eq!(error.error_type(), "connection_error");
        assert_eq!(error.usage_source(), UsageSource::RunnerError);
    }

    /// Regression (found by probing): a key ending in a newline made every trial a retried
    /// "cannot connect: builder error", and an empty key was sent as `Bearer `.
    #[test]
    fn api_keys_are_trimmed_and_empty_or_unsendable_keys_are_setup_errors() {
        assert_eq!(api_key("K", "sk-test-123\n").as_deref(), Ok("sk-test-123"));
        assert!(api_key("K", "").is_err_and(|e| e.contains("K named by api_key_env is empty")));
        assert!(api_key("K", "  \n").is_err());
        assert!(api_key("K", "sk\u{7}x").is_err_and(|e| e.contains("HTTP header cannot carry")));
    }
}
