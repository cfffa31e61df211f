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
/// The file is private to the user (mode 0600), as state should be.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    write_atomically(path, bytes, false)
}

/// [`atomic_write`] for files made for others to read (reports, manifests, a baseline kept in
/// git): created like any new file, mode 0666 less the umask.
pub fn atomic_write_shared(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    write_atomically(path, bytes, true)
}

fn write_atomically(path: &Path, bytes: &[u8], shared: bool) -> Result<(), StateError> {
    let wrap = |source| StateError::Write {
        path: path.to_path_buf(),
        source,
    };
    let dir = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    fs::create_dir_all(dir).map_err(wrap)?;
    let mut builder = tempfile::Builder::new();
    #[cfg(unix)]
    if shared {
        use std::os::unix::fs::PermissionsExt;
        // The mode goes to open(2), which applies the umask.
        builder.permissions(fs::Permissions::from_mode(0o666));
    }
    #[cfg(not(unix))]
    let _ = shared;
    let mut temp = builder.tempfile_in(dir).map_err(wrap)?;
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

    #[cfg(unix)]
    #[test]
    fn state_is_private_and_shared_files_follow_the_umask() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let private = dir.path().join("state.json");
        let shared = dir.path().join("report.md");
        atomic_write(&private, b"x").expect("write");
        atomic_write_shared(&shared, b"x").expect("write");
        let mode = |p: &Path| fs::metadata(p).expect("meta").permissions().mode() & 0o777;
        assert_eq!(mode(&private), 0o600);
        // Whatever the umask, a shared file is readable by its owner's group or others unless
        // the umask forbids it, and never more than 0666.
        let reference = dir.path().join("plain");
        fs::write(&reference, b"x").expect("plain write");
        assert_eq!(mode(&shared), mode(&reference));
    }
}
