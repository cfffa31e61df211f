//! `svc serve`: real MCP sessions with the rmcp client: over stdio against the built binary
//! (list the tools, call each one, an invalid call, then a valid call on the same session), and
//! over streamable HTTP against `svc serve --http 0`.

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult, JsonObject};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use serde_json::{Value, json};

use crate::harness::root;

fn arguments(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        other => panic!("arguments must be an object, got {other}"),
    }
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(arguments(args)))
        .await
        .unwrap_or_else(|e| panic!("{tool}: the call itself failed: {e}"))
}

/// The structured result of a successful call (and its text content agrees with it).
fn ok(tool: &str, result: CallToolResult) -> Value {
    assert_ne!(result.is_error, Some(true), "{tool} failed: {result:?}");
    let structured = result
        .structured_content
        .clone()
        .unwrap_or_else(|| panic!("{tool}: no structured content"));
    let text = result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_else(|| panic!("{tool}: no text content"));
    let parsed: Value = serde_json::from_str(&text).expect("text content is the JSON result");
    assert_eq!(
        parsed, structured,
        "{tool}: text and structured content differ"
    );
    structured
}

fn error_text(tool: &str, result: CallToolResult) -> String {
    assert_eq!(
        result.is_error,
        Some(true),
        "{tool} should fail: {result:?}"
    );
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_default()
}

const TOOLS: [&str; 8] = [
    "prepare_proof_guided_context",
    "advance_proof_guided_context",
    "inspect_proof_guided_context",
    "compress",
    "compress_messages",
    "select_context",
    "recover_chunk",
    "verify_answer",
];

/// Every tool once, on one session, the way an agent would chain them.
async fn exercise(client: &RunningService<RoleClient, ()>) {
    let tools = client.list_all_tools().await.expect("tools/list");
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort();
    let mut expected = TOOLS.to_vec();
    expected.sort();
    assert_eq!(names, expected);
    for tool in &tools {
        assert_eq!(tool.input_schema.get("type"), Some(&json!("object")));
    }

    // select_context on the fixture code tree, then recover an omitted chunk byte for byte.
    let code = root().join("fixtures/code");
    let selected = ok(
        "select_context",
        call(
            client,
            "select_context",
            json!({"path": code.display().to_string(), "query": "edit distance between two strings", "budget": 400}),
        )
        .await,
    );
    let ctx_id = selected["ctx_id"].as_str().expect("ctx_id").to_string();
    assert!(selected["tokens"].as_u64().expect("tokens") <= 400);
    let omitted = selected["omitted"].as_array().expect("omitted");
    let chunk = omitted
        .first()
        .or_else(|| selected["sent"].as_array().and_then(|s| s.first()))
        .expect("a chunk");
    let chunk_id = chunk["chunk_id"].as_str().expect("chunk id");
    let path = chunk["path"].as_str().expect("path");
    let recovered = ok(
        "recover_chunk",
        call(
            client,
            "recover_chunk",
            json!({"ctx_id": ctx_id, "chunk_id": chunk_id}),
        )
        .await,
    );
    let file = std::fs::read_to_string(code.join(path)).expect("fixture file");
    let text = recovered["text"].as_str().expect("text");
    assert!(
        !text.is_empty() && file.contains(text),
        "recovered bytes are the file's"
    );

    let compressed = ok(
        "compress",
        call(
            client,
            "compress",
            json!({"content": "word ".repeat(2000), "budget": 50}),
        )
        .await,
    );
    assert!(compressed["tokens"].as_u64().expect("tokens") <= 50);

    let messages = ok(
        "compress_messages",
        call(
            client,
            "compress_messages",
            json!({"messages": [
                {"role": "user", "content": "Summarise the log."},
                {"role": "assistant", "content": "line ok\n".repeat(500)},
                {"role": "user", "content": "What failed?"}
            ], "budget": 60}),
        )
        .await,
    );
    assert_eq!(messages["messages"][2]["content"], "What failed?");

    let verified = ok(
        "verify_answer",
        call(
            client,
            "verify_answer",
            json!({"context": "Paris is the capital of France.", "answer": "Paris is the capital of France.", "profile": "qa"}),
        )
        .await,
    );
    assert_eq!(verified["certificate"]["status"], "supported");

    let prepared = ok(
        "prepare_proof_guided_context",
        call(
            client,
            "prepare_proof_guided_context",
            json!({
                "documents": [{"name": "capitals.md", "text": "# Capitals\n\nParis is the capital of France.\n\nRome is the capital of Italy.\n"}],
                "query": "What is the capital of France?",
                "budget": 300
            }),
        )
        .await,
    );
    let session = prepared["session_id"].as_str().expect("session");
    let advanced = ok(
        "advance_proof_guided_context",
        call(
            client,
            "advance_proof_guided_context",
            json!({"session_id": session, "draft": "Paris is the capital of France."}),
        )
        .await,
    );
    assert_eq!(advanced["status"], "supported");
    let view = ok(
        "inspect_proof_guided_context",
        call(
            client,
            "inspect_proof_guided_context",
            json!({"session_id": session}),
        )
        .await,
    );
    assert_eq!(view["state"], "finished");

    // Invalid arguments: an error result naming the field; the session goes on.
    let message = error_text(
        "select_context",
        call(
            client,
            "select_context",
            json!({"path": code.display().to_string(), "query": "x", "budget": "big"}),
        )
        .await,
    );
    assert!(
        message.contains("select_context")
            && message.contains("`budget`")
            && message.contains("invalid type"),
        "{message}"
    );
    let message = error_text(
        "recover_chunk",
        call(
            client,
            "recover_chunk",
            json!({"ctx_id": "not-a-commit", "chunk_id": "a"}),
        )
        .await,
    );
    assert!(message.contains("not-a-commit"), "{message}");
    let unknown = client
        .call_tool(CallToolRequestParams::new("summon_model"))
        .await
        .expect_err("an unknown tool is a protocol error");
    assert!(unknown.to_string().contains("summon_model"), "{unknown}");

    let again = ok(
        "recover_chunk",
        call(
            client,
            "recover_chunk",
            json!({"ctx_id": ctx_id, "chunk_id": chunk_id}),
        )
        .await,
    );
    assert_eq!(again["text"], recovered["text"]);
}

/// `svc serve` on stdio with piped stdin and stdout, for raw JSON-RPC lines.
fn stdio_server(home: &std::path::Path) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_svc"))
        .arg("serve")
        .env("SVC_HOME", home)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("svc serve starts")
}

/// Found by probing: a `tools/call` whose params did not fit (no `name`, a list for
/// `arguments`) was answered "method not found: tools/call", which sends a client looking for a
/// method that exists. Raw JSON-RPC lines over stdio, as a hand-written client sends them.
#[test]
fn a_request_whose_params_do_not_fit_is_invalid_params_naming_the_shape() {
    use std::io::Write;
    let state = tempfile::tempdir().expect("state");
    let mut child = stdio_server(state.path());
    let lines = [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"select_context","arguments":[]}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call"}"#,
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/frobnicate","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":5,"method":"ping"}"#,
        // Regressions (found by probing): these went unanswered or were answered without an id.
        r#"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":[]}"#,
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"compress","arguments":{"content":"smile \ud83d","budget":5}}}"#,
        r#"{"id":8,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#,
    ];
    let mut stdin = child.stdin.take().expect("stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut answers = std::collections::HashMap::new();
    for line in lines {
        writeln!(stdin, "{line}").expect("send");
        stdin.flush().expect("flush");
        // The one line that is not JSON (the lone surrogate) is request 7.
        let id = serde_json::from_str::<Value>(line)
            .map_or(Some(7), |request| request.get("id").and_then(Value::as_i64));
        let Some(id) = id else {
            continue;
        };
        let mut answer = String::new();
        stdout.read_line(&mut answer).expect("an answer");
        let answer: Value = serde_json::from_str(&answer).expect("a JSON-RPC answer");
        assert_eq!(answer["id"].as_i64(), Some(id), "{answer}");
        answers.insert(id, answer);
    }
    drop(stdin);
    let _ = child.wait();
    for id in [2, 3] {
        let error = &answers[&id]["error"];
        assert_eq!(error["code"], -32602, "{error}");
        let message = error["message"].as_str().unwrap_or_default();
        assert!(message.contains("tools/call takes params"), "{message}");
    }
    assert_eq!(answers[&4]["error"]["code"], -32601);
    assert!(answers[&5].get("result").is_some(), "the session goes on");
    assert_eq!(answers[&6]["error"]["code"], -32600);
    assert!(
        answers[&6]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("`params` must be an object")),
        "{}",
        answers[&6]
    );
    assert_eq!(answers[&7]["error"]["code"], -32700, "{}", answers[&7]);
    assert!(
        answers[&8]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("`jsonrpc` must be")),
        "{}",
        answers[&8]
    );
    assert!(answers[&9].get("result").is_some(), "the session goes on");
}

/// Regression (found by probing): a client that pipes its requests and closes stdin lost the
/// answer of a call still running, though its work was done and committed.
#[test]
fn requests_read_before_stdin_closes_are_all_answered() {
    use std::io::{Read, Write};
    let state = tempfile::tempdir().expect("state");
    let mut child = stdio_server(state.path());
    let content: String = (0..60_000)
        .map(|i| {
            format!(
                "2024-05-14T22:13:{:02}Z INFO request {i} served in {}ms\n",
                i % 60,
                i % 97
            )
        })
        .collect();
    let call = serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "compress", "arguments": {"content": content, "budget": 200}}});
    let mut stdin = child.stdin.take().expect("stdin");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    )
    .expect("send");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .expect("send");
    writeln!(stdin, "{call}").expect("send");
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":3,"method":"ping"}}"#).expect("send");
    drop(stdin);
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("stdout")
        .read_to_string(&mut out)
        .expect("read");
    assert!(child.wait().expect("exit").success());
    let ids: Vec<i64> = out
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("json"))
        .filter_map(|v| v["id"].as_i64())
        .collect();
    for id in [1, 2, 3] {
        assert!(ids.contains(&id), "request {id} unanswered: {ids:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_session_lists_and_calls_every_tool_and_survives_bad_calls() {
    let state = tempfile::tempdir().expect("state");
    let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_svc"));
    command
        .arg("serve")
        .current_dir(root())
        .env("SVC_HOME", state.path())
        .env("SVC_RECENT_COMMITS", "0")
        .env_remove("RUST_LOG");
    let (transport, _stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::null())
        .spawn()
        .expect("svc serve starts");
    let client = ().serve(transport).await.expect("initialize over stdio");
    let info = client.peer_info().expect("server info");
    assert_eq!(
        info.server_info.as_ref().map(|i| i.name.as_str()),
        Some("svc")
    );
    exercise(&client).await;
    client.cancel().await.expect("close the session");
    // Commits, sessions and certificates went to the state directory given to the server.
    for dir in ["commits", "proof", "witness"] {
        assert!(state.path().join(dir).is_dir(), "{dir} under SVC_HOME");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamable_http_session_on_a_free_port() {
    svc::witness::nli::install_crypto_provider();
    let state = tempfile::tempdir().expect("state");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_svc"))
        .args(["serve", "--http", "0"])
        .current_dir(root())
        .env("SVC_HOME", state.path())
        .env("SVC_RECENT_COMMITS", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("svc serve --http starts");
    let stderr = child.stderr.take().expect("stderr");
    let mut line = String::new();
    BufReader::new(stderr)
        .read_line(&mut line)
        .expect("the address line");
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .trim_end_matches(';')
        .to_string();
    assert!(url.ends_with("/mcp"), "{url}");
    let transport = StreamableHttpClientTransport::from_uri(url.clone());
    let client = ().serve(transport).await.expect("initialize over HTTP");
    exercise(&client).await;
    client.cancel().await.expect("close the session");

    // A browser page from another origin is refused.
    let refused = reqwest::Client::new()
        .post(&url)
        .header("origin", "https://evil.example")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"page","version":"1"}}}"#)
        .send()
        .await
        .expect("response");
    assert_eq!(refused.status(), reqwest::StatusCode::FORBIDDEN);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_port_in_use_is_a_clear_error() {
    let holder = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = holder.local_addr().expect("addr").port();
    let state = tempfile::tempdir().expect("state");
    let out = crate::harness::run(crate::harness::svc(state.path()).args([
        "serve",
        "--http",
        &port.to_string(),
    ]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("cannot listen on 127.0.0.1:{port}"))
            && out.stderr.contains("--http"),
        "{}",
        out.stderr
    );
}
