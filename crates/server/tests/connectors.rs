//! Chat connectors against local fakes of the chats' APIs, with the real
//! daemon on a random loopback port over a real SQLite file.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common;
#[path = "connectors/busy.rs"]
mod busy;
#[path = "connectors/catch_up.rs"]
mod catch_up;
#[path = "connectors/discord.rs"]
mod discord;
#[path = "connectors/edge_review.rs"]
mod edge_review;
#[path = "connectors/fake.rs"]
mod fake;
#[path = "connectors/gateway_fake.rs"]
mod gateway_fake;
#[path = "connectors/lost_answers.rs"]
mod lost_answers;
#[path = "connectors/previews.rs"]
mod previews;
#[path = "connectors/reliability.rs"]
mod reliability;
#[path = "connectors/slack.rs"]
mod slack;
#[path = "connectors/smaller.rs"]
mod smaller;
#[path = "connectors/tasks_in_chat.rs"]
mod tasks_in_chat;
#[path = "connectors/teams.rs"]
mod teams;
#[path = "connectors/telegram.rs"]
mod telegram;
#[path = "connectors/whatsapp.rs"]
mod whatsapp;

use std::time::{Duration, Instant};

use common::TestApp;
use reqwest::Method;
use serde_json::{Value, json};

/// Requests an action the standard profile asks about; its id.
pub async fn pending(app: &TestApp, detail: &str) -> String {
    let (status, a) = app.request("bash", detail).await;
    assert!(status.is_success(), "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    a["id"].as_str().unwrap().to_owned()
}

/// The action as the API shows it.
pub async fn action(app: &TestApp, id: &str) -> Value {
    let op = app.operator.clone();
    let (status, a) = app
        .call(Method::GET, &format!("/v1/actions/{id}"), Some(&op), None)
        .await;
    assert!(status.is_success(), "{a}");
    a
}

/// Waits until action `id` has `status`.
pub async fn wait_status(app: &TestApp, id: &str, status: &str) -> Value {
    for _ in 0..200 {
        let a = action(app, id).await;
        if a["status"] == status {
            return a;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!(
        "action {id} never became {status}: {}",
        action(app, id).await
    );
}

/// The history of a settled action's events (its stream ends once settled).
pub async fn events_text(app: &TestApp, id: &str) -> String {
    let op = app.operator.clone();
    let resp = app
        .send(
            Method::GET,
            &format!("/v1/actions/{id}/events"),
            Some(&op),
            None,
        )
        .await;
    assert!(resp.status().is_success());
    tokio::time::timeout(Duration::from_secs(10), resp.text())
        .await
        .unwrap()
        .unwrap()
}

/// Median time of `n` action requests.
pub async fn request_latency(app: &TestApp, n: usize) -> Duration {
    let mut times = Vec::new();
    for i in 0..n {
        let t = Instant::now();
        pending(app, &format!("make deploy-{i}")).await;
        times.push(t.elapsed());
    }
    times.sort();
    times[n / 2]
}

/// A card's text without the marks that draw agent text left to right
/// (U+2066 U+202D … U+202C U+2069), for tests that look for its words.
pub fn plain(text: &str) -> String {
    text.replace(['\u{2066}', '\u{202d}', '\u{202c}', '\u{2069}'], "")
}

/// Common checks of the "chat API down" scenario: the first post failed,
/// and the first retry came within 5 s of it.
pub fn assert_retried(calls: &[fake::Call]) {
    assert!(calls.len() >= 2, "{calls:#?}");
    let gap = calls[1].at - calls[0].at;
    assert!(gap < Duration::from_secs(5), "first retry after {gap:?}");
}

/// The built `actiongate` binary, configured by the environment alone,
/// with an agent `a1` on the standard profile.
pub struct Daemon {
    child: tokio::process::Child,
    base: String,
    admin: String,
    agent: String,
    client: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Daemon {
    pub async fn start(env: &[(&str, String)]) -> Daemon {
        actiongate_cli::install_tls_provider();
        let dir = tempfile::tempdir().unwrap();
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_actiongate"));
        cmd.arg("serve")
            .current_dir(dir.path())
            .env("ACTIONGATE_LISTEN", format!("127.0.0.1:{port}"))
            .env("ACTIONGATE_DATA_DIR", dir.path().join("data"))
            .env("ACTIONGATE_STORAGE__DURABILITY", "normal")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::new();
        let key_path = dir.path().join("data/admin.key");
        let mut admin = String::new();
        for _ in 0..800 {
            if let Ok(k) = std::fs::read_to_string(&key_path)
                && !k.trim().is_empty()
                && client.get(format!("{base}/healthz")).send().await.is_ok()
            {
                admin = k.trim().to_owned();
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(!admin.is_empty(), "the daemon did not start");
        let mut d = Daemon {
            child,
            base,
            admin,
            agent: String::new(),
            client,
            _dir: dir,
        };
        let admin = d.admin.clone();
        let key = d
            .call(
                Method::POST,
                "/v1/keys",
                &admin,
                json!({"role": "agent", "agent": "a1"}),
            )
            .await;
        d.agent = key["key"].as_str().unwrap().to_owned();
        d.call(
            Method::PUT,
            "/v1/agents/a1",
            &admin,
            json!({"profile": "standard"}),
        )
        .await;
        d
    }

    pub async fn call(&self, method: Method, path: &str, key: &str, body: Value) -> Value {
        let mut req = self
            .client
            .request(method.clone(), format!("{}{path}", self.base))
            .bearer_auth(key);
        if method != Method::GET {
            req = req.json(&body);
        }
        req.send().await.unwrap().json().await.unwrap()
    }

    /// Requests a decision-only action the standard profile asks about.
    pub async fn pending(&self, detail: &str) -> String {
        let a = self
            .call(
                Method::POST,
                "/v1/actions",
                &self.agent,
                json!({"tool": "bash", "detail": detail}),
            )
            .await;
        assert_eq!(a["status"], "pending", "{a}");
        a["id"].as_str().unwrap().to_owned()
    }

    pub async fn wait_status(&self, id: &str, status: &str) -> Value {
        let mut a = Value::Null;
        for _ in 0..200 {
            a = self
                .call(
                    Method::GET,
                    &format!("/v1/actions/{id}"),
                    &self.admin,
                    Value::Null,
                )
                .await;
            if a["status"] == status {
                return a;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("action {id} never became {status}: {a}");
    }

    pub async fn stop(mut self) {
        self.child.start_kill().unwrap();
        let _ = self.child.wait().await;
    }
}

/// A configuration nobody set: no connector, no webhook routes.
#[tokio::test]
async fn without_connectors_the_webhooks_are_not_there() {
    let app = TestApp::spawn().await;
    let (status, _) = app
        .call(
            Method::POST,
            "/v1/connectors/telegram/webhook",
            None,
            Some(json!({})),
        )
        .await;
    assert_eq!(status, 404);
    app.stop().await;
}

/// The shipped config file names every connector key with its default.
#[test]
fn the_shipped_config_file_shows_the_connector_defaults() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/actiongate.toml");
    let s = actiongate_server::config::Settings::load(Some(&path), &Default::default()).unwrap();
    let defaults = actiongate_server::config::ConnectorsSettings::default();
    assert_eq!(
        serde_json::to_value(&s.connectors).unwrap(),
        serde_json::to_value(&defaults).unwrap()
    );
    let text = std::fs::read_to_string(&path).unwrap();
    for key in [
        "[connectors.telegram]",
        "[connectors.slack]",
        "[connectors.discord]",
        "[connectors.whatsapp]",
        "webhook_secret",
        "public_key",
        "verify_token",
        "signing_secret",
        "notify_only",
        "gateway_url",
        "mode = \"gateway\"",
        "/v1/connectors/slack/events",
    ] {
        assert!(text.contains(key), "{key} is not documented");
    }
}
