//! Files that begin with a UTF-8 byte-order mark (Windows editors write one), found by probing:
//! it is the file's signature, not its text, so every command reads behind it. JSON readers
//! refused such files at "line 1, column 1"; the witness took a BOM'd JSON answer for prose
//! and cut it, and a fence behind a BOM for a claim; distill rewrote a fenced block behind one.

use std::fs;

use crate::harness::{root, run, svc};

const BOM: &str = "\u{feff}";

#[test]
fn a_leading_byte_order_mark_is_read_past_by_every_command() {
    let state = tempfile::tempdir().expect("temp dir");
    let dir = tempfile::tempdir().expect("temp dir");
    let file = |name: &str, text: String| {
        let path = dir.path().join(name);
        fs::write(&path, text).expect("write");
        path.to_string_lossy().into_owned()
    };
    let context = root().join("fixtures/witness/context.txt");
    let context = context.to_string_lossy().into_owned();
    let strict = |path: &str| {
        run(svc(state.path()).args([
            "witness",
            "--context-file",
            &context,
            "--output-file",
            path,
            "--mode",
            "strict",
            "--no-store",
        ]))
    };

    // The witness: a BOM'd JSON answer is structured output, returned byte-identical.
    let answer =
        format!(r#"{BOM}{{"founded": 1921, "claim": "The telescope was installed in 1978."}}"#);
    let path = file("answer.json", answer.clone());
    let out = strict(&path);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, answer);
    assert!(
        out.stderr
            .contains("structured (JSON) output is never rewritten"),
        "{}",
        out.stderr
    );

    // A fence behind a BOM is code, not a claim.
    let fenced = format!(
        "{BOM}```\nThe telescope was installed in 1978.\n```\nThe Halden Observatory was founded in 1921 by Ingrid Solberg.\n"
    );
    let path = file("fenced.md", fenced.clone());
    let out = strict(&path);
    assert!(
        out.stderr.contains("1 of 1 verifiable claims supported"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stdout, fenced);

    // Distill keeps a fenced block behind a BOM as it is, and the BOM.
    let text = format!("{BOM}```sh\nyou should just very simply run the thing\n```\n");
    let path = file("d.md", text.clone());
    let out = run(svc(state.path()).args(["distill", "--level", "ultra", &path]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, text);

    // Compress: a BOM'd JSON document is JSON, and a BOM'd conversation a conversation.
    let items: Vec<String> = (0..200)
        .map(|i| format!(r#"{{"id": {i}, "name": "item {i}"}}"#))
        .collect();
    let path = file(
        "doc.json",
        format!(r#"{BOM}{{"items": [{}]}}"#, items.join(", ")),
    );
    let out =
        run(svc(state.path()).args(["compress", &path, "--budget", "200", "--format", "json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains(r#""kind": "json""#), "{}", out.stdout);
    let path = file(
        "messages.json",
        format!(r#"{BOM}[{{"role": "user", "content": "hi"}}]"#),
    );
    let out = run(svc(state.path()).args(["compress", "--messages", &path, "--budget", "100"]));
    assert_eq!(out.code, 0, "{}", out.stderr);

    // Batch and witness eval read a BOM'd first line.
    let path = file(
        "jobs.jsonl",
        format!("{BOM}{{\"id\":\"a\",\"text\":\"hi\"}}\n{{\"id\":\"b\",\"text\":\"ok\"}}\n"),
    );
    let out = run(svc(state.path()).args(["batch", &path, "--budget", "100"]));
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    let qa = fs::read_to_string(root().join("fixtures/witness/qa.jsonl")).expect("fixture");
    let path = file("qa.jsonl", format!("{BOM}{qa}"));
    let out = run(svc(state.path()).args(["witness", "eval", &path]));
    assert_eq!(out.code, 0, "{}", out.stderr);
}
