//! Black-box tests: `/metrics` is open by default and, with
//! `metrics.auth = "operator"`, for operator and admin keys only; it counts
//! what waits for a human, of each kind.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common;
use common::daemon::{
    Daemon, Keyed, agent_key, files_handler, register_handler, request_action, role_key,
};
use common::{call, client, metric};
use serde_json::json;

/// Status and content type of `GET /metrics` with `key` (none if empty).
async fn metrics(http: &reqwest::Client, base: &str, key: &str) -> (u16, String) {
    let mut req = http.get(format!("{base}/metrics"));
    if !key.is_empty() {
        req = req.bearer_auth(key);
    }
    let resp = req.send().await.unwrap();
    let ctype = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    (resp.status().as_u16(), ctype)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_open_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let (s, ctype) = metrics(&client(), &d.base, "").await;
    assert_eq!(s, 200);
    assert!(ctype.starts_with("text/plain"), "{ctype}");
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_operator_auth_metrics_refuse_no_key_and_agent_keys() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[("ACTIONGATE_METRICS__AUTH", "operator")]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let operator = role_key(&http, &d.base, &admin, "operator").await;

    let (s, ctype) = metrics(&http, &d.base, "").await;
    assert_eq!((s, ctype.as_str()), (401, "application/problem+json"));
    let (s, ctype) = metrics(&http, &d.base, "agk_not_a_key").await;
    assert_eq!((s, ctype.as_str()), (401, "application/problem+json"));
    let (s, ctype) = metrics(&http, &d.base, &agent).await;
    assert_eq!((s, ctype.as_str()), (403, "application/problem+json"));
    let (s, ctype) = metrics(&http, &d.base, &operator).await;
    assert_eq!(s, 200);
    assert!(ctype.starts_with("text/plain"), "{ctype}");
    let (s, _) = metrics(&http, &d.base, &admin).await;
    assert_eq!(s, 200);
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_actions_grant_requests_and_plans_are_counted() {
    let k = Keyed::start(&[]).await;
    let (http, base) = (&k.http, &k.d.base);
    register_handler(http, base, &k.admin, files_handler()).await;
    // One action (the default profile asks), two grant requests, a plan.
    let resp = request_action(http, base, &k.agent, "bash", "make deploy").await;
    assert_eq!(resp.status(), 201);
    for n in 0..2 {
        let body = json!({"handler": "files", "permission": "fs.write", "reason": format!("r{n}")});
        let (s, b) = call(
            http,
            reqwest::Method::POST,
            format!("{base}/v1/grant-requests"),
            &k.agent,
            Some(body),
        )
        .await;
        assert_eq!(s, 201, "{b}");
    }
    let plan = json!({"session": "task-1", "steps": [{"tool": "bash", "detail": "make"}]});
    let (s, b) = call(
        http,
        reqwest::Method::POST,
        format!("{base}/v1/plans"),
        &k.agent,
        Some(plan),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    for (name, n) in [
        ("actiongate_pending_actions", 1.0),
        ("actiongate_pending_grant_requests", 2.0),
        ("actiongate_pending_plans", 1.0),
    ] {
        assert_eq!(metric(http, base, name).await, n, "{name}");
    }
    k.d.stop();
}
