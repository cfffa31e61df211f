//! The proxy against upstreams that misbehave: error statuses and redirects passed back as
//! they came, a silent upstream, bodies and streams cut off, answers encoded unasked, paths
//! that would leave the upstream's root, and clients that go away before their answer.

use std::time::Duration;

use serde_json::Value;
use svc::proxy::ProxySettings;
use svc::witness::Mode;

use crate::proxy::{EVIDENCE_REQUEST, Fake, Proxy, fixture, header, raw_upstream, witness};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_errors_pass_through_with_status_and_body() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), |_| {}).await;
    let cases = [
        ("/v1/messages", "anthropic_error.json", "429"),
        ("/v1/chat/completions", "openai_error.json", "401"),
        (
            "/v1beta/models/g:generateContent",
            "gemini_error.json",
            "400",
        ),
    ];
    for (path, name, status) in cases {
        let response = proxy
            .post_with(
                path,
                r#"{"messages":[{"role":"user","content":"hi"}],"contents":[{"parts":[{"text":"hi"}]}]}"#,
                &[("x-fake-fixture", name), ("x-fake-status", status)],
            )
            .await;
        assert_eq!(response.status().as_u16().to_string(), status, "{path}");
        assert!(
            response.headers().get("x-svc-error").is_none(),
            "a provider's own error is not marked as the proxy's"
        );
        assert_eq!(
            response.bytes().await.expect("a body").to_vec(),
            fixture(name)
        );
    }
}

/// Found by probing: the proxy followed an upstream's redirect, so a POST became a body-less
/// GET answered 200 as if it had worked, and the API key went to the other host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_redirect_goes_back_to_the_client_unfollowed() {
    let fake = Fake::start().await;
    let elsewhere = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), |_| {}).await;
    let target = format!("{}/v1/messages", elsewhere.url());
    for status in ["301", "302", "307"] {
        let response = proxy
            .post_with(
                "/v1/messages",
                r#"{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"}]}"#,
                &[
                    ("x-api-key", "sk-secret"),
                    ("x-fake-status", status),
                    ("x-fake-location", &target),
                ],
            )
            .await;
        assert_eq!(response.status().as_u16().to_string(), status);
        assert_eq!(header(&response, "location"), target);
    }
    assert_eq!(
        elsewhere.count(),
        0,
        "nothing reached the redirect's target"
    );
}

/// Found by probing: `/v1/%2e%2e/%2e%2e/secret` reached the upstream as `/secret`, out of the
/// configured root's path, with the client's key. Dot segments are refused before anything is
/// sent. (A raw socket: HTTP clients resolve dot segments themselves.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_path_with_dot_segments_is_refused_not_forwarded() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let fake = Fake::start().await;
    let proxy = Proxy::start(&format!("{}/openai-base", fake.url()), |_| {}).await;
    let address = proxy.base.trim_start_matches("http://").to_string();
    for path in [
        "/v1/%2e%2e/%2e%2e/secret",
        "/v1/%2E%2E/secret",
        "/v1beta/../v1/x",
        "/v1/./chat/completions",
    ] {
        let mut socket = tokio::net::TcpStream::connect(&address)
            .await
            .expect("connect");
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: {address}\r\nauthorization: Bearer K\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{{}}"
        );
        socket.write_all(request.as_bytes()).await.expect("send");
        let mut answer = String::new();
        socket.read_to_string(&mut answer).await.expect("read");
        assert!(answer.starts_with("HTTP/1.1 400"), "{path}: {answer}");
        assert!(answer.contains("segment"), "{path}: {answer}");
    }
    assert_eq!(fake.count(), 0, "nothing reached the upstream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_upstream_gets_a_timeout_error_not_a_hung_client() {
    let fake = Fake::start().await;
    let proxy = Proxy::start(&fake.url(), |s| s.read_timeout = Duration::from_millis(300)).await;
    let response = proxy
        .post_with(
            "/v1/chat/completions",
            r#"{"messages":[{"role":"user","content":"hi"}]}"#,
            &[("x-fake-hang", "1")],
        )
        .await;
    assert_eq!(response.status(), 504);
    let body: Value = response.json().await.expect("a JSON body");
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("test step")
            .contains("did not answer in time")
    );
}

/// Found by probing: an answer whose body broke off after its headers was reported as "cannot
/// reach the upstream … check --upstream-*", sending the user to a configuration that was fine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_cut_off_after_its_headers_is_not_called_unreachable() {
    // Closed after the first bytes, 385 short of the length it announces.
    let upstream = raw_upstream(
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 400\r\n\r\n{\"id\":\"chatcmpl".to_vec(),
    )
    .await;
    let proxy = Proxy::start(&upstream, witness(Mode::Audit, false)).await;
    let response = proxy
        .post(
            "/v1/chat/completions",
            r#"{"messages":[{"role":"user","content":"hi"}]}"#,
        )
        .await;
    assert_eq!(response.status(), 502);
    assert_eq!(header(&response, "x-svc-error"), "upstream_incomplete");
    let body: Value = response.json().await.expect("a JSON body");
    let message = body["error"]["message"].as_str().expect("a message");
    assert!(
        message.contains("answered 200 OK but its body broke off")
            && !message.contains("check --upstream"),
        "{message}"
    );
}

/// Found by probing: an upstream stream cut off (no final chunk) reached the client short of
/// events the upstream had sent: hyper dropped its unsent buffer when the body failed right
/// behind the last chunk. Every event must arrive, with or without the witness.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_off_upstream_reaches_the_client_whole_up_to_the_cut() {
    let mut answer =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec();
    for i in 0..5 {
        let event =
            format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"part {i} \"}}}}]}}\n\n");
        answer.extend(format!("{:x}\r\n{event}\r\n", event.len()).into_bytes());
    }
    // Closed after the fifth event, without the final empty chunk.
    let upstream = raw_upstream(answer).await;
    for configure in [
        Box::new(|_: &mut ProxySettings| {}) as Box<dyn FnOnce(&mut ProxySettings)>,
        Box::new(witness(Mode::Audit, false)),
    ] {
        let proxy = Proxy::start(&upstream, configure).await;
        for _ in 0..8 {
            let mut response = proxy
                .post(
                    "/v1/chat/completions",
                    r#"{"stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
                )
                .await;
            let mut received = Vec::new();
            while let Ok(Some(chunk)) = response.chunk().await {
                received.extend_from_slice(&chunk);
            }
            let text = String::from_utf8_lossy(&received);
            assert_eq!(text.matches("data: ").count(), 5, "{text}");
        }
    }
}

/// Found by probing: a client that went away before the answer (the upstream was still called,
/// a paid request) left no log line and no count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_goes_away_is_still_counted() {
    let upstream = crate::serve(axum::Router::new().fallback(|| async {
        tokio::time::sleep(Duration::from_secs(3)).await;
        "late"
    }))
    .await;
    let proxy = Proxy::start(&upstream, |_| {}).await;
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .expect("client");
    let gone = impatient
        .post(format!("{}/v1/chat/completions", proxy.base))
        .header("content-type", "application/json")
        .body(r#"{"messages":[{"role":"user","content":"hi"}]}"#)
        .send()
        .await;
    assert!(gone.is_err(), "the client gave up");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let requests = loop {
        let status: Value = proxy
            .client
            .get(format!("{}/svc/status", proxy.base))
            .send()
            .await
            .expect("status")
            .json()
            .await
            .expect("json");
        let requests = status["counters"]["requests"].as_u64().unwrap_or(0);
        if requests > 0 || std::time::Instant::now() > deadline {
            break requests;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(requests, 1);
}

/// Found by probing: an upstream that gzipped its answer (unasked) went through strict mode
/// unchecked, its unsupported claims included, logged as "response is not JSON".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_encoded_answer_is_withheld_in_strict_mode_and_passed_on_unchecked_otherwise() {
    let encoded: &'static [u8] = b"\x1f\x8b\x08\x00gzipped bytes";
    let router = axum::Router::new().fallback(move || async move {
        (
            [
                ("content-type", "application/json"),
                ("content-encoding", "gzip"),
            ],
            encoded,
        )
    });
    let upstream = crate::serve(router).await;
    let strict = Proxy::start(&upstream, witness(Mode::Strict, false)).await;
    let response = strict.post("/v1/chat/completions", EVIDENCE_REQUEST).await;
    assert_eq!(response.status(), 502);
    assert_eq!(header(&response, "x-svc-error"), "upstream_encoded");
    let audit = Proxy::start(&upstream, witness(Mode::Audit, false)).await;
    let response = audit.post("/v1/chat/completions", EVIDENCE_REQUEST).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "content-encoding"), "gzip");
    assert_eq!(header(&response, "x-svc-witness-status"), "", "not checked");
    assert_eq!(&response.bytes().await.expect("body")[..], encoded);
}

/// A whole HTTP response carrying `events` as a chunked event stream.
pub(crate) fn event_stream(events: &[String]) -> Vec<u8> {
    let mut answer =
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
            .to_vec();
    for event in events {
        answer.extend(format!("{:x}\r\n{event}\r\n", event.len()).into_bytes());
    }
    answer.extend(b"0\r\n\r\n");
    answer
}

/// Found by probing: a stream of two choices (`n: 2`), or two Anthropic text blocks, was read
/// as one text, and strict moved one choice's words into the other (and emptied it). Several
/// texts are audited only and come back byte-identical.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_of_several_choices_or_blocks_is_audited_and_returned_as_sent() {
    let evidence = "The Halden Observatory was founded in 1921 by Ingrid Solberg.";
    let request = format!(
        r#"{{"stream":true,"messages":[{{"role":"system","content":"{evidence}"}},{{"role":"user","content":"Tell me about it."}}]}}"#
    );
    let mut events = Vec::new();
    for text in [
        "The Halden Observatory was founded ",
        "in 1850 by Per Anker. ",
    ] {
        for index in 0..2 {
            events.push(format!(
                "data: {{\"choices\":[{{\"index\":{index},\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n"
            ));
        }
    }
    events.push("data: [DONE]\n\n".to_string());
    let upstream = raw_upstream(event_stream(&events)).await;
    let proxy = Proxy::start(&upstream, witness(Mode::Strict, false)).await;
    let response = proxy.post("/v1/chat/completions", request.clone()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "x-svc-witness-mode"), "audit");
    let body = response.bytes().await.expect("body");
    assert_eq!(String::from_utf8_lossy(&body), events.concat());

    let mut blocks = Vec::new();
    for (index, text) in [(0, evidence), (1, "It was built on the moon in 1850.")] {
        blocks.push(format!(
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":{index},\"delta\":{{\"type\":\"text_delta\",\"text\":\"{text}\"}}}}\n\n"
        ));
    }
    blocks.push("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".to_string());
    let upstream = raw_upstream(event_stream(&blocks)).await;
    let proxy = Proxy::start(&upstream, witness(Mode::Strict, false)).await;
    let response = proxy
        .post(
            "/v1/messages",
            format!(
                r#"{{"stream":true,"max_tokens":50,"system":"{evidence}","messages":[{{"role":"user","content":"Tell me about it."}}]}}"#
            ),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "x-svc-witness-mode"), "audit");
    let body = response.bytes().await.expect("body");
    assert_eq!(String::from_utf8_lossy(&body), blocks.concat());
}

/// Found by probing: SIGTERM (then SIGINT) left the proxy running for minutes while a request
/// was open (a strict check of a multi-megabyte answer). Open requests get a grace period.
#[test]
fn a_signal_stops_the_proxy_while_a_request_is_still_open() {
    use std::io::{BufRead, BufReader, Write};
    let upstream = crate::serve_on_thread(axum::Router::new().fallback(|| async {
        tokio::time::sleep(Duration::from_secs(600)).await;
        "late"
    }));
    let state = tempfile::tempdir().expect("state");
    let mut child = crate::harness::svc(state.path())
        .args(["proxy", "--port", "0", "--upstream-openai"])
        .arg(format!("http://{upstream}"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("the listening line");
    let address = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .expect("an address")
        .to_string();
    let body = r#"{"messages":[{"role":"user","content":"hi"}]}"#;
    let mut client = std::net::TcpStream::connect(&address).expect("connect");
    write!(
        client,
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .expect("send");
    std::thread::sleep(Duration::from_millis(500));
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(killed.success());
    // The upstream answers in ten minutes; the proxy must be gone long before.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "{status:?}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the proxy did not stop with a request open"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(client);
    // Found by probing: the request the stop cut was logged "the client went away".
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).expect("stderr");
    assert!(
        rest.contains(" 499 ") && rest.contains("error: the proxy stopped before the answer"),
        "{rest}"
    );
}
