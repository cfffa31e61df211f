//! The two-way chat bot (SPEC §6.1), speaking the Telegram Bot API: long polling with
//! `getUpdates`, answers with `sendMessage`. `SVC_BOT_TOKEN` enables it; `SVC_BOT_API`
//! replaces the API's base URL (a self-hosted Bot API server, or a local fake in tests).
//!
//! Commands, answered in the chat they came from, from the state directory's real state:
//!
//! | command | answer |
//! |---|---|
//! | `/status` | skills (promoted, draft), open gaps, the last dream cycle, lifetime savings and learning spend, recorded runs, delivery counters |
//! | `/skills` | each skill: id, status, what it includes and when |
//! | `/gaps` | each gap: file, miss count, chunks |
//! | `/dream` | runs one dream cycle now and answers with what it changed (its events are delivered as usual) |
//! | `/help`, `/start` | the list of commands |
//!
//! A command may carry the bot's name (`/status@svc_bot`), as Telegram sends in groups.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::evolution::{self, DreamSettings, skills::SkillStatus, skills::SkillStore, spend};
use super::notify::{Log, Notifier};

/// The Bot API's public base URL.
pub const DEFAULT_BOT_API: &str = "https://api.telegram.org";

/// Resolved bot settings.
#[derive(Debug, Clone)]
pub struct BotSettings {
    pub token: String,
    pub api: String,
    pub home: PathBuf,
    pub dream: DreamSettings,
    /// How long one `getUpdates` call waits for a message (long polling).
    pub poll_timeout: Duration,
    /// First wait after a failed poll; doubles up to 30 s.
    pub first_backoff: Duration,
}

impl BotSettings {
    /// From `SVC_BOT_TOKEN` and `SVC_BOT_API`; `None` without a token, an error naming the
    /// variable when the API is no http(s) URL.
    pub fn from_env(home: &Path, dream: DreamSettings) -> Result<Option<Self>, String> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let Some(token) = var(super::SVC_BOT_TOKEN) else {
            return Ok(None);
        };
        let api = var(super::SVC_BOT_API).unwrap_or_else(|| DEFAULT_BOT_API.to_string());
        super::notify::check_http_url(super::SVC_BOT_API, &api, DEFAULT_BOT_API)?;
        Ok(Some(Self {
            token,
            api,
            home: home.to_path_buf(),
            dream,
            poll_timeout: Duration::from_secs(30),
            first_backoff: Duration::from_secs(1),
        }))
    }

    fn method(&self, name: &str) -> String {
        format!(
            "{}/bot{}/{name}",
            self.api.trim_end_matches('/'),
            self.token
        )
    }
}

#[derive(Debug, Deserialize)]
struct Updates {
    ok: bool,
    #[serde(default)]
    result: Vec<Update>,
    #[serde(default)]
    description: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Update {
    update_id: i64,
    #[serde(default)]
    message: Option<Message>,
}

#[derive(Debug, Deserialize)]
struct Message {
    chat: Chat,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Chat {
    id: i64,
}

/// The commands the bot knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Status,
    Skills,
    Gaps,
    Dream,
    Help,
}

impl Command {
    /// Parses a message; `None` when it is not a command (plain text is ignored).
    pub fn parse(text: &str) -> Option<Result<Command, String>> {
        let word = text.split_whitespace().next()?;
        let name = word.strip_prefix('/')?;
        let name = name.split('@').next().unwrap_or(name);
        Some(match name {
            "status" => Ok(Command::Status),
            "skills" => Ok(Command::Skills),
            "gaps" => Ok(Command::Gaps),
            "dream" => Ok(Command::Dream),
            "help" | "start" => Ok(Command::Help),
            other => Err(other.to_string()),
        })
    }
}

const HELP: &str = "svc bot commands:\n/status: skills, gaps, last dream cycle, savings and learning spend\n/skills: the skills and their status\n/gaps: files selection keeps missing\n/dream: run one dream cycle now";

/// The answer to `command` for the state directory of `settings` (blocking: reads state, and
/// `/dream` runs a cycle whose events go to `notifier`).
pub fn answer(
    command: Command,
    home: &Path,
    dream: DreamSettings,
    notifier: &Notifier,
    chat_id: i64,
) -> String {
    let result = match command {
        Command::Help => Ok(HELP.to_string()),
        Command::Status => status(home, dream, notifier, chat_id),
        Command::Skills => skills(home),
        Command::Gaps => gaps(home, dream),
        Command::Dream => run_dream(home, dream, notifier),
    };
    result.unwrap_or_else(|e| format!("svc: cannot answer: {e}"))
}

fn status(
    home: &Path,
    dream: DreamSettings,
    notifier: &Notifier,
    chat_id: i64,
) -> Result<String, evolution::EvolutionError> {
    let store = SkillStore::load(home)?;
    let promoted = store
        .all()
        .filter(|s| s.status == SkillStatus::Promoted)
        .count();
    let drafts = store.all().count() - promoted;
    let (observed, gaps) = evolution::current_gaps(home, dream.threshold)?;
    let (savings, _) = spend::lifetime_savings(home);
    let spent = spend::lifetime_spend(&evolution::trace::read(home)?);
    let last = match evolution::last_dream(home)? {
        Some(d) => format!(
            "{} at {}: {} synthesized, {} promoted",
            d.cycle_id, d.finished_at, d.synthesized, d.promoted
        ),
        None => "never".to_string(),
    };
    let mut text = format!(
        "svc status\nskills: {promoted} promoted, {drafts} draft\ngaps: {} (threshold {})\nrecorded runs: {}\nlast dream: {last}\nlifetime savings: {} tokens over {} commits\nlearning spend: {spent} tokens (limit {:.0}, {}% of savings)\nthis chat: {chat_id}",
        gaps.len(),
        dream.threshold,
        observed.observations.len(),
        savings.tokens_saved,
        savings.commits,
        spend::TAU * savings.tokens_saved as f64,
        spend::TAU * 100.0,
    );
    for stats in notifier.stats() {
        text.push_str(&format!(
            "\n{}: {} delivered, {} failed, {} dropped{}",
            stats.target,
            stats.delivered,
            stats.failed,
            stats.dropped,
            if stats.failing { ", failing" } else { "" }
        ));
    }
    Ok(text)
}

fn skills(home: &Path) -> Result<String, evolution::EvolutionError> {
    let store = SkillStore::load(home)?;
    let lines: Vec<String> = store
        .all()
        .map(|s| {
            format!(
                "{} {}: include {} when a query has {} of [{}]",
                s.skill_id,
                s.status.as_str(),
                s.include.join(", "),
                s.trigger.min_matches,
                s.trigger.terms.join(", ")
            )
        })
        .collect();
    Ok(if lines.is_empty() {
        "no skills yet (a dream cycle makes them from gaps: /dream)".to_string()
    } else {
        format!("{} skill(s)\n{}", lines.len(), lines.join("\n"))
    })
}

fn gaps(home: &Path, dream: DreamSettings) -> Result<String, evolution::EvolutionError> {
    let (observed, gaps) = evolution::current_gaps(home, dream.threshold)?;
    if gaps.is_empty() {
        return Ok(format!(
            "no gaps: no file was recovered in {} or more of the {} recorded run(s)",
            dream.threshold,
            observed.observations.len()
        ));
    }
    let lines: Vec<String> = gaps
        .iter()
        .map(|g| {
            format!(
                "{}: missed in {} run(s) ({})",
                g.entity,
                g.miss_count,
                g.chunk_ids.join(", ")
            )
        })
        .collect();
    Ok(format!("{} gap(s)\n{}", gaps.len(), lines.join("\n")))
}

fn run_dream(
    home: &Path,
    dream: DreamSettings,
    notifier: &Notifier,
) -> Result<String, evolution::EvolutionError> {
    let report = evolution::dream(home, dream)?;
    for event in &report.events {
        notifier.emit(event.clone());
    }
    let mut text = format!(
        "dream cycle {}: {} gap(s), {} worked on, {} synthesized, {} promoted, {} tokens spent",
        report.cycle_id,
        report.gaps.len(),
        report.worked.len(),
        report.synthesized,
        report.promoted,
        report.spend_tokens
    );
    for worked in &report.worked {
        text.push_str(&format!(
            "\n{} ({} misses): {}",
            worked.entity, worked.miss_count, worked.outcome
        ));
    }
    Ok(text)
}

#[derive(Debug, thiserror::Error)]
pub enum BotError {
    #[error("the bot API refused the token: {0} (check {token})", token = super::SVC_BOT_TOKEN)]
    Unauthorized(String),
}

/// Polls for commands and answers them until `stop` resolves. Failed polls are retried with a
/// back-off and logged once per failure streak; a refused token ends the bot with an error.
pub async fn run(
    settings: BotSettings,
    notifier: Notifier,
    log: Log,
    stop: impl Future<Output = ()>,
) -> Result<(), BotError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(settings.poll_timeout + Duration::from_secs(10))
        .build()
        .unwrap_or_else(|_| reqwest::Client::new());
    let mut offset: i64 = 0;
    let mut backoff = settings.first_backoff;
    let mut failing = false;
    tokio::pin!(stop);
    loop {
        let poll = client
            .get(format!(
                "{}?offset={offset}&timeout={}",
                settings.method("getUpdates"),
                settings.poll_timeout.as_secs()
            ))
            .send();
        let response = tokio::select! {
            _ = &mut stop => return Ok(()),
            response = poll => response,
        };
        let updates = match response {
            Ok(r) if r.status().as_u16() == 401 || r.status().as_u16() == 404 => {
                let body: Option<Updates> = r.json().await.ok();
                return Err(BotError::Unauthorized(
                    body.and_then(|b| b.description)
                        .unwrap_or_else(|| "401/404 from getUpdates".to_string()),
                ));
            }
            Ok(r) => {
                let status = r.status();
                // The URL holds the token: never in a message (logs reach the dashboard).
                r.json::<Updates>()
                    .await
                    .map_err(|e| {
                        format!(
                            "getUpdates answered {status} with something else than updates: {}",
                            e.without_url()
                        )
                    })
                    .and_then(|u| {
                        if u.ok {
                            Ok(u.result)
                        } else {
                            Err(format!(
                                "getUpdates answered {status}: {}",
                                u.description.as_deref().unwrap_or("ok: false")
                            ))
                        }
                    })
            }
            Err(e) => Err(if e.is_timeout() {
                "getUpdates timed out".to_string()
            } else {
                "cannot reach the bot API".to_string()
            }),
        };
        let updates = match updates {
            Ok(updates) => {
                if failing {
                    log("bot: polling works again".to_string());
                    failing = false;
                }
                backoff = settings.first_backoff;
                updates
            }
            Err(message) => {
                if !failing {
                    log(format!(
                        "bot: {message}; retrying with back-off (logged once per failure streak)"
                    ));
                    failing = true;
                }
                tokio::select! {
                    _ = &mut stop => return Ok(()),
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(30));
                continue;
            }
        };
        for update in updates {
            offset = offset.max(update.update_id + 1);
            let Some(message) = update.message else {
                continue;
            };
            let Some(command) = message.text.as_deref().and_then(Command::parse) else {
                continue;
            };
            let chat_id = message.chat.id;
            let text = match command {
                Ok(command) => {
                    let home = settings.home.clone();
                    let dream = settings.dream;
                    let notifier = notifier.clone();
                    tokio::task::spawn_blocking(move || {
                        answer(command, &home, dream, &notifier, chat_id)
                    })
                    .await
                    .unwrap_or_else(|e| format!("svc: the command failed: {e}"))
                }
                Err(unknown) => format!("unknown command /{unknown}\n{HELP}"),
            };
            let sent = client
                .post(settings.method("sendMessage"))
                .json(&serde_json::json!({"chat_id": chat_id, "text": text}))
                .send()
                .await;
            if !sent.is_ok_and(|r| r.status().is_success()) {
                log(format!("bot: could not answer chat {chat_id}"));
            }
        }
    }
}
