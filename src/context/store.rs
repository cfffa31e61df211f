//! Content-addressed blob store: bytes are stored under their SHA-256 and verified against it on
//! every read, so a tampered or corrupted blob is detected instead of silently returned.
//!
//! Layout: `<root>/<first two hex>/<remaining 62 hex>`. Writes are atomic and idempotent.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::digest;
use crate::state;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(
        "blob {hash} is missing from {path}; the recovery bundle is incomplete (was the state directory pruned?)"
    )]
    Missing { hash: String, path: PathBuf },
    #[error(
        "blob {path} is corrupted or was tampered with: expected SHA-256 {expected}, found {actual}"
    )]
    Tampered {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error("cannot read blob {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{0} is not a SHA-256 hex digest")]
    BadHash(String),
    #[error(transparent)]
    Write(#[from] state::StateError),
}

/// A content-addressed store rooted at a directory.
#[derive(Debug, Clone)]
pub struct BlobStore {
    root: PathBuf,
}

impl BlobStore {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path_of(&self, hash: &str) -> Result<PathBuf, StoreError> {
        if !digest::is_sha256_hex(hash) {
            return Err(StoreError::BadHash(hash.to_string()));
        }
        Ok(self.root.join(&hash[..2]).join(&hash[2..]))
    }

    /// Stores `bytes` and returns their SHA-256. Storing the same bytes twice is a no-op.
    pub fn put(&self, bytes: &[u8]) -> Result<String, StoreError> {
        let hash = digest::sha256_hex(bytes);
        let path = self.path_of(&hash)?;
        if !path.exists() {
            state::atomic_write(&path, bytes)?;
        }
        Ok(hash)
    }

    /// The bytes stored under `hash`, verified.
    pub fn get(&self, hash: &str) -> Result<Vec<u8>, StoreError> {
        let path = self.path_of(hash)?;
        let bytes = fs::read(&path).map_err(|source| {
            if source.kind() == io::ErrorKind::NotFound {
                StoreError::Missing {
                    hash: hash.to_string(),
                    path: path.clone(),
                }
            } else {
                StoreError::Read {
                    path: path.clone(),
                    source,
                }
            }
        })?;
        let actual = digest::sha256_hex(&bytes);
        if actual != hash {
            return Err(StoreError::Tampered {
                path,
                expected: hash.to_string(),
                actual,
            });
        }
        Ok(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_and_tamper_detection() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = BlobStore::new(dir.path());
        let hash = store.put(b"exact bytes\r\n\t").expect("put");
        assert_eq!(store.put(b"exact bytes\r\n\t").expect("put again"), hash);
        assert_eq!(store.get(&hash).expect("get"), b"exact bytes\r\n\t");
        let path = dir.path().join(&hash[..2]).join(&hash[2..]);
        fs::write(&path, b"changed").expect("tamper");
        assert!(matches!(store.get(&hash), Err(StoreError::Tampered { .. })));
        let missing = digest::sha256_hex("never stored");
        assert!(matches!(
            store.get(&missing),
            Err(StoreError::Missing { .. })
        ));
        assert!(matches!(store.get("nope"), Err(StoreError::BadHash(_))));
    }
}
