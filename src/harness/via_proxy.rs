//! The `via_proxy` run setting: every `raw` request goes through the real proxy
//! ([`crate::proxy`], optimisation on, `--budget` = the trial's budget), in process, to the real
//! runner, so the proxy is measured like a condition: `svc report --compare-runs` pairs the run
//! with the same run made direct.
//!
//! The path of one request: the harness → the proxy (one per budget, on 127.0.0.1) → a tap on
//! 127.0.0.1 that keeps the exact bytes the proxy forwarded → the runner (the fixture model
//! answers in the tap from the forwarded context; an HTTP runner's endpoint gets the forwarded
//! request with the client's headers) → back through the proxy.
//!
//! The request is the runner's own prompt split in user messages at the context: the template
//! text before `{context}`, the context, then the rest (the question). Their concatenation is
//! the prompt the runner sends direct; the split is what lets the proxy tell the context (an
//! older turn it may compress) from the task (the latest user turn, which it keeps). A template
//! without exactly one `{context}` is sent as one message, which the proxy keeps as it is.
//!
//! The record then describes what the model saw: the context is the forwarded context message
//! (its tokens, its evidence recall), `context_commit_id` is the proxy's `ctx_…` commit when it
//! rewrote the request, and notes.jsonl says what the proxy did (`via_proxy`).

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::runner::http::{self, Api, Attempt};
use super::runner::{ModelReply, ModelRequest, Runner, RunnerError, RunnerKind};
use super::workload::AnswerKind;
use crate::proxy::provider::HEADER_ERROR;
use crate::proxy::server::{HEADER_CONTEXT_ID, HEADER_OPTIMIZATION};
use crate::proxy::upstream::Upstreams;
use crate::proxy::{ProxySettings, ProxyState};
use crate::tokens::Tokenizer;

/// The header naming a request to the tap (unknown headers pass through the proxy untouched).
const TRIAL_HEADER: &str = "x-svc-trial";
/// Marks the context's place when the template is split.
const SENTINEL: &str = "\u{1}svc-context\u{1}";

/// Errors starting the in-process proxy.
#[derive(Debug, thiserror::Error)]
pub enum ViaProxyError {
    #[error(
        "via_proxy: runner {runner} is a {kind} runner; the proxy speaks the provider APIs, so via_proxy takes fixture, openai_compatible and anthropic runners"
    )]
    Unsupported { runner: String, kind: String },
    #[error(
        "via_proxy: the base_url {url:?} of runner {runner} does not end in /v1; the proxy forwards /v1/chat/completions to the provider's root, so give the root + /v1"
    )]
    BaseUrl { runner: String, url: String },
    #[error("via_proxy: cannot start the in-process proxy: {0}")]
    Start(String),
}

/// What the tap saw of one request.
#[derive(Debug, Clone, Default)]
struct Tapped {
    /// The body the proxy forwarded.
    forwarded: Bytes,
    /// The fixture's reply, when the fixture answered.
    fixture_reply: Option<ModelReply>,
    /// Why the runner's endpoint gave no answer (refused, reset, timed out): the direct call's
    /// error, so both arms of a run name a failure alike.
    runner_failure: Option<RunnerError>,
}

#[derive(Clone)]
struct Tap {
    runner: Arc<Runner>,
    /// The HTTP runner's provider root (`None`: the fixture answers here).
    upstream: Option<String>,
    client: reqwest::Client,
    seen: Arc<Mutex<HashMap<String, Tapped>>>,
}

/// One raw call made through the proxy.
#[derive(Debug)]
pub struct ProxiedCall {
    pub result: Result<ModelReply, RunnerError>,
    pub latency_ms: f64,
    pub attempt: Attempt,
    /// The proxy's `X-Svc-Optimization` (`rewritten`, `unchanged; reason=…`, `skipped; …`).
    pub optimization: String,
    /// The proxy's commit of the elided parts, when it rewrote the request.
    pub ctx_id: Option<String>,
    /// The context as the model got it (the forwarded context message), when it was read.
    pub forwarded_context: Option<String>,
}

/// The in-process proxies (one per budget) and their tap, on a runtime of their own so both
/// the rayon workers of local runs and the async workers of HTTP runs can call them.
pub struct ViaProxy {
    runtime: tokio::runtime::Runtime,
    proxies: BTreeMap<usize, String>,
    client: reqwest::Client,
    seen: Arc<Mutex<HashMap<String, Tapped>>>,
    api: Api,
    fixture: bool,
    api_key: Option<String>,
    next: AtomicU64,
    tokenizer: Tokenizer,
}

impl std::fmt::Debug for ViaProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ViaProxy")
            .field("proxies", &self.proxies)
            .finish()
    }
}

async fn serve(router: axum::Router) -> std::io::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Ok(format!("http://{address}"))
}

/// Serves a proxy as `svc proxy` does (its listener, with connection info).
async fn serve_proxy(state: std::sync::Arc<ProxyState>) -> std::io::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let listener = crate::own_user::OwnUserListener::new(listener);
    tokio::spawn(async move {
        let _ = axum::serve(listener, crate::proxy::make_service(state)).await;
    });
    Ok(format!("http://{address}"))
}

impl ViaProxy {
    /// Starts a proxy per budget in front of `runner`; commits go under `state_home`.
    pub fn start(
        runner: Arc<Runner>,
        budgets: &[usize],
        state_home: &Path,
    ) -> Result<Self, ViaProxyError> {
        let spec = &runner.spec;
        let (api, upstream) = match spec.kind {
            RunnerKind::Fixture => (Api::OpenAi, None),
            RunnerKind::OpenaiCompatible => {
                let base = spec.base_url.clone().unwrap_or_default();
                let base = base.trim_end_matches('/');
                let root = base
                    .strip_suffix("/v1")
                    .ok_or_else(|| ViaProxyError::BaseUrl {
                        runner: spec.name.clone(),
                        url: base.to_string(),
                    })?;
                (Api::OpenAi, Some(root.to_string()))
            }
            RunnerKind::Anthropic => (
                Api::Anthropic,
                Some(
                    spec.base_url
                        .clone()
                        .unwrap_or_default()
                        .trim_end_matches('/')
                        .to_string(),
                ),
            ),
            RunnerKind::Command => {
                return Err(ViaProxyError::Unsupported {
                    runner: spec.name.clone(),
                    kind: spec.kind.as_str().to_string(),
                });
            }
        };
        let api_key = spec
            .api_key_env
            .as_deref()
            .filter(|var| !var.is_empty())
            .and_then(|var| std::env::var(var).ok());
        let timeout = Duration::from_millis(spec.timeout_ms.max(1));
        crate::harness::runner::install_crypto_provider();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| ViaProxyError::Start(e.to_string()))?;
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .build()
            .map_err(|e| ViaProxyError::Start(e.to_string()))?;
        let seen: Arc<Mutex<HashMap<String, Tapped>>> = Arc::default();
        let fixture = upstream.is_none();
        let tap = Tap {
            runner,
            upstream,
            client: client.clone(),
            seen: seen.clone(),
        };
        let state_home = state_home.to_path_buf();
        let budgets = budgets.to_vec();
        let proxies = runtime.block_on(async move {
            let tap_url = serve(axum::Router::new().fallback(tap_handler).with_state(tap))
                .await
                .map_err(|e| ViaProxyError::Start(e.to_string()))?;
            let mut proxies = BTreeMap::new();
            for budget in budgets {
                let mut settings = ProxySettings::new(state_home.clone());
                settings.upstreams = Upstreams {
                    anthropic: tap_url.clone(),
                    openai: tap_url.clone(),
                    gemini: tap_url.clone(),
                };
                settings.budget = budget;
                settings.read_timeout = timeout;
                let state = ProxyState::new(settings, None)
                    .map_err(|e| ViaProxyError::Start(e.to_string()))?;
                let url = serve_proxy(state)
                    .await
                    .map_err(|e| ViaProxyError::Start(e.to_string()))?;
                proxies.insert(budget, url);
            }
            Ok::<_, ViaProxyError>(proxies)
        })?;
        Ok(Self {
            runtime,
            proxies,
            client,
            seen,
            api,
            fixture,
            api_key,
            next: AtomicU64::new(0),
            tokenizer: Tokenizer::default(),
        })
    }

    /// The proxy-side request: the prompt split at the context, and the index of the context
    /// message among `messages` (`None` when the template could not be split).
    fn body(&self, runner: &Runner, request: &ModelRequest) -> (Value, Option<usize>) {
        let probe = runner.request(SENTINEL, &request.question, request.answer_kind);
        let mut texts: Vec<String> = Vec::new();
        let mut context_at = None;
        match probe.prompt.split_once(SENTINEL) {
            Some((before, after)) if !after.contains(SENTINEL) && !request.context.is_empty() => {
                if !before.is_empty() {
                    texts.push(before.to_string());
                }
                context_at = Some(texts.len());
                texts.push(request.context.clone());
                if !after.is_empty() {
                    texts.push(after.to_string());
                }
            }
            _ => texts.push(request.prompt.clone()),
        }
        let spec = &runner.spec;
        let user = |text: &String| json!({"role": "user", "content": text});
        let mut body = match self.api {
            Api::OpenAi => {
                let mut messages = Vec::new();
                if !request.system.is_empty() {
                    messages.push(json!({"role": "system", "content": request.system}));
                    context_at = context_at.map(|at| at + 1);
                }
                messages.extend(texts.iter().map(user));
                json!({
                    "model": request.model,
                    "messages": messages,
                    "max_tokens": request.max_output_tokens,
                    "temperature": spec.temperature,
                })
            }
            Api::Anthropic => {
                let mut body = json!({
                    "model": request.model,
                    "max_tokens": request.max_output_tokens,
                    "temperature": spec.temperature,
                    "messages": texts.iter().map(user).collect::<Vec<_>>(),
                });
                if !request.system.is_empty() {
                    body["system"] = json!(request.system);
                }
                body
            }
        };
        if self.fixture {
            // Only the in-process fixture reads this; real providers never see it.
            body["svc_trial"] = json!({
                "question": request.question,
                "answer_kind": request.answer_kind,
                "context_message": context_at,
                // Unsplit, the proxy keeps the one message as it is: the context is unchanged.
                "context": if context_at.is_none() { Some(&request.context) } else { None },
            });
        }
        (body, context_at)
    }

    /// Sends `request` through the proxy of `budget` (blocking; for rayon workers).
    pub fn call_blocking(
        &self,
        runner: &Runner,
        request: &ModelRequest,
        budget: usize,
    ) -> ProxiedCall {
        self.runtime.block_on(self.call(runner, request, budget))
    }

    /// Sends `request` through the proxy of `budget`.
    pub async fn call(
        &self,
        runner: &Runner,
        request: &ModelRequest,
        budget: usize,
    ) -> ProxiedCall {
        let (mut attempt, started) = Attempt::starting();
        let clock = Instant::now();
        let id = format!("t{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (body, context_at) = self.body(runner, request);
        let base = self.proxies.get(&budget).cloned().unwrap_or_default();
        let url = match self.api {
            Api::OpenAi => format!("{base}/v1/chat/completions"),
            Api::Anthropic => format!("{base}/v1/messages"),
        };
        let mut builder = self
            .client
            .post(&url)
            .header(TRIAL_HEADER, &id)
            .header("content-type", "application/json")
            .body(body.to_string());
        builder = match (self.api, &self.api_key) {
            (Api::OpenAi, Some(key)) => builder.bearer_auth(key),
            (Api::Anthropic, Some(key)) => builder.header("x-api-key", key),
            (_, None) => builder,
        };
        if self.api == Api::Anthropic {
            builder = builder.header("anthropic-version", "2023-06-01");
        }
        // The proxies and the tap live on this struct's runtime; the client's connections too.
        let send = builder.send();
        let sent = self
            .runtime
            .spawn(async move {
                let response = send.await?;
                let headers = response.headers().clone();
                let status = response.status().as_u16();
                Ok::<_, reqwest::Error>((status, headers, response.bytes().await?))
            })
            .await;
        let tapped = self
            .seen
            .lock()
            .map(|mut seen| seen.remove(&id))
            .unwrap_or_default()
            .unwrap_or_default();
        let mut call = ProxiedCall {
            result: Err(RunnerError::Connect {
                url: url.clone(),
                message: "the in-process proxy did not answer".into(),
            }),
            latency_ms: 0.0,
            attempt: attempt.clone(),
            optimization: String::new(),
            ctx_id: None,
            forwarded_context: forwarded_context(&tapped.forwarded, context_at),
        };
        call.result = match sent {
            Err(join) => Err(RunnerError::Connect {
                url: url.clone(),
                message: join.to_string(),
            }),
            Ok(Err(error)) => Err(if error.is_timeout() {
                RunnerError::Timeout {
                    url: url.clone(),
                    after_ms: runner.spec.timeout_ms,
                }
            } else {
                RunnerError::Connect {
                    url: url.clone(),
                    message: error.to_string(),
                }
            }),
            Ok(Ok((status, headers, bytes))) => {
                let header = |name: &str| {
                    headers
                        .get(name)
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_string)
                };
                call.optimization = header(HEADER_OPTIMIZATION).unwrap_or_default();
                call.ctx_id = header(HEADER_CONTEXT_ID);
                let header_id = header("x-request-id").or_else(|| header("request-id"));
                // The proxy's own answer that it could not reach the runner is the direct run's
                // connection error or timeout, not a provider status.
                let proxy_error = header(HEADER_ERROR);
                match (
                    tapped.runner_failure,
                    proxy_error.as_deref(),
                    http::parse_reply(self.api, &url, status, header_id, &bytes),
                    tapped.fixture_reply,
                ) {
                    (Some(failure), _, _, _) => Err(failure),
                    (None, Some("upstream_unreachable"), _, _) => Err(RunnerError::Connect {
                        url: url.clone(),
                        message: String::from_utf8_lossy(&bytes).into_owned(),
                    }),
                    (None, Some("upstream_timeout"), _, _) => Err(RunnerError::Timeout {
                        url: url.clone(),
                        after_ms: runner.spec.timeout_ms,
                    }),
                    // The fixture's own reply (usage source, id), once its text came back
                    // through the proxy unchanged.
                    (_, _, Ok(parsed), Some(reply)) if parsed.text == reply.text => Ok(reply),
                    (_, _, Ok(_), Some(_)) => Err(RunnerError::InvalidResponse {
                        url: url.clone(),
                        message:
                            "the answer that came back through the proxy differs from the fixture's"
                                .into(),
                    }),
                    (_, _, parsed, _) => parsed,
                }
            }
        };
        attempt.finish(started, &call.result);
        call.attempt = attempt;
        call.latency_ms = clock.elapsed().as_secs_f64() * 1000.0;
        call
    }

    /// Tokens of `text` (the forwarded context).
    pub fn count(&self, text: &str) -> usize {
        self.tokenizer.count(text)
    }
}

/// The context message of a forwarded body.
/// The context message of a forwarded body (`messages[at]` in both APIs: Anthropic's system
/// prompt is not a message).
fn forwarded_context(body: &[u8], context_at: Option<usize>) -> Option<String> {
    let at = context_at?;
    let value: Value = serde_json::from_slice(body).ok()?;
    value
        .get("messages")?
        .get(at)?
        .get("content")?
        .as_str()
        .map(str::to_string)
}

/// The tap: keeps the forwarded bytes, then answers with the fixture or forwards to the runner's
/// provider root.
async fn tap_handler(State(tap): State<Tap>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let id = parts
        .headers
        .get(TRIAL_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return (StatusCode::BAD_REQUEST, "unreadable body").into_response();
    };
    let mut tapped = Tapped {
        forwarded: bytes.clone(),
        fixture_reply: None,
        runner_failure: None,
    };
    let response = match &tap.upstream {
        None => {
            let answered = fixture_answer(&tap.runner, &bytes);
            let response = match &answered {
                Ok((_, json)) => (
                    StatusCode::OK,
                    [("content-type", "application/json")],
                    json.to_string(),
                )
                    .into_response(),
                Err(message) => (
                    StatusCode::BAD_REQUEST,
                    [("content-type", "application/json")],
                    json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}}).to_string(),
                )
                    .into_response(),
            };
            tapped.fixture_reply = answered.ok().map(|(reply, _)| reply);
            response
        }
        Some(root) => {
            let path = parts.uri.path_and_query().map_or_else(
                || parts.uri.path().to_string(),
                |pq| pq.as_str().to_string(),
            );
            let target = format!("{root}{path}");
            let mut builder = tap.client.post(&target).body(bytes);
            for (name, value) in &parts.headers {
                if !matches!(name.as_str(), "host" | "content-length" | TRIAL_HEADER) {
                    builder = builder.header(name, value);
                }
            }
            match builder.send().await {
                Ok(answer) => {
                    let status = StatusCode::from_u16(answer.status().as_u16())
                        .unwrap_or(StatusCode::BAD_GATEWAY);
                    let headers = answer.headers().clone();
                    match answer.bytes().await {
                        Ok(body) => {
                            let mut response = Response::new(axum::body::Body::from(body));
                            *response.status_mut() = status;
                            for name in ["content-type", "x-request-id", "request-id"] {
                                if let Some(value) = headers.get(name) {
                                    response.headers_mut().insert(name, value.clone());
                                }
                            }
                            response
                        }
                        Err(error) => {
                            tapped.runner_failure = Some(RunnerError::Connect {
                                url: target,
                                message: format!("the answer broke off: {error}"),
                            });
                            (StatusCode::BAD_GATEWAY, error.to_string()).into_response()
                        }
                    }
                }
                Err(error) if error.is_timeout() => {
                    tapped.runner_failure = Some(RunnerError::Timeout {
                        url: target,
                        after_ms: tap.runner.spec.timeout_ms,
                    });
                    (StatusCode::GATEWAY_TIMEOUT, error.to_string()).into_response()
                }
                Err(error) => {
                    tapped.runner_failure = Some(RunnerError::Connect {
                        url: target,
                        message: error.to_string(),
                    });
                    (StatusCode::BAD_GATEWAY, error.to_string()).into_response()
                }
            }
        }
    };
    if let Ok(mut seen) = tap.seen.lock() {
        seen.insert(id, tapped);
    }
    response
}

/// The fixture's answer to a forwarded chat request, and its OpenAI-shaped JSON.
fn fixture_answer(runner: &Runner, body: &[u8]) -> Result<(ModelReply, Value), String> {
    let value: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let trial = value.get("svc_trial").ok_or("no svc_trial field")?;
    let question = trial["question"].as_str().ok_or("no svc_trial.question")?;
    let kind: AnswerKind = serde_json::from_value(trial["answer_kind"].clone())
        .map_err(|e| format!("svc_trial.answer_kind: {e}"))?;
    let messages = value["messages"].as_array().ok_or("no messages")?;
    let context = match trial["context_message"].as_u64() {
        Some(at) => messages
            .get(at as usize)
            .and_then(|m| m["content"].as_str())
            .ok_or("no context message")?
            .to_string(),
        None => trial["context"].as_str().unwrap_or_default().to_string(),
    };
    let request = runner.request(&context, question, kind);
    let reply = runner
        .call_local(&request)
        .ok_or("the runner is not the fixture")?;
    let json = json!({
        "id": reply.provider_request_id,
        "object": "chat.completion",
        "model": runner.spec.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": reply.text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 0, "completion_tokens": reply.output_tokens, "total_tokens": reply.output_tokens},
    });
    Ok((reply, json))
}

/// Makes a `raw` trial's context the one the model got through the proxy, and says in a note
/// what the proxy did. Returns the note.
pub fn describe(
    call: &ProxiedCall,
    built: &mut super::condition::BuiltContext,
    budget: usize,
    count: impl Fn(&str) -> usize,
) -> (&'static str, String) {
    let before = built.tokens;
    if let Some(forwarded) = &call.forwarded_context
        && *forwarded != built.text
    {
        built.tokens = count(forwarded);
        built.text = forwarded.clone();
    }
    if call.ctx_id.is_some() {
        built.context_commit_id = call.ctx_id.clone();
    }
    (
        "via_proxy",
        format!(
            "through the in-process proxy (budget {budget}): {}; context {before} -> {} tokens{}",
            if call.optimization.is_empty() {
                "no answer"
            } else {
                call.optimization.as_str()
            },
            built.tokens,
            call.ctx_id
                .as_deref()
                .map(|id| format!(", elided parts in {id}"))
                .unwrap_or_default()
        ),
    )
}
