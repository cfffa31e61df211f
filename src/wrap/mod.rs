//! `svc wrap <agent>`: plug svc into the coding tools people already use (SPEC §4.5).
//!
//! Three groups, by what the tool can be told:
//! - launch agents ([`launch`]) read a provider base URL from their environment (or, for pi, a
//!   config file): svc makes sure its proxy listens, sets the variables the tool really reads
//!   and runs the tool;
//! - MCP-config agents ([`mcp_config`]) start MCP servers listed in a JSON settings file: svc
//!   merges its tool server (`svc serve`) into that file, keeping a `.svc-backup`;
//! - snippet agents ([`snippet`]) are configured through a UI or a file svc does not own: svc
//!   prints what to paste where.
//!
//! The library decides and edits; the command layer (`src/cli/wrap.rs`) prints, spawns and
//! execs.

pub mod agents;
pub mod dirs;
pub mod jsonc;
pub mod launch;
pub mod mcp_config;
pub mod proxy_process;
pub mod snippet;

use std::path::PathBuf;

pub use agents::{AGENTS, Agent, Group};
pub use dirs::Dirs;

/// Errors of `svc wrap`.
#[derive(Debug, thiserror::Error)]
pub enum WrapError {
    #[error(
        "unknown agent `{slug}`{}; `svc wrap` lists every agent",
        suggest(near)
    )]
    UnknownAgent {
        slug: String,
        near: Vec<&'static str>,
    },
    #[error("`{slug}` is a {group} agent: {what}")]
    WrongGroup {
        slug: String,
        group: &'static str,
        what: &'static str,
    },
    #[error("cannot find the home directory: set HOME{}", if cfg!(windows) { " or APPDATA" } else { "" })]
    NoHome,
    #[error(
        "{program} is not on PATH; install it ({install}) or put it on PATH, then run `svc wrap {program}` again"
    )]
    NotOnPath {
        program: &'static str,
        install: &'static str,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "cannot merge into {path}: {error}; svc never rewrites a file it cannot parse: fix it (or move it aside) and run again"
    )]
    Malformed {
        path: PathBuf,
        #[source]
        error: jsonc::ParseError,
    },
    #[error("cannot merge into {path}: {error}")]
    Edit {
        path: PathBuf,
        #[source]
        error: jsonc::EditError,
    },
    #[error("{path} is not UTF-8 text; svc leaves it alone")]
    NotText { path: PathBuf },
    #[error(transparent)]
    Write(#[from] crate::state::StateError),
    #[error("{0}")]
    Environment(String),
    #[error("{0}")]
    Proxy(String),
}

fn suggest(near: &[&str]) -> String {
    if near.is_empty() {
        String::new()
    } else {
        format!(" (did you mean {}?)", near.join(", "))
    }
}

/// The agent of a slug, or an error naming the nearest slugs.
pub fn find(slug: &str) -> Result<&'static Agent, WrapError> {
    agents::find(slug).ok_or_else(|| WrapError::UnknownAgent {
        slug: slug.to_string(),
        near: agents::near_matches(slug),
    })
}
