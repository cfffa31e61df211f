//! `svc serve`: the MCP tool server, over stdio (what an agent's MCP config starts) or over
//! streamable HTTP on 127.0.0.1 (`--http PORT`). Stdout belongs to the protocol in stdio mode:
//! nothing else is printed there.

use std::process::ExitCode;

use anyhow::Context as _;
use clap::Args;
use svc::state;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Serve streamable HTTP at http://127.0.0.1:PORT/mcp instead of stdio (0 picks a free port
    /// and prints it).
    #[arg(long, value_name = "PORT")]
    http: Option<u16>,
}

pub fn run(args: ServeArgs) -> anyhow::Result<ExitCode> {
    let home = state::home()?;
    // Refused now rather than ignored at every `select_context` call.
    svc::context::recent::commits_from_env()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async move {
        let Some(port) = args.http else {
            return svc::mcp::serve_stdio(home)
                .await
                .context("serving MCP on stdio");
        };
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .with_context(|| {
                format!(
                    "cannot listen on 127.0.0.1:{port}; another process holds it (`ss -ltnp 'sport = :{port}'` names it): pick another --http port"
                )
            })?;
        let address = listener.local_addr()?;
        eprintln!(
            "svc serve: MCP (streamable HTTP) on http://{address}{}; state {}; Ctrl-C stops it",
            svc::mcp::HTTP_PATH,
            home.display()
        );
        svc::mcp::serve_http(svc::own_user::OwnUserListener::new(listener), home, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .context("serving MCP over HTTP")
    })?;
    Ok(ExitCode::SUCCESS)
}
