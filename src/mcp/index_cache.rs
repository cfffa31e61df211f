//! Indexes the server keeps in memory between `select_context` calls, so a warm call costs a
//! stat walk and a selection instead of reading and hashing the whole tree. Each is reused only
//! while the tree's stamp (every file's path, size and mtime) and the commit `HEAD` names are
//! unchanged; any edit, new file, removal or commit rebuilds it (from the persisted index, so
//! only changed files are re-parsed). A commit changes no file but moves the window of recent
//! changes the selection lifts.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::context::index::{Index, IndexError, IndexOptions, TreeStamp, tree_stamp};
use crate::context::recent::{DEFAULT_COMMITS, RecentChanges, commits_from_env};

/// Trees kept at once; the least recently used goes first.
const CAPACITY: usize = 4;

struct Entry {
    stamp: TreeStamp,
    /// `HEAD` when the recent changes were read (`None` outside git or with history off).
    head: Option<String>,
    index: Arc<Index>,
    used: u64,
}

/// A tree: its canonical root and the file size limit it was indexed with.
type Key = (PathBuf, u64);

/// The kept indexes and a use counter (for least-recently-used eviction).
#[derive(Default)]
struct Entries {
    clock: u64,
    map: HashMap<Key, Entry>,
}

/// In-memory indexes by (canonical root, size limit).
pub struct IndexCache {
    state_home: PathBuf,
    entries: Mutex<Entries>,
}

/// Whether a lookup reused a kept index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Freshness {
    /// The kept index still matched the tree.
    Warm,
    /// The index was (re)built for this call.
    Built,
}

impl IndexCache {
    pub fn new(state_home: &Path) -> Self {
        Self {
            state_home: state_home.to_path_buf(),
            entries: Mutex::new(Entries::default()),
        }
    }

    /// The index of `root`, current as of this call.
    pub fn get(
        &self,
        root: &Path,
        max_file_bytes: u64,
    ) -> Result<(Arc<Index>, Freshness), IndexError> {
        let canonical = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
        let key = (canonical, max_file_bytes);
        let stamp = tree_stamp(root, max_file_bytes)?;
        let commits = commits_from_env().unwrap_or(DEFAULT_COMMITS);
        let head = if commits == 0 {
            None
        } else {
            crate::git::head_commit(root)
        };
        {
            let mut guard = self.lock();
            let Entries { clock, map } = &mut *guard;
            *clock += 1;
            if let Some(entry) = map.get_mut(&key)
                && entry.stamp == stamp
                && entry.head == head
            {
                entry.used = *clock;
                return Ok((entry.index.clone(), Freshness::Warm));
            }
        }
        // Built outside the lock: other trees stay servable meanwhile. Two calls racing on one
        // changed tree both build; the later insert wins, and both results are current.
        let options = IndexOptions {
            max_file_bytes,
            state_home: Some(self.state_home.clone()),
            ..IndexOptions::default()
        };
        let mut index = Index::build(root, &options)?;
        // History is a ranking hint: a tree outside git, or a git that fails, selects without
        // it (`svc mcp` refuses a bad SVC_RECENT_COMMITS at start, so the default is only a
        // fallback for library callers).
        if let Ok(Some(recent)) = RecentChanges::in_work_tree(root, commits) {
            index.set_recent_changes(recent);
        }
        let index = Arc::new(index);
        index.prepare();
        let mut guard = self.lock();
        let Entries { clock, map } = &mut *guard;
        *clock += 1;
        if map.len() >= CAPACITY && !map.contains_key(&key) {
            let oldest = map
                .iter()
                .min_by_key(|(_, entry)| entry.used)
                .map(|(key, _)| key.clone());
            if let Some(oldest) = oldest {
                map.remove(&oldest);
            }
        }
        map.insert(
            key,
            Entry {
                stamp,
                head,
                index: index.clone(),
                used: *clock,
            },
        );
        Ok((index, Freshness::Built))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        // A poisoned lock only means a panic elsewhere mid-update of plain data; the map is
        // still a valid cache (at worst an entry is rebuilt).
        self.entries
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_index_is_reused_until_the_tree_changes() {
        let state = tempfile::tempdir().expect("state");
        let tree = tempfile::tempdir().expect("tree");
        std::fs::write(
            tree.path().join("lib.rs"),
            "/// Adds.\npub fn add(a: u32, b: u32) -> u32 {\n    a + b\n}\n",
        )
        .expect("write");
        let cache = IndexCache::new(state.path());
        let (first, how) = cache.get(tree.path(), 1_000_000).expect("build");
        assert_eq!(how, Freshness::Built);
        let (again, how) = cache.get(tree.path(), 1_000_000).expect("warm");
        assert_eq!(how, Freshness::Warm);
        assert!(Arc::ptr_eq(&first, &again));

        std::fs::write(
            tree.path().join("more.rs"),
            "pub fn sub(a: u32, b: u32) -> u32 {\n    a - b\n}\n",
        )
        .expect("write");
        let (changed, how) = cache.get(tree.path(), 1_000_000).expect("rebuild");
        assert_eq!(how, Freshness::Built);
        assert_eq!(changed.files.len(), 2);
    }

    /// A commit of edits already on disk changes no file's stamp, but it moves the window of
    /// recent changes: the kept index (and the lift it carries) used to outlive it.
    #[test]
    fn a_commit_rebuilds_the_kept_index_though_no_file_changed() {
        use crate::git::in_test_repo as git;
        let state = tempfile::tempdir().expect("state");
        let tree = tempfile::tempdir().expect("tree");
        git(tree.path(), &["init", "-q"]);
        std::fs::write(tree.path().join("a.py"), "def a():\n    return 1\n").expect("write");
        git(tree.path(), &["add", "."]);
        git(tree.path(), &["commit", "-qm", "first"]);
        std::fs::write(tree.path().join("a.py"), "def a():\n    return 2\n").expect("write");
        let cache = IndexCache::new(state.path());
        let (_, how) = cache.get(tree.path(), 1_000_000).expect("build");
        assert_eq!(how, Freshness::Built);
        let (_, how) = cache.get(tree.path(), 1_000_000).expect("warm");
        assert_eq!(how, Freshness::Warm);
        git(tree.path(), &["commit", "-qam", "second"]);
        let (_, how) = cache.get(tree.path(), 1_000_000).expect("after the commit");
        assert_eq!(how, Freshness::Built);
        let (_, how) = cache.get(tree.path(), 1_000_000).expect("warm again");
        assert_eq!(how, Freshness::Warm);
    }

    #[test]
    fn the_least_recently_used_tree_is_dropped_beyond_capacity() {
        let state = tempfile::tempdir().expect("state");
        let trees: Vec<_> = (0..=CAPACITY)
            .map(|i| {
                let tree = tempfile::tempdir().expect("tree");
                std::fs::write(tree.path().join("a.md"), format!("# Doc {i}\n\ntext\n"))
                    .expect("write");
                tree
            })
            .collect();
        let cache = IndexCache::new(state.path());
        for tree in &trees {
            cache.get(tree.path(), 1_000_000).expect("build");
        }
        // The first tree was the least recently used when the last one came in.
        let (_, how) = cache.get(trees[0].path(), 1_000_000).expect("rebuild");
        assert_eq!(how, Freshness::Built);
        let (_, how) = cache.get(trees[CAPACITY].path(), 1_000_000).expect("warm");
        assert_eq!(how, Freshness::Warm);
    }
}
