//! Synthetic paired records for report tests and the report performance figure: every task is
//! run under the four conditions, with realistic shapes (log-normal context sizes, per-task
//! difficulty shared across conditions, condition effects on tokens, recall and quality, a few
//! errors, a binary scorer on one workload). Deterministic for a seed.

use std::io::Write;

use super::stats::SplitMix64;
use crate::digest;
use crate::trial::record::{
    Condition, CostSource, Outcome, SCHEMA_VERSION, TrialRecord, UsageSource,
};

const INPUT_PER_MTOK: f64 = 3.0;
const OUTPUT_PER_MTOK: f64 = 15.0;

struct Noise(SplitMix64);

impl Noise {
    fn normal(&mut self, mean: f64, sd: f64) -> f64 {
        // Box–Muller; 1 - u keeps the logarithm finite.
        let u1 = 1.0 - self.0.unit();
        let u2 = self.0.unit();
        mean + sd * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    fn unit(&mut self) -> f64 {
        self.0.unit()
    }
}

fn clamp01(x: f64) -> f64 {
    x.clamp(0.0, 1.0)
}

/// Relative context size, recall centre and quality shift of each condition.
fn effect(condition: Condition) -> (f64, f64, f64, f64) {
    // (token factor, recall mean, score shift, unsupported shift)
    match condition {
        Condition::Raw => (1.0, 0.98, 0.0, 0.0),
        Condition::NativeCompaction => (0.55, 0.84, -0.06, 0.03),
        Condition::Svc => (0.30, 0.96, -0.004, -0.01),
        Condition::Combined => (0.25, 0.93, -0.015, 0.0),
    }
}

/// `n` records: `n / 4` pairing units of four conditions (a remainder makes one incomplete
/// unit, as a crashed run would).
pub fn records(n: usize, seed: u64) -> impl Iterator<Item = TrialRecord> {
    let mut noise = Noise(SplitMix64::new(seed));
    let mut task = None::<(usize, f64, f64, f64)>;
    (0..n).map(move |i| {
        let unit = i / 4;
        let condition = Condition::ALL[i % 4];
        if i % 4 == 0 || task.is_none() {
            let raw_tokens = noise.normal(8.6, 0.6).exp().clamp(200.0, 120_000.0);
            let difficulty = clamp01(noise.normal(0.72, 0.18));
            let unsupported = clamp01(noise.normal(0.06, 0.04));
            task = Some((unit, raw_tokens, difficulty, unsupported));
        }
        let (_, raw_tokens, difficulty, base_unsupported) = task.unwrap_or_default();
        let binary = unit % 3 == 2;
        let (workload, scorer) = if binary {
            ("code-needle", "needle-hit-v1")
        } else {
            ("qa-distractor", "qa-f1-v1")
        };
        let (factor, recall_mean, shift, unsupported_shift) = effect(condition);
        let context_tokens = (raw_tokens * factor * noise.normal(1.0, 0.05).max(0.5)).round();
        let evidence_recall = clamp01(noise.normal(recall_mean, 0.05));
        let quality = clamp01(difficulty + shift + noise.normal(0.0, 0.05));
        let error = noise.unit() < 0.015;
        let task_score = if error {
            0.0
        } else if binary {
            f64::from(noise.unit() < quality)
        } else {
            (quality * 100.0).round() / 100.0
        };
        let unsupported = (clamp01(base_unsupported + unsupported_shift + noise.normal(0.0, 0.02))
            * 100.0)
            .round()
            / 100.0;
        let output_tokens = if error {
            0.0
        } else {
            noise.normal(160.0, 40.0).clamp(1.0, 2000.0).round()
        };
        let latency =
            (150.0 + context_tokens * 0.02 + output_tokens * 12.0 + noise.normal(0.0, 30.0))
                .max(1.0);
        let cost = (context_tokens * INPUT_PER_MTOK + output_tokens * OUTPUT_PER_MTOK) / 1e6;
        let response = (!error).then(|| format!("Answer for task {unit} under {condition}."));
        TrialRecord {
            schema_version: SCHEMA_VERSION.into(),
            workload: workload.into(),
            workload_version: "1".into(),
            task_id: format!("t{unit:07}"),
            provider: "synthetic".into(),
            model: "synthetic-large".into(),
            provider_request_id: format!("req_{i:09}"),
            usage_source: UsageSource::DeterministicFixture,
            cost_source: CostSource::PricingSnapshot,
            cost_source_reference: "synthetic-pricing-3-15-per-mtok".into(),
            outcome: if error {
                Outcome::Error
            } else {
                Outcome::Success
            },
            error_type: error.then(|| "timeout".into()),
            context_sha256: digest::sha256_hex(format!("{unit}/{condition}")),
            response_sha256: response.as_ref().map(digest::sha256_hex),
            response_text: response,
            replicate: 0,
            condition,
            scorer: scorer.into(),
            task_score,
            evidence_recall: (evidence_recall * 1000.0).round() / 1000.0,
            unsupported_claim_rate: unsupported,
            context_tokens: context_tokens.max(1.0) as u64,
            reasoning_tokens: 0,
            output_tokens: output_tokens as u64,
            billed_cost_usd: (cost * 1e8).round() / 1e8,
            latency_ms: (latency * 10.0).round() / 10.0,
            context_commit_id: matches!(condition, Condition::Svc | Condition::Combined)
                .then(|| format!("ctx_{unit:012x}")),
        }
    })
}

/// Writes `n` generated records as JSON Lines.
pub fn write_records(out: &mut dyn Write, n: usize, seed: u64) -> std::io::Result<()> {
    for record in records(n, seed) {
        serde_json::to_writer(&mut *out, &record)?;
        out.write_all(b"\n")?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_records_are_valid_paired_and_deterministic() {
        let a: Vec<TrialRecord> = records(400, 3).collect();
        assert_eq!(a, records(400, 3).collect::<Vec<_>>());
        for record in &a {
            assert!(record.violations().is_empty(), "{record:?}");
            assert!(record.integrity_error().is_none());
        }
        // Four conditions share each pairing key.
        assert_eq!(a[0].pairing_key(), a[3].pairing_key());
        assert_ne!(a[0].pairing_key(), a[4].pairing_key());
        let svc_tokens: u64 = a
            .iter()
            .filter(|r| r.condition == Condition::Svc)
            .map(|r| r.context_tokens)
            .sum();
        let raw_tokens: u64 = a
            .iter()
            .filter(|r| r.condition == Condition::Raw)
            .map(|r| r.context_tokens)
            .sum();
        assert!(svc_tokens * 2 < raw_tokens);
    }
}
