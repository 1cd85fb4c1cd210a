//! Catching up at start: every pending action and grant request reaches
//! the chat, the longest waiting included, however many newer ones wait
//! with it.

use reqwest::Method;
use serde_json::json;

use super::common::TestApp;
use super::fake::Fake;
use super::pending;

#[tokio::test]
async fn a_daemon_started_on_a_long_queue_posts_its_longest_waiting_action() {
    let telegram = Fake::start().await;
    let app = TestApp::spawn_with(|s| s.limits.max_pending_per_agent = 1000).await;
    app.profile("agent-1", json!("standard")).await;
    // Asked while no chat was set up: the oldest, then 250 newer.
    let oldest = pending(&app, "make deploy-oldest").await;
    for i in 0..250 {
        pending(&app, &format!("make job-{i}")).await;
    }
    let tg = telegram.base.clone();
    let app = app
        .restart_with(move |s| {
            s.limits.max_pending_per_agent = 1000;
            telegram_at(s, tg);
        })
        .await;
    telegram
        .wait_for("/sendMessage", "the oldest action's message", |c| {
            c.iter().any(|c| c.body.to_string().contains(&oldest))
        })
        .await;
    app.stop().await;
}

/// Settings that post to the fake Telegram at `base`.
fn telegram_at(s: &mut actiongate_server::config::Settings, base: String) {
    let t = &mut s.connectors.telegram;
    t.token = "123:TOKEN".into();
    t.chat_id = "-1001".into();
    t.api_base = base;
    t.poll_seconds = 1;
}

/// Registers a `files` handler whose `fs.write` takes a path scope.
async fn files_handler(app: &TestApp) {
    let (s, body) = app
        .call(
            Method::POST,
            "/v1/handlers",
            Some(&app.admin),
            Some(json!({
                "id": "files", "name": "Files", "url": "http://127.0.0.1:9/hook",
                "permissions": [{"name": "fs.write", "parameters_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
                "actions": [{"name": "write", "permission": "fs.write", "params_schema": {"type": "object"}}]
            })),
        )
        .await;
    assert!(s.is_success(), "{body}");
}

#[tokio::test]
async fn a_daemon_started_on_a_long_queue_posts_its_longest_waiting_grant_request() {
    let telegram = Fake::start().await;
    let app = TestApp::spawn_with(|s| s.limits.max_pending_per_agent = 1000).await;
    files_handler(&app).await;
    // Asked while no chat was set up: the oldest, then 500 newer (one
    // listing's worth).
    let agent = app.agent.clone();
    let mut ids = Vec::new();
    for i in 0..501 {
        let (s, r) = app
            .call(
                Method::POST,
                "/v1/grant-requests",
                Some(&agent),
                Some(json!({"handler": "files", "permission": "fs.write", "reason": format!("job {i}")})),
            )
            .await;
        assert!(s.is_success(), "{r}");
        ids.push(r["id"].as_str().unwrap().to_owned());
    }
    let oldest = ids[0].clone();
    let tg = telegram.base.clone();
    let app = app
        .restart_with(move |s| {
            s.limits.max_pending_per_agent = 1000;
            telegram_at(s, tg);
        })
        .await;
    telegram
        .wait_for("/sendMessage", "the oldest grant request's message", |c| {
            c.iter().any(|c| c.body.to_string().contains(&oldest))
        })
        .await;
    app.stop().await;
}

/// Grant requests so large that one listing's page holds only some of them
/// (cut short for its size): catching up reads on past it and posts the
/// newest too.
#[tokio::test]
async fn catching_up_reads_past_a_page_cut_short_for_its_size() {
    let telegram = Fake::start().await;
    let app = TestApp::spawn_with(|s| s.limits.scope_max_bytes = 600 * 1024).await;
    files_handler(&app).await;
    let agent = app.agent.clone();
    let mut newest = String::new();
    for i in 0..5 {
        let path = format!("/srv/{i}/{}", "p".repeat(500_000));
        let (s, r) = app
            .call(
                Method::POST,
                "/v1/grant-requests",
                Some(&agent),
                Some(json!({"handler": "files", "permission": "fs.write",
                    "scope": {"path": path}, "reason": format!("job {i}")})),
            )
            .await;
        assert!(s.is_success(), "{r}");
        newest = r["id"].as_str().unwrap().to_owned();
    }
    let tg = telegram.base.clone();
    let app = app
        .restart_with(move |s| {
            s.limits.scope_max_bytes = 600 * 1024;
            telegram_at(s, tg);
        })
        .await;
    telegram
        .wait_for("/sendMessage", "the newest grant request's message", |c| {
            c.iter().any(|c| c.body.to_string().contains(&newest))
        })
        .await;
    app.stop().await;
}

/// A plan asked while no chat was set up: a daemon started with one posts
/// its card, as it posts pending actions and grant requests.
#[tokio::test]
async fn a_daemon_started_on_a_pending_plan_posts_it() {
    let telegram = Fake::start().await;
    let app = TestApp::spawn().await;
    let agent = app.agent.clone();
    let (s, p) = app
        .call(
            Method::POST,
            "/v1/plans",
            Some(&agent),
            Some(json!({"reason": "ship it", "session": "task-9",
                "steps": [{"tool": "deploy", "detail": "plan-caught-up"}]})),
        )
        .await;
    assert!(s.is_success(), "{p}");
    let tg = telegram.base.clone();
    let app = app.restart_with(move |s| telegram_at(s, tg)).await;
    telegram
        .wait_for("/sendMessage", "the plan's message", |c| {
            c.iter()
                .any(|c| c.body.to_string().contains("plan-caught-up"))
        })
        .await;
    app.stop().await;
}
