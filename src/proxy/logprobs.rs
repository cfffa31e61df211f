//! Log-probabilities of a rewritten answer. They describe the tokens the model wrote, so once
//! strict or annotate has changed the text they would still carry the removed words (and no
//! longer match what is returned): a rewritten answer has them emptied, lists to `[]` and
//! objects or numbers to `null`, which every provider's schema accepts for an answer asked
//! without them.

use serde_json::Value;

use super::spans::{self, Malformed, Seg};

/// The members that hold log-probabilities: OpenAI Chat (`choices[].logprobs`), Responses
/// (`logprobs` of output text parts and of text delta / done events), Gemini
/// (`logprobsResult`, `avgLogprobs` of candidates).
const KEYS: [&str; 3] = ["logprobs", "logprobsResult", "avgLogprobs"];

fn emptied(value: &Value) -> Option<Value> {
    match value {
        Value::Null => None,
        Value::Array(items) if items.is_empty() => None,
        Value::Array(_) => Some(Value::Array(Vec::new())),
        _ => Some(Value::Null),
    }
}

/// Empties every log-probability member of a parsed payload; whether one changed.
pub fn clear(value: &mut Value) -> bool {
    let mut changed = false;
    match value {
        Value::Object(map) => {
            for (name, child) in map.iter_mut() {
                if KEYS.contains(&name.as_str()) {
                    if let Some(empty) = emptied(child) {
                        *child = empty;
                        changed = true;
                    }
                } else {
                    changed |= clear(child);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                changed |= clear(item);
            }
        }
        _ => {}
    }
    changed
}

/// Empties every log-probability member of a JSON body, leaving every other byte as it is.
pub fn clear_in_text(text: &str) -> Result<String, Malformed> {
    if !KEYS.iter().any(|key| text.contains(key)) {
        return Ok(text.to_string());
    }
    let spans = spans::value_spans(text)?;
    let mut edits: Vec<(std::ops::Range<usize>, String)> = spans
        .iter()
        .filter(|(path, _)| matches!(path.last(), Some(Seg::Key(name)) if KEYS.contains(&name.as_str())))
        .filter_map(|(_, range)| {
            let value: Value = serde_json::from_str(&text[range.clone()]).ok()?;
            let empty = emptied(&value)?;
            Some((range.clone(), empty.to_string()))
        })
        .collect();
    // A member inside one already emptied goes with it.
    edits.sort_by_key(|(range, _)| range.start);
    let mut kept: Vec<(std::ops::Range<usize>, String)> = Vec::with_capacity(edits.len());
    for edit in edits {
        if kept.last().is_some_and(|(last, _)| edit.0.start < last.end) {
            continue;
        }
        kept.push(edit);
    }
    Ok(spans::splice_raw(text, kept))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chat_body_loses_its_logprobs_and_nothing_else() {
        let body = r#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"logprobs":{"content":[{"token":"Hi","logprob":-0.1,"top_logprobs":[]}]},"finish_reason":"stop"}]}"#;
        let out = clear_in_text(body).expect("test input is valid");
        assert_eq!(
            out,
            r#"{"id":"x","choices":[{"index":0,"message":{"role":"assistant","content":"Hi."},"logprobs":null,"finish_reason":"stop"}]}"#
        );
        assert_eq!(clear_in_text(&out).expect("valid"), out, "idempotent");
    }

    #[test]
    fn lists_become_empty_lists_and_numbers_null() {
        let mut value = serde_json::json!({
            "type": "response.output_text.delta",
            "delta": "a",
            "logprobs": [{"token": "a", "logprob": -1.0}],
            "candidates": [{"avgLogprobs": -0.3, "logprobsResult": {"chosenCandidates": []}}]
        });
        assert!(clear(&mut value));
        assert_eq!(value["logprobs"], serde_json::json!([]));
        assert_eq!(value["candidates"][0]["avgLogprobs"], Value::Null);
        assert_eq!(value["candidates"][0]["logprobsResult"], Value::Null);
        assert!(!clear(&mut value), "nothing left to empty");
        let text = value.to_string();
        assert_eq!(clear_in_text(&text).expect("valid"), text);
    }
}
