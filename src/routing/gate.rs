//! The gate: whether one request may go to the cheaper model. Pure (no I/O), so every
//! fail-closed reason is unit-tested.
//!
//! A request is routed only when ALL hold, checked in this order (the first that fails is the
//! logged reason):
//! 1. the routing config loaded (`config_error`) and says `enabled = true` (`routing_off`);
//! 2. the request is not high-risk (`high_risk`);
//! 3. a cheaper model is configured for the requested model in this provider style
//!    (`no_cheap_model`);
//! 4. the proxy can rewrite the request's model safely (`cannot_rewrite`);
//! 5. the class has at least `min_observations` labelled outcomes (`sparse_data`);
//! 6. the Wilson 95% lower bound of the class's success rate is at least `min_lower_bound`
//!    (`low_confidence`);
//! 7. the cheaper model's own record on the class (its labelled answers, each escalation a
//!    failure) is not evidently worse: the exact one-sided 95% upper bound of its success rate
//!    is at least `min_lower_bound` (`cheap_model_failing`). A cheap model that rarely succeeds
//!    on a class stops being used for it after a few requests (two failures in a row, or one
//!    success in four, are under 0.8), however well the original model does there; one unlucky
//!    failure of a good cheap model is not enough. This stop is not revisited by itself (no
//!    more routed answers arrive): remove the class's events or the mapping to try again.
//!
//! With `shadow_observations = N` (off by default: it costs a cheaper-model call per trial),
//! a class that passes 1–7 while the cheaper model has fewer than N answers on record is not
//! routed yet (`shadow_trial`): the original model serves, and the same request also goes to
//! the cheaper model in the shadow; its answer is checked by the witness and counted for the
//! cheaper model only. A cheaper model that is bad on an easy class is then found out without
//! a client ever getting its answers.

use serde::Serialize;

use super::config::RoutingConfig;
use crate::proxy::provider::Provider;
use crate::ravs::stats::{upper_bound_exact, wilson95};
use crate::ravs::{ClassStats, Decision, Reason};

/// Where the config stands.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigState {
    /// No config file: routing is off.
    Absent,
    /// The config could not be loaded; the message says why.
    Error(String),
    Loaded(RoutingConfig),
}

/// What the gate decided.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub decision: Decision,
    pub reason: Reason,
    /// The model to send to when routed, or to try in the shadow.
    pub cheap_model: Option<String>,
    /// Also send the request to `cheap_model` in the shadow (its answer is checked, never
    /// delivered).
    pub shadow: bool,
}

impl Verdict {
    fn original(reason: Reason) -> Verdict {
        Verdict {
            decision: Decision::Original,
            reason,
            cheap_model: None,
            shadow: false,
        }
    }
}

/// What the gate weighs about one request.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    pub provider: Provider,
    /// The model the client asked for.
    pub requested_model: Option<&'a str>,
    pub high_risk: bool,
    /// The proxy can put another model in this request.
    pub rewritable: bool,
    /// The class's counts.
    pub stats: ClassStats,
}

/// Whether [`decide`] reaches its rewritability check for a request of `provider` for `model`:
/// routing is on, the request is not high-risk and a cheap model maps from `model`. Before
/// that, whether the request could be rewritten changes no verdict.
pub fn may_route(config: &ConfigState, provider: Provider, model: &str, high_risk: bool) -> bool {
    match config {
        ConfigState::Loaded(config) if config.enabled && !high_risk => {
            config.cheap_model(provider, model).is_some()
        }
        _ => false,
    }
}

/// Decides one request (see the module documentation for the order of the checks).
pub fn decide(config: &ConfigState, request: &Request<'_>) -> Verdict {
    let config = match config {
        ConfigState::Error(_) => return Verdict::original(Reason::ConfigError),
        ConfigState::Absent => return Verdict::original(Reason::RoutingOff),
        ConfigState::Loaded(config) if !config.enabled => {
            return Verdict::original(Reason::RoutingOff);
        }
        ConfigState::Loaded(config) => config,
    };
    if request.high_risk {
        return Verdict::original(Reason::HighRisk);
    }
    let Some(requested) = request.requested_model else {
        return Verdict::original(Reason::CannotRewrite);
    };
    let Some(cheap) = config.cheap_model(request.provider, requested) else {
        return Verdict::original(Reason::NoCheapModel);
    };
    if !request.rewritable {
        return Verdict::original(Reason::CannotRewrite);
    }
    if let Some(reason) = evidence_fails(config, &request.stats) {
        return Verdict::original(reason);
    }
    if request.stats.routed_evidence().1 < config.shadow_observations {
        return Verdict {
            decision: Decision::Original,
            reason: Reason::ShadowTrial,
            cheap_model: Some(cheap.to_string()),
            shadow: true,
        };
    }
    Verdict {
        decision: Decision::Routed,
        reason: Reason::GatePassed,
        cheap_model: Some(cheap.to_string()),
        shadow: false,
    }
}

/// Checks 5–7 on a class's counts: `None` when the evidence allows routing.
pub fn evidence_fails(config: &RoutingConfig, stats: &ClassStats) -> Option<Reason> {
    let (successes, observations) = stats.evidence();
    if observations < config.min_observations {
        return Some(Reason::SparseData);
    }
    let lower = wilson95(successes, observations).map_or(0.0, |(low, _)| low);
    if lower < config.min_lower_bound {
        return Some(Reason::LowConfidence);
    }
    let (routed_successes, routed_observations) = stats.routed_evidence();
    if let Some(upper) = upper_bound_exact(routed_successes, routed_observations, 0.05)
        && upper < config.min_lower_bound
    {
        return Some(Reason::CheapModelFailing);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn config(enabled: bool) -> ConfigState {
        let mut cheap_models = BTreeMap::new();
        cheap_models.insert(("openai", "gpt-5".to_string()), "gpt-5-mini".to_string());
        ConfigState::Loaded(RoutingConfig {
            enabled,
            min_observations: 30,
            min_lower_bound: 0.8,
            high_risk_keywords: Vec::new(),
            cheap_models,
            shadow_observations: 0,
        })
    }

    fn good_stats() -> ClassStats {
        ClassStats {
            requests: 60,
            successes: 58,
            failures: 2,
            ..ClassStats::default()
        }
    }

    fn request(stats: ClassStats) -> Request<'static> {
        Request {
            provider: Provider::Openai,
            requested_model: Some("gpt-5"),
            high_risk: false,
            rewritable: true,
            stats,
        }
    }

    fn reason(config: &ConfigState, request: &Request<'_>) -> Reason {
        decide(config, request).reason
    }

    #[test]
    fn routes_only_when_every_condition_holds() {
        let verdict = decide(&config(true), &request(good_stats()));
        assert_eq!(verdict.decision, Decision::Routed);
        assert_eq!(verdict.reason, Reason::GatePassed);
        assert_eq!(verdict.cheap_model.as_deref(), Some("gpt-5-mini"));
    }

    #[test]
    fn each_fail_closed_reason_keeps_the_original_model() {
        let good = request(good_stats());
        let cases: Vec<(ConfigState, Request<'static>, Reason)> = vec![
            (ConfigState::Absent, good.clone(), Reason::RoutingOff),
            (config(false), good.clone(), Reason::RoutingOff),
            (
                ConfigState::Error("bad".into()),
                good.clone(),
                Reason::ConfigError,
            ),
            (
                config(true),
                Request {
                    high_risk: true,
                    ..good.clone()
                },
                Reason::HighRisk,
            ),
            (
                config(true),
                Request {
                    requested_model: Some("gpt-4.1"),
                    ..good.clone()
                },
                Reason::NoCheapModel,
            ),
            (
                config(true),
                Request {
                    provider: Provider::Anthropic,
                    ..good.clone()
                },
                Reason::NoCheapModel,
            ),
            (
                config(true),
                Request {
                    requested_model: None,
                    ..good.clone()
                },
                Reason::CannotRewrite,
            ),
            (
                config(true),
                Request {
                    rewritable: false,
                    ..good.clone()
                },
                Reason::CannotRewrite,
            ),
            // 29 perfect outcomes: one short of min_observations.
            (
                config(true),
                request(ClassStats {
                    successes: 29,
                    ..ClassStats::default()
                }),
                Reason::SparseData,
            ),
            // 45/50 = 90% observed, but the lower bound (78.6%) is under 0.8.
            (
                config(true),
                request(ClassStats {
                    successes: 45,
                    failures: 5,
                    ..ClassStats::default()
                }),
                Reason::LowConfidence,
            ),
            // The class does well, but the cheap model failed its two routed answers.
            (
                config(true),
                request(ClassStats {
                    routed_failures: 2,
                    failures: 4,
                    ..good_stats()
                }),
                Reason::CheapModelFailing,
            ),
            // An escalation counts as a failure of the cheap model too.
            (
                config(true),
                request(ClassStats {
                    routed_failures: 1,
                    failures: 3,
                    escalations: 1,
                    ..good_stats()
                }),
                Reason::CheapModelFailing,
            ),
        ];
        for (config, request, expected) in cases {
            let verdict = decide(&config, &request);
            assert_eq!(verdict.reason, expected, "{request:?}");
            assert_eq!(verdict.decision, Decision::Original);
            assert_eq!(verdict.cheap_model, None);
        }
    }

    #[test]
    fn one_failed_routed_answer_alone_does_not_stop_a_good_class() {
        let stats = ClassStats {
            routed_failures: 1,
            failures: 3,
            ..good_stats()
        };
        assert_eq!(reason(&config(true), &request(stats)), Reason::GatePassed);
    }

    #[test]
    fn the_cheap_model_keeps_its_place_while_its_record_is_good() {
        let stats = ClassStats {
            routed_successes: 9,
            routed_failures: 1,
            successes: 67,
            failures: 3,
            ..ClassStats::default()
        };
        assert_eq!(reason(&config(true), &request(stats)), Reason::GatePassed);
    }
}
