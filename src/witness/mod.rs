//! The witness: checks a model's answer against the evidence it was given, flags unsupported or
//! contradicted claims, applies the mode (audit, annotate, strict) under a profile, and records
//! a proof certificate.
//!
//! Verification is deterministic and local ([`verify`]); an optional NLI pass ([`nli`]) can
//! judge the claims the deterministic pass leaves uncertain, and falls back to the
//! deterministic verdicts on any failure.
//!
//! Entry points: [`verify::check`] (verdicts only, pure), [`witness`] (verdicts, rewritten
//! output and certificate), [`witness_with_nli`] (the same with the NLI judge), and
//! [`store::Store`] to persist certificates and feedback.

pub mod bench;
pub mod certificate;
pub mod claims;
pub mod cv;
pub mod devset;
pub mod eval;
pub mod features;
pub mod model;
pub mod nli;
pub mod profile;
mod question;
pub mod rewrite;
pub mod store;
pub mod text;
pub mod verify;

use std::time::SystemTime;

pub use certificate::Certificate;
pub use profile::{Mode, Profile};
pub use verify::{Label, Verification, check};

/// One check to run: the evidence, the model's output, and how to treat it.
#[derive(Debug, Clone, Copy)]
pub struct WitnessInput<'a> {
    /// The evidence the output must be supported by.
    pub context: &'a str,
    /// Where the evidence came from, recorded with every snippet (a path, `request`, ...).
    pub context_source: &'a str,
    /// The model's output.
    pub output: &'a str,
    /// The question, when known: short answers are read against it.
    pub question: Option<&'a str>,
    pub mode: Mode,
    pub profile: Profile,
}

/// The result of a check.
#[derive(Debug, Clone)]
pub struct Witnessed {
    /// The output to return: unchanged in audit mode or for structured output, marked in
    /// annotate mode, with flagged claims removed in strict mode.
    pub output: String,
    pub certificate: Certificate,
    pub verification: Verification,
}

/// Check `input` deterministically and build its certificate. Pure apart from the clock (the
/// certificate's id and timestamps).
pub fn witness(input: &WitnessInput<'_>) -> Witnessed {
    let started = SystemTime::now();
    let evidence = verify::Evidence::new(input.context);
    let verification = verify::check_with(&evidence, input.output, input.question, input.profile);
    finish(
        input,
        verification,
        certificate::NliRecord::disabled(),
        started,
        &evidence,
    )
}

/// As [`witness`], then ask the NLI judge about uncertain claims. Never fails: on any judge
/// failure the deterministic verdicts stay and the certificate records the fallback.
pub async fn witness_with_nli(input: &WitnessInput<'_>, settings: &nli::NliSettings) -> Witnessed {
    let started = SystemTime::now();
    let evidence = verify::Evidence::new(input.context);
    let mut verification =
        verify::check_with(&evidence, input.output, input.question, input.profile);
    let record = nli::refine(&mut verification, input.context, input.question, settings).await;
    finish(input, verification, record, started, &evidence)
}

fn finish(
    input: &WitnessInput<'_>,
    verification: Verification,
    nli: certificate::NliRecord,
    started: SystemTime,
    evidence: &verify::Evidence,
) -> Witnessed {
    let rewritten = rewrite::apply(input.output, &verification, input.mode, input.profile);
    let certificate = certificate::build(certificate::CertificateInputs {
        context: input.context,
        context_source: input.context_source,
        output: input.output,
        question: input.question,
        mode: input.mode,
        profile: input.profile,
        verification: &verification,
        rewritten: &rewritten,
        nli,
        started,
        evidence_sentences: evidence.sentence_count(),
    });
    Witnessed {
        output: rewritten.output,
        certificate,
        verification,
    }
}
