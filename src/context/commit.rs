//! Context commits: every selection is committed as `ctx_<id>` so that what was omitted or
//! reduced stays exactly recoverable.
//!
//! A commit has two parts (SPEC §2.3):
//! - the **context receipt**: per chunk a `fingerprint` (SHA-256 over the chunk id and its exact
//!   bytes) and `receipt_token_count` (tokens of the exact bytes), plus how the chunk was sent;
//! - the **recovery bundle**: per chunk the `content_hash` (SHA-256 of the exact bytes), whose
//!   bytes live in the content-addressed [`BlobStore`].
//!
//! Recovery checks both: the blob against its content hash, and the bytes against the receipt
//! fingerprint. The id is derived from the parameters and every chunk's identity, fingerprint and
//! resolution, so committing the same selection twice yields the same id.
//!
//! Layout under the state directory: `commits/<ctx_id>/{receipt.json,bundle.json}` and
//! `blobs/`.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::store::{BlobStore, StoreError};
use crate::digest;
use crate::state::{self, GroupCommit, Packs, group::Synced};
use crate::tokens::{Encoding, Tokenizer};

/// How a chunk was sent to the model.
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
pub enum Resolution {
    /// Verbatim bytes.
    Full,
    /// Signatures, types, doc comments and imports; bodies elided.
    Skeleton,
    /// Path and symbol names on one line.
    Reference,
}

impl Resolution {
    pub fn as_str(self) -> &'static str {
        match self {
            Resolution::Full => "full",
            Resolution::Skeleton => "skeleton",
            Resolution::Reference => "reference",
        }
    }
}

impl std::fmt::Display for Resolution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One chunk handed to [`CommitStore::commit`].
#[derive(Debug, Clone)]
pub struct ChunkInput {
    /// Stable id of the chunk within the commit, e.g. `src/lib.rs#L10-42` (the recovery handle).
    pub chunk_id: String,
    /// Where the chunk comes from (a path or a document name).
    pub source: String,
    /// The exact original bytes.
    pub full_text: String,
    /// How it was sent; `None` when it was omitted.
    pub resolution: Option<Resolution>,
    /// Tokens of what was sent for this chunk (0 when omitted).
    pub sent_tokens: usize,
    /// The exact token count of `full_text` under an encoding, when the caller already has it
    /// (an index counts every fragment); used for `receipt_token_count` when the encoding is
    /// the commit's, so the text is not tokenised twice.
    pub full_tokens: Option<(Encoding, usize)>,
}

/// Per-chunk entry of the context receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiptChunk {
    pub chunk_id: String,
    pub source: String,
    /// `full`, `skeleton`, `reference`, or null when omitted.
    pub resolution: Option<Resolution>,
    /// SHA-256 over `svc.chunk.v1\n{chunk_id}\n` followed by the exact bytes.
    pub fingerprint: String,
    /// Tokens of the exact bytes: what recovering this chunk costs.
    pub receipt_token_count: usize,
    /// Tokens of what was actually sent for this chunk.
    pub sent_token_count: usize,
}

/// The context receipt of a commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextReceipt {
    pub ctx_id: String,
    /// Tokenizer encoding used for every count.
    pub encoding: String,
    /// SHA-256 of the rendered context that was sent.
    pub context_sha256: String,
    /// Parameters of the selection (query, budget, ...), as given by the caller.
    pub parameters: serde_json::Value,
    pub chunks: Vec<ReceiptChunk>,
}

impl ContextReceipt {
    pub fn chunk(&self, chunk_id: &str) -> Option<&ReceiptChunk> {
        self.chunks.iter().find(|c| c.chunk_id == chunk_id)
    }

    /// Chunks not sent verbatim (omitted or reduced): the ones recovery can add.
    pub fn recoverable(&self) -> impl Iterator<Item = &ReceiptChunk> {
        self.chunks
            .iter()
            .filter(|c| c.resolution != Some(Resolution::Full))
    }
}

/// Per-chunk entry of the recovery bundle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BundleEntry {
    pub chunk_id: String,
    /// SHA-256 of the exact bytes; the key in the blob store.
    pub content_hash: String,
}

/// The recovery bundle of a commit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecoveryBundle {
    pub ctx_id: String,
    pub entries: Vec<BundleEntry>,
}

#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    #[error(
        "unknown context commit {ctx_id}: no {path} and no pack entry for it; commits are made under SVC_HOME ({home}): was it made with another SVC_HOME? (packed commits are listed in `{packs}/*.idx`, loose ones under {dir})",
        home = .path.ancestors().nth(3).map(|home| home.display().to_string()).unwrap_or_default(),
        dir = .path.parent().and_then(Path::parent).map(|p| p.display().to_string()).unwrap_or_default(),
        packs = .path.ancestors().nth(3).map(|home| home.join(state::pack::PACK_DIR).display().to_string()).unwrap_or_default()
    )]
    UnknownCommit { ctx_id: String, path: PathBuf },
    #[error("{ctx_id} is not a context commit id (they look like ctx_0123abcd…)")]
    BadId { ctx_id: String },
    #[error("commit {ctx_id} has no chunk {chunk_id:?}; {near}")]
    UnknownChunk {
        ctx_id: String,
        chunk_id: String,
        /// The commit's chunks of the same source, or how many chunks it has.
        near: String,
    },
    #[error(
        "chunk {chunk_id} of {ctx_id} does not match its receipt fingerprint: the bytes its recovery bundle ({bundle}) names (blob {hash}) are not the committed bytes, so the bundle or that blob changed after the commit"
    )]
    FingerprintMismatch {
        ctx_id: String,
        chunk_id: String,
        bundle: PathBuf,
        hash: String,
    },
    #[error(
        "chunk {chunk_id} of {ctx_id}: its recovery bundle ({bundle}) names blob {hash}, which is not in the store: the bundle changed after the commit, or the state directory was pruned"
    )]
    BlobNotFound {
        ctx_id: String,
        chunk_id: String,
        bundle: PathBuf,
        hash: String,
    },
    #[error("duplicate chunk id {chunk_id} in one commit")]
    DuplicateChunk { chunk_id: String },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path} is not a valid commit file: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{path} does not belong to {ctx_id}: {reason}; the commit's files were changed after it was made (recover from a copy of the state, or commit the selection again)"
    )]
    Tampered {
        ctx_id: String,
        path: PathBuf,
        reason: String,
    },
    #[error(
        "the recovery bundle {path} of {ctx_id} is missing although its receipt is there: it was deleted after the commit (recover from a copy of the state, or commit the selection again)"
    )]
    MissingBundle { ctx_id: String, path: PathBuf },
    #[error("recovered bytes of {chunk_id} are not UTF-8")]
    NotText { chunk_id: String },
    #[error("chunk {chunk_id} of {ctx_id} is not a line range of a file (path#Lfirst-last)")]
    NotAFragment { ctx_id: String, chunk_id: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    State(#[from] state::StateError),
}

/// Fingerprint of a chunk, as recorded in receipts.
pub fn fingerprint(chunk_id: &str, bytes: &[u8]) -> String {
    let mut data = Vec::with_capacity(bytes.len() + chunk_id.len() + 16);
    data.extend_from_slice(b"svc.chunk.v1\n");
    data.extend_from_slice(chunk_id.as_bytes());
    data.push(b'\n');
    data.extend_from_slice(bytes);
    digest::sha256_hex(&data)
}

/// Commits and recovers selections under a state directory.
#[derive(Debug, Clone)]
pub struct CommitStore {
    home: PathBuf,
    commits: PathBuf,
    blobs: BlobStore,
    /// Set for a group-committing store (see [`CommitStore::grouped`]).
    group: Option<Arc<GroupCommit>>,
    /// Where group-committed receipts, bundles and blobs are read from.
    packs: Arc<Packs>,
}

impl CommitStore {
    /// A store under `state_home` (see [`crate::state::home`]) whose every commit is durable
    /// when [`commit`](Self::commit) returns.
    pub fn new(state_home: &Path) -> Self {
        let packs = Arc::new(Packs::new(state_home));
        Self {
            home: state_home.to_path_buf(),
            commits: state_home.join("commits"),
            blobs: BlobStore::new(state_home.join("blobs")).with_packs(packs.clone()),
            group: None,
            packs,
        }
    }

    /// A group-committing store: [`commit`](Self::commit) stages its files, and they become
    /// durable and readable together at the next [`sync`](Self::sync). Clones share the group.
    /// The caller must sync before it names a returned `ctx_…` id anywhere durable (a trial
    /// record, a printed id); a crash before the sync loses only unnamed commits.
    pub fn grouped(state_home: &Path) -> Self {
        let group = Arc::new(GroupCommit::new(state_home));
        let packs = Arc::new(Packs::new(state_home));
        Self {
            home: state_home.to_path_buf(),
            commits: state_home.join("commits"),
            blobs: BlobStore::grouped(state_home.join("blobs"), group.clone())
                .with_packs(packs.clone()),
            group: Some(group),
            packs,
        }
    }

    /// Makes every commit staged so far durable and readable (nothing to do for a store made
    /// by [`new`](Self::new)).
    pub fn sync(&self) -> Result<Synced, CommitError> {
        match &self.group {
            Some(group) => Ok(group.sync()?),
            None => Ok(Synced::default()),
        }
    }

    /// The state directory this store lives in.
    pub fn state_home(&self) -> &Path {
        &self.home
    }

    /// Pack index lines skipped when the packs were read (see [`Packs::skipped`]).
    pub fn pack_warnings(&self) -> Vec<String> {
        self.packs.skipped()
    }

    pub fn blobs(&self) -> &BlobStore {
        &self.blobs
    }

    fn dir_of(&self, ctx_id: &str) -> Result<PathBuf, CommitError> {
        let valid = ctx_id
            .strip_prefix("ctx_")
            .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_hexdigit()));
        if !valid {
            return Err(CommitError::BadId {
                ctx_id: ctx_id.to_string(),
            });
        }
        Ok(self.commits.join(ctx_id))
    }

    /// Commits a selection: stores every chunk's exact bytes, writes the receipt and bundle,
    /// and returns the receipt. `rendered_context` is the exact text sent to the model.
    pub fn commit(
        &self,
        chunks: &[ChunkInput],
        parameters: serde_json::Value,
        rendered_context: &str,
        tokenizer: &Tokenizer,
    ) -> Result<ContextReceipt, CommitError> {
        let mut seen = std::collections::HashSet::new();
        for chunk in chunks {
            if !seen.insert(chunk.chunk_id.as_str()) {
                return Err(CommitError::DuplicateChunk {
                    chunk_id: chunk.chunk_id.clone(),
                });
            }
        }
        let bytes: Vec<&[u8]> = chunks.iter().map(|c| c.full_text.as_bytes()).collect();
        let hashes = self.blobs.put_many(&bytes)?;
        // Counting every chunk is the commit's CPU cost on large trees: reuse counts the caller
        // already has, and spread the rest over cores.
        let (counts, fingerprints): (Vec<usize>, Vec<String>) = {
            use rayon::prelude::*;
            chunks
                .par_iter()
                .map(|c| {
                    let count = match c.full_tokens {
                        Some((encoding, tokens)) if encoding == tokenizer.encoding() => tokens,
                        _ => tokenizer.count(&c.full_text),
                    };
                    (count, fingerprint(&c.chunk_id, c.full_text.as_bytes()))
                })
                .unzip()
        };
        let mut receipt_chunks = Vec::with_capacity(chunks.len());
        let mut entries = Vec::with_capacity(chunks.len());
        for (((chunk, content_hash), receipt_token_count), fingerprint) in
            chunks.iter().zip(hashes).zip(counts).zip(fingerprints)
        {
            receipt_chunks.push(ReceiptChunk {
                chunk_id: chunk.chunk_id.clone(),
                source: chunk.source.clone(),
                resolution: chunk.resolution,
                fingerprint,
                receipt_token_count,
                sent_token_count: chunk.sent_tokens,
            });
            entries.push(BundleEntry {
                chunk_id: chunk.chunk_id.clone(),
                content_hash,
            });
        }
        let context_sha256 = digest::sha256_hex(rendered_context);
        let encoding = tokenizer.encoding().to_string();
        let ctx_id = commit_id(&parameters, &encoding, &receipt_chunks, &context_sha256);
        let receipt = ContextReceipt {
            ctx_id: ctx_id.clone(),
            encoding,
            context_sha256,
            parameters,
            chunks: receipt_chunks,
        };
        let bundle = RecoveryBundle { ctx_id, entries };
        let dir = self.dir_of(&receipt.ctx_id)?;
        let group = self.group.as_deref();
        // Ids are content hashes: a commit already stored (packed by an earlier process, or
        // loose) is this one, and packing it again would only grow the packs. It is checked,
        // not trusted: a damaged copy is written again, loose (which readers prefer) and
        // durable now.
        let receipt_path = dir.join("receipt.json");
        if let Some(group) = group {
            if group.contains(&receipt_path) {
                return Ok(receipt);
            }
            let bundle_path = dir.join("bundle.json");
            let files = [
                (&bundle_path, json_bytes(&bundle, &bundle_path)?),
                (&receipt_path, json_bytes(&receipt, &receipt_path)?),
            ];
            let mut stored = Vec::with_capacity(files.len());
            for (path, bytes) in &files {
                stored.push(self.stored_equal(path, bytes)?);
            }
            if stored.iter().all(|s| *s == Some(true)) {
                return Ok(receipt);
            }
            if stored.iter().any(Option::is_some) {
                // The receipt last: its presence marks a complete commit.
                for (path, bytes) in &files {
                    state::atomic_write(path, bytes)?;
                }
                return Ok(receipt);
            }
        }
        write_json(&dir.join("bundle.json"), &bundle, group)?;
        // The receipt is written last: its presence marks a complete commit. (A group sync
        // makes a whole batch readable at once.)
        write_json(&dir.join("receipt.json"), &receipt, group)?;
        Ok(receipt)
    }

    /// `None` when no copy of `path` is stored, else whether the copy readers get (the loose
    /// file first, else the packed entry) is exactly `bytes`.
    fn stored_equal(&self, path: &Path, bytes: &[u8]) -> Result<Option<bool>, CommitError> {
        match fs::read(path) {
            Ok(stored) => Ok(Some(stored == bytes)),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                Ok(self.packs.stored_equal(&[(path, bytes)])?[0])
            }
            Err(source) => Err(CommitError::Read {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// The receipt of a commit, checked: its id recomputed from its content must be `ctx_id`,
    /// and its file must be byte for byte what svc wrote (so no edit, not even of white space,
    /// goes unnoticed).
    pub fn receipt(&self, ctx_id: &str) -> Result<ContextReceipt, CommitError> {
        let path = self.dir_of(ctx_id)?.join("receipt.json");
        let (receipt, holder): (ContextReceipt, _) = read_json(&path, ctx_id, &self.packs)?;
        let tampered = |reason: String| CommitError::Tampered {
            ctx_id: ctx_id.to_string(),
            path: holder.clone(),
            reason,
        };
        if receipt.ctx_id != ctx_id {
            return Err(tampered(format!("it names {}", receipt.ctx_id)));
        }
        let recomputed = commit_id(
            &receipt.parameters,
            &receipt.encoding,
            &receipt.chunks,
            &receipt.context_sha256,
        );
        // Commits made before the id covered counts, sources and the encoding keep their v1
        // id; a v2 receipt cannot pass the v1 check by accident (the two ids differ).
        let legacy = || {
            legacy_commit_id(
                &receipt.parameters,
                &receipt.chunks,
                &receipt.context_sha256,
            )
        };
        if recomputed != ctx_id && legacy() != ctx_id {
            return Err(tampered(format!(
                "its content hashes to {recomputed}, not to its id"
            )));
        }
        Ok(receipt)
    }

    /// The recovery bundle of a commit, checked: it names `ctx_id`, its file is byte for byte
    /// what svc wrote, and it lists exactly the receipt's chunks.
    pub fn bundle(&self, ctx_id: &str) -> Result<RecoveryBundle, CommitError> {
        let receipt = self.receipt(ctx_id)?;
        Ok(self.checked_bundle(&receipt)?.0)
    }

    /// The bundle and where it was read (its file, or the pack holding it).
    fn checked_bundle(
        &self,
        receipt: &ContextReceipt,
    ) -> Result<(RecoveryBundle, PathBuf), CommitError> {
        let ctx_id = receipt.ctx_id.as_str();
        let path = self.dir_of(ctx_id)?.join("bundle.json");
        let (bundle, holder): (RecoveryBundle, _) =
            read_json(&path, ctx_id, &self.packs).map_err(|error| match error {
                // The receipt was read: the commit is known, its bundle is what is gone.
                CommitError::UnknownCommit { .. } => CommitError::MissingBundle {
                    ctx_id: ctx_id.to_string(),
                    path: path.clone(),
                },
                other => other,
            })?;
        let tampered = |reason: String| CommitError::Tampered {
            ctx_id: ctx_id.to_string(),
            path: holder.clone(),
            reason,
        };
        if bundle.ctx_id != ctx_id {
            return Err(tampered(format!("it names {}", bundle.ctx_id)));
        }
        let same_chunks = bundle.entries.len() == receipt.chunks.len()
            && bundle
                .entries
                .iter()
                .zip(&receipt.chunks)
                .all(|(entry, chunk)| entry.chunk_id == chunk.chunk_id);
        if !same_chunks {
            return Err(tampered(
                "its chunks are not the receipt's chunks".to_string(),
            ));
        }
        // A damaged digest is the bundle's fault, found for every chunk of the commit rather
        // than blamed on a blob when that one chunk is recovered.
        if let Some(entry) = bundle
            .entries
            .iter()
            .find(|e| !digest::is_sha256_hex(&e.content_hash))
        {
            return Err(tampered(format!(
                "the content_hash of {} is {:?}, not a SHA-256 hex digest",
                entry.chunk_id, entry.content_hash
            )));
        }
        Ok((bundle, holder))
    }

    /// The exact bytes of `chunk` through its bundle entry, checked against the receipt's
    /// fingerprint; a missing or wrong blob names the bundle as a possible cause.
    fn exact_bytes(
        &self,
        ctx_id: &str,
        chunk: &ReceiptChunk,
        entry: &BundleEntry,
        bundle: &Path,
    ) -> Result<Vec<u8>, CommitError> {
        let bytes = match self.blobs.get(&entry.content_hash) {
            Ok(bytes) => bytes,
            Err(StoreError::Missing { .. }) => {
                return Err(CommitError::BlobNotFound {
                    ctx_id: ctx_id.to_string(),
                    chunk_id: chunk.chunk_id.clone(),
                    bundle: bundle.to_path_buf(),
                    hash: entry.content_hash.clone(),
                });
            }
            Err(other) => return Err(other.into()),
        };
        if fingerprint(&chunk.chunk_id, &bytes) != chunk.fingerprint {
            return Err(CommitError::FingerprintMismatch {
                ctx_id: ctx_id.to_string(),
                chunk_id: chunk.chunk_id.clone(),
                bundle: bundle.to_path_buf(),
                hash: entry.content_hash.clone(),
            });
        }
        Ok(bytes)
    }

    /// The exact bytes of one chunk, verified against the bundle's content hash and the
    /// receipt's fingerprint.
    pub fn recover(&self, ctx_id: &str, chunk_id: &str) -> Result<String, CommitError> {
        let receipt = self.receipt(ctx_id)?;
        let (bundle, bundle_path) = self.checked_bundle(&receipt)?;
        // The receipt may be packed (no file to point at): name the chunks of the same source.
        let unknown = || {
            let source = chunk_id
                .rsplit_once("#L")
                .map_or(chunk_id, |(source, _)| source);
            let same: Vec<&str> = receipt
                .chunks
                .iter()
                .filter(|c| c.source == source)
                .map(|c| c.chunk_id.as_str())
                .collect();
            let near = if chunk_id.trim().is_empty() {
                format!(
                    "give a chunk id: it has {} chunks (the markers and headers of its output name them)",
                    receipt.chunks.len()
                )
            } else if same.is_empty() {
                let some: Vec<&str> = receipt
                    .chunks
                    .iter()
                    .take(5)
                    .map(|c| c.chunk_id.as_str())
                    .collect();
                format!(
                    "it has {} chunks, none of {source} (the markers and headers of its output name them; the first: {})",
                    receipt.chunks.len(),
                    some.join(", ")
                )
            } else {
                let mut ids = same.clone();
                ids.sort_by_key(|id| line_range(id).map_or(0, |(first, _)| first));
                let shown = ids.iter().take(12).copied().collect::<Vec<_>>().join(", ");
                let more = ids.len().saturating_sub(12);
                if more > 0 {
                    format!("its chunks of {source} are {shown} and {more} more")
                } else {
                    format!("its chunks of {source} are {shown}")
                }
            };
            CommitError::UnknownChunk {
                ctx_id: ctx_id.to_string(),
                chunk_id: chunk_id.to_string(),
                near,
            }
        };
        let receipt_chunk = receipt.chunk(chunk_id).ok_or_else(unknown)?;
        let entry = bundle
            .entries
            .iter()
            .find(|e| e.chunk_id == chunk_id)
            .ok_or_else(unknown)?;
        let bytes = self.exact_bytes(ctx_id, receipt_chunk, entry, &bundle_path)?;
        String::from_utf8(bytes).map_err(|_| CommitError::NotText {
            chunk_id: chunk_id.to_string(),
        })
    }
}

impl CommitStore {
    /// The documents a commit was selected from, rebuilt from its exact chunks: each source is
    /// its chunks put back at their lines (`path#L{first}-{last}`), with an empty line for any
    /// line no chunk holds, so the rebuilt documents index into the same chunk ids. Every chunk
    /// is checked as [`Self::recover`] checks it; the bundle is read once.
    pub fn documents(
        &self,
        receipt: &ContextReceipt,
    ) -> Result<Vec<(String, String)>, CommitError> {
        let ctx_id = receipt.ctx_id.as_str();
        let (bundle, bundle_path) = self.checked_bundle(receipt)?;
        let mut by_source: std::collections::BTreeMap<&str, Vec<(usize, usize, String)>> =
            std::collections::BTreeMap::new();
        for (chunk, entry) in receipt.chunks.iter().zip(&bundle.entries) {
            let (first, last) =
                line_range(&chunk.chunk_id).ok_or_else(|| CommitError::NotAFragment {
                    ctx_id: ctx_id.to_string(),
                    chunk_id: chunk.chunk_id.clone(),
                })?;
            let bytes = self.exact_bytes(ctx_id, chunk, entry, &bundle_path)?;
            let text = String::from_utf8(bytes).map_err(|_| CommitError::NotText {
                chunk_id: chunk.chunk_id.clone(),
            })?;
            by_source
                .entry(chunk.source.as_str())
                .or_default()
                .push((first, last, text));
        }
        Ok(by_source
            .into_iter()
            .map(|(source, mut chunks)| {
                chunks.sort_by_key(|c| c.0);
                let mut body = String::new();
                let mut next_line = 1;
                for (first, last, text) in chunks {
                    for _ in next_line..first {
                        body.push('\n');
                    }
                    body.push_str(&text);
                    next_line = next_line.max(last + 1);
                }
                (source.to_string(), body)
            })
            .collect())
    }
}

/// `(first, last)` lines of a fragment chunk id `path#L{first}-{last}`.
pub fn line_range(chunk_id: &str) -> Option<(usize, usize)> {
    let (_, lines) = chunk_id.rsplit_once("#L")?;
    let (first, last) = lines.split_once('-')?;
    Some((first.parse().ok()?, last.parse().ok()?))
}

/// The commit id: a digest of everything the receipt says (parameters, encoding, the sent
/// context's hash, and per chunk its id, source, fingerprint, resolution and both token
/// counts), so a receipt that was edited after the commit no longer matches its id.
fn commit_id(
    parameters: &serde_json::Value,
    encoding: &str,
    chunks: &[ReceiptChunk],
    context_sha256: &str,
) -> String {
    #[derive(Serialize)]
    struct Material<'a> {
        parameters: &'a serde_json::Value,
        encoding: &'a str,
        context_sha256: &'a str,
        chunks: &'a [ReceiptChunk],
    }
    let material = Material {
        parameters,
        encoding,
        context_sha256,
        chunks,
    };
    // Serialising plain data into a String cannot fail.
    let json = serde_json::to_string(&material).unwrap_or_default();
    format!(
        "ctx_{}",
        &digest::sha256_hex(format!("svc.commit.v2\n{json}"))[..24]
    )
}

/// The id of commits made before v2: it covered the parameters, the context hash and each
/// chunk's id, fingerprint and resolution.
fn legacy_commit_id(
    parameters: &serde_json::Value,
    chunks: &[ReceiptChunk],
    context_sha256: &str,
) -> String {
    let mut material = String::new();
    material.push_str("svc.commit.v1\n");
    material.push_str(&parameters.to_string());
    material.push('\n');
    material.push_str(context_sha256);
    for chunk in chunks {
        material.push('\n');
        material.push_str(&chunk.chunk_id);
        material.push('\t');
        material.push_str(&chunk.fingerprint);
        material.push('\t');
        material.push_str(chunk.resolution.map_or("omitted", Resolution::as_str));
    }
    format!("ctx_{}", &digest::sha256_hex(material)[..24])
}

fn write_json(
    path: &Path,
    value: &impl Serialize,
    group: Option<&GroupCommit>,
) -> Result<(), CommitError> {
    let bytes = json_bytes(value, path)?;
    match group {
        Some(group) => group.stage(path, &bytes)?,
        None => state::atomic_write(path, &bytes)?,
    }
    Ok(())
}

/// A commit file's value, checked to be byte for byte what svc wrote, and the file that held
/// it (the loose file or its pack), which later checks name.
fn read_json<T: serde::de::DeserializeOwned + Serialize>(
    path: &Path,
    ctx_id: &str,
    packs: &Packs,
) -> Result<(T, PathBuf), CommitError> {
    // Problems are reported against the file that holds the bytes: the loose file, or the
    // pack a group-committed receipt or bundle lives in (its entry named in the reason).
    let (bytes, holder, entry) = match fs::read(path) {
        Ok(bytes) => (bytes, path.to_path_buf(), "it ".to_string()),
        Err(source) if source.kind() == io::ErrorKind::NotFound => {
            let (bytes, pack) =
                packs
                    .read_with_pack(path)?
                    .ok_or_else(|| CommitError::UnknownCommit {
                        ctx_id: ctx_id.to_string(),
                        path: path.to_path_buf(),
                    })?;
            let entry = format!("its entry for {} ", path.display());
            (bytes, pack, entry)
        }
        Err(source) => {
            return Err(CommitError::Read {
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let value: T = serde_json::from_slice(&bytes).map_err(|source| CommitError::Parse {
        path: holder.clone(),
        source,
    })?;
    // svc writes one canonical form; any other bytes (even a changed space) were edited.
    if json_bytes(&value, path)? != bytes {
        return Err(CommitError::Tampered {
            ctx_id: ctx_id.to_string(),
            path: holder,
            reason: format!("{entry}is not byte for byte the file svc wrote"),
        });
    }
    Ok((value, holder))
}

/// The canonical bytes of a commit file: pretty JSON and a final newline.
fn json_bytes(value: &impl Serialize, path: &Path) -> Result<Vec<u8>, CommitError> {
    let mut bytes = serde_json::to_vec_pretty(value).map_err(|source| CommitError::Parse {
        path: path.to_path_buf(),
        source,
    })?;
    bytes.push(b'\n');
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks() -> Vec<ChunkInput> {
        vec![
            ChunkInput {
                chunk_id: "src/a.rs#L1-3".into(),
                source: "src/a.rs".into(),
                full_text: "fn a() {\n    1\n}\n".into(),
                resolution: Some(Resolution::Full),
                sent_tokens: 8,
                full_tokens: None,
            },
            ChunkInput {
                chunk_id: "src/b.rs#L1-2".into(),
                source: "src/b.rs".into(),
                full_text: "fn b() { 2 }\r\n\u{00e9}\n".into(),
                resolution: None,
                sent_tokens: 0,
                full_tokens: None,
            },
        ]
    }

    #[test]
    fn commit_and_recover_byte_identical() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = CommitStore::new(dir.path());
        let tokenizer = Tokenizer::default();
        let params = serde_json::json!({"query": "b", "budget": 10});
        let receipt = store
            .commit(
                &chunks(),
                params.clone(),
                "fn a() {\n    1\n}\n",
                &tokenizer,
            )
            .expect("commit");
        assert!(receipt.ctx_id.starts_with("ctx_"));
        let again = store
            .commit(&chunks(), params, "fn a() {\n    1\n}\n", &tokenizer)
            .expect("recommit");
        assert_eq!(again.ctx_id, receipt.ctx_id, "ids are deterministic");
        let text = store
            .recover(&receipt.ctx_id, "src/b.rs#L1-2")
            .expect("recover");
        assert_eq!(text, "fn b() { 2 }\r\n\u{00e9}\n");
        assert_eq!(receipt.recoverable().count(), 1);
        assert!(receipt.chunks[1].receipt_token_count > 0);
    }

    #[test]
    fn receipt_counts_reuse_only_counts_in_the_commit_encoding() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = CommitStore::new(dir.path());
        let tokenizer = Tokenizer::default();
        let mut inputs = chunks();
        let exact = tokenizer.count(&inputs[0].full_text);
        inputs[0].full_tokens = Some((tokenizer.encoding(), exact));
        // A count under another encoding is not this commit's: it is recounted.
        inputs[1].full_tokens = Some((Encoding::Cl100kBase, 999_999));
        let receipt = store
            .commit(&inputs, serde_json::json!({}), "x", &tokenizer)
            .expect("commit");
        assert_eq!(receipt.chunks[0].receipt_token_count, exact);
        assert_eq!(
            receipt.chunks[1].receipt_token_count,
            tokenizer.count(&inputs[1].full_text)
        );
    }

    #[test]
    fn documents_are_rebuilt_at_their_lines_and_checked() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = CommitStore::new(dir.path());
        let chunk = |id: &str, text: &str| ChunkInput {
            chunk_id: id.into(),
            source: "a.md".into(),
            full_text: text.into(),
            resolution: None,
            sent_tokens: 0,
            full_tokens: None,
        };
        // Line 3 is in no chunk; the chunks come best score first.
        let chunks = vec![
            chunk("a.md#L4-4", "four\n"),
            chunk("a.md#L1-2", "one\ntwo\n"),
        ];
        let receipt = store
            .commit(&chunks, serde_json::json!({}), "", &Tokenizer::default())
            .expect("commit");
        let documents = store.documents(&receipt).expect("documents");
        assert_eq!(
            documents,
            vec![("a.md".to_string(), "one\ntwo\n\nfour\n".to_string())]
        );

        let bad = store
            .commit(
                &[chunk("whole", "x")],
                serde_json::json!({}),
                "",
                &Tokenizer::default(),
            )
            .expect("commit");
        assert!(matches!(
            store.documents(&bad),
            Err(CommitError::NotAFragment { .. })
        ));
    }

    #[test]
    fn a_grouped_commit_is_readable_only_after_sync() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = CommitStore::grouped(dir.path());
        let tokenizer = Tokenizer::default();
        let receipt = store
            .commit(
                &chunks(),
                serde_json::json!({"budget": 10}),
                "fn a() {}",
                &tokenizer,
            )
            .expect("commit");
        let again = store
            .commit(
                &chunks(),
                serde_json::json!({"budget": 20}),
                "fn a() {}",
                &tokenizer,
            )
            .expect("a second commit sharing the blobs");
        assert!(matches!(
            store.receipt(&receipt.ctx_id),
            Err(CommitError::UnknownCommit { .. })
        ));
        let synced = store.sync().expect("sync");
        // Two blobs (shared by both commits) and a receipt and bundle per commit.
        assert_eq!(synced.files, 6);
        for ctx_id in [&receipt.ctx_id, &again.ctx_id] {
            assert_eq!(store.receipt(ctx_id).expect("receipt").ctx_id, *ctx_id);
            assert_eq!(
                store.recover(ctx_id, "src/b.rs#L1-2").expect("recover"),
                "fn b() { 2 }\r\n\u{00e9}\n"
            );
        }
        // A plain store over the same directory reads what the group wrote.
        let plain = CommitStore::new(dir.path());
        assert_eq!(plain.receipt(&receipt.ctx_id).expect("receipt"), receipt);
        assert_eq!(plain.sync().expect("no-op").files, 0);

        // Packed bytes are verified like loose ones.
        let pack = state::pack::first_file(dir.path(), "pack");
        let text = fs::read_to_string(&pack).expect("read pack");
        fs::write(&pack, text.replace("fn b() { 2 }", "fn b() { 3 }")).expect("tamper");
        let error = CommitStore::new(dir.path())
            .recover(&receipt.ctx_id, "src/b.rs#L1-2")
            .expect_err("tampered");
        assert!(error.to_string().contains("tampered"), "{error}");

        // Regression (found by probing): the damaged blob was trusted as already stored, so
        // every later commit of the same bytes named it and could never be recovered. A later
        // process checks what it skips, and writes damaged copies again.
        // A fresh process's store commits the same chunks and syncs.
        let commit_again = |budget: u64| {
            let store = CommitStore::grouped(dir.path());
            let receipt = store
                .commit(
                    &chunks(),
                    serde_json::json!({ "budget": budget }),
                    "fn a() {}",
                    &tokenizer,
                )
                .expect("commit");
            store.sync().expect("sync");
            receipt
        };
        let third = commit_again(30);
        for ctx_id in [&third.ctx_id, &receipt.ctx_id] {
            assert_eq!(
                CommitStore::new(dir.path())
                    .recover(ctx_id, "src/b.rs#L1-2")
                    .expect("repaired"),
                "fn b() { 2 }\r\n\u{00e9}\n"
            );
        }
        // A damaged stored commit (its receipt) is written again by the same commit.
        let packed = fs::read_to_string(&pack).expect("read pack");
        fs::write(&pack, packed.replace("\"budget\": 10", "\"budget\": 11")).expect("tamper");
        assert!(
            CommitStore::new(dir.path())
                .receipt(&receipt.ctx_id)
                .is_err()
        );
        commit_again(10);
        assert_eq!(
            CommitStore::new(dir.path())
                .receipt(&receipt.ctx_id)
                .expect("repaired"),
            receipt
        );
    }

    #[test]
    fn tampered_and_unknown_fail_loudly() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = CommitStore::new(dir.path());
        let receipt = store
            .commit(&chunks(), serde_json::json!({}), "x", &Tokenizer::default())
            .expect("commit");
        let unknown = store.recover("ctx_ffff", "x");
        assert!(matches!(unknown, Err(CommitError::UnknownCommit { .. })));
        let message = unknown.expect_err("unknown").to_string();
        let packs = dir.path().join("packs").display().to_string();
        assert!(
            message.contains(&packs),
            "names where packed commits are: {message}"
        );
        assert!(matches!(
            store.recover("nonsense", "x"),
            Err(CommitError::BadId { .. })
        ));
        assert!(matches!(
            store.recover(&receipt.ctx_id, "nope"),
            Err(CommitError::UnknownChunk { .. })
        ));
        let bundle = store.bundle(&receipt.ctx_id).expect("bundle");
        let hash = &bundle.entries[1].content_hash;
        let blob = dir.path().join("blobs").join(&hash[..2]).join(&hash[2..]);
        fs::write(blob, "fn b() { 3 }").expect("tamper");
        assert!(matches!(
            store.recover(&receipt.ctx_id, "src/b.rs#L1-2"),
            Err(CommitError::Store(StoreError::Tampered { .. }))
        ));
    }
}
