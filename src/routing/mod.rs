//! Fail-closed routing (SPEC §1.6, §7): a request of a low-risk task class with a good local
//! record may go to a configured cheaper model; in every other case the model the client asked
//! for serves it. Off unless `routing.toml` in the state directory enables it ([`config`]).
//!
//! Per prompt request the proxy asks [`Routing::plan`]: the request's task class ([`class`],
//! high-risk keywords from [`risk`]), what it asks for and whether that can be rewritten
//! ([`rewrite`]), and the gate's verdict on the class's counts ([`gate`]). The decision is
//! logged to the RAVS log (one `route` event per request) and returned in the
//! `X-Svc-Route` response header:
//!
//! - `routed; model=gpt-5-mini; reason=gate_passed`
//! - `original; reason=high_risk` (or any other [`Reason`])
//! - `original; reason=shadow_trial; shadow=gpt-5-mini` while the cheaper model answers in the
//!   shadow (`shadow_observations`, see [`gate`])
//! - `escalated; model=gpt-5; routed_status=500` when the routed request failed upstream and the
//!   original model was asked instead (logged as an `escalation` event)
//!
//! and `X-Svc-Route-Class` carries the class id. The witness's verdicts on answers (`verdict`
//! events), client re-sends of the same request within [`RETRY_WINDOW`] (`retry` events) and
//! escalations feed the class counts the gate reads, so a class whose answers go bad stops
//! being routed. The counts are read from the log when the proxy starts and kept in memory.
//!
//! Labels need the witness: without `--witness` no answer is labelled, no class ever has
//! enough observations, and nothing is routed.
//!
//! [`simulate`] replays a synthetic request stream through the same gate and log (the
//! `routing` group of `svc bench`).

pub mod class;
pub mod config;
pub mod gate;
pub mod rewrite;
pub mod risk;
pub mod simulate;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::proxy::provider::Route;
use crate::ravs::{Appender, Decision, Entry, Event, EventLog, Label, Reason, Tally};
use crate::witness::Certificate;
use crate::witness::certificate::CertificateStatus;
pub use class::TaskClass;
pub use config::{ConfigError, RoutingConfig};
pub use gate::{ConfigState, Verdict};
use risk::RiskMatcher;

/// Response headers.
pub const HEADER_ROUTE: &str = "x-svc-route";
pub const HEADER_ROUTE_CLASS: &str = "x-svc-route-class";
/// The same request body again within this window counts as a retry of the first.
pub const RETRY_WINDOW: Duration = Duration::from_secs(600);
/// Request fingerprints remembered for retry detection (oldest dropped first).
const RECENT_CAPACITY: usize = 4_096;

/// The routing state of one proxy.
#[derive(Debug)]
pub struct Routing {
    config: ConfigState,
    risk: RiskMatcher,
    log: Appender,
    tally: Mutex<Tally>,
    recent: Mutex<HashMap<String, Instant>>,
    /// Lines of the log skipped at start (unreadable), with their `file:line`.
    pub skipped_at_start: Vec<String>,
}

/// What routing decided for one request.
#[derive(Debug, Clone)]
pub struct Plan {
    pub class: TaskClass,
    pub class_id: String,
    pub requested_model: Option<String>,
    pub verdict: Verdict,
    /// Seconds since the same request was last seen, when it is a retry.
    pub retry_after: Option<f64>,
    /// Set when the routed request failed and the original model was asked instead.
    pub escalated_status: Option<Option<u16>>,
}

impl Plan {
    /// The model the request goes to.
    pub fn served_model(&self) -> Option<&str> {
        match self.verdict.decision {
            Decision::Routed if self.escalated_status.is_none() => {
                self.verdict.cheap_model.as_deref()
            }
            _ => self.requested_model.as_deref(),
        }
    }

    /// Whether the answer comes from the cheaper model.
    pub fn routed(&self) -> bool {
        self.verdict.decision == Decision::Routed && self.escalated_status.is_none()
    }

    /// The `X-Svc-Route` header value.
    pub fn header(&self) -> String {
        match (&self.escalated_status, self.verdict.decision) {
            (Some(status), _) => format!(
                "escalated; model={}; routed_status={}",
                self.requested_model.as_deref().unwrap_or("-"),
                status.map_or_else(|| "unreachable".to_string(), |s| s.to_string())
            ),
            (None, Decision::Routed) => format!(
                "routed; model={}; reason={}",
                self.verdict.cheap_model.as_deref().unwrap_or("-"),
                self.verdict.reason.as_str()
            ),
            (None, Decision::Original) => match (&self.verdict.cheap_model, self.verdict.shadow) {
                (Some(cheap), true) => format!(
                    "original; reason={}; shadow={cheap}",
                    self.verdict.reason.as_str()
                ),
                _ => format!("original; reason={}", self.verdict.reason.as_str()),
            },
        }
    }

    /// The events of the decision: the route, and a retry when it is one.
    pub fn decision_entries(&self) -> Vec<Entry> {
        let mut entries = vec![Entry::now(
            &self.class_id,
            Event::Route {
                requested_model: self.requested_model.clone(),
                served_model: match self.verdict.decision {
                    Decision::Routed => self.verdict.cheap_model.clone(),
                    Decision::Original => self.requested_model.clone(),
                },
                decision: self.verdict.decision,
                reason: self.verdict.reason,
            },
        )];
        if let Some(seconds) = self.retry_after {
            entries.push(Entry::now(
                &self.class_id,
                Event::Retry {
                    seconds_since_previous: seconds,
                },
            ));
        }
        entries
    }

    /// Marks the plan escalated and returns the event.
    pub fn escalate(&mut self, routed_status: Option<u16>, original_status: Option<u16>) -> Entry {
        self.escalated_status = Some(routed_status);
        Entry::now(
            &self.class_id,
            Event::Escalation {
                requested_model: self.requested_model.clone().unwrap_or_default(),
                routed_model: self.verdict.cheap_model.clone().unwrap_or_default(),
                routed_status,
                original_status,
            },
        )
    }

    /// The event of the witness's verdict on the answer.
    pub fn verdict_entry(&self, certificate: &Certificate) -> Entry {
        let summary = &certificate.summary;
        Entry::now(
            &self.class_id,
            Event::Verdict {
                certificate_id: certificate.id.clone(),
                served_model: self.served_model().map(str::to_string),
                routed: self.routed(),
                shadow: false,
                supported: summary.supported,
                unsupported: summary.unsupported,
                contradicted: summary.contradicted,
                label: label_of(certificate.status),
            },
        )
    }
}

impl Plan {
    /// The path and body of the shadow trial (the request with the cheaper model), when the
    /// gate asked for one and the request can be rewritten.
    pub fn shadow_request(
        &self,
        route: Route,
        path_and_query: &str,
        body: &str,
    ) -> Option<(String, String)> {
        if !self.verdict.shadow {
            return None;
        }
        let cheap = self.verdict.cheap_model.as_deref()?;
        rewrite_for(route, path_and_query, body, cheap)
    }

    /// The event of the witness's verdict on the shadow answer.
    pub fn shadow_entry(&self, certificate: &Certificate) -> Entry {
        let summary = &certificate.summary;
        Entry::now(
            &self.class_id,
            Event::Verdict {
                certificate_id: certificate.id.clone(),
                served_model: self.verdict.cheap_model.clone(),
                routed: true,
                shadow: true,
                supported: summary.supported,
                unsupported: summary.unsupported,
                contradicted: summary.contradicted,
                label: label_of(certificate.status),
            },
        )
    }
}

/// The path and body that send `body` to `model` instead.
fn rewrite_for(
    route: Route,
    path_and_query: &str,
    body: &str,
    model: &str,
) -> Option<(String, String)> {
    match route {
        Route::GeminiGenerate => {
            rewrite::rewrite_gemini_path(path_and_query, model).map(|path| (path, body.to_string()))
        }
        _ => rewrite::rewrite_body(body, model).map(|body| (path_and_query.to_string(), body)),
    }
}

/// The outcome label of a certificate: supported answers succeed, flagged ones fail, answers
/// with nothing checkable stay unlabelled.
pub fn label_of(status: CertificateStatus) -> Label {
    match status {
        CertificateStatus::Supported => Label::Success,
        CertificateStatus::Flagged => Label::Failure,
        CertificateStatus::NoVerifiableClaims => Label::Unlabelled,
    }
}

impl Routing {
    /// Loads `routing.toml` and the RAVS log of `state_dir`. Never fails: a bad config turns
    /// routing off ([`Routing::status`] says why), a bad log line is skipped and listed.
    pub fn load(state_dir: &Path) -> Routing {
        let path = state_dir.join(config::CONFIG_FILE);
        let config = match RoutingConfig::load(&path) {
            Ok(None) => ConfigState::Absent,
            Ok(Some(config)) => ConfigState::Loaded(config),
            Err(error) => ConfigState::Error(error.to_string()),
        };
        Routing::new(config, EventLog::in_state_dir(state_dir))
    }

    /// Routing with a given config and log (tests and the simulation).
    pub fn new(config: ConfigState, log: EventLog) -> Routing {
        let extra = match &config {
            ConfigState::Loaded(config) => config.high_risk_keywords.clone(),
            _ => Vec::new(),
        };
        let (tally, skipped) = match log.read() {
            Ok(read) => (
                Tally::from_entries(&read.entries),
                read.warnings.iter().map(ToString::to_string).collect(),
            ),
            Err(error) => (Tally::default(), vec![error.to_string()]),
        };
        Routing {
            config,
            risk: RiskMatcher::new(&extra),
            log: log.appender(),
            tally: Mutex::new(tally),
            recent: Mutex::new(HashMap::new()),
            skipped_at_start: skipped,
        }
    }

    pub fn config(&self) -> &ConfigState {
        &self.config
    }

    pub fn log(&self) -> &EventLog {
        self.log.log()
    }

    /// One line on how routing stands, for the proxy's start-up message.
    pub fn status(&self) -> String {
        match &self.config {
            ConfigState::Absent => {
                "routing off (no routing.toml in the state directory)".to_string()
            }
            ConfigState::Error(error) => {
                format!("routing off: {error}; fix the file and restart the proxy")
            }
            ConfigState::Loaded(config) if !config.enabled => {
                "routing off (routing.toml does not set enabled = true)".to_string()
            }
            ConfigState::Loaded(config) => format!(
                "routing on: {} cheap model mapping(s); a class needs {} labelled outcomes and a 95% lower bound of {:.2}",
                config.cheap_models.len(),
                config.min_observations,
                config.min_lower_bound
            ),
        }
    }

    /// The counts of a class as the gate sees them now.
    pub fn stats(&self, class_id: &str) -> crate::ravs::ClassStats {
        self.tally
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(class_id)
    }

    /// Decides one prompt request. `texts` are the request's text parts, `None` when the proxy
    /// could not read them (the request is then not classifiable and stays on its model).
    pub fn plan(
        &self,
        route: Route,
        path: &str,
        body: &str,
        request: &Value,
        texts: Option<&[&str]>,
    ) -> Plan {
        let readable = texts.is_some();
        let class = class::classify(route.as_str(), request, texts.unwrap_or(&[]), &self.risk);
        let class_id = class.id();
        let requested_model = rewrite::requested_model(route, path, request);
        let high_risk = class.high_risk();
        let rewritable = readable
            && requested_model.as_deref().is_some_and(|model| {
                gate::may_route(&self.config, route.provider(), model, high_risk)
                    && rewrite::can_rewrite(route, body, model)
            });
        let verdict = gate::decide(
            &self.config,
            &gate::Request {
                provider: route.provider(),
                requested_model: requested_model.as_deref(),
                high_risk,
                rewritable,
                stats: self.stats(&class_id),
            },
        );
        Plan {
            retry_after: self.seen_before(path, body),
            class,
            class_id,
            requested_model,
            verdict,
            escalated_status: None,
        }
    }

    /// The body and path to send a routed request with; `None` keeps the original. A routed
    /// plan whose final body cannot be rewritten falls back to the original model.
    pub fn apply(
        &self,
        plan: &mut Plan,
        route: Route,
        path_and_query: &str,
        body: &str,
    ) -> Option<(String, String)> {
        if plan.verdict.decision != Decision::Routed {
            return None;
        }
        let cheap = plan.verdict.cheap_model.clone()?;
        let rewritten = rewrite_for(route, path_and_query, body, &cheap);
        if rewritten.is_none() {
            plan.verdict = Verdict {
                decision: Decision::Original,
                reason: Reason::CannotRewrite,
                cheap_model: None,
                shadow: false,
            };
        }
        rewritten
    }

    /// Appends events to the log and the in-memory counts. The log is written in the
    /// background ([`Appender`]); a write failure never fails the request: it is counted
    /// ([`Routing::write_errors`]) and the counts still move.
    pub fn record(&self, entries: &[Entry]) {
        {
            let mut tally = self.tally.lock().unwrap_or_else(|e| e.into_inner());
            for entry in entries {
                tally.observe(entry);
            }
        }
        self.log.append(entries);
    }

    /// Returns once every event recorded before the call is in the log file (for readers of
    /// the file in this process, and before the process ends).
    pub fn flush(&self) {
        self.log.flush();
    }

    /// Failed appends since start, and the last error.
    pub fn write_errors(&self) -> (u64, Option<String>) {
        self.log.errors()
    }

    /// Seconds since this exact request was last seen (within [`RETRY_WINDOW`]); remembers it.
    fn seen_before(&self, path: &str, body: &str) -> Option<f64> {
        let fingerprint = crate::digest::sha256_hex(format!("{path}\n{body}"));
        let now = Instant::now();
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let previous = recent.insert(fingerprint, now);
        if recent.len() > RECENT_CAPACITY {
            recent.retain(|_, seen| now.duration_since(*seen) < RETRY_WINDOW);
            if recent.len() > RECENT_CAPACITY {
                // Still full of recent ones: drop the oldest half.
                let mut ages: Vec<Instant> = recent.values().copied().collect();
                ages.sort();
                let cut = ages[ages.len() / 2];
                recent.retain(|_, seen| *seen > cut);
            }
        }
        previous
            .map(|seen| now.duration_since(seen))
            .filter(|age| *age < RETRY_WINDOW)
            .map(|age| age.as_secs_f64())
    }
}
