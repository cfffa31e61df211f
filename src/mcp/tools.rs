//! The tools: their names, descriptions and input schemas, and what each does, through the same
//! library calls as the matching `svc` command. Every tool is synchronous CPU and file work; the
//! server runs it on the blocking pool.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::args::{
    AdvanceArgs, CompressArgs, CompressMessagesArgs, DEFAULT_MAX_FILE_BYTES, DEFAULT_SHOW_OMITTED,
    InspectArgs, MAX_SHOW_OMITTED, PrepareArgs, RecoverChunkArgs, SelectContextArgs,
    VerifyAnswerArgs,
};
use super::index_cache::{Freshness, IndexCache};
use crate::context::CommitStore;
use crate::context::commit::CommitError;
use crate::context::compress::{self, CompressError, CompressOptions, Message};
use crate::context::index::IndexError;
use crate::context::select::{self, ManifestEntry, SelectError, SelectOptions};
use crate::proof::sources::{self, SourcesError};
use crate::proof::{ContextRiskMode, ProofError, Protocol, VerifiedEfficiencyLayer};
use crate::tokens::Tokenizer;
use crate::witness::store::{Store, StoreError};
use crate::witness::{self, WitnessInput};

/// The tools, in the order `tools/list` gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolName {
    PrepareProofGuidedContext,
    AdvanceProofGuidedContext,
    InspectProofGuidedContext,
    Compress,
    CompressMessages,
    SelectContext,
    RecoverChunk,
    VerifyAnswer,
}

impl ToolName {
    pub const ALL: [ToolName; 8] = [
        ToolName::PrepareProofGuidedContext,
        ToolName::AdvanceProofGuidedContext,
        ToolName::InspectProofGuidedContext,
        ToolName::Compress,
        ToolName::CompressMessages,
        ToolName::SelectContext,
        ToolName::RecoverChunk,
        ToolName::VerifyAnswer,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::PrepareProofGuidedContext => "prepare_proof_guided_context",
            ToolName::AdvanceProofGuidedContext => "advance_proof_guided_context",
            ToolName::InspectProofGuidedContext => "inspect_proof_guided_context",
            ToolName::Compress => "compress",
            ToolName::CompressMessages => "compress_messages",
            ToolName::SelectContext => "select_context",
            ToolName::RecoverChunk => "recover_chunk",
            ToolName::VerifyAnswer => "verify_answer",
        }
    }

    pub fn from_name(name: &str) -> Option<ToolName> {
        Self::ALL.into_iter().find(|tool| tool.as_str() == name)
    }

    pub fn description(self) -> &'static str {
        match self {
            ToolName::PrepareProofGuidedContext => {
                "Select and commit context from a document, a directory or given documents for a query within a token budget, and open a proof-guided session (pgs_…). Returns the session id and the first model request: {query, stable_context_prefix, appended_evidence, previous_output}. Ask your model with it, then pass its draft to advance_proof_guided_context."
            }
            ToolName::AdvanceProofGuidedContext => {
                "Submit the model's draft for a session's pending request. The draft is verified against the committed context; exact omitted chunks supporting its open claims are recovered. Returns the next request (state awaiting_draft: ask the model again) or the result (state finished: status, final_output, rounds)."
            }
            ToolName::InspectProofGuidedContext => {
                "A proof-guided session's state: revision, rounds, recovered chunks, the pending request or the result, any failure."
            }
            ToolName::Compress => {
                "Compress code, JSON, logs or prose to a token budget. Every elision is marked with a recover handle; the exact bytes stay retrievable with recover_chunk(ctx_id, chunk_id)."
            }
            ToolName::CompressMessages => {
                "Compress a conversation to a token budget: the system prompt and the latest user turn stay verbatim; tool outputs and older turns are reduced first. Elisions are recoverable with recover_chunk."
            }
            ToolName::SelectContext => {
                "Select what to send from a repository or document directory for a query within a token budget: fragments in full, as skeletons (signatures) or as references. Returns the rendered context, the ctx_ commit id and the manifest (sent fragments and the best omitted ones); any chunk is recoverable with recover_chunk."
            }
            ToolName::RecoverChunk => {
                "The exact bytes of one chunk of a commit (ctx_…), verified against the commit's fingerprint and content hash."
            }
            ToolName::VerifyAnswer => {
                "Check an answer against its evidence, deterministically and locally: each claim supported, contradicted or unsupported. Returns the (in annotate/strict mode rewritten) output and the certificate with its id, flagged claims and evidence."
            }
        }
    }

    /// The JSON Schema of the tool's input.
    pub fn input_schema(self) -> Result<std::sync::Arc<Map<String, Value>>, String> {
        use rmcp::handler::server::tool::schema_for_input;
        match self {
            ToolName::PrepareProofGuidedContext => schema_for_input::<PrepareArgs>(),
            ToolName::AdvanceProofGuidedContext => schema_for_input::<AdvanceArgs>(),
            ToolName::InspectProofGuidedContext => schema_for_input::<InspectArgs>(),
            ToolName::Compress => schema_for_input::<CompressArgs>(),
            ToolName::CompressMessages => schema_for_input::<CompressMessagesArgs>(),
            ToolName::SelectContext => schema_for_input::<SelectContextArgs>(),
            ToolName::RecoverChunk => schema_for_input::<RecoverChunkArgs>(),
            ToolName::VerifyAnswer => schema_for_input::<VerifyAnswerArgs>(),
        }
    }
}

impl std::fmt::Display for ToolName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a tool call failed; the message goes back to the caller as the tool's error result.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    #[error(transparent)]
    Compress(#[from] CompressError),
    #[error(transparent)]
    Select(#[from] SelectError),
    #[error(transparent)]
    Index(#[from] IndexError),
    #[error(transparent)]
    Commit(#[from] CommitError),
    #[error(transparent)]
    Proof(#[from] ProofError),
    #[error(transparent)]
    Sources(#[from] SourcesError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Parses a tool's arguments strictly, naming the offending field.
fn parse<T: DeserializeOwned>(arguments: Map<String, Value>) -> Result<T, ToolError> {
    serde_path_to_error::deserialize(Value::Object(arguments)).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        ToolError::InvalidArguments(if path == "." {
            format!("{inner}; tools/list gives the input schema")
        } else {
            format!("`{path}`: {inner}; tools/list gives the input schema")
        })
    })
}

fn to_value(value: &impl Serialize) -> Value {
    // The library's result types serialise infallibly (plain data, string keys).
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// What the tools share: the state directory and the in-memory indexes.
pub struct Toolbox {
    home: PathBuf,
    store: CommitStore,
    indexes: IndexCache,
    tokenizer: Tokenizer,
}

impl Toolbox {
    pub fn new(home: &Path) -> Self {
        Self {
            home: home.to_path_buf(),
            // Group-committed: each call's new blobs, receipt and bundle are appended to this
            // process's pack with one fsync, synced before the call answers with a ctx_ id.
            store: CommitStore::grouped(home),
            indexes: IndexCache::new(home),
            tokenizer: Tokenizer::default(),
        }
    }

    pub fn home(&self) -> &Path {
        &self.home
    }

    /// Runs `tool` on its raw arguments; the value is the tool's structured result.
    pub fn call(&self, tool: ToolName, arguments: Map<String, Value>) -> Result<Value, ToolError> {
        match tool {
            ToolName::PrepareProofGuidedContext => self.prepare(parse(arguments)?),
            ToolName::AdvanceProofGuidedContext => self.advance(parse(arguments)?),
            ToolName::InspectProofGuidedContext => self.inspect(parse(arguments)?),
            ToolName::Compress => self.compress(parse(arguments)?),
            ToolName::CompressMessages => self.compress_messages(parse(arguments)?),
            ToolName::SelectContext => self.select_context(parse(arguments)?),
            ToolName::RecoverChunk => self.recover_chunk(parse(arguments)?),
            ToolName::VerifyAnswer => self.verify_answer(parse(arguments)?),
        }
    }

    fn compress(&self, args: CompressArgs) -> Result<Value, ToolError> {
        let options = CompressOptions {
            kind: args.kind,
            query: args.query,
            source: args.source.unwrap_or_else(|| "content".to_string()),
        };
        let result = compress::compress(
            &args.content,
            args.budget,
            &options,
            &self.store,
            &self.tokenizer,
        )?;
        self.store.sync()?;
        Ok(to_value(&result))
    }

    fn compress_messages(&self, args: CompressMessagesArgs) -> Result<Value, ToolError> {
        let messages = args
            .messages
            .into_iter()
            .enumerate()
            .map(|(index, value)| {
                serde_json::from_value::<Message>(value).map_err(|error| {
                    ToolError::InvalidArguments(format!(
                        "`messages[{index}]`: {error} (a message is {{\"role\": \"…\", \"content\": …}})"
                    ))
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let result =
            compress::compress_messages(&messages, args.budget, &self.store, &self.tokenizer)?;
        self.store.sync()?;
        Ok(to_value(&result))
    }

    fn select_context(&self, args: SelectContextArgs) -> Result<Value, ToolError> {
        let show_omitted = args.show_omitted.unwrap_or(DEFAULT_SHOW_OMITTED);
        if show_omitted > MAX_SHOW_OMITTED {
            return Err(ToolError::InvalidArguments(format!(
                "`show_omitted` is {show_omitted}; at most {MAX_SHOW_OMITTED} omitted fragments are listed"
            )));
        }
        let (index, freshness) = self.indexes.get(
            Path::new(&args.path),
            args.max_file_bytes.unwrap_or(DEFAULT_MAX_FILE_BYTES),
        )?;
        let options = SelectOptions {
            pinned: args.pins,
            // Learned weights when there are any; a broken weights file falls back to the
            // defaults (`svc learning show` names the problem).
            weights: crate::daemon::learning::active_weights(&self.home).0,
            ..SelectOptions::default()
        };
        let selection = select::select(&index, &args.query, args.budget, &options)?;
        let receipt = select::commit_selection(&index, &selection, &options, &self.store)?;
        self.store.sync()?;
        let sent: Vec<&ManifestEntry> = selection.sent().collect();
        let omitted_count = selection.manifest.len() - sent.len();
        let omitted: Vec<&ManifestEntry> = selection
            .manifest
            .iter()
            .filter(|e| e.resolution.is_none() && e.score > 0.0)
            .take(show_omitted)
            .collect();
        #[derive(Serialize)]
        struct Output<'a> {
            ctx_id: &'a str,
            query: &'a str,
            budget: usize,
            tokens: usize,
            rendered: &'a str,
            files: usize,
            fragments: usize,
            index_tokens: usize,
            index_reused: bool,
            sent: Vec<&'a ManifestEntry>,
            omitted_count: usize,
            omitted: Vec<&'a ManifestEntry>,
        }
        Ok(to_value(&Output {
            ctx_id: &receipt.ctx_id,
            query: &selection.query,
            budget: selection.budget,
            tokens: selection.tokens,
            rendered: &selection.rendered,
            files: index.files.len(),
            fragments: index.fragments.len(),
            index_tokens: index.stats.tokens,
            index_reused: freshness == Freshness::Warm,
            sent,
            omitted_count,
            omitted,
        }))
    }

    fn recover_chunk(&self, args: RecoverChunkArgs) -> Result<Value, ToolError> {
        let text = self.store.recover(&args.ctx_id, &args.chunk_id)?;
        Ok(serde_json::json!({
            "ctx_id": args.ctx_id,
            "chunk_id": args.chunk_id,
            "bytes": text.len(),
            "text": text,
            // Damaged pack index lines do not stop recovery of the rest; the caller hears of them.
            "warnings": self.store.pack_warnings(),
        }))
    }

    fn verify_answer(&self, args: VerifyAnswerArgs) -> Result<Value, ToolError> {
        let input = WitnessInput {
            context: &args.context,
            context_source: "context",
            output: &args.answer,
            question: args.question.as_deref(),
            mode: args.mode.unwrap_or_default(),
            profile: args.profile.unwrap_or_default(),
        };
        let witnessed = witness::witness(&input);
        let stored = args.store.unwrap_or(true);
        if stored {
            Store::at(self.home.join("witness")).save(&witnessed.certificate)?;
        }
        Ok(serde_json::json!({
            "output": witnessed.output,
            "stored": stored,
            "certificate": witnessed.certificate,
        }))
    }

    fn protocol(&self, mode: ContextRiskMode, profile: crate::witness::Profile) -> Protocol {
        Protocol::new(VerifiedEfficiencyLayer::new(&self.home, mode).with_profile(profile))
    }

    fn prepare(&self, args: PrepareArgs) -> Result<Value, ToolError> {
        let documents = match (&args.path, &args.documents) {
            (Some(path), None) => sources::read_sources(Path::new(path))?,
            (None, Some(documents)) if !documents.is_empty() => documents
                .iter()
                .map(|d| (d.name.clone(), d.text.clone()))
                .collect(),
            (None, Some(_)) => {
                return Err(ToolError::InvalidArguments(
                    "`documents` is empty; give at least one {name, text} document".into(),
                ));
            }
            (Some(_), Some(_)) => {
                return Err(ToolError::InvalidArguments(
                    "give `path` or `documents`, not both".into(),
                ));
            }
            (None, None) => {
                return Err(ToolError::InvalidArguments(
                    "give `path` (a document or directory) or `documents` ([{name, text}])".into(),
                ));
            }
        };
        let protocol = self.protocol(
            args.mode.unwrap_or_default(),
            args.profile.unwrap_or_default(),
        );
        let response = protocol.prepare(
            &documents,
            &args.query,
            args.budget,
            args.bounds(),
            args.idempotency_key.as_deref(),
        )?;
        Ok(protocol_json(&response))
    }

    fn advance(&self, args: AdvanceArgs) -> Result<Value, ToolError> {
        // The session carries its own mode, profile and bounds; the layer only names the state.
        let response = self
            .protocol(ContextRiskMode::Audit, Default::default())
            .advance(
                &args.session_id,
                &args.draft,
                args.idempotency_key.as_deref(),
            )?;
        Ok(protocol_json(&response))
    }

    fn inspect(&self, args: InspectArgs) -> Result<Value, ToolError> {
        let view = self
            .protocol(ContextRiskMode::Audit, Default::default())
            .inspect(&args.session_id)?;
        Ok(to_value(&view))
    }
}

/// The protocol's responses are JSON text (replayed byte for byte under an idempotency key);
/// the tool result carries the same document as structured content.
fn protocol_json(response: &str) -> Value {
    serde_json::from_str(response).unwrap_or_else(|_| Value::String(response.to_string()))
}
