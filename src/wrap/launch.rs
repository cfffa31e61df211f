//! Launch agents: the variables each tool really reads for its provider endpoint, and the
//! program to run. The proxy serves Anthropic at its root (`/v1/messages`), OpenAI under `/v1`
//! and Gemini under `/v1beta`, so each variable gets the form its tool expects.
//!
//! Sources, per agent:
//! - claude: `ANTHROPIC_BASE_URL`, the root without `/v1` (Claude Code docs, "LLM gateway
//!   configuration" and the environment-variable list of "Settings").
//! - codex: `OPENAI_BASE_URL` with `/v1`, read by the built-in `openai` provider for REST calls
//!   (openai/codex `codex-rs` model-provider info; github/gh-aw issue 27710 notes that its
//!   Responses WebSocket transport ignores it, so svc sees only the REST calls).
//! - aider: `OPENAI_API_BASE` with `/v1` (aider docs, "OpenAI compatible APIs") and
//!   `ANTHROPIC_BASE_URL` for Claude models, which aider's LiteLLM layer reads.
//! - gemini: `GOOGLE_GEMINI_BASE_URL`, the root, passed to the Google GenAI SDK (gemini-cli
//!   environment documentation; used as `GOOGLE_GEMINI_BASE_URL=… gemini` by gateways).
//! - qwen: `OPENAI_BASE_URL` with `/v1` in its OpenAI-compatible auth mode (Qwen Code docs,
//!   "Authentication": environment variables). Qwen OAuth sessions do not use it.
//! - opencode: no base-URL variable; `OPENCODE_CONFIG_CONTENT` is inline config merged last
//!   (opencode docs, config precedence), carrying `provider.<id>.options.baseURL` with `/v1` as
//!   the AI SDK providers expect (opencode provider docs). A value already in the environment is
//!   kept and merged into.
//! - crush: its provider catalogue (charmbracelet/catwalk) sets `api_endpoint` to
//!   `$ANTHROPIC_API_ENDPOINT` and `$OPENAI_API_ENDPOINT`; both take `/v1`, as the Anthropic-
//!   and OpenAI-compatible `base_url` examples of the crush README do.
//! - hermes: `OPENAI_BASE_URL` with `/v1` for its custom OpenAI-compatible provider (Hermes docs,
//!   "Configuration": `.env` is the fallback; a `model.base_url` in `~/.hermes/config.yaml`
//!   takes precedence, which svc does not change).
//! - pi: reads endpoints only from `~/.pi/agent/models.json` (`$PI_CODING_AGENT_DIR` when set);
//!   a provider entry without `models` overrides the built-in provider's `baseUrl` (pi docs,
//!   "Custom Models": overriding built-in providers). svc merges `baseUrl` for anthropic
//!   (root), openai (`/v1`) and google (`/v1beta`) into that file, with a backup; this persists.
//! - ollama: a provider, not a client. Wrapping it puts svc in front of it: a proxy started by
//!   wrap forwards its OpenAI-style routes and its Anthropic-style routes to the Ollama server
//!   (`$OLLAMA_HOST`, default http://127.0.0.1:11434; Ollama serves `/v1/chat/completions` and
//!   `/v1/messages`), and clients use http://127.0.0.1:<port>/v1 instead of :11434/v1. `ollama
//!   ARGS` then runs as usual (e.g. `svc wrap ollama -- serve`).

use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::dirs::Dirs;
use super::jsonc::Syntax;
use super::mcp_config::FileEdit;
use super::{WrapError, find};

/// Default port of `svc proxy`.
pub const DEFAULT_PORT: u16 = crate::proxy::server::DEFAULT_PORT;

/// How to launch one agent.
#[derive(Debug, Clone)]
pub struct LaunchPlan {
    /// The program on PATH.
    pub program: &'static str,
    /// How to install it when it is missing.
    pub install: &'static str,
    /// Variables set for the program.
    pub env: Vec<(String, String)>,
    /// A config file to merge before launching (pi).
    pub config: Option<FileEdit>,
    /// Flags for a proxy that wrap starts (ollama: the upstreams).
    pub proxy_args: Vec<String>,
    /// What a running proxy must already do for this agent, said when wrap reuses one.
    pub reuse_note: Option<String>,
    /// Limits of the wrapping the user should know about.
    pub notes: Vec<String>,
}

/// `http://127.0.0.1:PORT`.
pub fn proxy_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}")
}

/// The plan for `slug` with the proxy on `port`; `var` reads the current environment.
pub fn plan(
    slug: &str,
    port: u16,
    dirs: &Dirs,
    var: &dyn Fn(&str) -> Option<String>,
) -> Result<LaunchPlan, WrapError> {
    let agent = find(slug)?;
    let root = proxy_url(port);
    let v1 = format!("{root}/v1");
    let pair = |name: &str, value: &str| (name.to_string(), value.to_string());
    let mut plan = LaunchPlan {
        program: "",
        install: "",
        env: Vec::new(),
        config: None,
        proxy_args: Vec::new(),
        reuse_note: None,
        notes: Vec::new(),
    };
    match agent.slug {
        "claude" => {
            plan.program = "claude";
            plan.install = "npm install -g @anthropic-ai/claude-code";
            plan.env = vec![pair("ANTHROPIC_BASE_URL", &root)];
        }
        "codex" => {
            plan.program = "codex";
            plan.install = "npm install -g @openai/codex";
            plan.env = vec![pair("OPENAI_BASE_URL", &v1)];
            plan.notes = vec![
                "codex's Responses WebSocket transport does not follow OPENAI_BASE_URL; svc sees its REST calls".into(),
            ];
        }
        "aider" => {
            plan.program = "aider";
            plan.install = "python -m pip install aider-install && aider-install";
            plan.env = vec![
                pair("OPENAI_API_BASE", &v1),
                pair("ANTHROPIC_BASE_URL", &root),
            ];
        }
        "gemini" => {
            plan.program = "gemini";
            plan.install = "npm install -g @google/gemini-cli";
            plan.env = vec![pair("GOOGLE_GEMINI_BASE_URL", &root)];
        }
        "qwen" => {
            plan.program = "qwen";
            plan.install = "npm install -g @qwen-code/qwen-code";
            plan.env = vec![pair("OPENAI_BASE_URL", &v1)];
            plan.notes = vec![
                "qwen uses it in its OpenAI-compatible (API key) mode, not with Qwen OAuth".into(),
            ];
        }
        "opencode" => {
            plan.program = "opencode";
            plan.install = "npm install -g opencode-ai";
            let content = opencode_config(var("OPENCODE_CONFIG_CONTENT").as_deref(), &v1)?;
            plan.env = vec![pair("OPENCODE_CONFIG_CONTENT", &content)];
        }
        "crush" => {
            plan.program = "crush";
            plan.install = "npm install -g @charmland/crush";
            plan.env = vec![
                pair("ANTHROPIC_API_ENDPOINT", &v1),
                pair("OPENAI_API_ENDPOINT", &v1),
            ];
        }
        "hermes" => {
            plan.program = "hermes";
            plan.install =
                "see https://hermes-agent.nousresearch.com/docs/getting-started/installation";
            plan.env = vec![pair("OPENAI_BASE_URL", &v1)];
            plan.notes = vec![
                "hermes uses it for its custom OpenAI-compatible provider; a model.base_url in ~/.hermes/config.yaml takes precedence".into(),
            ];
        }
        "pi" => {
            plan.program = "pi";
            plan.install = "npm install -g @mariozechner/pi-coding-agent";
            let dir = match var("PI_CODING_AGENT_DIR").filter(|v| !v.is_empty()) {
                Some(dir) => PathBuf::from(dir),
                None => dirs.home()?.join(".pi").join("agent"),
            };
            let base = |provider: &str, url: String| {
                (
                    vec![
                        "providers".to_string(),
                        provider.to_string(),
                        "baseUrl".to_string(),
                    ],
                    Value::String(url),
                )
            };
            plan.config = Some(FileEdit {
                path: dir.join("models.json"),
                syntax: Syntax::Json,
                sets: vec![
                    base("anthropic", root.clone()),
                    base("openai", v1.clone()),
                    base("google", format!("{root}/v1beta")),
                ],
            });
            plan.notes = vec![
                "pi reads endpoints only from models.json, so the change stays after pi exits; its .svc-backup is the previous file".into(),
            ];
        }
        "ollama" => {
            plan.program = "ollama";
            plan.install = "see https://ollama.com/download";
            let upstream = ollama_url(var("OLLAMA_HOST").as_deref());
            plan.proxy_args = vec![
                "--upstream-openai".into(),
                upstream.clone(),
                "--upstream-anthropic".into(),
                upstream.clone(),
            ];
            plan.env = vec![
                pair("SVC_UPSTREAM_OPENAI", &upstream),
                pair("SVC_UPSTREAM_ANTHROPIC", &upstream),
            ];
            plan.notes = vec![format!(
                "clients of Ollama's OpenAI API use {v1} instead of {upstream}/v1 to go through svc"
            )];
            plan.reuse_note = Some(format!(
                "a proxy already listens on port {port}; it keeps the upstreams it was started with. For Ollama it needs --upstream-openai {upstream} --upstream-anthropic {upstream} (stop it, or pick another --port)"
            ));
        }
        _ => {
            return Err(WrapError::WrongGroup {
                slug: agent.slug.to_string(),
                group: agent.group.name(),
                what: agent.does,
            });
        }
    }
    Ok(plan)
}

/// `OPENCODE_CONFIG_CONTENT` with the proxy as the anthropic and openai base URL, merged into
/// the value already in the environment.
fn opencode_config(existing: Option<&str>, v1: &str) -> Result<String, WrapError> {
    let mut config = match existing.filter(|v| !v.trim().is_empty()) {
        None => Value::Object(Map::new()),
        Some(text) => serde_json::from_str::<Value>(text)
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| {
                WrapError::Environment(
                    "OPENCODE_CONFIG_CONTENT is set but is not a JSON object; fix or unset it so svc can add the proxy's baseURL".into(),
                )
            })?,
    };
    for provider in ["anthropic", "openai"] {
        let mut cursor = &mut config;
        for key in ["provider", provider, "options"] {
            let Value::Object(map) = cursor else {
                return Err(WrapError::Environment(format!(
                    "OPENCODE_CONFIG_CONTENT has a non-object where provider.{provider}.options should be; fix or unset it"
                )));
            };
            cursor = map.entry(key).or_insert_with(|| json!({}));
        }
        let Value::Object(options) = cursor else {
            return Err(WrapError::Environment(format!(
                "OPENCODE_CONFIG_CONTENT: provider.{provider}.options is not an object; fix or unset it"
            )));
        };
        options.insert("baseURL".into(), Value::String(v1.to_string()));
    }
    Ok(config.to_string())
}

/// The Ollama server's URL from `OLLAMA_HOST` (`host`, `host:port` or a URL; default
/// 127.0.0.1:11434). A bind-all address means this machine.
pub fn ollama_url(host: Option<&str>) -> String {
    let host = host
        .map(str::trim)
        .filter(|h| !h.is_empty())
        .unwrap_or("127.0.0.1:11434");
    let (scheme, rest) = match host.split_once("://") {
        Some((scheme, rest)) => (scheme, rest),
        None => ("http", host),
    };
    let rest = rest.trim_end_matches('/');
    let rest = rest.replace("0.0.0.0", "127.0.0.1");
    let has_port = rest
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok());
    if has_port || scheme == "https" {
        format!("{scheme}://{rest}")
    } else {
        format!("{scheme}://{rest}:11434")
    }
}

/// The program's path on `path` (a PATH value), if it is there and executable.
pub fn which(program: &str, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    let path = path?;
    std::env::split_paths(path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &std::path::Path) -> bool {
    let Ok(meta) = std::fs::metadata(path) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.is_file() && meta.permissions().mode() & 0o111 != 0
    }
    #[cfg(not(unix))]
    {
        meta.is_file()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opencode_keeps_the_users_inline_config() {
        let merged = opencode_config(
            Some(r#"{"lsp": true, "provider": {"openai": {"options": {"timeout": 5}}}}"#),
            "http://127.0.0.1:9/v1",
        )
        .expect("merges");
        let merged: Value = serde_json::from_str(&merged).expect("json");
        assert_eq!(
            merged,
            json!({"lsp": true, "provider": {
                "openai": {"options": {"timeout": 5, "baseURL": "http://127.0.0.1:9/v1"}},
                "anthropic": {"options": {"baseURL": "http://127.0.0.1:9/v1"}}}})
        );
        assert!(opencode_config(Some("[1]"), "x").is_err());
        assert!(opencode_config(Some(r#"{"provider": 3}"#), "x").is_err());
    }

    #[test]
    fn ollama_host_forms() {
        assert_eq!(ollama_url(None), "http://127.0.0.1:11434");
        assert_eq!(ollama_url(Some("0.0.0.0")), "http://127.0.0.1:11434");
        assert_eq!(ollama_url(Some("gpu-box:8080")), "http://gpu-box:8080");
        assert_eq!(
            ollama_url(Some("https://ollama.lan/")),
            "https://ollama.lan"
        );
    }
}
