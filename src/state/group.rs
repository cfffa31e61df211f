//! Group commit: many small state files made durable by two syncs per batch, in one pack.
//!
//! [`atomic_write`](super::atomic_write) creates a file (and its directory) and pays a file and a
//! directory fsync per file. A trial run commits thousands of selections of a few small files
//! each, and creating those files, not CPU or fsync, bounded its throughput: on ext4 a new inode,
//! and above all a new directory, costs about a millisecond of allocator work once a run has
//! churned through many. A [`GroupCommit`] stages files in memory under their final paths, and
//! [`GroupCommit::sync`] appends a whole batch to one pack file of the group (see
//! [`super::pack`]), syncs it, then appends the batch's index lines and syncs them. A pack entry
//! is visible to readers only through its index line, which is written after the entry's bytes
//! are on disk, so a reader never sees bytes that are not durable; what a crash before `sync`
//! loses is the staged batch, which nothing has named yet (callers sync before they hand an id
//! to anyone, e.g. before writing a trial record that names a commit).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::StateError;
use super::pack;

/// Files staged for one durable sync, and the pack they go to.
#[derive(Debug)]
pub struct GroupCommit {
    home: PathBuf,
    inner: Mutex<Inner>,
    /// Held for a whole sync, so syncs run one at a time while staging goes on: the workers
    /// that stage never wait on the fsyncs.
    writer: Mutex<Option<pack::PackWriter>>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Path relative to the state home → bytes.
    staged: BTreeMap<String, Vec<u8>>,
    /// Paths this group has packed or is packing (a later stage of one is a no-op only where
    /// the caller asks, see [`GroupCommit::contains`]).
    packed: HashSet<String>,
}

/// What one [`GroupCommit::sync`] made durable.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Synced {
    /// Files made durable.
    pub files: usize,
    /// Bytes appended to the pack, headers included.
    pub bytes: u64,
}

fn write_error(path: &Path) -> impl Fn(std::io::Error) -> StateError + '_ {
    move |source| StateError::Write {
        path: path.to_path_buf(),
        source,
    }
}

impl GroupCommit {
    /// A group whose files live under the state directory `home`; its pack goes to
    /// `home/packs/`.
    pub fn new(home: &Path) -> Self {
        Self {
            home: home.to_path_buf(),
            inner: Mutex::new(Inner::default()),
            writer: Mutex::new(None),
        }
    }

    /// The state directory the group writes under.
    pub fn home(&self) -> &Path {
        &self.home
    }

    fn relative(&self, path: &Path) -> Result<String, StateError> {
        pack::relative_key(&self.home, path).ok_or_else(|| {
            write_error(path)(std::io::Error::other(format!(
                "a group commit only holds files under its state directory {}",
                self.home.display()
            )))
        })
    }

    /// Stages `bytes` for `path` (under the state directory); they become durable and readable
    /// at the next [`sync`](Self::sync). Staging a path again before the sync replaces what was
    /// staged.
    pub fn stage(&self, path: &Path, bytes: &[u8]) -> Result<(), StateError> {
        let key = self.relative(path)?;
        self.lock().staged.insert(key, bytes.to_vec());
        Ok(())
    }

    /// Whether `path` is staged or already packed by this group (content-addressed callers
    /// skip storing such a path again).
    pub fn contains(&self, path: &Path) -> bool {
        let Ok(key) = self.relative(path) else {
            return false;
        };
        let inner = self.lock();
        inner.staged.contains_key(&key) || inner.packed.contains(&key)
    }

    /// Files staged and not yet synced.
    pub fn pending(&self) -> usize {
        self.lock().staged.len()
    }

    /// Makes every staged file durable and readable: one append and sync of the pack, one of
    /// its index. On error the batch stays staged, so a later sync can retry it.
    pub fn sync(&self) -> Result<Synced, StateError> {
        // The writer's lock is poisoned only by a panic inside a sync, after which the pack
        // holds at most an unindexed tail, which readers ignore.
        let mut writer = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        // Everything staged so far goes in this batch. Its paths count as packed at once, so
        // a blob staged again meanwhile is not written twice; a failed sync undoes that.
        let staged = {
            let mut inner = self.lock();
            let staged = std::mem::take(&mut inner.staged);
            inner.packed.extend(staged.keys().cloned());
            staged
        };
        if staged.is_empty() {
            return Ok(Synced::default());
        }
        let pack = match writer.as_mut() {
            Some(pack) => pack,
            None => match pack::PackWriter::create(&self.home.join(pack::PACK_DIR)) {
                Ok(created) => writer.insert(created),
                Err(error) => return Err(self.restage(staged, error)),
            },
        };
        match pack.append(staged.iter().map(|(k, v)| (k.as_str(), v.as_slice()))) {
            Ok(bytes) => Ok(Synced {
                files: staged.len(),
                bytes,
            }),
            Err(error) => {
                // The writer cut its files back, but a retry goes to a new pack all the same:
                // if the cut failed too, the old index may end in a torn line, and nothing may
                // ever be appended after it.
                *writer = None;
                Err(self.restage(staged, error))
            }
        }
    }

    /// Puts a failed batch back for a later sync and returns the error.
    fn restage(&self, staged: BTreeMap<String, Vec<u8>>, error: StateError) -> StateError {
        let mut inner = self.lock();
        for (key, bytes) in staged {
            inner.packed.remove(&key);
            // A newer staging of the same path wins over the failed one.
            inner.staged.entry(key).or_insert(bytes);
        }
        error
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Every operation under the lock leaves the state consistent (inserts, a take and a
        // restore), so a lock poisoned by a panic elsewhere is still usable.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::pack::Packs;
    use std::fs;

    #[test]
    fn staged_files_are_readable_only_after_sync() {
        let dir = tempfile::tempdir().expect("tempdir");
        let group = GroupCommit::new(dir.path());
        let a = dir.path().join("commits").join("a.json");
        let b = dir.path().join("blobs").join("b");
        group.stage(&a, b"new a").expect("stage a");
        group.stage(&b, b"first b").expect("stage b");
        group.stage(&b, b"second b").expect("restage b");
        assert!(group.contains(&b));
        assert_eq!(group.pending(), 2);
        let packs = Packs::new(dir.path());
        assert!(
            packs.read(&a).expect("read").is_none(),
            "nothing readable before the sync"
        );

        let synced = group.sync().expect("sync");
        assert_eq!(synced.files, 2);
        assert_eq!(group.pending(), 0);
        assert!(group.contains(&b), "packed paths are still known");
        assert_eq!(packs.read(&a).expect("read").expect("packed"), b"new a");
        assert_eq!(packs.read(&b).expect("read").expect("packed"), b"second b");
        assert!(!a.exists(), "no loose file is created");
        assert_eq!(group.sync().expect("empty sync"), Synced::default());

        // A second batch appends to the same pack.
        let c = dir.path().join("commits").join("c.json");
        group.stage(&c, b"c").expect("stage c");
        group.sync().expect("sync again");
        let fresh = Packs::new(dir.path());
        assert_eq!(fresh.read(&c).expect("read").expect("packed"), b"c");
        assert_eq!(fresh.read(&a).expect("read").expect("packed"), b"new a");
        let files = fs::read_dir(dir.path().join(pack::PACK_DIR))
            .expect("packs")
            .count();
        assert_eq!(files, 2, "one pack and one index for the group");
    }

    #[test]
    fn paths_outside_the_state_directory_are_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let group = GroupCommit::new(&dir.path().join("state"));
        let error = group
            .stage(&dir.path().join("elsewhere.json"), b"x")
            .expect_err("outside");
        assert!(error.to_string().contains("state directory"), "{error}");
    }

    #[test]
    fn dropping_an_unsynced_group_writes_nothing() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let group = GroupCommit::new(dir.path());
            group
                .stage(&dir.path().join("never.json"), b"lost")
                .expect("stage");
        }
        assert_eq!(fs::read_dir(dir.path()).expect("list").count(), 0);
    }

    #[test]
    fn a_failed_sync_keeps_the_batch_staged() {
        let dir = tempfile::tempdir().expect("tempdir");
        let group = GroupCommit::new(dir.path());
        // A file where the pack directory must go makes the sync fail.
        fs::write(dir.path().join(pack::PACK_DIR), b"not a directory").expect("block");
        let path = dir.path().join("commits").join("x.json");
        group.stage(&path, b"x").expect("stage");
        let error = group.sync().expect_err("blocked");
        assert!(error.to_string().contains("packs"), "{error}");
        assert_eq!(group.pending(), 1, "still staged for a retry");
        fs::remove_file(dir.path().join(pack::PACK_DIR)).expect("unblock");
        group.sync().expect("retry");
        assert_eq!(
            Packs::new(dir.path())
                .read(&path)
                .expect("read")
                .expect("packed"),
            b"x"
        );
    }
}
