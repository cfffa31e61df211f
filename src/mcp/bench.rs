//! The `mcp` group of `svc bench`: tool-call round trips as an agent sees them, through a real
//! `svc serve` process on stdio (newline-delimited JSON-RPC, the transport agents start), on a
//! repository of about a million tokens.
//!
//! Measured: the first `select_context` (cold: the server indexes the tree), then warm calls
//! with varied queries (the index kept in memory; each call still stamps the tree, selects,
//! commits and serialises the result), and `recover_chunk`. Time runs from writing the request
//! line to parsing the response line.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

use crate::bench::Figure;

/// Bytes of source copied for the default corpus: about a million o200k tokens of code.
pub const CORPUS_BYTES: u64 = 4_200_000;
/// Token budget of each selection (as the context group's latency figure).
pub const BUDGET: usize = 8_000;

/// Queries of the warm calls: behaviours a user of these crates would ask about. Not the
/// context group's queries, and nothing here was tuned on them.
const QUERIES: [&str; 10] = [
    "cancel a pending future when the timeout elapses",
    "compile a regex pattern into a lazy DFA",
    "serialize an enum variant with a tag field",
    "parse HTTP request headers into a header map",
    "broadcast channel receiver lagging behind the sender",
    "match a Unicode word boundary assertion",
    "extract query string parameters from the request URI",
    "blocking task pool spawning threads on demand",
    "flatten nested struct fields during deserialization",
    "keep-alive connection reuse in the client pool",
];

#[derive(Debug, thiserror::Error)]
pub enum McpBenchError {
    #[error("starting {program}: {source}")]
    Spawn {
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("talking to svc serve: {0}")]
    Io(#[from] std::io::Error),
    #[error("svc serve answered {method} with {response}")]
    Protocol { method: String, response: String },
    #[error(
        "no corpus: {0} holds no crate sources; pass --mcp-repo DIR (a repository of about a million tokens)"
    )]
    NoCorpus(PathBuf),
}

/// A minimal MCP client on a child's stdio: one request at a time, responses matched by id.
struct StdioClient {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl StdioClient {
    fn start(program: &Path, state_home: &Path) -> Result<Self, McpBenchError> {
        let mut child = Command::new(program)
            .arg("serve")
            .env("SVC_HOME", state_home)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|source| McpBenchError::Spawn {
                program: program.to_path_buf(),
                source,
            })?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(McpBenchError::Io(std::io::Error::other(
                "the child has no piped stdio",
            )));
        };
        let mut client = Self {
            child,
            stdin,
            stdout: BufReader::new(stdout),
            next_id: 1,
        };
        client.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "svc-bench", "version": env!("CARGO_PKG_VERSION")}
            }),
        )?;
        client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))?;
        Ok(client)
    }

    fn send(&mut self, message: &Value) -> Result<(), McpBenchError> {
        let mut line = message.to_string();
        line.push('\n');
        self.stdin.write_all(line.as_bytes())?;
        self.stdin.flush()?;
        Ok(())
    }

    /// Sends a request and returns its `result`.
    fn request(&mut self, method: &str, params: Value) -> Result<Value, McpBenchError> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))?;
        let mut line = String::new();
        loop {
            line.clear();
            if self.stdout.read_line(&mut line)? == 0 {
                return Err(McpBenchError::Protocol {
                    method: method.to_string(),
                    response: "end of output (the server exited)".into(),
                });
            }
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            // Notifications and other traffic carry no id of ours.
            if message.get("id") != Some(&json!(id)) {
                continue;
            }
            return match message.get("result") {
                Some(result) => Ok(result.clone()),
                None => Err(McpBenchError::Protocol {
                    method: method.to_string(),
                    response: line.trim().chars().take(500).collect(),
                }),
            };
        }
    }

    /// Calls a tool; its structured result, or the error text as a protocol error.
    fn call(&mut self, tool: &str, arguments: Value) -> Result<Value, McpBenchError> {
        let result = self.request("tools/call", json!({"name": tool, "arguments": arguments}))?;
        if result.get("isError") == Some(&json!(true)) {
            return Err(McpBenchError::Protocol {
                method: tool.to_string(),
                response: result.to_string().chars().take(500).collect(),
            });
        }
        Ok(result
            .get("structuredContent")
            .cloned()
            .unwrap_or(Value::Null))
    }
}

impl Drop for StdioClient {
    fn drop(&mut self) {
        // Closing stdin ends the session; the server then exits on its own.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Copies crate sources from a registry source directory (as the context group picks them)
/// into `to`, until about [`CORPUS_BYTES`] are there. Returns the crate names.
pub fn copy_registry_corpus(registry: &Path, to: &Path) -> Result<Vec<String>, McpBenchError> {
    let mut crates = crate::context::bench::pick_crates(registry);
    if crates.is_empty() {
        return Err(McpBenchError::NoCorpus(registry.to_path_buf()));
    }
    crates.truncate(crate::context::bench::CRATES.len());
    let mut copied = 0u64;
    let mut names = Vec::new();
    for path in crates {
        if copied >= CORPUS_BYTES {
            break;
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        copied += copy_sources(&path, &to.join(&name), CORPUS_BYTES - copied)?;
        names.push(name);
    }
    Ok(names)
}

/// Copies the text source files under `from` (depth first, sorted) until `limit` bytes.
fn copy_sources(from: &Path, to: &Path, limit: u64) -> Result<u64, McpBenchError> {
    const EXTENSIONS: [&str; 4] = ["rs", "md", "toml", "txt"];
    let mut entries: Vec<_> = std::fs::read_dir(from)?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    let mut copied = 0u64;
    for entry in entries {
        if copied >= limit {
            break;
        }
        let kind = entry.file_type()?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copied += copy_sources(&entry.path(), &target, limit - copied)?;
        } else if kind.is_file()
            && entry
                .path()
                .extension()
                .is_some_and(|e| EXTENSIONS.iter().any(|x| e == *x))
        {
            std::fs::create_dir_all(to)?;
            copied += std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(copied)
}

fn percentile(sorted: &[f64], p: usize) -> f64 {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// The figures: `program` is the `svc` binary to serve, `tree` the repository, `label` names it
/// in the table, `calls` is the number of warm select_context calls.
pub fn figures(
    program: &Path,
    tree: &Path,
    label: &str,
    calls: usize,
) -> Result<Vec<Figure>, McpBenchError> {
    let state = tempfile::tempdir()?;
    let mut client = StdioClient::start(program, state.path())?;
    let path = tree.display().to_string();
    let select = |query: &str| json!({"path": path, "query": query, "budget": BUDGET});

    let start = Instant::now();
    let first = client.call("select_context", select(QUERIES[0]))?;
    let cold = start.elapsed().as_secs_f64();
    let tokens = first["index_tokens"].as_u64().unwrap_or(0);
    let files = first["files"].as_u64().unwrap_or(0);

    let mut latencies = Vec::with_capacity(calls);
    let mut reused = 0;
    let mut last = first;
    for i in 0..calls.max(1) {
        let start = Instant::now();
        let result = client.call("select_context", select(QUERIES[i % QUERIES.len()]))?;
        latencies.push(start.elapsed().as_secs_f64() * 1e3);
        if result["index_reused"] == json!(true) {
            reused += 1;
        }
        last = result;
    }
    latencies.sort_by(f64::total_cmp);

    let ctx_id = last["ctx_id"].as_str().unwrap_or_default().to_string();
    let chunk = last["sent"][0]["chunk_id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let mut recoveries = Vec::new();
    for _ in 0..calls.clamp(1, 50) {
        let start = Instant::now();
        client.call(
            "recover_chunk",
            json!({"ctx_id": ctx_id, "chunk_id": chunk}),
        )?;
        recoveries.push(start.elapsed().as_secs_f64() * 1e3);
    }
    recoveries.sort_by(f64::total_cmp);
    let corpus = format!("{label}: {files} files, {tokens} o200k tokens");
    Ok(vec![
        Figure {
            name: "mcp select_context round trip p50 (warm)".into(),
            value: percentile(&latencies, 50),
            unit: "ms".into(),
            target: Some("<= 50".into()),
            detail: format!(
                "p95 {:.1} ms over {} calls ({reused} on the kept index), budget {BUDGET}, `svc serve` on stdio; {corpus}",
                percentile(&latencies, 95),
                latencies.len()
            ),
        },
        Figure {
            name: "mcp select_context first call (cold index)".into(),
            value: cold,
            unit: "s".into(),
            target: None,
            detail: format!("indexes the tree, then selects; {corpus}"),
        },
        Figure {
            name: "mcp recover_chunk round trip p50".into(),
            value: percentile(&recoveries, 50),
            unit: "ms".into(),
            target: None,
            detail: format!(
                "p95 {:.1} ms over {} calls; one chunk of the last commit (verified against fingerprint and content hash)",
                percentile(&recoveries, 95),
                recoveries.len()
            ),
        },
    ])
}
