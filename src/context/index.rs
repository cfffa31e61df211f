//! The index: walk a tree (or take in-memory documents), split every file into fragments, and
//! give each fragment its exact token count and skeleton.
//!
//! Fragments partition each file by whole lines, so the exact bytes of every fragment together
//! are the file; a fragment's chunk id (`path#Lfirst-last`) is its recovery handle. Code is split
//! by tree-sitter definitions (functions, methods, classes, impls, structs, module-level blocks;
//! large containers are split into their members), Markdown by sections, JSON/YAML/TOML by
//! top-level keys, logs by line groups and prose by paragraphs.
//!
//! A disk index is persisted under `<state>/index/` keyed by each file's path and content hash,
//! so a second build re-parses only changed files. The persisted form holds fragment boundaries,
//! counts and skeletons, never the file text (that is re-read and re-hashed).

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::skeleton::{self, ItemKind, LineMap, Outline};
use crate::digest;
use crate::state;
use crate::tokens::{Encoding, Tokenizer};

mod spans;
use spans::*;
mod stamp;
pub use stamp::{TreeStamp, tree_stamp};

/// Version of the persisted index layout and of the skeletons and seam corrections stored in
/// it; a mismatch re-parses everything (bump it when skeleton rendering or the seam windows
/// change, or stale values survive). 6: one-line fragments get join corrections. 7: large
/// records are cut into runs of members. 8: a byte-order mark no longer splits the first item,
/// contexts skip annotations, kept block-comment lines are closed. 9: an attribute on an import
/// goes into the counted run of imports.
const PERSIST_VERSION: u32 = 9;
/// A container larger than this (bytes) is split into its members.
const SPLIT_BYTES: usize = 2_000;
/// Blocks without structure (module-level code, prose, logs) are cut into pieces of at most
/// this many lines.
const MAX_BLOCK_LINES: usize = 60;
/// Prose paragraphs are merged until a fragment holds at least this many bytes.
const MIN_PARAGRAPH_BYTES: usize = 400;

/// A file's language, detected from its name (and for documents, its text).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum Language {
    Rust,
    Python,
    Javascript,
    Typescript,
    Tsx,
    Go,
    Java,
    C,
    Cpp,
    Markdown,
    Json,
    Yaml,
    Toml,
    Log,
    Text,
}

impl Language {
    pub fn as_str(self) -> &'static str {
        match self {
            Language::Rust => "rust",
            Language::Python => "python",
            Language::Javascript => "javascript",
            Language::Typescript => "typescript",
            Language::Tsx => "tsx",
            Language::Go => "go",
            Language::Java => "java",
            Language::C => "c",
            Language::Cpp => "cpp",
            Language::Markdown => "markdown",
            Language::Json => "json",
            Language::Yaml => "yaml",
            Language::Toml => "toml",
            Language::Log => "log",
            Language::Text => "text",
        }
    }

    /// Detects the language from a file name's extension.
    pub fn from_name(name: &str) -> Language {
        let file = name.rsplit('/').next().unwrap_or(name);
        let extension = file
            .rsplit_once('.')
            .map(|(_, e)| e.to_ascii_lowercase())
            .unwrap_or_default();
        match extension.as_str() {
            "rs" => Language::Rust,
            "py" | "pyi" => Language::Python,
            "js" | "mjs" | "cjs" | "jsx" => Language::Javascript,
            "ts" | "mts" | "cts" => Language::Typescript,
            "tsx" => Language::Tsx,
            "go" => Language::Go,
            "java" => Language::Java,
            "c" | "h" => Language::C,
            "cc" | "cpp" | "cxx" | "hpp" | "hh" | "hxx" | "c++" | "h++" => Language::Cpp,
            "md" | "markdown" | "mdx" => Language::Markdown,
            "json" => Language::Json,
            "yaml" | "yml" => Language::Yaml,
            "toml" => Language::Toml,
            "log" => Language::Log,
            _ => Language::Text,
        }
    }

    /// Whether the language is source code with a tree-sitter grammar.
    pub fn is_code(self) -> bool {
        skeleton::has_grammar(self)
    }
}

impl fmt::Display for Language {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a fragment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FragmentKind {
    Function,
    Method,
    Class,
    Struct,
    Enum,
    Trait,
    Interface,
    Impl,
    Module,
    Type,
    Const,
    Macro,
    /// Module-level code between definitions (imports, statements).
    Block,
    /// A Markdown section.
    Section,
    /// A top-level key of a JSON, YAML or TOML file.
    Key,
    /// A group of log lines.
    LogGroup,
    /// Prose paragraphs.
    Paragraph,
}

impl FragmentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FragmentKind::Function => "fn",
            FragmentKind::Method => "method",
            FragmentKind::Class => "class",
            FragmentKind::Struct => "struct",
            FragmentKind::Enum => "enum",
            FragmentKind::Trait => "trait",
            FragmentKind::Interface => "interface",
            FragmentKind::Impl => "impl",
            FragmentKind::Module => "module",
            FragmentKind::Type => "type",
            FragmentKind::Const => "const",
            FragmentKind::Macro => "macro",
            FragmentKind::Block => "block",
            FragmentKind::Section => "section",
            FragmentKind::Key => "key",
            FragmentKind::LogGroup => "log",
            FragmentKind::Paragraph => "paragraph",
        }
    }

    /// Whether the fragment defines its symbols (rather than only being a stretch of text).
    pub fn is_definition(self) -> bool {
        !matches!(
            self,
            FragmentKind::Block | FragmentKind::LogGroup | FragmentKind::Paragraph
        )
    }

    fn from_item(kind: ItemKind) -> Self {
        match kind {
            ItemKind::Function => FragmentKind::Function,
            ItemKind::Method => FragmentKind::Method,
            ItemKind::Class => FragmentKind::Class,
            ItemKind::Struct => FragmentKind::Struct,
            ItemKind::Enum => FragmentKind::Enum,
            ItemKind::Trait => FragmentKind::Trait,
            ItemKind::Interface => FragmentKind::Interface,
            ItemKind::Impl => FragmentKind::Impl,
            ItemKind::Module => FragmentKind::Module,
            ItemKind::Type => FragmentKind::Type,
            ItemKind::Const => FragmentKind::Const,
            ItemKind::Macro => FragmentKind::Macro,
        }
    }
}

/// One fragment: a whole-line span of one file.
#[derive(Debug, Clone, PartialEq)]
pub struct Fragment {
    /// `path#Lfirst-last`: the recovery handle used in commits.
    pub chunk_id: String,
    /// Index into [`Index::files`].
    pub file: usize,
    pub kind: FragmentKind,
    /// Symbols this fragment defines.
    pub symbols: Vec<String>,
    /// The enclosing definition's header (`impl Foo`, `class Bar`), for members.
    pub context: Option<String>,
    /// Byte range in the file.
    pub bytes: Range<usize>,
    /// First and last line, 1-based, inclusive.
    pub lines: (usize, usize),
    /// Tokens of the exact bytes.
    pub text_tokens: usize,
    /// The skeleton, when it is shorter than the text.
    pub skeleton: Option<String>,
    pub skeleton_tokens: usize,
    /// Tokens of the full piece's header line (`>>> chunk_id (in context)`).
    pub header_tokens: usize,
    /// Tokens of the reference piece.
    pub reference_tokens: usize,
    /// Token corrections where this fragment's text joins what precedes it in a rendering.
    pub seams: Seams,
}

/// Token corrections (see [`super::seams`]) of a fragment's joins: the count of the joined
/// text is the parts' counts plus the correction. `None`: not known, count the text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Seams {
    /// Its full piece's header line, then its text.
    pub header: Option<i32>,
    /// The file's previous fragment (ending where this one starts), then its text.
    pub join: Option<i32>,
    /// Its skeleton piece's header line, then its skeleton.
    pub skeleton: Option<i32>,
}

impl Seams {
    fn to_array(self) -> [Option<i32>; 3] {
        [self.header, self.join, self.skeleton]
    }

    fn from_array([header, join, skeleton]: [Option<i32>; 3]) -> Seams {
        Seams {
            header,
            join,
            skeleton,
        }
    }
}

/// One indexed file (or document).
#[derive(Debug, Clone)]
pub struct IndexedFile {
    /// Path relative to the root with `/` separators, or the document name.
    pub path: String,
    pub language: Language,
    /// SHA-256 of the path and the exact bytes: the cache key.
    pub content_hash: String,
    /// The exact text, shared with selections so they can hand out exact bytes cheaply.
    pub text: Arc<str>,
    /// Indexes into [`Index::fragments`].
    pub fragments: Range<usize>,
}

/// A file the walk did not index, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub path: String,
    pub reason: String,
}

/// What a build did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IndexStats {
    pub files: usize,
    pub fragments: usize,
    /// Files parsed in this build.
    pub parsed: usize,
    /// Files whose fragments came from the persisted index.
    pub reused: usize,
    pub bytes: usize,
    /// Tokens of all indexed text.
    pub tokens: usize,
    pub skipped: Vec<Skipped>,
    /// Where the index was persisted, if it was.
    pub persisted: Option<PathBuf>,
    /// Size of the persisted index in bytes.
    pub persisted_bytes: usize,
}

/// Progress callback: `(files done, files total)`.
pub type ProgressFn = Arc<dyn Fn(usize, usize) + Send + Sync>;

/// Settings of an index build.
#[derive(Clone)]
pub struct IndexOptions {
    /// Files larger than this are skipped (and listed in [`IndexStats::skipped`]).
    pub max_file_bytes: u64,
    /// State directory for the persisted index; `None` means [`state::home`].
    pub state_home: Option<PathBuf>,
    /// Whether to read and write the persisted index.
    pub persist: bool,
    pub encoding: Encoding,
    pub progress: Option<ProgressFn>,
}

impl Default for IndexOptions {
    fn default() -> Self {
        Self {
            max_file_bytes: 1_000_000,
            state_home: None,
            persist: true,
            encoding: Encoding::default(),
            progress: None,
        }
    }
}

impl fmt::Debug for IndexOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("IndexOptions")
            .field("max_file_bytes", &self.max_file_bytes)
            .field("state_home", &self.state_home)
            .field("persist", &self.persist)
            .field("encoding", &self.encoding)
            .finish_non_exhaustive()
    }
}

/// A path for a message; an empty one is named as such.
fn shown(path: &Path) -> String {
    if path.as_os_str().is_empty() {
        "the empty path".to_string()
    } else {
        path.display().to_string()
    }
}

/// `root` must be an existing directory.
pub(crate) fn check_root(root: &Path) -> Result<(), IndexError> {
    if root.is_dir() {
        Ok(())
    } else if root.exists() {
        Err(IndexError::NotADirectory {
            path: root.to_path_buf(),
        })
    } else {
        Err(IndexError::Missing {
            path: root.to_path_buf(),
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error(
        "{path} is not a directory; give the folder to index (the repository or documents it is in), not a file"
    )]
    NotADirectory { path: PathBuf },
    #[error(
        "{} does not exist; give the folder to index (the repository or documents it is in)",
        shown(path)
    )]
    Missing { path: PathBuf },
    #[error("cannot walk {path}: {message}")]
    Walk { path: PathBuf, message: String },
    #[error("cannot write the index {path}: {source}")]
    Persist {
        path: PathBuf,
        #[source]
        source: state::StateError,
    },
    #[error(transparent)]
    State(#[from] state::StateError),
}

/// A built index.
#[derive(Debug)]
pub struct Index {
    /// The walked directory (`None` for in-memory documents).
    pub root: Option<PathBuf>,
    pub files: Vec<IndexedFile>,
    pub fragments: Vec<Fragment>,
    pub stats: IndexStats,
    pub encoding: Encoding,
    terms: OnceLock<super::terms::TermIndex>,
    /// Where the term index is kept beside the persisted index (`None`: never saved).
    terms_file: Option<PathBuf>,
    /// What the tree's history says changed lately (never persisted: it follows `HEAD`).
    recent: Option<super::recent::RecentChanges>,
}

/// How a fragment is presented, used to render pieces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PieceKind {
    Full,
    Skeleton,
    Reference,
}

impl Index {
    /// Walks `root` (honouring .gitignore and .svcignore), reusing the persisted index for
    /// unchanged files, and persists the result.
    pub fn build(root: &Path, options: &IndexOptions) -> Result<Index, IndexError> {
        check_root(root)?;
        let (entries, mut skipped) = walk(root, options.max_file_bytes)?;
        let cache_path = if options.persist {
            let home = match &options.state_home {
                Some(home) => home.clone(),
                None => state::home()?,
            };
            let canonical = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
            let key = digest::sha256_hex(format!(
                "{}\n{}",
                canonical.display(),
                options.encoding.as_str()
            ));
            Some(home.join("index").join(format!("{}.json", &key[..20])))
        } else {
            None
        };
        let cached = cache_path.as_deref().map(load_cache).unwrap_or_default();
        // Loading the BPE ranks costs ~0.1 s: a warm build with nothing to parse skips it.
        let tokenizer = OnceLock::new();
        let encoding = options.encoding;
        let total = entries.len();
        let done = AtomicUsize::new(0);
        let results: Vec<FileResult> = entries
            .par_iter()
            .map(|(path, absolute)| {
                let result = index_path(path, absolute, options.max_file_bytes, &cached, &|| {
                    *tokenizer.get_or_init(|| Tokenizer::new(encoding))
                });
                let finished = done.fetch_add(1, Ordering::Relaxed) + 1;
                if let Some(progress) = &options.progress {
                    progress(finished, total);
                }
                result
            })
            .collect();
        let mut parsed_files = Vec::new();
        let mut reused = 0;
        let mut parsed = 0;
        for result in results {
            match result {
                FileResult::Indexed { file, reused: hit } => {
                    if hit {
                        reused += 1;
                    } else {
                        parsed += 1;
                    }
                    parsed_files.push(file);
                }
                FileResult::Skipped(skip) => skipped.push(skip),
            }
        }
        skipped.sort_by(|a, b| a.path.cmp(&b.path));
        let mut index = assemble(Some(root.to_path_buf()), parsed_files, options.encoding);
        index.stats.parsed = parsed;
        index.stats.reused = reused;
        index.stats.skipped = skipped;
        if let Some(path) = cache_path {
            let bytes = persist_bytes(&index);
            let unchanged = parsed == 0 && cached.len() == index.files.len();
            if !unchanged {
                state::atomic_write(&path, &bytes).map_err(|source| IndexError::Persist {
                    path: path.clone(),
                    source,
                })?;
            }
            index.stats.persisted_bytes = bytes.len();
            index.terms_file = Some(path.with_extension("terms"));
            index.stats.persisted = Some(path);
        }
        Ok(index)
    }

    /// An index over in-memory `(name, text)` documents. Names ending in a known extension are
    /// parsed as that language; other text with Markdown headings is split by section, the rest
    /// by paragraph. Duplicate names get a `~2`, `~3`… suffix.
    pub fn from_documents(docs: &[(String, String)]) -> Index {
        let tokenizer = Tokenizer::default();
        let mut seen: HashMap<&str, usize> = HashMap::new();
        let mut names = Vec::with_capacity(docs.len());
        for (name, _) in docs {
            let count = seen.entry(name.as_str()).or_insert(0);
            *count += 1;
            names.push(if *count == 1 {
                name.clone()
            } else {
                format!("{name}~{count}")
            });
        }
        let files: Vec<ParsedFile> = docs
            .par_iter()
            .zip(names.par_iter())
            .map(|((_, text), name)| {
                let mut language = Language::from_name(name);
                if language == Language::Text && looks_like_markdown(text) {
                    language = Language::Markdown;
                }
                parse_file(name, language, text.clone(), &tokenizer)
            })
            .collect();
        assemble(None, files, Encoding::default())
    }

    /// The exact text of a fragment.
    pub fn text(&self, fragment: &Fragment) -> &str {
        &self.files[fragment.file].text[fragment.bytes.clone()]
    }

    pub fn path(&self, fragment: &Fragment) -> &str {
        &self.files[fragment.file].path
    }

    /// The fragment of `file` whose bytes hold `offset` of the file's text.
    pub fn fragment_at(&self, file: &IndexedFile, offset: usize) -> Option<usize> {
        self.fragments[file.fragments.clone()]
            .iter()
            .position(|f| f.bytes.contains(&offset))
            .map(|i| file.fragments.start + i)
    }

    /// Renders a fragment as it appears in a selection. `None` when the fragment has no
    /// skeleton and `kind` is [`PieceKind::Skeleton`].
    pub fn piece(&self, fragment: &Fragment, kind: PieceKind) -> Option<String> {
        Some(match kind {
            PieceKind::Full => {
                let text = self.text(fragment);
                let mut piece = header_line(&fragment.chunk_id, fragment.context.as_deref());
                piece.push_str(text);
                if !text.ends_with('\n') {
                    piece.push('\n');
                }
                piece
            }
            PieceKind::Skeleton => {
                let skeleton = fragment.skeleton.as_deref()?;
                format!("{}{skeleton}", skeleton_header(fragment))
            }
            PieceKind::Reference => reference_line(
                &fragment.chunk_id,
                fragment.kind,
                &fragment.symbols,
                fragment.context.as_deref(),
            ),
        })
    }

    /// Tokens of all indexed text.
    pub fn total_tokens(&self) -> usize {
        self.fragments.iter().map(|f| f.text_tokens).sum()
    }

    pub(crate) fn terms(&self) -> &super::terms::TermIndex {
        use super::terms::TermIndex;
        self.terms.get_or_init(|| {
            let Some(path) = &self.terms_file else {
                return TermIndex::build(self);
            };
            // Splitting every word of a large tree again costs more than reading the arrays.
            let fingerprint = TermIndex::fingerprint(self);
            if let Ok(bytes) = std::fs::read(path)
                && let Some(terms) =
                    TermIndex::from_bytes(&bytes, &fingerprint, self.fragments.len())
            {
                return terms;
            }
            let terms = TermIndex::build(self);
            // A cache: failing to save it only costs the next run this build.
            let _ = super::postings::save(path, &terms.to_bytes(&fingerprint));
            terms
        })
    }

    /// Attaches what the tree's history says changed lately; selections then lift the
    /// fragments those changes touched (see [`super::recent`]). An empty set detaches.
    pub fn set_recent_changes(&mut self, recent: super::recent::RecentChanges) {
        self.recent = (!recent.is_empty()).then_some(recent);
    }

    /// The recent changes attached with [`Index::set_recent_changes`].
    pub fn recent_changes(&self) -> Option<&super::recent::RecentChanges> {
        self.recent.as_ref()
    }

    /// Builds the term index now rather than at the first selection.
    pub fn prepare(&self) {
        let _ = self.terms();
    }
}

/// The one-line reference piece: chunk id, kind and symbols.
fn reference_line(
    chunk_id: &str,
    kind: FragmentKind,
    symbols: &[String],
    context: Option<&str>,
) -> String {
    let mut line = format!(">>> {chunk_id} reference: {}", kind.as_str());
    if !symbols.is_empty() {
        line.push(' ');
        line.push_str(&symbols.join(", "));
    }
    if let Some(context) = context {
        line.push_str(&format!(" (in {context})"));
    }
    line.push('\n');
    line
}

/// The header line of a full piece.
fn header_line(chunk_id: &str, context: Option<&str>) -> String {
    match context {
        Some(context) => format!(">>> {chunk_id} (in {context})\n"),
        None => format!(">>> {chunk_id}\n"),
    }
}

/// Whether text reads as Markdown (has ATX headings).
fn looks_like_markdown(text: &str) -> bool {
    text.lines().any(|l| {
        let hashes = l.bytes().take_while(|&b| b == b'#').count();
        (1..=6).contains(&hashes) && l[hashes..].starts_with(' ')
    })
}

/// Files to index as `(relative path, absolute path)`, and the files skipped by size.
type Walked = (Vec<(String, PathBuf)>, Vec<Skipped>);

fn walk(root: &Path, max_bytes: u64) -> Result<Walked, IndexError> {
    let mut entries = Vec::new();
    let mut skipped = Vec::new();
    let walker = ignore::WalkBuilder::new(root)
        .require_git(false)
        .add_custom_ignore_filename(".svcignore")
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    for entry in walker {
        let entry = entry.map_err(|e| IndexError::Walk {
            path: root.to_path_buf(),
            message: e.to_string(),
        })?;
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let absolute = entry.path().to_path_buf();
        let relative = absolute
            .strip_prefix(root)
            .unwrap_or(&absolute)
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        // A chunk id is the path as text, one line of a rendered header: a name that is not
        // UTF-8 (two such names became one id, and the whole commit failed) or holds a control
        // character (a newline split the header) cannot be named exactly, so it is left out.
        let exact = absolute
            .strip_prefix(root)
            .unwrap_or(&absolute)
            .to_str()
            .is_some();
        if !exact || relative.chars().any(char::is_control) {
            skipped.push(Skipped {
                path: relative.escape_debug().to_string(),
                reason: if exact {
                    "its name holds a control character, which a chunk id cannot carry; rename it or list it in .svcignore".to_string()
                } else {
                    "its name is not UTF-8, which a chunk id cannot carry exactly; rename it or list it in .svcignore".to_string()
                },
            });
            continue;
        }
        let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
        if size > max_bytes {
            skipped.push(Skipped {
                path: relative,
                reason: format!(
                    "{size} bytes is over the {max_bytes}-byte limit (--max-file-bytes)"
                ),
            });
            continue;
        }
        entries.push((relative, absolute));
    }
    entries.sort();
    Ok((entries, skipped))
}

enum FileResult {
    Indexed { file: ParsedFile, reused: bool },
    Skipped(Skipped),
}

/// A file with its fragments, before the index is assembled.
struct ParsedFile {
    path: String,
    language: Language,
    content_hash: String,
    text: String,
    fragments: Vec<Fragment>,
}

fn content_hash(path: &str, text: &str) -> String {
    let mut material = Vec::with_capacity(path.len() + text.len() + 1);
    material.extend_from_slice(path.as_bytes());
    material.push(0);
    material.extend_from_slice(text.as_bytes());
    digest::sha256_hex(&material)
}

fn index_path(
    path: &str,
    absolute: &Path,
    max_bytes: u64,
    cached: &HashMap<String, PersistedFile>,
    tokenizer: &(dyn Fn() -> Tokenizer + Sync),
) -> FileResult {
    let skip = |reason: String| {
        FileResult::Skipped(Skipped {
            path: path.to_string(),
            reason,
        })
    };
    // The walk checked the size the file system reports; a file that says 0 bytes and reads
    // without end (`/proc/self/pagemap`) took all memory. Read at most one byte over the limit.
    let mut bytes = Vec::new();
    let read = std::fs::File::open(absolute).and_then(|file| {
        file.take(max_bytes.saturating_add(1))
            .read_to_end(&mut bytes)
    });
    if let Err(e) = read {
        return skip(format!("unreadable: {e}"));
    }
    if bytes.len() as u64 > max_bytes {
        return skip(format!(
            "reads more than the {max_bytes}-byte limit (--max-file-bytes), though its size says less"
        ));
    }
    if bytes[..bytes.len().min(8_000)].contains(&0) {
        return skip("binary (contains NUL bytes)".into());
    }
    let text = match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => {
            return skip(format!(
                "not UTF-8 (invalid byte at offset {}); convert it or list it in .svcignore",
                e.utf8_error().valid_up_to()
            ));
        }
    };
    let hash = content_hash(path, &text);
    if let Some(entry) = cached.get(path).filter(|e| e.hash == hash) {
        return FileResult::Indexed {
            file: entry.restore(path, text),
            reused: true,
        };
    }
    let language = Language::from_name(path);
    FileResult::Indexed {
        file: parse_file(path, language, text, &tokenizer()),
        reused: false,
    }
}

fn assemble(root: Option<PathBuf>, parsed: Vec<ParsedFile>, encoding: Encoding) -> Index {
    let mut files = Vec::with_capacity(parsed.len());
    let mut fragments = Vec::new();
    let mut bytes = 0;
    for (number, file) in parsed.into_iter().enumerate() {
        let start = fragments.len();
        bytes += file.text.len();
        for mut fragment in file.fragments {
            fragment.file = number;
            fragments.push(fragment);
        }
        files.push(IndexedFile {
            path: file.path,
            language: file.language,
            content_hash: file.content_hash,
            text: Arc::from(file.text),
            fragments: start..fragments.len(),
        });
    }
    let stats = IndexStats {
        files: files.len(),
        fragments: fragments.len(),
        bytes,
        tokens: fragments.iter().map(|f: &Fragment| f.text_tokens).sum(),
        ..IndexStats::default()
    };
    Index {
        root,
        files,
        fragments,
        stats,
        encoding,
        terms: OnceLock::new(),
        terms_file: None,
        recent: None,
    }
}

/// A fragment before token counting: whole lines `first..=last` (0-based).
#[derive(Debug, Clone)]
struct Span {
    kind: FragmentKind,
    first: usize,
    last: usize,
    symbols: Vec<String>,
    context: Option<String>,
}

fn parse_file(path: &str, language: Language, text: String, tokenizer: &Tokenizer) -> ParsedFile {
    let lines = LineMap::new(&text);
    let content_hash = content_hash(path, &text);
    let mut code: Option<(Outline, Vec<skeleton::LineFlag>)> = None;
    let spans = if text.is_empty() {
        Vec::new()
    } else if language.is_code() {
        match skeleton::outline(language, path, &text) {
            Ok(outline) => {
                let spans = code_spans(&text, &lines, &outline);
                let flags = skeleton::line_flags(&text, &lines, &outline);
                code = Some((outline, flags));
                spans
            }
            // A grammar that cannot parse the file still leaves it searchable as text.
            Err(_) => block_spans(&text, &lines, 0, lines.len() - 1, FragmentKind::Block),
        }
    } else {
        match language {
            Language::Markdown => markdown_spans(&text, &lines),
            Language::Json => json_spans(&text, &lines),
            Language::Yaml => yaml_spans(&text, &lines),
            Language::Toml => toml_spans(&text, &lines),
            Language::Log => log_spans(&lines),
            _ => paragraph_spans(&text, &lines),
        }
    };
    let fragments = spans
        .into_iter()
        .map(|span| {
            let bytes = lines.starts[span.first]..lines.starts[span.last + 1];
            let chunk_id = format!("{path}#L{}-{}", span.first + 1, span.last + 1);
            let body = &text[bytes.clone()];
            let text_tokens = tokenizer.count(body);
            let skeleton = match &code {
                Some((outline, flags)) => {
                    let rendered = skeleton::render(
                        &skeleton::SkeletonSource {
                            text: &text,
                            lines: &lines,
                            line_flags: flags,
                            elisions: &outline.elisions,
                            language,
                        },
                        span.first,
                        span.last,
                        "",
                    );
                    let rendered = if is_test_code(path, body, span.context.as_deref()) {
                        test_skeleton(&rendered)
                    } else if span.kind == FragmentKind::Block {
                        collapse_block(rendered)
                    } else {
                        rendered
                    };
                    dedent(&rendered)
                }
                None => text_skeleton(body, &chunk_id, language, span.kind),
            };
            // Everything elided (a stretch inside a folded macro): say so rather than nothing.
            let skeleton = if skeleton.trim().is_empty() && !body.trim().is_empty() {
                "…\n".to_string()
            } else {
                skeleton
            };
            let skeleton_tokens = tokenizer.count(&skeleton);
            let header_tokens = tokenizer.count(&header_line(&chunk_id, span.context.as_deref()));
            let keep = !skeleton.is_empty() && skeleton_tokens < text_tokens;
            let reference_tokens = tokenizer.count(&reference_line(
                &chunk_id,
                span.kind,
                &span.symbols,
                span.context.as_deref(),
            ));
            Fragment {
                chunk_id,
                file: 0,
                kind: span.kind,
                symbols: span.symbols,
                context: span.context,
                bytes,
                lines: (span.first + 1, span.last + 1),
                text_tokens,
                skeleton: keep.then_some(skeleton),
                skeleton_tokens: if keep { skeleton_tokens } else { 0 },
                header_tokens,
                reference_tokens,
                seams: Seams::default(),
            }
        })
        .collect();
    let mut fragments: Vec<Fragment> = fragments;
    join_seams(&text, &mut fragments, tokenizer);
    ParsedFile {
        path: path.to_string(),
        language,
        content_hash,
        text,
        fragments,
    }
}

/// The token corrections of each fragment's joins, computed with the counts themselves.
fn join_seams(text: &str, fragments: &mut [Fragment], tokenizer: &Tokenizer) {
    use super::seams::{Left, correction};
    use crate::tokens::counts_add;
    // Whether each fragment's start splits the tokens however it is rendered: after its own
    // header, or continuing the fragment before it in the file.
    let clean_start: Vec<bool> = (0..fragments.len())
        .map(|at| {
            let f = &fragments[at];
            let body = &text[f.bytes.clone()];
            counts_add(&header_line(&f.chunk_id, f.context.as_deref()), body)
                && at
                    .checked_sub(1)
                    .map(|p| &fragments[p])
                    .filter(|previous| previous.bytes.end == f.bytes.start)
                    .is_none_or(|previous| counts_add(&text[previous.bytes.clone()], body))
        })
        .collect();
    for at in 0..fragments.len() {
        let (before, rest) = fragments.split_at_mut(at);
        let f = &mut rest[0];
        let body = &text[f.bytes.clone()];
        let header = header_line(&f.chunk_id, f.context.as_deref());
        f.seams.header = correction(&header, body, Left::Whole, tokenizer);
        f.seams.join = before
            .last()
            .filter(|previous| previous.bytes.end == f.bytes.start)
            .and_then(|previous| {
                let window = if clean_start[at - 1] {
                    Left::CleanStart
                } else {
                    Left::FromLastSplit
                };
                correction(&text[previous.bytes.clone()], body, window, tokenizer)
            });
        f.seams.skeleton = f
            .skeleton
            .as_deref()
            .and_then(|skeleton| correction(&skeleton_header(f), skeleton, Left::Whole, tokenizer));
    }
}

/// The header line of a skeleton piece.
fn skeleton_header(fragment: &Fragment) -> String {
    let context = fragment
        .context
        .as_deref()
        .map(|c| format!(" (in {c})"))
        .unwrap_or_default();
    format!(">>> {} skeleton{context}\n", fragment.chunk_id)
}

/// Whether a fragment is test code: a file under a `tests`/`benches` directory or named as a
/// test file, a member of a test module, or an item carrying a test attribute.
pub(crate) fn is_test_code(path: &str, body: &str, context: Option<&str>) -> bool {
    let mut parts: Vec<&str> = path.split('/').collect();
    let file = parts.pop().unwrap_or_default();
    if parts
        .iter()
        .any(|p| matches!(*p, "tests" | "benches" | "__tests__"))
        || file.ends_with("_test.go")
        || (file.starts_with("test_") && file.ends_with(".py"))
        || file.contains(".test.")
        || file.contains(".spec.")
    {
        return true;
    }
    if context.is_some_and(|c| {
        c.split(" > ")
            .any(|part| matches!(part, "mod tests" | "mod test" | "pub mod tests"))
    }) {
        return true;
    }
    body.lines()
        .map(str::trim_start)
        .take_while(|l| l.starts_with("#[") || l.starts_with("//") || l.is_empty())
        .any(is_test_attribute)
}

/// `#[cfg(test)]`, `#[test]`, `#[bench]` and runtime test macros (`#[tokio::test(...)]`).
fn is_test_attribute(line: &str) -> bool {
    let Some(inner) = line.strip_prefix("#[") else {
        return false;
    };
    let path = inner.split(['(', ']']).next().unwrap_or_default().trim();
    path == "test"
        || path == "bench"
        || path.ends_with("::test")
        || path == "wasm_bindgen_test"
        || (path == "cfg" && inner.trim_end_matches([']', ' ']) == "cfg(test)")
}

/// A test fragment's skeleton is the one line that says what it is (`fn parses_empty() { … }`,
/// `mod tests { … }`): tests are not API a reader calls, and the handle recovers the rest.
fn test_skeleton(rendered: &str) -> String {
    // Brackets still open in an attribute that spans lines (`#![cfg(all(\n …\n))]`).
    let mut open_attribute = 0i32;
    let mut lines = rendered.lines().filter(|l| {
        let t = l.trim_start();
        if open_attribute > 0 || t.starts_with("#[") || t.starts_with("#!") {
            open_attribute += t.bytes().filter(|&b| b == b'[' || b == b'(').count() as i32
                - t.bytes().filter(|&b| b == b']' || b == b')').count() as i32;
            open_attribute = open_attribute.max(0);
            return false;
        }
        !(t.is_empty()
            || t.starts_with("//")
            || t.starts_with("/*")
            || t.starts_with('*')
            || t.starts_with('@')
            || t.starts_with("use ")
            || t.starts_with("import ")
            || t.starts_with("from "))
    });
    let Some(first) = lines.next() else {
        return "…\n".to_string();
    };
    let first = first.trim_end();
    // Closing brackets after the line say nothing the marker does not.
    let more = lines.any(|l| !l.trim().bytes().all(|b| b"{}()[];,".contains(&b)));
    match (more, first.ends_with('{')) {
        (true, true) => format!("{first}...}}\n"),
        (true, false) => format!("{first} …\n"),
        (false, _) => format!("{first}\n"),
    }
}

/// Columns a tab stands for when measuring indentation.
const TAB_COLUMNS: usize = 4;

/// Whether a line holds only closing brackets and separators (`}`, `});`, `]`).
fn is_closer_line(line: &str) -> bool {
    line.trim().bytes().all(|b| b"{}()[];,".contains(&b))
}

/// Lays out a rendered skeleton compactly without changing what it says:
///
/// - closer-only lines that close a bracket opened before the fragment (the `}` of an `impl`
///   whose last member this is) are dropped: nothing in the piece opened them;
/// - the indentation every line shares is removed (the header names the enclosing definition,
///   so nesting depth costs tokens without saying anything);
/// - the remaining indentation keeps its levels but not its width: the indents' common step
///   (4 spaces, a tab, 2 spaces) becomes one space. A 4-space indent costs an o200k token of
///   its own where one space merges into the next word. Indents that share no step (4 and 9
///   columns) keep their widths.
fn dedent(skeleton: &str) -> String {
    let mut depth = 0i64;
    let lines: Vec<&str> = skeleton
        .lines()
        .filter(|line| {
            let opens = line.bytes().filter(|b| b"{([".contains(b)).count() as i64;
            let closes = line.bytes().filter(|b| b"})]".contains(b)).count() as i64;
            if is_closer_line(line) && closes > opens && depth <= 0 {
                return false;
            }
            depth += opens - closes;
            true
        })
        .collect();
    let width = |line: &str| -> usize {
        line.chars()
            .take_while(|c| c.is_whitespace())
            .map(|c| if c == '\t' { TAB_COLUMNS } else { 1 })
            .sum()
    };
    let indent = lines
        .iter()
        .filter(|l| !is_closer_line(l))
        .map(|l| width(l))
        .min()
        .unwrap_or(0);
    let step = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| width(l).saturating_sub(indent))
        .filter(|&w| w > 0)
        .fold(0, gcd)
        .max(1);
    let mut out = String::with_capacity(skeleton.len());
    for line in lines {
        let content = line.trim_start();
        let levels = width(line).saturating_sub(indent) / step;
        out.extend(std::iter::repeat_n(' ', levels));
        out.push_str(content.trim_end());
        out.push('\n');
    }
    out
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Statements kept in a module-level block's skeleton besides its declarations.
const BLOCK_STATEMENTS_KEPT: usize = 4;

/// A module-level block's skeleton keeps its declarations (imports, module declarations) and
/// its first few other lines; the rest is replaced by a line saying how many were elided.
fn collapse_block(skeleton: String) -> String {
    const DECLARATIONS: [&str; 12] = [
        "use ",
        "pub use ",
        "pub(crate) use ",
        "mod ",
        "pub mod ",
        "pub(crate) mod ",
        "import ",
        "from ",
        "#include",
        "package ",
        "extern crate ",
        "export ",
    ];
    let mut kept = String::new();
    let mut statements = 0;
    let mut elided = 0;
    for line in skeleton.lines() {
        let trimmed = line.trim_start();
        if DECLARATIONS.iter().any(|d| trimmed.starts_with(d)) {
            kept.push_str(line);
            kept.push('\n');
        } else if statements < BLOCK_STATEMENTS_KEPT {
            statements += 1;
            kept.push_str(line);
            kept.push('\n');
        } else {
            elided += 1;
        }
    }
    if elided > 0 {
        kept.push_str(&format!("… {elided} more lines\n"));
    }
    kept
}

/// Skeleton of a non-code fragment: its first line (the heading, key or first log line), log
/// lines that report errors or warnings, and a marker naming the chunk.
fn text_skeleton(body: &str, chunk_id: &str, language: Language, kind: FragmentKind) -> String {
    let mut lines = body.lines().filter(|l| !l.trim().is_empty());
    let Some(first) = lines.next() else {
        return String::new();
    };
    let mut out = String::new();
    if kind == FragmentKind::Paragraph {
        // The first sentence of a paragraph.
        let sentence_end = first
            .find(". ")
            .map_or(first.len(), |i| i + 1)
            .min(first.len());
        out.push_str(&first[..sentence_end]);
        out.push_str(&format!(" … [{chunk_id}]\n"));
        return out;
    }
    out.push_str(first.trim_end());
    out.push('\n');
    if language == Language::Markdown
        && let Some(line) = lines.next()
    {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    if kind == FragmentKind::LogGroup {
        let notable = lines.filter(|l| {
            let lower = l.to_ascii_lowercase();
            lower.contains("error") || lower.contains("warn") || lower.contains("fail")
        });
        for line in notable.take(5) {
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
    out.push_str(&format!("… [{chunk_id}]\n"));
    out
}

/// Whether a line belongs with the definition below it (doc comments, attributes, decorators,
/// and a C++ `template <…>` line alone, whose parameters the declaration below uses).
fn is_leading_line(line: &str, comment: bool) -> bool {
    let trimmed = line.trim_start();
    comment
        || trimmed.starts_with("#[")
        || trimmed.starts_with('@')
        || trimmed.strip_prefix("template").is_some_and(|rest| {
            rest.trim_start().starts_with('<') && rest.trim_end().ends_with('>')
        })
}

// ---------------------------------------------------------------------------------------------
// Persistence

#[derive(Serialize, Deserialize)]
struct PersistedIndex {
    version: u32,
    files: Vec<PersistedFile>,
}

#[derive(Serialize, Deserialize, Clone)]
struct PersistedFile {
    #[serde(rename = "p")]
    path: String,
    #[serde(rename = "h")]
    hash: String,
    #[serde(rename = "l")]
    language: Language,
    #[serde(rename = "f")]
    fragments: Vec<PersistedFragment>,
}

#[derive(Serialize, Deserialize, Clone)]
struct PersistedFragment {
    #[serde(rename = "k")]
    kind: FragmentKind,
    /// First and last line (1-based), text, skeleton, header and reference tokens.
    #[serde(rename = "n")]
    numbers: [usize; 6],
    #[serde(rename = "s", default, skip_serializing_if = "Vec::is_empty")]
    symbols: Vec<String>,
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    context: Option<String>,
    #[serde(rename = "x", default, skip_serializing_if = "Option::is_none")]
    skeleton: Option<String>,
    /// [`Seams`]: header, join, skeleton.
    #[serde(rename = "m", default)]
    seams: [Option<i32>; 3],
}

impl PersistedFile {
    fn restore(&self, path: &str, text: String) -> ParsedFile {
        let lines = LineMap::new(&text);
        let fragments = self
            .fragments
            .iter()
            .map(|f| {
                let [
                    first,
                    last,
                    text_tokens,
                    skeleton_tokens,
                    header_tokens,
                    reference_tokens,
                ] = f.numbers;
                let start = lines.starts[(first - 1).min(lines.len())];
                let end = lines.starts[last.min(lines.len())];
                Fragment {
                    chunk_id: format!("{path}#L{first}-{last}"),
                    file: 0,
                    kind: f.kind,
                    symbols: f.symbols.clone(),
                    context: f.context.clone(),
                    bytes: start..end,
                    lines: (first, last),
                    text_tokens,
                    skeleton: f.skeleton.clone(),
                    skeleton_tokens,
                    header_tokens,
                    reference_tokens,
                    seams: Seams::from_array(f.seams),
                }
            })
            .collect();
        ParsedFile {
            path: path.to_string(),
            language: self.language,
            content_hash: self.hash.clone(),
            text,
            fragments,
        }
    }
}

fn persist_bytes(index: &Index) -> Vec<u8> {
    let files = index
        .files
        .iter()
        .map(|file| PersistedFile {
            path: file.path.clone(),
            hash: file.content_hash.clone(),
            language: file.language,
            fragments: index.fragments[file.fragments.clone()]
                .iter()
                .map(|f| PersistedFragment {
                    kind: f.kind,
                    numbers: [
                        f.lines.0,
                        f.lines.1,
                        f.text_tokens,
                        f.skeleton_tokens,
                        f.header_tokens,
                        f.reference_tokens,
                    ],
                    symbols: f.symbols.clone(),
                    context: f.context.clone(),
                    skeleton: f.skeleton.clone(),
                    seams: f.seams.to_array(),
                })
                .collect(),
        })
        .collect();
    // Serialising plain structs of strings and numbers cannot fail.
    let body = serde_json::to_vec(&PersistedIndex {
        version: PERSIST_VERSION,
        files,
    })
    .unwrap_or_default();
    let mut bytes = format!("{CHECKSUM_TAG}{:016x}\n", checksum(&body)).into_bytes();
    bytes.extend_from_slice(&body);
    bytes
}

/// The first line of a persisted index: this tag and the checksum of the rest.
const CHECKSUM_TAG: &str = "svc-index xxh3:";

/// The persisted index's checksum: a fast one (the file is read on every warm select), against
/// damage, not tampering. Its fields were trusted, so one changed digit made every later select
/// panic or count a budget wrong.
fn checksum(body: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(body)
}

/// The body of a persisted index whose checksum holds.
fn checked_body(bytes: &[u8]) -> Option<&[u8]> {
    let rest = bytes.strip_prefix(CHECKSUM_TAG.as_bytes())?;
    let newline = rest.iter().position(|&b| b == b'\n')?;
    let recorded = u64::from_str_radix(std::str::from_utf8(&rest[..newline]).ok()?, 16).ok()?;
    let body = &rest[newline + 1..];
    (checksum(body) == recorded).then_some(body)
}

/// The persisted index, by path. A missing, unreadable, damaged (its checksum fails) or
/// outdated file is an empty cache: the build then re-parses everything and rewrites it.
fn load_cache(path: &Path) -> HashMap<String, PersistedFile> {
    let Ok(bytes) = std::fs::read(path) else {
        return HashMap::new();
    };
    let Some(body) = checked_body(&bytes) else {
        return HashMap::new();
    };
    match serde_json::from_slice::<PersistedIndex>(body) {
        Ok(index) if index.version == PERSIST_VERSION => index
            .files
            .into_iter()
            .map(|f| (f.path.clone(), f))
            .collect(),
        _ => HashMap::new(),
    }
}

#[cfg(test)]
mod tests;
