//! Durable proof-guided sessions (`pgs_…`, SPEC §2.3): one private JSON file per session under
//! `proof/sessions/`, replaced atomically on every change and hash-checked on every load.
//!
//! Lifecycle (SPEC §3.2, defined here):
//!
//! ```text
//! prepare ──► awaiting_draft ──advance(draft)──► awaiting_draft   (evidence recovered, ask again)
//!                   │                        ├──► finished         (a terminal status; result kept)
//!                   │                        └──► failed           (verification or recovery error;
//!                   │                                               signed artifact path kept)
//!                   └── inspect: any state, never changes it
//! ```
//!
//! `finished` and `failed` are final: a later advance is refused, except that an idempotency key
//! already used replays its original response byte-for-byte at any revision.
//!
//! The file is `{format, body_sha256, body}`; `body_sha256` is the SHA-256 of the compact JSON
//! of `body`. A file whose body does not hash to it (edited, truncated, or written by something
//! else) is refused rather than resumed.
//!
//! **Concurrency.** A change (load, advance, save) runs under the session's exclusive lock
//! ([`lock`]): `pgs_….lock` beside the session file, held with an OS file lock (`flock`), so
//! two processes advancing one session take turns and each sees the other's revision; neither
//! update is lost and the session never forks. The kernel drops the lock when its holder dies,
//! so a crashed advance leaves no lock that blocks anyone: the lock file only says who held it
//! last (`{pid, since}`, emptied on a clean release), and the session file, replaced
//! atomically, is at its last saved revision. A holder that is alive but does not finish within
//! the wait is a [`SessionError::Locked`] naming it. The lock file is never removed: removing
//! a lock file another process has open would let a third lock a new file at the same path.

use std::collections::BTreeMap;
use std::fs;
use std::io::{self, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::fixed_point::LoopState;
use super::layer::Prepared;
use crate::digest;
use crate::state;

/// Format tag of session files.
pub const SESSION_FORMAT: &str = "svc.proof-session.v1";
/// Directory of session files, relative to the state directory.
pub const SESSION_DIR: &str = "proof/sessions";

/// Where a session is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    /// A request is pending: the client must send the model's draft with `advance`.
    AwaitingDraft,
    /// The loop reached a terminal status; the result is kept.
    Finished,
    /// Verification or recovery failed; the signed failure artifact is named.
    Failed,
}

impl SessionState {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionState::AwaitingDraft => "awaiting_draft",
            SessionState::Finished => "finished",
            SessionState::Failed => "failed",
        }
    }
}

/// What a failed session records.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionFailure {
    pub message: String,
    pub artifact_path: Option<String>,
}

/// A response kept for an idempotency key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdempotencyRecord {
    /// `prepare` or `advance`.
    pub operation: String,
    /// SHA-256 of the input the key was first used with (for advance: the model text).
    pub input_sha256: String,
    /// Revision the response was made at.
    pub revision: u64,
    /// The exact response bytes.
    pub response: String,
}

/// Everything a session holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionBody {
    pub session_id: String,
    pub created_at: String,
    pub updated_at: String,
    /// 0 after prepare; +1 per accepted advance.
    pub revision: u64,
    pub state: SessionState,
    pub prepared: Prepared,
    pub run: LoopState,
    pub failure: Option<SessionFailure>,
    /// Keys used with advance, and their responses.
    pub idempotency: BTreeMap<String, IdempotencyRecord>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionFile {
    format: String,
    body_sha256: String,
    body: SessionBody,
}

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("{id} is not a session id (they look like pgs_0123abcd…)")]
    BadId { id: String },
    #[error("unknown session {id}: no {path} (sessions live under {dir})", dir = .path.parent().map(|p| p.display().to_string()).unwrap_or_default())]
    Unknown { id: String, path: PathBuf },
    #[error("cannot read session {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is not a valid session file: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{path} is not a valid idempotency record: {source}; move it away (a prepare with its key then runs anew)"
    )]
    KeyRecord {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{path} is corrupted: its body does not hash to body_sha256 (edited or damaged); it will not be resumed"
    )]
    HashMismatch { path: PathBuf },
    #[error("{path} has format {found}, expected {SESSION_FORMAT}")]
    Format { path: PathBuf, found: String },
    #[error(
        "idempotency key {key} was already used for {operation} with different input; use a new key for a new request"
    )]
    IdempotencyConflict { key: String, operation: String },
    #[error(
        "the draft for session {id} is empty: there is nothing to verify (the session is unchanged; send the model's answer)"
    )]
    EmptyDraft { id: String },
    #[error("session {id} is {state} and takes no more drafts (see `svc proof inspect {id}`)")]
    Closed { id: String, state: &'static str },
    #[error(
        "session {id} is being advanced by another process ({holder}); waited {waited_seconds:.1} s for its lock {path}. Retry when it is done; if it hangs, stop it: the session file is never half-written, so the next advance resumes from its last saved revision"
    )]
    Locked {
        id: String,
        path: PathBuf,
        /// Who holds it, as its lock file says.
        holder: String,
        waited_seconds: f64,
    },
    #[error("cannot lock session {path}: {source}")]
    Lock {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    State(#[from] state::StateError),
}

/// How long a change waits for a session's lock by default: an advance verifies and recovers
/// in well under a second, so this is many advances' worth.
pub const LOCK_WAIT: Duration = Duration::from_secs(30);

/// How often a waiting process tries the lock again.
const LOCK_POLL: Duration = Duration::from_millis(20);

/// Who holds a session lock, written into the lock file for the error of a waiting process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct LockHolder {
    pid: u32,
    since: String,
}

/// A held session lock; released (and its holder line emptied) when dropped.
#[derive(Debug)]
pub struct SessionLock {
    file: fs::File,
}

impl Drop for SessionLock {
    fn drop(&mut self) {
        // Emptied first, so a holder line in the file means its holder did not finish. Both
        // steps are best effort: the kernel releases the lock when the file is closed anyway.
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

/// Path of a session's lock file.
pub fn lock_path_of(state_dir: &Path, id: &str) -> Result<PathBuf, SessionError> {
    Ok(path_of(state_dir, id)?.with_extension("lock"))
}

/// Takes the exclusive lock of session `id`, waiting up to `wait` for another holder to finish.
/// An unknown session is refused before any lock file is made for it.
pub fn lock(state_dir: &Path, id: &str, wait: Duration) -> Result<SessionLock, SessionError> {
    let session_path = path_of(state_dir, id)?;
    if !session_path.exists() {
        return Err(SessionError::Unknown {
            id: id.to_string(),
            path: session_path,
        });
    }
    let path = lock_path_of(state_dir, id)?;
    let io_error = |source| SessionError::Lock {
        path: path.clone(),
        source,
    };
    let mut options = fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(&path).map_err(io_error)?;
    let started = Instant::now();
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(fs::TryLockError::WouldBlock) => {
                if started.elapsed() >= wait {
                    return Err(SessionError::Locked {
                        id: id.to_string(),
                        holder: describe_holder(&mut file),
                        path,
                        waited_seconds: started.elapsed().as_secs_f64(),
                    });
                }
                std::thread::sleep(LOCK_POLL);
            }
            Err(fs::TryLockError::Error(source)) => return Err(io_error(source)),
        }
    }
    let holder = LockHolder {
        pid: std::process::id(),
        since: crate::clock::rfc3339(std::time::SystemTime::now()),
    };
    let line = serde_json::to_string(&holder).unwrap_or_default() + "\n";
    file.set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(line.as_bytes()))
        .map_err(io_error)?;
    Ok(SessionLock { file })
}

/// The holder a lock file names, in words.
fn describe_holder(file: &mut fs::File) -> String {
    let mut text = String::new();
    let read = file.rewind().and_then(|()| file.read_to_string(&mut text));
    match read
        .ok()
        .and_then(|_| serde_json::from_str::<LockHolder>(text.trim()).ok())
    {
        Some(holder) => format!("pid {} since {}", holder.pid, holder.since),
        // Between its lock and its holder line, or an older svc: the lock is held all the same.
        None => "a process that has not written its pid yet".to_string(),
    }
}

/// Path of a session's file.
pub fn path_of(state_dir: &Path, id: &str) -> Result<PathBuf, SessionError> {
    // svc makes 24 hex digits; at most 64 keeps a typo from reaching the file system as a
    // name it refuses ("File name too long") rather than as an id that is not one.
    let valid = id.strip_prefix("pgs_").is_some_and(|rest| {
        (1..=64).contains(&rest.len()) && rest.bytes().all(|b| b.is_ascii_hexdigit())
    });
    if !valid {
        return Err(SessionError::BadId { id: id.to_string() });
    }
    Ok(state_dir.join(SESSION_DIR).join(format!("{id}.json")))
}

fn body_hash(body: &SessionBody) -> String {
    // A struct of strings, integers and finite floats serialises infallibly.
    digest::sha256_hex(serde_json::to_vec(body).unwrap_or_default())
}

/// Writes `body` atomically (mode 0600).
pub fn save(state_dir: &Path, body: &SessionBody) -> Result<PathBuf, SessionError> {
    let path = path_of(state_dir, &body.session_id)?;
    let file = SessionFile {
        format: SESSION_FORMAT.to_string(),
        body_sha256: body_hash(body),
        body: body.clone(),
    };
    let mut bytes = serde_json::to_vec_pretty(&file).unwrap_or_default();
    bytes.push(b'\n');
    state::atomic_write(&path, &bytes)?;
    Ok(path)
}

/// Loads a session, refusing one whose body does not match its hash.
pub fn load(state_dir: &Path, id: &str) -> Result<SessionBody, SessionError> {
    let path = path_of(state_dir, id)?;
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(SessionError::Unknown {
                id: id.to_string(),
                path,
            });
        }
        Err(source) => return Err(SessionError::Read { path, source }),
    };
    let file: SessionFile = serde_json::from_slice(&bytes).map_err(|source| {
        // A body edited into a different shape is as corrupt as one with a wrong hash.
        SessionError::Parse {
            path: path.clone(),
            source,
        }
    })?;
    if file.format != SESSION_FORMAT {
        return Err(SessionError::Format {
            path,
            found: file.format,
        });
    }
    if body_hash(&file.body) != file.body_sha256 || file.body.session_id != id {
        return Err(SessionError::HashMismatch { path });
    }
    Ok(file.body)
}

/// A fresh session id: `pgs_` and 24 hex digits of the operating system's randomness.
pub fn new_id() -> Result<String, SessionError> {
    use std::io::Read;
    let mut bytes = [0u8; 12];
    let urandom = Path::new("/dev/urandom");
    fs::File::open(urandom)
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|source| SessionError::Read {
            path: urandom.to_path_buf(),
            source,
        })?;
    Ok(format!("pgs_{}", digest::to_hex(&bytes)))
}
