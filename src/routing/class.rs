//! The task class of a request: what routing decisions and the RAVS report are grouped by.
//!
//! A class id reads `ROUTE/TOOLS/SIZE/SIGNAL`, plus `/high_risk` when the text mentions a
//! high-risk topic ([`super::risk`]), e.g. `anthropic.messages/tools/medium/diff`:
//! - ROUTE: the provider style and route (`anthropic.messages`, `openai.chat_completions`,
//!   `openai.responses`, `gemini.generate_content`);
//! - TOOLS: `tools` when the request declares tools (a non-empty top-level `tools` array) or
//!   carries tool traffic (tool_use / tool_result blocks, `tool_calls`, role `tool`,
//!   functionCall / functionResponse parts, function_call items), else `no_tools`;
//! - SIZE: characters of request text: `small` (< 16,000, about 4K tokens), `medium`
//!   (< 128,000, about 32K tokens), `large`;
//! - SIGNAL: the content of the text, first match wins: `diff` (a line starting `diff --git`
//!   or `@@ -`, or a `--- a/` line followed by `+++ b/`), `log` (at least 3 lines and 30% of the
//!   non-empty lines start with a timestamp or a level such as ERROR/WARN/INFO, or a Python
//!   traceback / Rust panic), `code` (a fenced block, or 20% of the non-empty lines look like
//!   code: end in `{` `}` `;` or start with a declaration keyword), else `prose`.
//!
//! Requests of one class are alike in what they ask of a model, so one class's record says
//! something about the next request of the class.

use serde_json::Value;

use super::risk::RiskMatcher;

/// Size buckets by characters of text.
pub const SMALL_CHARS: usize = 16_000;
pub const MEDIUM_CHARS: usize = 128_000;
/// Lines scanned for the content signal (a signal shows early; long inputs cost no more).
const SIGNAL_LINES: usize = 20_000;

/// Size of the request's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Size {
    Small,
    Medium,
    Large,
}

impl Size {
    pub fn of_chars(chars: usize) -> Size {
        if chars < SMALL_CHARS {
            Size::Small
        } else if chars < MEDIUM_CHARS {
            Size::Medium
        } else {
            Size::Large
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Size::Small => "small",
            Size::Medium => "medium",
            Size::Large => "large",
        }
    }
}

/// What the request's text mostly is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Signal {
    Diff,
    Log,
    Code,
    Prose,
}

impl Signal {
    pub fn as_str(self) -> &'static str {
        match self {
            Signal::Diff => "diff",
            Signal::Log => "log",
            Signal::Code => "code",
            Signal::Prose => "prose",
        }
    }
}

/// The class of one request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TaskClass {
    pub route: &'static str,
    pub tools: bool,
    pub size: Size,
    pub signal: Signal,
    /// The high-risk keyword found, when one was.
    pub risk_keyword: Option<String>,
}

impl TaskClass {
    pub fn high_risk(&self) -> bool {
        self.risk_keyword.is_some()
    }

    /// The class id (see the module documentation).
    pub fn id(&self) -> String {
        format!(
            "{}/{}/{}/{}{}",
            self.route,
            if self.tools { "tools" } else { "no_tools" },
            self.size.as_str(),
            self.signal.as_str(),
            if self.high_risk() { "/high_risk" } else { "" }
        )
    }
}

/// Classifies a request of `route` from its JSON body and its text parts.
pub fn classify(
    route: &'static str,
    request: &Value,
    texts: &[&str],
    risk: &RiskMatcher,
) -> TaskClass {
    let chars = texts.iter().map(|t| t.chars().count()).sum();
    let tool_texts = tool_texts(request);
    TaskClass {
        route,
        tools: uses_tools(request),
        size: Size::of_chars(chars),
        signal: signal(texts),
        risk_keyword: risk.find(
            texts
                .iter()
                .copied()
                .chain(tool_texts.iter().map(String::as_str)),
        ),
    }
}

/// What the request's tools say and do, for the high-risk check: the declared tools (names,
/// descriptions, parameters) and every tool call's name and arguments. Text parts alone missed
/// a tool `reset_password` "disables MFA" and a call running `rm -rf /`, so such requests were
/// routed. Identifiers are split at `_`, so `reset_password` reads as words.
fn tool_texts(request: &Value) -> Vec<String> {
    fn calls(value: &Value, depth: usize, out: &mut Vec<String>) {
        // Requests nest a few levels; a bound keeps a hostile body from recursing deep.
        if depth > 32 {
            return;
        }
        match value {
            Value::Object(map) => {
                for key in ["tool_calls", "functionCall", "function_call"] {
                    if let Some(call) = map.get(key) {
                        out.push(call.to_string());
                    }
                }
                let kind = map.get("type").and_then(Value::as_str);
                if matches!(kind, Some("tool_use" | "function_call" | "server_tool_use")) {
                    for key in ["name", "input", "arguments"] {
                        if let Some(part) = map.get(key) {
                            out.push(part.to_string());
                        }
                    }
                }
                for child in map.values() {
                    calls(child, depth + 1, out);
                }
            }
            Value::Array(items) => {
                for item in items {
                    calls(item, depth + 1, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Some(tools) = request.get("tools") {
        out.push(tools.to_string());
    }
    if let Some(messages) = request.get("messages").or_else(|| request.get("input")) {
        calls(messages, 0, &mut out);
    }
    if let Some(contents) = request.get("contents") {
        calls(contents, 0, &mut out);
    }
    for text in &mut out {
        *text = text.replace('_', " ");
    }
    out
}

/// Tools declared or tool traffic anywhere in the request.
pub fn uses_tools(request: &Value) -> bool {
    if request
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| !tools.is_empty())
    {
        return true;
    }
    tool_traffic(request, 0)
}

fn tool_traffic(value: &Value, depth: usize) -> bool {
    // Requests nest a few levels (messages → content → block); deeper is data, not protocol.
    if depth > 6 {
        return false;
    }
    match value {
        Value::Object(map) => {
            if [
                "tool_calls",
                "functionCall",
                "functionResponse",
                "tool_call_id",
            ]
            .iter()
            .any(|key| map.contains_key(*key))
            {
                return true;
            }
            let tagged = |key: &str, values: &[&str]| {
                map.get(key)
                    .and_then(Value::as_str)
                    .is_some_and(|v| values.contains(&v))
            };
            if tagged(
                "type",
                &[
                    "tool_use",
                    "tool_result",
                    "function_call",
                    "function_call_output",
                ],
            ) || tagged("role", &["tool", "function"])
            {
                return true;
            }
            map.values().any(|v| tool_traffic(v, depth + 1))
        }
        Value::Array(items) => items.iter().any(|v| tool_traffic(v, depth + 1)),
        _ => false,
    }
}

/// A line that starts like a log record: the compressor's test (one rule for both, so a log
/// the compressor reduces as logs is a log task here too).
fn log_line(line: &str) -> bool {
    crate::context::compress::logs::starts_like_log_record(line)
}

const CODE_STARTS: &[&str] = &[
    "fn ",
    "pub ",
    "def ",
    "class ",
    "import ",
    "from ",
    "#include",
    "function ",
    "const ",
    "let ",
    "var ",
    "return ",
    "use ",
    "package ",
    "func ",
    "impl ",
    "struct ",
    "if (",
    "for (",
    "while (",
    "} else",
];

/// The content signal of the texts (see the module documentation).
pub fn signal(texts: &[&str]) -> Signal {
    let lines: Vec<&str> = texts
        .iter()
        .flat_map(|t| t.lines())
        .take(SIGNAL_LINES)
        .collect();
    let mut previous_minus = false;
    for line in &lines {
        if line.starts_with("diff --git") || line.starts_with("@@ -") {
            return Signal::Diff;
        }
        if previous_minus && line.starts_with("+++ ") {
            return Signal::Diff;
        }
        previous_minus = line.starts_with("--- ");
    }
    let content: Vec<&str> = lines
        .iter()
        .map(|l| l.trim_end())
        .filter(|l| !l.trim().is_empty())
        .collect();
    let all = texts
        .iter()
        .any(|t| t.contains("Traceback (most recent call last)") || t.contains("panicked at"));
    let log_lines = content.iter().filter(|l| log_line(l)).count();
    if all || (log_lines >= 3 && log_lines * 10 >= content.len() * 3) {
        return Signal::Log;
    }
    if texts.iter().any(|t| t.contains("```")) {
        return Signal::Code;
    }
    let code_lines = content
        .iter()
        .filter(|l| {
            let trimmed = l.trim_start();
            l.ends_with('{')
                || l.ends_with('}')
                || l.ends_with(';')
                || CODE_STARTS.iter().any(|s| trimmed.starts_with(s))
        })
        .count();
    if code_lines >= 2 && code_lines * 5 >= content.len() {
        return Signal::Code;
    }
    Signal::Prose
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn signals() {
        assert_eq!(
            signal(&["diff --git a/x b/x\n@@ -1 +1 @@\n-a\n+b"]),
            Signal::Diff
        );
        assert_eq!(signal(&["--- a/x\n+++ b/x\n"]), Signal::Diff);
        let log = "2026-11-23T10:00:00Z INFO start\n2026-11-23T10:00:01Z WARN slow\n2026-11-23T10:00:02Z ERROR boom\nwhat failed?";
        assert_eq!(signal(&[log]), Signal::Log);
        // The compressor's rule (found by a probe: date-only stamps were prose here).
        let dated =
            "2024-01-01 INFO step 1 ok\n2024-01-01 INFO step 2 ok\n2024-01-01 ERROR boom\nwhy?";
        assert_eq!(signal(&[dated]), Signal::Log);
        assert_eq!(
            signal(&["why does this fail?\n```rust\nfn main() {}\n```"]),
            Signal::Code
        );
        assert_eq!(signal(&["fn main() {\n    let x = 1;\n}\n"]), Signal::Code);
        assert_eq!(
            signal(&["Summarise the meeting notes in three bullet points."]),
            Signal::Prose
        );
    }

    #[test]
    fn class_ids_name_route_tools_size_signal_and_risk() {
        let risk = RiskMatcher::new(&[]);
        let plain = json!({"model": "gpt-5", "messages": [{"role": "user", "content": "hi"}]});
        let class = classify(
            "openai.chat_completions",
            &plain,
            &["Summarise this text."],
            &risk,
        );
        assert_eq!(class.id(), "openai.chat_completions/no_tools/small/prose");
        let tools = json!({"messages": [{"role": "user", "content": [{"type": "tool_result", "content": "ok"}]}]});
        let big = "word ".repeat(40_000);
        let class = classify(
            "anthropic.messages",
            &tools,
            &[&big, "reset the password"],
            &risk,
        );
        assert_eq!(class.id(), "anthropic.messages/tools/large/prose/high_risk");
        assert_eq!(class.risk_keyword.as_deref(), Some("password"));
        let declared = json!({"tools": [{"name": "f"}], "contents": []});
        assert!(uses_tools(&declared));
        assert!(!uses_tools(&json!({"tools": [], "contents": []})));
    }

    /// Regression (found by probing): the check read text parts only, so a declared tool that
    /// resets passwords and a call running `rm -rf /` were routed to the cheaper model.
    #[test]
    fn tools_and_tool_calls_are_read_for_risk() {
        let risk = RiskMatcher::new(&[]);
        let ask = |request: Value| {
            classify(
                "openai.chat_completions",
                &request,
                &["Please help."],
                &risk,
            )
            .risk_keyword
        };
        let declared = json!({"tools": [{"type": "function", "function": {"name": "reset_password", "description": "Resets a user's login"}}], "messages": []});
        assert!(ask(declared).is_some());
        let called = json!({"messages": [{"role": "assistant", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{\"cmd\": \"rm -rf / && psql -c \\\"DROP TABLE users\\\"\"}"}}]}]});
        assert!(ask(called).is_some());
        let anthropic = json!({"messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "run", "input": {"sql": "alter table users drop column x"}}]}]});
        assert!(ask(anthropic).is_some());
        let harmless = json!({"tools": [{"name": "get_weather", "description": "Weather for a city"}], "messages": []});
        assert_eq!(ask(harmless), None);
    }
}
