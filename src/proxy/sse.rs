//! Server-sent events: split a buffered stream into events and re-emit it with the answer text
//! replaced (witness strict / annotate on streamed answers).
//!
//! The rewritten stream keeps every event, in order, with its `event:` line and framing; only
//! the text-carrying payloads change: the first one carries the whole verified text and later
//! ones carry empty text, so a client that concatenates deltas gets exactly the verified answer
//! (every event's log-probabilities are emptied: they would still spell the removed words)
//! and every provider-specific event (usage, stop reasons, ids) is still there. Events the proxy
//! does not touch are emitted byte-identical.

use serde_json::Value;

use super::logprobs;
use super::provider::Route;

/// One event of a stream: its raw lines (without the blank line that ends it).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub lines: Vec<String>,
}

impl Event {
    /// The JSON of its `data:` lines, when they hold JSON.
    pub fn data(&self) -> Option<Value> {
        let data: Vec<&str> = self
            .lines
            .iter()
            .filter_map(|line| line.strip_prefix("data:"))
            .map(|rest| rest.strip_prefix(' ').unwrap_or(rest))
            .collect();
        if data.is_empty() {
            return None;
        }
        serde_json::from_str(&data.join("\n")).ok()
    }
}

/// Splits an SSE body into events (blank-line separated; `\r\n` accepted).
pub fn split(body: &str) -> Vec<Event> {
    let mut events = Vec::new();
    let mut lines = Vec::new();
    for line in body.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            if !lines.is_empty() {
                events.push(Event {
                    lines: std::mem::take(&mut lines),
                });
            }
        } else {
            lines.push(line.to_string());
        }
    }
    if !lines.is_empty() {
        events.push(Event { lines });
    }
    events
}

/// The JSON payloads of a stream, in order.
pub fn payloads(events: &[Event]) -> Vec<Value> {
    events.iter().filter_map(Event::data).collect()
}

/// Re-emits `events` with the answer text replaced by `text`. `None` when the route's stream
/// has no text event to carry it (the caller then returns the original stream).
pub fn rewrite(route: Route, events: &[Event], text: &str) -> Option<String> {
    let mut placed = false;
    let mut out = String::new();
    for event in events {
        let changed = event.data().and_then(|mut payload| {
            let edited = edit(route, &mut payload, text, &mut placed);
            // The original tokens' log-probabilities would still spell the removed words.
            let cleared = logprobs::clear(&mut payload);
            (edited || cleared).then_some(payload)
        });
        match changed {
            Some(payload) => {
                for line in event.lines.iter().filter(|line| !line.starts_with("data:")) {
                    out.push_str(line);
                    out.push('\n');
                }
                out.push_str("data: ");
                // Serialising a Value cannot fail.
                out.push_str(&serde_json::to_string(&payload).unwrap_or_default());
                out.push('\n');
            }
            None => {
                for line in &event.lines {
                    out.push_str(line);
                    out.push('\n');
                }
            }
        }
        out.push('\n');
    }
    placed.then_some(out)
}

/// Puts the text into one payload: the whole text into the first text slot, "" into later ones.
fn edit(route: Route, payload: &mut Value, text: &str, placed: &mut bool) -> bool {
    let mut take = || {
        let value = if *placed { "" } else { text };
        *placed = true;
        Value::String(value.to_string())
    };
    match route {
        Route::AnthropicMessages => {
            if payload.pointer("/delta/type").and_then(Value::as_str) == Some("text_delta")
                && let Some(slot) = payload.pointer_mut("/delta/text")
            {
                *slot = take();
                return true;
            }
            // A block that opens with text holds a text slot too (an empty one stays empty, so
            // clients that read deltas only still get the whole verified text).
            if payload.get("type").and_then(Value::as_str) == Some("content_block_start")
                && payload
                    .pointer("/content_block/type")
                    .and_then(Value::as_str)
                    == Some("text")
                && let Some(slot) = payload.pointer_mut("/content_block/text")
                && slot.as_str().is_some_and(|t| !t.is_empty())
            {
                *slot = take();
                return true;
            }
            false
        }
        Route::OpenaiChat => match payload.pointer_mut("/choices/0/delta/content") {
            Some(slot) if slot.is_string() => {
                *slot = take();
                true
            }
            _ => false,
        },
        Route::OpenaiResponses => {
            match payload.get("type").and_then(Value::as_str) {
                Some("response.output_text.delta") => {
                    if let Some(slot) = payload.get_mut("delta") {
                        *slot = take();
                        return true;
                    }
                    false
                }
                // An `.added` event opens a part the deltas then fill (its text is what came
                // so far, ""): a client adds the deltas to it, so it must stay as sent, or the
                // verified text shows twice (found with the OpenAI SDK's stream snapshot).
                Some(kind) if kind.ends_with(".added") => false,
                // Summaries that repeat the whole text carry the whole verified text.
                Some(_) => replace_output_text(payload, text),
                None => false,
            }
        }
        Route::GeminiGenerate => {
            let Some(parts) = payload
                .pointer_mut("/candidates/0/content/parts")
                .and_then(Value::as_array_mut)
            else {
                return false;
            };
            let mut changed = false;
            for part in parts {
                if part.get("thought").and_then(Value::as_bool) == Some(true) {
                    continue;
                }
                if let Some(slot) = part.get_mut("text") {
                    *slot = take();
                    changed = true;
                }
            }
            changed
        }
        Route::Passthrough(_) => false,
    }
}

/// Sets every `output_text` part's text, and the `text` of an `output_text.done` event.
fn replace_output_text(value: &mut Value, text: &str) -> bool {
    let mut changed = false;
    if value.get("type").and_then(Value::as_str) == Some("response.output_text.done")
        && let Some(slot) = value.get_mut("text")
    {
        *slot = Value::String(text.to_string());
        changed = true;
    }
    match value {
        Value::Object(map) => {
            if map.get("type").and_then(Value::as_str) == Some("output_text")
                && let Some(slot) = map.get_mut("text")
            {
                *slot = Value::String(text.to_string());
                changed = true;
            }
            // The response's convenience copy of its whole text (found by probing: strict left
            // the removed claims there).
            if let Some(slot) = map.get_mut("output_text")
                && slot.is_string()
            {
                *slot = Value::String(text.to_string());
                changed = true;
            }
            for (_, child) in map.iter_mut() {
                changed |= replace_output_text(child, text);
            }
        }
        Value::Array(items) => {
            for item in items {
                changed |= replace_output_text(item, text);
            }
        }
        _ => {}
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_chat_stream_carries_the_new_text_once() {
        let body = "data: {\"choices\":[{\"delta\":{\"content\":\"Hel\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"lo\"}}]}\n\ndata: [DONE]\n\n";
        let events = split(body);
        assert_eq!(events.len(), 3);
        let out = rewrite(Route::OpenaiChat, &events, "Bye").expect("a text event");
        let again = split(&out);
        let answer = Route::OpenaiChat.stream_answer(&payloads(&again));
        assert_eq!(answer.text, "Bye");
        assert!(out.ends_with("data: [DONE]\n\n"), "{out}");
    }

    /// Found by probing with the OpenAI SDK: the rewritten `content_part.added` carried the
    /// whole verified text and the deltas repeated it, so the client showed it twice.
    #[test]
    fn a_responses_stream_opens_its_part_empty_and_carries_the_text_once() {
        let events = [
            r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"message","content":[]}}"#,
            r#"{"type":"response.content_part.added","output_index":0,"content_index":0,"part":{"type":"output_text","text":""}}"#,
            r#"{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"Hel"}"#,
            r#"{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"lo"}"#,
            r#"{"type":"response.output_text.done","output_index":0,"content_index":0,"text":"Hello"}"#,
            r#"{"type":"response.content_part.done","output_index":0,"content_index":0,"part":{"type":"output_text","text":"Hello"}}"#,
        ];
        let body: String = events
            .iter()
            .map(|e| format!("event: x\ndata: {e}\n\n"))
            .collect();
        let out = rewrite(Route::OpenaiResponses, &split(&body), "Bye").expect("a text event");
        // What a client builds: the part as opened, plus every delta.
        let mut shown = String::new();
        for payload in payloads(&split(&out)) {
            match payload["type"].as_str() {
                Some("response.content_part.added") => {
                    shown.push_str(payload["part"]["text"].as_str().unwrap_or_default())
                }
                Some("response.output_text.delta") => {
                    shown.push_str(payload["delta"].as_str().unwrap_or_default())
                }
                Some("response.content_part.done") => {
                    assert_eq!(payload["part"]["text"], "Bye")
                }
                _ => {}
            }
        }
        assert_eq!(shown, "Bye");
    }

    #[test]
    fn anthropic_event_names_survive() {
        let body = "event: content_block_delta\r\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"a\"}}\r\n\r\nevent: message_stop\r\ndata: {\"type\":\"message_stop\"}\r\n\r\n";
        let out = rewrite(Route::AnthropicMessages, &split(body), "b").expect("a text event");
        assert!(
            out.starts_with("event: content_block_delta\ndata: "),
            "{out}"
        );
        assert!(out.contains("\"text\":\"b\""));
        assert!(out.ends_with("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"));
        assert!(
            rewrite(
                Route::AnthropicMessages,
                &split("event: ping\ndata: {}\n\n"),
                "x"
            )
            .is_none()
        );
    }
}
