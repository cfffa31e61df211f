//! The named features a claim is scored by. Each is measured on the evidence span the claim is
//! aligned with (see [`super::verify`]); [`super::model`] turns them into one support score
//! with weights fitted on the development data.
//!
//! A feature is a number, not a verdict: a number that disagrees with the evidence, a flipped
//! negation or another name in the claim's slot are strong signals, and the fitted weights say
//! how strong. Each detector that fires also leaves a human-readable [`Reason`].

use serde::{Deserialize, Serialize};

use super::claims::ClaimKind;
use super::question::{QuestionInfo, year_of};
use super::text::{self, Token, TokenKind};
use super::verify::{Alignment, Evidence, Reason, ReasonKind, Term, normalise_quote, partners};

/// Counts (words found nowhere, words found elsewhere) are capped here: beyond it one more
/// missing word says little more.
const COUNT_CAP: f64 = 3.0;

/// The struct, its field names in order ([`NAMES`]) and the conversions to and from an array
/// come from one list, so the weights file, the fit and the struct cannot disagree.
macro_rules! features {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Everything the scoring rule looks at for one claim. Shares are in [0, 1]; flags are 0
        /// or 1; counts are capped at [`COUNT_CAP`].
        #[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
        pub struct Features {
            $($(#[$doc])* pub $name: f64,)*
        }

        /// The features in the order of [`Features::values`]; the weights file uses these names.
        pub const NAMES: [&str; [$(stringify!($name)),*].len()] = [$(stringify!($name)),*];

        impl Features {
            /// The values in the order of [`NAMES`].
            pub fn values(&self) -> [f64; NAMES.len()] {
                [$(self.$name),*]
            }

            /// Set every value from an array in the order of [`NAMES`].
            pub fn set_values(&mut self, values: [f64; NAMES.len()]) {
                [$(self.$name),*] = values;
            }
        }
    };
}

features! {
    /// Weighted share of the claim's new words (those not restating the question) found in the
    /// aligned span; names and numbers weigh double, a word found only in a joined partner
    /// sentence counts partly.
    focus_coverage,
    /// The same share for the claim's words that restate the question (1 without a question).
    rest_coverage,
    /// Share of the question's evidence words the aligned span holds, relative to the best span
    /// (1 without a question): the answer to a question sits where the question does.
    question_alignment,
    /// Share of the claim's names and numbers found in the aligned span (1 when it has none).
    name_coverage,
    /// Claim names found nowhere in the evidence (count).
    missing_names,
    /// Other claim words found nowhere in the evidence (count; paraphrase makes these common).
    missing_words,
    /// Claim numbers found nowhere that no evidence number of their kind contradicts (count).
    missing_numbers,
    /// Claim words the evidence holds, but only outside the aligned span (count): words taken
    /// from another fact of the same passage.
    unaligned_words,
    /// A number or date of the claim disagrees with one of its kind in the aligned span, or a
    /// superlative's rank does ("largest" against "second-largest"; see `features::rank`).
    number_mismatch,
    /// Negation on one side only, over a span that otherwise matches.
    negation_flip,
    /// The claim uses the opposite of a span word (older/younger, sensitive/insensitive).
    antonym_flip,
    /// A claim name is found nowhere while the aligned span names someone new in its place.
    name_substitution,
    /// "X wrote it" against "written by Z": the span names another agent of the same verb.
    agent_mismatch,
    /// The claim puts on opposite sides of a relation word two arguments the anchor sentence
    /// holds the other way round ("A overrides B" against "B overrides A"; see `features::exchange`).
    exchanged_arguments,
    /// A short answer found elsewhere while the sentence answering the question names another
    /// filler of its kind.
    slot_mismatch,
    /// The question asks for a number or date and the claim gives none.
    answer_type_mismatch,
    /// The answer picks the side of an "A or B?" question the evidence contradicts.
    comparison_mismatch,
    /// A yes/no answer (or a leading "Yes,"/"No,") the evidence answers the other way.
    polarity_mismatch,
    /// A yes/no answer the evidence answers the same way.
    polarity_agrees,
    /// A bare yes/no answer word overlap cannot decide.
    polarity_unconfirmed,
    /// The claim appears verbatim (six words or more) in the evidence.
    verbatim,
    /// The aligned span needed a partner sentence.
    joined_span,
    /// Among pairs of claim words both in the anchor sentence, the share in the sentence's
    /// order (1 with fewer than two such words, and for short answers): a swapped relation
    /// reverses pairs.
    order_agreement,
    /// The claim stands alone (no question was given): free-standing sentences paraphrase more
    /// than short answers do, so the rule needs its own baseline for them.
    standalone,
    /// Weighted share of the claim's new words (those not restating the question; all its
    /// words when every one does) found in the sentences that on their own hold most of the
    /// question (1 without a question): an answer taken from another fact of the passage sits
    /// away from where the question points, even when a joined span covers both.
    answer_at_question,
    /// Where an occurrence of the claim's new words sits nearest the question: the question's
    /// weight within a clause-sized window of it, as a share of the most any window of the
    /// evidence holds (1 without a question, 0 when no new word is in the evidence). A window,
    /// not a sentence: a long sentence holds the question's words in one clause and another
    /// fact's filler in the next.
    window_alignment,
    /// How much more of the question another name of the answer's sentences reaches than the
    /// answer does: the share of the question's weight that the sentences about that name
    /// (opening with it, and those right after that call it by its head word, "the
    /// university") add to the sentences holding the answer. The name is a run of name
    /// tokens sharing no word with the answer or the question; 0 without a question and for
    /// wh-questions with "do"-support, whose description is of their subject. In multi-hop
    /// evidence the question describes the filler of its slot through a second sentence; a
    /// name described there while the answer is not — the other member of a pair, the fighter
    /// beside his gym — is the filler, and the answer only its neighbour.
    better_linked_name,
    /// A name of the claim whose words the evidence holds, but never together in the claim's
    /// order ("the Day of Remembrance" against "Remembrance Day"; see `features::name_order`).
    scattered_name,
}

impl Features {
    /// Whether a detector of a contradiction fired: a claim scored below the threshold is then
    /// `contradicted` rather than merely `unsupported`.
    pub fn contradicts(&self) -> bool {
        [
            self.number_mismatch,
            self.negation_flip,
            self.antonym_flip,
            self.name_substitution,
            self.agent_mismatch,
            self.exchanged_arguments,
            self.slot_mismatch,
            self.comparison_mismatch,
            self.polarity_mismatch,
        ]
        .iter()
        .any(|&v| v > 0.0)
    }
}

/// What measuring a claim found: its features, the reasons the detectors left, the evidence
/// sentences it rests on and the claim words found nowhere.
#[derive(Debug, Clone)]
pub(super) struct Findings {
    pub(super) features: Features,
    pub(super) reasons: Vec<Reason>,
    pub(super) sentences: Vec<usize>,
    pub(super) missing: Vec<String>,
}

fn reason(kind: ReasonKind, detail: impl Into<String>) -> Reason {
    Reason {
        kind,
        detail: detail.into(),
    }
}

/// A claim to measure, with its tokens and content terms.
pub(super) struct ClaimView<'a> {
    pub(super) text: &'a str,
    pub(super) kind: ClaimKind,
    pub(super) tokens: &'a [Token],
    pub(super) terms: &'a [Term],
}

/// Measure a claim (not a bare yes/no answer; see [`polarity`]) against its aligned span.
pub(super) fn measure(
    evidence: &Evidence,
    claim: &ClaimView<'_>,
    question: Option<&QuestionInfo>,
    alignment: Option<Alignment>,
) -> Findings {
    let short = claim.kind == ClaimKind::ShortAnswer;
    let mut f = Features {
        rest_coverage: 1.0,
        question_alignment: 1.0,
        name_coverage: 1.0,
        order_agreement: 1.0,
        standalone: f64::from(u8::from(question.is_none())),
        answer_at_question: question.map_or(1.0, |q| answer_at_question(claim.terms, q)),
        window_alignment: question.map_or(1.0, |q| window_alignment(evidence, claim.terms, q)),
        better_linked_name: question.map_or(0.0, |q| better_linked_name(evidence, claim.terms, q)),
        ..Features::default()
    };
    let mut reasons = Vec::new();
    let missing: Vec<&Term> = claim.terms.iter().filter(|t| !t.found()).collect();
    let missing_words: Vec<String> = missing.iter().map(|t| t.surface.clone()).collect();
    if !missing.is_empty() {
        reasons.push(reason(
            ReasonKind::MissingTerms,
            format!("not in the evidence: {}", missing_words.join(", ")),
        ));
    }
    let count =
        |kind: TokenKind| (missing.iter().filter(|t| t.kind == kind).count() as f64).min(COUNT_CAP);
    f.missing_names = count(TokenKind::Entity);
    f.missing_words = count(TokenKind::Word);

    let quote = normalise_quote(claim.text);
    if !short && quote.split(' ').count() >= 6 && evidence.normalised_text.contains(&quote) {
        f.verbatim = 1.0;
        reasons.push(reason(
            ReasonKind::ExactQuote,
            "the claim appears verbatim in the evidence",
        ));
    }
    let Some(alignment) = alignment else {
        f.focus_coverage = 0.0;
        f.rest_coverage = 0.0;
        f.name_coverage = 0.0;
        reasons.push(reason(
            ReasonKind::Coverage,
            "no evidence sentence shares a content word with the claim",
        ));
        return Findings {
            features: f,
            reasons,
            sentences: Vec::new(),
            missing: missing_words,
        };
    };
    let span: Vec<usize> = std::iter::once(alignment.anchor)
        .chain(alignment.partner)
        .collect();
    f.focus_coverage = alignment.focus;
    f.rest_coverage = alignment.rest;
    f.question_alignment = alignment.question;
    f.joined_span = f64::from(u8::from(alignment.partner.is_some()));
    let in_span = |t: &Term| span.iter().any(|&s| t.in_sentence(s));
    let facts: Vec<&Term> = claim
        .terms
        .iter()
        .filter(|t| t.kind != TokenKind::Word)
        .collect();
    if !facts.is_empty() {
        f.name_coverage = facts.iter().filter(|t| in_span(t)).count() as f64 / facts.len() as f64;
    }
    f.unaligned_words = (claim
        .terms
        .iter()
        .filter(|t| t.found() && !in_span(t))
        .count() as f64)
        .min(COUNT_CAP);
    // A short answer is a name or a phrase, whose word order says nothing about a relation.
    if !short {
        f.order_agreement = order_agreement(evidence, claim.terms, alignment.anchor);
        // Any sentence of the span: the relation may sit in the partner of a joined span.
        let exchanged = span
            .iter()
            .find_map(|&s| exchange::exchanged_arguments(claim.tokens, &evidence.tokens[s]));
        if let Some(found) = exchanged {
            f.exchanged_arguments = 1.0;
            let surface = |i: usize| &claim.text[claim.tokens[i].start..claim.tokens[i].end];
            reasons.push(reason(
                ReasonKind::RelationReversed,
                format!(
                    "the claim puts \"{}\" before \"{}\" and \"{}\" after it; the evidence has them the other way round",
                    surface(found.rightward),
                    surface(found.pivot),
                    surface(found.leftward)
                ),
            ));
        }
    }
    reasons.push(reason(
        ReasonKind::Coverage,
        format!(
            "aligned span covers {:.0}% of the claim's new words and {:.0}% of the rest",
            alignment.focus * 100.0,
            alignment.rest * 100.0
        ),
    ));
    if question.is_some() {
        reasons.push(reason(
            ReasonKind::QuestionAlignment,
            format!(
                "aligned span holds {:.0}% of the question's evidence words",
                alignment.question * 100.0
            ),
        ));
    }
    let mut sentences = span.clone();
    numbers(
        evidence,
        claim,
        alignment.anchor,
        &span,
        &mut f,
        &mut reasons,
    );
    polarity_and_antonyms(evidence, claim, &span, alignment, &mut f, &mut reasons);
    names(
        evidence,
        claim,
        question,
        alignment,
        &span,
        &mut f,
        &mut reasons,
        &mut sentences,
    );
    let holding = |token: &Token| {
        claim
            .terms
            .iter()
            .find(|t| t.norm == token.norm)
            .map_or(&[][..], |t| t.sentences.as_slice())
    };
    if let Some(name) =
        name_order::scattered_name(claim.text, claim.tokens, &evidence.tokens, holding)
    {
        f.scattered_name = 1.0;
        reasons.push(reason(
            ReasonKind::NameScattered,
            format!("the evidence holds the words of \"{name}\", but never as that name"),
        ));
    }
    question_checks(claim, question, &mut f, &mut reasons);
    Findings {
        features: f,
        reasons,
        sentences,
        missing: missing_words,
    }
}

/// Numbers and dates: a claim number the anchor sentence lacks, while the anchor gives another
/// of its kind (a year for a year, a month for a month), disagrees with it; found only in
/// another sentence it belongs to another fact.
fn numbers(
    evidence: &Evidence,
    claim: &ClaimView<'_>,
    anchor: usize,
    span: &[usize],
    f: &mut Features,
    reasons: &mut Vec<Reason>,
) {
    let span_tokens: Vec<&[Token]> = span
        .iter()
        .map(|&s| evidence.tokens[s].as_slice())
        .collect();
    if let Some(found) = rank::rank_mismatch(claim.text, claim.tokens, &evidence.text, &span_tokens)
    {
        f.number_mismatch = 1.0;
        reasons.push(reason(
            ReasonKind::NumberMismatch,
            format!(
                "claim says {}, the evidence says {}",
                found.claimed,
                found.evidence.join(", ")
            ),
        ));
    }
    let anchor_tokens = &evidence.tokens[anchor];
    for term in claim.terms.iter().filter(|t| t.kind == TokenKind::Number) {
        if term.in_sentence(anchor) {
            continue;
        }
        let is_year = year_of(&term.norm).is_some();
        let is_month = text::is_month(&term.norm);
        let same_kind = |t: &Token| {
            t.kind == TokenKind::Number
                && if is_month {
                    text::is_month(&t.norm)
                } else {
                    !text::is_month(&t.norm) && (year_of(&t.norm).is_some() == is_year)
                }
        };
        let mut others: Vec<&str> = anchor_tokens
            .iter()
            .filter(|t| same_kind(t))
            .map(|t| &evidence.text[t.start..t.end])
            .collect();
        if others.is_empty() && !term.found() {
            others = span
                .iter()
                .flat_map(|&s| evidence.tokens[s].iter())
                .filter(|t| same_kind(t))
                .map(|t| &evidence.text[t.start..t.end])
                .collect();
        }
        others.dedup();
        if !others.is_empty() {
            f.number_mismatch = 1.0;
            let kind = if is_year || is_month {
                ReasonKind::DateMismatch
            } else {
                ReasonKind::NumberMismatch
            };
            reasons.push(reason(
                kind,
                format!(
                    "claim says {}, the evidence says {}",
                    term.surface,
                    others.join(", ")
                ),
            ));
        } else if !term.found() {
            f.missing_numbers = (f.missing_numbers + 1.0).min(COUNT_CAP);
        }
    }
}

/// Names: another agent of the same verb, or a claim name found nowhere while the span names
/// someone new; for short answers, another filler in the sentence that answers the question.
#[allow(clippy::too_many_arguments)]
fn names(
    evidence: &Evidence,
    claim: &ClaimView<'_>,
    question: Option<&QuestionInfo>,
    alignment: Alignment,
    span: &[usize],
    f: &mut Features,
    reasons: &mut Vec<Reason>,
    sentences: &mut Vec<usize>,
) {
    let short = claim.kind == ClaimKind::ShortAnswer;
    if !short
        && let Some((verb, agent, claimed)) =
            agent_mismatch(evidence, claim.text, claim.tokens, span)
    {
        f.agent_mismatch = 1.0;
        reasons.push(reason(
            ReasonKind::EntitySubstitution,
            format!(
                "claim names {claimed} as the one who {verb}, the evidence says {verb} by {agent}"
            ),
        ));
    }
    let missing_names: Vec<&Term> = claim
        .terms
        .iter()
        .filter(|t| !t.found() && t.kind == TokenKind::Entity)
        .collect();
    if !missing_names.is_empty() {
        let substitute = substitution_candidates(evidence, claim.terms, question, alignment.anchor);
        if !substitute.is_empty() && alignment.question.max(alignment.rest) >= 0.5 {
            f.name_substitution = 1.0;
            reasons.push(reason(
                ReasonKind::EntitySubstitution,
                format!(
                    "claim names {}, the aligned evidence names {}",
                    missing_names
                        .iter()
                        .map(|t| t.surface.as_str())
                        .collect::<Vec<_>>()
                        .join(" "),
                    substitute.join(" ")
                ),
            ));
        }
    }
    // Only a sentence holding every question word counts as answering it, so multi-hop answers
    // reached through a bridge are not judged so.
    let focus: Vec<&Term> = claim
        .terms
        .iter()
        .filter(|t| question.is_none_or(|q| !q.contains(&t.norm)))
        .collect();
    if short
        && let Some(q) = question
        && let Some((s, t)) = q.answering_span
        && !focus
            .iter()
            .all(|x| x.in_sentence(s) || t.is_some_and(|t| x.in_sentence(t)))
    {
        let fillers = same_kind_fillers(evidence, claim.terms, q, s);
        if !fillers.is_empty() {
            f.slot_mismatch = 1.0;
            reasons.push(reason(
                ReasonKind::EntitySubstitution,
                format!(
                    "the sentence that answers the question names {} instead",
                    fillers.join(" ")
                ),
            ));
            if !sentences.contains(&s) {
                sentences.push(s);
            }
        }
    }
}

/// What the question asks for: a number, one side of a choice, yes or no.
fn question_checks(
    claim: &ClaimView<'_>,
    question: Option<&QuestionInfo>,
    f: &mut Features,
    reasons: &mut Vec<Reason>,
) {
    let Some(q) = question else {
        return;
    };
    if q.wants_number && !claim.tokens.iter().any(|t| t.kind == TokenKind::Number) {
        f.answer_type_mismatch = 1.0;
        reasons.push(reason(
            ReasonKind::AnswerTypeMismatch,
            "the question asks for a number or date and the claim gives none",
        ));
    }
    if let Some(comparison) = &q.comparison
        && let Some(winner) = comparison.winner
    {
        let picks: Vec<usize> = comparison
            .options
            .iter()
            .enumerate()
            .filter(|(_, words)| {
                let hit = words
                    .iter()
                    .filter(|w| claim.terms.iter().any(|t| text::fuzzy_eq(&t.norm, w)))
                    .count();
                hit * 2 > words.len()
            })
            .map(|(i, _)| i)
            .collect();
        // Naming both options ("A came before B") is judged by the other features.
        if let [chosen] = picks.as_slice()
            && *chosen != winner
        {
            f.comparison_mismatch = 1.0;
            reasons.push(reason(
                ReasonKind::ComparisonMismatch,
                format!("the answer picks the other option: {}", comparison.basis),
            ));
        }
    }
    if let Some(truth) = &q.polar_truth
        && let Some(said) = leading_polarity(claim.text)
        && said != truth.0
    {
        f.polarity_mismatch = 1.0;
        reasons.push(reason(ReasonKind::PolarityMismatch, truth.1.clone()));
    }
}

/// A bare yes/no answer: the evidence's answer to the question when it decides one, else how
/// much of the question's statement one span holds ("no" cannot be confirmed by overlap).
pub(super) fn polarity(evidence: &Evidence, question: &QuestionInfo, yes: bool) -> Findings {
    let mut best: Option<(f64, usize, Option<usize>)> = None;
    for s in 0..evidence.sentences.len() {
        for t in std::iter::once(None).chain(partners(evidence, s).into_iter().map(Some)) {
            let q = question.alignment(s, t);
            if best.is_none_or(|(b, _, _)| q > b + 1e-12) {
                best = Some((q, s, t));
            }
        }
    }
    let (coverage, s, t) = best.unwrap_or((0.0, 0, None));
    let sentences: Vec<usize> = if evidence.sentences.is_empty() {
        Vec::new()
    } else {
        std::iter::once(s).chain(t).collect()
    };
    let mut f = Features {
        focus_coverage: coverage,
        rest_coverage: coverage,
        question_alignment: coverage,
        name_coverage: 1.0,
        order_agreement: 1.0,
        answer_at_question: 1.0,
        window_alignment: 1.0,
        joined_span: f64::from(u8::from(t.is_some())),
        ..Features::default()
    };
    let reasons = if let Some((truth, why)) = &question.polar_truth {
        if *truth == yes {
            f.polarity_agrees = 1.0;
            vec![reason(ReasonKind::PolarityAgrees, why.clone())]
        } else {
            f.polarity_mismatch = 1.0;
            vec![reason(ReasonKind::PolarityMismatch, why.clone())]
        }
    } else if yes && question.polar {
        vec![reason(
            ReasonKind::PolarityUnchecked,
            format!(
                "one span holds {:.0}% of the question's statement",
                coverage * 100.0
            ),
        )]
    } else {
        f.polarity_unconfirmed = 1.0;
        vec![reason(
            ReasonKind::PolarityUnchecked,
            if yes {
                "the question states nothing a yes could confirm"
            } else {
                "a negative answer is not confirmed by word overlap"
            },
        )]
    };
    Findings {
        features: f,
        reasons,
        sentences,
        missing: Vec::new(),
    }
}

/// The answer's own terms: those the question does not hold, or all when it holds every one.
fn answer_terms<'a>(terms: &'a [Term], question: &QuestionInfo) -> Vec<&'a Term> {
    let new: Vec<&Term> = terms
        .iter()
        .filter(|t| !question.contains(&t.norm))
        .collect();
    if new.is_empty() {
        terms.iter().collect()
    } else {
        new
    }
}

/// See [`Features::window_alignment`]; 1 when no window holds a question word.
fn window_alignment(evidence: &Evidence, terms: &[Term], question: &QuestionInfo) -> f64 {
    if question.window_best <= 0.0 {
        return 1.0;
    }
    let focus = answer_terms(terms, question);
    let mut best: f64 = 0.0;
    for term in focus {
        for &s in &term.sentences {
            for (i, token) in evidence.tokens[s].iter().enumerate() {
                if text::fuzzy_eq(&token.norm, &term.norm) {
                    best = best.max(question.window_weight(s, i));
                }
            }
        }
    }
    (best / question.window_best).min(1.0)
}

/// See [`Features::better_linked_name`].
fn better_linked_name(evidence: &Evidence, terms: &[Term], question: &QuestionInfo) -> f64 {
    // "Who did the player ranked first defeat?": what the question describes is its subject,
    // and a name linked to that description is the one the answer relates to, not a rival.
    if question.subject_after_auxiliary {
        return 0.0;
    }
    let focus = answer_terms(terms, question);
    let mut own: Vec<usize> = focus
        .iter()
        .flat_map(|t| t.sentences.iter().copied())
        .collect();
    own.sort_unstable();
    own.dedup();
    if own.is_empty() {
        return 0.0;
    }
    let base = question.share_in(&own);
    let mut best: f64 = 0.0;
    for &s in &own {
        let tokens = &evidence.tokens[s];
        let mut i = 0;
        while i < tokens.len() {
            if tokens[i].kind != TokenKind::Entity {
                i += 1;
                continue;
            }
            let start = i;
            i += 1;
            // A name is a run of name tokens separated by spaces alone: a comma or a bracket
            // ends it, so each member of a list ("Paul Dano, Zooey Deschanel, John Goodman")
            // is a name of its own.
            while i < tokens.len()
                && tokens[i].kind == TokenKind::Entity
                && evidence.text[tokens[i - 1].end..tokens[i].start]
                    .chars()
                    .all(char::is_whitespace)
            {
                i += 1;
            }
            let run: Vec<&Token> = tokens[start..i].iter().filter(|t| t.is_content()).collect();
            // A name sharing a word with the answer is the answer; one sharing a word with the
            // question is what the question already names (its bridge), not a rival filler.
            if run.is_empty()
                || run.iter().any(|x| {
                    question.contains(&x.norm)
                        || terms.iter().any(|t| text::fuzzy_eq(&t.norm, &x.norm))
                })
            {
                continue;
            }
            let mut linked = own.clone();
            for x in &run {
                // Only sentences about the name: a sentence merely mentioning it (a bridge to
                // the question's subject) describes something else.
                for t in evidence
                    .sentences_with(&x.norm)
                    .into_iter()
                    .filter(|&t| opens_with_name(evidence, t, &x.norm))
                {
                    linked.push(t);
                    // The sentences after it that call the name by its head word ("The
                    // University of Toronto is …. Originally controlled by the Church, the
                    // university …") are about it too.
                    let mut next = t + 1;
                    while next < evidence.tokens.len() && refers_back(evidence, next, &x.norm) {
                        linked.push(next);
                        next += 1;
                    }
                }
            }
            linked.sort_unstable();
            linked.dedup();
            if linked.len() > own.len() {
                best = best.max(question.share_in(&linked) - base);
            }
        }
    }
    best
}

/// Whether sentence `s` calls something by the definite description "the <norm>" in lower
/// case ("the university"): a reference back to a name holding that word.
fn refers_back(evidence: &Evidence, s: usize, norm: &str) -> bool {
    evidence.tokens[s].windows(2).any(|pair| {
        pair[0].norm == "the"
            && text::fuzzy_eq(&pair[1].norm, norm)
            && evidence.text[pair[1].start..pair[1].end]
                .chars()
                .next()
                .is_some_and(char::is_lowercase)
    })
}

/// Whether a sentence opens with a name (capitalised words, after at most one stop word, as
/// "The") holding `norm`: the sentence is about that name. Capitals, not token kinds: the
/// tokenizer does not take a lone capitalised opener for a name.
fn opens_with_name(evidence: &Evidence, s: usize, norm: &str) -> bool {
    let tokens = &evidence.tokens[s];
    let skip = usize::from(tokens.first().is_some_and(|t| t.stop));
    tokens[skip.min(tokens.len())..]
        .iter()
        .take_while(|t| {
            evidence.text[t.start..t.end]
                .chars()
                .next()
                .is_some_and(char::is_uppercase)
        })
        .any(|t| text::fuzzy_eq(&t.norm, norm))
}

/// See [`Features::answer_at_question`]; 1 when the question points nowhere in the evidence.
fn answer_at_question(terms: &[Term], question: &QuestionInfo) -> f64 {
    if question.focus_sentences.is_empty() {
        return 1.0;
    }
    let focus = answer_terms(terms, question);
    let total: f64 = focus.iter().map(|t| t.weight).sum();
    if total <= 0.0 {
        return 1.0;
    }
    let got: f64 = focus
        .iter()
        .filter(|t| question.focus_sentences.iter().any(|&s| t.in_sentence(s)))
        .map(|t| t.weight)
        .sum();
    got / total
}

/// Share of pairs of claim words found in `anchor` that keep the claim's order there. A pair
/// is out of order only when every occurrence of the later claim word precedes every
/// occurrence of the earlier one, so a word repeated in the sentence does not count as a swap.
fn order_agreement(evidence: &Evidence, terms: &[Term], anchor: usize) -> f64 {
    let sentence = &evidence.tokens[anchor];
    let spans: Vec<(usize, usize)> = terms
        .iter()
        .filter(|t| t.in_sentence(anchor))
        .take(MAX_ORDERED_TERMS)
        .filter_map(|t| {
            let hits: Vec<usize> = sentence
                .iter()
                .enumerate()
                .filter(|(_, e)| e.is_content() && text::fuzzy_eq(&e.norm, &t.norm))
                .map(|(i, _)| i)
                .collect();
            Some((*hits.first()?, *hits.last()?))
        })
        .collect();
    let mut pairs = 0usize;
    let mut agree = 0usize;
    for (i, a) in spans.iter().enumerate() {
        for b in &spans[i + 1..] {
            if a == b {
                continue;
            }
            pairs += 1;
            if a.0 < b.1 {
                agree += 1;
            }
        }
    }
    if pairs == 0 {
        1.0
    } else {
        agree as f64 / pairs as f64
    }
}

/// Claim words compared for order: a sentence-sized claim has far fewer; the cap bounds the
/// quadratic pair count on pathological input.
const MAX_ORDERED_TERMS: usize = 32;

/// "Yes, …" or "No, …" at the start of a sentence answer.
fn leading_polarity(claim: &str) -> Option<bool> {
    let first = claim
        .split(|c: char| !c.is_alphanumeric())
        .next()?
        .to_ascii_lowercase();
    match first.as_str() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    }
}

/// Fillers of the answer's kind (numbers for a number, names for a name) in sentence `s`
/// that are neither in the answer nor in the question.
fn same_kind_fillers(
    evidence: &Evidence,
    claim_terms: &[Term],
    question: &QuestionInfo,
    s: usize,
) -> Vec<String> {
    let wants_number = claim_terms.iter().any(|t| t.kind == TokenKind::Number);
    let wants_name = claim_terms.iter().any(|t| t.kind == TokenKind::Entity);
    let mut out: Vec<String> = Vec::new();
    for token in &evidence.tokens[s] {
        let fits = match token.kind {
            TokenKind::Number => wants_number && !text::is_month(&token.norm),
            TokenKind::Entity => wants_name && !wants_number,
            TokenKind::Word => false,
        };
        if !fits
            || !token.is_content()
            || claim_terms
                .iter()
                .any(|t| text::fuzzy_eq(&t.norm, &token.norm))
            || question.contains(&token.norm)
        {
            continue;
        }
        let surface = evidence.text[token.start..token.end].to_string();
        if !out.contains(&surface) {
            out.push(surface);
        }
    }
    out
}

/// The run of name tokens starting at `from` (forward) or ending at `from` (backward).
fn name_run_at(tokens: &[Token], from: usize, forward: bool) -> Vec<&Token> {
    let mut run = Vec::new();
    let mut i = from as isize;
    while i >= 0 && (i as usize) < tokens.len() && tokens[i as usize].kind == TokenKind::Entity {
        run.push(&tokens[i as usize]);
        i += if forward { 1 } else { -1 };
    }
    run.retain(|t| t.is_content());
    run
}

/// A claim naming who did something ("The Kingsmen wrote the song", "… was written by the
/// Kingsmen") while the span says the same verb was done "by" someone else: returns the verb,
/// the evidence's agent and the claimed one.
fn agent_mismatch(
    evidence: &Evidence,
    claim: &str,
    tokens: &[Token],
    span: &[usize],
) -> Option<(String, String, String)> {
    for (i, verb) in tokens.iter().enumerate() {
        if verb.kind != TokenKind::Word || !verb.is_content() {
            continue;
        }
        let passive = tokens.get(i + 1).is_some_and(|t| t.norm == "by");
        let claimed = if passive {
            name_run_at(tokens, i + 2, true)
        } else if i > 0 && claim[tokens[i - 1].end..verb.start].trim().is_empty() {
            name_run_at(tokens, i - 1, false)
        } else {
            Vec::new()
        };
        if claimed.is_empty() {
            continue;
        }
        for &s in span {
            let sentence = &evidence.tokens[s];
            for (k, e) in sentence.iter().enumerate() {
                if !text::same_word(&e.norm, &verb.norm)
                    || sentence.get(k + 1).is_none_or(|b| b.norm != "by")
                {
                    continue;
                }
                let agent = name_run_at(sentence, k + 2, true);
                if agent.is_empty()
                    || agent
                        .iter()
                        .any(|a| claimed.iter().any(|c| text::fuzzy_eq(&a.norm, &c.norm)))
                {
                    continue;
                }
                let surface = |run: &[&Token], source: &str| {
                    let (a, b) = (
                        run[0].start.min(run[run.len() - 1].start),
                        run[0].end.max(run[run.len() - 1].end),
                    );
                    source[a..b].to_string()
                };
                return Some((
                    evidence.text[e.start..e.end].to_string(),
                    surface(&agent, &evidence.text),
                    surface(&claimed, claim),
                ));
            }
        }
    }
    None
}

/// Names in the anchor sentence that appear in neither the claim nor the question.
fn substitution_candidates(
    evidence: &Evidence,
    claim_terms: &[Term],
    question: Option<&QuestionInfo>,
    anchor: usize,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for token in &evidence.tokens[anchor] {
        if token.kind != TokenKind::Entity || !token.is_content() {
            continue;
        }
        if claim_terms
            .iter()
            .any(|t| text::fuzzy_eq(&t.norm, &token.norm))
            || question.is_some_and(|q| q.contains(&token.norm))
        {
            continue;
        }
        let surface = evidence.text[token.start..token.end].to_string();
        if !out.contains(&surface) {
            out.push(surface);
        }
    }
    out
}

mod exchange;
mod name_order;
mod polarity;
mod rank;

use polarity::polarity_and_antonyms;

#[cfg(test)]
mod tests;
