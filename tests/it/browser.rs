//! The dashboard in a real headless Chromium, driven through chromedriver's WebDriver protocol
//! (plain HTTP, no client crate): load the pages, click controls, check through the API that
//! the state changed. Skipped, with the reason printed, when chromium or chromedriver is not on
//! PATH, so the suite still passes on a machine without them.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use svc::dashboard::{DashboardSettings, DashboardState, Role};
use svc::proxy::{ProxySettings, ProxyState};

use crate::dashboard::serve;
use crate::harness::{run, svc};

fn on_path(names: &[&str]) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
        .find(|p| p.is_file())
}

struct Driver {
    child: Child,
    url: String,
    session: String,
    http: reqwest::Client,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    async fn start(chromium: &PathBuf, chromedriver: &PathBuf) -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        svc::witness::nli::install_crypto_provider();
        let http = reqwest::Client::new();
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ready = http.get(format!("{url}/status")).send().await;
            if let Ok(response) = ready
                && response.status().is_success()
            {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver did not answer");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000"]
            }
        }}});
        let created: Value = http
            .post(format!("{url}/session"))
            .json(&capabilities)
            .send()
            .await
            .expect("session")
            .json()
            .await
            .expect("json");
        let session = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_string();
        Driver {
            child,
            url: format!("{url}/session/{session}"),
            session,
            http,
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Value) -> Value {
        let response: Value = self
            .http
            .request(method, format!("{}{path}", self.url))
            .json(&body)
            .send()
            .await
            .expect("webdriver call")
            .json()
            .await
            .expect("json");
        if response["value"]["error"].is_string() {
            panic!("webdriver {path}: {response}");
        }
        response["value"].clone()
    }

    async fn open(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", json!({"url": url}))
            .await;
    }

    async fn script(&self, script: &str) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            json!({"script": script, "args": []}),
        )
        .await
    }

    async fn click(&self, css: &str) {
        let element = self
            .call(
                reqwest::Method::POST,
                "/element",
                json!({"using": "css selector", "value": css}),
            )
            .await;
        let id = element
            .as_object()
            .and_then(|o| o.values().next())
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("no element {css}: {element}"))
            .to_string();
        self.call(
            reqwest::Method::POST,
            &format!("/element/{id}/click"),
            json!({}),
        )
        .await;
    }

    /// Polls `script` (returning a boolean) until it is true.
    async fn wait_until(&self, script: &str, what: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if self.script(script).await == Value::Bool(true) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("timed out waiting for {what} in session {}", self.session);
    }
}

#[tokio::test]
async fn chromium_loads_every_page_and_its_clicks_change_the_state() {
    let (Some(chromium), Some(chromedriver)) = (
        on_path(&["chromium", "chromium-browser", "google-chrome"]),
        on_path(&["chromedriver"]),
    ) else {
        eprintln!(
            "skipped: chromium and chromedriver are not both on PATH (Debian: apt-get install chromium chromium-driver)"
        );
        return;
    };
    let home = tempfile::tempdir().expect("tempdir");
    let runs = home.path().join("runs");
    let made = run(svc(home.path())
        .args([
            "run",
            "--workload",
            "fixtures/harness/halueval-mini",
            "--budget",
            "64",
            "--out",
        ])
        .arg(runs.join("mini")));
    assert_eq!(made.code, 0, "{}", made.stderr);
    let proxy =
        ProxyState::new(ProxySettings::new(home.path().to_path_buf()), None).expect("proxy");
    let mut settings = DashboardSettings::new(Role::Daemon, home.path().to_path_buf());
    settings.run_roots = vec![runs];
    let state = DashboardState::new(settings, Some(proxy.clone()));
    let url = serve(state.clone()).await;
    let driver = Driver::start(&chromium, &chromedriver).await;

    driver.open(&format!("{url}/")).await;
    assert_eq!(
        driver.script("return document.title").await,
        "Dashboard · svc"
    );
    assert_eq!(
        driver
            .script("return document.querySelector('[data-field=optimization]').textContent")
            .await,
        "enabled"
    );

    driver.open(&format!("{url}/controls")).await;
    assert_eq!(
        driver.script("return document.title").await,
        "Controls · svc"
    );
    driver.click("#pause").await;
    driver
        .wait_until(
            "return document.getElementById('message').textContent.startsWith('Done')",
            "the pause to be acknowledged",
        )
        .await;
    assert!(proxy.paused(), "the click paused the proxy");
    let status: Value = reqwest::get(format!("{url}/api/control/status"))
        .await
        .expect("status")
        .json()
        .await
        .expect("json");
    assert_eq!(status["optimization"], "paused");
    driver.click("#quality-max").await;
    driver
        .wait_until(
            "return document.getElementById('quality-max').getAttribute('aria-pressed') === 'true'",
            "the quality switch",
        )
        .await;
    assert_eq!(proxy.budget(), 64_000);
    assert_eq!(
        driver
            .script("return document.querySelector('[data-field=quality]').textContent")
            .await,
        "max"
    );
    driver.click("#enable").await;
    driver
        .wait_until(
            "return document.querySelector('[data-field=optimization]').textContent === 'enabled'",
            "enable",
        )
        .await;
    assert!(!proxy.paused());

    driver.open(&format!("{url}/runs")).await;
    assert_eq!(driver.script("return document.title").await, "Runs · svc");
    driver.click("#runs a").await;
    driver
        .wait_until(
            "return document.title.startsWith('Run ') && document.querySelectorAll('#trials tbody tr').length === 48",
            "the run page with its 48 trials",
        )
        .await;
    driver
        .wait_until(
            "return document.getElementById('report').textContent.includes('Verdict')",
            "the report to load into the run page",
        )
        .await;
    assert!(
        driver
            .script("return document.querySelectorAll('#report svg').length > 0")
            .await
            .as_bool()
            .expect("bool"),
        "the report's plots are inline"
    );
    // Filter by condition through the form.
    driver
        .script("document.getElementById('filter-condition').value = 'svc'; document.querySelector('form.filters').submit(); return true")
        .await;
    driver
        .wait_until(
            "return location.search.includes('condition=svc') && document.querySelectorAll('#trials tbody tr').length === 12",
            "the svc filter",
        )
        .await;
    driver.click("#trials tbody a").await;
    driver
        .wait_until(
            "return document.title.startsWith('Trial ') && document.querySelectorAll('.side > div').length === 4",
            "the trial across four conditions",
        )
        .await;
    driver.call(reqwest::Method::DELETE, "", json!({})).await;
}
