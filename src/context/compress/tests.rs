use super::*;
use crate::context::commit::CommitStore;

fn setup() -> (tempfile::TempDir, CommitStore, Tokenizer) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = CommitStore::new(dir.path());
    (dir, store, Tokenizer::default())
}

fn options(kind: Option<ContentKind>) -> CompressOptions {
    CompressOptions {
        kind,
        query: None,
        source: "test".into(),
    }
}

/// A frozen copy of an early `context/commit.rs`: real Rust, but not the live file, whose edits
/// must not move this test.
const CODE: &str = include_str!("../../../fixtures/compress/commit_store.rs");

/// Checks the invariants every compression must keep.
fn check(
    content: &str,
    budget: usize,
    kind: ContentKind,
    store: &CommitStore,
    tokenizer: &Tokenizer,
) -> Compressed {
    let result = compress(content, budget, &options(Some(kind)), store, tokenizer)
        .unwrap_or_else(|e| panic!("{kind} at budget {budget}: {e}"));
    assert!(
        result.tokens <= budget,
        "{kind} budget {budget}: {} tokens",
        result.tokens
    );
    assert_eq!(
        result.tokens,
        tokenizer.count(&result.text),
        "reported count is exact"
    );
    assert_eq!(result.original_tokens, tokenizer.count(content));
    for elision in &result.elisions {
        assert!(
            result
                .text
                .contains(&format!("recover {}", elision.chunk_id)),
            "{kind}: elision {} is marked in the text",
            elision.chunk_id
        );
        let recovered = store
            .recover(&result.ctx_id, &elision.chunk_id)
            .expect("recover");
        assert_eq!(recovered.len(), elision.bytes);
        assert!(
            content.contains(&recovered),
            "recovered bytes come from the original"
        );
        assert_eq!(elision.tokens, tokenizer.count(&recovered));
    }
    let receipt = store.receipt(&result.ctx_id).expect("receipt");
    if kind == ContentKind::Json {
        if !result.elisions.is_empty() {
            assert_eq!(store.recover(&result.ctx_id, "doc").expect("doc"), content);
            serde_json::from_str::<serde_json::Value>(&result.text).expect("output stays JSON");
        }
    } else {
        // Line and sentence kinds partition the original: their chunks concatenate to it.
        let whole: String = receipt
            .chunks
            .iter()
            .map(|c| store.recover(&result.ctx_id, &c.chunk_id).expect("chunk"))
            .collect();
        assert_eq!(
            whole, content,
            "{kind}: chunks reassemble the original byte-for-byte"
        );
    }
    result
}

#[test]
fn budgets_are_respected_and_elisions_recoverable_for_every_kind() {
    let (_dir, store, tokenizer) = setup();
    let log = sample::log(3000, 7);
    let json = sample::json(150, 7);
    let prose = sample::prose(40, 7);
    let inputs = [
        (ContentKind::Logs, log.as_str()),
        (ContentKind::Json, json.as_str()),
        (ContentKind::Prose, prose.as_str()),
        (ContentKind::Code, CODE),
    ];
    for (kind, content) in inputs {
        assert_eq!(ContentKind::detect(content), kind, "detected kind");
        let original = tokenizer.count(content);
        let mut reduced_somewhere = false;
        for budget in [
            60,
            90,
            150,
            300,
            500,
            1000,
            2000,
            4000,
            original - 1,
            original,
            original + 10,
        ] {
            match compress(content, budget, &options(Some(kind)), &store, &tokenizer) {
                Err(CompressError::OverBudget { minimum_tokens, .. }) => {
                    assert!(
                        minimum_tokens > budget,
                        "{kind}: minimum {minimum_tokens} vs {budget}"
                    );
                    continue;
                }
                Err(e) => panic!("{kind} budget {budget}: {e}"),
                Ok(_) => {}
            }
            let result = check(content, budget, kind, &store, &tokenizer);
            if budget >= original {
                assert_eq!(
                    result.text, content,
                    "content within budget is returned verbatim"
                );
                assert!(result.elisions.is_empty());
            } else {
                reduced_somewhere |= !result.elisions.is_empty();
            }
        }
        assert!(reduced_somewhere, "{kind} was reduced at some budget");
    }
}

#[test]
fn many_budgets_on_small_inputs() {
    let (_dir, store, tokenizer) = setup();
    let log = sample::log(200, 3);
    let json = sample::json(12, 3);
    let prose = sample::prose(6, 3);
    for (kind, content) in [
        (ContentKind::Logs, log.as_str()),
        (ContentKind::Json, json.as_str()),
        (ContentKind::Prose, prose.as_str()),
        (ContentKind::Code, &CODE[..6000]),
    ] {
        let mut fitted = 0;
        for budget in (20..1200).step_by(37) {
            if compress(content, budget, &options(Some(kind)), &store, &tokenizer).is_ok() {
                check(content, budget, kind, &store, &tokenizer);
                fitted += 1;
            }
        }
        assert!(fitted > 20, "{kind}: only {fitted} budgets fitted");
    }
}

#[test]
fn logs_keep_errors_first_and_last_lines_and_collapse_repeats() {
    let (_dir, store, tokenizer) = setup();
    let log = sample::log(5000, 11);
    let result = check(&log, 1500, ContentKind::Logs, &store, &tokenizer);
    let first = log.lines().next().expect("first line");
    let last = log.lines().last().expect("last line");
    assert!(result.text.starts_with(first));
    assert!(result.text.trim_end().ends_with(last));
    assert!(result.text.contains("ERROR handler: request"));
    assert!(result.text.contains("ERROR db: query timeout"));
    assert!(
        result
            .text
            .contains("    at inventory::client::Client::reserve"),
        "stack trace kept"
    );
    assert!(result.text.contains("lines elided"));
    assert!(result.elisions.len() > 3);
}

#[test]
fn json_samples_arrays_and_truncates_strings_with_counts() {
    let (_dir, store, tokenizer) = setup();
    let json = sample::json(500, 5);
    let result = check(&json, 2000, ContentKind::Json, &store, &tokenizer);
    let value: serde_json::Value = serde_json::from_str(&result.text).expect("valid JSON");
    for key in ["api_version", "generated_at", "query", "total", "results"] {
        assert!(value.get(key).is_some(), "key {key} kept");
    }
    let results = value["results"].as_array().expect("array");
    let marker = results
        .last()
        .and_then(|v| v.as_str())
        .expect("marker element");
    assert!(marker.contains("more items · recover J"), "{marker}");
    assert!(
        result
            .elisions
            .iter()
            .any(|e| e.locator.starts_with("$.results["))
    );
}

#[test]
fn code_keeps_signatures_and_elides_bodies() {
    let (_dir, store, tokenizer) = setup();
    let result = check(CODE, 1800, ContentKind::Code, &store, &tokenizer);
    for signature in [
        "pub struct CommitStore {",
        "    pub fn recover(&self, ctx_id: &str, chunk_id: &str) -> Result<String, CommitError> {",
        "pub fn fingerprint(chunk_id: &str, bytes: &[u8]) -> String {",
        "use serde::{Deserialize, Serialize};",
    ] {
        assert!(result.text.contains(signature), "kept: {signature}");
    }
    assert!(result.text.contains("// … "), "bodies are marked");
}

#[test]
fn python_code_uses_hash_markers() {
    let (_dir, store, tokenizer) = setup();
    let mut source = String::from("import os\n\n\nclass Store:\n    \"\"\"Keeps blobs.\"\"\"\n\n");
    for i in 0..30 {
        source.push_str(&format!(
            "    def method_{i}(self, key):\n        value = self.lookup(key)\n        if value is None:\n            raise KeyError(key)\n        return value * {i}\n\n"
        ));
    }
    let result = check(&source, 400, ContentKind::Code, &store, &tokenizer);
    assert!(result.text.contains("    def method_0(self, key):"));
    assert!(result.text.contains("        # … "));
}

#[test]
fn prose_keeps_query_and_fact_sentences() {
    let (_dir, store, tokenizer) = setup();
    let prose = sample::prose(30, 9);
    let mut opts = options(Some(ContentKind::Prose));
    opts.query = Some("Which warehouse shipped more orders?".into());
    let result = compress(&prose, 300, &opts, &store, &tokenizer).expect("compress");
    assert!(result.tokens <= 300);
    assert!(
        result
            .text
            .contains("The Lisbon warehouse shipped 18,240 orders")
    );
    assert!(result.text.starts_with("# Quarterly operations report"));
    for fact in [
        "Maria Okafor owns",
        "PostgreSQL 16 upgrade",
        "Refund requests rose",
    ] {
        assert!(result.text.contains(fact), "fact kept: {fact}");
    }
    // Repeated sentences go first: each filler sentence appears at most once.
    assert!(
        result
            .text
            .matches("There were a number of conversations")
            .count()
            <= 1
    );
    assert!(
        prose
            .matches("There were a number of conversations")
            .count()
            > 1
    );
}

#[test]
fn budget_zero_impossible_budget_and_bad_input_are_errors() {
    let (_dir, store, tokenizer) = setup();
    let log = sample::log(500, 1);
    assert!(matches!(
        compress(&log, 0, &options(None), &store, &tokenizer),
        Err(CompressError::ZeroBudget)
    ));
    match compress(&log, 3, &options(None), &store, &tokenizer) {
        Err(error @ CompressError::OverBudget { minimum_tokens, .. }) => {
            assert!(minimum_tokens > 3);
            let message = error.to_string();
            assert!(
                message.contains("raise the budget to at least"),
                "{message}"
            );
        }
        other => panic!("expected OverBudget, got {other:?}"),
    }
    // Found by probing: a small file was told to raise the budget above its own size, which
    // returns it verbatim.
    let small = "def f():\n    return 1\n";
    let size = tokenizer.count(small);
    match compress(small, size - 1, &options(None), &store, &tokenizer) {
        Err(CompressError::OverBudget { minimum_tokens, .. }) => assert_eq!(minimum_tokens, size),
        other => panic!("expected OverBudget, got {other:?}"),
    }
    let verbatim = compress(small, size, &options(None), &store, &tokenizer).expect("fits");
    assert_eq!(verbatim.text, small);
    let bytes = b"valid start \xff\xfe then junk";
    match compress_bytes(bytes, 100, &options(None), &store, &tokenizer) {
        Err(CompressError::NotUtf8 {
            offset,
            source_name,
        }) => {
            assert_eq!(offset, 12);
            assert_eq!(source_name, "test");
        }
        other => panic!("expected NotUtf8, got {other:?}"),
    }
    match compress(
        "{\"a\": [1, 2,, 3]}",
        100,
        &options(Some(ContentKind::Json)),
        &store,
        &tokenizer,
    ) {
        Err(CompressError::InvalidJson { line, column, .. }) => {
            assert_eq!((line, column), (1, 13));
        }
        other => panic!("expected InvalidJson, got {other:?}"),
    }
}

#[test]
fn empty_content_fits() {
    let (_dir, store, tokenizer) = setup();
    let result = compress("", 5, &options(None), &store, &tokenizer).expect("empty");
    assert_eq!(result.text, "");
    assert_eq!(result.tokens, 0);
}

#[test]
fn thousands_separators() {
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(999), "999");
    assert_eq!(thousands(1000), "1,000");
    assert_eq!(thousands(1_234_567), "1,234,567");
}

mod messages_tests {
    use super::*;

    fn conversation() -> Vec<Message> {
        let log = sample::log(800, 2);
        let json = sample::json(60, 2);
        vec![
            Message::text(
                "system",
                "You are a careful on-call assistant. Cite log lines.",
            ),
            Message::text("user", "The checkout is failing. Here is the service log."),
            Message::text("tool", &log),
            Message::text("assistant", &sample::prose(8, 4)),
            serde_json::from_value(serde_json::json!({
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": json},
                    {"type": "text", "text": "That was the orders dump."}
                ]
            }))
            .expect("anthropic message"),
            Message::text("assistant", "I will look at the inventory-service errors."),
            Message::text("user", "Why does the inventory-service refuse connections?"),
        ]
    }

    #[test]
    fn keeps_system_and_latest_user_and_reduces_tools_first() {
        let (_dir, store, tokenizer) = setup();
        let messages = conversation();
        let result = compress_messages(&messages, 3000, &store, &tokenizer).expect("compress");
        assert!(result.tokens <= 3000, "{}", result.tokens);
        assert!(result.original_tokens > result.tokens);
        assert_eq!(result.messages[0], messages[0], "system prompt verbatim");
        assert_eq!(result.messages[6], messages[6], "latest user turn verbatim");
        assert_eq!(
            result.messages[5], messages[5],
            "small recent turn untouched"
        );
        assert_ne!(result.messages[2], messages[2], "tool output reduced");
        assert!(!result.elisions.is_empty());
        let rendered = serde_json::to_string(&result.messages).expect("json");
        for elision in &result.elisions {
            let recovered = store
                .recover(&result.ctx_id, &elision.chunk_id)
                .expect("recover");
            assert_eq!(recovered.len(), elision.bytes);
            assert!(
                rendered.contains(&format!("recover {}", elision.chunk_id)),
                "handle {} is in the messages",
                elision.chunk_id
            );
        }
        // Every original slot is recoverable from the one commit.
        let receipt = store.receipt(&result.ctx_id).expect("receipt");
        assert!(receipt.chunk("m0").is_some());
        assert_eq!(
            store.recover(&result.ctx_id, "m0").expect("system"),
            "You are a careful on-call assistant. Cite log lines."
        );
    }

    /// Regression (found by probing): the usual Anthropic agent shape ends in a `user`
    /// message of `tool_result` blocks only; it was kept whole as "the latest user turn", so a
    /// large tool output could never be reduced and the conversation "could not fit".
    #[test]
    fn a_trailing_tool_result_message_is_tool_output_not_the_users_turn() {
        let (_dir, store, tokenizer) = setup();
        let log = sample::log(3000, 3);
        let messages: Vec<Message> = serde_json::from_value(serde_json::json!([
            {"role": "user", "content": "check the log"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "read_log", "input": {}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": log}
            ]}
        ]))
        .expect("conversation");
        let result = compress_messages(&messages, 800, &store, &tokenizer).expect("compress");
        assert!(result.tokens <= 800, "{}", result.tokens);
        assert_eq!(result.messages[0], messages[0], "the user's turn verbatim");
        assert_ne!(result.messages[2], messages[2], "the tool output reduced");
    }

    #[test]
    fn tight_budgets_elide_whole_turns_and_stay_in_budget() {
        let (_dir, store, tokenizer) = setup();
        let messages = conversation();
        for budget in [120, 200, 400, 800, 1500] {
            let result = compress_messages(&messages, budget, &store, &tokenizer)
                .unwrap_or_else(|e| panic!("budget {budget}: {e}"));
            assert!(result.tokens <= budget);
            assert_eq!(result.messages[0], messages[0]);
            assert_eq!(result.messages[6], messages[6]);
        }
    }

    #[test]
    fn nested_tool_result_blocks_are_reduced_and_other_blocks_kept() {
        let (_dir, store, tokenizer) = setup();
        let log = sample::log(400, 8);
        let messages: Vec<Message> = serde_json::from_value(serde_json::json!([
            {"role": "system", "content": "Be brief."},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_1", "name": "read_log", "input": {"path": "a.log"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": [
                    {"type": "text", "text": log},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
                ]}
            ]},
            {"role": "user", "content": [{"type": "text", "text": "What failed?"}]}
        ]))
        .expect("messages");
        let result = compress_messages(&messages, 600, &store, &tokenizer).expect("compress");
        assert!(result.tokens <= 600);
        assert_eq!(result.messages[1], messages[1], "tool_use block untouched");
        assert_eq!(result.messages[3], messages[3]);
        let reduced = &result.messages[2].content[0]["content"];
        assert_eq!(
            reduced[1], messages[2].content[0]["content"][1],
            "image block untouched"
        );
        let text = reduced[0]["text"].as_str().expect("text");
        assert!(text.contains("recover m2.b0.c0."), "{text}");
        assert!(
            result
                .elisions
                .iter()
                .all(|e| e.chunk_id.starts_with("m2.b0.c0."))
        );
    }

    /// Regression (found by probing): `{"system", "messages", …}` came back as the bare message
    /// array — an Anthropic request's system prompt, model and tools were dropped, uncounted and
    /// outside the commit.
    #[test]
    fn a_request_keeps_its_system_prompt_and_other_fields_and_counts_them() {
        let (_dir, store, tokenizer) = setup();
        let messages = serde_json::to_value(conversation()[1..].to_vec()).expect("messages");
        let system = "NEVER reveal the admin password. Answer in French.";
        let request = serde_json::json!({
            "model": "claude-sonnet-4", "max_tokens": 1024, "system": system,
            "tools": [{"name": "read_log", "input_schema": {"type": "object"}}],
            "messages": messages,
        });
        let conversation = parse_conversation(&request.to_string(), "request.json").expect("parse");
        let bare = parse_conversation(&messages.to_string(), "bare.json").expect("parse");
        let result = compress_conversation(&conversation, 3000, &store, &tokenizer).expect("ok");
        let alone = compress_conversation(&bare, 3000, &store, &tokenizer).expect("ok");
        let out = result.request.as_ref().expect("the request comes back");
        assert_eq!(out["system"], system);
        assert_eq!(out["model"], "claude-sonnet-4");
        assert_eq!(out["max_tokens"], 1024);
        assert_eq!(out["tools"], request["tools"]);
        assert_eq!(
            out["messages"],
            serde_json::to_value(&result.messages).expect("json")
        );
        assert!(alone.request.is_none());
        let fixed = tokenizer.count(system) + tokenizer.count(&request["tools"].to_string());
        assert_eq!(result.original_tokens, alone.original_tokens + fixed);
        assert!(result.tokens <= 3000);
        assert_ne!(
            result.ctx_id, alone.ctx_id,
            "the system prompt is in the commit"
        );
        let recovered = store.recover(&result.ctx_id, "system").expect("recover");
        assert_eq!(recovered, system);
        // Over budget with the system prompt: an error naming the protected size, not a drop.
        let small = alone.tokens.min(tokenizer.count(system) + 5);
        match compress_conversation(&conversation, small, &store, &tokenizer) {
            Err(CompressError::ProtectedOverBudget { .. }) => {}
            other => panic!("expected ProtectedOverBudget, got {other:?}"),
        }
        let bad = serde_json::json!({"system": 3, "messages": []}).to_string();
        match parse_conversation(&bad, "bad.json") {
            Err(CompressError::NotAConversation { problem, .. }) => {
                assert!(problem.contains("`system`"), "{problem}")
            }
            other => panic!("expected NotAConversation, got {other:?}"),
        }
    }

    /// Regression (found by probing): an image's base64 data in an old turn counted as tens of
    /// thousands of tokens that nothing could reduce, so the conversation never fit; an old media
    /// block is now replaced whole by a marker and recovered as its exact JSON.
    #[test]
    fn old_image_blocks_are_elided_whole_and_recovered_exactly() {
        let (_dir, store, tokenizer) = setup();
        let data: String = (0..20_000u32)
            .map(|i| char::from(b'A' + (i.wrapping_mul(2_654_435_761) % 26) as u8))
            .collect();
        let image = serde_json::json!({"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{data}")}});
        let inner = serde_json::json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}});
        let messages: Vec<Message> = serde_json::from_value(serde_json::json!([
            {"role": "user", "content": [{"type": "text", "text": "see screenshot"}, image]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "shot", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [inner]}]},
            {"role": "assistant", "content": "It shows the login page."},
            {"role": "user", "content": "Why is the button grey?"}
        ]))
        .expect("messages");
        let result = compress_messages(&messages, 300, &store, &tokenizer).expect("fits");
        assert!(result.tokens <= 300, "{}", result.tokens);
        assert_eq!(
            result.messages[1], messages[1],
            "the tool_use block is kept"
        );
        assert_eq!(result.messages[4], messages[4]);
        let marker = result.messages[0].content[1]["text"]
            .as_str()
            .expect("marker");
        assert!(marker.contains("recover m0.b1"), "{marker}");
        let recovered = store.recover(&result.ctx_id, "m0.b1").expect("recover");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&recovered).expect("json"),
            image
        );
        let recovered = store.recover(&result.ctx_id, "m2.b0.c0").expect("recover");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&recovered).expect("json"),
            inner
        );
    }

    #[test]
    fn protected_over_budget_is_an_error() {
        let (_dir, store, tokenizer) = setup();
        let messages = conversation();
        match compress_messages(&messages, 8, &store, &tokenizer) {
            Err(CompressError::ProtectedOverBudget {
                protected_tokens,
                budget,
            }) => {
                assert_eq!(budget, 8);
                assert!(protected_tokens > 8);
            }
            other => panic!("expected ProtectedOverBudget, got {other:?}"),
        }
        assert!(matches!(
            compress_messages(&messages, 0, &store, &tokenizer),
            Err(CompressError::ZeroBudget)
        ));
        let bad = vec![Message {
            role: "user".into(),
            content: serde_json::json!(42),
            extra: Default::default(),
        }];
        assert!(matches!(
            compress_messages(&bad, 10, &store, &tokenizer),
            Err(CompressError::InvalidMessage { index: 0, .. })
        ));
    }
}

#[test]
#[ignore = "prints sample outputs for inspection"]
fn show_samples() {
    let (_dir, store, tokenizer) = setup();
    let budget: usize = std::env::var("BUDGET")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(1500);
    let kind = std::env::var("KIND").unwrap_or_default();
    let content = match kind.as_str() {
        "logs" => sample::log(5000, 11),
        "json" => sample::json(300, 5),
        "prose" => sample::prose(30, 9),
        _ => CODE.to_string(),
    };
    let result = compress(&content, budget, &options(None), &store, &tokenizer).expect("compress");
    println!(
        "{}\n--- {} -> {} tokens",
        result.text, result.original_tokens, result.tokens
    );
}

/// Regenerates the golden inputs under `fixtures/compress/` (run with `--ignored` after
/// changing the sample generators; the golden outputs are then refreshed by the integration
/// test with `SVC_UPDATE_GOLDEN=1`).
#[test]
#[ignore = "writes fixture inputs"]
fn write_fixture_inputs() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/compress");
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("service.log"), sample::log(600, 42)).expect("log");
    std::fs::write(dir.join("orders.json"), sample::json(40, 42)).expect("json");
    std::fs::write(dir.join("report.md"), sample::prose(12, 42)).expect("prose");
    let conversation = serde_json::json!({"messages": [
        {"role": "system", "content": "You are an on-call assistant. Cite the log lines you rely on."},
        {"role": "user", "content": "Checkout fails for some users since this morning. What is going on?"},
        {"role": "assistant", "content": "Let me look at the order-service log first."},
        {"role": "tool", "tool_call_id": "call_1", "content": sample::log(300, 43)},
        {"role": "assistant", "content": sample::prose(3, 44)},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": sample::json(15, 45)},
            {"type": "text", "text": "Here are the affected orders."}
        ]},
        {"role": "user", "content": "Which dependency refuses connections, and since when?"}
    ]});
    std::fs::write(
        dir.join("conversation.json"),
        serde_json::to_string_pretty(&conversation).expect("json") + "\n",
    )
    .expect("messages");
}

#[test]
fn one_giant_line_is_cut_into_pieces_not_dropped_whole() {
    let (_dir, store, tokenizer) = setup();
    let minified: String = (0..3000)
        .map(|i| format!("function f{i}(a){{return a*{i};}}"))
        .collect::<Vec<_>>()
        .join("");
    let words: String = (0..8000)
        .map(|i| ["alpha", "beta", "gamma", "delta"][i % 4])
        .collect::<Vec<_>>()
        .join(" ");
    let record = format!(
        "2024-01-01T00:00:00Z ERROR payload {}\n2024-01-01T00:00:01Z INFO done\n",
        "x=1 ".repeat(5000)
    );
    for (kind, content) in [
        (ContentKind::Code, minified.as_str()),
        (ContentKind::Prose, words.as_str()),
        (ContentKind::Logs, record.as_str()),
    ] {
        let result = check(content, 600, kind, &store, &tokenizer);
        assert!(
            result.tokens > 200,
            "{kind}: some content kept, got {}",
            result.text
        );
        assert!(
            result
                .elisions
                .iter()
                .any(|e| e.chunk_id.starts_with('B') || e.chunk_id.starts_with('S'))
        );
    }
}

#[test]
fn code_keeps_import_groups_and_first_doc_lines_before_details() {
    let (_dir, store, tokenizer) = setup();
    let mut source = String::from("use std::{\n    fs,\n    io,\n};\n\n");
    for f in 0..8 {
        source.push_str(&format!("/// Reads configuration file number {f}.\n///\n"));
        for d in 0..12 {
            source.push_str(&format!(
                "/// Detail line {d} explains option {d} of file {f} at length.\n"
            ));
        }
        source.push_str(&format!("pub fn read_{f}() -> io::Result<String> {{\n"));
        for i in 0..20 {
            source.push_str(&format!(
                "    let value_{i} = fs::read_to_string(\"file_{i}.toml\")?;\n"
            ));
        }
        source.push_str("    Ok(String::new())\n}\n\n");
    }
    let result = check(&source, 450, ContentKind::Code, &store, &tokenizer);
    assert!(
        result.text.contains("    fs,\n    io,\n"),
        "{}",
        result.text
    );
    for f in 0..8 {
        assert!(
            result
                .text
                .contains(&format!("pub fn read_{f}() -> io::Result<String> {{")),
            "{}",
            result.text
        );
        assert!(
            result
                .text
                .contains(&format!("/// Reads configuration file number {f}.")),
            "{}",
            result.text
        );
    }
    assert!(!result.text.contains("Detail line 11"), "{}", result.text);
    assert!(!result.text.contains("value_19"), "{}", result.text);
}

/// Regression (found by probing): 20,000 nested arrays (a 40 KB file) overflowed the stack and
/// aborted the process (and a whole `svc batch`). Past a depth a container is one value, and
/// the shallow levels are summarised as usual.
#[test]
fn deeply_nested_json_is_compressed_without_overflowing_the_stack() {
    let (_dir, store, tokenizer) = setup();
    let deep = format!("{}{}", "[".repeat(20_000), "]".repeat(20_000));
    let result = compress(
        &deep,
        50,
        &options(Some(ContentKind::Json)),
        &store,
        &tokenizer,
    )
    .expect("compress");
    assert!(result.tokens <= 50, "{}", result.tokens);
    assert_eq!(store.recover(&result.ctx_id, "doc").expect("doc"), deep);
    // Wide beside deep: the wide part is still sampled, and the output is within budget.
    let items: Vec<String> = (0..400).map(|i| format!("{{\"id\": {i}}}")).collect();
    let mixed = format!(
        "{{\"items\": [{}], \"deep\": {}1{}}}",
        items.join(", "),
        "[".repeat(300),
        "]".repeat(300)
    );
    let result = compress(
        &mixed,
        400,
        &options(Some(ContentKind::Json)),
        &store,
        &tokenizer,
    )
    .expect("compress");
    assert!(result.tokens <= 400, "{}", result.tokens);
    assert!(
        result.text.contains("more items · recover J"),
        "{}",
        result.text
    );
    assert_eq!(store.recover(&result.ctx_id, "doc").expect("doc"), mixed);
}
