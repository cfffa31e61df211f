//! Streamed answers through the proxy, found by probing: what strict leaves in a rewritten
//! answer (log-probabilities), streams that end in an error event or without their end marker,
//! and the log line of a stream (its end, a client that leaves, a stream too long to check).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use svc::proxy::server::Logger;
use svc::proxy::{ProxySettings, ProxyState};
use svc::witness::Mode;

use crate::proxy::{header, raw_upstream, witness};
use crate::proxy_upstream::event_stream;

const EVIDENCE: &str = "The Halden Observatory was founded in 1921 by Ingrid Solberg.";
const WRONG: &str = "It was built on the moon in 1850.";

/// A proxy whose log lines are kept.
struct Logged {
    base: String,
    client: reqwest::Client,
    lines: Arc<Mutex<Vec<String>>>,
    state: Arc<ProxyState>,
    _home: tempfile::TempDir,
}

impl Logged {
    async fn start(upstream: &str, configure: impl FnOnce(&mut ProxySettings)) -> Logged {
        let (home, settings) = crate::proxy::settings_for(upstream, configure);
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = lines.clone();
        let logger = Logger(Box::new(move |log| {
            sink.lock().expect("lines").push(log.to_string())
        }));
        let state = ProxyState::new(settings, Some(logger)).expect("proxy state");
        Logged {
            base: crate::proxy::serve_proxy(state.clone()).await,
            client: reqwest::Client::new(),
            lines,
            state,
            _home: home,
        }
    }

    async fn post(&self, path: &str, body: String) -> reqwest::Response {
        self.client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .expect("answered")
    }

    /// The first log line, waiting up to `seconds` for it.
    async fn line(&self, seconds: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(seconds);
        loop {
            if let Some(line) = self.lines.lock().expect("lines").first() {
                return line.clone();
            }
            assert!(Instant::now() < deadline, "no log line");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn certificates(&self) -> usize {
        self.state
            .witness_store
            .list(100)
            .expect("list")
            .items
            .len()
    }
}

fn chat_request(stream: bool) -> String {
    serde_json::json!({
        "model": "m",
        "stream": stream,
        "messages": [
            {"role": "system", "content": EVIDENCE},
            {"role": "user", "content": "Tell me about it."}
        ]
    })
    .to_string()
}

fn json_answer(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn chat_delta(text: &str, logprobs: bool) -> String {
    let logprobs = if logprobs {
        serde_json::json!({"content": [{"token": text, "logprob": -0.25, "top_logprobs": []}]})
    } else {
        Value::Null
    };
    let event = serde_json::json!({
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": text}, "logprobs": logprobs, "finish_reason": null}]
    });
    format!("data: {event}\n\n")
}

/// Found by probing: strict removed a claim from the text but not from the log-probabilities,
/// which still spelled the removed words token by token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_takes_the_log_probabilities_of_a_rewritten_answer_with_it() {
    let body = serde_json::json!({
        "id": "chatcmpl-1", "object": "chat.completion",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": format!("{EVIDENCE} {WRONG}")},
            "logprobs": {"content": [
                {"token": "moon", "logprob": -0.5, "bytes": [109, 111, 111, 110], "top_logprobs": []}
            ]},
            "finish_reason": "stop"
        }]
    })
    .to_string();
    let upstream = raw_upstream(json_answer(&body)).await;
    let proxy = Logged::start(&upstream, witness(Mode::Strict, false)).await;
    let response = proxy
        .post("/v1/chat/completions", chat_request(false))
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "x-svc-witness-rewritten"), "true");
    let text = response.text().await.expect("body");
    assert!(!text.contains("moon"), "{text}");
    let value: Value = serde_json::from_str(&text).expect("still JSON");
    assert_eq!(value["choices"][0]["logprobs"], Value::Null);
    assert_eq!(value["choices"][0]["finish_reason"], "stop");

    let mut events: Vec<String> = [EVIDENCE, " It was built ", "on the moon in 1850."]
        .iter()
        .map(|text| chat_delta(text, true))
        .collect();
    events.push("data: [DONE]\n\n".into());
    let upstream = raw_upstream(event_stream(&events)).await;
    let proxy = Logged::start(&upstream, witness(Mode::Strict, false)).await;
    let response = proxy.post("/v1/chat/completions", chat_request(true)).await;
    assert_eq!(header(&response, "x-svc-witness-rewritten"), "true");
    assert_eq!(header(&response, "x-svc-witness-stream-end"), "complete");
    let text = response.text().await.expect("body");
    assert!(!text.contains("moon"), "{text}");
    assert!(text.contains(EVIDENCE), "{text}");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
}

fn anthropic_event(kind: &str, data: &str) -> String {
    format!("event: {kind}\ndata: {data}\n\n")
}

/// Found by probing: a stream that ended in an error event (an overloaded model mid-answer) was
/// certified on the text it carried, as if it were the model's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_ends_in_an_error_is_never_certified_as_an_answer() {
    let events = vec![
        anthropic_event(
            "message_start",
            r#"{"type":"message_start","message":{"id":"msg_1","role":"assistant","content":[]}}"#,
        ),
        anthropic_event(
            "content_block_delta",
            &format!(
                r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"{EVIDENCE} {WRONG}"}}}}"#
            ),
        ),
        anthropic_event(
            "error",
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        ),
    ];
    let request = format!(
        r#"{{"stream":true,"max_tokens":50,"system":"{EVIDENCE}","messages":[{{"role":"user","content":"Tell me about it."}}]}}"#
    );
    let upstream = raw_upstream(event_stream(&events)).await;

    // Audit: passed on as it came, no certificate, and the log says why.
    let audit = Logged::start(&upstream, witness(Mode::Audit, false)).await;
    let response = audit.post("/v1/messages", request.clone()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.text().await.expect("body"), events.concat());
    let line = audit.line(30).await;
    assert!(
        line.contains("skipped: the stream ended in an error event (Overloaded); no certificate"),
        "{line}"
    );
    assert_eq!(audit.certificates(), 0);

    // Strict: still checked (strict still cuts what it cannot support), and said partial.
    let strict = Logged::start(&upstream, witness(Mode::Strict, false)).await;
    let response = strict.post("/v1/messages", request).await;
    assert_eq!(header(&response, "x-svc-witness-stream-end"), "error");
    let text = response.text().await.expect("body");
    assert!(!text.contains("moon"), "{text}");
    assert!(
        text.contains("overloaded_error"),
        "the error event stays: {text}"
    );
    let line = strict.line(30).await;
    assert!(
        line.contains("a partial answer: the stream ended in an error event (Overloaded)"),
        "{line}"
    );

    // A stream without its end marker is cut.
    let cut = [EVIDENCE]
        .iter()
        .map(|t| chat_delta(t, false))
        .collect::<Vec<_>>();
    let upstream = raw_upstream(event_stream(&cut)).await;
    let strict = Logged::start(&upstream, witness(Mode::Strict, false)).await;
    let response = strict
        .post("/v1/chat/completions", chat_request(true))
        .await;
    assert_eq!(header(&response, "x-svc-witness-stream-end"), "cut");
}

/// Found by probing: an audited stream's connection stayed open after its last event while
/// the witness checked it (the client waited for the check), and its log line said only
/// "deferred". The client's answer ends first; the line carries the verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audited_stream_ends_before_its_check_and_its_log_line_has_the_verdict() {
    // About a second of checking in a debug build.
    let evidence: Vec<String> = (0..1000)
        .map(|i| {
            format!(
                "Warehouse {i} in Leeds shipped {} parcels on Monday.",
                i * 7
            )
        })
        .collect();
    let answer: Vec<String> = evidence.iter().step_by(10).cloned().collect();
    let mut events: Vec<String> = answer
        .iter()
        .map(|t| chat_delta(&format!("{t} "), false))
        .collect();
    events.push("data: [DONE]\n\n".into());
    let upstream = raw_upstream(event_stream(&events)).await;
    let proxy = Logged::start(&upstream, witness(Mode::Audit, false)).await;
    let request = serde_json::json!({
        "model": "m", "stream": true,
        "messages": [{"role": "system", "content": evidence.join(" ")}, {"role": "user", "content": "How many?"}]
    });
    let response = proxy
        .post("/v1/chat/completions", request.to_string())
        .await;
    let body = response.bytes().await.expect("the whole stream");
    assert_eq!(String::from_utf8_lossy(&body), events.concat());
    assert_eq!(proxy.certificates(), 0, "the answer ended before the check");
    let line = proxy.line(120).await;
    assert!(line.contains("witness supported (0 flagged)"), "{line}");
    assert_eq!(proxy.certificates(), 1);
}

/// Found by probing: a client that left an audited stream midway was logged 200, and a stream
/// over the witness's limit left no word of why it had no certificate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_the_client_leaves_is_logged_499_and_an_oversized_one_says_why() {
    let upstream = crate::serve(axum::Router::new().fallback(|| async {
        let first = futures_util::stream::once(async {
            Ok::<_, std::io::Error>(chat_delta("Hello ", false))
        });
        let stalled = futures_util::stream::once(async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Ok::<_, std::io::Error>("data: [DONE]\n\n".to_string())
        });
        (
            [("content-type", "text/event-stream")],
            axum::body::Body::from_stream(futures_util::StreamExt::chain(first, stalled)),
        )
    }))
    .await;
    let proxy = Logged::start(&upstream, witness(Mode::Audit, false)).await;
    let mut response = proxy.post("/v1/chat/completions", chat_request(true)).await;
    assert_eq!(response.status(), 200);
    let chunk = response
        .chunk()
        .await
        .expect("a chunk")
        .expect("the first event");
    assert!(String::from_utf8_lossy(&chunk).contains("Hello"));
    drop(response);
    let line = proxy.line(30).await;
    assert!(line.contains(" 499 "), "{line}");
    assert!(
        line.contains("the client went away during the stream"),
        "{line}"
    );

    let big = "x".repeat(64 * 1024);
    let mut events: Vec<String> = (0..140).map(|_| chat_delta(&big, false)).collect();
    events.push("data: [DONE]\n\n".into());
    let upstream = raw_upstream(event_stream(&events)).await;
    let proxy = Logged::start(&upstream, witness(Mode::Audit, false)).await;
    let response = proxy.post("/v1/chat/completions", chat_request(true)).await;
    let body = response.bytes().await.expect("the whole stream");
    assert_eq!(body.len(), events.iter().map(String::len).sum::<usize>());
    let line = proxy.line(30).await;
    assert!(
        line.contains(
            "skipped: the stream is over 8 MiB, the most the witness keeps; no certificate"
        ),
        "{line}"
    );
}

/// A chunked event stream whose connection closes after its last event, without the body's
/// terminating chunk.
fn event_stream_cut(events: &[String]) -> Vec<u8> {
    let mut answer = event_stream(events);
    answer.truncate(answer.len() - b"0\r\n\r\n".len());
    answer
}

/// Found by probing: a stream that had sent its end marker and then lost its connection before
/// the body's last chunk was a 502 in strict (the whole answer thrown away) and had no
/// certificate in audit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_after_its_end_marker_is_a_whole_answer() {
    let mut events: Vec<String> = [EVIDENCE]
        .iter()
        .map(|text| chat_delta(text, false))
        .collect();
    events.push("data: [DONE]\n\n".into());
    let upstream = raw_upstream(event_stream_cut(&events)).await;
    let strict = Logged::start(&upstream, witness(Mode::Strict, false)).await;
    let response = strict
        .post("/v1/chat/completions", chat_request(true))
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "x-svc-witness-stream-end"), "complete");
    let text = response.text().await.expect("body");
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let audit = Logged::start(&upstream, witness(Mode::Audit, false)).await;
    let mut response = audit.post("/v1/chat/completions", chat_request(true)).await;
    while let Ok(Some(_)) = response.chunk().await {}
    let line = audit.line(30).await;
    assert!(line.contains("witness supported (0 flagged)"), "{line}");
    assert!(!line.contains("broke off"), "the answer was whole: {line}");
    assert_eq!(audit.certificates(), 1);
}

/// Found by probing: strict checked and rewrote the deltas but not an Anthropic block that
/// opens with text, nor the `output_text` copy a Responses stream's last event may carry, so
/// removed claims still reached the client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_cuts_claims_from_every_slot_that_carries_text() {
    let events = vec![
        anthropic_event(
            "content_block_start",
            &format!(
                r#"{{"type":"content_block_start","index":0,"content_block":{{"type":"text","text":"{WRONG} "}}}}"#
            ),
        ),
        anthropic_event(
            "content_block_delta",
            &format!(
                r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"{EVIDENCE}"}}}}"#
            ),
        ),
        anthropic_event("message_stop", r#"{"type":"message_stop"}"#),
    ];
    let request = format!(
        r#"{{"stream":true,"max_tokens":50,"system":"{EVIDENCE}","messages":[{{"role":"user","content":"Tell me about it."}}]}}"#
    );
    let upstream = raw_upstream(event_stream(&events)).await;
    let strict = Logged::start(&upstream, witness(Mode::Strict, false)).await;
    let response = strict.post("/v1/messages", request).await;
    assert_eq!(header(&response, "x-svc-witness-rewritten"), "true");
    let text = response.text().await.expect("body");
    assert!(!text.contains("moon"), "{text}");
    assert!(text.contains(EVIDENCE), "{text}");

    let responses = [
        format!(
            r#"{{"type":"response.output_text.delta","output_index":0,"content_index":0,"delta":"{EVIDENCE} {WRONG}"}}"#
        ),
        format!(
            r#"{{"type":"response.completed","response":{{"id":"r","status":"completed","output_text":"{EVIDENCE} {WRONG}"}}}}"#
        ),
    ];
    let events: Vec<String> = responses
        .iter()
        .map(|data| format!("event: x\ndata: {data}\n\n"))
        .collect();
    let upstream = raw_upstream(event_stream(&events)).await;
    let strict = Logged::start(&upstream, witness(Mode::Strict, false)).await;
    let request =
        serde_json::json!({"stream": true, "instructions": EVIDENCE, "input": "Tell me about it."});
    let response = strict.post("/v1/responses", request.to_string()).await;
    assert_eq!(header(&response, "x-svc-witness-rewritten"), "true");
    let text = response.text().await.expect("body");
    assert!(!text.contains("moon"), "{text}");
}
