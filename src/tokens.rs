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

/// A tokenizer for one encoding. Cheap to copy; the rank tables are shared process-wide and
/// loaded at the first count (about 0.1 s of CPU), not when the tokenizer is made: a warm
/// `svc context select` whose counts all come from the index never loads them.
#[derive(Clone, Copy)]
pub struct Tokenizer {
    encoding: Encoding,
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
    pub fn new(encoding: Encoding) -> Self {
        Self { encoding }
    }

    fn bpe(&self) -> &'static CoreBPE {
        self.encoding.bpe()
    }

    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Exact number of tokens in `text` (see [`MAX_RUN`] for the one exception).
    pub fn count(&self, text: &str) -> usize {
        if text.is_empty() {
            return 0;
        }
        segments(text)
            .iter()
            .map(|segment| self.bpe().encode_ordinary(segment).len())
            .sum()
    }

    /// Token ids of `text`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        for segment in segments(text) {
            ids.extend(self.bpe().encode_ordinary(segment));
        }
        ids
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
            .bpe()
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

/// The longest run of white space, or of characters that are not white space, handed to the
/// tokenizer at once. tiktoken's pattern matches a run of white space not followed by text by
/// backtracking (`\s+(?!\S)`), and a run of about a million characters overflows its regex
/// engine (a panic inside tiktoken-rs that took down `compress`, `batch` and indexing on one
/// padded file); a word of millions of characters (a long string in JSON) is merged by a heap
/// of about 100 bytes per byte (2.2 GB for 20 MB). Longer runs are cut into runs of this
/// length, each encoded alone: exact for all other text, and for such a run off by at most a
/// token or two per cut (one cut per 65,536 characters).
pub const MAX_RUN: usize = 1 << 16;

/// `text` cut inside every run longer than [`MAX_RUN`] characters of white space, or of
/// characters that are not.
fn segments(text: &str) -> Vec<&str> {
    // A text this short cannot hold a run that long.
    if text.len() <= MAX_RUN {
        return vec![text];
    }
    let mut out = Vec::new();
    let (mut start, mut run, mut space) = (0, 0, false);
    for (at, c) in text.char_indices() {
        let is_space = c.is_whitespace();
        if is_space != space {
            space = is_space;
            run = 0;
        }
        if run == MAX_RUN {
            out.push(&text[start..at]);
            start = at;
            run = 0;
        }
        run += 1;
    }
    out.push(&text[start..]);
    out
}

/// Whether the tokens of `left + right` are exactly the tokens of `left` followed by those of
/// `right`, so their counts add, judged from the bytes at the seam alone. Both encodings split
/// text into pieces with one pattern before merging bytes within a piece, and no piece that
/// ends a `left` ending in a line break can reach into `right` unless `right` continues it:
/// - after a line break preceded by punctuation, the piece (`[^\s\p{L}\p{N}]+[\r\n/]*`, e.g.
///   `}\n`) goes on over line breaks and slashes, so `right` must not start with `\r`, `\n`
///   or `/`;
/// - otherwise the line break ends a whitespace piece (`\s*[\r\n]+`), which goes on only over
///   whitespace that contains another line break, so `right`'s leading whitespace must not.
///
/// Everything else is "not known" (`false`), never a guess: `left` not ending in a line break,
/// for instance. `right`'s own pieces start at the seam either way, since the pattern looks
/// behind nothing. Checked against the real tokenizers on generated seams in the tests.
pub fn counts_add(left: &str, right: &str) -> bool {
    let Some(body) = left.strip_suffix('\n') else {
        return false;
    };
    // A whitespace piece would go on over `right`'s leading whitespace up to a line break in it.
    let breaks_again = right
        .chars()
        .take_while(|c| c.is_whitespace())
        .any(|c| c == '\r' || c == '\n');
    if breaks_again {
        return false;
    }
    // Only after a letter, digit or space is the line break surely a whitespace piece of its
    // own; after anything else (punctuation, `/`, a combining mark) a slash would join it.
    let before = body.trim_end_matches(['\r', '\n']).chars().next_back();
    let plain = before.is_none_or(|c| c.is_ascii_alphanumeric() || c.is_whitespace());
    plain || !right.starts_with('/')
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

    /// Found by probing: a run of about a million spaces (a padded file) panicked inside
    /// tiktoken-rs (`RuntimeError(StackOverflow)`), and a 20 MB word took 2.2 GB.
    #[test]
    fn a_huge_run_is_counted_in_pieces_not_a_crash() {
        let tokenizer = Tokenizer::default();
        for text in [
            " ".repeat(1_000_000),
            format!("hello world.\n{}", " ".repeat(1_000_000)),
            format!("a{}b", "\t".repeat(1_500_000)),
            format!("{{\"s\": \"{}\"}}", "x".repeat(300_000)),
        ] {
            let count = tokenizer.count(&text);
            assert!(count > 0 && count < text.len(), "{count}");
            assert_eq!(tokenizer.encode(&text).len(), count);
            let (prefix, used) = tokenizer.truncate(&text, 10);
            assert!(used <= 10 && !prefix.is_empty());
        }
        // Text without such a run is cut nowhere: its count is the tokenizer's own.
        let prose = "word ".repeat(40_000);
        assert_eq!(segments(&prose).len(), 1);
        assert_eq!(
            tokenizer.count(&prose),
            tokenizer.bpe().encode_ordinary(&prose).len()
        );
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

    #[test]
    fn counts_add_only_where_the_real_tokenizers_split_at_the_seam() {
        // Seams of every kind the rule distinguishes: line breaks after letters, digits, spaces,
        // punctuation, slashes and combining marks, followed by slashes, spaces, line breaks,
        // letters and the `>>>` of a piece header.
        const PARTS: &[&str] = &[
            "a", "Zq", "é", "e\u{301}", "1", "224", " ", "  ", "\t", "\n", "\r\n", "\n\n", "/",
            "//", "}", ");", "-", "'s", "\u{a0}", "中文", ">>> ", "fn x", "\u{2028}", ":",
        ];
        let mut rng = crate::rng::SplitMix64::new(7);
        let text = |rng: &mut crate::rng::SplitMix64| {
            let n = 1 + rng.below(5);
            (0..n)
                .map(|_| PARTS[rng.below(PARTS.len())])
                .collect::<String>()
        };
        for encoding in [Encoding::O200kBase, Encoding::Cl100kBase] {
            let tokenizer = Tokenizer::new(encoding);
            let (mut judged, mut additive) = (0, 0);
            for _ in 0..6_000 {
                let left = format!("{}\n", text(&mut rng));
                let right = text(&mut rng);
                judged += 1;
                if counts_add(&left, &right) {
                    additive += 1;
                    let mut apart = tokenizer.encode(&left);
                    apart.extend(tokenizer.encode(&right));
                    assert_eq!(
                        tokenizer.encode(&format!("{left}{right}")),
                        apart,
                        "{encoding}: {left:?} + {right:?}"
                    );
                }
            }
            // The rule must say yes often enough to matter, and no to known merges.
            assert!(additive * 3 > judged, "{additive} of {judged}");
        }
        assert!(!counts_add("}\n", "/// doc"));
        assert!(!counts_add("x\n", " \n"));
        assert!(!counts_add("no break", "x"));
        assert!(counts_add("fn a() {}\n", ">>> b.rs#L1-2\n"));
        assert!(counts_add(">>> a.rs#L1-9\n", "/// Doc.\n"));
        assert!(counts_add(">>> a.rs#L1-9 (in impl A)\n", "    fn a() {}\n"));
    }
}
