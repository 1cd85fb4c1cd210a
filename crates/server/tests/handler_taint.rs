//! A registered handler action is a way out of a tainted session unless
//! its handler declares it stays in its own closed domain
//! (`hints.open_world: false`): a grant or a rule that allows it does not
//! let it run once the session read untrusted content.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common;

use common::TestApp;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

/// A handler with a mailer (no hints: open world, as MCP's defaults say)
/// and a note-taker declared closed.
fn handler() -> Value {
    let schema = json!({
        "type": "object",
        "properties": {"to": {"type": "string"}, "text": {"type": "string"}},
        "additionalProperties": false
    });
    json!({
        "id": "office",
        "name": "Office",
        "url": "http://127.0.0.1:9/hook",
        "permissions": [{"name": "office.use", "description": "Use the office",
                         "parameters_schema": {"type": "object"}}],
        "actions": [
            {"name": "send", "params_schema": schema, "permission": "office.use",
             "detail": "send to {to}"},
            {"name": "note", "params_schema": schema, "permission": "office.use",
             "detail": "note {text}", "hints": {"open_world": false}},
            {"name": "announce", "params_schema": schema, "permission": "office.use",
             "detail": "announce {text}", "hints": {"read_only": true, "open_world": true}},
            {"name": "post", "params_schema": schema, "permission": "office.use",
             "detail": "post {text}", "hints": {"read_only": false, "open_world": true}}
        ]
    })
}

async fn act(app: &TestApp, action: &str, session: &str) -> Value {
    let (s, body) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(&app.agent),
            Some(json!({
                "handler": "office", "action": action, "session": session,
                "params": {"to": "bob@example.com", "text": "the notes"}
            })),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    body
}

async fn setup(profile: Value) -> TestApp {
    let app = TestApp::spawn_with(|s| s.dispatch.enabled = false).await;
    let (s, body) = app
        .call(
            Method::POST,
            "/v1/handlers",
            Some(&app.admin),
            Some(handler()),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    app.profile("agent-1", profile).await;
    let (s, g) = app
        .call(
            Method::POST,
            "/v1/grants",
            Some(&app.operator),
            Some(
                json!({"agent": "agent-1", "handler": "office", "permission": "office.use",
                        "scope": {}, "expires": "today"}),
            ),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{g}");
    // The session reads a page: untrusted content.
    let (s, read) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(&app.agent),
            Some(json!({"tool": "WebFetch", "detail": "https://example.com/page", "session": "read"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{read}");
    assert_eq!(read["status"], "approved", "{read}");
    app
}

#[tokio::test]
async fn an_open_world_handler_action_asks_in_a_tainted_session() {
    let app = setup(json!("open")).await;
    for action in ["send", "announce"] {
        let asked = act(&app, action, "read").await;
        assert_eq!(asked["status"], "pending", "{asked}");
        let reason = asked["decision"]["reason"].as_str().unwrap();
        assert!(reason.contains("tainted"), "{reason}");
        // The grant still allows it in a session that read nothing.
        let fresh = format!("fresh-{action}");
        assert_eq!(act(&app, action, &fresh).await["status"], "approved");
    }
    // Declared closed: the grant allows it even after the read.
    assert_eq!(act(&app, "note", "read").await["status"], "approved");
    // A grant made while it waits does not settle it either.
    let asked = act(&app, "send", "read").await;
    let (s, g) = app
        .call(
            Method::POST,
            "/v1/grants",
            Some(&app.operator),
            Some(json!({"handler": "office", "permission": "office.use",
                        "scope": {}, "expires": "today"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{g}");
    let id = asked["id"].as_str().unwrap();
    let (s, now) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{id}"),
            Some(&app.agent),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{now}");
    assert_eq!(now["status"], "pending", "{now}");
    app.stop().await;
}

#[tokio::test]
async fn a_profile_that_guards_nothing_lets_handler_actions_run_after_a_read() {
    let app = setup(json!({"allow": ["tool:WebFetch:.*"], "ask": [], "guarded": []})).await;
    assert_eq!(act(&app, "send", "read").await["status"], "approved");
    app.stop().await;
}

#[tokio::test]
async fn a_plan_step_of_an_open_world_handler_action_asks_in_a_tainted_session() {
    let app = setup(json!("open")).await;
    let (s, plan) = app
        .call(
            Method::POST,
            "/v1/plans",
            Some(&app.agent),
            Some(
                json!({"session": "read", "reason": "mail the notes", "steps": [
                    {"handler": "office", "action": "send",
                     "params": {"to": "bob@example.com", "text": "x"}},
                    {"handler": "office", "action": "note",
                     "params": {"to": "bob@example.com", "text": "x"}}
                ]}),
            ),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{plan}");
    let asks = plan["steps"][0]["asks"].as_str().unwrap_or_default();
    assert!(asks.contains("tainted"), "{plan}");
    assert!(plan["steps"][1]["asks"].is_null(), "{plan}");
    app.stop().await;
}

async fn tainted_by(app: &TestApp, session: &str) -> Value {
    let (s, body) = app
        .call(
            Method::GET,
            &format!("/v1/sessions/{session}"),
            Some(&app.agent),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    body["tainted_by"].clone()
}

/// A handler action declared to read (`read_only: true`) that reaches out
/// answers with a stranger's words: it taints the session it is let run
/// in, as an MCP tool's call does (its result goes back to the agent). One
/// declared closed, or changing things (a sender; no hints: MCP's
/// default), does not.
#[tokio::test]
async fn a_handler_action_reading_the_world_taints_its_session() {
    let app = setup(json!("open")).await;
    for (action, taints) in [
        ("note", false),
        ("post", false),
        ("send", false),
        ("announce", true),
    ] {
        let session = format!("s-{action}");
        assert_eq!(act(&app, action, &session).await["status"], "approved");
        let by = tainted_by(&app, &session).await;
        assert_eq!(!by.is_null(), taints, "{action}: {by}");
        // And what leaves the session after it asks.
        let next = act(&app, "post", &session).await;
        let want = if taints { "pending" } else { "approved" };
        assert_eq!(next["status"], want, "{action} then post: {next}");
    }
    app.stop().await;
}
