//! A tiny test harness: run the built `svc` binary and compare outputs with a readable diff.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The repository root (for fixtures).
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A command for the built `svc` binary with an isolated state directory.
pub fn svc(state: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_svc"));
    command
        .current_dir(root())
        .env("SVC_HOME", state)
        // Fixture trees live in this repository: its own recent commits must not move their
        // rankings (tests of the lift set the variable themselves).
        .env("SVC_RECENT_COMMITS", "0")
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    command
}

/// Output of a finished command, as text.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn run(command: &mut Command) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = command.output().expect("svc binary runs");
    Run {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// Like [`run`], with `input` on standard input.
pub fn run_with_stdin(command: &mut Command, input: &[u8]) -> Run {
    use std::io::Write;
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("svc binary runs");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("write stdin");
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().expect("svc binary runs");
    Run {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// Assert two texts are equal, showing a line diff when they are not.
#[track_caller]
pub fn assert_text_eq(expected: &str, got: &str) {
    if expected == got {
        return;
    }
    let mut diff = String::new();
    let expected_lines: Vec<_> = expected.lines().collect();
    let got_lines: Vec<_> = got.lines().collect();
    for i in 0..expected_lines.len().max(got_lines.len()) {
        let (e, g) = (expected_lines.get(i), got_lines.get(i));
        if e != g {
            diff.push_str(&format!(
                "line {}:\n  expected: {:?}\n  got:      {:?}\n",
                i + 1,
                e,
                g
            ));
        }
    }
    panic!("texts differ:\n{diff}");
}
