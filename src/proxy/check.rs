//! The witness in the proxy: check a response's answer against the request's context, record
//! the certificate, and (strict / annotate, plain text only) rewrite the answer in place.
//!
//! Structured output (tool calls, JSON mode) is audited only, so it stays byte-valid; an answer
//! spread over several text parts is audited only too (which part a removed claim came from is
//! not knowable). The certificate goes to the store and, with `--witness-embed`, into the body
//! under [`EMBED_KEY`].

use axum::http::{HeaderMap, HeaderValue};
use serde_json::Value;

use super::provider::{Answer, Route};
use super::stream_end::StreamEnd;
use super::{logprobs, spans};
use crate::witness::nli::NliSettings;
use crate::witness::store::Store;
use crate::witness::{self, Certificate, Mode, Profile, WitnessInput};

/// Top-level key of the certificate embedded in a JSON response body (`--witness-embed`).
pub const EMBED_KEY: &str = "svc_witness";

/// Response headers.
pub const HEADER_ID: &str = "x-svc-witness-id";
pub const HEADER_STATUS: &str = "x-svc-witness-status";
pub const HEADER_MODE: &str = "x-svc-witness-mode";
pub const HEADER_FLAGGED: &str = "x-svc-witness-flagged";
pub const HEADER_REWRITTEN: &str = "x-svc-witness-rewritten";
/// How a stream the witness read whole ended: `complete`, `error` (an error event) or `cut`
/// (no end marker); only a complete stream is a whole answer.
pub const HEADER_STREAM_END: &str = "x-svc-witness-stream-end";

/// How the proxy runs the witness.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WitnessSettings {
    pub mode: Mode,
    pub profile: Profile,
    /// Put the full certificate in the JSON body under [`EMBED_KEY`].
    pub embed: bool,
    /// Ask an NLI judge about uncertain claims (falls back to the deterministic verdicts).
    pub nli: Option<NliSettings>,
}

/// What the request gives the witness.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    /// Every text part of the request as received, in order.
    pub context: String,
    /// The latest user-written text, when there is one.
    pub question: Option<String>,
    /// The client asked for JSON output.
    pub json_mode: bool,
}

/// The result of checking one answer.
#[derive(Debug, Clone)]
pub struct Checked {
    pub certificate: Certificate,
    /// The mode applied (audit for structured output).
    pub mode: Mode,
    /// The body to return when it differs from the upstream's (rewritten or embedded).
    pub body: Option<String>,
    pub rewritten: bool,
}

impl Checked {
    /// The certificate headers.
    pub fn headers(&self, headers: &mut HeaderMap) {
        certificate_headers(headers, &self.certificate, self.mode, self.rewritten);
    }
}

/// Sets the `X-Svc-Witness-*` headers of a checked answer.
pub fn certificate_headers(
    headers: &mut HeaderMap,
    certificate: &Certificate,
    mode: Mode,
    rewritten: bool,
) {
    let mut set = |name: &'static str, value: String| {
        if let Ok(value) = HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    };
    set(HEADER_ID, certificate.id.clone());
    set(HEADER_STATUS, status_str(certificate));
    set(HEADER_MODE, mode.as_str().to_string());
    set(HEADER_FLAGGED, certificate.flagged_claims.len().to_string());
    set(HEADER_REWRITTEN, rewritten.to_string());
}

/// Sets [`HEADER_STREAM_END`].
pub fn stream_end_header(headers: &mut HeaderMap, end: &StreamEnd) {
    let value = match end {
        StreamEnd::Complete => "complete",
        StreamEnd::Error(_) => "error",
        StreamEnd::Cut => "cut",
    };
    headers.insert(HEADER_STREAM_END, HeaderValue::from_static(value));
}

/// A certificate as the request's log line says it: `flagged (2 flagged)`.
pub fn log_verdict(certificate: &Certificate) -> String {
    format!(
        "{} ({} flagged)",
        status_str(certificate),
        certificate.flagged_claims.len()
    )
}

/// The certificate's status as its wire value.
pub fn status_str(certificate: &Certificate) -> String {
    serde_json::to_value(certificate.status)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Runs the witness on `answer` and saves the certificate. The mode is audit when the answer is
/// structured or not `rewritable`; returns the certificate, the mode applied and the output.
pub async fn run(
    settings: &WitnessSettings,
    store: &Store,
    evidence: &Evidence,
    answer: &Answer,
    rewritable: bool,
) -> Result<(Certificate, Mode, String), String> {
    let structured = answer.structured || evidence.json_mode;
    // Without the request's text (a request the proxy could not read) every claim would look
    // unsupported: record the verdicts, never cut the answer on that basis.
    let mode = if structured || !rewritable || evidence.context.is_empty() {
        Mode::Audit
    } else {
        settings.mode
    };
    let input = WitnessInput {
        context: &evidence.context,
        context_source: "request",
        output: &answer.text,
        question: evidence.question.as_deref(),
        mode,
        profile: settings.profile,
    };
    let witnessed = match &settings.nli {
        Some(nli) => witness::witness_with_nli(&input, nli).await,
        None => {
            let (context, output, question, profile) = (
                evidence.context.clone(),
                answer.text.clone(),
                evidence.question.clone(),
                settings.profile,
            );
            // Verification is CPU work; keep it off the async workers.
            tokio::task::spawn_blocking(move || {
                witness::witness(&WitnessInput {
                    context: &context,
                    context_source: "request",
                    output: &output,
                    question: question.as_deref(),
                    mode,
                    profile,
                })
            })
            .await
            .map_err(|error| format!("witness task failed: {error}"))?
        }
    };
    let store = store.clone();
    let certificate = witnessed.certificate.clone();
    tokio::task::spawn_blocking(move || store.save(&certificate))
        .await
        .map_err(|error| format!("witness store task failed: {error}"))?
        .map_err(|error| format!("cannot save the certificate: {error}"))?;
    // An answer whose text is JSON is never rewritten (it must stay byte-valid), whatever the
    // mode: the header reports the mode applied, which was audit.
    let applied = if witnessed
        .certificate
        .suppression
        .untouched_because
        .is_some()
    {
        Mode::Audit
    } else {
        mode
    };
    Ok((witnessed.certificate, applied, witnessed.output))
}

/// Checks a non-streaming JSON response body.
pub async fn check_json(
    settings: &WitnessSettings,
    store: &Store,
    route: Route,
    evidence: &Evidence,
    body: &str,
) -> Result<Checked, String> {
    let response: Value =
        serde_json::from_str(body).map_err(|error| format!("response is not JSON: {error}"))?;
    let answer = route.answer(&response);
    let rewritable = answer.single_part.is_some();
    let (certificate, mode, output) = run(settings, store, evidence, &answer, rewritable).await?;
    let mut new_body = None;
    let mut rewritten = false;
    if output != answer.text
        && let Some(path) = &answer.single_part
    {
        let spans = spans::string_spans(body).map_err(|error| error.to_string())?;
        if let Some(range) = spans.get(path) {
            let spliced = spans::splice(body, vec![(range.clone(), output)]);
            new_body = Some(logprobs::clear_in_text(&spliced).map_err(|error| error.to_string())?);
            rewritten = true;
        }
    }
    if settings.embed {
        let certificate_json = serde_json::to_value(&certificate).map_err(|e| e.to_string())?;
        let base = new_body.as_deref().unwrap_or(body);
        new_body = Some(
            spans::append_member(base, EMBED_KEY, &certificate_json)
                .ok_or("response body is not a JSON object")?,
        );
    }
    Ok(Checked {
        certificate,
        mode,
        body: new_body,
        rewritten,
    })
}

/// The `data:` payloads of a server-sent-events body (or the items of a streamed JSON array,
/// Gemini's shape without `alt=sse`) that parse as JSON.
pub fn stream_events(body: &[u8]) -> Vec<Value> {
    let text = String::from_utf8_lossy(body);
    let trimmed = text.trim_start();
    if trimmed.starts_with('[')
        && let Ok(Value::Array(items)) = serde_json::from_str::<Value>(trimmed)
    {
        return items;
    }
    let mut events = Vec::new();
    let mut data = String::new();
    for line in text.lines().chain(std::iter::once("")) {
        if let Some(rest) = line.strip_prefix("data:") {
            if !data.is_empty() {
                data.push('\n');
            }
            data.push_str(rest.strip_prefix(' ').unwrap_or(rest));
        } else if line.is_empty() && !data.is_empty() {
            if let Ok(value) = serde_json::from_str(&data) {
                events.push(value);
            }
            data.clear();
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_data_lines_become_events() {
        let body = b"event: a\ndata: {\"x\":1}\n\ndata: [DONE]\n\ndata: {\"y\":\ndata: 2}\n\n";
        let events = stream_events(body);
        assert_eq!(
            events,
            vec![serde_json::json!({"x": 1}), serde_json::json!({"y": 2})]
        );
        assert_eq!(stream_events(b"[{\"a\":1},{\"b\":2}]").len(), 2);
    }
}
