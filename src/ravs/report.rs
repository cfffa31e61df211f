//! `svc ravs report`: per task class, over the events of a window, label coverage, success
//! rate with its Wilson 95% interval, retry rate, escalation rate and routed share, plus a total
//! row.
//!
//! Definitions (each a ratio of counts of [`ClassStats`]):
//! - requests: routing decisions (one per prompt request; verdicts alone count when the log
//!   holds no decision for the class);
//! - label coverage: labelled verdicts (success or failure) / requests;
//! - success: successes / labelled verdicts, with the Wilson 95% interval;
//! - retry rate: retries / requests;
//! - escalation rate: escalations / routed requests (how often the cheaper model failed
//!   outright);
//! - routed share: routed requests / requests.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::event::Entry;
use super::stats::wilson95;
use super::tally::{ClassStats, Tally};

/// One row of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub class: String,
    pub requests: u64,
    pub labelled: u64,
    pub label_coverage: Option<f64>,
    pub success_rate: Option<f64>,
    /// The Wilson 95% interval of the success rate.
    pub success_low: Option<f64>,
    pub success_high: Option<f64>,
    pub retries: u64,
    pub retry_rate: Option<f64>,
    pub routed: u64,
    pub routed_share: Option<f64>,
    pub escalations: u64,
    pub escalation_rate: Option<f64>,
}

impl Row {
    fn of(class: &str, stats: &ClassStats) -> Row {
        let requests = stats.requests.max(stats.labelled() + stats.unlabelled);
        let ratio = |part: u64, whole: u64| (whole > 0).then(|| part as f64 / whole as f64);
        let interval = wilson95(stats.successes, stats.labelled());
        Row {
            class: class.to_string(),
            requests,
            labelled: stats.labelled(),
            label_coverage: ratio(stats.labelled(), requests),
            success_rate: ratio(stats.successes, stats.labelled()),
            success_low: interval.map(|i| i.0),
            success_high: interval.map(|i| i.1),
            retries: stats.retries,
            retry_rate: ratio(stats.retries, requests),
            routed: stats.routed,
            routed_share: ratio(stats.routed, requests),
            escalations: stats.escalations,
            escalation_rate: ratio(stats.escalations, stats.routed),
        }
    }
}

/// The report of one window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    /// Events at or after this instant were counted (RFC 3339).
    pub since: String,
    pub window_seconds: u64,
    /// Events in the window.
    pub events: usize,
    pub rows: Vec<Row>,
    pub total: Row,
    /// Lines of the log that were skipped as unreadable.
    pub skipped_lines: usize,
    /// Events dated after `now` (a clock set back, or an edited log): not counted, since no
    /// window can hold them honestly.
    pub future_events: usize,
}

/// Builds the report of the events recorded in the `window` before `now`.
pub fn build(entries: &[Entry], now: SystemTime, window: Duration, skipped_lines: usize) -> Report {
    let start = now.checked_sub(window).unwrap_or(UNIX_EPOCH);
    let start_ms = start
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let now_ms = now
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let future_events = entries.iter().filter(|e| e.unix_ms > now_ms).count();
    let in_window: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.unix_ms >= start_ms && e.unix_ms <= now_ms)
        .collect();
    let tally = Tally::from_entries(in_window.iter().copied());
    let mut total = ClassStats::default();
    let rows = tally
        .classes()
        .map(|(class, stats)| {
            total.add(stats);
            Row::of(class, stats)
        })
        .collect();
    Report {
        since: crate::clock::rfc3339_seconds(start),
        window_seconds: window.as_secs(),
        events: in_window.len(),
        rows,
        total: Row::of("total", &total),
        skipped_lines,
        future_events,
    }
}

fn percent(value: Option<f64>) -> String {
    value.map_or_else(|| "-".to_string(), |v| format!("{:.1}%", v * 100.0))
}

/// The report as a Markdown table (readable in a terminal, pasteable into notes).
pub fn render(report: &Report) -> String {
    let mut out = format!(
        "RAVS outcomes since {} ({} events)\n\n",
        report.since, report.events
    );
    out.push_str("| class | requests | labelled | coverage | success (95% CI) | retry rate | escalation rate | routed share |\n");
    out.push_str("|---|---:|---:|---:|---|---:|---:|---:|\n");
    let rows = report.rows.iter().map(|row| (row.class.as_str(), row));
    for (class, row) in rows.chain(std::iter::once(("**total**", &report.total))) {
        let success = match (row.success_rate, row.success_low, row.success_high) {
            (Some(rate), Some(low), Some(high)) => format!(
                "{:.1}% [{:.1}%, {:.1}%]",
                rate * 100.0,
                low * 100.0,
                high * 100.0
            ),
            _ => "-".to_string(),
        };
        let _ = writeln!(
            out,
            "| {class} | {} | {} | {} | {success} | {} | {} | {} |",
            row.requests,
            row.labelled,
            percent(row.label_coverage),
            percent(row.retry_rate),
            percent(row.escalation_rate),
            percent(row.routed_share),
        );
    }
    if report.future_events > 0 {
        let _ = writeln!(
            out,
            "\n{} event(s) dated after now were not counted (a clock set back, or an edited log).",
            report.future_events
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ravs::event::{Decision, Event, Label, Reason};

    #[test]
    fn window_drops_old_events_and_total_adds_the_classes() {
        let now = UNIX_EPOCH + Duration::from_secs(2_000_000_000);
        let old = now - Duration::from_secs(8 * 86_400);
        let recent = now - Duration::from_secs(3_600);
        let route = |decision| Event::Route {
            requested_model: Some("gpt-5".into()),
            served_model: Some("gpt-5".into()),
            decision,
            reason: Reason::RoutingOff,
        };
        let verdict = |label| Event::Verdict {
            certificate_id: "wit_x".into(),
            served_model: None,
            routed: false,
            shadow: false,
            supported: 1,
            unsupported: 0,
            contradicted: 0,
            label,
        };
        let entries = vec![
            // Regression (found by probing): an event dated in the future was counted.
            Entry::at(
                now + Duration::from_secs(86_400),
                "a",
                verdict(Label::Failure),
            ),
            Entry::at(old, "a", route(Decision::Original)),
            Entry::at(recent, "a", route(Decision::Original)),
            Entry::at(recent, "a", verdict(Label::Success)),
            Entry::at(recent, "b", route(Decision::Routed)),
            Entry::at(recent, "b", verdict(Label::Failure)),
        ];
        let report = build(&entries, now, Duration::from_secs(7 * 86_400), 0);
        assert_eq!(report.events, 4);
        assert_eq!(report.future_events, 1);
        assert!(render(&report).contains("1 event(s) dated after now were not counted"));
        assert_eq!(report.rows.len(), 2);
        assert_eq!(report.rows[0].requests, 1);
        assert_eq!(report.total.requests, 2);
        assert_eq!(report.total.labelled, 2);
        assert_eq!(report.total.routed_share, Some(0.5));
        assert_eq!(report.total.success_rate, Some(0.5));
    }
}
