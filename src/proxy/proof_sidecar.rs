//! The proof sidecar (SPEC §4.4): the durable prepare/advance/inspect protocol of `svc proof`
//! over HTTP, for same-origin localhost callers only (see [`super::local_only`]).
//!
//! | Method | Path | Sent | Returned |
//! |---|---|---|---|
//! | POST | `/proof/prepare` | `{"documents": [{"name", "text"}], "query", "budget", "max_rounds"?, "recovery_token_budget"?, "max_chunks_per_round"?, "mode"?, "profile"?, "idempotency_key"?}` | the prepared request (as `svc proof prepare` prints it) |
//! | POST | `/proof/advance` | `{"session_id", "output", "idempotency_key"?}` | the next request or the result (as `svc proof advance`) |
//! | GET | `/proof/inspect?session_id=pgs_…` | none | the session view (as `svc proof inspect --format json`) |
//!
//! The idempotency key may also come as an `Idempotency-Key` header. Sessions, commits and
//! keys live under the proxy's state directory, so the CLI sees the same sessions. Errors are
//! `{"error": {"type", "message"}}` with 400, 403, 404, 409, 413, 422 or 500.

use std::sync::Arc;

use axum::Json;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::json;

use super::local_only::{self, Peer};
use super::server::ProxyState;
use crate::proof::session::SessionError;
use crate::proof::{Bounds, ContextRiskMode, ProofError, Protocol, VerifiedEfficiencyLayer};
use crate::witness::Profile;

/// The header that may carry the idempotency key.
pub const HEADER_IDEMPOTENCY_KEY: &str = "idempotency-key";

/// Sessions are read-modify-write files: one protocol step at a time in this process, so two
/// concurrent advances of one session cannot both pass the state check.
static STEP: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

pub fn routes() -> Router<Arc<ProxyState>> {
    Router::new()
        .route("/proof/prepare", post(prepare))
        .route("/proof/advance", post(advance))
        .route("/proof/inspect", get(inspect))
}

/// An answer other than success: its status, error type and message.
#[derive(Debug)]
pub struct SidecarError {
    status: StatusCode,
    kind: &'static str,
    message: String,
}

impl IntoResponse for SidecarError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(json!({"error": {"type": self.kind, "message": self.message}})),
        )
            .into_response()
    }
}

fn error(status: StatusCode, kind: &'static str, message: impl Into<String>) -> SidecarError {
    SidecarError {
        status,
        kind,
        message: message.into(),
    }
}

fn joined<T>(
    outcome: Result<Result<T, ProofError>, tokio::task::JoinError>,
) -> Result<T, SidecarError> {
    match outcome {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(problem)) => Err(proof_error(problem)),
        Err(join) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "state_error",
            join.to_string(),
        )),
    }
}

fn proof_error(problem: ProofError) -> SidecarError {
    let (status, kind) = match &problem {
        ProofError::ZeroBound { .. } | ProofError::NoSources | ProofError::Select(_) => {
            (StatusCode::BAD_REQUEST, "invalid_request_error")
        }
        ProofError::Session(SessionError::BadId { .. }) => {
            (StatusCode::BAD_REQUEST, "invalid_request_error")
        }
        ProofError::Session(SessionError::Unknown { .. }) => {
            (StatusCode::NOT_FOUND, "not_found_error")
        }
        ProofError::Session(
            SessionError::IdempotencyConflict { .. } | SessionError::Closed { .. },
        ) => (StatusCode::CONFLICT, "conflict_error"),
        // The draft was taken but the loop failed on it; the session is now failed and the
        // message names the signed failure artifact.
        ProofError::Verification(_) | ProofError::Recovery(_) | ProofError::Model(_) => {
            (StatusCode::UNPROCESSABLE_ENTITY, "proof_failure")
        }
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "state_error"),
    };
    error(status, kind, problem.to_string())
}

/// The protocol's response bytes, unchanged (a replay returns exactly the stored bytes).
fn protocol_response(text: String) -> Response {
    let mut response = Response::new(axum::body::Body::from(text));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

/// Refuses callers that are not same-origin localhost, and reads a JSON body within the
/// proxy's body limit.
async fn admit(state: &ProxyState, request: Request) -> Result<(HeaderMap, Bytes), SidecarError> {
    let peer = request
        .extensions()
        .get::<axum::extract::ConnectInfo<Peer>>();
    if let Err(refusal) = local_only::check(peer.map(|info| &info.0), request.headers()) {
        return Err(error(
            StatusCode::FORBIDDEN,
            "permission_error",
            refusal.to_string(),
        ));
    }
    let (parts, body) = request.into_parts();
    let limit = state.settings.max_body_bytes;
    let bytes = axum::body::to_bytes(body, limit).await.map_err(|problem| {
        error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request_too_large",
            format!("cannot read the body within the proxy's limit of {limit} bytes (--max-body-bytes): {problem}"),
        )
    })?;
    Ok((parts.headers, bytes))
}

fn parse<T: serde::de::DeserializeOwned>(bytes: &[u8], shape: &str) -> Result<T, SidecarError> {
    serde_json::from_slice(bytes).map_err(|problem| {
        error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            format!("the body must be {shape}: {problem}"),
        )
    })
}

/// The idempotency key from the body or the `Idempotency-Key` header; both must agree.
fn idempotency_key(
    headers: &HeaderMap,
    in_body: Option<String>,
) -> Result<Option<String>, SidecarError> {
    let in_header = match headers.get(HEADER_IDEMPOTENCY_KEY) {
        None => None,
        Some(value) => Some(value.to_str().map(str::to_string).map_err(|_| {
            error(
                StatusCode::BAD_REQUEST,
                "invalid_request_error",
                "the Idempotency-Key header is not visible ASCII",
            )
        })?),
    };
    match (in_header, in_body) {
        (Some(a), Some(b)) if a != b => Err(error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            format!(
                "the Idempotency-Key header {a:?} and the body's idempotency_key {b:?} differ; send one"
            ),
        )),
        (a, b) => Ok(a.or(b).filter(|key| !key.is_empty())),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    name: String,
    text: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PrepareBody {
    documents: Vec<Document>,
    query: String,
    budget: usize,
    #[serde(default)]
    max_rounds: Option<usize>,
    #[serde(default)]
    recovery_token_budget: Option<usize>,
    #[serde(default)]
    max_chunks_per_round: Option<usize>,
    #[serde(default)]
    mode: ContextRiskMode,
    #[serde(default)]
    profile: Profile,
    #[serde(default)]
    idempotency_key: Option<String>,
}

const PREPARE_SHAPE: &str = r#"{"documents": [{"name": string, "text": string}, …], "query": string, "budget": integer, "max_rounds"?, "recovery_token_budget"?, "max_chunks_per_round"?: integer, "mode"?: "audit"|"strict", "profile"?: string, "idempotency_key"?: string}"#;

async fn prepare(
    State(state): State<Arc<ProxyState>>,
    request: Request,
) -> Result<Response, SidecarError> {
    let (headers, bytes) = admit(&state, request).await?;
    let body: PrepareBody = parse(&bytes, PREPARE_SHAPE)?;
    let key = idempotency_key(&headers, body.idempotency_key.clone())?;
    let defaults = Bounds::default();
    let bounds = Bounds {
        max_rounds: body.max_rounds.unwrap_or(defaults.max_rounds),
        recovery_token_budget: body
            .recovery_token_budget
            .unwrap_or(defaults.recovery_token_budget),
        max_chunks_per_round: body
            .max_chunks_per_round
            .unwrap_or(defaults.max_chunks_per_round),
    };
    let sources: Vec<(String, String)> = body
        .documents
        .into_iter()
        .map(|document| (document.name, document.text))
        .collect();
    let layer = VerifiedEfficiencyLayer::new(&state.settings.state_home, body.mode)
        .with_profile(body.profile);
    let _step = STEP.lock().await;
    // Selecting and committing is CPU and file work: off the async workers.
    let outcome = tokio::task::spawn_blocking(move || {
        Protocol::new(layer).prepare(&sources, &body.query, body.budget, bounds, key.as_deref())
    })
    .await;
    Ok(protocol_response(joined(outcome)?))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AdvanceBody {
    session_id: String,
    output: String,
    #[serde(default)]
    idempotency_key: Option<String>,
}

/// The session's own mode, profile and bounds are in its file; the layer only names the state.
fn protocol(state: &ProxyState) -> Protocol {
    Protocol::new(VerifiedEfficiencyLayer::new(
        &state.settings.state_home,
        ContextRiskMode::Audit,
    ))
}

async fn advance(
    State(state): State<Arc<ProxyState>>,
    request: Request,
) -> Result<Response, SidecarError> {
    let (headers, bytes) = admit(&state, request).await?;
    let body: AdvanceBody = parse(
        &bytes,
        r#"{"session_id": "pgs_…", "output": string (the model's draft), "idempotency_key"?: string}"#,
    )?;
    let key = idempotency_key(&headers, body.idempotency_key.clone())?;
    let protocol = protocol(&state);
    let _step = STEP.lock().await;
    let outcome = tokio::task::spawn_blocking(move || {
        protocol.advance(&body.session_id, &body.output, key.as_deref())
    })
    .await;
    Ok(protocol_response(joined(outcome)?))
}

#[derive(Debug, Deserialize)]
struct InspectQuery {
    session_id: Option<String>,
}

async fn inspect(
    State(state): State<Arc<ProxyState>>,
    Query(query): Query<InspectQuery>,
    request: Request,
) -> Result<Response, SidecarError> {
    admit(&state, request).await?;
    let session_id = query.session_id.ok_or_else(|| {
        error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            "name the session: GET /proof/inspect?session_id=pgs_…",
        )
    })?;
    let protocol = protocol(&state);
    let view = joined(tokio::task::spawn_blocking(move || protocol.inspect(&session_id)).await)?;
    Ok(Json(view).into_response())
}
