//! `svc demo`: a tour of svc on a built-in sample (a small order service, embedded in the
//! binary), with no network and no model: selection under a budget with byte-exact recovery,
//! log compression, the witness on a right and a wrong answer, and one proof-guided fixed-point
//! run whose model is the deterministic fixture reader. Every figure is measured on the spot;
//! nothing is precomputed. The commits and certificates go to the state directory given, so
//! the printed `svc context recover` and `svc witness show` commands work afterwards.

use std::path::Path;

use serde::Serialize;

use crate::context::commit::{CommitError, CommitStore, Resolution};
use crate::context::compress::{self, CompressError, CompressOptions, ContentKind};
use crate::context::index::Index;
use crate::context::select::{self, SelectError, SelectOptions};
use crate::harness::runner::fixture;
use crate::harness::workload::AnswerKind;
use crate::proof::{ContextRiskMode, FixedPointStatus, ProofError, VerifiedEfficiencyLayer};
use crate::tokens::Tokenizer;
use crate::witness::store::{Store, StoreError};
use crate::witness::{self, Mode, Profile, WitnessInput};

/// The sample project: `(path, text)`, embedded at build time. A checkout log is generated
/// beside them ([`checkout_log`], [`LOG_PATH`]).
pub const SAMPLE: [(&str, &str); 8] = [
    ("README.md", include_str!("sample/README.md")),
    ("src/cart.rs", include_str!("sample/src/cart.rs")),
    ("src/discount.rs", include_str!("sample/src/discount.rs")),
    ("src/inventory.rs", include_str!("sample/src/inventory.rs")),
    ("src/payment.rs", include_str!("sample/src/payment.rs")),
    ("src/shipping.rs", include_str!("sample/src/shipping.rs")),
    (
        "docs/architecture.md",
        include_str!("sample/docs/architecture.md"),
    ),
    ("docs/history.md", include_str!("sample/docs/history.md")),
];
/// Where the generated checkout log sits in the sample.
pub const LOG_PATH: &str = "logs/checkout.log";

/// The selection step's query and budget (over the sample's code and docs; the log is the
/// compression step's).
pub const SELECT_QUERY: &str = "where is the loyalty discount applied to the order total?";
pub const SELECT_BUDGET: usize = 600;
/// The compression step's budget.
pub const COMPRESS_BUDGET: usize = 250;
/// The fixed-point step's question, documents and budgets.
pub const PROOF_QUERY: &str = "When was the loyalty program introduced?";
pub const PROOF_BUDGET: usize = 40;
pub const PROOF_RECOVERY_BUDGET: usize = 200;

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error("demo selection: {0}")]
    Select(#[from] SelectError),
    #[error("demo commit: {0}")]
    Commit(#[from] CommitError),
    #[error("demo compression: {0}")]
    Compress(#[from] CompressError),
    #[error("demo witness store: {0}")]
    Store(#[from] StoreError),
    #[error("demo fixed-point run: {0}")]
    Proof(#[from] ProofError),
}

/// The sample checkout log: 600 requests, a slow provider in the middle, one declined card
/// and one timeout retried. Deterministic.
pub fn checkout_log() -> String {
    let mut log = String::new();
    for i in 0..600u32 {
        let (minute, second) = (i / 60, i % 60);
        let stamp = format!("2026-03-14T10:{minute:02}:{second:02}Z");
        let order = 41_000 + i;
        match i {
            240 => log.push_str(&format!(
                "{stamp} WARN payment order={order} provider timeout after 5000 ms; retrying with key order-{order} (attempt 2 of 4)\n"
            )),
            241 => log.push_str(&format!(
                "{stamp} INFO payment order={order} charged 4599 cents on attempt 2 (idempotency key order-{order})\n"
            )),
            377 => log.push_str(&format!(
                "{stamp} ERROR payment order={order} card declined: insufficient funds; reservation released\n"
            )),
            _ => log.push_str(&format!(
                "{stamp} INFO checkout order={order} items={} total={} cents reserved in {} ms\n",
                1 + i % 4,
                1_000 + (i * 37) % 9_000,
                3 + i % 7
            )),
        }
    }
    log
}

/// The sample files with the generated log.
pub fn documents() -> Vec<(String, String)> {
    SAMPLE
        .iter()
        .map(|(path, text)| (path.to_string(), text.to_string()))
        .chain([(LOG_PATH.to_string(), checkout_log())])
        .collect()
}

/// One fragment of a selection.
#[derive(Debug, Clone, Serialize)]
pub struct SentFragment {
    pub chunk_id: String,
    pub resolution: Resolution,
    pub tokens: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct SelectionStep {
    pub query: String,
    pub budget: usize,
    pub sample_files: usize,
    pub sample_tokens: usize,
    pub tokens: usize,
    /// 100 × (1 − tokens / sample_tokens).
    pub reduction_percent: f64,
    pub sent: Vec<SentFragment>,
    pub omitted: usize,
    pub ctx_id: String,
    /// An omitted chunk recovered from the commit, and whether its bytes equal the original's.
    pub recovered_chunk: String,
    pub recovered_bytes: usize,
    pub byte_exact: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct CompressionStep {
    pub source: String,
    pub kind: ContentKind,
    pub budget: usize,
    pub original_tokens: usize,
    pub tokens: usize,
    pub ratio: f64,
    pub elisions: usize,
    pub ctx_id: String,
    pub kept_error_line: bool,
    pub recovered_chunk: String,
    pub byte_exact: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct WitnessCheck {
    pub answer: String,
    pub status: String,
    pub verifiable: usize,
    pub supported: usize,
    pub contradicted: usize,
    pub unsupported: usize,
    pub certificate_id: String,
    /// The answer as strict mode returns it (flagged claims removed).
    pub strict_output: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct WitnessStep {
    pub evidence: String,
    pub checks: Vec<WitnessCheck>,
    /// Two runs of the same check gave the same verdicts (certificate ids and times aside).
    pub deterministic: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct ProofRound {
    pub round: usize,
    pub draft: String,
    pub verifiable_claims: usize,
    pub supported_claims: usize,
    pub decision: String,
    pub recovered: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct FixedPointStep {
    pub query: String,
    pub budget: usize,
    pub recovery_token_budget: usize,
    pub ctx_id: String,
    pub context_tokens: usize,
    pub status: FixedPointStatus,
    pub rounds: Vec<ProofRound>,
    pub recovery_tokens_used: usize,
    pub final_output: String,
}

/// Everything the tour measured.
#[derive(Debug, Clone, Serialize)]
pub struct DemoReport {
    pub selection: SelectionStep,
    pub compression: CompressionStep,
    pub witness: WitnessStep,
    pub fixed_point: FixedPointStep,
}

/// Runs the tour, keeping commits and certificates under `state_home`.
pub fn run(state_home: &Path) -> Result<DemoReport, DemoError> {
    let store = CommitStore::new(state_home);
    let tokenizer = Tokenizer::default();
    let documents = documents();
    let repository: Vec<(String, String)> = documents
        .iter()
        .filter(|(path, _)| path != LOG_PATH)
        .cloned()
        .collect();
    Ok(DemoReport {
        selection: selection(&repository, &store)?,
        compression: compression(&documents, &store, &tokenizer)?,
        witness: witness_step(state_home)?,
        fixed_point: fixed_point(state_home)?,
    })
}

fn selection(
    documents: &[(String, String)],
    store: &CommitStore,
) -> Result<SelectionStep, DemoError> {
    let index = Index::from_documents(documents);
    let options = SelectOptions::default();
    let selection = select::select(&index, SELECT_QUERY, SELECT_BUDGET, &options)?;
    let receipt = select::commit_selection(&index, &selection, &options, store)?;
    let sample_tokens = index.total_tokens();
    let sent: Vec<SentFragment> = selection
        .sent()
        .filter_map(|e| {
            e.resolution.map(|resolution| SentFragment {
                chunk_id: e.chunk_id.clone(),
                resolution,
                tokens: e.tokens,
            })
        })
        .collect();
    let omitted: Vec<_> = selection
        .manifest
        .iter()
        .filter(|e| e.resolution.is_none())
        .collect();
    // The best-scoring fragment left out, or any when none scored.
    let chunk = omitted
        .first()
        .map(|e| e.chunk_id.clone())
        .unwrap_or_else(|| selection.manifest[0].chunk_id.clone());
    let recovered = store.recover(&receipt.ctx_id, &chunk)?;
    let original = index
        .fragments
        .iter()
        .find(|f| f.chunk_id == chunk)
        .map(|f| index.text(f).to_string())
        .unwrap_or_default();
    Ok(SelectionStep {
        query: SELECT_QUERY.to_string(),
        budget: SELECT_BUDGET,
        sample_files: index.files.len(),
        sample_tokens,
        tokens: selection.tokens,
        reduction_percent: 100.0 * (1.0 - selection.tokens as f64 / sample_tokens.max(1) as f64),
        sent,
        omitted: omitted.len(),
        ctx_id: receipt.ctx_id,
        recovered_bytes: recovered.len(),
        byte_exact: recovered == original,
        recovered_chunk: chunk,
    })
}

fn compression(
    documents: &[(String, String)],
    store: &CommitStore,
    tokenizer: &Tokenizer,
) -> Result<CompressionStep, DemoError> {
    let (source, log) = documents
        .iter()
        .find(|(path, _)| path == LOG_PATH)
        .cloned()
        .unwrap_or_else(|| (LOG_PATH.to_string(), checkout_log()));
    let options = CompressOptions {
        kind: None,
        query: None,
        source: source.clone(),
    };
    let result = compress::compress(&log, COMPRESS_BUDGET, &options, store, tokenizer)?;
    // Recovering an elision gives back exactly the lines it stood for.
    let (recovered_chunk, byte_exact) = match result.elisions.first() {
        Some(elision) => {
            let text = store.recover(&result.ctx_id, &elision.chunk_id)?;
            (
                elision.chunk_id.clone(),
                !text.is_empty() && log.contains(&text),
            )
        }
        None => (String::new(), true),
    };
    Ok(CompressionStep {
        source,
        kind: result.kind,
        budget: COMPRESS_BUDGET,
        original_tokens: result.original_tokens,
        tokens: result.tokens,
        ratio: result.original_tokens as f64 / result.tokens.max(1) as f64,
        elisions: result.elisions.len(),
        kept_error_line: result.text.contains("card declined"),
        ctx_id: result.ctx_id,
        recovered_chunk,
        byte_exact,
    })
}

/// The evidence of the witness step: the history's payments and loyalty sections.
const WITNESS_EVIDENCE: &str = "The card payment module was rewritten in 2019 after a provider outage charged some customers twice. Since then every charge carries an idempotency key. The loyalty program was introduced in 2021. Customers earn the silver tier from 500 euros of yearly spending and the gold tier from 2000 euros.";
const WITNESS_ANSWERS: [&str; 2] = [
    "The payment module was rewritten in 2019 after a provider outage. The loyalty program was introduced in 2021.",
    "The payment module was rewritten in 2019 after a provider outage. The loyalty program was introduced in 2015 and the gold tier starts at 900 euros.",
];

fn witness_step(state_home: &Path) -> Result<WitnessStep, DemoError> {
    let store = Store::at(state_home.join("witness"));
    let mut checks = Vec::new();
    let mut deterministic = true;
    for answer in WITNESS_ANSWERS {
        let input = |mode| WitnessInput {
            context: WITNESS_EVIDENCE,
            context_source: "docs/history.md",
            output: answer,
            question: None,
            mode,
            profile: Profile::Rag,
        };
        let audit = witness::witness(&input(Mode::Audit));
        let again = witness::witness(&input(Mode::Audit));
        deterministic &= verdicts(&audit.certificate) == verdicts(&again.certificate);
        let strict = witness::witness(&input(Mode::Strict));
        store.save(&audit.certificate)?;
        let s = &audit.certificate.summary;
        checks.push(WitnessCheck {
            answer: answer.to_string(),
            status: serde_json::to_value(audit.certificate.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default(),
            verifiable: s.verifiable,
            supported: s.supported,
            contradicted: s.contradicted,
            unsupported: s.unsupported,
            certificate_id: audit.certificate.id.clone(),
            strict_output: strict.output,
        });
    }
    Ok(WitnessStep {
        evidence: WITNESS_EVIDENCE.to_string(),
        checks,
        deterministic,
    })
}

/// What a certificate says, without its id and clock fields.
fn verdicts(certificate: &witness::Certificate) -> String {
    let claims = serde_json::to_string(&certificate.claims).unwrap_or_default();
    let flagged = serde_json::to_string(&certificate.flagged_claims).unwrap_or_default();
    format!("{claims}\n{flagged}")
}

fn fixed_point(state_home: &Path) -> Result<FixedPointStep, DemoError> {
    let history: Vec<(String, String)> = SAMPLE
        .iter()
        .filter(|(path, _)| *path == "docs/history.md")
        .map(|(path, text)| (path.to_string(), text.to_string()))
        .collect();
    let layer =
        VerifiedEfficiencyLayer::new(state_home, ContextRiskMode::Strict).with_profile(Profile::Qa);
    let prepared = layer.prepare(&history, PROOF_QUERY, PROOF_BUDGET)?;
    let result = layer.run_fixed_point(
        &prepared,
        // The fixture reader: answers from the request's context only (committed prefix and
        // recovered evidence), deterministically, as `svc benchmark` does.
        |request| {
            Ok(fixture::answer(
                &request.full_context(),
                &request.query,
                AnswerKind::Span,
            ))
        },
        3,
        PROOF_RECOVERY_BUDGET,
        2,
    )?;
    Ok(FixedPointStep {
        query: PROOF_QUERY.to_string(),
        budget: PROOF_BUDGET,
        recovery_token_budget: PROOF_RECOVERY_BUDGET,
        ctx_id: result.ctx_id.clone(),
        context_tokens: prepared.context_tokens,
        status: result.status,
        rounds: result
            .rounds
            .iter()
            .map(|r| ProofRound {
                round: r.round,
                draft: r.output.clone(),
                verifiable_claims: r.verifiable_claims,
                supported_claims: r.supported_claims,
                decision: r.decision.clone(),
                recovered: r.recovered.iter().map(|c| c.chunk_id.clone()).collect(),
            })
            .collect(),
        recovery_tokens_used: result.recovery_tokens_used,
        final_output: result.final_output.output,
    })
}

#[cfg(test)]
mod tests;
