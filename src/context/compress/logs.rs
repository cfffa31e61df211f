//! Logs: keep errors and warnings (with a little context and their stack traces), the first and
//! last lines and the first line of every distinct pattern; collapse repeats. Lines are compared
//! after normalising timestamps, hex ids and numbers, so `took 12ms` and `took 97ms` repeat.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::units::{self, Minimum, Style, Unit};
use super::{Part, thousands};
use crate::tokens::Tokenizer;

static VOLATILE: LazyLock<Regex> = LazyLock::new(|| {
    // A fixed, tested pattern: compiling it cannot fail.
    #[allow(clippy::expect_used)]
    Regex::new(
        r"(?x)
        \d{4}-\d{2}-\d{2}[T\ ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?
        | \b\d{2}:\d{2}:\d{2}(?:[.,]\d+)?
        | \b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b
        | \b0x[0-9a-fA-F]+\b
        | \b[0-9a-fA-F]*\d[0-9a-fA-F]*[a-fA-F][0-9a-fA-F]*\b
        | \b[0-9a-fA-F]*[a-fA-F][0-9a-fA-F]*\d[0-9a-fA-F]*\b
        | \d+(?:\.\d+)?",
    )
    .expect("valid regex")
});

static ERROR: LazyLock<Regex> = LazyLock::new(|| {
    // Fixed patterns, exercised by the tests: compiling them cannot fail.
    #[allow(clippy::expect_used)]
    Regex::new(r"(?i)\b(?:error|err|fatal|panic(?:ked)?|exception|fail(?:ed|ure)?|critical|crit|emerg|alert|traceback|segfault|abort(?:ed)?)\b")
        .expect("valid regex")
});

static WARNING: LazyLock<Regex> = LazyLock::new(|| {
    // A fixed pattern: compiling it cannot fail.
    #[allow(clippy::expect_used)]
    Regex::new(r"(?i)\b(?:warn|warning|deprecated|timeout|timed out|retry(?:ing)?)\b")
        .expect("valid regex")
});

static LOG_PREFIX: LazyLock<Regex> = LazyLock::new(|| {
    // A fixed pattern: compiling it cannot fail.
    #[allow(clippy::expect_used)]
    Regex::new(
        r"(?x)^(?:
          \[?\d{4}-\d{2}-\d{2}[T\ ]\d{2}:\d{2}
        | \[?\d{4}[-/]\d{2}[-/]\d{2}\]?\s+\[?(?i:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|FATAL|CRITICAL)\b
        | \[?\d{2}:\d{2}:\d{2}
        | (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)\s+\d{1,2}\s+\d{2}:\d{2}
        | \[?(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|FATAL|CRITICAL)\b
        | \d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\s+-\s
        | \[\s*\d+\.\d+\]
        )",
    )
    .expect("valid regex")
});

/// Whether `line` starts like a log record (a timestamp, a date then a level, a level, syslog):
/// the one test, shared by the log reducer and routing's task classes.
pub fn starts_like_log_record(line: &str) -> bool {
    LOG_PREFIX.is_match(line.trim_start())
}

/// The line with its volatile parts replaced, for detecting repeats.
pub(crate) fn normalise(line: &str) -> String {
    VOLATILE.replace_all(line.trim_end(), "#").into_owned()
}

/// True when most of the first lines start like log records (timestamps, levels, syslog).
pub(crate) fn looks_like_logs(content: &str) -> bool {
    let mut total = 0usize;
    let mut hits = 0usize;
    for line in content.lines().filter(|l| !l.trim().is_empty()).take(400) {
        total += 1;
        if starts_like_log_record(line) {
            hits += 1;
        }
    }
    total > 0 && hits * 10 >= total * 4
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Severity {
    Error,
    Warning,
    Other,
}

fn severity(line: &str) -> Severity {
    if ERROR.is_match(line) {
        Severity::Error
    } else if WARNING.is_match(line) {
        Severity::Warning
    } else {
        Severity::Other
    }
}

/// A continuation of a multi-line record (stack frames, indented detail).
fn is_continuation(line: &str) -> bool {
    let trimmed = line.trim_start();
    (line.starts_with(' ') || line.starts_with('\t')) && !trimmed.is_empty()
        || trimmed.starts_with("at ")
        || trimmed.starts_with("Caused by")
        || trimmed.starts_with("...")
}

struct LogStyle<'a> {
    severities: &'a [Severity],
    patterns: &'a [usize],
    pattern_text: &'a [String],
}

impl Style for LogStyle<'_> {
    fn chunk_id(&self, units: &[Unit], run: Range<usize>) -> String {
        units::line_id(units, run)
    }

    fn locator(&self, units: &[Unit], run: Range<usize>) -> String {
        units::line_locator(units, run)
    }

    fn marker(&self, _source: &str, all: &[Unit], run: Range<usize>, id: &str) -> String {
        let n = run.len();
        let errors = run
            .clone()
            .filter(|&i| self.severities[i] == Severity::Error)
            .count();
        let warnings = run
            .clone()
            .filter(|&i| self.severities[i] == Severity::Warning)
            .count();
        let mut detail = String::new();
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        if errors > 0 {
            detail.push_str(&format!(", {} error{}", thousands(errors), plural(errors)));
        }
        if warnings > 0 {
            detail.push_str(&format!(
                ", {} warning{}",
                thousands(warnings),
                plural(warnings)
            ));
        }
        let first = self.patterns[run.start];
        if n > 1 && run.clone().all(|i| self.patterns[i] == first) {
            let pattern: String = self.pattern_text[first].chars().take(80).collect();
            detail.push_str(&format!(", all like: {pattern}"));
        }
        format!(
            "[… {} elided{detail} · recover {id}]",
            units::amount(all, run)
        )
    }
}

/// Keep order: first/last lines, first error of each pattern, its stack trace, first warning of
/// each pattern, context around errors, first line of every other pattern, head and tail,
/// then repeats.
pub(crate) fn reduce(
    source: &str,
    budget: usize,
    tokenizer: &Tokenizer,
    prefix: &str,
) -> Result<(String, usize, Vec<Part>), Minimum> {
    let units = units::line_pieces(source);
    let n = units.len();
    let mut severities = Vec::with_capacity(n);
    let mut patterns = Vec::with_capacity(n);
    let mut pattern_text: Vec<String> = Vec::new();
    let mut pattern_ids: HashMap<String, usize> = HashMap::new();
    let mut first_of_pattern = Vec::with_capacity(n);
    for unit in &units {
        let line = &source[unit.start..unit.end];
        severities.push(severity(line));
        let key = normalise(line);
        let next = pattern_ids.len();
        let id = *pattern_ids.entry(key.clone()).or_insert(next);
        if id == next {
            pattern_text.push(key.trim().to_string());
        }
        first_of_pattern.push(id == next);
        patterns.push(id);
    }
    let continuation: Vec<bool> = units
        .iter()
        .map(|u| is_continuation(&source[u.start..u.end]))
        .collect();
    const HEAD: usize = 10;
    let mut tier = vec![9u8; n];
    for i in 0..n {
        let t = match (severities[i], first_of_pattern[i]) {
            (Severity::Error, true) => 1,
            (Severity::Warning, true) => 3,
            (Severity::Error, false) | (Severity::Warning, false) => 7,
            (Severity::Other, true) => 5,
            (Severity::Other, false) => 9,
        };
        tier[i] = tier[i].min(t);
        if i < HEAD || i + HEAD >= n {
            tier[i] = tier[i].min(6);
        }
        if t == 1 {
            // The stack trace under a new error, and one line of context before and after.
            let mut j = i + 1;
            while j < n && j <= i + 30 && continuation[j] {
                tier[j] = tier[j].min(2);
                j += 1;
            }
            if i > 0 {
                tier[i - 1] = tier[i - 1].min(4);
            }
            if j < n {
                tier[j] = tier[j].min(4);
            }
        }
    }
    tier[0] = 0;
    tier[n - 1] = 0;
    let mut order: Vec<usize> = (0..n).collect();
    // Head and tail lines are ranked by distance from the nearer end; everything else by position.
    order.sort_by_key(|&i| {
        let position = if tier[i] == 6 { i.min(n - 1 - i) } else { i };
        (tier[i], position, i)
    });
    let style = LogStyle {
        severities: &severities,
        patterns: &patterns,
        pattern_text: &pattern_text,
    };
    units::fit(source, &units, &order, budget, tokenizer, &style, prefix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalise_makes_volatile_parts_equal() {
        assert_eq!(
            normalise("2024-01-02T10:00:01Z INFO req 9f8e7d6c took 12ms"),
            normalise("2024-03-09T23:59:59.123Z INFO req 0a1b2c3d took 970ms")
        );
        assert_ne!(normalise("INFO started"), normalise("INFO stopped"));
    }

    #[test]
    fn detects_logs() {
        assert!(looks_like_logs(
            "2024-01-01 10:00:00 INFO a\n2024-01-01 10:00:01 WARN b\n"
        ));
        assert!(looks_like_logs("[ERROR] x\n[INFO] y\n"));
        assert!(!looks_like_logs("fn main() {\n}\n"));
        // Found by probing: stamps of a date alone read as prose, and the reducer for prose
        // dropped the one ERROR line. A date then a level starts a record; a dated sentence
        // does not.
        assert!(looks_like_logs(
            "2024-01-01 INFO step 1 ok\n2024-01-01 INFO step 2 ok\n[2024-01-02] ERROR failed at step 3\n"
        ));
        assert!(!looks_like_logs(
            "2024-01-01 was a Monday.\n2024-01-02 brought rain.\n"
        ));
        // Slashes and lower-case levels too (found by a second probe).
        assert!(starts_like_log_record("2024/01/01 INFO step 1 ok"));
        assert!(starts_like_log_record("2024-01-01 info step 1 ok"));
    }
}
