//! Budgeted selection: score every fragment against a query, then choose one resolution per
//! fragment (full, skeleton, reference or omitted) that maximises value under a token budget.
//!
//! Scoring is BM25 over identifier parts (camelCase and snake_case split, lightly stemmed), path
//! components and doc text, plus structure: a fragment that *defines* a queried symbol outranks
//! one that mentions it, and the best fragments lend a share of their score to what they call,
//! what calls them and their own file (import/reference graph proximity). A query word also
//! meets a few common synonyms at half weight (find/search/lookup, position/index/offset, …).
//!
//! A fragment's value is its relative score to the fourth power, times the square root of its
//! size when sent full (a skeleton keeps 0.4 of the weight, a reference 0.08): the budget goes
//! to the whole text of the best fragments. Each file's best fragment also carries a smaller
//! value (relative score squared) for showing the file at all, full or as a skeleton, so files
//! ranked lower still appear.
//!
//! The choice is an exact multiple-choice knapsack solved by dynamic programming over token
//! cost. Costs are scaled to at most [`DP_CAPACITY`] cells (rounded up, so the scaled solution
//! never exceeds the real budget) and only the best [`SelectOptions::max_candidates`] fragments
//! enter it. The rendered text is then counted for real; if BPE merges across pieces push it
//! over the budget, the least valuable choice is downgraded until it fits.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use serde::Serialize;

use super::commit::{ChunkInput, CommitError, CommitStore, ContextReceipt, Resolution};
use super::index::{Fragment, Index, PieceKind};
use super::terms::{score_with, sort_by_score};
use super::weights::{Feature, RankingWeights};
use crate::tokens::{Encoding, Tokenizer};

/// Largest DP table width; costs are scaled to fit.
pub const DP_CAPACITY: usize = 4096;
/// Value of a reference relative to sending the fragment in full (a skeleton's is the
/// [`Feature::SkeletonValue`] weight).
const REFERENCE_VALUE: f64 = 0.08;
/// A fragment's value grows with this power of its score relative to the best. On tasks mined
/// from this repository's history, the share of a commit's changed lines found in a fragment
/// falls about as steeply as the fourth power of its relative score (0.057 per fragment above
/// 0.7, 0.005 at 0.4 to 0.5, 0.001 at 0.2 to 0.3); the square used before spread the budget
/// over too many weak fragments.
const RELEVANCE_POWER: i32 = 4;
/// Sending a fragment full is worth `sqrt((tokens + SIZE_OFFSET) / 100)`: on the same tasks the
/// changed lines a relevant fragment holds grow about as the square root of its size (a
/// 1,500-token fragment holds 6.5 times what a 50-token one does), so big fragments of the
/// best files are sent whole rather than as skeletons.
const SIZE_OFFSET: f64 = 50.0;
// The best fragment of each file also carries the value of showing that file at all (sent
// full or as a skeleton): the [`Feature::PresenceValue`] share of its relative score squared.
// The fourth power alone leaves files ranked lower invisible and lost gold-file recall.
/// Fragments scoring below this share of the best score stay out of the knapsack.
const MIN_RELATIVE: f64 = 0.03;

/// Settings of a selection.
#[derive(Debug, Clone)]
pub struct SelectOptions {
    /// Fragments that must be sent in full: a chunk id, a path, or a path prefix ending in `/`.
    pub pinned: Vec<String>,
    /// How many of the best-scoring fragments enter the knapsack.
    pub max_candidates: usize,
    /// Ranking weights (the hand-tuned defaults, or learned ones).
    pub weights: RankingWeights,
}

impl Default for SelectOptions {
    fn default() -> Self {
        Self {
            pinned: Vec::new(),
            max_candidates: 300,
            weights: RankingWeights::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    #[error("the budget is 0 tokens; give a positive --budget")]
    ZeroBudget,
    #[error(
        "pinned content needs {pinned_tokens} tokens but the budget is {budget}: raise --budget or pin less ({chunks})"
    )]
    PinnedOverBudget {
        pinned_tokens: usize,
        budget: usize,
        chunks: String,
    },
    #[error(
        "pin {pin} matches no fragment of the index (pin a chunk id like src/lib.rs#L1-20, a path, or a dir/)"
    )]
    UnknownPin { pin: String },
    #[error(
        "pin {pin} names a file the index skipped ({reason}); a skipped file cannot be selected"
    )]
    SkippedPin { pin: String, reason: String },
    #[error("the query is empty; describe what you are looking for")]
    EmptyQuery,
}

/// One fragment's fate in a selection.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ManifestEntry {
    pub chunk_id: String,
    pub path: String,
    pub kind: String,
    /// `None` when omitted.
    pub resolution: Option<Resolution>,
    pub score: f64,
    /// Why the fragment scored what it did (and why it was chosen).
    pub reason: String,
    /// Tokens this fragment's piece adds to the rendered context (0 when omitted).
    pub tokens: usize,
    /// Tokens of the fragment's exact bytes.
    pub full_tokens: usize,
}

/// The result of [`select`].
#[derive(Debug, Clone)]
pub struct Selection {
    pub query: String,
    pub budget: usize,
    /// The exact text to send.
    pub rendered: String,
    /// Exact token count of `rendered`.
    pub tokens: usize,
    /// Every fragment of the index, best score first (ties by path, then offset).
    pub manifest: Vec<ManifestEntry>,
    /// The exact bytes of each manifest entry (same order).
    texts: Vec<(Arc<str>, Range<usize>)>,
    /// Encoding of every count above and of the manifest's `full_tokens`.
    encoding: Encoding,
    /// Whether `tokens` was summed from the index's counts (no tokenizer needed).
    counted_from_index: bool,
}

impl Selection {
    /// Whether [`Selection::tokens`] was summed from the index's exact counts (seams the
    /// tokenizer splits at anyway) rather than counted by loading the tokenizer.
    pub fn counted_from_index(&self) -> bool {
        self.counted_from_index
    }

    /// Chunks for [`super::CommitStore::commit`]: every fragment of the index, omitted ones with
    /// resolution `None`, so everything stays recoverable.
    pub fn chunk_inputs(&self) -> Vec<ChunkInput> {
        self.manifest
            .iter()
            .zip(&self.texts)
            .map(|(entry, (text, range))| ChunkInput {
                chunk_id: entry.chunk_id.clone(),
                source: entry.path.clone(),
                full_text: text[range.clone()].to_string(),
                resolution: entry.resolution,
                sent_tokens: entry.tokens,
                // The index counted each fragment's exact bytes already.
                full_tokens: Some((self.encoding, entry.full_tokens)),
            })
            .collect()
    }

    /// Entries that were sent (in any resolution).
    pub fn sent(&self) -> impl Iterator<Item = &ManifestEntry> {
        self.manifest.iter().filter(|e| e.resolution.is_some())
    }

    /// The manifest entry of a chunk.
    pub fn entry(&self, chunk_id: &str) -> Option<&ManifestEntry> {
        self.manifest.iter().find(|e| e.chunk_id == chunk_id)
    }
}

// ---------------------------------------------------------------------------------------------
// Knapsack

#[derive(Debug, Clone, Copy)]
struct Choice {
    kind: PieceKind,
    cost: usize,
    value: f64,
}

struct Candidate {
    fragment: u32,
    pinned: bool,
    options: Vec<Choice>,
}

fn resolution_of(kind: PieceKind) -> Resolution {
    match kind {
        PieceKind::Full => Resolution::Full,
        PieceKind::Skeleton => Resolution::Skeleton,
        PieceKind::Reference => Resolution::Reference,
    }
}

/// Exact multiple-choice knapsack over scaled costs. Returns, per candidate, the index of the
/// chosen option or `None`.
fn knapsack(candidates: &[Candidate], capacity: usize) -> Vec<Option<usize>> {
    let scale = capacity.div_ceil(DP_CAPACITY).max(1);
    let cells = capacity / scale;
    let mut best = vec![0.0f64; cells + 1];
    // choice[i][c]: option picked for candidate i at capacity c (0 = none).
    let mut choice = vec![0u8; candidates.len() * (cells + 1)];
    for (i, candidate) in candidates.iter().enumerate() {
        let row = &mut choice[i * (cells + 1)..(i + 1) * (cells + 1)];
        let scaled: Vec<(usize, f64)> = candidate
            .options
            .iter()
            .map(|o| (o.cost.div_ceil(scale), o.value))
            .collect();
        for c in (0..=cells).rev() {
            let mut value = best[c];
            let mut picked = 0u8;
            for (k, &(cost, option_value)) in scaled.iter().enumerate() {
                if cost <= c {
                    let candidate_value = best[c - cost] + option_value;
                    if candidate_value > value + 1e-12 {
                        value = candidate_value;
                        picked = (k + 1) as u8;
                    }
                }
            }
            best[c] = value;
            row[c] = picked;
        }
    }
    let mut picks = vec![None; candidates.len()];
    let mut c = cells;
    for i in (0..candidates.len()).rev() {
        let picked = choice[i * (cells + 1) + c];
        if picked > 0 {
            let k = usize::from(picked - 1);
            picks[i] = Some(k);
            c -= candidates[i].options[k].cost.div_ceil(scale);
        }
    }
    picks
}

/// Scores `index` against `query` and selects what to send within `budget` tokens.
pub fn select(
    index: &Index,
    query: &str,
    budget: usize,
    options: &SelectOptions,
) -> Result<Selection, SelectError> {
    if budget == 0 {
        return Err(SelectError::ZeroBudget);
    }
    if query.trim().is_empty() {
        return Err(SelectError::EmptyQuery);
    }
    let tokenizer = Tokenizer::new(index.encoding);
    let pinned = pinned_fragments(index, &options.pinned)?;
    let scores = score_with(index, query, &options.weights);
    let skeleton_value = options.weights.get(Feature::SkeletonValue);
    let presence_value = options.weights.get(Feature::PresenceValue);
    let mut ranked: Vec<(u32, f64)> = scores.iter().map(|(f, s)| (*f, s.score)).collect();
    sort_by_score(index, &mut ranked);
    let max_score = ranked.first().map_or(1.0, |r| r.1).max(1e-9);

    let full_cost = |f: &Fragment| {
        f.header_tokens + f.text_tokens + usize::from(!index.text(f).ends_with('\n'))
    };
    let skeleton_word = SKELETON_WORD_TOKENS;
    let mut pinned_tokens = 0;
    let mut candidates: Vec<Candidate> = Vec::new();
    for &fragment in &pinned {
        let f = &index.fragments[fragment as usize];
        pinned_tokens += full_cost(f);
        candidates.push(Candidate {
            fragment,
            pinned: true,
            options: Vec::new(),
        });
    }
    // The sum counts a header per fragment; neighbouring pinned fragments render as one block
    // under one header, so a sum over the budget is checked against the rendering itself (a
    // pinned file of 7,385 tokens was refused at any budget under 7,976).
    if pinned_tokens > budget {
        let only_pinned: HashMap<u32, (PieceKind, f64, usize)> = pinned
            .iter()
            .map(|&f| (f, (PieceKind::Full, f64::INFINITY, 0)))
            .collect();
        let rendered = render(index, &only_pinned);
        pinned_tokens = rendered
            .exact
            .unwrap_or_else(|| tokenizer.count(&rendered.text));
    }
    if pinned_tokens > budget {
        return Err(SelectError::PinnedOverBudget {
            pinned_tokens,
            budget,
            chunks: pinned_list(index, &pinned),
        });
    }
    let pinned_set: HashSet<u32> = pinned.iter().copied().collect();
    let weighted: Vec<(u32, f64)> = ranked
        .iter()
        // Below MIN_RELATIVE of the best score a fragment's value is noise next to the fragments
        // above it; leaving it out keeps the DP small.
        .filter(|(f, s)| *s > 0.0 && *s > max_score * MIN_RELATIVE && !pinned_set.contains(f))
        .take(options.max_candidates)
        .map(|&(f, s)| (f, s / max_score))
        .collect();
    // The first (best) fragment of each file carries the file's presence value.
    let mut carriers: HashSet<u32> = HashSet::new();
    let mut files_seen: HashSet<usize> = HashSet::new();
    for &(fragment, _) in &weighted {
        if files_seen.insert(index.fragments[fragment as usize].file) {
            carriers.insert(fragment);
        }
    }
    for &(fragment, relative) in &weighted {
        let f = &index.fragments[fragment as usize];
        let size_factor = ((f.text_tokens as f64 + SIZE_OFFSET) / 100.0).sqrt();
        let weight = relative.powi(RELEVANCE_POWER) * 1000.0;
        let present = if carriers.contains(&fragment) {
            presence_value * relative * relative * 1000.0
        } else {
            0.0
        };
        let mut choices = vec![Choice {
            kind: PieceKind::Full,
            cost: full_cost(f),
            value: weight * size_factor + present,
        }];
        if f.skeleton.is_some() {
            choices.push(Choice {
                kind: PieceKind::Skeleton,
                cost: f.header_tokens + skeleton_word + f.skeleton_tokens,
                value: weight * skeleton_value + present,
            });
        }
        choices.push(Choice {
            kind: PieceKind::Reference,
            cost: f.reference_tokens,
            value: weight * REFERENCE_VALUE,
        });
        candidates.push(Candidate {
            fragment,
            pinned: false,
            options: choices,
        });
    }
    let free: Vec<usize> = (0..candidates.len())
        .filter(|&i| !candidates[i].pinned)
        .collect();
    let free_candidates: Vec<Candidate> = free
        .iter()
        .map(|&i| Candidate {
            fragment: candidates[i].fragment,
            pinned: false,
            options: candidates[i].options.clone(),
        })
        .collect();
    let picks = knapsack(&free_candidates, budget - pinned_tokens);
    // chosen: fragment → (piece kind, value)
    let mut chosen: HashMap<u32, (PieceKind, f64, usize)> = HashMap::new();
    for &fragment in &pinned {
        chosen.insert(fragment, (PieceKind::Full, f64::INFINITY, 0));
    }
    for (candidate, pick) in free_candidates.iter().zip(&picks) {
        if let Some(k) = pick {
            let option = candidate.options[*k];
            chosen.insert(candidate.fragment, (option.kind, option.value, *k));
        }
    }

    // Budget the knapsack left unused is spent on fragments not sent yet: scored ones first
    // (best first), then the rest in document order, so a context that fits is sent whole and
    // an unmatched query still gets the top of the documents. Fill pieces carry no value, so
    // the fitting loop below drops them before anything the query chose.
    let mut filled: HashSet<u32> = HashSet::new();
    // Fragments sent whole that follow each other in a file render as one verbatim block under
    // the first one's header (see `render`): a header is charged only where a block starts.
    // Charging one per fragment left a context that fits unsent.
    let is_full = |chosen: &HashMap<u32, (PieceKind, f64, usize)>, n: u32| {
        pinned_set.contains(&n) || chosen.get(&n).is_some_and(|c| c.0 == PieceKind::Full)
    };
    let contiguous = |a: u32, b: u32| {
        let (Some(x), Some(y)) = (
            index.fragments.get(a as usize),
            index.fragments.get(b as usize),
        ) else {
            return false;
        };
        x.file == y.file && x.bytes.end == y.bytes.start
    };
    let continues = |chosen: &HashMap<u32, (PieceKind, f64, usize)>, n: u32| {
        n.checked_sub(1)
            .is_some_and(|p| contiguous(p, n) && is_full(chosen, p))
    };
    let mut estimate: usize = pinned_tokens
        + chosen
            .iter()
            .filter(|(f, _)| !pinned_set.contains(f))
            .map(|(f, c)| {
                let fragment = &index.fragments[*f as usize];
                match c.0 {
                    PieceKind::Full if continues(&chosen, *f) => {
                        full_cost(fragment) - fragment.header_tokens
                    }
                    PieceKind::Full => full_cost(fragment),
                    PieceKind::Skeleton => {
                        fragment.header_tokens + skeleton_word + fragment.skeleton_tokens
                    }
                    _ => fragment.reference_tokens,
                }
            })
            .sum::<usize>();
    // Scored fragments best first, then the rest in document order (the fill and the top-up).
    let fill_order = || {
        ranked.iter().filter(|r| r.1 > 0.0).map(|r| r.0).chain(
            (0..index.fragments.len() as u32)
                .filter(|f| scores.get(f).is_none_or(|s| s.score <= 0.0)),
        )
    };
    for fragment in fill_order() {
        if estimate >= budget {
            break;
        }
        if chosen.contains_key(&fragment) {
            continue;
        }
        let f = &index.fragments[fragment as usize];
        let mut cost = full_cost(f);
        if continues(&chosen, fragment) {
            cost -= f.header_tokens;
        }
        // The block after it, sent whole, then continues this one and loses its header.
        let next = fragment + 1;
        let saved = if contiguous(fragment, next) && is_full(&chosen, next) {
            index.fragments[next as usize].header_tokens
        } else {
            0
        };
        if (estimate + cost).saturating_sub(saved) <= budget {
            chosen.insert(fragment, (PieceKind::Full, 0.0, usize::MAX));
            filled.insert(fragment);
            estimate = (estimate + cost).saturating_sub(saved);
        }
    }

    // Render, count for real, and downgrade the least valuable choice until it fits.
    let options_of: HashMap<u32, &Vec<Choice>> = free_candidates
        .iter()
        .map(|c| (c.fragment, &c.options))
        .collect();
    let mut counted_from_index;
    let (mut rendered, mut tokens, mut pieces) = loop {
        let Rendered {
            text: rendered,
            pieces,
            exact,
        } = render(index, &chosen);
        let tokens = exact.unwrap_or_else(|| tokenizer.count(&rendered));
        if tokens <= budget {
            counted_from_index = exact.is_some();
            break (rendered, tokens, pieces);
        }
        let weakest = chosen
            .iter()
            .filter(|(f, _)| !pinned_set.contains(f))
            .min_by(|a, b| (a.1.1).total_cmp(&b.1.1).then(a.0.cmp(b.0)))
            .map(|(f, c)| (*f, *c));
        let Some((fragment, (_, _, k))) = weakest else {
            return Err(SelectError::PinnedOverBudget {
                pinned_tokens: tokens,
                budget,
                chunks: pinned_list(index, &pinned),
            });
        };
        let choices = options_of.get(&fragment).map_or(&[][..], |c| c.as_slice());
        if let Some(next) = choices.get(k.saturating_add(1)) {
            chosen.insert(fragment, (next.kind, next.value, k + 1));
        } else {
            chosen.remove(&fragment);
        }
    };

    // Top-up: the estimate over-counts what BPE merges at piece seams save, so budget can be
    // left with a fragment unsent that would fit. Fragments that might fit are tried against the
    // real count, in fill order, a bounded number of times.
    const TOP_UP_TRIES: usize = 32;
    let mut tries = 0;
    for fragment in fill_order() {
        if tokens >= budget || tries >= TOP_UP_TRIES {
            break;
        }
        let f = &index.fragments[fragment as usize];
        if chosen.contains_key(&fragment)
            || full_cost(f).saturating_sub(f.header_tokens) > budget - tokens
        {
            continue;
        }
        tries += 1;
        chosen.insert(fragment, (PieceKind::Full, 0.0, usize::MAX));
        let attempt = render(index, &chosen);
        let counted = attempt
            .exact
            .unwrap_or_else(|| tokenizer.count(&attempt.text));
        if counted <= budget {
            filled.insert(fragment);
            counted_from_index = attempt.exact.is_some();
            (rendered, tokens, pieces) = (attempt.text, counted, attempt.pieces);
        } else {
            chosen.remove(&fragment);
        }
    }

    // Scored fragments first (already ranked), then the rest in index order, which is path
    // and offset order: the same order a full sort would give, without sorting everything.
    let mut order: Vec<(u32, f64)> = Vec::with_capacity(index.fragments.len());
    order.extend(ranked.iter().filter(|r| r.1 > 0.0).copied());
    order.extend(
        (0..index.fragments.len() as u32)
            .filter(|f| scores.get(f).is_none_or(|s| s.score <= 0.0))
            .map(|f| (f, 0.0)),
    );
    let mut manifest = Vec::with_capacity(order.len());
    let mut texts = Vec::with_capacity(order.len());
    for (fragment, fragment_score) in order {
        let f = &index.fragments[fragment as usize];
        let resolution = chosen.get(&fragment).map(|c| resolution_of(c.0));
        let mut reason = scores
            .get(&fragment)
            .map(|s| s.reason.join("; "))
            .unwrap_or_else(|| "no query term".to_string());
        if filled.contains(&fragment) {
            reason = format!("{reason}; fills budget left after the query's fragments");
        }
        if pinned_set.contains(&fragment) {
            reason = format!("pinned; {reason}");
        }
        manifest.push(ManifestEntry {
            chunk_id: f.chunk_id.clone(),
            path: index.path(f).to_string(),
            kind: f.kind.as_str().to_string(),
            resolution,
            score: (fragment_score * 1000.0).round() / 1000.0,
            reason,
            tokens: pieces.get(&fragment).copied().unwrap_or(0),
            full_tokens: f.text_tokens,
        });
        texts.push((index.files[f.file].text.clone(), f.bytes.clone()));
    }
    Ok(Selection {
        query: query.to_string(),
        budget,
        rendered,
        tokens,
        manifest,
        texts,
        encoding: index.encoding,
        counted_from_index,
    })
}

/// Tokens of `" skeleton"`, the word a skeleton piece's header adds to a full piece's header
/// (one token in both encodings; checked against the tokenizers in the tests).
const SKELETON_WORD_TOKENS: usize = 1;

/// The rendered text, each piece's tokens, and the text's exact token count when the index's
/// counts give it (`None`: count the text).
struct Rendered {
    text: String,
    pieces: HashMap<u32, usize>,
    exact: Option<usize>,
}

/// Renders chosen pieces in path and offset order.
///
/// The index holds the exact count of every fragment's text, header, skeleton and reference
/// line, and the correction of each seam where they join ([`super::seams`]): the text's count
/// is their sum, exactly, and loading the tokenizer's rank tables (about 0.1 s of CPU, most of
/// a warm `svc context select`) is not needed at all. A seam without a known correction makes
/// the caller count the text.
fn render(index: &Index, chosen: &HashMap<u32, (PieceKind, f64, usize)>) -> Rendered {
    let mut order: Vec<u32> = chosen.keys().copied().collect();
    order.sort_by(|a, b| {
        let fa = &index.fragments[*a as usize];
        let fb = &index.fragments[*b as usize];
        index
            .path(fa)
            .cmp(index.path(fb))
            .then(fa.bytes.start.cmp(&fb.bytes.start))
    });
    let mut rendered = String::new();
    let mut pieces = HashMap::new();
    let mut exact = Some(0usize);
    let tokenizer = Tokenizer::new(index.encoding);
    // The previous piece when it was a full fragment: (file, end byte).
    let mut previous_full: Option<(usize, usize)> = None;
    for fragment in order {
        let f = &index.fragments[fragment as usize];
        let kind = chosen[&fragment].0;
        // Adjacent full fragments of one file continue one verbatim block under the first
        // fragment's header: the file's text stays contiguous (quotable, as the model would see
        // it in the file) and the repeated headers' tokens are saved.
        let continues = kind == PieceKind::Full && previous_full == Some((f.file, f.bytes.start));
        previous_full = (kind == PieceKind::Full).then_some((f.file, f.bytes.end));
        let add = |exact: Option<usize>, tokens: Option<i64>| {
            exact
                .zip(tokens)
                .and_then(|(n, t)| usize::try_from(n as i64 + t).ok())
        };
        if continues {
            let text = index.text(f);
            let joined = f
                .seams
                .join
                .filter(|_| text.ends_with('\n'))
                .map(|c| f.text_tokens as i64 + i64::from(c));
            exact = add(exact, joined);
            rendered.push_str(text);
            if !text.ends_with('\n') {
                rendered.push('\n');
            }
            pieces.insert(fragment, f.text_tokens + usize::from(!text.ends_with('\n')));
            continue;
        }
        let Some(piece) = index.piece(f, kind) else {
            continue;
        };
        // A piece starts with `>>>` after a line break: its tokens add to what precedes it.
        let (tokens, known) = match kind {
            PieceKind::Full => {
                let text = index.text(f);
                let known = f
                    .seams
                    .header
                    .filter(|_| text.ends_with('\n'))
                    .map(|c| (f.header_tokens + f.text_tokens) as i64 + i64::from(c));
                (
                    f.header_tokens + f.text_tokens + usize::from(!text.ends_with('\n')),
                    known,
                )
            }
            PieceKind::Skeleton => {
                let skeleton = f.skeleton.as_deref().unwrap_or_default();
                // `" skeleton"` follows the chunk id's last line number: a split either way.
                let known = f
                    .seams
                    .skeleton
                    .filter(|_| {
                        f.chunk_id.ends_with(|c: char| c.is_ascii_digit())
                            && skeleton.ends_with('\n')
                    })
                    .map(|c| {
                        (f.header_tokens + SKELETON_WORD_TOKENS + f.skeleton_tokens) as i64
                            + i64::from(c)
                    });
                match known.and_then(|n| usize::try_from(n).ok()) {
                    Some(n) => (n, known),
                    None => (tokenizer.count(&piece), None),
                }
            }
            PieceKind::Reference => (f.reference_tokens, Some(f.reference_tokens as i64)),
        };
        exact = if rendered.is_empty() || rendered.ends_with('\n') {
            add(exact, known)
        } else {
            None
        };
        pieces.insert(fragment, tokens);
        rendered.push_str(&piece);
    }
    Rendered {
        text: rendered,
        pieces,
        exact,
    }
}

fn pinned_fragments(index: &Index, pins: &[String]) -> Result<Vec<u32>, SelectError> {
    let mut out = Vec::new();
    for pin in pins {
        let before = out.len();
        for (number, fragment) in index.fragments.iter().enumerate() {
            let path = index.path(fragment);
            let hit = fragment.chunk_id == *pin
                || path == pin
                || (pin.ends_with('/') && path.starts_with(pin.as_str()));
            if hit {
                out.push(number as u32);
            }
        }
        if out.len() == before {
            let pin_path = pin.split_once("#L").map_or(pin.as_str(), |(path, _)| path);
            if let Some(skipped) = index.stats.skipped.iter().find(|s| s.path == pin_path) {
                return Err(SelectError::SkippedPin {
                    pin: pin.clone(),
                    reason: skipped.reason.clone(),
                });
            }
            return Err(SelectError::UnknownPin { pin: pin.clone() });
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

fn pinned_list(index: &Index, pinned: &[u32]) -> String {
    let mut names: Vec<&str> = pinned
        .iter()
        .map(|f| index.fragments[*f as usize].chunk_id.as_str())
        .collect();
    if names.len() > 5 {
        let more = names.len() - 5;
        names.truncate(5);
        return format!("{} and {more} more", names.join(", "));
    }
    names.join(", ")
}

/// Commits a selection of `index` (every fragment, sent or omitted) with the parameters that
/// produced it, so the `ctx_` id is reproducible and every omitted chunk recoverable.
pub fn commit_selection(
    index: &Index,
    selection: &Selection,
    options: &SelectOptions,
    store: &CommitStore,
) -> Result<ContextReceipt, CommitError> {
    let root = index
        .root
        .as_ref()
        .map(|root| root.canonicalize().unwrap_or_else(|_| root.clone()));
    let mut parameters = serde_json::json!({
        "query": selection.query,
        "budget": selection.budget,
        "root": root.map(|r| r.display().to_string()),
        "pinned": options.pinned,
        "encoding": index.encoding.as_str(),
    });
    // Only weights other than the defaults are named, so commits made with the defaults keep
    // the ids they always had.
    if options.weights != RankingWeights::default() {
        parameters["ranking_weights"] = serde_json::to_value(options.weights).unwrap_or_default();
    }
    store.commit(
        &selection.chunk_inputs(),
        parameters,
        &selection.rendered,
        &Tokenizer::new(index.encoding),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Index {
        let lib = "use std::collections::HashMap;\n\n/// Parses a duration like `3s` into seconds.\npub fn parse_duration(text: &str) -> Option<u64> {\n    let digits = text.trim_end_matches('s');\n    digits.parse().ok()\n}\n\n/// Formats seconds for humans.\npub fn format_seconds(seconds: u64) -> String {\n    format!(\"{seconds}s\")\n}\n\npub struct Cache {\n    entries: HashMap<String, u64>,\n}\n\nimpl Cache {\n    /// Looks a key up, parsing durations on a miss.\n    pub fn lookup(&mut self, key: &str) -> Option<u64> {\n        if let Some(v) = self.entries.get(key) {\n            return Some(*v);\n        }\n        let parsed = parse_duration(key)?;\n        self.entries.insert(key.to_string(), parsed);\n        Some(parsed)\n    }\n}\n";
        let other = "def levenshtein(a, b):\n    \"\"\"Edit distance between two strings.\"\"\"\n    rows = range(len(b) + 1)\n    for i, ca in enumerate(a):\n        pass\n    return 0\n\n\ndef shout(text):\n    return text.upper()\n";
        let mut docs = vec![
            ("src/time.rs".to_string(), lib.to_string()),
            ("tools/text.py".to_string(), other.to_string()),
        ];
        for i in 0..30 {
            docs.push((
                format!("src/filler_{i:02}.rs"),
                format!(
                    "/// Filler {i}.\npub fn filler_{i}(x: u32) -> u32 {{\n    let y = x * {i};\n    y + 1\n}}\n"
                ),
            ));
        }
        Index::from_documents(&docs)
    }

    #[test]
    fn definition_outranks_mention() {
        let index = corpus();
        let selection =
            select(&index, "parse duration", 4000, &SelectOptions::default()).expect("select");
        assert!(
            selection.manifest[0]
                .chunk_id
                .starts_with("src/time.rs#L3-"),
            "{:?}",
            selection.manifest[0]
        );
        assert_eq!(selection.manifest[0].resolution, Some(Resolution::Full));
        assert!(
            selection.manifest[0]
                .reason
                .contains("defines parse_duration")
        );
    }

    /// Found through the harness: a query matching no fragment sent an empty context, and a
    /// context that fit the budget was not sent whole.
    #[test]
    fn unmatched_query_fills_the_budget_in_document_order() {
        let index = corpus();
        let selection = select(
            &index,
            "zebra quokka xylophone",
            200,
            &SelectOptions::default(),
        )
        .expect("select");
        assert!(!selection.rendered.is_empty());
        assert!(selection.tokens <= 200);
        let first_sent = selection.sent().next().expect("something is sent");
        assert!(first_sent.reason.contains("fills budget left"));
        let first_fragment = &index.fragments[0];
        assert_eq!(first_sent.chunk_id, first_fragment.chunk_id);
    }

    /// Found through the harness: a whole file sent in full was split by per-fragment headers,
    /// so its text never appeared contiguously.
    #[test]
    fn a_context_that_fits_is_sent_whole() {
        let index = corpus();
        let whole =
            select(&index, "parse duration", 100_000, &SelectOptions::default()).expect("select");
        assert!(
            whole
                .manifest
                .iter()
                .all(|e| e.resolution == Some(Resolution::Full)),
            "every fragment is sent in full when the budget allows"
        );
        for file in &index.files {
            assert!(
                whole.rendered.contains(&*file.text),
                "a file sent in full is one contiguous block"
            );
        }
        // Regression (found by probing): the fill charged every fragment a header, also one that
        // continues a block sent whole, and could not see BPE merges at seams: at a budget of
        // exactly the whole rendering a fragment was left out.
        let exact = select(
            &index,
            "parse duration",
            whole.tokens,
            &SelectOptions::default(),
        )
        .expect("select");
        assert_eq!(exact.rendered, whole.rendered);
    }

    #[test]
    fn rendered_tokens_never_exceed_the_budget() {
        let index = corpus();
        let tokenizer = Tokenizer::default();
        for budget in (1..400).step_by(7).chain([500, 800, 1200, 5000]) {
            let selection = select(
                &index,
                "edit distance strings cache lookup",
                budget,
                &SelectOptions::default(),
            )
            .expect("select");
            assert_eq!(selection.tokens, tokenizer.count(&selection.rendered));
            assert!(
                selection.tokens <= budget,
                "budget {budget}: {}",
                selection.tokens
            );
            assert_eq!(selection.manifest.len(), index.fragments.len());
            let inputs = selection.chunk_inputs();
            assert_eq!(inputs.len(), index.fragments.len());
            // Commits reuse these counts for receipts, so they must be the exact counts.
            for input in &inputs {
                assert_eq!(
                    input.full_tokens,
                    Some((index.encoding, tokenizer.count(&input.full_text)))
                );
            }
        }
    }

    #[test]
    fn counts_summed_from_the_index_are_the_tokenizers_counts_on_real_sources() {
        // This repository's own sources and docs: Rust with doc comments, attributes and
        // nested impls, Markdown, TOML, Python and shell fixtures.
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut docs = Vec::new();
        for dir in [
            "src/context",
            "src/witness",
            "fixtures",
            "workloads/qa-builtin",
        ] {
            for entry in walkdir_files(&root.join(dir)) {
                if let Ok(text) = std::fs::read_to_string(&entry) {
                    let name = entry.strip_prefix(root).unwrap_or(&entry);
                    docs.push((name.display().to_string(), text));
                }
            }
        }
        docs.push((
            "README.md".into(),
            std::fs::read_to_string(root.join("README.md")).expect("README"),
        ));
        let index = Index::from_documents(&docs);
        let tokenizer = Tokenizer::default();
        assert_eq!(tokenizer.count(" skeleton"), SKELETON_WORD_TOKENS);
        assert_eq!(
            Tokenizer::new(Encoding::Cl100kBase).count(" skeleton"),
            SKELETON_WORD_TOKENS
        );
        let (mut summed, mut all) = (0, 0);
        for query in [
            "commit receipt fingerprint",
            "witness claim contradicted number",
            "skeleton doc comment attribute",
            "budget knapsack",
        ] {
            for budget in [300, 1_000, 4_000, 16_000] {
                let selection =
                    select(&index, query, budget, &SelectOptions::default()).expect("select");
                assert_eq!(
                    selection.tokens,
                    tokenizer.count(&selection.rendered),
                    "{query} at {budget}"
                );
                all += 1;
                summed += usize::from(selection.counted_from_index);
            }
        }
        // The fast path must be the usual one, or it saves nothing.
        assert!(
            summed * 4 >= all * 3,
            "{summed} of {all} summed from the index"
        );
    }

    #[test]
    fn one_line_items_before_a_blank_line_are_summed_from_the_index() {
        // `mod job;` has no line start of its own where the tokens split, and `;\n\n` is one
        // piece: the seam after it needed the tokenizer until its whole line became the window
        // (fd's `src/exec/mod.rs` made every warm select of fd load the rank tables).
        let text = "mod command;\nmod job;\n\nuse std::io;\nuse std::fmt;\n\n/// Runs.\npub fn run() -> u8 {\n    1\n}\n";
        let index = Index::from_documents(&[("src/exec/mod.rs".to_string(), text.to_string())]);
        let one_line = index
            .fragments
            .iter()
            .position(|f| f.lines == (2, 2))
            .expect("`mod job;` is a fragment of its own");
        assert!(index.fragments[one_line + 1].seams.join.is_some());
        let tokenizer = Tokenizer::default();
        for budget in [40, 200] {
            let selection = select(&index, "run job command", budget, &SelectOptions::default())
                .expect("select");
            assert_eq!(selection.tokens, tokenizer.count(&selection.rendered));
            assert!(selection.counted_from_index(), "at {budget}");
        }
    }

    fn walkdir_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for entry in entries.flatten() {
                let path = entry.path();
                if path.is_dir() {
                    stack.push(path);
                } else {
                    out.push(path);
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn deterministic_and_pinning() {
        let index = corpus();
        let options = SelectOptions {
            pinned: vec!["tools/text.py".into()],
            ..SelectOptions::default()
        };
        let a = select(&index, "format seconds", 300, &options).expect("a");
        let b = select(&index, "format seconds", 300, &options).expect("b");
        assert_eq!(a.rendered, b.rendered);
        assert_eq!(a.manifest, b.manifest);
        for entry in a.manifest.iter().filter(|e| e.path == "tools/text.py") {
            assert_eq!(entry.resolution, Some(Resolution::Full));
        }
        assert!(matches!(
            select(&index, "x", 0, &options),
            Err(SelectError::ZeroBudget)
        ));
        assert!(matches!(
            select(&index, "format", 20, &options),
            Err(SelectError::PinnedOverBudget { .. })
        ));
        // Regression (found by probing): the check summed a header per pinned fragment, and
        // refused budgets the pinned file, rendered as one block, fits.
        let pinned = pinned_fragments(&index, &options.pinned).expect("pins");
        assert!(pinned.len() > 1, "a file of several fragments");
        let only: HashMap<u32, (PieceKind, f64, usize)> = pinned
            .iter()
            .map(|&f| (f, (PieceKind::Full, f64::INFINITY, 0)))
            .collect();
        let rendered = render(&index, &only);
        let exact = rendered
            .exact
            .unwrap_or_else(|| Tokenizer::new(index.encoding).count(&rendered.text));
        let summed: usize = pinned
            .iter()
            .map(|&f| {
                let f = &index.fragments[f as usize];
                f.header_tokens + f.text_tokens + usize::from(!index.text(f).ends_with('\n'))
            })
            .sum();
        assert!(exact < summed, "{exact} < {summed}");
        let fits = select(&index, "format", exact, &options).expect("fits at its own size");
        assert!(fits.tokens <= exact);
        let unknown = SelectOptions {
            pinned: vec!["nope.rs".into()],
            ..SelectOptions::default()
        };
        assert!(matches!(
            select(&index, "format", 100, &unknown),
            Err(SelectError::UnknownPin { .. })
        ));
    }

    /// Found on tasks mined from git history: a long, best-scoring function was sent as a
    /// skeleton while the budget went to many weakly matching fragments, and the lines a commit
    /// changed were in its body. A weaker file still shows up through its best fragment.
    #[test]
    fn the_best_long_fragment_is_sent_whole_and_weaker_files_still_appear() {
        let mut body = String::new();
        for i in 0..60 {
            body.push_str(&format!("    let step_{i} = retry_budget(attempt, {i});\n"));
        }
        let main = format!(
            "/// Retries a request with backoff until the retry budget is spent.\npub fn retry_with_backoff(attempt: u32) -> u32 {{\n{body}    attempt\n}}\n"
        );
        let mut docs = vec![("src/retry.rs".to_string(), main)];
        for i in 0..12 {
            docs.push((
                format!("src/weak_{i:02}.rs"),
                format!(
                    "/// Counts a retry of request {i}.\npub fn retry_request(request: u32) -> u32 {{\n    request + {i}\n}}\n\n/// Unrelated {i}.\npub fn other_{i}(x: u32) -> u32 {{\n    let y = x * 3;\n    let z = y + {i};\n    z - 1\n}}\n"
                ),
            ));
        }
        let index = Index::from_documents(&docs);
        let retry = index
            .fragments
            .iter()
            .find(|f| f.symbols.iter().any(|s| s == "retry_with_backoff"))
            .expect("defined");
        let budget = retry.text_tokens + retry.header_tokens + 120;
        let selection = select(
            &index,
            "retry a request with backoff",
            budget,
            &SelectOptions::default(),
        )
        .expect("select");
        assert!(selection.tokens <= budget);
        assert_eq!(
            selection.entry(&retry.chunk_id).and_then(|e| e.resolution),
            Some(Resolution::Full),
            "{:#?}",
            selection.manifest
        );
        let weak_files_shown: HashSet<&str> = selection
            .sent()
            .filter(|e| e.path.starts_with("src/weak_"))
            .map(|e| e.path.as_str())
            .collect();
        assert!(!weak_files_shown.is_empty(), "{:#?}", selection.manifest);
    }
}
