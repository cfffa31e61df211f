//! Pack files: many state files in one append-only file, for [`super::GroupCommit`].
//!
//! Layout under the state directory: `packs/<name>.pack` holds entries, each a header line
//! `svc-pack-entry <len> <path>` then the `<len>` bytes and a newline (so a pack can be read,
//! and repaired, without its index); `packs/<name>.idx` holds one line per entry,
//! `<offset> <len> <path>`, where `<offset>` is where the bytes start and `<path>` is the file's
//! path relative to the state directory with `/` separators (`commits/ctx_…/receipt.json`,
//! `blobs/ab/cdef…`). A writer syncs the pack before it appends the index lines and syncs them,
//! so an indexed entry is always on disk; an index line torn by a crash (no trailing newline)
//! is ignored, as are pack bytes no index line names.
//!
//! Readers look a path up in the packs only when the loose file is absent, and verify what they
//! read exactly as they verify a loose file (blob hash, receipt fingerprints).

use std::collections::HashMap;
use std::fs;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::StateError;

/// Directory of the packs, under the state directory.
pub const PACK_DIR: &str = "packs";

const ENTRY_TAG: &str = "svc-pack-entry";

/// `path` relative to `home` as a pack key (`/`-separated), or `None` when it is not below it.
pub fn relative_key(home: &Path, path: &Path) -> Option<String> {
    let rest = path.strip_prefix(home).ok()?;
    let mut parts = Vec::new();
    for component in rest.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_str()?),
            _ => return None,
        }
    }
    // Keys are one line of the index: a newline in a path would break it.
    let key = parts.join("/");
    (!key.is_empty() && !key.contains('\n')).then_some(key)
}

/// An open pack and its index, appended batch by batch.
#[derive(Debug)]
pub(super) struct PackWriter {
    pack: fs::File,
    pack_path: PathBuf,
    index: fs::File,
    index_path: PathBuf,
}

impl PackWriter {
    /// A new, uniquely named pack and index in `dir`.
    pub(super) fn create(dir: &Path) -> Result<Self, StateError> {
        let wrap = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StateError::Write { path, source }
        };
        fs::create_dir_all(dir).map_err(wrap(dir))?;
        let (pack, pack_path) = tempfile::Builder::new()
            .prefix("pack-")
            .suffix(".pack")
            .rand_bytes(12)
            .tempfile_in(dir)
            .map_err(wrap(dir))?
            .keep()
            .map_err(|e| wrap(dir)(e.error))?;
        let index_path = pack_path.with_extension("idx");
        let mut options = fs::OpenOptions::new();
        options.create_new(true).append(true);
        // Private like the pack (and every other state file written through a temporary file).
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let index = options.open(&index_path).map_err(wrap(&index_path))?;
        // Both names must survive a crash once the first batch is synced into them.
        if let Ok(handle) = fs::File::open(dir) {
            let _ = handle.sync_all();
        }
        Ok(Self {
            pack,
            pack_path,
            index,
            index_path,
        })
    }

    /// Appends `entries` (key, bytes) and makes them durable: the pack is synced before the
    /// index lines that name its new entries are written and synced. Returns the bytes added to
    /// the pack.
    pub(super) fn append<'a>(
        &mut self,
        entries: impl Iterator<Item = (&'a str, &'a [u8])>,
    ) -> Result<u64, StateError> {
        let wrap = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StateError::Write { path, source }
        };
        // Where this batch starts: the end of the file, whatever a failed batch left there.
        let start = self
            .pack
            .seek(SeekFrom::End(0))
            .map_err(wrap(&self.pack_path))?;
        let mut body = Vec::new();
        let mut index = Vec::new();
        for (key, bytes) in entries {
            // Writing into a Vec cannot fail.
            let _ = writeln!(body, "{ENTRY_TAG} {} {key}", bytes.len());
            let offset = start + body.len() as u64;
            body.extend_from_slice(bytes);
            body.push(b'\n');
            let _ = writeln!(index, "{offset} {} {key}", bytes.len());
        }
        append_synced(&mut self.pack, &self.pack_path, &body)?;
        append_synced(&mut self.index, &self.index_path, &index)?;
        Ok(body.len() as u64)
    }
}

/// Writes `bytes` to `path` and fsyncs it: the pack and index files are appended in place, so
/// only their creation goes through a directory sync.
fn append_synced(file: &mut fs::File, path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    file.write_all(bytes).map_err(|source| StateError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    file.sync_data().map_err(|source| StateError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Where one packed file's bytes are.
#[derive(Debug, Clone)]
struct Location {
    pack: usize,
    offset: u64,
    len: u64,
}

#[derive(Debug, Default)]
struct PackIndex {
    packs: Vec<PathBuf>,
    entries: HashMap<String, Location>,
}

/// Reads files out of the packs under a state directory. The index is loaded on first use and
/// again when a path is not found in it (a pack may have grown since).
#[derive(Debug)]
pub struct Packs {
    home: PathBuf,
    index: Mutex<Option<Arc<PackIndex>>>,
}

impl Packs {
    pub fn new(home: &Path) -> Self {
        Self {
            home: home.to_path_buf(),
            index: Mutex::new(None),
        }
    }

    /// The bytes packed for `path` (a path under the state directory), or `None` when no pack
    /// holds it.
    pub fn read(&self, path: &Path) -> Result<Option<Vec<u8>>, StateError> {
        self.read_with(path, true)
    }

    /// [`Packs::read`] against the index as first loaded: a miss does not reload it. For
    /// lookups that mostly miss (a cache) and whose writers are elsewhere or in this process.
    pub fn read_known(&self, path: &Path) -> Result<Option<Vec<u8>>, StateError> {
        self.read_with(path, false)
    }

    fn read_with(&self, path: &Path, reload_on_miss: bool) -> Result<Option<Vec<u8>>, StateError> {
        let Some(key) = relative_key(&self.home, path) else {
            return Ok(None);
        };
        let cached = self.lock().clone();
        let fresh = cached.is_none();
        let mut index = match cached {
            Some(index) => index,
            None => self.reload()?,
        };
        if !index.entries.contains_key(&key) && !fresh && reload_on_miss {
            index = self.reload()?;
        }
        let Some(location) = index.entries.get(&key) else {
            return Ok(None);
        };
        let pack = &index.packs[location.pack];
        let wrap = |source| StateError::Read {
            path: pack.clone(),
            source,
        };
        let mut file = fs::File::open(pack).map_err(wrap)?;
        file.seek(SeekFrom::Start(location.offset)).map_err(wrap)?;
        // Lengths were checked against the pack's size when the index was loaded.
        let mut bytes = vec![0; location.len as usize];
        file.read_exact(&mut bytes).map_err(wrap)?;
        Ok(Some(bytes))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Arc<PackIndex>>> {
        // The guarded value is replaced whole, so a poisoned lock still holds a valid one.
        self.index.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn reload(&self) -> Result<Arc<PackIndex>, StateError> {
        let index = Arc::new(load(&self.home.join(PACK_DIR))?);
        *self.lock() = Some(index.clone());
        Ok(index)
    }
}

fn load(dir: &Path) -> Result<PackIndex, StateError> {
    let read_error = |path: &Path| {
        let path = path.to_path_buf();
        move |source| StateError::Read { path, source }
    };
    let listing = match fs::read_dir(dir) {
        Ok(listing) => listing,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(PackIndex::default()),
        Err(error) => return Err(read_error(dir)(error)),
    };
    let mut indexes: Vec<PathBuf> = listing
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "idx"))
        .collect();
    indexes.sort();
    let mut index = PackIndex::default();
    for index_path in indexes {
        let pack_path = index_path.with_extension("pack");
        let pack_len = fs::metadata(&pack_path)
            .map_err(read_error(&pack_path))?
            .len();
        let text = fs::read_to_string(&index_path).map_err(read_error(&index_path))?;
        let pack = index.packs.len();
        index.packs.push(pack_path.clone());
        // The text after the last newline is a line torn by a crash: its entry was never
        // acknowledged, so it is skipped.
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        for (number, line) in complete.lines().enumerate() {
            let bad = |message: String| StateError::Pack {
                path: index_path.clone(),
                line: number + 1,
                message,
            };
            let mut fields = line.splitn(3, ' ');
            let (Some(offset), Some(len), Some(key)) =
                (fields.next(), fields.next(), fields.next())
            else {
                return Err(bad(format!(
                    "expected `<offset> <len> <path>`, found {line:?}"
                )));
            };
            let (Ok(offset), Ok(len)) = (offset.parse::<u64>(), len.parse::<u64>()) else {
                return Err(bad(format!(
                    "offset and length must be numbers, found {line:?}"
                )));
            };
            if offset.checked_add(len).is_none_or(|end| end > pack_len) {
                return Err(bad(format!(
                    "{key} ends past the end of {} ({pack_len} bytes): the pack was truncated",
                    pack_path.display()
                )));
            }
            index
                .entries
                .insert(key.to_string(), Location { pack, offset, len });
        }
    }
    Ok(index)
}

/// The first file in `home`'s pack directory whose extension is `extension` (tests look inside
/// packs and indexes).
#[cfg(test)]
pub(crate) fn first_file(home: &Path, extension: &str) -> PathBuf {
    fs::read_dir(home.join(PACK_DIR))
        .expect("the pack directory")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == extension))
        .expect("a pack file")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::GroupCommit;

    #[test]
    fn keys_are_relative_slash_paths_under_home() {
        let home = Path::new("/state");
        assert_eq!(
            relative_key(home, Path::new("/state/blobs/ab/cd")).as_deref(),
            Some("blobs/ab/cd")
        );
        assert_eq!(relative_key(home, Path::new("/elsewhere/x")), None);
        assert_eq!(relative_key(home, Path::new("/state")), None);
        assert_eq!(relative_key(home, Path::new("/state/../x")), None);
    }

    #[test]
    fn a_torn_index_line_is_ignored_and_a_bad_one_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let group = GroupCommit::new(dir.path());
        let kept = dir.path().join("a");
        group.stage(&kept, b"kept bytes").expect("stage");
        group.sync().expect("sync");
        let index_path = first_file(dir.path(), "idx");
        let mut file = fs::OpenOptions::new()
            .append(true)
            .open(&index_path)
            .expect("open");
        file.write_all(b"0 3 torn").expect("torn line");
        drop(file);
        let packs = Packs::new(dir.path());
        assert_eq!(
            packs.read(&kept).expect("read"),
            Some(b"kept bytes".to_vec())
        );
        assert_eq!(packs.read(&dir.path().join("torn")).expect("read"), None);

        fs::write(&index_path, "0 999999 far\n").expect("rewrite index");
        let error = Packs::new(dir.path())
            .read(&kept)
            .expect_err("past the end");
        let message = error.to_string();
        assert!(
            message.contains(":1:") && message.contains("truncated"),
            "{message}"
        );
        fs::write(&index_path, "zero 3 x\n").expect("rewrite index");
        let error = Packs::new(dir.path())
            .read(&kept)
            .expect_err("not a number");
        assert!(error.to_string().contains("numbers"), "{error}");
    }

    #[test]
    fn the_pack_alone_describes_its_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let group = GroupCommit::new(dir.path());
        group
            .stage(&dir.path().join("commits/x.json"), b"{}\n")
            .expect("stage");
        group.sync().expect("sync");
        let pack = first_file(dir.path(), "pack");
        assert_eq!(
            fs::read_to_string(pack).expect("read"),
            "svc-pack-entry 3 commits/x.json\n{}\n\n"
        );
    }
}
