//! Events: webhook delivery (body, retry after a 500, an unreachable or hanging webhook never
//! blocks the caller and is logged once per failure streak), the two-way bot against a local
//! fake of the Bot API (each command), and the evolution loop end to end through the CLI.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{Value, json};
use svc::events::bot::{self, BotSettings};
use svc::events::evolution::{DreamSettings, skills};
use svc::events::notify::{Log, Notifier, NotifySettings, Target};
use svc::events::{Event, EventKind, EventPayload};
use svc::proof::{ContextRiskMode, OutcomeSignal, VerifiedEfficiencyLayer};

use crate::harness::{root, run, svc};
use crate::serve;

// ---------------------------------------------------------------------------------------------
// Fakes

/// A fake chat webhook: records bodies; answers 500 to the first `fail_first` calls; hangs
/// forever when `hang`.
#[derive(Clone, Default)]
struct Hook {
    bodies: Arc<Mutex<Vec<Value>>>,
    calls: Arc<AtomicUsize>,
    fail_first: usize,
    hang: bool,
}

async fn hook(State(hook): State<Hook>, Json(body): Json<Value>) -> StatusCode {
    let call = hook.calls.fetch_add(1, Ordering::SeqCst);
    if hook.hang {
        std::future::pending::<()>().await;
    }
    if call < hook.fail_first {
        return StatusCode::INTERNAL_SERVER_ERROR;
    }
    hook.bodies.lock().expect("lock").push(body);
    StatusCode::OK
}

async fn serve_hook(hook: Hook) -> String {
    serve(
        Router::new()
            .route("/hook", post(hook_route))
            .with_state(hook),
    )
    .await
        + "/hook"
}

async fn hook_route(state: State<Hook>, body: Json<Value>) -> StatusCode {
    self::hook(state, body).await
}

fn fast(targets: Vec<Target>) -> NotifySettings {
    let mut settings = NotifySettings::new(targets);
    settings.first_backoff = Duration::from_millis(5);
    settings.max_backoff = Duration::from_millis(20);
    settings.max_attempts = 3;
    settings
}

fn webhook(url: &str) -> Target {
    Target::Webhook {
        name: "chat_a".to_string(),
        url: url.to_string(),
    }
}

fn collecting_log() -> (Log, Arc<Mutex<Vec<String>>>) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = lines.clone();
    (
        Arc::new(move |line: String| sink.lock().expect("lock").push(line)),
        lines,
    )
}

fn promoted(skill: &str) -> Event {
    Event::now(EventPayload::SkillPromoted {
        skill_id: skill.to_string(),
        entity: "city.md".to_string(),
    })
}

// ---------------------------------------------------------------------------------------------
// Webhooks

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_receives_the_documented_body() {
    let hook = Hook::default();
    let url = serve_hook(hook.clone()).await;
    let (log, _) = collecting_log();
    let notifier = Notifier::start(fast(vec![webhook(&url)]), log);
    notifier.emit(promoted("skl_1"));
    assert!(notifier.flush(Duration::from_secs(30)).await);
    let bodies = hook.bodies.lock().expect("lock").clone();
    assert_eq!(bodies.len(), 1);
    assert_eq!(
        bodies[0]["text"],
        "svc: skill skl_1 promoted (includes city.md)"
    );
    assert_eq!(bodies[0]["event"]["type"], "skill_promoted");
    assert_eq!(bodies[0]["event"]["skill_id"], "skl_1");
    assert!(
        bodies[0]["event"]["at"]
            .as_str()
            .is_some_and(|at| at.ends_with('Z'))
    );
    let event: Event = serde_json::from_value(bodies[0]["event"].clone()).expect("typed event");
    assert_eq!(event.kind(), EventKind::SkillPromoted);
    assert_eq!(notifier.stats()[0].delivered, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_is_retried_after_a_500() {
    let hook = Hook {
        fail_first: 1,
        ..Hook::default()
    };
    let url = serve_hook(hook.clone()).await;
    let (log, lines) = collecting_log();
    let notifier = Notifier::start(fast(vec![webhook(&url)]), log);
    notifier.emit(promoted("skl_2"));
    assert!(notifier.flush(Duration::from_secs(30)).await);
    assert_eq!(
        hook.calls.load(Ordering::SeqCst),
        2,
        "one 500, then delivered"
    );
    assert_eq!(hook.bodies.lock().expect("lock").len(), 1);
    let stats = &notifier.stats()[0];
    assert_eq!((stats.delivered, stats.retries, stats.failed), (1, 1, 0));
    assert!(
        lines.lock().expect("lock").is_empty(),
        "a retried success is not a failure"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_webhook_is_logged_once_per_streak_and_a_healthy_one_still_delivers() {
    // A port nothing listens on.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address")
    };
    let healthy = Hook::default();
    let healthy_url = serve_hook(healthy.clone()).await;
    let (log, lines) = collecting_log();
    let notifier = Notifier::start(
        fast(vec![
            webhook(&format!("http://{closed}/hook")),
            Target::Webhook {
                name: "chat_b".to_string(),
                url: healthy_url,
            },
        ]),
        log,
    );
    for i in 0..5 {
        notifier.emit(promoted(&format!("skl_{i}")));
    }
    assert!(notifier.flush(Duration::from_secs(60)).await);
    let stats = notifier.stats();
    assert_eq!((stats[0].failed, stats[0].delivered), (5, 0));
    assert_eq!(stats[0].retries, 10, "3 attempts per event");
    assert!(stats[0].failing);
    assert_eq!(stats[1].delivered, 5, "the other target is not held up");
    let lines = lines.lock().expect("lock").clone();
    assert_eq!(lines.len(), 1, "once per failure streak: {lines:?}");
    assert!(
        lines[0].starts_with("webhook chat_a (127.0.0.1:"),
        "{}",
        lines[0]
    );
    assert!(
        !lines[0].contains("/hook"),
        "no URL path in logs: {}",
        lines[0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_webhook_never_blocks_emit_and_a_full_queue_drops_the_oldest() {
    let hook = Hook {
        hang: true,
        ..Hook::default()
    };
    let url = serve_hook(hook.clone()).await;
    let (log, _) = collecting_log();
    let mut settings = fast(vec![webhook(&url)]);
    settings.queue_capacity = 4;
    settings.request_timeout = Duration::from_secs(600);
    let notifier = Notifier::start(settings, log);
    notifier.emit(promoted("skl_first"));
    // Wait until the worker is stuck in the first delivery, so the count below is exact.
    while hook.calls.load(Ordering::SeqCst) == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // With the worker stuck, every emit still returns at once.
    for i in 0..20 {
        notifier.emit(promoted(&format!("skl_{i}")));
    }
    let stats = &notifier.stats()[0];
    assert_eq!(stats.queued, 4);
    assert_eq!(stats.dropped, 16, "the oldest are dropped and counted");
    assert_eq!(stats.delivered, 0);
    assert!(
        !notifier.flush(Duration::from_millis(50)).await,
        "still pending"
    );
}

/// Found by probing: a receiver slower than the timeout got the event once per attempt (five
/// copies of one `gap_detected`), though delivery is documented at most once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_that_timed_out_after_it_was_sent_is_not_sent_again() {
    let hook = Hook {
        hang: true,
        ..Hook::default()
    };
    let url = serve_hook(hook.clone()).await;
    let (log, lines) = collecting_log();
    let mut settings = fast(vec![webhook(&url)]);
    settings.request_timeout = Duration::from_millis(200);
    let notifier = Notifier::start(settings, log);
    notifier.emit(promoted("skl_slow"));
    assert!(notifier.flush(Duration::from_secs(5)).await, "given up on");
    assert_eq!(hook.calls.load(Ordering::SeqCst), 1, "sent once");
    assert_eq!(notifier.stats()[0].failed, 1);
    let logged = lines.lock().expect("lock").clone();
    assert!(
        logged[0].contains("timed out (not retried: the receiver may have it) after 1 attempt(s)"),
        "{logged:?}"
    );
}

#[test]
fn bad_webhook_and_chat_id_variables_are_named() {
    let state = tempfile::tempdir().expect("state");
    let out = run(svc(state.path())
        .args(["dream"])
        .env("SVC_WEBHOOK_CHAT_A", "not a url"));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("SVC_WEBHOOK_CHAT_A is not an http:// or https:// URL"),
        "{}",
        out.stderr
    );
    // Found by probing: an ftp:// URL was accepted, and every delivery then waited out its
    // timeout before failing.
    let out = run(svc(state.path())
        .args(["dream"])
        .env("SVC_WEBHOOK_CHAT_A", "ftp://hooks.example.com/x"));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("SVC_WEBHOOK_CHAT_A"), "{}", out.stderr);
    let out = run(svc(state.path())
        .args(["dream"])
        .env("SVC_BOT_TOKEN", "t")
        .env("SVC_BOT_CHAT_ID", "general"));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("SVC_BOT_CHAT_ID is \"general\""),
        "{}",
        out.stderr
    );
    // Found by probing: a bot API that is no URL failed every push in silence (exit 0), and a
    // chat id without a token pushed nothing without a word.
    let out = run(svc(state.path())
        .args(["dream"])
        .env("SVC_BOT_TOKEN", "1:a")
        .env("SVC_BOT_API", "notaurl")
        .env("SVC_BOT_CHAT_ID", "5"));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("SVC_BOT_API is not an http:// or https:// URL"),
        "{}",
        out.stderr
    );
    let out = run(svc(state.path())
        .args(["dream"])
        .env("SVC_BOT_CHAT_ID", "-4242"));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("SVC_BOT_CHAT_ID is set but SVC_BOT_TOKEN is not"),
        "{}",
        out.stderr
    );
}

// ---------------------------------------------------------------------------------------------
// A state with a gap: four recorded runs that had to recover the parks section of city.md.

const BUDGET: usize = 85;
const QUERIES: [&str; 4] = [
    "When did the bridge open to traffic?",
    "What year did the bridge open?",
    "Which year did the bridge open to traffic?",
    "Did the bridge open to cars and traffic early?",
];
/// What a model without the garden's section says (the year is a guess).
const GUESS: &str = "The bridge opened to traffic in 1932. The botanic garden was founded in 1900.";
const RIGHT: &str = "The bridge opened to traffic in 1932. The botanic garden was founded in 1816 beside the harbour.";

fn docs() -> Vec<(String, String)> {
    ["harbour.md", "city.md"]
        .iter()
        .map(|name| {
            let text = std::fs::read_to_string(root().join("fixtures/proof/docs").join(name))
                .expect("fixture");
            (name.to_string(), text)
        })
        .collect()
}

fn record_runs(home: &std::path::Path) {
    let layer = VerifiedEfficiencyLayer::new(home, ContextRiskMode::Audit);
    for query in QUERIES {
        let prepared = layer.prepare(&docs(), query, BUDGET).expect("prepare");
        let result = layer
            .run_fixed_point(
                &prepared,
                |request| {
                    Ok(if request.full_context().contains("founded in 1816") {
                        RIGHT.to_string()
                    } else {
                        GUESS.to_string()
                    })
                },
                3,
                500,
                2,
            )
            .expect("run");
        assert_eq!(
            result.recovered_chunk_ids(),
            vec!["city.md#L5-7"],
            "{query}"
        );
        let signal = OutcomeSignal {
            name: "user_accepted".to_string(),
            value: 1.0,
            detail: None,
        };
        layer
            .record_verified_outcome(&result, &signal)
            .expect("record");
    }
}

// ---------------------------------------------------------------------------------------------
// The bot

#[derive(Clone, Default)]
struct FakeBotApi {
    updates: Arc<Mutex<Vec<Value>>>,
    offsets: Arc<Mutex<Vec<i64>>>,
    sent: Arc<Mutex<Vec<Value>>>,
}

async fn get_updates(
    State(api): State<FakeBotApi>,
    UrlPath(bot): UrlPath<String>,
    Query(query): Query<std::collections::HashMap<String, String>>,
) -> (StatusCode, Json<Value>) {
    if bot != "botTEST-TOKEN" {
        return (
            StatusCode::UNAUTHORIZED,
            Json(json!({"ok": false, "error_code": 401, "description": "Unauthorized"})),
        );
    }
    let offset: i64 = query
        .get("offset")
        .and_then(|o| o.parse().ok())
        .unwrap_or(0);
    api.offsets.lock().expect("lock").push(offset);
    let pending: Vec<Value> = api
        .updates
        .lock()
        .expect("lock")
        .iter()
        .filter(|u| u["update_id"].as_i64().is_some_and(|id| id >= offset))
        .cloned()
        .collect();
    if pending.is_empty() {
        // Long polling, shortened.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (StatusCode::OK, Json(json!({"ok": true, "result": pending})))
}

async fn send_message(State(api): State<FakeBotApi>, Json(body): Json<Value>) -> Json<Value> {
    api.sent.lock().expect("lock").push(body);
    Json(json!({"ok": true, "result": {"message_id": 1}}))
}

fn update(id: i64, text: &str) -> Value {
    json!({"update_id": id, "message": {"message_id": id, "date": 0, "chat": {"id": 42, "type": "private"}, "text": text}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bot_answers_each_command_from_real_state() {
    let state = tempfile::tempdir().expect("state");
    record_runs(state.path());
    let api = FakeBotApi::default();
    *api.updates.lock().expect("lock") = vec![
        update(7, "/gaps"),
        update(8, "/skills"),
        update(9, "/dream"),
        update(10, "/skills@svc_bot"),
        update(11, "/status"),
        update(12, "hello"),
        update(13, "/nonsense"),
    ];
    let base = serve(
        Router::new()
            .route("/{bot}/getUpdates", get(get_updates))
            .route("/{bot}/sendMessage", post(send_message))
            .with_state(api.clone()),
    )
    .await;
    let hook = Hook::default();
    let hook_url = serve_hook(hook.clone()).await;
    let (log, _) = collecting_log();
    let notifier = Notifier::start(fast(vec![webhook(&hook_url)]), log.clone());
    let mut settings = BotSettings {
        token: "TEST-TOKEN".to_string(),
        api: base.clone(),
        home: state.path().to_path_buf(),
        dream: DreamSettings::default(),
        poll_timeout: Duration::from_secs(1),
        first_backoff: Duration::from_millis(10),
    };
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let bot = tokio::spawn(bot::run(
        settings.clone(),
        notifier.clone(),
        log.clone(),
        async {
            let _ = stop_rx.await;
        },
    ));
    // The bot acknowledges updates with the offset of its next poll, which may come after the
    // last answer: wait for both (stopping at the last answer made this test flaky).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let answers = loop {
        let sent = api.sent.lock().expect("lock").clone();
        let acknowledged = api.offsets.lock().expect("lock").contains(&14);
        if (sent.len() >= 6 && acknowledged) || std::time::Instant::now() > deadline {
            break sent;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let _ = stop_tx.send(());
    bot.await.expect("join").expect("the bot stops cleanly");
    let texts: Vec<&str> = answers
        .iter()
        .map(|a| a["text"].as_str().expect("text"))
        .collect();
    assert!(answers.iter().all(|a| a["chat_id"] == 42));
    assert_eq!(texts.len(), 6, "plain text is not answered: {texts:?}");
    assert!(
        texts[0].starts_with("1 gap(s)\ncity.md: missed in 4 run(s) (city.md#L5-7)"),
        "{}",
        texts[0]
    );
    assert!(texts[1].starts_with("no skills yet"), "{}", texts[1]);
    assert!(
        texts[2].contains("1 synthesized, 1 promoted"),
        "{}",
        texts[2]
    );
    assert!(texts[3].starts_with("1 skill(s)\nskl_"), "{}", texts[3]);
    assert!(
        texts[3].contains("promoted: include city.md#L5-7"),
        "{}",
        texts[3]
    );
    assert!(
        texts[4].contains("skills: 1 promoted, 0 draft"),
        "{}",
        texts[4]
    );
    assert!(texts[4].contains("recorded runs: 4"), "{}", texts[4]);
    assert!(texts[4].contains("this chat: 42"), "{}", texts[4]);
    assert!(texts[4].contains("webhook chat_a"), "{}", texts[4]);
    assert!(
        texts[5].starts_with("unknown command /nonsense"),
        "{}",
        texts[5]
    );
    let offsets = api.offsets.lock().expect("lock").clone();
    assert!(
        offsets.contains(&14),
        "updates are acknowledged: {offsets:?}"
    );

    // /dream's events went to the webhook, in trace order.
    assert!(notifier.flush(Duration::from_secs(30)).await);
    let kinds: Vec<String> = hook
        .bodies
        .lock()
        .expect("lock")
        .iter()
        .map(|b| b["event"]["type"].as_str().expect("type").to_string())
        .collect();
    assert_eq!(
        kinds,
        vec![
            "gap_detected",
            "skill_synthesized",
            "skill_benchmarked",
            "skill_promoted",
            "dream_cycle"
        ]
    );

    // A refused token ends the bot with an error naming the variable.
    settings.token = "WRONG".to_string();
    let error = bot::run(settings, notifier, log, std::future::pending())
        .await
        .expect_err("unauthorized");
    assert!(error.to_string().contains("SVC_BOT_TOKEN"), "{error}");
}

/// Regression: a refused token failed the whole events task, so the daemon's supervisor
/// restarted it and the refused token was polled again every few seconds (with the delivery
/// workers restarted each time). Now the bot alone stops, once, and delivery goes on.
/// The events task with a bot polling `api` (short timeouts) and `notify`'s targets.
fn bot_service(
    home: &std::path::Path,
    token: &str,
    api: String,
    notify: NotifySettings,
) -> svc::events::service::ServiceSettings {
    svc::events::service::ServiceSettings {
        home: home.to_path_buf(),
        dream: DreamSettings::default(),
        interval: None,
        notify,
        bot: Some(BotSettings {
            token: token.to_string(),
            api,
            home: home.to_path_buf(),
            dream: DreamSettings::default(),
            poll_timeout: Duration::from_secs(1),
            first_backoff: Duration::from_millis(10),
        }),
        federation: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_token_stops_the_bot_once_and_delivery_goes_on() {
    let state = tempfile::tempdir().expect("state");
    let polls = Arc::new(AtomicUsize::new(0));
    let counted = polls.clone();
    let base = serve(Router::new().route(
        "/{bot}/getUpdates",
        get(move || {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                (
                    StatusCode::UNAUTHORIZED,
                    Json(json!({"ok": false, "error_code": 401, "description": "Unauthorized"})),
                )
            }
        }),
    ))
    .await;
    let hook = Hook::default();
    let hook_url = serve_hook(hook.clone()).await;
    let (log, lines) = collecting_log();
    let settings = bot_service(state.path(), "WRONG", base, fast(vec![webhook(&hook_url)]));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let service = tokio::spawn(svc::events::service::run(settings, log, async {
        let _ = stop_rx.await;
    }));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!service.is_finished(), "the events task goes on");
    assert_eq!(
        polls.load(Ordering::SeqCst),
        1,
        "the refused token is not polled again"
    );
    let logged: Vec<String> = lines.lock().expect("lock").clone();
    assert_eq!(
        logged
            .iter()
            .filter(|l| l.starts_with("bot stopped: the bot API refused the token: Unauthorized"))
            .count(),
        1,
        "{logged:?}"
    );
    assert!(
        logged.iter().any(|l| l.contains("SVC_BOT_TOKEN")),
        "{logged:?}"
    );
    let _ = stop_tx.send(());
    service.await.expect("join").expect("stops cleanly");
}

/// Found by probing: `svc dream` waiting for another process's dream cycle blocked without a
/// word, and so did `learning reset` and `update`.
#[test]
fn a_command_waiting_for_a_lock_says_so() {
    use std::io::Read;
    let state = tempfile::tempdir().expect("state");
    for (lock, args, what) in [
        ("learning/dream.lock", vec!["dream"], "a dream cycle"),
        (
            "learning/weights.lock",
            vec!["learning", "reset"],
            "a learning update or reset",
        ),
    ] {
        let path = state.path().join(lock);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        let held = std::fs::File::create(&path).expect("lock file");
        held.lock().expect("lock");
        let mut child = svc(state.path())
            .args(&args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        std::thread::sleep(Duration::from_millis(500));
        assert!(child.try_wait().expect("wait").is_none(), "it waits");
        drop(held);
        let status = child.wait().expect("wait");
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .expect("stderr")
            .read_to_string(&mut stderr)
            .expect("read");
        assert!(status.success(), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "svc: waiting for {what} in another process to finish"
            )),
            "{stderr}"
        );
    }
}

/// Found by probing: a bot API answering something that is not JSON put the request URL, which
/// holds the token, into the log the dashboard serves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbled_bot_api_answer_is_logged_without_the_token() {
    let state = tempfile::tempdir().expect("state");
    let base =
        serve(Router::new().route("/{bot}/getUpdates", get(|| async { "<html>nope" }))).await;
    let (log, lines) = collecting_log();
    let settings = bot_service(state.path(), "123:SECRET", base, fast(Vec::new()));
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let service = tokio::spawn(svc::events::service::run(settings, log, async {
        let _ = stop_rx.await;
    }));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let _ = stop_tx.send(());
    service.await.expect("join").expect("stops cleanly");
    let logged: Vec<String> = lines.lock().expect("lock").clone();
    assert!(
        logged
            .iter()
            .any(|l| l.contains("getUpdates answered 200 OK with something else than updates")),
        "{logged:?}"
    );
    assert!(!logged.iter().any(|l| l.contains("SECRET")), "{logged:?}");
}

// ---------------------------------------------------------------------------------------------
// The CLI, end to end, over pgs_ sessions

fn prepare_and_advance(state: &std::path::Path, work: &std::path::Path, query: &str) {
    let budget = BUDGET.to_string();
    let out = run(svc(state).args([
        "proof",
        "prepare",
        "fixtures/proof/docs",
        "--query",
        query,
        "--budget",
        &budget,
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let value: Value = serde_json::from_str(&out.stdout).expect("prepare JSON");
    let id = value["session_id"]
        .as_str()
        .expect("session id")
        .to_string();
    let draft = work.join("draft.txt");
    std::fs::write(&draft, GUESS).expect("draft");
    let out = run(svc(state).args([
        "proof",
        "advance",
        &id,
        "--output-file",
        draft.to_str().expect("utf-8"),
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("city.md#L5-7"),
        "recovered: {}",
        out.stdout
    );
}

#[test]
fn gaps_dream_and_skills_export_from_the_command_line() {
    let state = tempfile::tempdir().expect("state");
    let work = tempfile::tempdir().expect("work");
    for query in QUERIES {
        prepare_and_advance(state.path(), work.path(), query);
    }
    // The sessions' recovered chunks teach the ranking weights too (no ledger entry needed).
    let out = run(svc(state.path()).args(["learning", "update", "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let learned: Value = serde_json::from_str(&out.stdout).expect("learning JSON");
    assert_eq!(learned["outcomes_read"], 4, "{}", out.stdout);
    assert_eq!(learned["recovered_chunks_used"], 4, "{}", out.stdout);
    let again = run(svc(state.path()).args(["learning", "update", "--json"]));
    let again: Value = serde_json::from_str(&again.stdout).expect("learning JSON");
    assert_eq!(again["outcomes_read"], 0, "each session is read once");
    // Found by probing: the text summary said "0 skipped" (recovered chunks) beside lines
    // saying "skipped: skipped session …"; the two counts are now named apart.
    let sessions = state.path().join("proof/sessions");
    let session = std::fs::read_dir(&sessions)
        .expect("sessions")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .expect("a session");
    std::fs::write(
        session.with_file_name("pgs_00000000000000000000beef.json"),
        "{",
    )
    .expect("write");
    let text = run(svc(state.path()).args(["learning", "update"]));
    assert_eq!(text.code, 0, "{}", text.stderr);
    assert!(
        text.stdout
            .contains("recovered chunks skipped; 1 unreadable record(s)"),
        "{}",
        text.stdout
    );
    assert!(text.stderr.contains("svc: warning: "), "{}", text.stderr);

    // Found by probing: a threshold of 0 was accepted (every file of every run a gap), and so
    // was an autotune of 0 tasks.
    for args in [
        &["gaps", "--threshold", "0"][..],
        &["dream", "--threshold", "0"][..],
        &["learning", "autotune", "--repo", ".", "--max-tasks", "1"][..],
        // Found by probing: 0 evaluations became 1 and a budget of 0 failed after mining.
        &[
            "learning",
            "autotune",
            "--repo",
            ".",
            "--max-evaluations",
            "0",
        ][..],
        &["learning", "autotune", "--repo", ".", "--budgets", "4000,0"][..],
    ] {
        let refused = run(svc(state.path()).args(args));
        assert_eq!(refused.code, 2, "{args:?}: {}", refused.stdout);
        assert!(refused.stderr.contains("is not in"), "{}", refused.stderr);
    }
    // A margin that cannot mean anything (NaN, negative, the whole objective) ran to the end.
    for margin in ["NaN", "-1", "5"] {
        let refused = run(svc(state.path()).args([
            "learning",
            "autotune",
            "--repo",
            ".",
            &format!("--margin={margin}"),
        ]));
        assert_eq!(refused.code, 2, "{margin}: {}", refused.stdout);
        assert!(
            refused.stderr.contains("--margin must be a share"),
            "{margin}: {}",
            refused.stderr
        );
    }
    let out = run(svc(state.path()).args(["gaps"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .starts_with("1 gap(s) in 4 recorded run(s) (threshold 3)"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("city.md"), "{}", out.stdout);

    // The dream's events go to the webhook before the command exits.
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let hook = Hook::default();
    let url = runtime.block_on(serve_hook(hook.clone()));
    let out = run(svc(state.path())
        .args(["dream", "--format", "json"])
        .env("SVC_WEBHOOK_CHAT_A", &url));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report: Value = serde_json::from_str(&out.stdout).expect("report JSON");
    assert_eq!(report["synthesized"], 1);
    assert_eq!(report["promoted"], 1, "{}", out.stdout);
    assert_eq!(report["spend_tokens"], 0);
    assert_eq!(hook.bodies.lock().expect("lock").len(), 5);

    let out = run(svc(state.path()).args(["skills"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("promoted include city.md#L5-7"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("misses 2 -> 0 over 2 held-out queries"),
        "{}",
        out.stdout
    );

    let out = run(svc(state.path()).args(["skills", "export"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let exported: skills::SkillExport = serde_json::from_str(&out.stdout).expect("export shape");
    assert_eq!(exported.format, "svc.skills-export.v1");
    assert_eq!(exported.skills.len(), 1);
    assert_eq!(exported.skills[0].origin.token_cost, 0.0);
    let raw: Value = serde_json::from_str(&out.stdout).expect("json");
    assert_eq!(raw["skills"][0]["origin"]["token_cost"], json!(0.0));

    // The trace, in order, in the state directory.
    let trace =
        std::fs::read_to_string(state.path().join("learning/evolution.jsonl")).expect("trace");
    let steps: Vec<String> = trace
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("line")["step"]
                .as_str()
                .expect("step")
                .to_string()
        })
        .collect();
    assert_eq!(
        steps,
        ["detect", "synthesize", "benchmark", "promote", "spend"]
    );

    // A second cycle has nothing new to work on.
    let out = run(svc(state.path()).args(["dream"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("0 worked on, 0 synthesized, 0 promoted"),
        "{}",
        out.stdout
    );
}

// ---------------------------------------------------------------------------------------------
// Federation

/// Every string a learning corpus could leak: file names, chunk ids, words and stems of the
/// documents and queries, and the ids learning made (commits, skills).
fn corpus_strings(home: &std::path::Path) -> Vec<String> {
    let mut strings: Vec<String> = Vec::new();
    for (name, text) in docs() {
        strings.push(name.clone());
        strings.push(name.trim_end_matches(".md").to_string());
        strings.extend(svc::proof::planner::terms(&text));
        strings.extend(
            text.split(|c: char| !c.is_alphanumeric())
                .map(str::to_lowercase),
        );
    }
    for query in QUERIES {
        strings.extend(svc::proof::planner::terms(query));
        strings.extend(
            query
                .split(|c: char| !c.is_alphanumeric())
                .map(str::to_lowercase),
        );
    }
    for entry in svc::proof::ledger::verify_chain(home).expect("ledger") {
        strings.push(entry.ctx_id.clone());
        strings.extend(entry.recovered_chunk_ids.clone());
    }
    for skill in skills::SkillStore::load(home).expect("skills").all() {
        strings.push(skill.skill_id.clone());
        strings.extend(skill.trigger.terms.clone());
    }
    strings.retain(|s| s.len() >= 4);
    strings.sort();
    strings.dedup();
    strings
}

/// Every string leaf and key of `value`.
fn strings_of(value: &Value, leaves: &mut Vec<String>, keys: &mut Vec<String>) {
    match value {
        Value::String(s) => leaves.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings_of(v, leaves, keys)),
        Value::Object(map) => {
            for (k, v) in map {
                keys.push(k.clone());
                strings_of(v, leaves, keys);
            }
        }
        _ => {}
    }
}

#[test]
fn federation_payload_after_learning_holds_no_corpus_string() {
    let state = tempfile::tempdir().expect("state");
    record_runs(state.path());
    // Learn on the corpus: the weights from its recovered chunks, and a skill from its gap.
    let learned = svc::daemon::learning::feedback::learn_from_runs(state.path()).expect("learn");
    assert_eq!(learned.outcomes_read, 4);
    svc::events::evolution::dream(state.path(), DreamSettings::default()).expect("dream");

    let payload = svc::events::federation::payload(state.path()).expect("payload");
    assert_eq!(payload.weights_version, learned.version_after);
    assert_eq!(payload.counts.outcomes_seen, 4);
    assert_eq!(payload.counts.skills_promoted, 1);
    let json = serde_json::to_string(&payload).expect("json");
    // Structurally: the only strings are the format tag and names of the closed feature set.
    let value: Value = serde_json::from_str(&json).expect("json");
    let (mut leaves, mut keys) = (Vec::new(), Vec::new());
    strings_of(&value, &mut leaves, &mut keys);
    for leaf in &leaves {
        assert!(
            leaf == "svc.federation.v1"
                || svc::context::weights::Feature::from_name(leaf).is_some(),
            "a free-text string in the payload: {leaf:?}"
        );
    }
    // And no corpus string anywhere else: with that closed vocabulary taken out, what is left
    // is numbers and punctuation. ("eight" is inside "weights": the vocabulary is not a leak.)
    let mut vocabulary: Vec<&String> = leaves.iter().chain(keys.iter()).collect();
    vocabulary.sort_by_key(|w| std::cmp::Reverse(w.len()));
    let mut rest = json.to_lowercase();
    for word in vocabulary {
        rest = rest.replace(&format!("\"{word}\""), "\"\"");
    }
    let corpus = corpus_strings(state.path());
    assert!(corpus.len() > 40, "a real corpus: {corpus:?}");
    for string in &corpus {
        assert!(
            !rest.contains(&string.to_lowercase()),
            "{string:?} leaked into {json}"
        );
        assert!(
            !leaves.contains(string) && !keys.contains(string),
            "{string:?}"
        );
    }
    assert!(
        rest.chars().all(|c| !c.is_alphabetic() || c == 'e'),
        "only numbers (1e-5 style) remain: {rest}"
    );
    keys.sort();
    keys.dedup();
    assert_eq!(
        keys,
        [
            "counts",
            "default",
            "delta",
            "feature",
            "format",
            "gaps",
            "outcomes_seen",
            "recorded_runs",
            "recovered_chunks_used",
            "skills_draft",
            "skills_promoted",
            "value",
            "weights",
            "weights_version"
        ]
    );
}

#[test]
fn federation_sends_nothing_without_the_opt_in() {
    let state = tempfile::tempdir().expect("state");
    record_runs(state.path());
    svc::daemon::learning::feedback::learn_from_runs(state.path()).expect("learn");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let endpoint = Hook::default();
    let url = runtime.block_on(serve_hook(endpoint.clone()));

    // An endpoint alone is not an opt-in: show prints the payload, send refuses.
    let out = run(svc(state.path())
        .args(["federation", "show"])
        .env("SVC_FEDERATION_URL", &url));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("federation is off"), "{}", out.stderr);
    let shown: svc::events::federation::Payload =
        serde_json::from_str(&out.stdout).expect("payload");
    let out = run(svc(state.path())
        .args(["federation", "send"])
        .env("SVC_FEDERATION_URL", &url)
        .env("SVC_FEDERATION", "0"));
    assert_eq!(out.code, 2);
    assert!(
        out.stderr
            .contains("federation is off: set SVC_FEDERATION=1"),
        "{}",
        out.stderr
    );
    let (sent, _) = runtime.block_on(svc::events::service::share_weights(
        state.path(),
        None,
        None,
    ));
    assert_eq!(sent, None);
    assert_eq!(
        endpoint.calls.load(Ordering::SeqCst),
        0,
        "nothing left the machine"
    );

    // Opted in: one payload, exactly what `show` printed.
    let out = run(svc(state.path())
        .args(["federation", "send"])
        .env("SVC_FEDERATION_URL", &url)
        .env("SVC_FEDERATION", "1"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let bodies = endpoint.bodies.lock().expect("lock").clone();
    assert_eq!(bodies.len(), 1);
    let received: svc::events::federation::Payload =
        serde_json::from_value(bodies[0].clone()).expect("payload");
    assert_eq!(received, shown);

    // The daemon's path shares a new version once, and never the untouched defaults.
    let settings = svc::events::federation::FederationSettings { url: url.clone() };
    let (sent, line) = runtime.block_on(svc::events::service::share_weights(
        state.path(),
        Some(&settings),
        None,
    ));
    if shown.weights_version > 0 {
        assert_eq!(sent, Some(shown.weights_version), "{line:?}");
        let (again, _) = runtime.block_on(svc::events::service::share_weights(
            state.path(),
            Some(&settings),
            sent,
        ));
        assert_eq!(again, sent);
        assert_eq!(
            endpoint.calls.load(Ordering::SeqCst),
            2,
            "the same version is not re-sent"
        );
    }
    let fresh = tempfile::tempdir().expect("fresh state");
    let (sent, _) = runtime.block_on(svc::events::service::share_weights(
        fresh.path(),
        Some(&settings),
        None,
    ));
    assert_eq!(
        sent, None,
        "version 0 is the defaults: nothing learned to share"
    );
}

/// Found by probing: `svc dream` whose notifications could not all be sent in time said only
/// "some notifications were still pending at exit" (no target, no count).
#[test]
fn dream_names_the_notifications_it_could_not_send_in_time() {
    let state = tempfile::tempdir().expect("state");
    let work = tempfile::tempdir().expect("work");
    for query in QUERIES {
        prepare_and_advance(state.path(), work.path(), query);
    }
    // A receiver that accepts connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/hook", silent.local_addr().expect("address"));
    let out = run(svc(state.path())
        .args(["dream", "--deliver-timeout", "0.5"])
        .env("SVC_WEBHOOK_CHAT_A", &url));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("notifications still pending at exit were not sent: webhook chat_a"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("event(s))"), "{}", out.stderr);
    drop(silent);
}
