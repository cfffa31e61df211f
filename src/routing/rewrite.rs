//! Putting another model into a request, only where it is safe:
//! - Anthropic and OpenAI styles: the body is a JSON object whose top-level `model` is a
//!   string (named once); that one string is replaced in the received bytes, every other byte
//!   stays as sent;
//! - Gemini: the model is in the path (`/v1beta/models/{model}:generateContent`); the path
//!   segment is replaced, the query string kept. A percent-encoded or odd model segment is not
//!   rewritten.
//!
//! Anything else (no model, a non-string model, duplicate keys) is `None`: not rewritable, and
//! the original model serves the request.

use serde_json::Value;

use crate::proxy::provider::Route;
use crate::proxy::spans::{self, key};

fn plain_model_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'))
}

/// The Gemini model of a `/v1beta/models/{model}:{method}` path.
pub fn gemini_model(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/v1beta/models/")?;
    let (model, _method) = rest.split_once(':')?;
    Some(model)
}

/// The model `route` asks for in `path` or the parsed `request`.
pub fn requested_model(route: Route, path: &str, request: &Value) -> Option<String> {
    match route {
        Route::GeminiGenerate => gemini_model(path).map(str::to_string),
        Route::AnthropicMessages | Route::OpenaiChat | Route::OpenaiResponses => request
            .get("model")
            .and_then(Value::as_str)
            .map(str::to_string),
        Route::Passthrough(_) => None,
    }
}

/// Whether another model can be put in place of `model`, the one [`requested_model`] found.
/// For a body this scans the JSON text once more (duplicate keys, the string's span), so the
/// router asks only when a cheap model could serve the request.
pub fn can_rewrite(route: Route, body: &str, model: &str) -> bool {
    match route {
        Route::GeminiGenerate => plain_model_name(model),
        Route::AnthropicMessages | Route::OpenaiChat | Route::OpenaiResponses => {
            rewrite_body(body, "x").is_some()
        }
        Route::Passthrough(_) => false,
    }
}

/// `body` with its top-level `model` string replaced by `model`; `None` when the body has no
/// single top-level string `model`.
pub fn rewrite_body(body: &str, model: &str) -> Option<String> {
    // A key named twice would leave which one the provider reads to its parser.
    if body.matches("\"model\"").count() > 1 && top_level_key_count(body, "model") != 1 {
        return None;
    }
    let spans = spans::string_spans(body).ok()?;
    let span = spans.get(&vec![key("model")])?.clone();
    Some(spans::splice(body, vec![(span, model.to_string())]))
}

/// How many times `name` is a key of the top-level object (serde keeps only the last of
/// duplicates, so this reads the text).
fn top_level_key_count(body: &str, name: &str) -> usize {
    let mut depth = 0i32;
    let mut count = 0;
    let mut in_string = false;
    let mut escaped = false;
    let mut start = 0;
    let bytes = body.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
                if depth == 1 && &body[start + 1..i] == name {
                    let after = body[i + 1..].trim_start();
                    if after.starts_with(':') {
                        count += 1;
                    }
                }
            }
            continue;
        }
        match b {
            b'"' => {
                in_string = true;
                start = i;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth -= 1,
            _ => {}
        }
    }
    count
}

/// `path_and_query` with the Gemini model segment replaced.
pub fn rewrite_gemini_path(path_and_query: &str, model: &str) -> Option<String> {
    let (path, query) = match path_and_query.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (path_and_query, None),
    };
    let old = gemini_model(path)?;
    if !plain_model_name(old) || !plain_model_name(model) {
        return None;
    }
    let method = &path["/v1beta/models/".len() + old.len()..];
    let mut out = format!("/v1beta/models/{model}{method}");
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn body_model_is_replaced_and_every_other_byte_kept() {
        let body = "{ \"model\" : \"gpt-5\",\n  \"messages\": [{\"role\":\"user\",\"content\":\"model gpt-5\"}], \"x\": 1.50 }";
        let out = rewrite_body(body, "gpt-5-mini").expect("rewritable");
        assert_eq!(out, body.replacen("\"gpt-5\"", "\"gpt-5-mini\"", 1));
        let value: Value = serde_json::from_str(body).expect("json");
        let model = requested_model(Route::OpenaiChat, "/v1/chat/completions", &value);
        assert_eq!(model.as_deref(), Some("gpt-5"));
        assert!(can_rewrite(Route::OpenaiChat, body, "gpt-5"));
    }

    #[test]
    fn unsafe_bodies_are_not_rewritten() {
        assert_eq!(rewrite_body(r#"{"messages": []}"#, "m"), None);
        assert_eq!(rewrite_body(r#"{"model": 5}"#, "m"), None);
        assert_eq!(rewrite_body(r#"{"model": "a", "model": "b"}"#, "m"), None);
        // A nested "model" key is not the request's model.
        let nested = r#"{"metadata": {"model": "x"}, "model": "gpt-5"}"#;
        assert_eq!(
            rewrite_body(nested, "gpt-5-mini").as_deref(),
            Some(r#"{"metadata": {"model": "x"}, "model": "gpt-5-mini"}"#)
        );
        let request = json!({"messages": []});
        assert_eq!(
            requested_model(Route::AnthropicMessages, "/v1/messages", &request),
            None
        );
        assert!(!can_rewrite(
            Route::AnthropicMessages,
            r#"{"messages": []}"#,
            "m"
        ));
    }

    #[test]
    fn gemini_paths() {
        assert_eq!(
            rewrite_gemini_path(
                "/v1beta/models/gemini-2.5-pro:generateContent?alt=sse&key=k",
                "gemini-2.5-flash"
            )
            .as_deref(),
            Some("/v1beta/models/gemini-2.5-flash:generateContent?alt=sse&key=k")
        );
        assert_eq!(
            rewrite_gemini_path("/v1beta/models/gem%2Fini:generateContent", "m"),
            None
        );
        let model = requested_model(
            Route::GeminiGenerate,
            "/v1beta/models/gemini-2.5-pro:streamGenerateContent",
            &json!({}),
        );
        assert_eq!(model.as_deref(), Some("gemini-2.5-pro"));
        assert!(can_rewrite(Route::GeminiGenerate, "{}", "gemini-2.5-pro"));
    }
}
