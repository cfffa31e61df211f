//! Proof certificates: what was checked, against what, with which result, and what was done to
//! the output. Published as `schemas/witness-certificate.v1.json`; a test keeps the schema and
//! these types in step.

pub use crate::clock::rfc3339;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::claims::ClaimKind;
use super::profile::{Mode, Profile};
use super::rewrite::{Action, Rewritten, Suppression};
use super::verify::{Label, Reason, Verification};
use crate::digest;

/// Value of `schema_version` in every certificate.
pub const CERTIFICATE_SCHEMA_VERSION: &str = "svc.witness-certificate.v1";

/// The published certificate schema (JSON Schema draft 2020-12).
pub const SCHEMA_JSON: &str = include_str!("../../schemas/witness-certificate.v1.json");

/// Prefix of certificate ids.
pub const ID_PREFIX: &str = "wit_";

/// Overall result of a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CertificateStatus {
    /// At least one verifiable claim, and every verifiable claim supported.
    Supported,
    /// At least one verifiable claim unsupported or contradicted.
    Flagged,
    /// Nothing in the output could be checked.
    NoVerifiableClaims,
}

/// What one step of the proof did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    HashInputs,
    IndexEvidence,
    ExtractClaims,
    VerifyClaim,
    Nli,
    ApplyMode,
}

/// One step of the proof path, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProofStep {
    pub step: usize,
    pub kind: StepKind,
    pub detail: String,
}

/// The evidence the certificate rests on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextDigest {
    /// Where the evidence came from (a file path, `request`, ...).
    pub source: String,
    pub sha256: String,
    pub bytes: u64,
}

/// The output checked and the output returned.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputDigest {
    /// SHA-256 of the output as the model gave it.
    pub sha256: String,
    /// SHA-256 of the output as returned after the mode was applied.
    pub returned_sha256: String,
    pub bytes: u64,
    /// Whether the output is structured (JSON), which is never rewritten.
    pub structured: bool,
    pub rewritten: bool,
}

/// Claim counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimSummary {
    pub claims: usize,
    pub verifiable: usize,
    pub supported: usize,
    pub contradicted: usize,
    pub unsupported: usize,
    /// Fraction of verifiable claims not supported (0 when there are none).
    pub unsupported_claim_rate: f64,
}

/// A piece of evidence, by byte offsets in its source.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EvidenceSnippet {
    /// Referenced from claims as `e0`, `e1`, ...
    pub id: String,
    pub source: String,
    pub start: usize,
    pub end: usize,
    pub text: String,
}

/// One claim and its verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertifiedClaim {
    pub index: usize,
    pub kind: ClaimKind,
    pub text: String,
    /// Byte offsets in the original output.
    pub start: usize,
    pub end: usize,
    pub label: Label,
    pub score: f64,
    pub reasons: Vec<Reason>,
    /// Ids of the evidence snippets the verdict rests on.
    pub evidence: Vec<String>,
    /// Claim words found nowhere in the evidence.
    pub missing: Vec<String>,
}

/// A claim that was not supported, with what was done about it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlaggedClaim {
    pub claim_index: usize,
    pub text: String,
    pub label: Label,
    pub score: f64,
    pub reason: String,
    pub action: Action,
}

/// What the mode did to the output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SuppressionInfo {
    pub removed: usize,
    pub marked: usize,
    pub warned: usize,
    /// Why the output was left untouched although the mode would change it.
    pub untouched_because: Option<String>,
    pub items: Vec<Suppression>,
}

/// What the optional NLI pass did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NliStatus {
    /// Not enabled.
    Disabled,
    /// Enabled, but no claim was uncertain enough to ask.
    NotNeeded,
    /// The judge answered; its verdicts were applied.
    Applied,
    /// The judge failed (down, timeout, error status, bad reply); deterministic verdicts kept.
    Fallback,
}

/// The NLI record of a certificate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NliRecord {
    pub status: NliStatus,
    pub endpoint: Option<String>,
    pub model: Option<String>,
    /// Claims sent to the judge.
    pub claims_sent: usize,
    /// Claims whose label the judge changed.
    pub claims_changed: usize,
    pub latency_ms: Option<u64>,
    /// Why the judge was not used, on fallback.
    pub error: Option<String>,
}

impl NliRecord {
    pub fn disabled() -> Self {
        Self {
            status: NliStatus::Disabled,
            endpoint: None,
            model: None,
            claims_sent: 0,
            claims_changed: 0,
            latency_ms: None,
            error: None,
        }
    }
}

/// A proof certificate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Certificate {
    pub schema_version: String,
    pub id: String,
    /// RFC 3339, UTC: when the check started and finished.
    pub created_at: String,
    pub completed_at: String,
    pub duration_ms: f64,
    pub mode: Mode,
    pub profile: Profile,
    pub status: CertificateStatus,
    pub question: Option<String>,
    pub context: ContextDigest,
    pub output: OutputDigest,
    pub summary: ClaimSummary,
    pub proof_path: Vec<ProofStep>,
    pub claims: Vec<CertifiedClaim>,
    pub evidence: Vec<EvidenceSnippet>,
    pub flagged_claims: Vec<FlaggedClaim>,
    pub suppression: SuppressionInfo,
    pub nli: NliRecord,
}

/// Everything the certificate is built from.
pub struct CertificateInputs<'a> {
    pub context: &'a str,
    pub context_source: &'a str,
    pub output: &'a str,
    pub question: Option<&'a str>,
    pub mode: Mode,
    pub profile: Profile,
    pub verification: &'a Verification,
    pub rewritten: &'a Rewritten,
    pub nli: NliRecord,
    pub started: SystemTime,
    pub evidence_sentences: usize,
}

/// Build the certificate of one check.
pub fn build(inputs: CertificateInputs<'_>) -> Certificate {
    let finished = SystemTime::now();
    let verification = inputs.verification;
    let context_sha256 = digest::sha256_hex(inputs.context);
    let output_sha256 = digest::sha256_hex(inputs.output);
    let returned_sha256 = digest::sha256_hex(&inputs.rewritten.output);

    // Evidence snippets, shared between claims that rest on the same span.
    let mut evidence: Vec<EvidenceSnippet> = Vec::new();
    let mut claims = Vec::with_capacity(verification.claims.len());
    for verdict in &verification.claims {
        let mut ids = Vec::new();
        for span in &verdict.evidence {
            let existing = evidence
                .iter()
                .position(|e| e.start == span.start && e.end == span.end);
            let index = existing.unwrap_or_else(|| {
                evidence.push(EvidenceSnippet {
                    id: format!("e{}", evidence.len()),
                    source: inputs.context_source.to_string(),
                    start: span.start,
                    end: span.end,
                    text: span.text.clone(),
                });
                evidence.len() - 1
            });
            ids.push(evidence[index].id.clone());
        }
        claims.push(CertifiedClaim {
            index: verdict.claim.index,
            kind: verdict.claim.kind,
            text: verdict.claim.text.clone(),
            start: verdict.claim.start,
            end: verdict.claim.end,
            label: verdict.label,
            score: round4(verdict.score),
            reasons: verdict.reasons.clone(),
            evidence: ids,
            missing: verdict.missing.clone(),
        });
    }

    let count = |label: Label| {
        verification
            .claims
            .iter()
            .filter(|c| c.label == label)
            .count()
    };
    let summary = ClaimSummary {
        claims: verification.claims.len(),
        verifiable: verification.verifiable().count(),
        supported: count(Label::Supported),
        contradicted: count(Label::Contradicted),
        unsupported: count(Label::Unsupported),
        unsupported_claim_rate: round4(verification.unsupported_claim_rate()),
    };
    let status = if summary.verifiable == 0 {
        CertificateStatus::NoVerifiableClaims
    } else if summary.supported == summary.verifiable {
        CertificateStatus::Supported
    } else {
        CertificateStatus::Flagged
    };

    let suppressions = &inputs.rewritten.suppressions;
    let flagged_claims = suppressions
        .iter()
        .filter_map(|s| {
            let verdict = verification
                .claims
                .iter()
                .find(|c| c.claim.index == s.claim_index)?;
            Some(FlaggedClaim {
                claim_index: s.claim_index,
                text: verdict.claim.text.clone(),
                label: verdict.label,
                score: round4(verdict.score),
                reason: s.reason.clone(),
                action: s.action,
            })
        })
        .collect();
    let tally = |action: Action| suppressions.iter().filter(|s| s.action == action).count();
    let suppression = SuppressionInfo {
        removed: tally(Action::Removed),
        marked: tally(Action::Marked),
        warned: tally(Action::Warned),
        untouched_because: inputs.rewritten.untouched_because.clone(),
        items: suppressions.clone(),
    };

    let mut proof_path = Vec::new();
    let mut step = |kind: StepKind, detail: String| {
        proof_path.push(ProofStep {
            step: proof_path.len(),
            kind,
            detail,
        });
    };
    step(
        StepKind::HashInputs,
        format!(
            "context {} ({} bytes), output {} ({} bytes)",
            &context_sha256[..12],
            inputs.context.len(),
            &output_sha256[..12],
            inputs.output.len()
        ),
    );
    step(
        StepKind::IndexEvidence,
        format!(
            "{} evidence sentences from {}",
            inputs.evidence_sentences, inputs.context_source
        ),
    );
    step(
        StepKind::ExtractClaims,
        format!(
            "{} claims, {} verifiable{}",
            summary.claims,
            summary.verifiable,
            if inputs.question.is_some() {
                ", read against the question"
            } else {
                ""
            }
        ),
    );
    for claim in &claims {
        if claim.label == Label::NotVerifiable {
            continue;
        }
        step(
            StepKind::VerifyClaim,
            format!(
                "claim {}: {} (score {:.2}){}",
                claim.index,
                claim.label.as_str(),
                claim.score,
                if claim.evidence.is_empty() {
                    String::new()
                } else {
                    format!(", evidence {}", claim.evidence.join(" "))
                }
            ),
        );
    }
    step(
        StepKind::Nli,
        match inputs.nli.status {
            NliStatus::Disabled => "not enabled".to_string(),
            NliStatus::NotNeeded => "enabled; no claim was uncertain".to_string(),
            NliStatus::Applied => format!(
                "judged {} uncertain claims, changed {}",
                inputs.nli.claims_sent, inputs.nli.claims_changed
            ),
            NliStatus::Fallback => format!(
                "judge failed ({}); deterministic verdicts kept",
                inputs.nli.error.as_deref().unwrap_or("unknown error")
            ),
        },
    );
    step(
        StepKind::ApplyMode,
        format!(
            "mode {}, profile {}: {} removed, {} marked, {} warned{}",
            inputs.mode,
            inputs.profile,
            suppression.removed,
            suppression.marked,
            suppression.warned,
            suppression
                .untouched_because
                .as_deref()
                .map(|why| format!("; untouched: {why}"))
                .unwrap_or_default()
        ),
    );

    let created_at = rfc3339(inputs.started);
    let duration = finished
        .duration_since(inputs.started)
        .unwrap_or(Duration::ZERO);
    Certificate {
        schema_version: CERTIFICATE_SCHEMA_VERSION.to_string(),
        id: new_id(&context_sha256, &output_sha256, inputs.started),
        created_at,
        completed_at: rfc3339(finished),
        duration_ms: round4(duration.as_secs_f64() * 1000.0),
        mode: inputs.mode,
        profile: inputs.profile,
        status,
        question: inputs.question.map(str::to_string),
        context: ContextDigest {
            source: inputs.context_source.to_string(),
            sha256: context_sha256,
            bytes: inputs.context.len() as u64,
        },
        output: OutputDigest {
            rewritten: returned_sha256 != output_sha256,
            sha256: output_sha256,
            returned_sha256,
            bytes: inputs.output.len() as u64,
            structured: super::rewrite::is_structured(inputs.output),
        },
        summary,
        proof_path,
        claims,
        evidence,
        flagged_claims,
        suppression,
        nli: inputs.nli,
    }
}

/// Scores are rounded so certificates are stable across platforms' last-bit differences.
fn round4(x: f64) -> f64 {
    (x * 10_000.0).round() / 10_000.0
}

/// A fresh certificate id: `wit_` and 24 hex characters of a hash over the inputs, the time
/// and a process-wide counter, so two checks of the same answer get different ids.
fn new_id(context_sha256: &str, output_sha256: &str, at: SystemTime) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = at
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let seed = format!(
        "{context_sha256}:{output_sha256}:{nanos}:{}:{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    format!("{ID_PREFIX}{}", &digest::sha256_hex(seed)[..24])
}

/// Whether `id` has the shape of a certificate id.
pub fn is_id(id: &str) -> bool {
    id.strip_prefix(ID_PREFIX).is_some_and(|rest| {
        rest.len() == 24
            && rest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::witness::{WitnessInput, witness};
    use serde_json::Value;

    const CONTEXT: &str = "The Halden Observatory is on Mount Keld. It was founded in 1921 by \
        Ingrid Solberg. The observatory does not operate a radio telescope.";

    fn certificates() -> Vec<Certificate> {
        let outputs = [
            "The observatory was founded in 1921 by Ingrid Solberg.",
            "It was founded in 1912. It operates a radio telescope. Thanks!",
            "- Founded by Ingrid Solberg.\n- Located on Mount Keld.\n\n| year | 1921 |\n",
            "{\"founded\": 1912}",
            "Hope this helps!",
            "Per Anker",
        ];
        let mut out = Vec::new();
        for output in outputs {
            for mode in Mode::ALL {
                for profile in Profile::ALL {
                    out.push(
                        witness(&WitnessInput {
                            context: CONTEXT,
                            context_source: "fixtures/context.txt",
                            output,
                            question: (output == "Per Anker")
                                .then_some("Who founded the Halden Observatory?"),
                            mode,
                            profile,
                        })
                        .certificate,
                    );
                }
            }
        }
        // The NLI record's other states.
        let mut fallback = out[0].clone();
        fallback.nli = NliRecord {
            status: NliStatus::Fallback,
            endpoint: Some("http://127.0.0.1:9/v1".into()),
            model: Some("nli".into()),
            claims_sent: 1,
            claims_changed: 0,
            latency_ms: Some(3),
            error: Some("request failed".into()),
        };
        out.push(fallback);
        out
    }

    fn validator() -> jsonschema::Validator {
        let schema: Value = serde_json::from_str(SCHEMA_JSON).expect("schema is JSON");
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .build(&schema)
            .expect("schema compiles")
    }

    #[test]
    fn certificates_validate_against_the_published_schema() {
        let validator = validator();
        for certificate in certificates() {
            let value = serde_json::to_value(&certificate).expect("serialise");
            let errors: Vec<String> = validator
                .iter_errors(&value)
                .map(|e| e.to_string())
                .collect();
            assert!(errors.is_empty(), "{errors:?}\n{value:#}");
            let back: Certificate = serde_json::from_value(value).expect("round trip");
            assert_eq!(back, certificate);
        }
    }

    #[test]
    fn schema_rejects_broken_certificates() {
        let validator = validator();
        let good = serde_json::to_value(&certificates()[0]).expect("serialise");
        let mut bad_id = good.clone();
        bad_id["id"] = "ctx_123".into();
        assert!(!validator.is_valid(&bad_id));
        let mut extra = good.clone();
        extra["surprise"] = 1.into();
        assert!(!validator.is_valid(&extra));
        let mut bad_mode = good.clone();
        bad_mode["mode"] = "Strict".into();
        assert!(!validator.is_valid(&bad_mode));
        let mut bad_time = good;
        bad_time["created_at"] = "yesterday".into();
        assert!(!validator.is_valid(&bad_time));
    }

    /// The committed schema and the Rust types name exactly the same fields at every level, so
    /// neither can drift without this test failing.
    #[test]
    fn schema_fields_match_the_types() {
        let schema: Value = serde_json::from_str(SCHEMA_JSON).expect("schema is JSON");
        let mut seen_objects = 0;
        for certificate in certificates() {
            let value = serde_json::to_value(&certificate).expect("serialise");
            compare(&schema, &schema, &value, "", &mut seen_objects);
        }
        assert!(seen_objects > 100, "walked {seen_objects} objects");
    }

    fn resolve<'a>(root: &'a Value, node: &'a Value) -> &'a Value {
        match node.get("$ref").and_then(Value::as_str) {
            Some(reference) => {
                let pointer = reference.trim_start_matches('#');
                root.pointer(pointer).expect("$ref resolves")
            }
            None => node,
        }
    }

    fn compare(root: &Value, node: &Value, value: &Value, path: &str, seen: &mut usize) {
        let node = resolve(root, node);
        match value {
            Value::Object(map) => {
                *seen += 1;
                let properties = node
                    .get("properties")
                    .and_then(Value::as_object)
                    .unwrap_or_else(|| panic!("{path}: schema has no properties"));
                let mut want: Vec<&String> = properties.keys().collect();
                let mut got: Vec<&String> = map.keys().collect();
                want.sort();
                got.sort();
                assert_eq!(want, got, "fields differ at {path:?}");
                let mut required: Vec<&str> = node["required"]
                    .as_array()
                    .expect("required")
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                required.sort();
                let keys: Vec<&str> = got.iter().map(|k| k.as_str()).collect();
                assert_eq!(required, keys, "required differs at {path:?}");
                assert_eq!(node["additionalProperties"], false, "{path}");
                for (key, child) in map {
                    compare(
                        root,
                        &properties[key],
                        child,
                        &format!("{path}/{key}"),
                        seen,
                    );
                }
            }
            Value::Array(items) => {
                let schema_items = node
                    .get("items")
                    .unwrap_or_else(|| panic!("{path}: no items"));
                for (i, item) in items.iter().enumerate() {
                    compare(root, schema_items, item, &format!("{path}/{i}"), seen);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn ids_are_fresh_and_well_formed() {
        let now = SystemTime::now();
        let a = new_id("a", "b", now);
        let b = new_id("a", "b", now);
        assert_ne!(a, b);
        assert!(is_id(&a), "{a}");
        assert!(!is_id("wit_xyz"));
        assert!(!is_id("ctx_0123456789abcdef01234567"));
    }
}
