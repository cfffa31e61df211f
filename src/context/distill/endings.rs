//! The sign-off development set: answer endings (`fixtures/distill/endings.jsonl`), each with
//! the filler spans `lite` distillation should strip and the content spans it must keep. Items
//! are split by the SHA-256 of their id (first hex digit `0`–`7` tune, `8`–`f` held out), so the
//! split is fixed before any rule is written and does not follow results.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{Level, distill};
use crate::tokens::Tokenizer;

#[derive(Debug, thiserror::Error)]
pub enum EndingsError {
    #[error("reading {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "{path}:{line}: {message}; each line is {{\"id\", \"text\", \"filler\": [..], \"keep\": [..]}}"
    )]
    Parse {
        path: String,
        line: usize,
        message: String,
    },
}

#[derive(Debug, Clone, Deserialize)]
pub struct Ending {
    pub id: String,
    pub text: String,
    pub filler: Vec<String>,
    pub keep: Vec<String>,
}

/// Recall and precision of what `lite` strips, on one part of the set.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct EndingsScore {
    pub items: usize,
    /// Filler spans in the part, and how many no longer appear in the output.
    pub filler: usize,
    pub filler_stripped: usize,
    /// Content spans in the part, and how many the output no longer contains verbatim.
    pub keep: usize,
    pub keep_damaged: usize,
    /// Ids of items with a filler span left or a content span damaged.
    pub misses: Vec<String>,
}

impl EndingsScore {
    pub fn recall(&self) -> f64 {
        self.filler_stripped as f64 / self.filler.max(1) as f64
    }

    /// Stripped filler over everything stripped (filler, plus content spans damaged).
    pub fn precision(&self) -> f64 {
        let stripped = self.filler_stripped + self.keep_damaged;
        if stripped == 0 {
            return 1.0;
        }
        self.filler_stripped as f64 / stripped as f64
    }
}

/// Scores of the tune and held-out parts.
#[derive(Debug, Clone, Default, Serialize)]
pub struct EndingsReport {
    pub tune: EndingsScore,
    pub held_out: EndingsScore,
}

pub fn is_tuning_item(id: &str) -> bool {
    matches!(
        crate::digest::sha256_hex(id.as_bytes()).as_bytes().first(),
        Some(b'0'..=b'7')
    )
}

pub fn load(path: &Path) -> Result<Vec<Ending>, EndingsError> {
    let text = std::fs::read_to_string(path).map_err(|source| EndingsError::Read {
        path: path.display().to_string(),
        source,
    })?;
    text.lines()
        .enumerate()
        .filter(|(_, line)| !line.trim().is_empty())
        .map(|(n, line)| {
            serde_json::from_str(line).map_err(|e| EndingsError::Parse {
                path: path.display().to_string(),
                line: n + 1,
                message: e.to_string(),
            })
        })
        .collect()
}

/// Distills every ending at `lite` and scores it.
pub fn evaluate(endings: &[Ending], tokenizer: &Tokenizer) -> EndingsReport {
    let mut report = EndingsReport::default();
    for ending in endings {
        let out = distill(&ending.text, Level::Lite, tokenizer).text;
        let score = if is_tuning_item(&ending.id) {
            &mut report.tune
        } else {
            &mut report.held_out
        };
        score.items += 1;
        let stripped = ending
            .filler
            .iter()
            .filter(|span| !out.contains(span.as_str()))
            .count();
        let damaged = ending
            .keep
            .iter()
            .filter(|span| !out.contains(span.as_str()))
            .count();
        score.filler += ending.filler.len();
        score.filler_stripped += stripped;
        score.keep += ending.keep.len();
        score.keep_damaged += damaged;
        if stripped < ending.filler.len() || damaged > 0 {
            score.misses.push(ending.id.clone());
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set() -> Vec<Ending> {
        load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/distill/endings.jsonl"))
            .expect("the development set loads")
    }

    #[test]
    fn both_parts_are_populated() {
        let endings = set();
        let tune = endings.iter().filter(|e| is_tuning_item(&e.id)).count();
        assert!(
            tune >= 20 && endings.len() - tune >= 20,
            "{tune} of {}",
            endings.len()
        );
    }

    #[test]
    fn sign_offs_are_stripped_and_content_kept_on_both_parts() {
        let report = evaluate(&set(), &Tokenizer::default());
        eprintln!("{report:#?}");
        for (part, score) in [("tune", &report.tune), ("held-out", &report.held_out)] {
            assert!(score.recall() >= 0.9, "{part} recall {:.3}", score.recall());
            assert!(
                score.precision() >= 0.95,
                "{part} precision {:.3}",
                score.precision()
            );
        }
    }

    #[test]
    fn a_malformed_line_names_file_and_line() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("e.jsonl");
        std::fs::write(
            &path,
            "{\"id\":\"a\",\"text\":\"x\",\"filler\":[],\"keep\":[]}\n{oops\n",
        )
        .expect("write");
        let error = load(&path).expect_err("line 2 is broken").to_string();
        assert!(error.contains("e.jsonl:2:"), "{error}");
    }
}
