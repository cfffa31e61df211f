//! Gemini `generateContent` / `streamGenerateContent`
//! (`POST /v1beta/models/{model}:generateContent`): the text parts of a request and the answer
//! of a response.
//!
//! Text parts: `systemInstruction.parts[].text` (kept) and `contents[].parts[].text`; a
//! `functionResponse` part is structured and passes through untouched. A request that names a
//! `cachedContent` keeps its own contents as they are too (skipped), since the client set up a
//! cache around them.

use serde_json::Value;

use super::optimize::{Role, Unit, mark_kept};
use super::provider::Answer;
use super::spans::{self, Seg, key};

fn shape(problem: &str) -> String {
    format!("unrecognised_shape ({problem})")
}

/// The text parts of a generateContent request.
pub fn units(request: &Value) -> Result<Vec<Unit>, String> {
    if request.get("cachedContent").is_some() {
        return Err("cached_content".to_string());
    }
    let mut units = Vec::new();
    for name in ["systemInstruction", "system_instruction"] {
        if let Some(parts) = request
            .get(name)
            .and_then(|s| s.get("parts"))
            .and_then(Value::as_array)
        {
            for (p, part) in parts.iter().enumerate() {
                if part.get("text").is_some_and(Value::is_string) {
                    units.push(Unit {
                        path: vec![key(name), key("parts"), Seg::Index(p), key("text")],
                        role: Role::System,
                        keep: true,
                        turn: 0,
                    });
                }
            }
        }
    }
    let Some(contents) = request.get("contents").and_then(Value::as_array) else {
        return Err(shape("no contents array"));
    };
    let mut latest_user = None;
    for (c, content) in contents.iter().enumerate() {
        let turn = c + 1;
        let role = match content.get("role").and_then(Value::as_str) {
            // A missing role is the user's, as the API reads it.
            None | Some("user") => Role::User,
            Some("model") => Role::Assistant,
            Some("function" | "tool") => Role::Tool,
            Some(_) => return Err(shape(&format!("contents[{c}].role"))),
        };
        let Some(parts) = content.get("parts").and_then(Value::as_array) else {
            return Err(shape(&format!("contents[{c}].parts")));
        };
        let mut has_function_response = false;
        for (p, part) in parts.iter().enumerate() {
            has_function_response |= part.get("functionResponse").is_some();
            if part.get("text").is_some_and(Value::is_string) {
                units.push(Unit {
                    path: vec![
                        key("contents"),
                        Seg::Index(c),
                        key("parts"),
                        Seg::Index(p),
                        key("text"),
                    ],
                    role,
                    keep: false,
                    turn,
                });
            }
        }
        if role == Role::User && !has_function_response {
            latest_user = Some(turn);
        }
    }
    mark_kept(&mut units, latest_user);
    Ok(units)
}

/// The answer of a response (or of one streamed chunk): `candidates[0].content.parts[].text`;
/// a `functionCall` part makes it structured.
pub fn answer(response: &Value) -> Answer {
    let (parts, structured) = candidate_parts(response);
    Answer::from_parts(
        parts
            .into_iter()
            .map(|(path, _, text)| (path, text))
            .collect(),
        structured,
    )
}

/// The text parts of every candidate (path, candidate index, text), and whether any part is
/// not text. Every candidate: the second was never checked, and passed strict unseen.
fn candidate_parts(response: &Value) -> (Vec<(spans::Path, u64, String)>, bool) {
    let mut parts = Vec::new();
    let mut structured = false;
    let candidates = response.get("candidates").and_then(Value::as_array);
    for (c, candidate) in candidates.into_iter().flatten().enumerate() {
        let index = candidate
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(c as u64);
        let content = candidate
            .pointer("/content/parts")
            .and_then(Value::as_array);
        for (p, part) in content.into_iter().flatten().enumerate() {
            if part.get("thought").and_then(Value::as_bool) == Some(true) {
                continue;
            }
            if let Some(text) = part.get("text").and_then(Value::as_str) {
                parts.push((
                    vec![
                        key("candidates"),
                        Seg::Index(c),
                        key("content"),
                        key("parts"),
                        Seg::Index(p),
                        key("text"),
                    ],
                    index,
                    text.to_string(),
                ));
            } else {
                structured = true;
            }
        }
    }
    (parts, structured)
}

/// The answer of a streamed response: each event's candidates, text gathered per candidate.
pub fn stream_answer(events: &[Value]) -> Answer {
    let mut texts: std::collections::BTreeMap<u64, String> = std::collections::BTreeMap::new();
    let mut structured = false;
    for event in events {
        let (parts, any_structured) = candidate_parts(event);
        structured |= any_structured;
        for (_, index, text) in parts {
            texts.entry(index).or_default().push_str(&text);
        }
    }
    Answer::from_streamed(texts.into_values().collect(), structured)
}

/// JSON mode (`generationConfig.responseMimeType` other than text).
pub fn wants_json(request: &Value) -> bool {
    request
        .pointer("/generationConfig/responseMimeType")
        .and_then(Value::as_str)
        .is_some_and(|mime| mime != "text/plain")
        || request
            .pointer("/generationConfig/responseSchema")
            .is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn latest_user_text_is_kept_and_function_calls_are_structured() {
        let request = json!({
            "systemInstruction": {"parts": [{"text": "sys"}]},
            "contents": [
                {"role": "user", "parts": [{"text": "old"}]},
                {"role": "model", "parts": [{"text": "answer"}]},
                {"role": "user", "parts": [{"text": "new"}]},
            ]
        });
        let found = units(&request).expect("test input is valid");
        let kept: Vec<bool> = found.iter().map(|u| u.keep).collect();
        assert_eq!(kept, vec![true, false, false, true]);
        let response = json!({"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "args": {}}}]}}]});
        assert!(answer(&response).structured);
    }
}
