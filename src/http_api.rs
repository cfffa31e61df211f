//! What svc's own HTTP routes share (the dashboard's control API, the proxy's sidecar): the
//! JSON error shape, and the body of a POST route that takes none.

use axum::Json;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The body of a route that takes none (SPEC §4.3): empty, or `{}` as JSON clients send by
/// habit. Anything else is refused, so a client that believes it sent options learns it did not.
pub struct NoBody;

impl<S: Send + Sync> FromRequest<S> for NoBody {
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let route = request.uri().path().to_string();
        let body = axum::body::Bytes::from_request(request, state)
            .await
            .map_err(IntoResponse::into_response)?;
        let text = std::str::from_utf8(&body).unwrap_or("?");
        let empty = text.trim().is_empty()
            || serde_json::from_str::<Value>(text)
                .is_ok_and(|v| v.as_object().is_some_and(|o| o.is_empty()));
        if empty {
            return Ok(NoBody);
        }
        Err(error(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            format!(
                "POST {route} takes no body (send none, or {{}}); this one has {} byte{}",
                body.len(),
                if body.len() == 1 { "" } else { "s" }
            ),
        ))
    }
}

/// An error in the API's shape.
pub fn error(status: StatusCode, kind: &str, message: String) -> Response {
    (
        status,
        Json(json!({"error": {"type": kind, "message": message}})),
    )
        .into_response()
}
