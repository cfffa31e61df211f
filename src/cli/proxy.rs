//! `svc proxy`: run the local provider proxy until interrupted.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use svc::proxy::check::WitnessSettings;
use svc::proxy::server::{DEFAULT_BUDGET, DEFAULT_MAX_BODY_BYTES, DEFAULT_PORT, Logger};
use svc::proxy::upstream::{self, Upstreams};
use svc::proxy::{ProxySettings, ProxyState, make_service};
use svc::witness::nli::NliSettings;
use svc::witness::{Mode, Profile};

#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// Port on 127.0.0.1 (0 picks a free one; the address is printed on stderr).
    #[arg(long, default_value_t = DEFAULT_PORT)]
    pub(super) port: u16,
    /// Optimisation budget in tokens of request text: requests under it are forwarded
    /// byte-identical, longer ones are compressed towards it.
    #[arg(long, default_value_t = DEFAULT_BUDGET)]
    pub(super) budget: usize,
    /// Anthropic root URL [env: SVC_UPSTREAM_ANTHROPIC] [default: https://api.anthropic.com]
    #[arg(long, value_name = "URL")]
    pub(super) upstream_anthropic: Option<String>,
    /// OpenAI root URL [env: SVC_UPSTREAM_OPENAI] [default: https://api.openai.com]
    #[arg(long, value_name = "URL")]
    pub(super) upstream_openai: Option<String>,
    /// Gemini root URL [env: SVC_UPSTREAM_GEMINI]
    /// [default: https://generativelanguage.googleapis.com]
    #[arg(long, value_name = "URL")]
    pub(super) upstream_gemini: Option<String>,
    /// Check answers against the request: audit (headers and certificates only), annotate
    /// (mark unsupported claims), strict (remove them). Off when not given.
    #[arg(long, value_enum)]
    pub(super) witness: Option<Mode>,
    /// How strict the witness is (rag, qa, benchmark_qa, code fail closed in strict mode)
    /// [default: rag]. Needs --witness.
    #[arg(long, value_enum)]
    pub(super) witness_profile: Option<Profile>,
    /// Also put the full certificate in the JSON body under "svc_witness".
    #[arg(long)]
    pub(super) witness_embed: bool,
    /// Ask an OpenAI-compatible NLI endpoint about uncertain claims (the default endpoint of
    /// `svc witness --witness-nli`, key from $SVC_NLI_API_KEY); falls back to local checks.
    #[arg(long)]
    pub(super) witness_nli: bool,
    /// Largest request body accepted, in bytes (413 in the provider's shape above it).
    #[arg(long, default_value_t = DEFAULT_MAX_BODY_BYTES)]
    pub(super) max_body_bytes: usize,
    /// Longest silence from an upstream before the proxy answers 504 / ends the stream.
    #[arg(long, default_value_t = upstream::DEFAULT_READ_TIMEOUT.as_secs())]
    pub(super) read_timeout_secs: u64,
    /// State directory for commits and certificates [default: $SVC_HOME or ~/.svc].
    #[arg(long, value_name = "DIR")]
    pub(super) state_dir: Option<PathBuf>,
    /// Do not print a line per request on stderr.
    #[arg(long)]
    pub(super) quiet: bool,
}

fn resolve(flag: Option<String>, env: &str, default: &str) -> String {
    flag.or_else(|| std::env::var(env).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| default.to_string())
}

pub(super) fn settings(args: &ProxyArgs) -> anyhow::Result<ProxySettings> {
    let state_home = match &args.state_dir {
        Some(dir) => svc::state::checked_home(dir.clone()).context("--state-dir")?,
        None => svc::state::home()?,
    };
    if args.budget == 0 {
        anyhow::bail!("--budget must be at least 1 token");
    }
    if args.max_body_bytes == 0 {
        // Every request would be refused with 413.
        anyhow::bail!(
            "--max-body-bytes must be at least 1 (the default is {DEFAULT_MAX_BODY_BYTES})"
        );
    }
    let upstreams = Upstreams {
        anthropic: resolve(
            args.upstream_anthropic.clone(),
            upstream::ENV_ANTHROPIC,
            upstream::DEFAULT_ANTHROPIC,
        ),
        openai: resolve(
            args.upstream_openai.clone(),
            upstream::ENV_OPENAI,
            upstream::DEFAULT_OPENAI,
        ),
        gemini: resolve(
            args.upstream_gemini.clone(),
            upstream::ENV_GEMINI,
            upstream::DEFAULT_GEMINI,
        ),
    };
    for (name, url) in [
        ("anthropic", &upstreams.anthropic),
        ("openai", &upstreams.openai),
        ("gemini", &upstreams.gemini),
    ] {
        // Credentials and secret query values never reach a message (terminals, CI logs).
        let shown = upstream::redact(url);
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            anyhow::bail!(
                "the {name} upstream {shown:?} is not an http:// or https:// URL; give the provider's root, e.g. http://127.0.0.1:8000"
            );
        }
        if url.contains(['?', '#']) {
            // Request paths are appended to the root: a query there would swallow them.
            anyhow::bail!(
                "the {name} upstream {shown:?} has a query or fragment; give the provider's root alone (request paths and their queries are appended to it)"
            );
        }
    }
    let witness_flags = args.witness_embed || args.witness_nli || args.witness_profile.is_some();
    if witness_flags && args.witness.is_none() {
        // A profile given without a mode did nothing at all; say so rather than run unchecked.
        anyhow::bail!(
            "--witness-profile, --witness-embed and --witness-nli need --witness audit|annotate|strict"
        );
    }
    Ok(ProxySettings {
        upstreams,
        budget: args.budget,
        max_body_bytes: args.max_body_bytes,
        read_timeout: Duration::from_secs(args.read_timeout_secs.max(1)),
        witness: args.witness.map(|mode| WitnessSettings {
            mode,
            profile: args.witness_profile.unwrap_or(Profile::Rag),
            embed: args.witness_embed,
            nli: args.witness_nli.then(NliSettings::default),
        }),
        state_home,
    })
}

pub fn run(args: ProxyArgs) -> anyhow::Result<ExitCode> {
    let settings = settings(&args)?;
    let logger = (!args.quiet).then(|| Logger(Box::new(|log| eprintln!("{log}"))));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let outcome = runtime.block_on(async move {
        let state = ProxyState::new(settings, logger)?;
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", args.port))
            .await
            .with_context(|| {
                format!(
                    "cannot listen on 127.0.0.1:{}; is another proxy running? pick another --port",
                    args.port
                )
            })?;
        let address = listener.local_addr()?;
        let upstreams = &state.settings.upstreams;
        eprintln!(
            "svc proxy: listening on http://{address} (anthropic -> {}, openai -> {}, gemini -> {}; budget {} tokens; {})",
            svc::proxy::upstream::redact(&upstreams.anthropic),
            svc::proxy::upstream::redact(&upstreams.openai),
            svc::proxy::upstream::redact(&upstreams.gemini),
            state.settings.budget,
            state.routing.status()
        );
        for skipped in &state.routing.skipped_at_start {
            eprintln!("svc proxy: warning: RAVS log {skipped}");
        }
        let signalled = std::sync::Arc::new(tokio::sync::Notify::new());
        let listener = svc::own_user::OwnUserListener::new(listener);
        let graceful = axum::serve(listener, make_service(state.clone())).with_graceful_shutdown({
            let signalled = signalled.clone();
            let stopping = state.clone();
            async move {
                // Ctrl-C, or a service manager's SIGTERM: both end with the RAVS flush below.
                let terminate = async {
                    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    {
                        Ok(mut signal) => {
                            signal.recv().await;
                        }
                        Err(_) => std::future::pending::<()>().await,
                    }
                };
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    () = terminate => {}
                }
                stopping.set_stopping();
                signalled.notify_one();
            }
        });
        // Open requests get a grace period, not forever: a strict check of a multi-megabyte
        // answer kept the proxy from stopping on SIGTERM for minutes.
        let served = tokio::select! {
            served = graceful => served.context("serving the proxy"),
            () = async {
                signalled.notified().await;
                tokio::time::sleep(SHUTDOWN_GRACE).await;
            } => {
                eprintln!(
                    "svc proxy: stopping with requests still open after {} s",
                    SHUTDOWN_GRACE.as_secs()
                );
                Ok(())
            }
        };
        // The RAVS log is written in the background: its last lines before the process exits.
        state.routing.flush();
        served?;
        anyhow::Ok(())
    });
    // Verification still running on a blocking thread is waited for half a second at most: it
    // answers a request that is gone. Open requests' tasks are dropped here, which writes
    // their log lines (499, "the proxy stopped …") before the process ends.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    outcome?;
    Ok(ExitCode::SUCCESS)
}

/// How long open requests may finish after Ctrl-C or SIGTERM (as the daemon's servers).
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);
