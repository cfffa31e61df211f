//! The proxy's writer of the RAVS log: appends leave the request path.
//!
//! An append is whole lines under the log's OS lock (as [`EventLog::append`]), so other
//! writers never interleave a line. Done inline, it cost every proxied request five system
//! calls (an inode check, lock, length, write, unlock) behind a mutex the async workers queued
//! on: the largest share of svc's own work on a pass-through request under 64 concurrent
//! clients (`perf`, `svc bench --group proxy`). Here the request only adds its lines to a
//! queue; one thread writes what has queued in one locked write, then lingers 2 ms before it
//! sleeps, so under load many requests share one append and none pays for waking the writer. The thread holds the log and its lock file open, reopens them when the log
//! was moved or removed (an inode check per write), and mends a torn last line under the lock
//! before writing, as `state::append` does.
//!
//! Nothing is lost by the hand-over when the process stops normally: [`Appender::flush`]
//! returns once every line queued before it is written, and dropping the appender writes what
//! is queued before the thread ends. A process killed outright loses the lines of its last
//! moments (queued within the 2 ms linger, or in the write in flight); inline appends lost
//! only the line being written. The log is statistics for the gate, not a ledger (see
//! [`super::log`]).

use std::fs;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

use super::event::Entry;
use super::log::{EventLog, lines};

/// Appends to one [`EventLog`] from a background thread (see the module documentation).
#[derive(Debug)]
pub struct Appender {
    log: EventLog,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    path: PathBuf,
    queue: Mutex<Queue>,
    /// The writer waits here for lines.
    work: Condvar,
    /// Flushes wait here for the writer.
    written: Condvar,
}

#[derive(Debug, Default)]
struct Queue {
    bytes: Vec<u8>,
    /// Appends queued and written since start: a flush waits until `written` reaches the
    /// `queued` it saw.
    queued: u64,
    written: u64,
    /// The writer is asleep on `work` (only then does an append wake it: a wake is a system
    /// call, and under load the writer is writing or lingering).
    writer_waiting: bool,
    closed: bool,
    errors: u64,
    last_error: Option<String>,
}

fn locked(queue: &Mutex<Queue>) -> MutexGuard<'_, Queue> {
    // A panic elsewhere while holding the queue leaves plain data behind; keep using it.
    queue.lock().unwrap_or_else(|e| e.into_inner())
}

impl Appender {
    pub(super) fn new(log: EventLog) -> Appender {
        let shared = Arc::new(Shared {
            path: log.path().to_path_buf(),
            queue: Mutex::new(Queue::default()),
            work: Condvar::new(),
            written: Condvar::new(),
        });
        let writer = shared.clone();
        let thread = std::thread::Builder::new()
            .name("svc-ravs-writer".into())
            .spawn(move || writer.run())
            .ok();
        Appender {
            log,
            shared,
            thread,
        }
    }

    pub fn log(&self) -> &EventLog {
        &self.log
    }

    /// Queues `entries` (one line each, written together). A failed write is counted, never
    /// returned: see [`Appender::errors`].
    pub fn append(&self, entries: &[Entry]) {
        if entries.is_empty() {
            return;
        }
        if self.thread.is_none() {
            // No thread could be started: write inline, as the log itself does.
            let result = self.log.append(entries);
            let mut queue = locked(&self.shared.queue);
            if let Err(error) = result {
                queue.errors += 1;
                queue.last_error = Some(error.to_string());
            }
            return;
        }
        let bytes = lines(entries);
        let mut queue = locked(&self.shared.queue);
        queue.bytes.extend_from_slice(&bytes);
        queue.queued += 1;
        if queue.writer_waiting {
            self.shared.work.notify_one();
        }
    }

    /// Returns once everything appended before the call is written (or failed).
    pub fn flush(&self) {
        if self.thread.is_none() {
            return;
        }
        let mut queue = locked(&self.shared.queue);
        let target = queue.queued;
        if queue.written < target {
            // The writer may be lingering: no need to wait out its pause.
            self.shared.work.notify_one();
        }
        while queue.written < target {
            queue = self
                .shared
                .written
                .wait(queue)
                .unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Failed writes since start, and the last error.
    pub fn errors(&self) -> (u64, Option<String>) {
        let queue = locked(&self.shared.queue);
        (queue.errors, queue.last_error.clone())
    }
}

impl Drop for Appender {
    fn drop(&mut self) {
        locked(&self.shared.queue).closed = true;
        self.shared.work.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// How long the writer waits for more lines after a write before it sleeps until woken.
const LINGER: std::time::Duration = std::time::Duration::from_millis(2);

/// The files the writer keeps open.
struct Held {
    lock: fs::File,
    file: fs::File,
    inode: u64,
}

impl Shared {
    fn run(&self) {
        let mut held: Option<Held> = None;
        // The buffer written last, swapped back in so neither side reallocates under load.
        let mut spare: Vec<u8> = Vec::new();
        let mut lingered = false;
        let mut queue = locked(&self.queue);
        loop {
            if queue.bytes.is_empty() {
                if queue.closed {
                    return;
                }
                if lingered {
                    queue.writer_waiting = true;
                    queue = self.work.wait(queue).unwrap_or_else(|e| e.into_inner());
                    queue.writer_waiting = false;
                    lingered = false;
                } else {
                    // Linger before waiting: appends meanwhile do not wake the writer (a
                    // system call each), so under load lines gather for one write. A flush or
                    // close still wakes it at once.
                    queue = self
                        .work
                        .wait_timeout(queue, LINGER)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    lingered = true;
                }
                continue;
            }
            lingered = false;
            spare.clear();
            std::mem::swap(&mut queue.bytes, &mut spare);
            let upto = queue.queued;
            drop(queue);
            let result = self.write(&mut held, &spare);
            queue = locked(&self.queue);
            if let Err(error) = result {
                queue.errors += 1;
                queue.last_error = Some(format!(
                    "cannot write the RAVS log {}: {error}",
                    self.path.display()
                ));
            }
            queue.written = upto;
            self.written.notify_all();
        }
    }

    fn write(&self, held: &mut Option<Held>, bytes: &[u8]) -> std::io::Result<()> {
        use std::os::unix::fs::MetadataExt;
        let current = fs::metadata(&self.path).ok().map(|m| m.ino());
        if current.is_none() || held.as_ref().map(|h| h.inode) != current {
            *held = None;
        }
        let files = match held.take() {
            Some(files) => files,
            None => {
                let lock = crate::state::append::lock_file(&self.path)?;
                let file = crate::state::append::open(&self.path)?;
                let inode = file.metadata()?.ino();
                Held { lock, file, inode }
            }
        };
        files.lock.lock()?;
        let written = crate::state::append::append_to(&files.file, bytes, false);
        let _ = files.lock.unlock();
        if written.is_ok() {
            *held = Some(files);
        }
        written
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ravs::event::{Event, Label};
    use crate::ravs::log::tests::verdict;

    #[test]
    fn a_held_appender_interleaves_with_other_writers_and_follows_a_removed_log() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = EventLog::in_state_dir(dir.path());
        let appender = log.appender();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for _ in 0..50 {
                    appender.append(&[verdict(Label::Success)]);
                }
            });
            scope.spawn(|| {
                for _ in 0..50 {
                    log.append(&[verdict(Label::Failure)]).expect("append");
                }
            });
        });
        appender.flush();
        let read = log.read().expect("read");
        assert_eq!(read.entries.len(), 100);
        assert!(read.warnings.is_empty());

        // Removed (or rotated) while held: the next append starts the file again.
        fs::remove_file(log.path()).expect("remove");
        appender.append(&[verdict(Label::Success)]);
        appender.flush();
        assert_eq!(log.read().expect("read").entries.len(), 1);

        // A torn line left by a crashed writer is not glued to ours.
        fs::write(log.path(), br#"{"recorded_at":"2026"#).expect("tear");
        appender.append(&[verdict(Label::Success)]);
        appender.flush();
        let read = log.read().expect("read");
        assert_eq!(read.entries.len(), 1);
        assert_eq!(read.warnings.len(), 1);
        assert_eq!(appender.errors().0, 0);
    }

    #[test]
    fn appends_from_many_threads_are_all_written_in_their_order_per_thread() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = EventLog::in_state_dir(dir.path());
        let appender = log.appender();
        std::thread::scope(|scope| {
            for thread in 0..4u64 {
                let appender = &appender;
                scope.spawn(move || {
                    for i in 0..100u64 {
                        appender.append(&[Entry::now(
                            format!("class/{thread}"),
                            Event::Retry {
                                seconds_since_previous: i as f64,
                            },
                        )]);
                    }
                });
            }
        });
        appender.flush();
        let read = log.read().expect("read");
        assert_eq!(read.entries.len(), 400);
        for thread in 0..4 {
            let seconds: Vec<f64> = read
                .entries
                .iter()
                .filter(|entry| entry.class == format!("class/{thread}"))
                .filter_map(|entry| match entry.event {
                    Event::Retry {
                        seconds_since_previous,
                    } => Some(seconds_since_previous),
                    _ => None,
                })
                .collect();
            assert_eq!(seconds, (0..100).map(|i| i as f64).collect::<Vec<_>>());
        }
    }

    #[test]
    fn dropping_the_appender_writes_what_is_queued() {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = EventLog::in_state_dir(dir.path());
        let appender = log.appender();
        for _ in 0..20 {
            appender.append(&[verdict(Label::Success)]);
        }
        drop(appender);
        assert_eq!(log.read().expect("read").entries.len(), 20);
    }

    #[test]
    fn a_write_that_fails_is_counted_with_its_path() {
        let dir = tempfile::tempdir().expect("temp dir");
        // The log's directory is a file: nothing can be created under it.
        fs::write(dir.path().join("ravs"), b"not a directory").expect("block");
        let appender = EventLog::in_state_dir(dir.path()).appender();
        appender.append(&[verdict(Label::Success)]);
        appender.flush();
        let (errors, last) = appender.errors();
        assert_eq!(errors, 1);
        assert!(last.expect("error").contains("ravs/events.jsonl"));
    }
}
