//! Black-box tests of profile examples: `PUT /v1/agents/{id}` refuses a
//! profile that answers one of its examples otherwise (422 naming every
//! such example, nothing changed), and the daemon refuses to start with a
//! configured default profile that does.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::{Command, Stdio};

use serde_json::json;

use crate::common;
use common::daemon::Daemon;
use common::{binary, call, client, free_port};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_is_set_only_when_it_answers_its_examples() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let url = format!("{}/v1/agents/bot", d.base);
    let good = json!({"allow": ["tool:git:status"], "ask": ["tool:git:.*"], "deny": ["tool:git:push.*"],
        "examples": {"allow": ["tool:git:status"], "ask": ["tool:git:log"], "deny": ["tool:git:push origin", "tool:bash:ls"]}});
    let (s, b) = call(
        &http,
        reqwest::Method::PUT,
        url.clone(),
        &admin,
        Some(json!({"profile": good})),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    assert_eq!(b["profile"]["examples"]["ask"][0], "tool:git:log");

    // Two examples answered otherwise: both named, the agent unchanged.
    let bad = json!({"allow": ["tool:git:.*"], "ask": [],
        "examples": {"allow": ["tool:git:status"], "ask": ["tool:git:log"], "deny": ["tool:git:push origin"]}});
    let (s, b) = call(
        &http,
        reqwest::Method::PUT,
        url.clone(),
        &admin,
        Some(json!({"profile": bad})),
    )
    .await;
    assert_eq!(s, 422, "{b}");
    let fields: Vec<&str> = b["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        ["profile.examples.ask[0]", "profile.examples.deny[0]"],
        "{b}"
    );
    assert!(b.to_string().contains("tool:git:log"), "{b}");
    let (_, agent) = call(&http, reqwest::Method::GET, url.clone(), &admin, None).await;
    assert_eq!(agent["profile"], good);
    // An example that is no action string is named too.
    let (s, b) = call(
        &http,
        reqwest::Method::PUT,
        url.clone(),
        &admin,
        Some(json!({"profile": {"allow": [], "ask": [], "examples": {"deny": ["rm -rf /"]}}})),
    )
    .await;
    assert_eq!(s, 422, "{b}");
    assert_eq!(b["errors"][0]["field"], "profile.examples.deny[0]");
    // Unknown keys in examples are refused.
    let (s, _) = call(
        &http,
        reqwest::Method::PUT,
        url.clone(),
        &admin,
        Some(json!({"profile": {"allow": [], "ask": [], "examples": {"maybe": []}}})),
    )
    .await;
    assert_eq!(s, 422);
    d.stop();
}

#[test]
fn the_daemon_does_not_start_with_a_default_profile_failing_its_examples() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("actiongate.toml");
    std::fs::write(
        &config,
        "[policy]\ndefault_profile = { allow = [\"tool:git:.*\"], ask = [], examples = { deny = [\"tool:git:push x\"], ask = [\"tool:git:log\"] } }\n",
    )
    .unwrap();
    let out = Command::new(binary("actiongate"))
        .arg("serve")
        .arg("--config")
        .arg(&config)
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", free_port()))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("policy.default_profile.examples.ask[0]"),
        "{err}"
    );
    assert!(
        err.contains("policy.default_profile.examples.deny[0]"),
        "{err}"
    );
}
