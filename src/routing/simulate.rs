//! The routing figure: a simulated stream of requests over task classes with known success
//! rates, decided by the real gate ([`super::gate::decide`]) on counts fed back from the
//! events as they happen, every event appended to a real RAVS log (re-read at the end: the
//! counts from the file must equal the counts the gate used).
//!
//! Each class has the success rate of the original model and of the cheaper model (equal for
//! most classes: how hard the class is; far apart for the classes "whose cheap model succeeds
//! rarely"), a share of answers the witness cannot label, and a high-risk flag. Per request:
//! draw a class, ask the gate, send to the cheaper model when routed (a routed request fails
//! upstream with a small probability and is escalated to the original model), draw the
//! answer's label from the serving model's rate, and after a failure the client retries with
//! some probability.
//!
//! A request was routed that should not have been when its class is high-risk or the cheaper
//! model's true success rate on the class is under the gate's `min_lower_bound`. Targets: none
//! of a high-risk class's requests; at most 1% of the other classes' requests together. Per
//! class the share is reported too: a cheaper model that is bad on an easy class is only found
//! out by routing to it a few times (each failure is evidence; about 3–15 routed answers at 95%
//! confidence, depending on how bad it is), so on a class of ~500 requests that can exceed 1%.
//! [`sweep`] counts, over many seeds, how often each class stays within 1%. With
//! `shadow_observations` the cheaper model first answers that many requests of a class in the
//! shadow (drawn from its rate, counted for it only), as the proxy's shadow trials do.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::config::RoutingConfig;
use super::gate::{self, ConfigState};
use crate::proxy::provider::Provider;
use crate::ravs::{Decision, Entry, Event, EventLog, Label, LogError, Tally};
use crate::rng::SplitMix64;

/// One simulated class.
#[derive(Debug, Clone, Serialize)]
pub struct SimClass {
    pub name: String,
    pub original_rate: f64,
    pub cheap_rate: f64,
    pub high_risk: bool,
    /// Share of answers with nothing the witness can check.
    pub unlabelled_share: f64,
}

/// Knobs of a run.
#[derive(Debug, Clone)]
pub struct SimSettings {
    pub requests: usize,
    pub seed: u64,
    pub min_observations: u64,
    pub min_lower_bound: f64,
    /// Probability that a client re-sends after a failed answer.
    pub retry_after_failure: f64,
    /// Probability that a routed request fails upstream (then escalated).
    pub routed_upstream_error: f64,
    /// The gate's `shadow_observations` (0: no shadow trials).
    pub shadow_observations: u64,
}

impl Default for SimSettings {
    fn default() -> Self {
        SimSettings {
            requests: 10_000,
            seed: DEFAULT_SEED,
            min_observations: super::config::DEFAULT_MIN_OBSERVATIONS,
            min_lower_bound: super::config::DEFAULT_MIN_LOWER_BOUND,
            retry_after_failure: 0.3,
            routed_upstream_error: 0.01,
            shadow_observations: 0,
        }
    }
}

/// The seed of the reported figure.
pub const DEFAULT_SEED: u64 = 17;

/// The 20 classes of the figure.
pub fn default_classes() -> Vec<SimClass> {
    let class =
        |name: &str, original: f64, cheap: f64, high_risk: bool, unlabelled: f64| SimClass {
            name: name.to_string(),
            original_rate: original,
            cheap_rate: cheap,
            high_risk,
            unlabelled_share: unlabelled,
        };
    vec![
        // High-risk: easy for either model, never to be routed.
        class("risk-auth", 0.97, 0.95, true, 0.2),
        class("risk-payments", 0.95, 0.93, true, 0.2),
        class("risk-migrations", 0.92, 0.90, true, 0.2),
        class("risk-secrets", 0.98, 0.97, true, 0.1),
        // The original model does well; the cheaper one rarely succeeds.
        class("cheap-weak-15", 0.96, 0.15, false, 0.2),
        class("cheap-weak-30", 0.95, 0.30, false, 0.2),
        class("cheap-weak-50", 0.97, 0.50, false, 0.1),
        // Hard classes (both models alike), under the gate.
        class("hard-40", 0.40, 0.40, false, 0.2),
        class("hard-60", 0.60, 0.60, false, 0.3),
        class("hard-72", 0.72, 0.72, false, 0.2),
        class("hard-76", 0.76, 0.76, false, 0.2),
        // Over the gate, some barely.
        class("ok-85", 0.85, 0.85, false, 0.2),
        class("ok-88", 0.88, 0.88, false, 0.3),
        class("easy-90", 0.90, 0.90, false, 0.2),
        class("easy-92", 0.92, 0.92, false, 0.1),
        class("easy-94", 0.94, 0.94, false, 0.2),
        class("easy-95", 0.95, 0.95, false, 0.3),
        class("easy-97", 0.97, 0.97, false, 0.2),
        class("easy-98", 0.98, 0.98, false, 0.1),
        class("easy-99", 0.99, 0.99, false, 0.2),
    ]
}

/// What happened to one class.
#[derive(Debug, Clone, Serialize)]
pub struct ClassOutcome {
    pub name: String,
    pub high_risk: bool,
    pub original_rate: f64,
    pub cheap_rate: f64,
    /// Routing this class is right (low-risk and the cheaper model passes the gate).
    pub should_route: bool,
    pub requests: u64,
    pub routed: u64,
    /// Routed while high-risk or while the cheaper model's true rate is under the gate.
    pub wrongly_routed: u64,
    pub escalations: u64,
    /// Requests also sent to the cheaper model in the shadow.
    pub shadow_trials: u64,
}

impl ClassOutcome {
    pub fn routed_share(&self) -> f64 {
        ratio(self.routed, self.requests)
    }

    pub fn wrongly_routed_share(&self) -> f64 {
        ratio(self.wrongly_routed, self.requests)
    }

    /// Within the per-class bound: nothing when high-risk, else at most 1% of its requests.
    pub fn within_one_percent(&self) -> bool {
        if self.high_risk {
            self.wrongly_routed == 0
        } else {
            self.wrongly_routed_share() <= 0.01
        }
    }
}

fn ratio(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

/// The result of a run.
#[derive(Debug, Clone, Serialize)]
pub struct Simulation {
    pub seed: u64,
    pub requests: u64,
    pub routed: u64,
    pub wrongly_routed: u64,
    pub classes: Vec<ClassOutcome>,
    /// Events written to the log.
    pub events: usize,
    /// The counts re-read from the log equal the counts the gate used.
    pub log_matches: bool,
}

impl Simulation {
    pub fn routed_share(&self) -> f64 {
        ratio(self.routed, self.requests)
    }

    pub fn wrongly_routed_share(&self) -> f64 {
        ratio(self.wrongly_routed, self.requests)
    }

    /// Requests of the low-risk classes, and how many of them were wrongly routed.
    pub fn low_risk_wrongly_routed(&self) -> (u64, u64) {
        self.classes
            .iter()
            .filter(|c| !c.high_risk)
            .fold((0, 0), |(wrong, all), c| {
                (wrong + c.wrongly_routed, all + c.requests)
            })
    }

    /// The targets: no high-risk request routed, at most 1% of the others wrongly routed.
    pub fn meets_targets(&self) -> bool {
        let (wrong, all) = self.low_risk_wrongly_routed();
        self.classes
            .iter()
            .filter(|c| c.high_risk)
            .all(|c| c.routed == 0)
            && ratio(wrong, all) <= 0.01
    }
}

/// Runs the stream, appending every event to `log` (which should start empty).
pub fn run(
    settings: &SimSettings,
    classes: &[SimClass],
    log: &EventLog,
) -> Result<Simulation, LogError> {
    let mut cheap_models = std::collections::BTreeMap::new();
    cheap_models.insert(("openai", "gpt-5".to_string()), "gpt-5-mini".to_string());
    let config = ConfigState::Loaded(RoutingConfig {
        enabled: true,
        min_observations: settings.min_observations,
        min_lower_bound: settings.min_lower_bound,
        high_risk_keywords: Vec::new(),
        cheap_models,
        shadow_observations: settings.shadow_observations,
    });
    let mut rng = SplitMix64::new(settings.seed);
    let mut tally = Tally::default();
    let mut outcomes: Vec<ClassOutcome> = classes
        .iter()
        .map(|c| ClassOutcome {
            name: c.name.clone(),
            high_risk: c.high_risk,
            original_rate: c.original_rate,
            cheap_rate: c.cheap_rate,
            should_route: !c.high_risk && c.cheap_rate >= settings.min_lower_bound,
            requests: 0,
            routed: 0,
            wrongly_routed: 0,
            escalations: 0,
            shadow_trials: 0,
        })
        .collect();
    let mut pending: Vec<Entry> = Vec::new();
    let mut events = 0;
    // A fixed clock (one request a second from a fixed instant), so the log is reproducible.
    let start = UNIX_EPOCH + Duration::from_secs(1_795_000_000);
    for index in 0..settings.requests {
        let at: SystemTime = start + Duration::from_secs(index as u64);
        let which = rng.below(classes.len());
        let class = &classes[which];
        let outcome = &mut outcomes[which];
        let verdict = gate::decide(
            &config,
            &gate::Request {
                provider: Provider::Openai,
                requested_model: Some("gpt-5"),
                high_risk: class.high_risk,
                rewritable: true,
                stats: tally.get(&class.name),
            },
        );
        let routed = verdict.decision == Decision::Routed;
        outcome.requests += 1;
        let mut entries = vec![Entry::at(
            at,
            &class.name,
            Event::Route {
                requested_model: Some("gpt-5".into()),
                served_model: Some(if routed { "gpt-5-mini" } else { "gpt-5" }.into()),
                decision: verdict.decision,
                reason: verdict.reason,
            },
        )];
        let mut served_cheap = routed;
        if routed {
            outcome.routed += 1;
            if !outcome.should_route {
                outcome.wrongly_routed += 1;
            }
            if rng.unit() < settings.routed_upstream_error {
                outcome.escalations += 1;
                served_cheap = false;
                entries.push(Entry::at(
                    at,
                    &class.name,
                    Event::Escalation {
                        requested_model: "gpt-5".into(),
                        routed_model: "gpt-5-mini".into(),
                        routed_status: Some(500),
                        original_status: Some(200),
                    },
                ));
            }
        }
        let rate = if served_cheap {
            class.cheap_rate
        } else {
            class.original_rate
        };
        let label = if rng.unit() < class.unlabelled_share {
            Label::Unlabelled
        } else if rng.unit() < rate {
            Label::Success
        } else {
            Label::Failure
        };
        entries.push(Entry::at(
            at,
            &class.name,
            Event::Verdict {
                certificate_id: format!("wit_sim_{index:06}"),
                served_model: Some(if served_cheap { "gpt-5-mini" } else { "gpt-5" }.into()),
                routed: served_cheap,
                shadow: false,
                supported: usize::from(label == Label::Success),
                unsupported: usize::from(label == Label::Failure),
                contradicted: 0,
                label,
            },
        ));
        if verdict.shadow {
            outcome.shadow_trials += 1;
            // The cheaper model answers the same request in the shadow.
            let label = if rng.unit() < class.unlabelled_share {
                Label::Unlabelled
            } else if rng.unit() < class.cheap_rate {
                Label::Success
            } else {
                Label::Failure
            };
            entries.push(Entry::at(
                at,
                &class.name,
                Event::Verdict {
                    certificate_id: format!("wit_sim_shadow_{index:06}"),
                    served_model: Some("gpt-5-mini".into()),
                    routed: true,
                    shadow: true,
                    supported: usize::from(label == Label::Success),
                    unsupported: usize::from(label == Label::Failure),
                    contradicted: 0,
                    label,
                },
            ));
        }
        if label == Label::Failure && rng.unit() < settings.retry_after_failure {
            entries.push(Entry::at(
                at,
                &class.name,
                Event::Retry {
                    seconds_since_previous: 30.0,
                },
            ));
        }
        for entry in &entries {
            tally.observe(entry);
        }
        events += entries.len();
        pending.extend(entries);
        if pending.len() >= 1_000 {
            log.append(&pending)?;
            pending.clear();
        }
    }
    log.append(&pending)?;
    let read = log.read()?;
    let log_matches = read.warnings.is_empty() && Tally::from_entries(&read.entries) == tally;
    Ok(Simulation {
        seed: settings.seed,
        requests: outcomes.iter().map(|c| c.requests).sum(),
        routed: outcomes.iter().map(|c| c.routed).sum(),
        wrongly_routed: outcomes.iter().map(|c| c.wrongly_routed).sum(),
        classes: outcomes,
        events,
        log_matches,
    })
}

/// Over many seeds: how often the targets held, and per class how often it stayed within 1%.
#[derive(Debug, Clone, Serialize)]
pub struct Sweep {
    pub seeds: Vec<u64>,
    /// Seeds whose run met the targets.
    pub met: usize,
    /// Per class: (name, seeds within 1%, most requests wrongly routed in one run).
    pub classes: Vec<(String, usize, u64)>,
    /// The worst share of low-risk requests wrongly routed in one run.
    pub worst_low_risk_share: f64,
}

/// Runs the stream once per seed (each with its own log in a temporary directory).
pub fn sweep(
    settings: &SimSettings,
    classes: &[SimClass],
    seeds: &[u64],
) -> Result<Sweep, LogError> {
    let mut result = Sweep {
        seeds: seeds.to_vec(),
        met: 0,
        classes: classes.iter().map(|c| (c.name.clone(), 0, 0)).collect(),
        worst_low_risk_share: 0.0,
    };
    for &seed in seeds {
        let dir = temp_dir()?;
        let log = EventLog::in_state_dir(dir.path());
        let simulation = run(
            &SimSettings {
                seed,
                ..settings.clone()
            },
            classes,
            &log,
        )?;
        result.met += usize::from(simulation.meets_targets());
        let (wrong, all) = simulation.low_risk_wrongly_routed();
        result.worst_low_risk_share = result.worst_low_risk_share.max(ratio(wrong, all));
        for (slot, class) in result.classes.iter_mut().zip(&simulation.classes) {
            slot.1 += usize::from(class.within_one_percent());
            slot.2 = slot.2.max(class.wrongly_routed);
        }
    }
    Ok(result)
}

fn temp_dir() -> Result<tempfile::TempDir, LogError> {
    tempfile::tempdir().map_err(|source| LogError::Write {
        path: std::env::temp_dir(),
        source,
    })
}

/// The figures of `svc bench --group routing`: the run of `settings.seed` (overall, then one
/// row per class), then the sweep over `sweep_seeds` other seeds.
pub fn figures(
    settings: &SimSettings,
    sweep_seeds: &[u64],
) -> Result<Vec<crate::bench::Figure>, LogError> {
    use crate::bench::Figure;
    let dir = temp_dir()?;
    let log = EventLog::in_state_dir(dir.path());
    let simulation = run(settings, &default_classes(), &log)?;
    let (wrong, all) = simulation.low_risk_wrongly_routed();
    let shadow_trials: u64 = simulation.classes.iter().map(|c| c.shadow_trials).sum();
    let high_risk_routed: u64 = simulation
        .classes
        .iter()
        .filter(|c| c.high_risk)
        .map(|c| c.routed)
        .sum();
    let mut figures = vec![
        Figure {
            name: "routing: share routed".into(),
            value: simulation.routed_share() * 100.0,
            unit: "%".into(),
            target: None,
            detail: format!(
                "{} requests over {} classes, seed {}; gate: {} observations, 95% lower bound >= {}, shadow_observations {} ({shadow_trials} shadow calls); {} events logged, counts re-read from the log {}",
                simulation.requests,
                simulation.classes.len(),
                simulation.seed,
                settings.min_observations,
                settings.min_lower_bound,
                settings.shadow_observations,
                simulation.events,
                if simulation.log_matches {
                    "match"
                } else {
                    "DIFFER"
                }
            ),
        },
        Figure {
            name: "routing: high-risk requests routed".into(),
            value: high_risk_routed as f64,
            unit: "requests".into(),
            target: Some("0".into()),
            detail: format!("seed {}", simulation.seed),
        },
        Figure {
            name: "routing: low-risk requests wrongly routed".into(),
            value: ratio(wrong, all) * 100.0,
            unit: "%".into(),
            target: Some("<= 1".into()),
            detail: format!(
                "{wrong} of {all} (routed while the cheaper model's true rate is under the gate), seed {}",
                simulation.seed
            ),
        },
    ];
    for class in &simulation.classes {
        figures.push(Figure {
            name: format!("routing: {} wrongly routed", class.name),
            value: class.wrongly_routed_share() * 100.0,
            unit: "%".into(),
            target: class.high_risk.then(|| "0".into()),
            detail: format!(
                "{}true rates original {:.2} / cheap {:.2}; routed {:.1}% of {} requests ({} wrongly, {} escalated)",
                if class.high_risk { "high-risk; " } else { "" },
                class.original_rate,
                class.cheap_rate,
                class.routed_share() * 100.0,
                class.requests,
                class.wrongly_routed,
                class.escalations,
            ),
        });
    }
    if !sweep_seeds.is_empty() {
        let swept = sweep(settings, &default_classes(), sweep_seeds)?;
        let over: Vec<String> = swept
            .classes
            .iter()
            .filter(|(_, within, _)| *within < sweep_seeds.len())
            .map(|(name, within, worst)| {
                format!(
                    "{name} over 1% in {} (worst {worst} requests)",
                    sweep_seeds.len() - within
                )
            })
            .collect();
        figures.push(Figure {
            name: "routing: seeds meeting the targets".into(),
            value: swept.met as f64 * 100.0 / sweep_seeds.len() as f64,
            unit: "%".into(),
            target: Some("100".into()),
            detail: format!(
                "{} of {} seeds ({}..={}); worst low-risk wrongly routed {:.2}%; per class: {}",
                swept.met,
                sweep_seeds.len(),
                sweep_seeds.first().copied().unwrap_or_default(),
                sweep_seeds.last().copied().unwrap_or_default(),
                swept.worst_low_risk_share * 100.0,
                if over.is_empty() {
                    "every class within 1% in every seed".to_string()
                } else {
                    over.join(", ")
                }
            ),
        });
    }
    Ok(figures)
}

#[cfg(test)]
mod tests;
