//! The proxy end to end over real sockets: a fake upstream (axum on 127.0.0.1:0) records what
//! it receives and answers with recorded provider fixtures (fixtures/proxy/); the proxy app runs
//! on its own socket; a reqwest client plays the AI client.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use svc::context::CommitStore;
use svc::proxy::check::WitnessSettings;
use svc::proxy::upstream::Upstreams;
use svc::proxy::{ProxySettings, ProxyState, make_service};
use svc::witness::{Mode, Profile};

use crate::harness::root;

#[derive(Debug, Clone)]
struct Received {
    method: String,
    path: String,
    headers: HeaderMap,
    body: Vec<u8>,
}

type Log = Arc<Mutex<Vec<Received>>>;

pub(crate) fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(root().join("fixtures/proxy").join(name)).expect("fixture exists")
}

async fn fake_handler(State(log): State<Log>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .expect("the request is answered")
        .to_vec();
    let path = parts
        .uri
        .path_and_query()
        .map(|pq| pq.as_str().to_string())
        .unwrap_or_default();
    log.lock().expect("log lock").push(Received {
        method: parts.method.to_string(),
        path: path.clone(),
        headers: parts.headers.clone(),
        body: body.clone(),
    });
    let header = |name: &str| {
        parts
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    if header("x-fake-hang").is_some() {
        tokio::time::sleep(Duration::from_secs(30)).await;
    }
    let text = String::from_utf8_lossy(&body);
    let stream = text.contains("\"stream\":true") || text.contains("\"stream\": true");
    let name = header("x-fake-fixture").unwrap_or_else(|| {
        let p = parts.uri.path();
        match (p, stream) {
            ("/v1/messages", false) => "anthropic_message.json".into(),
            ("/v1/messages", true) => "anthropic_stream.sse".into(),
            ("/v1/chat/completions", false) => "openai_chat.json".into(),
            ("/v1/chat/completions", true) => "openai_chat_stream.sse".into(),
            ("/v1/responses", false) => "openai_responses.json".into(),
            ("/v1/responses", true) => "openai_responses_stream.sse".into(),
            _ if p.ends_with(":streamGenerateContent") => "gemini_stream.sse".into(),
            _ if p.ends_with(":generateContent") => "gemini_generate.json".into(),
            _ => String::new(),
        }
    });
    let status = header("x-fake-status")
        .and_then(|s| s.parse::<u16>().ok())
        .and_then(|s| StatusCode::from_u16(s).ok())
        .unwrap_or(StatusCode::OK);
    if let Some(location) = header("x-fake-location") {
        return (status, [("location", location)], "moved").into_response();
    }
    if name.is_empty() {
        return (status, axum::Json(json!({"object": "list", "path": path}))).into_response();
    }
    let content_type = if name.ends_with(".sse") {
        "text/event-stream"
    } else {
        "application/json"
    };
    (
        status,
        [("content-type", content_type), ("x-upstream", "fake")],
        fixture(&name),
    )
        .into_response()
}

pub(crate) struct Fake {
    address: SocketAddr,
    log: Log,
}

impl Fake {
    pub(crate) async fn start() -> Fake {
        let log: Log = Arc::default();
        let router = axum::Router::new()
            .fallback(fake_handler)
            .with_state(log.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("test step");
        let address = listener.local_addr().expect("test step");
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Fake { address, log }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    fn last(&self) -> Received {
        self.log
            .lock()
            .expect("log lock")
            .last()
            .cloned()
            .expect("a request")
    }

    pub(crate) fn count(&self) -> usize {
        self.log.lock().expect("log lock").len()
    }
}

pub(crate) struct Proxy {
    pub(crate) base: String,
    state: Arc<ProxyState>,
    pub(crate) client: reqwest::Client,
    _home: tempfile::TempDir,
}

/// Serves the proxy app (with connection addresses, as `svc proxy` does) on a free port of
/// 127.0.0.1; returns its base URL.
pub async fn serve_proxy(state: Arc<ProxyState>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    let service = make_service(state);
    tokio::spawn(async move {
        let _ = axum::serve(listener, service).await;
    });
    format!("http://{address}")
}

/// An upstream that answers every connection with `answer`, byte for byte, and closes it (for
/// answers no HTTP server would send: cut-off bodies and streams).
pub(crate) async fn raw_upstream(answer: Vec<u8>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut request = vec![0u8; 65536];
                let _ = socket.read(&mut request).await;
                let _ = socket.write_all(&answer).await;
            });
        }
    });
    format!("http://{address}")
}

/// Settings of a proxy in front of `upstream` for every provider, with a state directory of its
/// own (returned: it lives as long as the proxy).
pub(crate) fn settings_for(
    upstream: &str,
    configure: impl FnOnce(&mut ProxySettings),
) -> (tempfile::TempDir, ProxySettings) {
    let home = tempfile::tempdir().expect("test step");
    let mut settings = ProxySettings::new(home.path().to_path_buf());
    settings.upstreams = Upstreams {
        anthropic: upstream.to_string(),
        openai: upstream.to_string(),
        gemini: upstream.to_string(),
    };
    configure(&mut settings);
    (home, settings)
}

impl Proxy {
    pub(crate) async fn start(upstream: &str, configure: impl FnOnce(&mut ProxySettings)) -> Proxy {
        let (home, settings) = settings_for(upstream, configure);
        let state = ProxyState::new(settings, None).expect("test step");
        Proxy {
            base: serve_proxy(state.clone()).await,
            state,
            // A client sees what the proxy answers, redirects included.
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .expect("a client"),
            _home: home,
        }
    }

    pub(crate) async fn post(&self, path: &str, body: impl Into<Vec<u8>>) -> reqwest::Response {
        self.post_with(path, body, &[]).await
    }

    pub(crate) async fn post_with(
        &self,
        path: &str,
        body: impl Into<Vec<u8>>,
        headers: &[(&str, &str)],
    ) -> reqwest::Response {
        let mut request = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body.into());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.expect("the request is answered")
    }

    fn home(&self) -> &Path {
        self._home.path()
    }
}

pub(crate) fn header(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

/// A log of `lines` distinct lines with one error line in the middle.
fn build_log(lines: usize) -> String {
    let mut out = String::new();
    for i in 0..lines {
        if i == lines / 2 {
            out.push_str(
                "2026-11-23T10:00:00Z ERROR config::parse: parse_config returned Ok(()) for an empty file (expected Err(Empty))\n",
            );
        }
        out.push_str(&format!(
            "2026-11-23T10:{:02}:{:02}Z INFO worker-{} processed batch {} of shard {} in {} ms\n",
            (i / 60) % 60,
            i % 60,
            i % 17,
            i * 7,
            i % 23,
            (i * 37) % 997
        ));
    }
    out
}

fn tokens(text: &[u8]) -> usize {
    svc::tokens::count(&String::from_utf8_lossy(text))
}

fn markers(text: &str) -> Vec<String> {
    let pattern = regex::Regex::new(r"recover (m[0-9][0-9A-Za-z._-]*)").expect("test step");
    pattern
        .captures_iter(text)
        .map(|c| c[1].trim_end_matches(['.', ']']).to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_budget_requests_are_forwarded_byte_identical_with_auth_and_unknown_fields() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), |_| {}).await;
    // Odd spacing, key order, number spelling and unknown fields must all survive.
    let body = "{ \"model\":\"claude-sonnet-4-5\", \"max_tokens\": 1.0e3,\n \"x_unknown\": {\"b\":1,\"a\":[2]},\n \"messages\":[{\"role\":\"user\",\"content\":\"Why does the build fail? \\u00e9\"}] }";
    let response = proxy
        .post_with(
            "/v1/messages",
            body,
            &[
                ("x-api-key", "sk-ant-test"),
                ("anthropic-version", "2023-06-01"),
            ],
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-svc-optimization"),
        "unchanged; reason=under_budget"
    );
    assert_eq!(header(&response, "x-upstream"), "fake");
    let received = fake.last();
    assert_eq!(received.body, body.as_bytes(), "byte-identical");
    assert_eq!(received.path, "/v1/messages");
    assert_eq!(received.headers["x-api-key"], "sk-ant-test");
    assert_eq!(received.headers["anthropic-version"], "2023-06-01");
    assert_eq!(
        response.bytes().await.expect("a body").to_vec(),
        fixture("anthropic_message.json")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_chat_long_tool_output_is_compressed_recoverably_and_protected_parts_stay() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), |s| s.budget = 2_000).await;
    let log = build_log(1_500);
    let request = json!({
        "model": "gpt-4.1",
        "x_custom": {"keep": "me", "n": 1},
        "messages": [
            {"role": "system", "content": "You are a careful build engineer."},
            {"role": "user", "content": "Find why the build fails."},
            {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "run", "arguments": "{\"cmd\":\"cargo test\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": log},
            {"role": "user", "content": "Which line of the log shows the failure?"},
        ]
    });
    let sent = serde_json::to_vec(&request).expect("test step");
    let response = proxy
        .post_with(
            "/v1/chat/completions?api-version=1",
            sent.clone(),
            &[("authorization", "Bearer sk-test")],
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "x-svc-optimization"), "rewritten");
    let ctx_id = header(&response, "x-svc-context-id");
    assert!(ctx_id.starts_with("ctx_"), "{ctx_id}");
    let before: usize = header(&response, "x-svc-tokens-before")
        .parse()
        .expect("a number header");
    let after: usize = header(&response, "x-svc-tokens-after")
        .parse()
        .expect("a number header");
    assert!(after <= 2_000 && after < before, "{before} -> {after}");

    let received = fake.last();
    assert_eq!(received.path, "/v1/chat/completions?api-version=1");
    assert_eq!(received.headers["authorization"], "Bearer sk-test");
    assert!(
        tokens(&received.body) < tokens(&sent),
        "forwarded tokens ≤ received"
    );
    let forwarded: Value = serde_json::from_slice(&received.body).expect("test step");
    for index in [0, 1, 2, 4] {
        assert_eq!(forwarded["messages"][index], request["messages"][index]);
    }
    assert_eq!(forwarded["x_custom"], request["x_custom"]);
    let tool = forwarded["messages"][3]["content"]
        .as_str()
        .expect("test step");
    assert!(
        tool.contains("ERROR config::parse: parse_config returned Ok(()) for an empty file"),
        "the error line the question needs is kept verbatim"
    );
    // Every elision is recoverable from the commit, byte for byte.
    let store = CommitStore::new(proxy.home());
    let ids = markers(tool);
    assert!(!ids.is_empty(), "{tool}");
    for id in ids {
        let recovered = store.recover(&ctx_id, &id).expect("test step");
        assert!(log.contains(&recovered), "chunk {id} is a piece of the log");
    }
}

/// Found by probing: when the protected parts alone were over the budget, a trailing tool
/// output got nothing and was elided whole, its one error line with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_output_keeps_its_error_line_when_the_protected_parts_exceed_the_budget() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), |s| s.budget = 2_000).await;
    let question = format!("Why does the service fail? {}", "Context. ".repeat(1_500));
    let request = json!({"model": "m", "messages": [
        {"role": "user", "content": question},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_log", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": build_log(6_000)},
    ]});
    let response = proxy
        .post(
            "/v1/chat/completions",
            serde_json::to_vec(&request).expect("json"),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert!(
        header(&response, "x-svc-optimization").starts_with("rewritten"),
        "{}",
        header(&response, "x-svc-optimization")
    );
    let forwarded: Value = serde_json::from_slice(&fake.last().body).expect("json");
    let tool = forwarded["messages"][2]["content"].as_str().expect("text");
    assert!(
        tool.contains("ERROR config::parse"),
        "the error line is kept: {}",
        &tool[..tool.len().min(400)]
    );
    assert_eq!(
        forwarded["messages"][0]["content"],
        request["messages"][0]["content"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_cached_prefix_and_latest_turn_stay_byte_stable() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), |s| s.budget = 1_500).await;
    let document = build_log(400);
    let later_log = build_log(800);
    let request = json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": [{"type": "text", "text": "You are a build engineer.", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": document, "cache_control": {"type": "ephemeral"}}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "cargo test"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": later_log}]},
            {"role": "assistant", "content": "I looked at the test log."},
            {"role": "user", "content": "Which line shows the failure?"},
        ]
    });
    let sent = serde_json::to_string(&request).expect("test step");
    let response = proxy.post("/v1/messages", sent.clone()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "x-svc-optimization"), "rewritten");
    let received = String::from_utf8(fake.last().body).expect("test step");
    // The cached prefix (up to the tool call after the cached document) is a byte-identical
    // prefix of the forwarded body.
    let cached_end = sent.find("toolu_1").expect("test step");
    assert!(sent[..cached_end].contains(&serde_json::to_string(&document).expect("test step")));
    assert_eq!(&received[..cached_end], &sent[..cached_end]);
    let forwarded: Value = serde_json::from_str(&received).expect("test step");
    assert_eq!(forwarded["messages"][4], request["messages"][4]);
    assert_ne!(
        forwarded["messages"][2]["content"][0]["content"],
        request["messages"][2]["content"][0]["content"]
    );
    assert!(tokens(received.as_bytes()) < tokens(sent.as_bytes()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn responses_and_gemini_requests_are_compressed_in_their_own_shape() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), |s| s.budget = 1_000).await;
    let log = build_log(600);
    let responses = json!({
        "model": "gpt-4.1",
        "instructions": "Be brief.",
        "input": [
            {"role": "user", "content": [{"type": "input_text", "text": "Why does the build fail?"}]},
            {"type": "function_call", "call_id": "c1", "name": "run", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": log},
        ]
    });
    let response = proxy
        .post(
            "/v1/responses",
            serde_json::to_vec(&responses).expect("test step"),
        )
        .await;
    assert_eq!(header(&response, "x-svc-optimization"), "rewritten");
    let forwarded: Value = serde_json::from_slice(&fake.last().body).expect("test step");
    assert_eq!(forwarded["input"][0], responses["input"][0]);
    assert_eq!(forwarded["input"][1], responses["input"][1]);
    assert!(
        forwarded["input"][2]["output"]
            .as_str()
            .expect("test step")
            .len()
            < log.len()
    );
    let body: Value = response.json().await.expect("a JSON body");
    assert_eq!(body["object"], "response");

    let gemini = json!({
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [
            {"role": "user", "parts": [{"text": log}]},
            {"role": "model", "parts": [{"text": "I read the log."}]},
            {"role": "user", "parts": [{"text": "Which line shows the failure?"}]},
        ],
        "generationConfig": {"temperature": 0.0}
    });
    let response = proxy
        .post_with(
            "/v1beta/models/gemini-2.0-flash:generateContent",
            serde_json::to_vec(&gemini).expect("test step"),
            &[("x-goog-api-key", "g-key")],
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "x-svc-optimization"), "rewritten");
    let received = fake.last();
    assert_eq!(
        received.path,
        "/v1beta/models/gemini-2.0-flash:generateContent"
    );
    assert_eq!(received.headers["x-goog-api-key"], "g-key");
    let forwarded: Value = serde_json::from_slice(&received.body).expect("test step");
    assert_eq!(forwarded["contents"][2], gemini["contents"][2]);
    assert_eq!(forwarded["generationConfig"], gemini["generationConfig"]);
    assert!(
        forwarded["contents"][0]["parts"][0]["text"]
            .as_str()
            .expect("test step")
            .len()
            < log.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forwarded_tokens_never_exceed_received_tokens() {
    let fake = Fake::start().await;
    for budget in [1, 50, 400, 3_000, 100_000] {
        let proxy = Proxy::start(&fake.url(), |s| s.budget = budget).await;
        for lines in [3, 40, 300] {
            let request = json!({"model": "m", "messages": [
                {"role": "system", "content": "sys"},
                {"role": "user", "content": build_log(lines)},
                {"role": "assistant", "content": build_log(lines / 2 + 1)},
                {"role": "tool", "tool_call_id": "x", "content": build_log(lines)},
                {"role": "user", "content": "short question?"},
            ]});
            let sent = serde_json::to_vec(&request).expect("test step");
            let response = proxy.post("/v1/chat/completions", sent.clone()).await;
            assert_eq!(response.status(), 200);
            let received = fake.last().body;
            assert!(
                tokens(&received) <= tokens(&sent),
                "budget {budget}, {lines} lines: {} > {}",
                tokens(&received),
                tokens(&sent)
            );
            if header(&response, "x-svc-optimization") != "rewritten" {
                assert_eq!(received, sent, "not rewritten means byte-identical");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_it_cannot_rewrite_safely_are_forwarded_unchanged_and_say_why() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), |s| s.budget = 10).await;
    let long = build_log(50);
    let cases = [
        (
            "/v1/messages",
            json!({"cache_control": {"type": "ephemeral"}, "messages": [{"role": "user", "content": long}, {"role": "user", "content": "q"}]}),
            "skipped; reason=top_level_cache_control",
        ),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "narrator", "content": long}]}),
            "skipped; reason=unrecognised_shape (messages[0].role)",
        ),
        (
            "/v1beta/models/g:generateContent",
            json!({"cachedContent": "cachedContents/abc", "contents": [{"role": "user", "parts": [{"text": long}]}]}),
            "skipped; reason=cached_content",
        ),
    ];
    for (path, request, expected) in cases {
        let sent = serde_json::to_vec(&request).expect("test step");
        let response = proxy.post(path, sent.clone()).await;
        assert_eq!(response.status(), 200, "{path}");
        assert_eq!(header(&response, "x-svc-optimization"), expected);
        assert_eq!(fake.last().body, sent);
    }
    // Found by probing: valid JSON nested past 128 levels was refused as "not valid JSON".
    let deep = format!(
        "{{\"messages\":[{{\"role\":\"user\",\"content\":\"hi\"}}],\"x\":{}1{}}}",
        "[".repeat(130),
        "]".repeat(130)
    );
    let response = proxy.post("/v1/chat/completions", deep.clone()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-svc-optimization"),
        "skipped; reason=nested_too_deep"
    );
    assert_eq!(fake.last().body, deep.into_bytes());
}

/// Found by probing: the witness sidecar and the optimisation switch answered any Origin and
/// Host, so a web page could pause optimisation or forge feedback, and a DNS-rebinding page
/// could read certificates (which hold prompt evidence). The proof routes already refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxys_own_routes_refuse_other_origins_and_hosts() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), |_| {}).await;
    let port = proxy.base.rsplit(':').next().expect("a port").to_string();
    let foreign: [&[(&str, &str)]; 3] = [
        &[("origin", "http://evil.example")],
        &[("sec-fetch-site", "cross-site")],
        &[("host", "evil.example")],
    ];
    for (method, path) in [
        ("POST", "/svc/optimization/pause"),
        ("GET", "/svc/status"),
        ("GET", "/witness"),
        ("POST", "/witness/wit_0/feedback"),
    ] {
        for headers in foreign {
            let mut request = proxy.client.request(
                method.parse().expect("a method"),
                format!("{}{path}", proxy.base),
            );
            for (name, value) in headers {
                let value = if *name == "host" {
                    format!("{value}:{port}")
                } else {
                    value.to_string()
                };
                request = request.header(*name, value);
            }
            let response = request.send().await.expect("answered");
            assert_eq!(response.status(), 403, "{method} {path} {headers:?}");
        }
    }
    assert!(!proxy.state.paused(), "no foreign request paused it");
    let own = proxy
        .client
        .get(format!("{}/svc/status", proxy.base))
        .header("origin", format!("http://127.0.0.1:{port}"))
        .send()
        .await
        .expect("answered");
    assert_eq!(own.status(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_bypasses_optimisation_and_status_counts_requests() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), |s| s.budget = 500).await;
    let request = json!({"model": "m", "messages": [
        {"role": "tool", "tool_call_id": "x", "content": build_log(300)},
        {"role": "user", "content": "q?"},
    ]});
    let sent = serde_json::to_vec(&request).expect("test step");
    let status: Value = proxy
        .client
        .post(format!("{}/svc/optimization/pause", proxy.base))
        .send()
        .await
        .expect("the request is answered")
        .json()
        .await
        .expect("the request is answered");
    assert_eq!(status["optimization"], "paused");
    let response = proxy.post("/v1/chat/completions", sent.clone()).await;
    assert_eq!(
        header(&response, "x-svc-optimization"),
        "unchanged; reason=paused"
    );
    assert_eq!(fake.last().body, sent);
    proxy
        .client
        .post(format!("{}/svc/optimization/enable", proxy.base))
        .send()
        .await
        .expect("the request is answered");
    let response = proxy.post("/v1/chat/completions", sent.clone()).await;
    assert_eq!(header(&response, "x-svc-optimization"), "rewritten");
    let status: Value = proxy
        .client
        .get(format!("{}/svc/status", proxy.base))
        .send()
        .await
        .expect("the request is answered")
        .json()
        .await
        .expect("the request is answered");
    assert_eq!(status["optimization"], "enabled");
    assert_eq!(status["counters"]["requests"], 2);
    assert_eq!(status["counters"]["rewritten"], 1);
    assert!(
        status["counters"]["tokens_saved"]
            .as_u64()
            .expect("test step")
            > 0
    );
    assert!(!proxy.state.paused());
    // Found by probing: the switch took any body (options a client believed it sent were
    // ignored); it takes none, or `{}`, as the dashboard's control API does.
    let refused = proxy
        .post("/svc/optimization/pause", r#"{"minutes": 5}"#)
        .await;
    assert_eq!(refused.status(), 400);
    assert!(!proxy.state.paused(), "not paused by a refused request");
    let accepted = proxy.post("/svc/optimization/pause", "{}").await;
    assert_eq!(accepted.status(), 200);
    assert!(proxy.state.paused());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_250k_token_message_is_forwarded_not_refused() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), |_| {}).await;
    let text = build_log(12_000);
    let request = json!({"model": "claude", "max_tokens": 10, "messages": [{"role": "user", "content": text}]});
    let sent = serde_json::to_vec(&request).expect("test step");
    let response = proxy.post("/v1/messages", sent.clone()).await;
    assert_eq!(response.status(), 200);
    let before: usize = header(&response, "x-svc-tokens-before")
        .parse()
        .expect("a number header");
    assert!(before >= 250_000, "{before} tokens");
    // The only text is the latest user turn, which is protected: forwarded as received.
    assert_eq!(
        header(&response, "x-svc-optimization"),
        "unchanged; reason=no_gain"
    );
    assert_eq!(fake.last().body, sent);
}

/// Found by probing: a known path asked with the wrong method got axum's empty 405, without
/// the provider's error shape or X-Svc-Error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_method_gets_a_405_in_the_providers_shape() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), |_| {}).await;
    for (method, path, allowed, pointer) in [
        ("GET", "/v1/chat/completions", "POST", "/error/message"),
        ("PUT", "/v1/messages", "POST", "/error/message"),
        ("POST", "/svc/status", "GET", "/error/message"),
    ] {
        let response = proxy
            .client
            .request(
                method.parse().expect("a method"),
                format!("{}{path}", proxy.base),
            )
            .send()
            .await
            .expect("answered");
        assert_eq!(response.status(), 405, "{method} {path}");
        assert_eq!(header(&response, "x-svc-error"), "method_not_allowed");
        assert_eq!(header(&response, "allow"), allowed);
        let body: Value = response.json().await.expect("a JSON body");
        let message = body
            .pointer(pointer)
            .and_then(Value::as_str)
            .unwrap_or_default();
        assert!(message.contains(&format!("use {allowed}")), "{body}");
    }
    assert_eq!(fake.count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_side_errors_come_in_each_providers_shape() {
    // An upstream that is down: bind a port, then free it.
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("test step");
        listener.local_addr().expect("test step")
    };
    let proxy = Proxy::start(&format!("http://{dead}"), |s| s.max_body_bytes = 4_096).await;
    let ok_body =
        r#"{"messages":[{"role":"user","content":"hi"}],"contents":[{"parts":[{"text":"hi"}]}]}"#;
    let down = proxy.post("/v1/messages", ok_body).await;
    assert_eq!(down.status(), 502);
    assert_eq!(
        down.headers()["x-svc-error"],
        "upstream_unreachable",
        "the proxy's own answer is marked, unlike a 502 passed through"
    );
    let body: Value = down.json().await.expect("a JSON body");
    assert_eq!(body["type"], "error");
    assert_eq!(body["error"]["type"], "api_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("test step")
            .contains("cannot reach")
    );

    let down = proxy.post("/v1/chat/completions", ok_body).await;
    assert_eq!(down.status(), 502);
    let body: Value = down.json().await.expect("a JSON body");
    assert_eq!(body["error"]["type"], "server_error");

    let down = proxy
        .post(
            "/v1beta/models/g:streamGenerateContent?alt=sse&key=AIzaSECRET",
            ok_body,
        )
        .await;
    assert_eq!(down.status(), 502);
    let body: Value = down.json().await.expect("a JSON body");
    assert_eq!(body["error"]["code"], 502);
    assert_eq!(body["error"]["status"], "UNAVAILABLE");
    // Found by probing: the key in the query was printed in full, twice.
    let message = body["error"]["message"].as_str().expect("a message");
    assert!(
        !message.contains("AIzaSECRET") && message.contains("key=REDACTED"),
        "{message}"
    );

    // Found by probing: a gzipped body was called "not UTF-8 JSON".
    let gzipped = proxy
        .post_with(
            "/v1/messages",
            b"\x1f\x8b\x08\x00".to_vec(),
            &[("content-encoding", "gzip")],
        )
        .await;
    assert_eq!(gzipped.status(), 415);
    let body: Value = gzipped.json().await.expect("a JSON body");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("gzip-encoded")),
        "{body}"
    );

    let bad = proxy.post("/v1/messages", "{not json").await;
    assert_eq!(bad.status(), 400);
    assert_eq!(bad.headers()["x-svc-error"], "invalid_request");
    let body: Value = bad.json().await.expect("a JSON body");
    assert_eq!(body["error"]["type"], "invalid_request_error");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("test step")
            .contains("not valid JSON")
    );

    let wrong_type = proxy
        .client
        .post(format!("{}/v1/chat/completions", proxy.base))
        .header("content-type", "text/plain")
        .body("hello")
        .send()
        .await
        .expect("the request is answered");
    assert_eq!(wrong_type.status(), 415);

    let big = format!(
        r#"{{"messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(10_000)
    );
    let too_large = proxy.post("/v1beta/models/g:generateContent", big).await;
    assert_eq!(too_large.status(), 413);
    let body: Value = too_large.json().await.expect("a JSON body");
    assert_eq!(body["error"]["status"], "INVALID_ARGUMENT");

    let unknown = proxy.post("/nowhere", ok_body).await;
    assert_eq!(unknown.status(), 404);
    let body: Value = unknown.json().await.expect("a JSON body");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("test step")
            .contains("/nowhere")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_pass_through_untouched_for_every_route() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), |_| {}).await;
    let cases = [
        (
            "/v1/messages",
            r#"{"stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
            "anthropic_stream.sse",
        ),
        (
            "/v1/chat/completions",
            r#"{"stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
            "openai_chat_stream.sse",
        ),
        (
            "/v1/responses",
            r#"{"stream":true,"input":"hi"}"#,
            "openai_responses_stream.sse",
        ),
        (
            "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse",
            r#"{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}"#,
            "gemini_stream.sse",
        ),
    ];
    for (path, body, name) in cases {
        let response = proxy.post(path, body).await;
        assert_eq!(response.status(), 200, "{path}");
        assert!(header(&response, "content-type").starts_with("text/event-stream"));
        assert_eq!(
            response.bytes().await.expect("a body").to_vec(),
            fixture(name),
            "{path}"
        );
    }
    assert_eq!(fake.count(), 4);
}

pub(crate) fn witness(mode: Mode, embed: bool) -> impl FnOnce(&mut ProxySettings) {
    move |settings| {
        settings.witness = Some(WitnessSettings {
            mode,
            profile: Profile::Rag,
            embed,
            nli: None,
        })
    }
}

pub(crate) const EVIDENCE_REQUEST: &str = r#"{"model":"m","messages":[{"role":"user","content":"The test parse_config_rejects_empty expects an error. parse_config returns Ok for an empty file. The build runs on Linux. Why does the build fail?"}]}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn witness_audit_adds_certificate_headers_and_serves_the_sidecar() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), witness(Mode::Audit, false)).await;
    let response = proxy.post("/v1/chat/completions", EVIDENCE_REQUEST).await;
    assert_eq!(response.status(), 200);
    let id = header(&response, "x-svc-witness-id");
    assert!(id.starts_with("wit_"), "{id}");
    assert_eq!(header(&response, "x-svc-witness-mode"), "audit");
    assert_eq!(header(&response, "x-svc-witness-rewritten"), "false");
    assert!(!header(&response, "x-svc-witness-status").is_empty());
    assert_eq!(
        response.bytes().await.expect("a body").to_vec(),
        fixture("openai_chat.json"),
        "audit never changes the body"
    );

    let certificate: Value = proxy
        .client
        .get(format!("{}/witness/{id}", proxy.base))
        .send()
        .await
        .expect("the request is answered")
        .json()
        .await
        .expect("the request is answered");
    assert_eq!(certificate["id"], id.as_str());
    assert!(certificate["proof_path"].is_array());
    let listing: Value = proxy
        .client
        .get(format!("{}/witness?limit=5", proxy.base))
        .send()
        .await
        .expect("the request is answered")
        .json()
        .await
        .expect("the request is answered");
    assert_eq!(listing["certificates"][0]["id"], id.as_str());
    let feedback = proxy
        .post(
            &format!("/witness/{id}/feedback"),
            r#"{"verdict":"false_positive"}"#,
        )
        .await;
    assert_eq!(feedback.status(), 200);
    let ack: Value = feedback.json().await.expect("a JSON body");
    assert_eq!(ack["acknowledged"], true);
    assert_eq!(ack["feedback"]["verdict"], "false_positive");
    let bad = proxy
        .post(&format!("/witness/{id}/feedback"), r#"{"verdict":"meh"}"#)
        .await;
    assert_eq!(bad.status(), 400);
    // Found by probing: a 400 MB note was taken whole (2.3 GB of memory) and written to the
    // feedback file; the sidecar takes 64 KiB.
    let huge = format!(
        r#"{{"verdict":"correct","note":"{}"}}"#,
        "a".repeat(1 << 20)
    );
    let refused = proxy.post(&format!("/witness/{id}/feedback"), huge).await;
    assert_eq!(refused.status(), 413);
    let body: Value = refused.json().await.expect("a JSON body");
    assert_eq!(body["error"]["type"], "request_too_large");
    let missing = proxy
        .client
        .get(format!(
            "{}/witness/wit_000000000000000000000000",
            proxy.base
        ))
        .send()
        .await
        .expect("the request is answered");
    assert_eq!(missing.status(), 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn witness_annotate_marks_unsupported_text_and_embed_puts_the_certificate_in_the_body() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), witness(Mode::Annotate, true)).await;
    // The evidence says nothing about the answer's claims: they are unsupported.
    let request = r#"{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"The weather in Lisbon was sunny on 3 May 2021. Why does the build fail?"}]}"#;
    let response = proxy.post("/v1/messages", request).await;
    assert_eq!(response.status(), 200);
    let id = header(&response, "x-svc-witness-id");
    assert_eq!(header(&response, "x-svc-witness-mode"), "annotate");
    let flagged: usize = header(&response, "x-svc-witness-flagged")
        .parse()
        .expect("a number header");
    let rewritten = header(&response, "x-svc-witness-rewritten");
    let body: Value = response.json().await.expect("a JSON body");
    assert_eq!(body["svc_witness"]["id"], id.as_str());
    assert_eq!(body["type"], "message", "still an Anthropic message");
    let original: Value =
        serde_json::from_slice(&fixture("anthropic_message.json")).expect("test step");
    if flagged > 0 {
        assert_eq!(rewritten, "true");
        assert_ne!(body["content"][0]["text"], original["content"][0]["text"]);
    }
    assert!(
        flagged > 0,
        "an answer with no support in the evidence is flagged"
    );
}

/// Found by probing: an answer whose text is JSON (without JSON mode) was left untouched, as
/// it must be, but the header said the strict mode had been applied.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_text_answer_is_audited_and_the_header_says_so() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), witness(Mode::Strict, false)).await;
    let response = proxy
        .post_with(
            "/v1/chat/completions",
            r#"{"model":"m","messages":[{"role":"user","content":"The build fails because the test parse_config_rejects_empty expects an error. Why does the build fail?"}]}"#,
            &[("x-fake-fixture", "openai_chat_json_answer.json")],
        )
        .await;
    assert_eq!(header(&response, "x-svc-witness-status"), "flagged");
    assert_eq!(header(&response, "x-svc-witness-mode"), "audit");
    assert_eq!(header(&response, "x-svc-witness-rewritten"), "false");
    assert_eq!(
        response.bytes().await.expect("a body").to_vec(),
        fixture("openai_chat_json_answer.json")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn witness_never_rewrites_tool_calls() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), witness(Mode::Strict, false)).await;
    for (path, name) in [
        ("/v1/messages", "anthropic_tool_use.json"),
        ("/v1/chat/completions", "openai_chat_tool_call.json"),
    ] {
        let response = proxy
            .post_with(path, EVIDENCE_REQUEST, &[("x-fake-fixture", name)])
            .await;
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "x-svc-witness-mode"), "audit", "{path}");
        assert!(header(&response, "x-svc-witness-id").starts_with("wit_"));
        assert_eq!(
            response.bytes().await.expect("a body").to_vec(),
            fixture(name)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_answers_are_certified_after_they_complete() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), witness(Mode::Audit, false)).await;
    let request = EVIDENCE_REQUEST.replace("\"model\":\"m\",", "\"model\":\"m\",\"stream\":true,");
    let response = proxy.post("/v1/chat/completions", request).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.bytes().await.expect("a body").to_vec(),
        fixture("openai_chat_stream.sse")
    );
    let mut listed = Value::Null;
    for _ in 0..50 {
        listed = proxy
            .client
            .get(format!("{}/witness", proxy.base))
            .send()
            .await
            .expect("the request is answered")
            .json()
            .await
            .expect("the request is answered");
        if listed["certificates"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let id = listed["certificates"][0]["id"]
        .as_str()
        .expect("a certificate");
    let certificate: Value = proxy
        .client
        .get(format!("{}/witness/{id}", proxy.base))
        .send()
        .await
        .expect("the request is answered")
        .json()
        .await
        .expect("the request is answered");
    assert!(
        certificate["claims"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_provider_paths_pass_through() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), |_| {}).await;
    let response = proxy
        .client
        .get(format!("{}/v1beta/models?pageSize=2", proxy.base))
        .send()
        .await
        .expect("the request is answered");
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-svc-optimization"),
        "unchanged; reason=not_a_prompt"
    );
    let received = fake.last();
    assert_eq!(received.method, "GET");
    assert_eq!(received.path, "/v1beta/models?pageSize=2");
    let response = proxy
        .client
        .get(format!("{}/v1/models", proxy.base))
        .send()
        .await
        .expect("the request is answered");
    assert_eq!(response.status(), 200);
    assert_eq!(fake.last().path, "/v1/models");
}

#[test]
fn svc_proxy_rejects_bad_flags_with_usage_errors() {
    let state = tempfile::tempdir().expect("test step");
    let run = crate::harness::run(crate::harness::svc(state.path()).args([
        "proxy",
        "--upstream-openai",
        "ftp://x",
    ]));
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("not an http"), "{}", run.stderr);
    // Found by probing: these messages printed the URL's password and secret query values.
    let run = crate::harness::run(crate::harness::svc(state.path()).args([
        "proxy",
        "--upstream-openai",
        "http://admin:PASSWORDXYZ@127.0.0.1:1/base?token=TOKQ1",
    ]));
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(
        run.stderr
            .contains("http://REDACTED@127.0.0.1:1/base?token=REDACTED"),
        "{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("PASSWORDXYZ") && !run.stderr.contains("TOKQ1"),
        "{}",
        run.stderr
    );
    // Each refused with exit 2 and the reason. Found by probing: a profile without --witness
    // was ignored silently, a root with a query swallowed every request path, and a body limit
    // of 0 answered every request 413.
    for (args, reason) in [
        (&["--witness-embed"][..], "need --witness"),
        (&["--witness-profile", "qa"][..], "need --witness"),
        (
            &["--upstream-openai", "http://127.0.0.1:8000?x=1"][..],
            "has a query",
        ),
        (&["--max-body-bytes", "0"][..], "at least 1"),
        // Found by probing: a file as the state directory started a proxy that answered
        // without its witness headers.
        (
            &["--witness", "audit", "--state-dir", "Cargo.toml"][..],
            "is not a directory",
        ),
    ] {
        let run = crate::harness::run(crate::harness::svc(state.path()).arg("proxy").args(args));
        assert_eq!(run.code, 2, "{args:?}");
        assert!(run.stderr.contains(reason), "{args:?}: {}", run.stderr);
    }
}

#[test]
fn svc_proxy_serves_on_the_port_it_prints() {
    use std::io::{BufRead, BufReader};
    let state = tempfile::tempdir().expect("test step");
    let mut child = crate::harness::svc(state.path())
        .args([
            "proxy",
            "--port",
            "0",
            "--upstream-openai",
            "http://127.0.0.1:9",
        ])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("test step");
    let mut stderr = BufReader::new(child.stderr.take().expect("test step"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("test step");
    let address = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_default()
        .to_string();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("test step");
        runtime.block_on(async {
            svc::witness::nli::install_crypto_provider();
            let response = reqwest::Client::new()
                .post(format!("http://{address}/v1/chat/completions"))
                .header("content-type", "application/json")
                .body(r#"{"messages":[{"role":"user","content":"hi"}]}"#)
                .send()
                .await
                .expect("the request is answered");
            assert_eq!(response.status(), 502, "upstream port 9 is closed");
            let body: Value = response.json().await.expect("a JSON body");
            assert_eq!(body["error"]["type"], "server_error");
        });
        let mut log_line = String::new();
        stderr.read_line(&mut log_line).expect("test step");
        assert!(
            log_line.starts_with("svc proxy: openai.chat_completions 502"),
            "{log_line}"
        );
    }));
    let _ = child.kill();
    let _ = child.wait();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_and_annotate_streams_are_verified_and_re_emitted_in_the_providers_format() {
    use svc::proxy::provider::Route;
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), witness(Mode::Annotate, false)).await;
    let question = "The weather in Lisbon was sunny on 3 May 2021. Why does the build fail?";
    let cases = [
        (
            "/v1/messages",
            json!({"stream": true, "messages": [{"role": "user", "content": question}]}),
            Route::AnthropicMessages,
            "event: message_stop",
        ),
        (
            "/v1/chat/completions",
            json!({"stream": true, "messages": [{"role": "user", "content": question}]}),
            Route::OpenaiChat,
            "data: [DONE]",
        ),
        (
            "/v1/responses",
            json!({"stream": true, "input": question}),
            Route::OpenaiResponses,
            "event: response.completed",
        ),
        (
            "/v1beta/models/gemini-2.0-flash:streamGenerateContent?alt=sse",
            json!({"contents": [{"role": "user", "parts": [{"text": question}]}]}),
            Route::GeminiGenerate,
            "finishReason",
        ),
    ];
    for (path, request, route, tail) in cases {
        let response = proxy
            .post(path, serde_json::to_vec(&request).expect("test step"))
            .await;
        assert_eq!(response.status(), 200, "{path}");
        assert!(header(&response, "x-svc-witness-id").starts_with("wit_"));
        assert_eq!(header(&response, "x-svc-witness-mode"), "annotate");
        assert_eq!(
            header(&response, "x-svc-witness-rewritten"),
            "true",
            "{path}"
        );
        assert!(header(&response, "content-type").starts_with("text/event-stream"));
        let body = response.bytes().await.expect("a body");
        let text = String::from_utf8_lossy(&body).to_string();
        assert!(text.contains(tail), "{path}: {text}");
        let answer = route.stream_answer(&svc::proxy::check::stream_events(&body));
        assert!(
            answer.text.contains("unverified"),
            "{path}: {}",
            answer.text
        );
        assert!(
            answer.text.contains("parse_config"),
            "{path}: {}",
            answer.text
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_transcript_is_forwarded_60_percent_smaller_with_every_needed_line_verbatim() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), |s| s.budget = 24_000).await;
    let sent = fixture("agent-transcript.json");
    let response = proxy.post("/v1/chat/completions", sent.clone()).await;
    assert_eq!(response.status(), 200);
    let before: usize = header(&response, "x-svc-tokens-before")
        .parse()
        .expect("a number header");
    let after: usize = header(&response, "x-svc-tokens-after")
        .parse()
        .expect("a number header");
    assert!(before > 55_000, "{before}");
    assert!(
        after * 10 <= before * 4,
        "{before} -> {after}: at least 60% fewer"
    );
    let forwarded: Value = serde_json::from_slice(&fake.last().body).expect("JSON");
    let text: String = forwarded["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n");
    // The task and the question arrive byte-identical.
    let received: Value = serde_json::from_slice(&sent).expect("JSON");
    for at in [
        1,
        received["messages"].as_array().expect("messages").len() - 1,
    ] {
        assert_eq!(forwarded["messages"][at], received["messages"][at]);
    }
    for line in [
        "thread 'context::compress::messages::tests::keeps_latest_user' panicked at src/context/compress/messages.rs:212:9:",
        "assertion `left == right` failed: the latest user turn was compressed",
        "test context::compress::messages::tests::keeps_latest_user ... FAILED",
        "pub fn compress_messages_keeping(",
        "    let protected = |i: usize| keep.get(i).copied().unwrap_or(false);",
    ] {
        assert!(text.contains(line), "kept verbatim: {line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn strict_witness_never_cuts_an_answer_when_the_request_could_not_be_read() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), witness(Mode::Strict, false)).await;
    // A top-level cache_control: the proxy leaves the request alone and has no evidence list.
    let request = r#"{"cache_control":{"type":"ephemeral"},"max_tokens":64,"messages":[{"role":"user","content":"Why does the build fail?"}]}"#;
    let response = proxy.post("/v1/messages", request).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-svc-optimization"),
        "skipped; reason=top_level_cache_control"
    );
    assert_eq!(header(&response, "x-svc-witness-mode"), "audit");
    assert_eq!(
        response.bytes().await.expect("a body").to_vec(),
        fixture("anthropic_message.json")
    );
}
