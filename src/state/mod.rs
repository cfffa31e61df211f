//! The state directory and atomic writes.
//!
//! All persistent state (indexes, commits, certificates, sessions) lives under one directory:
//! `$SVC_HOME`, or `~/.svc` when it is unset. Every write of state goes through
//! [`atomic_write`], so a crash leaves either the old or the new file, never a torn one.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

pub mod append;
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
    #[error(
        "the state directory {path} is not a directory (a file of that name is in the way); point {SVC_HOME} at a folder, or move the file"
    )]
    HomeNotADirectory { path: PathBuf },
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
    let home = match std::env::var_os(SVC_HOME).filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => std::env::var_os("HOME")
            .filter(|v| !v.is_empty())
            .map(|home| PathBuf::from(home).join(".svc"))
            .ok_or(StateError::NoHome)?,
    };
    checked_home(home)
}

/// `dir` as a state directory (`SVC_HOME`, or a `--state-dir` flag): refused when a file is in
/// its place, which failed every write with "File exists (os error 17)", several times (and a
/// proxy started on one served answers without their witness headers).
pub fn checked_home(dir: PathBuf) -> Result<PathBuf, StateError> {
    if dir.exists() && !dir.is_dir() {
        return Err(StateError::HomeNotADirectory { path: dir });
    }
    Ok(dir)
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
    create_dir_durable(dir).map_err(wrap)?;
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
    sync_dir(dir);
    Ok(())
}

/// Creates `dir` and any missing parents so that each new directory survives a crash: after
/// every `mkdir` the parent that now names it is fsynced. (`create_dir_all` alone leaves a new
/// `commits/ctx_…` or `blobs/ab` directory in the page cache, and a crash could drop it with the
/// files inside although their own fsyncs returned.)
pub fn create_dir_durable(dir: &Path) -> io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    let mut missing = Vec::new();
    let mut current = Some(dir);
    while let Some(path) = current {
        if path.as_os_str().is_empty() || path.is_dir() {
            break;
        }
        missing.push(path);
        current = path.parent();
    }
    for path in missing.into_iter().rev() {
        match fs::create_dir(path) {
            Ok(()) => {}
            // Another writer made it meanwhile; it synced its own parent.
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => {}
            // "File exists" named only the file to be written; name what is in its way.
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "{} is in the way: it exists and is not a directory (move it away)",
                        path.display()
                    ),
                ));
            }
            Err(error) => return Err(error),
        }
        match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => sync_dir(parent),
            _ => sync_dir(Path::new(".")),
        }
    }
    Ok(())
}

/// Fsyncs a directory so the names created in it are durable. Not every filesystem supports a
/// directory fsync; where it fails there is nothing better to do, so the error is ignored.
pub fn sync_dir(dir: &Path) {
    if let Ok(handle) = fs::File::open(dir) {
        let _ = handle.sync_all();
    }
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

    /// Found by probing: a file where a state directory goes gave "File exists" about the file
    /// to be written.
    #[test]
    fn a_file_in_the_way_of_a_directory_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(dir.path().join("index"), "x").expect("write");
        let error =
            atomic_write(&dir.path().join("index/key.json"), b"{}").expect_err("in the way");
        let message = error.to_string();
        assert!(
            message.contains("index is in the way: it exists and is not a directory"),
            "{message}"
        );
    }

    #[test]
    fn create_dir_durable_makes_every_missing_level() {
        let dir = tempfile::tempdir().expect("tempdir");
        let deep = dir.path().join("a").join("b").join("c");
        create_dir_durable(&deep).expect("create");
        assert!(deep.is_dir());
        create_dir_durable(&deep).expect("again is fine");
        let file = dir.path().join("file");
        fs::write(&file, b"x").expect("write");
        assert!(create_dir_durable(&file.join("below")).is_err());
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
