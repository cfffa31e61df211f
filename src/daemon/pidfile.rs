//! The daemon's pid/lock file (`<state>/daemon.pid`): created exclusively, so two daemons on
//! one state directory cannot both start; a file left by a process that is gone (a crash, a
//! `kill -9`) is stale and replaced.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

use super::DaemonError;

/// File name under the state directory.
pub const PID_FILE: &str = "daemon.pid";

/// Holds the lock; removes the file when dropped.
#[derive(Debug)]
pub struct PidLock {
    path: PathBuf,
}

/// Whether a process with this pid exists.
pub fn alive(pid: u32) -> bool {
    if pid == std::process::id() {
        return true;
    }
    let proc = Path::new("/proc");
    if proc.is_dir() {
        return proc.join(pid.to_string()).exists();
    }
    // Without /proc (macOS, BSD): `kill -0` asks without sending a signal.
    std::process::Command::new("kill")
        .args(["-0", &pid.to_string()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// What happened to an earlier pid file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Previous {
    None,
    /// A file naming a process that no longer exists (or unreadable debris) was replaced.
    Stale {
        pid: Option<u32>,
    },
}

impl PidLock {
    /// Takes the lock in `state_home`.
    pub fn acquire(state_home: &Path) -> Result<(PidLock, Previous), DaemonError> {
        let path = state_home.join(PID_FILE);
        std::fs::create_dir_all(state_home).map_err(|source| DaemonError::Io {
            path: state_home.to_path_buf(),
            source,
        })?;
        let mut previous = Previous::None;
        // Two rounds: the second follows the removal of a stale file.
        for _ in 0..2 {
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    let written =
                        writeln!(file, "{}", std::process::id()).and_then(|()| file.sync_all());
                    if let Err(source) = written {
                        let _ = std::fs::remove_file(&path);
                        return Err(DaemonError::Io { path, source });
                    }
                    return Ok((PidLock { path }, previous));
                }
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                    let text = std::fs::read_to_string(&path).unwrap_or_default();
                    let pid = text.trim().parse::<u32>().ok();
                    if let Some(pid) = pid
                        && alive(pid)
                    {
                        return Err(DaemonError::AlreadyRunning { pid, path });
                    }
                    std::fs::remove_file(&path).map_err(|source| DaemonError::Io {
                        path: path.clone(),
                        source,
                    })?;
                    previous = Previous::Stale { pid };
                }
                Err(source) => return Err(DaemonError::Io { path, source }),
            }
        }
        Err(DaemonError::AlreadyRunning {
            pid: 0,
            path: path.clone(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PidLock {
    fn drop(&mut self) {
        // Only our own file: another daemon may have replaced a file we thought stale.
        let ours = std::fs::read_to_string(&self.path)
            .ok()
            .and_then(|t| t.trim().parse::<u32>().ok())
            == Some(std::process::id());
        if ours {
            let _ = std::fs::remove_file(&self.path);
        }
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
        // Debris is stale too.
        drop(_lock);
        std::fs::write(dir.path().join(PID_FILE), "not a pid").expect("write");
        let (_lock, previous) = PidLock::acquire(dir.path()).expect("debris replaced");
        assert_eq!(previous, Previous::Stale { pid: None });
    }
}
