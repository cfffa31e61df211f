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
    /// Lengths after the last batch that was made durable: a failed batch is cut back to them,
    /// so its torn bytes can never be glued to the next batch's.
    pack_len: u64,
    index_len: u64,
    /// Tests: the next index append writes this many bytes, then fails.
    #[cfg(test)]
    fail_index_after: Option<usize>,
}

impl PackWriter {
    /// A new, uniquely named pack and index in `dir`.
    pub(super) fn create(dir: &Path) -> Result<Self, StateError> {
        let wrap = |path: &Path| {
            let path = path.to_path_buf();
            move |source| StateError::Write { path, source }
        };
        super::create_dir_durable(dir).map_err(wrap(dir))?;
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
        super::sync_dir(dir);
        Ok(Self {
            pack,
            pack_path,
            index,
            index_path,
            pack_len: 0,
            index_len: 0,
            #[cfg(test)]
            fail_index_after: None,
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
        // Where this batch starts: the end of the last durable batch.
        let start = self.pack_len;
        let mut body = Vec::new();
        let mut index = Vec::new();
        for (key, bytes) in entries {
            // Writing into a Vec cannot fail.
            body.extend_from_slice(entry_header(bytes.len() as u64, key).as_bytes());
            let offset = start + body.len() as u64;
            body.extend_from_slice(bytes);
            body.push(b'\n');
            let _ = writeln!(index, "{offset} {} {key}", bytes.len());
        }
        let written = self
            .pack
            .seek(SeekFrom::Start(start))
            .map_err(wrap(&self.pack_path))
            .and_then(|_| append_synced(&mut self.pack, &self.pack_path, &body))
            .and_then(|()| self.append_index(&index));
        if let Err(error) = written {
            self.roll_back();
            return Err(error);
        }
        self.pack_len = start + body.len() as u64;
        self.index_len += index.len() as u64;
        Ok(body.len() as u64)
    }

    fn append_index(&mut self, lines: &[u8]) -> Result<(), StateError> {
        #[cfg(test)]
        if let Some(cut) = self.fail_index_after.take() {
            let _ = self.index.write_all(&lines[..cut.min(lines.len())]);
            return Err(StateError::Write {
                path: self.index_path.clone(),
                source: io::Error::other("injected failure"),
            });
        }
        append_synced(&mut self.index, &self.index_path, lines)
    }

    /// Cuts both files back to the last durable batch after a failed append. Best effort: the
    /// group drops a writer whose append failed and starts a new pack, so even a failed cut
    /// leaves only an unindexed tail and at most one torn last index line, which readers skip.
    fn roll_back(&mut self) {
        for (file, len) in [
            (&mut self.pack, self.pack_len),
            (&mut self.index, self.index_len),
        ] {
            if file.set_len(len).is_ok() {
                let _ = file.sync_data();
            }
        }
    }
}

/// The header line written before each entry's bytes.
/// The bytes of an entry read with its header line before it and its newline after it, when
/// both are exactly what the writer put there (a damaged index line or header cannot hand out
/// the wrong bytes).
fn unframe<'a>(framed: &'a [u8], header: &str) -> Option<&'a [u8]> {
    framed.strip_prefix(header.as_bytes())?.strip_suffix(b"\n")
}

fn entry_header(len: u64, key: &str) -> String {
    format!("{ENTRY_TAG} {len} {key}\n")
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
    /// 1-based line of the index that names the entry, for messages.
    line: usize,
    offset: u64,
    len: u64,
}

#[derive(Debug, Default)]
struct PackIndex {
    /// Each pack and its index file.
    packs: Vec<(PathBuf, PathBuf)>,
    entries: HashMap<String, Location>,
    /// Index lines that were skipped, each with its file, line and reason.
    skipped: Vec<String>,
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
        Ok(self.read_with(path, true)?.map(|(bytes, _)| bytes))
    }

    /// [`Packs::read`], with the pack file that held the bytes: a check that fails on them
    /// must name that file, not the loose path that does not exist.
    pub fn read_with_pack(&self, path: &Path) -> Result<Option<(Vec<u8>, PathBuf)>, StateError> {
        self.read_with(path, true)
    }

    /// [`Packs::read`] against the index as first loaded: a miss does not reload it. For
    /// lookups that mostly miss (a cache) and whose writers are elsewhere or in this process.
    pub fn read_known(&self, path: &Path) -> Result<Option<Vec<u8>>, StateError> {
        Ok(self.read_with(path, false)?.map(|(bytes, _)| bytes))
    }

    fn read_with(
        &self,
        path: &Path,
        reload_on_miss: bool,
    ) -> Result<Option<(Vec<u8>, PathBuf)>, StateError> {
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
        let (pack, index_path) = &index.packs[location.pack];
        let wrap = |source| StateError::Read {
            path: pack.clone(),
            source,
        };
        // The entry is read with the header line before it and the newline after it, and both
        // must be exactly what the writer put there: a damaged index line (offset, length or
        // path) or a damaged header cannot hand out the wrong bytes.
        let header = entry_header(location.len, &key);
        let damaged = || StateError::Pack {
            path: index_path.clone(),
            line: location.line,
            message: format!(
                "the entry for {key} does not match its header in {}",
                pack.display()
            ),
        };
        let Some(start) = location.offset.checked_sub(header.len() as u64) else {
            return Err(damaged());
        };
        let mut file = fs::File::open(pack).map_err(wrap)?;
        file.seek(SeekFrom::Start(start)).map_err(wrap)?;
        // Lengths were checked against the pack's size when the index was loaded.
        let mut framed = vec![0; header.len() + location.len as usize + 1];
        file.read_exact(&mut framed).map_err(|_| damaged())?;
        let Some(payload) = unframe(&framed, &header) else {
            return Err(damaged());
        };
        Ok(Some((payload.to_vec(), pack.clone())))
    }

    /// For each `(path, bytes)`: `None` when no pack holds the path (by the index as first
    /// loaded), else whether the packed entry is intact and holds exactly `bytes`. A writer
    /// that skips what is already stored checks it this way, so a damaged entry is written again
    /// instead of named by every later commit. Entries are compared where they lie, each pack
    /// opened once and neighbouring entries read in one call (a commit's blobs were packed
    /// together), so checking a whole tree's blobs costs a few large reads.
    pub fn stored_equal(&self, items: &[(&Path, &[u8])]) -> Result<Vec<Option<bool>>, StateError> {
        /// Entries closer than this are read together.
        const GAP: u64 = 64 * 1024;
        let cached = self.lock().clone();
        let index = match cached {
            Some(index) => index,
            None => self.reload()?,
        };
        let mut out = vec![None; items.len()];
        // (pack, start of the framed entry, framed length, item) of each packed item.
        let mut wanted: Vec<(usize, u64, u64, usize)> = Vec::new();
        let mut headers: Vec<String> = vec![String::new(); items.len()];
        for (i, (path, bytes)) in items.iter().enumerate() {
            let Some(key) = relative_key(&self.home, path) else {
                continue;
            };
            let Some(location) = index.entries.get(&key) else {
                continue;
            };
            let header = entry_header(location.len, &key);
            match location.offset.checked_sub(header.len() as u64) {
                Some(start) if location.len == bytes.len() as u64 => {
                    wanted.push((
                        location.pack,
                        start,
                        header.len() as u64 + location.len + 1,
                        i,
                    ));
                    headers[i] = header;
                }
                _ => out[i] = Some(false),
            }
        }
        wanted.sort_unstable();
        let mut at = 0;
        while at < wanted.len() {
            let pack = wanted[at].0;
            let mut end = at;
            while end < wanted.len() && wanted[end].0 == pack {
                end += 1;
            }
            let path = &index.packs[pack].0;
            let file = fs::File::open(path).map_err(|source| StateError::Read {
                path: path.clone(),
                source,
            })?;
            let mut run = at;
            while run < end {
                let first = wanted[run].1;
                let mut last = run;
                let mut until = first + wanted[run].2;
                while last + 1 < end && wanted[last + 1].1 <= until + GAP {
                    last += 1;
                    until = until.max(wanted[last].1 + wanted[last].2);
                }
                let mut buffer = vec![0; (until - first) as usize];
                let read = std::os::unix::fs::FileExt::read_exact_at(&file, &mut buffer, first);
                for &(_, start, framed, i) in &wanted[run..=last] {
                    let equal = read.is_ok() && {
                        let from = (start - first) as usize;
                        unframe(&buffer[from..from + framed as usize], &headers[i])
                            == Some(items[i].1)
                    };
                    out[i] = Some(equal);
                }
                run = last + 1;
            }
            at = end;
        }
        Ok(out)
    }

    /// Whether a pack holds `path`, by the index as first loaded (a miss does not reload it:
    /// callers use this to skip writing what is already stored, and a stale miss only costs a
    /// duplicate).
    pub fn contains(&self, path: &Path) -> Result<bool, StateError> {
        let Some(key) = relative_key(&self.home, path) else {
            return Ok(false);
        };
        let cached = self.lock().clone();
        let index = match cached {
            Some(index) => index,
            None => self.reload()?,
        };
        Ok(index.entries.contains_key(&key))
    }

    /// Every packed path (relative to the state directory) starting with `prefix`, sorted, by
    /// the index as it is on disk now.
    pub fn keys_with_prefix(&self, prefix: &str) -> Result<Vec<String>, StateError> {
        let index = self.reload()?;
        let mut keys: Vec<String> = index
            .entries
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect();
        keys.sort();
        Ok(keys)
    }

    /// Index lines skipped by the last load, each naming its file, line and why (damaged or
    /// torn lines do not make the rest of the packed state unreadable).
    pub fn skipped(&self) -> Vec<String> {
        self.lock()
            .as_ref()
            .map(|index| index.skipped.clone())
            .unwrap_or_default()
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
        let pack_len = match fs::metadata(&pack_path) {
            Ok(metadata) => metadata.len(),
            Err(error) => {
                index.skipped.push(format!(
                    "{}: skipped: its pack {} cannot be read ({error})",
                    index_path.display(),
                    pack_path.display()
                ));
                continue;
            }
        };
        let bytes = fs::read(&index_path).map_err(read_error(&index_path))?;
        let pack = index.packs.len();
        index.packs.push((pack_path.clone(), index_path.clone()));
        // The bytes after the last newline are a line torn by a crash: its entry was never
        // acknowledged, so it is skipped silently.
        // An index with no complete line (a pack created just now, or by a writer killed before
        // its first batch) names nothing; it is not one empty line to warn about.
        let complete = bytes
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(&bytes[..0], |end| &bytes[..end]);
        let lines = bytes
            .contains(&b'\n')
            .then(|| complete.split(|&b| b == b'\n'))
            .into_iter()
            .flatten();
        for (number, line) in lines.enumerate() {
            let skip = |reason: String| {
                format!("{}:{}: skipped: {reason}", index_path.display(), number + 1)
            };
            match parse_index_line(line, pack_len) {
                Ok((key, offset, len)) => {
                    index.entries.insert(
                        key,
                        Location {
                            pack,
                            line: number + 1,
                            offset,
                            len,
                        },
                    );
                }
                Err(reason) => index.skipped.push(skip(reason)),
            }
        }
    }
    Ok(index)
}

/// `<offset> <len> <path>` of one index line, checked against the pack's length.
fn parse_index_line(line: &[u8], pack_len: u64) -> Result<(String, u64, u64), String> {
    let shown = String::from_utf8_lossy(line);
    let line = std::str::from_utf8(line).map_err(|_| format!("not UTF-8: {shown:?}"))?;
    let mut fields = line.splitn(3, ' ');
    let (Some(offset), Some(len), Some(key)) = (fields.next(), fields.next(), fields.next()) else {
        return Err(format!("expected `<offset> <len> <path>`, found {line:?}"));
    };
    let (Ok(offset), Ok(len)) = (offset.parse::<u64>(), len.parse::<u64>()) else {
        return Err(format!("offset and length must be numbers, found {line:?}"));
    };
    if offset.checked_add(len).is_none_or(|end| end >= pack_len) {
        return Err(format!(
            "{key} ends past the end of its pack ({pack_len} bytes): the pack was truncated"
        ));
    }
    Ok((key.to_string(), offset, len))
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
    fn a_torn_index_line_is_ignored_and_a_bad_one_is_skipped_and_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let group = GroupCommit::new(dir.path());
        let kept = dir.path().join("a");
        group.stage(&kept, b"kept bytes").expect("stage");
        group.sync().expect("sync");
        let index_path = first_file(dir.path(), "idx");
        let good = fs::read_to_string(&index_path).expect("index");
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
        assert!(packs.skipped().is_empty(), "a torn last line is silent");

        // Bad lines before a good one: skipped and reported, the good entry stays readable.
        fs::write(&index_path, format!("0 999999 far\nzero 3 x\n{good}")).expect("rewrite");
        let packs = Packs::new(dir.path());
        assert_eq!(
            packs.read(&kept).expect("read"),
            Some(b"kept bytes".to_vec())
        );
        let skipped = packs.skipped();
        assert_eq!(skipped.len(), 2, "{skipped:?}");
        assert!(
            skipped[0].contains(":1: skipped") && skipped[0].contains("truncated"),
            "{skipped:?}"
        );
        assert!(skipped[1].contains(":2: skipped") && skipped[1].contains("numbers"));

        // Found by probing: an empty index, or one holding only a torn first line (a writer
        // killed before its first batch, or a full disk), warned of an empty line 1 on every
        // read.
        for leftover in ["", "0 3 to"] {
            fs::write(dir.path().join("packs/pack-AAAAAAAAAAAA.idx"), leftover).expect("idx");
            fs::write(dir.path().join("packs/pack-AAAAAAAAAAAA.pack"), "").expect("pack");
            fs::write(&index_path, &good).expect("restore");
            let packs = Packs::new(dir.path());
            assert_eq!(
                packs.read(&kept).expect("read"),
                Some(b"kept bytes".to_vec())
            );
            assert!(packs.skipped().is_empty(), "{:?}", packs.skipped());
        }
    }

    #[test]
    fn an_index_line_that_does_not_match_its_header_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let group = GroupCommit::new(dir.path());
        group.stage(&dir.path().join("a"), b"alpha").expect("stage");
        group.stage(&dir.path().join("b"), b"bravo").expect("stage");
        group.sync().expect("sync");
        let index_path = first_file(dir.path(), "idx");
        let text = fs::read_to_string(&index_path).expect("index");
        // Point `b` at `a`'s bytes: same length, so only the header check can tell.
        let a_offset = text
            .lines()
            .next()
            .expect("a")
            .split(' ')
            .next()
            .expect("offset");
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines[1] = format!("{a_offset} 5 b");
        fs::write(&index_path, lines.join("\n") + "\n").expect("rewrite");
        let error = Packs::new(dir.path())
            .read(&dir.path().join("b"))
            .expect_err("damaged");
        let message = error.to_string();
        assert!(
            message.contains(":2:") && message.contains("header"),
            "{message}"
        );
    }

    #[test]
    fn stored_equal_compares_entries_where_they_lie() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pack_dir = dir.path().join(PACK_DIR);
        let mut writer = PackWriter::create(&pack_dir).expect("create");
        let far = vec![b'x'; 200 * 1024];
        writer
            .append(
                [
                    ("a", b"alpha".as_slice()),
                    ("b", b"beta".as_slice()),
                    ("far", far.as_slice()),
                    ("c", b"gamma".as_slice()),
                ]
                .into_iter(),
            )
            .expect("append");
        let path = |key: &str| dir.path().join(key);
        let (a, b, c, d) = (path("a"), path("b"), path("c"), path("d"));
        let items: Vec<(&Path, &[u8])> = vec![
            (&a, b"alpha"),
            (&b, b"bets"),
            (&c, b"gamma"),
            (&d, b"delta"),
            (&a, b"alphabet"),
        ];
        let equal = Packs::new(dir.path())
            .stored_equal(&items)
            .expect("compare");
        assert_eq!(
            equal,
            vec![Some(true), Some(false), Some(true), None, Some(false)]
        );
        // A damaged byte inside an entry is a difference.
        let pack = first_file(dir.path(), "pack");
        let text = fs::read(&pack).expect("pack");
        let at = text.windows(5).position(|w| w == b"gamma").expect("entry");
        let mut damaged = text.clone();
        damaged[at + 2] = b'X';
        fs::write(&pack, damaged).expect("damage");
        let equal = Packs::new(dir.path())
            .stored_equal(&[(&c, b"gamma".as_slice())])
            .expect("compare");
        assert_eq!(equal, vec![Some(false)]);
    }

    /// Issue 10: after a failed sync the batch was retried on the same writer, whose index
    /// could end in a torn line; the next batch's line was glued onto it.
    #[test]
    fn issue_10_a_failed_append_is_cut_back_and_the_retry_goes_to_a_new_pack() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pack_dir = dir.path().join(PACK_DIR);
        let mut writer = PackWriter::create(&pack_dir).expect("create");
        writer
            .append([("first", b"one".as_slice())].into_iter())
            .expect("append");
        let (pack_len, index_len) = (writer.pack_len, writer.index_len);
        writer.fail_index_after = Some(3);
        writer
            .append([("second", b"two".as_slice())].into_iter())
            .expect_err("injected");
        assert_eq!(
            fs::metadata(&writer.pack_path).expect("pack").len(),
            pack_len
        );
        assert_eq!(
            fs::metadata(&writer.index_path).expect("idx").len(),
            index_len
        );
        writer
            .append([("third", b"three".as_slice())].into_iter())
            .expect("append after the failure");
        let packs = Packs::new(dir.path());
        assert_eq!(
            packs.read(&dir.path().join("first")).expect("read"),
            Some(b"one".to_vec())
        );
        assert_eq!(packs.read(&dir.path().join("second")).expect("read"), None);
        assert_eq!(
            packs.read(&dir.path().join("third")).expect("read"),
            Some(b"three".to_vec())
        );
        assert!(packs.skipped().is_empty(), "{:?}", packs.skipped());
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
