//! MCP-config agents: merge the svc tool server into the tool's own settings file, in that
//! file's format and location, keeping the user's other entries (and, in JSONC files, their
//! comments), with a `.svc-backup` of the previous file, an atomic write, and no write at all
//! when nothing would change.
//!
//! Locations and shapes, with the source each was checked against:
//! - cursor: `~/.cursor/mcp.json`, `mcpServers.<name>` = `{command, args}` (Cursor docs, "Model
//!   Context Protocol": global configuration file).
//! - windsurf: `~/.codeium/windsurf/mcp_config.json`, `mcpServers` (Windsurf docs, Cascade MCP).
//! - vscode: the user `mcp.json` beside `settings.json` (`~/.config/Code/User` on Linux,
//!   `~/Library/Application Support/Code/User` on macOS, `%APPDATA%\Code\User` on Windows),
//!   `servers.<name>` = `{type: "stdio", command, args}`; VS Code reads it as JSON with comments
//!   (VS Code docs, "MCP servers": configuration format).
//! - claude-desktop: `claude_desktop_config.json` in `~/Library/Application Support/Claude`
//!   (macOS) or `%APPDATA%\Claude` (Windows), `mcpServers` (MCP quickstart, "For Claude Desktop
//!   users"). There is no official Linux build; the community builds read
//!   `$XDG_CONFIG_HOME/Claude/`, which svc uses on Linux.
//! - claude-code: `~/.claude.json`, `mcpServers.<name>` = `{type: "stdio", command, args, env}`,
//!   the user scope that `claude mcp add --scope user` writes (Claude Code docs, "MCP").
//! - zed: `$XDG_CONFIG_HOME/zed/settings.json` (else `~/.config/zed/settings.json`;
//!   `%APPDATA%\Zed\settings.json` on Windows), JSON with comments, `context_servers.<name>` =
//!   `{command, args, env}` (Zed docs, "Model Context Protocol": as custom servers).

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::dirs::{Dirs, Os};
use super::jsonc::{self, Syntax};
use super::{WrapError, find};

/// The server's name in every config.
pub const SERVER_NAME: &str = "svc";

/// Suffix of the copy of the previous file.
pub const BACKUP_SUFFIX: &str = ".svc-backup";

/// Values to set in one JSON file: each a key path and the value it must hold.
#[derive(Debug, Clone)]
pub struct FileEdit {
    pub path: PathBuf,
    pub syntax: Syntax,
    pub sets: Vec<(Vec<String>, Value)>,
}

/// What an edit would do to the file.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The file as named (what messages show).
    pub path: PathBuf,
    /// Where the bytes are written: the target of a symbolic link, else `path`.
    pub write_to: PathBuf,
    /// The current text; `None` when the file does not exist.
    pub before: Option<String>,
    /// The new text; `None` when the file already holds every value.
    pub after: Option<String>,
}

impl Plan {
    pub fn changes(&self) -> bool {
        self.after.is_some()
    }

    /// A unified diff of the change (empty when nothing changes).
    pub fn diff(&self) -> String {
        let Some(after) = &self.after else {
            return String::new();
        };
        let before = self.before.as_deref().unwrap_or("");
        let name = self.path.display().to_string();
        let old_name = if self.before.is_some() {
            name.clone()
        } else {
            "/dev/null".to_string()
        };
        similar::TextDiff::from_lines(before, after.as_str())
            .unified_diff()
            .context_radius(3)
            .header(&old_name, &name)
            .to_string()
    }
}

/// The config file and entry of an MCP-config agent; `exe` is the svc binary to start.
pub fn target(slug: &str, dirs: &Dirs, exe: &Path) -> Result<FileEdit, WrapError> {
    let agent = find(slug)?;
    let command = exe.to_string_lossy().into_owned();
    let plain = json!({"command": command, "args": ["serve"]});
    let typed = json!({"type": "stdio", "command": command, "args": ["serve"]});
    let (path, syntax, container, entry) = match agent.slug {
        "cursor" => (
            dirs.home()?.join(".cursor").join("mcp.json"),
            Syntax::Json,
            "mcpServers",
            plain,
        ),
        "windsurf" => (
            dirs.home()?
                .join(".codeium")
                .join("windsurf")
                .join("mcp_config.json"),
            Syntax::Json,
            "mcpServers",
            plain,
        ),
        "vscode" => (
            dirs.app_config()?
                .join("Code")
                .join("User")
                .join("mcp.json"),
            Syntax::Jsonc,
            "servers",
            typed,
        ),
        "claude-desktop" => (
            dirs.app_config()?
                .join("Claude")
                .join("claude_desktop_config.json"),
            Syntax::Json,
            "mcpServers",
            plain,
        ),
        "claude-code" => (
            dirs.home()?.join(".claude.json"),
            Syntax::Json,
            "mcpServers",
            json!({"type": "stdio", "command": command, "args": ["serve"], "env": {}}),
        ),
        "zed" => {
            let base = match dirs.os {
                Os::Windows => dirs.app_config()?.join("Zed"),
                _ => dirs.xdg_config()?.join("zed"),
            };
            (
                base.join("settings.json"),
                Syntax::Jsonc,
                "context_servers",
                json!({"command": command, "args": ["serve"], "env": {}}),
            )
        }
        _ => {
            return Err(WrapError::WrongGroup {
                slug: agent.slug.to_string(),
                group: agent.group.name(),
                what: agent.does,
            });
        }
    };
    Ok(FileEdit {
        path,
        syntax,
        sets: vec![(vec![container.to_string(), SERVER_NAME.to_string()], entry)],
    })
}

/// Reads the file and computes the new text. An existing entry that is an object keeps the
/// user's own fields (an `env`, a `disabled` flag): only the fields svc owns are set.
pub fn plan(edit: &FileEdit) -> Result<Plan, WrapError> {
    let write_to = match fs::symlink_metadata(&edit.path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            fs::canonicalize(&edit.path).map_err(|source| WrapError::Read {
                path: edit.path.clone(),
                source,
            })?
        }
        _ => edit.path.clone(),
    };
    let before = match fs::read(&write_to) {
        Ok(bytes) => Some(String::from_utf8(bytes).map_err(|_| WrapError::NotText {
            path: edit.path.clone(),
        })?),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
        Err(source) => {
            return Err(WrapError::Read {
                path: edit.path.clone(),
                source,
            });
        }
    };
    let mut text = before.clone().unwrap_or_default();
    let current = jsonc::parse(&text, edit.syntax).map_err(|error| WrapError::Malformed {
        path: edit.path.clone(),
        error,
    })?;
    let mut changed = false;
    for (path, value) in &edit.sets {
        let existing = current
            .as_ref()
            .and_then(|root| path.iter().try_fold(root, |node, key| node.get(key)));
        let sets: Vec<(Vec<&str>, &Value)> = match (existing, value) {
            (Some(Value::Object(have)), Value::Object(fields)) => fields
                .iter()
                // `env` is the user's (the entry's `{}` only creates it): an existing one is
                // kept, or zed and claude-code lost the variables set on the entry.
                .filter(|(key, _)| !(key.as_str() == "env" && have.contains_key("env")))
                .map(|(key, field)| {
                    let mut full: Vec<&str> = path.iter().map(String::as_str).collect();
                    full.push(key);
                    (full, field)
                })
                .collect(),
            _ => vec![(path.iter().map(String::as_str).collect(), value)],
        };
        for (keys, value) in sets {
            let edited =
                jsonc::set(&text, edit.syntax, &keys, value).map_err(|error| WrapError::Edit {
                    path: edit.path.clone(),
                    error,
                })?;
            if let Some(edited) = edited {
                text = edited;
                changed = true;
            }
        }
    }
    // A file svc creates ends with a newline, as editors write them.
    if changed && before.is_none() && !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(Plan {
        path: edit.path.clone(),
        write_to,
        before,
        after: changed.then_some(text),
    })
}

/// What [`apply`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// The copy of the previous file, when there was one.
    pub backup: Option<PathBuf>,
}

/// Writes the plan: the previous file is copied to `<file>.svc-backup` first, then the new
/// text replaces it atomically, keeping the file's permissions.
pub fn apply(plan: &Plan) -> Result<Applied, WrapError> {
    let Some(after) = &plan.after else {
        return Ok(Applied { backup: None });
    };
    let mut backup = None;
    if let Some(before) = &plan.before {
        let mut name = plan.write_to.as_os_str().to_owned();
        name.push(BACKUP_SUFFIX);
        let path = PathBuf::from(name);
        crate::state::atomic_write(&path, before.as_bytes())?;
        backup = Some(path);
    }
    let permissions = fs::metadata(&plan.write_to).ok().map(|m| m.permissions());
    crate::state::atomic_write_shared(&plan.write_to, after.as_bytes())?;
    if let Some(permissions) = permissions {
        fs::set_permissions(&plan.write_to, permissions).map_err(|source| {
            crate::state::StateError::Write {
                path: plan.write_to.clone(),
                source,
            }
        })?;
    }
    Ok(Applied { backup })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dirs(home: &Path) -> Dirs {
        Dirs {
            os: Os::Linux,
            home: Some(home.to_path_buf()),
            xdg_config_home: None,
            appdata: None,
        }
    }

    #[test]
    fn a_user_field_on_an_existing_entry_survives() {
        let home = tempfile::tempdir().expect("temp dir");
        let edit = target("cursor", &dirs(home.path()), Path::new("/opt/svc")).expect("target");
        fs::create_dir_all(edit.path.parent().expect("parent")).expect("mkdir");
        fs::write(
            &edit.path,
            "{\"mcpServers\": {\"svc\": {\"command\": \"old\", \"env\": {\"SVC_HOME\": \"/x\"}}}}",
        )
        .expect("write");
        let plan = plan(&edit).expect("plan");
        let after: Value =
            serde_json::from_str(plan.after.as_deref().expect("changes")).expect("json");
        assert_eq!(
            after,
            json!({"mcpServers": {"svc": {"command": "/opt/svc", "args": ["serve"], "env": {"SVC_HOME": "/x"}}}})
        );
        assert!(plan.diff().contains("-{\"mcpServers\""), "{}", plan.diff());
        // Found by probing: claude-code and zed, whose entries carry `"env": {}`, replaced the
        // user's env with it.
        let edit =
            target("claude-code", &dirs(home.path()), Path::new("/opt/svc")).expect("target");
        fs::write(
            &edit.path,
            "{\"mcpServers\": {\"svc\": {\"command\": \"old\", \"env\": {\"X\": \"1\"}}}}",
        )
        .expect("write");
        let kept = super::plan(&edit).expect("plan");
        let after: Value =
            serde_json::from_str(kept.after.as_deref().expect("changes")).expect("json");
        assert_eq!(after["mcpServers"]["svc"]["env"], json!({"X": "1"}));
        assert_eq!(after["mcpServers"]["svc"]["command"], "/opt/svc");
    }

    #[cfg(unix)]
    #[test]
    fn a_symlinked_config_is_edited_at_its_target() {
        let home = tempfile::tempdir().expect("temp dir");
        let edit = target("windsurf", &dirs(home.path()), Path::new("/opt/svc")).expect("target");
        let real = home.path().join("dotfiles-mcp.json");
        fs::write(&real, "{}").expect("write");
        fs::create_dir_all(edit.path.parent().expect("parent")).expect("mkdir");
        std::os::unix::fs::symlink(&real, &edit.path).expect("symlink");
        let applied = apply(&plan(&edit).expect("plan")).expect("apply");
        assert!(
            fs::symlink_metadata(&edit.path)
                .expect("link")
                .file_type()
                .is_symlink()
        );
        let value: Value =
            serde_json::from_str(&fs::read_to_string(&real).expect("read")).expect("json");
        assert_eq!(value["mcpServers"]["svc"]["command"], "/opt/svc");
        let mut backup = real.clone().into_os_string();
        backup.push(BACKUP_SUFFIX);
        assert_eq!(applied.backup, Some(PathBuf::from(backup)));
    }

    #[test]
    fn snippet_and_launch_agents_have_no_mcp_target() {
        let home = tempfile::tempdir().expect("temp dir");
        let error = target("cline", &dirs(home.path()), Path::new("svc")).expect_err("fails");
        assert!(error.to_string().contains("snippet agent"), "{error}");
    }
}
