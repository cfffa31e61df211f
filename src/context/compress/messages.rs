//! Conversation compression: the system prompt and the latest user turn (the latest `user`
//! message with text of the user's; one of `tool_result` blocks only is tool output) stay
//! verbatim; tool outputs are reduced first, then older turns, oldest first, each with the same kind-aware
//! reducers as [`super::compress`] and each elision recoverable from one commit.
//!
//! Messages are OpenAI style (`{role, content: "text"}`, `role: tool`) or Anthropic style
//! (`content: [{type: "text", text}, {type: "tool_result", content: "…" | [blocks]}]`). Image and
//! document blocks of older turns are replaced whole by a marker (base64 has nothing to keep);
//! other fields and blocks (tool calls) pass through untouched. The token measure is the sum of
//! the text tokens of every message plus the JSON tokens of non-text blocks; role and framing
//! overhead are the provider's and not counted.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{CompressError, CompressOptions, ContentKind, Elision, Part, Reduced, reduce_prefixed};
use crate::context::commit::{ChunkInput, CommitStore, Resolution};
use crate::tokens::Tokenizer;

/// One conversation message. `content` is a string or an array of content blocks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    #[serde(default)]
    pub content: Value,
    /// Any other field (`name`, `tool_call_id`, `tool_calls`, …), kept as given.
    #[serde(flatten)]
    pub extra: serde_json::Map<String, Value>,
}

impl Message {
    /// A plain text message.
    pub fn text(role: &str, content: &str) -> Message {
        Message {
            role: role.to_string(),
            content: Value::String(content.to_string()),
            extra: serde_json::Map::new(),
        }
    }
}

/// A conversation as given: its messages and, when it came as a request object
/// (`{"model", "system", "messages": [...], …}`), every other field of that object.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub messages: Vec<Message>,
    /// The request's other fields, kept as given; `None` for a bare array of messages.
    pub envelope: Option<serde_json::Map<String, Value>>,
}

impl Conversation {
    /// The envelope's prompt parts that stay verbatim and are billed as prompt tokens: an
    /// Anthropic-style top-level `system` (a string or text blocks) and declared `tools`.
    fn fixed_parts(&self) -> Vec<(&'static str, &Value)> {
        let Some(envelope) = &self.envelope else {
            return Vec::new();
        };
        ["system", "tools"]
            .into_iter()
            .filter_map(|key| envelope.get(key).map(|value| (key, value)))
            .filter(|(_, value)| !value.is_null())
            .collect()
    }

    /// [`Self::with_messages`] as pretty JSON, each message's fields in their usual order
    /// (`role`, `content`, then the rest) rather than sorted.
    pub fn request_json(&self, messages: &[Message]) -> serde_json::Result<String> {
        #[derive(Serialize)]
        struct Request<'a> {
            #[serde(flatten)]
            envelope: &'a serde_json::Map<String, Value>,
            messages: &'a [Message],
        }
        match &self.envelope {
            None => serde_json::to_string_pretty(messages),
            Some(envelope) => serde_json::to_string_pretty(&Request { envelope, messages }),
        }
    }

    /// The whole request with `messages` in place of the given ones (the bare array when the
    /// conversation came as one).
    pub fn with_messages(&self, messages: &[Message]) -> Value {
        let messages = serde_json::to_value(messages).unwrap_or(Value::Null);
        match &self.envelope {
            None => messages,
            Some(envelope) => {
                let mut request = envelope.clone();
                request.insert("messages".to_string(), messages);
                Value::Object(request)
            }
        }
    }
}

/// Reads a conversation: a JSON array of `{role, content, …}` messages, or an object with a
/// `messages` array (the shape of a chat request, whose other fields are kept). Errors name the
/// source and, for JSON syntax, the line and column; for a bad message, its index.
pub fn parse_conversation(text: &str, source_name: &str) -> Result<Conversation, CompressError> {
    let value: Value = serde_json::from_str(crate::text::without_bom(text)).map_err(|error| {
        CompressError::NotAConversation {
            source_name: source_name.to_string(),
            problem: format!("not JSON: {error}"),
        }
    })?;
    let (list, envelope) = match value {
        Value::Object(mut object) if object.contains_key("messages") => {
            let list = object.remove("messages").unwrap_or(Value::Null);
            (list, Some(object))
        }
        other => (other, None),
    };
    let Value::Array(items) = list else {
        return Err(CompressError::NotAConversation {
            source_name: source_name.to_string(),
            problem: "expected a JSON array of messages or an object with a `messages` array"
                .to_string(),
        });
    };
    let messages = items
        .into_iter()
        .enumerate()
        .map(|(index, item)| {
            serde_json::from_value(item).map_err(|error| CompressError::InvalidMessage {
                index,
                problem: format!("{error} (a message is {{\"role\": \"…\", \"content\": …}})"),
            })
        })
        .collect::<Result<Vec<Message>, _>>()?;
    let conversation = Conversation { messages, envelope };
    if let Some(system) = conversation
        .envelope
        .as_ref()
        .and_then(|envelope| envelope.get("system"))
        && !matches!(system, Value::String(_) | Value::Array(_) | Value::Null)
    {
        return Err(CompressError::NotAConversation {
            source_name: source_name.to_string(),
            problem: "field `system` must be a string or an array of content blocks".to_string(),
        });
    }
    Ok(conversation)
}

/// The result of [`compress_messages`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompressedMessages {
    pub messages: Vec<Message>,
    /// Tokens of the compressed conversation (≤ the budget), by the measure above.
    pub tokens: usize,
    pub original_tokens: usize,
    pub ctx_id: String,
    pub elisions: Vec<Elision>,
    /// The whole request with the compressed messages, when the conversation came as a request
    /// object ([`compress_conversation`]); its other fields are as given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Value>,
}

/// Where a piece of text sits in a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    Content,
    Block(usize),
    ToolResult(usize),
    ToolResultBlock(usize, usize),
    /// An image or document block (base64 data): kept whole or replaced whole by a marker.
    Media(usize),
    /// A media block inside a `tool_result`'s content.
    ToolResultMedia(usize, usize),
}

impl Slot {
    fn id(self, message: usize) -> String {
        match self {
            Slot::Content => format!("m{message}"),
            Slot::Block(b) | Slot::ToolResult(b) | Slot::Media(b) => format!("m{message}.b{b}"),
            Slot::ToolResultBlock(b, c) | Slot::ToolResultMedia(b, c) => {
                format!("m{message}.b{b}.c{c}")
            }
        }
    }

    fn is_media(self) -> bool {
        matches!(self, Slot::Media(_) | Slot::ToolResultMedia(..))
    }
}

/// An image or document part (OpenAI `image_url`/`input_image`, Anthropic `image`/`document`):
/// base64 data no reducer can shorten, which an older turn can drop whole.
fn is_media_block(block: &Value) -> bool {
    matches!(
        block.get("type").and_then(Value::as_str),
        Some("image" | "image_url" | "input_image" | "document")
    )
}

fn is_text_block(block: &Value) -> bool {
    block.get("type").and_then(Value::as_str) == Some("text")
        && block.get("text").is_some_and(Value::is_string)
}

/// The text slots of a message and the token cost of its non-text blocks.
fn slots(
    message: &Message,
    index: usize,
    tokenizer: &Tokenizer,
) -> Result<(Vec<Slot>, usize), CompressError> {
    let invalid = |problem: String| CompressError::InvalidMessage { index, problem };
    match &message.content {
        Value::String(_) => Ok((vec![Slot::Content], 0)),
        Value::Null => Ok((Vec::new(), 0)),
        Value::Array(blocks) => {
            let mut out = Vec::new();
            let mut other = 0;
            for (b, block) in blocks.iter().enumerate() {
                if !block.is_object() {
                    return Err(invalid(format!(
                        "content block {b} is not an object; blocks look like {{\"type\": \"text\", \"text\": \"…\"}}"
                    )));
                }
                if is_text_block(block) {
                    out.push(Slot::Block(b));
                } else if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                    match block.get("content") {
                        Some(Value::String(_)) => out.push(Slot::ToolResult(b)),
                        Some(Value::Array(inner)) => {
                            for (c, inner_block) in inner.iter().enumerate() {
                                if is_text_block(inner_block) {
                                    out.push(Slot::ToolResultBlock(b, c));
                                } else if is_media_block(inner_block) {
                                    out.push(Slot::ToolResultMedia(b, c));
                                } else {
                                    other += tokenizer.count(&inner_block.to_string());
                                }
                            }
                        }
                        _ => other += tokenizer.count(&block.to_string()),
                    }
                } else if is_media_block(block) {
                    out.push(Slot::Media(b));
                } else {
                    other += tokenizer.count(&block.to_string());
                }
            }
            Ok((out, other))
        }
        _ => Err(invalid(
            "field `content` must be a string, an array of content blocks, or null".into(),
        )),
    }
}

/// The text of a slot; a media block's is its JSON.
fn text_of(message: &Message, slot: Slot) -> std::borrow::Cow<'_, str> {
    let blocks = message.content.as_array();
    let block = |b: usize| blocks.and_then(|blocks| blocks.get(b));
    let value = match slot {
        Slot::Content => Some(&message.content),
        Slot::Block(b) => block(b).and_then(|x| x.get("text")),
        Slot::ToolResult(b) => block(b).and_then(|x| x.get("content")),
        Slot::ToolResultBlock(b, c) => block(b)
            .and_then(|x| x.get("content"))
            .and_then(|x| x.get(c))
            .and_then(|x| x.get("text")),
        Slot::Media(b) => return block(b).map(Value::to_string).unwrap_or_default().into(),
        Slot::ToolResultMedia(b, c) => {
            return block(b)
                .and_then(|x| x.get("content"))
                .and_then(|x| x.get(c))
                .map(Value::to_string)
                .unwrap_or_default()
                .into();
        }
    };
    value.and_then(Value::as_str).unwrap_or_default().into()
}

fn set_text(message: &mut Message, slot: Slot, text: String) {
    let target = match (slot, &mut message.content) {
        (Slot::Content, content) => Some(content),
        (Slot::Block(b), Value::Array(blocks)) => blocks.get_mut(b).and_then(|x| x.get_mut("text")),
        (Slot::ToolResult(b), Value::Array(blocks)) => {
            blocks.get_mut(b).and_then(|x| x.get_mut("content"))
        }
        (Slot::ToolResultBlock(b, c), Value::Array(blocks)) => blocks
            .get_mut(b)
            .and_then(|x| x.get_mut("content"))
            .and_then(|x| x.get_mut(c))
            .and_then(|x| x.get_mut("text")),
        // A media block is replaced whole by a text block holding the marker.
        (Slot::Media(b), Value::Array(blocks)) => {
            if let Some(block) = blocks.get_mut(b) {
                *block = serde_json::json!({"type": "text", "text": text});
            }
            return;
        }
        (Slot::ToolResultMedia(b, c), Value::Array(blocks)) => {
            if let Some(block) = blocks
                .get_mut(b)
                .and_then(|x| x.get_mut("content"))
                .and_then(|x| x.get_mut(c))
            {
                *block = serde_json::json!({"type": "text", "text": text});
            }
            return;
        }
        _ => None,
    };
    if let Some(target) = target {
        *target = Value::String(text);
    }
}

/// Compresses a conversation to at most `budget` tokens; see the module docs for the policy.
pub fn compress_messages(
    messages: &[Message],
    budget: usize,
    store: &CommitStore,
    tokenizer: &Tokenizer,
) -> Result<CompressedMessages, CompressError> {
    compress_messages_keeping(messages, &default_keep(messages), budget, store, tokenizer)
}

/// The messages that stay verbatim by default: system and developer prompts and the latest
/// user turn.
fn default_keep(messages: &[Message]) -> Vec<bool> {
    let latest_user = latest_user_turn(messages);
    (0..messages.len())
        .map(|i| {
            Some(i) == latest_user || matches!(messages[i].role.as_str(), "system" | "developer")
        })
        .collect()
}

/// Compresses a conversation read by [`parse_conversation`]. A request's top-level `system`
/// prompt and `tools` stay verbatim: they count against the budget as protected text (as the
/// system message of a bare array does) and are committed as the chunks `system` and `tools`,
/// so a request and its messages alone never share a commit.
pub fn compress_conversation(
    conversation: &Conversation,
    budget: usize,
    store: &CommitStore,
    tokenizer: &Tokenizer,
) -> Result<CompressedMessages, CompressError> {
    let messages = &conversation.messages;
    let keep = default_keep(messages);
    let fixed = conversation.fixed_parts();
    let mut result = compress_core(messages, &keep, None, &fixed, budget, store, tokenizer)?;
    if conversation.envelope.is_some() {
        result.request = Some(conversation.with_messages(&result.messages));
    }
    Ok(result)
}

/// The latest message the user wrote. An Anthropic-style `user` message holding only
/// `tool_result` blocks is a tool's output, not a turn of the user's: keeping it whole kept the
/// very output that needed reducing (a 90K-token log was "the latest user turn").
fn latest_user_turn(messages: &[Message]) -> Option<usize> {
    let wrote = |m: &Message| match &m.content {
        Value::Array(blocks) => blocks
            .iter()
            .any(|b| b.get("type").and_then(Value::as_str) != Some("tool_result")),
        _ => true,
    };
    messages
        .iter()
        .rposition(|m| m.role == "user" && wrote(m))
        .or_else(|| messages.iter().rposition(|m| m.role == "user"))
}

/// As [`compress_messages`], with the caller deciding which messages stay byte-identical
/// (`keep[i]`; missing entries are not kept). The proxy uses it to also keep what a client marked
/// for a provider's prompt cache.
pub fn compress_messages_keeping(
    messages: &[Message],
    keep: &[bool],
    budget: usize,
    store: &CommitStore,
    tokenizer: &Tokenizer,
) -> Result<CompressedMessages, CompressError> {
    compress_messages_counted(messages, keep, None, budget, store, tokenizer)
}

/// [`compress_messages_keeping`] for a caller that has counted the messages already:
/// `counts[i]`, when given, is the token count of message `i`'s content when it is a string
/// (a large conversation is then not tokenised again just to be measured).
pub fn compress_messages_counted(
    messages: &[Message],
    keep: &[bool],
    counts: Option<&[usize]>,
    budget: usize,
    store: &CommitStore,
    tokenizer: &Tokenizer,
) -> Result<CompressedMessages, CompressError> {
    compress_core(messages, keep, counts, &[], budget, store, tokenizer)
}

/// The common body: `preamble` are a request's fixed parts (name, value), kept verbatim and
/// counted as protected.
fn compress_core(
    messages: &[Message],
    keep: &[bool],
    counts: Option<&[usize]>,
    preamble: &[(&str, &Value)],
    budget: usize,
    store: &CommitStore,
    tokenizer: &Tokenizer,
) -> Result<CompressedMessages, CompressError> {
    if budget == 0 {
        return Err(CompressError::ZeroBudget);
    }
    let latest_user = latest_user_turn(messages);
    let protected = |i: usize| keep.get(i).copied().unwrap_or(false);
    // (message, slot, tokens, is tool output)
    let mut all = Vec::new();
    let mut fixed = 0usize;
    let mut protected_tokens = 0usize;
    let mut preamble_chunks = Vec::new();
    for &(name, value) in preamble {
        // `system` is prompt text (a string or text blocks); `tools` are billed as their JSON.
        let (text, tokens) = match value {
            Value::String(text) => (text.clone(), tokenizer.count(text)),
            Value::Array(_) if name == "system" => {
                let as_message = Message {
                    role: "system".to_string(),
                    content: value.clone(),
                    extra: serde_json::Map::new(),
                };
                let (text_slots, other) = slots(&as_message, 0, tokenizer)?;
                let tokens = other
                    + text_slots
                        .iter()
                        .map(|&slot| tokenizer.count(&text_of(&as_message, slot)))
                        .sum::<usize>();
                (value.to_string(), tokens)
            }
            other => {
                let text = other.to_string();
                let tokens = tokenizer.count(&text);
                (text, tokens)
            }
        };
        fixed += tokens;
        protected_tokens += tokens;
        preamble_chunks.push(ChunkInput {
            chunk_id: name.to_string(),
            source: name.to_string(),
            full_text: text,
            resolution: Some(Resolution::Full),
            sent_tokens: tokens,
            full_tokens: None,
        });
    }
    for (i, message) in messages.iter().enumerate() {
        let (message_slots, other) = slots(message, i, tokenizer)?;
        fixed += other;
        if protected(i) {
            protected_tokens += other;
        }
        for slot in message_slots {
            let known = counts
                .and_then(|counts| counts.get(i).copied())
                .filter(|_| matches!(slot, Slot::Content) && message.content.is_string());
            let tokens = known.unwrap_or_else(|| tokenizer.count(&text_of(message, slot)));
            if protected(i) {
                protected_tokens += tokens;
            }
            let tool = matches!(message.role.as_str(), "tool" | "function")
                || matches!(
                    slot,
                    Slot::ToolResult(_) | Slot::ToolResultBlock(..) | Slot::ToolResultMedia(..)
                );
            all.push((i, slot, tokens, tool));
        }
    }
    if protected_tokens > budget {
        return Err(CompressError::ProtectedOverBudget {
            protected_tokens,
            budget,
        });
    }
    let original_tokens = fixed + all.iter().map(|s| s.2).sum::<usize>();
    let query = latest_user
        .map(|i| {
            slots(&messages[i], i, tokenizer)
                .map(|(s, _)| {
                    s.iter()
                        .filter(|slot| !slot.is_media())
                        .map(|&slot| text_of(&messages[i], slot).to_string())
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default()
        })
        .filter(|q| !q.is_empty());
    let mut reducible: Vec<usize> = (0..all.len()).filter(|&k| !protected(all[k].0)).collect();
    // Tool outputs first, then older turns; oldest first, the larger slot first within a message.
    reducible.sort_by_key(|&k| (!all[k].3, all[k].0, std::cmp::Reverse(all[k].2)));
    let mut out: Vec<Message> = messages.to_vec();
    let mut reduced: Vec<Option<Reduced>> = vec![None; all.len()];
    let mut total = original_tokens;
    // Short turns cost little and carry the thread of the conversation: they are only touched
    // in the last resort pass.
    const SHORT: usize = 48;
    let reducible_total: usize = reducible
        .iter()
        .map(|&k| all[k].2)
        .filter(|&t| t >= SHORT)
        .sum();
    // What the longer reducible slots may take together; each gets at least its proportional
    // share, so a large tool output is reduced, not dropped, when earlier cuts leave room.
    let available = budget.saturating_sub(total - reducible_total);
    let whole_marker = |i: usize, slot: Slot, tokens: usize, text: &str| {
        let id = slot.id(i);
        let marker = format!(
            "[… {} tokens of {} elided · recover {id}]",
            super::thousands(tokens),
            messages[i].role
        );
        let marker_tokens = tokenizer.count(&marker);
        (marker_tokens < tokens).then(|| Reduced {
            text: marker,
            tokens: marker_tokens,
            original_tokens: tokens,
            kind: ContentKind::Prose,
            parts: vec![Part {
                chunk_id: id.clone(),
                locator: format!(
                    "messages[{i}] ({}) {}",
                    messages[i].role,
                    slot_locator(slot)
                ),
                original: text.to_string(),
                resolution: None,
            }],
            code: None,
        })
    };
    for &k in &reducible {
        if total <= budget {
            break;
        }
        let (i, slot, tokens, _) = all[k];
        if tokens < SHORT {
            continue;
        }
        let text = text_of(&messages[i], slot);
        let text = text.as_ref();
        let excess = total - budget;
        let share = available * tokens / reducible_total.max(1);
        let target = tokens.saturating_sub(excess).max(share);
        if target >= tokens {
            continue;
        }
        let options = CompressOptions {
            kind: None,
            query: query.clone(),
            source: slot.id(i),
        };
        // Base64 data has nothing a reducer could keep: a media block goes whole or stays.
        let attempt = if target > 0 && !slot.is_media() {
            reduce_prefixed(
                text,
                target,
                &options,
                tokenizer,
                &format!("{}.", slot.id(i)),
                Some(tokens),
            )
            .ok()
        } else {
            None
        };
        let Some(result) = attempt.or_else(|| whole_marker(i, slot, tokens, text)) else {
            continue;
        };
        total = total - tokens + result.tokens;
        set_text(&mut out[i], slot, result.text.clone());
        reduced[k] = Some(result);
    }
    // Still over: replace whole slots by their marker, in the same order.
    for &k in &reducible {
        if total <= budget {
            break;
        }
        let (i, slot, tokens, _) = all[k];
        let current = reduced[k].as_ref().map_or(tokens, |r| r.tokens);
        let text = text_of(&messages[i], slot);
        if let Some(result) = whole_marker(i, slot, tokens, &text)
            && result.tokens < current
        {
            total = total - current + result.tokens;
            set_text(&mut out[i], slot, result.text.clone());
            reduced[k] = Some(result);
        }
    }
    if total > budget {
        return Err(CompressError::MessagesOverBudget {
            budget,
            minimum_tokens: total,
        });
    }
    let mut chunks = preamble_chunks;
    let mut elisions_parts: Vec<&Reduced> = Vec::new();
    for (k, &(i, slot, tokens, _)) in all.iter().enumerate() {
        let id = slot.id(i);
        match &reduced[k] {
            None => chunks.push(ChunkInput {
                chunk_id: id,
                source: format!("messages[{i}]"),
                full_text: text_of(&messages[i], slot).to_string(),
                resolution: Some(Resolution::Full),
                sent_tokens: tokens,
                full_tokens: None,
            }),
            Some(r) => {
                chunks.extend(r.chunk_inputs(&format!("messages[{i}]"), tokenizer));
                elisions_parts.push(r);
            }
        }
    }
    let parameters = serde_json::json!({
        "operation": "compress_messages",
        "budget": budget,
        "messages": messages.len(),
    });
    let rendered = serde_json::to_string(&out).unwrap_or_default();
    let receipt = store.commit(&chunks, parameters, &rendered, tokenizer)?;
    let elisions = elisions_parts
        .iter()
        .flat_map(|r| r.elisions(&receipt))
        .collect();
    Ok(CompressedMessages {
        messages: out,
        tokens: total,
        original_tokens,
        ctx_id: receipt.ctx_id,
        elisions,
        request: None,
    })
}

fn slot_locator(slot: Slot) -> String {
    match slot {
        Slot::Content => "content".into(),
        Slot::Block(b) => format!("content[{b}].text"),
        Slot::ToolResult(b) => format!("content[{b}].content"),
        Slot::ToolResultBlock(b, c) => format!("content[{b}].content[{c}].text"),
        Slot::Media(b) => format!("content[{b}]"),
        Slot::ToolResultMedia(b, c) => format!("content[{b}].content[{c}]"),
    }
}
