//! The one acceptance rule for trial records, shared by every reader: `svc records validate`,
//! `svc report`, `svc gate` and a resumed run.
//!
//! A record is accepted when it deserialises into [`TrialRecord`] (types, required fields, no
//! unknown fields, the value and cross-field rules of SPEC §2.1) and passes the integrity rule
//! (`response_sha256` is the SHA-256 of `response_text`). The published JSON Schema says the
//! same thing; where a reader needs to say *why* a record is refused, the schema validator
//! supplies the diagnostics. Two deliberate points where this rule is stricter than the schema
//! alone, both reported with a problem: a count beyond 64 bits, and a key given twice in one
//! object. Integral floats (`412.0`) are accepted everywhere, as JSON Schema's `integer` does.

use super::record::TrialRecord;
use super::validate::{Problem, ProblemKind, RecordValidator};

/// Why a record was refused, in the typed reader's words; [`Rejected::problems`] gives the
/// schema's field-by-field diagnostics.
#[derive(Debug, thiserror::Error)]
pub enum Rejected {
    #[error("{}{source}", if pointer.is_empty() { String::new() } else { format!("{pointer}: ") })]
    Record {
        /// JSON pointer of the field the typed reader stopped at ("" for the record itself).
        pointer: String,
        source: serde_json::Error,
    },
    #[error("/response_sha256: is not the SHA-256 of response_text (expected {expected})")]
    Integrity { expected: String },
}

impl Rejected {
    /// The problems of the refused record `text`: the schema's diagnostics, or, where the
    /// schema sees none (the two stricter points), this rejection's own message. Never empty.
    pub fn problems(&self, validator: &RecordValidator, text: &str) -> Vec<Problem> {
        let problems = validator.check_str(text);
        if !problems.is_empty() {
            return problems;
        }
        // The schema reads the last of two values of one key; the typed reader refuses the
        // record, often on the first value, so say what is really wrong.
        if let Some(key) = duplicate_key(text) {
            return vec![Problem {
                kind: ProblemKind::Schema,
                pointer: format!("/{}", super::validate::escape_token(&key)),
                rule_id: "duplicate-key".into(),
                message: format!("duplicate key `{key}`: a record gives each field once"),
                value: None,
            }];
        }
        let (pointer, message) = match self {
            Rejected::Record { pointer, source } => (pointer.clone(), source.to_string()),
            other => (String::new(), other.to_string()),
        };
        vec![Problem {
            kind: ProblemKind::Schema,
            pointer,
            rule_id: "record".into(),
            message,
            value: None,
        }]
    }
}

/// The JSON pointer (RFC 6901) of a path the typed reader reports (`/context_tokens`).
fn json_pointer(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    path.iter()
        .filter_map(|segment| match segment {
            Segment::Seq { index } => Some(index.to_string()),
            Segment::Map { key } => Some(super::validate::escape_token(key)),
            Segment::Enum { variant } => Some(variant.clone()),
            Segment::Unknown => None,
        })
        .map(|part| format!("/{part}"))
        .collect()
}

/// The first key given twice in the top-level object of `text`, if any.
fn duplicate_key(text: &str) -> Option<String> {
    struct Keys(Option<String>);
    impl<'de> serde::Deserialize<'de> for Keys {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Visitor;
            impl<'de> serde::de::Visitor<'de> for Visitor {
                type Value = Keys;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Keys, A::Error> {
                    let mut seen = std::collections::HashSet::new();
                    let mut duplicate = None;
                    while let Some(key) = map.next_key::<String>()? {
                        map.next_value::<serde::de::IgnoredAny>()?;
                        if duplicate.is_none() && !seen.insert(key.clone()) {
                            duplicate = Some(key);
                        }
                    }
                    Ok(Keys(duplicate))
                }
            }
            deserializer.deserialize_map(Visitor)
        }
    }
    serde_json::from_str::<Keys>(text).ok()?.0
}

/// Parses and checks one record's JSON text.
pub fn accept(text: &str) -> Result<TrialRecord, Rejected> {
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let record =
        serde_path_to_error::deserialize::<_, TrialRecord>(&mut deserializer).map_err(|error| {
            Rejected::Record {
                pointer: json_pointer(error.path()),
                source: error.into_inner(),
            }
        })?;
    deserializer.end().map_err(|source| Rejected::Record {
        pointer: String::new(),
        source,
    })?;
    match record.integrity_error() {
        None => Ok(record),
        Some(expected) => Err(Rejected::Integrity { expected }),
    }
}

/// [`accept`], with the problems of a refused record.
pub fn check(validator: &RecordValidator, text: &str) -> Result<TrialRecord, Vec<Problem>> {
    accept(text).map_err(|rejected| rejected.problems(validator, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fixtures/records")
            .join(name);
        std::fs::read_to_string(&path).expect("fixture")
    }

    fn first_line(name: &str) -> String {
        fixture(name).lines().next().expect("a line").to_string()
    }

    #[test]
    fn issue_10_integral_floats_are_accepted_like_the_schema_does() {
        let validator = RecordValidator::new().expect("validator");
        let text = first_line("valid/svc-success.jsonl");
        let mut value: serde_json::Value = serde_json::from_str(&text).expect("json");
        value["context_tokens"] = serde_json::json!(412.0);
        value["replicate"] = serde_json::json!(0.0);
        let text = value.to_string();
        assert!(validator.check_str(&text).is_empty(), "the schema accepts");
        let record = check(&validator, &text).expect("accepted");
        assert_eq!(record.context_tokens, 412);

        value["context_tokens"] = serde_json::json!(412.5);
        let problems = check(&validator, &value.to_string()).expect_err("a fraction");
        assert_eq!(problems[0].pointer, "/context_tokens");
    }

    #[test]
    fn stricter_points_still_explain_themselves() {
        let validator = RecordValidator::new().expect("validator");
        let text = first_line("valid/svc-success.jsonl");
        let mut value: serde_json::Value = serde_json::from_str(&text).expect("json");
        value["output_tokens"] = serde_json::json!(1e20);
        let problems = check(&validator, &value.to_string()).expect_err("too large");
        assert!(problems[0].message.contains("64 bits"), "{problems:?}");
        // Found by probing: an integer one past 64 bits was reported without its field, and
        // with its digits rounded by the float it was read as.
        value["output_tokens"] = serde_json::json!(1);
        let text = value.to_string().replacen(
            "\"output_tokens\":1",
            "\"output_tokens\":18446744073709551616",
            1,
        );
        let problems = check(&validator, &text).expect_err("too large");
        assert_eq!(problems[0].pointer, "/output_tokens", "{problems:?}");
        assert!(
            problems[0].message.contains("64 bits") && !problems[0].message.contains("552000"),
            "{problems:?}"
        );

        let duplicated = text.replacen('{', "{\"model\":\"a\",", 1);
        let problems = check(&validator, &duplicated).expect_err("duplicate key");
        assert!(problems[0].message.contains("duplicate"), "{problems:?}");
        // Found by fuzzing: a bad first value of a repeated key was reported as the problem.
        let usage = text.replacen('{', "{\"usage_source\":\"deterixture\",", 1);
        let problems = check(&validator, &usage).expect_err("duplicate key");
        assert_eq!(problems[0].rule_id, "duplicate-key", "{problems:?}");
        assert_eq!(problems[0].pointer, "/usage_source");
    }

    /// Every committed fixture gets the same verdict from the acceptance rule as from the
    /// schema validator.
    #[test]
    fn acceptance_and_schema_agree_on_the_fixtures() {
        let validator = RecordValidator::new().expect("validator");
        for kind in ["valid", "invalid"] {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("fixtures/records")
                .join(kind);
            for entry in std::fs::read_dir(&dir).expect("fixtures") {
                let path = entry.expect("entry").path();
                let file = std::fs::File::open(&path).expect("open");
                let reader = super::super::read::RecordReader::new(
                    Box::new(std::io::BufReader::new(file)),
                    path.to_str(),
                )
                .expect("reader");
                for item in reader {
                    let Ok(text) = item.expect("io").text else {
                        continue;
                    };
                    let schema_ok = validator.check_str(&text).is_empty();
                    let accepted = check(&validator, &text).is_ok();
                    assert_eq!(schema_ok, accepted, "{}: {text}", path.display());
                    if kind == "valid" {
                        assert!(accepted, "{}", path.display());
                    }
                }
            }
        }
    }
}
