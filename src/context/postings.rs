//! Flat storage for the term index, and its file beside the persisted index.
//!
//! The term index of a million-token tree is about a million `(term, fragment)` postings. Held
//! as hash maps of small vectors it took a quarter-million allocations to build and could not
//! be saved cheaply; held as sorted keys with offsets into one value array (compressed sparse
//! rows) it is a handful of flat arrays, written and read as little-endian bytes. A warm
//! `svc context select` then reads the arrays instead of re-splitting every word of the tree.
//!
//! The file is a cache: a missing, stale, short or inconsistent file is ignored (the index is
//! rebuilt and the file rewritten), never trusted. It is written to a temporary file and
//! renamed, without an fsync: a crash can lose it, which only costs the rebuild.

use std::io::Write;
use std::path::Path;

/// Values grouped under sorted 64-bit keys.
#[derive(Debug, Clone, PartialEq)]
pub struct Keyed<T> {
    keys: Vec<u64>,
    /// `keys.len() + 1` offsets into `values`.
    offsets: Vec<u32>,
    values: Vec<T>,
}

impl<T> Default for Keyed<T> {
    fn default() -> Self {
        Keyed {
            keys: Vec::new(),
            offsets: vec![0],
            values: Vec::new(),
        }
    }
}

impl<T: Copy> Keyed<T> {
    /// From `(key, value)` pairs sorted by key (values of one key keep their order).
    pub fn from_sorted(pairs: &[(u64, T)]) -> Keyed<T> {
        let mut keyed = Keyed {
            keys: Vec::new(),
            offsets: Vec::new(),
            values: Vec::with_capacity(pairs.len()),
        };
        for (at, &(key, value)) in pairs.iter().enumerate() {
            if keyed.keys.last() != Some(&key) {
                keyed.keys.push(key);
                keyed.offsets.push(at as u32);
            }
            keyed.values.push(value);
        }
        keyed.offsets.push(pairs.len() as u32);
        keyed
    }

    pub fn get(&self, key: u64) -> Option<&[T]> {
        let at = self.keys.binary_search(&key).ok()?;
        Some(&self.values[self.offsets[at] as usize..self.offsets[at + 1] as usize])
    }

    /// Number of keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Every value, grouped by key.
    pub fn values(&self) -> &[T] {
        &self.values
    }

    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// One list per item, items numbered from 0.
#[derive(Debug, Clone, PartialEq)]
pub struct Lists<T> {
    offsets: Vec<u32>,
    values: Vec<T>,
}

impl<T> Default for Lists<T> {
    fn default() -> Self {
        Lists {
            offsets: vec![0],
            values: Vec::new(),
        }
    }
}

impl<T: Copy> Lists<T> {
    pub fn push(&mut self, items: &[T]) {
        self.values.extend_from_slice(items);
        self.offsets.push(self.values.len() as u32);
    }

    /// The list of item `at` (empty past the end).
    pub fn get(&self, at: usize) -> &[T] {
        match (self.offsets.get(at), self.offsets.get(at + 1)) {
            (Some(&start), Some(&end)) => &self.values[start as usize..end as usize],
            _ => &[],
        }
    }

    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A fixed-width little-endian value.
pub trait Word: Copy {
    const WIDTH: usize;
    fn put(self, out: &mut Vec<u8>);
    fn take(bytes: &[u8]) -> Self;
}

impl Word for u32 {
    const WIDTH: usize = 4;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn take(bytes: &[u8]) -> Self {
        let mut array = [0u8; 4];
        array.copy_from_slice(bytes);
        u32::from_le_bytes(array)
    }
}

impl Word for u64 {
    const WIDTH: usize = 8;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
    fn take(bytes: &[u8]) -> Self {
        let mut array = [0u8; 8];
        array.copy_from_slice(bytes);
        u64::from_le_bytes(array)
    }
}

impl Word for (u32, u32) {
    const WIDTH: usize = 8;
    fn put(self, out: &mut Vec<u8>) {
        self.0.put(out);
        self.1.put(out);
    }
    fn take(bytes: &[u8]) -> Self {
        (u32::take(&bytes[..4]), u32::take(&bytes[4..]))
    }
}

/// Appends arrays, each as its length (u64) and its values.
#[derive(Default)]
pub struct Writer {
    bytes: Vec<u8>,
}

impl Writer {
    pub fn new(magic: &[u8]) -> Writer {
        Writer {
            bytes: magic.to_vec(),
        }
    }

    pub fn array<T: Word>(&mut self, values: &[T]) {
        self.bytes.reserve(8 + values.len() * T::WIDTH);
        (values.len() as u64).put(&mut self.bytes);
        for &value in values {
            value.put(&mut self.bytes);
        }
    }

    pub fn keyed<T: Word>(&mut self, keyed: &Keyed<T>) {
        self.array(&keyed.keys);
        self.array(&keyed.offsets);
        self.array(&keyed.values);
    }

    pub fn lists<T: Word>(&mut self, lists: &Lists<T>) {
        self.array(&lists.offsets);
        self.array(&lists.values);
    }

    pub fn bytes(self) -> Vec<u8> {
        self.bytes
    }
}

/// Reads what a [`Writer`] wrote; `None` on anything short or inconsistent.
pub struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    /// After `magic`, or `None` when the bytes do not start with it.
    pub fn new(bytes: &'a [u8], magic: &[u8]) -> Option<Reader<'a>> {
        bytes.strip_prefix(magic).map(|bytes| Reader { bytes })
    }

    pub fn array<T: Word>(&mut self) -> Option<Vec<T>> {
        if self.bytes.len() < 8 {
            return None;
        }
        let (length, rest) = self.bytes.split_at(8);
        let length = usize::try_from(u64::take(length)).ok()?;
        let size = length.checked_mul(T::WIDTH)?;
        if rest.len() < size {
            return None;
        }
        let (values, rest) = rest.split_at(size);
        self.bytes = rest;
        Some(values.chunks_exact(T::WIDTH).map(T::take).collect())
    }

    pub fn keyed<T: Word>(&mut self) -> Option<Keyed<T>> {
        let keyed = Keyed {
            keys: self.array()?,
            offsets: self.array()?,
            values: self.array()?,
        };
        let sorted = keyed.keys.windows(2).all(|w| w[0] < w[1]);
        (sorted
            && keyed.offsets.len() == keyed.keys.len() + 1
            && offsets_fit(&keyed.offsets, keyed.values.len()))
        .then_some(keyed)
    }

    pub fn lists<T: Word>(&mut self) -> Option<Lists<T>> {
        let lists = Lists {
            offsets: self.array()?,
            values: self.array()?,
        };
        (!lists.offsets.is_empty() && offsets_fit(&lists.offsets, lists.values.len()))
            .then_some(lists)
    }

    /// Whether everything was read.
    pub fn finished(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// Offsets start at 0, never decrease and end at the value count.
fn offsets_fit(offsets: &[u32], values: usize) -> bool {
    offsets.first() == Some(&0)
        && offsets.windows(2).all(|w| w[0] <= w[1])
        && offsets.last().map(|&last| last as usize) == Some(values)
}

/// Writes `bytes` to `path` through a temporary file and a rename (no fsync: a cache).
pub fn save(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut temporary = tempfile::NamedTempFile::new_in(dir)?;
    temporary.write_all(bytes)?;
    temporary.persist(path).map_err(|error| error.error)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keyed_values_come_back_by_key_and_in_order() {
        let keyed = Keyed::from_sorted(&[(3, 10u32), (3, 11), (7, 12), (9, 13)]);
        assert_eq!(keyed.get(3), Some(&[10, 11][..]));
        assert_eq!(keyed.get(9), Some(&[13][..]));
        assert_eq!(keyed.get(4), None);
        assert_eq!(keyed.len(), 3);
        assert!(Keyed::<u32>::from_sorted(&[]).get(0).is_none());
    }

    #[test]
    fn arrays_round_trip_and_damage_is_refused() {
        let keyed = Keyed::from_sorted(&[(1, (5u32, 1u32)), (2, (6, 2))]);
        let mut lists = Lists::default();
        lists.push(&[1u64, 2]);
        lists.push(&[]);
        lists.push(&[3]);
        let mut writer = Writer::new(b"TEST");
        writer.keyed(&keyed);
        writer.lists(&lists);
        writer.array(&[7u32]);
        let bytes = writer.bytes();

        let mut reader = Reader::new(&bytes, b"TEST").expect("magic");
        assert_eq!(reader.keyed::<(u32, u32)>(), Some(keyed));
        assert_eq!(reader.lists::<u64>(), Some(lists.clone()));
        assert_eq!(reader.array::<u32>(), Some(vec![7]));
        assert!(reader.finished());
        assert_eq!(lists.get(2), &[3]);
        assert_eq!(lists.get(9), &[] as &[u64]);

        assert!(Reader::new(&bytes, b"NOPE").is_none());
        // Cut short anywhere: refused, never a panic.
        for cut in 0..bytes.len() {
            let mut reader = Reader::new(&bytes[..cut], b"TEST").unwrap_or(Reader { bytes: &[] });
            let read = reader
                .keyed::<(u32, u32)>()
                .and_then(|_| reader.lists::<u64>());
            let all = read.and_then(|_| reader.array::<u32>());
            assert!(all.is_none() || cut == bytes.len(), "cut at {cut}");
        }
        // Offsets pointing past the values: refused.
        let mut bad = Writer::new(b"TEST");
        bad.array(&[0u32, 5]);
        bad.array(&[1u64]);
        let bytes = bad.bytes();
        assert!(
            Reader::new(&bytes, b"TEST")
                .expect("magic")
                .lists::<u64>()
                .is_none()
        );
    }
}
