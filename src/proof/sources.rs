//! The documents a proof-guided session is prepared from: one text file, or every UTF-8 file
//! of a directory (walked as the index walks, honouring .gitignore), each named by its path
//! relative to the directory. `svc proof prepare|run` and the MCP tool server read them here.

use std::path::{Path, PathBuf};

/// Why the documents could not be read.
#[derive(Debug, thiserror::Error)]
pub enum SourcesError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not a UTF-8 text file")]
    NotText { path: PathBuf },
    #[error("cannot walk {path}: {message}")]
    Walk { path: PathBuf, message: String },
    #[error("{path} holds no UTF-8 text file to use as a document")]
    Empty { path: PathBuf },
}

/// The `(name, text)` documents under `path`, sorted by name. Binary and non-UTF-8 files of a
/// directory are skipped (they are not documents); a single file must be text.
pub fn read_sources(path: &Path) -> Result<Vec<(String, String)>, SourcesError> {
    let meta = std::fs::metadata(path).map_err(|source| SourcesError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if meta.is_file() {
        let text = std::fs::read_to_string(path).map_err(|_| SourcesError::NotText {
            path: path.to_path_buf(),
        })?;
        let name = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into_owned(),
        );
        return Ok(vec![(name, text)]);
    }
    let mut sources = Vec::new();
    for entry in ignore::WalkBuilder::new(path).build() {
        let entry = entry.map_err(|e| SourcesError::Walk {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        let name = entry
            .path()
            .strip_prefix(path)
            .unwrap_or(entry.path())
            .display()
            .to_string();
        sources.push((name, text));
    }
    sources.sort();
    if sources.is_empty() {
        return Err(SourcesError::Empty {
            path: path.to_path_buf(),
        });
    }
    Ok(sources)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_one_document_and_a_directory_its_text_files_by_relative_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("b.md"), "beta\n").expect("write");
        std::fs::write(dir.path().join("sub/a.txt"), "alpha\n").expect("write");
        std::fs::write(dir.path().join("blob.bin"), [0xff, 0xfe, 0x00]).expect("write");
        let sources = read_sources(dir.path()).expect("directory");
        assert_eq!(
            sources,
            vec![
                ("b.md".to_string(), "beta\n".to_string()),
                ("sub/a.txt".to_string(), "alpha\n".to_string())
            ]
        );
        let one = read_sources(&dir.path().join("b.md")).expect("file");
        assert_eq!(one, vec![("b.md".to_string(), "beta\n".to_string())]);
        assert!(matches!(
            read_sources(&dir.path().join("blob.bin")),
            Err(SourcesError::NotText { .. })
        ));
        assert!(matches!(
            read_sources(&dir.path().join("missing")),
            Err(SourcesError::Read { .. })
        ));
        let empty = tempfile::tempdir().expect("tempdir");
        assert!(matches!(
            read_sources(empty.path()),
            Err(SourcesError::Empty { .. })
        ));
    }
}
