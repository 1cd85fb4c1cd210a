//! `/mcp` beyond plain calls, with rmcp's client: the tasks extension
//! (SEP-2663) in the stateless era, the tool list's cache hints, and the
//! handlers' hints as tool annotations.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use reqwest::{Method, StatusCode};
use rmcp::model::{
    CacheScope, CallToolRequestParams, CallToolResponse, CancelTaskParams, ClientCapabilities,
    GetTaskParams, GetTaskResult, TaskPayload, TaskStatus,
};
use rmcp::service::ServiceError;
use serde_json::{Value, json};

use crate::common::TestApp;
use crate::mcp::{
    Conn, Era, args, call, connect, connect_with, executor, files_handler, pending_id, register,
    spawn, text,
};

fn takes_tasks() -> ClientCapabilities {
    ClientCapabilities::builder().enable_tasks().build()
}

async fn tasks_client(app: &TestApp, era: Era) -> Conn {
    connect_with(app, &app.agent, era, takes_tasks()).await.0
}

/// Calls `name` and expects a task; its id.
async fn call_for_task(conn: &Conn, name: &str, arguments: Value) -> String {
    let params = CallToolRequestParams::new(name.to_owned()).with_arguments(args(arguments));
    match conn
        .call_tool_once(params)
        .await
        .expect("tools/call answers")
    {
        CallToolResponse::Task(t) => {
            assert_eq!(t.task.status, TaskStatus::Working);
            assert_eq!(t.task.poll_interval_ms, Some(2000));
            t.task.task_id
        }
        other => panic!("expected a task, got {other:?}"),
    }
}

async fn get(conn: &Conn, id: &str) -> GetTaskResult {
    conn.get_task(GetTaskParams::new(id))
        .await
        .expect("tasks/get answers")
}

/// The completed task's result as JSON (`content`, `isError`, ...).
fn completed(t: &GetTaskResult) -> Value {
    match &t.task.payload {
        TaskPayload::Completed { result } => Value::Object(result.clone()),
        other => panic!("expected a completed task, got {other:?}"),
    }
}

fn result_text(result: &Value) -> String {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_owned()
}

async fn decide(app: &TestApp, id: &str, verdict: &str, body: Value) {
    let (status, resp) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/{verdict}"),
            Some(&app.operator.clone()),
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{resp}");
}

async fn action(app: &TestApp, id: &str) -> Value {
    app.call(
        Method::GET,
        &format!("/v1/actions/{id}"),
        Some(&app.operator.clone()),
        None,
    )
    .await
    .1
}

#[tokio::test]
async fn a_waiting_permission_is_a_task_that_tasks_get_reports() {
    let app = spawn().await;
    let conn = tasks_client(&app, Era::Stateless).await;
    let task = call_for_task(
        &conn,
        "request_permission",
        json!({"permission": "deploy:prod", "reason": "release", "timeout_minutes": 5}),
    )
    .await;
    let id = pending_id(&app).await;
    assert_eq!(task, format!("permission.{id}"));
    let t = get(&conn, &task).await;
    assert_eq!(t.task.status(), TaskStatus::Working);
    assert!(
        t.task
            .task
            .status_message
            .as_deref()
            .unwrap()
            .starts_with("waiting for an operator, 5 min left"),
        "{t:?}"
    );
    decide(&app, &id, "approve", json!({})).await;
    let t = get(&conn, &task).await;
    assert_eq!(t.task.status(), TaskStatus::Completed);
    let result = completed(&t);
    assert_eq!(result_text(&result), "Permission granted for deploy:prod");
    assert_eq!(result["isError"], false);

    // Denied: a normal result with the reason; nobody deciding: an error
    // result saying it timed out, as the blocking call would.
    let task = call_for_task(
        &conn,
        "request_permission",
        json!({"permission": "net:x", "reason": "fetch"}),
    )
    .await;
    decide(
        &app,
        &pending_id(&app).await,
        "deny",
        json!({"reason": "not now"}),
    )
    .await;
    let result = completed(&get(&conn, &task).await);
    assert_eq!(result_text(&result), "Permission denied for net:x: not now");
    assert_eq!(result["isError"], false);
    conn.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test]
async fn tasks_cancel_withdraws_the_pending_item() {
    let app = spawn().await;
    app.profile("agent-1", json!({"allow": [], "ask": ["tool:bash:.*"]}))
        .await;
    let conn = tasks_client(&app, Era::Stateless).await;
    let task = call_for_task(
        &conn,
        "request_action",
        json!({"tool": "bash", "detail": "make deploy", "reason": "ship"}),
    )
    .await;
    let id = pending_id(&app).await;
    assert_eq!(task, format!("action.{id}"));
    conn.cancel_task(CancelTaskParams::new(task.clone()))
        .await
        .unwrap();
    assert_eq!(action(&app, &id).await["status"], "cancelled");
    let t = get(&conn, &task).await;
    assert_eq!(t.task.status(), TaskStatus::Cancelled);
    // Cancelling again, once settled, is acknowledged and changes nothing.
    conn.cancel_task(CancelTaskParams::new(task)).await.unwrap();
    conn.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test]
async fn a_handler_tool_task_ends_with_the_executors_answer() {
    let app = TestApp::spawn_with(|s| {
        s.http.mcp_progress_seconds = 1;
        s.dispatch.retry_schedule = vec![];
    })
    .await;
    app.profile(
        "agent-1",
        json!({"allow": [], "ask": ["tool:files:.*"], "deny": []}),
    )
    .await;
    register(
        &app,
        files_handler("files", &executor(200, json!({"written": 2})).await),
    )
    .await;
    let conn = tasks_client(&app, Era::Stateless).await;
    let task = call_for_task(&conn, "files__write", json!({"path": "/tmp/x"})).await;
    assert!(task.starts_with("handler."), "{task}");
    let id = pending_id(&app).await;
    decide(&app, &id, "approve", json!({})).await;
    let mut t = get(&conn, &task).await;
    for _ in 0..200 {
        if t.task.status() == TaskStatus::Completed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        t = get(&conn, &task).await;
    }
    let result = completed(&t);
    assert_eq!(result["structuredContent"], json!({"written": 2}));
    assert_eq!(result["isError"], false);
    conn.cancel().await.unwrap();
    app.stop().await;
}

/// Nothing of a task is kept in the daemon's memory: another daemon (here
/// the same data dir after a restart) answers `tasks/get` for it.
#[tokio::test]
async fn a_task_outlives_the_daemon_that_made_it() {
    let app = spawn().await;
    let conn = tasks_client(&app, Era::Stateless).await;
    let task = call_for_task(
        &conn,
        "request_permission",
        json!({"permission": "restart:ok", "reason": "r"}),
    )
    .await;
    let id = pending_id(&app).await;
    drop(conn);
    let app = app.restart_with(|s| s.http.mcp_progress_seconds = 1).await;
    decide(&app, &id, "approve", json!({})).await;
    let conn = tasks_client(&app, Era::Stateless).await;
    let result = completed(&get(&conn, &task).await);
    assert_eq!(result_text(&result), "Permission granted for restart:ok");
    conn.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test]
async fn a_task_is_only_its_agents() {
    let app = spawn().await;
    let conn = tasks_client(&app, Era::Stateless).await;
    let task = call_for_task(
        &conn,
        "request_permission",
        json!({"permission": "mine", "reason": "r"}),
    )
    .await;
    let other_key = app.key("agent", Some("agent-2")).await;
    let other = connect_with(&app, &other_key, Era::Stateless, takes_tasks())
        .await
        .0;
    let refused = |r: Result<GetTaskResult, ServiceError>| match r {
        Err(ServiceError::McpError(e)) => e.code.0,
        other => panic!("expected an error, got {other:?}"),
    };
    assert_eq!(
        refused(other.get_task(GetTaskParams::new(task.clone())).await),
        -32602
    );
    assert!(
        other
            .cancel_task(CancelTaskParams::new(task.clone()))
            .await
            .is_err()
    );
    let id = task.split_once('.').unwrap().1.to_owned();
    // The same action under another tool's kind, or a made-up id, is no task.
    for bogus in [format!("handler.{id}"), "permission.nope".into(), id] {
        assert_eq!(
            refused(conn.get_task(GetTaskParams::new(bogus)).await),
            -32602
        );
    }
    assert_eq!(
        action(&app, &pending_id(&app).await).await["status"],
        "pending"
    );
    other.cancel().await.unwrap();
    conn.cancel().await.unwrap();
    app.stop().await;
}

/// A call that is decided at once needs no task; the handshake era has no
/// tasks (SEP-2663 defines the extension for the stateless revision only),
/// so its calls block as before.
#[tokio::test]
async fn calls_decided_at_once_and_handshake_calls_are_plain_results() {
    let app = spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["tool:permission:ok"], "ask": ["tool:permission:.*"]}),
    )
    .await;
    let conn = tasks_client(&app, Era::Stateless).await;
    let params = CallToolRequestParams::new("request_permission")
        .with_arguments(args(json!({"permission": "ok", "reason": "r"})));
    match conn.call_tool_once(params).await.unwrap() {
        CallToolResponse::Complete(r) => assert_eq!(text(&r), "Permission granted for ok"),
        other => panic!("{other:?}"),
    }
    conn.cancel().await.unwrap();

    let conn = tasks_client(&app, Era::Handshake).await;
    let peer = conn.peer().clone();
    let waiting = tokio::spawn(async move {
        peer.call_tool_once(
            CallToolRequestParams::new("request_permission")
                .with_arguments(args(json!({"permission": "legacy", "reason": "r"}))),
        )
        .await
    });
    let id = pending_id(&app).await;
    decide(&app, &id, "approve", json!({})).await;
    match waiting.await.unwrap().unwrap() {
        CallToolResponse::Complete(r) => {
            assert_eq!(text(&r), "Permission granted for legacy")
        }
        other => panic!("{other:?}"),
    }
    conn.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test]
async fn the_stateless_tool_list_carries_cache_hints() {
    let app = TestApp::spawn_with(|s| s.http.mcp_tools_ttl_seconds = 42).await;
    let (conn, _) = connect(&app, &app.agent, Era::Stateless).await;
    let list = conn.list_tools(None).await.unwrap();
    assert_eq!(list.ttl_ms, Some(42_000));
    assert_eq!(list.cache_scope, Some(CacheScope::Private));
    conn.cancel().await.unwrap();
    let (conn, _) = connect(&app, &app.agent, Era::Handshake).await;
    let list = conn.list_tools(None).await.unwrap();
    assert_eq!(list.ttl_ms, None, "the handshake era has no cache hints");
    conn.cancel().await.unwrap();
    app.stop().await;
}

fn hinted_handler(url: &str) -> Value {
    let mut h = files_handler("files", url);
    h["actions"][0]["hints"] = json!({"read_only": false, "destructive": true, "idempotent": true});
    h["actions"].as_array_mut().unwrap().push(
        json!({"name": "read", "description": "Read a file.",
            "params_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
            "permission": "fs.write", "scope": {"path": "/path"}, "detail": "read {path}",
            "hints": {"read_only": true, "open_world": false}}),
    );
    h
}

#[tokio::test]
async fn handler_hints_are_the_tools_annotations_and_allow_nothing() {
    let app = spawn().await;
    // Everything of the handler is asked, read-only or not.
    app.profile("agent-1", json!({"allow": [], "ask": ["tool:files:.*"]}))
        .await;
    register(&app, hinted_handler("http://127.0.0.1:9/hook")).await;
    let (conn, _) = connect(&app, &app.agent, Era::Stateless).await;
    let tools = conn.list_all_tools().await.unwrap();
    let ann = |name: &str| {
        let t = tools.iter().find(|t| t.name == name).unwrap();
        serde_json::to_value(t.annotations.as_ref().unwrap()).unwrap()
    };
    assert_eq!(
        ann("files__write"),
        json!({"title": "Files: write", "readOnlyHint": false, "destructiveHint": true, "idempotentHint": true})
    );
    assert_eq!(
        ann("files__read"),
        json!({"title": "Files: read", "readOnlyHint": true, "openWorldHint": false})
    );
    // The same annotations in GET /v1/tools?format=mcp.
    let (_, listed) = app
        .call(
            Method::GET,
            "/v1/tools?format=mcp",
            Some(&app.agent.clone()),
            None,
        )
        .await;
    let read = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "files__read")
        .unwrap();
    assert_eq!(read["annotations"]["readOnlyHint"], true);
    // A read-only hint does not make the call allowed: it waits for a human.
    let peer = conn.peer().clone();
    let waiting = tokio::spawn(async move {
        peer.call_tool(
            CallToolRequestParams::new("files__read")
                .with_arguments(args(json!({"path": "/etc/shadow"}))),
        )
        .await
    });
    let id = pending_id(&app).await;
    decide(&app, &id, "deny", json!({"reason": "no"})).await;
    let r = waiting.await.unwrap().unwrap();
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    conn.cancel().await.unwrap();

    // Contradicting hints are refused at registration.
    let mut bad = files_handler("bad", "http://127.0.0.1:9/hook");
    bad["actions"][0]["hints"] = json!({"read_only": true, "destructive": true});
    let (status, body) = app
        .call(
            Method::POST,
            "/v1/handlers",
            Some(&app.admin.clone()),
            Some(bad),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["errors"][0]["field"], "actions[0].hints");
    app.stop().await;
}

#[tokio::test]
async fn an_unknown_call_still_fails_closed_with_tasks() {
    let app = spawn().await;
    let conn = tasks_client(&app, Era::Stateless).await;
    let r = call(&conn, "no_such_tool", json!({}), false).await;
    assert_eq!(r.is_error, Some(true));
    conn.cancel().await.unwrap();
    app.stop().await;
}
