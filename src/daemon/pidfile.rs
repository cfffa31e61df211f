//! The daemon's pid/lock file (`<state>/daemon.pid`): the running daemon holds an OS lock
//! (`flock`) on it for its whole life, so two daemons on one state directory cannot both start,
//! and a file whose lock nobody holds was left by a daemon that is gone (a crash, a `kill -9`:
//! the kernel drops the lock with the process) and is taken over. The lock, not the pid,
//! decides: pids are reused, and a file naming a pid that now belongs to another program must
//! not keep the daemon from starting.

use std::fs::{File, OpenOptions};
use std::io::{Seek, Write};
use std::path::{Path, PathBuf};

use super::DaemonError;

/// File name under the state directory.
pub const PID_FILE: &str = "daemon.pid";

/// Holds the lock; removes the file when dropped.
#[derive(Debug)]
pub struct PidLock {
    path: PathBuf,
    /// Open and locked while the daemon runs.
    _file: File,
}

/// What happened to an earlier pid file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Previous {
    None,
    /// A file no daemon held (naming a process that is gone, a pid now reused by another
    /// program, or unreadable debris) was taken over.
    Stale {
        pid: Option<u32>,
    },
}

impl Previous {
    /// What was replaced, for the log and the start-up lines; `None` when nothing was.
    pub fn describe(&self) -> Option<String> {
        match self {
            Previous::None => None,
            Previous::Stale { pid: Some(pid) } => Some(format!(
                "replaced a pid file no daemon held (it named pid {pid}, left by a daemon that stopped without removing it)"
            )),
            Previous::Stale { pid: None } => {
                Some("replaced a pid file no daemon held (it named no pid)".to_string())
            }
        }
    }
}

impl PidLock {
    /// Takes the lock in `state_home`.
    pub fn acquire(state_home: &Path) -> Result<(PidLock, Previous), DaemonError> {
        let path = state_home.join(PID_FILE);
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| DaemonError::Io { path, source }
        };
        std::fs::create_dir_all(state_home).map_err(io(state_home))?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io(&path))?;
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let recorded = text.trim().parse::<u32>().ok();
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(DaemonError::AlreadyRunning {
                    pid: recorded.unwrap_or(0),
                    path,
                });
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(DaemonError::Io { path, source });
            }
        }
        let previous = if text.trim().is_empty() {
            Previous::None
        } else {
            Previous::Stale { pid: recorded }
        };
        let written = file
            .set_len(0)
            .and_then(|()| file.rewind())
            .and_then(|()| writeln!(file, "{}", std::process::id()))
            .and_then(|()| file.sync_all());
        if let Err(source) = written {
            return Err(DaemonError::Io { path, source });
        }
        Ok((PidLock { path, _file: file }, previous))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PidLock {
    fn drop(&mut self) {
        // Removed while still locked, so a daemon starting now either finds it held or absent.
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_refused_and_a_stale_file_is_replaced() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (lock, previous) = PidLock::acquire(dir.path()).expect("first");
        assert_eq!(previous, Previous::None);
        let second = PidLock::acquire(dir.path());
        assert!(
            matches!(second, Err(DaemonError::AlreadyRunning { pid, .. }) if pid == std::process::id())
        );
        drop(lock);
        assert!(!dir.path().join(PID_FILE).exists(), "removed on drop");

        // A pid that cannot exist (above the kernel's pid_max) is stale.
        std::fs::write(dir.path().join(PID_FILE), "4294967\n").expect("write");
        let (_lock, previous) = PidLock::acquire(dir.path()).expect("stale replaced");
        assert_eq!(previous, Previous::Stale { pid: Some(4294967) });
        // Found by probing: a file naming a live process that is not a daemon (its pid reused
        // after a crash; here this test's own parent) kept the daemon from starting.
        drop(_lock);
        let other = std::os::unix::process::parent_id();
        std::fs::write(dir.path().join(PID_FILE), format!("{other}\n")).expect("write");
        let (_lock, previous) = PidLock::acquire(dir.path()).expect("reused pid replaced");
        assert_eq!(previous, Previous::Stale { pid: Some(other) });
        // Debris is stale too.
        drop(_lock);
        std::fs::write(dir.path().join(PID_FILE), "not a pid").expect("write");
        let (_lock, previous) = PidLock::acquire(dir.path()).expect("debris replaced");
        assert_eq!(previous, Previous::Stale { pid: None });
        assert_eq!(
            previous.describe().as_deref(),
            Some("replaced a pid file no daemon held (it named no pid)")
        );
        assert_eq!(Previous::None.describe(), None);
    }
}
