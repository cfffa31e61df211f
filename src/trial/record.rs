//! The trial record type. Deserialising a [`TrialRecord`] enforces every rule of the schema
//! (field types, enums, regexes, bounds and the three cross-field rules) and rejects unknown
//! fields, so a value of this type is always a schema-valid record. The integrity rule
//! (`response_sha256` matches `response_text`) is separate: see [`TrialRecord::integrity_error`].

use serde::{Deserialize, Serialize};

use crate::digest;

/// The constant `schema_version` of every record.
pub const SCHEMA_VERSION: &str = "svc.context-efficiency-trial.v1";

/// Where the token counts of a trial come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum UsageSource {
    ProviderResponse,
    ProviderLog,
    ProviderLedger,
    ProviderError,
    RunnerError,
    DeterministicFixture,
}

/// Where `billed_cost_usd` comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum CostSource {
    ProviderInvoice,
    ProviderLedger,
    PricingSnapshot,
    SelfHostedNoApiFee,
    ZeroCostFixture,
}

/// Whether a trial produced a response.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum Outcome {
    Success,
    Error,
}

/// How the context of a trial was shaped.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
#[value(rename_all = "snake_case")]
pub enum Condition {
    Raw,
    NativeCompaction,
    Svc,
    Combined,
}

impl Condition {
    pub const ALL: [Condition; 4] = [
        Condition::Raw,
        Condition::NativeCompaction,
        Condition::Svc,
        Condition::Combined,
    ];

    /// The wire name (`raw`, `native_compaction`, `svc`, `combined`).
    pub fn as_str(self) -> &'static str {
        match self {
            Condition::Raw => "raw",
            Condition::NativeCompaction => "native_compaction",
            Condition::Svc => "svc",
            Condition::Combined => "combined",
        }
    }
}

impl std::fmt::Display for Condition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One task trial of a paired context-efficiency experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "unchecked::TrialRecord")]
pub struct TrialRecord {
    pub schema_version: String,
    pub workload: String,
    pub workload_version: String,
    pub task_id: String,
    pub provider: String,
    pub model: String,
    pub provider_request_id: String,
    pub usage_source: UsageSource,
    pub cost_source: CostSource,
    pub cost_source_reference: String,
    pub outcome: Outcome,
    pub error_type: Option<String>,
    pub context_sha256: String,
    pub response_text: Option<String>,
    pub response_sha256: Option<String>,
    pub replicate: u64,
    pub condition: Condition,
    pub scorer: String,
    pub task_score: f64,
    pub evidence_recall: f64,
    pub unsupported_claim_rate: f64,
    pub context_tokens: u64,
    pub reasoning_tokens: u64,
    pub output_tokens: u64,
    pub billed_cost_usd: f64,
    pub latency_ms: f64,
    pub context_commit_id: Option<String>,
}

/// A violated record rule, as found by the type's own checks.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{field}: {rule}")]
pub struct RuleViolation {
    pub field: &'static str,
    pub rule: String,
}

mod unchecked {
    use super::*;

    /// The wire shape with types only; [`super::TrialRecord`] adds the value rules.
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct TrialRecord {
        pub schema_version: String,
        pub workload: String,
        pub workload_version: String,
        pub task_id: String,
        pub provider: String,
        pub model: String,
        pub provider_request_id: String,
        pub usage_source: UsageSource,
        pub cost_source: CostSource,
        pub cost_source_reference: String,
        pub outcome: Outcome,
        // `Option` fields are still required: a missing key is an error, not a null.
        #[serde(deserialize_with = "required_nullable")]
        pub error_type: Option<String>,
        pub context_sha256: String,
        #[serde(deserialize_with = "required_nullable")]
        pub response_text: Option<String>,
        #[serde(deserialize_with = "required_nullable")]
        pub response_sha256: Option<String>,
        #[serde(deserialize_with = "integral")]
        pub replicate: u64,
        pub condition: Condition,
        pub scorer: String,
        pub task_score: f64,
        pub evidence_recall: f64,
        pub unsupported_claim_rate: f64,
        #[serde(deserialize_with = "integral")]
        pub context_tokens: u64,
        #[serde(deserialize_with = "integral")]
        pub reasoning_tokens: u64,
        #[serde(deserialize_with = "integral")]
        pub output_tokens: u64,
        pub billed_cost_usd: f64,
        pub latency_ms: f64,
        #[serde(deserialize_with = "required_nullable")]
        pub context_commit_id: Option<String>,
    }

    /// JSON Schema counts `412.0` as an integer, and many JSON writers produce it: an integral
    /// number is accepted wherever the record wants a count, so every reader agrees with the
    /// schema. A fraction, a negative or a count beyond 64 bits is refused.
    fn integral<'de, D>(deserializer: D) -> Result<u64, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        struct Integral;
        impl serde::de::Visitor<'_> for Integral {
            type Value = u64;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a non-negative integer")
            }
            fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<u64, E> {
                Ok(value)
            }
            fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<u64, E> {
                u64::try_from(value).map_err(|_| E::custom(format!("{value} is negative")))
            }
            fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<u64, E> {
                // 2^64 is exactly representable; every integral f64 below it fits in a u64.
                const LIMIT: f64 = 18_446_744_073_709_551_616.0;
                if value.fract() != 0.0 || !value.is_finite() {
                    Err(E::custom(format!("{value} is not an integer")))
                } else if value < 0.0 {
                    Err(E::custom(format!("{value} is negative")))
                } else if value >= LIMIT {
                    // The value itself is not shown: read as a float, its digits are rounded.
                    Err(E::custom(
                        "a count beyond 64 bits (the largest is 18446744073709551615)",
                    ))
                } else {
                    // Integral and in range, so the conversion is exact.
                    Ok(value as u64)
                }
            }
        }
        deserializer.deserialize_any(Integral)
    }

    fn required_nullable<'de, D>(deserializer: D) -> Result<Option<String>, D::Error>
    where
        D: serde::Deserializer<'de>,
    {
        Option::<String>::deserialize(deserializer)
    }
}

impl TryFrom<unchecked::TrialRecord> for TrialRecord {
    type Error = RuleViolation;

    fn try_from(raw: unchecked::TrialRecord) -> Result<Self, Self::Error> {
        let record = TrialRecord {
            schema_version: raw.schema_version,
            workload: raw.workload,
            workload_version: raw.workload_version,
            task_id: raw.task_id,
            provider: raw.provider,
            model: raw.model,
            provider_request_id: raw.provider_request_id,
            usage_source: raw.usage_source,
            cost_source: raw.cost_source,
            cost_source_reference: raw.cost_source_reference,
            outcome: raw.outcome,
            error_type: raw.error_type,
            context_sha256: raw.context_sha256,
            response_text: raw.response_text,
            response_sha256: raw.response_sha256,
            replicate: raw.replicate,
            condition: raw.condition,
            scorer: raw.scorer,
            task_score: raw.task_score,
            evidence_recall: raw.evidence_recall,
            unsupported_claim_rate: raw.unsupported_claim_rate,
            context_tokens: raw.context_tokens,
            reasoning_tokens: raw.reasoning_tokens,
            output_tokens: raw.output_tokens,
            billed_cost_usd: raw.billed_cost_usd,
            latency_ms: raw.latency_ms,
            context_commit_id: raw.context_commit_id,
        };
        match record.violations().into_iter().next() {
            Some(violation) => Err(violation),
            None => Ok(record),
        }
    }
}

fn violation(field: &'static str, rule: impl Into<String>) -> RuleViolation {
    RuleViolation {
        field,
        rule: rule.into(),
    }
}

impl TrialRecord {
    /// Every schema rule this record breaks (empty for a valid record). Records built in code
    /// are checked with this before they are written.
    pub fn violations(&self) -> Vec<RuleViolation> {
        let mut out = Vec::new();
        if self.schema_version != SCHEMA_VERSION {
            out.push(violation(
                "schema_version",
                format!("must be {SCHEMA_VERSION}"),
            ));
        }
        for (field, value) in [
            ("workload", &self.workload),
            ("workload_version", &self.workload_version),
            ("task_id", &self.task_id),
            ("provider", &self.provider),
            ("model", &self.model),
            ("provider_request_id", &self.provider_request_id),
            ("cost_source_reference", &self.cost_source_reference),
            ("scorer", &self.scorer),
        ] {
            if value.is_empty() {
                out.push(violation(field, "must not be empty"));
            }
        }
        if !digest::is_sha256_hex(&self.context_sha256) {
            out.push(violation("context_sha256", "must match ^[0-9a-f]{64}$"));
        }
        if let Some(hash) = &self.response_sha256
            && !digest::is_sha256_hex(hash)
        {
            out.push(violation("response_sha256", "must match ^[0-9a-f]{64}$"));
        }
        for (field, value) in [
            ("task_score", self.task_score),
            ("evidence_recall", self.evidence_recall),
            ("unsupported_claim_rate", self.unsupported_claim_rate),
        ] {
            if !(0.0..=1.0).contains(&value) {
                out.push(violation(field, "must be between 0 and 1 inclusive"));
            }
        }
        for (field, value) in [
            ("billed_cost_usd", self.billed_cost_usd),
            ("latency_ms", self.latency_ms),
        ] {
            if value < 0.0 || value.is_nan() {
                out.push(violation(field, "must be >= 0"));
            }
        }
        if let Some(id) = &self.context_commit_id
            && !id.starts_with("ctx_")
        {
            out.push(violation("context_commit_id", "must match ^ctx_"));
        }
        if matches!(self.condition, Condition::Svc | Condition::Combined)
            && self.context_commit_id.is_none()
        {
            out.push(violation(
                "context_commit_id",
                "cross-field rule 1: must be a ctx_ id when condition is svc or combined",
            ));
        }
        match self.outcome {
            Outcome::Success => {
                if self.context_tokens < 1 {
                    out.push(violation(
                        "context_tokens",
                        "cross-field rule 2: must be >= 1 when outcome is success",
                    ));
                }
                if self.error_type.is_some() {
                    out.push(violation(
                        "error_type",
                        "cross-field rule 2: must be null when outcome is success",
                    ));
                }
                if self.response_text.is_none() {
                    out.push(violation(
                        "response_text",
                        "cross-field rule 2: must be a string when outcome is success",
                    ));
                }
                if self.response_sha256.is_none() {
                    out.push(violation(
                        "response_sha256",
                        "cross-field rule 2: must be a 64-hex string when outcome is success",
                    ));
                }
            }
            Outcome::Error => {
                if self.error_type.as_deref().is_none_or(str::is_empty) {
                    out.push(violation(
                        "error_type",
                        "cross-field rule 3: must be a non-empty string when outcome is error",
                    ));
                }
                if self.response_text.is_some() {
                    out.push(violation(
                        "response_text",
                        "cross-field rule 3: must be null when outcome is error",
                    ));
                }
                if self.response_sha256.is_some() {
                    out.push(violation(
                        "response_sha256",
                        "cross-field rule 3: must be null when outcome is error",
                    ));
                }
            }
        }
        out
    }

    /// The integrity rule beyond the schema: when both are strings, `response_sha256` must be
    /// the SHA-256 of `response_text`. Returns the expected hash on mismatch.
    pub fn integrity_error(&self) -> Option<String> {
        match (&self.response_text, &self.response_sha256) {
            (Some(text), Some(hash)) => {
                let expected = digest::sha256_hex(text);
                (*hash != expected).then_some(expected)
            }
            _ => None,
        }
    }

    /// The pairing unit of SPEC's paired design: trials that share it differ only in condition.
    pub fn pairing_key(&self) -> PairingKey<'_> {
        PairingKey {
            workload: &self.workload,
            workload_version: &self.workload_version,
            task_id: &self.task_id,
            provider: &self.provider,
            model: &self.model,
            replicate: self.replicate,
            scorer: &self.scorer,
        }
    }
}

/// (workload, workload_version, task_id, provider, model, replicate, scorer).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PairingKey<'a> {
    pub workload: &'a str,
    pub workload_version: &'a str,
    pub task_id: &'a str,
    pub provider: &'a str,
    pub model: &'a str,
    pub replicate: u64,
    pub scorer: &'a str,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A valid success record for tests across the crate.
    pub(crate) fn sample() -> TrialRecord {
        let response = "Paris".to_string();
        TrialRecord {
            schema_version: SCHEMA_VERSION.into(),
            workload: "qa-builtin".into(),
            workload_version: "1".into(),
            task_id: "t1".into(),
            provider: "fixture".into(),
            model: "extractive-v1".into(),
            provider_request_id: "req_1".into(),
            usage_source: UsageSource::DeterministicFixture,
            cost_source: CostSource::ZeroCostFixture,
            cost_source_reference: "fixture".into(),
            outcome: Outcome::Success,
            error_type: None,
            context_sha256: digest::sha256_hex("context"),
            response_sha256: Some(digest::sha256_hex(&response)),
            response_text: Some(response),
            replicate: 0,
            condition: Condition::Svc,
            scorer: "qa-exact-v1".into(),
            task_score: 1.0,
            evidence_recall: 1.0,
            unsupported_claim_rate: 0.0,
            context_tokens: 120,
            reasoning_tokens: 0,
            output_tokens: 2,
            billed_cost_usd: 0.0,
            latency_ms: 1.5,
            context_commit_id: Some("ctx_abc".into()),
        }
    }

    #[test]
    fn round_trips_and_rejects_unknown_fields() {
        let record = sample();
        let json = serde_json::to_value(&record).expect("serialise");
        let back: TrialRecord = serde_json::from_value(json.clone()).expect("deserialise");
        assert_eq!(back, record);
        let mut extra = json.clone();
        extra["surprise"] = serde_json::json!(1);
        assert!(serde_json::from_value::<TrialRecord>(extra).is_err());
        let mut missing = json;
        missing
            .as_object_mut()
            .expect("object")
            .remove("context_commit_id");
        assert!(serde_json::from_value::<TrialRecord>(missing).is_err());
    }

    #[test]
    fn cross_field_rules_are_enforced() {
        let mut record = sample();
        record.context_commit_id = None;
        assert_eq!(record.violations()[0].field, "context_commit_id");
        record.condition = Condition::Raw;
        assert!(record.violations().is_empty());
        record.outcome = Outcome::Error;
        let fields: Vec<_> = record.violations().iter().map(|v| v.field).collect();
        assert_eq!(fields, ["error_type", "response_text", "response_sha256"]);
    }

    #[test]
    fn integrity_detects_hash_mismatch() {
        let mut record = sample();
        assert_eq!(record.integrity_error(), None);
        record.response_text = Some("London".into());
        assert_eq!(record.integrity_error(), Some(digest::sha256_hex("London")));
    }
}
