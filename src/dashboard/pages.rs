//! `GET /` (the dashboard) and `GET /controls` (the control panel): server-rendered HTML; the
//! embedded script refreshes the figures and sends the control requests.
//!
//! Only what exists is shown: without a proxy in the process there are no traffic figures, and
//! until a learning loop exists the weights panel says there are no learned weights.

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::State;
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};

use super::control::{Status, status_of};
use super::html::{self, Bar, Nav, count, escape};
use super::learning::learning_of;
use super::{DashboardState, Quality};
use crate::proxy::stats::CountersSnapshot;
use crate::witness::certificate::CertificateStatus;
use crate::witness::store::{FeedbackTotals, Listing, Store};

const STYLE: &str = include_str!("assets/style.css");
const SCRIPT: &str = include_str!("assets/app.js");
/// Certificates listed on the dashboard.
const RECENT_CERTIFICATES: usize = 10;

pub async fn style() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response()
}

pub async fn script() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        SCRIPT,
    )
        .into_response()
}

/// What the witness store holds, for the dashboard.
#[derive(Debug, Default)]
pub struct WitnessView {
    pub recent: Vec<Listing>,
    /// Certificate files that could not be read (each message names its file).
    pub skipped: Vec<String>,
    /// `(certificate id, claim text, label, action)` of flagged claims in the recent ones.
    pub flagged: Vec<(String, String, String, String)>,
    pub removed: usize,
    pub marked: usize,
    pub warned: usize,
    pub feedback: Option<FeedbackTotals>,
    pub error: Option<String>,
}

pub fn witness_view(store: &Store) -> WitnessView {
    let mut view = WitnessView::default();
    match store.list(RECENT_CERTIFICATES) {
        Ok(recent) => {
            view.recent = recent.items;
            view.skipped = recent.skipped;
        }
        Err(error) => view.error = Some(error.to_string()),
    }
    for listing in &view.recent {
        let Ok(certificate) = store.get(&listing.id) else {
            continue;
        };
        view.removed += certificate.suppression.removed;
        view.marked += certificate.suppression.marked;
        view.warned += certificate.suppression.warned;
        for claim in &certificate.flagged_claims {
            view.flagged.push((
                listing.id.clone(),
                claim.text.clone(),
                format!("{:?}", claim.label).to_lowercase(),
                format!("{:?}", claim.action).to_lowercase(),
            ));
        }
    }
    view.feedback = store.feedback_totals().ok();
    view
}

/// Health grade from the proxy's traffic: `None` without traffic. A: errors < 1 % and flagged
/// answers < 5 %; B: < 5 % and < 15 %; C: < 10 % and < 30 %; D otherwise.
pub fn health_grade(counters: &CountersSnapshot) -> Option<char> {
    if counters.requests == 0 {
        return None;
    }
    let errors = counters.errors as f64 / counters.requests as f64;
    let flagged = if counters.witness_checked == 0 {
        0.0
    } else {
        counters.witness_flagged as f64 / counters.witness_checked as f64
    };
    Some(if errors < 0.01 && flagged < 0.05 {
        'A'
    } else if errors < 0.05 && flagged < 0.15 {
        'B'
    } else if errors < 0.10 && flagged < 0.30 {
        'C'
    } else {
        'D'
    })
}

fn card(label: &str, value: &str, note: &str, field: &str) -> String {
    format!(
        "<div class=\"card\"><div class=\"label\">{}</div><div class=\"value\" data-field=\"{field}\">{}</div><div class=\"note\">{}</div></div>",
        escape(label),
        escape(value),
        escape(note)
    )
}

fn counters_of(status: &Status) -> Option<CountersSnapshot> {
    let value = status.proxy.as_ref()?.get("counters")?.clone();
    serde_json::from_value(value).ok()
}

fn traffic_section(status: &Status) -> String {
    let Some(counters) = counters_of(status) else {
        return "<section><h2>Traffic</h2><p class=\"empty\">No proxy runs in this process, so there is no traffic to show. <code>svc daemon</code> runs the proxy and this dashboard together.</p></section>".into();
    };
    let mut out = String::from("<section><h2>Traffic</h2><div class=\"cards\">");
    let saved_share = if counters.tokens_received > 0 {
        format!(
            "{:.1} % of prompt tokens received",
            100.0 * counters.tokens_saved as f64 / counters.tokens_received as f64
        )
    } else {
        "no prompt tokens yet".into()
    };
    out.push_str(&card(
        "Requests",
        &count(counters.requests),
        &format!(
            "{} rewritten · {} unchanged · {} skipped",
            counters.rewritten, counters.unchanged, counters.skipped
        ),
        "requests",
    ));
    out.push_str(&card(
        "Cost savings",
        &format!("{} tokens", count(counters.tokens_saved)),
        &saved_share,
        "tokens_saved",
    ));
    let latency = if counters.requests > 0 {
        format!(
            "{:.1} ms",
            counters.latency_micros_total as f64 / counters.requests as f64 / 1000.0
        )
    } else {
        "—".into()
    };
    out.push_str(&card(
        "Pipeline latency",
        &latency,
        "mean time to answer headers, upstream included",
        "latency",
    ));
    let grade = health_grade(&counters);
    out.push_str(&card(
        "Health grade",
        &grade.map_or("—".to_string(), |g| g.to_string()),
        if grade.is_some() {
            "A: errors < 1 % and flagged answers < 5 %; B < 5 %/15 %; C < 10 %/30 %"
        } else {
            "no traffic yet"
        },
        "grade",
    ));
    out.push_str("</div><div class=\"charts\">");
    if counters.requests > 0 {
        out.push_str(&html::bar_chart(
            "Prompt tokens received and forwarded",
            &[
                Bar {
                    label: "received".into(),
                    value: counters.tokens_received as f64,
                    caption: format!("{} tokens", count(counters.tokens_received)),
                    class: "a",
                },
                Bar {
                    label: "forwarded".into(),
                    value: counters.tokens_forwarded as f64,
                    caption: format!("{} tokens", count(counters.tokens_forwarded)),
                    class: "b",
                },
            ],
        ));
        out.push_str(&html::bar_chart(
            "Requests by outcome",
            &[
                ("rewritten", counters.rewritten, "b"),
                ("unchanged", counters.unchanged, "a"),
                ("skipped", counters.skipped, "c"),
                ("errors", counters.errors, "d"),
            ]
            .map(|(label, n, class)| Bar {
                label: label.into(),
                value: n as f64,
                caption: count(n),
                class,
            }),
        ));
    } else {
        out.push_str("<p class=\"empty\">The proxy has answered no request yet. Point a client at it (see the proxy URL above) and the charts fill in.</p>");
    }
    out.push_str("</div></section>");
    out
}

fn witness_section(view: &WitnessView, status: &Status) -> String {
    let mut out = String::from("<section><h2>Witness</h2>");
    if let Some(counters) = counters_of(status) {
        let _ = write!(
            out,
            "<p>This proxy checked {} answers and flagged {}.</p>",
            count(counters.witness_checked),
            count(counters.witness_flagged)
        );
    }
    if let Some(error) = &view.error {
        let _ = write!(
            out,
            "<p class=\"error\">Cannot read the certificate store: {}</p>",
            escape(error)
        );
    }
    for skipped in &view.skipped {
        let _ = write!(out, "<p class=\"error\">Left out: {}</p>", escape(skipped));
    }
    if view.recent.is_empty() && view.skipped.is_empty() {
        out.push_str("<p class=\"empty\">No certificates recorded yet. Run the proxy with <code>--witness audit</code> (or <code>svc witness</code>) to record them.</p>");
    } else {
        out.push_str("<h3>Recent certificates</h3><div class=\"scroll\"><table><thead><tr><th>id</th><th>created</th><th>mode</th><th>profile</th><th>status</th><th>verifiable</th><th>flagged</th><th>unsupported rate</th></tr></thead><tbody>");
        for listing in &view.recent {
            let class = match listing.status {
                CertificateStatus::Flagged => "bad",
                CertificateStatus::Supported => "good",
                CertificateStatus::NoVerifiableClaims => "",
            };
            let _ = write!(
                out,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td class=\"{class}\">{}</td><td>{}</td><td>{}</td><td>{:.2}</td></tr>",
                escape(&listing.id),
                escape(&listing.created_at),
                escape(&format!("{:?}", listing.mode).to_lowercase()),
                escape(&format!("{:?}", listing.profile).to_lowercase()),
                escape(
                    &serde_json::to_value(listing.status)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default()
                ),
                listing.verifiable,
                listing.flagged,
                listing.unsupported_claim_rate
            );
        }
        out.push_str("</tbody></table></div>");
        let _ = write!(
            out,
            "<h3>Suppression</h3><p>In these certificates: {} claims removed (strict), {} marked (annotate), {} warned.</p>",
            view.removed, view.marked, view.warned
        );
        out.push_str("<h3>Flagged claims</h3>");
        if view.flagged.is_empty() {
            out.push_str("<p class=\"empty\">None in the recent certificates.</p>");
        } else {
            out.push_str("<ul class=\"claims\">");
            for (id, text, label, action) in view.flagged.iter().take(20) {
                let _ = write!(
                    out,
                    "<li><span class=\"tag\">{}</span> <span class=\"tag\">{}</span> {} <small><code>{}</code></small></li>",
                    escape(label),
                    escape(action),
                    escape(text),
                    escape(id)
                );
            }
            out.push_str("</ul>");
        }
    }
    out.push_str("<h3>Feedback totals</h3>");
    match &view.feedback {
        Some(f) if f.total > 0 => {
            out.push_str(&html::bar_chart(
                "Feedback on certificates",
                &[
                    ("correct", f.correct, "b"),
                    ("false positive", f.false_positive, "c"),
                    ("false negative", f.false_negative, "d"),
                    ("wrong evidence", f.wrong_evidence, "a"),
                ]
                .map(|(label, n, class)| Bar {
                    label: label.into(),
                    value: n as f64,
                    caption: n.to_string(),
                    class,
                }),
            ));
        }
        _ => out.push_str("<p class=\"empty\">No feedback yet (<code>POST /witness/{id}/feedback</code> or <code>svc witness feedback</code>).</p>"),
    }
    out.push_str("</section>");
    out
}

fn overview_cards(status: &Status) -> String {
    let mut out = String::from("<div class=\"cards\">");
    out.push_str(&card(
        "Optimisation",
        &status.optimization,
        match status.optimization.as_str() {
            "paused" => "requests are forwarded byte-identical",
            "enabled" => "long prompts are compressed to the budget",
            _ => "no proxy in this process",
        },
        "optimization",
    ));
    out.push_str(&card(
        "Quality",
        status.quality.as_str(),
        &status
            .budget
            .map(|b| format!("budget {} tokens", count(b as u64)))
            .unwrap_or_else(|| "no proxy budget to scale".into()),
        "quality",
    ));
    out.push_str(&card(
        "Uptime",
        &format!("{} s", status.uptime_seconds),
        &format!("pid {} · {:?}", status.pid, status.role).to_lowercase(),
        "uptime",
    ));
    out.push_str("</div>");
    if !status.urls.is_empty() {
        out.push_str("<p class=\"urls\">");
        for (name, url) in &status.urls {
            let _ = write!(
                out,
                "<span class=\"tag\">{}</span> <code>{}</code> ",
                escape(name),
                escape(url)
            );
        }
        out.push_str("</p>");
    }
    out
}

pub async fn dashboard(State(state): State<Arc<DashboardState>>) -> Html<String> {
    let worker = state.clone();
    let (status, view, learning) = tokio::task::spawn_blocking(move || {
        let store = Store::at(worker.settings.state_home.join("witness"));
        (
            status_of(&worker),
            witness_view(&store),
            learning_of(&worker),
        )
    })
    .await
    .unwrap_or_else(|_| {
        (
            status_of(&state),
            WitnessView {
                error: Some("the store reader failed".into()),
                ..WitnessView::default()
            },
            learning_of(&state),
        )
    });
    let mut body = overview_cards(&status);
    body.push_str(&traffic_section(&status));
    body.push_str(&witness_section(&view, &status));
    body.push_str(&super::learning::weights_html(&learning, false));
    body.push_str(&super::evolution::section(&state.settings.state_home));
    Html(html::page("Dashboard", Nav::Dashboard, &body))
}

pub async fn controls(State(state): State<Arc<DashboardState>>) -> Html<String> {
    let status = status_of(&state);
    let learning = learning_of(&state);
    let mut body = overview_cards(&status);
    body.push_str("<p id=\"message\" class=\"message\" role=\"status\"></p>");
    // Optimisation toggle (pausing is the bypass: requests go through untouched).
    let has_proxy = status.proxy.is_some();
    let disabled = if has_proxy { "" } else { " disabled" };
    let _ = write!(
        body,
        "<section><h2>Optimisation and bypass</h2><p>Paused means bypass: the proxy forwards every request byte-identical and only counts it.</p>\
<button id=\"pause\" data-post=\"/api/control/optimization/pause\"{disabled}>Pause (bypass)</button> \
<button id=\"enable\" data-post=\"/api/control/optimization/enable\"{disabled}>Enable</button>{}</section>",
        if has_proxy {
            ""
        } else {
            "<p class=\"empty\">No proxy runs in this process; <code>svc daemon</code> runs one.</p>"
        }
    );
    body.push_str("<section><h2>Quality</h2><p>Fast halves the optimisation budget, Balanced keeps the configured one, Max doubles it.</p><div class=\"segmented\">");
    for quality in Quality::ALL {
        let current = if quality == status.quality {
            " aria-pressed=\"true\""
        } else {
            " aria-pressed=\"false\""
        };
        let label = match quality {
            Quality::Fast => "Fast",
            Quality::Balanced => "Balanced",
            Quality::Max => "Max",
        };
        let _ = write!(
            body,
            "<button id=\"quality-{m}\" data-post=\"/api/control/quality\" data-body='{{\"mode\":\"{m}\"}}'{current}>{label}</button>",
            m = quality.as_str()
        );
    }
    body.push_str("</div></section>");
    body.push_str("<section><h2>Repositories</h2>");
    if status.repos.is_empty() {
        body.push_str("<p class=\"empty\">No repository configured.</p>");
    } else {
        body.push_str("<div class=\"scroll\"><table><thead><tr><th>path</th><th>files</th><th>tokens</th><th>re-parsed</th><th>indexed</th><th>took</th><th>error</th></tr></thead><tbody>");
        for repo in &status.repos {
            let _ = write!(
                body,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"bad\">{}</td></tr>",
                escape(&repo.path.display().to_string()),
                count(repo.files as u64),
                count(repo.tokens as u64),
                repo.parsed,
                escape(repo.indexed_at.as_deref().unwrap_or("not yet")),
                repo.duration_ms
                    .map(|ms| format!("{ms:.0} ms"))
                    .unwrap_or_default(),
                escape(repo.last_error.as_deref().unwrap_or(""))
            );
        }
        body.push_str("</tbody></table></div>");
    }
    body.push_str("<form id=\"reindex-form\" class=\"inline\"><input id=\"reindex-path\" name=\"path\" placeholder=\"a directory to add (empty: re-index all)\" size=\"44\"> <button id=\"reindex\" type=\"submit\">Re-index</button></form></section>");
    body.push_str(&super::learning::weights_html(&learning, true));
    let federation = match crate::events::federation::settings_from_env() {
        Ok(Some(_)) => "opted in".to_string(),
        Ok(None) => "opted out".to_string(),
        Err(e) => format!("misconfigured: {e}"),
    };
    let _ = write!(
        body,
        "<section><h2>Federation</h2><p>Anonymous weight sharing is opt-in with <code>SVC_FEDERATION=1</code> and an endpoint in <code>SVC_FEDERATION_URL</code> in the daemon's environment (now: <strong>{}</strong>). Only weight names of a closed set, numbers and counts are shared; code, paths and text never are (<code>svc federation show</code> prints the payload).</p></section>",
        escape(&federation)
    );
    body.push_str("<section><h2>Log</h2><pre id=\"log\" class=\"log\">");
    for line in state.log_tail(100) {
        let _ = writeln!(
            body,
            "{} [{}] {}",
            escape(&line.at),
            escape(&line.source),
            escape(&line.message)
        );
    }
    body.push_str("</pre></section>");
    body.push_str("<section><h2>Stop</h2><button id=\"stop\" class=\"danger\" data-post=\"/api/control/stop\" data-confirm=\"Stop the daemon?\">Stop the daemon</button></section>");
    Html(html::page("Controls", Nav::Controls, &body))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counters(requests: u64, errors: u64, checked: u64, flagged: u64) -> CountersSnapshot {
        CountersSnapshot {
            requests,
            rewritten: 0,
            unchanged: requests,
            skipped: 0,
            errors,
            tokens_received: 0,
            tokens_forwarded: 0,
            tokens_saved: 0,
            witness_checked: checked,
            witness_flagged: flagged,
            latency_micros_total: 0,
        }
    }

    #[test]
    fn health_grade_follows_errors_and_flags() {
        assert_eq!(health_grade(&counters(0, 0, 0, 0)), None);
        assert_eq!(health_grade(&counters(1000, 5, 100, 4)), Some('A'));
        assert_eq!(health_grade(&counters(1000, 20, 100, 4)), Some('B'));
        assert_eq!(health_grade(&counters(100, 1, 100, 20)), Some('C'));
        assert_eq!(health_grade(&counters(10, 5, 0, 0)), Some('D'));
    }
}
