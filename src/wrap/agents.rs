//! The catalogue of agents `svc wrap` knows (SPEC §4.5), in the spec's order.

/// What `svc wrap` does for an agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// Start the proxy if needed, set the endpoint the tool reads, run the tool.
    Launch,
    /// Merge the svc tool server into the tool's MCP configuration file.
    McpConfig,
    /// Print what to paste where.
    Snippet,
}

impl Group {
    pub fn title(self) -> &'static str {
        match self {
            Group::Launch => "launch agents (start the proxy, set the endpoint, run the tool)",
            Group::McpConfig => "MCP-config agents (merge `svc serve` into the tool's MCP config)",
            Group::Snippet => "snippet agents (print the file, the field and what to paste)",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Group::Launch => "launch",
            Group::McpConfig => "MCP-config",
            Group::Snippet => "snippet",
        }
    }
}

/// One agent: its slug on the command line, its name, and a line on what wrap does for it.
#[derive(Debug, Clone, Copy)]
pub struct Agent {
    pub slug: &'static str,
    pub name: &'static str,
    pub group: Group,
    pub does: &'static str,
}

const fn agent(slug: &'static str, name: &'static str, group: Group, does: &'static str) -> Agent {
    Agent {
        slug,
        name,
        group,
        does,
    }
}

use Group::{Launch, McpConfig, Snippet};

pub const AGENTS: &[Agent] = &[
    agent(
        "claude",
        "Claude Code",
        Launch,
        "ANTHROPIC_BASE_URL=<proxy>, runs `claude`",
    ),
    agent(
        "codex",
        "OpenAI Codex CLI",
        Launch,
        "OPENAI_BASE_URL=<proxy>/v1, runs `codex`",
    ),
    agent(
        "aider",
        "Aider",
        Launch,
        "OPENAI_API_BASE=<proxy>/v1 and ANTHROPIC_BASE_URL=<proxy>, runs `aider`",
    ),
    agent(
        "gemini",
        "Gemini CLI",
        Launch,
        "GOOGLE_GEMINI_BASE_URL=<proxy>, runs `gemini`",
    ),
    agent(
        "qwen",
        "Qwen Code",
        Launch,
        "OPENAI_BASE_URL=<proxy>/v1, runs `qwen`",
    ),
    agent(
        "opencode",
        "opencode",
        Launch,
        "OPENCODE_CONFIG_CONTENT with the anthropic and openai baseURL at <proxy>/v1, runs `opencode`",
    ),
    agent(
        "crush",
        "Charm Crush",
        Launch,
        "ANTHROPIC_API_ENDPOINT=<proxy>/v1 and OPENAI_API_ENDPOINT=<proxy>/v1, runs `crush`",
    ),
    agent(
        "hermes",
        "Hermes Agent (Nous Research)",
        Launch,
        "OPENAI_BASE_URL=<proxy>/v1 (its custom OpenAI-compatible provider), runs `hermes`",
    ),
    agent(
        "pi",
        "pi coding agent",
        Launch,
        "merges the anthropic/openai/google baseUrl overrides into ~/.pi/agent/models.json, runs `pi`",
    ),
    agent(
        "ollama",
        "Ollama",
        Launch,
        "points the proxy's OpenAI and Anthropic upstreams at the Ollama server, runs `ollama`",
    ),
    agent(
        "cursor",
        "Cursor",
        McpConfig,
        "~/.cursor/mcp.json, `mcpServers.svc`",
    ),
    agent(
        "windsurf",
        "Windsurf",
        McpConfig,
        "~/.codeium/windsurf/mcp_config.json, `mcpServers.svc`",
    ),
    agent(
        "vscode",
        "VS Code (Copilot agent mode)",
        McpConfig,
        "the user mcp.json (Code/User), `servers.svc` with type stdio",
    ),
    agent(
        "claude-desktop",
        "Claude Desktop",
        McpConfig,
        "claude_desktop_config.json, `mcpServers.svc`",
    ),
    agent(
        "claude-code",
        "Claude Code (user scope)",
        McpConfig,
        "~/.claude.json, `mcpServers.svc` with type stdio",
    ),
    agent(
        "zed",
        "Zed",
        McpConfig,
        "~/.config/zed/settings.json (JSON with comments), `context_servers.svc`",
    ),
    agent(
        "cline",
        "Cline",
        Snippet,
        "cline_mcp_settings.json, `mcpServers`",
    ),
    agent(
        "roo",
        "Roo Code",
        Snippet,
        "mcp_settings.json or .roo/mcp.json, `mcpServers`",
    ),
    agent(
        "continue",
        "Continue",
        Snippet,
        "~/.continue/config.yaml, `mcpServers`",
    ),
    agent(
        "cody",
        "Sourcegraph Cody",
        Snippet,
        "no MCP or endpoint setting svc could confirm: see its docs",
    ),
    agent(
        "amp",
        "Amp",
        Snippet,
        "~/.config/amp/settings.json, `amp.mcpServers`",
    ),
    agent(
        "kiro",
        "Kiro",
        Snippet,
        "~/.kiro/settings/mcp.json, `mcpServers`",
    ),
    agent("qoder", "Qoder", Snippet, "MCP settings (UI), `mcpServers`"),
    agent(
        "trae",
        "Trae",
        Snippet,
        "MCP settings (UI, add manually), `mcpServers`",
    ),
    agent(
        "antigravity",
        "Google Antigravity",
        Snippet,
        "~/.gemini/antigravity/mcp_config.json, `mcpServers`",
    ),
    agent(
        "amazonq",
        "Amazon Q Developer",
        Snippet,
        "~/.aws/amazonq/mcp.json, `mcpServers`",
    ),
    agent(
        "verdent",
        "Verdent",
        Snippet,
        "MCP settings (UI), `mcpServers` — see its docs",
    ),
    agent(
        "jetbrains",
        "JetBrains AI Assistant",
        Snippet,
        "Settings | Tools | AI Assistant | Model Context Protocol, as JSON",
    ),
    agent(
        "helix",
        "Helix",
        Snippet,
        "no AI client of its own: the proxy URL for an LSP assistant in languages.toml",
    ),
    agent(
        "tabby",
        "Tabby",
        Snippet,
        "~/.tabby/config.toml, `[model.chat.http] api_endpoint`",
    ),
    agent(
        "twinny",
        "twinny",
        Snippet,
        "provider settings (UI): host, port, path",
    ),
    agent(
        "sublime",
        "Sublime Text",
        Snippet,
        "no AI client of its own: the proxy URL for an OpenAI plugin — see its docs",
    ),
    agent(
        "emacs",
        "Emacs (gptel, mcp.el)",
        Snippet,
        "init.el: a gptel backend and an mcp.el server",
    ),
    agent(
        "neovim",
        "Neovim (mcphub.nvim)",
        Snippet,
        "~/.config/mcphub/servers.json, `mcpServers`",
    ),
    agent(
        "fittencode",
        "Fitten Code",
        Snippet,
        "no proxy or MCP setting svc could confirm: see its docs",
    ),
    agent(
        "tabnine",
        "Tabnine",
        Snippet,
        "no proxy or MCP setting svc could confirm: see its docs",
    ),
    agent(
        "supermaven",
        "Supermaven",
        Snippet,
        "no proxy or MCP setting svc could confirm: see its docs",
    ),
];

pub fn find(slug: &str) -> Option<&'static Agent> {
    AGENTS.iter().find(|a| a.slug == slug)
}

/// Slugs close to `slug`: within two edits, or one containing the other.
pub fn near_matches(slug: &str) -> Vec<&'static str> {
    let wanted = slug.to_ascii_lowercase();
    let mut scored: Vec<(usize, &'static str)> = AGENTS
        .iter()
        .filter_map(|a| {
            let distance = edit_distance(&wanted, a.slug);
            let related =
                wanted.len() >= 3 && (a.slug.contains(&wanted) || wanted.contains(a.slug));
            (distance <= 2 || related).then_some((distance, a.slug))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(4).map(|(_, slug)| slug).collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitute = previous[j] + usize::from(ca != *cb);
            current.push(substitute.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_catalogue_is_the_spec_list() {
        let launch: Vec<_> = AGENTS
            .iter()
            .filter(|a| a.group == Launch)
            .map(|a| a.slug)
            .collect();
        assert_eq!(
            launch,
            [
                "claude", "codex", "aider", "gemini", "qwen", "opencode", "crush", "hermes", "pi",
                "ollama"
            ]
        );
        let mcp: Vec<_> = AGENTS
            .iter()
            .filter(|a| a.group == McpConfig)
            .map(|a| a.slug)
            .collect();
        assert_eq!(
            mcp,
            [
                "cursor",
                "windsurf",
                "vscode",
                "claude-desktop",
                "claude-code",
                "zed"
            ]
        );
        assert_eq!(AGENTS.iter().filter(|a| a.group == Snippet).count(), 21);
    }

    #[test]
    fn near_matches_suggest_typos_and_parts() {
        assert_eq!(near_matches("cluade")[0], "claude");
        assert!(near_matches("claude-dsktop").contains(&"claude-desktop"));
        assert!(near_matches("vs").is_empty() || near_matches("vs").len() <= 4);
        assert!(near_matches("xyzzy-nothing").is_empty());
    }
}
