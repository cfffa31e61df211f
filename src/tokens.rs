//! Token counting: the single place that turns text into token counts.
//!
//! Counts use real BPE tokenizers (tiktoken-rs, whose ranks are compiled in, so this is fully
//! offline). `o200k_base` is the default; `cl100k_base` is selectable. Special-token strings in
//! the text are counted as ordinary text, because the content we count is data, not a prompt
//! template.

use serde::{Deserialize, Serialize};
use tiktoken_rs::CoreBPE;

/// A BPE encoding.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum Encoding {
    /// The GPT-4o / o-series encoding.
    #[default]
    #[value(name = "o200k_base")]
    O200kBase,
    /// The GPT-4 / GPT-3.5 encoding.
    #[value(name = "cl100k_base")]
    Cl100kBase,
}

impl Encoding {
    /// The wire name, as used in flags and files.
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::O200kBase => "o200k_base",
            Encoding::Cl100kBase => "cl100k_base",
        }
    }

    fn bpe(self) -> &'static CoreBPE {
        // The singletons load the rank tables compiled into the crate once per process.
        match self {
            Encoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
            Encoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        }
    }
}

impl std::fmt::Display for Encoding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A tokenizer for one encoding. Cheap to copy; the rank tables are shared process-wide.
#[derive(Clone, Copy)]
pub struct Tokenizer {
    encoding: Encoding,
    bpe: &'static CoreBPE,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("encoding", &self.encoding)
            .finish()
    }
}

impl Default for Tokenizer {
    fn default() -> Self {
        Self::new(Encoding::default())
    }
}

impl Tokenizer {
    /// Loads `encoding`'s rank tables on a background thread, so a command that needs them only
    /// after other work (walking and indexing a tree) does not wait for them then.
    pub fn warm_up(encoding: Encoding) {
        std::thread::spawn(move || {
            let _ = encoding.bpe();
        });
    }

    pub fn new(encoding: Encoding) -> Self {
        Self {
            encoding,
            bpe: encoding.bpe(),
        }
    }

    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Exact number of tokens in `text`.
    pub fn count(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        self.bpe.encode_ordinary(text).len()
    }

    /// Token ids of `text`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        self.bpe.encode_ordinary(text)
    }

    /// The longest prefix of `text`, cut at a char boundary, whose token count is at most
    /// `max_tokens`. Returns the prefix and its exact token count.
    pub fn truncate<'a>(&self, text: &'a str, max_tokens: usize) -> (&'a str, usize) {
        // One encoding gives both the count and the cut: the first max_tokens tokens decode to
        // the prefix's bytes. Back off to a char boundary and re-count only the prefix, since
        // BPE merges across the cut can change counts by a token or two.
        let ids = self.encode(text);
        if ids.len() <= max_tokens {
            return (text, ids.len());
        }
        let bytes = self
            .bpe
            .decode_bytes(&ids[..max_tokens])
            .map(|b| b.len())
            .unwrap_or_default();
        let mut end = bytes.min(text.len());
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        loop {
            let prefix = &text[..end];
            let count = self.count(prefix);
            if count <= max_tokens || end == 0 {
                return (prefix, count);
            }
            end -= 1;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
        }
    }
}

/// Tokens of `text` in the default encoding (`o200k_base`).
pub fn count(text: &str) -> usize {
    Tokenizer::default().count(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_real_bpe_counts() {
        let tokenizer = Tokenizer::new(Encoding::Cl100kBase);
        // "hello world" is two tokens in cl100k_base and o200k_base alike.
        assert_eq!(tokenizer.count("hello world"), 2);
        assert_eq!(count("hello world"), 2);
        assert_eq!(count(""), 0);
        // Special-token text is data, not a control token.
        assert!(count("<|endoftext|>") > 1);
    }

    #[test]
    fn encodings_differ_on_code() {
        let code = "fn main() {\n    println!(\"{}\", 1 + 2);\n}\n";
        let a = Tokenizer::new(Encoding::O200kBase).count(code);
        let b = Tokenizer::new(Encoding::Cl100kBase).count(code);
        assert!(a > 5 && b > 5);
    }

    #[test]
    fn truncate_respects_budget_and_char_boundaries() {
        let tokenizer = Tokenizer::default();
        let text = "Grüße aus Köln — ünïcödé everywhere. ".repeat(50);
        for budget in [0, 1, 2, 7, 33, 100, 10_000] {
            let (prefix, n) = tokenizer.truncate(&text, budget);
            assert!(n <= budget, "budget {budget} got {n}");
            assert_eq!(n, tokenizer.count(prefix));
            assert!(text.starts_with(prefix));
        }
    }
}
