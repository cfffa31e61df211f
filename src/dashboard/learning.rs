//! The learning part of the control API: `GET /api/control/learning` (the ranking weights in
//! use, their version and bounds, what they learned from), and the actions behind the control
//! panel's buttons: reset, learn from recorded feedback now, and autotune on the git history of
//! the daemon's repositories in the background.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};

use super::DashboardState;
use super::control::{NoBody, error};
use crate::context::localize::{self, PreparedTask};
use crate::context::weights::{Feature, RankingWeights};
use crate::daemon::learning::autotune::{self, AutotuneSettings};
use crate::daemon::learning::feedback;
use crate::daemon::learning::store::{self, FeedbackCursor, WeightsSource};
use crate::witness::store::FeedbackTotals;

/// Where the background autotune is.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutotuneJob {
    /// `idle`, `running`, `done` or `failed`.
    pub state: String,
    pub started_at: Option<String>,
    pub finished_at: Option<String>,
    /// The search's decision (adopted or refused, and why), or the error.
    pub message: Option<String>,
    pub adopted: Option<bool>,
}

/// The autotune job of a dashboard (one at a time).
#[derive(Debug, Default)]
pub struct AutotuneSlot(Mutex<Option<AutotuneJob>>);

impl AutotuneSlot {
    fn get(&self) -> AutotuneJob {
        let job = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
        job.unwrap_or_else(|| AutotuneJob {
            state: "idle".into(),
            ..AutotuneJob::default()
        })
    }

    fn set(&self, job: AutotuneJob) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(job);
    }
}

/// `GET /api/control/learning`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Learning {
    /// `learned` (a weights file exists), `not_learned` (the defaults are in use) or `broken`
    /// (the weights file cannot be read; the defaults are in use).
    pub status: String,
    /// Version of the weights file (0 while nothing was learned).
    pub version: u64,
    /// What produced this version: `default`, `feedback`, `autotune` or `reset`.
    pub source: WeightsSource,
    pub updated_at: Option<String>,
    /// The weights selection uses now.
    pub weights: RankingWeights,
    pub defaults: RankingWeights,
    /// `[low, high]` of each weight.
    pub bounds: BTreeMap<String, [f64; 2]>,
    /// How far the feedback loop has read the world-model ledger.
    pub feedback: FeedbackCursor,
    /// Feedback recorded on witness certificates (shown; it names no ranked fragment, so it
    /// moves no weight).
    pub feedback_totals: Option<FeedbackTotals>,
    pub autotune: AutotuneJob,
    pub message: String,
}

pub fn learning_of(state: &DashboardState) -> Learning {
    let home = &state.settings.state_home;
    let witness = crate::witness::store::Store::at(home.join("witness"));
    let bounds = Feature::ALL
        .iter()
        .map(|f| {
            let (low, high) = f.bounds();
            (f.name().to_string(), [low, high])
        })
        .collect();
    let (status, file, message) = match store::load(home) {
        Ok(Some(file)) => {
            let message = format!(
                "weights v{} from {}; learned from {} recorded outcomes ({} recovered chunks)",
                file.version,
                source_name(file.source),
                file.feedback.outcomes_seen,
                file.feedback.recovered_chunks_used
            );
            ("learned", file, message)
        }
        Ok(None) => (
            "not_learned",
            store::WeightsFile::default(),
            "no learned weights yet: selection uses the default weights; fixed-point runs (proof sessions, recorded outcomes) and autotune teach it".to_string(),
        ),
        Err(e) => (
            "broken",
            store::WeightsFile::default(),
            format!("{e}; selection uses the default weights"),
        ),
    };
    Learning {
        status: status.into(),
        version: file.version,
        source: file.source,
        updated_at: (status == "learned").then(|| file.updated_at.clone()),
        weights: file.weights,
        defaults: RankingWeights::default(),
        bounds,
        feedback: file.feedback,
        feedback_totals: witness.feedback_totals().ok(),
        autotune: state.autotune.get(),
        message,
    }
}

fn source_name(source: WeightsSource) -> String {
    serde_json::to_value(source)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

async fn blocking<T: Send + 'static>(
    task: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, Response> {
    match tokio::task::spawn_blocking(task).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(message)) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "learning_error",
            message,
        )),
        Err(join) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "learning_error",
            join.to_string(),
        )),
    }
}

pub async fn get_learning(State(state): State<Arc<DashboardState>>) -> Response {
    let worker = state.clone();
    match blocking(move || Ok(learning_of(&worker))).await {
        Ok(learning) => Json(learning).into_response(),
        Err(response) => response,
    }
}

/// `POST /api/control/learning/reset`.
pub async fn reset(State(state): State<Arc<DashboardState>>, _: NoBody) -> Response {
    let worker = state.clone();
    let result = blocking(move || {
        store::reset(&worker.settings.state_home).map_err(|e| e.to_string())?;
        Ok(learning_of(&worker))
    })
    .await;
    match result {
        Ok(learning) => {
            state.log(
                "learning",
                format!("weights reset to the defaults as v{}", learning.version),
            );
            Json(learning).into_response()
        }
        Err(response) => response,
    }
}

/// `POST /api/control/learning/update`: learn from recorded outcomes now.
pub async fn update(State(state): State<Arc<DashboardState>>, _: NoBody) -> Response {
    let worker = state.clone();
    let result = blocking(move || {
        feedback::learn_from_runs(&worker.settings.state_home).map_err(|e| e.to_string())
    })
    .await;
    match result {
        Ok(report) => {
            state.log(
                "learning",
                format!(
                    "read {} outcomes, {} recovered chunks used; weights v{} → v{}",
                    report.outcomes_read,
                    report.recovered_chunks_used,
                    report.version_before,
                    report.version_after
                ),
            );
            Json(report).into_response()
        }
        Err(response) => response,
    }
}

/// `POST /api/control/learning/autotune`: starts an autotune on the git history of the
/// daemon's repositories (202); 409 while one runs or when no repository has history.
pub async fn start_autotune(State(state): State<Arc<DashboardState>>, _: NoBody) -> Response {
    if state.autotune.get().state == "running" {
        return error(
            StatusCode::CONFLICT,
            "autotune_running",
            "an autotune is already running; GET /api/control/learning shows its progress".into(),
        );
    }
    let repos: Vec<PathBuf> = state
        .repos()
        .into_iter()
        .map(|r| r.path)
        .filter(|p| p.join(".git").exists())
        .collect();
    if repos.is_empty() {
        return error(
            StatusCode::CONFLICT,
            "no_repository",
            "autotune mines tasks from git history: add a git repository in the repo manager (or run `svc learning autotune --repo PATH`)".into(),
        );
    }
    let job = AutotuneJob {
        state: "running".into(),
        started_at: Some(super::now()),
        ..AutotuneJob::default()
    };
    state.autotune.set(job.clone());
    state.log(
        "learning",
        format!("autotune started on {} repositories", repos.len()),
    );
    let worker = state.clone();
    tokio::task::spawn_blocking(move || {
        let outcome = run_autotune(&worker.settings.state_home, &repos);
        let mut done = worker.autotune.get();
        done.finished_at = Some(super::now());
        match outcome {
            Ok((adopted, decision)) => {
                done.state = "done".into();
                done.adopted = Some(adopted);
                done.message = Some(decision.clone());
                worker.log("learning", format!("autotune {decision}"));
            }
            Err(message) => {
                done.state = "failed".into();
                done.message = Some(message.clone());
                worker.log("learning", format!("autotune failed: {message}"));
            }
        }
        worker.autotune.set(done);
    });
    (StatusCode::ACCEPTED, Json(job)).into_response()
}

fn run_autotune(home: &std::path::Path, repos: &[PathBuf]) -> Result<(bool, String), String> {
    let settings = AutotuneSettings::default();
    let mut prepared = Vec::new();
    for repo in repos {
        let tasks = localize::mine_tasks(repo, "HEAD", 60, 8).map_err(|e| e.to_string())?;
        for task in &tasks {
            prepared.push(PreparedTask::new(repo, task).map_err(|e| e.to_string())?);
        }
    }
    let file = store::load_or_default(home).map_err(|e| e.to_string())?;
    let report = autotune::autotune(&prepared, &file.weights, &settings, &|_, _, _| {})
        .map_err(|e| e.to_string())?;
    if report.adopted {
        // Onto the file as it is now: feedback may have been learned while autotune ran.
        store::update(home, |file| {
            file.advance(report.candidate, WeightsSource::Autotune);
            true
        })
        .map_err(|e| e.to_string())?;
    }
    Ok((report.adopted, report.decision))
}

/// The ranking-weights panel: each weight as a bar across its bounds with the default marked
/// (a person sees at a glance what learning moved), the version and what it learned from; the
/// control panel adds Reset, Learn now and Autotune.
pub fn weights_html(learning: &Learning, with_controls: bool) -> String {
    use super::html::escape;
    use std::fmt::Write;
    let mut out = String::from("<section id=\"weights\"><h2>Ranking weights</h2>");
    let _ = write!(
        out,
        "<p class=\"{}\" data-field=\"learning-status\">{}</p>",
        if learning.status == "broken" {
            "bad"
        } else {
            ""
        },
        escape(&learning.message)
    );
    out.push_str("<table class=\"weights\"><thead><tr><th>weight</th><th>value</th><th>default</th><th>within its bounds</th></tr></thead><tbody>");
    for feature in Feature::ALL {
        let (low, high) = feature.bounds();
        let value = learning.weights.get(feature);
        let default = learning.defaults.get(feature);
        let at = |v: f64| 200.0 * (v - low) / (high - low);
        let moved = if value == default { "" } else { " moved" };
        let _ = write!(
            out,
            "<tr class=\"weight{moved}\" data-weight=\"{name}\"><td><code>{name}</code></td><td>{value:.4}</td><td>{default}</td><td><svg width=\"210\" height=\"14\" role=\"img\" aria-label=\"{name} {value:.3} in [{low}, {high}], default {default}\"><rect x=\"0\" y=\"5\" width=\"200\" height=\"4\" fill=\"#d7dde4\"/><rect x=\"0\" y=\"4\" width=\"{bar:.1}\" height=\"6\" fill=\"#2f6fb0\"/><line x1=\"{d:.1}\" x2=\"{d:.1}\" y1=\"0\" y2=\"14\" stroke=\"#b03a2e\" stroke-width=\"2\"/></svg> <small>[{low}, {high}]</small></td></tr>",
            name = feature.name(),
            bar = at(value),
            d = at(default),
        );
    }
    out.push_str("</tbody></table>");
    let _ = write!(
        out,
        "<p><small>Bars: the value within its bounds; red mark: the default. Version {} ({}); {} outcomes read, {} recovered chunks learned from, {} skipped.</small></p>",
        learning.version,
        source_name(learning.source),
        learning.feedback.outcomes_seen,
        learning.feedback.recovered_chunks_used,
        learning.feedback.recovered_chunks_skipped
    );
    if with_controls {
        let job = &learning.autotune;
        let running = job.state == "running";
        let _ = write!(
            out,
            "<p><button id=\"weights-reset\" data-post=\"/api/control/learning/reset\" data-confirm=\"Put the default weights back?\">Reset</button> \
<button id=\"weights-update\" data-post=\"/api/control/learning/update\">Learn from recorded outcomes</button> \
<button id=\"weights-autotune\" data-post=\"/api/control/learning/autotune\"{}>Autotune</button></p><p data-field=\"autotune\">Autotune: {}{}</p>",
            if running { " disabled" } else { "" },
            escape(&job.state),
            job.message
                .as_deref()
                .map(|m| format!(" — {}", escape(m)))
                .unwrap_or_default()
        );
    }
    out.push_str("</section>");
    out
}
