//! Fail-closed routing and the RAVS log end to end: a fake upstream (axum on 127.0.0.1:0)
//! records the model each request names and echoes the user's text (so the witness labels the
//! answer a success); the proxy runs on its own socket with a `routing.toml` in its state
//! directory.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use svc::proxy::check::WitnessSettings;
use svc::proxy::upstream::Upstreams;
use svc::proxy::{ProxySettings, ProxyState};
use svc::ravs::{Decision, Entry, Event, EventLog, Label, Reason};
use svc::witness::{Mode, Profile};

/// What the fake saw: the path and the model the body (or the Gemini path) names.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    model: Option<String>,
    body: Value,
}

type Log = Arc<Mutex<Vec<Seen>>>;

async fn fake(State(log): State<Log>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let bytes = axum::body::to_bytes(body, usize::MAX)
        .await
        .expect("body read");
    let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let path = parts.uri.path().to_string();
    let model = body
        .get("model")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| svc::routing::rewrite::gemini_model(&path).map(str::to_string));
    log.lock().expect("lock").push(Seen {
        path: path.clone(),
        model: model.clone(),
        body: body.clone(),
    });
    let failing = parts
        .headers
        .get("x-fake-fail-model")
        .and_then(|v| v.to_str().ok());
    let slow = parts
        .headers
        .get("x-fake-slow-model")
        .and_then(|v| v.to_str().ok());
    if slow.is_some_and(|slow| slow.split(',').any(|m| Some(m) == model.as_deref())) {
        tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    }
    if failing.is_some() && failing == model.as_deref() {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({"error": {"message": "model overloaded", "type": "server_error"}})),
        )
            .into_response();
    }
    if path.starts_with("/v1beta/") {
        let text = body
            .pointer("/contents/0/parts/0/text")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if path.ends_with(":streamGenerateContent") {
            // Without alt=sse: one JSON array of chunks.
            let broken = parts
                .headers
                .get("x-fake-error-stream-model")
                .and_then(|v| v.to_str().ok());
            let last = if broken.is_some() && broken == model.as_deref() {
                json!({"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}})
            } else {
                json!({"candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": "STOP"}]})
            };
            let first = json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}}], "modelVersion": model});
            return axum::Json(json!([first, last])).into_response();
        }
        return axum::Json(json!({"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}]})).into_response();
    }
    let text = body
        .pointer("/messages/0/content")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if body["stream"] == true {
        let delta = json!({"model": model, "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]});
        let broken = parts
            .headers
            .get("x-fake-error-stream-model")
            .and_then(|v| v.to_str().ok());
        let end = if broken.is_some() && broken == model.as_deref() {
            "data: {\"error\": {\"message\": \"model overloaded\", \"type\": \"server_error\"}}\n\n"
        } else {
            "data: {\"choices\": [{\"index\": 0, \"delta\": {}, \"finish_reason\": \"stop\"}]}\n\ndata: [DONE]\n\n"
        };
        return (
            [("content-type", "text/event-stream")],
            format!("data: {delta}\n\n{end}"),
        )
            .into_response();
    }
    axum::Json(json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
    }))
    .into_response()
}

struct Setup {
    base: String,
    log: Log,
    state: Arc<ProxyState>,
    client: reqwest::Client,
    home: tempfile::TempDir,
}

async fn start(config: Option<&str>, seed: &[Entry]) -> Setup {
    start_with(config, seed, |_| {}).await
}

async fn start_with(
    config: Option<&str>,
    seed: &[Entry],
    configure: impl FnOnce(&mut ProxySettings),
) -> Setup {
    let home = tempfile::tempdir().expect("temp dir");
    if let Some(config) = config {
        std::fs::write(home.path().join("routing.toml"), config).expect("config");
    }
    EventLog::in_state_dir(home.path())
        .append(seed)
        .expect("seed log");
    let log: Log = Arc::default();
    let router = axum::Router::new().fallback(fake).with_state(log.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let upstream: SocketAddr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    let mut settings = ProxySettings::new(home.path().to_path_buf());
    let url = format!("http://{upstream}");
    settings.upstreams = Upstreams {
        anthropic: url.clone(),
        openai: url.clone(),
        gemini: url,
    };
    settings.witness = Some(WitnessSettings {
        mode: Mode::Audit,
        profile: Profile::Rag,
        embed: false,
        nli: None,
    });
    configure(&mut settings);
    let state = ProxyState::new(settings, None).expect("proxy state");
    Setup {
        base: crate::proxy::serve_proxy(state.clone()).await,
        log,
        state,
        client: reqwest::Client::new(),
        home,
    }
}

impl Setup {
    async fn chat(&self, text: &str, headers: &[(&str, &str)]) -> reqwest::Response {
        let body = json!({"model": "gpt-5", "messages": [{"role": "user", "content": text}]});
        self.post("/v1/chat/completions", &body, headers).await
    }

    async fn post(&self, path: &str, body: &Value, headers: &[(&str, &str)]) -> reqwest::Response {
        let mut request = self
            .client
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body.to_string());
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request.send().await.expect("answered")
    }

    fn seen(&self) -> Vec<Seen> {
        self.log.lock().expect("lock").clone()
    }

    fn events(&self) -> Vec<Entry> {
        self.state.routing.flush();
        let read = EventLog::in_state_dir(self.home.path())
            .read()
            .expect("log read");
        assert!(read.warnings.is_empty(), "{:?}", read.warnings);
        read.entries
    }
}

fn header(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

const CONFIG: &str = r#"
enabled = true
min_observations = 4
min_lower_bound = 0.45
high_risk_keywords = ["ledger close"]

[openai.cheap_model]
"gpt-5" = "gpt-5-mini"
[gemini.cheap_model]
"gemini-2.5-pro" = "gemini-2.5-flash"
"#;

const CLASS: &str = "openai.chat_completions/no_tools/small/prose";

fn fact(i: usize) -> String {
    format!(
        "The warehouse in Leeds shipped {} parcels on Monday.",
        400 + i
    )
}

#[tokio::test]
async fn a_class_with_a_good_record_is_routed_to_the_cheap_model_and_every_decision_is_logged() {
    let setup = start(Some(CONFIG), &[]).await;
    // Four answers the witness labels successes: the class is then proven (Wilson lower bound
    // of 4/4 is 0.51 >= 0.45).
    for i in 0..4 {
        let response = setup.chat(&fact(i), &[]).await;
        assert_eq!(response.status(), 200);
        assert_eq!(
            header(&response, "x-svc-route"),
            "original; reason=sparse_data"
        );
        assert_eq!(header(&response, "x-svc-route-class"), CLASS);
    }
    let response = setup.chat(&fact(4), &[]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-svc-route"),
        "routed; model=gpt-5-mini; reason=gate_passed"
    );
    let seen = setup.seen();
    assert_eq!(seen.len(), 5);
    assert!(
        seen[..4]
            .iter()
            .all(|s| s.model.as_deref() == Some("gpt-5"))
    );
    assert_eq!(seen[4].model.as_deref(), Some("gpt-5-mini"));
    // Only the model changed.
    assert_eq!(seen[4].body["messages"][0]["content"], fact(4));

    // A high-risk request of the same shape stays on the original model.
    let response = setup
        .chat("Rotate the password of the Leeds warehouse account.", &[])
        .await;
    assert_eq!(
        header(&response, "x-svc-route"),
        "original; reason=high_risk"
    );
    assert_eq!(
        header(&response, "x-svc-route-class"),
        format!("{CLASS}/high_risk")
    );
    assert_eq!(setup.seen()[5].model.as_deref(), Some("gpt-5"));
    // So does one naming a configured extra keyword.
    let response = setup.chat("Start the ledger close for Leeds.", &[]).await;
    assert_eq!(
        header(&response, "x-svc-route"),
        "original; reason=high_risk"
    );

    // The log: a route decision per request, a verdict per witnessed answer.
    let events = setup.events();
    let routes: Vec<(Decision, Reason)> = events
        .iter()
        .filter_map(|e| match &e.event {
            Event::Route {
                decision, reason, ..
            } => Some((*decision, *reason)),
            _ => None,
        })
        .collect();
    assert_eq!(
        routes,
        vec![
            (Decision::Original, Reason::SparseData),
            (Decision::Original, Reason::SparseData),
            (Decision::Original, Reason::SparseData),
            (Decision::Original, Reason::SparseData),
            (Decision::Routed, Reason::GatePassed),
            (Decision::Original, Reason::HighRisk),
            (Decision::Original, Reason::HighRisk),
        ]
    );
    let verdicts: Vec<(bool, Label, Option<String>)> = events
        .iter()
        .filter(|e| e.class == CLASS)
        .filter_map(|e| match &e.event {
            Event::Verdict {
                routed,
                label,
                served_model,
                ..
            } => Some((*routed, *label, served_model.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(verdicts.len(), 5);
    assert!(
        verdicts.iter().all(|v| v.1 == Label::Success),
        "{verdicts:?}"
    );
    assert_eq!(
        verdicts[4],
        (true, Label::Success, Some("gpt-5-mini".into()))
    );
    let stats = setup.state.routing.stats(CLASS);
    assert_eq!(
        (stats.requests, stats.routed, stats.routed_successes),
        (5, 1, 1)
    );
}

#[tokio::test]
async fn a_routed_request_that_fails_upstream_is_escalated_to_the_original_model() {
    let setup = start(Some(CONFIG), &[]).await;
    for i in 0..4 {
        setup.chat(&fact(i), &[]).await;
    }
    let response = setup
        .chat(&fact(9), &[("x-fake-fail-model", "gpt-5-mini")])
        .await;
    assert_eq!(response.status(), 200, "the original model answered");
    assert_eq!(
        header(&response, "x-svc-route"),
        "escalated; model=gpt-5; routed_status=500"
    );
    let body: Value = response.json().await.expect("json");
    assert_eq!(body["model"], "gpt-5");
    let seen = setup.seen();
    let models: Vec<_> = seen[4..]
        .iter()
        .map(|s| s.model.clone().unwrap_or_default())
        .collect();
    assert_eq!(models, vec!["gpt-5-mini", "gpt-5"]);
    let events = setup.events();
    let escalation = events
        .iter()
        .find_map(|e| match &e.event {
            Event::Escalation {
                requested_model,
                routed_model,
                routed_status,
                original_status,
            } => Some((
                requested_model.clone(),
                routed_model.clone(),
                *routed_status,
                *original_status,
            )),
            _ => None,
        })
        .expect("an escalation event");
    assert_eq!(
        escalation,
        ("gpt-5".into(), "gpt-5-mini".into(), Some(500), Some(200))
    );
    // The answer that was served came from the original model.
    let last_verdict = events
        .iter()
        .rev()
        .find_map(|e| match &e.event {
            Event::Verdict {
                routed,
                served_model,
                ..
            } => Some((*routed, served_model.clone())),
            _ => None,
        })
        .expect("a verdict");
    assert_eq!(last_verdict, (false, Some("gpt-5".into())));
    // The escalation counts against the cheap model: with a strict gate it is now out.
    assert_eq!(setup.state.routing.stats(CLASS).escalations, 1);
}

/// Found by probing: a routed model that did not answer in time was reported as
/// `routed_status=unreachable`, and its escalation event had no status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routed_request_that_times_out_is_escalated_as_a_gateway_timeout() {
    let setup = start_with(Some(CONFIG), &[], |settings| {
        settings.read_timeout = std::time::Duration::from_millis(500);
    })
    .await;
    for i in 0..4 {
        setup.chat(&fact(i), &[]).await;
    }
    let response = setup
        .chat(&fact(9), &[("x-fake-slow-model", "gpt-5-mini")])
        .await;
    assert_eq!(response.status(), 200, "the original model answered");
    assert_eq!(
        header(&response, "x-svc-route"),
        "escalated; model=gpt-5; routed_status=504"
    );
    let routed_status = setup.events().iter().find_map(|e| match &e.event {
        Event::Escalation { routed_status, .. } => Some(*routed_status),
        _ => None,
    });
    assert_eq!(routed_status, Some(Some(504)));
}

/// Found by probing: a routed model whose stream ended in an error event was not escalated
/// (nor counted against it), though strict had read the whole stream before the client got a
/// byte; and a routed request that failed came back without the route headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routed_stream_that_ends_in_an_error_is_escalated_when_it_is_read_whole() {
    let setup = start_with(Some(CONFIG), &[], |settings| {
        if let Some(witness) = settings.witness.as_mut() {
            witness.mode = Mode::Strict;
        }
        settings.read_timeout = std::time::Duration::from_millis(1000);
    })
    .await;
    for i in 0..4 {
        setup.chat(&fact(i), &[]).await;
    }
    let body = json!({"model": "gpt-5", "stream": true, "messages": [{"role": "user", "content": fact(9)}]});
    let response = setup
        .post(
            "/v1/chat/completions",
            &body,
            &[("x-fake-error-stream-model", "gpt-5-mini")],
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-svc-route"),
        "escalated; model=gpt-5; routed_status=502"
    );
    assert_eq!(header(&response, "x-svc-witness-stream-end"), "complete");
    let text = response.text().await.expect("body");
    assert!(text.contains("\"model\":\"gpt-5\""), "{text}");
    assert!(!text.contains("overloaded"), "{text}");
    let models: Vec<_> = setup.seen()[4..]
        .iter()
        .map(|s| s.model.clone().unwrap_or_default())
        .collect();
    assert_eq!(models, vec!["gpt-5-mini", "gpt-5"]);
    let escalation = setup.events().iter().find_map(|e| match &e.event {
        Event::Escalation {
            routed_status,
            original_status,
            ..
        } => Some((*routed_status, *original_status)),
        _ => None,
    });
    assert_eq!(escalation, Some((Some(502), Some(200))));

    // A silent model: the proxy's own error answer still carries the route headers (the
    // escalation above counts against the cheap model, which is no longer chosen).
    let response = setup
        .chat(&fact(10), &[("x-fake-slow-model", "gpt-5-mini,gpt-5")])
        .await;
    assert_eq!(response.status(), 504);
    assert_eq!(
        header(&response, "x-svc-route"),
        "original; reason=low_confidence"
    );
    assert_eq!(header(&response, "x-svc-route-class"), CLASS);
}

/// Found by probing: a routed Gemini stream without `alt=sse` (a JSON array) that ended in an
/// error was read whole by strict, said `error` in its header, and was still served from the
/// cheap model: only event streams were checked for their end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_routed_gemini_array_stream_that_ends_in_an_error_is_escalated() {
    let seed = gemini_successes();
    let setup = start_with(Some(CONFIG), &seed, |settings| {
        if let Some(witness) = settings.witness.as_mut() {
            witness.mode = Mode::Strict;
        }
    })
    .await;
    let body = json!({"contents": [{"role": "user", "parts": [{"text": fact(1)}]}]});
    let response = setup
        .post(
            "/v1beta/models/gemini-2.5-pro:streamGenerateContent?key=abc",
            &body,
            &[("x-fake-error-stream-model", "gemini-2.5-flash")],
        )
        .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-svc-route"),
        "escalated; model=gemini-2.5-pro; routed_status=502"
    );
    assert_eq!(header(&response, "x-svc-witness-stream-end"), "complete");
    let models: Vec<_> = setup
        .seen()
        .iter()
        .map(|s| s.model.clone().unwrap_or_default())
        .collect();
    assert_eq!(models, vec!["gemini-2.5-flash", "gemini-2.5-pro"]);
}

#[tokio::test]
async fn shadow_trials_check_the_cheap_model_before_it_serves_and_never_deliver_its_answers() {
    let config = CONFIG.replace("enabled = true", "enabled = true\nshadow_observations = 2");
    let setup = start(Some(&config), &[]).await;
    for i in 0..4 {
        setup.chat(&fact(i), &[]).await;
    }
    let wait_for_shadow_verdicts = |count: u64| {
        let state = setup.state.clone();
        async move {
            for _ in 0..200 {
                if state.routing.stats(CLASS).routed_successes >= count {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(25)).await;
            }
            panic!("no shadow verdict was recorded");
        }
    };
    for (i, expected) in [(4, 1), (5, 2)] {
        let response = setup.chat(&fact(i), &[]).await;
        assert_eq!(
            header(&response, "x-svc-route"),
            "original; reason=shadow_trial; shadow=gpt-5-mini"
        );
        let body: Value = response.json().await.expect("json");
        assert_eq!(
            body["model"], "gpt-5",
            "the client gets the original model's answer"
        );
        wait_for_shadow_verdicts(expected).await;
    }
    // Two shadow answers on record: the cheap model now serves.
    let response = setup.chat(&fact(6), &[]).await;
    assert_eq!(
        header(&response, "x-svc-route"),
        "routed; model=gpt-5-mini; reason=gate_passed"
    );
    let models: Vec<String> = setup
        .seen()
        .iter()
        .map(|s| s.model.clone().unwrap_or_default())
        .collect();
    assert_eq!(models.iter().filter(|m| *m == "gpt-5-mini").count(), 3);
    let stats = setup.state.routing.stats(CLASS);
    // Shadow answers count for the cheap model only, not as the class's served outcomes.
    assert_eq!((stats.successes, stats.routed), (7, 1));
    let shadows = setup
        .events()
        .iter()
        .filter(|e| {
            matches!(
                e.event,
                Event::Verdict {
                    shadow: true,
                    routed: true,
                    ..
                }
            )
        })
        .count();
    assert_eq!(shadows, 2);
}

/// Forty answers of gemini-2.5-pro the witness labelled successes: its class is proven.
fn gemini_successes() -> Vec<Entry> {
    let class = "gemini.generate_content/no_tools/small/prose";
    (0..40)
        .map(|i| {
            Entry::now(
                class,
                Event::Verdict {
                    certificate_id: format!("wit_{i}"),
                    served_model: Some("gemini-2.5-pro".into()),
                    routed: false,
                    shadow: false,
                    supported: 1,
                    unsupported: 0,
                    contradicted: 0,
                    label: Label::Success,
                },
            )
        })
        .collect()
}

#[tokio::test]
async fn gemini_is_routed_by_rewriting_the_model_in_the_path() {
    let seed = gemini_successes();
    let setup = start(Some(CONFIG), &seed).await;
    let body = json!({"contents": [{"role": "user", "parts": [{"text": fact(1)}]}]});
    let response = setup
        .client
        .post(format!(
            "{}/v1beta/models/gemini-2.5-pro:generateContent?key=abc",
            setup.base
        ))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-svc-route"),
        "routed; model=gemini-2.5-flash; reason=gate_passed"
    );
    let seen = setup.seen();
    assert_eq!(
        seen[0].path,
        "/v1beta/models/gemini-2.5-flash:generateContent"
    );
}

#[tokio::test]
async fn routing_is_off_without_a_config_and_a_bad_config_turns_it_off_while_serving_goes_on() {
    let setup = start(None, &[]).await;
    let response = setup.chat(&fact(1), &[]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-svc-route"),
        "original; reason=routing_off"
    );
    assert!(
        setup
            .state
            .routing
            .status()
            .starts_with("routing off (no routing.toml")
    );

    let bad = "enabled = true\n[anthropic.cheap_model]\n\"claude-opus-4-1\" = \"cluade-haiku\"\n";
    let setup = start(Some(bad), &[]).await;
    let status = setup.state.routing.status();
    assert!(
        status.contains("routing.toml: field anthropic.cheap_model.\"claude-opus-4-1\": unknown model \"cluade-haiku\""),
        "{status}"
    );
    let response = setup.chat(&fact(1), &[]).await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        header(&response, "x-svc-route"),
        "original; reason=config_error"
    );
    assert_eq!(setup.seen()[0].model.as_deref(), Some("gpt-5"));

    let setup = start(Some("enabled = [\n"), &[]).await;
    assert!(setup.state.routing.status().contains("routing.toml"));
    assert_eq!(setup.chat(&fact(2), &[]).await.status(), 200);
}

#[tokio::test]
async fn the_same_request_again_is_logged_as_a_retry() {
    let setup = start(None, &[]).await;
    setup.chat(&fact(1), &[]).await;
    setup.chat(&fact(1), &[]).await;
    let retries = setup
        .events()
        .iter()
        .filter(|e| matches!(e.event, Event::Retry { .. }))
        .count();
    assert_eq!(retries, 1);
    assert_eq!(setup.state.routing.stats(CLASS).retries, 1);
}

#[test]
fn svc_proxy_says_at_start_why_routing_is_off_and_serves() {
    use std::io::{BufRead, BufReader};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let log: Log = Arc::default();
    let upstream = runtime.block_on(async {
        crate::serve(axum::Router::new().fallback(fake).with_state(log.clone())).await
    });
    let state = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        state.path().join("routing.toml"),
        "enabled = true\nmin_lower_bound = 2\n",
    )
    .expect("config");
    let mut child = crate::harness::svc(state.path())
        .args(["proxy", "--port", "0", "--upstream-openai"])
        .arg(&upstream)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("svc proxy starts");
    let mut stderr = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    stderr.read_line(&mut line).expect("first line");
    let address = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_default()
        .to_string();
    let status = runtime.block_on(async {
        svc::witness::nli::install_crypto_provider();
        let body = json!({"model": "gpt-5", "messages": [{"role": "user", "content": fact(1)}]});
        reqwest::Client::new()
            .post(format!("http://{address}/v1/chat/completions"))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await
            .map(|response| response.status().as_u16())
    });
    let mut request_line = String::new();
    stderr.read_line(&mut request_line).expect("request line");
    // A service manager's SIGTERM stops it cleanly, the RAVS writer flushed before it exits.
    let signalled = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(signalled.success());
    let exit = child.wait().expect("proxy exits");
    assert!(exit.success(), "{exit:?}");
    let events = EventLog::in_state_dir(state.path()).read().expect("log");
    assert!(
        events
            .entries
            .iter()
            .any(|entry| matches!(entry.event, Event::Route { .. })),
        "{:?}",
        events.entries
    );
    assert!(
        line.starts_with("svc proxy: listening on http://127.0.0.1:"),
        "{line}"
    );
    assert!(
        line.contains("routing off: ")
            && line.contains("routing.toml: field min_lower_bound: 2 is outside (0, 1]"),
        "{line}"
    );
    assert_eq!(status.ok(), Some(200), "the proxy serves");
    assert!(
        request_line.contains(" route original; reason=config_error"),
        "{request_line}"
    );
}

fn write_log(path: &Path, entries: &[Entry]) {
    EventLog::at(path).append(entries).expect("write log");
}

mod report {
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use super::*;
    use crate::harness::{assert_text_eq, root, run, svc};

    fn golden(name: &str, got: &str) {
        let path = root().join("fixtures/ravs").join(name);
        if std::env::var_os("SVC_UPDATE_GOLDEN").is_some() {
            std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
            std::fs::write(&path, got).expect("write golden");
            return;
        }
        let expected = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e} (run with SVC_UPDATE_GOLDEN=1)", path.display()));
        assert_text_eq(&expected, got);
    }

    /// A fixed week of events over three classes.
    fn events(now: SystemTime) -> Vec<Entry> {
        let mut entries = Vec::new();
        let classes = [
            ("anthropic.messages/tools/medium/diff", 40, 36, 30, 2, 1),
            (
                "openai.chat_completions/no_tools/small/prose",
                25,
                18,
                0,
                3,
                0,
            ),
            (
                "openai.chat_completions/no_tools/small/prose/high_risk",
                10,
                6,
                0,
                0,
                0,
            ),
        ];
        for (c, (class, requests, labelled, routed, retries, escalations)) in
            classes.into_iter().enumerate()
        {
            for i in 0..requests {
                let at = now - Duration::from_secs(60 * (i as u64 + 1) + c as u64);
                let is_routed = i < routed;
                entries.push(Entry::at(
                    at,
                    class,
                    Event::Route {
                        requested_model: Some("big".into()),
                        served_model: Some(if is_routed { "small" } else { "big" }.into()),
                        decision: if is_routed {
                            Decision::Routed
                        } else {
                            Decision::Original
                        },
                        reason: if is_routed {
                            Reason::GatePassed
                        } else {
                            Reason::SparseData
                        },
                    },
                ));
                let label = if i >= labelled {
                    Label::Unlabelled
                } else if i % 9 == 4 {
                    Label::Failure
                } else {
                    Label::Success
                };
                entries.push(Entry::at(
                    at,
                    class,
                    Event::Verdict {
                        certificate_id: format!("wit_{c}_{i}"),
                        served_model: None,
                        routed: is_routed,
                        shadow: false,
                        supported: 1,
                        unsupported: usize::from(label == Label::Failure),
                        contradicted: 0,
                        label,
                    },
                ));
                if i < retries {
                    entries.push(Entry::at(
                        at,
                        class,
                        Event::Retry {
                            seconds_since_previous: 12.0,
                        },
                    ));
                }
                if i < escalations {
                    entries.push(Entry::at(
                        at,
                        class,
                        Event::Escalation {
                            requested_model: "big".into(),
                            routed_model: "small".into(),
                            routed_status: Some(529),
                            original_status: Some(200),
                        },
                    ));
                }
            }
        }
        // Older than the window: not counted.
        entries.push(Entry::at(
            now - Duration::from_secs(30 * 86_400),
            "openai.responses/no_tools/large/log",
            Event::Retry {
                seconds_since_previous: 1.0,
            },
        ));
        entries
    }

    #[test]
    fn report_table_golden() {
        let now = UNIX_EPOCH + Duration::from_secs(1_795_264_760);
        let report =
            svc::ravs::report::build(&events(now), now, Duration::from_secs(7 * 86_400), 0);
        golden("report-7d.md", &svc::ravs::report::render(&report));
    }

    #[test]
    fn svc_ravs_report_prints_the_table_json_and_clear_messages() {
        let home = tempfile::tempdir().expect("temp dir");
        let missing = run(svc(home.path()).args(["ravs", "report", "--since", "7d"]));
        assert_eq!(missing.code, 0, "{}", missing.stderr);
        assert!(
            missing.stdout.starts_with("No RAVS events yet:"),
            "{}",
            missing.stdout
        );

        let log = home.path().join("ravs/events.jsonl");
        write_log(&log, &events(SystemTime::now()));
        // A corrupt line in the middle: skipped with file:line, the rest counted.
        let mut text = std::fs::read_to_string(&log).expect("read");
        let cut = text.find('\n').expect("lines") + 1;
        text.insert_str(cut, "{not json\n");
        std::fs::write(&log, text).expect("write");
        let table = run(svc(home.path()).args(["ravs", "report", "--since", "2w"]));
        assert_eq!(table.code, 0, "{}", table.stderr);
        assert!(
            table
                .stderr
                .contains("ravs/events.jsonl:2: skipped: not a RAVS event"),
            "{}",
            table.stderr
        );
        assert!(
            table.stderr.contains("1 unreadable line(s)"),
            "{}",
            table.stderr
        );
        assert!(
            table.stdout.contains("| **total** | 75 | 60 | 80.0% |"),
            "{}",
            table.stdout
        );
        // Found by probing: a file of which no line is an event said "No RAVS events" (exit 0).
        let wrong = home.path().join("not-ravs.jsonl");
        std::fs::write(&wrong, "{not json\nnor this\n").expect("write");
        let refused = run(svc(home.path())
            .args(["ravs", "report", "--log"])
            .arg(&wrong));
        assert_eq!(refused.code, 2, "{}", refused.stdout);
        assert!(
            refused.stderr.contains("none of the 2 line(s) of")
                && refused.stderr.contains("is a RAVS event"),
            "{}",
            refused.stderr
        );

        let json = run(svc(home.path()).args(["ravs", "report", "--since", "12h", "--json"]));
        assert_eq!(json.code, 0, "{}", json.stderr);
        let value: Value = serde_json::from_str(&json.stdout).expect("json");
        assert_eq!(value["total"]["requests"], 75);
        assert_eq!(value["total"]["escalations"], 1);
        assert_eq!(value["skipped_lines"], 1);
        assert_eq!(value["rows"].as_array().map(Vec::len), Some(3));

        // Only old events: the window is empty, and the message says so.
        let old = tempfile::tempdir().expect("temp dir");
        write_log(
            &old.path().join("ravs/events.jsonl"),
            &[Entry::at(
                SystemTime::now() - Duration::from_secs(3_600),
                "a",
                Event::Retry {
                    seconds_since_previous: 1.0,
                },
            )],
        );
        let none = run(svc(old.path()).args(["ravs", "report", "--since", "30m"]));
        assert_eq!(none.code, 0);
        assert!(
            none.stdout.contains("No RAVS events in the last 30m"),
            "{}",
            none.stdout
        );

        let bad = run(svc(home.path()).args(["ravs", "report", "--since", "7x"]));
        assert_eq!(bad.code, 2);
        assert!(
            bad.stderr.contains("invalid duration \"7x\""),
            "{}",
            bad.stderr
        );
    }
}
