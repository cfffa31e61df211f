//! Anthropic Messages (`POST /v1/messages`): the text parts of a request and the answer of a
//! response.
//!
//! Text parts: `system` (kept), each message's string `content`, `text` blocks, `tool_result`
//! content (a string or text blocks) and plain-text `document` sources. Everything up to and
//! including the last block marked with `cache_control` is kept byte-stable, so the client's
//! prompt cache keeps hitting. A top-level `cache_control` (automatic caching of the whole
//! prefix) means nothing may change: the request is skipped.

use serde_json::Value;

use super::optimize::{Role, Unit, mark_kept};
use super::provider::Answer;
use super::spans::{Path, Seg, key};

fn shape(problem: &str) -> String {
    format!("unrecognised_shape ({problem})")
}

/// The text parts of a Messages request.
pub fn units(request: &Value) -> Result<Vec<Unit>, String> {
    if request.get("cache_control").is_some() {
        return Err("top_level_cache_control".to_string());
    }
    let mut units = Vec::new();
    match request.get("system") {
        None | Some(Value::Null) => {}
        Some(Value::String(_)) => units.push(Unit {
            path: vec![key("system")],
            role: Role::System,
            keep: true,
            turn: 0,
        }),
        Some(Value::Array(blocks)) => {
            for (b, block) in blocks.iter().enumerate() {
                if block.get("text").is_some_and(Value::is_string) {
                    units.push(Unit {
                        path: vec![key("system"), Seg::Index(b), key("text")],
                        role: Role::System,
                        keep: true,
                        turn: 0,
                    });
                }
            }
        }
        Some(_) => return Err(shape("system is not a string or an array")),
    }
    let Some(messages) = request.get("messages").and_then(Value::as_array) else {
        return Err(shape("no messages array"));
    };
    let mut latest_user = None;
    // Units whose index is below this stay byte-stable: the prefix a cache breakpoint covers.
    let mut cached_prefix = 0;
    for (m, message) in messages.iter().enumerate() {
        let role = match message.get("role").and_then(Value::as_str) {
            Some("user") => {
                latest_user = Some(m);
                Role::User
            }
            Some("assistant") => Role::Assistant,
            _ => return Err(shape(&format!("messages[{m}].role"))),
        };
        let base: Path = vec![key("messages"), Seg::Index(m), key("content")];
        match message.get("content") {
            Some(Value::String(_)) => units.push(Unit {
                path: base,
                role,
                keep: false,
                turn: m,
            }),
            Some(Value::Array(blocks)) => {
                for (b, block) in blocks.iter().enumerate() {
                    let at = |tail: &[Seg]| {
                        let mut path = base.clone();
                        path.push(Seg::Index(b));
                        path.extend_from_slice(tail);
                        path
                    };
                    let unit = |path, role| Unit {
                        path,
                        role,
                        keep: false,
                        turn: m,
                    };
                    match block.get("type").and_then(Value::as_str) {
                        Some("text") if block.get("text").is_some_and(Value::is_string) => {
                            units.push(unit(at(&[key("text")]), role));
                        }
                        Some("tool_result") => match block.get("content") {
                            Some(Value::String(_)) => {
                                units.push(unit(at(&[key("content")]), Role::Tool));
                            }
                            Some(Value::Array(inner)) => {
                                for (c, inner_block) in inner.iter().enumerate() {
                                    if inner_block.get("type").and_then(Value::as_str)
                                        == Some("text")
                                        && inner_block.get("text").is_some_and(Value::is_string)
                                    {
                                        units.push(unit(
                                            at(&[key("content"), Seg::Index(c), key("text")]),
                                            Role::Tool,
                                        ));
                                    }
                                }
                            }
                            _ => {}
                        },
                        Some("document")
                            if block.pointer("/source/type").and_then(Value::as_str)
                                == Some("text")
                                && block.pointer("/source/data").is_some_and(Value::is_string) =>
                        {
                            units.push(unit(at(&[key("source"), key("data")]), Role::Tool));
                        }
                        Some(_) => {}
                        None => return Err(shape(&format!("messages[{m}].content[{b}].type"))),
                    }
                    if has_cache_control(block) {
                        cached_prefix = units.len();
                    }
                }
            }
            _ => return Err(shape(&format!("messages[{m}].content"))),
        }
    }
    for unit in &mut units[..cached_prefix] {
        unit.keep = true;
    }
    mark_kept(&mut units, latest_user);
    Ok(units)
}

fn has_cache_control(block: &Value) -> bool {
    block.get("cache_control").is_some()
        || block
            .get("content")
            .and_then(Value::as_array)
            .is_some_and(|inner| inner.iter().any(|b| b.get("cache_control").is_some()))
}

/// The answer of a Messages response: its `text` blocks; `tool_use` makes it structured.
pub fn answer(response: &Value) -> Answer {
    let mut parts = Vec::new();
    let mut structured = false;
    for (b, block) in response
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => {
                if let Some(text) = block.get("text").and_then(Value::as_str) {
                    parts.push((
                        vec![key("content"), Seg::Index(b), key("text")],
                        text.to_string(),
                    ));
                }
            }
            Some("thinking") | Some("redacted_thinking") => {}
            _ => structured = true,
        }
    }
    Answer::from_parts(parts, structured)
}

/// The answer of a streamed Messages response (`content_block_delta` text deltas).
pub fn stream_answer(events: &[Value]) -> Answer {
    // Text per content block: several text blocks are audited only, as in a whole response
    // (strict had folded the second block into the first).
    let mut texts: std::collections::BTreeMap<u64, String> = std::collections::BTreeMap::new();
    let mut structured = false;
    for event in events {
        match event.get("type").and_then(Value::as_str) {
            Some("content_block_delta") => {
                match event.pointer("/delta/type").and_then(Value::as_str) {
                    Some("text_delta") => texts
                        .entry(event.get("index").and_then(Value::as_u64).unwrap_or(0))
                        .or_default()
                        .push_str(
                            event
                                .pointer("/delta/text")
                                .and_then(Value::as_str)
                                .unwrap_or(""),
                        ),
                    Some("input_json_delta") => structured = true,
                    _ => {}
                }
            }
            Some("content_block_start") => {
                match event.pointer("/content_block/type").and_then(Value::as_str) {
                    Some("tool_use") => structured = true,
                    // A block may open with text of its own (found by probing: it was never
                    // checked, and strict passed it on).
                    Some("text") => {
                        if let Some(text) = event
                            .pointer("/content_block/text")
                            .and_then(Value::as_str)
                            .filter(|t| !t.is_empty())
                        {
                            texts
                                .entry(event.get("index").and_then(Value::as_u64).unwrap_or(0))
                                .or_default()
                                .push_str(text);
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    Answer::from_streamed(texts.into_values().collect(), structured)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn system_latest_user_task_and_cached_prefix_are_kept() {
        let request = json!({
            "system": "be brief",
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "old doc", "cache_control": {"type": "ephemeral"}}]},
                {"role": "assistant", "content": "old answer"},
                {"role": "user", "content": "the task"},
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "grep", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "grep output"}]},
            ]
        });
        let found = units(&request).expect("test input is valid");
        let kept: Vec<bool> = found.iter().map(|u| u.keep).collect();
        // system, cached doc, old answer, task, latest tool result
        assert_eq!(kept, vec![true, true, false, true, true]);
        assert_eq!(found[4].role, Role::Tool);
        assert!(units(&json!({"cache_control": {}, "messages": []})).is_err());
        assert!(units(&json!({"messages": [{"role": "robot", "content": "x"}]})).is_err());
    }

    #[test]
    fn tool_use_is_structured() {
        let response = json!({"content": [{"type": "text", "text": "hi"}, {"type": "tool_use", "id": "x", "name": "f", "input": {}}]});
        let answer = answer(&response);
        assert!(answer.structured);
        assert_eq!(answer.text, "hi");
    }
}
