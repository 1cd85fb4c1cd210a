//! Black-box tests: sensitive means sensitive. A handler registration
//! whose scope pointer is, contains or lies inside a sensitive param is
//! refused (422 naming both), as a `detail` naming one already was; and a
//! sensitive value sent by an agent appears nowhere the daemon shows it
//! (the action, its list, the audit export, the event stream).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use crate::audit::export;
use crate::common;
use common::daemon::{Daemon, agent_key, register_handler, role_key};
use common::{call, client};

const SECRET: &str = "tok-5f0c1b7e-not-for-eyes";

fn registration(scope: Value, sensitive: Value) -> Value {
    json!({
        "id": "vault", "name": "Vault", "url": "http://127.0.0.1:9/hook",
        "permissions": [{"name": "read", "parameters_schema": {"type": "object", "properties": {"key": {}}}}],
        "actions": [{
            "name": "read", "permission": "read",
            "params_schema": {"type": "object", "properties": {
                "user": {"type": "string"},
                "auth": {"type": "object", "properties": {"token": {"type": "string"}}}
            }},
            "scope": scope, "sensitive": sensitive, "detail": "read as {user}"
        }]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scope_pointer_at_a_sensitive_param_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    for (scope, sensitive) in [
        ("/auth/token", "/auth/token"), // is
        ("/auth", "/auth/token"),       // contains
        ("/auth/token", "/auth"),       // lies inside
    ] {
        let (s, p) = call(
            &http,
            reqwest::Method::POST,
            format!("{}/v1/handlers", d.base),
            &admin,
            Some(registration(json!({"key": scope}), json!([sensitive]))),
        )
        .await;
        assert_eq!(s, 422, "{scope} vs {sensitive}: {p}");
        let e = &p["errors"][0];
        assert_eq!(e["field"], "actions[0].scope.key", "{p}");
        let msg = e["message"].as_str().unwrap();
        assert!(
            msg.contains(&format!("'{scope}'")) && msg.contains(&format!("'{sensitive}'")),
            "names both: {msg}"
        );
    }
    // Not stored: the id is still free.
    register_handler(
        &http,
        &d.base,
        &admin,
        registration(json!({"key": "/user"}), json!(["/auth"])),
    )
    .await;
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sensitive_value_is_shown_nowhere() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    register_handler(
        &http,
        &d.base,
        &admin,
        registration(json!({"key": "/user"}), json!(["/auth/token"])),
    )
    .await;
    // Follow the operator's event stream while the action is made.
    let stream = http
        .get(format!("{}/v1/events", d.base))
        .bearer_auth(&operator)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), 200);
    let (s, a) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions", d.base),
        &agent,
        Some(json!({"handler": "vault", "action": "read",
            "params": {"user": "ada", "auth": {"token": SECRET}}})),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    assert_eq!(a["scope"], json!({"key": "ada"}));
    assert!(!a.to_string().contains(SECRET), "{a}");
    let id = a["id"].as_str().unwrap();

    let mut seen = String::new();
    let mut body = stream.bytes_stream();
    let _ = tokio::time::timeout(Duration::from_secs(3), async {
        while let Some(Ok(chunk)) = body.next().await {
            seen.push_str(&String::from_utf8_lossy(&chunk));
            if seen.contains("permission.needed") {
                break;
            }
        }
    })
    .await;
    assert!(seen.contains(id), "the stream carried the action: {seen}");
    assert!(!seen.contains(SECRET), "{seen}");
    for path in [format!("/v1/actions/{id}"), "/v1/actions".to_owned()] {
        let (_, v) = call(
            &http,
            reqwest::Method::GET,
            format!("{}{path}", d.base),
            &operator,
            None,
        )
        .await;
        assert!(!v.to_string().contains(SECRET), "{path}: {v}");
    }
    let text = export(&http, &d.base, &operator).await;
    assert!(text.contains(id));
    assert!(!text.contains(SECRET), "{text}");
    d.stop();
}
