//! JSONL writer for trial records. Every record is validated (type rules, schema, integrity)
//! before it is written, so an output file never holds an invalid record. Whole lines are
//! written with one `write` per record ([`TrialWriter::write`]) or per batch
//! ([`TrialWriter::push`] then [`TrialWriter::flush`]); a reader of an interrupted run need
//! only drop a torn last line.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::record::TrialRecord;
use super::validate::{Problem, RecordValidator, SchemaError};

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("refusing to write an invalid trial record (task {task_id}, condition {condition}): {}",
        problems.iter().map(|p| format!("{}: {}", p.pointer, p.message)).collect::<Vec<_>>().join("; "))]
    Invalid {
        task_id: String,
        condition: String,
        problems: Vec<Problem>,
    },
    #[error("cannot write trial records to {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Schema(#[from] SchemaError),
}

/// Appends validated records to a JSONL file.
pub struct TrialWriter {
    path: PathBuf,
    out: BufWriter<File>,
    validator: RecordValidator,
    /// Validated lines not yet written.
    pending: Vec<u8>,
}

impl TrialWriter {
    /// Opens `path` for appending (created if missing), so resumed runs add to what is there.
    pub fn append(path: &Path) -> Result<Self, WriteError> {
        let io_error = |source| WriteError::Io {
            path: path.to_path_buf(),
            source,
        };
        let parent = path
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        crate::state::create_dir_durable(parent).map_err(io_error)?;
        let created = !path.exists();
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(io_error)?;
        if created {
            // The records are fsynced as they are written; the new file's name must be too.
            crate::state::sync_dir(parent);
        }
        Ok(Self {
            path: path.to_path_buf(),
            out: BufWriter::new(file),
            validator: RecordValidator::new()?,
            pending: Vec::new(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Validates and appends one record.
    pub fn write(&mut self, record: &TrialRecord) -> Result<(), WriteError> {
        self.push(record)?;
        self.flush()
    }

    /// Validates one record and holds its line for the next [`flush`](Self::flush). A record
    /// that fails validation is refused and the held lines stay held.
    pub fn push(&mut self, record: &TrialRecord) -> Result<(), WriteError> {
        let value = serde_json::to_value(record).map_err(|e| WriteError::Io {
            path: self.path.clone(),
            source: io::Error::other(e),
        })?;
        let problems = self.validator.check_value(&value);
        if !problems.is_empty() {
            return Err(WriteError::Invalid {
                task_id: record.task_id.clone(),
                condition: record.condition.to_string(),
                problems,
            });
        }
        // `Value`'s Display writes compact JSON into the buffer without an extra String.
        write!(self.pending, "{value}").map_err(|source| WriteError::Io {
            path: self.path.clone(),
            source,
        })?;
        self.pending.push(b'\n');
        Ok(())
    }

    /// Writes every held line.
    pub fn flush(&mut self) -> Result<(), WriteError> {
        let io_error = |source| WriteError::Io {
            path: self.path.clone(),
            source,
        };
        if !self.pending.is_empty() {
            self.out.write_all(&self.pending).map_err(io_error)?;
            self.pending.clear();
        }
        self.out.flush().map_err(io_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trial::record::tests::sample;

    #[test]
    fn writes_valid_and_refuses_invalid() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("runs").join("trials.jsonl");
        let mut writer = TrialWriter::append(&path).expect("open");
        writer.write(&sample()).expect("valid record");
        let mut bad = sample();
        bad.task_score = 1.5;
        let error = writer.write(&bad).expect_err("invalid record");
        assert!(error.to_string().contains("/task_score"), "{error}");
        drop(writer);
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text.lines().count(), 1);
        let back: TrialRecord = serde_json::from_str(text.trim()).expect("parse");
        assert_eq!(back, sample());
    }

    #[test]
    fn pushed_records_are_written_at_flush() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("trials.jsonl");
        let mut writer = TrialWriter::append(&path).expect("open");
        writer.push(&sample()).expect("valid");
        let mut bad = sample();
        bad.task_score = -1.0;
        assert!(writer.push(&bad).is_err());
        writer.push(&sample()).expect("valid");
        assert_eq!(std::fs::read_to_string(&path).expect("read"), "");
        writer.flush().expect("flush");
        let text = std::fs::read_to_string(&path).expect("read");
        assert_eq!(text.lines().count(), 2);
        for line in text.lines() {
            let back: TrialRecord = serde_json::from_str(line).expect("parse");
            assert_eq!(back, sample());
        }
    }
}
