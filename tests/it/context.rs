//! `svc context`: index a fixture tree, select under a budget, read the manifest, recover an
//! omitted chunk byte for byte, and fail loudly on tampered blobs and unknown ids.

use serde::Deserialize;

use crate::harness::{assert_text_eq, root, run, svc};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SelectOutput {
    ctx_id: String,
    query: String,
    budget: usize,
    tokens: usize,
    rendered: String,
    manifest: Vec<Entry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    chunk_id: String,
    path: String,
    kind: String,
    resolution: Option<String>,
    score: f64,
    reason: String,
    tokens: usize,
    full_tokens: usize,
}

fn select_json(state: &std::path::Path, query: &str, budget: usize) -> SelectOutput {
    let out = run(svc(state).args([
        "context",
        "select",
        "fixtures/code",
        "--query",
        query,
        "--budget",
        &budget.to_string(),
        "--format",
        "json",
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    serde_json::from_str(&out.stdout).expect("select prints its JSON shape")
}

#[test]
fn index_select_recover_round_trip() {
    let state = tempfile::tempdir().expect("state");
    let out = run(svc(state.path()).args(["context", "index", "fixtures/code"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("parsed"), "{}", out.stdout);
    let again = run(svc(state.path()).args(["context", "index", "fixtures/code"]));
    assert!(again.stdout.contains("(0 parsed"), "{}", again.stdout);

    let selection = select_json(state.path(), "edit distance between two strings", 400);
    assert_eq!(selection.query, "edit distance between two strings");
    assert_eq!(selection.budget, 400);
    assert!(selection.tokens <= 400, "{} tokens", selection.tokens);
    assert_eq!(
        selection.tokens,
        svc::tokens::count(&selection.rendered),
        "the reported count is the real count"
    );
    assert!(selection.ctx_id.starts_with("ctx_"));
    let top = &selection.manifest[0];
    assert_eq!(top.path, "python/pkg/textutil.py");
    assert_eq!(top.resolution.as_deref(), Some("full"));
    assert!(top.reason.contains("levenshtein"), "{}", top.reason);
    assert!(top.score > 0.0 && top.tokens > 0 && top.full_tokens > 0 && !top.kind.is_empty());

    // An omitted chunk comes back byte for byte.
    let omitted = selection
        .manifest
        .iter()
        .find(|e| e.resolution.is_none() && e.path == "c/src/strbuf.c")
        .expect("something in strbuf.c is omitted at 400 tokens");
    let out =
        run(svc(state.path()).args(["context", "recover", &selection.ctx_id, &omitted.chunk_id]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let source =
        std::fs::read_to_string(root().join("fixtures/code/c/src/strbuf.c")).expect("read");
    let (first, last) = omitted
        .chunk_id
        .rsplit_once("#L")
        .and_then(|(_, lines)| lines.split_once('-'))
        .map(|(a, b)| {
            (
                a.parse::<usize>().expect("line"),
                b.parse::<usize>().expect("line"),
            )
        })
        .expect("chunk ids end in #La-b");
    let expected: String = source
        .split_inclusive('\n')
        .skip(first - 1)
        .take(last - first + 1)
        .collect();
    assert_text_eq(&expected, &out.stdout);
    assert_eq!(expected.as_bytes(), out.stdout.as_bytes());

    // The text manifest names the commit and how to recover.
    let out = run(svc(state.path()).args([
        "context",
        "select",
        "fixtures/code",
        "--query",
        "edit distance between two strings",
        "--budget",
        "400",
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with(&selection.ctx_id), "{}", out.stdout);
    assert!(
        out.stdout.contains("python/pkg/textutil.py#L"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("svc context recover"), "{}", out.stdout);
}

#[test]
fn tampered_blob_and_unknown_id_fail_with_exit_2() {
    let state = tempfile::tempdir().expect("state");
    let selection = select_json(state.path(), "crc32 checksum", 300);
    let omitted = selection
        .manifest
        .iter()
        .find(|e| e.resolution.is_none())
        .expect("an omitted chunk");
    let text =
        run(svc(state.path()).args(["context", "recover", &selection.ctx_id, &omitted.chunk_id]))
            .stdout;
    // The blob is packed: change one byte of it inside the pack.
    let pack = walk(state.path())
        .into_iter()
        .find(|p| p.ends_with(".pack"))
        .expect("a pack");
    let mut bytes = std::fs::read(&pack).expect("pack");
    let at = bytes
        .windows(text.len())
        .position(|w| w == text.as_bytes())
        .expect("the chunk's bytes are in the pack");
    bytes[at] ^= 0x20;
    std::fs::write(&pack, bytes).expect("tamper");
    let out =
        run(svc(state.path()).args(["context", "recover", &selection.ctx_id, &omitted.chunk_id]));
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("tampered"), "{}", out.stderr);
    assert!(out.stdout.is_empty());

    let out =
        run(svc(state.path()).args(["context", "recover", "ctx_0123456789abcdef01234567", "x"]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("unknown context commit ctx_0123456789abcdef01234567"),
        "{}",
        out.stderr
    );
    // Found by probing: the message pointed at a commits/ folder selects never make.
    assert!(
        out.stderr.contains("was it made with another SVC_HOME?"),
        "{}",
        out.stderr
    );
    // ...and an empty chunk id read "has no chunk ; … none of  (…)".
    let out = run(svc(state.path()).args(["context", "recover", &selection.ctx_id, ""]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("has no chunk \"\"; give a chunk id"),
        "{}",
        out.stderr
    );
}

#[test]
fn zero_budget_and_oversized_pins_are_usage_errors() {
    let state = tempfile::tempdir().expect("state");
    let out = run(svc(state.path()).args([
        "context",
        "select",
        "fixtures/code",
        "--query",
        "x",
        "--budget",
        "0",
    ]));
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("budget is 0"), "{}", out.stderr);
    let out = run(svc(state.path()).args([
        "context",
        "select",
        "fixtures/code",
        "--query",
        "x",
        "--budget",
        "50",
        "--pin",
        "java/",
    ]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("pinned content needs"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_first_select_packs_its_commit_and_an_unknown_chunk_names_the_sources_chunks() {
    let state = tempfile::tempdir().expect("state");
    let selection = select_json(state.path(), "crc32 checksum", 300);
    // One pack and its index (plus the index cache), not a file per chunk: a first select of
    // a 200-file repository used to write ~2,000 files with two fsyncs each.
    let files = walk(state.path());
    let packs = files.iter().filter(|p| p.contains("/packs/")).count();
    assert_eq!(packs, 2, "{files:#?}");
    assert!(
        !files
            .iter()
            .any(|p| p.contains("/blobs/") || p.contains("/commits/")),
        "nothing loose: {files:#?}"
    );
    // Everything recovers exactly from the pack.
    for entry in selection.manifest.iter().take(5) {
        let out =
            run(svc(state.path()).args(["context", "recover", &selection.ctx_id, &entry.chunk_id]));
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    // A second select of the same tree packs only its new receipt and bundle: every blob is
    // already in the first pack.
    let first_index = walk(state.path())
        .into_iter()
        .find(|p| p.ends_with(".idx"))
        .expect("an index");
    let again = select_json(state.path(), "crc32 checksum table", 300);
    assert_ne!(again.ctx_id, selection.ctx_id);
    let second_index = walk(state.path())
        .into_iter()
        .find(|p| p.ends_with(".idx") && *p != first_index)
        .expect("the second select's index");
    let entries = std::fs::read_to_string(&second_index).expect("index");
    assert!(entries.lines().count() >= 2, "{entries}");
    assert!(
        !entries.contains(" blobs/"),
        "no blob is packed twice:\n{entries}"
    );

    let path = &selection.manifest[0].path;
    let out = run(svc(state.path()).args([
        "context",
        "recover",
        &selection.ctx_id,
        &format!("{path}#L99999-100000"),
    ]));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains(&format!("its chunks of {path} are {path}#L")),
        "{}",
        out.stderr
    );
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path.display().to_string());
        }
    }
    out
}

/// Runs git in `repo` with a fixed identity and date.
fn git(repo: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("git runs");
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

#[test]
fn select_in_a_git_work_tree_lifts_what_the_last_commits_changed() {
    let state = tempfile::tempdir().expect("state");
    let dir = tempfile::tempdir().expect("repo");
    let repo = dir.path();
    let body = |name: &str, value: u32| {
        format!("def {name}():\n    # improve the patch\n    return {value}\n")
    };
    git(repo, &["init", "-q"]);
    std::fs::write(repo.join("a.py"), body("first", 1)).expect("write");
    std::fs::write(repo.join("b.py"), body("second", 1)).expect("write");
    git(repo, &["add", "."]);
    git(repo, &["commit", "-qm", "start"]);
    std::fs::write(repo.join("b.py"), body("second", 2)).expect("write");
    git(repo, &["commit", "-qam", "patch second"]);

    let select = |extra: &[&str], commits: Option<&str>| {
        let mut command = svc(state.path());
        if let Some(commits) = commits {
            command.env("SVC_RECENT_COMMITS", commits);
        }
        let out = run(command
            .args(["context", "select"])
            .arg(repo)
            .args([
                "--query",
                "improve patch",
                "--budget",
                "200",
                "--format",
                "json",
            ])
            .args(extra));
        (out.code, out.stdout, out.stderr)
    };
    let top = |stdout: &str| {
        let selection: SelectOutput = serde_json::from_str(stdout).expect("JSON");
        let entry = &selection.manifest[0];
        (entry.path.clone(), entry.reason.clone())
    };
    // The default (the test harness turns the lift off; unset means 10 commits).
    let (code, stdout, stderr) = select(&[], Some("10"));
    assert_eq!(code, 0, "{stderr}");
    let (path, reason) = top(&stdout);
    assert_eq!(path, "b.py", "{reason}");
    assert!(
        reason.contains("changed in the last 10 commits"),
        "{reason}"
    );
    // The flag wins over the variable; 0 turns the lift off and the tie goes by path.
    let (code, stdout, stderr) = select(&["--recent-commits", "0"], Some("10"));
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(top(&stdout).0, "a.py");
    // Uncommitted edits are the most recent changes of all.
    std::fs::write(repo.join("a.py"), body("first", 3)).expect("write");
    let (_, stdout, _) = select(&["--recent-commits", "1"], None);
    let selection: SelectOutput = serde_json::from_str(&stdout).expect("JSON");
    let lifted: Vec<&str> = selection
        .manifest
        .iter()
        .filter(|e| e.reason.contains("changed in the last commit "))
        .map(|e| e.path.as_str())
        .collect();
    assert_eq!(lifted, ["a.py", "b.py"]);
    // A bad variable is a usage error that says what to set.
    let (code, _, stderr) = select(&[], Some("ten"));
    assert_eq!(code, 2);
    assert!(
        stderr.contains("SVC_RECENT_COMMITS=\"ten\" is not a number of commits"),
        "{stderr}"
    );
}

/// Found by probing: a file the index skipped (not UTF-8, too large) was left out of a select
/// without a word, and pinning it said it "matches no fragment".
#[test]
fn select_names_the_files_the_index_skipped() {
    let state = tempfile::tempdir().expect("temp dir");
    let tree = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        tree.path().join("tax.py"),
        b"# -*- coding: latin-1 -*-\ndef compute_tax(rate):\n    \"\"\"Calcule la taxe \xe0 payer.\"\"\"\n    return rate * 1.2\n",
    )
    .expect("write");
    std::fs::write(tree.path().join("other.py"), "def other():\n    return 0\n").expect("write");
    let path = tree.path().to_string_lossy().into_owned();
    let select = |extra: &[&str]| {
        run(svc(state.path())
            .args([
                "context",
                "select",
                &path,
                "--query",
                "compute_tax",
                "--budget",
                "500",
            ])
            .args(extra))
    };
    let out = select(&[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("note: 1 file(s) skipped and not selectable: tax.py (not UTF-8"),
        "{}",
        out.stderr
    );
    let out = select(&["--format", "json"]);
    let value: serde_json::Value = serde_json::from_str(&out.stdout).expect("json");
    assert_eq!(value["skipped"][0]["path"], "tax.py");
    let out = select(&["--pin", "tax.py"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("pin tax.py names a file the index skipped (not UTF-8"),
        "{}",
        out.stderr
    );
}

/// Found by probing: a SIGTERM while `svc bench --localize-repo X.bundle` ran left the bundle's
/// bare clone (14 MB for a real repository) in the temporary folder.
#[test]
fn a_signal_removes_the_clone_of_a_bundle() {
    let state = tempfile::tempdir().expect("state");
    let dir = tempfile::tempdir().expect("repo");
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).expect("mkdir");
    git(&repo, &["init", "-q"]);
    for i in 0..40 {
        std::fs::write(
            repo.join(format!("m{}.py", i % 7)),
            format!("def f{i}():\n    return {i}\n").repeat(50),
        )
        .expect("write");
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-qm", &format!("change the module {i}")]);
    }
    let bundle = dir.path().join("repo.bundle");
    git(
        &repo,
        &["bundle", "create", bundle.to_str().expect("utf8"), "--all"],
    );
    for _ in 0..5 {
        let tmp = tempfile::tempdir().expect("tmp");
        let mut child = svc(state.path())
            .env("TMPDIR", tmp.path())
            .args([
                "bench",
                "--group",
                "context",
                "--context-part",
                "localisation",
            ])
            .arg("--localize-repo")
            .arg(&bundle)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn");
        // Signal as soon as the clone is there.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut cloned = false;
        while std::time::Instant::now() < deadline && child.try_wait().expect("wait").is_none() {
            // The clone has begun once git wrote into it (it is registered before that).
            let begun = std::fs::read_dir(tmp.path())
                .expect("read")
                .filter_map(Result::ok)
                .any(|entry| entry.path().join("HEAD").exists());
            if begun {
                cloned = true;
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        if !cloned {
            let _ = child.wait();
            continue;
        }
        let pid = rustix::process::Pid::from_child(&child);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let status = child.wait().expect("wait");
        if status.success() {
            // It ended before the signal: try again.
            continue;
        }
        assert_eq!(
            std::fs::read_dir(tmp.path()).expect("read").count(),
            0,
            "the clone is removed"
        );
        return;
    }
    panic!("the bench never ran long enough to be signalled");
}
