//! The learned weights file (`learning/weights.json` under the state home): the weights in
//! use, a version that grows with every change, where each version came from, and a bounded
//! history, so a reset or a bad update can be undone by hand.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::context::weights::RankingWeights;

pub const WEIGHTS_FILE: &str = "learning/weights.json";
pub const WEIGHTS_FORMAT: &str = "svc.ranking-weights.v1";
/// Versions kept in `history` (older ones are dropped).
pub const HISTORY_LIMIT: usize = 50;

/// What produced a version of the weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WeightsSource {
    /// The hand-tuned defaults (nothing learned yet).
    Default,
    /// Online updates from recorded fixed-point outcomes.
    Feedback,
    /// Adopted by `autotune` after its held-out comparison.
    Autotune,
    /// Put back to the defaults by a user.
    Reset,
}

/// One past version.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistoryEntry {
    pub version: u64,
    pub updated_at: String,
    pub source: WeightsSource,
    pub weights: RankingWeights,
}

/// How far the feedback loop has read its inputs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeedbackCursor {
    /// Runs learned from (`ledger:<sequence>` or a session id) and how many of their recovered
    /// chunks were read.
    #[serde(default)]
    pub learned: std::collections::BTreeMap<String, usize>,
    /// Ledger entries read, and recovered chunks that moved the weights.
    pub outcomes_seen: u64,
    pub recovered_chunks_used: u64,
    /// Recovered chunks that could not be used (commit gone, chunk not re-found).
    pub recovered_chunks_skipped: u64,
}

/// The file's content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightsFile {
    pub format: String,
    pub version: u64,
    pub updated_at: String,
    pub source: WeightsSource,
    pub weights: RankingWeights,
    #[serde(default)]
    pub feedback: FeedbackCursor,
    /// Previous versions, oldest first.
    #[serde(default)]
    pub history: Vec<HistoryEntry>,
}

impl Default for WeightsFile {
    fn default() -> Self {
        Self {
            format: WEIGHTS_FORMAT.to_string(),
            version: 0,
            updated_at: crate::clock::rfc3339_seconds(SystemTime::now()),
            source: WeightsSource::Default,
            weights: RankingWeights::default(),
            feedback: FeedbackCursor::default(),
            history: Vec::new(),
        }
    }
}

impl WeightsFile {
    /// Moves to `weights` as a new version from `source`, keeping the old one in the history.
    pub fn advance(&mut self, weights: RankingWeights, source: WeightsSource) {
        self.history.push(HistoryEntry {
            version: self.version,
            updated_at: self.updated_at.clone(),
            source: self.source,
            weights: self.weights,
        });
        if self.history.len() > HISTORY_LIMIT {
            let excess = self.history.len() - HISTORY_LIMIT;
            self.history.drain(..excess);
        }
        self.version += 1;
        self.updated_at = crate::clock::rfc3339_seconds(SystemTime::now());
        self.source = source;
        self.weights = weights;
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "{path}:{line}:{column}: not a valid weights file: {message}; fix it, or run `svc learning reset` to start from the defaults (which keeps the broken file as {path}.broken)"
    )]
    Corrupt {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    /// A weights file the user gave (`--ranking-weights FILE`): `svc learning reset` is no help.
    #[error(
        "{path}:{line}:{column}: not a valid weights file: {message}; fix it: a weights file as `svc learning show --json` prints it, or a JSON object of weight names and values"
    )]
    Given {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: format {found}, expected {WEIGHTS_FORMAT}")]
    Format { path: PathBuf, found: String },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write the weights: {0}")]
    Write(#[from] crate::state::StateError),
    #[error("cannot lock {path} to change the weights: {source}")]
    Lock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Held while a writer reads, changes and saves the weights file (an OS lock on
/// `weights.lock` beside it). Two writers at once (an update and a reset, from two processes)
/// each read the same version and one lost the other's change: the reset vanished while both
/// announced "v1".
pub fn lock(home: &Path) -> Result<crate::state::append::AppendLock, StoreError> {
    let path = path_of(home);
    crate::state::append::lock(&path).map_err(|source| StoreError::Lock {
        path: path.with_extension("lock"),
        source,
    })
}

/// Applies `change` to the file as it is now (or the defaults), under the [`lock`], and saves
/// it when `change` returns true. For a change computed from an older read (autotune runs for
/// minutes), so nothing written meanwhile is lost.
pub fn update(
    home: &Path,
    change: impl FnOnce(&mut WeightsFile) -> bool,
) -> Result<WeightsFile, StoreError> {
    let _held = lock(home)?;
    let mut file = load_or_default(home)?;
    if change(&mut file) {
        save(home, &file)?;
    }
    Ok(file)
}

pub fn path_of(home: &Path) -> PathBuf {
    home.join(WEIGHTS_FILE)
}

/// The file, or `None` when nothing was learned yet.
pub fn load(home: &Path) -> Result<Option<WeightsFile>, StoreError> {
    let path = path_of(home);
    let bytes = match std::fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(StoreError::Read { path, source }),
    };
    // Bytes that are not UTF-8 are damage like bad JSON (and `reset` repairs both), not a
    // failure to read.
    let text = String::from_utf8(bytes).map_err(|e| {
        let (line, column) = crate::text::utf8_error_position(&e);
        StoreError::Corrupt {
            path: path.clone(),
            line,
            column,
            message: "not UTF-8 text".into(),
        }
    })?;
    let file: WeightsFile = serde_json::from_str(&text).map_err(|e| {
        let (line, column, message) = placed(&text, &e);
        StoreError::Corrupt {
            path: path.clone(),
            line,
            column,
            message,
        }
    })?;
    if file.format != WEIGHTS_FORMAT {
        return Err(StoreError::Format {
            path,
            found: file.format,
        });
    }
    Ok(Some(file))
}

/// Where a parse error is (a weight out of bounds at its own line) and its message without
/// serde's own "at line … column …", which named another place (the end of the object).
fn placed(text: &str, error: &serde_json::Error) -> (usize, usize, String) {
    let full = error.to_string();
    let suffix = format!(" at line {} column {}", error.line(), error.column());
    let message = full.strip_suffix(&suffix).unwrap_or(&full).to_string();
    let (line, column) =
        out_of_bounds_place(text, &message).unwrap_or((error.line(), error.column()));
    (line, column, message)
}

/// Where a weight outside its bounds is written: serde reports the end of the object holding
/// it (line 17 for a weight on line 9), so the `"name": value` pair is looked up in the text.
fn out_of_bounds_place(text: &str, message: &str) -> Option<(usize, usize)> {
    let rest = message.split_once("ranking weight `")?.1;
    let (name, rest) = rest.split_once("` = ")?;
    let value: f64 = rest.split_once(' ')?.0.parse().ok()?;
    let key = format!("\"{name}\"");
    let mut from = 0;
    while let Some(found) = text[from..].find(&key) {
        let at = from + found;
        let after = text[at + key.len()..]
            .trim_start()
            .strip_prefix(':')?
            .trim_start();
        let number: String = after
            .chars()
            .take_while(|c| c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E'))
            .collect();
        if number.parse::<f64>().is_ok_and(|n| n == value) {
            let line = text[..at].matches('\n').count() + 1;
            let column = at - text[..at].rfind('\n').map_or(0, |n| n + 1) + 1;
            return Some((line, column));
        }
        from = at + key.len();
    }
    None
}

/// The file, or a fresh default one when nothing was learned yet.
pub fn load_or_default(home: &Path) -> Result<WeightsFile, StoreError> {
    Ok(load(home)?.unwrap_or_default())
}

/// Writes the file atomically.
pub fn save(home: &Path, file: &WeightsFile) -> Result<(), StoreError> {
    let mut bytes = serde_json::to_vec_pretty(file).unwrap_or_default();
    bytes.push(b'\n');
    crate::state::atomic_write(&path_of(home), &bytes)?;
    Ok(())
}

/// Weights from a file given by a user (`svc run --ranking-weights FILE`): a weights file as
/// `svc learning` writes it, or a plain JSON object of weight names and values (missing names
/// keep their defaults).
pub fn read_weights(path: &Path) -> Result<RankingWeights, StoreError> {
    let text = std::fs::read_to_string(path).map_err(|source| StoreError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let given = |e: serde_json::Error| {
        let (line, column, message) = placed(&text, &e);
        StoreError::Given {
            path: path.to_path_buf(),
            line,
            column,
            message,
        }
    };
    // Parsed from the text (not from a `Value`), so an error has its line and column.
    let value: serde_json::Value = serde_json::from_str(&text).map_err(given)?;
    if value.get("format").is_some() {
        let file: WeightsFile = serde_json::from_str(&text).map_err(given)?;
        return Ok(file.weights);
    }
    serde_json::from_str(&text).map_err(given)
}

/// The weights selection should use: the learned ones, or the defaults when there are none.
/// A broken file never stops serving: the defaults are used and the error is returned beside
/// them for the caller to show.
pub fn active_weights(home: &Path) -> (RankingWeights, Option<StoreError>) {
    match load(home) {
        Ok(Some(file)) => (file.weights, None),
        Ok(None) => (RankingWeights::default(), None),
        Err(error) => (RankingWeights::default(), Some(error)),
    }
}

/// Puts the defaults back as a new version. A file too broken to read is kept beside as
/// `weights.json.broken` rather than lost.
pub fn reset(home: &Path) -> Result<WeightsFile, StoreError> {
    let _held = lock(home)?;
    let mut file = match load(home) {
        Ok(file) => file.unwrap_or_default(),
        Err(StoreError::Corrupt { .. } | StoreError::Format { .. }) => {
            let path = path_of(home);
            // An earlier broken file is kept too: `.broken`, then `.broken.2`, `.broken.3`, …
            let broken = (1..)
                .map(|n| match n {
                    1 => path.with_extension("json.broken"),
                    n => path.with_extension(format!("json.broken.{n}")),
                })
                .find(|candidate| !candidate.exists())
                .unwrap_or_else(|| path.with_extension("json.broken"));
            std::fs::rename(&path, &broken).map_err(|source| StoreError::Read {
                path: path.clone(),
                source,
            })?;
            WeightsFile::default()
        }
        Err(other) => return Err(other),
    };
    let cursor = file.feedback.clone();
    file.advance(RankingWeights::default(), WeightsSource::Reset);
    // What was already learned from stays read: a reset must not replay old feedback.
    file.feedback = cursor;
    save(home, &file)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::weights::Feature;

    /// Regression (found by probing): an update and a reset at once each read the same
    /// version, and one's change was lost while both announced "v1".
    #[test]
    fn concurrent_changes_each_get_their_own_version() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::thread::scope(|scope| {
            for i in 0..6 {
                let home = dir.path();
                scope.spawn(move || {
                    if i % 3 == 0 {
                        reset(home).expect("reset");
                    } else {
                        update(home, |file| {
                            let mut weights = file.weights;
                            weights.set_clamped(Feature::Caller, 0.01 * i as f64);
                            file.advance(weights, WeightsSource::Feedback);
                            true
                        })
                        .expect("update");
                    }
                });
            }
        });
        let file = load(dir.path()).expect("load").expect("some");
        assert_eq!(file.version, 6, "every change is a version of its own");
    }

    /// Regression (found by probing): a weight outside its bounds was reported at the end of
    /// its object (line 17), not where it is written (line 9).
    #[test]
    fn an_out_of_bounds_weight_is_reported_where_it_is_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = WeightsFile::default();
        save(dir.path(), &file).expect("save");
        let path = path_of(dir.path());
        let text = std::fs::read_to_string(&path).expect("read");
        let at = text.find("\"named_file\"").expect("the weight");
        let line = text[..at].matches('\n').count() + 1;
        let value_start = at + text[at..].find(':').expect("colon") + 1;
        let value_end = value_start + text[value_start..].find([',', '\n']).expect("end");
        let edited = format!("{} 7.0{}", &text[..value_start], &text[value_end..]);
        std::fs::write(&path, edited).expect("edit");
        let error = load(dir.path()).expect_err("out of bounds").to_string();
        assert!(
            error.contains(&format!("weights.json:{line}:")),
            "{error} (the weight is on line {line})"
        );
        // Regression (found by probing): the message also named serde's place (the end of the
        // object), a second, different line.
        assert!(!error.contains(" at line "), "{error}");
        // A file given with --ranking-weights is the user's to fix: `learning reset` does not
        // touch it (the advice was wrong), and its place is known too.
        let given = read_weights(&path).expect_err("out of bounds").to_string();
        assert!(given.contains(&format!("weights.json:{line}:")), "{given}");
        assert!(!given.contains("learning reset"), "{given}");
        assert!(given.contains("fix it"), "{given}");
    }

    #[test]
    fn versions_grow_history_is_bounded_and_reset_keeps_the_cursor() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(load(dir.path()).expect("load").is_none());
        let mut file = load_or_default(dir.path()).expect("default");
        for i in 0..(HISTORY_LIMIT + 5) {
            let mut weights = file.weights;
            weights.set_clamped(Feature::Caller, 0.01 * i as f64);
            file.advance(weights, WeightsSource::Feedback);
        }
        file.feedback.learned.insert("ledger:0".into(), 1);
        save(dir.path(), &file).expect("save");
        let back = load(dir.path()).expect("load").expect("some");
        assert_eq!(back.version, (HISTORY_LIMIT + 5) as u64);
        assert_eq!(back.history.len(), HISTORY_LIMIT);
        let reset = reset(dir.path()).expect("reset");
        assert_eq!(reset.weights, RankingWeights::default());
        assert_eq!(reset.source, WeightsSource::Reset);
        assert_eq!(reset.feedback.learned["ledger:0"], 1);
        assert_eq!(reset.version, back.version + 1);
    }

    #[test]
    fn a_corrupt_file_is_reported_with_its_place_serving_uses_defaults_and_reset_keeps_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = path_of(dir.path());
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(
            &path,
            "{\n  \"format\": \"svc.ranking-weights.v1\",\n  oops\n}",
        )
        .expect("write");
        let error = load(dir.path()).expect_err("corrupt");
        let message = error.to_string();
        assert!(message.contains("weights.json:3:"), "{message}");
        let (weights, warning) = active_weights(dir.path());
        assert_eq!(weights, RankingWeights::default());
        assert!(warning.is_some());
        reset(dir.path()).expect("reset");
        assert!(path.with_extension("json.broken").exists(), "nothing lost");
        assert!(load(dir.path()).expect("load").is_some());

        // Found by probing: bytes that are not UTF-8 were "cannot read", and reset, the
        // documented repair, failed the same way.
        std::fs::write(&path, b"{\n  \"format\": \xff\xfe }").expect("write");
        let message = load(dir.path()).expect_err("not utf-8").to_string();
        assert!(
            message.contains("weights.json:2:13: not a valid weights file: not UTF-8 text"),
            "{message}"
        );
        reset(dir.path()).expect("reset repairs it");
        // Found by probing: a second broken file overwrote the first one kept.
        assert!(
            path.with_extension("json.broken").exists(),
            "the first kept"
        );
        assert_eq!(
            std::fs::read(path.with_extension("json.broken.2")).expect("kept"),
            b"{\n  \"format\": \xff\xfe }"
        );

        // Out-of-bounds values are refused by name, not clamped silently.
        std::fs::write(
            &path,
            r#"{"format":"svc.ranking-weights.v1","version":1,"updated_at":"x","source":"feedback","weights":{"caller":3.0}}"#,
        )
        .expect("write");
        let message = load(dir.path()).expect_err("bounds").to_string();
        assert!(message.contains("`caller` = 3"), "{message}");
    }
}
