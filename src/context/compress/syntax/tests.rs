use crate::context::commit::CommitStore;
use crate::context::compress::sample::Rng;
use crate::context::compress::{
    CodeMethod, CompressOptions, Compressed, ContentKind, compress, reduce,
};
use crate::tokens::Tokenizer;

/// Compresses `source` named `name` and checks the contract: within budget, exact count, every
/// chunk recovered and all chunks together the original.
fn compressed(name: &str, source: &str, budget: usize) -> Compressed {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = CommitStore::new(dir.path());
    let tokenizer = Tokenizer::default();
    let options = CompressOptions {
        kind: None,
        query: None,
        source: name.into(),
    };
    let result = compress(source, budget, &options, &store, &tokenizer)
        .unwrap_or_else(|e| panic!("{name} at {budget}: {e}"));
    assert!(result.tokens <= budget, "{} > {budget}", result.tokens);
    assert_eq!(result.tokens, tokenizer.count(&result.text));
    let receipt = store.receipt(&result.ctx_id).expect("receipt");
    let whole: String = receipt
        .chunks
        .iter()
        .map(|c| store.recover(&result.ctx_id, &c.chunk_id).expect("chunk"))
        .collect();
    assert_eq!(whole, source, "chunks reassemble the original");
    for elision in &result.elisions {
        assert!(
            result
                .text
                .contains(&format!("recover {}", elision.chunk_id))
        );
    }
    result
}

fn lines_kept(result: &Compressed, lines: &[&str]) {
    for line in lines {
        assert!(
            result.text.lines().any(|l| l == *line),
            "kept: {line:?}\n{}",
            result.text
        );
    }
}

fn lines_elided(result: &Compressed, lines: &[&str]) {
    for line in lines {
        assert!(
            !result.text.lines().any(|l| l == *line),
            "elided: {line:?}\n{}",
            result.text
        );
    }
}

const PYTHON: &str = r#""""Service helpers.

A longer description of the module that is not needed to use it.
"""
import os
from typing import Any


def retry(times):
    """Retry a call."""
    def wrap(fn):
        """Wrap fn with retries."""
        def inner(*args, **kwargs):
            last = None
            for attempt in range(times):
                try:
                    return fn(*args, **kwargs)
                except OSError as error:
                    last = error
                    print("attempt", attempt, "failed", error)
            raise last
        return inner
    return wrap


class Service:
    """Talks to the upstream service.

    Details about connection pooling and timeouts that run long.
    """

    timeout = 30

    @retry(3)
    @staticmethod
    def start(host: str,
              port: int) -> None:
        """Start the service."""
        print("starting", host, port)
        for i in range(10):
            print("warming", i)
            if i > 5:
                print("warm enough")
                break
        os.environ["SERVICE"] = host

    def stop(self) -> int:
        """Stop it."""
        print("stopping")
        return 0
"#;

/// Python: decorators stay with their method, nested definitions go with the body they are
/// in, a docstring's first line stays and its details go.
#[test]
fn python_elides_bodies_by_node_keeping_decorators_and_docstrings() {
    let result = compressed("service.py", PYTHON, 150);
    assert_eq!(
        result.code.as_ref().map(|c| c.method),
        Some(CodeMethod::Syntax)
    );
    lines_kept(
        &result,
        &[
            "import os",
            "def retry(times):",
            "    \"\"\"Retry a call.\"\"\"",
            "class Service:",
            "    @retry(3)",
            "    @staticmethod",
            "    def start(host: str,",
            "              port: int) -> None:",
            "        \"\"\"Start the service.\"\"\"",
            "    def stop(self) -> int:",
        ],
    );
    lines_elided(
        &result,
        &[
            "    def wrap(fn):",
            "                    last = error",
            "            print(\"warming\", i)",
        ],
    );
    assert!(
        result.text.contains("# … "),
        "Python markers: {}",
        result.text
    );
    // With more room the smallest body (stop's) comes back first, the largest stays out.
    let generous = compressed("service.py", PYTHON, 180);
    lines_kept(
        &generous,
        &["        print(\"stopping\")", "        return 0"],
    );
    lines_elided(&generous, &["    def wrap(fn):"]);
}

const RUST: &str = r#"use std::collections::HashMap;
use std::fmt;

/// A store of named values.
/// It keeps them in memory.
#[derive(Debug, Default)]
pub struct Store {
    /// The values.
    values: HashMap<String, u64>,
    hits: u64,
}

impl Store {
    /// Makes an empty store.
    #[must_use]
    pub fn new() -> Self {
        Self {
            values: HashMap::new(),
            hits: 0,
        }
    }

    /// Looks a value up, counting hits.
    pub fn get(&mut self, key: &str) -> Option<u64> {
        let found = self.values.get(key).copied();
        if found.is_some() {
            self.hits += 1;
        }
        for (name, value) in &self.values {
            if name.len() > 100 {
                eprintln!("long key {name}: {value}");
            }
        }
        found
    }
}

impl fmt::Display for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} values", self.values.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_hits() {
        let mut store = Store::new();
        store.values.insert("a".into(), 1);
        assert_eq!(store.get("a"), Some(1));
        assert_eq!(store.hits, 1);
    }
}
"#;

/// Rust: impl blocks keep their header, method signatures, attributes, the first doc line and
/// the closing braces; struct fields stay before bodies.
#[test]
fn rust_keeps_impl_headers_attributes_and_fields_before_bodies() {
    let result = compressed("src/store.rs", RUST, 240);
    assert_eq!(
        result.code.as_ref().map(|c| c.method),
        Some(CodeMethod::Syntax)
    );
    lines_kept(
        &result,
        &[
            "use std::collections::HashMap;",
            "/// A store of named values.",
            "#[derive(Debug, Default)]",
            "pub struct Store {",
            "    values: HashMap<String, u64>,",
            "impl Store {",
            "    #[must_use]",
            "    pub fn new() -> Self {",
            "    pub fn get(&mut self, key: &str) -> Option<u64> {",
            "impl fmt::Display for Store {",
            "    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {",
            "mod tests {",
        ],
    );
    lines_elided(
        &result,
        &[
            "                eprintln!(\"long key {name}: {value}\");",
            "        store.values.insert(\"a\".into(), 1);",
        ],
    );
    // Every kept signature keeps its closing brace: braces stay balanced.
    let opens = result.text.matches('{').count();
    let closes = result.text.matches('}').count();
    assert_eq!(opens, closes, "{}", result.text);
}

const JS: &str = r#"import { readFile } from "node:fs/promises";

/**
 * Loads the configuration.
 * Falls back to defaults.
 */
export async function loadConfig(path) {
  const text = await readFile(path, "utf8");
  const parsed = JSON.parse(text);
  if (!parsed.name) {
    throw new Error("config needs a name");
  }
  return { ...DEFAULTS, ...parsed };
}

export class Client {
  constructor(url) {
    this.url = url;
    this.retries = 3;
  }

  async fetch(route) {
    for (let i = 0; i < this.retries; i++) {
      const response = await fetch(this.url + route);
      if (response.ok) {
        return response.json();
      }
    }
    throw new Error("gave up on " + route);
  }
}

const handler = (event) => {
  console.log("event", event.type);
  return event.id;
};
"#;

#[test]
fn javascript_keeps_functions_classes_and_methods() {
    let result = compressed("src/client.js", JS, 130);
    assert_eq!(
        result.code.as_ref().map(|c| c.method),
        Some(CodeMethod::Syntax)
    );
    lines_kept(
        &result,
        &[
            "import { readFile } from \"node:fs/promises\";",
            "/**",
            "export async function loadConfig(path) {",
            "export class Client {",
            "  constructor(url) {",
            "  async fetch(route) {",
            "const handler = (event) => {",
        ],
    );
    lines_elided(&result, &["        return response.json();"]);
    assert!(result.text.contains("// … "));
}

/// Without a grammar (or a name) the brace/indentation reducer runs, and says so.
#[test]
fn other_languages_fall_back_and_say_why() {
    let shell = "#!/bin/sh\nmain() {\n".to_string()
        + &"  echo \"step\" && sleep 1\n".repeat(60)
        + "}\nmain \"$@\"\n";
    let result = compressed("deploy.sh", &shell, 60);
    let how = result.code.expect("code reduction");
    assert_eq!(how.method, CodeMethod::Braces);
    assert_eq!(
        how.fallback_reason.as_deref(),
        Some("no tree-sitter grammar for this file type")
    );
    let options = CompressOptions {
        kind: Some(ContentKind::Code),
        query: None,
        source: "-".into(),
    };
    let reduced = reduce(PYTHON, 150, &options, &Tokenizer::default()).expect("reduced");
    let how = reduced.code.expect("code reduction");
    assert_eq!(how.method, CodeMethod::Indentation);
    assert!(how.fallback_reason.is_some());
}

/// Random programs in three languages at random budgets: the parts always partition the input,
/// the text is within budget and its count exact.
#[test]
fn parts_partition_the_input_and_stay_in_budget_property() {
    let tokenizer = Tokenizer::default();
    let mut rng = Rng::new(13);
    for case in 0..60 {
        let (name, source) = random_program(&mut rng, case % 3);
        let original = tokenizer.count(&source);
        let budget = 20 + rng.below(original);
        let options = CompressOptions {
            kind: Some(ContentKind::Code),
            query: None,
            source: name.to_string(),
        };
        let Ok(reduced) = reduce(&source, budget, &options, &tokenizer) else {
            continue;
        };
        let whole: String = reduced.parts.iter().map(|p| p.original.as_str()).collect();
        assert_eq!(whole, source, "case {case} ({name}, budget {budget})");
        assert!(reduced.tokens <= budget, "case {case}");
        assert_eq!(
            reduced.tokens,
            tokenizer.count(&reduced.text),
            "case {case}"
        );
        for part in reduced.parts.iter().filter(|p| p.resolution.is_none()) {
            assert!(reduced.text.contains(&format!("recover {}", part.chunk_id)));
        }
    }
}

fn random_program(rng: &mut Rng, language: usize) -> (&'static str, String) {
    let mut out = String::new();
    let functions = 2 + rng.below(12);
    match language {
        0 => {
            out.push_str("import os\n\n");
            for f in 0..functions {
                if rng.below(3) == 0 {
                    out.push_str(&format!("class C{f}:\n    \"\"\"Class {f}.\"\"\"\n\n"));
                }
                let indent = if out.contains("class") { "    " } else { "" };
                if rng.below(2) == 0 {
                    out.push_str(&format!("{indent}@decorator({f})\n"));
                }
                out.push_str(&format!(
                    "{indent}def f{f}(x):\n{indent}    \"\"\"Doc {f}.\"\"\"\n"
                ));
                for s in 0..rng.below(15) {
                    out.push_str(&format!("{indent}    x = x + {s}  # step é\n"));
                }
                out.push_str(&format!("{indent}    return x\n\n"));
            }
            ("gen.py", out)
        }
        1 => {
            out.push_str("use std::fmt;\n\n");
            for f in 0..functions {
                out.push_str(&format!(
                    "/// Does {f}.\n#[inline]\npub fn f{f}(x: u64) -> u64 {{\n"
                ));
                for s in 0..rng.below(15) {
                    out.push_str(&format!("    let x = x + {s}; // \"{{\"\n"));
                }
                out.push_str("    x\n}\n\n");
                if rng.below(3) == 0 {
                    out.push_str(&format!(
                        "impl T{f} {{\n    fn m(&self) {{\n        run({f});\n    }}\n}}\n"
                    ));
                }
            }
            ("gen.rs", out)
        }
        _ => {
            for f in 0..functions {
                out.push_str(&format!("function f{f}(x) {{\n"));
                for s in 0..rng.below(15) {
                    out.push_str(&format!("  x += {s}; // `{{`\n"));
                }
                out.push_str("  return x;\n}\n\n");
            }
            if rng.below(2) == 0 {
                // A syntax error: the parser recovers, the contract holds either way.
                out.push_str("function broken( {\n  oops\n");
            }
            ("gen.js", out)
        }
    }
}
