//! The proxy load figures behind `svc bench --group proxy`: added latency of pass-through and of
//! optimisation, memory, and behaviour under upstream faults, against an in-process fake upstream
//! on 127.0.0.1 (so only the proxy's own cost is measured, over real sockets).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::server::{ProxySettings, ProxyState, app};
use super::upstream::Upstreams;
use crate::bench::Figure;

/// Errors of the benchmark.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error("proxy benchmark I/O: {0}")]
    Io(#[from] std::io::Error),
    #[error("proxy benchmark client: {0}")]
    Client(#[from] reqwest::Error),
    #[error(transparent)]
    Upstream(#[from] super::upstream::ClientError),
}

const ANSWER: &str = r#"{"id":"chatcmpl-bench","object":"chat.completion","created":1741569952,"model":"gpt-4.1","choices":[{"index":0,"message":{"role":"assistant","content":"The build fails because parse_config returns Ok for an empty file."},"finish_reason":"stop"}],"usage":{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29}}"#;

/// The fake upstream: a fixed chat answer, or the fault named by the `x-bench-fault` header.
async fn upstream(headers: HeaderMap, _request: Request) -> Response {
    let fault = headers
        .get("x-bench-fault")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    match fault {
        "5xx" => (
            StatusCode::SERVICE_UNAVAILABLE,
            [("content-type", "application/json")],
            r#"{"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}"#,
        )
            .into_response(),
        "reset" => {
            // A body that fails mid-way: the connection is cut after the headers.
            let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
                Ok(Bytes::from_static(b"{\"id\":")),
                Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "reset",
                )),
            ];
            let mut response = Response::new(Body::from_stream(futures_util::stream::iter(chunks)));
            response
                .headers_mut()
                .insert("content-type", "application/json".parse().expect("static"));
            response
        }
        "slow" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            ([("content-type", "application/json")], ANSWER).into_response()
        }
        "truncated_sse" => (
            [("content-type", "text/event-stream")],
            "data: {\"choices\":[{\"delta\":{\"content\":\"The build\"}}]}\n\ndata: {\"choi",
        )
            .into_response(),
        "invalid_json" => ([("content-type", "application/json")], "{\"id\": ").into_response(),
        _ => ([("content-type", "application/json")], ANSWER).into_response(),
    }
}

async fn serve(router: axum::Router) -> Result<String, BenchError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Ok(format!("http://{address}"))
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// Sends `total` requests from `clients` concurrent clients; returns sorted latencies (ms) of
/// the answered requests and the number of transport failures.
async fn load(
    client: &reqwest::Client,
    url: &str,
    body: Bytes,
    total: usize,
    clients: usize,
) -> (Vec<f64>, usize) {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..clients.max(1) {
        let (client, url, body, next) =
            (client.clone(), url.to_string(), body.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut failures = 0;
            while next.fetch_add(1, Ordering::Relaxed) < total {
                let started = Instant::now();
                let answered = match client
                    .post(&url)
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send()
                    .await
                {
                    Ok(response) => response.bytes().await.is_ok(),
                    Err(_) => false,
                };
                if answered {
                    latencies.push(started.elapsed().as_secs_f64() * 1000.0);
                } else {
                    failures += 1;
                }
            }
            (latencies, failures)
        }));
    }
    let mut all = Vec::with_capacity(total);
    let mut failures = 0;
    for task in tasks {
        match task.await {
            Ok((latencies, failed)) => {
                all.extend(latencies);
                failures += failed;
            }
            Err(_) => failures += 1,
        }
    }
    all.sort_by(f64::total_cmp);
    (all, failures)
}

/// Resident memory of this process in MB (Linux; 0 elsewhere).
fn rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("VmRSS:"))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// A chat request of about `tokens` tokens: distinct log lines as tool output, then a question.
pub fn large_request(tokens: usize) -> Value {
    let mut log = String::new();
    let mut i = 0;
    // About 30 tokens per line.
    while i * 30 < tokens {
        log.push_str(&format!(
            "2026-11-23T10:{:02}:{:02}Z INFO worker-{} processed batch {} of shard {} in {} ms\n",
            (i / 60) % 60,
            i % 60,
            i % 17,
            i * 7,
            i % 23,
            (i * 37) % 997
        ));
        i += 1;
    }
    json!({"model": "gpt-4.1", "messages": [
        {"role": "system", "content": "You are a build engineer."},
        {"role": "user", "content": "Why does the build fail?"},
        {"role": "tool", "tool_call_id": "call_1", "content": log},
        {"role": "user", "content": "Which worker is slowest?"},
    ]})
}

/// All proxy figures. `requests` and `clients` size the pass-through load run.
pub fn figures(requests: usize, clients: usize) -> Result<Vec<Figure>, BenchError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(requests, clients))
}

async fn run(requests: usize, clients: usize) -> Result<Vec<Figure>, BenchError> {
    let state_dir = tempfile::tempdir()?;
    let upstream_url = serve(axum::Router::new().fallback(upstream)).await?;
    let mut settings = ProxySettings::new(state_dir.path().to_path_buf());
    settings.upstreams = Upstreams {
        anthropic: upstream_url.clone(),
        openai: upstream_url.clone(),
        gemini: upstream_url.clone(),
    };
    settings.budget = 20_000;
    settings.read_timeout = Duration::from_secs(2);
    let state = ProxyState::new(settings, None)?;
    let proxy_url = serve(app(state)).await?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(clients.max(1))
        .timeout(Duration::from_secs(30))
        .build()?;
    let small = Bytes::from(
        json!({"model": "gpt-4.1", "messages": [{"role": "user", "content": "Why does the build fail?"}]})
            .to_string(),
    );
    let path = "/v1/chat/completions";
    // Warm up both paths (connections, tokenizer tables).
    load(
        &client,
        &format!("{upstream_url}{path}"),
        small.clone(),
        200,
        8,
    )
    .await;
    load(
        &client,
        &format!("{proxy_url}{path}"),
        small.clone(),
        200,
        8,
    )
    .await;
    let rss_before = rss_mb();
    let (direct, direct_failures) = load(
        &client,
        &format!("{upstream_url}{path}"),
        small.clone(),
        requests,
        clients,
    )
    .await;
    let (via, via_failures) = load(
        &client,
        &format!("{proxy_url}{path}"),
        small.clone(),
        requests,
        clients,
    )
    .await;
    let rss_after = rss_mb();
    let detail = format!(
        "{requests} requests, {clients} concurrent clients, fake upstream on 127.0.0.1, under budget; transport failures: {direct_failures} direct, {via_failures} via proxy"
    );
    let mut figures = vec![
        Figure {
            name: "proxy added latency p50 (pass-through)".into(),
            value: percentile(&via, 50.0) - percentile(&direct, 50.0),
            unit: "ms".into(),
            target: Some("<= 2".into()),
            detail: format!(
                "{detail}; direct p50 {:.2} ms, via proxy {:.2} ms",
                percentile(&direct, 50.0),
                percentile(&via, 50.0)
            ),
        },
        Figure {
            name: "proxy added latency p99 (pass-through)".into(),
            value: percentile(&via, 99.0) - percentile(&direct, 99.0),
            unit: "ms".into(),
            target: Some("<= 10".into()),
            detail: format!(
                "{detail}; direct p99 {:.2} ms, via proxy {:.2} ms",
                percentile(&direct, 99.0),
                percentile(&via, 99.0)
            ),
        },
        Figure {
            name: "proxy process RSS after load".into(),
            value: rss_after,
            unit: "MB".into(),
            target: Some("<= 150".into()),
            detail: format!(
                "proxy, fake upstream and clients in one process; {rss_before:.1} MB before the load run"
            ),
        },
    ];

    // One client at a time: the proxy's own cost per request, without queueing.
    let sequential = (requests / 10).max(100);
    let (direct, _) = load(
        &client,
        &format!("{upstream_url}{path}"),
        small.clone(),
        sequential,
        1,
    )
    .await;
    let (via, _) = load(
        &client,
        &format!("{proxy_url}{path}"),
        small.clone(),
        sequential,
        1,
    )
    .await;
    for p in [50.0, 99.0] {
        figures.push(Figure {
            name: format!("proxy added latency p{p} (pass-through, one client)"),
            value: percentile(&via, p) - percentile(&direct, p),
            unit: "ms".into(),
            target: Some(if p == 50.0 { "<= 2" } else { "<= 10" }.into()),
            detail: format!(
                "{sequential} sequential requests; direct {:.2} ms, via proxy {:.2} ms",
                percentile(&direct, p),
                percentile(&via, p)
            ),
        });
    }

    // Optimisation on: a 50K-token request compressed to the 20K budget.
    let large = Bytes::from(large_request(50_000).to_string());
    let rounds = 20;
    let (direct, _) = load(
        &client,
        &format!("{upstream_url}{path}"),
        large.clone(),
        rounds,
        1,
    )
    .await;
    let (via, _) = load(
        &client,
        &format!("{proxy_url}{path}"),
        large.clone(),
        rounds,
        1,
    )
    .await;
    figures.push(Figure {
        name: "proxy added latency p50 (optimising a 50K-token request)".into(),
        value: percentile(&via, 50.0) - percentile(&direct, 50.0),
        unit: "ms".into(),
        target: Some("<= 60".into()),
        detail: format!("{rounds} sequential requests, budget 20,000 tokens, one commit each"),
    });

    // Faults: every client gets a provider-shaped answer or error, within the timeout.
    let faults = ["5xx", "reset", "slow", "truncated_sse", "invalid_json", ""];
    let rss_before_faults = rss_mb();
    let mut well_formed = 0usize;
    let mut total = 0usize;
    let mut slowest: f64 = 0.0;
    for round in 0..10 {
        let mut tasks = Vec::new();
        for (k, fault) in faults.iter().enumerate() {
            let client = client.clone();
            let url = format!("{proxy_url}{path}");
            let body = small.clone();
            let fault = fault.to_string();
            tasks.push(tokio::spawn(async move {
                let started = Instant::now();
                let response = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("x-bench-fault", &fault)
                    .body(body)
                    .send()
                    .await;
                let ok = match response {
                    Ok(response) => {
                        let status = response.status();
                        let is_sse = fault == "truncated_sse";
                        match response.bytes().await {
                            // A broken upstream body may end the client's body early too; the
                            // client still got an answer and did not hang.
                            Err(_) => fault == "reset",
                            Ok(bytes) => {
                                is_sse
                                    || fault == "invalid_json"
                                    || serde_json::from_slice::<Value>(&bytes).is_ok_and(|v| {
                                        status.is_success() || v.get("error").is_some()
                                    })
                            }
                        }
                    }
                    Err(_) => false,
                };
                (ok, started.elapsed().as_secs_f64() * 1000.0, round * 10 + k)
            }));
        }
        for task in tasks {
            if let Ok((ok, latency, _)) = task.await {
                total += 1;
                well_formed += usize::from(ok);
                slowest = slowest.max(latency);
            }
        }
    }
    figures.push(Figure {
        name: "proxy answers under upstream faults".into(),
        value: if total == 0 { 0.0 } else { 100.0 * well_formed as f64 / total as f64 },
        unit: "% provider-shaped, none hung".into(),
        target: Some("100".into()),
        detail: format!(
            "{total} requests: 5xx, connection reset, 5 s silence (2 s read timeout), truncated SSE, invalid JSON, healthy; slowest {slowest:.0} ms; RSS {rss_before_faults:.1} -> {:.1} MB",
            rss_mb()
        ),
    });
    Ok(figures)
}
