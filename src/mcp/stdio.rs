//! The stdio transport of `svc serve`: newline-delimited JSON-RPC on stdin and stdout, as
//! rmcp's own, with three differences an agent notices:
//!
//! - **Every request carried out is answered, also after stdin closes.** rmcp ended the session
//!   at end of input, and the answer of a call still running was lost although its work was
//!   done (`… | svc serve` got nothing back for a large `compress`). At end of input this
//!   transport waits until every request read has its answer written (a cancelled one needs
//!   none), then ends the session.
//! - **A request that cannot be read is answered when its id can be found.** Valid JSON of the
//!   wrong shape (`"params": []`) got `-32600` without an id, and a client matching answers by id
//!   waited forever; JSON that does not parse (a lone surrogate `\ud83d`, as JavaScript writes a
//!   string cut inside an emoji) and lines over [`MAX_LINE`] got nothing. They now get `-32600`
//!   or `-32700` with the request's id. Input with no recognisable id (not a request: garbage,
//!   notifications) is still ignored, so an echoing peer cannot start an error storm.
//! - Lines end in `\n`; a trailing `\r` and a UTF-8 byte-order mark are tolerated, as rmcp does.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use regex::Regex;
use rmcp::RoleServer;
use rmcp::model::{ClientNotification, JsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Stdin, Stdout};
use tokio::sync::Notify;

/// The longest request line read (rmcp's own limit); a longer one is answered with an error.
pub const MAX_LINE: usize = 16 * 1024 * 1024;

/// How long, after stdin closed, answers still running are waited for.
const DRAIN_LIMIT: Duration = Duration::from_secs(600);

/// Requests read whose answer is not written yet: how many per id (as JSON text; a client may
/// reuse an id while the first request runs).
#[derive(Default)]
struct InFlight {
    ids: Mutex<HashMap<String, usize>>,
    drained: Notify,
}

impl InFlight {
    fn ids(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        // A panic while holding this lock leaves a set of strings that is still valid.
        self.ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn start(&self, id: String) {
        *self.ids().entry(id).or_default() += 1;
    }

    fn finish(&self, id: &str) {
        let mut ids = self.ids();
        if let Some(count) = ids.get_mut(id) {
            *count -= 1;
            if *count == 0 {
                ids.remove(id);
            }
        }
        if ids.is_empty() {
            self.drained.notify_waiters();
        }
    }

    async fn drain(&self) {
        loop {
            let notified = self.drained.notified();
            if self.ids().is_empty() {
                return;
            }
            notified.await;
        }
    }
}

/// The stdio transport; see the module docs.
pub struct GuardedStdio {
    input: BufReader<Stdin>,
    /// The line being read. It survives a cancelled [`Transport::receive`] (rmcp polls it in a
    /// `select!`): bytes consumed from stdin are never lost.
    line: Vec<u8>,
    /// The line being read is over [`MAX_LINE`]; its head is in `line`.
    oversized: bool,
    output: Arc<tokio::sync::Mutex<Stdout>>,
    in_flight: Arc<InFlight>,
    ended: bool,
}

impl GuardedStdio {
    pub fn new() -> Self {
        Self {
            input: BufReader::new(tokio::io::stdin()),
            line: Vec::new(),
            oversized: false,
            output: Arc::new(tokio::sync::Mutex::new(tokio::io::stdout())),
            in_flight: Arc::new(InFlight::default()),
            ended: false,
        }
    }
}

impl Default for GuardedStdio {
    fn default() -> Self {
        Self::new()
    }
}

/// One line read, at most [`MAX_LINE`] bytes of it kept.
enum Line {
    Whole,
    /// Over the limit: the first bytes kept (to find an id in), the rest skipped.
    Oversized,
    End,
    Failed,
}

/// The id of a request as JSON text (`7`, `"a"`), the key of [`InFlight`].
fn id_key(id: &impl serde::Serialize) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

/// A JSON-RPC error line for `id` (JSON text, `null` when unknown).
fn error_line(id: Option<&str>, code: i64, message: &str) -> Vec<u8> {
    let mut line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":{},\"error\":{{\"code\":{code},\"message\":{}}}}}",
        id.unwrap_or("null"),
        serde_json::Value::String(message.to_string())
    )
    .into_bytes();
    line.push(b'\n');
    line
}

/// The request id in text that does not parse as JSON: the first `"id": 7` or `"id": "x"` (the
/// top-level id comes first in what clients write).
fn guessed_id(text: &[u8]) -> Option<String> {
    static ID: LazyLock<Regex> = LazyLock::new(|| {
        // A fixed pattern: compiling it cannot fail.
        #[allow(clippy::expect_used)]
        Regex::new(r#""id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")"#).expect("id pattern")
    });
    let text = String::from_utf8_lossy(&text[..text.len().min(64 * 1024)]);
    ID.captures(&text)
        .and_then(|c| c.get(1))
        .map(|m| m.as_str().to_string())
}

impl GuardedStdio {
    /// Reads until the end of a line; cancel-safe (the caller clears `line` once it is used).
    async fn read_line(&mut self) -> Line {
        loop {
            let available = match self.input.fill_buf().await {
                Ok(available) => available,
                Err(_) => return Line::Failed,
            };
            if available.is_empty() {
                return match (self.oversized, self.line.is_empty()) {
                    (true, _) => Line::Oversized,
                    // A last line without its `\n` is still a line.
                    (false, false) => Line::Whole,
                    (false, true) => Line::End,
                };
            }
            let newline = available.iter().position(|&b| b == b'\n');
            let take = newline.map_or(available.len(), |i| i + 1);
            if self.oversized {
                // Only the head was kept, to find the id in; the rest goes as it comes.
            } else if self.line.len() + take > MAX_LINE {
                self.oversized = true;
                let keep = (64 * 1024usize).saturating_sub(self.line.len()).min(take);
                self.line.extend_from_slice(&available[..keep]);
            } else {
                self.line.extend_from_slice(&available[..take]);
            }
            self.input.consume(take);
            if newline.is_some() {
                return if self.oversized {
                    Line::Oversized
                } else {
                    Line::Whole
                };
            }
        }
    }

    /// Writes `bytes` from a task of its own, so a cancelled `receive` cannot cut a reply.
    fn reply(&self, bytes: Vec<u8>) {
        let output = self.output.clone();
        tokio::spawn(async move {
            let mut output = output.lock().await;
            let _ = output.write_all(&bytes).await;
            let _ = output.flush().await;
        });
    }

    /// The message of the whole line read, or `None` after answering (or ignoring) a bad one.
    fn parse(&self) -> Option<RxJsonRpcMessage<RoleServer>> {
        let mut text: &[u8] = &self.line;
        text = text.strip_suffix(b"\n").unwrap_or(text);
        text = text.strip_suffix(b"\r").unwrap_or(text);
        text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
        if text.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let error = match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(text) {
            Ok(message) => return Some(message),
            Err(error) => error,
        };
        let reply = match serde_json::from_slice::<serde_json::Value>(text) {
            // Well-formed JSON of the wrong shape: a request (it has an id) is told so.
            Ok(value) => value
                .get("id")
                .filter(|id| !id.is_null())
                .map(|id| error_line(Some(&id_key(id)), -32600, &shape_problem(&value, &error))),
            // Not JSON: answered only when it plainly was a request with an id.
            Err(error) => guessed_id(text)
                .map(|id| error_line(Some(&id), -32700, &format!("Parse error: {error}"))),
        };
        if let Some(reply) = reply {
            self.reply(reply);
        }
        None
    }
}

/// What is wrong with a JSON object that is no JSON-RPC message this server reads.
fn shape_problem(value: &serde_json::Value, error: &serde_json::Error) -> String {
    let problem = if value.get("jsonrpc").and_then(serde_json::Value::as_str) != Some("2.0") {
        "`jsonrpc` must be \"2.0\"".to_string()
    } else if value
        .get("params")
        .is_some_and(|p| !p.is_object() && !p.is_null())
    {
        "`params` must be an object".to_string()
    } else if !value
        .get("method")
        .is_some_and(serde_json::Value::is_string)
    {
        "`method` must be a string".to_string()
    } else {
        error.to_string()
    };
    format!("Invalid request: {problem}")
}

impl Transport<RoleServer> for GuardedStdio {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let output = self.output.clone();
        let in_flight = self.in_flight.clone();
        async move {
            let answered = match &item {
                JsonRpcMessage::Response(response) => Some(id_key(&response.id)),
                JsonRpcMessage::Error(error) => error.id.as_ref().map(id_key),
                _ => None,
            };
            let mut line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            line.push(b'\n');
            {
                let mut output = output.lock().await;
                output.write_all(&line).await?;
                output.flush().await?;
            }
            if let Some(id) = answered {
                in_flight.finish(&id);
            }
            Ok(())
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if self.ended {
                if tokio::time::timeout(DRAIN_LIMIT, self.in_flight.drain())
                    .await
                    .is_err()
                {
                    eprintln!(
                        "svc serve: stdin closed; stopped waiting for {} unanswered request(s) after {} s",
                        self.in_flight.ids().values().sum::<usize>(),
                        DRAIN_LIMIT.as_secs()
                    );
                }
                return None;
            }
            let read = self.read_line().await;
            // From here to the next await nothing is cancelled: the line is used, then cleared.
            let message = match read {
                Line::End | Line::Failed => {
                    self.ended = true;
                    None
                }
                Line::Oversized => {
                    if let Some(id) = guessed_id(&self.line) {
                        self.reply(error_line(
                            Some(&id),
                            -32600,
                            &format!(
                                "Invalid request: a message line over {} MiB is not read; send less per call",
                                MAX_LINE / (1024 * 1024)
                            ),
                        ));
                    }
                    None
                }
                Line::Whole => self.parse(),
            };
            self.line.clear();
            self.oversized = false;
            let Some(message) = message else {
                continue;
            };
            match &message {
                JsonRpcMessage::Request(request) => {
                    self.in_flight.start(id_key(&request.id));
                }
                // A cancelled request is not answered.
                JsonRpcMessage::Notification(notification) => {
                    if let ClientNotification::CancelledNotification(cancelled) =
                        &notification.notification
                    {
                        self.in_flight.finish(&id_key(&cancelled.params.request_id));
                    }
                }
                _ => {}
            }
            return Some(message);
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_found_in_text_that_does_not_parse() {
        let line = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"arguments":{"content":"smile \ud83d"}}}"#;
        assert!(serde_json::from_slice::<serde_json::Value>(line).is_err());
        assert_eq!(guessed_id(line).as_deref(), Some("7"));
        assert_eq!(
            guessed_id(br#"{"id": "a\"b", "method": "x"#).as_deref(),
            Some(r#""a\"b""#)
        );
        assert_eq!(guessed_id(b"garbage"), None);
    }

    #[test]
    fn error_lines_are_json_rpc_errors() {
        let line = error_line(Some("7"), -32700, "Parse error: \"x\"");
        let value: serde_json::Value = serde_json::from_slice(&line).expect("json");
        assert_eq!(value["id"], 7);
        assert_eq!(value["error"]["code"], -32700);
        assert_eq!(value["error"]["message"], "Parse error: \"x\"");
        let value: serde_json::Value =
            serde_json::from_slice(&error_line(None, -32600, "m")).expect("json");
        assert!(value["id"].is_null());
    }
}
