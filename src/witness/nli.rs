//! Optional NLI judge: an OpenAI-compatible `/v1/chat/completions` endpoint decides the claims
//! the deterministic pass leaves uncertain.
//!
//! It is off by default and never required: the claims are sent in batches under one latency
//! budget, and on any failure — endpoint down, timeout, error status, a reply that is not the
//! JSON asked for — every deterministic verdict is kept and the certificate says why. The API
//! key, when the endpoint needs one, is read from an environment variable named in the
//! settings; it is never stored.

use std::sync::Once;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::json;

use super::certificate::{NliRecord, NliStatus};
use super::verify::{ClaimVerdict, Label, Reason, ReasonKind, Verification};

/// Default base URL: a local OpenAI-compatible server (e.g. llama.cpp's `llama-server`).
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:8080/v1";
/// Default model name sent to the endpoint.
pub const DEFAULT_MODEL: &str = "nli";
/// Default name of the environment variable holding the endpoint's API key.
pub const DEFAULT_API_KEY_ENV: &str = "SVC_NLI_API_KEY";
/// Default latency budget for all batches together.
pub const DEFAULT_BUDGET: Duration = Duration::from_millis(4000);
/// Default claims per request.
pub const DEFAULT_BATCH_SIZE: usize = 8;

/// Deterministic scores at or above this (and below the support threshold plus
/// [`SUPPORTED_MARGIN`]) count as uncertain; lower scores are clear failures.
const UNCERTAIN_FLOOR: f64 = 0.3;
/// Supported claims this close above the threshold are still worth a second opinion.
const SUPPORTED_MARGIN: f64 = 0.1;
/// Longest evidence text sent, in bytes; longer evidence is cut at a character boundary and
/// the certificate's NLI record says so through `claims_sent` (the judge sees a prefix only).
const MAX_EVIDENCE_BYTES: usize = 24_000;

/// Where and how to ask the judge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NliSettings {
    /// Base URL ending in `/v1`; `/chat/completions` is appended.
    pub base_url: String,
    pub model: String,
    /// Name of the environment variable with the API key (sent as a bearer token when set).
    pub api_key_env: String,
    /// Latency budget for all batches together.
    pub budget: Duration,
    pub batch_size: usize,
}

impl Default for NliSettings {
    fn default() -> Self {
        Self {
            base_url: DEFAULT_BASE_URL.to_string(),
            model: DEFAULT_MODEL.to_string(),
            api_key_env: DEFAULT_API_KEY_ENV.to_string(),
            budget: DEFAULT_BUDGET,
            batch_size: DEFAULT_BATCH_SIZE,
        }
    }
}

/// Why the judge could not be used.
#[derive(Debug, thiserror::Error)]
pub enum NliError {
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
    #[error("request to {url} failed: {message}")]
    Transport { url: String, message: String },
    #[error("no reply within the latency budget of {budget_ms} ms")]
    Timeout { budget_ms: u128 },
    #[error("{url} answered HTTP {status}")]
    Status { url: String, status: u16 },
    #[error("the reply is not the JSON verdict list asked for: {0}")]
    BadReply(String),
}

static RUSTLS_PROVIDER: Once = Once::new();

/// Install the ring crypto provider for rustls, once per process, before any client is built.
pub fn install_crypto_provider() {
    RUSTLS_PROVIDER.call_once(|| {
        // Fails only when another provider is already installed, which is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Whether the deterministic verdict is uncertain enough to ask the judge.
pub fn is_uncertain(verdict: &ClaimVerdict, threshold: f64) -> bool {
    match verdict.label {
        Label::Unsupported => verdict.score >= UNCERTAIN_FLOOR,
        Label::Supported => verdict.score < threshold + SUPPORTED_MARGIN,
        // Contradictions rest on explicit evidence (a number, a negation, a name).
        Label::Contradicted | Label::NotVerifiable => false,
    }
}

/// Ask the judge about the uncertain claims of `verification` and apply its verdicts. Never
/// fails: on any error the deterministic verdicts stay and the record says why.
pub async fn refine(
    verification: &mut Verification,
    evidence: &str,
    question: Option<&str>,
    settings: &NliSettings,
) -> NliRecord {
    let threshold = verification.profile.support_threshold();
    let uncertain: Vec<usize> = verification
        .claims
        .iter()
        .enumerate()
        .filter(|(_, c)| is_uncertain(c, threshold))
        .map(|(i, _)| i)
        .collect();
    let mut record = NliRecord {
        status: NliStatus::NotNeeded,
        endpoint: Some(settings.base_url.clone()),
        model: Some(settings.model.clone()),
        claims_sent: 0,
        claims_changed: 0,
        latency_ms: None,
        error: None,
    };
    if uncertain.is_empty() {
        return record;
    }
    record.claims_sent = uncertain.len();
    let started = Instant::now();
    let result = tokio::time::timeout(
        settings.budget,
        judge_all(verification, &uncertain, evidence, question, settings),
    )
    .await
    .unwrap_or_else(|_| {
        Err(NliError::Timeout {
            budget_ms: settings.budget.as_millis(),
        })
    });
    record.latency_ms = Some(started.elapsed().as_millis() as u64);
    match result {
        Ok(judgements) => {
            record.status = NliStatus::Applied;
            for (index, label) in judgements {
                let claim = &mut verification.claims[index];
                if claim.label != label {
                    record.claims_changed += 1;
                }
                claim.reasons.push(Reason {
                    kind: ReasonKind::NliJudgement,
                    detail: format!(
                        "the NLI judge says {} (deterministic: {})",
                        label.as_str(),
                        claim.label.as_str()
                    ),
                });
                claim.score = match label {
                    Label::Supported => claim.score.max(threshold),
                    Label::Contradicted => claim.score.min(UNCERTAIN_FLOOR * 0.5),
                    _ => claim.score.min(threshold * 0.9),
                };
                claim.label = label;
            }
        }
        Err(error) => {
            record.status = NliStatus::Fallback;
            record.error = Some(error.to_string());
        }
    }
    record
}

async fn judge_all(
    verification: &Verification,
    uncertain: &[usize],
    evidence: &str,
    question: Option<&str>,
    settings: &NliSettings,
) -> Result<Vec<(usize, Label)>, NliError> {
    install_crypto_provider();
    let client = reqwest::Client::builder()
        .build()
        .map_err(|e| NliError::Client(e.to_string()))?;
    let mut out = Vec::with_capacity(uncertain.len());
    for batch in uncertain.chunks(settings.batch_size.max(1)) {
        let claims: Vec<(usize, &str)> = batch
            .iter()
            .map(|&i| (i, verification.claims[i].claim.text.as_str()))
            .collect();
        out.extend(judge(&client, settings, evidence, question, &claims).await?);
    }
    Ok(out)
}

#[derive(Deserialize)]
struct ChatReply {
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    message: Message,
}

#[derive(Deserialize)]
struct Message {
    content: String,
}

#[derive(Deserialize)]
struct VerdictList {
    verdicts: Vec<VerdictItem>,
}

#[derive(Deserialize)]
struct VerdictItem {
    id: usize,
    label: String,
}

const SYSTEM_PROMPT: &str = "You check claims against evidence. For each claim decide: \
\"supported\" if the evidence states or directly implies it, \"contradicted\" if the evidence \
states something incompatible with it, \"unsupported\" otherwise. Use only the evidence. Reply \
with JSON only, in the form {\"verdicts\": [{\"id\": <claim id>, \"label\": \"supported\" | \
\"contradicted\" | \"unsupported\"}]}, one entry per claim.";

/// One request for one batch of `(claim index, claim text)`.
async fn judge(
    client: &reqwest::Client,
    settings: &NliSettings,
    evidence: &str,
    question: Option<&str>,
    claims: &[(usize, &str)],
) -> Result<Vec<(usize, Label)>, NliError> {
    let url = format!(
        "{}/chat/completions",
        settings.base_url.trim_end_matches('/')
    );
    let mut cut = evidence.len().min(MAX_EVIDENCE_BYTES);
    while !evidence.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut user = format!("Evidence:\n{}\n\n", &evidence[..cut]);
    if let Some(question) = question {
        user.push_str(&format!("Question: {question}\n\n"));
    }
    user.push_str("Claims:\n");
    for (id, text) in claims {
        user.push_str(&format!("{id}: {text}\n"));
    }
    let body = json!({
        "model": settings.model,
        "temperature": 0,
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": user},
        ],
    });
    let mut request = client.post(&url).json(&body);
    if let Some(key) = std::env::var_os(&settings.api_key_env).filter(|k| !k.is_empty()) {
        request = request.bearer_auth(key.to_string_lossy());
    }
    let response = request.send().await.map_err(|e| NliError::Transport {
        url: url.clone(),
        message: e.to_string(),
    })?;
    let status = response.status();
    if !status.is_success() {
        return Err(NliError::Status {
            url,
            status: status.as_u16(),
        });
    }
    let reply: ChatReply = response
        .json()
        .await
        .map_err(|e| NliError::BadReply(e.to_string()))?;
    let content = reply
        .choices
        .first()
        .map(|c| c.message.content.as_str())
        .ok_or_else(|| NliError::BadReply("no choices".into()))?;
    parse_verdicts(content, claims)
}

/// Parse the judge's JSON (optionally inside a Markdown code fence); every claim sent must get
/// exactly one known label.
fn parse_verdicts(content: &str, claims: &[(usize, &str)]) -> Result<Vec<(usize, Label)>, NliError> {
    let trimmed = content.trim();
    let body = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .map(|rest| rest.trim_end().trim_end_matches("```"))
        .unwrap_or(trimmed);
    let list: VerdictList =
        serde_json::from_str(body.trim()).map_err(|e| NliError::BadReply(e.to_string()))?;
    let mut out = Vec::with_capacity(claims.len());
    for (id, _) in claims {
        let item = list
            .verdicts
            .iter()
            .find(|v| v.id == *id)
            .ok_or_else(|| NliError::BadReply(format!("no verdict for claim {id}")))?;
        let label = match item.label.trim().to_ascii_lowercase().as_str() {
            "supported" | "entailment" => Label::Supported,
            "contradicted" | "contradiction" => Label::Contradicted,
            "unsupported" | "neutral" => Label::Unsupported,
            other => {
                return Err(NliError::BadReply(format!(
                    "claim {id}: unknown label {other:?}"
                )));
            }
        };
        out.push((*id, label));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_parsing_accepts_fences_and_rejects_gaps() {
        let claims = [(0, "a"), (2, "b")];
        let got = parse_verdicts(
            "```json\n{\"verdicts\": [{\"id\": 2, \"label\": \"contradicted\"}, {\"id\": 0, \"label\": \"Supported\"}]}\n```",
            &claims,
        )
        .expect("parses");
        assert_eq!(got, [(0, Label::Supported), (2, Label::Contradicted)]);
        assert!(parse_verdicts("{\"verdicts\": [{\"id\": 0, \"label\": \"supported\"}]}", &claims).is_err());
        assert!(parse_verdicts("not json", &claims).is_err());
        assert!(parse_verdicts("{\"verdicts\": [{\"id\": 0, \"label\": \"maybe\"}, {\"id\": 2, \"label\": \"supported\"}]}", &claims).is_err());
    }
}
