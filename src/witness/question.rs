//! Question analysis: what a question asks and what the evidence answers to it, computed once
//! per answer and used by [`super::verify`] to read short answers.
//!
//! - which words of the question the evidence holds, and how well a span addresses them;
//! - whether it asks for a number or a date;
//! - a choice between two options ("A or B?"), decided by the options' dates, counts, or by
//!   which option's sentence carries the question's words;
//! - a yes/no question about two subjects ("Are both A and B P?", "… the same Y?"), decided by
//!   each subject's sentence;
//! - the one span answering the whole question, when there is one.

use super::text::{self, Token, TokenKind};
use super::verify::{Evidence, Term, normalise_quote, partners, terms};

/// The question, analysed once per answer.
pub(super) struct QuestionInfo {
    pub(super) terms: Vec<Term>,
    /// Question terms present in the evidence, with their inverse document frequency.
    pub(super) weights: Vec<f64>,
    pub(super) total_weight: f64,
    pub(super) comparison: Option<Comparison>,
    pub(super) polar: bool,
    /// A wh-question with "do"-support ("Who did X defeat?", "What state does X work in?"):
    /// its grammatical subject follows the auxiliary, so what it describes is that subject, not
    /// the answer.
    pub(super) subject_after_auxiliary: bool,
    /// The best raw alignment of any span, which [`QuestionInfo::alignment`] is relative to.
    pub(super) best: f64,
    /// For a yes/no question about two subjects, the answer the evidence gives and why.
    pub(super) polar_truth: Option<(bool, String)>,
    /// A sentence (with the one its opening pronoun refers to) holding every question word the
    /// evidence has: the place where the question is answered, when one place answers it.
    pub(super) answering_span: Option<(usize, Option<usize>)>,
    /// Whether the question asks for a quantity or a date ("how many", "in what year").
    pub(super) wants_number: bool,
    /// The evidence sentences holding the greatest share of the question's weight on their own
    /// (ties all kept; empty when no question word is in the evidence): where the question
    /// points in the evidence, before any bridge to a partner sentence.
    pub(super) focus_sentences: Vec<usize>,
    /// Per evidence sentence and token, the question terms (bit `k` for term `k`, the first
    /// 128) that token matches; empty rows for sentences holding none.
    window_hits: Vec<Vec<u128>>,
    /// The largest question weight any window of the evidence holds ([`Self::window_weight`]).
    pub(super) window_best: f64,
}

/// Tokens on each side of a position that count as near it: a long clause. Chosen by
/// cross-validation (`svc witness fit`) among 10, 16 and 24: the most hallucinated answers
/// flagged, then the highest AUROC.
pub(super) const WINDOW: usize = 24;

impl QuestionInfo {
    pub(super) fn new(question: &str, evidence: &Evidence) -> Self {
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
                .or_else(|| denied_statement(question, &tokens, evidence))
        } else {
            None
        };
        let lower = question.to_lowercase();
        let words: Vec<&str> = lower
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
            .take(4)
            .collect();
        let subject_after_auxiliary = words.first().is_some_and(|w| WH_WORDS.contains(w))
            && words[1..]
                .iter()
                .any(|w| matches!(*w, "do" | "does" | "did"));
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
            subject_after_auxiliary,
            best: 0.0,
            focus_sentences: Vec::new(),
            window_hits: Vec::new(),
            window_best: 0.0,
        };
        if total_weight > 0.0 {
            info.window_hits = evidence
                .tokens
                .iter()
                .enumerate()
                .map(|(s, tokens)| {
                    let here: Vec<(usize, &Term)> = info
                        .terms
                        .iter()
                        .enumerate()
                        .take(128)
                        .filter(|(_, t)| t.in_sentence(s))
                        .collect();
                    if here.is_empty() {
                        return Vec::new();
                    }
                    tokens
                        .iter()
                        .map(|x| {
                            here.iter()
                                .filter(|(_, t)| text::fuzzy_eq(&x.norm, &t.norm))
                                .fold(0u128, |m, (k, _)| m | (1u128 << k))
                        })
                        .collect()
                })
                .collect();
            for s in 0..info.window_hits.len() {
                for i in 0..info.window_hits[s].len() {
                    info.window_best = info.window_best.max(info.window_weight(s, i));
                }
            }
            let mut focus_weight = 0.0;
            for s in 0..evidence.sentences.len() {
                let alone = info.raw_alignment(s, None);
                if alone > focus_weight + 1e-12 {
                    focus_weight = alone;
                    info.focus_sentences.clear();
                }
                if alone > 0.0 && alone >= focus_weight - 1e-12 {
                    info.focus_sentences.push(s);
                }
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

    pub(super) fn contains(&self, norm: &str) -> bool {
        self.terms.iter().any(|t| text::fuzzy_eq(&t.norm, norm))
    }

    /// How well sentences `s` and `t` address the question, relative to the best span of the
    /// evidence (1.0 for the best): the answer to a question sits where the question does.
    pub(super) fn alignment(&self, s: usize, t: Option<usize>) -> f64 {
        if self.best <= 0.0 {
            return 1.0;
        }
        (self.raw_alignment(s, t) / self.best).min(1.0)
    }

    /// The question's weight within [`WINDOW`] tokens of token `i` of sentence `s` (each term
    /// once).
    pub(super) fn window_weight(&self, s: usize, i: usize) -> f64 {
        let Some(row) = self.window_hits.get(s).filter(|r| !r.is_empty()) else {
            return 0.0;
        };
        let lo = i.saturating_sub(WINDOW);
        let hi = (i + WINDOW + 1).min(row.len());
        let mask = row
            .get(lo..hi)
            .map_or(0, |w| w.iter().fold(0u128, |m, b| m | b));
        self.weights
            .iter()
            .take(128)
            .enumerate()
            .filter(|(k, _)| mask & (1u128 << k) != 0)
            .map(|(_, w)| w)
            .sum()
    }

    /// Share of the question's evidence-bearing weight present in any of `sentences` (0 when
    /// no question word is in the evidence).
    pub(super) fn share_in(&self, sentences: &[usize]) -> f64 {
        if self.total_weight <= 0.0 {
            return 0.0;
        }
        let got: f64 = self
            .terms
            .iter()
            .zip(&self.weights)
            .filter(|(term, _)| sentences.iter().any(|&s| term.in_sentence(s)))
            .map(|(_, w)| w)
            .sum();
        got / self.total_weight
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
pub(super) struct Comparison {
    /// Normalised words of each option.
    pub(super) options: Vec<Vec<String>>,
    /// The option the evidence favours, if it clearly favours one.
    pub(super) winner: Option<usize>,
    /// How the winner was decided, for the certificate.
    pub(super) basis: String,
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
                            share_held(evidence, &predicate, total, &neighbourhood(evidence, s))
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
        .map(|i| share_held(evidence, &property, total, &near[i]))
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

/// The share of `words`' weight (of `total`) that some sentence of `sentences` holds.
fn share_held(evidence: &Evidence, words: &[&Token], total: f64, sentences: &[usize]) -> f64 {
    words
        .iter()
        .filter(|w| {
            sentences.iter().any(|&s| {
                evidence.tokens[s]
                    .iter()
                    .any(|e| text::fuzzy_eq(&e.norm, &w.norm))
            })
        })
        .map(|w| w.weight())
        .sum::<f64>()
        / total
        + 0.0
}

/// The evidence's "no" to a yes/no question whose statement it denies: "Does fd follow symbolic
/// links by default?" against "By default, fd does not follow symbolic links." The sentence
/// holding the greatest share of the question's words (at least [`PROPERTY_HELD`]) denies it
/// when one of those words stands there under a negation and nowhere outside one
/// ([`text::denied`]). Such a sentence used to count as holding the statement, so a "yes"
/// passed and a "no" went unconfirmed. A question that is itself negated ("Doesn't it …?") is
/// left alone: its yes and no are ambiguous.
fn denied_statement(
    question: &str,
    tokens: &[Token],
    evidence: &Evidence,
) -> Option<(bool, String)> {
    if tokens.iter().any(|t| text::is_negation(question, t)) {
        return None;
    }
    // The opening auxiliary ("Does", "Is") makes the question, not its statement; the tokenizer
    // may take it for content ("Does" stems to "doe").
    let words: Vec<&Token> = tokens.iter().skip(1).filter(|t| t.is_content()).collect();
    let total: f64 = words.iter().map(|t| t.weight()).sum();
    if total <= 0.0 {
        return None;
    }
    let held = |s: usize| share_held(evidence, &words, total, &[s]);
    let (s, share) = (0..evidence.tokens.len()).map(|s| (s, held(s))).fold(
        None,
        |best: Option<(usize, f64)>, (s, h)| match best {
            Some((_, b)) if b >= h => best,
            _ => Some((s, h)),
        },
    )?;
    if share < PROPERTY_HELD {
        return None;
    }
    let sentence = || evidence.tokens[s].iter().zip(&evidence.negated[s]);
    let denied = words
        .iter()
        .find(|w| text::denied(sentence(), |e| text::fuzzy_eq(&e.norm, &w.norm)))?;
    Some((
        false,
        format!(
            "the evidence sentence holding the question's statement negates \"{}\"",
            &question[denied.start..denied.end]
        ),
    ))
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

pub(super) fn year_of(norm: &str) -> Option<i64> {
    if norm.len() == 4 && norm.bytes().all(|b| b.is_ascii_digit()) {
        let year: i64 = norm.parse().ok()?;
        return (1000..=2100).contains(&year).then_some(year);
    }
    None
}

/// Words that open a sentence continuing the previous one's subject.
const ANAPHORA: &[&str] = &[
    "it", "he", "she", "they", "its", "his", "her", "their", "this",
];

pub(super) fn opens_with_anaphor(evidence: &Evidence, s: usize) -> bool {
    evidence.tokens[s]
        .first()
        .is_some_and(|t| ANAPHORA.contains(&t.norm.as_str()))
}

/// Words opening a wh-question.
const WH_WORDS: &[&str] = &[
    "who", "whom", "whose", "what", "which", "where", "when", "how",
];

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
