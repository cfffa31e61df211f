//! Modes and profiles: what the witness does with a verdict.
//!
//! The mode says what happens to the output (left alone, marked, or cut); the profile says how
//! strict the verdicts are: answer-bearing profiles (`rag`, `qa`, `benchmark_qa`, `code`) fail
//! closed in strict mode, conversational ones (`summary`, `chat`, `dialogue`) remove
//! contradictions but only warn on claims the evidence neither supports nor refutes.

use serde::{Deserialize, Serialize};

/// What the witness does to the output.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Output untouched; the certificate records the verdicts.
    #[default]
    Audit,
    /// Unsupported claims are marked inline (`[unverified: …]`).
    Annotate,
    /// Unsupported factual claims are removed.
    Strict,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Audit, Mode::Annotate, Mode::Strict];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Audit => "audit",
            Mode::Annotate => "annotate",
            Mode::Strict => "strict",
        }
    }
}

/// The kind of output being checked, which sets how strict verdicts are.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
#[clap(rename_all = "snake_case")]
pub enum Profile {
    /// Answers grounded in retrieved documents.
    #[default]
    Rag,
    /// Question answering over given evidence.
    Qa,
    /// Benchmark question answering: as `qa`, for scored runs.
    BenchmarkQa,
    /// Answers about code.
    Code,
    /// Summaries of the evidence.
    Summary,
    /// Open conversation.
    Chat,
    /// Multi-turn dialogue.
    Dialogue,
}

impl Profile {
    pub const ALL: [Profile; 7] = [
        Profile::Rag,
        Profile::Qa,
        Profile::BenchmarkQa,
        Profile::Code,
        Profile::Summary,
        Profile::Chat,
        Profile::Dialogue,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Rag => "rag",
            Profile::Qa => "qa",
            Profile::BenchmarkQa => "benchmark_qa",
            Profile::Code => "code",
            Profile::Summary => "summary",
            Profile::Chat => "chat",
            Profile::Dialogue => "dialogue",
        }
    }

    /// Whether claims the evidence does not support are treated as failures (removed in strict
    /// mode). Conversational profiles only warn on them.
    pub fn fails_closed(self) -> bool {
        matches!(
            self,
            Profile::Rag | Profile::Qa | Profile::BenchmarkQa | Profile::Code
        )
    }

    /// Lowest support score at which a claim counts as supported. Question answering extracts
    /// its answers, so nearly every answer word must sit in one aligned evidence span; RAG and
    /// code answers paraphrase more; summaries and conversation most.
    pub fn support_threshold(self) -> f64 {
        match self {
            Profile::Qa | Profile::BenchmarkQa => 0.9,
            Profile::Rag | Profile::Code => 0.8,
            Profile::Summary | Profile::Chat | Profile::Dialogue => 0.5,
        }
    }
}

impl std::fmt::Display for Profile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_are_snake_case() {
        for profile in Profile::ALL {
            let wire = serde_json::to_value(profile).expect("serialise");
            assert_eq!(wire, profile.as_str());
        }
        for mode in Mode::ALL {
            assert_eq!(
                serde_json::to_value(mode).expect("serialise"),
                mode.as_str()
            );
        }
        assert!(Profile::Code.fails_closed() && !Profile::Dialogue.fails_closed());
    }
}
