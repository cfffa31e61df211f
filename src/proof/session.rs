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

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

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
        "{path} is corrupted: its body does not hash to body_sha256 (edited or damaged); it will not be resumed"
    )]
    HashMismatch { path: PathBuf },
    #[error("{path} has format {found}, expected {SESSION_FORMAT}")]
    Format { path: PathBuf, found: String },
    #[error(
        "idempotency key {key} was already used for {operation} with different input; use a new key for new model text"
    )]
    IdempotencyConflict { key: String, operation: String },
    #[error("session {id} is {state} and takes no more drafts (see `svc proof inspect {id}`)")]
    Closed { id: String, state: &'static str },
    #[error(transparent)]
    State(#[from] state::StateError),
}

/// Path of a session's file.
pub fn path_of(state_dir: &Path, id: &str) -> Result<PathBuf, SessionError> {
    let valid = id
        .strip_prefix("pgs_")
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_hexdigit()));
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
