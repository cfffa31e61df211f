//! Prose: split into sentences (Markdown headings and list items are units of their own) and keep
//! the sentences that carry the most information per token: query terms first, then numbers and
//! entities (capitalised names, acronyms, identifiers), headings always first of all.

use std::collections::HashSet;
use std::ops::Range;

use super::units::{self, Minimum, Style, Unit};
use super::{Part, thousands};
use crate::text::stopwords;
use crate::tokens::Tokenizer;

/// Sentence units: the Markdown-aware partition of the text toolkit.
fn sentences(source: &str) -> Vec<Unit> {
    crate::text::sentences::markdown(source)
        .into_iter()
        .map(|piece| Unit {
            start: piece.start,
            end: piece.end,
            first_line: piece.first_line,
            last_line: piece.last_line,
            piece: false,
        })
        .collect()
}

fn score(sentence: &str, query: &HashSet<String>) -> f64 {
    let trimmed = sentence.trim();
    if trimmed.starts_with('#') {
        return 1e9;
    }
    let mut value = 1.0;
    let mut terms = HashSet::new();
    let mut numbers = 0;
    let mut entities = 0;
    for (position, word) in trimmed
        .split(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | ':' | '(' | ')' | '"'))
        .filter(|w| !w.is_empty())
        .enumerate()
    {
        let bare = word.trim_matches(|c: char| !c.is_alphanumeric() && c != '_');
        if bare.is_empty() {
            continue;
        }
        let lower = bare.to_lowercase();
        if query.contains(&lower) {
            terms.insert(lower);
        }
        if bare.bytes().any(|b| b.is_ascii_digit()) {
            numbers += 1;
        } else if (position > 0 && bare.chars().next().is_some_and(char::is_uppercase))
            || (bare.len() > 1 && bare.chars().all(|c| c.is_uppercase() || c.is_ascii_digit()))
            || bare.contains('_')
            || word.contains("::")
            || word.contains('/')
            || word.starts_with('`')
        {
            entities += 1;
        }
    }
    value += 10.0 * terms.len() as f64 + 3.0 * numbers.min(4) as f64 + 2.0 * entities.min(5) as f64;
    value
}

/// Tokens one marker costs, roughly (`[… 12 sentences elided · recover S40-51]`).
const MARKER_COST: f64 = 14.0;

#[derive(PartialEq)]
struct Priority(f64, std::cmp::Reverse<usize>, u32);

impl Eq for Priority {}

impl PartialOrd for Priority {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Priority {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0
            .total_cmp(&other.0)
            .then(self.1.cmp(&other.1))
            .then(self.2.cmp(&other.2))
    }
}

/// Keep order by value per token, where a sentence's cost includes the marker it adds or
/// saves: keeping a sentence inside a gap splits it (one more marker), keeping the last
/// sentence of a gap removes a marker. This keeps selections contiguous, so fewer tokens go to
/// markers. Sentences without value (repeats) come last, in text order.
fn greedy_order(units: &[Unit], values: &[f64]) -> Vec<usize> {
    use std::collections::BinaryHeap;
    let n = units.len();
    let mut kept = vec![false; n];
    let mut version = vec![0u32; n];
    let priority = |kept: &[bool], i: usize| {
        let left_gap = i > 0 && !kept[i - 1];
        let right_gap = i + 1 < n && !kept[i + 1];
        let markers = match (left_gap, right_gap) {
            (true, true) => 1.0,
            (false, false) => -1.0,
            _ => 0.0,
        };
        let cost = (units[i].end - units[i].start) as f64 / 4.0 + 1.0 + markers * MARKER_COST;
        values[i] / cost.max(0.5)
    };
    let mut heap = BinaryHeap::with_capacity(n);
    for i in (0..n).filter(|&i| values[i] > 0.0) {
        heap.push(Priority(priority(&kept, i), std::cmp::Reverse(i), 0));
    }
    let mut order = Vec::with_capacity(n);
    while let Some(Priority(_, std::cmp::Reverse(i), v)) = heap.pop() {
        if kept[i] || v != version[i] {
            continue;
        }
        kept[i] = true;
        order.push(i);
        for j in [i.wrapping_sub(1), i + 1] {
            if j < n && !kept[j] && values[j] > 0.0 {
                version[j] += 1;
                heap.push(Priority(
                    priority(&kept, j),
                    std::cmp::Reverse(j),
                    version[j],
                ));
            }
        }
    }
    order.extend((0..n).filter(|&i| !kept[i]));
    order
}

struct ProseStyle;

impl Style for ProseStyle {
    fn chunk_id(&self, _units: &[Unit], run: Range<usize>) -> String {
        if run.len() == 1 {
            format!("S{}", run.start + 1)
        } else {
            format!("S{}-{}", run.start + 1, run.end)
        }
    }

    fn locator(&self, units: &[Unit], run: Range<usize>) -> String {
        let noun = if run.len() == 1 {
            "sentence"
        } else {
            "sentences"
        };
        let lines = units::line_locator(units, run.clone());
        if run.len() == 1 {
            format!("{noun} {} ({lines})", run.start + 1)
        } else {
            format!("{noun} {}-{} ({lines})", run.start + 1, run.end)
        }
    }

    fn marker(&self, _source: &str, _units: &[Unit], run: Range<usize>, id: &str) -> String {
        let noun = if run.len() == 1 {
            "sentence"
        } else {
            "sentences"
        };
        format!("[… {} {noun} elided · recover {id}]", thousands(run.len()))
    }
}

pub(crate) fn reduce(
    source: &str,
    budget: usize,
    query: Option<&str>,
    tokenizer: &Tokenizer,
    prefix: &str,
) -> Result<(String, usize, Vec<Part>), Minimum> {
    let units = units::split_long(source, sentences(source), units::MAX_UNIT_BYTES);
    let query: HashSet<String> = query
        .unwrap_or_default()
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .map(str::to_lowercase)
        .filter(|w| w.len() >= 3 && !stopwords::is_english(w))
        .collect();
    let mut seen = HashSet::new();
    let scores: Vec<f64> = units
        .iter()
        .enumerate()
        .map(|(i, u)| {
            let text = &source[u.start..u.end];
            // A sentence said before adds nothing: it goes first.
            if !seen.insert(text.trim().to_lowercase()) {
                return -1.0;
            }
            let first_of_paragraph = i == 0
                || source[..u.start].ends_with("\n\n")
                || source[..u.start].ends_with("\n\r\n");
            score(text, &query) + if first_of_paragraph { 1.0 } else { 0.0 }
        })
        .collect();
    let order = greedy_order(&units, &scores);
    units::fit(
        source,
        &units,
        &order,
        budget,
        tokenizer,
        &ProseStyle,
        prefix,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_entities_and_query_terms_score_higher() {
        let query: HashSet<String> = ["latency".to_string()].into();
        let plain = score("It was quite a nice thing to see overall.", &query);
        let numbers = score("It took 42 ms at p99 on 3 hosts.", &query);
        let term = score("The latency was fine.", &query);
        assert!(numbers > plain);
        assert!(term > numbers);
    }
}
