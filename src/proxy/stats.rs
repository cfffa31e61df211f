//! Observability: one [`RequestLog`] per request (rendered as one line by the command) and the
//! running [`Counters`] that `GET /svc/status` returns (and the dashboard will read).

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

use super::optimize::Outcome;
use super::provider::Route;
use crate::witness::Certificate;
use crate::witness::certificate::CertificateStatus;

/// What happened to one request.
#[derive(Debug, Clone)]
pub struct RequestLog {
    pub route: Route,
    pub status: u16,
    pub latency: Duration,
    pub outcome: Option<Outcome>,
    /// The witness verdict, `deferred` for a stream checked after it completes.
    pub witness: Option<String>,
    /// A proxy-side error message.
    pub error: Option<String>,
    /// The routing decision (the `X-Svc-Route` value) of a prompt request.
    pub routing: Option<String>,
    /// Its task class (the `X-Svc-Route-Class` value).
    pub routing_class: Option<String>,
}

impl RequestLog {
    pub fn new(route: Route) -> Self {
        Self {
            route,
            status: 0,
            latency: Duration::ZERO,
            outcome: None,
            witness: None,
            error: None,
            routing: None,
            routing_class: None,
        }
    }
}

impl fmt::Display for RequestLog {
    /// `svc proxy: anthropic.messages 200 tokens 61234->18000 saved 43234 (70.6%) rewritten
    /// ctx_… 41.2 ms witness supported (0 flagged)`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "svc proxy: {} {}", self.route.as_str(), self.status)?;
        if let Some(outcome) = &self.outcome {
            if let Some((before, after)) = outcome.tokens() {
                let saved = before.saturating_sub(after);
                let percent = if before == 0 {
                    0.0
                } else {
                    100.0 * saved as f64 / before as f64
                };
                write!(f, " tokens {before}->{after} saved {saved} ({percent:.1}%)")?;
            }
            write!(f, " {}", outcome.header())?;
            if let Outcome::Rewritten { ctx_id, .. } = outcome {
                write!(f, " {ctx_id}")?;
            }
        }
        write!(f, " {:.1} ms", self.latency.as_secs_f64() * 1000.0)?;
        if let Some(witness) = &self.witness {
            write!(f, " witness {witness}")?;
        }
        if let Some(routing) = &self.routing {
            write!(f, " route {routing}")?;
        }
        if let Some(error) = &self.error {
            write!(f, " error: {error}")?;
        }
        Ok(())
    }
}

/// Running totals since the proxy started.
#[derive(Debug, Default)]
pub struct Counters {
    requests: AtomicU64,
    rewritten: AtomicU64,
    unchanged: AtomicU64,
    skipped: AtomicU64,
    errors: AtomicU64,
    tokens_received: AtomicU64,
    tokens_forwarded: AtomicU64,
    witness_checked: AtomicU64,
    witness_flagged: AtomicU64,
    latency_micros: AtomicU64,
}

/// A snapshot of [`Counters`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CountersSnapshot {
    pub requests: u64,
    /// Requests forwarded with a compressed prompt.
    pub rewritten: u64,
    /// Requests forwarded as received (under budget, paused, no gain, not a prompt).
    pub unchanged: u64,
    /// Requests the proxy could not safely rewrite (forwarded as received).
    pub skipped: u64,
    /// Answers with a 4xx/5xx status (the upstream's or the proxy's).
    pub errors: u64,
    /// Prompt text tokens received and forwarded, over the requests that were counted.
    pub tokens_received: u64,
    pub tokens_forwarded: u64,
    pub tokens_saved: u64,
    pub witness_checked: u64,
    pub witness_flagged: u64,
    /// Sum of the proxy's time to answer headers, in microseconds.
    pub latency_micros_total: u64,
}

impl Counters {
    pub fn record(&self, log: &RequestLog) {
        let add = |counter: &AtomicU64, n: u64| {
            counter.fetch_add(n, Ordering::Relaxed);
        };
        add(&self.requests, 1);
        match &log.outcome {
            Some(Outcome::Rewritten { .. }) => add(&self.rewritten, 1),
            Some(Outcome::Skipped { .. }) => add(&self.skipped, 1),
            Some(Outcome::Unchanged { .. }) | None => add(&self.unchanged, 1),
        }
        if let Some((before, after)) = log.outcome.as_ref().and_then(Outcome::tokens) {
            add(&self.tokens_received, before as u64);
            add(&self.tokens_forwarded, after as u64);
        }
        if log.status >= 400 {
            add(&self.errors, 1);
        }
        if let Some(witness) = &log.witness
            && witness != "deferred"
            && !witness.starts_with("skipped")
        {
            add(&self.witness_checked, 1);
            if witness.starts_with("flagged") {
                add(&self.witness_flagged, 1);
            }
        }
        add(&self.latency_micros, log.latency.as_micros() as u64);
    }

    /// Counts a streamed answer's certificate, recorded after the stream ended.
    pub fn record_stream_witness(&self, certificate: Option<&Certificate>) {
        if let Some(certificate) = certificate {
            self.witness_checked.fetch_add(1, Ordering::Relaxed);
            if certificate.status == CertificateStatus::Flagged {
                self.witness_flagged.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub fn snapshot(&self) -> CountersSnapshot {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        let received = get(&self.tokens_received);
        let forwarded = get(&self.tokens_forwarded);
        CountersSnapshot {
            requests: get(&self.requests),
            rewritten: get(&self.rewritten),
            unchanged: get(&self.unchanged),
            skipped: get(&self.skipped),
            errors: get(&self.errors),
            tokens_received: received,
            tokens_forwarded: forwarded,
            tokens_saved: received.saturating_sub(forwarded),
            witness_checked: get(&self.witness_checked),
            witness_flagged: get(&self.witness_flagged),
            latency_micros_total: get(&self.latency_micros),
        }
    }
}
