//! Budgeted compression of one piece of content (code, JSON, logs, prose) or of a conversation,
//! with every elision recoverable.
//!
//! Each kind has its own reducer that turns the content into a smaller rendering plus a list of
//! parts: the kept parts and the elided parts with their exact original bytes. [`compress`] then
//! commits those parts with the [`CommitStore`] (kept parts `full` or `skeleton`, elided parts
//! omitted), so every `recover …` handle in the text resolves to byte-identical text via
//! `CommitStore::recover(ctx_id, chunk_id)`. Token counts are exact (`crate::tokens`); a result is
//! never over budget, and content that cannot fit even at its minimum representation is an error,
//! never silently truncated.

pub mod batch;
mod code;
pub mod corpus;
pub mod figures;
mod json;
pub mod logs;
mod messages;
mod prose;
pub mod sample;
mod syntax;
mod units;

use serde::{Deserialize, Serialize};

use super::commit::{ChunkInput, CommitError, CommitStore, Resolution};
use crate::tokens::Tokenizer;

pub use code::{CodeMethod, CodeReduction};

pub use messages::{
    CompressedMessages, Conversation, Message, compress_conversation, compress_messages,
    compress_messages_counted, compress_messages_keeping, parse_conversation,
};

/// The kind of content, which decides how it is reduced.
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
pub enum ContentKind {
    /// Source code: signatures, imports and doc lines kept; bodies elided (by syntax tree where
    /// the name gives a grammar, else brace/indentation based).
    Code,
    /// A JSON document: structure and keys kept; long arrays sampled, long strings truncated.
    Json,
    /// Log output: errors, warnings, first/last lines kept; repeated lines collapsed.
    Logs,
    /// Natural-language text: sentences with entities, numbers and query terms kept.
    Prose,
}

impl ContentKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ContentKind::Code => "code",
            ContentKind::Json => "json",
            ContentKind::Logs => "logs",
            ContentKind::Prose => "prose",
        }
    }

    /// The kind of content from a named source: the file name first (the context engine's
    /// language detection, then a list of other source, config and document extensions), the
    /// content only for stdin (`-`) or a name that says nothing. Content sniffing alone read
    /// most real Python files as prose.
    pub fn for_source(source: &str, content: &str) -> ContentKind {
        if source != "-"
            && let Some(kind) = Self::from_name(source)
        {
            // `.txt` says only "plain text": logs and lists of settings are saved as `.txt`
            // too, and their content tells them apart from prose.
            if kind == ContentKind::Prose && is_plain_text_name(source) {
                return refine_plain_text(content);
            }
            // A `.json` file that does not parse is still reported as broken JSON, precisely.
            return kind;
        }
        Self::detect(content)
    }

    /// The kind a file name implies, when it implies one.
    pub fn from_name(name: &str) -> Option<ContentKind> {
        use crate::context::index::Language;
        // A rotated file (`server.log.1`, `access.log.3`) is what it was before rotation.
        if let Some((base, number)) = name.rsplit_once('.')
            && !number.is_empty()
            && number.bytes().all(|b| b.is_ascii_digit())
            && base
                .rsplit(['/', '\\'])
                .next()
                .is_some_and(|f| f.contains('.'))
        {
            return Self::from_name(base);
        }
        let language = Language::from_name(name);
        if language.is_code() {
            return Some(ContentKind::Code);
        }
        match language {
            Language::Json => return Some(ContentKind::Json),
            Language::Log => return Some(ContentKind::Logs),
            Language::Markdown => return Some(ContentKind::Prose),
            // Configuration is line-structured: the code reducer keeps its section headers and
            // keys where prose would cut it into "sentences".
            Language::Yaml | Language::Toml => return Some(ContentKind::Code),
            _ => {}
        }
        let file = name.rsplit(['/', '\\']).next().unwrap_or(name);
        // Files known by their whole name.
        let stem = file.split('.').next().unwrap_or(file).to_ascii_lowercase();
        match stem.as_str() {
            "makefile" | "dockerfile" | "rakefile" | "gemfile" | "justfile" | "procfile" => {
                return Some(ContentKind::Code);
            }
            "readme" | "license" | "licence" | "changelog" | "changes" | "authors"
            | "contributing" | "notice" | "history" | "copying"
                if !file.contains('.') || file.ends_with(".txt") =>
            {
                return Some(ContentKind::Prose);
            }
            _ => {}
        }
        // A hidden file with no other dot (`.gitignore`, `.editorconfig`, `.env`) is
        // configuration: line-structured, like the config extensions below.
        if let Some(name) = file.strip_prefix('.')
            && !name.is_empty()
            && !name.contains('.')
        {
            return Some(ContentKind::Code);
        }
        let extension = file.rsplit_once('.')?.1.to_ascii_lowercase();
        let kind = match extension.as_str() {
            "rst" | "txt" | "text" | "adoc" | "asciidoc" | "org" | "tex" | "rtf" => {
                ContentKind::Prose
            }
            "jsonl" | "ndjson" | "out" | "err" => ContentKind::Logs,
            "ini" | "cfg" | "cnf" | "conf" | "properties" | "env" | "lock" | "in" | "sh"
            | "bash" | "zsh" | "fish" | "ps1" | "bat" | "rb" | "php" | "pl" | "pm" | "lua"
            | "r" | "sql" | "kt" | "kts" | "swift" | "scala" | "cs" | "fs" | "m" | "mm"
            | "dart" | "ex" | "exs" | "erl" | "hs" | "ml" | "mli" | "clj" | "zig" | "nim" | "v"
            | "sv" | "vhd" | "css" | "scss" | "sass" | "less" | "html" | "htm" | "xml" | "svg"
            | "vue" | "svelte" | "gradle" | "cmake" | "mk" | "dockerfile" | "tf" | "proto"
            | "graphql" | "pyx" | "pxd" => ContentKind::Code,
            "ipynb" | "geojson" => ContentKind::Json,
            _ => return None,
        };
        Some(kind)
    }

    /// Guesses the kind from the content alone: JSON that parses, JSON Lines or log-shaped
    /// lines (logs), a script's `#!` line, code-shaped lines, a list of settings (read as code,
    /// line by line), else prose.
    pub fn detect(content: &str) -> ContentKind {
        let content = crate::text::without_bom(content);
        let trimmed = content.trim_start();
        if (trimmed.starts_with('{') || trimmed.starts_with('['))
            && serde_json::from_str::<serde::de::IgnoredAny>(content).is_ok()
        {
            return ContentKind::Json;
        }
        if logs::looks_like_logs(content) || looks_like_json_lines(content) {
            return ContentKind::Logs;
        }
        if trimmed.starts_with("#!") || trimmed.starts_with("#compdef") {
            return ContentKind::Code;
        }
        if code::looks_like_code(content) || looks_like_settings(content) {
            return ContentKind::Code;
        }
        ContentKind::Prose
    }
}

/// A `.txt` name: plain text of any kind.
fn is_plain_text_name(name: &str) -> bool {
    let file = name.rsplit(['/', '\\']).next().unwrap_or(name);
    file.rsplit_once('.')
        .is_some_and(|(_, extension)| extension.eq_ignore_ascii_case("txt"))
}

/// The kind of a `.txt` file: logs or settings when its lines say so, else prose (never code
/// by its shape: prose quoting code would be cut as code).
fn refine_plain_text(content: &str) -> ContentKind {
    if logs::looks_like_logs(content) || looks_like_json_lines(content) {
        ContentKind::Logs
    } else if looks_like_settings(content) {
        ContentKind::Code
    } else {
        ContentKind::Prose
    }
}

/// Non-blank lines worth looking at to judge a text's shape.
fn sample_lines(content: &str) -> impl Iterator<Item = &str> {
    crate::text::without_bom(content)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(200)
}

/// JSON Lines: at least two lines, each a JSON object (structured logs, event streams).
fn looks_like_json_lines(content: &str) -> bool {
    let mut lines = 0;
    for line in sample_lines(content) {
        if !line.starts_with('{') || serde_json::from_str::<serde::de::IgnoredAny>(line).is_err() {
            return false;
        }
        lines += 1;
    }
    lines >= 2
}

/// A list of settings or entries (`name==1.2`, `key = value`, `/path @owner`, `[section]`):
/// most lines that are not comments are one to three words, none ends like a sentence, and at
/// least half hold an assignment, comparison, path or section character.
fn looks_like_settings(content: &str) -> bool {
    let (mut total, mut short, mut marked) = (0usize, 0usize, 0usize);
    for line in sample_lines(content).filter(|l| !l.starts_with('#') && !l.starts_with(';')) {
        total += 1;
        if line.ends_with(['.', '!', '?']) {
            return false;
        }
        if line.split_whitespace().count() <= 3 {
            short += 1;
        }
        if line.contains(['=', '<', '>', '@', '/', ':', '[', '~']) {
            marked += 1;
        }
    }
    total > 0 && short * 10 >= total * 8 && marked * 2 >= total
}

#[cfg(test)]
mod kind_tests {
    use super::ContentKind;

    /// Issue 13: content sniffing alone read 23 of 25 real Python files as prose.
    #[test]
    fn the_file_name_decides_before_the_content() {
        let python =
            "import os\n\n\ndef main():\n    \"\"\"Run it.\"\"\"\n    return os.getcwd()\n";
        assert_eq!(
            ContentKind::for_source("src/app.py", python),
            ContentKind::Code
        );
        for (name, kind) in [
            ("README.md", ContentKind::Prose),
            ("docs/index.rst", ContentKind::Prose),
            ("LICENSE", ContentKind::Prose),
            ("pyproject.toml", ContentKind::Code),
            (".github/workflows/ci.yml", ContentKind::Code),
            (".gitignore", ContentKind::Code),
            ("Makefile", ContentKind::Code),
            ("MANIFEST.in", ContentKind::Code),
            ("data/orders.json", ContentKind::Json),
            ("server.log", ContentKind::Logs),
        ] {
            assert_eq!(ContentKind::from_name(name), Some(kind), "{name}");
        }
        // Stdin and names that say nothing fall back to the content.
        assert_eq!(ContentKind::from_name("notes"), None);
        assert_eq!(
            ContentKind::for_source("-", "{\"a\": 1}"),
            ContentKind::Json
        );
    }
}

#[cfg(test)]
mod content_tests {
    use super::ContentKind;

    /// Found on the mixed corpus (three repositories plus generated logs): rotated logs,
    /// logs and requirement lists saved as `.txt`, JSON Lines, scripts and owner lists without
    /// an extension.
    #[test]
    fn weak_names_are_refined_by_content() {
        let log = "2024-05-14 10:00:01,123 - app - INFO - started\n2024-05-14 10:00:02,001 - app - ERROR - failed\n";
        assert_eq!(
            ContentKind::for_source("service.log.1", "{"),
            ContentKind::Logs
        );
        assert_eq!(
            ContentKind::for_source("output.txt", log),
            ContentKind::Logs
        );
        let requirements = "# pinned\npytest>=2.8.0,<10\npytest-cov\nhttpbin~=0.10.0\n";
        assert_eq!(
            ContentKind::for_source("requirements-dev.txt", requirements),
            ContentKind::Code
        );
        assert_eq!(
            ContentKind::for_source("notes.txt", "So long, and thanks for all the fish.\n"),
            ContentKind::Prose
        );
        let json_lines = "{\"ts\":1,\"msg\":\"a\"}\n{\"ts\":2,\"msg\":\"b\"}\n";
        assert_eq!(
            ContentKind::for_source("events", json_lines),
            ContentKind::Logs
        );
        assert_eq!(
            ContentKind::for_source("_fd", "#compdef fd\n\n_fd() {\n  local ret=1\n}\n"),
            ContentKind::Code
        );
        assert_eq!(
            ContentKind::for_source("CODEOWNERS", "# owners\n* @alice\n/docs/ @bob\n"),
            ContentKind::Code
        );
        assert_eq!(
            ContentKind::from_name("certs/ca.cnf"),
            Some(ContentKind::Code)
        );
    }
}

impl std::fmt::Display for ContentKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How to compress: all optional.
#[derive(Debug, Clone, Default)]
pub struct CompressOptions {
    /// The kind; detected from the content when `None`.
    pub kind: Option<ContentKind>,
    /// Terms that make a sentence or line worth keeping (prose ranks by it).
    pub query: Option<String>,
    /// Where the content comes from (a path or `-`), recorded in the commit and in errors.
    pub source: String,
}

/// One elided region: its recovery handle and what it held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Elision {
    /// The chunk id to pass to `svc context recover CTX_ID CHUNK` / `CommitStore::recover`.
    pub chunk_id: String,
    /// Where it was, for people: `lines 12-480`, `$.items[3..483]`, `sentences 4-6`.
    pub locator: String,
    /// Exact tokens of the elided bytes (what recovering it costs).
    pub tokens: usize,
    /// Bytes elided.
    pub bytes: usize,
}

/// The result of [`compress`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compressed {
    /// The compressed text; every elision is marked with its `recover <chunk_id>` handle.
    pub text: String,
    /// Exact tokens of `text` (≤ the budget).
    pub tokens: usize,
    /// Exact tokens of the original content.
    pub original_tokens: usize,
    pub kind: ContentKind,
    /// The commit holding the exact bytes of every chunk.
    pub ctx_id: String,
    pub elisions: Vec<Elision>,
    /// How code was reduced (code that had to be reduced only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<CodeReduction>,
}

#[derive(Debug, thiserror::Error)]
pub enum CompressError {
    #[error("the token budget must be at least 1 (got 0)")]
    ZeroBudget,
    #[error(
        "cannot fit {source_name} ({kind}, {original_tokens} tokens) into {budget} tokens: its smallest form takes {minimum_tokens} tokens; raise the budget to at least {minimum_tokens}"
    )]
    OverBudget {
        source_name: String,
        kind: ContentKind,
        budget: usize,
        original_tokens: usize,
        minimum_tokens: usize,
    },
    #[error(
        "{source_name} is not UTF-8 text (invalid byte at offset {offset}); give a text file (UTF-8)"
    )]
    NotUtf8 { source_name: String, offset: usize },
    #[error(
        "{source_name} is not valid JSON (line {line}, column {column}: {message}); fix it or pass another kind"
    )]
    InvalidJson {
        source_name: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error(
        "the system prompt and the latest user turn alone take {protected_tokens} tokens, over the budget of {budget}; raise the budget or shorten them"
    )]
    ProtectedOverBudget {
        protected_tokens: usize,
        budget: usize,
    },
    #[error(
        "the conversation cannot fit {budget} tokens: with every older turn and tool output reduced to its minimum it still takes {minimum_tokens} tokens; raise the budget to at least {minimum_tokens}"
    )]
    MessagesOverBudget {
        budget: usize,
        minimum_tokens: usize,
    },
    #[error("{source_name} is not a conversation: {problem}")]
    NotAConversation {
        source_name: String,
        problem: String,
    },
    #[error("message {index}: {problem}")]
    InvalidMessage { index: usize, problem: String },
    #[error("committing the compressed content: {0}")]
    Commit(#[from] CommitError),
}

/// Decodes `bytes` as UTF-8, naming the source and the first invalid offset on failure.
pub fn decode<'a>(bytes: &'a [u8], source_name: &str) -> Result<&'a str, CompressError> {
    std::str::from_utf8(bytes).map_err(|error| CompressError::NotUtf8 {
        source_name: source_name.to_string(),
        offset: error.valid_up_to(),
    })
}

/// [`compress`] for raw bytes: invalid UTF-8 is an error naming the offset.
pub fn compress_bytes(
    bytes: &[u8],
    budget: usize,
    options: &CompressOptions,
    store: &CommitStore,
    tokenizer: &Tokenizer,
) -> Result<Compressed, CompressError> {
    let content = decode(bytes, &options.source)?;
    compress(content, budget, options, store, tokenizer)
}

/// Compresses `content` to at most `budget` tokens and commits it so every elision is
/// recoverable byte-for-byte.
pub fn compress(
    content: &str,
    budget: usize,
    options: &CompressOptions,
    store: &CommitStore,
    tokenizer: &Tokenizer,
) -> Result<Compressed, CompressError> {
    let reduced = reduce(content, budget, options, tokenizer)?;
    let parameters = serde_json::json!({
        "operation": "compress",
        "kind": reduced.kind,
        "budget": budget,
        "query": options.query,
        "source": options.source,
    });
    let chunks = reduced.chunk_inputs(&options.source, tokenizer);
    let receipt = store.commit(&chunks, parameters, &reduced.text, tokenizer)?;
    let elisions = reduced.elisions(&receipt);
    Ok(Compressed {
        text: reduced.text,
        tokens: reduced.tokens,
        original_tokens: reduced.original_tokens,
        kind: reduced.kind,
        ctx_id: receipt.ctx_id,
        elisions,
        code: reduced.code,
    })
}

/// A part of the reduced content, with the exact original bytes it stands for.
#[derive(Debug, Clone)]
pub(crate) struct Part {
    pub chunk_id: String,
    pub locator: String,
    pub original: String,
    /// `None` when elided.
    pub resolution: Option<Resolution>,
}

/// What a reducer returns: the text, its exact count, and the parts to commit.
#[derive(Debug, Clone)]
pub(crate) struct Reduced {
    pub text: String,
    pub tokens: usize,
    pub original_tokens: usize,
    pub kind: ContentKind,
    pub parts: Vec<Part>,
    /// How code was reduced (`None` for other kinds and verbatim content).
    pub code: Option<CodeReduction>,
}

impl Reduced {
    /// Unchanged content: one verbatim part.
    fn verbatim(content: &str, tokens: usize, kind: ContentKind, prefix: &str) -> Reduced {
        Reduced {
            text: content.to_string(),
            tokens,
            original_tokens: tokens,
            kind,
            parts: vec![Part {
                chunk_id: format!("{prefix}all"),
                locator: "whole content".into(),
                original: content.to_string(),
                resolution: Some(Resolution::Full),
            }],
            code: None,
        }
    }

    pub(crate) fn chunk_inputs(&self, source: &str, tokenizer: &Tokenizer) -> Vec<ChunkInput> {
        self.parts
            .iter()
            .map(|part| {
                // A part sent in full is counted once, for both the sent and the receipt count.
                let full = (part.resolution == Some(Resolution::Full))
                    .then(|| tokenizer.count(&part.original));
                ChunkInput {
                    chunk_id: part.chunk_id.clone(),
                    source: source.to_string(),
                    full_text: part.original.clone(),
                    resolution: part.resolution,
                    sent_tokens: match part.resolution {
                        None => 0,
                        // A skeleton part stands for the whole rendering.
                        Some(Resolution::Skeleton) | Some(Resolution::Reference) => self.tokens,
                        Some(Resolution::Full) => full.unwrap_or_default(),
                    },
                    full_tokens: full.map(|tokens| (tokenizer.encoding(), tokens)),
                }
            })
            .collect()
    }

    pub(crate) fn elisions(&self, receipt: &super::commit::ContextReceipt) -> Vec<Elision> {
        self.parts
            .iter()
            .filter(|part| part.resolution.is_none())
            .map(|part| {
                let chunk_id = part.chunk_id.clone();
                let tokens = receipt
                    .chunk(&chunk_id)
                    .map_or(0, |chunk| chunk.receipt_token_count);
                Elision {
                    chunk_id,
                    locator: part.locator.clone(),
                    tokens,
                    bytes: part.original.len(),
                }
            })
            .collect()
    }
}

/// Reduces without committing (used by [`compress`]).
pub(crate) fn reduce(
    content: &str,
    budget: usize,
    options: &CompressOptions,
    tokenizer: &Tokenizer,
) -> Result<Reduced, CompressError> {
    reduce_prefixed(content, budget, options, tokenizer, "", None)
}

/// [`reduce`] with every chunk id (in the markers and the parts) starting with `prefix`, so
/// several reductions can share one commit (message compression).
pub(crate) fn reduce_prefixed(
    content: &str,
    budget: usize,
    options: &CompressOptions,
    tokenizer: &Tokenizer,
    prefix: &str,
    known_tokens: Option<usize>,
) -> Result<Reduced, CompressError> {
    if budget == 0 {
        return Err(CompressError::ZeroBudget);
    }
    let kind = options
        .kind
        .unwrap_or_else(|| ContentKind::for_source(&options.source, content));
    if kind == ContentKind::Json {
        // Validate first so a broken document gets a precise error, whatever the budget.
        json::validate(content, &options.source)?;
    }
    // A caller that has counted the content already saves a pass over it.
    let original_tokens = known_tokens.unwrap_or_else(|| tokenizer.count(content));
    if original_tokens <= budget {
        return Ok(Reduced::verbatim(content, original_tokens, kind, prefix));
    }
    let plain = |(text, tokens, parts)| (text, tokens, parts, None);
    let outcome = match kind {
        ContentKind::Json => json::reduce(content, budget, tokenizer, prefix).map(plain),
        ContentKind::Logs => logs::reduce(content, budget, tokenizer, prefix).map(plain),
        ContentKind::Code => code::reduce(content, budget, tokenizer, prefix, &options.source)
            .map(|(text, tokens, parts, how)| (text, tokens, parts, Some(how))),
        ContentKind::Prose => {
            prose::reduce(content, budget, options.query.as_deref(), tokenizer, prefix).map(plain)
        }
    };
    match outcome {
        Ok((text, tokens, parts, code)) => Ok(Reduced {
            text,
            tokens,
            original_tokens,
            kind,
            parts,
            code,
        }),
        // The content as it is fits any budget of its own size, so that is the most a user
        // must raise the budget to, however large the reduced form's markers make it.
        Err(units::Minimum(minimum_tokens)) => Err(CompressError::OverBudget {
            source_name: options.source.clone(),
            kind,
            budget,
            original_tokens,
            minimum_tokens: minimum_tokens.min(original_tokens),
        }),
    }
}

/// Exact token count of `text` when it fits `budget`, else `None`. Long candidates are first
/// checked on a prefix so that probing a huge rendering does not tokenise all of it.
pub(crate) fn fits(tokenizer: &Tokenizer, text: &str, budget: usize) -> Option<usize> {
    let cap = budget.saturating_mul(12).max(4096);
    if text.len() > cap {
        let mut end = cap;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        if tokenizer.count(&text[..end]) > budget {
            return None;
        }
    }
    let tokens = tokenizer.count(text);
    (tokens <= budget).then_some(tokens)
}

/// `1234567` → `1,234,567`, for markers people read.
pub(crate) fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests;
