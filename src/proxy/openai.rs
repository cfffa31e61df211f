//! OpenAI Chat Completions (`POST /v1/chat/completions`) and Responses (`POST /v1/responses`):
//! the text parts of a request and the answer of a response.
//!
//! Chat: each message's string `content` or `text` parts; `system` and `developer` messages
//! are kept, `tool` / `function` messages are tool output. Responses: `instructions` (kept), a
//! string `input` (the latest user turn, kept), or `input` items: messages with string content
//! or `input_text` / `output_text` / `text` parts, and `function_call_output` outputs.

use serde_json::Value;

use super::optimize::{Role, Unit, mark_kept};
use super::provider::Answer;
use super::spans::{Path, Seg, key};

fn shape(problem: &str) -> String {
    format!("unrecognised_shape ({problem})")
}

fn role_of(role: Option<&str>, at: &str) -> Result<Role, String> {
    match role {
        Some("system" | "developer") => Ok(Role::System),
        Some("user") => Ok(Role::User),
        Some("assistant") => Ok(Role::Assistant),
        Some("tool" | "function") => Ok(Role::Tool),
        _ => Err(shape(&format!("{at}.role"))),
    }
}

/// Text units of one message `content` (a string or an array of parts with the given types).
fn content_units(
    content: Option<&Value>,
    base: Path,
    role: Role,
    turn: usize,
    text_types: &[&str],
    units: &mut Vec<Unit>,
) -> Result<(), String> {
    match content {
        None | Some(Value::Null) => {}
        Some(Value::String(_)) => units.push(Unit {
            path: base,
            role,
            keep: false,
            turn,
        }),
        Some(Value::Array(parts)) => {
            for (p, part) in parts.iter().enumerate() {
                let kind = part.get("type").and_then(Value::as_str);
                if kind.is_some_and(|kind| text_types.contains(&kind))
                    && part.get("text").is_some_and(Value::is_string)
                {
                    let mut path = base.clone();
                    path.extend([Seg::Index(p), key("text")]);
                    units.push(Unit {
                        path,
                        role,
                        keep: false,
                        turn,
                    });
                }
            }
        }
        Some(_) => return Err(shape("content is not a string or an array")),
    }
    Ok(())
}

/// The text parts of a Chat Completions request.
pub fn chat_units(request: &Value) -> Result<Vec<Unit>, String> {
    let Some(messages) = request.get("messages").and_then(Value::as_array) else {
        return Err(shape("no messages array"));
    };
    let mut units = Vec::new();
    let mut latest_user = None;
    for (m, message) in messages.iter().enumerate() {
        let role = role_of(
            message.get("role").and_then(Value::as_str),
            &format!("messages[{m}]"),
        )?;
        if role == Role::User {
            latest_user = Some(m);
        }
        content_units(
            message.get("content"),
            vec![key("messages"), Seg::Index(m), key("content")],
            role,
            m,
            &["text"],
            &mut units,
        )
        .map_err(|problem| format!("{problem} at messages[{m}]"))?;
    }
    mark_kept(&mut units, latest_user);
    Ok(units)
}

/// The text parts of a Responses request.
pub fn responses_units(request: &Value) -> Result<Vec<Unit>, String> {
    let mut units = Vec::new();
    match request.get("instructions") {
        None | Some(Value::Null) => {}
        Some(Value::String(_)) => units.push(Unit {
            path: vec![key("instructions")],
            role: Role::System,
            keep: true,
            turn: 0,
        }),
        Some(_) => return Err(shape("instructions is not a string")),
    }
    let mut latest_user = None;
    match request.get("input") {
        Some(Value::String(_)) => {
            latest_user = Some(0);
            units.push(Unit {
                path: vec![key("input")],
                role: Role::User,
                keep: true,
                turn: 0,
            });
        }
        Some(Value::Array(items)) => {
            for (i, item) in items.iter().enumerate() {
                let turn = i + 1;
                let kind = item.get("type").and_then(Value::as_str);
                if item.get("role").is_some() && matches!(kind, None | Some("message")) {
                    let role = role_of(
                        item.get("role").and_then(Value::as_str),
                        &format!("input[{i}]"),
                    )?;
                    if role == Role::User {
                        latest_user = Some(turn);
                    }
                    content_units(
                        item.get("content"),
                        vec![key("input"), Seg::Index(i), key("content")],
                        role,
                        turn,
                        &["input_text", "output_text", "text"],
                        &mut units,
                    )
                    .map_err(|problem| format!("{problem} at input[{i}]"))?;
                } else if kind == Some("function_call_output")
                    && item.get("output").is_some_and(Value::is_string)
                {
                    units.push(Unit {
                        path: vec![key("input"), Seg::Index(i), key("output")],
                        role: Role::Tool,
                        keep: false,
                        turn,
                    });
                }
            }
        }
        None | Some(Value::Null) => {}
        Some(_) => return Err(shape("input is not a string or an array")),
    }
    mark_kept(&mut units, latest_user);
    Ok(units)
}

/// The answer of a Chat Completions response: `choices[0].message.content`; tool calls or a
/// JSON response format make it structured.
pub fn chat_answer(response: &Value) -> Answer {
    // Every choice (`n` > 1): the second was never checked, and passed strict unseen. Several
    // choices are several parts, audited only.
    let mut parts = Vec::new();
    let mut structured = false;
    let choices = response.get("choices").and_then(Value::as_array);
    for (c, choice) in choices.into_iter().flatten().enumerate() {
        let Some(message) = choice.get("message") else {
            continue;
        };
        structured |= message
            .get("tool_calls")
            .is_some_and(|calls| calls.as_array().is_some_and(|c| !c.is_empty()))
            || message
                .get("function_call")
                .is_some_and(|call| !call.is_null());
        if let Some(Value::String(text)) = message.get("content") {
            parts.push((
                vec![
                    key("choices"),
                    Seg::Index(c),
                    key("message"),
                    key("content"),
                ],
                text.clone(),
            ));
        }
    }
    Answer::from_parts(parts, structured)
}

/// The answer of a Responses response: `output_text` parts of `message` items; function calls
/// make it structured.
pub fn responses_answer(response: &Value) -> Answer {
    let mut parts = Vec::new();
    let mut structured = false;
    for (i, item) in response
        .get("output")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        match item.get("type").and_then(Value::as_str) {
            Some("message") => {
                for (c, part) in item
                    .get("content")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    if part.get("type").and_then(Value::as_str) == Some("output_text")
                        && let Some(text) = part.get("text").and_then(Value::as_str)
                    {
                        parts.push((
                            vec![
                                key("output"),
                                Seg::Index(i),
                                key("content"),
                                Seg::Index(c),
                                key("text"),
                            ],
                            text.to_string(),
                        ));
                    }
                }
            }
            Some("reasoning") => {}
            _ => structured = true,
        }
    }
    Answer::from_parts(parts, structured)
}

/// The answer of a streamed Chat Completions response (`choices[0].delta.content`).
pub fn chat_stream_answer(events: &[Value]) -> Answer {
    // Text per choice `index` (`n` > 1 interleaves the choices' events): read as one text, the
    // choices were mixed, and strict moved one choice's words into the other.
    let mut texts: std::collections::BTreeMap<u64, String> = std::collections::BTreeMap::new();
    let mut structured = false;
    for event in events {
        let choices = event.get("choices").and_then(Value::as_array);
        for choice in choices.into_iter().flatten() {
            let index = choice.get("index").and_then(Value::as_u64).unwrap_or(0);
            if let Some(text) = choice.pointer("/delta/content").and_then(Value::as_str) {
                texts.entry(index).or_default().push_str(text);
            }
            if choice
                .pointer("/delta/tool_calls")
                .is_some_and(|calls| !calls.is_null())
            {
                structured = true;
            }
        }
    }
    Answer::from_streamed(texts.into_values().collect(), structured)
}

/// The answer of a streamed Responses response (`response.output_text.delta` events).
pub fn responses_stream_answer(events: &[Value]) -> Answer {
    let mut answer = Answer::default();
    for event in events {
        match event.get("type").and_then(Value::as_str) {
            Some("response.output_text.delta") => {
                answer
                    .text
                    .push_str(event.get("delta").and_then(Value::as_str).unwrap_or(""));
            }
            Some(kind) if kind.starts_with("response.function_call") => answer.structured = true,
            _ => {}
        }
    }
    answer
}

/// JSON mode or a JSON schema response format: the output must stay byte-valid.
pub fn wants_json(request: &Value) -> bool {
    let chat = request
        .pointer("/response_format/type")
        .and_then(Value::as_str)
        .is_some_and(|kind| kind != "text");
    let responses = request
        .pointer("/text/format/type")
        .and_then(Value::as_str)
        .is_some_and(|kind| kind != "text");
    chat || responses
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Found by probing: only the first of `n` choices was checked; the others passed strict
    /// unseen. Several choices are several parts: audited, never rewritten.
    #[test]
    fn every_choice_is_read_and_several_are_audited_only() {
        let response = json!({"choices": [
            {"index": 0, "message": {"role": "assistant", "content": "First."}},
            {"index": 1, "message": {"role": "assistant", "content": "Second."}}
        ]});
        let answer = chat_answer(&response);
        assert_eq!(answer.text, "First.\nSecond.");
        assert_eq!(answer.single_part, None);
        let events = vec![
            json!({"choices": [{"index": 0, "delta": {"content": "A "}}]}),
            json!({"choices": [{"index": 1, "delta": {"content": "B "}}]}),
            json!({"choices": [{"index": 0, "delta": {"content": "a."}}]}),
        ];
        let streamed = chat_stream_answer(&events);
        assert_eq!(streamed.text, "A a.\nB ");
        assert!(streamed.several);
    }

    #[test]
    fn chat_units_keep_system_and_latest_user() {
        let request = json!({"messages": [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": [{"type": "text", "text": "q1"}, {"type": "image_url", "image_url": {"url": "x"}}]},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "out"},
            {"role": "user", "content": "q2"},
        ]});
        let units = chat_units(&request).expect("test input is valid");
        let summary: Vec<(Role, bool)> = units.iter().map(|u| (u.role, u.keep)).collect();
        assert_eq!(
            summary,
            vec![
                (Role::System, true),
                (Role::User, false),
                (Role::Tool, false),
                (Role::User, true)
            ]
        );
    }

    #[test]
    fn responses_units_read_items() {
        let request = json!({"instructions": "be brief", "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "task"}]},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "long"},
        ]});
        let units = responses_units(&request).expect("test input is valid");
        assert_eq!(units.len(), 3);
        assert_eq!(units[2].role, Role::Tool);
        assert!(units[0].keep && units[1].keep && !units[2].keep);
    }
}
