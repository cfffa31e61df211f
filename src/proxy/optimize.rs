//! Provider-neutral prompt optimisation: a provider module lists the text parts of a request
//! ([`Unit`]s: where each string sits, whose turn it is, whether it must stay byte-stable), this
//! module compresses them with the context engine ([`compress_messages_keeping`]) and splices the
//! new strings into the received bytes. Everything else in the request stays byte-identical.
//!
//! Invariants (each tested): a request whose text is under the budget is forwarded unchanged;
//! the forwarded text never has more tokens than the received text (when compression does not
//! gain, the original is forwarded); every elision is committed and recoverable by
//! `svc context recover CTX_ID CHUNK` (chunk `mK` is the K-th text part of the request, in the
//! order the provider module lists them).

use serde::Serialize;
use serde_json::Value;

use super::spans::{self, Path};
use crate::context::CommitStore;
use crate::context::compress::{CompressError, Message, compress_messages_counted};
use crate::tokens::Tokenizer;

/// Whose text a unit is. Tool output is compressed first, then older turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// One text part of a request.
#[derive(Debug, Clone)]
pub struct Unit {
    pub path: Path,
    pub role: Role,
    /// Must stay byte-identical (system prompt, latest user turn, cached prefix).
    pub keep: bool,
    /// Index of the turn (message) it belongs to, for "latest user turn" rules.
    pub turn: usize,
}

/// Why a request was forwarded as received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Unchanged {
    /// Its text fits the budget.
    UnderBudget,
    /// Optimisation is paused (`POST /svc/optimization/pause`).
    Paused,
    /// Compression did not make it smaller (everything long is protected).
    NoGain,
    /// The route is forwarded as is (model lists, token counting, …).
    NotAPrompt,
}

impl Unchanged {
    pub fn as_str(self) -> &'static str {
        match self {
            Unchanged::UnderBudget => "under_budget",
            Unchanged::Paused => "paused",
            Unchanged::NoGain => "no_gain",
            Unchanged::NotAPrompt => "not_a_prompt",
        }
    }
}

/// What the optimiser did.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Forward the received bytes.
    Unchanged { reason: Unchanged, tokens: usize },
    /// The request could not be rewritten safely; forward the received bytes and say why.
    Skipped { reason: String },
    /// Forward `body` instead.
    Rewritten {
        body: String,
        ctx_id: String,
        tokens_before: usize,
        tokens_after: usize,
        elisions: usize,
    },
}

impl Outcome {
    /// Value of the `X-Svc-Optimization` response header.
    pub fn header(&self) -> String {
        match self {
            Outcome::Unchanged { reason, .. } => format!("unchanged; reason={}", reason.as_str()),
            Outcome::Skipped { reason } => format!("skipped; reason={reason}"),
            Outcome::Rewritten { .. } => "rewritten".to_string(),
        }
    }

    /// (tokens received, tokens forwarded) of the request's text, when counted.
    pub fn tokens(&self) -> Option<(usize, usize)> {
        match self {
            Outcome::Unchanged { tokens, .. } => Some((*tokens, *tokens)),
            Outcome::Skipped { .. } => None,
            Outcome::Rewritten {
                tokens_before,
                tokens_after,
                ..
            } => Some((*tokens_before, *tokens_after)),
        }
    }
}

/// The text of every unit, in order.
pub fn texts<'a>(request: &'a Value, units: &[Unit]) -> Vec<&'a str> {
    units
        .iter()
        .map(|unit| spans::get_str(request, &unit.path).unwrap_or_default())
        .collect()
}

/// Compresses the units of `request` (whose exact bytes are `body`) to `budget` tokens.
pub fn optimize(
    body: &str,
    request: &Value,
    units: &[Unit],
    budget: usize,
    store: &CommitStore,
    tokenizer: &Tokenizer,
) -> Outcome {
    let texts = texts(request, units);
    let counts: Vec<usize> = texts.iter().map(|text| tokenizer.count(text)).collect();
    let tokens_before: usize = counts.iter().sum();
    if tokens_before <= budget {
        return Outcome::Unchanged {
            reason: Unchanged::UnderBudget,
            tokens: tokens_before,
        };
    }
    let messages: Vec<Message> = units
        .iter()
        .zip(&texts)
        .map(|(unit, text)| Message::text(unit.role.as_str(), text))
        .collect();
    let keep: Vec<bool> = units.iter().map(|unit| unit.keep).collect();
    // When the budget cannot be met, compress as far as the engine can: the minimum it reports
    // becomes the target. When the protected parts alone exceed it, the rest still gets the
    // budget on top of them: with a target of the protected size, nothing was left for the
    // others, and a tool output (a log with its one error line) was elided whole.
    let mut target = budget.max(1);
    let mut compressed = None;
    for _ in 0..3 {
        match compress_messages_counted(&messages, &keep, Some(&counts), target, store, tokenizer) {
            Ok(result) => {
                compressed = Some(result);
                break;
            }
            Err(CompressError::ProtectedOverBudget {
                protected_tokens, ..
            }) => target = (protected_tokens + budget).max(target + 1),
            Err(CompressError::MessagesOverBudget { minimum_tokens, .. }) => {
                target = minimum_tokens.max(target + 1)
            }
            Err(error) => {
                return Outcome::Skipped {
                    reason: format!("compress_error ({error})"),
                };
            }
        }
    }
    let Some(compressed) = compressed else {
        return Outcome::Unchanged {
            reason: Unchanged::NoGain,
            tokens: tokens_before,
        };
    };
    if compressed.tokens >= tokens_before {
        return Outcome::Unchanged {
            reason: Unchanged::NoGain,
            tokens: tokens_before,
        };
    }
    let spans = match spans::string_spans(body) {
        Ok(spans) => spans,
        Err(error) => {
            return Outcome::Skipped {
                reason: format!("unscannable_json ({error})"),
            };
        }
    };
    let mut edits = Vec::new();
    for ((unit, text), message) in units.iter().zip(&texts).zip(&compressed.messages) {
        let new_text = message.content.as_str().unwrap_or_default();
        if new_text == *text {
            continue;
        }
        if unit.keep {
            // compress_messages_keeping never touches kept messages; refuse rather than break a
            // cache prefix if that ever changes.
            return Outcome::Skipped {
                reason: "kept_part_changed".to_string(),
            };
        }
        let Some(range) = spans.get(&unit.path) else {
            return Outcome::Skipped {
                reason: "text_part_not_found".to_string(),
            };
        };
        edits.push((range.clone(), new_text.to_string()));
    }
    // Every message is one string, so the compressor's total is the forwarded text's count.
    let tokens_after = compressed.tokens;
    if tokens_after >= tokens_before {
        return Outcome::Unchanged {
            reason: Unchanged::NoGain,
            tokens: tokens_before,
        };
    }
    Outcome::Rewritten {
        body: spans::splice(body, edits),
        ctx_id: compressed.ctx_id,
        tokens_before,
        tokens_after,
        elisions: compressed.elisions.len(),
    }
}

/// Marks what must stay byte-stable: system text, every part of the latest user turn, and the
/// latest user-written text anywhere (in an agent loop the latest user turn is often only tool
/// results; the task is the user text before them, and it must never become a pointer).
pub fn mark_kept(units: &mut [Unit], latest_user_turn: Option<usize>) {
    let task = units.iter().rposition(|unit| unit.role == Role::User);
    for (index, unit) in units.iter_mut().enumerate() {
        if unit.role == Role::System || Some(unit.turn) == latest_user_turn || Some(index) == task {
            unit.keep = true;
        }
    }
}
