//! `conversation` workloads: long multi-turn transcripts whose final question can only be
//! answered from an early turn. Each conversation opens with a fact exchange, then a seeded
//! sample of filler exchanges, then the question.

use std::path::Path;

use serde::Deserialize;

use super::spec::ConversationSource;
use super::{
    AnswerKind, Task, TaskContext, TaskIds, Turn, WorkloadError, data_path, line_at, read_text,
};
use crate::harness::text::SplitMix64;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConversationFile {
    conversation: Vec<ConversationEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConversationEntry {
    /// Spanned, so an empty or repeated id is reported at its own line.
    id: toml::Spanned<String>,
    /// The early user turn that holds the fact.
    fact: String,
    /// The assistant's acknowledgement.
    reply: String,
    question: String,
    answers: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FillerFile {
    exchange: Vec<Exchange>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Exchange {
    user: String,
    assistant: String,
}

fn parse_toml<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, WorkloadError> {
    parse_toml_text(path, &read_text(path)?)
}

fn parse_toml_text<T: serde::de::DeserializeOwned>(
    path: &Path,
    text: &str,
) -> Result<T, WorkloadError> {
    toml::from_str(text).map_err(|error| {
        let (line, column, message) = super::spec::describe_toml_error(text, &error);
        WorkloadError::Malformed {
            path: path.to_path_buf(),
            line,
            column,
            message,
        }
    })
}

pub(super) fn load(
    dir: &Path,
    _spec_path: &Path,
    source: &ConversationSource,
) -> Result<Vec<Task>, WorkloadError> {
    let conversations_path = data_path(dir, &source.conversations);
    let filler_path = data_path(dir, &source.filler);
    let conversations_text = read_text(&conversations_path)?;
    let conversations: ConversationFile =
        parse_toml_text(&conversations_path, &conversations_text)?;
    let filler: FillerFile = parse_toml(&filler_path)?;
    if filler.exchange.is_empty() {
        return Err(WorkloadError::Data {
            path: filler_path,
            message: "no [[exchange]] filler".into(),
        });
    }
    let mut tasks = Vec::new();
    let mut ids = TaskIds::default();
    for (position, entry) in conversations.conversation.into_iter().enumerate() {
        let line = line_at(&conversations_text, entry.id.span().start);
        let id = entry.id.into_inner();
        ids.check(&id, &conversations_path, line)?;
        let mut rng = SplitMix64::new(source.seed.wrapping_add(position as u64));
        let mut turns = vec![
            Turn {
                role: "user".into(),
                text: entry.fact.clone(),
            },
            Turn {
                role: "assistant".into(),
                text: entry.reply,
            },
        ];
        for _ in 0..source.filler_exchanges {
            let exchange = &filler.exchange[rng.below_modulo(filler.exchange.len())];
            turns.push(Turn {
                role: "user".into(),
                text: exchange.user.clone(),
            });
            turns.push(Turn {
                role: "assistant".into(),
                text: exchange.assistant.clone(),
            });
        }
        tasks.push(Task {
            id,
            question: entry.question,
            context: TaskContext::Transcript(turns),
            answer_kind: AnswerKind::Span,
            answers: entry.answers,
            evidence: vec![entry.fact],
            gold_files: Vec::new(),
        });
    }
    Ok(tasks)
}
