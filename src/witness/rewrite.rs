//! What the mode and profile do to the output: leave it (audit), mark flagged claims inline
//! (annotate) or remove them (strict). Structured output (JSON) is never rewritten, so it stays
//! byte-valid.
//!
//! Every decision is returned as a [`Suppression`] entry so the certificate can say what was
//! removed or marked, and why.

use serde::{Deserialize, Serialize};

use super::claims::ClaimKind;
use super::profile::{Mode, Profile};
use super::verify::{ClaimVerdict, Label, Verification};

/// What was done to one flagged claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Cut from the output.
    Removed,
    /// Marked inline (`[unverified: …]` or `[contradicted: …]`).
    Marked,
    /// Left in place; the certificate warns about it (conversational profiles, strict mode).
    Warned,
    /// Left untouched: audit mode, or structured output that must stay byte-valid.
    Recorded,
}

/// One flagged claim and what was done to it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suppression {
    pub claim_index: usize,
    pub action: Action,
    pub label: Label,
    /// Why, in words.
    pub reason: String,
}

/// The output after the mode was applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Rewritten {
    pub output: String,
    pub suppressions: Vec<Suppression>,
    /// Why the output was left untouched although the mode would change it, if so.
    pub untouched_because: Option<String>,
}

/// Text returned in strict mode when every verifiable claim was removed.
pub const WITHHELD_NOTICE: &str =
    "[svc witness: answer withheld: none of its claims is supported by the evidence]";

/// Whether `output` is structured (JSON) rather than prose. Checked without building a value:
/// `serde_json::Value` refuses nesting past 128 levels, and a deeper document was then taken
/// for prose and rewritten into something that was no longer JSON.
/// A leading byte-order mark is the file's signature, not part of the document.
pub fn is_structured(output: &str) -> bool {
    let output = output.strip_prefix('\u{feff}').unwrap_or(output);
    let trimmed = output.trim_start();
    (trimmed.starts_with('{') || trimmed.starts_with('['))
        && serde_json::from_str::<serde::de::IgnoredAny>(output).is_ok()
}

/// Apply `mode` under `profile` to `output`, whose claims `verification` judged.
pub fn apply(output: &str, verification: &Verification, mode: Mode, profile: Profile) -> Rewritten {
    let flagged: Vec<&ClaimVerdict> = verification
        .claims
        .iter()
        .filter(|c| matches!(c.label, Label::Unsupported | Label::Contradicted))
        .collect();
    let structured = is_structured(output);
    let untouched_because = if structured && mode != Mode::Audit && !flagged.is_empty() {
        Some("structured (JSON) output is never rewritten, so it stays byte-valid".to_string())
    } else {
        None
    };
    let effective = if structured { Mode::Audit } else { mode };
    let mut suppressions = Vec::new();
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let mut marks: Vec<(usize, String)> = Vec::new();
    for claim in &flagged {
        let why = summary(claim);
        let action = match effective {
            Mode::Audit => Action::Recorded,
            Mode::Annotate => {
                let tag = match claim.label {
                    Label::Contradicted => "contradicted",
                    _ => "unverified",
                };
                marks.push((mark_at(output, claim), format!(" [{tag}: {why}]")));
                Action::Marked
            }
            Mode::Strict => {
                if claim.label == Label::Contradicted || profile.fails_closed() {
                    cuts.push(removal_range(output, claim));
                    Action::Removed
                } else {
                    Action::Warned
                }
            }
        };
        suppressions.push(Suppression {
            claim_index: claim.claim.index,
            action,
            label: claim.label,
            reason: why,
        });
    }
    let mut text = output.to_string();
    // Neighbouring cuts can share the spaces between them: merged, so no cut reaches into
    // bytes another already removed.
    cuts.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::with_capacity(cuts.len());
    for (start, end) in cuts {
        match merged.last_mut() {
            Some(last) if start <= last.1 => last.1 = last.1.max(end),
            _ => merged.push((start, end)),
        }
    }
    // A cut that ends its line takes the spaces before it: the sentence before would otherwise
    // end the line with a stray space.
    for cut in &mut merged {
        if output[cut.1..].is_empty() || output[cut.1..].starts_with(['\n', '\r']) {
            let before = output[..cut.0]
                .bytes()
                .rev()
                .take_while(|b| *b == b' ' || *b == b'\t')
                .count();
            cut.0 -= before;
        }
    }
    let cuts = merged;
    // Edit from the end so earlier offsets stay valid.
    let mut edits: Vec<(usize, usize, String)> = cuts
        .into_iter()
        .map(|(s, e)| (s, e, String::new()))
        .chain(marks.into_iter().map(|(at, m)| (at, at, m)))
        .collect();
    edits.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
    for (start, end, insert) in edits {
        text.replace_range(start..end, &insert);
    }
    if effective == Mode::Strict
        && suppressions.iter().any(|s| s.action == Action::Removed)
        && text.trim().is_empty()
    {
        text = WITHHELD_NOTICE.to_string();
    }
    Rewritten {
        output: if effective == Mode::Audit {
            output.to_string()
        } else {
            text
        },
        suppressions,
        untouched_because,
    }
}

/// Where an annotation goes: after the claim, or for a table row inside its last cell (after
/// the closing `|` it made a cell of its own, which Markdown renderers drop with the note).
fn mark_at(output: &str, claim: &ClaimVerdict) -> usize {
    let (start, end) = (claim.claim.start, claim.claim.end);
    if claim.claim.kind == ClaimKind::TableRow {
        let row = output[start..end].trim_end();
        if row.ends_with('|') {
            let close = start + row.len() - 1;
            return start + output[start..close].trim_end().len();
        }
    }
    end
}

/// The byte range to cut for a claim: a whole line for list items and table rows, else the
/// sentence and the spaces after it.
fn removal_range(output: &str, claim: &ClaimVerdict) -> (usize, usize) {
    let (start, end) = (claim.claim.start, claim.claim.end);
    match claim.claim.kind {
        ClaimKind::ListItem | ClaimKind::TableRow => {
            let line_start = output[..start].rfind('\n').map_or(0, |i| i + 1);
            let line_end = output[end..]
                .find('\n')
                .map_or(output.len(), |i| end + i + 1);
            // Only take the whole line when the claim is all of it (one sentence per item).
            let line = &output[line_start..line_end];
            let rest = line.replacen(&output[start..end], "", 1);
            if rest
                .trim()
                .trim_start_matches(['-', '*', '+', '|'])
                .trim()
                .chars()
                .all(|c| c.is_ascii_digit() || matches!(c, '.' | ')' | '|' | ' '))
            {
                (line_start, line_end)
            } else {
                (start, end + trailing_spaces(output, end))
            }
        }
        _ => {
            // A sentence that is a whole line goes with its line break.
            let line_start = output[..start].rfind('\n').map_or(0, |i| i + 1);
            let line_end = output[end..].find('\n').map(|i| end + i);
            let alone = output[line_start..start].trim().is_empty()
                && line_end.is_some_and(|e| output[end..e].trim().is_empty());
            match line_end {
                Some(e) if alone => (line_start, e + 1),
                _ => (start, end + trailing_spaces(output, end)),
            }
        }
    }
}

fn trailing_spaces(output: &str, at: usize) -> usize {
    output[at..]
        .bytes()
        .take_while(|b| *b == b' ' || *b == b'\t')
        .count()
}

/// A one-line reason for a flagged claim: its strongest reason's detail.
fn summary(claim: &ClaimVerdict) -> String {
    use super::verify::ReasonKind as K;
    let priority = [
        K::EntitySubstitution,
        K::NumberMismatch,
        K::DateMismatch,
        K::NegationFlip,
        K::AntonymFlip,
        K::RelationReversed,
        K::NameScattered,
        K::ComparisonMismatch,
        K::PolarityMismatch,
        K::NliJudgement,
        K::MissingTerms,
        K::AnswerTypeMismatch,
        K::PolarityUnchecked,
        K::Coverage,
    ];
    for kind in priority {
        if let Some(reason) = claim.reasons.iter().find(|r| r.kind == kind) {
            return reason.detail.clone();
        }
    }
    "not supported by the evidence".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::witness::verify::check;

    const EVIDENCE: &str = "The Oberoi Group is a hotel company with its head office in Delhi. \
        It was founded in 1934.";

    #[test]
    fn modes_leave_mark_or_cut() {
        let output = "The Oberoi Group has its head office in Delhi. It was founded in 1943.";
        let v = check(output, EVIDENCE, None, Profile::Rag);
        let audit = apply(output, &v, Mode::Audit, Profile::Rag);
        assert_eq!(audit.output, output);
        assert_eq!(audit.suppressions[0].action, Action::Recorded);
        let annotate = apply(output, &v, Mode::Annotate, Profile::Rag);
        assert!(
            annotate
                .output
                .starts_with("The Oberoi Group has its head office in Delhi. It was founded in 1943. [contradicted: claim says 1943, the evidence says 1934]"),
            "{}",
            annotate.output
        );
        let strict = apply(output, &v, Mode::Strict, Profile::Rag);
        // No space is left where the last sentence was (it was; found by probing).
        assert_eq!(
            strict.output,
            "The Oberoi Group has its head office in Delhi."
        );
        assert_eq!(strict.suppressions[0].action, Action::Removed);
    }

    #[test]
    fn conversational_profiles_only_warn_on_unknown_claims() {
        let output = "The Oberoi Group is based in Delhi. It also sells airline tickets online.";
        let v = check(output, EVIDENCE, None, Profile::Chat);
        let strict = apply(output, &v, Mode::Strict, Profile::Chat);
        assert_eq!(strict.output, output);
        assert_eq!(strict.suppressions[0].action, Action::Warned);
        let rag = check(output, EVIDENCE, None, Profile::Rag);
        let strict = apply(output, &rag, Mode::Strict, Profile::Rag);
        assert_eq!(strict.output, "The Oberoi Group is based in Delhi.");
        // A sentence removed mid-line keeps one space between its neighbours; one removed at
        // the end of a line takes the space before it.
        let output = "The Oberoi Group is based in Delhi. It also sells airline tickets online. It is based in Delhi.\nIt also sells airline tickets online.\n";
        let rag = check(output, EVIDENCE, None, Profile::Rag);
        let strict = apply(output, &rag, Mode::Strict, Profile::Rag);
        assert_eq!(
            strict.output,
            "The Oberoi Group is based in Delhi. It is based in Delhi.\n"
        );
        // Two removed sentences that end a line share the space between them (overlapping
        // cuts panicked; found by the fuzzer).
        let output = "The Oberoi Group is based in Delhi. It also sells airline tickets online. It also sells train tickets online.\n";
        let rag = check(output, EVIDENCE, None, Profile::Rag);
        let strict = apply(output, &rag, Mode::Strict, Profile::Rag);
        assert_eq!(strict.output, "The Oberoi Group is based in Delhi.\n");
    }

    #[test]
    fn json_is_never_rewritten() {
        let output = r#"{"answer": "The Oberoi Group was founded in 1943."}"#;
        let v = check(output, EVIDENCE, None, Profile::Rag);
        let strict = apply(output, &v, Mode::Strict, Profile::Rag);
        assert_eq!(strict.output, output);
        assert!(strict.untouched_because.is_some());
        assert!(serde_json::from_str::<serde_json::Value>(&strict.output).is_ok());
        // Regression (found by probing): JSON nested 128 levels or deeper was rewritten.
        for depth in [127, 128, 600] {
            let deep = format!(
                "{}{{\"claim\":\"The telescope was installed in 1978.\"}}{}",
                "{\"n\":".repeat(depth),
                "}".repeat(depth)
            );
            assert!(is_structured(&deep), "depth {depth}");
        }
    }

    /// Regression (found by probing): the note went after a table row's closing `|`, a cell of
    /// its own that Markdown renderers drop.
    #[test]
    fn a_table_rows_note_goes_inside_its_last_cell() {
        let output = "| year | event |\n|---|---|\n| 1943 | founded |\n";
        let v = check(output, EVIDENCE, None, Profile::Rag);
        let annotated = apply(output, &v, Mode::Annotate, Profile::Rag);
        let row = annotated
            .output
            .lines()
            .find(|l| l.contains("1943"))
            .expect("the row");
        assert!(
            row.starts_with("| 1943 | founded [contradicted: ") && row.ends_with("] |"),
            "{row}"
        );
    }

    #[test]
    fn list_items_are_cut_as_whole_lines() {
        let output = "- The head office is in Delhi.\n- It was founded in 1943.\n- Done\n";
        let v = check(output, EVIDENCE, None, Profile::Rag);
        let strict = apply(output, &v, Mode::Strict, Profile::Rag);
        assert_eq!(strict.output, "- The head office is in Delhi.\n- Done\n");
    }

    #[test]
    fn everything_removed_leaves_a_notice() {
        let output = "Mumbai";
        let v = check(
            output,
            EVIDENCE,
            Some("Where is the head office?"),
            Profile::Qa,
        );
        let strict = apply(output, &v, Mode::Strict, Profile::Qa);
        assert_eq!(strict.output, WITHHELD_NOTICE);
    }
}
