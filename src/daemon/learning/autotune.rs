//! `autotune`: a bounded offline search for better ranking weights on tasks mined from real
//! history, adopted only when tasks it never tuned on agree.
//!
//! The tasks are split by [`Part`] (a commit's id decides it, so the split is fixed and never
//! chosen by the search). The search is a coordinate search on the *tune* part: each weight in
//! turn is tried a step up and a step down, a move is kept when it raises the objective (mean
//! of gold-file recall and changed-line coverage over tasks and budgets), and steps halve when
//! a full pass keeps nothing; it stops after `max_evaluations` objective evaluations. The
//! *held-out* part then decides: the paired per-(task, budget) differences of the objective,
//! candidate minus current, must have a positive mean and a bootstrap 95% interval whose lower
//! end is above `-margin` (non-inferior by the margin, better on average). Otherwise the
//! current weights stay and the report says why.

use rayon::prelude::*;
use serde::Serialize;

use crate::context::localize::{LocalisationOutcome, LocalizeError, Part, PreparedTask};
use crate::context::select::SelectOptions;
use crate::context::weights::{Feature, RankingWeights};
use crate::report::stats::{bootstrap_means, wilcoxon_signed_rank};

/// Settings of a search.
#[derive(Debug, Clone)]
pub struct AutotuneSettings {
    pub budgets: Vec<usize>,
    /// Objective evaluations on the tune part (the starting point counts as one).
    pub max_evaluations: usize,
    /// Non-inferiority margin on the objective (a share: 0.01 = one point).
    pub margin: f64,
    pub resamples: usize,
    pub seed: u64,
}

impl Default for AutotuneSettings {
    fn default() -> Self {
        Self {
            budgets: vec![4_000, 8_000],
            max_evaluations: 40,
            margin: 0.01,
            resamples: 2_000,
            seed: 17,
        }
    }
}

/// Means of one weight vector on one part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PartFigures {
    pub tasks: usize,
    pub gold_recall: f64,
    pub line_coverage: f64,
    /// Mean of the two: what the search maximises.
    pub objective: f64,
}

/// One evaluation the search made.
#[derive(Debug, Clone, Serialize)]
pub struct Step {
    pub evaluation: usize,
    pub feature: Option<&'static str>,
    pub value: Option<f64>,
    pub objective: f64,
    pub kept: bool,
}

/// The held-out comparison that decides adoption.
#[derive(Debug, Clone, Serialize)]
pub struct HeldOutComparison {
    pub pairs: usize,
    pub mean_difference: f64,
    pub ci_low: f64,
    pub ci_high: f64,
    pub wilcoxon_p: f64,
    pub margin: f64,
}

/// Everything a search found and decided.
#[derive(Debug, Clone, Serialize)]
pub struct AutotuneReport {
    pub budgets: Vec<usize>,
    pub tune_tasks: usize,
    pub held_out_tasks: usize,
    pub evaluations: usize,
    pub before: RankingWeights,
    pub candidate: RankingWeights,
    pub tune_before: PartFigures,
    pub tune_after: PartFigures,
    pub held_out_before: PartFigures,
    pub held_out_after: PartFigures,
    pub comparison: Option<HeldOutComparison>,
    pub adopted: bool,
    /// Why the candidate was adopted or refused.
    pub decision: String,
    pub steps: Vec<Step>,
}

#[derive(Debug, thiserror::Error)]
pub enum AutotuneError {
    #[error(
        "autotune needs tasks of both parts: {tune} tune and {held_out} held-out tasks were given (mine more history, e.g. raise --max-tasks)"
    )]
    TooFewTasks { tune: usize, held_out: usize },
    #[error("autotune needs at least one budget")]
    NoBudget,
    #[error(transparent)]
    Localize(#[from] LocalizeError),
}

/// Outcomes of `weights` on `tasks` at every budget, in task-then-budget order.
fn outcomes(
    tasks: &[&PreparedTask],
    weights: &RankingWeights,
    budgets: &[usize],
) -> Result<Vec<LocalisationOutcome>, LocalizeError> {
    let options = SelectOptions {
        weights: *weights,
        ..SelectOptions::default()
    };
    let selector = |index: &crate::context::index::Index,
                    _: &[(String, String)],
                    query: &str,
                    budget: usize| {
        crate::context::localize::svc_selector_with(&options, index, query, budget)
    };
    let per_task: Vec<Result<Vec<LocalisationOutcome>, LocalizeError>> = tasks
        .par_iter()
        .map(|task| {
            budgets
                .iter()
                .map(|&budget| task.evaluate("svc", &selector, budget))
                .collect()
        })
        .collect();
    let mut all = Vec::with_capacity(tasks.len() * budgets.len());
    for task in per_task {
        all.extend(task?);
    }
    Ok(all)
}

fn objective_of(outcome: &LocalisationOutcome) -> f64 {
    (outcome.gold_recall + outcome.line_coverage) / 2.0
}

fn figures(tasks: usize, outcomes: &[LocalisationOutcome]) -> PartFigures {
    let n = outcomes.len().max(1) as f64;
    let recall = outcomes.iter().map(|o| o.gold_recall).sum::<f64>() / n;
    let coverage = outcomes.iter().map(|o| o.line_coverage).sum::<f64>() / n;
    PartFigures {
        tasks,
        gold_recall: recall,
        line_coverage: coverage,
        objective: (recall + coverage) / 2.0,
    }
}

/// Searches from `start` on the tune part of `tasks` and decides on the held-out part.
/// `progress` is called after each evaluation with `(evaluation, max_evaluations, objective)`.
pub fn autotune(
    tasks: &[PreparedTask],
    start: &RankingWeights,
    settings: &AutotuneSettings,
    progress: &dyn Fn(usize, usize, f64),
) -> Result<AutotuneReport, AutotuneError> {
    if settings.budgets.is_empty() {
        return Err(AutotuneError::NoBudget);
    }
    let tune: Vec<&PreparedTask> = tasks.iter().filter(|t| t.task.part == Part::Tune).collect();
    let held_out: Vec<&PreparedTask> = tasks
        .iter()
        .filter(|t| t.task.part == Part::HeldOut)
        .collect();
    if tune.is_empty() || held_out.is_empty() {
        return Err(AutotuneError::TooFewTasks {
            tune: tune.len(),
            held_out: held_out.len(),
        });
    }
    let budgets = &settings.budgets;
    let evaluate = |weights: &RankingWeights| -> Result<f64, LocalizeError> {
        Ok(figures(tune.len(), &outcomes(&tune, weights, budgets)?).objective)
    };
    let mut best = *start;
    let tune_before = figures(tune.len(), &outcomes(&tune, &best, budgets)?);
    let mut best_objective = tune_before.objective;
    let mut evaluations = 1;
    let mut steps = vec![Step {
        evaluation: 1,
        feature: None,
        value: None,
        objective: best_objective,
        kept: true,
    }];
    progress(evaluations, settings.max_evaluations, best_objective);
    let mut step_share = 0.25;
    'search: while step_share >= 0.02 {
        let mut moved = false;
        for feature in Feature::ALL {
            let (low, high) = feature.bounds();
            for direction in [1.0, -1.0] {
                if evaluations >= settings.max_evaluations {
                    break 'search;
                }
                let mut trial = best;
                trial.set_clamped(
                    feature,
                    best.get(feature) + direction * step_share * (high - low),
                );
                if trial == best {
                    continue;
                }
                let objective = evaluate(&trial)?;
                evaluations += 1;
                progress(evaluations, settings.max_evaluations, objective);
                // A move must beat noise-free ties: equal objectives keep the older weights.
                let kept = objective > best_objective + 1e-9;
                steps.push(Step {
                    evaluation: evaluations,
                    feature: Some(feature.name()),
                    value: Some(trial.get(feature)),
                    objective,
                    kept,
                });
                if kept {
                    best = trial;
                    best_objective = objective;
                    moved = true;
                    break;
                }
            }
        }
        if !moved {
            step_share /= 2.0;
        }
    }
    let tune_after = figures(tune.len(), &outcomes(&tune, &best, budgets)?);
    let held_before_outcomes = outcomes(&held_out, start, budgets)?;
    let held_after_outcomes = outcomes(&held_out, &best, budgets)?;
    let held_out_before = figures(held_out.len(), &held_before_outcomes);
    let held_out_after = figures(held_out.len(), &held_after_outcomes);
    let (comparison, adopted, decision) = if best == *start {
        (
            None,
            false,
            "the search found no weights better than the current ones on the tune part".to_string(),
        )
    } else {
        let differences: Vec<f64> = held_before_outcomes
            .iter()
            .zip(&held_after_outcomes)
            .map(|(before, after)| objective_of(after) - objective_of(before))
            .collect();
        let (comparison, adopted, decision) = decide(&differences, settings);
        (Some(comparison), adopted, decision)
    };
    Ok(AutotuneReport {
        budgets: budgets.clone(),
        tune_tasks: tune.len(),
        held_out_tasks: held_out.len(),
        evaluations,
        before: *start,
        candidate: best,
        tune_before,
        tune_after,
        held_out_before,
        held_out_after,
        comparison,
        adopted,
        decision,
        steps,
    })
}

/// The adoption rule on held-out paired differences (candidate − current): adopt when the mean
/// is positive and the bootstrap 95% interval's lower end is above `-margin`.
pub fn decide(
    differences: &[f64],
    settings: &AutotuneSettings,
) -> (HeldOutComparison, bool, String) {
    let estimate = bootstrap_means(
        differences,
        1,
        settings.resamples,
        0.95,
        settings.seed,
        |means| means.to_vec(),
    )
    .into_iter()
    .next()
    .flatten();
    let test = wilcoxon_signed_rank(differences);
    let mean = differences.iter().sum::<f64>() / differences.len().max(1) as f64;
    let (ci_low, ci_high) = estimate.map_or((mean, mean), |e| (e.ci_low, e.ci_high));
    let comparison = HeldOutComparison {
        pairs: differences.len(),
        mean_difference: mean,
        ci_low,
        ci_high,
        wilcoxon_p: test.p_value,
        margin: settings.margin,
    };
    let adopted = mean > 0.0 && ci_low > -settings.margin;
    let decision = if adopted {
        format!(
            "adopted: on {} held-out pairs the objective rose by {:+.4} (95% CI {:+.4} to {:+.4}), above the non-inferiority margin -{}",
            differences.len(),
            mean,
            ci_low,
            ci_high,
            settings.margin
        )
    } else if mean <= 0.0 {
        format!(
            "refused: better on the tune part, but not on the {} held-out pairs (mean {:+.4}, 95% CI {:+.4} to {:+.4})",
            differences.len(),
            mean,
            ci_low,
            ci_high
        )
    } else {
        format!(
            "refused: the held-out interval's lower end {:+.4} is below the margin -{} (mean {:+.4})",
            ci_low, settings.margin, mean
        )
    };
    (comparison, adopted, decision)
}

/// The report as Markdown: weights before and after, both parts, the decision.
pub fn render_markdown(report: &AutotuneReport) -> String {
    let mut out = String::from("# Autotune of the ranking weights\n\n");
    out.push_str(&format!(
        "Budgets {:?}; {} tune tasks, {} held-out tasks; {} evaluations.\n\n**{}**\n\n",
        report.budgets,
        report.tune_tasks,
        report.held_out_tasks,
        report.evaluations,
        report.decision
    ));
    out.push_str("| weight | before | candidate |\n|---|---:|---:|\n");
    for feature in Feature::ALL {
        out.push_str(&format!(
            "| {} | {} | {} |\n",
            feature.name(),
            trim(report.before.get(feature)),
            trim(report.candidate.get(feature))
        ));
    }
    out.push_str(
        "\n| part | weights | recall | coverage | objective |\n|---|---|---:|---:|---:|\n",
    );
    for (part, label, f) in [
        ("tune", "before", report.tune_before),
        ("tune", "candidate", report.tune_after),
        ("held-out", "before", report.held_out_before),
        ("held-out", "candidate", report.held_out_after),
    ] {
        out.push_str(&format!(
            "| {part} | {label} | {:.1}% | {:.1}% | {:.4} |\n",
            100.0 * f.gold_recall,
            100.0 * f.line_coverage,
            f.objective
        ));
    }
    if let Some(c) = &report.comparison {
        out.push_str(&format!(
            "\nHeld-out paired difference (candidate − before) over {} (task, budget) pairs: mean {:+.4}, bootstrap 95% CI {:+.4} to {:+.4}, Wilcoxon p = {:.4}; margin {}.\n",
            c.pairs, c.mean_difference, c.ci_low, c.ci_high, c.wilcoxon_p, c.margin
        ));
    }
    out
}

fn trim(value: f64) -> String {
    let text = format!("{value:.4}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adoption_needs_a_positive_mean_and_a_lower_bound_above_the_margin() {
        let settings = AutotuneSettings::default();
        let better: Vec<f64> = (0..40).map(|i| 0.02 + 0.001 * (i % 5) as f64).collect();
        let (comparison, adopted, decision) = decide(&better, &settings);
        assert!(adopted, "{decision}");
        assert!(comparison.ci_low > 0.0);

        let worse: Vec<f64> = better.iter().map(|d| -d).collect();
        let (_, adopted, decision) = decide(&worse, &settings);
        assert!(!adopted);
        assert!(
            decision.starts_with("refused: better on the tune part, but not"),
            "{decision}"
        );

        // A small gain on average but swings far below the margin on some pairs.
        let noisy: Vec<f64> = (0..20)
            .map(|i| if i % 2 == 0 { 0.30 } else { -0.28 })
            .collect();
        let (comparison, adopted, decision) = decide(&noisy, &settings);
        assert!(comparison.mean_difference > 0.0);
        assert!(!adopted, "{decision}");
        assert!(decision.contains("below the margin"), "{decision}");
    }
}
