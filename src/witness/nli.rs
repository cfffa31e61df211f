//! Optional NLI judge: an OpenAI-compatible `/v1/chat/completions` endpoint decides the claims
//! the deterministic pass leaves uncertain.
//!
//! It is off by default and never required: the claims are sent in batches under one latency
//! budget, and on any failure — endpoint down, timeout, error status, a reply that is not the
//! JSON asked for — every deterministic verdict is kept and the certificate says why. The API
//! key, when the endpoint needs one, is read from an environment variable named in the
//! settings; it is never stored.

use std::sync::{Arc, Once};
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
    .unwrap_or(Err(NliError::Timeout {
        budget_ms: settings.budget.as_millis(),
    }));
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

/// All batches run concurrently; the first failure fails the whole judgement (partial verdicts
/// are not mixed with deterministic ones). Dropping the set on timeout aborts the requests.
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
    let evidence: Arc<str> = Arc::from(evidence);
    let question: Option<Arc<str>> = question.map(Arc::from);
    let mut tasks = tokio::task::JoinSet::new();
    for (order, batch) in uncertain.chunks(settings.batch_size.max(1)).enumerate() {
        let claims: Vec<(usize, String)> = batch
            .iter()
            .map(|&i| (i, verification.claims[i].claim.text.clone()))
            .collect();
        let (client, settings, evidence, question) = (
            client.clone(),
            settings.clone(),
            evidence.clone(),
            question.clone(),
        );
        tasks.spawn(async move {
            let refs: Vec<(usize, &str)> = claims.iter().map(|(i, t)| (*i, t.as_str())).collect();
            let result = judge(&client, &settings, &evidence, question.as_deref(), &refs).await;
            (order, result)
        });
    }
    let mut batches: Vec<(usize, Vec<(usize, Label)>)> = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (order, result) =
            joined.map_err(|e| NliError::Client(format!("judge task failed: {e}")))?;
        batches.push((order, result?));
    }
    // Completion order varies; verdicts are applied in claim order so certificates are stable.
    batches.sort_by_key(|(order, _)| *order);
    Ok(batches
        .into_iter()
        .flat_map(|(_, verdicts)| verdicts)
        .collect())
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
fn parse_verdicts(
    content: &str,
    claims: &[(usize, &str)],
) -> Result<Vec<(usize, Label)>, NliError> {
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
    use crate::witness::certificate::NliStatus;
    use crate::witness::profile::Profile;
    use crate::witness::verify::check;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::extract::State;
    use axum::http::StatusCode;
    use axum::response::{IntoResponse, Response};
    use axum::routing::post;
    use axum::{Json, Router};

    const EVIDENCE: &str = "The Halden Observatory is on Mount Keld in Norway. It was founded \
        in 1921 by Ingrid Solberg.";
    /// One clear claim and one the deterministic pass is unsure of (a paraphrased verb).
    const ANSWER: &str = "The observatory was founded in 1921. The observatory stands atop the summit of Mount Keld.";

    #[derive(Clone, Copy)]
    enum Behaviour {
        Agree,
        ServerError,
        Garbage,
        Slow,
    }

    #[derive(Clone)]
    struct Fake {
        behaviour: Behaviour,
        calls: Arc<AtomicUsize>,
    }

    async fn completions(
        State(fake): State<Fake>,
        Json(body): Json<serde_json::Value>,
    ) -> Response {
        fake.calls.fetch_add(1, Ordering::SeqCst);
        let user = body["messages"][1]["content"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let ids: Vec<usize> = user
            .split("Claims:\n")
            .nth(1)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.split(':').next()?.trim().parse().ok())
            .collect();
        let content = match fake.behaviour {
            Behaviour::Agree | Behaviour::Slow => {
                if matches!(fake.behaviour, Behaviour::Slow) {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
                let verdicts: Vec<_> = ids
                    .iter()
                    .map(|id| json!({"id": id, "label": "supported"}))
                    .collect();
                json!({"verdicts": verdicts}).to_string()
            }
            Behaviour::ServerError => {
                return (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response();
            }
            Behaviour::Garbage => "I think they are all fine!".to_string(),
        };
        Json(json!({"choices": [{"message": {"role": "assistant", "content": content}}]}))
            .into_response()
    }

    async fn serve(behaviour: Behaviour) -> (String, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let app = Router::new()
            .route("/v1/chat/completions", post(completions))
            .with_state(Fake {
                behaviour,
                calls: calls.clone(),
            });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let address = listener.local_addr().expect("address");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (format!("http://{address}/v1"), calls)
    }

    fn settings(base_url: String) -> NliSettings {
        NliSettings {
            base_url,
            budget: Duration::from_millis(1500),
            batch_size: 1,
            ..NliSettings::default()
        }
    }

    fn uncertain_count(v: &Verification) -> usize {
        let threshold = v.profile.support_threshold();
        v.claims
            .iter()
            .filter(|c| is_uncertain(c, threshold))
            .count()
    }

    #[tokio::test]
    async fn judge_verdicts_are_applied() {
        let (url, calls) = serve(Behaviour::Agree).await;
        let mut v = check(ANSWER, EVIDENCE, None, Profile::Rag);
        assert_eq!(v.claims[1].label, Label::Unsupported, "{v:?}");
        let uncertain = uncertain_count(&v);
        assert!(uncertain >= 1);
        let record = refine(&mut v, EVIDENCE, None, &settings(url)).await;
        assert_eq!(record.status, NliStatus::Applied, "{record:?}");
        assert_eq!(record.claims_sent, uncertain);
        assert_eq!(
            calls.load(Ordering::SeqCst),
            uncertain,
            "one request per batch of one"
        );
        assert!(record.claims_changed >= 1);
        assert_eq!(v.claims[1].label, Label::Supported);
        assert!(
            v.claims[1]
                .reasons
                .iter()
                .any(|r| r.kind == ReasonKind::NliJudgement)
        );
    }

    async fn falls_back(behaviour: Option<Behaviour>) -> NliRecord {
        let url = match behaviour {
            Some(b) => serve(b).await.0,
            None => {
                // A port nobody listens on: bind, note it, close it.
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind");
                let address = listener.local_addr().expect("address");
                drop(listener);
                format!("http://{address}/v1")
            }
        };
        let mut v = check(ANSWER, EVIDENCE, None, Profile::Rag);
        let before = v.clone();
        let record = refine(&mut v, EVIDENCE, None, &settings(url)).await;
        assert_eq!(record.status, NliStatus::Fallback, "{record:?}");
        assert!(record.error.is_some());
        assert_eq!(v, before, "deterministic verdicts are kept untouched");
        record
    }

    #[tokio::test]
    async fn server_error_falls_back() {
        let record = falls_back(Some(Behaviour::ServerError)).await;
        assert!(record.error.unwrap_or_default().contains("500"));
    }

    #[tokio::test]
    async fn bad_reply_falls_back() {
        let record = falls_back(Some(Behaviour::Garbage)).await;
        assert!(record.error.unwrap_or_default().contains("JSON"));
    }

    #[tokio::test]
    async fn timeout_falls_back() {
        let record = falls_back(Some(Behaviour::Slow)).await;
        assert!(record.error.unwrap_or_default().contains("latency budget"));
    }

    #[tokio::test]
    async fn endpoint_down_falls_back() {
        falls_back(None).await;
    }

    #[tokio::test]
    async fn nothing_uncertain_sends_nothing() {
        let (url, calls) = serve(Behaviour::Agree).await;
        let mut v = check(
            "It was founded in 1921 by Ingrid Solberg.",
            EVIDENCE,
            None,
            Profile::Rag,
        );
        assert_eq!(uncertain_count(&v), 0, "{v:?}");
        let record = refine(&mut v, EVIDENCE, None, &settings(url)).await;
        assert_eq!(record.status, NliStatus::NotNeeded);
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn verdict_parsing_accepts_fences_and_rejects_gaps() {
        let claims = [(0, "a"), (2, "b")];
        let got = parse_verdicts(
            "```json\n{\"verdicts\": [{\"id\": 2, \"label\": \"contradicted\"}, {\"id\": 0, \"label\": \"Supported\"}]}\n```",
            &claims,
        )
        .expect("parses");
        assert_eq!(got, [(0, Label::Supported), (2, Label::Contradicted)]);
        assert!(
            parse_verdicts(
                "{\"verdicts\": [{\"id\": 0, \"label\": \"supported\"}]}",
                &claims
            )
            .is_err()
        );
        assert!(parse_verdicts("not json", &claims).is_err());
        assert!(parse_verdicts("{\"verdicts\": [{\"id\": 0, \"label\": \"maybe\"}, {\"id\": 2, \"label\": \"supported\"}]}", &claims).is_err());
    }
}
