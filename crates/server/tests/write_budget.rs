//! `limits.max_request_bytes_per_agent_per_hour`: one agent key sending
//! its largest requests in a loop (even ones denied, or withdrawn at once)
//! is refused past its budget, 429 naming the limit, with nothing stored;
//! another agent is not held up by it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common;

use common::TestApp;
use reqwest::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn an_agent_past_its_bytes_an_hour_is_refused_and_nothing_is_stored() {
    let app = TestApp::spawn_with(|s| s.limits.max_request_bytes_per_agent_per_hour = 50_000).await;
    app.profile("agent-1", json!("locked")).await;
    let detail = "x".repeat(10_000);
    let mut stored = 0;
    let refused = loop {
        let (s, body) = app
            .call(
                Method::POST,
                "/v1/actions",
                Some(&app.agent),
                Some(json!({"tool": "bash", "detail": detail})),
            )
            .await;
        if s != StatusCode::CREATED {
            break (s, body);
        }
        stored += 1;
        assert!(stored < 10, "never refused");
    };
    assert_eq!(refused.0, StatusCode::TOO_MANY_REQUESTS, "{}", refused.1);
    assert_eq!(refused.1["code"], "limit-reached", "{}", refused.1);
    assert!(
        refused.1["detail"]
            .as_str()
            .unwrap()
            .contains("limits.max_request_bytes_per_agent_per_hour"),
        "{}",
        refused.1
    );
    assert_eq!(stored, 4, "50,000 bytes hold four requests of 10,000");
    // Plans count too.
    let steps: Vec<_> = (0..5)
        .map(|i| json!({"tool": "bash", "detail": format!("echo {i} {}", "y".repeat(3000))}))
        .collect();
    let (s, p) = app
        .call(
            Method::POST,
            "/v1/plans",
            Some(&app.agent),
            Some(json!({"session": "s", "reason": "r", "steps": steps})),
        )
        .await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{p}");
    let (s, list) = app
        .call(
            Method::GET,
            "/v1/actions?limit=200",
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{list}");
    assert_eq!(list["items"].as_array().unwrap().len(), stored);
    // An outcome of an earlier action counts too (each can carry a large
    // result), and so does a reported run nobody decided.
    let first = list["items"][0]["id"].as_str().unwrap().to_owned();
    let (s, o) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{first}/outcome"),
            Some(&app.agent),
            Some(json!({"status": "completed", "result": {"text": detail}})),
        )
        .await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{o}");
    let (s, r) = app
        .call(
            Method::POST,
            "/v1/runs",
            Some(&app.agent),
            Some(json!({"tool": "bash", "detail": detail, "session": "s"})),
        )
        .await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{r}");
    // Another agent has its own budget.
    let other = app.key("agent", Some("agent-2")).await;
    let (s, a) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(&other),
            Some(json!({"tool": "bash", "detail": detail})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{a}");
    app.stop().await;
}

/// A retry with the same idempotency key stores nothing new: it takes
/// nothing of the budget, and is answered (with the stored action) even
/// once the budget is spent.
#[tokio::test]
async fn a_retry_of_a_stored_request_takes_nothing_of_the_budget() {
    let app = TestApp::spawn_with(|s| s.limits.max_request_bytes_per_agent_per_hour = 50_000).await;
    app.profile("agent-1", json!("locked")).await;
    let detail = "x".repeat(10_000);
    let post = |key: String| {
        let body = json!({"tool": "bash", "detail": detail, "idempotency_key": key});
        app.call(Method::POST, "/v1/actions", Some(&app.agent), Some(body))
    };
    let (s, first) = post("k-1".into()).await;
    assert_eq!(s, StatusCode::CREATED, "{first}");
    for _ in 0..6 {
        let (s, again) = post("k-1".into()).await;
        assert!(s.is_success(), "{s} {again}");
        assert_eq!(again["id"], first["id"], "{again}");
    }
    // The retries took nothing: three more requests of 10,000 fit.
    for i in 2..5 {
        let (s, a) = post(format!("k-{i}")).await;
        assert_eq!(s, StatusCode::CREATED, "request {i}: {a}");
    }
    let (s, refused) = post("k-5".into()).await;
    assert_eq!(s, StatusCode::TOO_MANY_REQUESTS, "{refused}");
    // Past the budget, a retry of a stored request is still answered.
    let (s, again) = post("k-1".into()).await;
    assert!(s.is_success(), "{s} {again}");
    assert_eq!(again["id"], first["id"], "{again}");
    app.stop().await;
}
