//! The axum app: provider routes, pass-through for other provider paths, the witness sidecar
//! and the proxy's own status and pause routes.
//!
//! Per request: read the body (up to [`ProxySettings::max_body_bytes`]), optimise it (or say why
//! not), forward it, and return the upstream's answer with the `X-Svc-*` headers; non-streaming
//! JSON answers are checked by the witness when it is on; streamed answers pass through and, in
//! any witness mode, are recorded after they complete.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::connect_info::IntoMakeServiceWithConnectInfo;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, post};
use serde_json::Value;

use super::check::{self, Evidence, WitnessSettings};
use super::local_only::Peer;
use super::optimize::{self, Outcome, Unchanged};
use super::provider::{ErrorKind, Provider, ProxyError, Route};
use super::relay::{self, Pending};
use super::stats::{Counters, RequestLog};
use super::upstream::{self, Upstreams};
use super::{gemini, openai, proof_sidecar, routed, sidecar, sse, stream_end};
use crate::context::CommitStore;
use crate::routing::{Plan, Routing};
use crate::tokens::Tokenizer;
use crate::witness::Mode;
use crate::witness::store::Store;

/// Requests up to this size (and under the budget in bytes) are prepared on the async worker.
const INLINE_BYTES: usize = 16 * 1024;

/// Response headers of the optimiser.
pub const HEADER_OPTIMIZATION: &str = "x-svc-optimization";
pub const HEADER_CONTEXT_ID: &str = "x-svc-context-id";
pub const HEADER_TOKENS_BEFORE: &str = "x-svc-tokens-before";
pub const HEADER_TOKENS_AFTER: &str = "x-svc-tokens-after";

/// Default listening port (SPEC §8).
pub const DEFAULT_PORT: u16 = 9377;
/// Default optimisation budget: request text up to this many tokens is forwarded as is.
pub const DEFAULT_BUDGET: usize = 32_000;
/// Largest request body accepted (a 250K-token message is about 1 MB).
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 * 1024 * 1024;
/// Resolved settings of one proxy.
#[derive(Debug, Clone)]
pub struct ProxySettings {
    pub upstreams: Upstreams,
    pub budget: usize,
    pub max_body_bytes: usize,
    pub read_timeout: Duration,
    /// The witness; `None` when off.
    pub witness: Option<WitnessSettings>,
    /// State directory: commits (`ctx_…`) and the witness store live under it.
    pub state_home: PathBuf,
}

impl ProxySettings {
    pub fn new(state_home: PathBuf) -> Self {
        Self {
            upstreams: Upstreams::default(),
            budget: DEFAULT_BUDGET,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            read_timeout: upstream::DEFAULT_READ_TIMEOUT,
            witness: None,
            state_home,
        }
    }
}

/// Shared state of the app.
#[derive(Debug)]
pub struct ProxyState {
    pub settings: ProxySettings,
    pub(super) client: reqwest::Client,
    commits: CommitStore,
    pub witness_store: Store,
    tokenizer: Tokenizer,
    paused: AtomicBool,
    /// Set when the process begins to stop: requests cut then were cut by the proxy, not by
    /// their clients (their log lines said "the client went away").
    stopping: AtomicBool,
    /// The optimisation budget in force; starts at `settings.budget`, changed by the control
    /// API's quality switch while the proxy runs.
    budget: AtomicUsize,
    pub counters: Counters,
    pub(super) logger: Option<Logger>,
    /// Fail-closed routing and the RAVS log (`routing.toml`, `ravs/events.jsonl` under the
    /// state directory).
    pub routing: Routing,
}

/// Receives every request's log entry (the command prints it as one stderr line; the library
/// never prints).
pub struct Logger(pub Box<dyn Fn(&RequestLog) + Send + Sync>);

impl std::fmt::Debug for Logger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Logger")
    }
}

impl ProxyState {
    pub fn new(
        settings: ProxySettings,
        logger: Option<Logger>,
    ) -> Result<Arc<Self>, upstream::ClientError> {
        let client = upstream::client(settings.read_timeout)?;
        // The rank tables load at the first count (about 0.1–0.2 s): in the background now,
        // not on the first request (found by probing: 200 ms to its first byte).
        let tokenizer = Tokenizer::default();
        std::thread::spawn(move || tokenizer.count("warm up"));
        Ok(Arc::new(Self {
            commits: CommitStore::new(&settings.state_home),
            witness_store: Store::at(settings.state_home.join("witness")),
            client,
            tokenizer: Tokenizer::default(),
            paused: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            budget: AtomicUsize::new(settings.budget),
            counters: Counters::default(),
            logger,
            routing: Routing::load(&settings.state_home),
            settings,
        }))
    }

    /// Pauses (`true`) or enables optimisation; requests are then forwarded as received.
    pub fn set_paused(&self, paused: bool) {
        self.paused.store(paused, Ordering::Relaxed);
    }

    pub fn paused(&self) -> bool {
        self.paused.load(Ordering::Relaxed)
    }

    /// The process is stopping (a signal, the daemon's stop).
    pub fn set_stopping(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    pub fn stopping(&self) -> bool {
        self.stopping.load(Ordering::Relaxed)
    }

    /// Sets the optimisation budget of the requests that arrive from now on (at least 1).
    pub fn set_budget(&self, budget: usize) {
        self.budget.store(budget.max(1), Ordering::Relaxed);
    }

    /// The optimisation budget in force.
    pub fn budget(&self) -> usize {
        self.budget.load(Ordering::Relaxed)
    }
}

/// The app as a service that records each connection's two ends ([`Peer`]), which the proof
/// sidecar needs to admit only local callers: `axum::serve(listener, make_service(state))`.
/// Served as plain [`app`], the proof routes refuse every caller.
pub fn make_service(state: Arc<ProxyState>) -> IntoMakeServiceWithConnectInfo<Router, Peer> {
    app(state).into_make_service_with_connect_info::<Peer>()
}

/// The app: every route on one router.
pub fn app(state: Arc<ProxyState>) -> Router {
    Router::new()
        .route("/v1/messages", post(anthropic_messages))
        .route("/v1/chat/completions", post(openai_chat))
        .route("/v1/responses", post(openai_responses))
        .route("/v1/{*rest}", any(v1_passthrough))
        .route("/v1beta/{*rest}", any(gemini_route))
        .merge(sidecar::routes())
        .merge(proof_sidecar::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        // The body limit is enforced in `read_body`, with an error in the provider's shape.
        .layer(DefaultBodyLimit::disable())
        .with_state(state)
}

async fn anthropic_messages(State(state): State<Arc<ProxyState>>, request: Request) -> Response {
    handle(state, Route::AnthropicMessages, request).await
}

async fn openai_chat(State(state): State<Arc<ProxyState>>, request: Request) -> Response {
    handle(state, Route::OpenaiChat, request).await
}

async fn openai_responses(State(state): State<Arc<ProxyState>>, request: Request) -> Response {
    handle(state, Route::OpenaiResponses, request).await
}

/// Other `/v1/...` paths (model lists, token counting, files): Anthropic when the client sends
/// Anthropic's version or key header, else OpenAI.
async fn v1_passthrough(State(state): State<Arc<ProxyState>>, request: Request) -> Response {
    let headers = request.headers();
    let provider = if headers.contains_key("anthropic-version") || headers.contains_key("x-api-key")
    {
        Provider::Anthropic
    } else {
        Provider::Openai
    };
    handle(state, Route::Passthrough(provider), request).await
}

async fn gemini_route(State(state): State<Arc<ProxyState>>, request: Request) -> Response {
    let path = request.uri().path();
    let generate = request.method() == Method::POST
        && path.starts_with("/v1beta/models/")
        && (path.ends_with(":generateContent") || path.ends_with(":streamGenerateContent"));
    let route = if generate {
        Route::GeminiGenerate
    } else {
        Route::Passthrough(Provider::Gemini)
    };
    handle(state, route, request).await
}

async fn not_found(request: Request) -> Response {
    let message = format!(
        "no route for {} {}; the proxy serves /v1/messages, /v1/chat/completions, /v1/responses, /v1beta/models/..., /witness, /proof and /svc/status",
        request.method(),
        request.uri().path()
    );
    ProxyError::new(Provider::Openai, ErrorKind::NotFound, message).into_response()
}

/// A known path asked with the wrong method: an error in the shape of the provider the path
/// belongs to (axum's default is an empty 405), naming the method to use.
async fn method_not_allowed(request: Request) -> Response {
    let path = request.uri().path();
    let provider = if path.starts_with("/v1/messages") {
        Provider::Anthropic
    } else if path.starts_with("/v1beta/") {
        Provider::Gemini
    } else {
        Provider::Openai
    };
    let allowed = match path {
        "/witness" | "/svc/status" | "/proof/inspect" => "GET",
        _ if path.starts_with("/witness/") && !path.ends_with("/feedback") => "GET",
        _ => "POST",
    };
    let message = format!(
        "{} is not served on {path}; use {allowed}",
        request.method()
    );
    let mut response =
        ProxyError::new(provider, ErrorKind::MethodNotAllowed, message).into_response();
    response.headers_mut().insert(
        axum::http::header::ALLOW,
        axum::http::HeaderValue::from_static(allowed),
    );
    response
}

/// Whether the request asks for a streamed answer, given its top-level `stream` field.
fn is_stream(route: Route, path: &str, stream: Option<bool>) -> bool {
    match route {
        Route::GeminiGenerate => path.ends_with(":streamGenerateContent"),
        _ => stream == Some(true),
    }
}

/// The top-level `stream` field of a body too deep to read as a value, found without building
/// the value.
fn stream_field(text: &str) -> Option<bool> {
    #[derive(serde::Deserialize)]
    struct Top {
        #[serde(default)]
        stream: Option<bool>,
    }
    serde_json::from_str::<Top>(text)
        .ok()
        .and_then(|top| top.stream)
}

async fn read_body(
    state: &ProxyState,
    provider: Provider,
    request: Request,
) -> Result<(axum::http::request::Parts, Bytes), ProxyError> {
    let limit = state.settings.max_body_bytes;
    let too_large = || {
        ProxyError::new(
            provider,
            ErrorKind::TooLarge,
            format!("request body over the proxy's limit of {limit} bytes (--max-body-bytes)"),
        )
    };
    let (parts, body) = request.into_parts();
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|length| length > limit) {
        return Err(too_large());
    }
    match axum::body::to_bytes(body, limit).await {
        Ok(bytes) => Ok((parts, bytes)),
        Err(error) => {
            if std::error::Error::source(&error)
                .is_some_and(|source| source.to_string().contains("length limit"))
                || error.to_string().contains("length limit")
            {
                Err(too_large())
            } else {
                Err(ProxyError::new(
                    provider,
                    ErrorKind::InvalidRequest,
                    format!("cannot read the request body: {error}"),
                ))
            }
        }
    }
}

/// What the optimiser decided, plus what the witness needs from the request.
struct Prepared {
    outcome: Outcome,
    body: Bytes,
    evidence: Evidence,
    stream: bool,
    /// The routing decision of a prompt request.
    plan: Option<Plan>,
}

async fn prepare(
    state: &Arc<ProxyState>,
    route: Route,
    parts: &axum::http::request::Parts,
    body: Bytes,
) -> Result<Prepared, ProxyError> {
    let provider = route.provider();
    if matches!(route, Route::Passthrough(_)) || parts.method != Method::POST {
        return Ok(Prepared {
            outcome: Outcome::Unchanged {
                reason: Unchanged::NotAPrompt,
                tokens: 0,
            },
            body,
            evidence: Evidence::default(),
            stream: false,
            plan: None,
        });
    }
    if let Some(content_type) = parts.headers.get(header::CONTENT_TYPE)
        && !content_type
            .to_str()
            .is_ok_and(|value| value.to_ascii_lowercase().contains("json"))
    {
        return Err(ProxyError::new(
            provider,
            ErrorKind::UnsupportedMediaType,
            format!(
                "content type {content_type:?} is not JSON; send the request as application/json"
            ),
        ));
    }
    if let Some(encoding) = content_encoding(&parts.headers) {
        return Err(ProxyError::new(
            provider,
            ErrorKind::UnsupportedMediaType,
            format!(
                "the request body is {encoding}-encoded; the proxy reads prompts uncompressed, so send it without content-encoding"
            ),
        ));
    }
    let Ok(text) = std::str::from_utf8(&body) else {
        return Err(ProxyError::new(
            provider,
            ErrorKind::InvalidRequest,
            "the request body is not UTF-8 JSON",
        ));
    };
    let request: Value = match serde_json::from_str(text) {
        Ok(request) => request,
        // Valid JSON nested deeper than a `Value` is read (128 levels): the upstream may well
        // take it, so it is forwarded as received, and says why (it was refused as invalid).
        Err(_) if serde_json::from_str::<serde::de::IgnoredAny>(text).is_ok() => {
            let stream = is_stream(route, parts.uri.path(), stream_field(text));
            return Ok(Prepared {
                outcome: Outcome::Skipped {
                    reason: "nested_too_deep".to_string(),
                },
                body: body.clone(),
                evidence: Evidence::default(),
                stream,
                plan: None,
            });
        }
        Err(error) => {
            return Err(ProxyError::new(
                provider,
                ErrorKind::InvalidRequest,
                format!("the request body is not valid JSON: {error}"),
            ));
        }
    };
    if !request.is_object() {
        return Err(ProxyError::new(
            provider,
            ErrorKind::InvalidRequest,
            "the request body must be a JSON object",
        ));
    }
    let stream = is_stream(
        route,
        parts.uri.path(),
        request.get("stream").and_then(Value::as_bool),
    );
    let json_mode = match provider {
        Provider::Openai => openai::wants_json(&request),
        Provider::Gemini => gemini::wants_json(&request),
        Provider::Anthropic => false,
    };
    let units = match route.units(&request) {
        Ok(units) => units,
        Err(reason) => {
            let plan = state
                .routing
                .plan(route, parts.uri.path(), text, &request, None);
            return Ok(Prepared {
                outcome: Outcome::Skipped { reason },
                body,
                evidence: Evidence {
                    json_mode,
                    ..Evidence::default()
                },
                stream,
                plan: Some(plan),
            });
        }
    };
    let texts = optimize::texts(&request, &units);
    let evidence = Evidence {
        context: texts.join("\n\n"),
        question: units
            .iter()
            .rposition(|unit| unit.role == optimize::Role::User)
            .map(|index| texts[index].to_string()),
        json_mode,
    };
    if state.paused() {
        let tokens = texts.iter().map(|text| state.tokenizer.count(text)).sum();
        let plan = state
            .routing
            .plan(route, parts.uri.path(), text, &request, Some(&texts));
        return Ok(Prepared {
            outcome: Outcome::Unchanged {
                reason: Unchanged::Paused,
                tokens,
            },
            body,
            evidence,
            stream,
            plan: Some(plan),
        });
    }
    let worker_state = state.clone();
    let worker_body = body.clone();
    let path = parts.uri.path().to_string();
    // Classifying (a keyword scan, a fingerprint), tokenising and compressing a large request
    // is CPU work: keep it off the async workers. A failed worker routes nothing. A small
    // request that cannot be over budget (a token is at least one byte, so it is never
    // rewritten or committed) is a few microseconds of work, less than the hand-over to the
    // blocking pool and back (the context switches dominated a 64-client profile).
    let inline = body.len() <= INLINE_BYTES.min(state.budget());
    let work = move || {
        // The body was decoded above; decoding again cannot fail.
        let text = std::str::from_utf8(&worker_body).unwrap_or_default();
        let texts = optimize::texts(&request, &units);
        let plan = worker_state
            .routing
            .plan(route, &path, text, &request, Some(&texts));
        let outcome = optimize::optimize(
            text,
            &request,
            &units,
            worker_state.budget(),
            &worker_state.commits,
            &worker_state.tokenizer,
        );
        (outcome, Some(plan))
    };
    let (outcome, plan) = if inline {
        work()
    } else {
        tokio::task::spawn_blocking(work)
            .await
            .unwrap_or_else(|error| {
                (
                    Outcome::Skipped {
                        reason: format!("optimiser_failed ({error})"),
                    },
                    None,
                )
            })
    };
    let body = match &outcome {
        Outcome::Rewritten { body, .. } => Bytes::from(body.clone()),
        _ => body,
    };
    Ok(Prepared {
        outcome,
        body,
        evidence,
        stream,
        plan,
    })
}

fn optimisation_headers(outcome: &Outcome, headers: &mut HeaderMap) {
    let mut set = |name: &'static str, value: String| {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    };
    set(HEADER_OPTIMIZATION, outcome.header());
    if let Some((before, after)) = outcome.tokens()
        && !matches!(
            outcome,
            Outcome::Unchanged {
                reason: Unchanged::NotAPrompt,
                ..
            }
        )
    {
        set(HEADER_TOKENS_BEFORE, before.to_string());
        set(HEADER_TOKENS_AFTER, after.to_string());
    }
    if let Outcome::Rewritten { ctx_id, .. } = outcome {
        set(HEADER_CONTEXT_ID, ctx_id.clone());
    }
}

async fn handle(state: Arc<ProxyState>, route: Route, request: Request) -> Response {
    let mut pending = Pending::new(state.clone(), route);
    let response = match forward(&state, route, request, &mut pending).await {
        Ok(response) => response,
        Err(error) => {
            pending.log.error = Some(error.message.clone());
            let mut response = error.into_response();
            if let Some(outcome) = &pending.log.outcome {
                optimisation_headers(outcome, response.headers_mut());
            }
            if let (Some(route_header), Some(class)) =
                (&pending.log.routing, &pending.log.routing_class)
            {
                routed::set_headers(route_header, class, response.headers_mut());
            }
            response
        }
    };
    pending.finish(response.status().as_u16());
    response
}

async fn forward(
    state: &Arc<ProxyState>,
    route: Route,
    request: Request,
    pending: &mut Pending,
) -> Result<Response, ProxyError> {
    let provider = route.provider();
    let log = &mut pending.log;
    if has_dot_segment(request.uri().path()) {
        // The upstream URL is the configured root plus the path as received; a `..` (also
        // written `%2e%2e`, which URL parsers resolve) climbed out of the root's path and sent
        // the client's key to another path of the host.
        return Err(ProxyError::new(
            provider,
            ErrorKind::InvalidRequest,
            format!(
                "the path {} holds a `.` or `..` segment; the proxy forwards paths under the upstream's root only",
                request.uri().path()
            ),
        ));
    }
    let (parts, body) = read_body(state, provider, request).await?;
    let mut prepared = prepare(state, route, &parts, body).await?;
    log.outcome = Some(prepared.outcome.clone());
    let path_and_query = parts.uri.path_and_query().map_or_else(
        || parts.uri.path().to_string(),
        |pq| pq.as_str().to_string(),
    );
    let url = state.settings.upstreams.url(provider, &path_and_query);
    let outgoing = routed::Outgoing {
        route,
        parts: &parts,
        path_and_query: &path_and_query,
        body: &prepared.body,
        evidence: &prepared.evidence,
        stream: prepared.stream,
    };
    let sent = routed::send(state, &outgoing, prepared.plan.as_mut()).await;
    if let Some(plan) = &prepared.plan {
        // Also on an error answer, which carries the route headers too.
        log.routing = Some(plan.header());
        log.routing_class = Some(plan.class_id.clone());
    }
    let upstream = sent?;
    let status =
        StatusCode::from_u16(upstream.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut headers = upstream::response_headers(upstream.headers());
    optimisation_headers(&prepared.outcome, &mut headers);
    if let Some(plan) = &prepared.plan {
        routed::set_headers(&plan.header(), &plan.class_id, &mut headers);
    }
    let event_stream = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let witness = state
        .settings
        .witness
        .clone()
        .filter(|_| !matches!(route, Route::Passthrough(_)) && status.is_success());
    // The proxy asks for an unencoded answer (it drops `accept-encoding`); one that comes
    // encoded anyway cannot be read. Strict mode under a fail-closed profile withholds it
    // rather than deliver claims it never checked; other modes pass it on unchecked and say so.
    let encoding = content_encoding(&headers).map(str::to_string);
    let witness = match (witness, encoding) {
        (Some(settings), Some(encoding)) => {
            if settings.mode == Mode::Strict && settings.profile.fails_closed() {
                return Err(ProxyError::new(
                    provider,
                    ErrorKind::EncodedAnswer,
                    format!(
                        "the upstream answered with content-encoding {encoding} though the proxy asked for none; strict mode cannot check an encoded answer, so it is withheld"
                    ),
                ));
            }
            log.witness = Some(format!(
                "skipped: the answer is {encoding}-encoded (the proxy asked for none)"
            ));
            None
        }
        (witness, _) => witness,
    };
    if prepared.stream || event_stream {
        if let Some(settings) = witness.clone().filter(|w| w.mode != Mode::Audit) {
            return verified_stream(
                state,
                route,
                &settings,
                &prepared.evidence,
                prepared.plan.as_ref(),
                upstream,
                &url,
                headers,
                status,
                log,
            )
            .await;
        }
        if witness.is_some() {
            pending.log.witness = Some("deferred".into());
        }
        let body_entry = pending.hand_over(status.as_u16());
        let body = match witness {
            Some(settings) => relay::tee_for_witness(
                state.clone(),
                route,
                settings,
                prepared.evidence,
                prepared.plan,
                upstream,
                body_entry,
            ),
            None => relay::passthrough(upstream, Some(body_entry)),
        };
        let mut response = Response::new(body);
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        return Ok(response);
    }
    let Some(settings) = witness else {
        let mut response = Response::new(relay::passthrough(upstream, None));
        *response.status_mut() = status;
        *response.headers_mut() = headers;
        return Ok(response);
    };
    // The witness needs the whole answer: buffer this one body.
    let bytes = upstream
        .bytes()
        .await
        .map_err(|error| upstream::describe_body(provider, &url, status, &error))?;
    let text = String::from_utf8_lossy(&bytes);
    let body = match check::check_json(
        &settings,
        &state.witness_store,
        route,
        &prepared.evidence,
        &text,
    )
    .await
    {
        Ok(checked) => {
            checked.headers(&mut headers);
            if let Some(plan) = &prepared.plan {
                routed::record(state, vec![plan.verdict_entry(&checked.certificate)]).await;
            }
            log.witness = Some(check::log_verdict(&checked.certificate));
            match checked.body {
                Some(body) => Bytes::from(body),
                None => bytes,
            }
        }
        Err(problem) => {
            log.witness = Some(format!("skipped: {problem}"));
            bytes
        }
    };
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    Ok(response)
}

/// Strict / annotate on a streamed answer: buffer the whole stream, verify it, and emit a valid
/// stream in the provider's format carrying the verified text (the original bytes when nothing
/// changed, the answer is structured, or the stream is not server-sent events).
#[allow(clippy::too_many_arguments)]
async fn verified_stream(
    state: &Arc<ProxyState>,
    route: Route,
    settings: &WitnessSettings,
    evidence: &Evidence,
    plan: Option<&Plan>,
    upstream: reqwest::Response,
    url: &str,
    mut headers: HeaderMap,
    status: StatusCode,
    log: &mut RequestLog,
) -> Result<Response, ProxyError> {
    // A stream that broke off after its end marker is whole (it was a 502 before).
    let (bytes, cut) = stream_end::read_all(upstream).await;
    if let Some(error) = cut
        && !stream_end::of_body(route, &bytes).is_complete()
    {
        return Err(upstream::describe_body(
            route.provider(),
            url,
            status,
            &error,
        ));
    }
    let bytes = Bytes::from(bytes);
    let text = String::from_utf8_lossy(&bytes);
    let events = sse::split(&text);
    let is_sse = !text.trim_start().starts_with('[');
    let payloads = check::stream_events(&bytes);
    // A stream that did not end whole is part of an answer: still checked (strict still cuts
    // what it cannot support), never counted as the model's verdict, and said so.
    let end = stream_end::of(route, &payloads, stream_end::has_done_marker(&bytes));
    let answer = route.stream_answer(&payloads);
    let rewritable = is_sse && !answer.several;
    let body = match check::run(
        settings,
        &state.witness_store,
        evidence,
        &answer,
        rewritable,
    )
    .await
    {
        Ok((certificate, mode, output)) => {
            if let Some(plan) = plan.filter(|_| end.is_complete()) {
                routed::record(state, vec![plan.verdict_entry(&certificate)]).await;
            }
            let replaced = (output != answer.text)
                .then(|| sse::rewrite(route, &events, &output))
                .flatten();
            check::certificate_headers(&mut headers, &certificate, mode, replaced.is_some());
            check::stream_end_header(&mut headers, &end);
            log.witness = Some(format!(
                "{}{}",
                check::log_verdict(&certificate),
                end.problem()
                    .map(|problem| format!("; a partial answer: {problem}"))
                    .unwrap_or_default()
            ));
            replaced.map_or(bytes, Bytes::from)
        }
        Err(problem) => {
            log.witness = Some(format!("skipped: {problem}"));
            bytes
        }
    };
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    Ok(response)
}

/// A body's `content-encoding`, when it has one other than `identity`.
fn content_encoding(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty() && !v.eq_ignore_ascii_case("identity"))
}

/// Whether `path` has a `.` or `..` segment, percent-encoded or not.
fn has_dot_segment(path: &str) -> bool {
    path.split('/').any(|segment| {
        let decoded = segment.to_ascii_lowercase().replace("%2e", ".");
        decoded == "." || decoded == ".."
    })
}
