//! The proxy's own routes: the witness sidecar (SPEC §4.2) and the optimisation status and
//! pause switch. Errors are `{"error": {"type", "message"}}` with a 4xx/5xx status.
//!
//! | Method | Path | Returns |
//! |---|---|---|
//! | GET | `/witness/{id}` | the full certificate |
//! | GET | `/witness?limit=N` | `{"certificates": [listing, …]}`, newest first (N ≤ 1000, default 20) |
//! | POST | `/witness/{id}/feedback` | `{"acknowledged": true, "feedback": {…}}` for `{"verdict": …}` |
//! | GET | `/svc/status` | `{"optimization": "enabled"\|"paused", "budget", "counters"}` |
//! | POST | `/svc/optimization/pause`, `/svc/optimization/enable` | the new status |
//!
//! Like the proof sidecar, these answer only same-origin localhost callers
//! ([`super::local_only`]): certificates hold prompt evidence, and a web page must not be able
//! to pause optimisation or forge feedback.

use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use super::local_only::{self, Peer};
use super::server::ProxyState;
use crate::http_api::{NoBody, error};
use crate::witness::store::{StoreError, Verdict};

/// Default and largest `limit` of `GET /witness`.
pub const DEFAULT_LIST_LIMIT: usize = 20;
pub const MAX_LIST_LIMIT: usize = 1000;

/// Largest body of the sidecar's POST routes. The proxy's own limit (`--max-body-bytes`, for
/// prompts) is off here: one feedback request with a 400 MB note took 2.3 GB and was written
/// to the feedback file whole.
pub const MAX_SIDECAR_BODY_BYTES: usize = 64 * 1024;

/// Feedback is a read-modify-write of one file per certificate: one writer at a time.
static FEEDBACK: Mutex<()> = Mutex::new(());

pub fn routes() -> Router<Arc<ProxyState>> {
    Router::new()
        .route("/witness", get(list))
        .route("/witness/{id}", get(show))
        .route("/witness/{id}/feedback", post(feedback))
        .route("/svc/status", get(status))
        .route("/svc/optimization/pause", post(pause))
        .route("/svc/optimization/enable", post(enable))
        .route_layer(axum::middleware::from_fn(local_callers_only))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_SIDECAR_BODY_BYTES))
}

/// Refuses callers that are not same-origin localhost (403, with the reason).
async fn local_callers_only(request: axum::extract::Request, next: Next) -> Response {
    let peer = request
        .extensions()
        .get::<axum::extract::ConnectInfo<Peer>>();
    match local_only::check(peer.map(|info| &info.0), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(refusal) => error(
            StatusCode::FORBIDDEN,
            "permission_error",
            refusal.to_string(),
        ),
    }
}

fn store_error(problem: StoreError) -> Response {
    match problem {
        StoreError::BadId { .. }
        | StoreError::NoSuchClaim { .. }
        | StoreError::VerdictDoesNotFit { .. } => error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            problem.to_string(),
        ),
        StoreError::NotFound { id, .. } => error(
            StatusCode::NOT_FOUND,
            "not_found_error",
            format!("no certificate {id}; GET /witness lists the recorded ones"),
        ),
        other => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "store_error",
            other.to_string(),
        ),
    }
}

#[derive(Debug, Deserialize)]
struct ListQuery {
    limit: Option<String>,
}

async fn list(State(state): State<Arc<ProxyState>>, Query(query): Query<ListQuery>) -> Response {
    let limit = match query.limit.as_deref().map(str::parse::<usize>) {
        None => DEFAULT_LIST_LIMIT,
        Some(Ok(limit)) if limit <= MAX_LIST_LIMIT => limit,
        Some(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                format!("limit must be an integer from 0 to {MAX_LIST_LIMIT}"),
            );
        }
    };
    let store = state.witness_store.clone();
    match tokio::task::spawn_blocking(move || store.list(limit)).await {
        Ok(Ok(listings)) if listings.skipped.is_empty() => {
            Json(json!({"certificates": listings.items})).into_response()
        }
        // A damaged certificate file is named, not allowed to hide the others.
        Ok(Ok(listings)) => {
            Json(json!({"certificates": listings.items, "skipped": listings.skipped}))
                .into_response()
        }
        Ok(Err(problem)) => store_error(problem),
        Err(join) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "store_error",
            join.to_string(),
        ),
    }
}

async fn show(State(state): State<Arc<ProxyState>>, Path(id): Path<String>) -> Response {
    let store = state.witness_store.clone();
    match tokio::task::spawn_blocking(move || store.get(&id)).await {
        Ok(Ok(certificate)) => Json(certificate).into_response(),
        Ok(Err(problem)) => store_error(problem),
        Err(join) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "store_error",
            join.to_string(),
        ),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FeedbackBody {
    verdict: Verdict,
    #[serde(default)]
    claim_index: Option<usize>,
    #[serde(default)]
    note: Option<String>,
}

async fn feedback(
    State(state): State<Arc<ProxyState>>,
    Path(id): Path<String>,
    body: Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            return error(
                rejection.status(),
                "request_too_large",
                format!(
                    "a feedback body is at most {} KiB: {rejection}",
                    MAX_SIDECAR_BODY_BYTES / 1024
                ),
            );
        }
    };
    let parsed: FeedbackBody = match serde_json::from_slice(&body) {
        Ok(parsed) => parsed,
        Err(problem) => {
            let verdicts: Vec<&str> = Verdict::ALL.iter().map(|v| v.as_str()).collect();
            return error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                format!(
                    "feedback must be {{\"verdict\": one of {}, \"claim_index\"?: integer, \"note\"?: string}}: {problem}",
                    verdicts.join(", ")
                ),
            );
        }
    };
    let store = state.witness_store.clone();
    let saved = tokio::task::spawn_blocking(move || {
        // A poisoned lock only means another writer panicked; the file write is atomic.
        let _guard = FEEDBACK.lock().unwrap_or_else(|poison| poison.into_inner());
        store.add_feedback(&id, parsed.verdict, parsed.claim_index, parsed.note)
    })
    .await;
    match saved {
        Ok(Ok(entry)) => Json(json!({"acknowledged": true, "feedback": entry})).into_response(),
        Ok(Err(problem)) => store_error(problem),
        Err(join) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "store_error",
            join.to_string(),
        ),
    }
}

fn status_body(state: &ProxyState) -> Value {
    json!({
        "optimization": if state.paused() { "paused" } else { "enabled" },
        "budget": state.budget(),
        "witness": state.settings.witness.as_ref().map(|w| json!({
            "mode": w.mode, "profile": w.profile, "embed": w.embed, "nli": w.nli.is_some(),
        })),
        "counters": state.counters.snapshot(),
    })
}

async fn status(State(state): State<Arc<ProxyState>>) -> Response {
    Json(status_body(&state)).into_response()
}

async fn pause(State(state): State<Arc<ProxyState>>, _: NoBody) -> Response {
    state.set_paused(true);
    Json(status_body(&state)).into_response()
}

async fn enable(State(state): State<Arc<ProxyState>>, _: NoBody) -> Response {
    state.set_paused(false);
    Json(status_body(&state)).into_response()
}
