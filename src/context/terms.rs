//! The searchable form of an index and query scoring.
//!
//! Terms are identifier parts (camelCase and snake_case split, lower-cased, lightly stemmed)
//! from each fragment's text, its path and (weighted double) the symbols it defines. Terms and
//! whole identifiers are kept as 64-bit FNV hashes rather than strings: building the index for
//! a million-token tree then allocates almost nothing per word, and a collision (about one in
//! 10^19 per pair) could at worst blur one term's score.
//!
//! Scoring is BM25 (a query word also searching for its [`SYNONYMS`] at half weight) plus
//! structure: a definition named after queried words (or named verbatim)
//! gains the idf of the words it matches, and the best fragments lend a share of their score to
//! what they call, what calls them and their own file.

use std::collections::{HashMap, HashSet};

use rayon::prelude::*;

use super::index::{Fragment, Index, is_test_code};
use super::postings::{Keyed, Lists, Reader, Writer};
use super::roles::{FileRole, role_of};
use super::weights::{Feature, RankingWeights};
use crate::text::{stem, stopwords};

/// The term index file's magic and format version.
const TERMS_MAGIC: &[u8] = b"SVCTERM1";
/// Words of every shape the splitter treats differently (case changes, acronyms, digits,
/// underscores, stopwords, stems, paths, non-ASCII), hashed into [`TermIndex::fingerprint`].
const TERMS_PROBE: &str = "parseHTTPHeaders_v2 XMLHttpRequest snake_case_name the of fn running \
     buffered writes src/io/read_buf.rs CONSTANT_VALUE 12ms über straße a1b2 tokio::time::sleep";

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Words programmers use interchangeably for one concept. A query word from a group also
/// searches for the group's other words (multi-word entries as all their parts) at
/// [`Feature::Synonym`] of their usual weight, so a query phrased in other words than the code
/// (`find the position … by bisection` for `binary_search_index`) still meets it.
const SYNONYMS: &[&[&str]] = &[
    &["find", "search", "lookup", "locate"],
    &["position", "index", "offset"],
    &["bisection", "bisect", "binary search"],
    &["remove", "delete", "erase"],
    &["length", "len", "size"],
    &["array", "vector", "vec", "slice"],
    &["dictionary", "dict", "map"],
    &["directory", "dir", "folder"],
    &["argument", "arg", "parameter", "param"],
    &["initialize", "initialise", "init"],
    &["configuration", "config"],
    &["message", "msg"],
    &["number", "num"],
    &["compare", "cmp"],
];

/// Weight of a synonym's match relative to a word of the query itself (the default of
/// [`Feature::Synonym`]).
#[cfg(test)]
const SYNONYM_WEIGHT: f64 = 0.5;

/// FNV-1a of the ASCII-lower-cased bytes.
fn fnv(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b.to_ascii_lowercase());
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

/// Hash of a term or identifier, case-insensitive.
pub fn term_hash(text: &str) -> u64 {
    fnv(text.as_bytes())
}

/// Calls `f` with each lower-cased, stemmed part of an identifier: `parseHTTPHeaders_v2` →
/// pars, http, header, v2. Parts shorter than two characters and stopwords are skipped.
fn for_each_part(word: &str, buffer: &mut String, mut f: impl FnMut(&str)) {
    let bytes = word.as_bytes();
    let ascii = word.is_ascii();
    let mut start = 0;
    let emit = |part: &str, buffer: &mut String, f: &mut dyn FnMut(&str)| {
        if part.is_empty() {
            return;
        }
        buffer.clear();
        for c in part.chars() {
            buffer.extend(c.to_lowercase());
        }
        stem::search_in_place(buffer);
        if buffer.len() >= 2 && !stopwords::is_code_search(buffer) {
            f(buffer);
        }
    };
    if !ascii {
        // Rare outside identifiers in prose: split on underscores only.
        for part in word.split(['_', '-']) {
            emit(part, buffer, &mut f);
        }
        return;
    }
    for i in 0..bytes.len() {
        let c = bytes[i];
        if c == b'_' || c == b'-' {
            emit(&word[start..i], buffer, &mut f);
            start = i + 1;
            continue;
        }
        if i > start {
            let previous = bytes[i - 1];
            let boundary = (previous.is_ascii_lowercase() && c.is_ascii_uppercase())
                || (previous.is_ascii_uppercase()
                    && c.is_ascii_uppercase()
                    && bytes.get(i + 1).is_some_and(|n| n.is_ascii_lowercase()));
            if boundary {
                emit(&word[start..i], buffer, &mut f);
                start = i;
            }
        }
    }
    emit(&word[start..], buffer, &mut f);
}

/// Lower-cased, stemmed parts of an identifier (see [`for_each_part`]).
pub fn identifier_parts(word: &str, out: &mut Vec<String>) {
    let mut buffer = String::new();
    for_each_part(word, &mut buffer, |part| out.push(part.to_string()));
}

pub use crate::text::words::identifiers as words;

/// The searchable form of an index, built on first use (or read from its file, see
/// [`super::postings`]).
#[derive(Debug, Default, PartialEq)]
pub struct TermIndex {
    /// Per term hash: `(fragment, term frequency)`, fragments ascending.
    postings: Keyed<(u32, u32)>,
    lengths: Vec<u32>,
    average_length: f64,
    /// Per identifier hash: fragments mentioning it.
    mentioned_by: Keyed<u32>,
    /// Per fragment: identifier hashes it mentions.
    mentions: Lists<u64>,
    /// Lower-cased symbol hash → definition fragments.
    defined_by: Keyed<u32>,
    /// Per symbol, numbered over all fragments in order: its part hashes.
    symbol_parts: Lists<u64>,
    /// Per fragment: the number of its first symbol in `symbol_parts`.
    first_symbol: Vec<u32>,
}

struct FragmentTerms {
    terms: Vec<(u64, u32)>,
    identifiers: Vec<u64>,
    symbol_parts: Vec<Vec<u64>>,
    length: u32,
}

fn fragment_terms(index: &Index, fragment: &Fragment) -> FragmentTerms {
    let mut hashes: Vec<u64> = Vec::with_capacity(fragment.text_tokens);
    let mut identifiers: Vec<u64> = Vec::new();
    let mut buffer = String::new();
    for word in words(index.text(fragment)) {
        if word.len() >= 3 && !word.as_bytes()[0].is_ascii_digit() {
            identifiers.push(term_hash(word));
        }
        for_each_part(word, &mut buffer, |part| hashes.push(term_hash(part)));
    }
    // The path and the defined symbols count as text too: a file named after the query, or a
    // definition named after it, is about it.
    for word in words(index.path(fragment)) {
        for_each_part(word, &mut buffer, |part| hashes.push(term_hash(part)));
    }
    let mut symbol_parts = Vec::with_capacity(fragment.symbols.len());
    for symbol in &fragment.symbols {
        let mut mine = Vec::new();
        for word in words(symbol) {
            for_each_part(word, &mut buffer, |part| mine.push(term_hash(part)));
        }
        hashes.extend_from_slice(&mine);
        hashes.extend_from_slice(&mine);
        symbol_parts.push(mine);
    }
    let length = hashes.len() as u32;
    hashes.sort_unstable();
    let mut terms: Vec<(u64, u32)> = Vec::new();
    for hash in hashes {
        match terms.last_mut() {
            Some((last, count)) if *last == hash => *count += 1,
            _ => terms.push((hash, 1)),
        }
    }
    identifiers.sort_unstable();
    identifiers.dedup();
    FragmentTerms {
        terms,
        identifiers,
        symbol_parts,
        length,
    }
}

impl TermIndex {
    pub(crate) fn build(index: &Index) -> TermIndex {
        let per_fragment: Vec<FragmentTerms> = index
            .fragments
            .par_iter()
            .map(|f| fragment_terms(index, f))
            .collect();
        let mut terms = TermIndex::default();
        let mut postings: Vec<(u64, (u32, u32))> = Vec::new();
        let mut mentioned: Vec<(u64, u32)> = Vec::new();
        let mut total_length = 0u64;
        for (number, fragment_terms) in per_fragment.into_iter().enumerate() {
            let number = number as u32;
            postings.extend(
                fragment_terms
                    .terms
                    .iter()
                    .map(|&(hash, frequency)| (hash, (number, frequency))),
            );
            mentioned.extend(fragment_terms.identifiers.iter().map(|&id| (id, number)));
            terms.mentions.push(&fragment_terms.identifiers);
            terms.lengths.push(fragment_terms.length);
            total_length += u64::from(fragment_terms.length);
            terms.first_symbol.push(terms.symbol_parts.len() as u32);
            for parts in &fragment_terms.symbol_parts {
                terms.symbol_parts.push(parts);
            }
        }
        // Stable sorts by key: within a key, fragments stay ascending.
        postings.par_sort_by_key(|&(hash, _)| hash);
        mentioned.par_sort_by_key(|&(hash, _)| hash);
        terms.postings = Keyed::from_sorted(&postings);
        terms.mentioned_by = Keyed::from_sorted(&mentioned);
        let mut defined: Vec<(u64, u32)> = Vec::new();
        for (number, fragment) in index.fragments.iter().enumerate() {
            if fragment.kind.is_definition() {
                for symbol in &fragment.symbols {
                    defined.push((term_hash(symbol), number as u32));
                }
            }
        }
        defined.sort_by_key(|&(hash, _)| hash);
        terms.defined_by = Keyed::from_sorted(&defined);
        terms.average_length = total_length as f64 / index.fragments.len().max(1) as f64;
        terms
    }

    /// The part hashes of each symbol fragment `number` defines, in its symbols' order.
    fn symbol_parts(&self, number: usize) -> impl Iterator<Item = &[u64]> {
        let first = self.first_symbol.get(number).map_or(0, |&f| f as usize);
        let next = self
            .first_symbol
            .get(number + 1)
            .map_or(self.symbol_parts.len(), |&f| f as usize);
        (first..next).map(|at| self.symbol_parts.get(at))
    }

    /// What the term index of `index` is built from: every file's path and content hash, every
    /// fragment's place, kind and symbols, and the terms this build extracts from a probe
    /// text, so a change to word splitting, stemming or stopwords makes an older file stale
    /// without anyone remembering to bump a version.
    pub(crate) fn fingerprint(index: &Index) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        let mut buffer = String::new();
        for word in words(TERMS_PROBE) {
            for_each_part(word, &mut buffer, |part| {
                hasher.update(term_hash(part).to_le_bytes())
            });
            hasher.update(b"|");
        }
        hasher.update(index.encoding.as_str());
        for file in &index.files {
            hasher.update(file.path.as_bytes());
            hasher.update(b"\0");
            hasher.update(file.content_hash.as_bytes());
            hasher.update(b"\n");
        }
        for fragment in &index.fragments {
            let place = [fragment.file, fragment.bytes.start, fragment.bytes.end];
            for number in place {
                hasher.update((number as u64).to_le_bytes());
            }
            hasher.update(fragment.kind.as_str());
            for symbol in &fragment.symbols {
                hasher.update(symbol.as_bytes());
                hasher.update(b"\0");
            }
            hasher.update(b"\n");
        }
        hasher.finalize().into()
    }

    /// The index as bytes, after a `fingerprint` of what it was built from.
    pub(crate) fn to_bytes(&self, fingerprint: &[u8; 32]) -> Vec<u8> {
        let mut writer = Writer::new(TERMS_MAGIC);
        writer.array(&fingerprint.map(u32::from));
        writer.keyed(&self.postings);
        writer.array(&self.lengths);
        writer.array(&[self.average_length.to_bits()]);
        writer.keyed(&self.mentioned_by);
        writer.lists(&self.mentions);
        writer.keyed(&self.defined_by);
        writer.lists(&self.symbol_parts);
        writer.array(&self.first_symbol);
        writer.bytes()
    }

    /// Reads [`TermIndex::to_bytes`] for an index of `fragments` fragments; `None` unless the
    /// bytes are whole, consistent and of this `fingerprint`.
    pub(crate) fn from_bytes(
        bytes: &[u8],
        fingerprint: &[u8; 32],
        fragments: usize,
    ) -> Option<TermIndex> {
        let mut reader = Reader::new(bytes, TERMS_MAGIC)?;
        if reader.array::<u32>()? != fingerprint.map(u32::from) {
            return None;
        }
        let terms = TermIndex {
            postings: reader.keyed()?,
            lengths: reader.array()?,
            average_length: f64::from_bits(*reader.array::<u64>()?.first()?),
            mentioned_by: reader.keyed()?,
            mentions: reader.lists()?,
            defined_by: reader.keyed()?,
            symbol_parts: reader.lists()?,
            first_symbol: reader.array()?,
        };
        let n = fragments as u32;
        let consistent = reader.finished()
            && terms.lengths.len() == fragments
            && terms.mentions.len() == fragments
            && terms.first_symbol.len() == fragments
            && terms
                .first_symbol
                .iter()
                .all(|&f| f as usize <= terms.symbol_parts.len())
            && terms.postings.values().iter().all(|&(f, _)| f < n)
            && terms.mentioned_by.values().iter().all(|&f| f < n)
            && terms.defined_by.values().iter().all(|&f| f < n);
        consistent.then_some(terms)
    }

    fn idf(&self, postings: usize) -> f64 {
        let n = self.lengths.len() as f64;
        let df = postings as f64;
        (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
    }
}

/// A fragment's score and how it was earned.
#[derive(Debug, Clone, Default)]
pub struct Scored {
    pub score: f64,
    pub reason: Vec<String>,
    /// The same, as numbers per weight: what learning from feedback moves weights along.
    pub evidence: Evidence,
}

/// The unweighted evidence behind a score: `score = prior × (bm25 + Σ weight × evidence)`,
/// with `prior` the [`Feature::RecordPrior`] for record files and 1 otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Evidence {
    /// BM25 of the query's own words (weight 1: the anchor).
    pub bm25: f64,
    /// BM25 of synonyms of query words, before their weight.
    pub synonym: f64,
    /// Boost of the best definition made of queried words, before its weight.
    pub definition: f64,
    /// The query's largest IDF when it names a defined symbol verbatim, else 0.
    pub named_symbol: f64,
    /// Boost for being in a file the query names, before its weight.
    pub named_file: f64,
    /// Score of the top fragment that lent to this one, by the kind of link (one link counts).
    pub caller: f64,
    pub callee: f64,
    pub same_file: f64,
    /// In a changelog, licence or contributor list.
    pub record_file: bool,
}

impl Evidence {
    /// The evidence a weight multiplies (the record prior's is the score it scales, signed by
    /// whether it applies).
    pub fn along(&self, feature: Feature) -> f64 {
        match feature {
            Feature::Definition => self.definition,
            Feature::NamedSymbol => self.named_symbol,
            Feature::NamedFile => self.named_file,
            Feature::Synonym => self.synonym,
            Feature::Caller => self.caller,
            Feature::Callee => self.callee,
            Feature::SameFile => self.same_file,
            Feature::RecordPrior => {
                if self.record_file {
                    self.bm25 + self.synonym + self.definition + self.named_file
                } else {
                    0.0
                }
            }
            Feature::SkeletonValue | Feature::PresenceValue => 0.0,
        }
    }
}

/// Scores every fragment that matches `query` with the default weights.
pub fn score(index: &Index, query: &str) -> HashMap<u32, Scored> {
    score_with(index, query, &RankingWeights::default())
}

/// Scores every fragment that matches `query` (fragments not in the map score 0).
pub fn score_with(index: &Index, query: &str, ranking: &RankingWeights) -> HashMap<u32, Scored> {
    let phrases = super::query::quoted_phrases(query);
    let query = &super::query::searchable(query);
    let terms = index.terms();
    let mut query_terms: Vec<u64> = Vec::new();
    let mut query_identifiers: HashSet<u64> = HashSet::new();
    let mut buffer = String::new();
    for word in words(query) {
        for_each_part(word, &mut buffer, |part| query_terms.push(term_hash(part)));
        // Only identifier-shaped words (snake_case, camelCase, paths) count as naming a symbol
        // verbatim; plain English words match through their parts.
        let shaped = word.contains('_')
            || word
                .as_bytes()
                .windows(2)
                .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
        if shaped {
            query_identifiers.insert(term_hash(word));
        }
    }
    query_terms.sort_unstable();
    query_terms.dedup();
    let weights = synonym_weights(&query_terms, &mut buffer, ranking.get(Feature::Synonym));
    let mut scores: HashMap<u32, Scored> = HashMap::new();
    let mut idfs: HashMap<u64, f64> = HashMap::new();
    for (term, weight) in &weights {
        let Some(postings) = terms.postings.get(*term) else {
            continue;
        };
        let idf = terms.idf(postings.len()) * weight;
        idfs.insert(*term, idf);
        for &(fragment, frequency) in postings {
            let tf = f64::from(frequency);
            let length = f64::from(terms.lengths[fragment as usize]);
            let bm25 = idf * tf * (K1 + 1.0)
                / (tf + K1 * (1.0 - B + B * length / terms.average_length.max(1.0)));
            let scored = scores.entry(fragment).or_default();
            scored.score += bm25;
            if query_terms.binary_search(term).is_ok() {
                scored.evidence.bm25 += bm25;
            } else if *weight > 0.0 {
                scored.evidence.synonym += bm25 / weight;
            }
        }
    }
    let max_idf = idfs.values().copied().fold(1.0, f64::max);
    for (fragment, scored) in scores.iter_mut() {
        scored.reason.push(format!("bm25 {:.2}", scored.score));
        let number = *fragment as usize;
        let definition = &index.fragments[number];
        if !definition.kind.is_definition() {
            continue;
        }
        // Structure: a definition whose name is made of queried words, or named verbatim.
        let mut best: f64 = 0.0;
        let mut best_symbol = None;
        let mut best_evidence = (0.0, 0.0);
        for (symbol, parts) in definition.symbols.iter().zip(terms.symbol_parts(number)) {
            if parts.is_empty() {
                continue;
            }
            let matched: Vec<f64> = parts.iter().filter_map(|p| idfs.get(p).copied()).collect();
            let coverage = matched.len() as f64 / parts.len() as f64;
            // One matched word is weak evidence (`run`, `new`); two or more name the thing.
            let strength = (matched.len().min(2) as f64) / 2.0;
            let base = matched.iter().sum::<f64>() * coverage * strength;
            let mut boost = ranking.get(Feature::Definition) * base;
            let mut verbatim = 0.0;
            if query_identifiers.contains(&term_hash(symbol)) {
                boost += ranking.get(Feature::NamedSymbol) * max_idf;
                verbatim = max_idf;
            }
            if boost > best {
                best = boost;
                best_symbol = Some(symbol.as_str());
                best_evidence = (base, verbatim);
            }
        }
        if let Some(symbol) = best_symbol {
            scored.score += best;
            scored.evidence.definition += best_evidence.0;
            scored.evidence.named_symbol += best_evidence.1;
            scored.reason.push(format!("defines {symbol} +{best:.2}"));
        }
    }
    for (file, share) in named_files(index, query) {
        let unweighted = max_idf * share;
        let boost = unweighted * ranking.get(Feature::NamedFile);
        let path = &index.files[file].path;
        for fragment in index.files[file].fragments.clone() {
            let scored = scores.entry(fragment as u32).or_default();
            scored.score += boost;
            scored.evidence.named_file += unweighted;
            scored
                .reason
                .push(format!("in {path}, named in the query +{boost:.2}"));
        }
    }
    for (file, share) in module_files(index, query) {
        let unweighted = max_idf * share * MODULE_NAME_SHARE;
        let boost = unweighted * ranking.get(Feature::NamedFile);
        let path = &index.files[file].path;
        for fragment in index.files[file].fragments.clone() {
            let scored = scores.entry(fragment as u32).or_default();
            scored.score += boost;
            scored.evidence.named_file += unweighted;
            scored
                .reason
                .push(format!("{path} is a module the query names +{boost:.2}"));
        }
    }
    if super::version::names_release(query) {
        let boost = max_idf * ranking.get(Feature::NamedSymbol);
        for fragment in super::version::setting_fragments(index) {
            let scored = scores.entry(fragment as u32).or_default();
            scored.score += boost;
            scored.evidence.named_symbol += max_idf;
            scored
                .reason
                .push(format!("sets the version a release names +{boost:.2}"));
        }
    }
    for phrase in &phrases {
        let matched = fragments_containing(index, phrase);
        if matched.is_empty() || matched.len() > MAX_PHRASE_FRAGMENTS {
            continue;
        }
        let boost = PHRASE_WEIGHT * max_idf / (matched.len() as f64).sqrt();
        for fragment in matched {
            let scored = scores.entry(fragment).or_default();
            scored.score += boost;
            scored
                .reason
                .push(format!("holds the quoted text {phrase:?} +{boost:.2}"));
        }
    }
    graph_boost(index, &mut scores, ranking);
    if let Some(recent) = index.recent_changes() {
        recent_boost(index, recent, max_idf, &mut scores);
    }
    let prior = ranking.get(Feature::RecordPrior);
    // Classified once per file: a common word scores thousands of fragments of few files.
    let mut file_roles: HashMap<usize, Option<FileRole>> = HashMap::new();
    for (fragment, scored) in scores.iter_mut() {
        let f = &index.fragments[*fragment as usize];
        let path = index.path(f);
        let file_role = *file_roles.entry(f.file).or_insert_with(|| {
            // `None`: a changelog or licence, which has a prior of its own.
            (!is_record_file(path)).then(|| role_of(path))
        });
        let Some(file_role) = file_role else {
            // Records are documentation too: their prior applies on top of the docs prior, so
            // a changelog never outranks the README it would have ranked below.
            let docs = FileRole::Docs.prior();
            scored.score *= prior * docs;
            scored.evidence.record_file = true;
            scored
                .reason
                .push(format!("changelog or licence ×{prior}, docs ×{docs}"));
            continue;
        };
        let role = match file_role {
            FileRole::Source if is_test_code(path, index.text(f), f.context.as_deref()) => {
                FileRole::Test
            }
            role => role,
        };
        // Roles whose prior is 1 (source, tests) leave score and reason as they were.
        if role.prior() != 1.0 {
            let factor = role.prior();
            scored.score *= factor;
            scored.reason.push(format!("{} ×{factor}", role.as_str()));
        }
    }
    scores
}

/// Lift of a fragment the recent commits changed, relative to the query's rarest term: small
/// next to a named file or symbol, large next to a vague query's common words, which is when
/// recent history is the best evidence left. Only the changed fragments are lifted: lifting
/// every fragment of a changed file (tried at 0.2 and 0.5 of a changed fragment's lift) spent
/// the budget on the unchanged parts of large files.
const RECENT_WEIGHT: f64 = 0.5;

/// Lifts the fragments the tree's recent changes touched (see [`super::recent`]): a change asked
/// about lately is most often a follow-up of the changes before it.
fn recent_boost(
    index: &Index,
    recent: &super::recent::RecentChanges,
    max_idf: f64,
    scores: &mut HashMap<u32, Scored>,
) {
    let boost = RECENT_WEIGHT * max_idf;
    let reason = match recent.commits() {
        1 => format!("changed in the last commit +{boost:.2}"),
        n => format!("changed in the last {n} commits +{boost:.2}"),
    };
    for file in &index.files {
        for number in file.fragments.clone() {
            let f = &index.fragments[number];
            match recent.touches(&file.path, f.lines.0, f.lines.1) {
                None => break,
                Some(false) => {}
                Some(true) => {
                    let scored = scores.entry(number as u32).or_default();
                    scored.score += boost;
                    scored.reason.push(reason.clone());
                }
            }
        }
    }
}

/// Changelogs, licences and contributor lists: they name every feature and identifier of a
/// project (a changelog entry reads like the question) without defining any behaviour, so
/// their matches are weaker evidence than the same match in code or prose documentation.
pub fn is_record_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    let (stem, extension) = name.split_once('.').unwrap_or((name, ""));
    let stem = stem.to_ascii_uppercase();
    let prose = matches!(
        extension.to_ascii_lowercase().as_str(),
        "" | "md" | "rst" | "txt" | "markdown" | "adoc"
    );
    prose
        && (matches!(
            stem.as_str(),
            "LICENSE"
                | "LICENCE"
                | "COPYING"
                | "NOTICE"
                | "AUTHORS"
                | "CONTRIBUTORS"
                | "CHANGELOG"
                | "CHANGES"
                | "HISTORY"
                | "NEWS"
                | "RELEASES"
                | "RELEASE_NOTES"
        ) || stem.starts_with("LICENSE-"))
}

/// Files the query names: a word holding a `/` or ending in a file extension (`models.py`,
/// `src/walk.rs`) that equals an indexed path or ends one at a `/`. A query that names a file
/// asks about it, whatever its words score, so its fragments gain the weight of the query's
/// rarest term, shared among the files one name matches (`__init__.py` names many, weakly).
fn named_files(index: &Index, query: &str) -> Vec<(usize, f64)> {
    let mut out: HashMap<usize, f64> = HashMap::new();
    for raw in query.split_whitespace() {
        let quote = |c: char| {
            matches!(
                c,
                '`' | '\'' | '"' | '(' | ')' | '[' | ']' | '<' | '>' | ',' | ':' | ';'
            )
        };
        let name = raw
            .trim_end_matches(|c: char| quote(c) || matches!(c, '.' | '!' | '?'))
            .trim_start_matches(quote)
            .trim_start_matches("./");
        let extension = name.rsplit_once('.').is_some_and(|(stem, ext)| {
            !stem.is_empty()
                && (1..=5).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphanumeric())
                && ext.chars().any(|c| c.is_ascii_alphabetic())
        });
        if name.len() < 3 || !(name.contains('/') || extension) {
            continue;
        }
        let suffix = format!("/{name}");
        let matched: Vec<usize> = index
            .files
            .iter()
            .enumerate()
            .filter(|(_, f)| f.path == name || f.path.ends_with(&suffix))
            .map(|(i, _)| i)
            .collect();
        for &file in &matched {
            let share = 1.0 / matched.len() as f64;
            let slot = out.entry(file).or_insert(0.0);
            *slot = slot.max(share);
        }
    }
    let mut files: Vec<(usize, f64)> = out.into_iter().collect();
    files.sort_unstable_by_key(|f| f.0);
    files
}

/// A file named after a module the query mentions (`helpers.send_from_directory`, `filesystem:
/// fix …`) gains this share of a named file's boost: a bare word is weaker evidence than a
/// path, since it may be meant as plain English.
const MODULE_NAME_SHARE: f64 = 0.5;
/// File stems that name their directory's module rather than a module of their own.
const MODULE_ROOT_STEMS: &[&str] = &["mod", "__init__", "index", "lib", "main"];

/// Code files whose module name (the file stem, or the directory of a `mod.rs`/`__init__.py`)
/// is a word of the query of at least four letters, each with its share when one word names
/// several.
fn module_files(index: &Index, query: &str) -> Vec<(usize, f64)> {
    let asked: HashSet<String> = words(query)
        .filter(|w| w.len() >= 4 && !w.as_bytes()[0].is_ascii_digit())
        .map(str::to_ascii_lowercase)
        .filter(|w| !stopwords::is_code_search(w))
        .collect();
    if asked.is_empty() {
        return Vec::new();
    }
    let mut by_word: HashMap<String, Vec<usize>> = HashMap::new();
    for (number, file) in index.files.iter().enumerate() {
        if !file.language.is_code() {
            continue;
        }
        let mut parts = file.path.rsplit('/');
        let name = parts.next().unwrap_or_default();
        let stem = name.split_once('.').map_or(name, |(stem, _)| stem);
        let module = if MODULE_ROOT_STEMS.contains(&stem) {
            parts.next().unwrap_or(stem)
        } else {
            stem
        };
        let module = module.to_ascii_lowercase();
        if asked.contains(&module) {
            by_word.entry(module).or_default().push(number);
        }
    }
    let mut out: HashMap<usize, f64> = HashMap::new();
    for files in by_word.values() {
        for &file in files {
            let share = 1.0 / files.len() as f64;
            let slot = out.entry(file).or_insert(0.0);
            *slot = slot.max(share);
        }
    }
    let mut files: Vec<(usize, f64)> = out.into_iter().collect();
    files.sort_unstable_by_key(|f| f.0);
    files
}

/// A fragment holding text the query quotes verbatim gains this share of the query's largest
/// IDF, divided by the square root of the number of fragments holding it.
const PHRASE_WEIGHT: f64 = 1.0;
/// Quoted text found in more fragments than this points nowhere in particular.
const MAX_PHRASE_FRAGMENTS: usize = 20;

/// Fragments whose text holds `phrase` (exact bytes), ascending.
fn fragments_containing(index: &Index, phrase: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for file in &index.files {
        let mut last = None;
        for (offset, _) in file.text.match_indices(phrase) {
            let found = index.fragment_at(file, offset).map(|f| f as u32);
            if let Some(fragment) = found
                && last != Some(fragment)
            {
                out.push(fragment);
                last = Some(fragment);
            }
            if out.len() > MAX_PHRASE_FRAGMENTS {
                return out;
            }
        }
    }
    out.dedup();
    out
}

/// Query term hashes with their weights: the query's own terms at 1, and the other words of a
/// [`SYNONYMS`] group one of them belongs to at [`SYNONYM_WEIGHT`]. Sorted by hash.
fn synonym_weights(query_terms: &[u64], buffer: &mut String, synonym: f64) -> Vec<(u64, f64)> {
    let mut weights: HashMap<u64, f64> = query_terms.iter().map(|t| (*t, 1.0)).collect();
    for group in SYNONYMS {
        let members: Vec<Vec<u64>> = group
            .iter()
            .map(|member| {
                let mut parts = Vec::new();
                for word in words(member) {
                    for_each_part(word, buffer, |part| parts.push(term_hash(part)));
                }
                parts
            })
            .collect();
        let asked = members
            .iter()
            .any(|parts| parts.len() == 1 && query_terms.contains(&parts[0]));
        if !asked {
            continue;
        }
        for part in members.iter().flatten() {
            weights.entry(*part).or_insert(synonym);
        }
    }
    let mut weights: Vec<(u64, f64)> = weights.into_iter().collect();
    weights.sort_unstable_by_key(|w| w.0);
    weights
}

/// The best fragments lend score to their neighbours in the reference graph: what they use
/// (definitions of identifiers they mention), what uses them, and their own file.
fn graph_boost(index: &Index, scores: &mut HashMap<u32, Scored>, ranking: &RankingWeights) {
    const SEEDS: usize = 8;
    let terms = index.terms();
    let mut seeds: Vec<(u32, f64)> = scores.iter().map(|(f, s)| (*f, s.score)).collect();
    sort_by_score(index, &mut seeds);
    seeds.truncate(SEEDS);
    // target → (amount, why, link kind, lender's score): one link, the strongest, counts.
    let mut extra: HashMap<u32, (f64, String, Feature, f64)> = HashMap::new();
    let mut lend = |target: u32, kind: Feature, seed_score: f64, why: &dyn Fn() -> String| {
        let amount = ranking.get(kind) * seed_score;
        let slot = extra
            .entry(target)
            .or_insert((0.0, String::new(), kind, 0.0));
        if amount > slot.0 {
            *slot = (amount, why(), kind, seed_score);
        }
    };
    for &(seed, seed_score) in &seeds {
        let seed_fragment = &index.fragments[seed as usize];
        // Callers: fragments mentioning what the seed defines (unless it is everywhere).
        for symbol in &seed_fragment.symbols {
            if let Some(callers) = terms.mentioned_by.get(term_hash(symbol))
                && callers.len() <= 50
            {
                for &caller in callers {
                    if caller != seed {
                        lend(caller, Feature::Caller, seed_score, &|| {
                            format!("uses {symbol} from {}", seed_fragment.chunk_id)
                        });
                    }
                }
            }
        }
        // Callees: definitions of identifiers the seed mentions, when few fragments define them.
        for identifier in terms.mentions.get(seed as usize) {
            if let Some(definers) = terms.defined_by.get(*identifier)
                && definers.len() <= 3
            {
                for &definer in definers {
                    if definer != seed {
                        lend(definer, Feature::Callee, seed_score, &|| {
                            let name = index.fragments[definer as usize]
                                .symbols
                                .iter()
                                .find(|s| term_hash(s) == *identifier)
                                .map_or("it", String::as_str);
                            format!("defines {name} used by {}", seed_fragment.chunk_id)
                        });
                    }
                }
            }
        }
        // The seed's file: its header, imports and neighbours.
        let file = &index.files[seed_fragment.file];
        for other in file.fragments.clone() {
            let other = other as u32;
            if other != seed {
                lend(other, Feature::SameFile, seed_score, &|| {
                    format!("same file as {}", seed_fragment.chunk_id)
                });
            }
        }
    }
    for (target, (amount, why, kind, seed_score)) in extra {
        let scored = scores.entry(target).or_default();
        scored.score += amount;
        scored.reason.push(format!("{why} +{amount:.2}"));
        match kind {
            Feature::Caller => scored.evidence.caller += seed_score,
            Feature::Callee => scored.evidence.callee += seed_score,
            _ => scored.evidence.same_file += seed_score,
        }
    }
}

/// Best score first; ties by path, then offset.
pub fn sort_by_score(index: &Index, items: &mut [(u32, f64)]) {
    items.sort_by(|a, b| {
        b.1.total_cmp(&a.1).then_with(|| {
            let fa = &index.fragments[a.0 as usize];
            let fb = &index.fragments[b.0 as usize];
            index
                .path(fa)
                .cmp(index.path(fb))
                .then(fa.bytes.start.cmp(&fb.bytes.start))
        })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_split_and_stem() {
        let mut parts = Vec::new();
        identifier_parts("parseHTTPHeaders_v2", &mut parts);
        assert_eq!(parts, vec!["pars", "http", "header", "v2"]);
        parts.clear();
        for word in ["parsing", "parsed", "parses", "parse", "Parse", "libraries"] {
            identifier_parts(word, &mut parts);
        }
        assert_eq!(
            parts,
            vec!["pars", "pars", "pars", "pars", "pars", "library"]
        );
        assert_eq!(term_hash("Parse"), term_hash("parse"));
    }

    #[test]
    fn recent_changes_lift_the_changed_fragment_for_a_vague_query() {
        // Two functions the words "improve patch" match equally; the last commits changed the
        // second one. Without the lift the tie goes by path (a.py first).
        let body = |name: &str| format!("def {name}():\n    # improve the patch\n    return 1\n");
        let docs = vec![
            ("a.py".to_string(), body("first")),
            ("b.py".to_string(), format!("\n\n{}", body("second"))),
        ];
        let mut index = Index::from_documents(&docs);
        let best = |index: &Index| {
            let scores = score(index, "improve patch");
            let mut ranked: Vec<(u32, f64)> = scores.iter().map(|(f, s)| (*f, s.score)).collect();
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            let f = &index.fragments[ranked[0].0 as usize];
            (
                index.path(f).to_string(),
                scores[&ranked[0].0].reason.join("; "),
            )
        };
        assert_eq!(best(&index).0, "a.py");
        // b.py's lines 3-5 hold the function; a change on line 4 touches it, one on line 1 not.
        let changed = |line: usize| {
            super::super::recent::RecentChanges::from_files(
                HashMap::from([("b.py".to_string(), vec![(line, line)])]),
                10,
            )
        };
        index.set_recent_changes(changed(1));
        assert_eq!(
            best(&index).0,
            "a.py",
            "a change elsewhere in the file lifts nothing"
        );
        index.set_recent_changes(changed(4));
        let (path, reason) = best(&index);
        assert_eq!(path, "b.py");
        assert!(
            reason.contains("changed in the last 10 commits"),
            "{reason}"
        );
    }

    #[test]
    fn synonyms_meet_a_paraphrased_query_at_reduced_weight() {
        let docs = vec![
            (
                "src/search.cpp".to_string(),
                "// Returns the index of needle or -1.\nint binary_search_index(const std::vector<int> &sorted, int needle) {\n    return -1;\n}\n".to_string(),
            ),
            (
                "src/other.cpp".to_string(),
                "// Sum of a sorted list.\nint total(const std::vector<int> &sorted) {\n    return 0;\n}\n".to_string(),
            ),
        ];
        let index = Index::from_documents(&docs);
        let scores = score(
            &index,
            "find the position of a value in a sorted array by bisection",
        );
        let best = scores
            .iter()
            .max_by(|a, b| a.1.score.total_cmp(&b.1.score))
            .map(|(f, _)| index.fragments[*f as usize].symbols.clone())
            .expect("something scores");
        assert!(best.iter().any(|s| s == "binary_search_index"), "{best:?}");

        // The query's own words weigh 1, their synonyms half, unrelated words nothing.
        let mut buffer = String::new();
        let hash = |w: &str| {
            let mut parts = Vec::new();
            identifier_parts(w, &mut parts);
            term_hash(&parts[0])
        };
        let weights = synonym_weights(&[hash("position")], &mut buffer, SYNONYM_WEIGHT);
        let weight_of = |w: &str| weights.iter().find(|t| t.0 == hash(w)).map(|t| t.1);
        assert_eq!(weight_of("position"), Some(1.0));
        assert_eq!(weight_of("index"), Some(SYNONYM_WEIGHT));
        assert_eq!(weight_of("offset"), Some(SYNONYM_WEIGHT));
        assert_eq!(weight_of("search"), None);
    }

    #[test]
    fn a_file_named_in_the_query_lifts_its_fragments() {
        let docs = vec![
            (
                "src/walk.rs".to_string(),
                "fn walk() {\n    step();\n}\n".to_string(),
            ),
            (
                "src/exec.rs".to_string(),
                "fn run() {\n    walk_step();\n}\n".to_string(),
            ),
            ("tests/walk.rs".to_string(), "fn t() {}\n".to_string()),
        ];
        let index = Index::from_documents(&docs);
        let named = named_files(&index, "Update `src/walk.rs`.");
        assert_eq!(named, vec![(0, 1.0)]);
        // A bare file name matching two paths names both, at half weight each.
        let named = named_files(&index, "fix walk.rs please");
        assert_eq!(named, vec![(0, 0.5), (2, 0.5)]);
        // Words without a path separator or an extension name nothing; nor does a version.
        assert!(named_files(&index, "walk the tree in v1.2 e.g. run").is_empty());
        let scores = score(&index, "Update src/walk.rs");
        let reason = &scores[&0].reason;
        assert!(
            reason.iter().any(|r| r.contains("named in the query")),
            "{reason:?}"
        );
    }

    fn best_path(index: &Index, query: &str) -> String {
        let scores = score(index, query);
        let mut ranked: Vec<(u32, f64)> = scores.iter().map(|(f, s)| (*f, s.score)).collect();
        sort_by_score(index, &mut ranked);
        index
            .path(&index.fragments[ranked[0].0 as usize])
            .to_string()
    }

    /// Found when the docs prior (0.3) came in below the record prior (0.5): a question about
    /// installation got the changelog's lines before the README's section.
    #[test]
    fn a_changelog_never_outranks_the_readme_matching_the_same_words() {
        let text = "install the package with cargo install\n";
        let docs = vec![
            ("CHANGELOG.md".to_string(), format!("## 1.0\n\n{text}")),
            ("README.md".to_string(), format!("## Setup\n\n{text}")),
        ];
        let index = Index::from_documents(&docs);
        assert_eq!(best_path(&index, "install the package"), "README.md");
    }

    #[test]
    fn source_outranks_docs_config_and_lock_files_matching_the_same_words() {
        let text = "retry backoff jitter budget\n";
        let docs = vec![
            ("docs/retry.md".to_string(), format!("# Retry\n\n{text}")),
            (
                "pyproject.toml".to_string(),
                format!("[retry]\nnote = \"{text}\"\n"),
            ),
            ("uv.lock".to_string(), text.to_string()),
            (
                "src/pool.py".to_string(),
                format!("def pool():\n    # {text}    return 1\n"),
            ),
        ];
        let index = Index::from_documents(&docs);
        assert_eq!(
            best_path(&index, "retry backoff jitter budget"),
            "src/pool.py"
        );
        let scores = score(&index, "retry backoff jitter budget");
        let reasons: Vec<String> = scores.values().flat_map(|s| s.reason.clone()).collect();
        for role in ["docs ×", "config ×", "generated ×"] {
            assert!(
                reasons.iter().any(|r| r.starts_with(role)),
                "{role} {reasons:?}"
            );
        }
    }

    #[test]
    fn trailers_and_addresses_in_the_query_match_nothing() {
        let docs = vec![
            (
                "src/retry.py".to_string(),
                "def retry_loop(n):\n    return n\n".to_string(),
            ),
            (
                "src/meta.py".to_string(),
                "AUTHOR = 'Jane Roe <jane@roe.org>'\nURL = 'https://roe.org/x'\n".to_string(),
            ),
        ];
        let index = Index::from_documents(&docs);
        let scores = score(
            &index,
            "Fix retry loop (#4242)\n\nSee https://roe.org/x\n\nCo-authored-by: Jane Roe <jane@roe.org>",
        );
        assert!(
            scores
                .keys()
                .all(|f| index.path(&index.fragments[*f as usize]) == "src/retry.py"),
            "{scores:?}"
        );
    }

    #[test]
    fn quoted_text_is_matched_as_a_phrase() {
        let mut docs = vec![(
            "src/pool.py".to_string(),
            "def put(conn):\n    log.warning(\"Connection pool is full, discarding connection\")\n"
                .to_string(),
        )];
        // Files that hold the same words, more often, but not as the quoted phrase.
        for i in 0..4 {
            docs.push((
                format!("src/other_{i}.py"),
                format!("def full_{i}(pool, connection):\n    # the pool is full of connection objects; connection pool\n    return pool.connection\n"),
            ));
        }
        let index = Index::from_documents(&docs);
        let query = "Quiet the \"Connection pool is full\" warning";
        assert_eq!(best_path(&index, query), "src/pool.py");
        assert_eq!(
            fragments_containing(&index, "Connection pool is full").len(),
            1
        );
    }

    #[test]
    fn a_module_named_in_the_query_lifts_its_file() {
        let docs = vec![
            (
                "src/app/helpers.py".to_string(),
                "def send_file(path):\n    # fix the docstring typo\n    return open(path)\n"
                    .to_string(),
            ),
            (
                "src/app/views.py".to_string(),
                "def render(path):\n    # fix the docstring typo\n    return open(path)\n"
                    .to_string(),
            ),
            (
                "src/app/filesystem/__init__.py".to_string(),
                "def walk():\n    pass\n".to_string(),
            ),
        ];
        let index = Index::from_documents(&docs);
        assert_eq!(
            module_files(&index, "helpers: fix docstring typo"),
            vec![(0, 1.0)]
        );
        assert_eq!(module_files(&index, "filesystem: walk"), vec![(2, 1.0)]);
        assert_eq!(
            best_path(&index, "helpers: fix docstring typo"),
            "src/app/helpers.py"
        );
        let scores = score(&index, "helpers: fix docstring typo");
        assert!(
            scores[&0]
                .reason
                .iter()
                .any(|r| r.contains("is a module the query names")),
            "{:?}",
            scores[&0].reason
        );
    }

    #[test]
    fn a_release_number_lifts_the_line_that_sets_the_version() {
        let docs = vec![
            (
                "src/pkg/__init__.py".to_string(),
                "from .app import App\n\n__version__ = \"2.3.3.dev\"\n".to_string(),
            ),
            (
                "src/pkg/app.py".to_string(),
                "class App:\n    def release(self, version):\n        return version\n".to_string(),
            ),
        ];
        let index = Index::from_documents(&docs);
        for query in ["release version 2.3.3", "v2.3.3"] {
            assert_eq!(best_path(&index, query), "src/pkg/__init__.py", "{query}");
        }
        let scores = score(&index, "release version 2.3.3");
        let init = index.files[0].fragments.start as u32;
        assert!(
            scores[&init]
                .reason
                .iter()
                .any(|r| r.contains("sets the version a release names")),
            "{:?}",
            scores[&init].reason
        );
        // Without a release number the version line gets no lift.
        let plain = score(&index, "release version");
        assert!(
            plain
                .get(&init)
                .is_none_or(|s| !s.reason.iter().any(|r| r.contains("sets the version")))
        );
    }

    #[test]
    fn changelogs_and_licences_are_record_files() {
        for path in [
            "CHANGELOG.md",
            "docs/HISTORY.rst",
            "LICENSE",
            "LICENSE-MIT",
            "NEWS",
            "AUTHORS.txt",
        ] {
            assert!(is_record_file(path), "{path}");
        }
        for path in [
            "src/license.rs",
            "docs/history_of_x.md",
            "README.md",
            "news/feed.py",
        ] {
            assert!(!is_record_file(path), "{path}");
        }
    }
}
