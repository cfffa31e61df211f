use super::*;

fn doc_index(name: &str, text: &str) -> Index {
    Index::from_documents(&[(name.to_string(), text.to_string())])
}

fn assert_partition(index: &Index) {
    for file in &index.files {
        let joined: String = index.fragments[file.fragments.clone()]
            .iter()
            .map(|f| index.text(f))
            .collect();
        assert_eq!(joined, &*file.text, "fragments of {} rebuild it", file.path);
    }
    let ids: std::collections::HashSet<_> = index.fragments.iter().map(|f| &f.chunk_id).collect();
    assert_eq!(ids.len(), index.fragments.len(), "chunk ids are unique");
}

#[test]
fn rust_file_splits_into_definitions() {
    let text = "use std::io;\n\n/// Parses.\nfn parse(x: &str) -> u32 {\n    let trimmed = x.trim();\n    let digits = trimmed.trim_end_matches(|c: char| !c.is_ascii_digit());\n    digits.parse().unwrap_or_default()\n}\n\nstruct A {\n    b: u32,\n}\n";
    let index = doc_index("src/lib.rs", text);
    assert_partition(&index);
    let kinds: Vec<_> = index
        .fragments
        .iter()
        .map(|f| (f.kind, f.symbols.clone(), f.lines))
        .collect();
    assert_eq!(
        kinds,
        vec![
            (FragmentKind::Block, vec![], (1, 2)),
            (FragmentKind::Function, vec!["parse".to_string()], (3, 9)),
            (FragmentKind::Struct, vec!["A".to_string()], (10, 12)),
        ]
    );
    let parse = &index.fragments[1];
    assert_eq!(
        parse.skeleton.as_deref(),
        Some("/// Parses.\nfn parse(x: &str) -> u32 {...}\n")
    );
}

#[test]
fn test_code_skeletons_are_one_line() {
    assert!(is_test_code("crate/tests/it.rs", "fn a() {}\n", None));
    assert!(is_test_code("src/a.rs", "fn a() {}\n", Some("mod tests")));
    assert!(is_test_code(
        "src/a.rs",
        "#[cfg(test)]\nmod tests {\n",
        None
    ));
    assert!(is_test_code(
        "src/a.rs",
        "#[tokio::test(flavor = \"x\")]\nasync fn a() {}\n",
        None
    ));
    assert!(!is_test_code(
        "src/a.rs",
        "#[cfg(not(test))]\nfn a() {}\n",
        None
    ));
    assert!(!is_test_code(
        "src/a.rs",
        "/// test\npub fn test() {}\n",
        None
    ));
    assert_eq!(
        test_skeleton("#[test]\nfn parses() {...}\n"),
        "fn parses() {...}\n"
    );
    assert_eq!(
        test_skeleton("mod tests {\n    use super::*;\n    fn a() {...}\n}\n"),
        "mod tests {...}\n"
    );
    assert_eq!(test_skeleton("use a::b;\n"), "…\n");
    assert_eq!(
        test_skeleton("#![cfg(all(\n    test,\n))]\nfn a() {...}\n"),
        "fn a() {...}\n"
    );
}

#[test]
fn skeleton_layout_drops_outer_closers_and_narrows_indent_steps() {
    // The `}` closes an impl whose header is in another fragment: dropped; the shared
    // indent goes; each 4-column step becomes one space.
    assert_eq!(
        dedent("    fn a(\n        x: u8,\n    ) {...}\n}\n"),
        "fn a(\n x: u8,\n) {...}\n"
    );
    // A closer of a bracket the piece opened stays.
    assert_eq!(
        dedent("impl A {\n    fn a() {...}\n}\n"),
        "impl A {\n fn a() {...}\n}\n"
    );
    // Tabs and 2-space steps narrow too; levels are kept.
    assert_eq!(
        dedent("func (s *S) F(\n\ta int,\n\t\tb int,\n) {...}\n"),
        "func (s *S) F(\n a int,\n  b int,\n) {...}\n"
    );
    assert_eq!(
        dedent("class A {\n  f() {...}\n    g;\n}\n"),
        "class A {\n f() {...}\n  g;\n}\n"
    );
    // Indents that share no step (4 and 9 columns) keep their widths.
    assert_eq!(
        dedent("impl A {\n    fn a(x: u8,\n         y: u8) {...}\n}\n"),
        "impl A {\n    fn a(x: u8,\n         y: u8) {...}\n}\n"
    );
}

#[test]
fn large_impls_split_into_methods() {
    let mut text = String::from("impl Big {\n");
    for i in 0..30 {
        text.push_str(&format!(
            "    /// Method {i}.\n    pub fn method_{i}(&self) -> usize {{\n        {i} + self.value * 2 + 1\n    }}\n\n"
        ));
    }
    text.push_str("}\n");
    let index = doc_index("big.rs", &text);
    assert_partition(&index);
    assert_eq!(index.fragments[0].kind, FragmentKind::Impl);
    assert_eq!(index.fragments.len(), 31);
    let method = &index.fragments[5];
    assert_eq!(method.kind, FragmentKind::Method);
    assert_eq!(method.context.as_deref(), Some("impl Big"));
    assert!(index.text(method).starts_with("    /// Method 4."));
    assert!(
        index
            .text(index.fragments.last().expect("last"))
            .ends_with("}\n")
    );
}

/// A struct of many options (fd's 655-line `Opts`) used to be one fragment: too big to send
/// whole, its name alone matched, and it went out as a one-line reference however well the
/// query named one of its fields.
#[test]
fn large_records_are_cut_into_runs_of_members_between_fields() {
    let mut text = String::from("/// Options.\n#[derive(Debug)]\npub struct Opts {\n");
    for i in 0..60 {
        text.push_str(&format!(
            "    /// Whether option {i} is on (and what it overrides).\n    #[arg(long, help = \"option {i}\")]\n    pub option_{i}: bool,\n\n"
        ));
    }
    text.push_str("}\n\nfn after() {}\n");
    let index = doc_index("cli.rs", &text);
    assert_partition(&index);
    let parts: Vec<&Fragment> = index
        .fragments
        .iter()
        .filter(|f| f.kind == FragmentKind::Struct)
        .collect();
    assert!(parts.len() >= 3, "{} parts", parts.len());
    assert_eq!(parts[0].symbols, vec!["Opts".to_string()]);
    assert!(index.text(parts[0]).starts_with("/// Options."));
    for part in &parts[1..] {
        assert!(part.symbols.is_empty());
        assert_eq!(part.context.as_deref(), Some("pub struct Opts"));
        // Cut between fields: every run starts at a field's doc line.
        assert!(
            index.text(part).starts_with("    /// Whether option"),
            "{:?}",
            index.text(part)
        );
        assert!(part.lines.1 - part.lines.0 < MAX_BLOCK_LINES);
        let skeleton = part.skeleton.as_deref().expect("a run has a skeleton");
        assert!(skeleton.contains("pub option_"), "{skeleton}");
        assert!(!skeleton.contains("#[arg"), "{skeleton}");
    }
    assert!(index.text(parts.last().expect("last")).ends_with("}\n\n"));
    // A small struct stays whole.
    let small = doc_index("small.rs", "pub struct A {\n    pub b: u8,\n}\n");
    assert_eq!(small.fragments.len(), 1);
}

#[test]
fn documents_split_by_section_key_and_paragraph() {
    let md =
        "# Title\nIntro.\n\n## Install\nRun it.\n```\n# not a heading\n```\n## Use\nCall it.\n";
    let index = doc_index("guide", md);
    assert_partition(&index);
    let symbols: Vec<_> = index.fragments.iter().map(|f| f.symbols.join("")).collect();
    assert_eq!(symbols, vec!["Title", "Install", "Use"]);

    let json = "{\n  \"name\": \"x\",\n  \"deps\": {\n    \"a\": 1\n  },\n  \"list\": [1, 2]\n}\n";
    let index = doc_index("package.json", json);
    assert_partition(&index);
    let keys: Vec<_> = index.fragments.iter().map(|f| f.symbols.join("")).collect();
    assert_eq!(keys, vec!["name", "deps", "list"]);

    let toml = "name = 1\n\n[dependencies]\na = 1\n[[bin]]\nname = \"x\"\n";
    let index = doc_index("Cargo.toml", toml);
    assert_partition(&index);
    let keys: Vec<_> = index.fragments.iter().map(|f| f.symbols.join("")).collect();
    assert_eq!(keys, vec!["(top level)", "dependencies", "bin"]);

    let prose = "First paragraph is here. It has two sentences.\n\nSecond.\n".repeat(20);
    let index = doc_index("notes", &prose);
    assert_partition(&index);
    assert!(index.fragments.len() > 1);
    assert!(
        index
            .fragments
            .iter()
            .all(|f| f.kind == FragmentKind::Paragraph)
    );
}

#[test]
fn duplicate_document_names_get_suffixes() {
    let index = Index::from_documents(&[("a".into(), "one".into()), ("a".into(), "two".into())]);
    let paths: Vec<_> = index.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, vec!["a", "a~2"]);
}

#[test]
fn second_build_reuses_unchanged_files_and_skips_binaries() {
    let tree = tempfile::tempdir().expect("tree");
    let home = tempfile::tempdir().expect("home");
    std::fs::write(tree.path().join("a.rs"), "fn a() {}\n").expect("write");
    std::fs::write(tree.path().join("b.py"), "def b():\n    return 1\n").expect("write");
    std::fs::write(tree.path().join("blob.bin"), [0u8, 1, 2, 3]).expect("write");
    std::fs::write(tree.path().join("latin1.txt"), b"caf\xe9\n").expect("write");
    std::fs::write(tree.path().join("ignored.rs"), "fn x() {}\n").expect("write");
    std::fs::write(tree.path().join(".svcignore"), "ignored.rs\n").expect("write");
    let options = IndexOptions {
        state_home: Some(home.path().to_path_buf()),
        ..IndexOptions::default()
    };
    let first = Index::build(tree.path(), &options).expect("build");
    assert_eq!((first.stats.parsed, first.stats.reused), (2, 0));
    let reasons: Vec<_> = first
        .stats
        .skipped
        .iter()
        .map(|s| {
            (
                s.path.as_str(),
                s.reason.split(' ').next().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(reasons, vec![("blob.bin", "binary"), ("latin1.txt", "not")]);
    assert!(first.files.iter().all(|f| f.path != "ignored.rs"));
    std::fs::write(tree.path().join("a.rs"), "fn a() { 2 }\n").expect("write");
    let second = Index::build(tree.path(), &options).expect("rebuild");
    assert_eq!((second.stats.parsed, second.stats.reused), (1, 1));
    assert_eq!(second.fragments, {
        let third = Index::build(tree.path(), &options).expect("third");
        assert_eq!((third.stats.parsed, third.stats.reused), (0, 2));
        third.fragments
    });
}

#[test]
fn the_term_index_is_read_back_from_its_file_only_while_it_matches_the_tree() {
    use crate::context::terms::TermIndex;
    let tree = tempfile::tempdir().expect("tree");
    let home = tempfile::tempdir().expect("home");
    std::fs::write(
        tree.path().join("a.rs"),
        "/// Reads buffered bytes.\npub fn read_buf(x: u8) -> u8 {\n    helper(x)\n}\n\nfn helper(x: u8) -> u8 {\n    x\n}\n",
    )
    .expect("write");
    std::fs::write(
        tree.path().join("b.py"),
        "def parse_header(line):\n    return read_buf(line)\n",
    )
    .expect("write");
    let options = IndexOptions {
        state_home: Some(home.path().to_path_buf()),
        ..IndexOptions::default()
    };
    let first = Index::build(tree.path(), &options).expect("build");
    first.prepare();
    let file = first
        .stats
        .persisted
        .as_ref()
        .expect("persisted")
        .with_extension("terms");
    assert!(file.exists(), "the first use saves the term index");

    // Read back: the same arrays as a fresh build, and the same scores.
    let second = Index::build(tree.path(), &options).expect("rebuild");
    assert_eq!(second.terms(), &TermIndex::build(&second));
    let scores = |index: &Index| {
        let mut scores: Vec<(u32, String)> = crate::context::terms::score(index, "read buf header")
            .into_iter()
            .map(|(number, scored)| (number, format!("{:.9}", scored.score)))
            .collect();
        scores.sort();
        scores
    };
    assert_eq!(scores(&second), scores(&first));

    // A changed file makes the saved one stale: rebuilt, never trusted.
    std::fs::write(
        tree.path().join("b.py"),
        "def parse_trailer(line):\n    return line\n",
    )
    .expect("write");
    let third = Index::build(tree.path(), &options).expect("rebuild");
    assert_eq!(third.terms(), &TermIndex::build(&third));
    assert_ne!(third.terms(), first.terms());

    // A damaged file is ignored (and replaced), never a panic or a wrong score.
    let bytes = std::fs::read(&file).expect("read");
    for damaged in [bytes[..bytes.len() / 2].to_vec(), vec![0u8; bytes.len()]] {
        std::fs::write(&file, &damaged).expect("damage");
        let fourth = Index::build(tree.path(), &options).expect("rebuild");
        assert_eq!(fourth.terms(), &TermIndex::build(&fourth));
    }
    assert_eq!(
        std::fs::read(&file).expect("read"),
        bytes,
        "rewritten whole"
    );
}

/// Regression (found by probing): the persisted index was trusted as read, so one changed digit
/// (a fragment's first line past its last) made every later select panic, and a changed token
/// count broke the budget. Its checksum now fails, and the build re-parses and rewrites it.
#[test]
fn a_damaged_persisted_index_is_rebuilt_not_trusted() {
    let tree = tempfile::tempdir().expect("tree");
    let home = tempfile::tempdir().expect("home");
    std::fs::write(
        tree.path().join("a.py"),
        "def one(x):\n    return x\n\n\ndef two(y):\n    return one(y) + 1\n",
    )
    .expect("write");
    let options = IndexOptions {
        state_home: Some(home.path().to_path_buf()),
        ..IndexOptions::default()
    };
    let first = Index::build(tree.path(), &options).expect("build");
    let path = first.stats.persisted.clone().expect("persisted");
    let original = std::fs::read_to_string(&path).expect("read");
    let numbers = |index: &Index| -> Vec<(usize, usize, usize)> {
        index
            .fragments
            .iter()
            .map(|f| (f.lines.0, f.lines.1, f.text_tokens))
            .collect()
    };
    let at = original.find("\"n\":[").expect("a fragment's numbers") + 5;
    let mut damages = vec![format!("{}40{}", &original[..at], &original[at + 1..])];
    // Every token count of the file set to 1.
    let body = original.split_once('\n').expect("header").1;
    let counted: serde_json::Value = serde_json::from_str(body).expect("json");
    let mut edited = counted.clone();
    for file in edited["files"].as_array_mut().expect("files") {
        for fragment in file["f"].as_array_mut().expect("fragments") {
            fragment["n"][2] = 1.into();
        }
    }
    let header = original.split_once('\n').expect("header").0;
    damages.push(format!("{header}\n{edited}"));
    for damaged in damages {
        std::fs::write(&path, &damaged).expect("damage");
        let rebuilt = Index::build(tree.path(), &options).expect("rebuild");
        assert_eq!(
            rebuilt.stats.reused, 0,
            "nothing reused from a damaged file"
        );
        assert_eq!(numbers(&rebuilt), numbers(&first));
        assert_eq!(std::fs::read_to_string(&path).expect("read"), original);
    }
    // An intact file is reused.
    let warm = Index::build(tree.path(), &options).expect("warm");
    assert_eq!(warm.stats.reused, 1);
}

/// Regression (found by probing): two file names that are not UTF-8 became one chunk id (both
/// bytes read as U+FFFD), and the commit of every select of the tree failed; a newline in a
/// name split a rendered header. Such files are skipped with the reason; the rest is indexed.
#[test]
fn names_a_chunk_id_cannot_carry_are_skipped_with_the_reason() {
    use std::os::unix::ffi::OsStrExt;
    let tree = tempfile::tempdir().expect("tree");
    for name in [
        &b"lat\xe8.txt"[..],
        &b"lat\xe9.txt"[..],
        &b"new\nline.txt"[..],
    ] {
        std::fs::write(
            tree.path().join(std::ffi::OsStr::from_bytes(name)),
            "text\n",
        )
        .expect("write");
    }
    std::fs::write(tree.path().join("ok.txt"), "fine\n").expect("write");
    let options = IndexOptions {
        persist: false,
        ..IndexOptions::default()
    };
    let index = Index::build(tree.path(), &options).expect("build");
    let paths: Vec<&str> = index.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["ok.txt"]);
    let reasons: Vec<&str> = index
        .stats
        .skipped
        .iter()
        .map(|s| s.reason.as_str())
        .collect();
    assert_eq!(
        reasons.iter().filter(|r| r.contains("not UTF-8")).count(),
        2,
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.contains("control character")),
        "{reasons:?}"
    );
}

/// Regression (found by probing): the size limit was checked only against the size the file
/// system reports, so `/proc/self/pagemap` (0 bytes by `stat`, endless to read) took all memory.
/// A file that reads longer than the limit is now skipped after reading one byte over it.
#[cfg(target_os = "linux")]
#[test]
fn a_file_that_reads_longer_than_its_size_is_cut_at_the_limit_and_skipped() {
    let status = std::path::Path::new("/proc/self/status");
    assert_eq!(std::fs::metadata(status).expect("stat").len(), 0);
    let make = || -> Tokenizer { Tokenizer::default() };
    match index_path("status", status, 10, &HashMap::new(), &make) {
        FileResult::Skipped(skipped) => {
            assert!(
                skipped.reason.contains("10-byte limit"),
                "{}",
                skipped.reason
            )
        }
        FileResult::Indexed { .. } => panic!("a file over the limit was indexed"),
    }
    assert!(matches!(
        index_path("status", status, 1_000_000, &HashMap::new(), &make),
        FileResult::Indexed { .. }
    ));
}

/// Regression (found by probing): a byte-order mark made the first line its own `block`
/// fragment, so the first item lost its attributes, decorators and doc comment.
#[test]
fn a_byte_order_mark_does_not_split_the_first_item() {
    let rust =
        "\u{FEFF}#[cfg(unix)]\n/// Doc.\npub fn bom_attr_fn(x: u32) -> u32 {\n    x + 1\n}\n";
    let index = doc_index("a.rs", rust);
    assert_partition(&index);
    assert_eq!(chunk_ids(&index), ["a.rs#L1-5"]);
    let python = "\u{FEFF}@decorator\ndef bom_dec_fn(x):\n    return x\n";
    let index = doc_index("b.py", python);
    assert_partition(&index);
    assert_eq!(chunk_ids(&index), ["b.py#L1-3"]);
}

/// Regression (found by probing): the members of an annotated Java class were "in
/// @SuppressWarnings(\"unchecked\")" — the context named the annotation, not the class.
#[test]
fn the_context_of_a_member_names_its_class_not_the_class_annotation() {
    let body = filler_body(40);
    let java = format!(
        "package p;\n\n@SuppressWarnings(\"unchecked\")\npublic class Annotated {{\n    public void first() {{\n{body}    }}\n\n    public void second() {{\n{body}    }}\n}}\n"
    );
    let index = doc_index("Svc.java", &java);
    let contexts: Vec<&str> = index
        .fragments
        .iter()
        .filter_map(|f| f.context.as_deref())
        .collect();
    assert!(!contexts.is_empty(), "{:?}", index.fragments);
    assert!(
        contexts
            .iter()
            .all(|c| c.starts_with("public class Annotated")),
        "{contexts:?}"
    );
}

/// Regression (found by probing): a C++ `template <…>` line was a fragment of its own, so class
/// and function skeletons lost their type parameters.
#[test]
fn a_cpp_template_line_stays_with_its_declaration() {
    let body = filler_body(30);
    let cpp = format!(
        "template <typename T>\nclass Box {{\npublic:\n    template <typename U>\n    U convert_to(const U& u) const {{\n{body}        return u;\n    }}\n}};\n\ntemplate <typename K>\nK free_template(K k) {{\n{body}    return k;\n}}\n"
    );
    let index = doc_index("t.hpp", &cpp);
    assert_partition(&index);
    for fragment in &index.fragments {
        let text = index.text(fragment);
        assert!(
            !text.trim_end().ends_with('>'),
            "a fragment ends in a template line: {} {text:?}",
            fragment.chunk_id
        );
    }
    let member = index
        .fragments
        .iter()
        .find(|f| index.text(f).contains("U convert_to"))
        .expect("member");
    assert!(index.text(member).contains("template <typename U>"));
    let free = index
        .fragments
        .iter()
        .find(|f| index.text(f).contains("K free_template"))
        .expect("free function");
    assert!(
        index.text(free).starts_with("template <typename K>"),
        "{:?}",
        index.text(free)
    );
}

/// Comment lines that make a body long enough to be a fragment of its own.
fn filler_body(lines: usize) -> String {
    (0..lines)
        .map(|i| format!("        // filler line {i} with some words to make it long enough\n"))
        .collect()
}

fn chunk_ids(index: &Index) -> Vec<&str> {
    index
        .fragments
        .iter()
        .map(|f| f.chunk_id.as_str())
        .collect()
}
