//! Selector settings of the `svc` condition: the context engine and the baselines a reviewer
//! asks for, so "what does svc add over plain retrieval" is a pair of runs.
//!
//! - `svc`: the context engine ([`super::condition::EngineSelector`]);
//! - `bm25-topk`: plain Okapi BM25 (k1 1.2, b 0.75) over the same fragments the engine
//!   indexes, no structure, no skeletons: fragments taken in rank order, each sent whole while
//!   it fits (a fragment that does not fit is skipped and the next one tried), rendered in
//!   document order as the engine renders, so the pair of runs measures selection and not the
//!   order the reader meets the text in;
//! - `random`: fragments in a seeded random order (seed = the run seed, the task id and the
//!   budget), sent whole while they fit, rendered in document order;
//! - `oracle-evidence`: the fragments holding gold evidence (an evidence span, or any fragment
//!   of a gold file for code tasks), in document order, while they fit: an upper bound on what
//!   selection alone can give, not a method.
//!
//! Every setting runs inside the `svc` condition, so its records carry a `ctx_` commit of
//! every fragment (sent or omitted); the run's manifest names the setting (`selector`).

use std::collections::HashMap;
use std::sync::Arc;

use super::condition::{ContextSelector, EngineSelector, SelectedContext};
use super::text::{self, SplitMix64};
use super::workload::{AnswerKind, Task};
use crate::context::index::{Index, PieceKind};
use crate::context::terms;
use crate::context::{ChunkInput, Resolution};
use crate::digest;
use crate::tokens::Tokenizer;

/// The closed set of selector settings, by their wire names (manifest `selector`).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
#[value(rename_all = "kebab-case")]
pub enum SelectorName {
    #[default]
    Svc,
    Bm25Topk,
    Random,
    OracleEvidence,
}

impl SelectorName {
    pub const ALL: [SelectorName; 4] = [
        SelectorName::Svc,
        SelectorName::Bm25Topk,
        SelectorName::Random,
        SelectorName::OracleEvidence,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            SelectorName::Svc => "svc",
            SelectorName::Bm25Topk => "bm25-topk",
            SelectorName::Random => "random",
            SelectorName::OracleEvidence => "oracle-evidence",
        }
    }
}

impl std::fmt::Display for SelectorName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The selector of a setting; `seed` drives `random` (the run seed).
pub fn build(name: SelectorName, seed: u64) -> Arc<dyn ContextSelector> {
    match name {
        SelectorName::Svc => Arc::new(EngineSelector::default()),
        SelectorName::Bm25Topk => Arc::new(Bm25TopK),
        SelectorName::Random => Arc::new(RandomSelector { seed }),
        SelectorName::OracleEvidence => Arc::new(OracleEvidence),
    }
}

/// Plain BM25 top-k (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct Bm25TopK;

/// A seeded random selection (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct RandomSelector {
    pub seed: u64,
}

/// The gold-evidence oracle (see the module docs).
#[derive(Debug, Clone, Copy, Default)]
pub struct OracleEvidence;

impl ContextSelector for Bm25TopK {
    fn select(
        &self,
        docs: &[(String, String)],
        query: &str,
        budget: usize,
    ) -> Result<SelectedContext, String> {
        let index = Index::from_documents(docs);
        let scores = bm25_scores(&index, query);
        let mut order: Vec<usize> = (0..index.fragments.len())
            .filter(|&f| scores[f] > 0.0)
            .collect();
        // Best first; ties in document order so the ranking is deterministic.
        order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
        Ok(fill(&index, &order, budget))
    }

    fn name(&self) -> &'static str {
        SelectorName::Bm25Topk.as_str()
    }
}

impl ContextSelector for RandomSelector {
    fn select(
        &self,
        docs: &[(String, String)],
        query: &str,
        budget: usize,
    ) -> Result<SelectedContext, String> {
        let index = Index::from_documents(docs);
        let mut order: Vec<usize> = (0..index.fragments.len()).collect();
        let material = format!("{}|{query}|{budget}", self.seed);
        let seed = u64::from_str_radix(&digest::sha256_hex(material)[..16], 16).unwrap_or(0);
        SplitMix64::new(seed).shuffle(&mut order);
        Ok(fill(&index, &order, budget))
    }

    fn select_for(
        &self,
        docs: &[(String, String)],
        task: &Task,
        budget: usize,
    ) -> Result<SelectedContext, String> {
        // The task id joins the seed so two tasks with one question still draw apart.
        self.select(docs, &format!("{}|{}", task.id, task.question), budget)
    }

    fn name(&self) -> &'static str {
        SelectorName::Random.as_str()
    }
}

impl ContextSelector for OracleEvidence {
    fn select(&self, _: &[(String, String)], _: &str, _: usize) -> Result<SelectedContext, String> {
        Err("the oracle-evidence selector needs the task's gold evidence".into())
    }

    fn select_for(
        &self,
        docs: &[(String, String)],
        task: &Task,
        budget: usize,
    ) -> Result<SelectedContext, String> {
        let index = Index::from_documents(docs);
        let spans: Vec<String> = task
            .evidence
            .iter()
            .map(|span| text::collapse_whitespace(span))
            .filter(|span| !span.is_empty())
            .collect();
        let order: Vec<usize> = index
            .fragments
            .iter()
            .enumerate()
            .filter(|(_, fragment)| {
                if task.answer_kind == AnswerKind::Files {
                    let path = index.path(fragment);
                    return task.gold_files.iter().any(|gold| gold == path);
                }
                let body = text::collapse_whitespace(index.text(fragment));
                // A fragment holds evidence when it contains a span, or is itself part of a
                // span that crosses fragments.
                !body.is_empty()
                    && spans
                        .iter()
                        .any(|span| body.contains(span.as_str()) || span.contains(&body))
            })
            .map(|(i, _)| i)
            .collect();
        Ok(fill(&index, &order, budget))
    }

    fn name(&self) -> &'static str {
        SelectorName::OracleEvidence.as_str()
    }
}

/// Terms of a text as the context engine splits them (identifier parts, lower-cased, stemmed).
fn terms_of(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in terms::words(text) {
        terms::identifier_parts(word, &mut out);
    }
    out
}

/// Okapi BM25 of every fragment for `query` (0 for fragments sharing no query term).
pub fn bm25_scores(index: &Index, query: &str) -> Vec<f64> {
    const K1: f64 = 1.2;
    const B: f64 = 0.75;
    let mut query_terms = terms_of(query);
    query_terms.retain(|t| !text::is_stop_word(t));
    query_terms.sort();
    query_terms.dedup();
    let documents: Vec<HashMap<&str, usize>> = index
        .fragments
        .iter()
        .map(|fragment| {
            let mut counts: HashMap<&str, usize> = HashMap::new();
            for term in terms_of(index.text(fragment)) {
                if let Some(query_term) = query_terms.iter().find(|q| **q == term) {
                    *counts.entry(query_term.as_str()).or_default() += 1;
                }
            }
            counts
        })
        .collect();
    let lengths: Vec<f64> = index
        .fragments
        .iter()
        .map(|f| terms::words(index.text(f)).count() as f64)
        .collect();
    let n = index.fragments.len().max(1) as f64;
    let average = (lengths.iter().sum::<f64>() / n).max(1.0);
    let idf: HashMap<&str, f64> = query_terms
        .iter()
        .map(|term| {
            let df = documents
                .iter()
                .filter(|d| d.contains_key(term.as_str()))
                .count() as f64;
            (term.as_str(), ((n - df + 0.5) / (df + 0.5) + 1.0).ln())
        })
        .collect();
    documents
        .iter()
        .zip(&lengths)
        .map(|(counts, &length)| {
            counts
                .iter()
                .map(|(term, &tf)| {
                    let tf = tf as f64;
                    idf[term] * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * length / average))
                })
                .sum()
        })
        .collect()
}

/// Sends the fragments of `order` whole while they fit `budget` (skipping those that do not),
/// rendered in path and offset order; every fragment is
/// a chunk of the commit, the unsent ones omitted.
fn fill(index: &Index, order: &[usize], budget: usize) -> SelectedContext {
    let tokenizer = Tokenizer::new(index.encoding);
    let cost = |f: usize| {
        let fragment = &index.fragments[f];
        fragment.header_tokens
            + fragment.text_tokens
            + usize::from(!index.text(fragment).ends_with('\n'))
    };
    let mut chosen: Vec<usize> = Vec::new();
    let mut used = 0usize;
    for &f in order {
        let c = cost(f);
        if used + c <= budget {
            chosen.push(f);
            used += c;
        }
    }
    let render = |chosen: &[usize]| -> String {
        let mut pieces: Vec<usize> = chosen.to_vec();
        // Fragments are stored in path and offset order.
        pieces.sort_unstable();
        let mut rendered = String::new();
        // Adjacent fragments of one file continue one verbatim block under the first one's
        // header, as the engine renders them, so a whole file sent is a whole file quoted.
        let mut previous: Option<(usize, usize)> = None;
        for &f in &pieces {
            let fragment = &index.fragments[f];
            if previous == Some((fragment.file, fragment.bytes.start)) {
                let text = index.text(fragment);
                rendered.push_str(text);
                if !text.ends_with('\n') {
                    rendered.push('\n');
                }
            } else if let Some(piece) = index.piece(fragment, PieceKind::Full) {
                rendered.push_str(&piece);
            }
            previous = Some((fragment.file, fragment.bytes.end));
        }
        rendered
    };
    // Tokens merge across piece joins, so the estimate can undershoot: drop the last chosen
    // (the weakest in `order`) until the real count fits.
    let (rendered, tokens) = loop {
        let rendered = render(&chosen);
        let tokens = tokenizer.count(&rendered);
        if tokens <= budget || chosen.is_empty() {
            break (rendered, tokens);
        }
        chosen.pop();
    };
    let sent: HashMap<usize, usize> = chosen.iter().map(|&f| (f, cost(f))).collect();
    let chunks = index
        .fragments
        .iter()
        .enumerate()
        .map(|(i, fragment)| ChunkInput {
            chunk_id: fragment.chunk_id.clone(),
            source: index.path(fragment).to_string(),
            full_text: index.text(fragment).to_string(),
            resolution: sent.contains_key(&i).then_some(Resolution::Full),
            sent_tokens: sent.get(&i).copied().unwrap_or(0),
            full_tokens: Some((index.encoding, fragment.text_tokens)),
        })
        .collect();
    SelectedContext {
        rendered,
        tokens,
        chunks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::workload::TaskContext;

    fn docs() -> Vec<(String, String)> {
        let mut docs: Vec<(String, String)> = (0..30)
            .map(|i| {
                (
                    format!("doc-{i:02}.md"),
                    format!(
                        "# Town {i}\n\nThe ferry of town {i} leaves at {i} o'clock. The market opens on Tuesday.\n"
                    ),
                )
            })
            .collect();
        docs.push((
            "keeper.md".into(),
            "# Varnholm\n\nThe lighthouse keeper of Varnholm is Ingrid Sollie.\n".into(),
        ));
        docs
    }

    fn task() -> Task {
        Task {
            id: "t1".into(),
            question: "Who is the lighthouse keeper of Varnholm?".into(),
            context: TaskContext::Documents(Vec::new()),
            answer_kind: AnswerKind::Span,
            answers: vec!["Ingrid Sollie".into()],
            evidence: vec!["The lighthouse keeper of Varnholm is Ingrid Sollie.".into()],
            gold_files: Vec::new(),
        }
    }

    #[test]
    fn names_round_trip() {
        for name in SelectorName::ALL {
            let json = serde_json::to_string(&name).expect("json");
            assert_eq!(json, format!("\"{}\"", name.as_str()));
            assert_eq!(build(name, 0).name(), name.as_str());
        }
    }

    #[test]
    fn bm25_ranks_the_matching_fragment_first_and_fits_the_budget() {
        let docs = docs();
        let selected = Bm25TopK
            .select(&docs, "lighthouse keeper Varnholm", 40)
            .expect("select");
        assert!(selected.tokens <= 40, "{}", selected.tokens);
        assert!(
            selected.rendered.contains(">>> keeper.md"),
            "{}",
            selected.rendered
        );
        assert!(selected.rendered.contains("Ingrid Sollie"));
        let sent = selected
            .chunks
            .iter()
            .filter(|c| c.resolution.is_some())
            .count();
        assert!(sent >= 1 && selected.chunks.len() > sent);
        let index = Index::from_documents(&docs);
        let scores = bm25_scores(&index, "ferry market");
        assert!(scores.iter().filter(|s| **s > 0.0).count() >= 30);
        assert!(bm25_scores(&index, "zeppelin").iter().all(|s| *s == 0.0));
    }

    #[test]
    fn random_is_seeded_and_oracle_sends_the_evidence() {
        let docs = docs();
        let task = task();
        let a = RandomSelector { seed: 1 }
            .select_for(&docs, &task, 80)
            .expect("random");
        let b = RandomSelector { seed: 1 }
            .select_for(&docs, &task, 80)
            .expect("random");
        let c = RandomSelector { seed: 2 }
            .select_for(&docs, &task, 80)
            .expect("random");
        assert_eq!(a.rendered, b.rendered, "same seed, same draw");
        assert_ne!(a.rendered, c.rendered, "another seed, another draw");
        assert!(a.tokens <= 80);
        let oracle = OracleEvidence.select_for(&docs, &task, 80).expect("oracle");
        assert!(oracle.rendered.contains("Ingrid Sollie"));
        assert!(!oracle.rendered.contains("ferry"), "{}", oracle.rendered);
        assert!(OracleEvidence.select(&docs, "q", 80).is_err());
        let mut files = task.clone();
        files.answer_kind = AnswerKind::Files;
        files.gold_files = vec!["doc-03.md".into()];
        let oracle = OracleEvidence
            .select_for(&docs, &files, 400)
            .expect("oracle");
        assert!(
            oracle.rendered.contains("town 3 leaves"),
            "{}",
            oracle.rendered
        );
        assert!(!oracle.rendered.contains("Varnholm"));
        // A whole gold file sent is quoted whole (one block), so its evidence is recalled.
        let file = &docs[3].1;
        assert_eq!(
            crate::harness::scorer::evidence_recall(&oracle.rendered, std::slice::from_ref(file)),
            1.0,
            "{}",
            oracle.rendered
        );
    }
}
