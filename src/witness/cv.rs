//! Cross-validation of the scoring rule on the tuning parts: figures a fit did not see.
//!
//! Every tuning item goes to one of `k` folds by the FNV-1a hash of its knowledge text, so the
//! claims written against one documentation section (which share it) never sit on both sides
//! of a split. For each fold the rule is fitted on the other folds — penalty, weights and the
//! calibrated intercept alike — and scores the fold's answers; pooling the folds gives
//! out-of-sample figures for every tuning item. The same folds choose the L2 penalty
//! ([`L2_GRID`], by held-out log-loss), so the committed fit's penalty is itself chosen on
//! data the candidate fits did not see, and place the qa calibration's cut: the intercept is
//! shifted so that the qa threshold falls where the pooled out-of-fold scores of the answers
//! to questions put it at [`FALSE_FLAG_TARGET`] false flags ([`fit_calibrated`]).

use std::path::Path;

use serde::Serialize;
use statrs::statistics::Statistics;

use super::devset::{self, fnv1a64};
use super::eval::{self, EvalError, LENGTH_MATCH_WORDS};
use super::features::Features;
use super::model::{self, Example, Weights};
use super::profile::Profile;
use super::verify::{self, Evidence};

/// Folds of the committed fit's cross-validation.
pub const DEFAULT_FOLDS: usize = 5;

/// Candidate L2 penalties, weakest first.
pub const L2_GRID: [f64; 7] = [0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0];

/// The largest share of right answers to questions the qa calibration lets fall below the
/// threshold among out-of-fold scores (the target for unseen answers).
pub const FALSE_FLAG_TARGET: f64 = 0.02;

/// How far the printed out-of-fold curve goes in false flags.
const CURVE_FALSE_FLAGS: f64 = 0.04;

/// One tuning item as the fit sees it: the claim features of its right (0) and hallucinated
/// (1) answer, their lengths in words, and its fold.
#[derive(Debug, Clone)]
struct Item {
    fold: usize,
    /// Whether the item has a question (else its answers are free-standing claims).
    question: bool,
    claims: [Vec<Features>; 2],
    words: [usize; 2],
}

/// One tuning file, measured once.
#[derive(Debug, Clone)]
pub struct TuningSet {
    /// The file, relative to the repository root.
    pub file: String,
    items: Vec<Item>,
}

impl TuningSet {
    /// Measure every item of `items` (read from `file`), assigning folds out of `folds`.
    pub fn new(file: &str, items: &[eval::EvalItem], folds: usize) -> Self {
        let folds = folds.max(1);
        let items = items
            .iter()
            .map(|item| {
                let evidence = Evidence::new(&item.knowledge);
                let claims =
                    |answer: &str| verify::claim_features(&evidence, answer, Some(&item.question));
                Item {
                    fold: (fnv1a64(&item.knowledge) % folds as u64) as usize,
                    question: !item.question.trim().is_empty(),
                    claims: [
                        claims(&item.right_answer),
                        claims(&item.hallucinated_answer),
                    ],
                    words: [
                        item.right_answer.split_whitespace().count(),
                        item.hallucinated_answer.split_whitespace().count(),
                    ],
                }
            })
            .collect();
        Self {
            file: file.to_string(),
            items,
        }
    }

    /// Items in this set.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether the set has no items.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Read and measure the committed tuning files under `root` (the repository root).
pub fn load(root: &Path, folds: usize) -> Result<Vec<TuningSet>, EvalError> {
    load_files(root, &devset::TUNE_FILES, folds)
}

/// Read and measure the committed files the fit never reads but the report scores
/// ([`devset::SCORED_ONLY_FILES`]).
pub fn load_scored_only(root: &Path, folds: usize) -> Result<Vec<TuningSet>, EvalError> {
    load_files(root, &devset::SCORED_ONLY_FILES, folds)
}

fn load_files(root: &Path, files: &[&str], folds: usize) -> Result<Vec<TuningSet>, EvalError> {
    files
        .iter()
        .map(|file| {
            let items = eval::read_items(&root.join(file))?;
            Ok(TuningSet::new(file, &items, folds))
        })
        .collect()
}

/// The training examples of `items`: one per answer with a verifiable claim, its weakest claim.
fn examples<'a>(items: impl IntoIterator<Item = &'a Item>) -> Vec<Example> {
    let mut out = Vec::new();
    for item in items {
        for (claims, supported) in item.claims.iter().zip([true, false]) {
            if let Some(features) = devset::weakest(claims) {
                out.push(Example {
                    features,
                    supported,
                });
            }
        }
    }
    out
}

/// Every example of every set, for the fit on all tuning data.
pub fn all_examples(sets: &[TuningSet]) -> Vec<Example> {
    examples(sets.iter().flat_map(|s| &s.items))
}

/// The detector's figures at the qa threshold (fail-closed: an answer is flagged when a
/// verifiable claim scores below it), as `svc witness eval --profile qa` computes them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Figures {
    pub items: usize,
    pub auroc: f64,
    /// Share of hallucinated answers flagged.
    pub flagged: f64,
    /// Share of right answers flagged.
    pub false_flags: f64,
}

/// Figures on all items of a file and on its length-matched pairs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct FileFigures {
    pub all: Figures,
    pub length_matched: Figures,
}

/// One file's figures: with the rule fitted on everything (in-sample) and pooled over the
/// folds, each scored by the rule fitted without it (cross-validated).
#[derive(Debug, Clone, Serialize)]
pub struct FileReport {
    pub file: String,
    /// Whether the fit read this file (false for [`devset::SCORED_ONLY_FILES`]).
    pub fitted: bool,
    pub in_sample: FileFigures,
    pub cross_validated: FileFigures,
}

/// Held-out log-loss of one candidate penalty.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct PenaltyScore {
    pub l2: f64,
    /// Mean negative log-likelihood of the held-out examples under the uncalibrated fit.
    pub log_loss: f64,
    /// Standard error of that mean over the examples.
    pub std_error: f64,
}

/// One cut of the pooled out-of-fold scores of the answers to questions.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct CurvePoint {
    /// Right answers below the cut.
    pub right_below: usize,
    /// Their share of the right answers.
    pub false_flags: f64,
    /// Share of wrong answers below the highest cut with that many right answers below.
    pub flagged: f64,
}

/// Where the qa calibration cuts: the pooled out-of-fold scores of the answers to questions,
/// as the flagged share each number of false flags allows.
#[derive(Debug, Clone, Serialize)]
pub struct Calibration {
    /// The false-flag share the cut allows ([`FALSE_FLAG_TARGET`]).
    pub target: f64,
    /// Answers to questions (right, wrong) with a verifiable claim.
    pub answers: [usize; 2],
    /// Up to 4 % false flags.
    pub curve: Vec<CurvePoint>,
    /// The point the calibration takes: the most false flags within the target.
    pub chosen: Option<CurvePoint>,
}

/// What cross-validation found.
#[derive(Debug, Clone, Serialize)]
pub struct CvReport {
    pub folds: usize,
    pub penalties: Vec<PenaltyScore>,
    /// The penalty with the least held-out log-loss (the committed fit's).
    pub chosen_l2: f64,
    /// The out-of-fold scores the committed fit's qa calibration cuts.
    pub calibration: Calibration,
    pub files: Vec<FileReport>,
}

/// Answer support: its weakest verifiable claim's (1 with none, as the witness does).
fn answer_score(weights: &Weights, claims: &[Features]) -> f64 {
    claims
        .iter()
        .map(|f| weights.support(f))
        .fold(1.0, f64::min)
}

/// The qa threshold and whether an answer with these claims and this score is flagged there.
fn is_flagged(claims: &[Features], score: f64) -> bool {
    !claims.is_empty() && score < Profile::Qa.support_threshold()
}

fn figures(scored: &[([f64; 2], [bool; 2])]) -> Figures {
    let n = scored.len();
    if n == 0 {
        return Figures::default();
    }
    let right: Vec<f64> = scored.iter().map(|s| s.0[0]).collect();
    let wrong: Vec<f64> = scored.iter().map(|s| s.0[1]).collect();
    let share = |side: usize| scored.iter().filter(|s| s.1[side]).count() as f64 / n as f64;
    Figures {
        items: n,
        auroc: eval::auroc(&right, &wrong),
        flagged: share(1),
        false_flags: share(0),
    }
}

/// Score `items` with `weights_of(item)` and summarise.
fn file_figures<'a>(
    items: &'a [Item],
    weights_of: impl Fn(&'a Item) -> &'a Weights,
) -> FileFigures {
    let scored: Vec<([f64; 2], [bool; 2], bool)> = items
        .iter()
        .map(|item| {
            let weights = weights_of(item);
            let score = [0, 1].map(|side| answer_score(weights, &item.claims[side]));
            let flagged = [0, 1].map(|side| is_flagged(&item.claims[side], score[side]));
            let matched = item.words[0].abs_diff(item.words[1]) <= LENGTH_MATCH_WORDS;
            (score, flagged, matched)
        })
        .collect();
    let all: Vec<([f64; 2], [bool; 2])> = scored.iter().map(|s| (s.0, s.1)).collect();
    let matched: Vec<([f64; 2], [bool; 2])> =
        scored.iter().filter(|s| s.2).map(|s| (s.0, s.1)).collect();
    FileFigures {
        all: figures(&all),
        length_matched: figures(&matched),
    }
}

/// Items of every set in fold `fold` (`held`) or outside it.
fn fold_items(sets: &[TuningSet], fold: usize, held: bool) -> impl Iterator<Item = &Item> {
    sets.iter()
        .flat_map(|s| &s.items)
        .filter(move |i| (i.fold == fold) == held)
}

/// Mean held-out log-loss of the uncalibrated fit with penalty `l2`, and its standard error.
fn held_out_log_loss(sets: &[TuningSet], folds: usize, l2: f64) -> (f64, f64) {
    let mut losses = Vec::new();
    for fold in 0..folds {
        let train = examples(fold_items(sets, fold, false));
        let test = examples(fold_items(sets, fold, true));
        if train.is_empty() || test.is_empty() {
            continue;
        }
        let weights = model::fit_uncalibrated(&train, l2, Vec::new());
        for e in &test {
            let p = weights.support(&e.features).clamp(1e-12, 1.0 - 1e-12);
            losses.push(if e.supported {
                -p.ln()
            } else {
                -(1.0 - p).ln()
            });
        }
    }
    if losses.len() < 2 {
        return (losses.first().copied().unwrap_or(0.0), 0.0);
    }
    let n = losses.len() as f64;
    (losses.iter().mean(), losses.iter().std_dev() / n.sqrt())
}

/// Score every penalty of [`L2_GRID`] and pick by the one-standard-error rule: the strongest
/// penalty whose held-out log-loss is within one standard error of the least. The curve is
/// flat at the weak end (0.01 to 0.1 differ by less than their noise), and there a weaker
/// penalty lets the coverage weights grow until the contradiction detectors' priors no longer
/// outweigh them: a negated claim with every word in the evidence passed. Among penalties
/// the data cannot tell apart, the one keeping the priors' say is taken.
pub fn choose_l2(sets: &[TuningSet], folds: usize) -> (f64, Vec<PenaltyScore>) {
    let penalties: Vec<PenaltyScore> = L2_GRID
        .iter()
        .map(|&l2| {
            let (log_loss, std_error) = held_out_log_loss(sets, folds, l2);
            PenaltyScore {
                l2,
                log_loss,
                std_error,
            }
        })
        .collect();
    (one_standard_error(&penalties), penalties)
}

/// The strongest penalty whose loss is within one standard error of the least.
fn one_standard_error(penalties: &[PenaltyScore]) -> f64 {
    let Some(best) = penalties
        .iter()
        .min_by(|a, b| a.log_loss.total_cmp(&b.log_loss))
    else {
        return model::L2;
    };
    let within = best.log_loss + best.std_error + 1e-12;
    penalties
        .iter()
        .filter(|p| p.log_loss <= within)
        .map(|p| p.l2)
        .fold(best.l2, f64::max)
}

/// Every example of `sets` scored by the uncalibrated rule fitted with `l2` without its fold:
/// log-odds and label of the answers to questions (their weakest claims) and, apart, of the
/// free-standing claims, which are calibrated on their own cut.
struct OutOfFold {
    answers: Vec<(f64, bool)>,
    free: Vec<(f64, bool)>,
}

fn out_of_fold(sets: &[TuningSet], folds: usize, l2: f64) -> OutOfFold {
    let mut out = OutOfFold {
        answers: Vec::new(),
        free: Vec::new(),
    };
    for fold in 0..folds {
        let train = examples(fold_items(sets, fold, false));
        if train.is_empty() {
            continue;
        }
        let weights = model::fit_uncalibrated(&train, l2, Vec::new());
        for (question, into) in [(true, &mut out.answers), (false, &mut out.free)] {
            let test = examples(fold_items(sets, fold, true).filter(|i| i.question == question));
            into.extend(
                test.iter()
                    .map(|e| (weights.calibration_logit(&e.features), e.supported)),
            );
        }
    }
    out
}

/// The rule of `sets` (measured with `folds` folds): fitted on all their examples with penalty
/// `l2`, its qa threshold placed at the cut of the pooled out-of-fold scores of the answers to
/// questions that flags the most wrong answers with at most [`FALSE_FLAG_TARGET`] of the right
/// ones below ([`model::fit_at_held_out_cut`]); the free-standing claims' cut likewise on
/// their out-of-fold scores. A fit ranks its own right answers higher than unseen ones, so a
/// cut placed among its own scores lets more right answers fall below it on new data than it
/// allowed there; out-of-fold scores are what new data looks like, and the target is then the
/// only constant of the calibration (no limit to choose).
pub fn fit_calibrated(
    sets: &[TuningSet],
    folds: usize,
    l2: f64,
    fitted_on: Vec<String>,
) -> Weights {
    fit_on_scores(sets, l2, out_of_fold(sets, folds, l2), fitted_on)
}

/// [`fit_calibrated`] with the out-of-fold scores already taken.
fn fit_on_scores(
    sets: &[TuningSet],
    l2: f64,
    scores: OutOfFold,
    fitted_on: Vec<String>,
) -> Weights {
    let examples = all_examples(sets);
    let uncalibrated = model::fit_uncalibrated(&examples, l2, fitted_on);
    model::fit_at_held_out_cut(
        &examples,
        uncalibrated,
        FALSE_FLAG_TARGET,
        scores.answers,
        scores.free,
    )
}

/// The rule fitted by [`fit_calibrated`] without each fold (its calibration cross-validating
/// the other folds among themselves).
fn fold_fits(sets: &[TuningSet], folds: usize, l2: f64) -> Vec<Weights> {
    (0..folds)
        .map(|fold| fit_calibrated(&without_fold(sets, fold), folds - 1, l2, Vec::new()))
        .collect()
}

/// The flagged share each number of right answers below a cut allows, on `scored` (log-odds,
/// right), up to [`CURVE_FALSE_FLAGS`].
fn calibration_curve(mut scored: Vec<(f64, bool)>) -> Calibration {
    scored.sort_by(|a, b| a.0.total_cmp(&b.0));
    let right = scored.iter().filter(|s| s.1).count();
    let wrong = scored.len() - right;
    let share = |n: usize, of: usize| n as f64 / of.max(1) as f64;
    let mut curve: Vec<CurvePoint> = Vec::new();
    let (mut right_below, mut wrong_below) = (0, 0);
    for (i, (z, supported)) in scored.iter().enumerate() {
        if *supported {
            right_below += 1;
        } else {
            wrong_below += 1;
        }
        // A cut falls only between different scores.
        if scored.get(i + 1).is_some_and(|next| next.0 == *z) {
            continue;
        }
        if share(right_below, right) > CURVE_FALSE_FLAGS + 1e-12 {
            break;
        }
        let point = CurvePoint {
            right_below,
            false_flags: share(right_below, right),
            flagged: share(wrong_below, wrong),
        };
        match curve.last_mut() {
            Some(last) if last.right_below == right_below => *last = point,
            _ => curve.push(point),
        }
    }
    let chosen = curve
        .iter()
        .rev()
        .find(|p| p.false_flags <= FALSE_FLAG_TARGET + 1e-12)
        .copied();
    Calibration {
        target: FALSE_FLAG_TARGET,
        answers: [right, wrong],
        curve,
        chosen,
    }
}

/// Cross-validate the fit on `sets` (measured with `folds` folds): choose the penalty, then
/// report each file in-sample (the rule fitted on everything) and cross-validated (each fold
/// scored by the whole fit redone on the other folds, its calibration cross-validating them
/// among themselves); files of `scored_only` are reported the same way without being fitted
/// on. `None` below 3 folds, where a fold's fit would have one fold to calibrate on.
pub fn cross_validate(
    sets: &[TuningSet],
    scored_only: &[TuningSet],
    folds: usize,
) -> Option<CvReport> {
    if folds < 3 {
        return None;
    }
    let (chosen_l2, penalties) = choose_l2(sets, folds);
    // The curve printed is the one the committed fit cuts: score the answers once for both.
    let scores = out_of_fold(sets, folds, chosen_l2);
    let calibration = calibration_curve(scores.answers.clone());
    let full = fit_on_scores(sets, chosen_l2, scores, Vec::new());
    let per_fold = fold_fits(sets, folds, chosen_l2);
    let files = sets
        .iter()
        .map(|set| (set, true))
        .chain(scored_only.iter().map(|set| (set, false)))
        .map(|(set, fitted)| FileReport {
            file: set.file.clone(),
            fitted,
            in_sample: file_figures(&set.items, |_| &full),
            cross_validated: file_figures(&set.items, |item| &per_fold[item.fold % folds]),
        })
        .collect();
    Some(CvReport {
        folds,
        penalties,
        chosen_l2,
        calibration,
        files,
    })
}

/// What one outer fold of the nested cross-validation chose on the other folds alone.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct FoldChoice {
    pub fold: usize,
    pub l2: f64,
    /// The point of the other folds' out-of-fold curve the fold's calibration took.
    pub calibration: Option<CurvePoint>,
    /// The fold's answers to questions, scored by the rule fitted with these choices.
    pub figures: Figures,
}

/// One file's figures under nested cross-validation.
#[derive(Debug, Clone, Serialize)]
pub struct NestedFile {
    pub file: String,
    /// Whether the fit read this file.
    pub fitted: bool,
    pub figures: FileFigures,
}

/// Nested cross-validation: figures in which nothing about an item — not even the choice of
/// penalty — was informed by the item itself.
#[derive(Debug, Clone, Serialize)]
pub struct NestedReport {
    pub folds: usize,
    pub choices: Vec<FoldChoice>,
    pub files: Vec<NestedFile>,
}

/// The items of `sets` outside fold `outer`, their folds renumbered to `0..folds - 1`.
fn without_fold(sets: &[TuningSet], outer: usize) -> Vec<TuningSet> {
    sets.iter()
        .map(|set| TuningSet {
            file: set.file.clone(),
            items: set
                .items
                .iter()
                .filter(|i| i.fold != outer)
                .map(|i| Item {
                    fold: if i.fold > outer { i.fold - 1 } else { i.fold },
                    ..i.clone()
                })
                .collect(),
        })
        .collect()
}

/// For each fold, choose the penalty by cross-validation on the other folds ([`choose_l2`]
/// with one fold fewer), fit there ([`fit_calibrated`], its calibration on those folds'
/// out-of-fold scores) and score the fold. The plain cross-validated figures of
/// [`cross_validate`] score every fold with the penalty chosen on all folds, which makes them
/// slightly optimistic; these do not.
/// `folds` must be the number the sets were loaded with; `None` below 3, where the inner
/// cross-validation would have fewer than two folds.
pub fn nested_cross_validate(
    sets: &[TuningSet],
    scored_only: &[TuningSet],
    folds: usize,
) -> Option<NestedReport> {
    if folds < 3 {
        return None;
    }
    let mut choices = Vec::with_capacity(folds);
    let fits: Vec<Weights> = (0..folds)
        .map(|outer| {
            let inner = without_fold(sets, outer);
            let (l2, _) = choose_l2(&inner, folds - 1);
            let scores = out_of_fold(&inner, folds - 1, l2);
            let calibration = calibration_curve(scores.answers.clone()).chosen;
            let fit = fit_on_scores(&inner, l2, scores, Vec::new());
            let held: Vec<Item> = fold_items(sets, outer, true)
                .filter(|i| i.question)
                .cloned()
                .collect();
            choices.push(FoldChoice {
                fold: outer,
                l2,
                calibration,
                figures: file_figures(&held, |_| &fit).all,
            });
            fit
        })
        .collect();
    let files = sets
        .iter()
        .map(|set| (set, true))
        .chain(scored_only.iter().map(|set| (set, false)))
        .map(|(set, fitted)| NestedFile {
            file: set.file.clone(),
            fitted,
            figures: file_figures(&set.items, |item| &fits[item.fold % fits.len()]),
        })
        .collect();
    Some(NestedReport {
        folds,
        choices,
        files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::witness::eval::EvalItem;

    fn item(knowledge: &str, question: &str, right: &str, wrong: &str) -> EvalItem {
        EvalItem {
            knowledge: knowledge.into(),
            question: question.into(),
            right_answer: right.into(),
            hallucinated_answer: wrong.into(),
        }
    }

    #[test]
    fn folds_follow_the_knowledge_hash() {
        let items = [
            item(
                "The Oberoi Group is based in Delhi.",
                "Where is it based?",
                "Delhi",
                "Mumbai",
            ),
            item(
                "The Oberoi Group is based in Delhi.",
                "",
                "It is in Delhi.",
                "It is in Pune.",
            ),
            item(
                "Halden Observatory opened in 1921.",
                "When?",
                "1921",
                "1931",
            ),
        ];
        let set = TuningSet::new("x.jsonl", &items, 5);
        assert_eq!(set.len(), 3);
        assert_eq!(
            set.items[0].fold, set.items[1].fold,
            "one section, one fold"
        );
        for (i, it) in set.items.iter().enumerate() {
            assert_eq!(it.fold, (fnv1a64(&items[i].knowledge) % 5) as usize);
        }
    }

    #[test]
    fn flagging_needs_a_verifiable_claim_below_the_qa_threshold() {
        assert!(!is_flagged(&[], 0.0));
        assert!(is_flagged(&[Features::default()], 0.5));
        assert!(!is_flagged(&[Features::default()], 0.95));
    }

    /// The in-sample figures of the fit are what `svc witness eval --profile qa` reports with
    /// the committed weights, and the cross-validated ones are real out-of-fold figures.
    #[test]
    fn in_sample_figures_match_the_eval_command_on_the_committed_data() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let sets = load(root, DEFAULT_FOLDS).expect("tuning data");
        let scored_only = load_scored_only(root, DEFAULT_FOLDS).expect("scored-only data");
        let report = cross_validate(&sets, &scored_only, DEFAULT_FOLDS).expect("5 folds");
        assert_eq!(report.chosen_l2, model::weights().l2);
        assert_eq!(report.calibration.target, model::weights().max_false_flags);
        let chosen = report.calibration.chosen.expect("a cut within the target");
        assert!(chosen.false_flags <= FALSE_FLAG_TARGET);
        assert_eq!(
            report.files.len(),
            devset::TUNE_FILES.len() + devset::SCORED_ONLY_FILES.len()
        );
        for file in &report.files {
            let items = eval::read_items(&root.join(&file.file)).expect("items");
            let eval = eval::evaluate(&items, Profile::Qa, super::super::Mode::Strict);
            let fig = file.in_sample.all;
            assert_eq!(fig.items, eval.items);
            assert!(
                (fig.flagged - eval.flag_rate_hallucinated).abs() < 1e-9,
                "{}",
                file.file
            );
            assert!(
                (fig.false_flags - eval.false_positive_rate).abs() < 1e-9,
                "{}",
                file.file
            );
            let cv = file.cross_validated.all;
            assert_eq!(cv.items, fig.items);
            assert!(cv.auroc > 0.5 && cv.auroc <= 1.0, "{cv:?}");
            // Out of fold, a rule does not rank its data better than the rule fitted on it
            // (a file the fit never read has no such advantage to lose).
            if file.fitted {
                assert!(cv.auroc <= fig.auroc + 0.01, "{cv:?} {fig:?}");
            }
        }
    }

    /// The curve counts, per number of right answers below a cut, the most wrong answers a cut
    /// there flags; the calibration takes the most right answers the target allows.
    #[test]
    fn the_out_of_fold_curve_takes_the_most_false_flags_within_the_target() {
        // 100 right answers at 1..=100, 100 wrong ones: 90 far below, one just under each of
        // the five lowest right answers, five at the top.
        let mut scored: Vec<(f64, bool)> = (1..=100).map(|i| (f64::from(i), true)).collect();
        scored.extend((0..90).map(|i| (-100.0 + f64::from(i), false)));
        scored.extend((1..=5).map(|i| (f64::from(i) - 0.5, false)));
        scored.extend((0..5).map(|i| (200.0 + f64::from(i), false)));
        let cal = calibration_curve(scored);
        assert_eq!(cal.answers, [100, 100]);
        assert_eq!(cal.target, FALSE_FLAG_TARGET);
        let points: Vec<(usize, f64)> = cal
            .curve
            .iter()
            .map(|p| (p.right_below, p.flagged))
            .collect();
        assert_eq!(
            points,
            [(0, 0.91), (1, 0.92), (2, 0.93), (3, 0.94), (4, 0.95)],
            "up to 4 % false flags"
        );
        let chosen = cal.chosen.expect("within the target");
        assert_eq!((chosen.right_below, chosen.flagged), (2, 0.93));
        // Tied scores cannot be cut apart: the right answer tied with a wrong one counts with it.
        let tied = calibration_curve(vec![(0.0, false), (1.0, true), (1.0, false), (2.0, true)]);
        let points: Vec<(usize, f64)> = tied
            .curve
            .iter()
            .map(|p| (p.right_below, p.flagged))
            .collect();
        assert_eq!(points, [(0, 0.5)]);
    }

    /// With fewer than 3 folds a fold's fit would have one fold to place its threshold on.
    #[test]
    fn cross_validation_needs_three_folds() {
        assert!(cross_validate(&[], &[], 2).is_none());
        assert!(nested_cross_validate(&[], &[], 2).is_none());
    }

    #[test]
    fn the_strongest_penalty_within_one_standard_error_is_chosen() {
        let score = |l2: f64, log_loss: f64, std_error: f64| PenaltyScore {
            l2,
            log_loss,
            std_error,
        };
        let flat = [
            score(0.01, 0.2029, 0.015),
            score(0.03, 0.2046, 0.015),
            score(0.1, 0.2125, 0.016),
            score(0.3, 0.2261, 0.016),
        ];
        assert_eq!(one_standard_error(&flat), 0.1);
        // A clear minimum stays chosen, even with stronger penalties after it.
        let sharp = [
            score(0.01, 0.30, 0.01),
            score(0.1, 0.20, 0.01),
            score(1.0, 0.25, 0.01),
        ];
        assert_eq!(one_standard_error(&sharp), 0.1);
    }

    #[test]
    fn the_tie_between_penalties_goes_to_the_stronger() {
        // No examples at all: every penalty's loss is 0, so the strongest wins.
        let (l2, scores) = choose_l2(&[], 3);
        assert_eq!(scores.len(), L2_GRID.len());
        assert_eq!(l2, L2_GRID[L2_GRID.len() - 1]);
    }
}
