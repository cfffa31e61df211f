//! The witness's development data and the fit of its scoring rule.
//!
//! Two sets, both committed under `data/witness/`: the HaluEval QA development split
//! (`halueval-dev/dev.jsonl`, all of it a tuning part) and claims written against real
//! documentation (`repo-docs/`), split by a hash of each item's id into a tuning part and a
//! held-out part before any tuning. The weights in `weights.json` are fitted on the tuning parts
//! only; the held-out part is only ever evaluated.

use std::path::Path;

use super::cv;
use super::eval::EvalError;
use super::features::Features;
use super::model::Weights;

/// Which part of the repository-documentation set an item belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Tune,
    HeldOut,
}

/// FNV-1a, 64 bits: a fixed, documented hash so the split can be recomputed anywhere.
pub(super) fn fnv1a64(text: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in text.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// The part of an item by its id: tune when the hash is 0–3 modulo 10 (about 40 %).
pub fn part_of(id: &str) -> Part {
    if fnv1a64(id) % 10 < 4 {
        Part::Tune
    } else {
        Part::HeldOut
    }
}

/// The tuning files, relative to the repository root.
pub const TUNE_FILES: [&str; 2] = [
    "data/witness/halueval-dev/dev.jsonl",
    "data/witness/repo-docs/tune.jsonl",
];

/// Development files the fit never reads but `svc witness fit` scores, in-sample and with the
/// rule fitted without each item's fold: the length-matched answers written against the
/// development split (`halueval-dev/swaps.jsonl`, built by `swaps.py` there; its items share
/// their knowledge, and so their folds, with `dev.jsonl`), and the documentation design set
/// ([`DESIGN_FILE`]), whose in-sample figures are the committed rule's.
pub const SCORED_ONLY_FILES: [&str; 2] = ["data/witness/halueval-dev/swaps.jsonl", DESIGN_FILE];

/// Claims against documentation written by someone who had not seen the checker (session 13),
/// for designing rules: its misses may be read, but it is never fitted on, so documentation
/// does not pull the contradiction detectors' weights towards its paraphrases.
pub const DESIGN_FILE: &str = "data/witness/repo-docs/design.jsonl";

/// A second blind part, written after session 13's changes by someone who had not seen the
/// checker: evaluation only, run once on the release's rule.
pub const BLIND2_FILE: &str = "data/witness/repo-docs/blind2.jsonl";

/// Short-answer questions about documentation sections no claim part uses, each with a right
/// and a wrong answer, written by someone who had not seen the checker (session 14):
/// evaluation only, for the question-answering machinery away from HaluEval's Wikipedia.
pub const DOCS_QA_FILE: &str = "data/witness/docs-qa/qa.jsonl";

/// The held-out file, relative to the repository root (never used by the fit).
pub const HELD_OUT_FILE: &str = "data/witness/repo-docs/heldout.jsonl";

/// Claims against documentation written by someone who had not seen the checker, after the
/// scorer's design (session 12): evaluation only, never fitted, tuned on or split.
pub const BLIND_FILE: &str = "data/witness/repo-docs/blind.jsonl";

/// The claim an answer is judged by when it has several: the one with the least support
/// before any weights (a fired contradiction detector first, then the lowest coverage), as the
/// answer's score is its weakest claim's.
pub(super) fn weakest(claims: &[Features]) -> Option<Features> {
    claims.iter().copied().min_by(|a, b| {
        let key = |f: &Features| {
            (
                u8::from(!f.contradicts()),
                f.focus_coverage * f.rest_coverage,
            )
        };
        let (ka, kb) = (key(a), key(b));
        ka.0.cmp(&kb.0).then(ka.1.total_cmp(&kb.1))
    })
}

/// Fit the scoring rule on the tuning files under `root` (the repository root): the L2 penalty
/// is chosen by cross-validation ([`cv::choose_l2`]), then the rule is fitted on all tuning
/// examples with it and its qa threshold placed on the same folds' out-of-fold scores
/// ([`cv::fit_calibrated`]).
pub fn fit_weights(root: &Path) -> Result<Weights, EvalError> {
    let sets = cv::load(root, cv::DEFAULT_FOLDS)?;
    Ok(fit_sets(&sets))
}

/// As [`fit_weights`], on tuning sets already measured.
pub fn fit_sets(sets: &[cv::TuningSet]) -> Weights {
    let (l2, _) = cv::choose_l2(sets, cv::DEFAULT_FOLDS);
    let examples = cv::all_examples(sets);
    let fitted_on = sets
        .iter()
        .map(|s| format!("{}: {} items", s.file, s.len()))
        .chain(std::iter::once(format!(
            "{} examples; l2 chosen and the qa threshold placed on out-of-fold scores by {}-fold cross-validation",
            examples.len(),
            cv::DEFAULT_FOLDS
        )))
        .collect();
    cv::fit_calibrated(sets, cv::DEFAULT_FOLDS, l2, fitted_on)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> &'static Path {
        Path::new(env!("CARGO_MANIFEST_DIR"))
    }

    #[derive(serde::Deserialize)]
    struct Provenance {
        id: String,
        repo: String,
        path: String,
        commit: String,
        section: String,
        alteration: String,
        question: String,
        right_answer: String,
        hallucinated_answer: String,
    }

    /// The items of a committed JSON Lines file.
    fn read_jsonl<T: serde::de::DeserializeOwned>(file: &str) -> Vec<T> {
        std::fs::read_to_string(root().join(file))
            .expect("committed")
            .lines()
            .map(|l| serde_json::from_str(l).expect("item"))
            .collect()
    }

    fn provenance(file: &str) -> Vec<Provenance> {
        read_jsonl(file)
    }

    /// The claim set's parts: tune and held out (split by item), then the parts written apart.
    const CLAIM_PARTS: [&str; 5] = [
        "data/witness/repo-docs/tune.jsonl",
        HELD_OUT_FILE,
        BLIND_FILE,
        DESIGN_FILE,
        BLIND2_FILE,
    ];

    #[test]
    fn fnv1a_matches_the_reference_values() {
        assert_eq!(fnv1a64(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64("a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn repo_doc_items_sit_in_the_part_their_id_hashes_to_and_blind_ones_apart() {
        let [tune, held, blind, design, blind2] = CLAIM_PARTS.map(provenance);
        assert!(tune.iter().all(|i| part_of(&i.id) == Part::Tune));
        assert!(held.iter().all(|i| part_of(&i.id) == Part::HeldOut));
        assert!(tune.len() + held.len() >= 120);
        assert!(blind.len() >= 100);
        assert!(design.len() >= 100);
        assert!(blind2.len() >= 100);
        let parts = [&tune, &held, &blind, &design, &blind2];
        let mut ids: Vec<&str> = parts
            .iter()
            .flat_map(|p| p.iter())
            .map(|i| i.id.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(
            ids.len(),
            parts.iter().map(|p| p.len()).sum::<usize>(),
            "ids are unique"
        );
        // The parts written apart share no documentation section with any other part (tune
        // and held out share theirs, split by item): a rule read off a section must not be
        // judged on the same section's claims.
        let section = |i: &Provenance| (i.repo.clone(), i.path.clone(), i.section.clone());
        for (n, part) in parts.iter().enumerate().skip(2) {
            let own: std::collections::HashSet<_> = part.iter().map(section).collect();
            for (m, other) in parts.iter().enumerate() {
                if m != n {
                    assert!(
                        other.iter().all(|i| !own.contains(&section(i))),
                        "part {n} and {m}"
                    );
                }
            }
        }
        for item in parts.iter().flat_map(|p| p.iter()) {
            assert!(["requests", "flask", "fd"].contains(&item.repo.as_str()));
            assert!(
                !item.path.is_empty() && item.commit.len() == 40,
                "{}",
                item.id
            );
            assert!(item.question.is_empty());
            let words = |s: &str| s.split_whitespace().count();
            assert!(
                words(&item.right_answer).abs_diff(words(&item.hallucinated_answer)) <= 1,
                "{} is not length-matched",
                item.id
            );
            assert_ne!(item.right_answer, item.hallucinated_answer);
        }
        for kind in ["number", "name", "negation", "relation"] {
            for part in parts {
                assert!(part.iter().any(|i| i.alteration == kind), "{kind}");
            }
        }
    }

    /// The documentation questions: each has a question and a short answer of a known kind,
    /// ids are unique, and no section is one a claim part uses (so no rule read off a claim
    /// section is judged on the same section here).
    #[test]
    fn documentation_questions_are_short_answers_about_sections_of_their_own() {
        #[derive(serde::Deserialize)]
        struct Question {
            id: String,
            repo: String,
            path: String,
            commit: String,
            section: String,
            kind: String,
            knowledge: String,
            question: String,
            right_answer: String,
            hallucinated_answer: String,
        }
        let questions: Vec<Question> = read_jsonl(DOCS_QA_FILE);
        assert!(questions.len() >= 100, "{}", questions.len());
        let mut ids: Vec<&str> = questions.iter().map(|q| q.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), questions.len(), "ids are unique");
        let claim_sections: std::collections::HashSet<(String, String, String)> = CLAIM_PARTS
            .into_iter()
            .flat_map(provenance)
            .map(|i| (i.repo, i.path, i.section))
            .collect();
        for q in &questions {
            let section = (q.repo.clone(), q.path.clone(), q.section.clone());
            assert!(
                !claim_sections.contains(&section),
                "{} uses a claim section",
                q.id
            );
            assert!(["requests", "flask", "fd"].contains(&q.repo.as_str()));
            assert_eq!(q.commit.len(), 40, "{}", q.id);
            assert!(
                ["name", "number", "yesno", "phrase"].contains(&q.kind.as_str()),
                "{}",
                q.id
            );
            assert!(
                !q.knowledge.is_empty() && !q.question.trim().is_empty(),
                "{}",
                q.id
            );
            assert!(q.right_answer.split_whitespace().count() <= 8, "{}", q.id);
            assert_ne!(
                q.right_answer.to_lowercase(),
                q.hallucinated_answer.to_lowercase(),
                "{}",
                q.id
            );
        }
        for kind in ["name", "number", "yesno", "phrase"] {
            assert!(questions.iter().any(|q| q.kind == kind), "{kind}");
        }
    }

    /// Each swap keeps its development item's knowledge, question and right answer, and is
    /// within one word of it; the swaps share folds with the items they come from.
    #[test]
    fn swaps_are_length_matched_alterations_of_development_items() {
        #[derive(serde::Deserialize)]
        struct Swap {
            dev_line: usize,
            alteration: String,
            knowledge: String,
            question: String,
            right_answer: String,
            hallucinated_answer: String,
        }
        let dev = crate::witness::eval::read_items(&root().join(TUNE_FILES[0])).expect("dev");
        let swaps: Vec<Swap> = std::fs::read_to_string(root().join(SCORED_ONLY_FILES[0]))
            .expect("committed")
            .lines()
            .map(|l| serde_json::from_str(l).expect("swap"))
            .collect();
        assert!(swaps.len() >= 50, "{}", swaps.len());
        for s in &swaps {
            let item = &dev[s.dev_line];
            assert_eq!(s.knowledge, item.knowledge, "line {}", s.dev_line);
            assert_eq!(s.question, item.question);
            assert_eq!(s.right_answer, item.right_answer);
            let words = |t: &str| t.split_whitespace().count();
            assert!(words(&s.right_answer).abs_diff(words(&s.hallucinated_answer)) <= 1);
            assert_ne!(s.right_answer, s.hallucinated_answer);
            assert!(["name", "number"].contains(&s.alteration.as_str()));
        }
    }

    /// Every penalty of the grid fits every fold of the tuning data to its optimum: a fit that
    /// runs off to saturated probabilities scores held-out answers far worse than a coin
    /// (before the line search, the two weakest penalties' held-out log-loss was 8-14).
    #[test]
    fn every_penalty_of_the_grid_fits_the_tuning_data_without_diverging() {
        let sets = cv::load(root(), cv::DEFAULT_FOLDS).expect("tuning data reads");
        let (_, penalties) = cv::choose_l2(&sets, cv::DEFAULT_FOLDS);
        for p in penalties {
            assert!(p.log_loss < std::f64::consts::LN_2, "{p:?}");
        }
    }

    /// The committed weights are exactly what the fit gives on the committed tuning data, so
    /// neither can change without the other. `SVC_WRITE_WEIGHTS=1` rewrites the file instead.
    #[test]
    fn weights_file_matches_the_fit_on_the_tuning_parts() {
        let fitted = fit_weights(root()).expect("tuning data reads");
        let path = root().join("src/witness/weights.json");
        if std::env::var_os("SVC_WRITE_WEIGHTS").is_some() {
            std::fs::write(&path, fitted.to_json()).expect("write weights");
        }
        let committed = std::fs::read_to_string(&path).expect("weights file");
        assert_eq!(
            committed,
            fitted.to_json(),
            "src/witness/weights.json is stale: run SVC_WRITE_WEIGHTS=1 cargo test weights_file_matches"
        );
    }
}
