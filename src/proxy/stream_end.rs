//! How a streamed answer ended: with its provider's end marker, with an error event, or cut
//! off without either. Only a complete stream is a whole answer: one that ended in an error
//! (an overloaded model mid-answer) or was cut off carries part of one, which the witness must
//! not certify as the model's answer, and routing must not count as the model's success.

use serde_json::Value;

use super::provider::Route;

/// How a stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StreamEnd {
    /// The provider's end marker arrived, and no error event.
    Complete,
    /// An error event arrived (its message).
    Error(String),
    /// The stream stopped without an end marker.
    Cut,
}

impl StreamEnd {
    pub fn is_complete(&self) -> bool {
        *self == StreamEnd::Complete
    }

    /// Why the answer is not whole, in words; `None` when it is.
    pub fn problem(&self) -> Option<String> {
        match self {
            StreamEnd::Complete => None,
            StreamEnd::Error(message) => {
                Some(format!("the stream ended in an error event ({message})"))
            }
            StreamEnd::Cut => Some("the stream ended without its end marker".to_string()),
        }
    }
}

/// How the stream whose `data:` payloads are `events` ended; `done_marker` says whether a
/// `data: [DONE]` line came (OpenAI Chat's end marker, not JSON).
pub fn of(route: Route, events: &[Value], done_marker: bool) -> StreamEnd {
    if let Some(message) = events.iter().find_map(error_message) {
        return StreamEnd::Error(message);
    }
    let type_is = |event: &Value, wanted: &[&str]| {
        event
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|kind| wanted.contains(&kind))
    };
    let complete = match route {
        Route::AnthropicMessages => events.iter().any(|e| type_is(e, &["message_stop"])),
        // Servers of the OpenAI shape that omit `[DONE]` still close each choice with a reason.
        Route::OpenaiChat => {
            done_marker
                || events
                    .iter()
                    .any(|e| has_reason(e, "choices", "finish_reason"))
        }
        // `incomplete` is a whole answer the model stopped early (a token limit), as a
        // `finish_reason` of `length` is.
        Route::OpenaiResponses => events
            .iter()
            .any(|e| type_is(e, &["response.completed", "response.incomplete"])),
        Route::GeminiGenerate => events
            .iter()
            .any(|e| has_reason(e, "candidates", "finishReason")),
        Route::Passthrough(_) => true,
    };
    if complete {
        StreamEnd::Complete
    } else {
        StreamEnd::Cut
    }
}

/// How a stream held in `body` ended (its payloads and `[DONE]` read from it).
pub fn of_body(route: Route, body: &[u8]) -> StreamEnd {
    of(
        route,
        &super::check::stream_events(body),
        has_done_marker(body),
    )
}

/// Reads a body whole: what arrived, and the error that cut it, if one did. A body may break
/// off after it was complete (an upstream that closes without the chunked terminator after
/// its end marker): the caller decides whether what came is whole.
pub async fn read_all(response: reqwest::Response) -> (Vec<u8>, Option<reqwest::Error>) {
    use futures_util::StreamExt;
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        match chunk {
            Ok(bytes) => body.extend_from_slice(&bytes),
            Err(error) => return (body, Some(error)),
        }
    }
    (body, None)
}

/// Whether a `data: [DONE]` event is in an event-stream body.
pub fn has_done_marker(body: &[u8]) -> bool {
    String::from_utf8_lossy(body).lines().any(|line| {
        line.strip_prefix("data:")
            .is_some_and(|rest| rest.trim() == "[DONE]")
    })
}

fn has_reason(event: &Value, list: &str, field: &str) -> bool {
    event
        .get(list)
        .and_then(Value::as_array)
        .is_some_and(|items| {
            items
                .iter()
                .any(|item| item.get(field).is_some_and(|reason| !reason.is_null()))
        })
}

/// The message of an error event: `{"error": {...}}` (OpenAI Chat, Gemini), `{"type":
/// "error", …}` (Anthropic, Responses) or `response.failed` (Responses).
fn error_message(event: &Value) -> Option<String> {
    let kind = event.get("type").and_then(Value::as_str);
    let error = match kind {
        Some("response.failed") => event.pointer("/response/error").unwrap_or(&Value::Null),
        Some("error") => event.get("error").unwrap_or(event),
        _ => event.get("error").filter(|error| !error.is_null())?,
    };
    let text = |key: &str| error.get(key).and_then(Value::as_str).map(str::to_string);
    Some(
        text("message")
            .or_else(|| text("type"))
            .or_else(|| text("code"))
            .or_else(|| error.as_str().map(str::to_string))
            .unwrap_or_else(|| "no message".to_string()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_provider_ends_with_its_marker_or_is_cut() {
        let anthropic = [
            json!({"type": "content_block_delta"}),
            json!({"type": "message_stop"}),
        ];
        assert_eq!(
            of(Route::AnthropicMessages, &anthropic, false),
            StreamEnd::Complete
        );
        assert_eq!(
            of(Route::AnthropicMessages, &anthropic[..1], false),
            StreamEnd::Cut
        );
        let chat = [json!({"choices": [{"delta": {"content": "a"}, "finish_reason": null}]})];
        assert_eq!(of(Route::OpenaiChat, &chat, false), StreamEnd::Cut);
        assert_eq!(of(Route::OpenaiChat, &chat, true), StreamEnd::Complete);
        let stopped = [json!({"choices": [{"delta": {}, "finish_reason": "stop"}]})];
        assert_eq!(of(Route::OpenaiChat, &stopped, false), StreamEnd::Complete);
        let responses = [json!({"type": "response.incomplete"})];
        assert_eq!(
            of(Route::OpenaiResponses, &responses, false),
            StreamEnd::Complete
        );
        let gemini = [json!({"candidates": [{"content": {"parts": [{"text": "a"}]}}]})];
        assert_eq!(of(Route::GeminiGenerate, &gemini, false), StreamEnd::Cut);
    }

    #[test]
    fn error_events_of_each_shape_are_named() {
        let anthropic = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        assert_eq!(
            of(
                Route::AnthropicMessages,
                &[anthropic, json!({"type": "message_stop"})],
                false
            ),
            StreamEnd::Error("Overloaded".into())
        );
        let chat = json!({"error": {"message": "The server had an error", "type": "server_error"}});
        assert_eq!(
            of(Route::OpenaiChat, &[chat], true),
            StreamEnd::Error("The server had an error".into())
        );
        let failed = json!({"type": "response.failed", "response": {"error": {"code": "server_error", "message": "boom"}}});
        assert_eq!(
            of(Route::OpenaiResponses, &[failed], false),
            StreamEnd::Error("boom".into())
        );
        let gemini = json!({"error": {"code": 503, "status": "UNAVAILABLE"}});
        assert_eq!(
            of(Route::GeminiGenerate, &[gemini], false),
            StreamEnd::Error("no message".into())
        );
        assert!(has_done_marker(b"data: {}\n\ndata: [DONE]\n\n"));
        assert!(!has_done_marker(b"data: {\"x\": \"[DONE]\"}\n\n"));
    }
}
