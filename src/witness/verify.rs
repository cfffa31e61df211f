//! Deterministic verification: for each claim, find the evidence span that best supports it and
//! decide `supported`, `contradicted` or `unsupported` with a support score in [0, 1].
//!
//! Coverage of a claim's words somewhere in the evidence is not enough: a hallucinated answer is
//! often built from words the evidence does contain (another name from the same passage, a
//! swapped relation, a wrong year). So a claim is scored on one aligned span — an evidence
//! sentence, optionally joined with one partner sentence it is linked to (its neighbour, or one
//! sharing a name) — and, when a question is given, that span must also answer the question: the
//! answer's new words have to sit where the question's words are. On the best span the verifier
//! then looks for contradictions: numbers and dates that disagree, a negation or antonym flip,
//! a different name in the same slot, the wrong side of a comparison.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use super::claims::{self, Claim, ClaimKind};
use super::profile::Profile;
use super::text::{self, Span, Token, TokenKind};

/// The verdict on one claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Label {
    Supported,
    Contradicted,
    Unsupported,
    /// Not a checkable assertion (a question, a hedge, a greeting).
    NotVerifiable,
}

impl Label {
    pub fn as_str(self) -> &'static str {
        match self {
            Label::Supported => "supported",
            Label::Contradicted => "contradicted",
            Label::Unsupported => "unsupported",
            Label::NotVerifiable => "not_verifiable",
        }
    }
}

/// Why a verdict was reached; each step of the check that mattered leaves one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasonKind {
    /// The claim appears verbatim in the evidence.
    ExactQuote,
    /// Share of the claim's words found in the aligned span.
    Coverage,
    /// Words of the claim found nowhere in the evidence.
    MissingTerms,
    /// How well the aligned span answers the question.
    QuestionAlignment,
    /// A number in the claim differs from the one in the aligned evidence.
    NumberMismatch,
    /// A date (month, day or year) differs from the aligned evidence.
    DateMismatch,
    /// The claim negates what the evidence states, or the reverse.
    NegationFlip,
    /// The claim uses the opposite of the evidence's word (older/younger, before/after).
    AntonymFlip,
    /// The evidence names someone or something else in the claim's slot.
    EntitySubstitution,
    /// The answer picks the side of a comparison the evidence contradicts.
    ComparisonMismatch,
    /// The question asks for a number or date and the claim gives none.
    AnswerTypeMismatch,
    /// A yes/no answer whose polarity lexical checks cannot confirm.
    PolarityUnchecked,
    /// A yes/no answer the evidence answers the other way.
    PolarityMismatch,
    /// A yes/no answer the evidence answers the same way.
    PolarityAgrees,
    /// The claim carries nothing to check.
    NotVerifiable,
    /// The optional NLI judge's verdict on a claim the deterministic pass left uncertain.
    NliJudgement,
}

/// One step of the reasoning behind a verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reason {
    pub kind: ReasonKind,
    pub detail: String,
}

/// A piece of evidence a verdict rests on, by byte offsets in the evidence text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceSpan {
    pub start: usize,
    pub end: usize,
    pub text: String,
}

/// The verdict on one claim, with its score and evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimVerdict {
    pub claim: Claim,
    pub label: Label,
    /// Support in [0, 1]: 1 is fully supported by an aligned evidence span.
    pub score: f64,
    pub reasons: Vec<Reason>,
    pub evidence: Vec<EvidenceSpan>,
    /// Claim words found nowhere in the evidence.
    pub missing: Vec<String>,
}

/// The verdicts on every claim of an answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verification {
    pub profile: Profile,
    pub claims: Vec<ClaimVerdict>,
}

impl Verification {
    /// Claims that assert something checkable.
    pub fn verifiable(&self) -> impl Iterator<Item = &ClaimVerdict> {
        self.claims
            .iter()
            .filter(|c| c.label != Label::NotVerifiable)
    }

    /// Fraction of verifiable claims not supported; 0.0 when there are none.
    pub fn unsupported_claim_rate(&self) -> f64 {
        let total = self.verifiable().count();
        if total == 0 {
            return 0.0;
        }
        let open = self
            .verifiable()
            .filter(|c| c.label != Label::Supported)
            .count();
        open as f64 / total as f64
    }

    /// Support of the answer as a whole: its weakest verifiable claim (1.0 when none).
    pub fn score(&self) -> f64 {
        self.verifiable().map(|c| c.score).fold(1.0, f64::min)
    }

    /// Whether any claim is contradicted.
    pub fn has_contradiction(&self) -> bool {
        self.claims.iter().any(|c| c.label == Label::Contradicted)
    }

    /// Whether any verifiable claim is not supported.
    pub fn has_unsupported(&self) -> bool {
        self.verifiable().any(|c| c.label != Label::Supported)
    }
}

/// Verify `answer` against `evidence`, reading short answers against `question` when given.
pub fn check(
    answer: &str,
    evidence: &str,
    question: Option<&str>,
    profile: Profile,
) -> Verification {
    let index = Evidence::new(evidence);
    check_with(&index, answer, question, profile)
}

/// As [`check`], with an evidence index built once and reused across answers.
pub fn check_with(
    evidence: &Evidence,
    answer: &str,
    question: Option<&str>,
    profile: Profile,
) -> Verification {
    let question = question.map(str::trim).filter(|q| !q.is_empty());
    let question = question.map(|q| QuestionInfo::new(q, evidence));
    let claims = claims::extract(answer, question.is_some())
        .into_iter()
        .map(|claim| verify_claim(evidence, claim, question.as_ref(), profile))
        .collect();
    Verification { profile, claims }
}

/// An indexed evidence text: sentences, their tokens, and where each word occurs.
pub struct Evidence {
    text: String,
    sentences: Vec<Span>,
    tokens: Vec<Vec<Token>>,
    /// Normalised word to the sorted sentences holding it.
    postings: HashMap<String, Vec<usize>>,
    /// First five characters to the words starting with them, for inflection matching.
    prefixes: HashMap<String, Vec<String>>,
    negated: Vec<bool>,
    /// Whether sentence `i` starts a new document: text pasted from several pages glues a
    /// sentence end to the next page's start without a space, or separates them by a blank line.
    breaks: Vec<bool>,
    /// Inverse document frequency over sentences, for weighting question words.
    sentence_count: usize,
    normalised_text: String,
}

impl Evidence {
    pub fn new(text: &str) -> Self {
        let sentences = text::sentences(text);
        let mut tokens = Vec::with_capacity(sentences.len());
        let mut postings: HashMap<String, Vec<usize>> = HashMap::new();
        let mut negated = Vec::with_capacity(sentences.len());
        for (i, span) in sentences.iter().enumerate() {
            let mut sentence_tokens = text::tokenize(&text[span.start..span.end]);
            for token in &mut sentence_tokens {
                token.start += span.start;
                token.end += span.start;
                let list = postings.entry(token.norm.clone()).or_default();
                if list.last() != Some(&i) {
                    list.push(i);
                }
            }
            negated.push(
                sentence_tokens
                    .iter()
                    .any(|t| text::NEGATIONS.contains(&t.norm.as_str())),
            );
            tokens.push(sentence_tokens);
        }
        let mut prefixes: HashMap<String, Vec<String>> = HashMap::new();
        for word in postings.keys() {
            if let Some(prefix) = prefix5(word) {
                prefixes.entry(prefix).or_default().push(word.clone());
            }
        }
        for words in prefixes.values_mut() {
            words.sort();
        }
        let breaks = sentences
            .iter()
            .enumerate()
            .map(|(i, span)| {
                i > 0 && {
                    let gap = &text[sentences[i - 1].end..span.start];
                    gap.is_empty() || gap.contains("\n\n")
                }
            })
            .collect();
        Self {
            breaks,
            normalised_text: normalise_quote(text),
            text: text.to_string(),
            sentence_count: sentences.len(),
            sentences,
            tokens,
            postings,
            prefixes,
            negated,
        }
    }

    /// Number of sentences the evidence was split into.
    pub fn sentence_count(&self) -> usize {
        self.sentence_count
    }

    /// The evidence text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Sentences holding `norm` or an inflection of it, sorted.
    fn sentences_with(&self, norm: &str) -> Vec<usize> {
        let mut found: Vec<usize> = self.postings.get(norm).cloned().unwrap_or_default();
        if let Some(prefix) = prefix5(norm)
            && let Some(words) = self.prefixes.get(&prefix)
        {
            for word in words {
                if word != norm
                    && text::fuzzy_eq(word, norm)
                    && let Some(list) = self.postings.get(word)
                {
                    found.extend_from_slice(list);
                }
            }
            found.sort_unstable();
            found.dedup();
        }
        found
    }

    fn idf(&self, sentences_holding: usize) -> f64 {
        (1.0 + self.sentence_count as f64 / sentences_holding.max(1) as f64).ln()
    }

    fn snippet(&self, sentence: usize) -> EvidenceSpan {
        let span = self.sentences[sentence];
        EvidenceSpan {
            start: span.start,
            end: span.end,
            text: self.text[span.start..span.end].to_string(),
        }
    }
}

fn prefix5(word: &str) -> Option<String> {
    if word.chars().count() < 5 || word.as_bytes()[0].is_ascii_digit() {
        return None;
    }
    Some(word.chars().take(5).collect())
}

/// Lower-case alphanumerics separated by single spaces, for verbatim-quote checks.
fn normalise_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut space = true;
    for c in text.chars() {
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
            space = false;
        } else if !space {
            out.push(' ');
            space = true;
        }
    }
    out.trim_end().to_string()
}

/// A content word of a claim or question, with the evidence sentences holding it.
#[derive(Debug, Clone)]
struct Term {
    norm: String,
    surface: String,
    kind: TokenKind,
    weight: f64,
    sentences: Vec<usize>,
}

impl Term {
    fn found(&self) -> bool {
        !self.sentences.is_empty()
    }
    fn in_sentence(&self, s: usize) -> bool {
        self.sentences.binary_search(&s).is_ok()
    }
}

fn terms(evidence: &Evidence, source: &str, tokens: &[Token]) -> Vec<Term> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for token in tokens.iter().filter(|t| t.is_content()) {
        if !seen.insert(token.norm.clone()) {
            continue;
        }
        out.push(Term {
            norm: token.norm.clone(),
            surface: source[token.start..token.end].to_string(),
            kind: token.kind,
            weight: token.weight(),
            sentences: evidence.sentences_with(&token.norm),
        });
    }
    out
}

/// The question, analysed once per answer.
struct QuestionInfo {
    terms: Vec<Term>,
    /// Question terms present in the evidence, with their inverse document frequency.
    weights: Vec<f64>,
    total_weight: f64,
    comparison: Option<Comparison>,
    polar: bool,
    /// The best raw alignment of any span, which [`QuestionInfo::alignment`] is relative to.
    best: f64,
    /// For a yes/no question about two subjects, the answer the evidence gives and why.
    polar_truth: Option<(bool, String)>,
    /// A sentence (with the one its opening pronoun refers to) holding every question word the
    /// evidence has: the place where the question is answered, when one place answers it.
    answering_span: Option<(usize, Option<usize>)>,
    /// Whether the question asks for a quantity or a date ("how many", "in what year").
    wants_number: bool,
}

impl QuestionInfo {
    fn new(question: &str, evidence: &Evidence) -> Self {
        let tokens = text::tokenize(question);
        let terms = terms(evidence, question, &tokens);
        let weights: Vec<f64> = terms
            .iter()
            .map(|t| {
                if t.found() {
                    evidence.idf(t.sentences.len()) * t.weight
                } else {
                    0.0
                }
            })
            .collect();
        let total_weight: f64 = weights.iter().sum();
        let first = question
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_lowercase();
        let polar = matches!(
            first.as_str(),
            "is" | "are"
                | "was"
                | "were"
                | "do"
                | "does"
                | "did"
                | "can"
                | "could"
                | "has"
                | "have"
                | "had"
                | "will"
                | "would"
                | "should"
        );
        let polar_truth = if polar {
            polar_truth(question, &tokens, evidence)
        } else {
            None
        };
        let lower = question.to_lowercase();
        let wants_number = NUMBER_QUESTIONS.iter().any(|cue| lower.contains(cue));
        let mut info = Self {
            answering_span: None,
            wants_number,
            polar_truth,
            comparison: Comparison::parse(question, evidence),
            terms,
            weights,
            total_weight,
            polar,
            best: 0.0,
        };
        if total_weight > 0.0 {
            for s in 0..evidence.sentences.len() {
                let t = (s > 0 && !evidence.breaks[s] && opens_with_anaphor(evidence, s))
                    .then(|| s - 1);
                // Every question word must be in the evidence: a question word the evidence
                // lacks ("wife" against "married") is a hop this sentence does not make.
                if info.answering_span.is_none()
                    && info.terms.iter().all(Term::found)
                    && info.raw_alignment(s, t) >= 0.999
                {
                    info.answering_span = Some((s, t));
                }
                for t in std::iter::once(None).chain(partners(evidence, s).into_iter().map(Some)) {
                    info.best = info.best.max(info.raw_alignment(s, t));
                }
            }
        }
        info
    }

    fn contains(&self, norm: &str) -> bool {
        self.terms.iter().any(|t| text::fuzzy_eq(&t.norm, norm))
    }

    /// How well sentences `s` and `t` address the question, relative to the best span of the
    /// evidence (1.0 for the best): the answer to a question sits where the question does.
    fn alignment(&self, s: usize, t: Option<usize>) -> f64 {
        if self.best <= 0.0 {
            return 1.0;
        }
        (self.raw_alignment(s, t) / self.best).min(1.0)
    }

    /// Share of the question's evidence-bearing weight present in sentences `s` and `t`.
    fn raw_alignment(&self, s: usize, t: Option<usize>) -> f64 {
        if self.total_weight <= 0.0 {
            return 1.0;
        }
        let mut got = 0.0;
        for (term, weight) in self.terms.iter().zip(&self.weights) {
            if term.in_sentence(s) || t.is_some_and(|t| term.in_sentence(t)) {
                got += weight;
            }
        }
        got / self.total_weight
    }
}

/// A choice question ("Which came first, A or B?", "Which university is in Chestnut Hill, A or
/// B?"): the evidence picks a side, by the dates it gives each option when the question asks
/// for the earlier or later one, else by which option's sentence carries the question's words.
struct Comparison {
    /// Normalised words of each option.
    options: Vec<Vec<String>>,
    /// The option the evidence favours, if it clearly favours one.
    winner: Option<usize>,
    /// How the winner was decided, for the certificate.
    basis: String,
}

const EARLIER_CUES: &[&str] = &[
    "first", "earlier", "older", "oldest", "before", "earliest", "1st",
];
const LATER_CUES: &[&str] = &[
    "later", "younger", "youngest", "newer", "newest", "recent", "last", "latest", "after",
];

/// Margin by which one option's sentence must carry more of the question's words to win.
const PREDICATE_MARGIN: f64 = 0.25;
/// Share of the question's words the winning option's sentence must carry.
const PREDICATE_HELD: f64 = 0.5;
const QUANTITY_CUES: &[&str] = &[
    "more",
    "less",
    "most",
    "least",
    "fewer",
    "further",
    "farther",
    "larger",
    "bigger",
    "higher",
    "longer",
    "greater",
    "smaller",
    "taller",
    "shorter",
    "closer",
    "wider",
    "heavier",
    "largest",
    "biggest",
    "highest",
    "longest",
    "greatest",
    "smallest",
    "tallest",
    "shortest",
    "population",
    "number",
    "many",
    "much",
];

impl Comparison {
    fn parse(question: &str, evidence: &Evidence) -> Option<Self> {
        let lower = question.to_lowercase();
        let or_at = lower.find(" or ")?;
        let tokens = text::tokenize(question);
        let left = name_run(question, &tokens, or_at, evidence, Direction::Backward);
        let right = name_run(question, &tokens, or_at + 4, evidence, Direction::Forward);
        if left.is_empty() || right.is_empty() {
            return None;
        }
        let options = vec![left, right];
        let sentences: Vec<Option<usize>> = options
            .iter()
            .map(|words| option_sentence(evidence, words))
            .collect();
        let earlier = tokens
            .iter()
            .any(|t| EARLIER_CUES.contains(&t.norm.as_str()));
        let later = tokens.iter().any(|t| LATER_CUES.contains(&t.norm.as_str()));
        let mut winner = None;
        let mut basis = String::new();
        if earlier != later {
            let years: Vec<Option<i64>> = sentences
                .iter()
                .map(|s| s.and_then(|s| evidence.tokens[s].iter().find_map(|t| year_of(&t.norm))))
                .collect();
            if let (Some(a), Some(b)) = (years[0], years[1])
                && a != b
            {
                winner = Some(usize::from((b < a) == earlier));
                basis = format!(
                    "the evidence dates the options {a} and {b}; the question asks for the {}",
                    if earlier { "earlier" } else { "later" }
                );
            }
        } else if let Some((noun, more)) = quantity_cue(&tokens) {
            // "Which genus has more species, A or B?": compare the counts the options'
            // evidence gives for that noun ("48–56 species", "four species").
            let counts: Vec<Option<f64>> = sentences
                .iter()
                .map(|s| s.and_then(|s| count_before(evidence, s, &noun)))
                .collect();
            if let (Some(a), Some(b)) = (counts[0], counts[1])
                && a != b
            {
                winner = Some(usize::from((b > a) == more));
                basis = format!(
                    "the evidence counts {a} and {b} {noun}; the question asks for {}",
                    if more { "more" } else { "fewer" }
                );
            }
        } else {
            // The question's other words (its predicate) should sit with the right option;
            // "which is further west" is a quantity the words cannot decide.
            let quantity = tokens
                .iter()
                .any(|t| QUANTITY_CUES.contains(&t.norm.as_str()));
            let predicate: Vec<&Token> = tokens
                .iter()
                .filter(|t| t.is_content())
                .filter(|t| !options.iter().flatten().any(|w| text::fuzzy_eq(w, &t.norm)))
                .collect();
            let total: f64 = predicate.iter().map(|t| t.weight()).sum();
            if total > 0.0 {
                let cover: Vec<f64> = sentences
                    .iter()
                    .map(|s| {
                        s.map_or(0.0, |s| {
                            let near = neighbourhood(evidence, s);
                            predicate
                                .iter()
                                .filter(|t| {
                                    near.iter().any(|&n| {
                                        evidence.tokens[n]
                                            .iter()
                                            .any(|e| text::fuzzy_eq(&e.norm, &t.norm))
                                    })
                                })
                                .map(|t| t.weight())
                                .sum::<f64>()
                                / total
                                + 0.0
                        })
                    })
                    .collect();
                if !quantity
                    && (cover[0] - cover[1]).abs() >= PREDICATE_MARGIN
                    && cover[0].max(cover[1]) >= PREDICATE_HELD
                {
                    winner = Some(usize::from(cover[1] > cover[0]));
                    basis = format!(
                        "the options' evidence holds {:.0}% and {:.0}% of the question's other words",
                        cover[0] * 100.0,
                        cover[1] * 100.0
                    );
                }
            }
        }
        Some(Self {
            options,
            winner,
            basis,
        })
    }
}

const ORIGIN_SLOTS: &[&str] = &[
    "nationality",
    "country",
    "citizenship",
    "origin",
    "nation",
    "ethnicity",
];

/// Whether a name looks like a nationality adjective ("American", "Soviet", "Danish").
fn looks_like_demonym(norm: &str) -> bool {
    ["an", "ish", "ese", "ic", "et", "ch", "i"]
        .iter()
        .any(|suffix| norm.ends_with(suffix))
}

/// "more N" / "fewer N" in a question: the counted noun and whether more wins.
fn quantity_cue(tokens: &[Token]) -> Option<(String, bool)> {
    tokens.windows(2).find_map(|pair| {
        let more = match pair[0].norm.as_str() {
            "more" | "most" | "greater" => true,
            "fewer" | "less" | "least" => false,
            _ => return None,
        };
        pair[1].is_content().then(|| (pair[1].norm.clone(), more))
    })
}

/// The number right before `noun` (at most two words apart) in sentence `s` or its neighbours:
/// "a genus of 48–56 species" gives 56, "four species" gives 4.
fn count_before(evidence: &Evidence, s: usize, noun: &str) -> Option<f64> {
    for n in neighbourhood(evidence, s) {
        let tokens = &evidence.tokens[n];
        for (i, token) in tokens.iter().enumerate() {
            if !text::fuzzy_eq(&token.norm, noun) {
                continue;
            }
            let found = tokens[i.saturating_sub(3)..i]
                .iter()
                .rev()
                .find(|t| t.kind == TokenKind::Number && !text::is_month(&t.norm))
                .and_then(|t| t.norm.parse::<f64>().ok());
            if found.is_some() {
                return found;
            }
        }
    }
    None
}

/// Share of a subject's evidence needed to say it has the question's property.
const PROPERTY_HELD: f64 = 0.75;

/// The evidence's answer to a yes/no question about two subjects: "Are both A and B X?" (yes
/// when each subject's sentence carries the property words) or "Were A and B … the same Y?"
/// (yes when their sentences share a name or number the question does not mention).
fn polar_truth(question: &str, tokens: &[Token], evidence: &Evidence) -> Option<(bool, String)> {
    let lower = question.to_lowercase();
    let mut subjects = None;
    let mut subject_words: Vec<String> = Vec::new();
    // "Are X and Y both P?": the subjects run from after the verb to "both", split at the last
    // "and" (so "Gin and tonic and Paloma" gives "Gin and tonic" and "Paloma").
    if let Some(both) = lower.find(" both ")
        && let Some(verb_end) = lower.find(' ')
        && verb_end < both
        && let Some(split) = lower[..both].rfind(" and ")
        && split > verb_end
    {
        let words = |from: usize, to: usize| -> Vec<String> {
            tokens
                .iter()
                .filter(|t| t.start >= from && t.end <= to && t.is_content())
                .map(|t| t.norm.clone())
                .collect()
        };
        let (left, right) = (words(verb_end, split), words(split + 5, both));
        if !left.is_empty() && !right.is_empty() {
            subject_words = left.iter().chain(&right).cloned().collect();
            subjects = Some([left, right]);
        }
    }
    for (at, _) in lower.match_indices(" and ") {
        if subjects.is_some() {
            break;
        }
        let (left, left_all) = name_run_full(question, tokens, at, evidence, Direction::Backward);
        let right = name_run(question, tokens, at + 5, evidence, Direction::Forward);
        if !left.is_empty() && !right.is_empty() {
            // Words trimmed off the front of the first subject still name it ("Pam" of "Pam
            // Veasey"); words trimmed off the end of the second are the property ("American").
            subject_words = left_all.into_iter().chain(right.iter().cloned()).collect();
            subjects = Some([left, right]);
            break;
        }
    }
    let subjects = subjects?;
    let anchors = [
        option_sentence(evidence, &subjects[0])?,
        option_sentence(evidence, &subjects[1])?,
    ];
    if anchors[0] == anchors[1] {
        return None;
    }
    let near = [
        neighbourhood(evidence, anchors[0]),
        neighbourhood(evidence, anchors[1]),
    ];
    let is_subject = |norm: &str| subject_words.iter().any(|w| text::fuzzy_eq(w, norm));
    let same_at = tokens
        .iter()
        .position(|t| matches!(t.norm.as_str(), "same" | "common"));
    if let Some(same_at) = same_at {
        // Nationality adjectives open most encyclopedic sentences; they only answer "the same
        // nationality/country" questions.
        let about_origin = tokens[same_at..]
            .iter()
            .any(|t| ORIGIN_SLOTS.contains(&t.norm.as_str()));
        let in_question = |norm: &str| tokens.iter().any(|t| text::fuzzy_eq(&t.norm, norm));
        let values = |i: usize| -> Vec<&Token> {
            near[i]
                .iter()
                .flat_map(|&s| evidence.tokens[s].iter())
                .filter(|t| {
                    t.is_content() && matches!(t.kind, TokenKind::Entity | TokenKind::Number)
                })
                .filter(|t| !is_subject(&t.norm) && !in_question(&t.norm))
                .filter(|t| about_origin || !looks_like_demonym(&t.norm))
                .collect()
        };
        let (a, b) = (values(0), values(1));
        let shared: Vec<&str> = a
            .iter()
            .filter(|x| b.iter().any(|y| y.norm == x.norm))
            .map(|x| &evidence.text[x.start..x.end])
            .collect();
        return Some(if shared.is_empty() {
            (
                false,
                "the two subjects' evidence shares no name or number".to_string(),
            )
        } else {
            (true, format!("both subjects' evidence names {}", shared[0]))
        });
    }
    let property: Vec<&Token> = tokens
        .iter()
        .filter(|t| t.is_content() && !is_subject(&t.norm))
        .collect();
    let total: f64 = property.iter().map(|t| t.weight()).sum();
    if total <= 0.0 {
        return None;
    }
    let held: Vec<f64> = (0..2)
        .map(|i| {
            property
                .iter()
                .filter(|t| {
                    near[i].iter().any(|&s| {
                        evidence.tokens[s]
                            .iter()
                            .any(|e| text::fuzzy_eq(&e.norm, &t.norm))
                    })
                })
                .map(|t| t.weight())
                .sum::<f64>()
                / total
                + 0.0
        })
        .collect();
    let detail = format!(
        "the subjects' evidence holds {:.0}% and {:.0}% of the property",
        held[0] * 100.0,
        held[1] * 100.0
    );
    // A name-like property ("American") missing from a subject's evidence decides it.
    let name_missing = (0..2).any(|i| {
        property.iter().any(|t| {
            t.kind != TokenKind::Word
                && !near[i].iter().any(|&s| {
                    evidence.tokens[s]
                        .iter()
                        .any(|e| text::fuzzy_eq(&e.norm, &t.norm))
                })
        })
    });
    if name_missing {
        Some((false, detail))
    } else if held.iter().all(|h| *h >= PROPERTY_HELD) {
        Some((true, detail))
    } else {
        Some((false, detail))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Backward,
    Forward,
}

/// The run of name-like words next to byte `at` of the question (capitalised words and short
/// connectors, stopping at punctuation), trimmed to the longest part quoted in the evidence.
fn name_run(
    question: &str,
    tokens: &[Token],
    at: usize,
    evidence: &Evidence,
    direction: Direction,
) -> Vec<String> {
    name_run_full(question, tokens, at, evidence, direction).0
}

/// As [`name_run`], also returning every content word of the untrimmed run.
fn name_run_full(
    question: &str,
    tokens: &[Token],
    at: usize,
    evidence: &Evidence,
    direction: Direction,
) -> (Vec<String>, Vec<String>) {
    let ordered: Vec<&Token> = match direction {
        Direction::Backward => tokens.iter().filter(|t| t.end <= at).rev().collect(),
        Direction::Forward => tokens.iter().filter(|t| t.start >= at).collect(),
    };
    let mut run: Vec<&Token> = Vec::new();
    for token in ordered {
        if let Some(previous) = run.last() {
            let (a, b) = match direction {
                Direction::Backward => (token.end, previous.start),
                Direction::Forward => (previous.end, token.start),
            };
            if question[a..b].contains([',', ':', ';', '?', '(', ')']) {
                break;
            }
        } else {
            let (a, b) = match direction {
                Direction::Backward => (token.end, at),
                Direction::Forward => (at, token.start),
            };
            if question[a.min(b)..a.max(b)].contains([',', ':', ';', '?']) {
                break;
            }
        }
        let surface = &question[token.start..token.end];
        let name_like = surface.chars().next().is_some_and(char::is_uppercase)
            || token.kind == TokenKind::Number
            || (token.stop && surface.len() <= 3);
        if !name_like {
            break;
        }
        run.push(token);
    }
    if direction == Direction::Backward {
        run.reverse();
    }
    while run.last().is_some_and(|t| t.stop) {
        run.pop();
    }
    while run.first().is_some_and(|t| t.stop) {
        run.remove(0);
    }
    // Trim to the longest stretch the evidence quotes: "Kings of Leon American" -> "Kings of
    // Leon" when the evidence says "Kings of Leon is an American band".
    let n = run.len();
    let mut best: &[&Token] = &run;
    'outer: for len in (1..=n).rev() {
        let starts: Vec<usize> = match direction {
            Direction::Forward => vec![0],
            Direction::Backward => vec![n - len],
        };
        for start in starts {
            let part = &run[start..start + len];
            let (a, b) = (part[0].start, part[len - 1].end);
            let quote = normalise_quote(&question[a..b]);
            if !quote.is_empty() && evidence.normalised_text.contains(&quote) {
                best = part;
                break 'outer;
            }
        }
    }
    let words = |part: &[&Token]| -> Vec<String> {
        part.iter()
            .filter(|t| t.is_content())
            .map(|t| t.norm.clone())
            .collect()
    };
    (words(best), words(&run))
}

/// The evidence sentence that best matches an option's words (more than half of them).
fn option_sentence(evidence: &Evidence, words: &[String]) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for s in 0..evidence.sentences.len() {
        let hits = words
            .iter()
            .filter(|w| {
                evidence.tokens[s]
                    .iter()
                    .any(|t| text::fuzzy_eq(&t.norm, w))
            })
            .count();
        if hits * 2 > words.len() && best.is_none_or(|(h, _)| hits > h) {
            best = Some((hits, s));
        }
    }
    best.map(|(_, s)| s)
}

/// A sentence and its neighbours within the same document (pronouns refer across them).
fn neighbourhood(evidence: &Evidence, s: usize) -> Vec<usize> {
    let mut out = vec![s];
    if s > 0 && !evidence.breaks[s] {
        out.push(s - 1);
    }
    if s + 1 < evidence.sentences.len() && !evidence.breaks[s + 1] {
        out.push(s + 1);
    }
    out
}

fn year_of(norm: &str) -> Option<i64> {
    if norm.len() == 4 && norm.bytes().all(|b| b.is_ascii_digit()) {
        let year: i64 = norm.parse().ok()?;
        return (1000..=2100).contains(&year).then_some(year);
    }
    None
}

const ANTONYMS: &[(&str, &str)] = &[
    ("older", "younger"),
    ("oldest", "youngest"),
    ("before", "after"),
    ("earlier", "later"),
    ("first", "last"),
    ("larger", "smaller"),
    ("largest", "smallest"),
    ("bigger", "smaller"),
    ("higher", "lower"),
    ("highest", "lowest"),
    ("longer", "shorter"),
    ("increase", "decrease"),
    ("increased", "decreased"),
    ("won", "lost"),
    ("win", "lose"),
    ("alive", "dead"),
    ("north", "south"),
    ("east", "west"),
    ("northern", "southern"),
    ("eastern", "western"),
    ("male", "female"),
    ("public", "private"),
    ("true", "false"),
    ("accept", "reject"),
    ("accepted", "rejected"),
    ("allow", "forbid"),
    ("minimum", "maximum"),
    ("above", "below"),
    ("inside", "outside"),
    ("success", "failure"),
    ("succeeded", "failed"),
    ("enabled", "disabled"),
    ("legal", "illegal"),
    ("possible", "impossible"),
];

fn antonym_of(norm: &str) -> Option<&'static str> {
    ANTONYMS.iter().find_map(|(a, b)| {
        if *a == norm {
            Some(*b)
        } else if *b == norm {
            Some(*a)
        } else {
            None
        }
    })
}

/// The best-aligned span for a claim and the scores that chose it.
#[derive(Debug, Clone, Copy)]
struct Alignment {
    anchor: usize,
    partner: Option<usize>,
    focus: f64,
    rest: f64,
    question: f64,
    score: f64,
}

/// Credit for a claim word found in the partner sentence only: a joined span is weaker support
/// than a single sentence.
const PARTNER_CREDIT: f64 = 0.6;
/// Support of a yes/no answer the evidence's two subjects decide: high but below a verbatim
/// match, since the decision rests on word overlap.
const POLARITY_AGREES: f64 = 0.95;
const POLARITY_DISAGREES: f64 = 0.1;
/// Words that open a sentence continuing the previous one's subject.
const ANAPHORA: &[&str] = &[
    "it", "he", "she", "they", "its", "his", "her", "their", "this",
];

fn opens_with_anaphor(evidence: &Evidence, s: usize) -> bool {
    evidence.tokens[s]
        .first()
        .is_some_and(|t| ANAPHORA.contains(&t.norm.as_str()))
}

/// Score factor for a claim without the number or date its question asks for.
const MISSING_NUMBER_FACTOR: f64 = 0.5;
/// Phrases of questions whose answer is a number or a date.
const NUMBER_QUESTIONS: &[&str] = &[
    "how many",
    "how much",
    "how long",
    "how old",
    "how far",
    "how tall",
    "how big",
    "how large",
    "what year",
    "which year",
    "what date",
    "which date",
    "when was",
    "when did",
    "when were",
    "when is",
    "what population",
    "population of",
    "what percentage",
];
/// Score factor per claim name found nowhere in the evidence.
const MISSING_NAME_FACTOR: f64 = 0.45;
/// Score factor per other claim word found nowhere in the evidence (paraphrase is common).
const MISSING_WORD_FACTOR: f64 = 0.8;
/// Upper bound on partners tried per anchor (neighbours first, then shared names).
const MAX_PARTNERS: usize = 8;

fn coverage(terms: &[&Term], s: usize, t: Option<usize>) -> f64 {
    let total: f64 = terms.iter().map(|x| x.weight).sum();
    if total <= 0.0 {
        return 1.0;
    }
    let got: f64 = terms
        .iter()
        .map(|x| {
            if x.in_sentence(s) {
                x.weight
            } else if t.is_some_and(|t| x.in_sentence(t)) {
                x.weight * PARTNER_CREDIT
            } else {
                0.0
            }
        })
        .sum();
    got / total
}

fn partners(evidence: &Evidence, s: usize) -> Vec<usize> {
    let mut out = Vec::new();
    if s > 0 && !evidence.breaks[s] {
        out.push(s - 1);
    }
    if s + 1 < evidence.sentences.len() && !evidence.breaks[s + 1] {
        out.push(s + 1);
    }
    let names: HashSet<&str> = evidence.tokens[s]
        .iter()
        .filter(|t| t.kind == TokenKind::Entity && t.is_content())
        .map(|t| t.norm.as_str())
        .collect();
    if names.is_empty() {
        return out;
    }
    for (t, tokens) in evidence.tokens.iter().enumerate() {
        if out.len() >= MAX_PARTNERS {
            break;
        }
        if t == s || out.contains(&t) {
            continue;
        }
        if tokens
            .iter()
            .any(|x| x.kind == TokenKind::Entity && names.contains(x.norm.as_str()))
        {
            out.push(t);
        }
    }
    out
}

fn align(
    evidence: &Evidence,
    focus: &[&Term],
    rest: &[&Term],
    question: Option<&QuestionInfo>,
) -> Option<Alignment> {
    let mut anchors: Vec<usize> = focus
        .iter()
        .flat_map(|t| t.sentences.iter().copied())
        .collect();
    if anchors.is_empty() {
        anchors = rest
            .iter()
            .flat_map(|t| t.sentences.iter().copied())
            .collect();
    }
    anchors.sort_unstable();
    anchors.dedup();
    let mut best: Option<Alignment> = None;
    for &s in &anchors {
        let candidates = std::iter::once(None).chain(partners(evidence, s).into_iter().map(Some));
        for t in candidates {
            let f = coverage(focus, s, t);
            let r = coverage(rest, s, t);
            let q = question.map_or(1.0, |q| q.alignment(s, t));
            // The question's words are not part of the score: in multi-hop evidence the answer
            // often sits in a sentence linked only through a bridge name, and measured on
            // development data any weight on them cost more right answers than it caught
            // wrong ones. They still choose between equally good spans.
            let score = f * r + 1e-6 * q;
            if best.is_none_or(|b| score > b.score + 1e-12) {
                best = Some(Alignment {
                    anchor: s,
                    partner: t,
                    focus: f,
                    rest: r,
                    question: q,
                    score,
                });
            }
        }
    }
    best
}

fn reason(kind: ReasonKind, detail: impl Into<String>) -> Reason {
    Reason {
        kind,
        detail: detail.into(),
    }
}

fn verify_claim(
    evidence: &Evidence,
    claim: Claim,
    question: Option<&QuestionInfo>,
    profile: Profile,
) -> ClaimVerdict {
    if !claim.verifiable {
        return ClaimVerdict {
            claim,
            label: Label::NotVerifiable,
            score: 1.0,
            reasons: vec![reason(
                ReasonKind::NotVerifiable,
                "no name, number, identifier or claim verb to check",
            )],
            evidence: Vec::new(),
            missing: Vec::new(),
        };
    }
    let short = claim.kind == ClaimKind::ShortAnswer;
    let tokens = if short {
        text::tokenize_answer(&claim.text)
    } else {
        text::tokenize(&claim.text)
    };
    let claim_terms = terms(evidence, &claim.text, &tokens);
    let threshold = profile.support_threshold();
    let mut reasons = Vec::new();

    if short && let (Some(q), Some(yes)) = (question, claims::is_polarity(&claim.text)) {
        return verify_polarity(evidence, claim, q, yes, threshold);
    }

    // Verbatim quotes of some length are supported as they stand.
    let quote = normalise_quote(&claim.text);
    if !short && quote.split(' ').count() >= 6 && evidence.normalised_text.contains(&quote) {
        let start = evidence
            .sentences
            .iter()
            .position(|s| normalise_quote(&evidence.text[s.start..s.end]).contains(&quote));
        return ClaimVerdict {
            claim,
            label: Label::Supported,
            score: 1.0,
            reasons: vec![reason(
                ReasonKind::ExactQuote,
                "the claim appears verbatim in the evidence",
            )],
            evidence: start.map(|s| vec![evidence.snippet(s)]).unwrap_or_default(),
            missing: Vec::new(),
        };
    }

    // The focus is what the claim adds to the question; the rest restates it.
    let (mut focus, mut rest): (Vec<&Term>, Vec<&Term>) = match question {
        Some(q) => claim_terms.iter().partition(|t| !q.contains(&t.norm)),
        None => (claim_terms.iter().collect(), Vec::new()),
    };
    if focus.is_empty() {
        std::mem::swap(&mut focus, &mut rest);
    }
    let missing: Vec<&Term> = claim_terms.iter().filter(|t| !t.found()).collect();
    let missing_words: Vec<String> = missing.iter().map(|t| t.surface.clone()).collect();
    if !missing.is_empty() {
        reasons.push(reason(
            ReasonKind::MissingTerms,
            format!("not in the evidence: {}", missing_words.join(", ")),
        ));
    }

    let Some(alignment) = align(evidence, &focus, &rest, question) else {
        reasons.push(reason(
            ReasonKind::Coverage,
            "no evidence sentence shares a content word with the claim",
        ));
        return ClaimVerdict {
            claim,
            label: Label::Unsupported,
            score: 0.0,
            reasons,
            evidence: Vec::new(),
            missing: missing_words,
        };
    };
    let span_sentences: Vec<usize> = std::iter::once(alignment.anchor)
        .chain(alignment.partner)
        .collect();
    let mut score = alignment.score;
    // Each word found nowhere is a part of the claim nothing supports; a missing name weighs
    // most, since substituted names are the commonest invented fact.
    for term in &missing {
        score *= match term.kind {
            TokenKind::Entity => MISSING_NAME_FACTOR,
            TokenKind::Word => MISSING_WORD_FACTOR,
            // Numbers are judged below: mismatch or merely absent.
            TokenKind::Number => 1.0,
        };
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

    let mut contradiction = false;
    let mut extra_evidence: Vec<usize> = Vec::new();
    let span_tokens: Vec<&Token> = span_sentences
        .iter()
        .flat_map(|&s| evidence.tokens[s].iter())
        .collect();

    // Numbers and dates: a claim number the anchor sentence lacks, while the anchor gives
    // another of its kind (a year for a year, a month for a month), disagrees with it; found
    // only in another sentence it belongs to another fact.
    let anchor_tokens = &evidence.tokens[alignment.anchor];
    for term in claim_terms.iter().filter(|t| t.kind == TokenKind::Number) {
        if term.in_sentence(alignment.anchor) {
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
            others = span_tokens
                .iter()
                .filter(|t| same_kind(t))
                .map(|t| &evidence.text[t.start..t.end])
                .collect();
        }
        others.dedup();
        if !others.is_empty() {
            contradiction = true;
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
            score *= 0.7;
        }
    }

    // Polarity: negation present on one side only, over a span that otherwise matches.
    let claim_negated = tokens
        .iter()
        .any(|t| text::NEGATIONS.contains(&t.norm.as_str()));
    let span_negated = span_sentences.iter().any(|&s| evidence.negated[s]);
    if claim_negated != span_negated && alignment.focus >= 0.75 && !short {
        contradiction = true;
        reasons.push(reason(
            ReasonKind::NegationFlip,
            if claim_negated {
                "the claim negates what the aligned evidence states"
            } else {
                "the aligned evidence negates what the claim states"
            },
        ));
    }
    for token in tokens.iter() {
        if let Some(opposite) = antonym_of(&token.norm) {
            let has = |w: &str| span_tokens.iter().any(|t| t.norm == w);
            if has(opposite) && !has(&token.norm) {
                contradiction = true;
                reasons.push(reason(
                    ReasonKind::AntonymFlip,
                    format!(
                        "claim says \"{}\", the evidence says \"{opposite}\"",
                        &claim.text[token.start..token.end]
                    ),
                ));
            }
        }
    }

    // Entity substitution: a name of the claim is missing while the aligned span puts another
    // name, new to both claim and question, in its place.
    let missing_names: Vec<&&Term> = missing
        .iter()
        .filter(|t| t.kind == TokenKind::Entity)
        .collect();
    if !missing_names.is_empty() {
        let substitute = substitution_candidates(evidence, &claim_terms, question, alignment);
        if !substitute.is_empty() && alignment.question.max(alignment.rest) >= 0.5 {
            contradiction = true;
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

    // Slot: when one sentence answers the whole question and names a filler of the answer's
    // kind, a short answer found elsewhere is a substitution ("who founded it?" - "Per
    // Anker", while the founding sentence names Ingrid Solberg). Only a sentence holding every
    // question word counts, so multi-hop answers reached through a bridge are not judged so.
    if short
        && let Some(q) = question
        && let Some((s, t)) = q.answering_span
        && !claim_terms
            .iter()
            .filter(|x| focus.iter().any(|f| f.norm == x.norm))
            .all(|x| x.in_sentence(s) || t.is_some_and(|t| x.in_sentence(t)))
    {
        let fillers = same_kind_fillers(evidence, &claim_terms, q, s);
        if !fillers.is_empty() {
            contradiction = true;
            reasons.push(reason(
                ReasonKind::EntitySubstitution,
                format!(
                    "the sentence that answers the question names {} instead",
                    fillers.join(" ")
                ),
            ));
            extra_evidence.push(s);
        }
    }

    // Questions asking for a quantity or a date need a number in the answer.
    if let Some(q) = question
        && q.wants_number
        && !tokens.iter().any(|t| t.kind == TokenKind::Number)
    {
        score *= MISSING_NUMBER_FACTOR;
        reasons.push(reason(
            ReasonKind::AnswerTypeMismatch,
            "the question asks for a number or date and the claim gives none",
        ));
    }

    // Choice questions: the evidence picks a side; an answer naming only the other fails.
    if let Some(q) = question
        && let Some(comparison) = &q.comparison
        && let Some(winner) = comparison.winner
    {
        let picks: Vec<usize> = comparison
            .options
            .iter()
            .enumerate()
            .filter(|(_, words)| {
                let hit = words
                    .iter()
                    .filter(|w| claim_terms.iter().any(|t| text::fuzzy_eq(&t.norm, w)))
                    .count();
                hit * 2 > words.len()
            })
            .map(|(i, _)| i)
            .collect();
        // Naming both options ("A came before B") is judged by the other checks.
        if let [chosen] = picks.as_slice()
            && *chosen != winner
        {
            contradiction = true;
            reasons.push(reason(
                ReasonKind::ComparisonMismatch,
                format!("the answer picks the other option: {}", comparison.basis),
            ));
        }
    }

    // Yes/no questions: a leading "Yes,"/"No," must agree with what the evidence shows.
    if let Some(q) = question
        && let Some(truth) = &q.polar_truth
        && let Some(said) = leading_polarity(&claim.text)
        && said != truth.0
    {
        contradiction = true;
        reasons.push(reason(ReasonKind::PolarityMismatch, truth.1.clone()));
    }

    if contradiction {
        score *= 0.3;
    }
    let label = if contradiction {
        Label::Contradicted
    } else if score >= threshold {
        Label::Supported
    } else {
        Label::Unsupported
    };
    ClaimVerdict {
        claim,
        label,
        score: score.clamp(0.0, 1.0),
        reasons,
        evidence: span_sentences
            .iter()
            .chain(
                extra_evidence
                    .iter()
                    .filter(|s| !span_sentences.contains(s)),
            )
            .map(|&s| evidence.snippet(s))
            .collect(),
        missing: missing_words,
    }
}

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

/// Names in the aligned span that appear in neither the claim nor the question.
fn substitution_candidates(
    evidence: &Evidence,
    claim_terms: &[Term],
    question: Option<&QuestionInfo>,
    alignment: Alignment,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for token in &evidence.tokens[alignment.anchor] {
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

/// A bare yes/no answer: "yes" is supported when one aligned span carries the question's
/// statement; "no" cannot be confirmed lexically, so it stays unsupported (and says why).
fn verify_polarity(
    evidence: &Evidence,
    claim: Claim,
    question: &QuestionInfo,
    yes: bool,
    threshold: f64,
) -> ClaimVerdict {
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
    let spans: Vec<EvidenceSpan> = if evidence.sentences.is_empty() {
        Vec::new()
    } else {
        std::iter::once(s)
            .chain(t)
            .map(|s| evidence.snippet(s))
            .collect()
    };
    if let Some((truth, why)) = &question.polar_truth {
        let agrees = *truth == yes;
        return ClaimVerdict {
            claim,
            label: if agrees {
                Label::Supported
            } else {
                Label::Contradicted
            },
            score: if agrees {
                POLARITY_AGREES
            } else {
                POLARITY_DISAGREES
            },
            reasons: vec![reason(
                if agrees {
                    ReasonKind::PolarityAgrees
                } else {
                    ReasonKind::PolarityMismatch
                },
                why.clone(),
            )],
            evidence: spans,
            missing: Vec::new(),
        };
    }
    let (label, score, detail) = if yes {
        let label = if coverage >= threshold && question.polar {
            Label::Supported
        } else {
            Label::Unsupported
        };
        (
            label,
            coverage,
            format!(
                "one span holds {:.0}% of the question's statement",
                coverage * 100.0
            ),
        )
    } else {
        (
            Label::Unsupported,
            0.5,
            "a negative answer is not confirmed by word overlap".to_string(),
        )
    };
    ClaimVerdict {
        claim,
        label,
        score,
        reasons: vec![reason(ReasonKind::PolarityUnchecked, detail)],
        evidence: spans,
        missing: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EVIDENCE: &str = "The Oberoi family is an Indian family famous for its hotels, \
        namely through The Oberoi Group. The Oberoi Group is a hotel company with its head office \
        in Delhi. It was founded in 1934 and runs 31 hotels. The group did not open a hotel in \
        Pakistan. Rai Bahadur Mohan Singh Oberoi was older than his partner Ernest Grose.";

    fn one(answer: &str, question: Option<&str>) -> ClaimVerdict {
        let v = check(answer, EVIDENCE, question, Profile::Qa);
        assert_eq!(v.claims.len(), 1, "{:?}", v.claims);
        v.claims.into_iter().next().expect("one claim")
    }

    fn has(verdict: &ClaimVerdict, kind: ReasonKind) -> bool {
        verdict.reasons.iter().any(|r| r.kind == kind)
    }

    #[test]
    fn supported_paraphrase() {
        let v = one("The head office of the Oberoi Group is in Delhi.", None);
        assert_eq!(v.label, Label::Supported, "{v:?}");
        assert!(v.score > 0.8);
        assert!(v.evidence[0].text.contains("head office"));
    }

    #[test]
    fn short_answer_in_the_context_of_the_question() {
        let q = Some(
            "The Oberoi family is part of a hotel company that has a head office in what city?",
        );
        let right = one("Delhi", q);
        assert_eq!(right.label, Label::Supported, "{right:?}");
        assert_eq!(right.claim.kind, ClaimKind::ShortAnswer);
        let wrong = one("Mumbai", q);
        assert_ne!(wrong.label, Label::Supported);
        assert!(wrong.score < right.score);
    }

    #[test]
    fn entity_substitution_is_contradicted() {
        let v = one("The Oberoi Group has its head office in Mumbai.", None);
        assert_eq!(v.label, Label::Contradicted, "{v:?}");
        assert!(has(&v, ReasonKind::EntitySubstitution));
        assert_eq!(v.missing, ["Mumbai"]);
    }

    #[test]
    fn number_and_date_mismatch() {
        let year = one("The Oberoi Group was founded in 1943.", None);
        assert_eq!(year.label, Label::Contradicted);
        assert!(has(&year, ReasonKind::DateMismatch), "{year:?}");
        let count = one("The Oberoi Group runs 13 hotels.", None);
        assert_eq!(count.label, Label::Contradicted);
        assert!(has(&count, ReasonKind::NumberMismatch), "{count:?}");
    }

    #[test]
    fn negation_flip() {
        let v = one("The Oberoi Group opened a hotel in Pakistan.", None);
        assert_eq!(v.label, Label::Contradicted, "{v:?}");
        assert!(has(&v, ReasonKind::NegationFlip));
        let v = one(
            "The Oberoi Group does not have a head office in Delhi.",
            None,
        );
        assert_eq!(v.label, Label::Contradicted, "{v:?}");
    }

    #[test]
    fn antonym_flip() {
        let v = one(
            "Mohan Singh Oberoi was younger than his partner Ernest Grose.",
            None,
        );
        assert_eq!(v.label, Label::Contradicted, "{v:?}");
        assert!(has(&v, ReasonKind::AntonymFlip));
    }

    #[test]
    fn swapped_relation_from_words_of_the_same_passage() {
        // Every word occurs in the evidence, but not together: Pakistan is not where the head
        // office is, and Ernest Grose did not found the group.
        let q = Some("Where does the Oberoi Group have its head office?");
        let v = one("The Oberoi Group has its head office in Pakistan.", q);
        assert_ne!(v.label, Label::Supported, "{v:?}");
        let right = one("The Oberoi Group has its head office in Delhi.", q);
        assert_eq!(right.label, Label::Supported, "{right:?}");
        let swapped = one("Ernest Grose runs 31 hotels in Delhi.", None);
        assert_ne!(swapped.label, Label::Supported, "{swapped:?}");
    }

    #[test]
    fn comparison_questions_follow_the_evidence_dates() {
        let evidence = "Arthur's Magazine (1844–1846) was an American literary periodical.\
            First for Women is a woman's magazine published by Bauer Media Group since 1989.";
        let q = Some("Which magazine was started first, Arthur's Magazine or First for Women?");
        let right = check("Arthur's Magazine", evidence, q, Profile::Qa);
        assert_eq!(right.claims[0].label, Label::Supported, "{right:?}");
        let wrong = check(
            "First for Women was started first.",
            evidence,
            q,
            Profile::Qa,
        );
        assert_eq!(wrong.claims[0].label, Label::Contradicted, "{wrong:?}");
    }

    #[test]
    fn unsupported_claim_rate_counts_verifiable_claims_only() {
        let v = check(
            "The Oberoi Group is based in Delhi. It owns airlines in Peru. Thanks!",
            EVIDENCE,
            None,
            Profile::Rag,
        );
        assert_eq!(v.verifiable().count(), 2);
        assert!((v.unsupported_claim_rate() - 0.5).abs() < 1e-9, "{v:?}");
        let none = check("Thanks!", EVIDENCE, None, Profile::Rag);
        assert_eq!(none.unsupported_claim_rate(), 0.0);
    }

    #[test]
    fn code_identifiers_must_match_exactly() {
        let evidence = "The function `parse_config` reads the file and returns a map. \
            The helper `load_defaults` fills missing keys.";
        let right = check(
            "`parse_config` returns a map.",
            evidence,
            None,
            Profile::Code,
        );
        assert_eq!(right.claims[0].label, Label::Supported, "{right:?}");
        let wrong = check(
            "`parse_settings` returns a map.",
            evidence,
            None,
            Profile::Code,
        );
        assert_ne!(wrong.claims[0].label, Label::Supported, "{wrong:?}");
    }

    #[test]
    fn odd_inputs_do_not_panic() {
        for (answer, evidence) in [
            ("", ""),
            ("Delhi", ""),
            ("", "Some evidence."),
            ("....", "...."),
            ("- \n| |\n```\nunclosed", "x"),
            ("No.", "Is it? No."),
            ("Yes, é’s 1,2,3.", "é’s 1,2,3 are here."),
        ] {
            for question in [
                None,
                Some("Are A and B both C?"),
                Some("Which is older, A or B?"),
            ] {
                let v = check(answer, evidence, question, Profile::Qa);
                assert!((0.0..=1.0).contains(&v.unsupported_claim_rate()));
                for c in &v.claims {
                    assert!((0.0..=1.0).contains(&c.score), "{c:?}");
                }
            }
        }
    }

    #[test]
    fn deterministic_bytes() {
        let a = serde_json::to_string(&check("Mumbai", EVIDENCE, Some("Where?"), Profile::Qa));
        let b = serde_json::to_string(&check("Mumbai", EVIDENCE, Some("Where?"), Profile::Qa));
        assert_eq!(a.expect("json"), b.expect("json"));
    }
}
