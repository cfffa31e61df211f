//! The writer thread of a run: finished trials are written in batches, after the context
//! commits, request blobs and cached responses they name are durable.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};

use super::{Finished, Progress, RunError};
use crate::context::CommitStore;
use crate::harness::audit::{self, RequestStore};
use crate::harness::runner::cache::ResponseCache;
use crate::trial::{Outcome, TrialWriter};

pub(super) struct Counts {
    pub(super) written: u64,
    pub(super) errors: u64,
    pub(super) unwritten: u64,
    pub(super) cache_hits: u64,
    pub(super) aborted: bool,
}

/// Where the writer puts the audit trail: request blobs and cached responses are synced with
/// each batch, before the records and call lines that name them.
pub(super) struct AuditSinks {
    pub(super) requests: Arc<RequestStore>,
    pub(super) cache: Option<Arc<ResponseCache>>,
    pub(super) calls_path: PathBuf,
}

/// Most trials one batch of the write loop takes: one commit sync and one write per batch.
const WRITE_BATCH: usize = 4096;

/// Writes finished trials as they arrive, in batches: every commit staged by the batch's trials
/// is made durable first (one group sync), then the batch's records are written (one write), so
/// a record on disk never names a commit that is not.
#[allow(clippy::too_many_arguments)]
pub(super) fn write_loop(
    mut writer: TrialWriter,
    commits: &CommitStore,
    sinks: &AuditSinks,
    notes_path: &Path,
    receiver: mpsc::Receiver<Finished>,
    total: u64,
    progress: Option<Arc<dyn Fn(Progress) + Send + Sync>>,
    max_error_rate: Option<f64>,
    abort: &AtomicBool,
) -> Result<Counts, RunError> {
    let mut counts = Counts {
        written: 0,
        errors: 0,
        unwritten: 0,
        cache_hits: 0,
        aborted: false,
    };
    let mut notes: Option<fs::File> = None;
    let mut calls = open_append(&sinks.calls_path)?;
    let mut calls_text = String::new();
    let mut done = 0u64;
    let mut batch = Vec::with_capacity(WRITE_BATCH);
    while let Ok(first) = receiver.recv() {
        let mut next = Some(first);
        while let Some(finished) = next.take() {
            // The error rate is judged as trials arrive, so an abort does not wait for a sync.
            done += 1;
            let failed = finished
                .record
                .as_ref()
                .is_none_or(|record| record.outcome == Outcome::Error);
            counts.errors += u64::from(failed);
            if let Some(limit) = max_error_rate
                && done >= 20.min(total)
                && counts.errors as f64 / done as f64 > limit
                && !counts.aborted
            {
                counts.aborted = true;
                abort.store(true, Ordering::Relaxed);
            }
            batch.push(finished);
            if batch.len() < WRITE_BATCH {
                next = receiver.try_recv().ok();
            }
        }
        // The trials of this batch committed before they were sent.
        commits
            .sync()
            .map_err(|error| RunError::Commit(error.to_string()))?;
        sinks.requests.sync()?;
        if let Some(cache) = &sinks.cache {
            cache.sync()?;
        }
        calls_text.clear();
        for finished in &batch {
            counts.cache_hits += finished
                .calls
                .calls
                .iter()
                .filter(|call| call.cache == audit::CacheUse::Hit)
                .count() as u64;
            // Serialising strings and numbers cannot fail.
            calls_text.push_str(&serde_json::to_string(&finished.calls).unwrap_or_default());
            calls_text.push('\n');
        }
        calls
            .write_all(calls_text.as_bytes())
            .map_err(|source| RunError::Io {
                path: sinks.calls_path.clone(),
                source,
            })?;
        for finished in batch.drain(..) {
            if !finished.notes.is_empty() {
                if notes.is_none() {
                    notes = Some(
                        fs::OpenOptions::new()
                            .create(true)
                            .append(true)
                            .open(notes_path)
                            .map_err(|source| RunError::Io {
                                path: notes_path.to_path_buf(),
                                source,
                            })?,
                    );
                }
                if let Some(file) = notes.as_mut() {
                    for note in &finished.notes {
                        let line = serde_json::to_string(note).unwrap_or_default();
                        writeln!(file, "{line}").map_err(|source| RunError::Io {
                            path: notes_path.to_path_buf(),
                            source,
                        })?;
                    }
                }
            }
            match finished.record {
                Some(record) => {
                    writer.push(&record)?;
                    counts.written += 1;
                }
                None => counts.unwritten += 1,
            }
        }
        writer.flush()?;
        if let Some(callback) = &progress {
            callback(Progress {
                done,
                total,
                errors: counts.errors,
            });
        }
    }
    Ok(counts)
}

fn open_append(path: &Path) -> Result<fs::File, RunError> {
    fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| RunError::Io {
            path: path.to_path_buf(),
            source,
        })
}
