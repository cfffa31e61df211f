//! The `daemon` group of `svc bench`: file change → index updated, through the real watcher
//! (inotify, debounce, incremental rebuild) on a generated repository of about a million
//! tokens.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::bench::{BenchError, Figure};
use crate::dashboard::{DashboardSettings, DashboardState, Role};

/// Changes timed; the median is reported.
const CHANGES: usize = 7;

/// Writes Rust files of varied functions until about `tokens` tokens (≈ 4 bytes a token).
fn generate_repo(root: &Path, tokens: usize) -> Result<(), BenchError> {
    let words = [
        "parse", "config", "buffer", "index", "token", "budget", "witness", "commit", "chunk",
        "proxy", "stream", "route", "claim", "evidence", "record", "report",
    ];
    let target_bytes = tokens * 4;
    let mut written = 0;
    let mut file_index = 0;
    while written < target_bytes {
        let dir = root.join(format!("module_{:02}", file_index % 20));
        std::fs::create_dir_all(&dir)?;
        let mut text = String::new();
        for function in 0..40 {
            let a = words[(file_index + function) % words.len()];
            let b = words[(file_index * 7 + function * 3) % words.len()];
            let _ = write!(
                text,
                "/// Returns the {a} of a {b}, folded with {function} and {file_index}.\n\
pub fn {a}_{b}_{file_index}_{function}(input: u64, limit: u64) -> u64 {{\n    \
let mut value = input.wrapping_mul({k});\n    \
for step in 0..limit.min({function} + 3) {{\n        \
value = value.rotate_left(step as u32) ^ {file_index};\n    }}\n    \
if value % 7 == 3 {{ value / 3 }} else {{ value + {function} }}\n}}\n\n",
                k = 31 + file_index * 40 + function
            );
        }
        written += text.len();
        std::fs::write(dir.join(format!("file_{file_index:04}.rs")), text)?;
        file_index += 1;
    }
    Ok(())
}

/// Times file change → index updated on a generated repository of about `tokens` tokens.
pub fn watcher_figure(tokens: usize) -> Result<Figure, BenchError> {
    let dir = tempfile::tempdir()?;
    let repo = dir.path().join("repo");
    generate_repo(&repo, tokens)?;
    let mut settings = DashboardSettings::new(Role::Daemon, dir.path().join("home"));
    settings.repos = vec![repo.clone()];
    let state = DashboardState::new(settings, None);
    // The first build parses everything and persists the index (not timed).
    let first = state.reindex(&repo);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let (times, mut rebuilds) = runtime.block_on(async {
        let watcher = tokio::spawn(super::watcher::run(state.clone(), vec![repo.clone()]));
        // Let the recursive inotify watches settle.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let mut times = Vec::new();
        let mut rebuilds = Vec::new();
        for change in 0..CHANGES {
            let before = state.repos()[0].files;
            let path = repo.join(format!("module_00/changed_{change}.rs"));
            let start = Instant::now();
            std::fs::write(
                &path,
                format!("pub fn changed_{change}(x: u64) -> u64 {{\n    x + {change}\n}}\n"),
            )?;
            let deadline = start + Duration::from_secs(30);
            while state.repos()[0].files == before {
                if Instant::now() > deadline {
                    return Err(BenchError::Io(std::io::Error::other(
                        "the watcher did not re-index within 30 s",
                    )));
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            times.push(start.elapsed().as_secs_f64() * 1000.0);
            rebuilds.push(state.repos()[0].duration_ms.unwrap_or_default());
            // Quiet time so each change is its own burst.
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        state.request_stop();
        let _ = watcher.await;
        Ok::<_, BenchError>((times, rebuilds))
    })?;
    let mut sorted = times.clone();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    rebuilds.sort_by(f64::total_cmp);
    Ok(Figure {
        name: "daemon: file change -> index updated".into(),
        value: median,
        unit: "ms".into(),
        target: Some("<= 500 on a 1M-token repo".into()),
        detail: format!(
            "{} tokens in {} files; median of {CHANGES} new files (max {:.0} ms), {} ms debounce included; the rebuild itself (walk, hash, parse the changed file, persist) {:.0} ms median",
            first.tokens,
            first.files,
            sorted[sorted.len() - 1],
            super::watcher::DEBOUNCE.as_millis(),
            rebuilds[rebuilds.len() / 2]
        ),
    })
}
