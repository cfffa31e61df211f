//! The control API (SPEC §4.3). Bodies are JSON; errors are
//! `{"error": {"type", "message"}}` with a 4xx/5xx status, like the proxy's sidecar. The
//! document `GET /api/openapi.json` describes every route and body (the file is
//! `src/dashboard/assets/openapi.json`; a test checks it names every route of the router).

use std::path::PathBuf;
use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{DashboardState, Quality, RepoStatus};
pub use crate::http_api::{NoBody, error};

/// The OpenAPI 3.1 document of the control API.
pub const OPENAPI_JSON: &str = include_str!("assets/openapi.json");
/// Where the document is served.
pub const OPENAPI_PATH: &str = "/api/openapi.json";

pub fn routes() -> Router<Arc<DashboardState>> {
    Router::new()
        .route("/api/control/status", get(status))
        .route("/api/control/optimization/pause", post(pause))
        .route("/api/control/optimization/enable", post(enable))
        .route("/api/control/quality", post(quality))
        .route("/api/control/repos/reindex", post(reindex))
        .route("/api/control/learning", get(super::learning::get_learning))
        .route("/api/control/learning/reset", post(super::learning::reset))
        .route(
            "/api/control/learning/update",
            post(super::learning::update),
        )
        .route(
            "/api/control/learning/autotune",
            post(super::learning::start_autotune),
        )
        .route("/api/control/log", get(log))
        .route("/api/control/stop", post(stop))
        .route(OPENAPI_PATH, get(openapi))
        .layer(axum::middleware::map_response(json_rejections))
}

/// axum's own rejections (a query string or body that does not parse, a body over the limit)
/// answer in plain text; the API answers in its error shape, with the same status and words.
async fn json_rejections(response: Response) -> Response {
    let status = response.status();
    let plain = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/plain"));
    if !status.is_client_error() || !plain {
        return response;
    }
    let kind = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "request_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        _ => "invalid_request_error",
    };
    // Rejection texts are one line; a limit keeps a surprise from being buffered whole.
    let message = match axum::body::to_bytes(response.into_body(), 64 * 1024).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_string(),
        Err(_) => status.to_string(),
    };
    error(status, kind, message)
}

pub async fn not_found(request: Request) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "not_found_error",
        format!(
            "no route for {} {}; the pages are /, /controls and /runs, the API is described at {OPENAPI_PATH}",
            request.method(),
            request.uri().path()
        ),
    )
}

/// A known path asked with the wrong method: the API's error shape (axum's default is an
/// empty 405). Reads are GET, everything that changes something is POST.
pub async fn method_not_allowed(request: Request) -> Response {
    let path = request.uri().path();
    let reads = [
        "/api/control/status",
        "/api/control/learning",
        "/api/control/log",
        OPENAPI_PATH,
    ];
    let allowed = if reads.contains(&path) || !path.starts_with("/api/") {
        "GET"
    } else {
        "POST"
    };
    let mut response = error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!(
            "{} is not served on {path}; use {allowed}",
            request.method()
        ),
    );
    response.headers_mut().insert(
        axum::http::header::ALLOW,
        axum::http::HeaderValue::from_static(allowed),
    );
    response
}

/// `GET /api/control/status`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Status {
    pub service: String,
    pub version: String,
    pub role: super::Role,
    pub pid: u32,
    pub started_at: String,
    pub uptime_seconds: u64,
    /// `enabled` or `paused` with a proxy in the process, `unavailable` without one.
    pub optimization: String,
    pub quality: Quality,
    /// The proxy's optimisation budget in force (null without a proxy).
    pub budget: Option<usize>,
    /// The proxy's counters and witness settings (null without a proxy).
    pub proxy: Option<Value>,
    pub tasks: std::collections::BTreeMap<String, super::TaskStatus>,
    pub repos: Vec<RepoStatus>,
    pub urls: std::collections::BTreeMap<String, String>,
    pub stop_requested: bool,
}

pub fn status_of(state: &DashboardState) -> Status {
    let proxy = state.proxy();
    Status {
        service: "svc".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        role: state.settings.role,
        pid: std::process::id(),
        started_at: state.started_at().to_string(),
        uptime_seconds: state.uptime_seconds(),
        optimization: match proxy {
            Some(proxy) if proxy.paused() => "paused",
            Some(_) => "enabled",
            None => "unavailable",
        }
        .into(),
        quality: state.quality(),
        budget: proxy.map(|p| p.budget()),
        proxy: proxy.map(|p| {
            json!({
                "configured_budget": p.settings.budget,
                "counters": p.counters.snapshot(),
                "witness": p.settings.witness.as_ref().map(|w| json!({
                    "mode": w.mode, "profile": w.profile, "embed": w.embed, "nli": w.nli.is_some(),
                })),
            })
        }),
        tasks: state.tasks(),
        repos: state.repos(),
        urls: state.settings.urls.clone(),
        stop_requested: state.stop_requested(),
    }
}

async fn status(State(state): State<Arc<DashboardState>>) -> Response {
    Json(status_of(&state)).into_response()
}

fn no_proxy() -> Response {
    error(
        StatusCode::CONFLICT,
        "no_proxy",
        "no proxy runs in this process, so there is no optimisation to switch; run `svc daemon` (without --no-proxy) and use its dashboard".into(),
    )
}

async fn pause(State(state): State<Arc<DashboardState>>, _: NoBody) -> Response {
    let Some(proxy) = state.proxy() else {
        return no_proxy();
    };
    proxy.set_paused(true);
    state.log("control", "optimisation paused");
    Json(status_of(&state)).into_response()
}

async fn enable(State(state): State<Arc<DashboardState>>, _: NoBody) -> Response {
    let Some(proxy) = state.proxy() else {
        return no_proxy();
    };
    proxy.set_paused(false);
    state.log("control", "optimisation enabled");
    Json(status_of(&state)).into_response()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct QualityBody {
    mode: Quality,
}

async fn quality(State(state): State<Arc<DashboardState>>, body: axum::body::Bytes) -> Response {
    let parsed: QualityBody = match serde_json::from_slice(&body) {
        Ok(parsed) => parsed,
        Err(problem) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                format!(
                    "the body must be {{\"mode\": \"fast\" | \"balanced\" | \"max\"}}: {problem}"
                ),
            );
        }
    };
    state.set_quality(parsed.mode);
    Json(status_of(&state)).into_response()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReindexBody {
    path: Option<PathBuf>,
}

async fn reindex(State(state): State<Arc<DashboardState>>, body: axum::body::Bytes) -> Response {
    let wanted = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        match serde_json::from_slice::<ReindexBody>(&body) {
            Ok(parsed) => parsed.path,
            Err(problem) => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    format!(
                        "the body must be empty (every repository) or {{\"path\": \"<directory>\"}}: {problem}"
                    ),
                );
            }
        }
    };
    let paths: Vec<PathBuf> = match wanted {
        Some(path) if let Err(problem) = crate::context::index::check_root(&path) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                problem.to_string(),
            );
        }
        Some(path) => vec![path],
        None => state.repos().into_iter().map(|r| r.path).collect(),
    };
    if paths.is_empty() {
        return error(
            StatusCode::CONFLICT,
            "no_repository",
            "no repository is configured; send {\"path\": \"<directory>\"} to index one".into(),
        );
    }
    let worker = state.clone();
    let done = tokio::task::spawn_blocking(move || {
        paths
            .iter()
            .map(|path| worker.reindex(path))
            .collect::<Vec<_>>()
    })
    .await;
    match done {
        Ok(repos) => Json(json!({"reindexed": repos})).into_response(),
        Err(join) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "index_error",
            join.to_string(),
        ),
    }
}

#[derive(Debug, Deserialize)]
struct LogQuery {
    limit: Option<String>,
}

async fn log(State(state): State<Arc<DashboardState>>, Query(query): Query<LogQuery>) -> Response {
    let limit = match query.limit.as_deref().map(str::parse::<usize>) {
        None => 100,
        Some(Ok(limit)) if limit <= super::LOG_LINES => limit,
        Some(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                format!("limit must be an integer from 0 to {}", super::LOG_LINES),
            );
        }
    };
    Json(json!({"lines": state.log_tail(limit)})).into_response()
}

async fn stop(State(state): State<Arc<DashboardState>>, _: NoBody) -> Response {
    state.log("control", "stop requested");
    state.request_stop();
    Json(json!({"stopping": true})).into_response()
}

async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI_JSON).into_response()
}
