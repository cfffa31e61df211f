//! Errors of the fixed-point loop (SPEC §7) and their signed failure artifacts.
//!
//! A loop failure keeps what it had: the failed stage, the rounds completed before it and the
//! exact evidence recovered safely so far (ids and content hashes). That record is signed with
//! HMAC-SHA256 under a key private to the state directory (`proof/artifact.key`, 32 random
//! bytes, mode 0600, created on first use), written to `proof/failures/<id>.json`, and carried
//! by the error. [`verify_artifact`] checks a file's signature, so a record that was edited after
//! the failure is detected.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use super::round::{RecoveredChunk, RoundRecord};
use crate::digest;
use crate::state;

/// Format tag of a signed failure artifact.
pub const ARTIFACT_FORMAT: &str = "svc.proof-failure.v1";
/// Key file, relative to the state directory.
pub const KEY_FILE: &str = "proof/artifact.key";
/// The one signature algorithm an artifact names.
const ALGORITHM: &str = "hmac-sha256";
/// Directory of failure artifacts, relative to the state directory.
pub const FAILURE_DIR: &str = "proof/failures";
const KEY_BYTES: usize = 32;

/// Which kind of failure an artifact records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    Model,
    Verification,
    Recovery,
}

/// What a failed run had done: signed, so it can be trusted later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FailureArtifact {
    pub format: String,
    pub artifact_id: String,
    pub kind: FailureKind,
    /// The stage that failed: `model_call`, `context_integrity`, `verification`, `recovery`.
    pub stage: String,
    /// Round in which it failed (0-based).
    pub round: usize,
    pub message: String,
    pub ctx_id: String,
    pub query: String,
    pub created_at: String,
    /// Rounds completed before the failure (their model calls happened).
    pub completed_rounds: Vec<RoundRecord>,
    /// Evidence recovered and verified before the failure, in order.
    pub recovered: Vec<RecoveredChunk>,
    pub recovery_tokens_used: usize,
}

/// An artifact with its signature, as written to disk.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignedArtifact {
    pub artifact: FailureArtifact,
    /// `hmac-sha256`.
    pub algorithm: String,
    /// First 16 hex digits of the SHA-256 of the key: which state directory signed it.
    pub key_id: String,
    /// Hex HMAC-SHA256 over the compact JSON of `artifact`.
    pub signature: String,
    /// Where the artifact was written.
    #[serde(skip)]
    pub path: PathBuf,
}

/// Errors of keys and artifacts.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is not a signed failure artifact: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "the signing key {path} is {found} bytes, not {KEY_BYTES}: it is damaged; move it aside (new artifacts get a new key)"
    )]
    BadKey { path: PathBuf, found: usize },
    #[error(
        "the signing key {path} does not exist, so nothing can be verified here: verify the artifact with the state directory that wrote it (SVC_HOME); if the key was removed, its artifacts can no longer be verified"
    )]
    NoKey { path: PathBuf },
    #[error(
        "{path} was signed by key {signed_by}, but this state directory's key is {ours}: verify it with the state directory that wrote it (SVC_HOME)"
    )]
    OtherKey {
        path: PathBuf,
        signed_by: String,
        ours: String,
    },
    #[error(
        "{path}: the signature does not match the artifact: it was changed after it was signed"
    )]
    BadSignature { path: PathBuf },
    #[error("{path}: {reason}: it was changed after it was signed")]
    Altered { path: PathBuf, reason: String },
    #[error(transparent)]
    State(#[from] state::StateError),
}

/// The signing key of `state_dir`, if it has one.
fn existing_key(state_dir: &Path) -> Result<Option<Vec<u8>>, ArtifactError> {
    let path = state_dir.join(KEY_FILE);
    match fs::read(&path) {
        Ok(key) if key.len() == KEY_BYTES => Ok(Some(key)),
        Ok(key) => Err(ArtifactError::BadKey {
            path,
            found: key.len(),
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(ArtifactError::Read { path, source }),
    }
}

/// The signing key of `state_dir`, created (0600) on first use.
fn signing_key(state_dir: &Path) -> Result<Vec<u8>, ArtifactError> {
    if let Some(key) = existing_key(state_dir)? {
        return Ok(key);
    }
    let path = state_dir.join(KEY_FILE);
    let mut key = vec![0u8; KEY_BYTES];
    let urandom = Path::new("/dev/urandom");
    fs::File::open(urandom)
        .and_then(|mut f| f.read_exact(&mut key))
        .map_err(|source| ArtifactError::Read {
            path: urandom.to_path_buf(),
            source,
        })?;
    let dir = path.parent().unwrap_or(state_dir);
    fs::create_dir_all(dir).map_err(|source| ArtifactError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    // Written to a private temporary file and linked into place only if no key exists yet, so
    // two processes creating the key at once agree on the first one.
    let temp = tempfile::NamedTempFile::new_in(dir).map_err(|source| ArtifactError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    fs::write(temp.path(), &key).map_err(|source| ArtifactError::Read {
        path: temp.path().to_path_buf(),
        source,
    })?;
    temp.as_file()
        .sync_all()
        .map_err(|source| ArtifactError::Read {
            path: temp.path().to_path_buf(),
            source,
        })?;
    match temp.persist_noclobber(&path) {
        Ok(_) => Ok(key),
        Err(e) if e.error.kind() == io::ErrorKind::AlreadyExists => signing_key(state_dir),
        Err(e) => Err(ArtifactError::Read {
            path,
            source: e.error,
        }),
    }
}

fn key_id(key: &[u8]) -> String {
    digest::sha256_hex(key)[..16].to_string()
}

fn mac(key: &[u8]) -> Hmac<Sha256> {
    // HMAC takes keys of any length; the error case cannot happen.
    #[allow(clippy::expect_used)]
    <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC accepts any key length")
}

fn signed_bytes(artifact: &FailureArtifact) -> Vec<u8> {
    // Serialising a struct of strings, integers and finite floats cannot fail.
    serde_json::to_vec(artifact).unwrap_or_default()
}

/// Signs `artifact` with the key of `state_dir` and writes it to `proof/failures/<id>.json`.
pub fn sign_and_store(
    state_dir: &Path,
    artifact: FailureArtifact,
) -> Result<SignedArtifact, ArtifactError> {
    let key = signing_key(state_dir)?;
    let mut mac = mac(&key);
    mac.update(&signed_bytes(&artifact));
    let signature = digest::to_hex(&mac.finalize().into_bytes());
    let path = state_dir
        .join(FAILURE_DIR)
        .join(format!("{}.json", artifact.artifact_id));
    let mut signed = SignedArtifact {
        artifact,
        algorithm: ALGORITHM.to_string(),
        key_id: key_id(&key),
        signature,
        path: PathBuf::new(),
    };
    let mut bytes = serde_json::to_vec_pretty(&signed).unwrap_or_default();
    bytes.push(b'\n');
    state::atomic_write(&path, &bytes)?;
    signed.path = path;
    Ok(signed)
}

/// Reads a signed artifact and checks its signature with the key of `state_dir`.
pub fn verify_artifact(state_dir: &Path, path: &Path) -> Result<SignedArtifact, ArtifactError> {
    let bytes = fs::read(path).map_err(|source| ArtifactError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    // JSON of another shape (a field removed, renamed or added) is an artifact that was
    // changed; only text that is not JSON at all is not an artifact.
    let mut signed: SignedArtifact = serde_json::from_slice(&bytes).map_err(|source| {
        if source.classify() == serde_json::error::Category::Data {
            ArtifactError::Altered {
                path: path.to_path_buf(),
                reason: format!("its fields are not a signed artifact's ({source})"),
            }
        } else {
            ArtifactError::Parse {
                path: path.to_path_buf(),
                source,
            }
        }
    })?;
    if signed.algorithm != ALGORITHM {
        return Err(ArtifactError::Altered {
            path: path.to_path_buf(),
            reason: format!("its algorithm is {:?}, not {ALGORITHM:?}", signed.algorithm),
        });
    }
    // Verifying never makes a key: a new one could only say "another key signed this".
    let key = existing_key(state_dir)?.ok_or_else(|| ArtifactError::NoKey {
        path: state_dir.join(KEY_FILE),
    })?;
    let ours = key_id(&key);
    if signed.key_id != ours {
        return Err(ArtifactError::OtherKey {
            path: path.to_path_buf(),
            signed_by: signed.key_id,
            ours,
        });
    }
    // Written as 64 lowercase hex digits; any other spelling is an edit.
    let tag = digest::is_sha256_hex(&signed.signature)
        .then(|| hex_bytes(&signed.signature))
        .flatten()
        .ok_or_else(|| ArtifactError::BadSignature {
            path: path.to_path_buf(),
        })?;
    let mut mac = mac(&key);
    mac.update(&signed_bytes(&signed.artifact));
    mac.verify_slice(&tag)
        .map_err(|_| ArtifactError::BadSignature {
            path: path.to_path_buf(),
        })?;
    signed.path = path.to_path_buf();
    Ok(signed)
}

fn hex_bytes(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The model callback failed, returned no text, or returned text that is not UTF-8.
#[derive(Debug, thiserror::Error)]
#[error("model call failed in round {round}: {message} (signed failure artifact: {path})", round = .artifact.artifact.round, message = .artifact.artifact.message, path = .artifact.path.display())]
pub struct FixedPointModelError {
    pub artifact: Box<SignedArtifact>,
}

/// Verification of a round failed (the committed context changed, or the verifier failed).
#[derive(Debug, thiserror::Error)]
#[error("verification failed in round {round} at stage {stage}: {message} (signed failure artifact: {path})", round = .artifact.artifact.round, stage = .artifact.artifact.stage, message = .artifact.artifact.message, path = .artifact.path.display())]
pub struct FixedPointVerificationError {
    pub artifact: Box<SignedArtifact>,
}

/// Exact recovery of a chunk failed (missing or tampered bytes, fingerprint mismatch).
#[derive(Debug, thiserror::Error)]
#[error("exact recovery failed in round {round}: {message} (signed failure artifact: {path})", round = .artifact.artifact.round, message = .artifact.artifact.message, path = .artifact.path.display())]
pub struct FixedPointRecoveryError {
    pub artifact: Box<SignedArtifact>,
}

/// Everything the layer and the protocol can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ProofError {
    #[error(transparent)]
    Model(#[from] FixedPointModelError),
    #[error(transparent)]
    Verification(#[from] FixedPointVerificationError),
    #[error(transparent)]
    Recovery(#[from] FixedPointRecoveryError),
    #[error("{what} is 0; give a positive value")]
    ZeroBound { what: &'static str },
    #[error("no sources to prepare: give at least one (name, text) document")]
    NoSources,
    #[error("cannot select context: {0}")]
    Select(#[from] crate::context::select::SelectError),
    #[error("cannot commit the selection: {0}")]
    Commit(#[from] crate::context::CommitError),
    #[error("the failure could not be recorded ({artifact}); the failure itself: {message}")]
    Unrecorded {
        message: String,
        #[source]
        artifact: ArtifactError,
    },
    #[error(transparent)]
    Artifact(#[from] ArtifactError),
    #[error(transparent)]
    Session(#[from] super::session::SessionError),
    #[error(transparent)]
    Ledger(#[from] super::ledger::LedgerError),
    #[error(transparent)]
    State(#[from] state::StateError),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn artifact() -> FailureArtifact {
        FailureArtifact {
            format: ARTIFACT_FORMAT.to_string(),
            artifact_id: "pgf_test".to_string(),
            kind: FailureKind::Recovery,
            stage: "recovery".to_string(),
            round: 1,
            message: "tampered".to_string(),
            ctx_id: "ctx_00".to_string(),
            query: "q".to_string(),
            created_at: "2026-01-01T00:00:00Z".to_string(),
            completed_rounds: Vec::new(),
            recovered: Vec::new(),
            recovery_tokens_used: 3,
        }
    }

    #[test]
    fn signed_artifacts_verify_and_edits_are_detected() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let signed = sign_and_store(dir.path(), artifact()).expect("sign");
        let mode = fs::metadata(dir.path().join(KEY_FILE))
            .expect("key")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the key is private");
        let checked = verify_artifact(dir.path(), &signed.path).expect("verify");
        assert_eq!(checked.artifact, signed.artifact);

        let text = fs::read_to_string(&signed.path).expect("read");
        fs::write(
            &signed.path,
            text.replace("\"recovery_tokens_used\": 3", "\"recovery_tokens_used\": 4"),
        )
        .expect("edit");
        assert!(matches!(
            verify_artifact(dir.path(), &signed.path),
            Err(ArtifactError::BadSignature { .. })
        ));

        let other = tempfile::tempdir().expect("tempdir");
        let signed = sign_and_store(dir.path(), artifact()).expect("sign");
        // Found by probing: verifying in a state directory without a key wrote one, then
        // blamed the artifact for being signed by another key.
        assert!(matches!(
            verify_artifact(other.path(), &signed.path),
            Err(ArtifactError::NoKey { .. })
        ));
        assert!(!other.path().join(KEY_FILE).exists(), "verify wrote no key");
        // Found by probing: an edited algorithm or an upper-cased signature verified, and a
        // removed signature was "not an artifact" (exit 2) rather than changed.
        let text = fs::read_to_string(&signed.path).expect("read");
        let value: serde_json::Value = serde_json::from_str(&text).expect("json");
        type Edit = fn(&mut serde_json::Value);
        let edits: [(&str, Edit); 4] = [
            ("algorithm", |v| v["algorithm"] = "none".into()),
            ("upper case", |v| {
                let upper = v["signature"].as_str().expect("sig").to_uppercase();
                v["signature"] = upper.into();
            }),
            ("no signature", |v| {
                v.as_object_mut().expect("object").remove("signature");
            }),
            ("extra field", |v| v["note"] = "hi".into()),
        ];
        for (what, edit) in edits {
            let mut edited = value.clone();
            edit(&mut edited);
            fs::write(&signed.path, edited.to_string()).expect("write");
            assert!(
                matches!(
                    verify_artifact(dir.path(), &signed.path),
                    Err(ArtifactError::BadSignature { .. } | ArtifactError::Altered { .. })
                ),
                "{what}"
            );
        }
        fs::write(&signed.path, text).expect("restore");
        sign_and_store(other.path(), artifact()).expect("sign elsewhere");
        assert!(matches!(
            verify_artifact(other.path(), &signed.path),
            Err(ArtifactError::OtherKey { .. })
        ));
    }
}
