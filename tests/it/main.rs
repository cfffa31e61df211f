//! Integration tests: one binary (faster linking), one module per area.

mod audit;
mod baselines;
mod benchmark;
mod browser;
mod compress;
mod context;
mod dashboard;
mod demo;
mod encodings;
mod events;
mod experiments;
mod fuzz;
mod harness;
mod learning;
mod mcp;
mod proof;
mod proof_harness;
mod proxy;
mod proxy_proof;
mod proxy_streams;
mod proxy_upstream;
mod records;
mod report;
mod routing;
mod run;
mod state;
mod via_proxy;
mod witness;
// The MCP-config paths under a temporary HOME are the Linux ones.
#[cfg(target_os = "linux")]
mod wrap;

/// Serves `router` on a free port of 127.0.0.1 (on the current runtime); returns its base URL.
pub async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    format!("http://{address}")
}

/// Serves `app` on 127.0.0.1:0 from a thread and runtime of its own, for tests that drive `svc`
/// as a blocking child process; returns the address once it is listening.
pub fn serve_on_thread(app: axum::Router) -> std::net::SocketAddr {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            sender
                .send(listener.local_addr().expect("address"))
                .expect("send");
            let _ = axum::serve(listener, app).await;
        });
    });
    receiver.recv().expect("address")
}
