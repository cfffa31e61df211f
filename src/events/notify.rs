//! Delivery of events to chats: one background worker per target (a webhook, or the bot's
//! chat) with a bounded queue, bounded retries and exponential back-off.
//!
//! [`Notifier::emit`] never blocks and never fails: it puts the event on each target's queue
//! and returns. A full queue drops its oldest event and counts the drop. A delivery is retried
//! after a transport error, a 5xx or a 429, waiting [`NotifySettings::first_backoff`] and
//! doubling up to [`NotifySettings::max_backoff`], at most [`NotifySettings::max_attempts`]
//! times; any other 4xx is not retried (the request itself is wrong). A target that keeps
//! failing is logged once when the failure streak starts and once when it delivers again, not
//! once per event. Webhook URLs often carry a secret, so logs name the target and its host
//! only.
//!
//! Webhook body (POST, `content-type: application/json`):
//!
//! ```json
//! {"text": "svc: skill skl_… promoted (includes city.md)",
//!  "event": {"type": "skill_promoted", "at": "2026-11-23T23:59:00.123Z",
//!            "skill_id": "skl_…", "entity": "city.md"}}
//! ```
//!
//! `text` is what Slack- and Mattermost-style incoming webhooks show; `event` is the typed
//! event (see [`super::Event`]). The bot target sends `text` with the Bot API's `sendMessage`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Notify;

use super::Event;

/// A log line sink (the daemon's log viewer, or stderr in a command).
pub type Log = Arc<dyn Fn(String) + Send + Sync>;

/// Where a worker delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// POST the webhook body to a URL.
    Webhook { name: String, url: String },
    /// `sendMessage` to one chat through the Bot API.
    BotChat {
        api: String,
        token: String,
        chat_id: i64,
    },
}

impl Target {
    /// A name safe to log: no URL path, query or token.
    pub fn label(&self) -> String {
        match self {
            Target::Webhook { name, url } => {
                let host = reqwest::Url::parse(url)
                    .ok()
                    .and_then(|u| {
                        u.host_str()
                            .map(|h| format!("{h}:{}", u.port_or_known_default().unwrap_or(0)))
                    })
                    .unwrap_or_else(|| "an unparsable URL".to_string());
                format!("webhook {name} ({host})")
            }
            Target::BotChat { chat_id, .. } => format!("bot chat {chat_id}"),
        }
    }
}

/// Resolved delivery settings.
#[derive(Debug, Clone)]
pub struct NotifySettings {
    pub targets: Vec<Target>,
    /// Events waiting per target at most; the oldest is dropped beyond.
    pub queue_capacity: usize,
    /// Delivery attempts per event at most (the first included).
    pub max_attempts: u32,
    pub first_backoff: Duration,
    pub max_backoff: Duration,
    /// Timeout of one HTTP request.
    pub request_timeout: Duration,
}

impl NotifySettings {
    /// No targets, the default bounds.
    pub fn new(targets: Vec<Target>) -> Self {
        Self {
            targets,
            queue_capacity: 256,
            max_attempts: 5,
            first_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
            request_timeout: Duration::from_secs(10),
        }
    }

    /// Targets from `SVC_WEBHOOK_CHAT_A`, `SVC_WEBHOOK_CHAT_B` and, with `SVC_BOT_TOKEN`, the
    /// chat `SVC_BOT_CHAT_ID`. An unparsable chat id is an error naming the variable.
    pub fn from_env() -> Result<Self, String> {
        let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let mut targets = Vec::new();
        for (name, variable) in [
            ("chat_a", super::SVC_WEBHOOK_CHAT_A),
            ("chat_b", super::SVC_WEBHOOK_CHAT_B),
        ] {
            if let Some(url) = var(variable) {
                check_http_url(variable, &url, "https://hooks.example.com/…")?;
                targets.push(Target::Webhook {
                    name: name.to_string(),
                    url,
                });
            }
        }
        if let Some(api) = var(super::SVC_BOT_API) {
            check_http_url(super::SVC_BOT_API, &api, super::bot::DEFAULT_BOT_API)?;
        }
        if var(super::SVC_BOT_TOKEN).is_none() && var(super::SVC_BOT_CHAT_ID).is_some() {
            // A chat id alone pushed nothing, in silence.
            return Err(format!(
                "{} is set but {} is not: the bot needs its token to push to a chat",
                super::SVC_BOT_CHAT_ID,
                super::SVC_BOT_TOKEN
            ));
        }
        if let (Some(token), Some(chat)) = (var(super::SVC_BOT_TOKEN), var(super::SVC_BOT_CHAT_ID))
        {
            let chat_id = chat.trim().parse::<i64>().map_err(|_| {
                format!(
                    "{} is {chat:?}, not a chat id (an integer; the bot prints it in its /status answer)",
                    super::SVC_BOT_CHAT_ID
                )
            })?;
            targets.push(Target::BotChat {
                api: var(super::SVC_BOT_API)
                    .unwrap_or_else(|| super::bot::DEFAULT_BOT_API.to_string()),
                token,
                chat_id,
            });
        }
        Ok(Self::new(targets))
    }
}

/// Checks that `variable`'s value is an http(s) URL: an ftp:// or mailto: URL parses but can
/// only fail later, after the delivery timeout, and `notaurl` failed every attempt in silence.
pub(crate) fn check_http_url(variable: &str, url: &str, example: &str) -> Result<(), String> {
    if reqwest::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https")) {
        Ok(())
    } else {
        Err(format!(
            "{variable} is not an http:// or https:// URL (it should look like {example})"
        ))
    }
}

/// Counters of one target.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TargetStats {
    pub target: String,
    pub delivered: u64,
    /// Events given up on after every attempt failed.
    pub failed: u64,
    /// Events dropped because the queue was full.
    pub dropped: u64,
    /// Attempts after the first.
    pub retries: u64,
    pub queued: usize,
    /// In a failure streak.
    pub failing: bool,
}

struct Worker {
    target: Target,
    queue: Mutex<VecDeque<Event>>,
    wake: Notify,
    closed: AtomicBool,
    busy: AtomicBool,
    failing: AtomicBool,
    delivered: AtomicU64,
    failed: AtomicU64,
    dropped: AtomicU64,
    retries: AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the queue lock leaves a queue that is still valid.
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

struct Inner {
    workers: Vec<Arc<Worker>>,
    capacity: usize,
}

impl Drop for Inner {
    fn drop(&mut self) {
        for worker in &self.workers {
            worker.closed.store(true, Ordering::SeqCst);
            worker.wake.notify_one();
        }
    }
}

/// Hands events to the delivery workers. Cheap to clone; the workers stop when the last clone
/// is dropped.
#[derive(Clone)]
pub struct Notifier {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("targets", &self.inner.workers.len())
            .finish()
    }
}

impl Notifier {
    /// Starts one worker per target on the current tokio runtime.
    pub fn start(settings: NotifySettings, log: Log) -> Self {
        // reqwest is built without a default TLS provider; installing twice is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(settings.request_timeout)
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        let workers: Vec<Arc<Worker>> = settings
            .targets
            .iter()
            .map(|target| {
                Arc::new(Worker {
                    target: target.clone(),
                    queue: Mutex::new(VecDeque::new()),
                    wake: Notify::new(),
                    closed: AtomicBool::new(false),
                    busy: AtomicBool::new(false),
                    failing: AtomicBool::new(false),
                    delivered: AtomicU64::new(0),
                    failed: AtomicU64::new(0),
                    dropped: AtomicU64::new(0),
                    retries: AtomicU64::new(0),
                })
            })
            .collect();
        for worker in &workers {
            tokio::spawn(work(
                worker.clone(),
                client.clone(),
                settings.clone(),
                log.clone(),
            ));
        }
        Self {
            inner: Arc::new(Inner {
                workers,
                capacity: settings.queue_capacity.max(1),
            }),
        }
    }

    /// A notifier with no targets (events are discarded).
    pub fn disabled() -> Self {
        Self {
            inner: Arc::new(Inner {
                workers: Vec::new(),
                capacity: 1,
            }),
        }
    }

    pub fn is_enabled(&self) -> bool {
        !self.inner.workers.is_empty()
    }

    /// Queues `event` for every target; never blocks.
    pub fn emit(&self, event: Event) {
        for worker in &self.inner.workers {
            {
                let mut queue = lock(&worker.queue);
                if queue.len() >= self.inner.capacity {
                    queue.pop_front();
                    worker.dropped.fetch_add(1, Ordering::Relaxed);
                }
                queue.push_back(event.clone());
            }
            worker.wake.notify_one();
        }
    }

    pub fn stats(&self) -> Vec<TargetStats> {
        self.inner
            .workers
            .iter()
            .map(|w| TargetStats {
                target: w.target.label(),
                delivered: w.delivered.load(Ordering::Relaxed),
                failed: w.failed.load(Ordering::Relaxed),
                dropped: w.dropped.load(Ordering::Relaxed),
                retries: w.retries.load(Ordering::Relaxed),
                queued: lock(&w.queue).len(),
                failing: w.failing.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// Waits until every queue is empty and no delivery is in progress, at most `limit`.
    /// Returns whether everything was handled (delivered or given up on).
    pub async fn flush(&self, limit: Duration) -> bool {
        let idle = || {
            self.inner
                .workers
                .iter()
                .all(|w| lock(&w.queue).is_empty() && !w.busy.load(Ordering::SeqCst))
        };
        tokio::time::timeout(limit, async {
            while !idle() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .is_ok()
    }
}

/// Why one attempt failed, and whether another may succeed.
struct Failure {
    message: String,
    retryable: bool,
}

async fn deliver(client: &reqwest::Client, target: &Target, event: &Event) -> Result<(), Failure> {
    let request = match target {
        Target::Webhook { url, .. } => client.post(url).json(&serde_json::json!({
            "text": event.summary(),
            "event": event,
        })),
        Target::BotChat {
            api,
            token,
            chat_id,
        } => client
            .post(format!(
                "{}/bot{token}/sendMessage",
                api.trim_end_matches('/')
            ))
            .json(&serde_json::json!({"chat_id": chat_id, "text": event.summary()})),
    };
    match request.send().await {
        Ok(response) if response.status().is_success() => Ok(()),
        Ok(response) => {
            let status = response.status();
            Err(Failure {
                message: format!("answered {status}"),
                retryable: status.is_server_error() || status.as_u16() == 429,
            })
        }
        Err(e) => Err(Failure {
            // The error's URL may hold a secret: keep only its kind.
            message: if e.is_connect() {
                "connection failed".to_string()
            } else if e.is_timeout() {
                "timed out (not retried: the receiver may have it)".to_string()
            } else {
                "request failed (not retried: the receiver may have it)".to_string()
            },
            // Only a request that never reached the receiver is sent again: a slow receiver
            // that answered after the timeout got each retry too (five copies of one event).
            retryable: e.is_connect(),
        }),
    }
}

async fn work(worker: Arc<Worker>, client: reqwest::Client, settings: NotifySettings, log: Log) {
    loop {
        let next = {
            let mut queue = lock(&worker.queue);
            let next = queue.pop_front();
            if next.is_some() {
                worker.busy.store(true, Ordering::SeqCst);
            }
            next
        };
        let Some(event) = next else {
            if worker.closed.load(Ordering::SeqCst) {
                return;
            }
            worker.wake.notified().await;
            continue;
        };
        let mut backoff = settings.first_backoff;
        let mut attempt = 1;
        let outcome = loop {
            match deliver(&client, &worker.target, &event).await {
                Ok(()) => break Ok(()),
                Err(failure) if failure.retryable && attempt < settings.max_attempts.max(1) => {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(settings.max_backoff);
                    attempt += 1;
                    worker.retries.fetch_add(1, Ordering::Relaxed);
                }
                Err(failure) => break Err(failure),
            }
        };
        match outcome {
            Ok(()) => {
                worker.delivered.fetch_add(1, Ordering::Relaxed);
                if worker.failing.swap(false, Ordering::SeqCst) {
                    log(format!(
                        "{} delivers again ({} event(s) were given up on)",
                        worker.target.label(),
                        worker.failed.load(Ordering::Relaxed)
                    ));
                }
            }
            Err(failure) => {
                worker.failed.fetch_add(1, Ordering::Relaxed);
                if !worker.failing.swap(true, Ordering::SeqCst) {
                    log(format!(
                        "{} failed: {} after {attempt} attempt(s); events are dropped until it answers again (logged once per failure streak)",
                        worker.target.label(),
                        failure.message
                    ));
                }
            }
        }
        worker.busy.store(false, Ordering::SeqCst);
    }
}
