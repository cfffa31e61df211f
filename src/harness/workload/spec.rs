//! The `workload.toml` declaration: parsing with file/line/field errors and the per-kind
//! sections. The TOML parser's spans give the line of syntax and type errors; checks the parser
//! cannot express (a section that does not match the kind, a missing field of the kind's
//! section) find the line of the offending key.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{WorkloadError, line_of, read_text};
use crate::harness::scorer::ScorerName;

/// The closed set of workload kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
#[value(rename_all = "kebab-case")]
pub enum WorkloadKind {
    Qa,
    Needle,
    CodeLocalization,
    Conversation,
}

impl WorkloadKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Qa => "qa",
            WorkloadKind::Needle => "needle",
            WorkloadKind::CodeLocalization => "code-localization",
            WorkloadKind::Conversation => "conversation",
        }
    }

    fn section(self) -> &'static str {
        match self {
            WorkloadKind::Qa => "qa",
            WorkloadKind::Needle => "needle",
            WorkloadKind::CodeLocalization => "code",
            WorkloadKind::Conversation => "conversation",
        }
    }
}

impl std::fmt::Display for WorkloadKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a `qa` workload's tasks come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QaFormat {
    /// `tasks.toml` + a folder of documents written for the workload.
    Builtin,
    /// HaluEval-format JSONL (`knowledge`, `question`, `right_answer`) with distractors.
    Halueval,
    /// `tasks.toml` over the text files of one commit of a git repository (a bundle or a
    /// folder that is never part of the workload): long real documents.
    GitDocs,
}

/// `[qa]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QaSource {
    pub format: QaFormat,
    /// builtin: the task file (TOML, `[[task]]` tables).
    pub tasks: Option<String>,
    /// builtin: the folder of documents (every `*.md`/`*.txt`, sorted by name).
    pub documents: Option<String>,
    /// halueval: the JSONL file (absolute, or relative to the workload folder), or a list of
    /// candidates of which the first that exists is read.
    pub file: Option<OneOrMany>,
    /// halueval: an environment variable that, when set, overrides `file`.
    pub file_env: Option<String>,
    /// halueval: passages of other tasks mixed into each task's context.
    pub distractors: Option<usize>,
    /// halueval: seed for choosing and ordering the distractors.
    pub seed: Option<u64>,
    /// halueval: how distractors are chosen: `random` (default) or `bm25`, the passages of
    /// other items most similar to the task's question (hard negatives).
    pub distractor_choice: Option<DistractorChoice>,
    /// halueval: use only the first `limit` items.
    pub limit: Option<usize>,
    /// git_docs: a git bundle or repository folder (absolute, or relative to the workload
    /// folder).
    pub repo: Option<String>,
    /// git_docs: an environment variable that, when set, names the repository instead.
    pub repo_env: Option<String>,
    /// git_docs: the commit whose tree is read (a full id, so the workload is fixed).
    pub rev: Option<String>,
    /// git_docs: path prefixes of the files to read (e.g. `["docs/"]`).
    pub paths: Option<Vec<String>>,
    /// git_docs: file extensions to read, without the dot (default `rst`, `md`, `txt`).
    pub extensions: Option<Vec<String>>,
}

/// How a HaluEval task's distractors are chosen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DistractorChoice {
    /// A seeded uniform sample of the other items.
    #[default]
    Random,
    /// The other items whose passages score highest by BM25 against the task's question.
    Bm25,
}

/// A string or a list of strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn items(&self) -> Vec<&str> {
        match self {
            OneOrMany::One(one) => vec![one.as_str()],
            OneOrMany::Many(many) => many.iter().map(String::as_str).collect(),
        }
    }
}

/// `[needle]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeedleSource {
    /// Folder of corpus text files (`*.md`/`*.txt`) the haystacks are cut from.
    pub corpus: String,
    /// TOML file with `[[needle]]` tables: `id`, `fact`, `question`, `answer`.
    pub needles: String,
    /// Haystack sizes in tokens.
    pub haystack_tokens: Vec<usize>,
    /// Depths in `0..=1` at which the fact is planted.
    pub depths: Vec<f64>,
    pub seed: u64,
}

/// `[code]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeSource {
    /// A git bundle file or a repository folder (absolute, or relative to the workload folder).
    pub repo: String,
    /// An environment variable that, when set, names the bundle or folder instead of `repo`
    /// (the repository is never part of the workload: only its reference and commit ids are).
    pub repo_env: Option<String>,
    /// Mined tasks (JSONL from `svc workloads mine-git`).
    pub tasks: String,
    /// Files larger than this are left out of the context (default 65536).
    pub max_file_bytes: Option<usize>,
}

/// `[conversation]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConversationSource {
    /// TOML file with `[[conversation]]` tables.
    pub conversations: String,
    /// TOML file with `[[exchange]]` filler (`user`, `assistant`).
    pub filler: String,
    /// Filler exchanges between the early fact and the final question.
    pub filler_exchanges: usize,
    pub seed: u64,
}

/// The kind-specific part of a declaration.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Source {
    Qa(QaSource),
    Needle(NeedleSource),
    Code(CodeSource),
    Conversation(ConversationSource),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: String,
    version: String,
    kind: WorkloadKind,
    #[serde(default)]
    description: String,
    scorer: ScorerName,
    qa: Option<QaSource>,
    needle: Option<NeedleSource>,
    code: Option<CodeSource>,
    conversation: Option<ConversationSource>,
}

/// A parsed `workload.toml`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WorkloadSpec {
    pub name: String,
    pub version: String,
    pub kind: WorkloadKind,
    pub description: String,
    /// The default scorer of the workload's tasks.
    pub scorer: ScorerName,
    pub source: Source,
    /// The file it was read from.
    pub path: PathBuf,
}

/// Reads and checks a `workload.toml`.
pub fn read(path: &Path) -> Result<WorkloadSpec, WorkloadError> {
    let text = read_text(path)?;
    parse(&text, path)
}

/// Parses declaration text; `path` is used in errors only.
pub fn parse(text: &str, path: &Path) -> Result<WorkloadSpec, WorkloadError> {
    let raw: RawSpec = toml::from_str(text).map_err(|error| {
        let (line, column, message) = describe_toml_error(text, &error);
        WorkloadError::Malformed {
            path: path.to_path_buf(),
            line,
            column,
            message,
        }
    })?;
    let field_error = |field: &str, message: String| WorkloadError::Field {
        path: path.to_path_buf(),
        line: line_of(text, field),
        field: field.to_string(),
        message,
    };
    for (field, value) in [("name", &raw.name), ("version", &raw.version)] {
        if value.trim().is_empty() {
            return Err(field_error(field, "must not be empty".into()));
        }
    }
    let sections = [
        ("qa", raw.qa.is_some()),
        ("needle", raw.needle.is_some()),
        ("code", raw.code.is_some()),
        ("conversation", raw.conversation.is_some()),
    ];
    let expected = raw.kind.section();
    for (section, present) in sections {
        if present && section != expected {
            return Err(field_error(
                &format!("[{section}]"),
                format!(
                    "a `{}` workload takes a [{expected}] section, not [{section}]",
                    raw.kind
                ),
            ));
        }
    }
    let missing = || {
        field_error(
            "kind",
            format!("kind `{}` needs a [{expected}] section", raw.kind),
        )
    };
    let source = match raw.kind {
        WorkloadKind::Qa => {
            let qa = raw.qa.ok_or_else(missing)?;
            let need = |field: &str, present: bool| {
                if present {
                    Ok(())
                } else {
                    Err(field_error(
                        "format",
                        format!(
                            "[qa] format `{}` needs the field `{field}`",
                            match qa.format {
                                QaFormat::Builtin => "builtin",
                                QaFormat::Halueval => "halueval",
                                QaFormat::GitDocs => "git_docs",
                            }
                        ),
                    ))
                }
            };
            match qa.format {
                QaFormat::Builtin => {
                    need("tasks", qa.tasks.is_some())?;
                    need("documents", qa.documents.is_some())?;
                }
                QaFormat::Halueval => {
                    need("file", qa.file.is_some())?;
                    need("distractors", qa.distractors.is_some())?;
                    need("seed", qa.seed.is_some())?;
                }
                QaFormat::GitDocs => {
                    need("tasks", qa.tasks.is_some())?;
                    need("repo", qa.repo.is_some())?;
                    need("rev", qa.rev.is_some())?;
                    need("paths", qa.paths.as_ref().is_some_and(|p| !p.is_empty()))?;
                }
            }
            Source::Qa(qa)
        }
        WorkloadKind::Needle => {
            let needle = raw.needle.ok_or_else(missing)?;
            if needle.haystack_tokens.is_empty() || needle.haystack_tokens.contains(&0) {
                return Err(field_error(
                    "haystack_tokens",
                    "must list at least one size, each > 0".into(),
                ));
            }
            if needle.depths.is_empty() || needle.depths.iter().any(|d| !(0.0..=1.0).contains(d)) {
                return Err(field_error(
                    "depths",
                    "must list at least one depth, each between 0 and 1".into(),
                ));
            }
            Source::Needle(needle)
        }
        WorkloadKind::CodeLocalization => Source::Code(raw.code.ok_or_else(missing)?),
        WorkloadKind::Conversation => Source::Conversation(raw.conversation.ok_or_else(missing)?),
    };
    Ok(WorkloadSpec {
        name: raw.name,
        version: raw.version,
        kind: raw.kind,
        description: raw.description,
        scorer: raw.scorer,
        source,
        path: path.to_path_buf(),
    })
}

/// Line, column and message of a TOML error, the message prefixed with the key on that line
/// (`field `distractors`: invalid type …`) so the reader knows which field to fix.
pub(crate) fn describe_toml_error(text: &str, error: &toml::de::Error) -> (usize, usize, String) {
    let message = error.message().trim().to_string();
    let Some(span) = error.span() else {
        return (1, 1, message);
    };
    let (line, column) = line_column(text, span.start);
    let key = text
        .lines()
        .nth(line - 1)
        .and_then(|l| l.split_once('='))
        .map(|(key, _)| key.trim().trim_matches('"'))
        .filter(|key| {
            !key.is_empty()
                && !key.contains(char::is_whitespace)
                && !message.contains(&format!("`{key}`"))
        })
        // A missing field's span is the whole table it is missing from, so the key on the
        // table's first line is not the field at fault: the table is named instead.
        .filter(|_| !message.starts_with("missing field"));
    let table = || {
        text.lines()
            .take(line)
            .map(str::trim)
            .filter(|l| l.starts_with('['))
            .last()
    };
    let message = match key {
        Some(key) => format!("field `{key}`: {message}"),
        None if message.starts_with("missing field") => match table() {
            Some(table) => format!("{table}: {message}"),
            None => message,
        },
        None => message,
    };
    (line, column, message)
}

/// 1-based line and column of a byte offset.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rfind('\n').map_or(offset, |nl| offset - nl - 1) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"name = "demo"
version = "1"
kind = "qa"
description = "a demo"
scorer = "qa-f1-v1"

[qa]
format = "builtin"
tasks = "tasks.toml"
documents = "documents"
"#;

    #[test]
    fn parses_a_good_declaration() {
        let spec = parse(GOOD, Path::new("w/workload.toml")).expect("parse");
        assert_eq!(spec.kind, WorkloadKind::Qa);
        assert_eq!(spec.scorer, ScorerName::QaF1V1);
    }

    #[test]
    fn type_errors_name_line_and_field() {
        let bad = GOOD.replace("version = \"1\"", "version = 1");
        let error = parse(&bad, Path::new("w/workload.toml")).expect_err("bad");
        let text = error.to_string();
        assert!(text.starts_with("w/workload.toml:2:"), "{text}");
        assert!(text.contains("string"), "{text}");
    }

    #[test]
    fn unknown_fields_and_scorers_are_rejected_with_lines() {
        let bad = GOOD.replace(
            "documents = \"documents\"",
            "documents = \"documents\"\nshuffle = true",
        );
        let text = parse(&bad, Path::new("x.toml"))
            .expect_err("bad")
            .to_string();
        assert!(text.starts_with("x.toml:11:"), "{text}");
        assert!(text.contains("shuffle"), "{text}");
        let bad = GOOD.replace("qa-f1-v1", "qa-f2");
        let text = parse(&bad, Path::new("x.toml"))
            .expect_err("bad")
            .to_string();
        assert!(text.starts_with("x.toml:5:"), "{text}");
    }

    #[test]
    fn missing_kind_fields_are_named() {
        let bad = GOOD.replace("tasks = \"tasks.toml\"\n", "");
        let text = parse(&bad, Path::new("x.toml"))
            .expect_err("bad")
            .to_string();
        assert!(
            text.contains("field `format`") && text.contains("`tasks`"),
            "{text}"
        );
        // Regression (found by probing): a missing top-level field was put on the first key.
        let bad = GOOD.replace("scorer = \"qa-f1-v1\"\n", "");
        let text = parse(&bad, Path::new("x.toml"))
            .expect_err("bad")
            .to_string();
        assert!(
            text.contains("missing field `scorer`") && !text.contains("field `name`"),
            "{text}"
        );
        let bad = GOOD.replace("kind = \"qa\"", "kind = \"needle\"");
        let text = parse(&bad, Path::new("x.toml"))
            .expect_err("bad")
            .to_string();
        assert!(text.contains("[needle]"), "{text}");
    }
}
