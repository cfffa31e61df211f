//! A model callback backed by a local command: the request JSON on its stdin, the draft on its
//! stdout. The command is run directly (no shell, so nothing in the request is interpreted),
//! with the environment it inherits: svc adds no provider, endpoint or credential.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::round::ModelRequest;

/// How much of the command's stderr an error quotes.
const STDERR_QUOTE: usize = 400;

/// A command that answers model requests.
#[derive(Debug, Clone)]
pub struct ModelCommand {
    pub program: PathBuf,
    pub args: Vec<String>,
    pub timeout: Duration,
}

/// Why a model command gave no draft.
#[derive(Debug, thiserror::Error)]
pub enum ModelCommandError {
    #[error("cannot start model command {program}: {source}")]
    Spawn {
        program: String,
        #[source]
        source: io::Error,
    },
    #[error("model command {program} exited with {status}; its stderr: {stderr}")]
    Failed {
        program: String,
        status: String,
        stderr: String,
    },
    #[error(
        "model command {program} did not finish within {seconds} s and was killed (raise --timeout-seconds)"
    )]
    Timeout { program: String, seconds: f64 },
    #[error(
        "model command {program} printed output that is not UTF-8 (invalid byte at offset {offset}); the draft must be text"
    )]
    NotUtf8 { program: String, offset: usize },
    #[error("cannot talk to model command {program}: {source}")]
    Io {
        program: String,
        #[source]
        source: io::Error,
    },
}

impl ModelCommand {
    fn name(&self) -> String {
        self.program.display().to_string()
    }

    /// Runs the command once for `request` and returns its stdout as the draft.
    pub fn call(&self, request: &ModelRequest) -> Result<String, ModelCommandError> {
        let program = self.name();
        let mut child = Command::new(&self.program)
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| ModelCommandError::Spawn {
                program: program.clone(),
                source,
            })?;
        let io_error = |source| ModelCommandError::Io {
            program: program.clone(),
            source,
        };
        let input = request.to_json().into_bytes();
        let mut stdin = child
            .stdin
            .take()
            .ok_or_else(|| io_error(io::Error::other("no stdin")))?;
        // Written on a thread: a command that prints before reading its whole input must not
        // deadlock against a full pipe.
        let writer = thread::spawn(move || {
            // A command that exits without reading its input is not an error of ours.
            let _ = stdin.write_all(&input);
        });
        let mut stdout = child
            .stdout
            .take()
            .ok_or_else(|| io_error(io::Error::other("no stdout")))?;
        let mut stderr = child
            .stderr
            .take()
            .ok_or_else(|| io_error(io::Error::other("no stderr")))?;
        let out_reader = thread::spawn(move || {
            let mut bytes = Vec::new();
            stdout.read_to_end(&mut bytes).map(|_| bytes)
        });
        let err_reader = thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = stderr.read_to_end(&mut bytes);
            bytes
        });
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().map_err(io_error)? {
                break status;
            }
            if started.elapsed() >= self.timeout {
                let _ = child.kill();
                let _ = child.wait();
                // The readers are left behind: a grandchild may still hold the pipes open.
                return Err(ModelCommandError::Timeout {
                    program,
                    seconds: self.timeout.as_secs_f64(),
                });
            }
            thread::sleep(Duration::from_millis(5));
        };
        let _ = writer.join();
        let stdout = out_reader
            .join()
            .map_err(|_| io_error(io::Error::other("stdout reader failed")))?
            .map_err(io_error)?;
        let stderr = err_reader.join().unwrap_or_default();
        if !status.success() {
            let text = String::from_utf8_lossy(&stderr);
            let text = text.trim();
            let quoted: String = text.chars().take(STDERR_QUOTE).collect();
            return Err(ModelCommandError::Failed {
                program,
                status: status.to_string(),
                stderr: if quoted.is_empty() {
                    "(empty)".to_string()
                } else {
                    quoted
                },
            });
        }
        String::from_utf8(stdout).map_err(|e| ModelCommandError::NotUtf8 {
            program,
            offset: e.utf8_error().valid_up_to(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, timeout_ms: u64) -> ModelCommand {
        ModelCommand {
            program: PathBuf::from("/bin/sh"),
            args: vec!["-c".to_string(), script.to_string()],
            timeout: Duration::from_millis(timeout_ms),
        }
    }

    fn request() -> ModelRequest {
        ModelRequest {
            query: "q".to_string(),
            stable_context_prefix: "prefix".to_string(),
            appended_evidence: Vec::new(),
            previous_output: None,
        }
    }

    #[test]
    fn the_command_reads_the_request_and_its_failures_are_typed() {
        let echo = sh("cat", 5000).call(&request()).expect("echo");
        let parsed: ModelRequest = serde_json::from_str(&echo).expect("request json on stdin");
        assert_eq!(parsed, request());
        assert!(matches!(
            sh("echo oops >&2; exit 3", 5000).call(&request()),
            Err(ModelCommandError::Failed { stderr, .. }) if stderr == "oops"
        ));
        assert!(matches!(
            sh("sleep 5", 100).call(&request()),
            Err(ModelCommandError::Timeout { .. })
        ));
        assert!(matches!(
            sh("printf 'ab\\377'", 5000).call(&request()),
            Err(ModelCommandError::NotUtf8 { offset: 2, .. })
        ));
        let missing = ModelCommand {
            program: PathBuf::from("/nonexistent/model"),
            args: Vec::new(),
            timeout: Duration::from_secs(1),
        };
        assert!(matches!(
            missing.call(&request()),
            Err(ModelCommandError::Spawn { .. })
        ));
    }
}
