//! Validation of trial records against the published schema
//! (`schemas/context-efficiency-trial.v1.json`, embedded at build time) plus the integrity rule
//! the schema cannot state: `response_sha256` is the SHA-256 of `response_text`.
//!
//! Problems carry the JSON pointer of the field, a stable rule id (for tests and machines), the
//! rule in words and the offending value, truncated, so a person can fix the record at once.

use serde::Serialize;
use serde_json::Value;

use crate::digest;

/// The published trial-record schema (JSON Schema draft 2020-12).
pub const SCHEMA_JSON: &str = include_str!("../../schemas/context-efficiency-trial.v1.json");

const VALUE_PREVIEW_CHARS: usize = 80;

/// What kind of rule a problem breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ProblemKind {
    /// The text is not JSON.
    Json,
    /// A rule of the schema.
    Schema,
    /// The integrity rule beyond the schema (response hash).
    Integrity,
}

/// One broken rule in one record.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Problem {
    pub kind: ProblemKind,
    /// JSON pointer of the offending field ("" for the record itself).
    pub pointer: String,
    /// Stable rule id: the schema keyword (`required`, `enum`, `pattern`, `minimum`, ...),
    /// `cross-field-N` for the cross-field rules, `integrity`, or `json`.
    pub rule_id: String,
    /// The rule in words.
    pub message: String,
    /// The offending value as JSON, truncated.
    pub value: Option<String>,
}

/// Errors building the validator; only possible if the embedded schema is broken.
#[derive(Debug, thiserror::Error)]
#[error("the embedded trial-record schema is invalid: {0}")]
pub struct SchemaError(String);

/// A compiled validator for trial records. Build once, use from many threads.
pub struct RecordValidator {
    schema: Value,
    validator: jsonschema::Validator,
}

impl RecordValidator {
    pub fn new() -> Result<Self, SchemaError> {
        let schema: Value =
            serde_json::from_str(SCHEMA_JSON).map_err(|e| SchemaError(e.to_string()))?;
        let validator = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(&schema)
            .map_err(|e| SchemaError(e.to_string()))?;
        Ok(Self { schema, validator })
    }

    /// The schema as a JSON value.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Problems of one record given as JSON text (empty when valid).
    pub fn check_str(&self, text: &str) -> Vec<Problem> {
        match serde_json::from_str::<Value>(text) {
            Ok(value) => self.check_value(&value),
            Err(error) => vec![Problem {
                kind: ProblemKind::Json,
                pointer: String::new(),
                rule_id: "json".into(),
                message: format!("not valid JSON: {error}"),
                value: Some(preview_text(text)),
            }],
        }
    }

    /// Problems of one record (empty when valid).
    pub fn check_value(&self, value: &Value) -> Vec<Problem> {
        let mut problems = Vec::new();
        // `is_valid` is much cheaper than collecting errors; most records are valid.
        if !self.validator.is_valid(value) {
            for error in self.validator.iter_errors(value) {
                self.push_schema_problems(&error, &mut problems);
            }
        }
        if let Some(problem) = integrity_problem(value) {
            problems.push(problem);
        }
        problems
    }

    fn push_schema_problems(
        &self,
        error: &jsonschema::ValidationError<'_>,
        out: &mut Vec<Problem>,
    ) {
        use jsonschema::error::ValidationErrorKind as Kind;
        let pointer = error.instance_path().as_str().to_string();
        let schema_path = error.schema_path().as_str().to_string();
        let keyword = schema_path
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string();
        let (rule_id, suffix) = match cross_field_rule(&schema_path) {
            Some(index) => {
                let description = self
                    .schema
                    .pointer(&format!("/allOf/{index}/description"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                (
                    format!("cross-field-{}", index + 1),
                    format!(" ({description})"),
                )
            }
            None => (keyword.clone(), String::new()),
        };
        let value = Some(preview_value(error.instance()));
        let schema_problem = |pointer: String, message: String, value: Option<String>| Problem {
            kind: ProblemKind::Schema,
            pointer,
            rule_id: rule_id.clone(),
            message: format!("{message}{suffix}"),
            value,
        };
        match error.kind() {
            Kind::Required { property } => {
                let name = property.as_str().unwrap_or_default();
                out.push(schema_problem(
                    format!("{pointer}/{}", escape_token(name)),
                    "required field is missing".into(),
                    None,
                ));
            }
            Kind::AdditionalProperties { unexpected } => {
                for name in unexpected {
                    let field_value = error.instance().get(name.as_str()).map(preview_value);
                    out.push(schema_problem(
                        format!("{pointer}/{}", escape_token(name)),
                        "unknown field: the record allows only the fields of the schema".into(),
                        field_value,
                    ));
                }
            }
            Kind::Enum { options } => {
                let names: Vec<String> = options
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|v| v.as_str().unwrap_or("?").to_string())
                            .collect()
                    })
                    .unwrap_or_default();
                out.push(schema_problem(
                    pointer,
                    format!("must be one of: {}", names.join(", ")),
                    value,
                ));
            }
            Kind::Constant { expected_value } => out.push(schema_problem(
                pointer,
                format!("must be {expected_value}"),
                value,
            )),
            Kind::Pattern { pattern } => out.push(schema_problem(
                pointer,
                format!("must match the regex {pattern}"),
                value,
            )),
            Kind::Minimum { limit } => out.push(schema_problem(
                pointer,
                format!("must be >= {limit}"),
                value,
            )),
            Kind::Maximum { limit } => out.push(schema_problem(
                pointer,
                format!("must be <= {limit}"),
                value,
            )),
            Kind::MinLength { limit: 1 } => {
                out.push(schema_problem(pointer, "must not be empty".into(), value))
            }
            Kind::MinLength { limit } => out.push(schema_problem(
                pointer,
                format!("must be at least {limit} characters long"),
                value,
            )),
            Kind::Type { kind } => out.push(schema_problem(
                pointer,
                format!("must be of type {}", type_words(kind)),
                value,
            )),
            _ => out.push(schema_problem(pointer, error.masked().to_string(), value)),
        }
    }
}

/// The index N of `/allOf/N/...` in a schema path: the cross-field rules live there.
fn cross_field_rule(schema_path: &str) -> Option<usize> {
    let rest = schema_path.strip_prefix("/allOf/")?;
    rest.split('/').next()?.parse().ok()
}

fn type_words(kind: &jsonschema::error::TypeKind) -> String {
    use jsonschema::error::TypeKind;
    match kind {
        TypeKind::Single(t) => t.to_string(),
        TypeKind::Multiple(types) => types
            .iter()
            .map(|t| t.to_string())
            .collect::<Vec<_>>()
            .join(" or "),
    }
}

fn integrity_problem(value: &Value) -> Option<Problem> {
    let text = value.get("response_text")?.as_str()?;
    let hash = value.get("response_sha256")?.as_str()?;
    // A malformed hash is the schema's to report; integrity compares well-formed hashes only.
    if !digest::is_sha256_hex(hash) {
        return None;
    }
    let expected = digest::sha256_hex(text);
    (hash != expected).then(|| Problem {
        kind: ProblemKind::Integrity,
        pointer: "/response_sha256".into(),
        rule_id: "integrity".into(),
        message: format!("integrity: is not the SHA-256 of response_text (expected {expected})"),
        value: Some(preview_text(hash)),
    })
}

fn preview_value(value: &Value) -> String {
    preview_text(&value.to_string())
}

fn preview_text(text: &str) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(VALUE_PREVIEW_CHARS).collect();
    if chars.next().is_some() {
        format!("{head}…")
    } else {
        head
    }
}

/// A key as one JSON pointer token (RFC 6901: `~` is `~0`, `/` is `~1`), so `a/b` is not read
/// as a nested path.
pub(crate) fn escape_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trial::record::tests::sample;

    fn validator() -> RecordValidator {
        RecordValidator::new().expect("embedded schema compiles")
    }

    #[test]
    fn valid_record_has_no_problems() {
        let value = serde_json::to_value(sample()).expect("serialise");
        assert!(validator().check_value(&value).is_empty());
    }

    #[test]
    fn required_and_additional_point_at_the_field() {
        let mut value = serde_json::to_value(sample()).expect("serialise");
        let object = value.as_object_mut().expect("object");
        object.remove("model");
        object.insert("extra".into(), Value::from(1));
        let problems = validator().check_value(&value);
        let found: Vec<_> = problems
            .iter()
            .map(|p| (p.pointer.as_str(), p.rule_id.as_str()))
            .collect();
        assert!(found.contains(&("/model", "required")), "{found:?}");
        assert!(
            found.contains(&("/extra", "additionalProperties")),
            "{found:?}"
        );
    }

    #[test]
    fn cross_field_rule_is_named_and_described() {
        let mut value = serde_json::to_value(sample()).expect("serialise");
        value["context_commit_id"] = Value::Null;
        let problems = validator().check_value(&value);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].pointer, "/context_commit_id");
        assert_eq!(problems[0].rule_id, "cross-field-1");
        assert!(problems[0].message.contains("svc or combined"));
    }

    #[test]
    fn long_values_are_truncated() {
        let mut value = serde_json::to_value(sample()).expect("serialise");
        value["context_sha256"] = Value::from("x".repeat(500));
        let problems = validator().check_value(&value);
        let shown = problems[0].value.as_deref().expect("value");
        assert!(shown.chars().count() <= VALUE_PREVIEW_CHARS + 1);
        assert!(shown.ends_with('…'));
    }

    #[test]
    fn integrity_is_distinct_from_schema() {
        let mut value = serde_json::to_value(sample()).expect("serialise");
        value["response_text"] = Value::from("not what was hashed");
        let problems = validator().check_value(&value);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].kind, ProblemKind::Integrity);
    }

    /// Regression (found by probing): a key with `/` or `~` was put in a pointer unescaped, so
    /// `/a/b~c` read as a nested path.
    #[test]
    fn pointers_escape_their_keys() {
        let mut value = serde_json::to_value(sample()).expect("serialise");
        value["a/b~c"] = Value::from(1);
        let problems = validator().check_value(&value);
        assert!(
            problems.iter().any(|p| p.pointer == "/a~1b~0c"),
            "{problems:?}"
        );
    }

    #[test]
    fn not_json_is_reported() {
        let problems = validator().check_str("{\"schema_version\": ");
        assert_eq!(problems[0].kind, ProblemKind::Json);
    }
}
