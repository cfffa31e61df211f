//! Per-class counts of the events: what the routing gate weighs and what the report shows.
//! The proxy keeps one [`Tally`] in memory (read from the log at start, then fed each event it
//! appends); the report builds one from the events of its window.

use std::collections::BTreeMap;

use serde::Serialize;

use super::event::{Decision, Entry, Event, Label};

/// The counts of one task class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ClassStats {
    /// Routing decisions (one per prompt request).
    pub requests: u64,
    /// Of which sent to the cheaper model.
    pub routed: u64,
    /// Verdicts by label, whoever served.
    pub successes: u64,
    pub failures: u64,
    pub unlabelled: u64,
    /// Labelled verdicts of answers from the cheaper model.
    pub routed_successes: u64,
    pub routed_failures: u64,
    pub retries: u64,
    pub escalations: u64,
}

impl ClassStats {
    /// Adds one event.
    pub fn observe(&mut self, event: &Event) {
        match event {
            Event::Route { decision, .. } => {
                self.requests += 1;
                if *decision == Decision::Routed {
                    self.routed += 1;
                }
            }
            // A shadow answer was never delivered: it speaks for the cheaper model only.
            Event::Verdict {
                label,
                shadow: true,
                ..
            } => match label {
                Label::Success => self.routed_successes += 1,
                Label::Failure => self.routed_failures += 1,
                Label::Unlabelled => {}
            },
            Event::Verdict { label, routed, .. } => match label {
                Label::Success => {
                    self.successes += 1;
                    if *routed {
                        self.routed_successes += 1;
                    }
                }
                Label::Failure => {
                    self.failures += 1;
                    if *routed {
                        self.routed_failures += 1;
                    }
                }
                Label::Unlabelled => self.unlabelled += 1,
            },
            Event::Retry { .. } => self.retries += 1,
            Event::Escalation { .. } => self.escalations += 1,
        }
    }

    /// Verdicts with a success or failure label.
    pub fn labelled(&self) -> u64 {
        self.successes + self.failures
    }

    /// The gate's evidence on the class, `(successes, observations)`: labelled verdicts, and
    /// every escalation as a failure (the routed answer never came).
    pub fn evidence(&self) -> (u64, u64) {
        (self.successes, self.labelled() + self.escalations)
    }

    /// The cheaper model's own record on the class, `(successes, observations)`: labelled
    /// verdicts of routed answers, and every escalation as a failure.
    pub fn routed_evidence(&self) -> (u64, u64) {
        (
            self.routed_successes,
            self.routed_successes + self.routed_failures + self.escalations,
        )
    }

    pub fn add(&mut self, other: &ClassStats) {
        self.requests += other.requests;
        self.routed += other.routed;
        self.successes += other.successes;
        self.failures += other.failures;
        self.unlabelled += other.unlabelled;
        self.routed_successes += other.routed_successes;
        self.routed_failures += other.routed_failures;
        self.retries += other.retries;
        self.escalations += other.escalations;
    }
}

/// Counts per class id, in class order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tally {
    classes: BTreeMap<String, ClassStats>,
}

impl Tally {
    pub fn from_entries<'a>(entries: impl IntoIterator<Item = &'a Entry>) -> Tally {
        let mut tally = Tally::default();
        for entry in entries {
            tally.observe(entry);
        }
        tally
    }

    pub fn observe(&mut self, entry: &Entry) {
        self.classes
            .entry(entry.class.clone())
            .or_default()
            .observe(&entry.event);
    }

    /// The counts of a class (zero when it was never seen).
    pub fn get(&self, class: &str) -> ClassStats {
        self.classes.get(class).copied().unwrap_or_default()
    }

    pub fn classes(&self) -> impl Iterator<Item = (&str, &ClassStats)> {
        self.classes.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
    }
}
