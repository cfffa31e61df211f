//! Budgeted selection over ordered units (lines, sentences): keep the best-ranked units, replace
//! each run of dropped units by one marker naming its recovery handle, and find the largest kept
//! set whose rendering fits the budget.

use std::ops::Range;

use super::{Part, fits};
use crate::context::commit::Resolution;
use crate::tokens::Tokenizer;

/// The content cannot fit: even the minimum representation takes this many tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Minimum(pub usize);

/// A contiguous span of the source: `start..end` bytes, lines `first_line..=last_line` (1-based).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unit {
    pub start: usize,
    pub end: usize,
    pub first_line: usize,
    pub last_line: usize,
    /// A piece of an over-long line or sentence (see [`split_long`]).
    pub piece: bool,
}

/// Units longer than this many bytes are cut into pieces, so one giant line (minified code, a
/// JSON log record, a paragraph without punctuation) can still be partly kept.
pub(crate) const MAX_UNIT_BYTES: usize = 600;

/// Cuts units longer than `max` bytes into pieces of at most `max` bytes, at whitespace when
/// there is some in the second half of the piece, else at a char boundary.
pub(crate) fn split_long(source: &str, units: Vec<Unit>, max: usize) -> Vec<Unit> {
    if units.iter().all(|u| u.end - u.start <= max) {
        return units;
    }
    let mut out = Vec::with_capacity(units.len() + 16);
    for unit in units {
        if unit.end - unit.start <= max {
            out.push(unit);
            continue;
        }
        let mut start = unit.start;
        while unit.end - start > max {
            let mut cut = start + max;
            while !source.is_char_boundary(cut) {
                cut -= 1;
            }
            // The middle of the piece may fall inside a character too (found by fuzzing).
            let mut half = start + max / 2;
            while !source.is_char_boundary(half) {
                half += 1;
            }
            if half < cut
                && let Some(space) = source[half..cut].rfind([' ', '\t', '\n'])
            {
                cut = half + space + 1;
            }
            out.push(Unit {
                start,
                end: cut,
                piece: true,
                ..unit
            });
            start = cut;
        }
        out.push(Unit {
            start,
            end: unit.end,
            piece: true,
            ..unit
        });
    }
    out
}

/// How a kind names and marks a run of units.
pub(crate) trait Style {
    /// The chunk id of a run of units (kept or elided); ids of disjoint runs must differ.
    fn chunk_id(&self, units: &[Unit], run: Range<usize>) -> String;
    /// The human locator of a run.
    fn locator(&self, units: &[Unit], run: Range<usize>) -> String;
    /// The marker replacing an elided run (without the trailing line break; see `rest`).
    fn marker(&self, source: &str, units: &[Unit], run: Range<usize>, id: &str) -> String;
    /// Whether units after the first that did not fit may still be added when they fit; not
    /// for code, where a later unit (a doc line) can depend on a skipped one (its signature).
    fn fill_slack(&self) -> bool {
        true
    }
}

/// Splits `source` into line units (each with its line break).
pub(crate) fn lines(source: &str) -> Vec<Unit> {
    let mut units = Vec::new();
    let mut start = 0;
    let mut line = 1;
    for (i, byte) in source.bytes().enumerate() {
        if byte == b'\n' {
            units.push(Unit {
                start,
                end: i + 1,
                first_line: line,
                last_line: line,
                piece: false,
            });
            start = i + 1;
            line += 1;
        }
    }
    if start < source.len() {
        units.push(Unit {
            start,
            end: source.len(),
            first_line: line,
            last_line: line,
            piece: false,
        });
    }
    units
}

/// [`lines`] with over-long lines cut into pieces.
pub(crate) fn line_pieces(source: &str) -> Vec<Unit> {
    split_long(source, lines(source), MAX_UNIT_BYTES)
}

/// Runs of equal keep-flags, in order.
fn runs(kept: &[bool]) -> Vec<(Range<usize>, bool)> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=kept.len() {
        if i == kept.len() || kept[i] != kept[start] {
            out.push((start..i, kept[start]));
            start = i;
        }
    }
    out
}

fn render(source: &str, units: &[Unit], kept: &[bool], style: &dyn Style, prefix: &str) -> String {
    let mut text = String::new();
    for (run, keep) in runs(kept) {
        let start = units[run.start].start;
        let end = units[run.end - 1].end;
        if keep {
            text.push_str(&source[start..end]);
        } else {
            let id = format!("{prefix}{}", style.chunk_id(units, run.clone()));
            text.push_str(&style.marker(source, units, run.clone(), &id));
            // Keep the run's trailing whitespace shape (a line break or a space) so the text
            // around the marker stays laid out as before.
            let elided = &source[start..end];
            let trailing = &elided[elided.trim_end().len()..];
            match trailing.matches('\n').count() {
                0 if trailing.is_empty() => {}
                0 => text.push(' '),
                1 => text.push('\n'),
                _ => text.push_str("\n\n"),
            }
        }
    }
    text
}

/// How far over the budget the estimate of a slack candidate may be and still be tokenised:
/// summing separately counted pieces misses merges at their joins by a few tokens.
const SLACK_ESTIMATE_MARGIN: usize = 8;

/// The tokens of a rendering estimated as the sum of its pieces, each counted once: kept
/// units, and markers (with their trailing break) memoised by run. Close to the exact count
/// (BPE rarely merges across a line break), so it locates the fitting boundary cheaply.
struct Estimate<'a> {
    source: &'a str,
    units: &'a [Unit],
    tokenizer: &'a Tokenizer,
    style: &'a dyn Style,
    prefix: &'a str,
    unit_tokens: Vec<usize>,
    markers: std::collections::HashMap<(usize, usize), usize>,
}

impl<'a> Estimate<'a> {
    fn new(
        source: &'a str,
        units: &'a [Unit],
        tokenizer: &'a Tokenizer,
        style: &'a dyn Style,
        prefix: &'a str,
    ) -> Self {
        // The search's probes touch nearly every unit: count them all at once, over cores.
        let unit_tokens = {
            use rayon::prelude::*;
            units
                .par_iter()
                .map(|unit| tokenizer.count(&source[unit.start..unit.end]))
                .collect()
        };
        Self {
            source,
            units,
            tokenizer,
            style,
            prefix,
            unit_tokens,
            markers: std::collections::HashMap::new(),
        }
    }

    fn unit(&self, index: usize) -> usize {
        self.unit_tokens[index]
    }

    fn tokens(&mut self, kept: &[bool]) -> usize {
        let mut total = 0;
        for (run, keep) in runs(kept) {
            if keep {
                total += run.clone().map(|i| self.unit(i)).sum::<usize>();
            } else if let Some(&tokens) = self.markers.get(&(run.start, run.end)) {
                total += tokens;
            } else {
                let id = format!(
                    "{}{}",
                    self.prefix,
                    self.style.chunk_id(self.units, run.clone())
                );
                let marker = self.style.marker(self.source, self.units, run.clone(), &id);
                let tokens = self.tokenizer.count(&marker) + 1;
                self.markers.insert((run.start, run.end), tokens);
                total += tokens;
            }
        }
        total
    }
}

fn flags(len: usize, order: &[usize], n: usize) -> Vec<bool> {
    let mut kept = vec![false; len];
    for &i in &order[..n] {
        kept[i] = true;
    }
    kept
}

/// Keeps the first `n` units of `order` for the largest `n` whose rendering fits `budget`.
/// `order` must list every unit index once, most important first. Chunk ids (in markers and
/// parts) start with `prefix`.
pub(crate) fn fit(
    source: &str,
    units: &[Unit],
    order: &[usize],
    budget: usize,
    tokenizer: &Tokenizer,
    style: &dyn Style,
    prefix: &str,
) -> Result<(String, usize, Vec<Part>), Minimum> {
    debug_assert_eq!(order.len(), units.len());
    if units.is_empty() {
        return Err(Minimum(0));
    }
    let probe = |n: usize| {
        let kept = flags(units.len(), order, n);
        let text = render(source, units, &kept, style, prefix);
        let tokens = fits(tokenizer, &text, budget);
        (kept, text, tokens)
    };
    let (mut best_kept, mut best_text, tokens) = probe(0);
    let Some(mut best_tokens) = tokens else {
        return Err(Minimum(tokenizer.count(&best_text)));
    };
    // Tokenising a rendering costs as much as the rendering is long, and the bisection below
    // probes many. The estimate (each unit and marker counted once, summed) is within a few
    // tokens of the exact count, so a probe whose estimate is clearly under or over the budget
    // takes the decision the exact count would, without tokenising: the search follows the
    // same path as an all-exact one, and only the probes next to the boundary are tokenised.
    let mut estimate = Estimate::new(source, units, tokenizer, style, prefix);
    // Invariant: `lo` fits, `hi` does not (all units kept is the original, already over budget).
    let (mut lo, mut hi) = (0usize, units.len());
    let mut best_is_lo = true;
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        let kept = flags(units.len(), order, mid);
        let guess = estimate.tokens(&kept);
        // Summed pieces miss the merges at their joins: a token or two per run (measured up to
        // 25 over on the built-in workloads, never under).
        let margin = 16 + 3 * runs(&kept).len() + budget / 256;
        let fits_mid = if guess + margin <= budget {
            best_is_lo = false;
            true
        } else if guess > budget + margin {
            false
        } else {
            let (kept, text, tokens) = probe(mid);
            match tokens {
                Some(tokens) => {
                    best_kept = kept;
                    best_text = text;
                    best_tokens = tokens;
                    best_is_lo = true;
                    true
                }
                None => false,
            }
        };
        if fits_mid {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    // `lo` was judged by its estimate: render it exactly; should it not fit after all (the
    // estimate off by more than the margin), step down until a rendering does.
    if !best_is_lo {
        loop {
            let (kept, text, tokens) = probe(lo);
            if let Some(tokens) = tokens {
                best_kept = kept;
                best_text = text;
                best_tokens = tokens;
                break;
            }
            // `probe(0)` fit above, so this ends.
            lo -= 1;
        }
    }
    // The search stops at the first unit that does not fit; later, smaller units may still fit
    // in the slack. Try a few, in order; a unit the estimate says cannot fit is not tokenised.
    let slack = if style.fill_slack() { 24 } else { 0 };
    let mut best_estimate = estimate.tokens(&best_kept);
    for &candidate in order.iter().skip(lo + 1).take(slack) {
        if best_tokens + 4 > budget {
            break;
        }
        let mut kept = best_kept.clone();
        kept[candidate] = true;
        let with = estimate.tokens(&kept);
        if (best_tokens + with).saturating_sub(best_estimate) > budget + SLACK_ESTIMATE_MARGIN {
            continue;
        }
        let text = render(source, units, &kept, style, prefix);
        if let Some(tokens) = fits(tokenizer, &text, budget) {
            best_kept = kept;
            best_text = text;
            best_tokens = tokens;
            best_estimate = with;
        }
    }
    // A short elided run can cost no more than its marker: then keep it, which loses nothing.
    let mut cheaper = best_kept.clone();
    let mut changed = false;
    for (run, keep) in runs(&best_kept) {
        let (start, end) = (units[run.start].start, units[run.end - 1].end);
        if keep || end - start > 240 {
            continue;
        }
        let id = format!("{prefix}{}", style.chunk_id(units, run.clone()));
        let marker = style.marker(source, units, run.clone(), &id);
        if tokenizer.count(&source[start..end]) <= tokenizer.count(&marker) + 1 {
            for flag in &mut cheaper[run] {
                *flag = true;
            }
            changed = true;
        }
    }
    if changed {
        let text = render(source, units, &cheaper, style, prefix);
        if let Some(tokens) = fits(tokenizer, &text, budget) {
            best_kept = cheaper;
            best_text = text;
            best_tokens = tokens;
        }
    }
    let mut parts = Vec::new();
    for (run, keep) in runs(&best_kept) {
        let start = units[run.start].start;
        let end = units[run.end - 1].end;
        parts.push(Part {
            chunk_id: format!("{prefix}{}", style.chunk_id(units, run.clone())),
            locator: style.locator(units, run.clone()),
            original: source[start..end].to_string(),
            resolution: keep.then_some(Resolution::Full),
        });
    }
    Ok((best_text, best_tokens, parts))
}

/// What a run holds, for markers: `42 lines`, or `1,200 bytes` when it cuts through a line.
pub(crate) fn amount(units: &[Unit], run: Range<usize>) -> String {
    let (first, last) = (&units[run.start], &units[run.end - 1]);
    if first.piece || last.piece {
        return format!("{} bytes", super::thousands(last.end - first.start));
    }
    let n = last.last_line + 1 - first.first_line;
    format!(
        "{} line{}",
        super::thousands(n),
        if n == 1 { "" } else { "s" }
    )
}

/// Line-range ids and locators (`L12-480`, `lines 12-480`); a run that starts or ends inside a
/// cut line is named by its byte range instead (`B1200-5400`), which stays unique.
pub(crate) fn line_id(units: &[Unit], run: Range<usize>) -> String {
    let (first, last) = (&units[run.start], &units[run.end - 1]);
    if first.piece || last.piece {
        return format!("B{}-{}", first.start, last.end);
    }
    let (a, b) = (first.first_line, last.last_line);
    if a == b {
        format!("L{a}")
    } else {
        format!("L{a}-{b}")
    }
}

pub(crate) fn line_locator(units: &[Unit], run: Range<usize>) -> String {
    let (first, last) = (&units[run.start], &units[run.end - 1]);
    if first.piece || last.piece {
        return format!(
            "bytes {}-{} (lines {}-{})",
            first.start, last.end, first.first_line, last.last_line
        );
    }
    let (a, b) = (first.first_line, last.last_line);
    if a == b {
        format!("line {a}")
    } else {
        format!("lines {a}-{b}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by fuzzing: the middle of a long unit fell inside a multi-byte character.
    #[test]
    fn a_long_unit_is_cut_at_char_boundaries_everywhere() {
        for prefix in 0..4 {
            let source = format!("{}{}", "a".repeat(prefix), "…".repeat(400));
            let unit = Unit {
                start: 0,
                end: source.len(),
                first_line: 1,
                last_line: 1,
                piece: false,
            };
            let pieces = split_long(&source, vec![unit], MAX_UNIT_BYTES);
            assert!(pieces.len() > 1);
            let joined: String = pieces.iter().map(|u| &source[u.start..u.end]).collect();
            assert_eq!(joined, source);
        }
    }
}
