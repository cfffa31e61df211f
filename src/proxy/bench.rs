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
use futures_util::StreamExt;
use serde_json::{Value, json};

use super::server::{ProxySettings, ProxyState};
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

const OVERLOADED: &str =
    r#"{"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}"#;
const TRUNCATED_SSE: &str =
    "data: {\"choices\":[{\"delta\":{\"content\":\"The build\"}}]}\n\ndata: {\"choi";
const INVALID_JSON: &str = "{\"id\": ";

/// The faults the fake upstream injects (`x-bench-fault`); the empty name is a healthy answer.
pub const FAULTS: [&str; 7] = [
    "",
    "5xx",
    "reset",
    "slow_headers",
    "slow_body",
    "truncated_sse",
    "invalid_json",
];

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
            OVERLOADED,
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
        "slow_headers" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            ([("content-type", "application/json")], ANSWER).into_response()
        }
        "slow_body" => {
            // The headers and the first bytes come at once, then the body stalls.
            let (head, tail) = ANSWER.split_at(20);
            let stalled = futures_util::stream::once(async move {
                Ok::<_, std::io::Error>(Bytes::from_static(head.as_bytes()))
            })
            .chain(futures_util::stream::once(async move {
                tokio::time::sleep(Duration::from_secs(5)).await;
                Ok(Bytes::from_static(tail.as_bytes()))
            }));
            let mut response = Response::new(Body::from_stream(stalled));
            response
                .headers_mut()
                .insert("content-type", "application/json".parse().expect("static"));
            response
        }
        "truncated_sse" => ([("content-type", "text/event-stream")], TRUNCATED_SSE).into_response(),
        "invalid_json" => ([("content-type", "application/json")], INVALID_JSON).into_response(),
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

/// Serves the proxy as `svc proxy` does (its listener, with connection info), so the figure is
/// the command's: served as a bare app it hid, and then showed, what the listener changes.
async fn serve_proxy(state: std::sync::Arc<ProxyState>) -> Result<String, BenchError> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    let listener = crate::own_user::OwnUserListener::new(listener);
    tokio::spawn(async move {
        let _ = axum::serve(listener, super::make_service(state)).await;
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
/// [`load`] straight to the upstream, then the same through the proxy: (direct, via).
async fn both(
    client: &reqwest::Client,
    upstream_url: &str,
    proxy_url: &str,
    path: &str,
    body: Bytes,
    total: usize,
    clients: usize,
) -> ((Vec<f64>, usize), (Vec<f64>, usize)) {
    let direct = load(
        client,
        &format!("{upstream_url}{path}"),
        body.clone(),
        total,
        clients,
    )
    .await;
    let via = load(client, &format!("{proxy_url}{path}"), body, total, clients).await;
    (direct, via)
}

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

/// The proxy's read timeout in the benchmark (the slow faults stay silent longer).
pub const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// The fake upstream and a proxy in front of it (budget 20,000, [`READ_TIMEOUT`]); returns
/// their URLs. State lives in `state_dir`.
pub async fn start(state_dir: &std::path::Path) -> Result<(String, String), BenchError> {
    let upstream_url = serve(axum::Router::new().fallback(upstream)).await?;
    let mut settings = ProxySettings::new(state_dir.to_path_buf());
    settings.upstreams = Upstreams {
        anthropic: upstream_url.clone(),
        openai: upstream_url.clone(),
        gemini: upstream_url.clone(),
    };
    settings.budget = 20_000;
    settings.read_timeout = READ_TIMEOUT;
    let state = ProxyState::new(settings, None)?;
    let proxy_url = serve_proxy(state).await?;
    Ok((upstream_url, proxy_url))
}

async fn run(requests: usize, clients: usize) -> Result<Vec<Figure>, BenchError> {
    let state_dir = tempfile::tempdir()?;
    let (upstream_url, proxy_url) = start(state_dir.path()).await?;
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
    both(
        &client,
        &upstream_url,
        &proxy_url,
        path,
        small.clone(),
        200,
        8,
    )
    .await;
    let rss_before = rss_mb();
    let ((direct, direct_failures), (via, via_failures)) = both(
        &client,
        &upstream_url,
        &proxy_url,
        path,
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
    let ((direct, _), (via, _)) = both(
        &client,
        &upstream_url,
        &proxy_url,
        path,
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
    let ((direct, _), (via, _)) = both(
        &client,
        &upstream_url,
        &proxy_url,
        path,
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

    // Faults during a load run: every client gets the upstream's answer passed through or a
    // provider-shaped error, none waits past the read timeout, and memory stays flat.
    let read_timeout = READ_TIMEOUT;
    let fault_requests = (requests / 5).max(FAULTS.len() * 10);
    let rss_before_faults = rss_mb();
    let outcomes = fault_load(
        &client,
        &format!("{proxy_url}{path}"),
        &small,
        fault_requests,
        clients,
    )
    .await;
    let rss_after_faults = rss_mb();
    let expected = outcomes.iter().filter(|o| o.expected).count();
    let slowest = outcomes.iter().map(|o| o.millis).fold(0.0, f64::max);
    let hung = outcomes
        .iter()
        .filter(|o| o.millis > (read_timeout.as_millis() + 1000) as f64)
        .count();
    let per_fault: Vec<String> = FAULTS
        .iter()
        .map(|fault| {
            let of: Vec<&FaultOutcome> = outcomes.iter().filter(|o| o.fault == *fault).collect();
            format!(
                "{} {}/{}",
                if fault.is_empty() { "healthy" } else { fault },
                of.iter().filter(|o| o.expected).count(),
                of.len()
            )
        })
        .collect();
    figures.push(Figure {
        name: "proxy answers under upstream faults (during load)".into(),
        value: if outcomes.is_empty() {
            0.0
        } else {
            100.0 * expected as f64 / outcomes.len() as f64
        },
        unit: "% as expected".into(),
        target: Some("100".into()),
        detail: format!(
            "{} requests from {clients} clients, faults in turn ({}); read timeout 2 s, slowest {slowest:.0} ms, {hung} past timeout + 1 s; RSS {rss_before_faults:.1} -> {rss_after_faults:.1} MB",
            outcomes.len(),
            per_fault.join(", ")
        ),
    });
    Ok(figures)
}

/// One request of the fault run.
#[derive(Debug, Clone)]
pub struct FaultOutcome {
    pub fault: &'static str,
    /// The client got what the proxy promises for this fault (see [`judge`]).
    pub expected: bool,
    pub millis: f64,
}

/// What a client must get through the proxy when the upstream does `fault`: healthy, 5xx,
/// truncated SSE and invalid JSON answers are passed through byte for byte with their status;
/// silence before the headers becomes a 504 in OpenAI's error shape; a body cut or stalled after
/// the headers ends the client's body with an error (the status was already sent).
pub fn judge(fault: &str, status: u16, body: &Result<Bytes, reqwest::Error>) -> bool {
    let openai_error = |bytes: &Bytes| {
        serde_json::from_slice::<Value>(bytes).is_ok_and(|v| v["error"]["message"].is_string())
    };
    match (fault, body) {
        ("", Ok(bytes)) => status == 200 && bytes.as_ref() == ANSWER.as_bytes(),
        ("5xx", Ok(bytes)) => status == 503 && bytes.as_ref() == OVERLOADED.as_bytes(),
        ("truncated_sse", Ok(bytes)) => status == 200 && bytes.as_ref() == TRUNCATED_SSE.as_bytes(),
        ("invalid_json", Ok(bytes)) => status == 200 && bytes.as_ref() == INVALID_JSON.as_bytes(),
        ("slow_headers", Ok(bytes)) => status == 504 && openai_error(bytes),
        ("reset" | "slow_body", Err(_)) => true,
        ("reset" | "slow_body", Ok(bytes)) => status >= 500 && openai_error(bytes),
        _ => false,
    }
}

/// `total` requests from `clients` concurrent clients, request k carrying fault k mod 7.
pub async fn fault_load(
    client: &reqwest::Client,
    url: &str,
    body: &Bytes,
    total: usize,
    clients: usize,
) -> Vec<FaultOutcome> {
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..clients.max(1) {
        let (client, url, body, next) =
            (client.clone(), url.to_string(), body.clone(), next.clone());
        tasks.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                if k >= total {
                    return outcomes;
                }
                let fault = FAULTS[k % FAULTS.len()];
                let started = Instant::now();
                let expected = match client
                    .post(&url)
                    .header("content-type", "application/json")
                    .header("x-bench-fault", fault)
                    .body(body.clone())
                    .send()
                    .await
                {
                    Ok(response) => {
                        let status = response.status().as_u16();
                        judge(fault, status, &response.bytes().await)
                    }
                    Err(_) => false,
                };
                outcomes.push(FaultOutcome {
                    fault,
                    expected,
                    millis: started.elapsed().as_secs_f64() * 1000.0,
                });
            }
        }));
    }
    let mut all = Vec::with_capacity(total);
    for task in tasks {
        if let Ok(outcomes) = task.await {
            all.extend(outcomes);
        }
    }
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_injected_fault_gets_its_promised_answer_under_concurrency() {
        let state_dir = tempfile::tempdir().expect("test step");
        let (_, proxy_url) = start(state_dir.path()).await.expect("test step");
        let client = reqwest::Client::new();
        let body = Bytes::from(
            json!({"model": "gpt-4.1", "messages": [{"role": "user", "content": "Why?"}]})
                .to_string(),
        );
        let outcomes = fault_load(
            &client,
            &format!("{proxy_url}/v1/chat/completions"),
            &body,
            FAULTS.len() * 3,
            FAULTS.len(),
        )
        .await;
        assert_eq!(outcomes.len(), FAULTS.len() * 3);
        for outcome in &outcomes {
            assert!(outcome.expected, "{outcome:?}");
            assert!(
                outcome.millis < 4000.0,
                "{outcome:?} waited past the read timeout"
            );
        }
    }

    #[test]
    fn judging_refuses_what_the_proxy_must_not_do() {
        let ok = |text: &'static str| Ok(Bytes::from_static(text.as_bytes()));
        assert!(judge("", 200, &ok(ANSWER)));
        assert!(!judge("", 200, &ok("{}")), "a changed answer");
        assert!(
            !judge("5xx", 502, &ok(OVERLOADED)),
            "the upstream's status is kept"
        );
        assert!(
            !judge("invalid_json", 400, &ok(INVALID_JSON)),
            "passed through, not refused"
        );
        assert!(
            !judge("slow_headers", 200, &ok(ANSWER)),
            "waited past the timeout"
        );
        assert!(judge(
            "slow_headers",
            504,
            &ok(r#"{"error":{"message":"m"}}"#)
        ));
    }
}
