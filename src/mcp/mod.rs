//! The MCP tool server (SPEC §1.5, §4.6): coding agents call svc's selection, compression,
//! recovery, witness and proof-guided loop as Model Context Protocol tools, over stdio (`svc
//! serve`) or streamable HTTP on 127.0.0.1 (`svc serve --http PORT`, and inside the daemon).
//!
//! - [`tools`]: the eight tools, their schemas and what each runs (the same library calls as
//!   the `svc` commands);
//! - [`args`]: their input types (strict, documented, schema-derived);
//! - [`server`]: the rmcp handler (list, call, errors as tool results);
//! - [`index_cache`]: indexes kept warm between `select_context` calls;
//! - [`stdio`]: the stdio transport (every request carried out is answered);
//! - [`bench`]: the `svc bench --group mcp` round-trip figures.
//!
//! The server holds no provider and makes no network call: every tool is local work on the
//! state directory it is given.

pub mod args;
pub mod bench;
pub mod index_cache;
pub mod server;
pub mod stdio;
pub mod tools;

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

pub use server::SvcServer;
pub use tools::{ToolName, Toolbox};

/// Path of the streamable-HTTP endpoint: `http://127.0.0.1:PORT/mcp`.
pub const HTTP_PATH: &str = "/mcp";

/// Browser origins allowed to call the HTTP endpoint (requests without an `Origin`, as every
/// non-browser MCP client sends, always pass). With the loopback-only `Host` check this keeps a
/// web page from driving the tools through DNS rebinding or a cross-site request.
const ALLOWED_ORIGINS: [&str; 3] = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];

/// Errors of the stdio server.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error(
        "the MCP client on stdin did not complete the initialize handshake: {0} (svc serve speaks MCP over stdio; start it from an MCP client, or use --http PORT)"
    )]
    Initialize(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("the MCP session on stdio stopped abnormally: {0}")]
    Session(#[source] tokio::task::JoinError),
}

/// Serves the tools over stdio until the client closes the session (end of stdin).
pub async fn serve_stdio(home: PathBuf) -> Result<(), McpError> {
    let server = SvcServer::new(&home);
    let running = server
        .serve(stdio::GuardedStdio::new())
        .await
        .map_err(|error| McpError::Initialize(Box::new(error)))?;
    running.waiting().await.map_err(McpError::Session)?;
    Ok(())
}

/// Port of the tool server's streamable HTTP endpoint when the daemon runs it (next to the
/// proxy's 9377 and the dashboard's 9378).
pub const DEFAULT_HTTP_PORT: u16 = 9379;

/// Serves the tools over streamable HTTP at [`HTTP_PATH`] on `listener` until `shutdown`
/// completes; then open sessions are closed and in-flight calls finish.
pub async fn serve_http(
    listener: crate::own_user::OwnUserListener,
    home: PathBuf,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let server = SvcServer::new(&home);
    let config = StreamableHttpServerConfig::default().with_allowed_origins(ALLOWED_ORIGINS);
    let sessions = config.cancellation_token.clone();
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router = axum::Router::new().nest_service(HTTP_PATH, service);
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            shutdown.await;
            // Long-lived SSE streams would hold a graceful shutdown open forever.
            sessions.cancel();
        })
        .await
}

#[cfg(test)]
mod tests;
