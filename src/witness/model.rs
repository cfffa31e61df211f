//! The scoring rule: logistic regression over the named [`Features`], with weights fitted on the
//! development data's tuning parts and committed in `weights.json` (embedded at build time).
//!
//! The fit is iteratively reweighted least squares (Newton's method on the L2-penalised
//! log-likelihood): a few dozen small linear solves, deterministic to the last bit for the same
//! examples, so a test can check the committed file is what the fit produces.

use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use super::features::{Features, NAMES};

/// The committed weights.
const WEIGHTS_JSON: &str = include_str!("weights.json");

/// L2 penalty on the weights (not the intercept), pulling each towards its prior
/// ([`prior`]): hard contradictions separate the tuning data perfectly, and without a penalty
/// their weights would grow without bound.
pub const L2: f64 = 0.1;
/// Prior weight of a contradiction detector (and of a bare "no" overlap cannot confirm, and of
/// an answer without the number or date its question asks for): odds
/// of about 150 to 1 against support, enough to take a fully covered claim below every
/// profile's threshold. A detector that never fires on the tuning data (no example to learn
/// from) keeps this weight instead of falling to zero, so a contradiction it finds still counts.
pub const CONTRADICTION_PRIOR: f64 = -5.0;

/// The prior of each weight, in the order of [`NAMES`]: [`CONTRADICTION_PRIOR`] for the
/// contradiction detectors, `polarity_unconfirmed` and `answer_type_mismatch`, zero for the
/// rest.
pub fn prior() -> Vec<f64> {
    let mut probe = Features::default();
    let mut out = Vec::with_capacity(NAMES.len());
    for i in 0..NAMES.len() {
        let mut values = [0.0; NAMES.len()];
        values[i] = 1.0;
        probe.set_values(values);
        out.push(
            if probe.contradicts()
                || probe.polarity_unconfirmed > 0.0
                || probe.answer_type_mismatch > 0.0
            {
                CONTRADICTION_PRIOR
            } else {
                0.0
            },
        );
    }
    out
}
const MAX_ITERATIONS: usize = 100;
const TOLERANCE: f64 = 1e-10;

/// Fitted weights, one per feature name, and the intercept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Weights {
    /// What the weights were fitted on (files and example counts), for the record.
    pub fitted_on: Vec<String>,
    pub l2: f64,
    /// The largest share of right answers to questions the calibration lets fall below the
    /// qa threshold, among the scores it is placed on (out-of-fold ones for the committed fit;
    /// see [`fit_at_held_out_cut`]).
    pub max_false_flags: f64,
    pub bias: f64,
    /// Feature name to weight, in the order of [`NAMES`].
    pub weights: Vec<(String, f64)>,
}

impl Weights {
    /// Probability that the claim is supported, in (0, 1).
    pub fn support(&self, features: &Features) -> f64 {
        sigmoid(self.logit(features))
    }

    /// Log-odds that the claim is supported, as the calibration sees them: of the support
    /// clamped to [1e-12, 1 − 1e-12], so claims beyond either end tie there.
    pub fn calibration_logit(&self, features: &Features) -> f64 {
        let p = self.support(features).clamp(1e-12, 1.0 - 1e-12);
        (p / (1.0 - p)).ln()
    }

    /// Log-odds that the claim is supported.
    fn logit(&self, features: &Features) -> f64 {
        self.bias
            + self
                .weights
                .iter()
                .zip(features.values())
                .map(|((_, w), x)| w * x)
                .sum::<f64>()
    }

    /// The weights file's text: pretty JSON, numbers rounded so the file is stable.
    pub fn to_json(&self) -> String {
        let rounded = Weights {
            fitted_on: self.fitted_on.clone(),
            l2: self.l2,
            max_false_flags: self.max_false_flags,
            bias: round(self.bias),
            weights: self
                .weights
                .iter()
                .map(|(n, w)| (n.clone(), round(*w)))
                .collect(),
        };
        // Serialising plain strings and floats cannot fail.
        let mut out = serde_json::to_string_pretty(&rounded).expect("weights serialise");
        out.push('\n');
        out
    }
}

fn round(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

fn sigmoid(z: f64) -> f64 {
    1.0 / (1.0 + (-z).exp())
}

/// The committed weights.
pub fn weights() -> &'static Weights {
    static PARSED: LazyLock<Weights> = LazyLock::new(|| {
        // The file is part of the source tree and a test parses it and checks every feature
        // name, so it cannot be malformed in a build that passed its tests.
        let weights: Weights = serde_json::from_str(WEIGHTS_JSON).expect("weights.json parses");
        weights
    });
    &PARSED
}

/// One training example: a claim's features and whether it is right.
#[derive(Debug, Clone, Copy)]
pub struct Example {
    pub features: Features,
    pub supported: bool,
}

/// Fit the logistic regression by IRLS with an L2 penalty of `l2` on the weights' distance
/// from their [`prior`], then calibrate where [`CALIBRATION_THRESHOLD`] cuts: for answers to
/// a question (the intercept) at the cut that flags the most wrong answers while at most
/// `max_false_flags` of the right ones fall below it, measured on the fitting examples
/// themselves; for free-standing claims (the `standalone` weight, 1 on exactly those) at the
/// cut that best separates them. See [`calibration_offset`]. [`fit_at_held_out_cut`] is the
/// same fit calibrated on scores of answers the fit did not see.
pub fn fit(examples: &[Example], l2: f64, max_false_flags: f64, fitted_on: Vec<String>) -> Weights {
    let uncalibrated = fit_uncalibrated(examples, l2, fitted_on);
    let answers: Vec<(f64, bool)> = examples
        .iter()
        .filter(|e| e.features.standalone == 0.0)
        .map(|e| (uncalibrated.calibration_logit(&e.features), e.supported))
        .collect();
    fit_at_held_out_cut(examples, uncalibrated, max_false_flags, answers, Vec::new())
}

/// Calibrate `uncalibrated` (the [`fit_uncalibrated`] rule of `examples`): the intercept puts
/// [`CALIBRATION_THRESHOLD`] at the cut of `answers` — (uncalibrated log-odds, right) of
/// answers to questions — that flags the most wrong answers while at most `max_false_flags` of
/// the right ones fall below it; the free-standing claims of `examples` are calibrated as in
/// [`fit`].
///
/// With `answers` scored out of fold (each by a rule fitted without it, on the same penalty),
/// the cut is placed where answers the fit never saw fall, not where its own answers do: a fit
/// scores its own right answers higher than unseen ones, so a cut chosen on them flags more
/// right answers on new data than it allowed on the old.
///
/// `free_claims` are free-standing claims scored the same way; when there are none, the
/// free-standing cut is placed on the fit's own scores of them.
pub fn fit_at_held_out_cut(
    examples: &[Example],
    uncalibrated: Weights,
    max_false_flags: f64,
    answers: Vec<(f64, bool)>,
    free_claims: Vec<(f64, bool)>,
) -> Weights {
    let mut weights = uncalibrated;
    weights.max_false_flags = max_false_flags;
    let free = if free_claims.is_empty() {
        examples
            .iter()
            .filter(|e| e.features.standalone > 0.0)
            .map(|e| (weights.calibration_logit(&e.features), e.supported))
            .collect()
    } else {
        free_claims
    };
    if answers.is_empty() {
        weights.bias += calibration_offset(free, None);
        return weights;
    }
    let answers_shift = calibration_offset(answers, Some(max_false_flags));
    weights.bias += answers_shift;
    if !free.is_empty() {
        // Free-standing claims get their own cut through the standalone weight, on top of
        // the intercept's shift.
        let shift = calibration_offset(free, None) - answers_shift;
        if let Some((_, w)) = weights.weights.iter_mut().find(|(n, _)| n == "standalone") {
            *w += shift;
        }
    }
    weights
}

/// The penalised maximum-likelihood fit alone, its intercept not shifted: its probabilities
/// are the model's, so held-out log-loss (which chooses `l2`) is measured on them.
pub fn fit_uncalibrated(examples: &[Example], l2: f64, fitted_on: Vec<String>) -> Weights {
    let d = NAMES.len() + 1;
    let rows: Vec<Vec<f64>> = examples
        .iter()
        .map(|e| {
            std::iter::once(1.0)
                .chain(e.features.values())
                .collect::<Vec<f64>>()
        })
        .collect();
    let prior = prior();
    let mut beta: Vec<f64> = std::iter::once(0.0).chain(prior.iter().copied()).collect();
    // The objective at `beta`, carried from the step that reached it.
    let mut current = objective(&rows, examples, &beta, l2, &prior);
    for _ in 0..MAX_ITERATIONS {
        let mut gradient = vec![0.0; d];
        let mut hessian = vec![vec![0.0; d]; d];
        for (x, e) in rows.iter().zip(examples) {
            let p = sigmoid(x.iter().zip(&beta).map(|(a, b)| a * b).sum());
            let y = if e.supported { 1.0 } else { 0.0 };
            let w = (p * (1.0 - p)).max(1e-12);
            for i in 0..d {
                gradient[i] += (y - p) * x[i];
                for j in 0..d {
                    hessian[i][j] += w * x[i] * x[j];
                }
            }
        }
        for i in 1..d {
            gradient[i] -= l2 * (beta[i] - prior[i - 1]);
            hessian[i][i] += l2;
        }
        // A tiny ridge on the intercept keeps the system solvable when a feature is constant.
        hessian[0][0] += 1e-9;
        let Some(step) = solve(hessian, gradient) else {
            break;
        };
        // A full Newton step can overshoot when the data nearly separate (a weak penalty, a
        // feature firing on one side only) and then diverge to saturated probabilities: halve
        // it until the penalised likelihood does not fall, so every iteration improves it.
        let mut scale = 1.0;
        let mut accepted = None;
        while scale > MIN_STEP_SCALE {
            let candidate: Vec<f64> = beta.iter().zip(&step).map(|(b, s)| b + scale * s).collect();
            let value = objective(&rows, examples, &candidate, l2, &prior);
            if value >= current - 1e-12 {
                accepted = Some((candidate, value));
                break;
            }
            scale /= 2.0;
        }
        let Some((next, value)) = accepted else {
            break;
        };
        current = value;
        let largest = beta
            .iter()
            .zip(&next)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0, f64::max);
        beta = next;
        if largest < TOLERANCE {
            break;
        }
    }
    Weights {
        fitted_on,
        l2,
        max_false_flags: 0.0,
        bias: beta[0],
        weights: NAMES
            .iter()
            .zip(&beta[1..])
            .map(|(n, w)| (n.to_string(), *w))
            .collect(),
    }
}

/// The smallest fraction of a Newton step the line search tries before it stops.
const MIN_STEP_SCALE: f64 = 1e-9;

/// The penalised log-likelihood [`fit_uncalibrated`] maximises: the data's log-likelihood less
/// the L2 pull of each weight towards its prior (and the intercept's tiny ridge).
fn objective(rows: &[Vec<f64>], examples: &[Example], beta: &[f64], l2: f64, prior: &[f64]) -> f64 {
    // ln σ(z) = −softplus(−z) and ln(1 − σ(z)) = −softplus(z), exact for any z.
    let softplus = |x: f64| x.max(0.0) + (-x.abs()).exp().ln_1p();
    let likelihood: f64 = rows
        .iter()
        .zip(examples)
        .map(|(x, e)| {
            let z: f64 = x.iter().zip(beta).map(|(a, b)| a * b).sum();
            if e.supported {
                -softplus(-z)
            } else {
                -softplus(z)
            }
        })
        .sum();
    let penalty: f64 = beta[1..]
        .iter()
        .zip(prior)
        .map(|(b, p)| (b - p) * (b - p))
        .sum();
    likelihood - 0.5 * l2 * penalty - 0.5e-9 * beta[0] * beta[0]
}

/// The strictest support threshold of a fail-closed profile (`qa`).
pub const CALIBRATION_THRESHOLD: f64 = 0.9;

/// The shift of the intercept that puts [`CALIBRATION_THRESHOLD`] at a cut between the
/// scores (log-odds, right) of `scored` (the midpoint between neighbouring scores). With `max_false_flags`, the
/// middle of the cuts with at most that share of right claims below it that flag the most
/// wrong claims; without, the cut maximising the share of wrong claims
/// below it minus the share of right claims below it.
///
/// The fit is on balanced classes, so its probabilities put the typical right answer near
/// 0.9: a fixed threshold there would flag a coin's share of them. Shifting the intercept
/// keeps the ranking (and every AUROC) and makes the profile thresholds cut where the tuning
/// data says; the more lenient profiles cut lower.
fn calibration_offset(mut scored: Vec<(f64, bool)>, max_false_flags: Option<f64>) -> f64 {
    let logit = |p: f64| (p / (1.0 - p)).ln();
    scored.sort_by(|a, b| a.0.total_cmp(&b.0));
    let right = scored.iter().filter(|s| s.1).count().max(1) as f64;
    let wrong = scored.iter().filter(|s| !s.1).count().max(1) as f64;
    let (mut below_right, mut below_wrong) = (0.0, 0.0);
    // The best gain and the lowest and highest cut reaching it.
    let mut best = (f64::NEG_INFINITY, 0.0, 0.0);
    for (i, (z, supported)) in scored.iter().enumerate() {
        if *supported {
            below_right += 1.0;
        } else {
            below_wrong += 1.0;
        }
        let Some(next) = scored.get(i + 1) else {
            break;
        };
        if next.0 == *z {
            continue;
        }
        let gain = match max_false_flags {
            Some(limit) if below_right / right > limit + 1e-12 => break,
            // Among cuts within the limit, the highest flags the most wrong claims.
            Some(_) => below_wrong / wrong,
            None => below_wrong / wrong - below_right / right,
        };
        let cut = (z + next.0) / 2.0;
        if gain > best.0 + 1e-12 {
            best = (gain, cut, cut);
        } else if gain >= best.0 - 1e-12 {
            best.2 = cut;
        }
    }
    if best.0 == f64::NEG_INFINITY {
        // No cut between scores keeps within the limit (the lowest score is shared by more
        // right answers than it allows): cut below every answer, flagging none, rather than
        // leave the rule uncalibrated.
        return match (max_false_flags, scored.first()) {
            (Some(_), Some(&(lowest, _))) => logit(CALIBRATION_THRESHOLD) - (lowest - 1.0),
            _ => 0.0,
        };
    }
    // Under a false-flag limit every cut from the lowest to the highest reaching the best gain
    // flags the same wrong claims: the middle of that range leaves a margin on both sides.
    let cut = if max_false_flags.is_some() {
        (best.1 + best.2) / 2.0
    } else {
        best.1
    };
    logit(CALIBRATION_THRESHOLD) - cut
}

/// Solve `a x = b` by Gaussian elimination with partial pivoting; `None` when singular.
fn solve(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Option<Vec<f64>> {
    let n = b.len();
    for col in 0..n {
        let pivot = (col..n).max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))?;
        if a[pivot][col].abs() < 1e-14 {
            return None;
        }
        a.swap(col, pivot);
        b.swap(col, pivot);
        for row in col + 1..n {
            let factor = a[row][col] / a[col][col];
            if factor == 0.0 {
                continue;
            }
            let pivot_row = a[col].clone();
            for (cell, p) in a[row][col..].iter_mut().zip(&pivot_row[col..]) {
                *cell -= factor * p;
            }
            b[row] -= factor * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for row in (0..n).rev() {
        let tail: f64 = (row + 1..n).map(|k| a[row][k] * x[k]).sum();
        x[row] = (b[row] - tail) / a[row][row];
    }
    Some(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_weights_name_every_feature_in_order() {
        let w = weights();
        let names: Vec<&str> = w.weights.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, NAMES);
        assert!(w.bias.is_finite());
    }

    #[test]
    fn only_contradiction_detectors_have_a_prior() {
        let p = prior();
        let at = |name: &str| p[NAMES.iter().position(|n| *n == name).expect("named")];
        assert_eq!(at("number_mismatch"), CONTRADICTION_PRIOR);
        assert_eq!(at("slot_mismatch"), CONTRADICTION_PRIOR);
        assert_eq!(at("polarity_unconfirmed"), CONTRADICTION_PRIOR);
        assert_eq!(at("focus_coverage"), 0.0);
        assert_eq!(at("missing_words"), 0.0);
    }

    #[test]
    fn solve_matches_a_known_system() {
        let x = solve(vec![vec![2.0, 1.0], vec![1.0, 3.0]], vec![3.0, 5.0]).expect("regular");
        assert!(
            (x[0] - 0.8).abs() < 1e-12 && (x[1] - 1.4).abs() < 1e-12,
            "{x:?}"
        );
        assert!(solve(vec![vec![1.0, 2.0], vec![2.0, 4.0]], vec![1.0, 2.0]).is_none());
    }

    #[test]
    fn fit_learns_the_sign_of_a_separating_feature() {
        // Right claims are covered, wrong ones carry a number mismatch: the fitted rule must
        // weigh coverage up and the mismatch down, and score the two kinds apart.
        let mut examples = Vec::new();
        for i in 0..40 {
            let jitter = f64::from(i % 5) * 0.02;
            examples.push(Example {
                features: Features {
                    focus_coverage: 0.9 + jitter,
                    ..Features::default()
                },
                supported: true,
            });
            examples.push(Example {
                features: Features {
                    focus_coverage: 0.8 + jitter,
                    number_mismatch: 1.0,
                    ..Features::default()
                },
                supported: false,
            });
        }
        let w = fit(&examples, L2, 0.0, Vec::new());
        let weight = |name: &str| {
            w.weights
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, v)| *v)
                .expect("named")
        };
        assert!(weight("number_mismatch") < -1.0, "{w:?}");
        assert!(w.support(&examples[0].features) > 0.8);
        assert!(w.support(&examples[1].features) < 0.2);
        // Deterministic to the bit.
        assert_eq!(w, fit(&examples, L2, 0.0, Vec::new()));
    }

    #[test]
    fn a_weak_penalty_on_nearly_separated_data_still_converges() {
        // Coverage separates the classes except for two answers, and a second feature fires
        // on a handful of right answers only: with weak penalties the fit must still reach the
        // penalised optimum, where no move raises the objective. (The divergence the line
        // search fixed showed on the tuning data, not on data this small: see
        // `every_penalty_of_the_grid_fits_the_tuning_data_without_diverging`.)
        let mut examples = Vec::new();
        for i in 0..60 {
            let x = f64::from(i) / 60.0;
            examples.push(Example {
                features: Features {
                    focus_coverage: 0.5 + 0.5 * x,
                    verbatim: f64::from(u8::from(i % 17 == 0)),
                    ..Features::default()
                },
                supported: true,
            });
            examples.push(Example {
                features: Features {
                    focus_coverage: 0.5 * x + if i < 2 { 0.6 } else { 0.0 },
                    number_mismatch: f64::from(u8::from(i % 3 == 0)),
                    ..Features::default()
                },
                supported: false,
            });
        }
        for l2 in [0.001, 0.01, 0.1] {
            let w = fit_uncalibrated(&examples, l2, Vec::new());
            let beta: Vec<f64> = std::iter::once(w.bias)
                .chain(w.weights.iter().map(|(_, v)| *v))
                .collect();
            assert!(beta.iter().all(|b| b.is_finite() && b.abs() < 1e3), "{w:?}");
            // Stationary: no small move along any coordinate raises the objective.
            let rows: Vec<Vec<f64>> = examples
                .iter()
                .map(|e| std::iter::once(1.0).chain(e.features.values()).collect())
                .collect();
            let prior = prior();
            let at = objective(&rows, &examples, &beta, l2, &prior);
            for i in 0..beta.len() {
                for h in [1e-4, -1e-4] {
                    let mut moved = beta.clone();
                    moved[i] += h;
                    let there = objective(&rows, &examples, &moved, l2, &prior);
                    assert!(
                        there <= at + 1e-6,
                        "l2 {l2}: coordinate {i} {h}: {there} > {at}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_limit_no_cut_between_scores_keeps_flags_nothing() {
        // Six right answers tie at the lowest score with 100 answers in all: any cut between
        // scores has 6 % of the right ones below it, over a 2 % limit.
        let mut scored: Vec<(f64, bool)> = (0..6).map(|_| (-3.0, true)).collect();
        scored.extend((0..44).map(|i| (f64::from(i) / 10.0, true)));
        scored.extend((0..50).map(|i| (-1.0 + f64::from(i) / 100.0, false)));
        let offset = calibration_offset(scored, Some(0.02));
        let logit = |p: f64| (p / (1.0 - p)).ln();
        let cut = logit(CALIBRATION_THRESHOLD) - offset;
        assert!(cut < -3.0, "the cut {cut} must lie below every answer");
    }

    /// Right answers scoring in a tight band, wrong ones spread below and into it.
    fn banded_answers() -> Vec<Example> {
        let mut examples = Vec::new();
        for i in 0..100 {
            let x = f64::from(i) / 100.0;
            examples.push(Example {
                features: Features {
                    focus_coverage: 0.9 + 0.1 * x,
                    ..Features::default()
                },
                supported: true,
            });
            examples.push(Example {
                features: Features {
                    focus_coverage: 0.5 + 0.45 * x,
                    ..Features::default()
                },
                supported: false,
            });
        }
        examples
    }

    #[test]
    fn a_false_flag_limit_keeps_right_answers_above_the_threshold() {
        // Right answers score in a tight band, wrong ones spread below and into it: the
        // limit puts the qa threshold under all but its share of right answers, and above as
        // many wrong ones as that allows.
        let examples = banded_answers();
        for limit in [0.0, 0.05] {
            let w = fit(&examples, L2, limit, Vec::new());
            assert_eq!(w.max_false_flags, limit);
            let below = |supported: bool| {
                examples
                    .iter()
                    .filter(|e| e.supported == supported)
                    .filter(|e| w.support(&e.features) < CALIBRATION_THRESHOLD)
                    .count()
            };
            assert!(
                below(true) as f64 <= limit * 100.0 + 1e-9,
                "{limit}: {}",
                below(true)
            );
            assert!(below(false) >= 75, "{limit}: {}", below(false));
        }
        // A looser limit never flags fewer wrong answers.
        let strict = fit(&examples, L2, 0.0, Vec::new());
        let loose = fit(&examples, L2, 0.05, Vec::new());
        let flagged = |w: &Weights| {
            examples
                .iter()
                .filter(|e| !e.supported && w.support(&e.features) < CALIBRATION_THRESHOLD)
                .count()
        };
        assert!(flagged(&loose) >= flagged(&strict));
    }

    /// Calibrated on scores of unseen answers, the threshold goes where they fall: answers
    /// scoring one log-odds unit lower than the fit's own move the cut, and so the intercept,
    /// by exactly that unit; the weights stay the fit's.
    #[test]
    fn a_held_out_cut_follows_the_scores_it_is_given() {
        let examples = banded_answers();
        let own = fit(&examples, L2, 0.02, Vec::new());
        let uncalibrated = fit_uncalibrated(&examples, L2, Vec::new());
        let lower: Vec<(f64, bool)> = examples
            .iter()
            .map(|e| {
                (
                    uncalibrated.calibration_logit(&e.features) - 1.0,
                    e.supported,
                )
            })
            .collect();
        let held = fit_at_held_out_cut(&examples, uncalibrated.clone(), 0.02, lower, Vec::new());
        assert!(
            (held.bias - own.bias - 1.0).abs() < 1e-9,
            "{} {}",
            held.bias,
            own.bias
        );
        assert_eq!(held.weights, own.weights);
        assert_eq!(held.max_false_flags, 0.02);
        // The fit's own scores given as the held-out ones: the in-sample calibration.
        let same: Vec<(f64, bool)> = examples
            .iter()
            .map(|e| (uncalibrated.calibration_logit(&e.features), e.supported))
            .collect();
        assert_eq!(
            fit_at_held_out_cut(&examples, uncalibrated, 0.02, same, Vec::new()),
            own
        );
    }

    #[test]
    fn free_standing_claims_are_calibrated_through_the_standalone_weight() {
        let mut examples = Vec::new();
        for i in 0..40 {
            let x = f64::from(i % 10) / 10.0;
            for (standalone, base) in [(0.0, 0.9), (1.0, 0.6)] {
                examples.push(Example {
                    features: Features {
                        focus_coverage: base + 0.1 * x,
                        standalone,
                        ..Features::default()
                    },
                    supported: true,
                });
                examples.push(Example {
                    features: Features {
                        focus_coverage: base - 0.3 + 0.1 * x,
                        standalone,
                        number_mismatch: f64::from(u8::from(i % 2 == 0)),
                        ..Features::default()
                    },
                    supported: false,
                });
            }
        }
        let w = fit(&examples, L2, 0.0, Vec::new());
        let uncalibrated = fit_uncalibrated(&examples, L2, Vec::new());
        let standalone = |w: &Weights| {
            w.weights
                .iter()
                .find(|(n, _)| n == "standalone")
                .map(|(_, v)| *v)
                .expect("named")
        };
        assert_ne!(standalone(&w), standalone(&uncalibrated));
        // Each group is cut between its right and wrong claims.
        for e in &examples {
            let s = w.support(&e.features);
            assert_eq!(s >= CALIBRATION_THRESHOLD, e.supported, "{e:?} {s}");
        }
        // Held-out scores of the free-standing claims a unit lower than the fit's own move
        // their cut (through the standalone weight) a unit, and leave the answers' alone.
        let scored = |free: bool, shift: f64| -> Vec<(f64, bool)> {
            examples
                .iter()
                .filter(|e| (e.features.standalone > 0.0) == free)
                .map(|e| {
                    (
                        uncalibrated.calibration_logit(&e.features) - shift,
                        e.supported,
                    )
                })
                .collect()
        };
        let own = fit_at_held_out_cut(
            &examples,
            uncalibrated.clone(),
            0.02,
            scored(false, 0.0),
            Vec::new(),
        );
        let held = fit_at_held_out_cut(
            &examples,
            uncalibrated.clone(),
            0.02,
            scored(false, 0.0),
            scored(true, 1.0),
        );
        assert_eq!(held.bias, own.bias);
        assert!(
            (standalone(&held) - standalone(&own) - 1.0).abs() < 1e-9,
            "{} {}",
            standalone(&held),
            standalone(&own)
        );
    }

    #[test]
    fn weights_round_trip_through_json() {
        let w = weights();
        let again: Weights = serde_json::from_str(&w.to_json()).expect("parses");
        assert_eq!(again.weights.len(), NAMES.len());
    }
}
