//! A cheap fingerprint of a tree as the index walk sees it: every file's relative path, size
//! and modification time, in walk order. Two equal stamps mean an index built at the first is
//! still the index of the tree, without reading or hashing a byte of content; a long-running
//! process (the MCP server) checks it before reusing an index it keeps in memory.

use std::path::Path;
use std::time::UNIX_EPOCH;

use sha2::{Digest, Sha256};

use super::{IndexError, walk};

/// What [`tree_stamp`] saw: the digest of every walked file's path, size and mtime.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeStamp {
    digest: [u8; 32],
    /// Files the walk would index (files over the size limit excluded).
    pub files: usize,
}

/// Walks `root` exactly as [`super::Index::build`] does (.gitignore, .svcignore, the size
/// limit) and stamps what it finds. A file the walk cannot stat still counts, with size and
/// mtime zero, so it cannot hide a change in the others.
pub fn tree_stamp(root: &Path, max_file_bytes: u64) -> Result<TreeStamp, IndexError> {
    super::check_root(root)?;
    let (entries, skipped) = walk(root, max_file_bytes)?;
    let mut hasher = Sha256::new();
    for (relative, absolute) in &entries {
        let (size, modified) = std::fs::metadata(absolute)
            .map(|m| {
                let modified = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                    .map_or(0, |d| d.as_nanos());
                (m.len(), modified)
            })
            .unwrap_or((0, 0));
        hasher.update(relative.as_bytes());
        hasher.update([0]);
        hasher.update(size.to_le_bytes());
        hasher.update(modified.to_le_bytes());
    }
    // A file growing over the limit leaves the index: that is a change too.
    for skip in &skipped {
        hasher.update(b"\x01skipped\x00");
        hasher.update(skip.path.as_bytes());
    }
    Ok(TreeStamp {
        digest: hasher.finalize().into(),
        files: entries.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_changes_with_an_edit_a_new_file_and_a_removal_and_not_otherwise() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.rs"), "fn a() {}\n").expect("write");
        std::fs::write(dir.path().join("b.md"), "# B\n\ntext\n").expect("write");
        let first = tree_stamp(dir.path(), 1_000_000).expect("stamp");
        assert_eq!(first.files, 2);
        assert_eq!(first, tree_stamp(dir.path(), 1_000_000).expect("stamp"));

        std::fs::write(dir.path().join("a.rs"), "fn a() { 1 }\n").expect("edit");
        let edited = tree_stamp(dir.path(), 1_000_000).expect("stamp");
        assert_ne!(first, edited);

        std::fs::write(dir.path().join("c.txt"), "new\n").expect("add");
        let added = tree_stamp(dir.path(), 1_000_000).expect("stamp");
        assert_ne!(edited, added);
        assert_eq!(added.files, 3);

        std::fs::remove_file(dir.path().join("b.md")).expect("remove");
        assert_ne!(added, tree_stamp(dir.path(), 1_000_000).expect("stamp"));
    }

    #[test]
    fn ignored_files_do_not_change_the_stamp_and_a_file_is_not_a_tree() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(".svcignore"), "target/\n").expect("write");
        std::fs::write(dir.path().join("a.rs"), "fn a() {}\n").expect("write");
        let before = tree_stamp(dir.path(), 1_000_000).expect("stamp");
        std::fs::create_dir(dir.path().join("target")).expect("mkdir");
        std::fs::write(dir.path().join("target/out.rs"), "fn o() {}\n").expect("write");
        assert_eq!(before, tree_stamp(dir.path(), 1_000_000).expect("stamp"));
        assert!(matches!(
            tree_stamp(&dir.path().join("a.rs"), 1_000_000),
            Err(IndexError::NotADirectory { .. })
        ));
        // Regression (found by probing): a missing folder was called "not a directory … not a
        // file".
        let missing = tree_stamp(&dir.path().join("nope"), 1_000_000).expect_err("missing");
        assert!(matches!(missing, IndexError::Missing { .. }));
        assert!(
            missing.to_string().contains("nope does not exist"),
            "{missing}"
        );
        let empty = tree_stamp(Path::new(""), 1_000_000).expect_err("empty");
        assert!(
            empty
                .to_string()
                .starts_with("the empty path does not exist"),
            "{empty}"
        );
    }
}
