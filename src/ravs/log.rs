//! The log file: appends under an OS lock on a file beside it (as the world-model ledger of
//! `proof::ledger` does, so concurrent writers never interleave a line, and a crashed writer's
//! lock is dropped by the kernel), and reads that skip a corrupt line with a warning naming
//! `file:line` instead of losing the rest.
//!
//! Lines are not fsynced one by one: the log is evidence for a statistical gate, not a ledger,
//! and an fsync per proxied request would cost more than the request's own overhead. A crash
//! can lose the last lines or leave a torn one, which the next read skips and counts.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::event::Entry;

/// The log file, relative to the state directory.
pub const EVENTS_FILE: &str = "ravs/events.jsonl";

#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("cannot write the RAVS log {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read the RAVS log {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

/// A line that could not be read (it is skipped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub path: PathBuf,
    pub line: usize,
    pub message: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}:{}: skipped: {}",
            self.path.display(),
            self.line,
            self.message
        )
    }
}

/// What a read found.
#[derive(Debug, Clone, Default)]
pub struct Read {
    /// The file does not exist (nothing was ever logged).
    pub missing: bool,
    pub entries: Vec<Entry>,
    /// Lines skipped, in file order.
    pub warnings: Vec<Warning>,
}

/// One log file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventLog {
    path: PathBuf,
}

impl EventLog {
    /// The log of a state directory.
    pub fn in_state_dir(state_dir: &Path) -> EventLog {
        EventLog::at(state_dir.join(EVENTS_FILE))
    }

    /// A log at an explicit path.
    pub fn at(path: impl Into<PathBuf>) -> EventLog {
        EventLog { path: path.into() }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `entries`, one line each, in one locked write.
    pub fn append(&self, entries: &[Entry]) -> Result<(), LogError> {
        if entries.is_empty() {
            return Ok(());
        }
        let error = |source| LogError::Write {
            path: self.path.clone(),
            source,
        };
        let held = crate::state::append::lock(&self.path).map_err(error)?;
        // Lines are not fsynced one by one (documented): the log is statistics, not state.
        crate::state::append::append(&held, &self.path, &lines(entries), false).map_err(error)?;
        Ok(())
    }

    /// A writer that keeps the log and its lock file open, for a process that appends on every
    /// request (the proxy).
    pub fn appender(&self) -> super::Appender {
        super::Appender::new(self.clone())
    }

    /// Reads every readable line; a line that is not an event is skipped with a warning.
    pub fn read(&self) -> Result<Read, LogError> {
        let text = match fs::read(&self.path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Ok(Read {
                    missing: true,
                    ..Read::default()
                });
            }
            Err(source) => {
                // "Not a directory" named the log, not the file in the way of its folder.
                let source = match self.path.parent() {
                    Some(dir) if dir.exists() && !dir.is_dir() => io::Error::new(
                        source.kind(),
                        format!(
                            "{} is in the way: it exists and is not a directory (move it away)",
                            dir.display()
                        ),
                    ),
                    _ => source,
                };
                return Err(LogError::Read {
                    path: self.path.clone(),
                    source,
                });
            }
        };
        let mut read = Read::default();
        for (index, line) in text.split(|b| *b == b'\n').enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let warning = |message: String| Warning {
                path: self.path.clone(),
                line: index + 1,
                message,
            };
            match std::str::from_utf8(line) {
                Err(e) => read.warnings.push(warning(format!("not UTF-8 ({e})"))),
                Ok(line) => match serde_json::from_str::<Entry>(line) {
                    Ok(entry) => match entry.problem() {
                        None => read.entries.push(entry),
                        Some(problem) => read.warnings.push(warning(problem)),
                    },
                    Err(e) => read
                        .warnings
                        .push(warning(format!("not a RAVS event ({e})"))),
                },
            }
        }
        Ok(read)
    }
}

pub(super) fn lines(entries: &[Entry]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for entry in entries {
        // Our own types always serialise.
        bytes.extend(serde_json::to_vec(entry).unwrap_or_default());
        bytes.push(b'\n');
    }
    bytes
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::ravs::event::{Event, Label};

    /// A verdict event of one class (the appender's tests use it too).
    pub(in crate::ravs) fn verdict(label: Label) -> Entry {
        Entry::now(
            "anthropic.messages/no_tools/small/prose",
            Event::Verdict {
                certificate_id: "wit_1".into(),
                served_model: Some("claude-haiku-4-5".into()),
                routed: true,
                shadow: false,
                supported: 2,
                unsupported: 0,
                contradicted: 0,
                label,
            },
        )
    }

    #[test]
    fn a_corrupt_line_is_skipped_with_its_line_number_and_the_rest_is_kept() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = EventLog::in_state_dir(dir.path());
        assert!(log.read().expect("read").missing);
        log.append(&[verdict(Label::Success)]).expect("append");
        // A torn write: half a line, no newline.
        let mut file = fs::OpenOptions::new()
            .append(true)
            .open(log.path())
            .expect("open");
        std::io::Write::write_all(&mut file, br#"{"recorded_at":"2026"#).expect("write");
        log.append(&[verdict(Label::Failure), verdict(Label::Unlabelled)])
            .expect("append");
        let read = log.read().expect("read");
        assert_eq!(read.entries.len(), 3);
        assert_eq!(read.warnings.len(), 1);
        assert_eq!(read.warnings[0].line, 2);
        let shown = read.warnings[0].to_string();
        assert!(
            shown.contains("events.jsonl:2: skipped: not a RAVS event"),
            "{shown}"
        );
    }

    /// Found by probing: a file named `ravs` in the state directory read "Not a directory".
    #[test]
    fn a_file_in_the_way_of_the_log_folder_is_named() {
        let dir = tempfile::tempdir().expect("temp dir");
        fs::write(dir.path().join("ravs"), "").expect("write");
        let error = EventLog::in_state_dir(dir.path())
            .read()
            .expect_err("unreadable")
            .to_string();
        assert!(error.contains("ravs is in the way"), "{error}");
        assert!(
            EventLog::in_state_dir(dir.path())
                .append(&[verdict(Label::Success)])
                .expect_err("refused")
                .to_string()
                .contains("in the way"),
            "appends say it too"
        );
    }

    /// Regression (found by probing): a negative retry interval was counted as a retry.
    #[test]
    fn a_retry_with_a_negative_interval_is_skipped_with_its_line() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = EventLog::in_state_dir(dir.path());
        let retry = |seconds: f64| {
            Entry::now(
                "anthropic.messages/no_tools/small/prose",
                Event::Retry {
                    seconds_since_previous: seconds,
                },
            )
        };
        log.append(&[retry(3.0), retry(-5.0), retry(0.0)])
            .expect("append");
        let read = log.read().expect("read");
        assert_eq!(read.entries.len(), 2);
        assert_eq!(read.warnings.len(), 1);
        assert_eq!(read.warnings[0].line, 2);
        assert!(
            read.warnings[0]
                .to_string()
                .contains("seconds_since_previous is -5"),
            "{}",
            read.warnings[0]
        );
    }

    #[test]
    fn concurrent_appends_never_interleave_lines() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = EventLog::in_state_dir(dir.path());
        std::thread::scope(|scope| {
            for _ in 0..4 {
                scope.spawn(|| {
                    for _ in 0..50 {
                        log.append(&[verdict(Label::Success)]).expect("append");
                    }
                });
            }
        });
        let read = log.read().expect("read");
        assert_eq!(read.entries.len(), 200);
        assert!(read.warnings.is_empty());
    }
}
