use serde_json::json;

use super::*;

fn entry() -> Value {
    json!({"command": "/bin/svc", "args": ["serve"]})
}

#[test]
fn adds_to_an_existing_container_keeping_comments_and_other_keys() {
    let text = "{\n  // my theme\n  \"theme\": \"One Dark\", /* keep */\n  \"context_servers\": {\n    \"other\": {\"command\": \"x\"}, // theirs\n  },\n}\n";
    let out = set(text, Syntax::Jsonc, &["context_servers", "svc"], &entry())
        .expect("edits")
        .expect("changes");
    assert_eq!(
        out,
        "{\n  // my theme\n  \"theme\": \"One Dark\", /* keep */\n  \"context_servers\": {\n    \"other\": {\"command\": \"x\"}, // theirs\n    \"svc\": {\n      \"command\": \"/bin/svc\",\n      \"args\": [\"serve\"]\n    }\n  },\n}\n"
    );
    // A second run finds the value there.
    assert_eq!(
        set(&out, Syntax::Jsonc, &["context_servers", "svc"], &entry()),
        Ok(None)
    );
}

#[test]
fn creates_the_container_after_the_last_member_and_its_comment() {
    let text = "{\n    \"a\": 1 // one\n}\n";
    let out = set(text, Syntax::Jsonc, &["mcpServers", "svc"], &entry())
        .expect("edits")
        .expect("changes");
    assert_eq!(
        out,
        "{\n    \"a\": 1, // one\n    \"mcpServers\": {\n        \"svc\": {\n            \"command\": \"/bin/svc\",\n            \"args\": [\"serve\"]\n        }\n    }\n}\n"
    );
}

#[test]
fn fills_empty_objects_and_empty_files() {
    let out = set("{}\n", Syntax::Json, &["servers", "svc"], &json!(1))
        .expect("ok")
        .expect("ok");
    assert_eq!(out, "{\n  \"servers\": {\n    \"svc\": 1\n  }\n}\n");
    let out = set("  \n", Syntax::Json, &["servers", "svc"], &json!(1))
        .expect("ok")
        .expect("ok");
    assert_eq!(out, "{\n  \"servers\": {\n    \"svc\": 1\n  }\n}\n");
    let out = set(
        "{\"servers\": {}}",
        Syntax::Json,
        &["servers", "svc"],
        &json!(1),
    )
    .expect("ok")
    .expect("ok");
    assert_eq!(out, "{\"servers\": {\n  \"svc\": 1\n}}");
}

#[test]
fn replaces_a_changed_value_in_place() {
    let text = "{\"mcpServers\": {\"svc\": {\"command\": \"old\"}, \"b\": 2}}";
    let out = set(text, Syntax::Json, &["mcpServers", "svc"], &entry())
        .expect("ok")
        .expect("ok");
    assert_eq!(
        out,
        "{\"mcpServers\": {\"svc\": {\"command\": \"/bin/svc\", \"args\": [\"serve\"]}, \"b\": 2}}"
    );
}

#[test]
fn malformed_input_names_line_and_column() {
    let error = parse("{\n  \"a\": 1,\n  \"b\" 2\n}", Syntax::Json).expect_err("fails");
    assert_eq!((error.line, error.column), (3, 7), "{error}");
    let error = parse("{\"a\": 1, // c\n}", Syntax::Json).expect_err("fails");
    assert!(error.message.contains("comments"), "{error}");
    let error = parse("{\"a\": [1,]}", Syntax::Json).expect_err("fails");
    assert!(error.message.contains("trailing comma"), "{error}");
    assert!(parse("{\"a\": [1,], /* x */}", Syntax::Jsonc).is_ok());
    assert!(parse("{\"a\": \"unterminated}", Syntax::Jsonc).is_err());
    assert!(parse("[1] 2", Syntax::Json).is_err());
    assert!(parse("{\"a\": tru}", Syntax::Json).is_err());
    let deep = "[".repeat(MAX_DEPTH + 2);
    assert!(parse(&deep, Syntax::Json).is_err());
}

#[test]
fn refuses_non_objects_and_duplicates() {
    let error = set(
        "{\"mcpServers\": []}",
        Syntax::Json,
        &["mcpServers", "svc"],
        &json!(1),
    );
    assert!(
        matches!(error, Err(EditError::NotAnObject { .. })),
        "{error:?}"
    );
    let error = set("[]", Syntax::Json, &["mcpServers"], &json!(1));
    assert!(
        matches!(error, Err(EditError::NotAnObject { .. })),
        "{error:?}"
    );
    let error = set(
        "{\"a\": {}, \"a\": {}}",
        Syntax::Json,
        &["a", "svc"],
        &json!(1),
    );
    assert!(
        matches!(error, Err(EditError::DuplicateKey { line: 1, .. })),
        "{error:?}"
    );
}

#[test]
fn values_match_serde_json_on_strict_json() {
    let text = r#"{"a": [1, 2.5, -3e2, true, null, "x\u00e9\n"], "b": {"c": {}}, "d": []}"#;
    let ours = parse(text, Syntax::Json).expect("ok").expect("ok");
    let theirs: Value = serde_json::from_str(text).expect("ok");
    assert_eq!(ours, theirs);
}

#[test]
fn windows_line_ends_are_kept() {
    let text = "{\r\n  \"a\": 1 // one\r\n}\r\n";
    let out = set(text, Syntax::Jsonc, &["mcpServers", "svc"], &json!(1))
        .expect("edits")
        .expect("changes");
    assert_eq!(
        out,
        "{\r\n  \"a\": 1, // one\r\n  \"mcpServers\": {\r\n    \"svc\": 1\r\n  }\r\n}\r\n"
    );
    assert_eq!(
        set(&out, Syntax::Jsonc, &["mcpServers", "svc"], &json!(1)),
        Ok(None)
    );
}
