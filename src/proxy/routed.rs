//! Sending a prompt request where routing decided: to the cheaper model or to the one the
//! client asked for; escalating to the requested model when the routed one fails; shadow
//! trials; the routing headers and events.
//!
//! A routed answer fails when its status is an error, when it does not come, and — when the
//! proxy reads the answer whole before the client gets a byte (the witness checks it first) —
//! when its body breaks off or its stream ends in an error event or without its end marker:
//! nothing has reached the client then, so the requested model can still answer instead.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue, header};
use serde_json::Value;

use super::check::{self, Evidence};
use super::provider::{ErrorKind, ProxyError, Route};
use super::server::ProxyState;
use super::{stream_end, upstream};
use crate::ravs::Entry;
use crate::routing::{self, Plan};
use crate::witness::Mode;

/// A prompt request ready to go upstream.
pub struct Outgoing<'a> {
    pub route: Route,
    pub parts: &'a axum::http::request::Parts,
    pub path_and_query: &'a str,
    pub body: &'a Bytes,
    pub evidence: &'a Evidence,
    /// The client asked for a stream.
    pub stream: bool,
}

/// Sends the request to the model routing chose: the decision is logged first; a routed
/// request that fails (see the module) is sent once more, as received from the optimiser, to
/// the model the client asked for, and the escalation is logged.
pub async fn send(
    state: &Arc<ProxyState>,
    out: &Outgoing<'_>,
    plan: Option<&mut Plan>,
) -> Result<reqwest::Response, ProxyError> {
    let provider = out.route.provider();
    let send = |path: String, body: Bytes| {
        let url = state.settings.upstreams.url(provider, &path);
        async move {
            upstream::send(
                &state.client,
                provider,
                &url,
                out.parts.method.clone(),
                &out.parts.headers,
                body,
            )
            .await
        }
    };
    let Some(plan) = plan else {
        return send(out.path_and_query.to_string(), out.body.clone()).await;
    };
    let text = std::str::from_utf8(out.body).unwrap_or_default();
    let routed = state
        .routing
        .apply(plan, out.route, out.path_and_query, text);
    record(state, plan.decision_entries()).await;
    if let Some((shadow_path, shadow_body)) =
        plan.shadow_request(out.route, out.path_and_query, text)
    {
        shadow_trial(
            state,
            out,
            shadow_path,
            shadow_body,
            plan.clone(),
            out.evidence.clone(),
        );
    }
    let Some((routed_path, routed_body)) = routed else {
        return send(out.path_and_query.to_string(), out.body.clone()).await;
    };
    let answer = send(routed_path, Bytes::from(routed_body)).await;
    let routed_status = match answer {
        Ok(response) if response.status().as_u16() < 400 => {
            if !read_whole(state, out, &response) {
                return Ok(response);
            }
            match settle(out.route, out.stream, response).await {
                Ok(response) => return Ok(response),
                Err(status) => Some(status),
            }
        }
        Ok(response) => Some(response.status().as_u16()),
        // A routed model that did not answer in time is a gateway timeout, not "unreachable"
        // (found by probing).
        Err(error) if error.kind == ErrorKind::GatewayTimeout => Some(504),
        Err(_) => None,
    };
    let original = send(out.path_and_query.to_string(), out.body.clone()).await;
    let original_status = original.as_ref().ok().map(|r| r.status().as_u16());
    let entry = plan.escalate(routed_status, original_status);
    record(state, vec![entry]).await;
    original
}

/// Whether the proxy reads this answer whole before the client gets a byte: the witness is on
/// and checks it first (every non-streamed answer; streams in strict and annotate). An encoded
/// answer is left to the caller, which cannot read it either.
fn read_whole(state: &ProxyState, out: &Outgoing<'_>, response: &reqwest::Response) -> bool {
    let Some(witness) = &state.settings.witness else {
        return false;
    };
    if matches!(out.route, Route::Passthrough(_))
        || !response.status().is_success()
        || response.headers().contains_key(header::CONTENT_ENCODING)
    {
        return false;
    }
    if out.stream || is_event_stream(response.headers()) {
        witness.mode != Mode::Audit
    } else {
        true
    }
}

fn is_event_stream(headers: &reqwest::header::HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// Reads a routed answer whole: the response again, from its bytes, or the status its failure
/// is logged as (504 for a body that stalled, 502 for one that broke off, a stream — event
/// stream, or Gemini's JSON array — that ended in an error event or without its end marker).
async fn settle(
    route: Route,
    stream: bool,
    response: reqwest::Response,
) -> Result<reqwest::Response, u16> {
    let status = response.status();
    let headers = response.headers().clone();
    let streamed = stream || is_event_stream(&headers);
    let (bytes, cut) = stream_end::read_all(response).await;
    let whole = if streamed {
        stream_end::of_body(route, &bytes).is_complete()
    } else {
        cut.is_none()
    };
    if !whole {
        return Err(match cut {
            Some(error) if error.is_timeout() => 504,
            _ => 502,
        });
    }
    let bytes = Bytes::from(bytes);
    let mut rebuilt = axum::http::Response::new(bytes);
    *rebuilt.status_mut() = status;
    *rebuilt.headers_mut() = headers;
    Ok(reqwest::Response::from(rebuilt))
}

/// A shadow trial (`shadow_observations`): the request also goes to the cheaper model in the
/// background; its answer is checked by the witness (the certificate is stored like any other)
/// and counted for the cheaper model only, never delivered. Needs the witness (without it no
/// answer can be labelled); a shadow request that fails upstream, or whose stream does not end
/// whole, is not counted.
fn shadow_trial(
    state: &Arc<ProxyState>,
    out: &Outgoing<'_>,
    path: String,
    body: String,
    plan: Plan,
    evidence: Evidence,
) {
    let Some(settings) = state.settings.witness.clone() else {
        return;
    };
    let state = state.clone();
    let route = out.route;
    let method = out.parts.method.clone();
    let headers = out.parts.headers.clone();
    tokio::spawn(async move {
        let provider = route.provider();
        let url = state.settings.upstreams.url(provider, &path);
        let Ok(response) = upstream::send(
            &state.client,
            provider,
            &url,
            method,
            &headers,
            Bytes::from(body),
        )
        .await
        else {
            return;
        };
        if !response.status().is_success() {
            return;
        }
        let event_stream = is_event_stream(response.headers());
        let Ok(bytes) = response.bytes().await else {
            return;
        };
        let answer = if event_stream {
            let events = check::stream_events(&bytes);
            let end = stream_end::of(route, &events, stream_end::has_done_marker(&bytes));
            if !end.is_complete() {
                return;
            }
            route.stream_answer(&events)
        } else {
            match serde_json::from_slice::<Value>(&bytes) {
                Ok(value) => route.answer(&value),
                Err(_) => return,
            }
        };
        if let Ok((certificate, _, _)) =
            check::run(&settings, &state.witness_store, &evidence, &answer, false).await
        {
            record(&state, vec![plan.shadow_entry(&certificate)]).await;
        }
    });
}

/// Sets `X-Svc-Route` and `X-Svc-Route-Class`.
pub fn set_headers(route_header: &str, class_id: &str, headers: &mut HeaderMap) {
    if let Ok(value) = HeaderValue::from_str(route_header) {
        headers.insert(routing::HEADER_ROUTE, value);
    }
    if let Ok(value) = HeaderValue::from_str(class_id) {
        headers.insert(routing::HEADER_ROUTE_CLASS, value);
    }
}

/// Appends RAVS events.
/// Inline on the async worker: an append to a held file under a held lock is a few system
/// calls, less than the hand-over to the blocking pool and back that it used to cost.
pub async fn record(state: &Arc<ProxyState>, entries: Vec<Entry>) {
    state.routing.record(&entries);
}
