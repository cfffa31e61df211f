//! Pricing snapshots: model → $ per million input/output tokens, read from TOML or JSON, used
//! to project what trials would have cost. A projection is never a billed amount; reports label
//! it as such.
//!
//! ```toml
//! source = "vendor price page, 2026-11-01"
//! [models."gpt-4o-mini"]
//! input_per_mtok = 0.15
//! output_per_mtok = 0.60
//! ```
//!
//! The runners' snapshots (`runners/pricing/*.toml`: `input_usd_per_mtok`,
//! `output_usd_per_mtok`, optional cache rates) are read too, so one file serves both; a
//! projection prices all input at the input rate.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::ReportError;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelPrice {
    #[serde(alias = "input_usd_per_mtok")]
    pub input_per_mtok: f64,
    #[serde(alias = "output_usd_per_mtok")]
    pub output_per_mtok: f64,
    /// A runner snapshot's cache rates: accepted (the file is the same), not projected.
    #[serde(
        default,
        alias = "cached_input_usd_per_mtok",
        skip_serializing_if = "Option::is_none"
    )]
    pub cached_input_per_mtok: Option<f64>,
    #[serde(
        default,
        alias = "cache_write_usd_per_mtok",
        skip_serializing_if = "Option::is_none"
    )]
    pub cache_write_per_mtok: Option<f64>,
}

impl ModelPrice {
    /// Dollars for the given input and output (incl. reasoning) token counts.
    pub fn project(&self, input_tokens: f64, output_tokens: f64) -> f64 {
        (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PricingSnapshot {
    /// Where the prices come from (URL, document and date, or hash).
    #[serde(default)]
    pub source: Option<String>,
    pub models: BTreeMap<String, ModelPrice>,
}

impl PricingSnapshot {
    pub fn price(&self, model: &str) -> Option<&ModelPrice> {
        self.models.get(model)
    }

    /// Reads a snapshot; `.json` files are JSON, anything else TOML.
    pub fn load(path: &Path) -> Result<Self, ReportError> {
        let error = |message: String| ReportError::Pricing {
            path: path.to_path_buf(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| error(e.to_string()))?;
        let snapshot: Self = if path.extension().is_some_and(|e| e == "json") {
            serde_json::from_str(crate::text::without_bom(&text))
                .map_err(|e| error(e.to_string()))?
        } else {
            toml::from_str(&text).map_err(|e| error(e.to_string()))?
        };
        for (model, price) in &snapshot.models {
            for (field, value) in [
                ("input_per_mtok", price.input_per_mtok),
                ("output_per_mtok", price.output_per_mtok),
            ] {
                if !(value >= 0.0 && value.is_finite()) {
                    return Err(error(format!(
                        "models.\"{model}\".{field} must be a finite number >= 0, got {value}"
                    )));
                }
            }
        }
        Ok(snapshot)
    }
}

/// What the report says about its cost projection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PricingInfo {
    pub source: Option<String>,
    pub path: String,
    /// Valid records whose billed cost is a zero-cost fixture.
    pub zero_cost_records: u64,
    /// Models in the records without a price in the snapshot (their projection is missing).
    pub models_without_price: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_and_json_snapshots_load_and_project() {
        let dir = tempfile::tempdir().expect("tempdir");
        let toml_path = dir.path().join("p.toml");
        std::fs::write(
            &toml_path,
            "source = \"x\"\n[models.m]\ninput_per_mtok = 3.0\noutput_per_mtok = 15.0\n",
        )
        .expect("write");
        let snapshot = PricingSnapshot::load(&toml_path).expect("toml");
        let price = snapshot.price("m").expect("price");
        assert!((price.project(1_000_000.0, 100_000.0) - 4.5).abs() < 1e-12);
        let json_path = dir.path().join("p.json");
        std::fs::write(
            &json_path,
            r#"{"models":{"m":{"input_per_mtok":1,"output_per_mtok":2}}}"#,
        )
        .expect("write");
        assert!(PricingSnapshot::load(&json_path).is_ok());
    }

    /// Regression (found by probing): `svc report --pricing` refused the runners' own snapshot
    /// files (`input_usd_per_mtok`), so one price list needed two files.
    #[test]
    fn the_runners_snapshots_load_too() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("runners/pricing/example-2026-11.toml");
        let snapshot = PricingSnapshot::load(&path).expect("a runner snapshot");
        let price = snapshot.price("gpt-4o-mini").expect("priced");
        assert!((price.project(1_000_000.0, 1_000_000.0) - 0.75).abs() < 1e-12);
    }

    #[test]
    fn negative_price_names_the_field() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("p.toml");
        std::fs::write(
            &path,
            "[models.m]\ninput_per_mtok = -1\noutput_per_mtok = 1\n",
        )
        .expect("write");
        let error = PricingSnapshot::load(&path)
            .expect_err("negative")
            .to_string();
        assert!(error.contains("models.\"m\".input_per_mtok"), "{error}");
    }
}
