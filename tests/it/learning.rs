//! Learning the ranking weights: from recorded fixed-point outcomes through the ledger, the
//! `svc learning` commands, and the control API's learning routes.

use std::path::Path;

use serde_json::Value;
use svc::context::weights::{Feature, RankingWeights};
use svc::daemon::learning::{feedback, store};
use svc::dashboard::{DashboardSettings, DashboardState, Role};
use svc::proof::{ContextRiskMode, OutcomeSignal, VerifiedEfficiencyLayer};

use crate::harness::{run, svc};

const QUERY: &str = "When did the bridge open to traffic?";
/// Needs the park section, which a 30-token budget leaves out.
const NEEDS_PARK: &str = "The bridge opened to traffic in 1932. The botanic garden was founded in 1816 beside the harbour.";

fn docs() -> Vec<(String, String)> {
    vec![
        (
            "harbour.md".to_string(),
            "# Harbour\n\nThe harbour has two ferry wharves and a long sea wall built of sandstone.\n\n## Bridge\n\nThe bridge across the harbour opened to traffic in 1932 after eight years of work.\n\n## Tunnel\n\nA tunnel under the harbour opened in 1992 to relieve traffic on the bridge.\n".to_string(),
        ),
        (
            "city.md".to_string(),
            "# City\n\nThe city lies on the eastern coast. Its population passed five million in 2018.\n\n## Parks\n\nThe botanic garden was founded in 1816 beside the harbour.\n".to_string(),
        ),
    ]
}

/// Runs the loop once with a draft that needs an omitted chunk and records the outcome.
fn record_one_recovery(home: &Path) -> Vec<String> {
    let layer = VerifiedEfficiencyLayer::new(home, ContextRiskMode::Audit);
    let prepared = layer.prepare(&docs(), QUERY, 30).expect("prepare");
    let result = layer
        .run_fixed_point(&prepared, |_| Ok(NEEDS_PARK.to_string()), 3, 200, 2)
        .expect("run");
    let entry = layer
        .record_verified_outcome(
            &result,
            &OutcomeSignal {
                name: "user_accepted".into(),
                value: 1.0,
                detail: None,
            },
        )
        .expect("record");
    entry.recovered_chunk_ids
}

#[test]
fn recorded_outcomes_teach_the_weights_once_and_stay_in_bounds() {
    let home = tempfile::tempdir().expect("tempdir");
    let recovered = record_one_recovery(home.path());
    assert!(!recovered.is_empty(), "the loop recovered the park section");

    let report = feedback::learn_from_runs(home.path()).expect("learn");
    assert_eq!(report.outcomes_read, 1);
    assert_eq!(
        report.recovered_chunks_used,
        recovered.len() as u64,
        "every recovered chunk is found again in the rebuilt commit: {:?}",
        report.skipped
    );
    assert_eq!(report.recovered_chunks_skipped, 0);
    let file = store::load(home.path()).expect("load").expect("written");
    assert_eq!(file.feedback.learned.len(), 1);
    assert_eq!(file.feedback.outcomes_seen, 1);
    for feature in Feature::ALL {
        let (low, high) = feature.bounds();
        let value = file.weights.get(feature);
        assert!(
            low <= value && value <= high,
            "{} in bounds",
            feature.name()
        );
    }
    assert_eq!(
        file.version > 0,
        file.weights != RankingWeights::default(),
        "a version is made exactly when the weights moved"
    );
    // The sections that out-ranked the park section earned part of their score as headed
    // definitions; the park section earned none that way, so that weight goes down.
    assert!(
        file.weights.get(Feature::Definition) < Feature::Definition.default_value(),
        "{:?}",
        file.weights
    );

    // Read once: a second pass finds nothing new and writes no new version.
    let again = feedback::learn_from_runs(home.path()).expect("learn again");
    assert_eq!(again.outcomes_read, 0);
    assert_eq!(again.version_after, file.version);

    // A new outcome is read, and only it.
    record_one_recovery(home.path());
    let third = feedback::learn_from_runs(home.path()).expect("learn third");
    assert_eq!(third.outcomes_read, 1);
}

/// Found by probing: a run whose commit could not be read (the commits directory moved away)
/// was marked learned, so its signal was lost for good once the commits were back.
#[test]
fn a_run_whose_commit_cannot_be_read_is_learned_from_once_it_can() {
    let home = tempfile::tempdir().expect("tempdir");
    let recovered = record_one_recovery(home.path());
    let commits = home.path().join("commits");
    let aside = home.path().join("commits.aside");
    std::fs::rename(&commits, &aside).expect("move the commits away");
    let report = feedback::learn_from_runs(home.path()).expect("learn");
    assert_eq!((report.outcomes_read, report.runs_deferred), (1, 1));
    assert_eq!(report.recovered_chunks_used, 0);
    assert!(
        report.skipped[0].ends_with("the run is read again next time"),
        "{:?}",
        report.skipped
    );
    std::fs::rename(&aside, &commits).expect("move them back");
    let report = feedback::learn_from_runs(home.path()).expect("learn");
    assert_eq!(report.runs_deferred, 0);
    assert_eq!(report.recovered_chunks_used, recovered.len() as u64);
    let file = store::load(home.path()).expect("load").expect("written");
    assert_eq!(file.feedback.outcomes_seen, 1, "counted once");
}

#[test]
fn learning_commands_show_reset_and_refuse_a_broken_file_without_losing_it() {
    let home = tempfile::tempdir().expect("tempdir");
    let shown = run(svc(home.path()).args(["learning", "show"]));
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    assert!(
        shown.stdout.contains("no learned weights yet"),
        "{}",
        shown.stdout
    );
    assert!(shown.stdout.contains("caller"), "{}", shown.stdout);

    let path = home.path().join(store::WEIGHTS_FILE);
    std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
    std::fs::write(
        &path,
        "{\"format\": \"svc.ranking-weights.v1\",\n \"version\": }",
    )
    .expect("write");
    let broken = run(svc(home.path()).args(["learning", "show"]));
    assert_eq!(broken.code, 2);
    assert!(
        broken.stderr.contains("weights.json:2:"),
        "{}",
        broken.stderr
    );
    assert!(
        broken.stderr.contains("svc learning reset"),
        "{}",
        broken.stderr
    );

    // Selection keeps working on the defaults and says why.
    let dir = tempfile::tempdir().expect("corpus");
    std::fs::write(
        dir.path().join("a.md"),
        "# A\n\nThe bridge opened in 1932.\n",
    )
    .expect("doc");
    let selected = run(svc(home.path()).args([
        "context",
        "select",
        dir.path().to_str().expect("utf-8"),
        "--query",
        "bridge",
        "--budget",
        "200",
    ]));
    assert_eq!(selected.code, 0, "{}", selected.stderr);
    assert!(
        selected.stderr.contains("default weights"),
        "{}",
        selected.stderr
    );

    let reset = run(svc(home.path()).args(["learning", "reset"]));
    assert_eq!(reset.code, 0, "{}", reset.stderr);
    assert!(
        path.with_extension("json.broken").exists(),
        "the broken file is kept"
    );
    let json = run(svc(home.path()).args(["learning", "show", "--json"]));
    let value: Value = serde_json::from_str(&json.stdout).expect("json");
    assert_eq!(value["source"], "reset");
    assert_eq!(value["weights"]["caller"], 0.15);
    // Found by probing: the defaults and bounds learning.md promises were not in the JSON.
    assert_eq!(value["defaults"]["caller"], 0.15);
    assert!(
        value["bounds"]["caller"]
            .as_array()
            .is_some_and(|b| b.len() == 2),
        "{value}"
    );
}

#[tokio::test]
async fn the_control_api_resets_learns_and_refuses_autotune_without_history() {
    let home = tempfile::tempdir().expect("tempdir");
    record_one_recovery(home.path());
    let state = DashboardState::new(
        DashboardSettings::new(Role::Dashboard, home.path().to_path_buf()),
        None,
    );
    let url = crate::dashboard::serve(state).await;
    svc::witness::nli::install_crypto_provider();
    let http = reqwest::Client::new();
    let post = |path: &str| http.post(format!("{url}{path}")).send();

    let update: Value = post("/api/control/learning/update")
        .await
        .expect("update")
        .json()
        .await
        .expect("json");
    assert_eq!(update["outcomes_read"], 1);
    let learning: Value = http
        .get(format!("{url}/api/control/learning"))
        .send()
        .await
        .expect("get")
        .json()
        .await
        .expect("json");
    assert_eq!(learning["feedback"]["outcomes_seen"], 1);

    let reset = post("/api/control/learning/reset").await.expect("reset");
    assert_eq!(reset.status(), 200);
    let reset: Value = reset.json().await.expect("json");
    assert_eq!(reset["status"], "learned");
    assert_eq!(reset["source"], "reset");
    assert_eq!(reset["weights"], reset["defaults"]);

    let autotune = post("/api/control/learning/autotune")
        .await
        .expect("autotune");
    assert_eq!(autotune.status(), 409);
    let body: Value = autotune.json().await.expect("json");
    assert_eq!(body["error"]["type"], "no_repository");

    // State-changing learning routes refuse other origins like every control route.
    let foreign = http
        .post(format!("{url}/api/control/learning/reset"))
        .header("origin", "https://evil.example")
        .send()
        .await
        .expect("foreign");
    assert_eq!(foreign.status(), 403);

    let page = http
        .get(format!("{url}/controls"))
        .send()
        .await
        .expect("controls")
        .text()
        .await
        .expect("html");
    assert!(page.contains("id=\"weights-reset\""));
    assert!(page.contains("data-weight=\"callee\""));
}

#[test]
fn a_run_with_other_ranking_weights_records_them_and_is_another_experiment() {
    let home = tempfile::tempdir().expect("tempdir");
    let weights = home.path().join("weights.json");
    std::fs::write(&weights, r#"{"same_file": 0.2, "callee": 0.5}"#).expect("weights");
    let out = |name: &str| home.path().join(name);
    let base = [
        "run",
        "--workload",
        "fixtures/harness/halueval-mini",
        "--conditions",
        "svc",
        "--budget",
        "64",
        "--out",
    ];
    let plain = run(svc(home.path()).args(base).arg(out("plain")));
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    let tuned = run(svc(home.path())
        .args(base)
        .arg(out("tuned"))
        .arg("--ranking-weights")
        .arg(&weights));
    assert_eq!(tuned.code, 0, "{}", tuned.stderr);
    let manifest = |dir: &str| -> Value {
        serde_json::from_str(
            &std::fs::read_to_string(out(dir).join("manifest.json")).expect("manifest"),
        )
        .expect("json")
    };
    let (plain, tuned) = (manifest("plain"), manifest("tuned"));
    assert!(
        plain.get("ranking_weights").is_none(),
        "defaults are not named"
    );
    assert_eq!(tuned["ranking_weights"]["callee"], 0.5);
    assert_eq!(
        tuned["ranking_weights"]["caller"], 0.15,
        "unnamed weights keep defaults"
    );
    assert_ne!(
        plain["run_id"], tuned["run_id"],
        "other weights, another experiment"
    );

    // Out-of-bounds weights are refused by name before anything runs.
    std::fs::write(&weights, r#"{"callee": 5}"#).expect("weights");
    let refused = run(svc(home.path())
        .args(base)
        .arg(out("refused"))
        .arg("--ranking-weights")
        .arg(&weights));
    assert_eq!(refused.code, 2);
    assert!(
        refused.stderr.contains("`callee` = 5"),
        "{}",
        refused.stderr
    );
}

#[test]
fn learned_weights_reach_serving_but_never_an_experiment_with_fixed_settings() {
    let home = tempfile::tempdir().expect("tempdir");
    let mut file = store::load_or_default(home.path()).expect("default");
    let mut weights = RankingWeights::default();
    weights.set(Feature::SameFile, 0.3).expect("in bounds");
    file.advance(weights, store::WeightsSource::Autotune);
    store::save(home.path(), &file).expect("save");

    let serving = VerifiedEfficiencyLayer::new(home.path(), ContextRiskMode::Audit);
    let prepared = serving.prepare(&docs(), QUERY, 30).expect("prepare");
    assert_eq!(
        prepared.receipt.parameters["ranking_weights"]["same_file"], 0.3,
        "the commit names the learned weights it was selected with"
    );
    let experiment = VerifiedEfficiencyLayer::new(home.path(), ContextRiskMode::Audit)
        .with_select_options(svc::context::select::SelectOptions::default());
    let prepared = experiment.prepare(&docs(), QUERY, 30).expect("prepare");
    assert!(
        prepared.receipt.parameters.get("ranking_weights").is_none(),
        "fixed settings ignore the state home's learning"
    );
}

/// Regression: `svc learning show | head -1` panicked in `println!` ("failed printing to
/// stdout: Broken pipe"); a command that prints and exits now ends quietly, as Unix tools do.
#[cfg(unix)]
#[test]
fn a_closed_pipe_ends_a_printing_command_quietly() {
    let home = tempfile::tempdir().expect("tempdir");
    let mut child = svc(home.path())
        .args(["learning", "show"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    drop(child.stdout.take());
    let output = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(
        output.status.success() || output.status.code() == Some(141),
        "{:?}",
        output.status
    );
}

/// A small git history with fixed dates (so commit ids, and with them the tune/held-out split,
/// are the same on every machine): `commits` edits of one function each, in several files.
fn history(commits: usize) -> tempfile::TempDir {
    let repo = tempfile::tempdir().expect("repo");
    let git = |args: &[&str], at: usize| {
        let date = format!("2026-01-01T00:{:02}:00Z", at % 60);
        let status = std::process::Command::new("git")
            .arg("-C")
            .arg(repo.path())
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .env("GIT_AUTHOR_DATE", &date)
            .env("GIT_COMMITTER_DATE", &date)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("git runs");
        assert!(status.success(), "git {args:?}");
    };
    git(&["init", "-q", "-b", "main"], 0);
    let names = ["parse", "render", "store", "fetch", "merge", "split"];
    let write = |round: usize| {
        for (i, name) in names.iter().enumerate() {
            let body: String = (0..6)
                .map(|k| {
                    let v = if k == round % 6 && i == round % names.len() {
                        100 + round
                    } else {
                        k
                    };
                    format!("def {name}_step_{k}(value):\n    return value + {v}\n\n\n")
                })
                .collect();
            std::fs::write(repo.path().join(format!("{name}.py")), body).expect("write");
        }
    };
    write(0);
    git(&["add", "-A"], 0);
    git(&["commit", "-qm", "initial"], 0);
    for round in 1..=commits {
        write(round);
        let name = names[round % names.len()];
        let message = format!(
            "{name} step {} returns the value plus {}",
            round % 6,
            100 + round
        );
        git(&["commit", "-qam", &message], round);
    }
    repo
}

#[test]
fn autotune_searches_on_tune_tasks_decides_on_held_out_ones_and_adopts_only_by_the_rule() {
    let repo = history(16);
    let home = tempfile::tempdir().expect("home");
    let out = home.path().join("autotune");
    let report = run(svc(home.path()).args([
        "learning",
        "autotune",
        "--repo",
        repo.path().to_str().expect("utf-8"),
        "--budgets",
        "150",
        "--max-evaluations",
        "4",
        "--out",
        out.to_str().expect("utf-8"),
    ]));
    assert_eq!(report.code, 0, "{}", report.stderr);
    assert!(
        report
            .stdout
            .starts_with("# Autotune of the ranking weights"),
        "{}",
        report.stdout
    );
    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("autotune.json")).expect("autotune.json"),
    )
    .expect("json");
    assert!(json["tune_tasks"].as_u64().expect("tune") > 0);
    assert!(json["held_out_tasks"].as_u64().expect("held out") > 0);
    assert!(
        json["evaluations"].as_u64().expect("evaluations") <= 4,
        "bounded"
    );
    // The weights file changed exactly when the report says the candidate was adopted.
    let adopted = json["adopted"].as_bool().expect("adopted");
    let file = store::load(home.path()).expect("load");
    assert_eq!(file.is_some(), adopted, "{}", json["decision"]);
    if adopted {
        assert_eq!(
            serde_json::to_value(file.expect("file").weights).expect("json"),
            json["candidate"]
        );
    }

    // A history too short for both parts is a clear error, not a silent adoption.
    let short = history(1);
    let refused = run(svc(home.path()).args([
        "learning",
        "autotune",
        "--repo",
        short.path().to_str().expect("utf-8"),
        "--budgets",
        "150",
    ]));
    assert_eq!(refused.code, 2);
    assert!(
        refused
            .stderr
            .contains("autotune needs tasks of both parts"),
        "{}",
        refused.stderr
    );
}
