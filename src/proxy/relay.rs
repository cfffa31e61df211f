//! A request's log line, and the bodies the proxy relays as they come (streams, and answers it
//! does not check).
//!
//! The log line of an answer read whole is written when its handler returns. A streamed
//! answer's line goes with its body and is written when the stream ends: with the status 499
//! (nginx's "client closed request") when the client left first, with the upstream's failure
//! when the stream broke off, and, for a stream the witness audits after it completes, with
//! the witness's verdict (or why there is none).

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, Bytes};
use futures_util::StreamExt;

use super::check::{self, Evidence, WitnessSettings};
use super::provider::Route;
use super::routed::record;
use super::server::ProxyState;
use super::stats::RequestLog;
use super::stream_end;
use crate::routing::Plan;

/// Most bytes of a streamed answer kept for the witness; past it the stream still passes
/// through but is not checked.
pub const MAX_WITNESS_STREAM_BYTES: usize = 8 * 1024 * 1024;

/// A request's log entry until it is counted and written.
pub struct Pending {
    state: Arc<ProxyState>,
    pub log: RequestLog,
    started: Instant,
    /// The headers went out and the body carries this entry on.
    streaming: bool,
    counted: bool,
    written: bool,
}

impl Pending {
    pub fn new(state: Arc<ProxyState>, route: Route) -> Self {
        Self {
            state,
            log: RequestLog::new(route),
            started: Instant::now(),
            streaming: false,
            counted: false,
            written: false,
        }
    }

    /// Counts the request (once): its status, and its latency (the time to its headers).
    pub fn count(&mut self, status: u16) {
        if self.counted {
            return;
        }
        self.counted = true;
        self.log.status = status;
        if !self.streaming {
            self.log.latency = self.started.elapsed();
        }
        self.state.counters.record(&self.log);
    }

    /// Writes the log line (once).
    pub fn write(&mut self) {
        if self.written {
            return;
        }
        self.written = true;
        if let Some(logger) = &self.state.logger {
            (logger.0)(&self.log);
        }
    }

    pub fn finish(&mut self, status: u16) {
        self.count(status);
        self.write();
    }

    /// The headers of a streamed answer with `status` are going out: the entry moves to its
    /// body, which finishes it when the stream ends.
    pub fn hand_over(&mut self, status: u16) -> Pending {
        let route = self.log.route;
        let mut log = std::mem::replace(&mut self.log, RequestLog::new(route));
        log.status = status;
        log.latency = self.started.elapsed();
        self.counted = true;
        self.written = true;
        Pending {
            state: self.state.clone(),
            log,
            started: self.started,
            streaming: true,
            counted: false,
            written: false,
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        // Not counted: the answer did not end — the client left, or the proxy is stopping;
        // counted and not written: the check of a delivered stream was cut short by the stop.
        let stopped = self.state.stopping();
        let who = if stopped {
            "the proxy stopped"
        } else {
            "the client went away"
        };
        if self.log.witness.as_deref() == Some("deferred") {
            self.log.witness = Some(if self.counted {
                "skipped: the proxy stopped before the check ended".into()
            } else {
                format!("skipped: {who} before the stream ended; no certificate")
            });
        }
        if !self.counted {
            self.log.error = Some(if self.streaming {
                format!("{who} during the stream")
            } else {
                format!("{who} before the answer")
            });
            self.count(499);
        }
        if !self.written {
            self.write();
        }
    }
}

/// The upstream body as it comes. A body the upstream cut off ends the client's response with
/// an error too, but only after what arrived before the cut has been written out: hyper drops
/// what it has not sent yet when a body fails, and an error right behind the last chunk lost
/// whole events the upstream had delivered. `pending` is a stream's log entry.
pub fn passthrough(upstream: reqwest::Response, pending: Option<Pending>) -> Body {
    let mut stream = upstream.bytes_stream();
    Body::from_stream(async_stream(move |send| async move {
        let mut pending = pending;
        while let Some(chunk) = next_chunk(&mut stream, &send).await {
            if let (Err(error), Some(pending)) = (&chunk, pending.as_mut()) {
                pending.log.error = Some(cut_reason(error));
                pending.count(pending.log.status);
            }
            let failed = chunk.is_err();
            if failed {
                flush_pause().await;
            }
            if send.send(chunk).await.is_err() || failed {
                return;
            }
        }
        if send.is_closed() {
            // The client went away (the entry says 499).
            return;
        }
        if let Some(pending) = pending.as_mut() {
            pending.count(pending.log.status);
        }
    }))
}

/// An audited stream: passed through untouched while a copy is kept; once it has reached the
/// client whole, the witness checks the text and records the certificate (listed by `GET
/// /witness`). A stream that broke off, ended in an error event or without its end marker, or
/// grew past [`MAX_WITNESS_STREAM_BYTES`], is not certified; the log line says why.
pub fn tee_for_witness(
    state: Arc<ProxyState>,
    route: Route,
    settings: WitnessSettings,
    evidence: Evidence,
    plan: Option<Plan>,
    upstream: reqwest::Response,
    mut pending: Pending,
) -> Body {
    let mut copy: Vec<u8> = Vec::new();
    let mut overflow = false;
    let mut failed = None;
    let mut stream = upstream.bytes_stream();
    let body = async_stream(move |yield_chunk| async move {
        while let Some(chunk) = next_chunk(&mut stream, &yield_chunk).await {
            match &chunk {
                Ok(bytes) if !overflow => {
                    if copy.len() + bytes.len() > MAX_WITNESS_STREAM_BYTES {
                        overflow = true;
                        copy = Vec::new();
                    } else {
                        copy.extend_from_slice(bytes);
                    }
                }
                Ok(_) => {}
                Err(error) => {
                    failed = Some(cut_reason(error));
                    pending.log.error = failed.clone();
                    pending.count(pending.log.status);
                    flush_pause().await;
                }
            }
            if yield_chunk.send(chunk).await.is_err() {
                // The client went away: nothing complete to certify (the entry says 499).
                return;
            }
            if failed.is_some() {
                break;
            }
        }
        if failed.is_none() && yield_chunk.is_closed() {
            // The client went away: nothing complete to certify (the entry says 499).
            return;
        }
        pending.count(pending.log.status);
        // The client's answer ends here; the check runs after it.
        drop(yield_chunk);
        // A stream cut after its end marker is whole, and checked.
        // The copy is read once: its events and how it ended serve both the check and the
        // question whether a cut stream was whole.
        let events = check::stream_events(&copy);
        let end = stream_end::of(route, &events, stream_end::has_done_marker(&copy));
        let whole = !overflow && end.is_complete();
        if whole && failed.is_some() {
            // The answer was whole: what broke was only the body's last chunk.
            pending.log.error = Some(
                "the upstream closed the connection after the stream's end marker, without the body's last chunk".into(),
            );
        }
        let verdict = if let (Some(reason), false) = (&failed, whole) {
            skipped(reason)
        } else if overflow {
            skipped(&format!(
                "the stream is over {} MiB, the most the witness keeps",
                MAX_WITNESS_STREAM_BYTES / (1024 * 1024)
            ))
        } else {
            audit(
                &state,
                route,
                &settings,
                &evidence,
                plan.as_ref(),
                &events,
                &end,
            )
            .await
        };
        pending.log.witness = Some(verdict);
        pending.write();
    });
    Body::from_stream(body)
}

type Chunk = Result<Bytes, reqwest::Error>;

/// Why an upstream body ended early, in words: a stall past the read timeout is not a break.
fn cut_reason(error: &reqwest::Error) -> String {
    if error.is_timeout() {
        format!("the upstream stream stalled past the read timeout: {error}")
    } else {
        format!("the upstream stream broke off: {error}")
    }
}

/// The upstream's next chunk; `None` at its end, and as soon as the client has gone away
/// (waiting for the next chunk to find out kept a stalled upstream's connection, and the
/// request's log line, open until it spoke again).
async fn next_chunk<S>(stream: &mut S, client: &tokio::sync::mpsc::Sender<Chunk>) -> Option<Chunk>
where
    S: futures_util::Stream<Item = Chunk> + Unpin,
{
    tokio::select! {
        chunk = stream.next() => chunk,
        () = client.closed() => None,
    }
}

fn skipped(why: &str) -> String {
    format!("skipped: {why}; no certificate")
}

/// Checks a stream that reached the client whole; the log's witness entry.
async fn audit(
    state: &Arc<ProxyState>,
    route: Route,
    settings: &WitnessSettings,
    evidence: &Evidence,
    plan: Option<&Plan>,
    events: &[serde_json::Value],
    end: &stream_end::StreamEnd,
) -> String {
    if let Some(problem) = end.problem() {
        return skipped(&problem);
    }
    let answer = route.stream_answer(events);
    let recorded = check::run(settings, &state.witness_store, evidence, &answer, false).await;
    state
        .counters
        .record_stream_witness(recorded.as_ref().ok().map(|r| &r.0));
    match recorded {
        Ok((certificate, _, _)) => {
            if let Some(plan) = plan {
                record(state, vec![plan.verdict_entry(&certificate)]).await;
            }
            check::log_verdict(&certificate)
        }
        Err(problem) => format!("skipped: {problem}"),
    }
}

/// A pause before a body's error, in which the server finds the body pending and flushes what
/// it holds.
async fn flush_pause() {
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
}

/// A stream fed by a producer task through a bounded channel (backpressure: the producer waits
/// while the client is slow).
fn async_stream<F, Fut>(
    producer: F,
) -> impl futures_util::Stream<Item = Result<Bytes, reqwest::Error>> + Send + 'static
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<Bytes, reqwest::Error>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (sender, mut receiver) = tokio::sync::mpsc::channel(16);
    tokio::spawn(producer(sender));
    futures_util::stream::poll_fn(move |cx| receiver.poll_recv(cx))
}
