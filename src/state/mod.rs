//! The state directory and atomic writes.
//!
//! All persistent state (indexes, commits, certificates, sessions) lives under one directory:
//! `$SVC_HOME`, or `~/.svc` when it is unset. Every write of state goes through
//! [`atomic_write`], so a crash leaves either the old or the new file, never a torn one.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub mod group;
pub mod pack;
pub use group::GroupCommit;
pub use pack::Packs;

/// Environment variable naming the state directory.
pub const SVC_HOME: &str = "SVC_HOME";

/// Errors of the state layer.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("cannot determine the state directory: set {SVC_HOME} or HOME")]
    NoHome,
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "{path}:{line}: {message}; the packed state is damaged (move the pack and its .idx aside to keep the rest readable)"
    )]
    Pack {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

/// The state directory: `$SVC_HOME`, else `$HOME/.svc`.
pub fn home() -> Result<PathBuf, StateError> {
    if let Some(dir) = std::env::var_os(SVC_HOME).filter(|v| !v.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    std::env::var_os("HOME")
        .filter(|v| !v.is_empty())
        .map(|home| PathBuf::from(home).join(".svc"))
        .ok_or(StateError::NoHome)
}

/// Write `bytes` to `path` atomically: a temporary file in the same directory is written,
/// fsynced and renamed over `path`, then the directory is fsynced so the rename is durable.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    let wrap = |source| StateError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    fs::create_dir_all(dir).map_err(wrap)?;
    let mut temp = tempfile::NamedTempFile::new_in(dir).map_err(wrap)?;
    temp.write_all(bytes).map_err(wrap)?;
    temp.as_file().sync_all().map_err(wrap)?;
    temp.persist(path).map_err(|e| wrap(e.error))?;
    // A directory fsync makes the rename itself durable; not every filesystem supports it.
    if let Ok(handle) = fs::File::open(dir) {
        let _ = handle.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_whole_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("nested").join("state.json");
        atomic_write(&path, b"first version, long").expect("write");
        atomic_write(&path, b"second").expect("rewrite");
        assert_eq!(fs::read(&path).expect("read"), b"second");
        let leftovers = fs::read_dir(path.parent().expect("parent"))
            .expect("list")
            .count();
        assert_eq!(leftovers, 1, "no temporary files are left behind");
    }
}
