//! Snippet agents: tools whose settings live in a UI, in a file another program manages, or in
//! a language svc does not edit (YAML, TOML, Lisp). svc prints where to paste what. Where no
//! location or setting could be confirmed, the snippet says so and points at the tool's docs
//! instead of inventing one.
//!
//! Sources: Cline docs ("Configuring MCP servers": `cline_mcp_settings.json` in the extension's
//! global storage); Roo Code docs ("Using MCP in Roo Code": global `mcp_settings.json`, project
//! `.roo/mcp.json`); Continue docs ("MCP": `mcpServers` in `config.yaml`); Amp manual
//! (`amp.mcpServers` in `~/.config/amp/settings.json`); Kiro docs ("MCP configuration": user
//! `~/.kiro/settings/mcp.json`); Antigravity (`~/.gemini/antigravity/mcp_config.json`, reached
//! from "Manage MCP servers" → "View raw config"); Amazon Q Developer docs ("MCP configuration":
//! `~/.aws/amazonq/mcp.json`); JetBrains AI Assistant docs ("Model Context Protocol": add a
//! server as JSON); Tabby docs ("Model configuration": `[model.chat.http]` with
//! `kind = "openai/chat"` and `api_endpoint`); gptel README (`gptel-make-openai` with `:host`,
//! `:protocol`, `:endpoint`); mcp.el README (`mcp-hub-servers`); mcphub.nvim docs
//! (`~/.config/mcphub/servers.json`, `mcpServers`). Qoder, Trae and Verdent take the usual
//! `mcpServers` JSON in their MCP settings pages, whose file location svc could not confirm.
//! Cody, Fitten Code, Tabnine and Supermaven: no documented setting for a custom model
//! endpoint or a local MCP server was found.

use super::launch::proxy_url;
use super::{WrapError, find};

/// What to paste where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snippet {
    /// The file (or settings page) to edit.
    pub file: String,
    /// The field inside it.
    pub field: String,
    /// The text to paste.
    pub text: String,
    /// Anything else the user needs to know.
    pub note: Option<String>,
}

fn mcp_json(container: &str, exe: &str) -> String {
    let exe = serde_json::Value::String(exe.to_string());
    format!(
        "{{\n  \"{container}\": {{\n    \"svc\": {{\n      \"command\": {exe},\n      \"args\": [\"serve\"]\n    }}\n  }}\n}}"
    )
}

fn snippet(file: &str, field: &str, text: String, note: Option<&str>) -> Snippet {
    Snippet {
        file: file.to_string(),
        field: field.to_string(),
        text,
        note: note.map(str::to_string),
    }
}

/// VS Code's user folder, where extensions keep their global storage.
const VSCODE_USER: &str = "<VS Code user folder: ~/.config/Code/User on Linux, ~/Library/Application Support/Code/User on macOS, %APPDATA%\\Code\\User on Windows>";

const NOT_CONFIRMED: &str = "svc could not confirm a setting of this tool for a custom model endpoint or a local MCP server; see the tool's docs for \"MCP\" or \"custom OpenAI-compatible endpoint\". If it has one, the endpoint is the proxy URL above and the MCP server is the command above.";

/// The snippet for `slug`; `exe` is the svc binary, `port` the proxy's.
pub fn for_agent(slug: &str, exe: &str, port: u16) -> Result<Snippet, WrapError> {
    let agent = find(slug)?;
    let proxy = proxy_url(port);
    let exe_json = serde_json::Value::String(exe.to_string());
    let mcp = mcp_json("mcpServers", exe);
    let fallback = format!(
        "MCP server: command {exe_json}, args [\"serve\"] (stdio)\nOpenAI-compatible endpoint: {proxy}/v1   Anthropic endpoint: {proxy}"
    );
    let s = match agent.slug {
        "cline" => snippet(
            &format!(
                "{VSCODE_USER}/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json (Cline → MCP Servers → Configure opens it)"
            ),
            "mcpServers.svc",
            mcp,
            None,
        ),
        "roo" => snippet(
            &format!(
                "global: {VSCODE_USER}/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json; project: .roo/mcp.json"
            ),
            "mcpServers.svc",
            mcp,
            None,
        ),
        "continue" => snippet(
            "~/.continue/config.yaml",
            "mcpServers (a list)",
            format!(
                "mcpServers:\n  - name: svc\n    command: {exe_json}\n    args:\n      - serve"
            ),
            None,
        ),
        "amp" => snippet(
            "~/.config/amp/settings.json",
            "amp.mcpServers.svc",
            format!(
                "{{\n  \"amp.mcpServers\": {{\n    \"svc\": {{\n      \"command\": {exe_json},\n      \"args\": [\"serve\"]\n    }}\n  }}\n}}"
            ),
            None,
        ),
        "kiro" => snippet(
            "~/.kiro/settings/mcp.json (workspace: .kiro/settings/mcp.json)",
            "mcpServers.svc",
            mcp,
            None,
        ),
        "antigravity" => snippet(
            "~/.gemini/antigravity/mcp_config.json (Agent panel → Manage MCP servers → View raw config)",
            "mcpServers.svc",
            mcp,
            None,
        ),
        "amazonq" => snippet(
            "~/.aws/amazonq/mcp.json (workspace: .amazonq/mcp.json)",
            "mcpServers.svc",
            mcp,
            None,
        ),
        "qoder" => snippet(
            "Qoder Settings → MCP → Add (JSON); the file behind it is not documented: see the tool's docs for its location",
            "mcpServers.svc",
            mcp,
            None,
        ),
        "trae" => snippet(
            "Trae: AI panel → Settings → MCP → Add → Add Manually; see the tool's docs for the file behind it",
            "mcpServers.svc",
            mcp,
            None,
        ),
        "verdent" => snippet(
            "Verdent: its MCP settings; svc could not confirm the location: see the tool's docs for MCP servers",
            "mcpServers.svc (the common shape)",
            mcp,
            None,
        ),
        "jetbrains" => snippet(
            "Settings | Tools | AI Assistant | Model Context Protocol (MCP) → Add → As JSON",
            "mcpServers.svc",
            mcp,
            None,
        ),
        "helix" => snippet(
            "~/.config/helix/languages.toml",
            "the endpoint setting of the AI language server you use (e.g. lsp-ai's chat endpoint)",
            format!("{proxy}/v1/chat/completions"),
            Some(
                "Helix has no AI client or MCP support of its own; see your language server's docs for its endpoint key.",
            ),
        ),
        "tabby" => snippet(
            "~/.tabby/config.toml (the Tabby server's)",
            "[model.chat.http]",
            format!(
                "[model.chat.http]\nkind = \"openai/chat\"\nmodel_name = \"<your model>\"\napi_endpoint = \"{proxy}/v1\"\napi_key = \"<your provider key>\""
            ),
            None,
        ),
        "twinny" => snippet(
            "twinny: Providers panel → add a provider (type openai)",
            "hostname / port / path",
            format!(
                "hostname: 127.0.0.1\nport: {port}\npath: /v1/chat/completions\nprotocol: http"
            ),
            None,
        ),
        "sublime" => snippet(
            "the settings of the OpenAI-compatible plugin you use",
            "its base URL / url setting",
            format!("{proxy}/v1"),
            Some(
                "Sublime Text has no AI client of its own; see your plugin's docs for its endpoint key.",
            ),
        ),
        "emacs" => snippet(
            "~/.emacs.d/init.el (or your init file)",
            "gptel-backend and mcp-hub-servers",
            format!(
                ";; gptel through the svc proxy\n(setq gptel-backend\n      (gptel-make-openai \"svc\"\n        :host \"127.0.0.1:{port}\" :protocol \"http\" :endpoint \"/v1/chat/completions\"\n        :stream t :key (getenv \"OPENAI_API_KEY\") :models '(gpt-4o-mini)))\n;; mcp.el: the svc tool server\n(setq mcp-hub-servers\n      '((\"svc\" . (:command {exe_json} :args (\"serve\")))))"
            ),
            None,
        ),
        "neovim" => snippet(
            "~/.config/mcphub/servers.json (mcphub.nvim)",
            "mcpServers.svc",
            mcp,
            None,
        ),
        "cody" | "fittencode" | "tabnine" | "supermaven" => snippet(
            "see the tool's docs",
            "none confirmed",
            fallback,
            Some(NOT_CONFIRMED),
        ),
        _ => {
            return Err(WrapError::WrongGroup {
                slug: agent.slug.to_string(),
                group: agent.group.name(),
                what: agent.does,
            });
        }
    };
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::super::{AGENTS, Group};
    use super::*;

    #[test]
    fn every_snippet_agent_has_one_and_its_json_parses() {
        for agent in AGENTS.iter().filter(|a| a.group == Group::Snippet) {
            let s = for_agent(agent.slug, "/usr/local/bin/svc", 9377).expect(agent.slug);
            if s.text.starts_with('{') {
                let value: serde_json::Value = serde_json::from_str(&s.text).expect(agent.slug);
                assert!(value.to_string().contains("serve"), "{}", agent.slug);
            }
            assert!(!s.file.is_empty() && !s.field.is_empty(), "{}", agent.slug);
        }
    }
}
