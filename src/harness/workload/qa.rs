//! `qa` workloads: built-in documents with hand-written questions, or a HaluEval-format file
//! turned into a distractor setting (each task's own evidence mixed with passages of N other
//! tasks, chosen and ordered by the seed in the workload file).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::spec::{DistractorChoice, QaFormat, QaSource};
use super::{
    AnswerKind, Document, Task, TaskContext, TaskIds, WorkloadError, check_evidence, data_path,
    line_at, read_text,
};
use crate::harness::text::{self, SplitMix64};

pub(super) fn load(
    dir: &Path,
    spec_path: &Path,
    qa: &QaSource,
    options: &super::LoadOptions,
) -> Result<Vec<Task>, WorkloadError> {
    match qa.format {
        QaFormat::Builtin => load_builtin(dir, qa),
        QaFormat::Halueval => load_halueval(dir, spec_path, qa),
        QaFormat::GitDocs => load_git_docs(dir, qa, options),
    }
}

/// Extensions a `git_docs` workload reads when it names none.
const DOC_EXTENSIONS: [&str; 3] = ["rst", "md", "txt"];

/// The text files under `paths` of commit `rev` of the workload's repository, sorted by path.
fn git_documents(
    dir: &Path,
    qa: &QaSource,
    options: &super::LoadOptions,
) -> Result<Vec<Document>, WorkloadError> {
    // spec::parse guarantees repo, rev and paths for this format.
    let repo = super::code::open_named_repo(
        dir,
        qa.repo.as_deref().unwrap_or_default(),
        qa.repo_env.as_deref(),
        options,
    )?;
    let rev = qa.rev.as_deref().unwrap_or_default();
    let prefixes = qa.paths.clone().unwrap_or_default();
    let extensions: Vec<String> = qa
        .extensions
        .clone()
        .unwrap_or_else(|| DOC_EXTENSIONS.iter().map(|e| e.to_string()).collect());
    let files = crate::git::tree_texts(&repo, rev, |path, _| {
        prefixes.iter().any(|p| path.starts_with(p.as_str()))
            && path
                .rsplit_once('.')
                .is_some_and(|(_, ext)| extensions.iter().any(|e| e == ext))
    })
    .map_err(|error| WorkloadError::Data {
        path: repo.clone(),
        message: format!("cannot read the files of {rev}: {error}"),
    })?;
    let mut documents: Vec<Document> = files
        .into_iter()
        .map(|(name, text)| Document { name, text })
        .collect();
    documents.sort_by(|a, b| a.name.cmp(&b.name));
    if documents.is_empty() {
        return Err(WorkloadError::Data {
            path: repo,
            message: format!(
                "no {} files under {} at {rev}",
                extensions.join("/"),
                prefixes.join(", ")
            ),
        });
    }
    Ok(documents)
}

fn load_git_docs(
    dir: &Path,
    qa: &QaSource,
    options: &super::LoadOptions,
) -> Result<Vec<Task>, WorkloadError> {
    let documents = git_documents(dir, qa, options)?;
    let tasks_path = data_path(dir, qa.tasks.as_deref().unwrap_or("tasks.toml"));
    tasks_over(&tasks_path, documents)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskFile {
    task: Vec<BuiltinTask>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BuiltinTask {
    /// Spanned, so an empty or repeated id is reported at its own line.
    id: toml::Spanned<String>,
    question: String,
    answers: Vec<String>,
    evidence: Vec<String>,
}

/// Every `*.md` / `*.txt` file of `dir`, sorted by file name, as documents.
pub(crate) fn read_documents(dir: &Path) -> Result<Vec<Document>, WorkloadError> {
    let entries = std::fs::read_dir(dir).map_err(|source| WorkloadError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| e == "md" || e == "txt")
        })
        .collect();
    paths.sort();
    paths
        .iter()
        .map(|path| {
            Ok(Document {
                name: path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                text: read_text(path)?,
            })
        })
        .collect()
}

fn load_builtin(dir: &Path, qa: &QaSource) -> Result<Vec<Task>, WorkloadError> {
    // spec::parse guarantees both fields for the builtin format.
    let tasks_path = data_path(dir, qa.tasks.as_deref().unwrap_or("tasks.toml"));
    let documents_dir = data_path(dir, qa.documents.as_deref().unwrap_or("documents"));
    let documents = read_documents(&documents_dir)?;
    if documents.is_empty() {
        return Err(WorkloadError::Data {
            path: documents_dir,
            message: "no *.md or *.txt documents".into(),
        });
    }
    tasks_over(&tasks_path, documents)
}

/// The tasks of a `tasks.toml` (`[[task]]`: id, question, answers, evidence), each over all of
/// `documents`; every evidence span must occur in them.
fn tasks_over(tasks_path: &Path, documents: Vec<Document>) -> Result<Vec<Task>, WorkloadError> {
    let tasks_path = tasks_path.to_path_buf();
    let text = read_text(&tasks_path)?;
    let file: TaskFile = toml::from_str(&text).map_err(|error| {
        let (line, column, message) = super::spec::describe_toml_error(&text, &error);
        WorkloadError::Malformed {
            path: tasks_path.clone(),
            line,
            column,
            message,
        }
    })?;
    let mut tasks = Vec::with_capacity(file.task.len());
    let mut ids = TaskIds::default();
    for raw in file.task {
        let line = line_at(&text, raw.id.span().start);
        let id = raw.id.into_inner();
        ids.check(&id, &tasks_path, line)?;
        if raw.answers.is_empty() || raw.evidence.is_empty() {
            return Err(WorkloadError::Task {
                path: tasks_path.clone(),
                line,
                task_id: id,
                message: "needs at least one answer and one evidence span".into(),
            });
        }
        let task = Task {
            id,
            question: raw.question,
            context: TaskContext::Documents(documents.clone()),
            answer_kind: AnswerKind::Span,
            answers: raw.answers,
            evidence: raw.evidence,
            gold_files: Vec::new(),
        };
        check_evidence(&task, &tasks_path, line)?;
        tasks.push(task);
    }
    Ok(tasks)
}

#[derive(Debug, Deserialize)]
struct HaluEvalItem {
    knowledge: String,
    question: String,
    right_answer: String,
}

/// The HaluEval file a workload reads: `$file_env` when set, else `file`.
pub fn halueval_path(dir: &Path, qa: &QaSource) -> PathBuf {
    if let Some(var) = &qa.file_env
        && let Some(value) = std::env::var_os(var).filter(|v| !v.is_empty())
    {
        return PathBuf::from(value);
    }
    let candidates: Vec<PathBuf> = qa
        .file
        .as_ref()
        .map(|f| {
            f.items()
                .into_iter()
                .map(|item| data_path(dir, item))
                .collect()
        })
        .unwrap_or_default();
    candidates
        .iter()
        .find(|path| path.is_file())
        .or(candidates.first())
        .cloned()
        .unwrap_or_default()
}

fn load_halueval(dir: &Path, spec_path: &Path, qa: &QaSource) -> Result<Vec<Task>, WorkloadError> {
    let path = halueval_path(dir, qa);
    let text = std::fs::read_to_string(&path).map_err(|source| WorkloadError::Data {
        path: spec_path.to_path_buf(),
        message: format!(
            "field `file`: cannot read the HaluEval file {}: {source}; `file` is relative to the workload folder {}{}",
            path.display(),
            dir.display(),
            qa.file_env
                .as_ref()
                .map(|v| {
                    if std::env::var_os(v).is_some_and(|value| !value.is_empty()) {
                        format!(" ({v} is set and named this file: fix it or unset it)")
                    } else {
                        format!("; put the file there or set {v}=/path/to/dev.jsonl")
                    }
                })
                .unwrap_or_default()
        ),
    })?;
    let mut items = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let item: HaluEvalItem =
            serde_json::from_str(crate::text::without_bom(line)).map_err(|error| WorkloadError::Task {
                path: path.clone(),
                line: index + 1,
                task_id: format!("halueval-{:04}", index + 1),
                message: format!(
                    "not a HaluEval item (needs string fields knowledge, question, right_answer): {error}"
                ),
            })?;
        items.push((index + 1, item));
        if qa.limit.is_some_and(|limit| items.len() >= limit) {
            break;
        }
    }
    let distractors = qa
        .distractors
        .unwrap_or(0)
        .min(items.len().saturating_sub(1));
    let seed = qa.seed.unwrap_or(0);
    let passage_scores = Bm25Passages::new(items.iter().map(|(_, item)| item.knowledge.as_str()));
    let mut tasks = Vec::with_capacity(items.len());
    for (position, (line, item)) in items.iter().enumerate() {
        // One generator per task, seeded by the workload seed and the task's position, so a
        // task's context does not change when items are appended to the file.
        let mut rng = SplitMix64::new(seed ^ (position as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut others: Vec<usize> = (0..items.len()).filter(|&i| i != position).collect();
        match qa.distractor_choice.unwrap_or_default() {
            DistractorChoice::Random => {
                // Partial Fisher–Yates: the first `distractors` slots are a uniform sample.
                for slot in 0..distractors {
                    let pick = slot + rng.below_modulo(others.len() - slot);
                    others.swap(slot, pick);
                }
            }
            DistractorChoice::Bm25 => {
                // Hard negatives: the passages a retriever would confuse with the answer's.
                let scores = passage_scores.score(&item.question);
                others.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]).then(a.cmp(&b)));
            }
        }
        let mut chosen: Vec<usize> = others[..distractors].to_vec();
        chosen.push(position);
        rng.shuffle(&mut chosen);
        let documents = chosen
            .iter()
            .enumerate()
            .map(|(k, &i)| Document {
                name: format!("passage-{:02}", k + 1),
                text: items[i].1.knowledge.trim().to_string(),
            })
            .collect();
        let task = Task {
            id: format!("halueval-{line:04}"),
            question: item.question.trim().to_string(),
            context: TaskContext::Documents(documents),
            answer_kind: AnswerKind::Span,
            answers: vec![item.right_answer.trim().to_string()],
            evidence: vec![item.knowledge.trim().to_string()],
            gold_files: Vec::new(),
        };
        tasks.push(task);
    }
    Ok(tasks)
}

/// Okapi BM25 (k1 1.2, b 0.75) over passages, on stemmed content words.
struct Bm25Passages {
    passages: Vec<std::collections::HashMap<String, usize>>,
    lengths: Vec<f64>,
    average: f64,
}

impl Bm25Passages {
    fn new<'a>(passages: impl Iterator<Item = &'a str>) -> Self {
        let mut counted = Vec::new();
        let mut lengths = Vec::new();
        for passage in passages {
            let words = text::content_words(passage);
            lengths.push(words.len() as f64);
            let mut counts = std::collections::HashMap::new();
            for word in words {
                *counts.entry(text::stem(&word).to_string()).or_insert(0) += 1;
            }
            counted.push(counts);
        }
        let average = (lengths.iter().sum::<f64>() / lengths.len().max(1) as f64).max(1.0);
        Self {
            passages: counted,
            lengths,
            average,
        }
    }

    /// Every passage's score for `query`.
    fn score(&self, query: &str) -> Vec<f64> {
        let n = self.passages.len() as f64;
        let mut terms: Vec<String> = text::content_words(query)
            .iter()
            .map(|w| text::stem(w).to_string())
            .collect();
        terms.sort();
        terms.dedup();
        let idf: Vec<f64> = terms
            .iter()
            .map(|t| {
                let df = self.passages.iter().filter(|p| p.contains_key(t)).count() as f64;
                ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
            })
            .collect();
        self.passages
            .iter()
            .zip(&self.lengths)
            .map(|(counts, &length)| {
                terms
                    .iter()
                    .zip(&idf)
                    .map(|(t, idf)| {
                        let tf = counts.get(t).copied().unwrap_or(0) as f64;
                        idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / self.average))
                    })
                    .sum()
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn halueval_fixture(dir: &Path, n: usize) -> PathBuf {
        let path = dir.join("mini.jsonl");
        let mut text = String::new();
        for i in 0..n {
            text.push_str(
                &serde_json::json!({
                    "knowledge": format!("Town {i} lies on river R{i}. Its mayor is Mayor{i}."),
                    "question": format!("Who is the mayor of Town {i}?"),
                    "right_answer": format!("Mayor{i}"),
                    "hallucinated_answer": "nobody"
                })
                .to_string(),
            );
            text.push('\n');
        }
        std::fs::write(&path, text).expect("write");
        path
    }

    fn source(file: &Path, distractors: usize) -> QaSource {
        QaSource {
            format: QaFormat::Halueval,
            tasks: None,
            documents: None,
            file: Some(super::super::spec::OneOrMany::One(
                file.display().to_string(),
            )),
            file_env: None,
            distractors: Some(distractors),
            seed: Some(7),
            limit: None,
            distractor_choice: None,
            repo: None,
            repo_env: None,
            rev: None,
            paths: None,
            extensions: None,
        }
    }

    #[test]
    fn halueval_mixes_own_evidence_with_distractors_deterministically() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = halueval_fixture(dir.path(), 10);
        let qa = source(&file, 3);
        let a = load_halueval(dir.path(), &dir.path().join("w.toml"), &qa).expect("load");
        let b = load_halueval(dir.path(), &dir.path().join("w.toml"), &qa).expect("load");
        assert_eq!(a, b);
        assert_eq!(a.len(), 10);
        for task in &a {
            let TaskContext::Documents(docs) = &task.context else {
                panic!("documents")
            };
            assert_eq!(docs.len(), 4);
            let own = docs.iter().filter(|d| d.text == task.evidence[0]).count();
            assert_eq!(own, 1, "own evidence exactly once");
        }
        // Distractor choice differs between tasks.
        assert_ne!(a[0].context.render(), a[1].context.render());
    }

    #[test]
    fn bm25_distractors_are_the_passages_most_like_the_question() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = halueval_fixture(dir.path(), 10);
        // Item 3's passage shares "river" and "R5"-like words with none; make item 7's passage
        // a near miss of item 2's question.
        let mut text = std::fs::read_to_string(&file).expect("read");
        text.push_str(
            &serde_json::json!({
                "knowledge": "The mayor of Town 2 in the old days was someone else; Town 2 mayor elections are yearly.",
                "question": "Which year?",
                "right_answer": "none",
            })
            .to_string(),
        );
        text.push('\n');
        std::fs::write(&file, text).expect("write");
        let mut qa = source(&file, 1);
        qa.distractor_choice = Some(DistractorChoice::Bm25);
        let tasks = load_halueval(dir.path(), &dir.path().join("w.toml"), &qa).expect("load");
        let TaskContext::Documents(docs) = &tasks[2].context else {
            panic!("documents")
        };
        assert!(
            docs.iter().any(|d| d.text.contains("old days")),
            "the hard negative of `Who is the mayor of Town 2?` is the other Town 2 passage"
        );
    }

    #[test]
    fn bad_line_is_reported_with_its_number() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("bad.jsonl");
        std::fs::write(
            &file,
            "{\"knowledge\":\"k\",\"question\":\"q\",\"right_answer\":\"a\"}\n{\"question\": 3}\n",
        )
        .expect("write");
        let error = load_halueval(dir.path(), &dir.path().join("w.toml"), &source(&file, 1))
            .expect_err("bad");
        assert!(error.to_string().contains("bad.jsonl:2:"), "{error}");
        let missing = load_halueval(
            dir.path(),
            &dir.path().join("w.toml"),
            &source(&dir.path().join("nope.jsonl"), 1),
        )
        .expect_err("missing");
        assert!(missing.to_string().contains("nope.jsonl"), "{missing}");
    }

    #[test]
    fn git_docs_reads_one_commits_files_under_the_paths() {
        let repo = tempfile::tempdir().expect("tempdir");
        crate::harness::workload::code::tests::fixture_repo(repo.path());
        let rev = String::from_utf8(
            std::process::Command::new("git")
                .arg("-C")
                .arg(repo.path())
                .args(["rev-parse", "HEAD~3"])
                .output()
                .expect("git")
                .stdout,
        )
        .expect("utf-8");
        let dir = tempfile::tempdir().expect("tempdir");
        let workload = dir.path().join("workload.toml");
        let write = |evidence: &str| {
            std::fs::write(
                dir.path().join("tasks.toml"),
                format!(
                    "[[task]]\nid = \"split\"\nquestion = \"What does parse split on?\"\nanswers = [\"','\"]\nevidence = [\"{evidence}\"]\n"
                ),
            )
            .expect("tasks");
        };
        std::fs::write(
            &workload,
            format!(
                "name = \"docs\"\nversion = \"1\"\nkind = \"qa\"\nscorer = \"qa-f1-v1\"\n[qa]\nformat = \"git_docs\"\ntasks = \"tasks.toml\"\nrepo = \"{}\"\nrev = \"{}\"\npaths = [\"src/\"]\nextensions = [\"py\"]\n",
                repo.path().display(),
                rev.trim()
            ),
        )
        .expect("workload");
        let options = super::super::LoadOptions {
            cache_dir: dir.path().join("cache"),
        };
        // The first commit's parser, not the one at HEAD.
        write("return line.split(',')");
        let loaded = super::super::load_file(&workload, &options).expect("loads");
        let TaskContext::Documents(documents) = &loaded.tasks[0].context else {
            panic!("documents");
        };
        let names: Vec<&str> = documents.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["src/parse.py", "src/report.py"]);
        write("f.strip() for f in line.split(',')");
        let error = super::super::load_file(&workload, &options)
            .expect_err("HEAD's text is not in that commit")
            .to_string();
        assert!(error.contains("does not occur"), "{error}");
    }
}
