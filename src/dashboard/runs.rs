//! Runs for the viewer: finding run directories (a `manifest.json`, written by `svc run`) and
//! report directories (a `summary.json`, written by `svc report`) under the viewer's folders,
//! and paging a run's trial records.
//!
//! Paging never loads `trials.jsonl` whole: a page reads forward from a byte offset (the
//! cursor) until it holds [`PAGE_SIZE`] matching records, so the first page of a 100K-record
//! run costs the same as that of a 10-record run. Only the fields the list shows are decoded.

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::harness::run::{self, Manifest};
use crate::trial::{Condition, Outcome};

/// Trial records per page.
pub const PAGE_SIZE: usize = 50;
/// Most bytes a page scans looking for matches before it stops and offers the next page.
pub const SCAN_BYTES: u64 = 16 * 1024 * 1024;

/// A directory the viewer lists.
#[derive(Debug, Clone)]
pub struct Entry {
    /// Stable within one viewer: `<root index>/<path under the root>`.
    pub id: String,
    pub dir: PathBuf,
    pub kind: EntryKind,
}

#[derive(Debug, Clone)]
pub enum EntryKind {
    /// A run directory of `svc run`.
    Run(Box<Manifest>),
    /// A directory with a `manifest.json` that cannot be read: listed with why, not left out.
    Unreadable(String),
    /// A report directory of `svc report` (summary.json, report.md, SVG plots).
    Report,
}

fn visit(root_index: usize, root: &Path, dir: &Path, depth: usize, out: &mut Vec<Entry>) {
    let id = || {
        let relative = dir.strip_prefix(root).unwrap_or(dir);
        let relative = relative.to_string_lossy().replace('\\', "/");
        if relative.is_empty() {
            format!("{root_index}/.")
        } else {
            format!("{root_index}/{relative}")
        }
    };
    match run::load_manifest(dir) {
        Ok(Some(manifest)) => {
            out.push(Entry {
                id: id(),
                dir: dir.to_path_buf(),
                kind: EntryKind::Run(Box::new(manifest)),
            });
            return;
        }
        Err(problem) => {
            out.push(Entry {
                id: id(),
                dir: dir.to_path_buf(),
                kind: EntryKind::Unreadable(problem),
            });
            return;
        }
        Ok(None) => {}
    }
    if dir.join("summary.json").is_file() {
        out.push(Entry {
            id: id(),
            dir: dir.to_path_buf(),
            kind: EntryKind::Report,
        });
    }
    if depth == 0 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut children: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    children.sort();
    for child in children {
        visit(root_index, root, &child, depth - 1, out);
    }
}

/// Every run and report directory under `roots` (each searched three levels deep).
pub fn discover(roots: &[PathBuf]) -> Vec<Entry> {
    let mut out = Vec::new();
    for (index, root) in roots.iter().enumerate() {
        visit(index, root, root, 3, &mut out);
    }
    out
}

/// The entry with this id, if it is still there.
pub fn find(roots: &[PathBuf], id: &str) -> Option<Entry> {
    discover(roots).into_iter().find(|e| e.id == id)
}

/// What the trial list shows of a record.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TrialRow {
    pub task_id: String,
    pub condition: Condition,
    pub replicate: u64,
    pub outcome: Outcome,
    pub error_type: Option<String>,
    pub task_score: f64,
    pub evidence_recall: f64,
    pub context_tokens: u64,
    pub output_tokens: u64,
    pub latency_ms: f64,
    pub context_commit_id: Option<String>,
    /// 1-based line in trials.jsonl (set by the reader).
    #[serde(skip)]
    pub line: usize,
}

/// Which records a page shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrialQuery {
    pub condition: Option<Condition>,
    pub min_score: Option<f64>,
    pub max_score: Option<f64>,
    /// `any` error, `none` (successes only) or one error type.
    pub error: Option<String>,
    /// Substring of the task id.
    pub task: Option<String>,
}

impl TrialQuery {
    pub fn matches(&self, row: &TrialRow) -> bool {
        self.condition.is_none_or(|c| c == row.condition)
            && self.min_score.is_none_or(|m| row.task_score >= m)
            && self.max_score.is_none_or(|m| row.task_score <= m)
            && self.task.as_deref().is_none_or(|t| row.task_id.contains(t))
            && match self.error.as_deref() {
                None | Some("") => true,
                Some("any") => row.outcome == Outcome::Error,
                Some("none") => row.outcome == Outcome::Success,
                Some(kind) => row.error_type.as_deref() == Some(kind),
            }
    }
}

/// One page of trial records.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialPage {
    pub rows: Vec<TrialRow>,
    /// Byte offset where the page started.
    pub start: u64,
    /// Byte offset to continue from, when the file goes on.
    pub next: Option<u64>,
    /// 1-based line number at `start` and at `next`.
    pub first_line: usize,
    pub next_line: usize,
    /// Lines that did not decode (shown, not fatal: `svc records validate` explains them).
    pub unreadable: usize,
    /// Bytes scanned.
    pub scanned: u64,
    pub file_bytes: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum PageError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: offset {offset} is past the end of the file ({len} bytes)")]
    BadOffset {
        path: PathBuf,
        offset: u64,
        len: u64,
    },
    #[error(
        "{path}: offset {offset} is inside a line, not at the start of one (the file changed, or the cursor was typed); start again from the first page"
    )]
    InsideLine { path: PathBuf, offset: u64 },
}

/// Reads the page of `trials` starting at byte `start` (0 or a `next` of an earlier page).
/// Line numbers are counted from the file, not taken from the caller, so a cursor cannot make
/// them lie.
pub fn page(trials: &Path, start: u64, query: &TrialQuery) -> Result<TrialPage, PageError> {
    let io = |source| PageError::Io {
        path: trials.to_path_buf(),
        source,
    };
    let file = File::open(trials).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    if start > len {
        return Err(PageError::BadOffset {
            path: trials.to_path_buf(),
            offset: start,
            len,
        });
    }
    let mut reader = BufReader::with_capacity(256 * 1024, file);
    // Lines before the cursor, which must follow a line break.
    let mut before = 0usize;
    let mut remaining = start;
    let mut last = b'\n';
    while remaining > 0 {
        let chunk = reader.fill_buf().map_err(io)?;
        if chunk.is_empty() {
            break;
        }
        let take = chunk
            .len()
            .min(usize::try_from(remaining).unwrap_or(usize::MAX));
        before += chunk[..take].iter().filter(|&&b| b == b'\n').count();
        last = chunk[take - 1];
        reader.consume(take);
        remaining -= take as u64;
    }
    if last != b'\n' {
        return Err(PageError::InsideLine {
            path: trials.to_path_buf(),
            offset: start,
        });
    }
    let first_line = before + 1;
    let mut offset = start;
    let mut buffer = Vec::new();
    let mut line_number = first_line;
    let mut rows = Vec::new();
    let mut unreadable = 0;
    loop {
        if rows.len() == PAGE_SIZE || offset - start >= SCAN_BYTES {
            break;
        }
        buffer.clear();
        let read = reader.read_until(b'\n', &mut buffer).map_err(io)?;
        if read == 0 {
            break;
        }
        offset += read as u64;
        let line = buffer.trim_ascii();
        if !line.is_empty() {
            match serde_json::from_slice::<TrialRow>(line) {
                Ok(mut row) => {
                    row.line = line_number;
                    if query.matches(&row) {
                        rows.push(row);
                    }
                }
                Err(_) => unreadable += 1,
            }
        }
        line_number += 1;
    }
    Ok(TrialPage {
        rows,
        start,
        next: (offset < len).then_some(offset),
        first_line,
        next_line: line_number,
        unreadable,
        scanned: offset - start,
        file_bytes: len,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn record(task: &str, condition: &str, score: f64, error: Option<&str>) -> String {
        let (outcome, error_type) = match error {
            Some(kind) => ("error", format!("\"{kind}\"")),
            None => ("success", "null".to_string()),
        };
        format!(
            "{{\"task_id\":\"{task}\",\"condition\":\"{condition}\",\"replicate\":0,\"outcome\":\"{outcome}\",\"error_type\":{error_type},\"task_score\":{score},\"evidence_recall\":1,\"context_tokens\":10,\"output_tokens\":2,\"latency_ms\":1.5,\"context_commit_id\":null,\"response_text\":\"x\"}}\n"
        )
    }

    #[test]
    fn pages_follow_cursors_filter_and_count_lines() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("trials.jsonl");
        let mut file = File::create(&path).expect("create");
        for i in 0..120 {
            let condition = if i % 2 == 0 { "raw" } else { "svc" };
            let error = (i % 10 == 3).then_some("timeout");
            file.write_all(
                record(&format!("t{i}"), condition, (i % 5) as f64 / 4.0, error).as_bytes(),
            )
            .expect("write");
        }
        file.write_all(b"not json\n").expect("write");
        drop(file);

        let all = TrialQuery::default();
        let first = page(&path, 0, &all).expect("page");
        assert_eq!(first.rows.len(), PAGE_SIZE);
        assert_eq!(first.rows[0].task_id, "t0");
        assert_eq!(first.rows[49].line, 50);
        let second = page(&path, first.next.expect("more"), &all).expect("page");
        assert_eq!(second.rows[0].task_id, "t50");
        assert_eq!(second.rows[0].line, 51);
        let third = page(&path, second.next.expect("more"), &all).expect("page");
        assert_eq!(third.rows.len(), 20);
        assert_eq!(third.unreadable, 1);
        assert_eq!(third.next, None);
        assert_eq!(second.next_line, 101);

        let svc_errors = TrialQuery {
            condition: Some(Condition::Svc),
            error: Some("timeout".into()),
            ..TrialQuery::default()
        };
        let errors = page(&path, 0, &svc_errors).expect("page");
        let ids: Vec<&str> = errors.rows.iter().map(|r| r.task_id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "t3", "t13", "t23", "t33", "t43", "t53", "t63", "t73", "t83", "t93", "t103", "t113"
            ]
        );
        let high = TrialQuery {
            min_score: Some(0.75),
            error: Some("none".into()),
            ..TrialQuery::default()
        };
        assert!(
            page(&path, 0, &high)
                .expect("page")
                .rows
                .iter()
                .all(|r| r.task_score >= 0.75 && r.error_type.is_none())
        );
        assert!(matches!(
            page(&path, 1 << 40, &all),
            Err(PageError::BadOffset { .. })
        ));
        // Found by probing: a cursor typed inside a line skipped to the next one and numbered
        // it line 1.
        assert!(matches!(
            page(&path, 3, &all),
            Err(PageError::InsideLine { offset: 3, .. })
        ));
    }

    #[test]
    fn discovery_finds_runs_and_reports_with_stable_ids() {
        let dir = tempfile::tempdir().expect("tempdir");
        let report = dir.path().join("out");
        std::fs::create_dir_all(&report).expect("mkdir");
        std::fs::write(report.join("summary.json"), "{}").expect("write");
        let entries = discover(&[dir.path().to_path_buf()]);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].id, "0/out");
        assert!(matches!(entries[0].kind, EntryKind::Report));
        assert!(find(&[dir.path().to_path_buf()], "0/out").is_some());
        assert!(find(&[dir.path().to_path_buf()], "0/elsewhere").is_none());
        // Found by probing: a run whose manifest.json is damaged was left out without a word.
        let run = dir.path().join("runs/broken");
        std::fs::create_dir_all(&run).expect("mkdir");
        std::fs::write(run.join("manifest.json"), "{\"run_id\": ").expect("write");
        let entries = discover(&[dir.path().to_path_buf()]);
        let broken = entries
            .iter()
            .find(|e| e.id == "0/runs/broken")
            .expect("listed");
        assert!(
            matches!(&broken.kind, EntryKind::Unreadable(why) if why.contains("manifest.json")),
            "{:?}",
            broken.kind
        );
    }
}
