//! `/mcp` driven by rmcp's own client over real HTTP, in both protocol
//! eras: the stateless `2026-07-28` (server/discover) and the handshake era
//! (initialize, sessions).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common;

use std::time::Duration;

use common::TestApp;
use reqwest::{Method, StatusCode};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, NumberOrString,
    ProgressNotificationParam, ProgressToken, ProtocolVersion, RequestMetaObject,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, RoleClient};
use serde_json::{Value, json};
use tokio::sync::mpsc;

#[derive(Clone, Copy, Debug)]
pub(crate) enum Era {
    Stateless,
    Handshake,
}

pub(crate) const ERAS: [Era; 2] = [Era::Stateless, Era::Handshake];

/// A client that forwards the progress notifications it gets.
pub(crate) struct Client {
    config: ClientConfig,
    progress: mpsc::UnboundedSender<ProgressNotificationParam>,
    list_changed: mpsc::UnboundedSender<()>,
}

impl ClientHandler for Client {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _ctx: NotificationContext<RoleClient>,
    ) {
        let _ = self.progress.send(params);
    }

    async fn on_tool_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        let _ = self.list_changed.send(());
    }

    fn get_info(&self) -> ClientConfig {
        self.config.clone()
    }
}

pub(crate) type Conn = RunningService<RoleClient, Client>;

pub(crate) async fn connect(
    app: &TestApp,
    key: &str,
    era: Era,
) -> (Conn, mpsc::UnboundedReceiver<ProgressNotificationParam>) {
    let (conn, progress, _) = connect_full(app, key, era).await;
    (conn, progress)
}

pub(crate) async fn connect_full(
    app: &TestApp,
    key: &str,
    era: Era,
) -> (
    Conn,
    mpsc::UnboundedReceiver<ProgressNotificationParam>,
    mpsc::UnboundedReceiver<()>,
) {
    connect_with(app, key, era, ClientCapabilities::default()).await
}

/// A client of `era` declaring `capabilities`.
pub(crate) async fn connect_with(
    app: &TestApp,
    key: &str,
    era: Era,
    capabilities: ClientCapabilities,
) -> (
    Conn,
    mpsc::UnboundedReceiver<ProgressNotificationParam>,
    mpsc::UnboundedReceiver<()>,
) {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(format!("{}/mcp", app.base))
            .auth_header(key.to_owned()),
    );
    let (tx, rx) = mpsc::unbounded_channel();
    let (changed_tx, changed_rx) = mpsc::unbounded_channel();
    let mut config = ClientConfig::default();
    config.capabilities = capabilities;
    let client = Client {
        config,
        progress: tx,
        list_changed: changed_tx,
    };
    let lifecycle = match era {
        Era::Stateless => ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
        Era::Handshake => ClientLifecycleMode::Initialize,
    };
    let conn = client
        .serve_with_lifecycle(transport, lifecycle)
        .await
        .expect("the MCP client starts");
    (conn, rx, changed_rx)
}

pub(crate) fn args(v: Value) -> rmcp::model::JsonObject {
    v.as_object().unwrap().clone()
}

pub(crate) async fn call(
    conn: &Conn,
    name: &str,
    arguments: Value,
    progress: bool,
) -> CallToolResult {
    let mut params = CallToolRequestParams::new(name.to_owned()).with_arguments(args(arguments));
    if progress {
        let mut meta = RequestMetaObject::new();
        meta.set_progress_token(ProgressToken(NumberOrString::String("p1".into())));
        params.meta = Some(meta);
    }
    conn.call_tool(params).await.expect("tools/call answers")
}

pub(crate) fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The only pending action of agent-1, once there is one.
pub(crate) async fn pending_id(app: &TestApp) -> String {
    for _ in 0..400 {
        let (_, body) = app
            .call(
                Method::GET,
                "/v1/actions?status=pending",
                Some(&app.operator.clone()),
                None,
            )
            .await;
        if let Some(id) = body["items"][0]["id"].as_str() {
            return id.to_owned();
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no pending action appeared");
}

pub(crate) async fn spawn() -> TestApp {
    TestApp::spawn_with(|s| s.http.mcp_progress_seconds = 1).await
}

#[tokio::test]
async fn mcp_without_a_key_is_a_401_problem() {
    let app = spawn().await;
    let resp = app
        .client
        .post(format!("{}/mcp", app.base))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert_eq!(
        resp.headers()["content-type"].to_str().unwrap(),
        "application/problem+json"
    );
    app.stop().await;
}

#[tokio::test]
async fn tools_are_listed_in_both_eras_with_the_permission_schema() {
    let app = spawn().await;
    for era in ERAS {
        let (conn, _) = connect(&app, &app.agent, era).await;
        let tools = conn.list_all_tools().await.unwrap();
        let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
        for want in [
            "request_permission",
            "check_action",
            "request_action",
            "get_action_status",
            "approval_prompt",
        ] {
            assert!(names.contains(&want.to_owned()), "{era:?}: {names:?}");
        }
        let rp = tools
            .iter()
            .find(|t| t.name == "request_permission")
            .unwrap();
        let schema = Value::Object((*rp.input_schema).clone());
        assert_eq!(schema["properties"]["permission"]["minLength"], 1);
        assert_eq!(schema["properties"]["reason"]["minLength"], 1);
        let t = &schema["properties"]["timeout_minutes"];
        assert_eq!(
            (
                t["minimum"].clone(),
                t["maximum"].clone(),
                t["default"].clone()
            ),
            (json!(1), json!(60), json!(15))
        );
        conn.cancel().await.unwrap();
    }
    app.stop().await;
}

#[tokio::test]
async fn request_permission_follows_the_profile_at_once() {
    let app = spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["tool:permission:net:ok"], "deny": ["tool:permission:net:bad"], "ask": []}),
    )
    .await;
    for era in ERAS {
        let (conn, _) = connect(&app, &app.agent, era).await;
        let ok = call(
            &conn,
            "request_permission",
            json!({"permission": "net:ok", "reason": "fetch docs"}),
            false,
        )
        .await;
        assert_eq!(text(&ok), "Permission granted for net:ok", "{era:?}");
        assert_ne!(ok.is_error, Some(true));
        let bad = call(
            &conn,
            "request_permission",
            json!({"permission": "net:bad", "reason": "fetch docs"}),
            false,
        )
        .await;
        assert!(
            text(&bad).starts_with("Permission denied for net:bad: "),
            "{era:?}: {}",
            text(&bad)
        );
        assert_ne!(bad.is_error, Some(true), "a denial is a normal result");
        let invalid = call(
            &conn,
            "request_permission",
            json!({"permission": "", "reason": "x"}),
            false,
        )
        .await;
        assert_eq!(invalid.is_error, Some(true));
        let invalid = call(
            &conn,
            "request_permission",
            json!({"permission": "p", "reason": "x", "timeout_minutes": 61}),
            false,
        )
        .await;
        assert_eq!(invalid.is_error, Some(true));
        conn.cancel().await.unwrap();
    }
    app.stop().await;
}

/// The call blocks while the action is pending, sends progress, and answers
/// with the operator's decision made through the API.
#[tokio::test]
async fn a_waiting_call_sends_progress_and_ends_with_the_operators_decision() {
    let app = spawn().await;
    for (era, verdict) in [(Era::Stateless, "approve"), (Era::Handshake, "deny")] {
        let (conn, mut progress) = connect(&app, &app.agent, era).await;
        let peer = conn.peer().clone();
        let waiting = tokio::spawn(async move {
            let mut params = CallToolRequestParams::new("request_permission").with_arguments(args(
                json!({"permission": "deploy:prod", "reason": "release 1.2", "timeout_minutes": 5}),
            ));
            let mut meta = RequestMetaObject::new();
            meta.set_progress_token(ProgressToken(NumberOrString::String("p1".into())));
            params.meta = Some(meta);
            peer.call_tool(params).await
        });
        let id = pending_id(&app).await;
        let first = tokio::time::timeout(Duration::from_secs(10), progress.recv())
            .await
            .expect("a progress notification within the interval")
            .unwrap();
        assert!(
            first
                .message
                .as_deref()
                .unwrap_or("")
                .starts_with("waiting for an operator, 5 min left"),
            "{first:?}"
        );
        let second = tokio::time::timeout(Duration::from_secs(10), progress.recv())
            .await
            .unwrap()
            .unwrap();
        assert!(second.progress > first.progress);
        assert!(!waiting.is_finished());
        let body = if verdict == "deny" {
            json!({"reason": "not today"})
        } else {
            json!({})
        };
        let (status, _) = app
            .call(
                Method::POST,
                &format!("/v1/actions/{id}/{verdict}"),
                Some(&app.operator.clone()),
                Some(body),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        let result = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        let want = if verdict == "deny" {
            "Permission denied for deploy:prod: not today"
        } else {
            "Permission granted for deploy:prod"
        };
        assert_eq!(text(&result), want, "{era:?}");
        conn.cancel().await.unwrap();
    }
    app.stop().await;
}

#[tokio::test]
async fn a_client_that_goes_away_cancels_its_pending_item() {
    let app = spawn().await;
    for era in ERAS {
        let (conn, _) = connect(&app, &app.agent, era).await;
        let peer = conn.peer().clone();
        let waiting = tokio::spawn(async move {
            peer.call_tool(
                CallToolRequestParams::new("request_permission")
                    .with_arguments(args(json!({"permission": "gone", "reason": "r"}))),
            )
            .await
        });
        let id = pending_id(&app).await;
        waiting.abort();
        let _ = conn.cancel().await;
        let mut status = Value::Null;
        for _ in 0..400 {
            let (_, a) = app
                .call(
                    Method::GET,
                    &format!("/v1/actions/{id}"),
                    Some(&app.operator.clone()),
                    None,
                )
                .await;
            status = a["status"].clone();
            if status == "cancelled" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert_eq!(status, "cancelled", "{era:?}");
    }
    app.stop().await;
}

/// `get_action_status` with `wait_seconds` is a poll: a client that leaves
/// it (a read timeout, a cancelled call) withdraws nothing. The action was
/// made by another call, which may still be waiting on it or polling again.
#[tokio::test]
async fn leaving_a_status_poll_withdraws_nothing() {
    let app = spawn().await;
    for era in ERAS {
        let (conn, _) = connect(&app, &app.agent, era).await;
        let r = call(
            &conn,
            "request_action",
            json!({"tool": "bash", "detail": "make poll", "wait_seconds": 0}),
            false,
        )
        .await;
        let id = r.structured_content.as_ref().unwrap()["action"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let peer = conn.peer().clone();
        let poll_id = id.clone();
        let polling = tokio::spawn(async move {
            peer.call_tool(
                CallToolRequestParams::new("get_action_status")
                    .with_arguments(args(json!({"id": poll_id, "wait_seconds": 30}))),
            )
            .await
        });
        // The poll is under way (its first step ends after a second).
        tokio::time::sleep(Duration::from_millis(300)).await;
        polling.abort();
        let _ = conn.cancel().await;
        // Long enough for a withdrawal to have landed.
        tokio::time::sleep(Duration::from_millis(1500)).await;
        let (_, a) = app
            .call(
                Method::GET,
                &format!("/v1/actions/{id}"),
                Some(&app.operator.clone()),
                None,
            )
            .await;
        assert_eq!(a["status"], "pending", "{era:?}: {a}");
        let (status, _) = app
            .call(
                Method::POST,
                &format!("/v1/actions/{id}/deny"),
                Some(&app.operator.clone()),
                Some(json!({})),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    app.stop().await;
}

#[tokio::test]
async fn check_request_and_poll_an_action() {
    let app = spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["tool:bash:ls"], "ask": ["tool:bash:.*"]}),
    )
    .await;
    for era in ERAS {
        let (conn, _) = connect(&app, &app.agent, era).await;
        let c = call(
            &conn,
            "check_action",
            json!({"tool": "bash", "detail": "ls"}),
            false,
        )
        .await;
        assert_eq!(
            c.structured_content.as_ref().unwrap()["result"],
            "allow",
            "{era:?}"
        );
        let c = call(
            &conn,
            "check_action",
            json!({"tool": "bash", "detail": "make"}),
            false,
        )
        .await;
        assert_eq!(c.structured_content.as_ref().unwrap()["result"], "ask");
        let r = call(
            &conn,
            "request_action",
            json!({"tool": "bash", "detail": "make", "wait_seconds": 0}),
            false,
        )
        .await;
        let action = &r.structured_content.as_ref().unwrap()["action"];
        assert_eq!(action["status"], "pending");
        let id = action["id"].as_str().unwrap().to_owned();
        let s = call(&conn, "get_action_status", json!({"id": id}), false).await;
        assert_eq!(
            s.structured_content.as_ref().unwrap()["action"]["status"],
            "pending"
        );
        let (status, _) = app
            .call(
                Method::POST,
                &format!("/v1/actions/{id}/approve"),
                Some(&app.operator.clone()),
                Some(json!({})),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
        let s = call(
            &conn,
            "get_action_status",
            json!({"id": id, "wait_seconds": 5}),
            false,
        )
        .await;
        assert_eq!(
            s.structured_content.as_ref().unwrap()["action"]["status"],
            "approved"
        );
        assert_ne!(s.is_error, Some(true));
        conn.cancel().await.unwrap();
    }
    app.stop().await;
}

/// An approver who edits a call approves the edited one (docs/teams.md):
/// the result's text, which is all a model may read, says not to run the
/// call as asked and names what was approved.
#[tokio::test]
async fn an_edited_approval_reads_as_the_call_approved_not_the_one_asked() {
    let app = spawn().await;
    for era in ERAS {
        let (conn, _) = connect(&app, &app.agent, era).await;
        let r = call(
            &conn,
            "request_action",
            json!({"tool": "bash", "detail": "rm -r build/mcp", "wait_seconds": 0}),
            false,
        )
        .await;
        let id = r.structured_content.as_ref().unwrap()["action"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let (status, body) = app
            .call(
                Method::POST,
                &format!("/v1/actions/{id}/approve"),
                Some(&app.operator.clone()),
                Some(json!({"detail": "rm -r build/mcp/tmp"})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let s = call(&conn, "get_action_status", json!({"id": id}), false).await;
        let said = text(&s);
        assert!(
            said.starts_with("approved as edited:")
                && said.contains("do not run it as asked")
                && said.ends_with("detail: rm -r build/mcp/tmp"),
            "{era:?}: {said}"
        );
        conn.cancel().await.unwrap();
    }
    app.stop().await;
}

/// The JSON of `text` as Claude Code's `--permission-prompt-tool` contract
/// takes it: exactly `{"behavior":"allow","updatedInput":{...}}` or
/// `{"behavior":"deny","message":"..."}` (its schema of the answer).
pub(crate) fn claude_code_answer(text: &str) -> Value {
    let v: Value = serde_json::from_str(text).expect("the answer is JSON text");
    let o = v.as_object().expect("an object");
    let keys: Vec<&str> = o.keys().map(String::as_str).collect();
    match o.get("behavior").and_then(Value::as_str) {
        Some("allow") => {
            assert_eq!(keys.len(), 2, "{v}");
            assert!(o["updatedInput"].is_object(), "{v}");
        }
        Some("deny") => {
            assert_eq!(keys.len(), 2, "{v}");
            assert!(o["message"].is_string(), "{v}");
        }
        _ => panic!("not a permission answer: {v}"),
    }
    v
}

#[tokio::test]
async fn approval_prompt_answers_claude_codes_json_and_fails_closed() {
    let app = spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["tool:bash:ls"], "deny": ["tool:bash:rm( .*)?"], "ask": []}),
    )
    .await;
    for era in ERAS {
        let (conn, _) = connect(&app, &app.agent, era).await;
        let input = json!({"command": "ls"});
        let r = call(
            &conn,
            "approval_prompt",
            json!({"tool_name": "Bash", "input": input, "tool_use_id": "t1"}),
            false,
        )
        .await;
        let v = claude_code_answer(&text(&r));
        assert_eq!(r.is_error, Some(false), "{era:?}");
        assert_eq!(
            v,
            json!({"behavior": "allow", "updatedInput": {"command": "ls"}}),
            "{era:?}"
        );
        let r = call(
            &conn,
            "approval_prompt",
            json!({"tool_name": "Bash", "input": {"command": "rm x"}}),
            false,
        )
        .await;
        let v = claude_code_answer(&text(&r));
        assert_eq!(v["behavior"], "deny");
        assert!(v["message"].as_str().unwrap().contains("denied"), "{v}");
        // A decided deny is the tool's normal answer.
        assert_eq!(r.is_error, Some(false), "{era:?}");
        // Input it cannot read, or no arguments at all: a tool error whose
        // text is still the deny Claude Code parses, never an allow.
        for bad in [json!({"tool_name": "Bash", "input": {}}), json!({})] {
            let r = call(&conn, "approval_prompt", bad.clone(), false).await;
            assert_eq!(r.is_error, Some(true), "{era:?} {bad}");
            let v = claude_code_answer(&text(&r));
            assert_eq!(v["behavior"], "deny", "{v}");
        }
        conn.cancel().await.unwrap();
    }
    app.stop().await;
}

#[tokio::test]
async fn an_operator_key_gets_an_error_result_not_an_allow() {
    let app = spawn().await;
    let (conn, _) = connect(&app, &app.operator, Era::Stateless).await;
    let r = call(
        &conn,
        "request_permission",
        json!({"permission": "p", "reason": "r"}),
        true,
    )
    .await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    conn.cancel().await.unwrap();
    // Over a handshake-era MCP session too, an operator may follow an
    // action: it acts in no agent's session, so none is carried into.
    let (_, a) = app
        .call(
            reqwest::Method::POST,
            "/v1/actions",
            Some(&app.agent),
            Some(json!({"tool": "deploy", "detail": "prod"})),
        )
        .await;
    let (conn, _) = connect(&app, &app.operator, Era::Handshake).await;
    let r = call(&conn, "get_action_status", json!({"id": a["id"]}), false).await;
    assert_ne!(r.is_error, Some(true), "{}", text(&r));
    assert!(text(&r).starts_with("pending"), "{}", text(&r));
    conn.cancel().await.unwrap();
    app.stop().await;
}

/// An executor on a random loopback port answering every webhook with
/// `status` and `body`.
pub(crate) async fn executor(status: u16, body: Value) -> String {
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move || {
            let body = body.clone();
            async move {
                (
                    axum::http::StatusCode::from_u16(status).unwrap(),
                    axum::Json(body),
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

pub(crate) fn files_handler(id: &str, url: &str) -> Value {
    json!({
        "id": id, "name": "Files", "url": url, "timeout": "1s",
        "permissions": [{"name": "fs.write", "parameters_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}],
        "actions": [{"name": "write", "description": "Write a file.",
            "params_schema": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path"]},
            "permission": "fs.write", "scope": {"path": "/path"}, "detail": "write {path}",
            // A writer: its answer is its own report, so running it does
            // not taint its session (no hints would: docs/sessions.md).
            "hints": {"read_only": false}}]
    })
}

pub(crate) async fn register(app: &TestApp, handler: Value) {
    let (s, body) = app
        .call(
            Method::POST,
            "/v1/handlers",
            Some(&app.admin.clone()),
            Some(handler),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
}

#[tokio::test]
async fn a_handler_action_is_a_tool_whose_result_is_the_executors_answer() {
    let app = TestApp::spawn_with(|s| {
        s.http.mcp_progress_seconds = 1;
        s.dispatch.retry_schedule = vec![];
    })
    .await;
    app.profile("agent-1", json!("open")).await;
    register(
        &app,
        files_handler("files", &executor(200, json!({"written": 2})).await),
    )
    .await;
    register(
        &app,
        files_handler(
            "broken",
            &executor(400, json!({"error": "disk full"})).await,
        ),
    )
    .await;
    for era in ERAS {
        let (conn, _) = connect(&app, &app.agent, era).await;
        let tools = conn.list_all_tools().await.unwrap();
        let t = tools
            .iter()
            .find(|t| t.name == "files__write")
            .expect("the handler tool is listed");
        assert_eq!(t.description.as_deref(), Some("Write a file."));
        assert_eq!(t.input_schema["required"], json!(["path"]));
        let r = call(
            &conn,
            "files__write",
            json!({"path": "/tmp/x", "content": "hi"}),
            true,
        )
        .await;
        assert_ne!(r.is_error, Some(true), "{era:?}: {}", text(&r));
        assert_eq!(r.structured_content, Some(json!({"written": 2})));
        let bad = call(&conn, "broken__write", json!({"path": "/tmp/x"}), false).await;
        assert_eq!(bad.is_error, Some(true), "{}", text(&bad));
        let invalid = call(&conn, "files__write", json!({"content": "no path"}), false).await;
        assert_eq!(invalid.is_error, Some(true), "{}", text(&invalid));
        conn.cancel().await.unwrap();
    }
    app.stop().await;
}

#[tokio::test]
async fn a_denied_handler_tool_is_an_error_result() {
    let app = spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["tool:files:.*"], "ask": [], "deny": ["tool:files:write /etc/.*"]}),
    )
    .await;
    register(&app, files_handler("files", "http://127.0.0.1:9/hook")).await;
    let (conn, _) = connect(&app, &app.agent, Era::Stateless).await;
    let r = call(&conn, "files__write", json!({"path": "/etc/x"}), false).await;
    assert_eq!(r.is_error, Some(true), "{}", text(&r));
    // Denied by the deny rule, not by default: nothing reached the executor.
    assert!(text(&r).starts_with("denied"), "{}", text(&r));
    let action = &r.structured_content.as_ref().unwrap()["action"];
    assert_eq!(action["decision"]["rule"]["list"], "deny", "{action}");
    conn.cancel().await.unwrap();
    app.stop().await;
}

#[tokio::test]
async fn a_new_handler_tells_handshake_sessions_that_the_list_changed() {
    let app = spawn().await;
    let (conn, _, mut changed) = connect_full(&app, &app.agent, Era::Handshake).await;
    // The session is set up once `notifications/initialized` was handled.
    conn.list_all_tools().await.unwrap();
    register(&app, files_handler("files", "http://127.0.0.1:9/hook")).await;
    tokio::time::timeout(Duration::from_secs(10), changed.recv())
        .await
        .expect("notifications/tools/list_changed")
        .unwrap();
    let tools = conn.list_all_tools().await.unwrap();
    assert!(tools.iter().any(|t| t.name == "files__write"));
    conn.cancel().await.unwrap();
    app.stop().await;
}
