//! The dashboard app, control API and run viewer over real sockets (axum on 127.0.0.1:0, a
//! reqwest client), and the daemon as a process (`svc daemon`).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use svc::dashboard::{self, DashboardSettings, DashboardState, Quality, Role};
use svc::proxy::{ProxySettings, ProxyState};

use crate::harness::{run, svc};

/// Serves the app on a free port; returns its base URL.
pub async fn serve(state: Arc<DashboardState>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        axum::serve(listener, dashboard::app(state))
            .await
            .expect("serve");
    });
    url
}

fn client() -> reqwest::Client {
    svc::witness::nli::install_crypto_provider();
    reqwest::Client::new()
}

fn with_proxy(home: &Path) -> (Arc<DashboardState>, Arc<ProxyState>) {
    let proxy = ProxyState::new(ProxySettings::new(home.to_path_buf()), None).expect("proxy");
    let mut settings = DashboardSettings::new(Role::Daemon, home.to_path_buf());
    settings.quality = Quality::Balanced;
    (DashboardState::new(settings, Some(proxy.clone())), proxy)
}

async fn json_of(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let body = response.json::<Value>().await.expect("a JSON body");
    (status, body)
}

#[tokio::test]
async fn control_api_switches_the_proxy_of_the_same_process() {
    let home = tempfile::tempdir().expect("tempdir");
    let (state, proxy) = with_proxy(home.path());
    let url = serve(state.clone()).await;
    let http = client();

    let (code, status) = json_of(
        http.get(format!("{url}/api/control/status"))
            .send()
            .await
            .expect("status"),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(status["optimization"], "enabled");
    assert_eq!(status["quality"], "balanced");
    assert_eq!(status["budget"], 32_000);
    assert_eq!(status["proxy"]["counters"]["requests"], 0);

    let (code, paused) = json_of(
        http.post(format!("{url}/api/control/optimization/pause"))
            .send()
            .await
            .expect("pause"),
    )
    .await;
    assert_eq!(
        (code, paused["optimization"].as_str()),
        (200, Some("paused"))
    );
    assert!(proxy.paused(), "the proxy itself is paused");
    http.post(format!("{url}/api/control/optimization/enable"))
        .send()
        .await
        .expect("enable");
    assert!(!proxy.paused());

    for (mode, budget) in [("max", 64_000), ("fast", 16_000), ("balanced", 32_000)] {
        let (code, body) = json_of(
            http.post(format!("{url}/api/control/quality"))
                .json(&json!({"mode": mode}))
                .send()
                .await
                .expect("quality"),
        )
        .await;
        assert_eq!(code, 200, "{body}");
        assert_eq!(body["quality"], mode);
        assert_eq!(proxy.budget(), budget, "{mode} scales the proxy's budget");
    }

    // Malformed bodies: a clear JSON error naming the expected shape; nothing changes.
    for bad in [
        "{\"mode\": \"ultra\"}",
        "{bad json",
        "{}",
        "{\"mode\": \"max\", \"x\": 1}",
    ] {
        let (code, body) = json_of(
            http.post(format!("{url}/api/control/quality"))
                .header("content-type", "application/json")
                .body(bad)
                .send()
                .await
                .expect("quality"),
        )
        .await;
        assert_eq!(code, 400, "{bad}");
        assert_eq!(body["error"]["type"], "invalid_request_error");
        let message = body["error"]["message"].as_str().expect("message");
        assert!(
            message.contains("\"fast\" | \"balanced\" | \"max\""),
            "{message}"
        );
    }
    assert_eq!(state.quality(), Quality::Balanced);

    // Cross-origin state changes are refused, same-origin ones pass.
    let (code, body) = json_of(
        http.post(format!("{url}/api/control/optimization/pause"))
            .header("origin", "https://evil.example")
            .send()
            .await
            .expect("cross-origin"),
    )
    .await;
    assert_eq!(code, 403);
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("message")
            .contains("cross-origin")
    );
    assert!(!proxy.paused(), "a refused request changes nothing");
    let code = http
        .post(format!("{url}/api/control/optimization/pause"))
        .header("origin", url.as_str())
        .send()
        .await
        .expect("same origin")
        .status();
    assert_eq!(code, 200);
    assert!(proxy.paused());
    // A foreign Host (DNS rebinding) is refused even for reads.
    let code = http
        .get(format!("{url}/api/control/status"))
        .header("host", "rebind.example")
        .send()
        .await
        .expect("rebinding")
        .status();
    assert_eq!(code, 403);

    let (code, learning) = json_of(
        http.get(format!("{url}/api/control/learning"))
            .send()
            .await
            .expect("learning"),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(learning["status"], "not_learned");
    assert_eq!(learning["version"], 0);
    assert_eq!(learning["weights"], learning["defaults"]);
    assert_eq!(learning["autotune"]["state"], "idle");

    let (code, log) = json_of(
        http.get(format!("{url}/api/control/log?limit=50"))
            .send()
            .await
            .expect("log"),
    )
    .await;
    assert_eq!(code, 200);
    let lines: Vec<&str> = log["lines"]
        .as_array()
        .expect("lines")
        .iter()
        .filter_map(|l| l["message"].as_str())
        .collect();
    assert!(lines.contains(&"optimisation paused"), "{lines:?}");
    assert!(lines.contains(&"quality set to max"), "{lines:?}");

    assert!(!state.stop_requested());
    let (code, stop) = json_of(
        http.post(format!("{url}/api/control/stop"))
            .send()
            .await
            .expect("stop"),
    )
    .await;
    assert_eq!((code, stop["stopping"].as_bool()), (200, Some(true)));
    assert!(state.stop_requested());
}

#[tokio::test]
async fn without_a_proxy_the_switch_says_so_and_reindex_indexes_a_directory() {
    let home = tempfile::tempdir().expect("tempdir");
    let state = DashboardState::new(
        DashboardSettings::new(Role::Dashboard, home.path().to_path_buf()),
        None,
    );
    let url = serve(state).await;
    let http = client();
    let (code, body) = json_of(
        http.post(format!("{url}/api/control/optimization/pause"))
            .send()
            .await
            .expect("pause"),
    )
    .await;
    assert_eq!(
        (code, body["error"]["type"].as_str()),
        (409, Some("no_proxy"))
    );
    let (_, status) = json_of(
        http.get(format!("{url}/api/control/status"))
            .send()
            .await
            .expect("status"),
    )
    .await;
    assert_eq!(status["optimization"], "unavailable");
    assert_eq!(status["proxy"], Value::Null);

    let (code, body) = json_of(
        http.post(format!("{url}/api/control/repos/reindex"))
            .send()
            .await
            .expect("reindex"),
    )
    .await;
    assert_eq!(
        (code, body["error"]["type"].as_str()),
        (409, Some("no_repository"))
    );
    let repo = tempfile::tempdir().expect("repo");
    std::fs::write(
        repo.path().join("lib.rs"),
        "pub fn answer() -> u32 {\n    42\n}\n",
    )
    .expect("write");
    let (code, body) = json_of(
        http.post(format!("{url}/api/control/repos/reindex"))
            .json(&json!({"path": repo.path()}))
            .send()
            .await
            .expect("reindex"),
    )
    .await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(body["reindexed"][0]["files"], 1);
    assert!(body["reindexed"][0]["tokens"].as_u64().expect("tokens") > 0);
    let (code, body) = json_of(
        http.post(format!("{url}/api/control/repos/reindex"))
            .json(&json!({"path": "/no/such/dir"}))
            .send()
            .await
            .expect("reindex"),
    )
    .await;
    assert_eq!(code, 400);
    assert!(
        body["error"]["message"]
            .as_str()
            .expect("m")
            .contains("/no/such/dir does not exist")
    );
    let (code, _) = json_of(
        http.get(format!("{url}/api/control/nothing"))
            .send()
            .await
            .expect("404"),
    )
    .await;
    assert_eq!(code, 404);
}

/// Found by probing: a control route asked with the wrong method got axum's empty 405
/// instead of the API's `{"error": {"type", "message"}}`.
#[tokio::test]
async fn a_wrong_method_gets_the_apis_error_shape() {
    let home = tempfile::tempdir().expect("tempdir");
    let (state, _proxy) = with_proxy(home.path());
    let url = serve(state).await;
    let http = client();
    for (method, path, allowed) in [
        ("GET", "/api/control/stop", "POST"),
        ("POST", "/api/control/status", "GET"),
    ] {
        let response = http
            .request(method.parse().expect("a method"), format!("{url}{path}"))
            .send()
            .await
            .expect("answered");
        assert_eq!(
            response
                .headers()
                .get("allow")
                .and_then(|v| v.to_str().ok()),
            Some(allowed)
        );
        let (code, body) = json_of(response).await;
        assert_eq!(code, 405, "{method} {path}");
        assert_eq!(body["error"]["type"], "method_not_allowed", "{body}");
    }
    assert!(!state_stopped(&url).await);
}

/// Found by probing: a query string or body axum refused (a repeated field, a body over the
/// limit) was answered in plain text instead of the API's error shape.
#[tokio::test]
async fn a_refused_query_or_body_gets_the_apis_error_shape() {
    let home = tempfile::tempdir().expect("tempdir");
    let (state, _proxy) = with_proxy(home.path());
    let url = serve(state).await;
    let http = client();
    let (code, body) = json_of(
        http.get(format!("{url}/api/control/log?limit=5&limit=7"))
            .send()
            .await
            .expect("log"),
    )
    .await;
    assert_eq!(code, 400, "{body}");
    assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("duplicate field `limit`")),
        "{body}"
    );
    let big = format!("{{\"level\": \"{}\"}}", "x".repeat(3_000_000));
    let (code, body) = json_of(
        http.post(format!("{url}/api/control/quality"))
            .header("content-type", "application/json")
            .body(big)
            .send()
            .await
            .expect("quality"),
    )
    .await;
    assert_eq!(code, 413, "{body}");
    assert_eq!(body["error"]["type"], "request_too_large", "{body}");
}

/// Found by probing: the routes SPEC §4.3 gives no body accepted any (20 MB, garbage) and
/// acted on it, so a client that believed it sent options never learned it had not.
#[tokio::test]
async fn routes_without_a_body_refuse_one_and_accept_none_or_an_empty_object() {
    let home = tempfile::tempdir().expect("tempdir");
    let (state, _proxy) = with_proxy(home.path());
    let url = serve(state).await;
    let http = client();
    for route in [
        "optimization/pause",
        "optimization/enable",
        "learning/reset",
        "learning/update",
        "learning/autotune",
        "stop",
    ] {
        let (code, body) = json_of(
            http.post(format!("{url}/api/control/{route}"))
                .body("garbage")
                .send()
                .await
                .expect(route),
        )
        .await;
        assert_eq!(code, 400, "{route}: {body}");
        assert_eq!(body["error"]["type"], "invalid_request_error", "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("takes no body") && m.contains("7 bytes")),
            "{body}"
        );
        let (code, body) = json_of(
            http.post(format!("{url}/api/control/{route}"))
                .body(vec![b' '; 3_000_000])
                .send()
                .await
                .expect(route),
        )
        .await;
        assert_eq!(code, 413, "{route}: {body}");
    }
    assert!(!state_stopped(&url).await, "a refused stop stopped");
    let (code, body) = json_of(
        http.post(format!("{url}/api/control/optimization/pause"))
            .header("content-type", "application/json")
            .body("{}")
            .send()
            .await
            .expect("pause"),
    )
    .await;
    assert_eq!((code, body["optimization"].as_str()), (200, Some("paused")));
    let (code, _) = json_of(
        http.post(format!("{url}/api/control/stop"))
            .send()
            .await
            .expect("stop"),
    )
    .await;
    assert_eq!(code, 200);
}

async fn state_stopped(url: &str) -> bool {
    // The status route still answers: the GET of /stop changed nothing.
    client()
        .get(format!("{url}/api/control/status"))
        .send()
        .await
        .map(|r| r.status() != 200)
        .unwrap_or(true)
}

#[tokio::test]
async fn the_openapi_document_describes_every_control_route() {
    let home = tempfile::tempdir().expect("tempdir");
    let (state, _) = with_proxy(home.path());
    let url = serve(state).await;
    let http = client();
    let (code, document) = json_of(
        http.get(format!("{url}/api/openapi.json"))
            .send()
            .await
            .expect("doc"),
    )
    .await;
    assert_eq!(code, 200);
    assert_eq!(document["openapi"], "3.1.0");
    let routes = [
        ("get", "/api/control/status"),
        ("post", "/api/control/optimization/pause"),
        ("post", "/api/control/optimization/enable"),
        ("post", "/api/control/quality"),
        ("post", "/api/control/repos/reindex"),
        ("get", "/api/control/learning"),
        ("post", "/api/control/learning/reset"),
        ("post", "/api/control/learning/update"),
        ("post", "/api/control/learning/autotune"),
        ("get", "/api/control/log"),
        ("post", "/api/control/stop"),
        ("get", "/api/openapi.json"),
    ];
    let paths = document["paths"].as_object().expect("paths");
    assert_eq!(paths.len(), routes.len(), "no undocumented or stale path");
    for (method, path) in routes {
        assert!(
            document["paths"][path][method].is_object(),
            "{method} {path} documented"
        );
        // Every documented route exists (a missing one would be the JSON 404).
        if method == "get" {
            let code = http
                .get(format!("{url}{path}"))
                .send()
                .await
                .expect("get")
                .status();
            assert_eq!(code, 200, "{path}");
        }
    }
    let quality = &document["components"]["schemas"]["Quality"]["enum"];
    assert_eq!(quality, &json!(["fast", "balanced", "max"]));
    // The status body matches its documented required fields.
    let (_, status) = json_of(
        http.get(format!("{url}/api/control/status"))
            .send()
            .await
            .expect("status"),
    )
    .await;
    let required = document["components"]["schemas"]["Status"]["required"]
        .as_array()
        .expect("required");
    let fields = status.as_object().expect("object");
    assert_eq!(fields.len(), required.len());
    for field in required {
        assert!(
            fields.contains_key(field.as_str().expect("name")),
            "{field}"
        );
    }
}

#[tokio::test]
async fn pages_render_with_embedded_assets_and_honest_empty_states() {
    let home = tempfile::tempdir().expect("tempdir");
    let state = DashboardState::new(
        DashboardSettings::new(Role::Dashboard, home.path().to_path_buf()),
        None,
    );
    let url = serve(state).await;
    let http = client();
    let page = |path: &'static str| {
        let http = http.clone();
        let url = url.clone();
        async move {
            let response = http.get(format!("{url}{path}")).send().await.expect("page");
            assert_eq!(response.status(), 200, "{path}");
            response.text().await.expect("text")
        }
    };
    let home_page = page("/").await;
    assert!(home_page.contains("No proxy runs in this process"));
    assert!(home_page.contains("No certificates recorded yet"));
    assert!(home_page.contains("no learned weights yet"));
    assert!(
        !home_page.contains("http://cdn") && !home_page.contains("https://"),
        "no CDN"
    );
    let controls = page("/controls").await;
    for id in [
        "id=\"pause\"",
        "id=\"quality-max\"",
        "id=\"reindex\"",
        "id=\"stop\"",
        "id=\"log\"",
    ] {
        assert!(controls.contains(id), "{id}");
    }
    assert!(page("/assets/app.js").await.contains("/api/control/status"));
    assert!(page("/assets/style.css").await.contains(".segmented"));
}

fn make_run(state: &Path, out: &Path, extra: &[&str]) {
    let done = run(svc(state)
        .args([
            "run",
            "--workload",
            "fixtures/harness/halueval-mini",
            "--budget",
            "64",
            "--out",
        ])
        .arg(out)
        .args(extra));
    assert_eq!(done.code, 0, "{}", done.stderr);
}

/// Found by probing: the Runs table showed the manifest's n and errors beside a verdict
/// computed from a trials.jsonl that no longer agreed with it (every trial errored, "0 errors");
/// `error=` took any word as an error type, and a cursor typed inside a line numbered the next
/// line 1.
#[tokio::test]
async fn run_viewer_counts_the_file_refuses_unknown_filters_and_numbers_lines_truly() {
    let home = tempfile::tempdir().expect("tempdir");
    let runs = home.path().join("runs");
    make_run(home.path(), &runs.join("a"), &[]);
    let trials = runs.join("a/trials.jsonl");
    let text = std::fs::read_to_string(&trials).expect("trials");
    let errored: String = text
        .lines()
        .map(|line| {
            let mut record: Value = serde_json::from_str(line).expect("record");
            record["outcome"] = json!("error");
            record["error_type"] = json!("timeout");
            record["response_text"] = Value::Null;
            record["response_sha256"] = Value::Null;
            format!("{record}\n")
        })
        .collect();
    let records = text.lines().count();
    let second = errored.lines().next().expect("a line").len() + 1;
    std::fs::write(&trials, errored).expect("write");
    let mut settings = DashboardSettings::new(Role::Viewer, home.path().to_path_buf());
    settings.run_roots = vec![runs.clone()];
    let url = serve(DashboardState::new(settings, None)).await;
    let get = |path: &str| {
        let url = format!("{url}{path}");
        async move {
            let response = client().get(url).send().await.expect("page");
            (
                response.status().as_u16(),
                response.text().await.expect("text"),
            )
        }
    };
    let (code, list) = get("/runs").await;
    assert_eq!(code, 200);
    assert!(
        list.contains(&format!("<td class=\"bad\">{records}</td>"))
            && list.contains(&format!("(manifest: {records} written, 0 errors)")),
        "{list}"
    );
    assert!(!list.contains("vs raw: win"), "{list}");
    let (_, show) = get("/runs/show?id=0%2Fa").await;
    assert!(
        show.contains(&format!(
            "trials.jsonl holds {records} records, {records} errors, 0 invalid"
        )),
        "{show}"
    );
    let (code, bad) = get("/runs/show?id=0%2Fa&error=errors").await;
    assert_eq!(code, 400, "{bad}");
    assert!(bad.contains("one error type goes in error_type"), "{bad}");
    let (code, typed) = get("/runs/show?id=0%2Fa&error_type=timeout").await;
    assert_eq!(code, 200);
    assert!(typed.contains("<table id=\"trials\">"), "{typed}");
    let (code, inside) = get("/runs/show?id=0%2Fa&at=3").await;
    assert_eq!(code, 400, "{inside}");
    assert!(inside.contains("inside a line"), "{inside}");
    let (code, page) = get(&format!("/runs/show?id=0%2Fa&at={second}")).await;
    assert_eq!(code, 200);
    assert!(page.contains("<tr><td>2</td>"), "{page}");
}

#[tokio::test]
async fn run_viewer_lists_runs_pages_trials_and_shows_a_task_across_conditions() {
    let home = tempfile::tempdir().expect("tempdir");
    let runs = home.path().join("runs");
    make_run(home.path(), &runs.join("a"), &[]);
    make_run(
        home.path(),
        &runs.join("b"),
        &["--conditions", "raw,svc", "--selector", "bm25-topk"],
    );
    let mut settings = DashboardSettings::new(Role::Viewer, home.path().to_path_buf());
    settings.run_roots = vec![runs.clone()];
    let url = serve(DashboardState::new(settings, None)).await;
    let http = client();
    let get = |path: String| {
        let http = http.clone();
        let url = url.clone();
        async move {
            let response = http.get(format!("{url}{path}")).send().await.expect("page");
            (
                response.status().as_u16(),
                response.text().await.expect("text"),
            )
        }
    };
    let (code, list) = get("/runs".into()).await;
    assert_eq!(code, 200);
    assert!(
        list.contains("/runs/show?id=0%2Fa") && list.contains("/runs/show?id=0%2Fb"),
        "{list}"
    );
    assert!(list.contains("halueval-mini v1"));

    let (code, show) = get("/runs/show?id=0%2Fa".into()).await;
    assert_eq!(code, 200);
    assert!(show.contains("<table id=\"trials\">"));
    assert!(show.contains("data-load=\"/runs/report?id=0%2Fa"));
    // Filter: only svc trials.
    let (_, svc_only) = get("/runs/show?id=0%2Fa&condition=svc".into()).await;
    let rows = svc_only.matches("<tr><td>").count();
    assert!(rows > 0);
    assert!(!svc_only.contains("<td>raw</td>") && svc_only.contains("<td>svc</td>"));
    // Paging: 48 records, 50 a page; a cursor past the end is a clear error.
    let (code, bad) = get("/runs/show?id=0%2Fa&at=99999999".into()).await;
    assert_eq!(code, 400);
    assert!(bad.contains("past the end"));
    let (code, bad) = get("/runs/show?id=0%2Fa&min_score=2".into()).await;
    assert_eq!(code, 400);
    assert!(bad.contains("min_score must be a number from 0 to 1"));
    // Found by probing: an address whose query did not parse got axum's plain-text error.
    for address in ["/runs/show", "/runs/show?id=0%2Fa&at=abc"] {
        let (code, bad) = get(address.into()).await;
        assert_eq!(code, 400, "{address}");
        assert!(
            bad.contains("<html") && bad.contains("the page&#39;s address is not valid")
                || bad.contains("the page's address is not valid"),
            "{bad}"
        );
    }

    let (code, report) = get("/runs/report?id=0%2Fa&fragment=1".into()).await;
    assert_eq!(code, 200);
    assert!(
        report.contains("<table>") && report.contains("Verdict"),
        "{report}"
    );
    assert!(report.contains("<svg"), "plots inline");

    let task = show
        .split("/runs/trial?id=0%2Fa&amp;task=")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a trial link")
        .to_string();
    let (code, trial) = get(format!("/runs/trial?id=0%2Fa&task={task}")).await;
    assert_eq!(code, 200, "{trial}");
    for condition in ["raw", "native_compaction", "svc", "combined"] {
        assert!(
            trial.contains(&format!("<h2>{condition} ")),
            "{condition} column"
        );
    }
    assert!(trial.contains("Witness certificate"));
    assert!(trial.contains("Commit <code>ctx_"));
    let chunk = trial
        .split("href=\"/runs/chunk?")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .map(|q| q.replace("&amp;", "&"));
    if let Some(query) = chunk {
        let (code, text) = get(format!("/runs/chunk?{query}")).await;
        assert_eq!(code, 200);
        assert!(text.contains("Exact bytes of chunk"));
    }

    let (code, compared) = get("/runs/compare?a=0%2Fa&b=0%2Fb".into()).await;
    assert_eq!(code, 200);
    assert!(compared.contains("<table>") && compared.contains("Verdict"));
    // Found by probing: two runs with no task in common showed "n = 0" and a "no win"
    // verdict, where `svc report --compare-runs` refuses them.
    let done = run(svc(home.path())
        .args([
            "run",
            "--workload",
            "needle-builtin",
            "--budget",
            "64",
            "--out",
        ])
        .arg(runs.join("c")));
    assert_eq!(done.code, 0, "{}", done.stderr);
    let (code, refused) = get("/runs/compare?a=0%2Fa&b=0%2Fc".into()).await;
    assert_eq!(code, 422, "{refused}");
    assert!(refused.contains("share no task"), "{refused}");
    let (code, missing) = get("/runs/show?id=0%2Fnope".into()).await;
    assert_eq!(code, 404);
    assert!(missing.contains("no run"));
}

/// A daemon process; killed if the test fails before stopping it.
struct Daemon {
    child: Child,
    url: String,
    stderr: Vec<String>,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_daemon(state: &Path, repo: &Path) -> Daemon {
    let mut child = svc(state)
        .args([
            "daemon",
            "--port",
            "0",
            "--dashboard-port",
            "0",
            "--mcp-port",
            "0",
            "--quiet",
            "--repo",
        ])
        .arg(repo)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("daemon starts");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let mut seen = Vec::new();
    let url = loop {
        let line = lines
            .next()
            .expect("the daemon prints its URLs")
            .expect("utf-8");
        seen.push(line.clone());
        if let Some(rest) = line.trim().strip_prefix("dashboard") {
            break rest.trim().trim_end_matches('/').to_string();
        }
    };
    // Keep draining stderr so the daemon never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Daemon {
        child,
        url,
        stderr: seen,
    }
}

async fn wait_for(mut check: impl AsyncFnMut() -> bool, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn daemon_watches_its_repository_refuses_a_twin_and_stops_on_request() {
    let state = tempfile::tempdir().expect("state");
    let repo = tempfile::tempdir().expect("repo");
    std::fs::write(repo.path().join("a.rs"), "pub fn a() -> u32 {\n    1\n}\n").expect("write");
    let mut daemon = start_daemon(state.path(), repo.path());
    let http = client();
    let url = daemon.url.clone();
    let status = async || -> Value {
        http.get(format!("{url}/api/control/status"))
            .send()
            .await
            .expect("status")
            .json()
            .await
            .expect("json")
    };
    wait_for(
        async || status().await["repos"][0]["files"] == 1,
        "the first index build",
    )
    .await;
    let first = status().await;
    for task in ["dashboard", "proxy", "watcher"] {
        assert_eq!(first["tasks"][task]["state"], "running", "{task}: {first}");
    }
    assert!(first["urls"]["proxy"].as_str().is_some());

    // A new file is indexed by the watcher.
    std::fs::write(repo.path().join("b.rs"), "pub fn b() -> u32 {\n    2\n}\n").expect("write");
    wait_for(
        async || status().await["repos"][0]["files"] == 2,
        "the watcher's re-index",
    )
    .await;

    // A second daemon on the same state directory is refused and names the first.
    let twin = run(svc(state.path()).args([
        "daemon",
        "--port",
        "0",
        "--dashboard-port",
        "0",
        "--mcp-port",
        "0",
    ]));
    assert_eq!(twin.code, 2, "{}", twin.stderr);
    assert!(
        twin.stderr
            .contains(&format!("another svc daemon (pid {})", daemon.child.id())),
        "{}",
        twin.stderr
    );
    // A port in use is named.
    let port = url.rsplit(':').next().expect("port").to_string();
    let other = tempfile::tempdir().expect("other state");
    let taken = run(svc(other.path()).args([
        "daemon",
        "--port",
        "0",
        "--dashboard-port",
        &port,
        "--mcp-port",
        "0",
    ]));
    assert_eq!(taken.code, 2);
    assert!(
        taken
            .stderr
            .contains(&format!("the dashboard port 127.0.0.1:{port} is in use")),
        "{}",
        taken.stderr
    );

    // A repository that vanishes makes the watcher fail and retry; the daemon keeps serving.
    std::fs::remove_dir_all(repo.path()).expect("remove the repository");
    wait_for(
        async || status().await["tasks"]["watcher"]["state"] == "restarting",
        "the watcher to notice the vanished repository",
    )
    .await;
    let after = status().await;
    let error = after["tasks"]["watcher"]["last_error"]
        .as_str()
        .unwrap_or_default();
    assert!(
        error.contains("vanished") || error.contains("cannot watch"),
        "{after}"
    );
    assert_eq!(after["tasks"]["dashboard"]["state"], "running");

    let pid_file = state.path().join("daemon.pid");
    assert!(pid_file.exists(), "{:?}", daemon.stderr);
    let stopped = http
        .post(format!("{url}/api/control/stop"))
        .send()
        .await
        .expect("stop");
    assert_eq!(stopped.status(), 200);
    let deadline = Instant::now() + Duration::from_secs(10);
    let code = loop {
        if let Some(code) = daemon.child.try_wait().expect("wait") {
            break code;
        }
        assert!(Instant::now() < deadline, "the daemon did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(code.success(), "{code:?}");
    assert!(
        !pid_file.exists(),
        "the pid file is removed on a clean stop"
    );
}

#[test]
fn go_without_a_codebase_warns_and_says_what_to_run() {
    let state = tempfile::tempdir().expect("state");
    let empty = tempfile::tempdir().expect("empty");
    std::fs::write(empty.path().join("notes.txt"), "nothing to index here").expect("write");
    let done = run(svc(state.path()).current_dir(empty.path()).arg("go"));
    assert_eq!(done.code, 1, "{}", done.stderr);
    assert!(
        done.stderr.contains("warning: no codebase detected"),
        "{}",
        done.stderr
    );
    assert!(
        done.stderr.contains("svc daemon --repo DIR"),
        "{}",
        done.stderr
    );
    assert!(
        !state.path().join("daemon.pid").exists(),
        "nothing was started"
    );
}

#[tokio::test]
async fn go_indexes_the_project_starts_the_daemon_and_prints_the_agent_lines() {
    let state = tempfile::tempdir().expect("state");
    let project = tempfile::tempdir().expect("project");
    std::fs::write(
        project.path().join("Cargo.toml"),
        "[package]\nname = \"x\"\n",
    )
    .expect("write");
    std::fs::create_dir(project.path().join("src")).expect("mkdir");
    std::fs::write(
        project.path().join("src/lib.rs"),
        "pub fn x() -> u8 {\n    1\n}\n",
    )
    .expect("write");
    let mut child = svc(state.path())
        .current_dir(project.path())
        .args([
            "go",
            "--no-browser",
            "--port",
            "0",
            "--dashboard-port",
            "0",
            "--mcp-port",
            "0",
            "--quiet",
        ])
        .env("PATH", "/nonexistent")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("go starts");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let mut seen = Vec::new();
    while let Some(Ok(line)) = lines.next() {
        seen.push(line.clone());
        if line.contains("Gemini:") {
            break;
        }
    }
    let text = seen.join("\n");
    std::thread::spawn(move || for _ in lines {});
    assert!(text.contains("Cargo.toml found"), "{text}");
    assert!(text.contains("svc go: indexed 2 files"), "{text}");
    assert!(text.contains("No coding agent found on PATH"), "{text}");
    assert!(
        text.contains("ANTHROPIC_BASE_URL=http://127.0.0.1:"),
        "{text}"
    );
    let url = seen
        .iter()
        .find_map(|l| l.trim().strip_prefix("dashboard"))
        .map(|rest| rest.trim().trim_end_matches('/').to_string())
        .expect("the dashboard URL");
    let status: Value = client()
        .get(format!("{url}/api/control/status"))
        .send()
        .await
        .expect("status")
        .json()
        .await
        .expect("json");
    assert_eq!(status["proxy"]["witness"]["mode"], "audit", "{status}");
    let repo = status["repos"][0]["path"]
        .as_str()
        .expect("the project is watched");
    assert!(Path::new(repo).ends_with(project.path().file_name().expect("name")));
    client()
        .post(format!("{url}/api/control/stop"))
        .send()
        .await
        .expect("stop");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(code) = child.try_wait().expect("wait") {
            assert!(code.success());
            break;
        }
        assert!(Instant::now() < deadline, "svc go did not stop");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Found by probing: `svc dashboard --runs /nonexist` (and `svc daemon`) started and listed
/// nothing, where `svc view /nonexist` is a usage error.
#[test]
fn a_runs_folder_that_does_not_exist_is_a_usage_error() {
    let home = tempfile::tempdir().expect("tempdir");
    let missing = home.path().join("no-such-runs");
    for command in [
        &["dashboard", "--port", "0"][..],
        &[
            "daemon",
            "--port",
            "0",
            "--dashboard-port",
            "0",
            "--mcp-port",
            "0",
        ][..],
    ] {
        let out = run(svc(home.path()).args(command).arg("--runs").arg(&missing));
        assert_eq!(out.code, 2, "{command:?}: {}", out.stderr);
        assert!(
            out.stderr.contains("is not a directory"),
            "{command:?}: {}",
            out.stderr
        );
    }
    // Found by probing too: `--no-proxy --witness strict` dropped the witness in silence.
    let out = run(svc(home.path()).args([
        "daemon",
        "--no-proxy",
        "--witness",
        "strict",
        "--dashboard-port",
        "0",
        "--mcp-port",
        "0",
    ]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("needs the proxy, which --no-proxy leaves out"),
        "{}",
        out.stderr
    );
}
