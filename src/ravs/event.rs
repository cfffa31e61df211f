//! The events of the RAVS log. One [`Entry`] per line: when, which task class, and the typed
//! [`Event`] (its kind in the `event` field). Every closed set is an enum whose serde name is
//! the wire value.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// One line of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// RFC 3339 UTC, for people.
    pub recorded_at: String,
    /// Milliseconds since the Unix epoch, for `--since` windows.
    pub unix_ms: u64,
    /// The task class id (see `routing::class`).
    pub class: String,
    #[serde(flatten)]
    pub event: Event,
}

impl Entry {
    /// An entry stamped now.
    pub fn now(class: impl Into<String>, event: Event) -> Entry {
        Entry::at(SystemTime::now(), class, event)
    }

    /// Why this entry cannot be counted, if it cannot: a value no writer of svc produces
    /// (a hand-edited or foreign line), which would skew the rates it feeds.
    pub fn problem(&self) -> Option<String> {
        match &self.event {
            Event::Retry {
                seconds_since_previous,
            } if !(seconds_since_previous.is_finite() && *seconds_since_previous >= 0.0) => {
                Some(format!(
                    "seconds_since_previous is {seconds_since_previous}: a retry comes after the request it repeats"
                ))
            }
            _ => None,
        }
    }

    /// An entry stamped `at` (the simulation and tests use their own clock).
    pub fn at(at: SystemTime, class: impl Into<String>, event: Event) -> Entry {
        Entry {
            recorded_at: crate::clock::rfc3339(at),
            unix_ms: at
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            class: class.into(),
            event,
        }
    }
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// The routing decision of one request (one per prompt request the proxy serves).
    Route {
        /// The model the client asked for (absent when the request names none).
        requested_model: Option<String>,
        /// The model the request was sent to.
        served_model: Option<String>,
        decision: Decision,
        reason: Reason,
    },
    /// The witness's verdict on one answer.
    Verdict {
        certificate_id: String,
        served_model: Option<String>,
        /// The answer came from the cheaper model.
        routed: bool,
        /// A shadow trial: the cheaper model's answer was checked but not delivered (the
        /// original model's answer was).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        shadow: bool,
        supported: usize,
        unsupported: usize,
        contradicted: usize,
        label: Label,
    },
    /// A client sent the same request again shortly after (a sign the first answer did not
    /// serve).
    Retry {
        /// Seconds since the same request body was last seen.
        seconds_since_previous: f64,
    },
    /// A routed request failed upstream and was sent again to the original model.
    Escalation {
        requested_model: String,
        routed_model: String,
        /// The routed attempt's HTTP status, when the upstream answered.
        routed_status: Option<u16>,
        /// The status of the re-sent request, when the upstream answered.
        original_status: Option<u16>,
    },
}

/// Which model served a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    /// The configured cheaper model.
    Routed,
    /// The model the client asked for.
    Original,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Routed => "routed",
            Decision::Original => "original",
        }
    }
}

/// Why routing decided as it did. Every reason but `gate_passed` keeps the original model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Every condition of the gate held.
    GatePassed,
    /// No routing config, or `enabled = false`.
    RoutingOff,
    /// The routing config could not be loaded (the proxy said why at start).
    ConfigError,
    /// The request touches a high-risk topic (security, auth, secrets, payments, ...).
    HighRisk,
    /// Fewer labelled outcomes of the class than `min_observations`.
    SparseData,
    /// The Wilson lower bound of the class's success rate is under `min_lower_bound`.
    LowConfidence,
    /// The cheaper model's own record on the class is evidently under the gate.
    CheapModelFailing,
    /// No cheaper model is configured for the requested model.
    NoCheapModel,
    /// The class passed, but the cheaper model's record is still short: the original model
    /// serves and the cheaper one answers the same request in the shadow, to be checked.
    ShadowTrial,
    /// The proxy cannot rewrite the model of this request safely.
    CannotRewrite,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::GatePassed => "gate_passed",
            Reason::RoutingOff => "routing_off",
            Reason::ConfigError => "config_error",
            Reason::HighRisk => "high_risk",
            Reason::SparseData => "sparse_data",
            Reason::LowConfidence => "low_confidence",
            Reason::CheapModelFailing => "cheap_model_failing",
            Reason::NoCheapModel => "no_cheap_model",
            Reason::ShadowTrial => "shadow_trial",
            Reason::CannotRewrite => "cannot_rewrite",
        }
    }
}

/// The outcome label of a verified answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    /// Every verifiable claim supported.
    Success,
    /// At least one verifiable claim unsupported or contradicted.
    Failure,
    /// Nothing in the answer could be checked.
    Unlabelled,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_shape_is_flat_with_snake_case_values() {
        let entry = Entry::at(
            UNIX_EPOCH + std::time::Duration::from_secs(1_795_264_760),
            "openai.chat_completions/no_tools/small/prose",
            Event::Route {
                requested_model: Some("gpt-5".into()),
                served_model: Some("gpt-5-mini".into()),
                decision: Decision::Routed,
                reason: Reason::GatePassed,
            },
        );
        let line = serde_json::to_string(&entry).expect("serialise");
        assert_eq!(
            line,
            r#"{"recorded_at":"2026-11-21T12:39:20.000Z","unix_ms":1795264760000,"class":"openai.chat_completions/no_tools/small/prose","event":"route","requested_model":"gpt-5","served_model":"gpt-5-mini","decision":"routed","reason":"gate_passed"}"#
        );
        let back: Entry = serde_json::from_str(&line).expect("parse");
        assert_eq!(back, entry);
        for reason in [
            Reason::HighRisk,
            Reason::CheapModelFailing,
            Reason::SparseData,
        ] {
            let wire = serde_json::to_value(reason).expect("serialise");
            assert_eq!(wire, reason.as_str());
        }
    }
}
