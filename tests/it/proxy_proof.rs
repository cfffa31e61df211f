//! The proof sidecar of the proxy over real sockets: the prepare → advance → inspect protocol of
//! `svc proof` (same sessions, same bytes), idempotency replays through HTTP, and every refusal
//! of a caller that is not same-origin localhost (requests written by hand, so the Host, Origin
//! and peer address are exactly the ones under test).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use serde_json::{Value, json};
use svc::proof::FixedPointStatus;
use svc::proof::protocol::{AdvanceResponse, PrepareResponse, SessionView};
use svc::proof::session::SessionState;
use svc::proxy::{ProxySettings, ProxyState, app, make_service};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::harness::{root, run, svc};

const QUERY: &str = "When did the bridge open to traffic?";
const GUESS: &str = "The bridge opened to traffic in 1932. The botanic garden was founded in 1900.";
const REVISED: &str = "The bridge opened to traffic in 1932. The botanic garden was founded in 1816 beside the harbour.";

struct Sidecar {
    address: SocketAddr,
    home: tempfile::TempDir,
}

impl Sidecar {
    /// The proxy app on `bind` (port 0), served with connection info unless `plain`.
    async fn start(bind: IpAddr, plain: bool) -> Sidecar {
        let home = tempfile::tempdir().expect("test step");
        let state: Arc<ProxyState> =
            ProxyState::new(ProxySettings::new(home.path().to_path_buf()), None)
                .expect("test step");
        let listener = tokio::net::TcpListener::bind(SocketAddr::new(bind, 0))
            .await
            .expect("test step");
        let address = listener.local_addr().expect("test step");
        tokio::spawn(async move {
            if plain {
                let _ = axum::serve(listener, app(state)).await;
            } else {
                let _ = axum::serve(listener, make_service(state)).await;
            }
        });
        Sidecar { address, home }
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.address.port())
    }

    fn sessions(&self) -> usize {
        std::fs::read_dir(self.home.path().join("proof/sessions"))
            .map(|entries| entries.count())
            .unwrap_or(0)
    }

    /// POSTs `body` to `path` with the right Host and the extra header lines.
    async fn post(&self, path: &str, body: &Value, extra: &[&str]) -> (u16, String) {
        let mut head = vec![format!("Host: {}", self.host())];
        head.extend(extra.iter().map(|line| line.to_string()));
        http(self.address, None, "POST", path, &head, &body.to_string()).await
    }

    async fn inspect(&self, session: &str) -> (u16, String) {
        let head = vec![format!("Host: {}", self.host())];
        let path = format!("/proof/inspect?session_id={session}");
        http(self.address, None, "GET", &path, &head, "").await
    }
}

/// One HTTP/1.1 exchange written by hand from `local` (any loopback address when `None`);
/// returns the status and the body.
async fn http(
    address: SocketAddr,
    local: Option<IpAddr>,
    method: &str,
    path: &str,
    head: &[String],
    body: &str,
) -> (u16, String) {
    let socket = tokio::net::TcpSocket::new_v4().expect("test step");
    if let Some(local) = local {
        socket
            .bind(SocketAddr::new(local, 0))
            .expect("bind the client");
    }
    let mut stream = socket.connect(address).await.expect("connect");
    let mut request = format!("{method} {path} HTTP/1.1\r\n");
    for line in head {
        request.push_str(line);
        request.push_str("\r\n");
    }
    request.push_str(&format!(
        "Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    stream
        .write_all(request.as_bytes())
        .await
        .expect("test step");
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.expect("test step");
    let answer = String::from_utf8(answer).expect("UTF-8 answer");
    let status: u16 = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    let (headers, body) = answer.split_once("\r\n\r\n").expect("a head");
    let body = if headers
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_string()
    };
    (status, body)
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).expect("chunk size");
        if size == 0 {
            break;
        }
        out.push_str(&after[..size]);
        rest = &after[size + 2..];
    }
    out
}

fn documents() -> Value {
    let read = |name: &str| {
        std::fs::read_to_string(root().join("fixtures/proof/docs").join(name)).expect("fixture")
    };
    json!([
        {"name": "city.md", "text": read("city.md")},
        {"name": "harbour.md", "text": read("harbour.md")},
    ])
}

fn prepare_body() -> Value {
    json!({"documents": documents(), "query": QUERY, "budget": 30})
}

fn error_message(body: &str) -> String {
    let value: Value = serde_json::from_str(body).expect("an error body");
    value["error"]["message"]
        .as_str()
        .expect("error.message")
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proof_sidecar_prepare_advance_inspect_round_trip_matches_the_cli() {
    let sidecar = Sidecar::start(IpAddr::V4(Ipv4Addr::LOCALHOST), false).await;
    let (status, body) = sidecar.post("/proof/prepare", &prepare_body(), &[]).await;
    assert_eq!(status, 200, "{body}");
    let prepared: PrepareResponse = serde_json::from_str(&body).expect("prepare JSON");
    assert!(prepared.session_id.starts_with("pgs_"));
    assert_eq!(prepared.state, SessionState::AwaitingDraft);
    assert!(prepared.ctx_id.starts_with("ctx_"));
    assert!(
        prepared.omitted_chunks > 0,
        "a 30-token budget leaves chunks out"
    );
    assert_eq!(prepared.request.query, QUERY);
    assert!(!prepared.request.stable_context_prefix.contains("1816"));

    // The guess: the loop recovers the omitted chunk that settles the year and asks again.
    let session = prepared.session_id.clone();
    let advance = json!({"session_id": session, "output": GUESS});
    let (status, body) = sidecar.post("/proof/advance", &advance, &[]).await;
    assert_eq!(status, 200, "{body}");
    let step: AdvanceResponse = serde_json::from_str(&body).expect("advance JSON");
    assert_eq!(
        (step.state, step.round, step.revision),
        (SessionState::AwaitingDraft, 0, 1)
    );
    let next = step.request.expect("a next request");
    assert_eq!(
        next.stable_context_prefix,
        prepared.request.stable_context_prefix
    );
    assert_eq!(next.appended_evidence.len(), 1);
    assert!(next.appended_evidence[0].text.contains("founded in 1816"));

    let advance = json!({"session_id": session, "output": REVISED});
    let (status, body) = sidecar.post("/proof/advance", &advance, &[]).await;
    assert_eq!(status, 200, "{body}");
    let done: AdvanceResponse = serde_json::from_str(&body).expect("advance JSON");
    assert_eq!(done.state, SessionState::Finished);
    assert_eq!(done.status, Some(FixedPointStatus::Supported));
    assert_eq!(done.result.expect("a result").rounds.len(), 2);

    let (status, body) = sidecar.inspect(&session).await;
    assert_eq!(status, 200, "{body}");
    let view: SessionView = serde_json::from_str(&body).expect("inspect JSON");
    assert_eq!(view.state, SessionState::Finished);
    assert_eq!(view.rounds, 2);
    assert_eq!(view.recovered_chunk_ids, vec!["city.md#L5-7".to_string()]);

    // The same protocol: the CLI over the proxy's state directory sees the same session.
    let out = run(svc(sidecar.home.path()).args(["proof", "inspect", &session]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let cli: SessionView = serde_json::from_str(&out.stdout).expect("CLI inspect JSON");
    assert_eq!(cli, view);

    // A finished session takes no more drafts; unknown and malformed ids are named.
    let (status, body) = sidecar.post("/proof/advance", &advance, &[]).await;
    assert_eq!(status, 409, "{body}");
    assert!(error_message(&body).contains("is finished"), "{body}");
    let (status, body) = sidecar.inspect("pgs_0123456789abcdef").await;
    assert_eq!(status, 404, "{body}");
    let (status, body) = sidecar.inspect("not-a-session").await;
    assert_eq!(status, 400, "{body}");
    assert!(error_message(&body).contains("not a session id"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proof_sidecar_idempotency_keys_replay_through_http() {
    let sidecar = Sidecar::start(IpAddr::V4(Ipv4Addr::LOCALHOST), false).await;
    // Prepare: the same key and input replay the original bytes, once the session exists.
    let (status, first) = sidecar
        .post(
            "/proof/prepare",
            &prepare_body(),
            &["Idempotency-Key: prep-1"],
        )
        .await;
    assert_eq!(status, 200, "{first}");
    let mut keyed_in_body = prepare_body();
    keyed_in_body["idempotency_key"] = json!("prep-1");
    let (status, again) = sidecar.post("/proof/prepare", &keyed_in_body, &[]).await;
    assert_eq!((status, &again), (200, &first));
    assert_eq!(sidecar.sessions(), 1, "a replay opens no new session");
    let mut other = prepare_body();
    other["query"] = json!("When did the tunnel open?");
    let (status, body) = sidecar
        .post("/proof/prepare", &other, &["Idempotency-Key: prep-1"])
        .await;
    assert_eq!(status, 409, "{body}");
    assert!(error_message(&body).contains("different input"), "{body}");
    let (status, body) = sidecar
        .post(
            "/proof/prepare",
            &keyed_in_body,
            &["Idempotency-Key: prep-2"],
        )
        .await;
    assert_eq!(status, 400, "header and body keys differ: {body}");

    // Advance: replayed at a later revision, refused with other model text.
    let session = serde_json::from_str::<PrepareResponse>(&first)
        .expect("prepare JSON")
        .session_id;
    let advance = |output: &str| json!({"session_id": session, "output": output});
    let (status, step) = sidecar
        .post(
            "/proof/advance",
            &advance(GUESS),
            &["Idempotency-Key: draft-1"],
        )
        .await;
    assert_eq!(status, 200, "{step}");
    let (status, body) = sidecar
        .post(
            "/proof/advance",
            &advance(REVISED),
            &["Idempotency-Key: draft-2"],
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, replay) = sidecar
        .post(
            "/proof/advance",
            &advance(GUESS),
            &["Idempotency-Key: draft-1"],
        )
        .await;
    assert_eq!(
        (status, &replay),
        (200, &step),
        "replayed after the session finished"
    );
    let (status, body) = sidecar
        .post(
            "/proof/advance",
            &advance("Another draft."),
            &["Idempotency-Key: draft-1"],
        )
        .await;
    assert_eq!(status, 409, "{body}");
    let (_, body) = sidecar.inspect(&session).await;
    let view: SessionView = serde_json::from_str(&body).expect("inspect JSON");
    assert_eq!(view.idempotency_keys, vec!["draft-1", "draft-2"]);
    assert_eq!(view.revision, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proof_sidecar_refuses_callers_that_are_not_same_origin_localhost() {
    let sidecar = Sidecar::start(IpAddr::V4(Ipv4Addr::LOCALHOST), false).await;
    let port = sidecar.address.port();
    let body = prepare_body().to_string();
    let cases: Vec<(&str, Vec<String>, &str)> = vec![
        ("no Host", vec![], "no Host header"),
        (
            "DNS rebinding",
            vec![format!("Host: evil.example:{port}")],
            "DNS rebinding",
        ),
        (
            "another port",
            vec![format!("Host: 127.0.0.1:{}", port.wrapping_add(1))],
            "is not this proxy",
        ),
        (
            "foreign origin",
            vec![
                format!("Host: 127.0.0.1:{port}"),
                "Origin: http://evil.example".into(),
            ],
            "not this proxy's origin",
        ),
        (
            "another localhost origin",
            vec![
                format!("Host: localhost:{port}"),
                "Origin: http://localhost:3000".into(),
            ],
            "not this proxy's origin",
        ),
        (
            "opaque origin",
            vec![format!("Host: localhost:{port}"), "Origin: null".into()],
            "not this proxy's origin",
        ),
        (
            "cross-site fetch",
            vec![
                format!("Host: localhost:{port}"),
                "Sec-Fetch-Site: cross-site".into(),
            ],
            "another site",
        ),
    ];
    for (name, head, says) in &cases {
        for (method, path, sent) in [
            ("POST", "/proof/prepare", body.as_str()),
            ("GET", "/proof/inspect?session_id=pgs_00", ""),
        ] {
            let (status, answer) = http(sidecar.address, None, method, path, head, sent).await;
            assert_eq!(status, 403, "{name} {path}: {answer}");
            assert!(error_message(&answer).contains(says), "{name}: {answer}");
        }
    }
    assert_eq!(sidecar.sessions(), 0, "a refused caller changes nothing");
    // The same-origin browser form passes.
    let head = vec![
        format!("Host: localhost:{port}"),
        format!("Origin: http://localhost:{port}"),
        "Sec-Fetch-Site: same-origin".into(),
    ];
    let (status, answer) = http(
        sidecar.address,
        None,
        "POST",
        "/proof/prepare",
        &head,
        &body,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(sidecar.sessions(), 1);

    // Served without connection info, the app cannot tell who calls: it refuses everyone.
    let plain = Sidecar::start(IpAddr::V4(Ipv4Addr::LOCALHOST), true).await;
    let (status, answer) = plain.post("/proof/prepare", &prepare_body(), &[]).await;
    assert_eq!(status, 403, "{answer}");
    assert!(error_message(&answer).contains("unknown"), "{answer}");
}

/// This machine's address on its default route, when it has one that is not loopback.
fn outside_address() -> Option<IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    // Connecting a UDP socket sends nothing; it only picks the outgoing interface.
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proof_sidecar_refuses_a_caller_from_another_interface() {
    let Some(outside) = outside_address() else {
        // Only loopback here: no second interface to call from (the unit test
        // `every_hole_is_refused_by_name` covers the check itself).
        eprintln!("no non-loopback interface on this machine; refusal over a socket not exercised");
        return;
    };
    // Listening on every interface (as a port forward would expose it), called from outside
    // loopback with an otherwise perfect request.
    let sidecar = Sidecar::start(IpAddr::V4(Ipv4Addr::UNSPECIFIED), false).await;
    let head = vec![format!("Host: 127.0.0.1:{}", sidecar.address.port())];
    let target = SocketAddr::new(outside, sidecar.address.port());
    let body = prepare_body().to_string();
    let (status, answer) = http(
        target,
        Some(outside),
        "POST",
        "/proof/prepare",
        &head,
        &body,
    )
    .await;
    assert_eq!(status, 403, "{answer}");
    assert!(
        error_message(&answer).contains("not on the loopback"),
        "{answer}"
    );
    assert_eq!(sidecar.sessions(), 0);
    // The same request over loopback passes.
    let local = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), sidecar.address.port());
    let (status, answer) = http(local, None, "POST", "/proof/prepare", &head, &body).await;
    assert_eq!(status, 200, "{answer}");
}
