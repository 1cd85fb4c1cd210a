//! Chat connectors against local fakes of the chats' APIs, with the real
//! daemon on a random loopback port over a real SQLite file.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common;
#[path = "connectors/discord.rs"]
mod discord;
#[path = "connectors/fake.rs"]
mod fake;
#[path = "connectors/gateway_fake.rs"]
mod gateway_fake;
#[path = "connectors/reliability.rs"]
mod reliability;
#[path = "connectors/slack.rs"]
mod slack;
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

/// Common checks of the "chat API down" scenario: the first post failed,
/// and the first retry came within 5 s of it.
pub fn assert_retried(calls: &[fake::Call]) {
    assert!(calls.len() >= 2, "{calls:#?}");
    let gap = calls[1].at - calls[0].at;
    assert!(gap < Duration::from_secs(5), "first retry after {gap:?}");
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
    ] {
        assert!(text.contains(key), "{key} is not documented");
    }
}
