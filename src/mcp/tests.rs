//! The tools called directly (no transport): schemas, results and errors. The MCP sessions over
//! stdio and HTTP are in tests/it/mcp.rs.

use serde_json::{Map, Value, json};

use super::server::tool_list;
use super::tools::{ToolError, ToolName, Toolbox};

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        other => panic!("not an object: {other}"),
    }
}

fn call(toolbox: &Toolbox, tool: ToolName, arguments: Value) -> Result<Value, ToolError> {
    toolbox.call(tool, object(arguments))
}

const LIB: &str = "//! Retry helpers.\n\n/// Retries a request with exponential backoff until the retry budget is spent.\npub fn retry_with_backoff(attempt: u32, budget: u32) -> Option<u32> {\n    if attempt >= budget {\n        return None;\n    }\n    Some(100 * 2u32.pow(attempt))\n}\n\n/// Formats a duration in milliseconds for humans.\npub fn format_millis(ms: u32) -> String {\n    format!(\"{ms} ms\")\n}\n";

#[test]
fn every_tool_has_an_object_schema_a_description_and_a_unique_name() {
    let tools = tool_list();
    assert_eq!(tools.len(), 8);
    let mut names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 8);
    for tool in &tools {
        let schema = tool.input_schema.as_ref();
        assert_eq!(schema.get("type"), Some(&json!("object")), "{}", tool.name);
        assert!(
            schema.get("properties").is_some_and(Value::is_object),
            "{}",
            tool.name
        );
        assert!(
            tool.description.as_deref().is_some_and(|d| d.len() > 40),
            "{}",
            tool.name
        );
        let named = ToolName::from_name(&tool.name).expect("known tool");
        assert_eq!(named.as_str(), tool.name);
    }
}

#[test]
fn schemas_require_exactly_the_fields_without_a_default_and_list_the_wire_values() {
    let tools = tool_list();
    let schema = |name: &str| {
        tools
            .iter()
            .find(|t| t.name == name)
            .expect("tool")
            .input_schema
            .clone()
    };
    let required = |name: &str| {
        let mut fields: Vec<String> = schema(name)
            .get("required")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        fields.sort();
        fields
    };
    assert_eq!(required("compress"), ["budget", "content"]);
    assert_eq!(required("compress_messages"), ["budget", "messages"]);
    assert_eq!(required("select_context"), ["budget", "path", "query"]);
    assert_eq!(required("recover_chunk"), ["chunk_id", "ctx_id"]);
    assert_eq!(required("verify_answer"), ["answer", "context"]);
    assert_eq!(
        required("prepare_proof_guided_context"),
        ["budget", "query"]
    );
    assert_eq!(
        required("advance_proof_guided_context"),
        ["draft", "session_id"]
    );
    assert_eq!(required("inspect_proof_guided_context"), ["session_id"]);

    let verify = schema("verify_answer");
    let modes = &verify["properties"]["mode"]["enum"];
    assert_eq!(modes, &json!(["audit", "annotate", "strict"]));
    let profiles = verify["properties"]["profile"]["enum"]
        .as_array()
        .expect("profiles")
        .clone();
    // Every value the schema offers is accepted by the tool.
    for profile in profiles {
        let value: crate::witness::Profile =
            serde_json::from_value(profile.clone()).expect("a profile the schema lists");
        assert_eq!(json!(value.as_str()), profile);
    }
    let kinds = &schema("compress")["properties"]["kind"]["enum"];
    assert_eq!(kinds, &json!(["code", "json", "logs", "prose"]));
    let risk = &schema("prepare_proof_guided_context")["properties"]["mode"]["enum"];
    assert_eq!(risk, &json!(["audit", "strict"]));
    // Found by probing: the schemas offered 0 where the tools refuse it.
    for (tool, field) in [
        ("compress", "budget"),
        ("compress_messages", "budget"),
        ("select_context", "budget"),
        ("prepare_proof_guided_context", "budget"),
        ("prepare_proof_guided_context", "max_rounds"),
        ("prepare_proof_guided_context", "max_chunks_per_round"),
    ] {
        assert_eq!(
            schema(tool)["properties"][field]["minimum"],
            json!(1),
            "{tool}.{field}"
        );
    }
    assert_eq!(
        schema("prepare_proof_guided_context")["properties"]["recovery_token_budget"]["minimum"],
        json!(0),
        "a recovery budget of 0 is a valid setting"
    );
}

#[test]
fn invalid_arguments_name_the_field_and_what_was_wrong() {
    let home = tempfile::tempdir().expect("home");
    let toolbox = Toolbox::new(home.path());
    let message = |tool, arguments| {
        call(&toolbox, tool, arguments)
            .expect_err("invalid arguments")
            .to_string()
    };
    let missing = message(ToolName::Compress, json!({"content": "x"}));
    assert!(missing.contains("missing field `budget`"), "{missing}");
    let wrong_type = message(
        ToolName::Compress,
        json!({"content": "x", "budget": "many"}),
    );
    assert!(
        wrong_type.contains("`budget`") && wrong_type.contains("invalid type"),
        "{wrong_type}"
    );
    let unknown = message(
        ToolName::RecoverChunk,
        json!({"ctx_id": "ctx_1", "chunk_id": "a", "chunk": "b"}),
    );
    assert!(unknown.contains("unknown field `chunk`"), "{unknown}");
    let bad_enum = message(
        ToolName::VerifyAnswer,
        json!({"context": "a", "answer": "b", "mode": "loud"}),
    );
    assert!(
        bad_enum.contains("`mode`") && bad_enum.contains("audit"),
        "{bad_enum}"
    );
    let zero = message(ToolName::Compress, json!({"content": "x", "budget": 0}));
    assert!(zero.contains("at least 1"), "{zero}");
    let neither = message(
        ToolName::PrepareProofGuidedContext,
        json!({"query": "q", "budget": 100}),
    );
    assert!(neither.contains("`path`"), "{neither}");
    let bad_message = message(
        ToolName::CompressMessages,
        json!({"messages": [{"role": "user", "content": "hi"}, {"content": "no role"}], "budget": 50}),
    );
    assert!(
        bad_message.contains("messages[1]") && bad_message.contains("role"),
        "{bad_message}"
    );
    let session = message(
        ToolName::InspectProofGuidedContext,
        json!({"session_id": "pgs_0000000000000000"}),
    );
    assert!(session.contains("pgs_0000000000000000"), "{session}");
}

#[test]
fn compress_then_recover_gives_back_every_elided_byte() {
    let home = tempfile::tempdir().expect("home");
    let toolbox = Toolbox::new(home.path());
    let log: String = (0..400)
        .map(|i| {
            format!(
                "2026-01-01T00:00:{:02} INFO request {i} served in 3 ms\n",
                i % 60
            )
        })
        .chain(["2026-01-01T00:07:00 ERROR database connection refused\n".to_string()])
        .collect();
    let result = call(
        &toolbox,
        ToolName::Compress,
        json!({"content": log, "budget": 120, "kind": "logs"}),
    )
    .expect("compress");
    assert_eq!(result["kind"], "logs");
    assert!(result["tokens"].as_u64().expect("tokens") <= 120);
    assert!(
        result["text"]
            .as_str()
            .expect("text")
            .contains("connection refused")
    );
    let ctx_id = result["ctx_id"].as_str().expect("ctx_id");
    let elisions = result["elisions"].as_array().expect("elisions");
    assert!(!elisions.is_empty());
    let chunk_id = elisions[0]["chunk_id"].as_str().expect("chunk id");
    let recovered = call(
        &toolbox,
        ToolName::RecoverChunk,
        json!({"ctx_id": ctx_id, "chunk_id": chunk_id}),
    )
    .expect("recover");
    let text = recovered["text"].as_str().expect("text");
    assert!(log.contains(text) && !text.is_empty());
    assert_eq!(recovered["bytes"], json!(text.len()));
}

#[test]
fn compress_messages_keeps_the_latest_user_turn_verbatim() {
    let home = tempfile::tempdir().expect("home");
    let toolbox = Toolbox::new(home.path());
    let tool_output: String = (0..300).map(|i| format!("line {i}: ok\n")).collect();
    let messages = json!([
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Run the tests."},
        {"role": "tool", "content": tool_output, "tool_call_id": "call_1"},
        {"role": "user", "content": "Which line failed?"}
    ]);
    let result = call(
        &toolbox,
        ToolName::CompressMessages,
        json!({"messages": messages, "budget": 150}),
    )
    .expect("compress_messages");
    assert!(result["tokens"].as_u64().expect("tokens") <= 150);
    let out = result["messages"].as_array().expect("messages");
    assert_eq!(out.len(), 4);
    assert_eq!(out[3]["content"], "Which line failed?");
    assert_eq!(out[2]["tool_call_id"], "call_1");
    assert!(result["ctx_id"].as_str().expect("id").starts_with("ctx_"));
}

#[test]
fn select_context_sends_the_matching_function_and_lists_what_it_left_out() {
    let home = tempfile::tempdir().expect("home");
    let tree = tempfile::tempdir().expect("tree");
    std::fs::write(tree.path().join("retry.rs"), LIB).expect("write");
    for i in 0..30 {
        std::fs::write(
            tree.path().join(format!("filler_{i}.rs")),
            format!("/// Filler {i}.\npub fn filler_{i}(x: u32) -> u32 {{\n    x * {i} + 1\n}}\n"),
        )
        .expect("write");
    }
    let toolbox = Toolbox::new(home.path());
    let arguments = json!({
        "path": tree.path().display().to_string(),
        "query": "retry a request with exponential backoff",
        "budget": 200,
        "show_omitted": 3,
    });
    let first = call(&toolbox, ToolName::SelectContext, arguments.clone()).expect("select");
    assert_eq!(first["index_reused"], false);
    assert!(first["tokens"].as_u64().expect("tokens") <= 200);
    assert!(
        first["rendered"]
            .as_str()
            .expect("rendered")
            .contains("retry_with_backoff")
    );
    assert_eq!(first["files"], 31);
    assert!(first["omitted"].as_array().expect("omitted").len() <= 3);
    let sent = first["sent"].as_array().expect("sent");
    assert!(
        sent.iter()
            .any(|e| e["path"] == "retry.rs" && e["resolution"] == "full")
    );
    let second = call(&toolbox, ToolName::SelectContext, arguments).expect("select again");
    assert_eq!(second["index_reused"], true);
    assert_eq!(second["ctx_id"], first["ctx_id"]);

    // Any fragment, sent or not, comes back byte for byte.
    let chunk = sent[0]["chunk_id"].as_str().expect("chunk");
    let recovered = call(
        &toolbox,
        ToolName::RecoverChunk,
        json!({"ctx_id": first["ctx_id"], "chunk_id": chunk}),
    )
    .expect("recover");
    assert!(
        LIB.contains(recovered["text"].as_str().expect("text"))
            || recovered["text"].as_str().expect("text").contains("filler")
    );

    let too_many = call(
        &toolbox,
        ToolName::SelectContext,
        json!({"path": tree.path().display().to_string(), "query": "q", "budget": 10, "show_omitted": 1000}),
    )
    .expect_err("too many")
    .to_string();
    assert!(too_many.contains("show_omitted"), "{too_many}");
    let missing = call(
        &toolbox,
        ToolName::SelectContext,
        json!({"path": tree.path().join("nope").display().to_string(), "query": "q", "budget": 10}),
    )
    .expect_err("no directory")
    .to_string();
    assert!(missing.contains("does not exist"), "{missing}");
}

#[test]
fn verify_answer_flags_the_contradiction_and_stores_the_certificate() {
    let home = tempfile::tempdir().expect("home");
    let toolbox = Toolbox::new(home.path());
    let context = "The Eiffel Tower was completed in 1889. It is 330 metres tall.";
    let result = call(
        &toolbox,
        ToolName::VerifyAnswer,
        json!({
            "context": context,
            "answer": "The Eiffel Tower was completed in 1925.",
            "mode": "annotate",
            "profile": "qa",
        }),
    )
    .expect("verify");
    let certificate = &result["certificate"];
    assert_eq!(certificate["status"], "flagged");
    let id = certificate["id"].as_str().expect("id");
    assert!(
        home.path()
            .join("witness/certificates")
            .join(format!("{id}.json"))
            .is_file()
    );
    let supported = call(
        &toolbox,
        ToolName::VerifyAnswer,
        json!({"context": context, "answer": "The Eiffel Tower was completed in 1889.", "store": false}),
    )
    .expect("verify");
    assert_eq!(supported["certificate"]["status"], "supported");
    assert_eq!(supported["stored"], false);
    assert_eq!(
        supported["output"],
        "The Eiffel Tower was completed in 1889."
    );
}

#[test]
fn the_proof_tools_run_a_session_from_prepare_to_finished() {
    let home = tempfile::tempdir().expect("home");
    let toolbox = Toolbox::new(home.path());
    let documents = json!([
        {"name": "tower.md", "text": "# Tower\n\nThe Eiffel Tower was completed in 1889 for the World's Fair.\n"},
        {"name": "bridge.md", "text": "# Bridge\n\nThe Golden Gate Bridge opened in 1937.\n"}
    ]);
    let prepared = call(
        &toolbox,
        ToolName::PrepareProofGuidedContext,
        json!({"documents": documents, "query": "When was the Eiffel Tower completed?", "budget": 200, "idempotency_key": "k1"}),
    )
    .expect("prepare");
    let session = prepared["session_id"].as_str().expect("session");
    assert!(session.starts_with("pgs_"));
    assert_eq!(prepared["state"], "awaiting_draft");
    assert_eq!(
        prepared["request"]["query"],
        "When was the Eiffel Tower completed?"
    );
    // The same key and input replay the same response.
    let replay = call(
        &toolbox,
        ToolName::PrepareProofGuidedContext,
        json!({"documents": documents, "query": "When was the Eiffel Tower completed?", "budget": 200, "idempotency_key": "k1"}),
    )
    .expect("replay");
    assert_eq!(replay, prepared);

    let advanced = call(
        &toolbox,
        ToolName::AdvanceProofGuidedContext,
        json!({"session_id": session, "draft": "The Eiffel Tower was completed in 1889."}),
    )
    .expect("advance");
    assert_eq!(advanced["state"], "finished");
    assert_eq!(advanced["status"], "supported");
    let view = call(
        &toolbox,
        ToolName::InspectProofGuidedContext,
        json!({"session_id": session}),
    )
    .expect("inspect");
    assert_eq!(view["state"], "finished");
    assert_eq!(view["rounds"], 1);
    let closed = call(
        &toolbox,
        ToolName::AdvanceProofGuidedContext,
        json!({"session_id": session, "draft": "again"}),
    )
    .expect_err("finished session")
    .to_string();
    assert!(closed.contains(session), "{closed}");
}
