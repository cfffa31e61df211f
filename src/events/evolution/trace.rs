//! The evolution trace: one JSON line per step of a dream cycle, appended to
//! `learning/evolution.jsonl` (never rewritten), under an OS lock beside it.
//!
//! Within a cycle the steps come in the order detect → synthesize → benchmark → promote →
//! spend (SPEC §6.2); [`CycleTrace::append`] refuses a step that would go back in that order,
//! so a trace out of order cannot be written.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The trace, relative to the state directory.
pub const TRACE_FILE: &str = "learning/evolution.jsonl";
/// Format tag of each line.
pub const TRACE_FORMAT: &str = "svc.evolution.v1";

/// The closed set of steps, in their order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    Detect,
    Synthesize,
    Benchmark,
    Promote,
    Spend,
}

impl StepKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StepKind::Detect => "detect",
            StepKind::Synthesize => "synthesize",
            StepKind::Benchmark => "benchmark",
            StepKind::Promote => "promote",
            StepKind::Spend => "spend",
        }
    }
}

/// What a step did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    /// A gap observed: its entity and miss count.
    Detect {
        entity: String,
        miss_count: usize,
        threshold: usize,
        chunk_ids: Vec<String>,
    },
    /// A draft skill made for a gap.
    Synthesize {
        skill_id: String,
        entity: String,
        trigger_terms: Vec<String>,
        include: Vec<String>,
        /// Runs it was made from.
        synthesized_from: Vec<String>,
        token_cost: f64,
    },
    /// A skill replayed with and without it.
    Benchmark {
        skill_id: String,
        queries: usize,
        held_out: bool,
        misses_without: usize,
        misses_with: usize,
        worsened: usize,
        passed: bool,
        verdict: String,
    },
    /// The status decision after a benchmark.
    Promote {
        skill_id: String,
        promoted: bool,
        /// `draft` or `promoted` after the step.
        status: String,
        reason: String,
    },
    /// Tokens spent on learning in the cycle, and the invariant spend ≤ tau × savings.
    Spend {
        tokens: u64,
        allowed: bool,
        /// Learning spend over the state's lifetime, after this step.
        lifetime_spend: u64,
        lifetime_savings: u64,
        tau: f64,
    },
}

impl Step {
    pub fn kind(&self) -> StepKind {
        match self {
            Step::Detect { .. } => StepKind::Detect,
            Step::Synthesize { .. } => StepKind::Synthesize,
            Step::Benchmark { .. } => StepKind::Benchmark,
            Step::Promote { .. } => StepKind::Promote,
            Step::Spend { .. } => StepKind::Spend,
        }
    }
}

/// One trace line. (No `deny_unknown_fields`: serde does not support it with `flatten`.)
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TraceLine {
    pub format: String,
    pub sequence: u64,
    pub cycle_id: String,
    pub at: String,
    #[serde(flatten)]
    pub step: Step,
}

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error(
        "trace step {step} after {last} in cycle {cycle_id}: steps go detect, synthesize, benchmark, promote, spend"
    )]
    OutOfOrder {
        cycle_id: String,
        step: &'static str,
        last: &'static str,
    },
    #[error("cannot write the trace {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{path}:{line}: not a trace line: {message}; the trace records learning spend, so svc stops rather than undercount it: fix or delete that line"
    )]
    Broken {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// Reads the whole trace (empty when absent).
pub fn read(home: &Path) -> Result<Vec<TraceLine>, TraceError> {
    let path = home.join(TRACE_FILE);
    let text = match fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => return Err(TraceError::Io { path, source }),
    };
    // A last line without its newline was cut off by a crash mid-append: never acknowledged,
    // not a step (a torn tail stopped every later cycle with "not a trace line").
    let complete = match text.rfind('\n') {
        Some(end) => &text[..=end],
        None => "",
    };
    complete
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, line)| {
            serde_json::from_str(line).map_err(|e| TraceError::Broken {
                path: path.clone(),
                line: i + 1,
                message: e.to_string(),
            })
        })
        .collect()
}

/// The trace of one cycle, appending in step order.
#[derive(Debug)]
pub struct CycleTrace {
    home: PathBuf,
    cycle_id: String,
    last: Option<StepKind>,
    lines: Vec<TraceLine>,
}

impl CycleTrace {
    pub fn new(home: &Path, cycle_id: &str) -> Self {
        Self {
            home: home.to_path_buf(),
            cycle_id: cycle_id.to_string(),
            last: None,
            lines: Vec::new(),
        }
    }

    /// Lines appended by this cycle so far.
    pub fn lines(&self) -> &[TraceLine] {
        &self.lines
    }

    /// Appends `step` (fsynced) unless it would go back in step order.
    pub fn append(&mut self, step: Step) -> Result<&TraceLine, TraceError> {
        let kind = step.kind();
        if let Some(last) = self.last
            && kind < last
        {
            return Err(TraceError::OutOfOrder {
                cycle_id: self.cycle_id.clone(),
                step: kind.as_str(),
                last: last.as_str(),
            });
        }
        let path = self.home.join(TRACE_FILE);
        let io_error = |source| TraceError::Io {
            path: path.clone(),
            source,
        };
        // Serialises appends of concurrent cycles (the daemon's and a `svc dream`), so sequence
        // numbers stay unique.
        let held = crate::state::append::lock(&path).map_err(io_error)?;
        let sequence = match fs::read_to_string(&path) {
            Ok(text) => {
                // A torn tail (see [`read`]) is cut before appending, not left in the middle.
                let complete = text.rfind('\n').map_or(0, |end| end + 1);
                if complete < text.len() {
                    crate::state::append::cut_to(&path, complete as u64).map_err(io_error)?;
                }
                text[..complete]
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .count() as u64
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => 0,
            Err(source) => return Err(io_error(source)),
        };
        let line = TraceLine {
            format: TRACE_FORMAT.to_string(),
            sequence,
            cycle_id: self.cycle_id.clone(),
            at: crate::clock::rfc3339(std::time::SystemTime::now()),
            step,
        };
        // Strings, integers, booleans and finite floats serialise infallibly.
        let mut bytes = serde_json::to_vec(&line).unwrap_or_default();
        bytes.push(b'\n');
        crate::state::append::append(&held, &path, &bytes, true).map_err(io_error)?;
        self.last = Some(kind);
        let index = self.lines.len();
        self.lines.push(line);
        Ok(&self.lines[index])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (found by probing): a torn last line (a crash mid-append) stopped every later
    /// dream cycle with "not a trace line". It is not a step, and the next append cuts it.
    #[test]
    fn a_torn_last_line_is_not_a_step_and_the_next_append_cuts_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let detect = || Step::Detect {
            entity: "a.md".into(),
            miss_count: 3,
            threshold: 3,
            chunk_ids: vec!["a.md#L1-2".into()],
        };
        CycleTrace::new(dir.path(), "dream_1")
            .append(detect())
            .expect("detect");
        let path = dir.path().join(TRACE_FILE);
        let whole = fs::read_to_string(&path).expect("trace");
        fs::write(&path, format!("{whole}{}", &whole[..whole.len() / 2])).expect("tear");
        assert_eq!(read(dir.path()).expect("a torn tail is skipped").len(), 1);
        let appended = CycleTrace::new(dir.path(), "dream_2")
            .append(detect())
            .expect("append")
            .sequence;
        assert_eq!(appended, 1);
        let lines = read(dir.path()).expect("read after the cut");
        assert_eq!(lines.len(), 2);
        // A broken line in the middle still stops (the trace counts spend), and says what to do.
        fs::write(&path, format!("{{broken\n{whole}")).expect("break");
        let error = read(dir.path()).expect_err("broken").to_string();
        assert!(
            error.contains(":1: not a trace line") && error.contains("fix or delete"),
            "{error}"
        );
    }

    #[test]
    fn a_step_that_goes_back_in_order_is_refused_and_not_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut trace = CycleTrace::new(dir.path(), "dream_1");
        trace
            .append(Step::Detect {
                entity: "a.md".into(),
                miss_count: 3,
                threshold: 3,
                chunk_ids: vec!["a.md#L1-2".into()],
            })
            .expect("detect");
        trace
            .append(Step::Benchmark {
                skill_id: "skl_1".into(),
                queries: 1,
                held_out: false,
                misses_without: 1,
                misses_with: 0,
                worsened: 0,
                passed: true,
                verdict: "ok".into(),
            })
            .expect("benchmark after detect");
        let back = trace.append(Step::Synthesize {
            skill_id: "skl_1".into(),
            entity: "a.md".into(),
            trigger_terms: vec![],
            include: vec![],
            synthesized_from: vec![],
            token_cost: 0.0,
        });
        assert!(matches!(
            back,
            Err(TraceError::OutOfOrder {
                step: "synthesize",
                last: "benchmark",
                ..
            })
        ));
        let lines = read(dir.path()).expect("read");
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1].sequence, 1);
        // A new cycle starts over at detect.
        let mut next = CycleTrace::new(dir.path(), "dream_2");
        next.append(Step::Detect {
            entity: "b.md".into(),
            miss_count: 3,
            threshold: 3,
            chunk_ids: vec![],
        })
        .expect("a new cycle");
        assert_eq!(read(dir.path()).expect("read")[2].sequence, 2);
    }
}
