//! The daemon's events task: the delivery workers, the chat bot (when `SVC_BOT_TOKEN` is set)
//! and a dream cycle every `SVC_DREAM_INTERVAL` seconds (default one hour, `0` turns the
//! periodic cycle off; the first runs a minute after start, or sooner with a shorter
//! interval). After a cycle, with the federation opt-in (`SVC_FEDERATION=1`,
//! `SVC_FEDERATION_URL`), a new version of the learned weights is shared (see
//! [`super::federation`]). One supervised task. A refused bot token stops the bot alone: the
//! refusal is logged once and delivery and dreaming go on. (Failing the task instead made the
//! supervisor restart it, so the refused token was polled again every few seconds and the
//! delivery workers were restarted with it.)

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::bot::{self, BotSettings};
use super::evolution::{self, DEFAULT_DREAM_INTERVAL, DreamSettings};
use super::federation::{self, FederationSettings};
use super::notify::{Log, Notifier, NotifySettings};

/// Resolved settings of the events task.
#[derive(Debug, Clone)]
pub struct ServiceSettings {
    pub home: PathBuf,
    pub dream: DreamSettings,
    /// `None`: no periodic cycle.
    pub interval: Option<Duration>,
    pub notify: NotifySettings,
    pub bot: Option<BotSettings>,
    /// `None` without the opt-in.
    pub federation: Option<FederationSettings>,
}

impl ServiceSettings {
    /// From the environment (see [`super`] for the variables).
    pub fn from_env(home: &Path) -> Result<Self, String> {
        let interval = match std::env::var(super::SVC_DREAM_INTERVAL) {
            Ok(value) if !value.trim().is_empty() => {
                let seconds: u64 = value.trim().parse().map_err(|_| {
                    format!(
                        "{} is {value:?}: give whole seconds (0 turns the periodic dream cycle off)",
                        super::SVC_DREAM_INTERVAL
                    )
                })?;
                (seconds > 0).then(|| Duration::from_secs(seconds))
            }
            _ => Some(DEFAULT_DREAM_INTERVAL),
        };
        let dream = DreamSettings::default();
        Ok(Self {
            home: home.to_path_buf(),
            dream,
            interval,
            notify: NotifySettings::from_env()?,
            bot: BotSettings::from_env(home, dream)?,
            federation: federation::settings_from_env().map_err(|e| e.to_string())?,
        })
    }
}

/// One dream cycle off the async threads; its events go to `notifier`. Returns a log line
/// when the cycle changed something or failed.
pub async fn dream_once(home: &Path, dream: DreamSettings, notifier: &Notifier) -> Option<String> {
    let home = home.to_path_buf();
    let ran = tokio::task::spawn_blocking(move || evolution::dream(&home, dream)).await;
    match ran {
        Ok(Ok(report)) => {
            for event in &report.events {
                notifier.emit(event.clone());
            }
            report.changed.then(|| {
                format!(
                    "dream cycle {}: {} synthesized, {} promoted",
                    report.cycle_id, report.synthesized, report.promoted
                )
            })
        }
        Ok(Err(e)) => Some(format!("dream cycle failed: {e}")),
        Err(e) => Some(format!("dream cycle failed: {e}")),
    }
}

/// Shares the learned weights when opted in and their version is new (not `last_sent`, not
/// the defaults). Returns the version sent and a log line.
pub async fn share_weights(
    home: &Path,
    settings: Option<&FederationSettings>,
    last_sent: Option<u64>,
) -> (Option<u64>, Option<String>) {
    let Some(settings) = settings else {
        return (last_sent, None);
    };
    let owned = home.to_path_buf();
    let payload = match tokio::task::spawn_blocking(move || federation::payload(&owned)).await {
        Ok(Ok(payload)) => payload,
        Ok(Err(e)) => return (last_sent, Some(format!("federation: not sent: {e}"))),
        Err(e) => return (last_sent, Some(format!("federation: not sent: {e}"))),
    };
    if payload.weights_version == 0 || Some(payload.weights_version) == last_sent {
        return (last_sent, None);
    }
    match federation::send(Some(settings), &payload).await {
        Ok(()) => (
            Some(payload.weights_version),
            Some(format!(
                "federation: shared weights version {}",
                payload.weights_version
            )),
        ),
        Err(e) => (last_sent, Some(format!("federation: {e}"))),
    }
}

/// Runs until `stop` resolves (see the module docs).
pub async fn run(
    settings: ServiceSettings,
    log: Log,
    stop: impl Future<Output = ()>,
) -> Result<(), String> {
    let notifier = Notifier::start(settings.notify.clone(), log.clone());
    let bot = async {
        if let Some(bot_settings) = settings.bot.clone() {
            let ended = bot::run(
                bot_settings,
                notifier.clone(),
                log.clone(),
                std::future::pending(),
            )
            .await;
            if let Err(e) = ended {
                log(format!(
                    "bot stopped: {e}; restart the daemon after fixing it"
                ));
            }
        }
        std::future::pending().await
    };
    let dreams = async {
        let Some(interval) = settings.interval else {
            return std::future::pending().await;
        };
        tokio::time::sleep(interval.min(Duration::from_secs(60))).await;
        let mut shared = None;
        loop {
            if let Some(line) = dream_once(&settings.home, settings.dream, &notifier).await {
                log(line);
            }
            let (version, line) =
                share_weights(&settings.home, settings.federation.as_ref(), shared).await;
            shared = version;
            if let Some(line) = line {
                log(line);
            }
            tokio::time::sleep(interval).await;
        }
    };
    tokio::select! {
        _ = stop => {
            // Give queued notifications a moment; the process is stopping anyway.
            notifier.flush(Duration::from_secs(2)).await;
            Ok(())
        }
        never = bot => never,
        never = dreams => never,
    }
}

/// [`run`] with settings read from the environment at each (re)start: a bad variable fails
/// the task with a message naming it, and the supervisor's back-off retries.
pub async fn run_from_env(
    home: PathBuf,
    log: Log,
    stop: impl Future<Output = ()>,
) -> Result<(), String> {
    let settings = ServiceSettings::from_env(&home)?;
    run(settings, log, stop).await
}
