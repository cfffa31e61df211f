//! The input of every tool: one struct each, deserialised strictly (unknown fields are refused)
//! and described by the JSON Schema the server publishes in `tools/list`. Closed sets reuse the
//! library's enums, so the schema's `enum` values are the wire values of the CLI and records.

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::Deserialize;
use serde_json::Value;

use crate::context::compress::ContentKind;
use crate::proof::{Bounds, ContextRiskMode};
use crate::witness::{Mode, Profile};

/// Largest `show_omitted` of `select_context`: a manifest is for reading, not for dumping.
pub const MAX_SHOW_OMITTED: usize = 200;
/// Default `show_omitted` of `select_context` (as `svc context select`).
pub const DEFAULT_SHOW_OMITTED: usize = 10;
/// Default `max_file_bytes` of `select_context` (as `svc context select`).
pub const DEFAULT_MAX_FILE_BYTES: u64 = 1_000_000;

fn string_enum(names: Vec<&'static str>, description: &str) -> Schema {
    json_schema!({
        "type": "string",
        "enum": names,
        "description": description,
    })
}

fn content_kind_schema(_: &mut SchemaGenerator) -> Schema {
    use clap::ValueEnum;
    let names = ContentKind::value_variants()
        .iter()
        .map(|k| k.as_str())
        .collect();
    string_enum(
        names,
        "Content kind; detected from `source`'s extension, then from the content, when absent.",
    )
}

fn witness_mode_schema(_: &mut SchemaGenerator) -> Schema {
    string_enum(
        Mode::ALL.iter().map(|m| m.as_str()).collect(),
        "audit: output untouched; annotate: flagged claims marked inline; strict: flagged claims removed. Default audit.",
    )
}

fn profile_schema(_: &mut SchemaGenerator) -> Schema {
    string_enum(
        Profile::ALL.iter().map(|p| p.as_str()).collect(),
        "Verification profile: rag, qa, benchmark_qa and code fail closed; summary, chat and dialogue only warn on unknown claims. Default rag.",
    )
}

fn risk_mode_schema(_: &mut SchemaGenerator) -> Schema {
    use clap::ValueEnum;
    string_enum(
        ContextRiskMode::value_variants()
            .iter()
            .map(|m| m.as_str())
            .collect(),
        "audit: unsupported claims of the final output are marked; strict: removed. Default audit.",
    )
}

fn messages_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "description": "The conversation, oldest first: OpenAI-style {role, content: \"text\"} or Anthropic-style {role, content: [blocks]} messages. Other fields pass through untouched.",
        "items": {
            "type": "object",
            "required": ["role"],
            "properties": {
                "role": {"type": "string"},
                "content": {"type": ["string", "array", "null"]}
            }
        }
    })
}

/// `compress`: one text to a token budget.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompressArgs {
    /// The content to compress: source code, JSON, logs or prose.
    pub content: String,
    /// Token budget of the output (o200k_base tokens), at least 1.
    #[schemars(range(min = 1))]
    pub budget: usize,
    #[serde(default)]
    #[schemars(schema_with = "content_kind_schema")]
    pub kind: Option<ContentKind>,
    /// Terms that make a sentence or line worth keeping (prose ranks by it).
    #[serde(default)]
    pub query: Option<String>,
    /// Where the content came from (a file name such as `src/lib.rs`): its extension picks the
    /// kind, and it is recorded in the commit.
    #[serde(default)]
    pub source: Option<String>,
}

/// `compress_messages`: a conversation to a token budget.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompressMessagesArgs {
    #[schemars(schema_with = "messages_schema")]
    pub messages: Vec<Value>,
    /// Token budget of the compressed conversation (o200k_base tokens), at least 1.
    #[schemars(range(min = 1))]
    pub budget: usize,
}

/// `select_context`: what to send from a directory for a query.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SelectContextArgs {
    /// The directory to select from (absolute, or relative to the server's working directory).
    /// .gitignore and .svcignore are honoured.
    pub path: String,
    /// What the context is for: a question, a task, a commit message.
    pub query: String,
    /// Token budget of the rendered context (o200k_base tokens), at least 1.
    #[schemars(range(min = 1))]
    pub budget: usize,
    /// Keep these in full: chunk ids (`src/lib.rs#L10-42`), paths, or directory prefixes ending
    /// in `/`.
    #[serde(default)]
    pub pins: Vec<String>,
    /// How many of the best-scoring omitted fragments to list (default 10, at most 200).
    #[serde(default)]
    pub show_omitted: Option<usize>,
    /// Skip files larger than this many bytes (default 1000000).
    #[serde(default)]
    pub max_file_bytes: Option<u64>,
}

/// `recover_chunk`: the exact bytes of one chunk of a commit.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecoverChunkArgs {
    /// The commit id (`ctx_…`) returned by select_context, compress, compress_messages or a
    /// proof-guided session.
    pub ctx_id: String,
    /// The chunk id from the manifest or an elision, e.g. `src/lib.rs#L10-42`.
    pub chunk_id: String,
}

/// `verify_answer`: check an answer against its evidence.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct VerifyAnswerArgs {
    /// The evidence the answer must be supported by.
    pub context: String,
    /// The model's answer to check.
    pub answer: String,
    /// The question the answer is for; short answers ("Delhi") are read against it.
    #[serde(default)]
    pub question: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "witness_mode_schema")]
    pub mode: Option<Mode>,
    #[serde(default)]
    #[schemars(schema_with = "profile_schema")]
    pub profile: Option<Profile>,
    /// Store the certificate under the state directory (default true), so it can be listed and
    /// given feedback (`svc witness list|feedback`).
    #[serde(default)]
    pub store: Option<bool>,
}

/// One in-memory document of `prepare_proof_guided_context`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Document {
    /// The document's name (a path or title); its extension picks how it is split.
    pub name: String,
    pub text: String,
}

/// `prepare_proof_guided_context`: open a `pgs_…` session.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PrepareArgs {
    /// A document or a directory of documents to select from. Give `path` or `documents`, not
    /// both.
    #[serde(default)]
    pub path: Option<String>,
    /// The documents themselves. Give `path` or `documents`, not both.
    #[serde(default)]
    pub documents: Option<Vec<Document>>,
    /// What the answer is for.
    pub query: String,
    /// Token budget of the committed context (o200k_base tokens), at least 1.
    #[schemars(range(min = 1))]
    pub budget: usize,
    /// Hard bound on model calls (default 3).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_rounds: Option<usize>,
    /// Total receipt tokens that may be recovered over the run (default 2000).
    #[serde(default)]
    pub recovery_token_budget: Option<usize>,
    /// Chunks recovered per round at most (default 4).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub max_chunks_per_round: Option<usize>,
    #[serde(default)]
    #[schemars(schema_with = "risk_mode_schema")]
    pub mode: Option<ContextRiskMode>,
    #[serde(default)]
    #[schemars(schema_with = "profile_schema")]
    pub profile: Option<Profile>,
    /// Replays the original response when prepare is repeated with this key and the same input;
    /// refused with different input.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

impl PrepareArgs {
    /// The bounds asked for, defaults filled in.
    pub fn bounds(&self) -> Bounds {
        let default = Bounds::default();
        Bounds {
            max_rounds: self.max_rounds.unwrap_or(default.max_rounds),
            recovery_token_budget: self
                .recovery_token_budget
                .unwrap_or(default.recovery_token_budget),
            max_chunks_per_round: self
                .max_chunks_per_round
                .unwrap_or(default.max_chunks_per_round),
        }
    }
}

/// `advance_proof_guided_context`: submit the model's draft.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AdvanceArgs {
    /// The session id (`pgs_…`) from prepare.
    pub session_id: String,
    /// The model's draft answering the pending request.
    pub draft: String,
    /// Replays the original response when this key comes again with the same draft, at any
    /// later revision; refused with a different draft.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// `inspect_proof_guided_context`: a session's state.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InspectArgs {
    /// The session id (`pgs_…`).
    pub session_id: String,
}
