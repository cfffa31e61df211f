//! A model callback backed by a local command: the request JSON on its stdin, the draft on its
//! stdout. The command is run directly (no shell, so nothing in the request is interpreted),
//! with the environment it inherits: svc adds no provider, endpoint or credential.

use std::io::{self, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::round::ModelRequest;

/// How much of the command's stderr an error quotes.
const STDERR_QUOTE: usize = 400;

/// How long, after the command exits, its output may stay open (held by a process it left
/// running in the background) before that process group is killed and the draft read as is.
const LINGER: Duration = Duration::from_secs(1);

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
            // A group of its own, so the deadline reaches whatever the command started.
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| ModelCommandError::Spawn {
                program: program.clone(),
                source,
            })?;
        // Killed with svc if svc is interrupted while the command runs.
        let group = crate::child_groups::register(child.id());
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
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| io_error(io::Error::other("no stdout")))?;
        let stderr = child
            .stderr
            .take()
            .ok_or_else(|| io_error(io::Error::other("no stderr")))?;
        let out = Collected::start(stdout);
        let err = Collected::start(stderr);
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().map_err(io_error)? {
                break status;
            }
            if started.elapsed() >= self.timeout {
                kill_group(group.as_ref(), &mut child);
                let _ = child.wait();
                return Err(ModelCommandError::Timeout {
                    program,
                    seconds: self.timeout.as_secs_f64(),
                });
            }
            thread::sleep(Duration::from_millis(5));
        };
        // The command has answered. A process it left in the background may still hold its
        // output open; the draft is what the command printed, so that process is not waited
        // for past a short linger (nor past the deadline).
        let linger_until = (Instant::now() + LINGER).min(started + self.timeout.max(LINGER));
        while !(out.done() && err.done()) && Instant::now() < linger_until {
            thread::sleep(Duration::from_millis(5));
        }
        if !(out.done() && err.done()) {
            kill_group(group.as_ref(), &mut child);
        }
        if writer.is_finished() {
            let _ = writer.join();
        }
        let stdout = out.take().map_err(io_error)?;
        let stderr = err.take().unwrap_or_default();
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

/// Kills the command's process group (the command and everything it started); the command
/// alone when the group is gone already.
fn kill_group(group: Option<&crate::child_groups::Registered>, child: &mut Child) {
    if !group.is_some_and(crate::child_groups::Registered::kill) {
        let _ = child.kill();
    }
}

/// A pipe read to its end on a thread, whose bytes so far can be taken without waiting for
/// that end (a background process may hold it open).
struct Collected {
    state: Arc<Mutex<Pipe>>,
}

/// The bytes read so far, and how the read ended once it has.
type Pipe = (Vec<u8>, Option<io::Result<()>>);

impl Collected {
    fn start(mut pipe: impl Read + Send + 'static) -> Self {
        let state = Arc::new(Mutex::new((Vec::new(), None)));
        let shared = state.clone();
        thread::spawn(move || {
            let mut buffer = [0u8; 8192];
            let end = loop {
                match pipe.read(&mut buffer) {
                    Ok(0) => break Ok(()),
                    Ok(n) => lock(&shared).0.extend_from_slice(&buffer[..n]),
                    Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                    Err(error) => break Err(error),
                }
            };
            lock(&shared).1 = Some(end);
        });
        Self { state }
    }

    fn done(&self) -> bool {
        lock(&self.state).1.is_some()
    }

    /// The bytes read so far, or the read's error.
    fn take(self) -> io::Result<Vec<u8>> {
        let mut state = lock(&self.state);
        if let Some(Err(error)) = state.1.take() {
            return Err(error);
        }
        Ok(std::mem::take(&mut state.0))
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A reader thread only pushes bytes; a panic there leaves them as they were.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
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

    /// Found by probing: a command that left a background process holding its output made
    /// the call wait for that process, past --timeout-seconds (forever for a server).
    #[test]
    fn a_background_process_holding_the_output_neither_delays_nor_outlives_the_call() {
        let started = Instant::now();
        let draft = sh("cat >/dev/null; (sleep 30 &); echo answer", 10_000)
            .call(&request())
            .expect("the command answered");
        assert_eq!(draft, "answer\n");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
        // A command still running at the deadline is killed with what it started.
        let started = Instant::now();
        assert!(matches!(
            sh("sleep 30 & sleep 30", 300).call(&request()),
            Err(ModelCommandError::Timeout { .. })
        ));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }
}
