//! `needle` workloads: deterministic haystacks cut from any corpus, with a fact planted at a
//! chosen depth. Each (needle, haystack size, depth) is one task.

use std::path::Path;

use serde::Deserialize;

use super::spec::NeedleSource;
use super::{
    AnswerKind, Document, Task, TaskContext, TaskIds, WorkloadError, data_path, line_at, read_text,
};
use crate::harness::text::SplitMix64;
use crate::tokens::Tokenizer;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NeedleFile {
    needle: Vec<NeedleEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NeedleEntry {
    /// Spanned, so an empty or repeated id is reported at its own line.
    id: toml::Spanned<String>,
    /// The sentence planted in the haystack.
    fact: String,
    question: String,
    answer: String,
}

pub(super) fn load(
    dir: &Path,
    _spec_path: &Path,
    source: &NeedleSource,
) -> Result<Vec<Task>, WorkloadError> {
    let corpus_dir = data_path(dir, &source.corpus);
    let needles_path = data_path(dir, &source.needles);
    let needles_text = read_text(&needles_path)?;
    let needles: NeedleFile = toml::from_str(&needles_text).map_err(|error| {
        let (line, column, message) = super::spec::describe_toml_error(&needles_text, &error);
        WorkloadError::Malformed {
            path: needles_path.clone(),
            line,
            column,
            message,
        }
    })?;
    let mut ids = TaskIds::default();
    for needle in &needles.needle {
        let line = line_at(&needles_text, needle.id.span().start);
        ids.check(needle.id.get_ref(), &needles_path, line)?;
    }
    let mut paragraphs: Vec<String> = super::qa::read_documents(&corpus_dir)?
        .iter()
        .flat_map(|doc| {
            doc.text
                .split("\n\n")
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty() && !p.starts_with('#'))
                .collect::<Vec<_>>()
        })
        .collect();
    if paragraphs.is_empty() {
        return Err(WorkloadError::Data {
            path: corpus_dir,
            message: "the corpus has no paragraphs to build haystacks from".into(),
        });
    }
    SplitMix64::new(source.seed).shuffle(&mut paragraphs);
    let tokenizer = Tokenizer::default();
    let paragraph_tokens: Vec<usize> = paragraphs.iter().map(|p| tokenizer.count(p)).collect();
    let mut tasks = Vec::new();
    for needle in &needles.needle {
        for &size in &source.haystack_tokens {
            // The haystack cycles through the shuffled paragraphs until it reaches `size`.
            let mut chosen: Vec<&str> = Vec::new();
            let mut total = 0usize;
            let mut i = 0usize;
            while total < size {
                let k = i % paragraphs.len();
                chosen.push(&paragraphs[k]);
                total += paragraph_tokens[k];
                i += 1;
                // Separators merge with neighbouring text, so the sum only estimates; confirm
                // with a real count once the estimate is reached.
                if total >= size && tokenizer.count(&chosen.join("\n\n")) < size {
                    total = size - 1;
                }
            }
            for &depth in &source.depths {
                let at = ((depth * chosen.len() as f64).round() as usize).min(chosen.len());
                let mut parts: Vec<&str> = chosen.clone();
                parts.insert(at, &needle.fact);
                let text = parts.join("\n\n");
                tasks.push(Task {
                    id: format!(
                        "{}-t{size}-d{:03}",
                        needle.id.get_ref(),
                        (depth * 100.0).round() as u32
                    ),
                    question: needle.question.clone(),
                    context: TaskContext::Documents(vec![Document {
                        name: "haystack".into(),
                        text,
                    }]),
                    answer_kind: AnswerKind::Span,
                    answers: vec![needle.answer.clone()],
                    evidence: vec![needle.fact.clone()],
                    gold_files: Vec::new(),
                });
            }
        }
    }
    Ok(tasks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plants_the_fact_at_each_depth() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("corpus")).expect("mkdir");
        let text: String = (0..30)
            .map(|i| format!("Paragraph {i} talks about weather and rivers and hills.\n\n"))
            .collect();
        std::fs::write(dir.path().join("corpus/a.md"), text).expect("write");
        std::fs::write(
            dir.path().join("needles.toml"),
            "[[needle]]\nid = \"vault\"\nfact = \"The vault code is 4817.\"\nquestion = \"What is the vault code?\"\nanswer = \"4817\"\n",
        )
        .expect("write");
        let source = NeedleSource {
            corpus: "corpus".into(),
            needles: "needles.toml".into(),
            haystack_tokens: vec![200],
            depths: vec![0.0, 0.5, 1.0],
            seed: 3,
        };
        let tasks = load(dir.path(), Path::new("w.toml"), &source).expect("load");
        assert_eq!(tasks.len(), 3);
        let TaskContext::Documents(first) = &tasks[0].context else {
            panic!()
        };
        assert!(first[0].text.starts_with("The vault code is 4817."));
        let TaskContext::Documents(last) = &tasks[2].context else {
            panic!()
        };
        assert!(last[0].text.ends_with("The vault code is 4817."));
        let tokens = Tokenizer::default().count(&last[0].text);
        assert!(tokens >= 200, "{tokens}: {}", last[0].text);
        assert_eq!(tasks[1].id, "vault-t200-d050");
    }
}
