//! The daemon's HTTP API over a real SQLite file and real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common;

use std::time::{Duration, Instant};

use common::TestApp;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

fn assert_problem(status: StatusCode, body: &Value, expected: StatusCode) {
    assert_eq!(status, expected, "{body}");
    assert_eq!(body["status"], expected.as_u16(), "{body}");
    assert!(
        body["type"]
            .as_str()
            .unwrap()
            .starts_with("urn:actiongate:problem:"),
        "{body}"
    );
    assert!(
        body["title"].is_string() && body["detail"].is_string(),
        "{body}"
    );
}

#[tokio::test]
async fn allowed_action_is_approved_by_policy() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("standard")).await;
    let resp = app
        .send(
            Method::POST,
            "/v1/actions",
            Some(&app.agent),
            Some(json!({"tool": "file", "detail": "create /src/app.py", "reason": "scaffold"})),
        )
        .await;
    assert_eq!(resp.status(), StatusCode::CREATED);
    let location = resp.headers()["location"].to_str().unwrap().to_owned();
    let body: Value = resp.json().await.unwrap();
    assert_eq!(
        location,
        format!("/v1/actions/{}", body["id"].as_str().unwrap())
    );
    assert_eq!(body["status"], "approved");
    assert_eq!(body["agent"], "agent-1");
    assert_eq!(body["action_string"], "tool:file:create /src/app.py");
    assert_eq!(body["decision"]["result"], "allow");
    assert_eq!(body["decided_by"], "policy");
    assert_eq!(body["reason"], "scaffold");
    assert!(body["deadline"].is_null());
    app.stop().await;
}

/// A new action's 201 body is the text its event recorded when it was
/// stored, not a second rendering: it must be exactly what a read returns.
#[tokio::test]
async fn a_new_action_is_answered_with_the_same_json_a_read_returns() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("standard")).await;
    for (tool, detail, status) in [
        ("file", "create /src/app.py", "approved"),
        ("bash", "rm -rf build", "pending"),
        ("self_edit", "system_prompt", "denied"),
    ] {
        let resp = app
            .send(
                Method::POST,
                "/v1/actions",
                Some(&app.agent),
                Some(json!({"tool": tool, "detail": detail, "reason": "r \"q\" \u{1F600}"})),
            )
            .await;
        assert_eq!(resp.status(), StatusCode::CREATED);
        assert_eq!(resp.headers()["content-type"], "application/json");
        let location = resp.headers()["location"].to_str().unwrap().to_owned();
        let created = resp.text().await.unwrap();
        let body: Value = serde_json::from_str(&created).unwrap();
        assert_eq!(body["status"], status, "{body}");
        assert_eq!(
            location,
            format!("/v1/actions/{}", body["id"].as_str().unwrap())
        );
        let read = app
            .send(Method::GET, &location, Some(&app.agent), None)
            .await
            .text()
            .await
            .unwrap();
        assert_eq!(created, read);
    }
    app.stop().await;
}

#[tokio::test]
async fn asked_action_is_pending_with_a_deadline_and_denied_one_has_its_reason() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("standard")).await;
    let (status, pending) = app.request("bash", "rm -rf build").await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(pending["status"], "pending");
    assert_eq!(pending["decision"]["result"], "ask");
    assert!(pending["deadline"].is_string());

    let (status, denied) = app.request("self_edit", "system_prompt").await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(denied["status"], "denied");
    assert_eq!(denied["decision"]["result"], "deny");
    assert!(!denied["decision"]["reason"].as_str().unwrap().is_empty());
    app.stop().await;
}

#[tokio::test]
async fn agent_without_profile_uses_guarded_default() {
    let app = TestApp::spawn().await;
    let (_, body) = app.request("file", "view README.md").await;
    assert_eq!(body["status"], "pending", "{body}");
    app.stop().await;
}

#[tokio::test]
async fn shell_bypass_is_not_allowed_by_a_prefix_pattern() {
    let app = TestApp::spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["tool:bash:ls( .*)?"], "ask": []}),
    )
    .await;
    let (_, ok) = app.request("bash", "ls -la").await;
    assert_eq!(ok["status"], "approved");
    let (_, bad) = app.request("bash", "ls; rm -rf ~").await;
    assert_ne!(bad["status"], "approved", "{bad}");
    app.stop().await;
}

#[tokio::test]
async fn idempotency_key_returns_the_first_action_and_rejects_a_different_body() {
    let app = TestApp::spawn().await;
    let body = json!({"tool": "bash", "detail": "make", "idempotency_key": "k1"});
    let (s1, a1) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(&app.agent),
            Some(body.clone()),
        )
        .await;
    let (s2, a2) = app
        .call(Method::POST, "/v1/actions", Some(&app.agent), Some(body))
        .await;
    assert_eq!(s1, StatusCode::CREATED);
    assert_eq!(s2, StatusCode::OK);
    assert_eq!(a1, a2);
    let (s3, p) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(&app.agent),
            Some(json!({"tool": "bash", "detail": "make install", "idempotency_key": "k1"})),
        )
        .await;
    assert_problem(s3, &p, StatusCode::CONFLICT);
    let (_, page) = app
        .call(Method::GET, "/v1/actions", Some(&app.operator), None)
        .await;
    assert_eq!(page["items"].as_array().unwrap().len(), 1);
    app.stop().await;
}

#[tokio::test]
async fn operator_approves_denies_and_replies() {
    let app = TestApp::spawn().await;
    let (_, a) = app.request("bash", "make").await;
    let id = a["id"].as_str().unwrap();
    let (s, approved) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/approve"),
            Some(&app.operator),
            Some(json!({"note": "fine"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{approved}");
    assert_eq!(approved["status"], "approved");
    assert!(approved["decided_by"].as_str().unwrap().starts_with("key:"));
    assert_eq!(approved["decision_note"], "fine");

    // A decision on a settled action is a conflict naming its status.
    let (s, p) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/deny"),
            Some(&app.operator),
            None,
        )
        .await;
    assert_problem(s, &p, StatusCode::CONFLICT);
    assert_eq!(p["current_status"], "approved");

    let (_, b) = app.request("bash", "make clean").await;
    let id = b["id"].as_str().unwrap();
    let (s, denied) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/deny"),
            Some(&app.operator),
            Some(json!({"reason": "not now"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(denied["status"], "denied");
    assert_eq!(denied["decision_note"], "not now");

    let (_, c) = app.request("bash", "make test").await;
    let id = c["id"].as_str().unwrap();
    let (s, p) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/reply"),
            Some(&app.operator),
            Some(json!({"text": "maybe later"})),
        )
        .await;
    assert_problem(s, &p, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(p["errors"][0]["field"], "text");
    let (s, replied) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/reply"),
            Some(&app.operator),
            Some(json!({"text": "  Yes! "})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(replied["status"], "approved");
    let (_, d) = app.request("bash", "make deploy").await;
    let (_, replied) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{}/reply", d["id"].as_str().unwrap()),
            Some(&app.operator),
            Some(json!({"text": "STOP"})),
        )
        .await;
    assert_eq!(replied["status"], "denied");
    app.stop().await;
}

#[tokio::test]
async fn cancel_and_outcome_by_the_owning_agent() {
    let app = TestApp::spawn().await;
    let other = app.key("agent", Some("agent-2")).await;
    let (_, a) = app.request("bash", "make").await;
    let id = a["id"].as_str().unwrap();
    // Another agent cannot see it at all.
    let (s, p) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/cancel"),
            Some(&other),
            None,
        )
        .await;
    assert_problem(s, &p, StatusCode::NOT_FOUND);
    let (s, p) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{id}"),
            Some(&other),
            None,
        )
        .await;
    assert_problem(s, &p, StatusCode::NOT_FOUND);
    // Outcome before approval is a conflict.
    let (s, p) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/outcome"),
            Some(&app.agent),
            Some(json!({"status": "completed"})),
        )
        .await;
    assert_problem(s, &p, StatusCode::CONFLICT);
    let (s, c) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/cancel"),
            Some(&app.agent),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(c["status"], "cancelled");

    let (_, b) = app.request("bash", "make all").await;
    let id = b["id"].as_str().unwrap();
    app.call(
        Method::POST,
        &format!("/v1/actions/{id}/approve"),
        Some(&app.operator),
        None,
    )
    .await;
    let (s, p) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/outcome"),
            Some(&app.operator),
            Some(json!({"status": "completed"})),
        )
        .await;
    assert_problem(s, &p, StatusCode::FORBIDDEN);
    let (s, p) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/outcome"),
            Some(&app.agent),
            Some(json!({"status": "denied"})),
        )
        .await;
    assert_problem(s, &p, StatusCode::UNPROCESSABLE_ENTITY);
    let (s, done) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/outcome"),
            Some(&app.agent),
            Some(json!({"status": "failed", "error": "exit 2", "result": {"code": 2}})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{done}");
    assert_eq!(done["status"], "failed");
    assert_eq!(done["outcome"]["error"], "exit 2");
    assert_eq!(done["outcome"]["result"]["code"], 2);
    app.stop().await;
}

#[tokio::test]
async fn fifty_concurrent_decisions_have_exactly_one_winner() {
    let app = TestApp::spawn().await;
    let (_, a) = app.request("bash", "make").await;
    let id = a["id"].as_str().unwrap().to_owned();
    // Fifty operators: one key's decision sent twice is its retry, which
    // is answered as it stands (`decision_retries`).
    let mut keys = Vec::new();
    for _ in 0..50 {
        keys.push(app.key("operator", None).await);
    }
    let mut tasks = Vec::new();
    for (i, key) in keys.into_iter().enumerate() {
        let client = app.client.clone();
        let url = format!(
            "{}/v1/actions/{id}/{}",
            app.base,
            if i % 2 == 0 { "approve" } else { "deny" }
        );
        tasks.push(tokio::spawn(async move {
            client
                .post(url)
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
                .status()
        }));
    }
    let mut ok = 0;
    let mut conflict = 0;
    for t in tasks {
        match t.await.unwrap() {
            s if s.is_success() => ok += 1,
            StatusCode::CONFLICT => conflict += 1,
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!((ok, conflict), (1, 49));
    // Exactly one decision event was recorded.
    let events = app.dir.path().join("actiongate.db");
    assert!(events.exists());
    app.stop().await;
}

#[tokio::test]
async fn long_poll_returns_promptly_after_approval() {
    let app = TestApp::spawn().await;
    let (_, a) = app.request("bash", "make").await;
    let id = a["id"].as_str().unwrap().to_owned();
    let poll = {
        let client = app.client.clone();
        let url = format!("{}/v1/actions/{id}?wait=30", app.base);
        let key = app.agent.clone();
        tokio::spawn(async move {
            let resp = client.get(url).bearer_auth(key).send().await.unwrap();
            let body: Value = resp.json().await.unwrap();
            (Instant::now(), body)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !poll.is_finished(),
        "long-poll answered before the decision"
    );
    let (s, _) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/approve"),
            Some(&app.operator),
            None,
        )
        .await;
    let approved_at = Instant::now();
    assert_eq!(s, StatusCode::OK);
    let (returned_at, body) = poll.await.unwrap();
    assert_eq!(body["status"], "approved");
    let lag = returned_at.saturating_duration_since(approved_at);
    // Woken by the decision, not found by a later look: a wake takes
    // milliseconds; the bound leaves room for a loaded machine.
    assert!(
        lag < Duration::from_millis(400),
        "long-poll returned {lag:?} after the approval"
    );
    app.stop().await;
}

#[tokio::test]
async fn long_poll_on_create_times_out_with_current_state() {
    let app = TestApp::spawn().await;
    let start = Instant::now();
    let (s, body) = app
        .call(
            Method::POST,
            "/v1/actions?wait=1",
            Some(&app.agent),
            Some(json!({"tool": "bash", "detail": "make"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    assert_eq!(body["status"], "pending");
    assert!(start.elapsed() >= Duration::from_millis(900));
    let (s, p) = app
        .call(
            Method::POST,
            "/v1/actions?wait=61",
            Some(&app.agent),
            Some(json!({"tool": "bash", "detail": "make"})),
        )
        .await;
    assert_problem(s, &p, StatusCode::UNPROCESSABLE_ENTITY);
    app.stop().await;
}

#[tokio::test]
async fn pending_action_expires_at_its_deadline() {
    let app = TestApp::spawn().await;
    let (_, a) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(&app.agent),
            Some(json!({"tool": "bash", "detail": "make", "timeout": "1s"})),
        )
        .await;
    let id = a["id"].as_str().unwrap();
    let (_, body) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{id}?wait=10"),
            Some(&app.agent),
            None,
        )
        .await;
    assert_eq!(body["status"], "expired");
    assert_eq!(body["decided_by"], "deadline");
    let (s, p) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(&app.agent),
            Some(json!({"tool": "bash", "detail": "make", "timeout": "2h"})),
        )
        .await;
    assert_problem(s, &p, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(p["errors"][0]["field"], "timeout");
    app.stop().await;
}

#[tokio::test]
async fn listing_filters_and_paginates_newest_first() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("standard")).await;
    let other = app.key("agent", Some("agent-2")).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let (_, a) = app.request("bash", &format!("echo {i}")).await;
        ids.push(a["id"].as_str().unwrap().to_owned());
    }
    app.request("file", "view x").await;
    app.call(
        Method::POST,
        "/v1/actions",
        Some(&other),
        Some(json!({"tool": "bash", "detail": "ls"})),
    )
    .await;

    let (_, page) = app
        .call(
            Method::GET,
            "/v1/actions?status=pending&agent=agent-1&limit=2",
            Some(&app.operator),
            None,
        )
        .await;
    let items = page["items"].as_array().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(items[0]["id"], ids[4].as_str());
    assert_eq!(items[1]["id"], ids[3].as_str());
    let cursor = page["next_cursor"].as_str().unwrap();
    let mut seen = 2;
    let mut cursor = cursor.to_owned();
    loop {
        let (_, page) = app
            .call(
                Method::GET,
                &format!("/v1/actions?status=pending&agent=agent-1&limit=2&cursor={cursor}"),
                Some(&app.operator),
                None,
            )
            .await;
        seen += page["items"].as_array().unwrap().len();
        match page["next_cursor"].as_str() {
            Some(c) => cursor = c.to_owned(),
            None => break,
        }
    }
    assert_eq!(seen, 5);
    // A cursor that is no action's id is refused, not read as a place.
    for bad in ["zzz", "0", "act_1"] {
        let (status, problem) = app
            .call(
                Method::GET,
                &format!("/v1/actions?cursor={bad}"),
                Some(&app.operator),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {problem}");
        assert_eq!(problem["errors"][0]["field"], "cursor");
    }
    // Agents see only their own.
    let (_, mine) = app
        .call(Method::GET, "/v1/actions", Some(&other), None)
        .await;
    assert_eq!(mine["items"].as_array().unwrap().len(), 1);
    let (_, theirs) = app
        .call(Method::GET, "/v1/actions?agent=agent-1", Some(&other), None)
        .await;
    assert_eq!(theirs["items"].as_array().unwrap().len(), 0);
    let (_, by_tool) = app
        .call(
            Method::GET,
            "/v1/actions?tool=file",
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(by_tool["items"].as_array().unwrap().len(), 1);
    let (s, p) = app
        .call(
            Method::GET,
            "/v1/actions?status=bogus",
            Some(&app.operator),
            None,
        )
        .await;
    assert_problem(s, &p, StatusCode::UNPROCESSABLE_ENTITY);
    app.stop().await;
}

#[tokio::test]
async fn check_decides_without_storing() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("standard")).await;
    let (s, d) = app
        .call(
            Method::POST,
            "/v1/check",
            Some(&app.agent),
            Some(json!({"tool": "git", "detail": "push origin main"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(d["result"], "ask");
    assert_eq!(d["action_string"], "tool:git:push origin main");
    let (_, page) = app
        .call(Method::GET, "/v1/actions", Some(&app.operator), None)
        .await;
    assert!(page["items"].as_array().unwrap().is_empty());
    app.stop().await;
}

#[tokio::test]
async fn bad_requests_get_problems_and_change_nothing() {
    let app = TestApp::spawn().await;
    let url = format!("{}/v1/actions", app.base);
    let c = &app.client;
    let resp = c
        .post(&url)
        .bearer_auth(&app.agent)
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
    assert_eq!(resp.headers()["content-type"], "application/problem+json");
    let resp = c
        .post(&url)
        .bearer_auth(&app.agent)
        .header("content-type", "text/plain")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
    let big = json!({"tool": "bash", "detail": "x".repeat(1024 * 1024 + 10)});
    let resp = c
        .post(&url)
        .bearer_auth(&app.agent)
        .json(&big)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::PAYLOAD_TOO_LARGE);
    let (s, p) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(&app.agent),
            Some(json!({"tool": "bash", "detail": "ls", "extra": 1})),
        )
        .await;
    assert_problem(s, &p, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(p["detail"].as_str().unwrap().contains("extra"), "{p}");
    let (s, p) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(&app.agent),
            Some(json!({"tool": "bash"})),
        )
        .await;
    assert_problem(s, &p, StatusCode::UNPROCESSABLE_ENTITY);
    let (s, p) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(&app.agent),
            Some(json!({"tool": "bash:ls", "detail": "x"})),
        )
        .await;
    assert_problem(s, &p, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(p["errors"][0]["field"], "tool");
    let (s, p) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some("agk_wrong"),
            Some(json!({"tool": "bash", "detail": "x"})),
        )
        .await;
    assert_problem(s, &p, StatusCode::UNAUTHORIZED);
    let (s, p) = app
        .call(Method::GET, "/v1/nowhere", Some(&app.agent), None)
        .await;
    assert_problem(s, &p, StatusCode::NOT_FOUND);
    let (s, p) = app
        .call(Method::DELETE, "/v1/actions", Some(&app.agent), None)
        .await;
    assert_problem(s, &p, StatusCode::METHOD_NOT_ALLOWED);
    let (_, page) = app
        .call(Method::GET, "/v1/actions", Some(&app.operator), None)
        .await;
    assert!(
        page["items"].as_array().unwrap().is_empty(),
        "a rejected request stored something"
    );
    app.stop().await;
}

/// Shapes the API fuzzing found mishandled: each is answered as the OpenAPI
/// document says, as problem+json.
#[tokio::test]
async fn request_shapes_match_the_openapi_document() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("guarded")).await;
    let (_, pending) = app.request("deploy", "prod").await;
    let id = pending["id"].as_str().unwrap().to_owned();
    let raw = |method: Method, path: &str, key: &str, body: &'static str| {
        app.client
            .request(method, format!("{}{path}", app.base))
            .bearer_auth(key)
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    let problem = |resp: reqwest::Response| async move {
        assert_eq!(resp.headers()["content-type"], "application/problem+json");
        let status = resp.status();
        (status, resp.json::<Value>().await.unwrap())
    };

    // A JSON array where an object is expected is invalid data, not malformed.
    let resp = raw(Method::POST, "/v1/actions", &app.agent, r#"["bash", "ls"]"#)
        .await
        .unwrap();
    let (s, p) = problem(resp).await;
    assert_problem(s, &p, StatusCode::UNPROCESSABLE_ENTITY);
    // So is an enum given as an object (serde_json calls that a syntax error).
    let resp = raw(Method::POST, "/v1/keys", &app.admin, r#"{"role": {}}"#)
        .await
        .unwrap();
    let (s, p) = problem(resp).await;
    assert_problem(s, &p, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(p["errors"][0]["field"], "role", "{p}");
    // Trailing garbage is malformed.
    let resp = raw(
        Method::POST,
        "/v1/check",
        &app.agent,
        r#"{"tool":"a","detail":"b"} x"#,
    )
    .await
    .unwrap();
    let (s, p) = problem(resp).await;
    assert_problem(s, &p, StatusCode::BAD_REQUEST);
    // A path segment that is not UTF-8 once decoded, on every route with one.
    let resp = app
        .send(Method::GET, "/v1/actions/%FF%FE", Some(&app.agent), None)
        .await;
    let (s, p) = problem(resp).await;
    assert_problem(s, &p, StatusCode::BAD_REQUEST);
    for (method, path) in [
        (Method::GET, "/v1/actions/%FF%FE/events"),
        (Method::POST, "/v1/actions/%FF%FE/result"),
        (Method::GET, "/v1/grants/%FF%FE"),
        (Method::DELETE, "/v1/grants/%FF%FE"),
        (Method::GET, "/v1/grant-requests/%FF%FE"),
        (Method::POST, "/v1/grant-requests/%FF%FE/approve"),
        (Method::POST, "/v1/grant-requests/%FF%FE/deny"),
        (Method::GET, "/v1/handlers/%FF%FE"),
        (Method::DELETE, "/v1/handlers/%FF%FE"),
        (Method::GET, "/v1/subscriptions/%FF%FE"),
        (Method::DELETE, "/v1/subscriptions/%FF%FE"),
        (Method::GET, "/assets/%FF%FE"),
    ] {
        let resp = app.send(method.clone(), path, Some(&app.admin), None).await;
        assert_eq!(
            resp.headers()["content-type"],
            "application/problem+json",
            "{method} {path}"
        );
        let (s, p) = problem(resp).await;
        assert_problem(s, &p, StatusCode::BAD_REQUEST);
    }
    // An executor's result over the size limit.
    let resp = app
        .client
        .post(format!("{}/v1/actions/{id}/result", app.base))
        .header("content-type", "application/json")
        .body("x".repeat(1024 * 1024 + 10))
        .send()
        .await
        .unwrap();
    let (s, p) = problem(resp).await;
    assert_problem(s, &p, StatusCode::PAYLOAD_TOO_LARGE);
    // Filters are checked like the values they filter on.
    for query in ["agent=", "agent=a%20b", "tool=a:b", "limit=0", "wait=61"] {
        let path = if query.starts_with("wait") {
            format!("/v1/actions/{id}?{query}")
        } else {
            format!("/v1/actions?{query}")
        };
        let (s, p) = app
            .call(Method::GET, &path, Some(&app.operator), None)
            .await;
        assert_problem(s, &p, StatusCode::UNPROCESSABLE_ENTITY);
    }
    // An outcome is completed or failed, nothing else.
    let (s, p) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/outcome"),
            Some(&app.agent),
            Some(json!({"status": "pending"})),
        )
        .await;
    assert_problem(s, &p, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(p["errors"][0]["field"], "status", "{p}");
    // Lengths count characters, as JSON Schema's maxLength does.
    let (s, p) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(&app.agent),
            Some(json!({"tool": "t", "detail": "d", "reason": "é".repeat(4096)})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    let (s, p) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/reply"),
            Some(&app.operator),
            Some(json!({"text": format!("yes{}", "!".repeat(300))})),
        )
        .await;
    assert_problem(s, &p, StatusCode::UNPROCESSABLE_ENTITY);
    // A JSON null is no body for an optional body.
    let resp = raw(
        Method::POST,
        &format!("/v1/actions/{id}/approve"),
        &app.operator,
        "null",
    )
    .await
    .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let action: Value = resp.json().await.unwrap();
    assert_eq!(action["status"], "approved");
    app.stop().await;
}

#[tokio::test]
async fn agent_profiles_are_validated_and_named() {
    let app = TestApp::spawn().await;
    let (s, p) = app
        .call(
            Method::PUT,
            "/v1/agents/a1",
            Some(&app.admin),
            Some(json!({"profile": {"allow": ["ok", "("], "ask": []}})),
        )
        .await;
    assert_problem(s, &p, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(p["errors"][0]["field"], "profile.allow[1]");
    assert!(
        p["errors"][0]["message"].as_str().unwrap().contains("'('"),
        "{p}"
    );
    let (s, p) = app
        .call(
            Method::PUT,
            "/v1/agents/a1",
            Some(&app.admin),
            Some(json!({"profile": "nope"})),
        )
        .await;
    assert_problem(s, &p, StatusCode::UNPROCESSABLE_ENTITY);
    assert!(p["detail"].as_str().unwrap().contains("standard"), "{p}");
    let (s, a) = app
        .call(Method::PUT, "/v1/agents/a1", Some(&app.admin), Some(json!({"name": "A", "profile": {"allow": ["tool:x:.*"], "ask": [], "deny": ["tool:x:rm.*"]}})))
        .await;
    assert_eq!(s, StatusCode::CREATED, "{a}");
    let (s, _) = app
        .call(
            Method::PUT,
            "/v1/agents/a1",
            Some(&app.admin),
            Some(json!({"profile": "locked"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let (_, a) = app
        .call(Method::GET, "/v1/agents/a1", Some(&app.admin), None)
        .await;
    assert_eq!(a["profile"], "locked");
    let (_, list) = app
        .call(Method::GET, "/v1/agents", Some(&app.admin), None)
        .await;
    assert_eq!(list.as_array().unwrap().len(), 1);
    let (_, presets) = app
        .call(Method::GET, "/v1/presets", Some(&app.agent), None)
        .await;
    let names: Vec<&str> = presets
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for n in ["open", "standard", "locked", "guarded", "readonly"] {
        assert!(names.contains(&n), "{names:?}");
    }
    app.stop().await;
}

#[tokio::test]
async fn keys_are_issued_once_listed_without_secrets_and_revoked() {
    let app = TestApp::spawn().await;
    let (s, k) = app
        .call(
            Method::POST,
            "/v1/keys",
            Some(&app.admin),
            Some(json!({"role": "agent", "agent": "bot", "name": "bot key"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let secret = k["key"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("agk_"));
    let (_, list) = app
        .call(Method::GET, "/v1/keys", Some(&app.admin), None)
        .await;
    assert!(!list.to_string().contains(&secret));
    let (s, me) = app
        .call(Method::GET, "/v1/whoami", Some(&secret), None)
        .await;
    assert_eq!(s, StatusCode::OK, "{me}");
    assert_eq!(me["key_id"], k["id"]);
    assert_eq!(me["name"], "bot key");
    assert_eq!(me["role"], "agent");
    assert_eq!(me["agent"], "bot");
    let (_, me) = app
        .call(Method::GET, "/v1/whoami", Some(&app.operator), None)
        .await;
    assert_eq!(me["role"], "operator");
    assert!(me["agent"].is_null(), "{me}");
    // Nobody's key: approver globs match its name (never its identity,
    // `key:<id>`, which a glob `k*` would match for every key), no groups.
    let op_id = me["key_id"].as_str().unwrap().to_owned();
    assert!(me["person"].is_null(), "{me}");
    assert_eq!(me["groups"], json!([]));
    assert_eq!(me["approver_names"], json!([me["name"]]));
    // A person's key: the page learns the person and their groups.
    let (s, p) = app
        .call(
            Method::POST,
            "/v1/people",
            Some(&app.admin),
            Some(json!({"name": "ann", "groups": ["dba"], "keys": [op_id]})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{p}");
    let (_, me) = app
        .call(Method::GET, "/v1/whoami", Some(&app.operator), None)
        .await;
    assert_eq!(me["person"], "ann", "{me}");
    assert_eq!(me["groups"], json!(["dba"]));
    assert_eq!(me["approver_names"], json!([me["name"], "ann"]));
    let (s, p) = app
        .call(Method::GET, "/v1/whoami", Some("agk_nope"), None)
        .await;
    assert_problem(s, &p, StatusCode::UNAUTHORIZED);
    let (s, _) = app
        .call(
            Method::POST,
            "/v1/check",
            Some(&secret),
            Some(json!({"tool": "x", "detail": "y"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = app
        .call(
            Method::DELETE,
            &format!("/v1/keys/{}", k["id"].as_str().unwrap()),
            Some(&app.admin),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let (s, _) = app
        .call(
            Method::POST,
            "/v1/check",
            Some(&secret),
            Some(json!({"tool": "x", "detail": "y"})),
        )
        .await;
    assert_eq!(s, StatusCode::UNAUTHORIZED);
    let (s, p) = app
        .call(
            Method::POST,
            "/v1/keys",
            Some(&app.admin),
            Some(json!({"role": "agent"})),
        )
        .await;
    assert_problem(s, &p, StatusCode::UNPROCESSABLE_ENTITY);
    app.stop().await;
}

/// Every endpoint with no key, an agent key, an operator key and an admin key.
#[tokio::test]
async fn role_matrix() {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    let (_, pending) = app.request("bash", "make").await;
    let id = pending["id"].as_str().unwrap().to_owned();
    let handler = json!({"id": "h1", "name": "H", "url": "http://127.0.0.1:9/",
        "permissions": [{"name": "p", "parameters_schema": {"type": "object", "properties": {"k": {"type": "string"}}}}],
        "actions": [{"name": "a", "params_schema": {"type": "object"}, "permission": "p"}]});
    let (s, _) = app
        .call(
            Method::POST,
            "/v1/handlers",
            Some(&app.admin),
            Some(handler.clone()),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, gr) = app
        .call(
            Method::POST,
            "/v1/grant-requests",
            Some(&app.agent),
            Some(json!({"handler": "h1", "permission": "p", "reason": "r"})),
        )
        .await;
    let gr = gr["id"].as_str().unwrap().to_owned();
    let mut h2 = handler.clone();
    h2["id"] = json!("h2");
    // (method, path, body, expected for [none, agent, operator, admin]).
    // Operator and admin keys are not bound to an agent, so agent-only
    // endpoints answer them 403.
    let cases: Vec<(Method, String, Option<Value>, [u16; 4])> = vec![
        (
            Method::POST,
            "/v1/actions".into(),
            Some(json!({"tool": "bash", "detail": "ls"})),
            [401, 201, 403, 403],
        ),
        (
            Method::GET,
            "/v1/actions".into(),
            None,
            [401, 200, 200, 200],
        ),
        (
            Method::GET,
            format!("/v1/actions/{id}"),
            None,
            [401, 200, 200, 200],
        ),
        (
            Method::POST,
            "/v1/check".into(),
            Some(json!({"tool": "bash", "detail": "ls"})),
            [401, 200, 403, 403],
        ),
        (
            Method::POST,
            format!("/v1/actions/{id}/approve"),
            None,
            [401, 403, 200, 409],
        ),
        (
            Method::POST,
            format!("/v1/actions/{id}/deny"),
            None,
            [401, 403, 409, 409],
        ),
        (
            Method::POST,
            // The operator's approval in other words: the decision sent
            // again, answered as the action stands.
            format!("/v1/actions/{id}/reply"),
            Some(json!({"text": "yes"})),
            [401, 403, 200, 409],
        ),
        (
            Method::POST,
            format!("/v1/actions/{id}/cancel"),
            None,
            [401, 409, 409, 409],
        ),
        (
            Method::POST,
            format!("/v1/actions/{id}/outcome"),
            Some(json!({"status": "completed"})),
            [401, 200, 403, 403],
        ),
        (
            Method::PUT,
            "/v1/agents/agent-9".into(),
            Some(json!({"profile": "open"})),
            [401, 403, 403, 201],
        ),
        (Method::GET, "/v1/agents".into(), None, [401, 403, 403, 200]),
        (
            Method::GET,
            "/v1/agents/agent-9".into(),
            None,
            [401, 403, 403, 200],
        ),
        (
            Method::POST,
            "/v1/keys".into(),
            Some(json!({"role": "operator"})),
            [401, 403, 403, 201],
        ),
        (Method::GET, "/v1/keys".into(), None, [401, 403, 403, 200]),
        (
            Method::DELETE,
            "/v1/keys/key_missing".into(),
            None,
            [401, 403, 403, 404],
        ),
        (
            Method::GET,
            "/v1/presets".into(),
            None,
            [401, 200, 200, 200],
        ),
        (
            Method::POST,
            "/v1/handlers".into(),
            Some(h2),
            [401, 403, 403, 201],
        ),
        (
            Method::GET,
            "/v1/handlers".into(),
            None,
            [401, 403, 403, 200],
        ),
        (
            Method::GET,
            "/v1/handlers/h1".into(),
            None,
            [401, 403, 403, 200],
        ),
        (
            Method::PUT,
            "/v1/handlers/h1".into(),
            Some(handler),
            [401, 403, 403, 200],
        ),
        (Method::GET, "/v1/tools".into(), None, [401, 200, 200, 200]),
        (
            Method::POST,
            "/v1/grants".into(),
            Some(json!({"tool": "t", "pattern": "x", "expires": "1h"})),
            [401, 403, 201, 201],
        ),
        (Method::GET, "/v1/grants".into(), None, [401, 403, 200, 200]),
        (
            Method::GET,
            "/v1/grants/grt_missing".into(),
            None,
            [401, 403, 404, 404],
        ),
        (
            Method::DELETE,
            "/v1/grants/grt_missing".into(),
            None,
            [401, 403, 404, 404],
        ),
        (
            Method::POST,
            "/v1/permissions/check".into(),
            Some(json!({"handler": "h1", "permission": "p", "scope": {}})),
            [401, 200, 403, 403],
        ),
        (
            Method::POST,
            "/v1/grant-requests".into(),
            Some(json!({"handler": "h1", "permission": "p", "reason": "r"})),
            [401, 201, 403, 403],
        ),
        (
            Method::GET,
            "/v1/grant-requests".into(),
            None,
            [401, 200, 200, 200],
        ),
        (
            Method::GET,
            format!("/v1/grant-requests/{gr}"),
            None,
            [401, 200, 200, 200],
        ),
        (
            Method::POST,
            format!("/v1/grant-requests/{gr}/approve"),
            None,
            [401, 403, 200, 409],
        ),
        (
            Method::POST,
            format!("/v1/grant-requests/{gr}/deny"),
            None,
            [401, 403, 409, 409],
        ),
        (
            Method::DELETE,
            "/v1/handlers/h2".into(),
            None,
            [401, 403, 403, 200],
        ),
        (Method::GET, "/v1/whoami".into(), None, [401, 200, 200, 200]),
        (Method::GET, "/healthz".into(), None, [200, 200, 200, 200]),
        (Method::GET, "/readyz".into(), None, [200, 200, 200, 200]),
        (Method::GET, "/metrics".into(), None, [200, 200, 200, 200]),
        (
            Method::GET,
            "/openapi.json".into(),
            None,
            [200, 200, 200, 200],
        ),
    ];
    let keys = [
        None,
        Some(app.agent.clone()),
        Some(app.operator.clone()),
        Some(app.admin.clone()),
    ];
    let mut failures = Vec::new();
    for (method, path, body, expected) in &cases {
        for (key, want) in keys.iter().zip(expected) {
            let (status, resp) = app
                .call(method.clone(), path, key.as_deref(), body.clone())
                .await;
            if status.as_u16() != *want {
                failures.push(format!(
                    "{method} {path} as {:?}: got {status}, want {want}: {resp}",
                    key.as_ref().map(|k| &k[..8])
                ));
            }
            if status.is_client_error() {
                assert_problem(status, &resp, status);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    app.stop().await;
}

/// A key without the role an endpoint needs gets 403 whatever else its
/// request says: a malformed body, the wrong content type or unknown fields
/// are not looked at first (the answer would tell it about the endpoint).
#[tokio::test]
async fn the_role_is_checked_before_the_body() {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    let (_, pending) = app.request("bash", "make").await;
    let id = pending["id"].as_str().unwrap().to_owned();
    // (method, path, keys that lack the role).
    let operator_only = [app.agent.clone()];
    let admin_only = [app.agent.clone(), app.operator.clone()];
    let cases: Vec<(Method, String, &[String])> = vec![
        (
            Method::POST,
            format!("/v1/actions/{id}/approve"),
            &operator_only,
        ),
        (
            Method::POST,
            format!("/v1/actions/{id}/deny"),
            &operator_only,
        ),
        (
            Method::POST,
            format!("/v1/actions/{id}/reply"),
            &operator_only,
        ),
        (Method::POST, "/v1/grants".into(), &operator_only),
        (
            Method::POST,
            "/v1/grant-requests/grq_x/approve".into(),
            &operator_only,
        ),
        (Method::POST, "/v1/keys".into(), &admin_only),
        (Method::PUT, "/v1/agents/a9".into(), &admin_only),
        (Method::POST, "/v1/handlers".into(), &admin_only),
        (Method::PUT, "/v1/handlers/h9".into(), &admin_only),
        (Method::POST, "/v1/subscriptions".into(), &admin_only),
    ];
    let bodies: [(&str, &str); 3] = [
        ("application/json", "{bad"),
        ("text/plain", "hello"),
        ("application/json", r#"{"role":"admin","bogus":1}"#),
    ];
    let mut failures = Vec::new();
    for (method, path, keys) in &cases {
        for key in keys.iter() {
            for (content_type, body) in bodies {
                let resp = app
                    .client
                    .request(method.clone(), format!("{}{path}", app.base))
                    .bearer_auth(key)
                    .header("content-type", content_type)
                    .body(body)
                    .send()
                    .await
                    .unwrap();
                if resp.status() != StatusCode::FORBIDDEN {
                    failures.push(format!(
                        "{method} {path} ({content_type} {body}) as {}: {}",
                        &key[..8],
                        resp.status()
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // Nothing was changed on the way: the action is still pending.
    let (_, now) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{id}"),
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(now["status"], "pending");
    app.stop().await;
}

/// A new grant approves the pending actions it covers only where it would
/// allow them as new requests: a pattern the agent's profile now denies
/// wins over it, as it does for every request.
#[tokio::test]
async fn a_new_grant_leaves_pending_what_the_profile_now_denies() {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    let profile = |deny: Value| json!({"allow": [], "ask": ["tool:deploy:.*"], "deny": deny});
    app.profile("agent-1", profile(json!([]))).await;
    let (_, danger) = app.request("deploy", "prod").await;
    let (_, safe) = app.request("deploy", "staging").await;
    assert_eq!(danger["status"], "pending");
    assert_eq!(safe["status"], "pending");
    app.profile("agent-1", profile(json!(["tool:deploy:prod"])))
        .await;
    let (s, body) = app
        .call(
            Method::POST,
            "/v1/grants",
            Some(&app.operator),
            Some(json!({"agent": "agent-1", "tool": "deploy", "pattern": ".*", "expires": "1h"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let status = |a: Value| {
        let app = &app;
        async move {
            let id = a["id"].as_str().unwrap().to_owned();
            let (_, now) = app
                .call(
                    Method::GET,
                    &format!("/v1/actions/{id}"),
                    Some(&app.operator),
                    None,
                )
                .await;
            now["status"].as_str().unwrap().to_owned()
        }
    };
    assert_eq!(status(safe).await, "approved");
    assert_eq!(status(danger).await, "pending");
    // A new request for it is denied, grant or not.
    let (_, again) = app.request("deploy", "prod").await;
    assert_eq!(again["status"], "denied", "{again}");
    app.stop().await;
}

/// The `Bearer` scheme in any case; key names without control characters;
/// invented methods counted under one label.
#[tokio::test]
async fn keys_schemes_names_and_methods_are_read_strictly_but_fairly() {
    let app = TestApp::spawn().await;
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let resp = app
            .client
            .get(format!("{}/v1/whoami", app.base))
            .header("authorization", format!("{scheme} {}", app.agent))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK, "{scheme}");
    }
    for bad in [
        format!("Basic {}", app.agent),
        format!("Bearer{}", app.agent),
    ] {
        let resp = app
            .client
            .get(format!("{}/v1/whoami", app.base))
            .header("authorization", bad)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    }
    for name in ["bad\u{0}name", "two\nlines", "bell\u{7}", "c1\u{85}"] {
        let (s, p) = app
            .call(
                Method::POST,
                "/v1/keys",
                Some(&app.admin),
                Some(json!({"role": "operator", "name": name})),
            )
            .await;
        assert_problem(s, &p, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(p["errors"][0]["field"], "name", "{p}");
    }
    let (_, keys) = app
        .call(Method::GET, "/v1/keys", Some(&app.admin), None)
        .await;
    assert_eq!(keys.as_array().unwrap().len(), 3, "{keys}");
    for method in ["AAAA", "BBBB", "CCCC"] {
        let m = Method::from_bytes(method.as_bytes()).unwrap();
        app.client
            .request(m, format!("{}/nowhere", app.base))
            .send()
            .await
            .unwrap();
    }
    let text = app.metrics().await;
    assert!(!text.contains("AAAA"), "{text}");
    assert!(text.contains("method=\"other\""), "{text}");
    app.stop().await;
}

/// New actions and grants, each of two forms, name the field at fault like
/// every other body: an unknown one, one of the wrong type, one given twice
/// (never "last one wins").
#[tokio::test]
async fn two_form_bodies_name_the_field_at_fault() {
    let app = TestApp::spawn().await;
    let post = |path: &'static str, key: String, body: &'static str| {
        let app = &app;
        async move {
            let resp = app
                .client
                .post(format!("{}{path}", app.base))
                .bearer_auth(key)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            let status = resp.status();
            (status, resp.json::<Value>().await.unwrap())
        }
    };
    let cases = [
        (
            "/v1/actions",
            app.agent.clone(),
            r#"{"tool":"bash","detail":"ls","bogus":1}"#,
            "bogus",
        ),
        (
            "/v1/actions",
            app.agent.clone(),
            r#"{"tool":"bash","detail":1}"#,
            "detail",
        ),
        (
            "/v1/actions",
            app.agent.clone(),
            r#"{"tool":"bash","detail":"ls","tool":"sh"}"#,
            "tool",
        ),
        (
            "/v1/actions",
            app.agent.clone(),
            r#"{"handler":"h","action":"a","params":{},"bogus":1}"#,
            "bogus",
        ),
        (
            "/v1/grants",
            app.operator.clone(),
            r#"{"tool":"t","pattern":"x","expires":"1h","bogus":1}"#,
            "bogus",
        ),
        (
            "/v1/grants",
            app.operator.clone(),
            r#"{"tool":"t","pattern":"x","expires":"1h","tool":"u"}"#,
            "tool",
        ),
        (
            "/v1/grants",
            app.operator.clone(),
            r#"{"handler":"h","permission":"p","expires":7}"#,
            "expires",
        ),
    ];
    for (path, key, body, field) in cases {
        let (s, p) = post(path, key, body).await;
        assert_problem(s, &p, StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(p["errors"][0]["field"], field, "{body}: {p}");
    }
    let (_, page) = app
        .call(Method::GET, "/v1/actions", Some(&app.operator), None)
        .await;
    assert_eq!(page["items"].as_array().unwrap().len(), 0, "{page}");
    let (_, grants) = app
        .call(Method::GET, "/v1/grants", Some(&app.operator), None)
        .await;
    assert_eq!(grants.as_array().map_or(0, Vec::len), 0, "{grants}");
    app.stop().await;
}

/// An operator key bound to an agent (it may also ask as that agent) never
/// approves or grants for that agent: nobody approves their own requests.
#[tokio::test]
async fn nobody_approves_or_grants_for_themselves() {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    let own = app.key("operator", Some("agent-1")).await;
    let handler = json!({"id": "h1", "name": "H", "url": "http://127.0.0.1:9/",
        "permissions": [{"name": "p", "parameters_schema": {"type": "object", "properties": {"k": {"type": "string"}}}}],
        "actions": [{"name": "a", "params_schema": {"type": "object"}, "permission": "p"}]});
    let (s, _) = app
        .call(
            Method::POST,
            "/v1/handlers",
            Some(&app.admin),
            Some(handler),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, pending) = app.request("bash", "make").await;
    let id = pending["id"].as_str().unwrap().to_owned();
    let (_, gr) = app
        .call(
            Method::POST,
            "/v1/grant-requests",
            Some(&app.agent),
            Some(json!({"handler": "h1", "permission": "p", "reason": "r"})),
        )
        .await;
    let gr = gr["id"].as_str().unwrap().to_owned();
    let refused: Vec<(String, Option<Value>)> = vec![
        (format!("/v1/actions/{id}/approve"), None),
        (
            format!("/v1/actions/{id}/approve"),
            Some(json!({"remember": {"expires": "1h"}})),
        ),
        (
            format!("/v1/actions/{id}/reply"),
            Some(json!({"text": "yes"})),
        ),
        (format!("/v1/grant-requests/{gr}/approve"), None),
        (
            "/v1/grants".to_owned(),
            Some(json!({"agent": "agent-1", "tool": "bash", "pattern": ".*", "expires": "1h"})),
        ),
        (
            "/v1/grants".to_owned(),
            Some(json!({"tool": "bash", "pattern": ".*", "expires": "1h"})),
        ),
    ];
    for (path, body) in refused {
        let (s, p) = app
            .call(Method::POST, &path, Some(&own), body.clone())
            .await;
        assert_problem(s, &p, StatusCode::FORBIDDEN);
    }
    // Nothing changed; a grant for another agent is fine; another operator
    // approves.
    let (_, now) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{id}"),
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(now["status"], "pending");
    let (_, grants) = app
        .call(Method::GET, "/v1/grants", Some(&app.operator), None)
        .await;
    assert_eq!(grants.as_array().unwrap().len(), 0, "{grants}");
    let (s, body) = app
        .call(
            Method::POST,
            "/v1/grants",
            Some(&own),
            Some(json!({"agent": "agent-2", "tool": "bash", "pattern": ".*", "expires": "1h"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let (s, _) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/approve"),
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    app.stop().await;
}

/// A retry with the same idempotency key and `?wait` waits on the action it
/// answers with, and on nothing else.
#[tokio::test]
async fn an_idempotent_retry_that_waits_holds_one_waiter() {
    let app = TestApp::spawn().await;
    let body = json!({"tool": "bash", "detail": "make", "idempotency_key": "k1"});
    let (s, first) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(&app.agent),
            Some(body.clone()),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{first}");
    assert_eq!(first["status"], "pending");
    let id = first["id"].as_str().unwrap().to_owned();
    let retry = {
        let (client, url, key) = (
            app.client.clone(),
            format!("{}/v1/actions?wait=10", app.base),
            app.agent.clone(),
        );
        tokio::spawn(async move {
            let resp = client
                .post(url)
                .bearer_auth(key)
                .json(&body)
                .send()
                .await
                .unwrap();
            (resp.status(), resp.json::<Value>().await.unwrap())
        })
    };
    let waiting = || async {
        let text = app
            .client
            .get(format!("{}/metrics", app.base))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix("actiongate_long_polls_waiting "))
            .map(|v| v.trim().parse::<f64>().unwrap())
            .unwrap_or(0.0)
    };
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while waiting().await < 1.0 {
        assert!(std::time::Instant::now() < until, "the retry never waited");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(waiting().await, 1.0);
    let (s, _) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/approve"),
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let (s, answer) = retry.await.unwrap();
    assert_eq!(s, StatusCode::OK, "{answer}");
    assert_eq!(answer["id"], id);
    assert_eq!(answer["status"], "approved");
    assert_eq!(waiting().await, 0.0);
    app.stop().await;
}

#[tokio::test]
async fn request_id_is_echoed_and_metrics_are_exposed() {
    let app = TestApp::spawn().await;
    let resp = app
        .client
        .get(format!("{}/healthz", app.base))
        .header("x-request-id", "abc-123")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.headers()["x-request-id"], "abc-123");
    let resp = app
        .client
        .get(format!("{}/healthz", app.base))
        .send()
        .await
        .unwrap();
    assert!(!resp.headers()["x-request-id"].is_empty());
    app.request("bash", "make").await;
    let text = app.metrics().await;
    for needle in [
        "http_requests_total",
        "http_request_duration_seconds",
        "actiongate_decisions_total",
        "actiongate_pending_actions",
        "route=\"/v1/actions\"",
    ] {
        assert!(text.contains(needle), "metrics lack {needle}:\n{text}");
    }
    // Every request is counted under its route and status, an unmatched
    // one under `unmatched` (the recorder is the process's: other tests
    // add to the same series meanwhile, never take from them).
    let healthz = r#"http_requests_total{method="GET",route="/healthz",status="200"}"#;
    let unmatched = r#"http_requests_total{method="GET",route="unmatched",status="404"}"#;
    let before = app.metrics().await;
    for _ in 0..3 {
        app.client
            .get(format!("{}/healthz", app.base))
            .send()
            .await
            .unwrap();
        app.client
            .get(format!("{}/no/such/thing", app.base))
            .send()
            .await
            .unwrap();
    }
    let after = app.metrics().await;
    for series in [healthz, unmatched] {
        let count = |text: &str| -> f64 {
            text.lines()
                .find_map(|l| l.strip_prefix(series))
                .map_or(0.0, |n| n.trim().parse().unwrap())
        };
        assert!(
            count(&after) >= count(&before) + 3.0,
            "{series}: {} then {}",
            count(&before),
            count(&after)
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn shutdown_answers_open_long_polls() {
    let app = TestApp::spawn().await;
    let (_, a) = app.request("bash", "make").await;
    let id = a["id"].as_str().unwrap().to_owned();
    let poll = {
        let client = app.client.clone();
        let url = format!("{}/v1/actions/{id}?wait=60", app.base);
        let key = app.agent.clone();
        tokio::spawn(async move {
            client
                .get(url)
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let start = Instant::now();
    app.stop().await;
    let body = poll.await.unwrap();
    assert_eq!(body["status"], "pending");
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[test]
fn committed_openapi_matches_the_code() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../openapi/openapi.json");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    let generated = actiongate_server::openapi::document_json();
    assert!(
        committed == generated,
        "openapi/openapi.json is out of date: run `cargo run -- openapi > openapi/openapi.json`"
    );
}

#[tokio::test]
async fn an_admin_key_cannot_be_bound_to_an_agent() {
    let app = TestApp::spawn().await;
    let (s, p) = app
        .call(
            Method::POST,
            "/v1/keys",
            Some(&app.admin),
            Some(json!({"role": "admin", "agent": "agent-1"})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{p}");
    assert_eq!(p["errors"][0]["field"], "agent", "{p}");
    // Nothing was issued.
    let (_, keys) = app
        .call(Method::GET, "/v1/keys", Some(&app.admin), None)
        .await;
    assert!(
        keys.as_array()
            .unwrap()
            .iter()
            .all(|k| !(k["role"] == "admin" && k["agent"] == "agent-1")),
        "{keys}"
    );
    app.stop().await;
}

/// Every error code the gate can answer with is in the API reference's
/// table (docs/api.md), with the status the server gives it.
#[test]
fn every_error_code_is_in_the_api_reference() {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/api.md")).unwrap();
    for code in actiongate_gate::ErrorCode::ALL {
        let err =
            actiongate_server::error::ApiError::from(actiongate_gate::GateError::new(code, "x"));
        let row = format!("| `{}` | {} |", code.as_str(), err.status().as_u16());
        assert!(readme.contains(&row), "docs/api.md lacks the row {row}");
    }
}

#[tokio::test]
async fn remembering_a_compound_command_grants_each_of_its_commands() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("guarded")).await;
    let remember = |id: String| {
        let app = &app;
        async move {
            let (s, approved) = app
                .call(
                    Method::POST,
                    &format!("/v1/actions/{id}/approve"),
                    Some(&app.operator),
                    Some(json!({"remember": {"expires": "1h"}})),
                )
                .await;
            assert_eq!(s, StatusCode::OK, "{approved}");
        }
    };
    let (_, a) = app.request("bash", "cargo fmt && cargo build").await;
    assert_eq!(a["status"], "pending", "{a}");
    remember(a["id"].as_str().unwrap().to_owned()).await;
    // The grant matches the line it was made for, and each of its commands.
    for detail in ["cargo fmt && cargo build", "cargo build", "cargo fmt"] {
        let (_, again) = app.request("bash", detail).await;
        assert_eq!(again["status"], "approved", "{detail}: {again}");
    }
    let (_, other) = app.request("bash", "cargo publish").await;
    assert_eq!(other["status"], "pending", "{other}");
    // A line that changes directory is granted whole: its commands mean
    // what they do only there.
    let (_, a) = app.request("bash", "cd app && make clean").await;
    assert_eq!(a["status"], "pending", "{a}");
    remember(a["id"].as_str().unwrap().to_owned()).await;
    let (_, again) = app.request("bash", "cd app && make clean").await;
    assert_eq!(again["status"], "approved", "{again}");
    for detail in ["make clean", "cd / && make clean"] {
        let (_, alone) = app.request("bash", detail).await;
        assert_eq!(alone["status"], "pending", "{detail}: {alone}");
    }
    app.stop().await;
}

#[tokio::test]
async fn remember_says_when_no_grant_can_cover_a_command_line() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("guarded")).await;
    let (_, a) = app.request("bash", "echo $(id) > out.txt").await;
    let (s, p) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{}/approve", a["id"].as_str().unwrap()),
            Some(&app.operator),
            Some(json!({"remember": {"expires": "1h"}})),
        )
        .await;
    assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{p}");
    assert_eq!(p["errors"][0]["field"], "remember", "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("no grant can cover"),
        "{p}"
    );
    // Nothing was decided: the action still waits, and a plain approval works.
    let (_, still) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{}", a["id"].as_str().unwrap()),
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(still["status"], "pending");
    app.stop().await;
}

#[test]
fn every_expiry_in_the_schema_is_the_grammar_the_server_takes() {
    let doc: Value = serde_json::from_str(&actiongate_server::openapi::document_json()).unwrap();
    fn walk(v: &Value, key: Option<&str>, found: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                if matches!(key, Some("expires"))
                    && let Some(p) = map.get("pattern").and_then(Value::as_str)
                {
                    found.push(p.to_owned());
                }
                for (k, child) in map {
                    walk(child, Some(k), found);
                }
            }
            Value::Array(items) => items.iter().for_each(|c| walk(c, key, found)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    walk(&doc, None, &mut found);
    assert!(found.len() >= 4, "{found:?}");
    for p in found {
        assert_eq!(p, actiongate_policy::WIRE_EXPIRY_PATTERN);
    }
}
