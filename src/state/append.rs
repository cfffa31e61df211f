//! Append-only JSON Lines files written by several processes at once (the world-model ledger,
//! the RAVS outcome log, the evolution trace): an OS lock on a file beside the log serialises
//! writers, and the kernel drops it when its holder dies, so a crash never leaves a log locked.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

/// Held while a writer reads what it needs (a sequence number, the last hash) and appends.
#[derive(Debug)]
pub struct AppendLock {
    _lock: File,
}

/// Creates the log's folder and takes the lock `<log>.lock`, waiting for other writers.
pub fn lock(log: &Path) -> io::Result<AppendLock> {
    let lock = lock_file(log)?;
    lock.lock()?;
    Ok(AppendLock { _lock: lock })
}

/// Whether another process holds `lock_path` now (never creates it): a command about to wait
/// for it can say so first, instead of blocking without a word.
pub fn is_held(lock_path: &Path) -> bool {
    let Ok(file) = File::open(lock_path) else {
        return false;
    };
    matches!(file.try_lock_shared(), Err(fs::TryLockError::WouldBlock))
}

/// Creates the log's folder and opens (unlocked) its lock file `<log>.lock`, for a writer that
/// keeps it open and takes the lock around each append.
pub fn lock_file(log: &Path) -> io::Result<File> {
    if let Some(dir) = log.parent() {
        crate::state::create_dir_durable(dir)?;
    }
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(log.with_extension("lock"))
}

/// Appends `bytes` (whole lines) to `log`, created private to the user; fsynced when `durable`.
/// A torn last line (a crash mid-write) would glue onto the new one, so the new text starts on
/// a line of its own. Call it holding the [`lock`].
pub fn append(_held: &AppendLock, log: &Path, bytes: &[u8], durable: bool) -> io::Result<()> {
    append_to(&open(log)?, bytes, durable)
}

/// Cuts `log` back to its first `len` bytes: a torn last line (an append a crash cut short)
/// goes before the next append, so it is never left in the middle of the log.
pub fn cut_to(log: &Path, len: u64) -> io::Result<()> {
    OpenOptions::new().write(true).open(log)?.set_len(len)
}

/// Opens (creating it private to the user) `log` for [`append_to`], for a writer that keeps it
/// open across appends.
pub fn open(log: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    OpenOptions::new()
        .create(true)
        .read(true)
        .append(true)
        .mode(0o600)
        .open(log)
}

/// [`append`] to a file from [`open`]; call it holding the log's lock.
pub fn append_to(mut file: &File, bytes: &[u8], durable: bool) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    let length = file.metadata()?.len();
    let mut last = [b'\n'];
    if length > 0 {
        file.read_exact_at(&mut last, length - 1)?;
    }
    if last[0] != b'\n' {
        file.write_all(b"\n")?;
    }
    file.write_all(bytes)?;
    if durable {
        file.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_start_on_their_own_line_after_a_torn_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("logs/events.jsonl");
        let held = lock(&log).expect("lock");
        append(&held, &log, b"{\"a\":1}\n", true).expect("append");
        fs::write(&log, b"{\"a\":1}\n{\"torn\":").expect("tear");
        append(&held, &log, b"{\"b\":2}\n", false).expect("append");
        assert_eq!(
            fs::read_to_string(&log).expect("read"),
            "{\"a\":1}\n{\"torn\":\n{\"b\":2}\n"
        );
    }
}
