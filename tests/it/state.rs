//! What the state survives: every single-byte change of a commit's files is detected, loose
//! or packed; a trial run killed at any point resumes to exactly the records of an
//! uninterrupted run, and every record's commit recovers byte-exactly.

use std::fs;
use std::path::{Path, PathBuf};

use svc::context::{ChunkInput, CommitStore, Resolution};
use svc::tokens::{Encoding, Tokenizer};

use crate::harness::{run, svc};

fn chunks() -> Vec<ChunkInput> {
    let texts = [
        (
            "src/a.rs#L1-3",
            "fn a() {\n    1\n}\n",
            Some(Resolution::Full),
        ),
        ("src/b.rs#L1-2", "fn b() { 2 }\r\n\u{e9}\n", None),
        ("docs/c.md#L1-1", "# Title\n", Some(Resolution::Skeleton)),
    ];
    texts
        .iter()
        .map(|(id, text, resolution)| ChunkInput {
            chunk_id: id.to_string(),
            source: id.split('#').next().unwrap_or_default().to_string(),
            full_text: text.to_string(),
            resolution: *resolution,
            sent_tokens: if resolution.is_some() { 4 } else { 0 },
            full_tokens: None,
        })
        .collect()
}

/// `chunks` committed to `store` (with the same parameters and context every test uses).
fn commit(store: &CommitStore, chunks: &[ChunkInput]) -> svc::context::commit::ContextReceipt {
    store
        .commit(
            chunks,
            serde_json::json!({"query": "a", "budget": 10}),
            "fn a() {\n    1\n}\n",
            &Tokenizer::new(Encoding::O200kBase),
        )
        .expect("commit")
}

fn files_below(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).expect("list") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files_below(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// Reads the whole commit back: receipt, bundle and every chunk, as `svc context recover` does.
fn read_back(home: &Path, ctx_id: &str, expected: &[ChunkInput]) -> Result<(), String> {
    let store = CommitStore::new(home);
    store.receipt(ctx_id).map_err(|e| e.to_string())?;
    store.bundle(ctx_id).map_err(|e| e.to_string())?;
    for chunk in expected {
        let text = store
            .recover(ctx_id, &chunk.chunk_id)
            .map_err(|e| e.to_string())?;
        if text != chunk.full_text {
            return Ok(()); // wrong bytes handed out: the caller reports it as a miss
        }
    }
    Ok(())
}

fn flips_are_detected(grouped: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let store = if grouped {
        CommitStore::grouped(home)
    } else {
        CommitStore::new(home)
    };
    let chunks = chunks();
    let receipt = commit(&store, &chunks);
    store.sync().expect("sync");
    let ctx_id = receipt.ctx_id;
    read_back(home, &ctx_id, &chunks).expect("an intact commit reads back");

    let mut files = Vec::new();
    files_below(home, &mut files);
    assert!(files.len() >= if grouped { 2 } else { 5 }, "{files:?}");
    let (mut flips, mut missed) = (0usize, Vec::new());
    for file in &files {
        let original = fs::read(file).expect("read");
        for at in 0..original.len() {
            for mask in [0x01u8, 0xff] {
                let mut damaged = original.clone();
                damaged[at] ^= mask;
                fs::write(file, &damaged).expect("flip");
                flips += 1;
                let store = CommitStore::new(home);
                let recovered_all = chunks.iter().all(|chunk| {
                    store
                        .recover(&ctx_id, &chunk.chunk_id)
                        .is_ok_and(|text| text == chunk.full_text)
                });
                let detected = !recovered_all
                    || store.receipt(&ctx_id).is_err()
                    || store.bundle(&ctx_id).is_err();
                if !detected {
                    missed.push(format!("{}:{at} ^{mask:#04x}", file.display()));
                }
            }
        }
        fs::write(file, &original).expect("restore");
    }
    read_back(home, &ctx_id, &chunks).expect("restored");
    assert!(flips > 500, "{flips} flips");
    assert!(
        missed.is_empty(),
        "{} of {flips} single-byte flips went unnoticed, e.g. {:?}",
        missed.len(),
        &missed[..missed.len().min(5)]
    );
}

#[test]
fn every_single_byte_flip_of_a_loose_commit_is_detected() {
    flips_are_detected(false);
}

#[test]
fn every_single_byte_flip_of_a_packed_commit_is_detected() {
    flips_are_detected(true);
}

/// Found by probing: a damaged content_hash in bundle.json was blamed on a blob ("not a SHA-256
/// hex digest", "the state directory was pruned", "the stored bytes changed") and only for the
/// one chunk; now the bundle is named, and a digest that is no digest fails every chunk.
#[test]
fn a_damaged_bundle_digest_names_the_bundle() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let store = CommitStore::new(home);
    let chunks = chunks();
    let receipt = commit(&store, &chunks);
    let ctx_id = receipt.ctx_id;
    let path = home.join("commits").join(&ctx_id).join("bundle.json");
    let original = fs::read_to_string(&path).expect("bundle");
    let bundle: serde_json::Value = serde_json::from_str(&original).expect("json");
    let hash = |i: usize| {
        bundle["entries"][i]["content_hash"]
            .as_str()
            .expect("hash")
            .to_string()
    };
    let (first, second) = (hash(0), hash(1));
    let recover_all = || -> Vec<String> {
        let store = CommitStore::new(home);
        chunks
            .iter()
            .map(|c| {
                store
                    .recover(&ctx_id, &c.chunk_id)
                    .map_or_else(|e| e.to_string(), |_| "ok".into())
            })
            .collect()
    };
    fs::write(
        &path,
        original.replacen(&first, &format!("Z{}", &first[1..]), 1),
    )
    .expect("damage");
    for message in recover_all() {
        assert!(
            message.contains("bundle.json does not belong to")
                && message.contains("not a SHA-256 hex digest"),
            "{message}"
        );
    }
    let other = if first.starts_with('0') { "1" } else { "0" };
    fs::write(
        &path,
        original.replacen(&first, &format!("{other}{}", &first[1..]), 1),
    )
    .expect("damage");
    let messages = recover_all();
    assert!(
        messages[0].contains("its recovery bundle (")
            && messages[0].contains("bundle.json) names blob")
            && messages[0].contains("not in the store"),
        "{messages:?}"
    );
    assert!(messages[1..].iter().all(|m| m == "ok"), "{messages:?}");
    let swapped = original
        .replacen(&first, "FIRST", 1)
        .replacen(&second, &first, 1)
        .replacen("FIRST", &second, 1);
    fs::write(&path, swapped).expect("swap");
    let messages = recover_all();
    assert!(
        messages[0].contains("does not match its receipt fingerprint")
            && messages[0].contains("bundle.json) names"),
        "{messages:?}"
    );
    // A deleted bundle beside its receipt was an "unknown context commit".
    fs::remove_file(&path).expect("delete the bundle");
    for message in recover_all() {
        assert!(
            message.contains("bundle.json of")
                && message.contains("is missing although its receipt is there"),
            "{message}"
        );
    }
}

/// Issue 10: a receipt's token count could be edited and recovery went on as if nothing
/// happened; the CLI now names the file.
#[test]
fn issue_10_an_edited_token_count_is_refused_by_recover() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let store = CommitStore::new(home);
    let tokenizer = Tokenizer::new(Encoding::O200kBase);
    let receipt = store
        .commit(&chunks(), serde_json::json!({}), "x", &tokenizer)
        .expect("commit");
    let path = home
        .join("commits")
        .join(&receipt.ctx_id)
        .join("receipt.json");
    let text = fs::read_to_string(&path).expect("receipt");
    let count = receipt.chunks[1].receipt_token_count;
    let edited = text.replacen(
        &format!("\"receipt_token_count\": {count}"),
        &format!("\"receipt_token_count\": {}", count + 1),
        1,
    );
    assert_ne!(edited, text);
    fs::write(&path, edited).expect("edit");
    let out = run(svc(home).args(["context", "recover", &receipt.ctx_id, "src/b.rs#L1-2"]));
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("receipt.json") && out.stderr.contains("does not belong"),
        "{}",
        out.stderr
    );
}

/// Found by probing: damage inside a packed blob was reported under the loose blob path,
/// which does not exist, instead of the pack that holds it; likewise a packed receipt.
#[test]
fn damage_inside_a_pack_names_the_pack() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path();
    let store = CommitStore::grouped(home);
    let tokenizer = Tokenizer::new(Encoding::O200kBase);
    let receipt = store
        .commit(&chunks(), serde_json::json!({}), "x", &tokenizer)
        .expect("commit");
    store.sync().expect("sync");
    let mut files = Vec::new();
    files_below(home, &mut files);
    let pack = files
        .iter()
        .find(|f| f.extension().is_some_and(|e| e == "pack"))
        .expect("a pack")
        .clone();
    let original = fs::read(&pack).expect("pack");
    let find = |needle: &[u8]| {
        original
            .windows(needle.len())
            .position(|w| w == needle)
            .expect("in the pack")
    };
    let pack_name = pack.file_name().and_then(|n| n.to_str()).expect("name");
    for (needle, chunk) in [
        (&b"fn b() { 2 }"[..], "src/b.rs#L1-2"),
        (&b"\"receipt_token_count\""[..], "src/a.rs#L1-3"),
    ] {
        let mut damaged = original.clone();
        damaged[find(needle) + 3] ^= 0x01;
        fs::write(&pack, &damaged).expect("flip");
        let out = run(svc(home).args(["context", "recover", &receipt.ctx_id, chunk]));
        assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
        assert!(
            out.stderr.contains(pack_name) && !out.stderr.contains("/blobs/"),
            "{}",
            out.stderr
        );
        fs::write(&pack, &original).expect("restore");
    }
}

/// The records of a run keyed by trial, with the wall-clock field (the only one that differs
/// between two runs of the fixture model) removed.
fn records_of(run_dir: &Path) -> std::collections::BTreeMap<String, serde_json::Value> {
    let text = fs::read_to_string(run_dir.join("trials.jsonl")).unwrap_or_default();
    let mut out = std::collections::BTreeMap::new();
    for line in text.lines() {
        let mut record: serde_json::Value = serde_json::from_str(line).expect("a whole record");
        let key = format!(
            "{} {} {}",
            record["task_id"], record["condition"], record["replicate"]
        );
        record
            .as_object_mut()
            .expect("an object")
            .remove("latency_ms");
        assert!(out.insert(key.clone(), record).is_none(), "{key} twice");
    }
    out
}

fn trial_run(home: &Path, out: &Path) -> std::process::Command {
    let mut command = svc(home);
    command
        .args([
            "run",
            "--workload",
            "qa-builtin",
            "--budget",
            "256,512",
            "--out",
        ])
        .arg(out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    command
}

/// Every chunk of every commit the records name, recovered from `home`.
fn recovered_chunks(
    home: &Path,
    records: &std::collections::BTreeMap<String, serde_json::Value>,
) -> std::collections::BTreeMap<(String, String), String> {
    let store = CommitStore::new(home);
    let mut out = std::collections::BTreeMap::new();
    let ids: std::collections::BTreeSet<&str> = records
        .values()
        .filter_map(|r| r["context_commit_id"].as_str())
        .collect();
    for ctx_id in ids {
        let receipt = store
            .receipt(ctx_id)
            .unwrap_or_else(|e| panic!("{ctx_id}: {e}"));
        for chunk in &receipt.chunks {
            let text = store
                .recover(ctx_id, &chunk.chunk_id)
                .unwrap_or_else(|e| panic!("{ctx_id} {}: {e}", chunk.chunk_id));
            out.insert((ctx_id.to_string(), chunk.chunk_id.clone()), text);
        }
    }
    out
}

/// Kill -9 at 20 points spread over a run (and, every other time, once more during the
/// resume): the resumed run holds exactly the records of an uninterrupted one, once each, and
/// every commit they name recovers to the same bytes.
#[test]
fn a_run_killed_at_any_point_resumes_to_the_uninterrupted_records() {
    let dir = tempfile::tempdir().expect("tempdir");
    let reference_home = dir.path().join("reference-state");
    let reference_dir = dir.path().join("reference");
    let started = std::time::Instant::now();
    let status = trial_run(&reference_home, &reference_dir)
        .status()
        .expect("run");
    let duration = started.elapsed();
    assert!(status.success());
    let reference = records_of(&reference_dir);
    assert!(reference.len() > 150, "{}", reference.len());
    let reference_chunks = recovered_chunks(&reference_home, &reference);

    let mut rng = svc::rng::SplitMix64::new(10);
    let (mut interrupted, mut points) = (0, Vec::new());
    for point in 0..20 {
        let home = dir.path().join(format!("state-{point}"));
        let out = dir.path().join(format!("run-{point}"));
        let kills = if point % 2 == 1 { 2 } else { 1 };
        for _ in 0..kills {
            // Spread over the whole run, start-up included.
            let fraction = (point as f64 + rng.unit()) / 20.0;
            let delay = duration.mul_f64(fraction);
            let mut child = trial_run(&home, &out).spawn().expect("spawn");
            std::thread::sleep(delay);
            let _ = child.kill(); // SIGKILL
            let _ = child.wait();
            let written = records_of(&out).len();
            if written > 0 && written < reference.len() {
                interrupted += 1;
            }
            points.push(format!("{delay:?}:{written}"));
        }
        let status = trial_run(&home, &out).status().expect("resume");
        assert!(status.success(), "resume after kill at point {point}");
        let resumed = records_of(&out);
        assert_eq!(resumed.len(), reference.len(), "point {point}: {points:?}");
        assert!(resumed == reference, "point {point}: the records differ");
        assert!(
            recovered_chunks(&home, &resumed) == reference_chunks,
            "point {point}: a commit recovers other bytes"
        );
    }
    assert!(
        interrupted >= 5,
        "only {interrupted} kills landed while records were being written: {points:?}"
    );
}

/// Found by probing: with SVC_HOME naming a file, every command failed with "File exists (os
/// error 17)", three times, without naming the variable.
#[test]
fn a_state_directory_that_is_a_file_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("home");
    fs::write(&file, "not a folder").expect("write");
    let out = run(svc(&file).args([
        "context",
        "select",
        "fixtures/code",
        "--query",
        "x",
        "--budget",
        "100",
    ]));
    assert_eq!(out.code, 2, "{}", out.stdout);
    assert!(
        out.stderr.contains("is not a directory") && out.stderr.contains("SVC_HOME"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("os error 17"), "{}", out.stderr);
}
