//! One writer per run directory: an OS lock (`flock`) on `<run>/run.lock`, held for the whole
//! run, so a second `svc run` into the same `--out` stops before it plans anything. (Two runs
//! at once each ran every trial and appended it: every record twice.) The kernel drops the
//! lock when its holder dies, so a killed run never leaves the directory locked.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};

use super::RunError;

/// The lock file's name inside a run directory.
pub const LOCK_FILE: &str = "run.lock";

/// Held while a run writes its directory.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

/// Creates `dir` if needed and takes its lock, or says that another run holds it.
pub fn lock(dir: &Path) -> Result<RunLock, RunError> {
    let io = |path: &Path| {
        let path: PathBuf = path.to_path_buf();
        move |source| RunError::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io(&path))?;
    match file.try_lock() {
        Ok(()) => Ok(RunLock { _file: file }),
        Err(std::fs::TryLockError::WouldBlock) => Err(RunError::Busy {
            dir: dir.to_path_buf(),
        }),
        Err(std::fs::TryLockError::Error(source)) => Err(RunError::Io { path, source }),
    }
}

/// Whether a running `svc run` holds `dir`'s lock (its records are still being written). Never
/// creates the lock file; a directory without one is no live run.
pub fn is_being_written(dir: &Path) -> bool {
    crate::state::append::is_held(&dir.join(LOCK_FILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_one_directory_is_refused_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let run = dir.path().join("run");
        let held = lock(&run).expect("first");
        let refused = lock(&run).expect_err("second");
        assert!(
            refused.to_string().contains("another svc run is writing"),
            "{refused}"
        );
        assert!(is_being_written(&run));
        drop(held);
        assert!(!is_being_written(&run));
        lock(&run).expect("free again");
    }
}
