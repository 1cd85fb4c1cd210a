//! `/mcp` over raw HTTP: sessions of the handshake era belong to the key
//! that opened them, closing one answers what the SDKs take, and browser
//! origins are refused unless configured.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common::TestApp;

use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::{Value, json};

const VERSION: &str = "2025-06-18";

fn post(app: &TestApp, key: &str, session: Option<&str>, body: &Value) -> RequestBuilder {
    let mut req = app
        .client
        .post(format!("{}/mcp", app.base))
        .bearer_auth(key)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .body(body.to_string());
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    req
}

fn with_session(app: &TestApp, method: Method, key: &str, session: &str) -> RequestBuilder {
    app.client
        .request(method, format!("{}/mcp", app.base))
        .bearer_auth(key)
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-session-id", session)
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": VERSION,
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}})
}

fn tools_list(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"})
}

/// Opens a session with `key`; its id.
async fn open(app: &TestApp, key: &str) -> String {
    let resp = post(app, key, None, &initialize()).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let id = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let _ = resp.text().await.unwrap();
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let resp = post(app, key, Some(&id), &note).send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::ACCEPTED);
    id
}

/// A tools/list in `session` with `key`: the status and the body.
async fn list_in(app: &TestApp, key: &str, session: &str) -> (StatusCode, String) {
    let resp = post(app, key, Some(session), &tools_list(2))
        .send()
        .await
        .unwrap();
    (resp.status(), resp.text().await.unwrap())
}

#[tokio::test]
async fn a_session_answers_only_the_key_that_opened_it() {
    let app = TestApp::spawn().await;
    let other_agent = app.key("agent", Some("agent-2")).await;
    let same_agent = app.key("agent", Some("agent-1")).await;
    let mine = open(&app, &app.agent).await;
    let (status, body) = list_in(&app, &app.agent, &mine).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body.contains("request_permission"), "{body}");

    let unknown = list_in(&app, &app.agent, "no-such-session").await;
    assert_eq!(unknown.0, StatusCode::NOT_FOUND);
    // A problem, like every other refusal of the daemon.
    let problem: Value = serde_json::from_str(&unknown.1).unwrap();
    assert_eq!(problem["status"], 404, "{problem}");
    for key in [&other_agent, &same_agent] {
        // Posting into it, streaming it and closing it: each is the answer
        // of a session that does not exist.
        let (status, body) = list_in(&app, key, &mine).await;
        assert_eq!((status, &body), (unknown.0, &unknown.1));
        let resp = with_session(&app, Method::GET, key, &mine)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
        let resp = with_session(&app, Method::DELETE, key, &mine)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
    }
    // The owner's session is untouched, its stream opens.
    let (status, body) = list_in(&app, &app.agent, &mine).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let resp = with_session(&app, Method::GET, &app.agent, &mine)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    drop(resp);
    app.stop().await;
}

#[tokio::test]
async fn closing_a_session_answers_200_and_ends_it() {
    let app = TestApp::spawn().await;
    let session = open(&app, &app.agent).await;
    let resp = with_session(&app, Method::DELETE, &app.agent, &session)
        .send()
        .await
        .unwrap();
    // The official Python SDK logs anything but 200 or 204 as a failure.
    assert_eq!(resp.status(), StatusCode::OK);
    assert_eq!(resp.text().await.unwrap(), "");
    let (status, _) = list_in(&app, &app.agent, &session).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    app.stop().await;
}

async fn with_origin(app: &TestApp, origin: Option<&str>, body: &Value) -> StatusCode {
    let version = if body["method"] == "server/discover" {
        "2026-07-28"
    } else {
        VERSION
    };
    let mut req = app
        .client
        .post(format!("{}/mcp", app.base))
        .bearer_auth(&app.agent)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", version)
        .header("mcp-method", body["method"].as_str().unwrap())
        .body(body.to_string());
    if let Some(o) = origin {
        req = req.header("origin", o);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let text = resp.text().await.unwrap();
    assert!(status != StatusCode::BAD_REQUEST, "{text}");
    status
}

/// The stateless era's request: no session, the version in `_meta`.
fn discover() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
            "io.modelcontextprotocol/clientCapabilities": {}}}})
}

#[tokio::test]
async fn a_browser_origin_is_refused_in_both_eras_unless_configured() {
    let app = TestApp::spawn().await;
    let evil = Some("https://evil.example.com");
    assert_eq!(
        with_origin(&app, evil, &initialize()).await,
        StatusCode::FORBIDDEN
    );
    let session = open(&app, &app.agent).await;
    let resp = post(&app, &app.agent, Some(&session), &tools_list(3))
        .header("origin", "https://evil.example.com")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert_eq!(
        with_origin(&app, evil, &discover()).await,
        StatusCode::FORBIDDEN
    );
    assert_eq!(
        with_origin(&app, Some("null"), &initialize()).await,
        StatusCode::FORBIDDEN
    );
    // No Origin (SDKs, Claude Code): served as before.
    assert_eq!(with_origin(&app, None, &initialize()).await, StatusCode::OK);
    assert_eq!(with_origin(&app, None, &discover()).await, StatusCode::OK);
    app.stop().await;

    let app = TestApp::spawn_with(|s| {
        s.http.mcp_allowed_origins = vec!["https://app.example.com".to_owned()];
    })
    .await;
    let good = Some("https://app.example.com");
    assert_eq!(with_origin(&app, good, &initialize()).await, StatusCode::OK);
    assert_eq!(with_origin(&app, good, &discover()).await, StatusCode::OK);
    assert_eq!(
        with_origin(&app, evil, &initialize()).await,
        StatusCode::FORBIDDEN
    );
    app.stop().await;
}

/// The JSON-RPC answer in `body` (plain JSON or an SSE stream).
fn answer_in(body: &str) -> Value {
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        return v;
    }
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .find(|v| v.get("result").is_some() || v.get("error").is_some())
        .unwrap_or_else(|| panic!("no answer in {body}"))
}

/// A request of the stateless era; its result.
async fn stateless(app: &TestApp, method: &str, params: Value) -> Value {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": {}});
    let mut req = app
        .client
        .post(format!("{}/mcp", app.base))
        .bearer_auth(&app.agent)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    if let Some(name) = params["name"].as_str() {
        req = req.header("mcp-name", name);
    }
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": method, "params": params});
    let text = req.body(body.to_string()).send().await.unwrap();
    let text = text.text().await.unwrap();
    let v = answer_in(&text);
    v["result"].clone()
}

#[tokio::test]
async fn results_name_the_server_and_structured_content_has_its_schema() {
    let app = TestApp::spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["tool:permission:fine", "tool:bash:ls"], "ask": ["tool:bash:rm x"]}),
    )
    .await;
    let named = json!({"name": "actiongate", "version": env!("CARGO_PKG_VERSION")});
    let list = stateless(&app, "tools/list", json!({})).await;
    assert_eq!(
        list["_meta"]["io.modelcontextprotocol/serverInfo"], named,
        "{list}"
    );
    let tools = list["tools"].as_array().unwrap();
    let schema_of =
        |name: &str| tools.iter().find(|t| t["name"] == name).unwrap()["outputSchema"].clone();
    assert!(schema_of("approval_prompt").is_null());
    let calls = [
        ("check_action", json!({"tool": "bash", "detail": "ls"})),
        (
            "request_permission",
            json!({"permission": "fine", "reason": "r"}),
        ),
        ("request_action", json!({"tool": "bash", "detail": "ls"})),
        (
            "request_action",
            json!({"tool": "bash", "detail": "rm x", "wait_seconds": 0}),
        ),
    ];
    let mut pending = String::new();
    for (name, arguments) in calls {
        let r = stateless(
            &app,
            "tools/call",
            json!({"name": name, "arguments": arguments}),
        )
        .await;
        assert_eq!(
            r["_meta"]["io.modelcontextprotocol/serverInfo"], named,
            "{r}"
        );
        assert_eq!(r["isError"], false, "{name}: {r}");
        let schema = schema_of(name);
        assert!(schema.is_object(), "{name} has no outputSchema");
        let v = jsonschema::validator_for(&schema).unwrap();
        assert!(v.is_valid(&r["structuredContent"]), "{name}: {r}");
        if let Some(id) = r["structuredContent"]["action"]["id"].as_str()
            && r["structuredContent"]["action"]["status"] == "pending"
        {
            pending = id.to_owned();
        }
    }
    let r = stateless(
        &app,
        "tools/call",
        json!({"name": "get_action_status", "arguments": {"id": pending}}),
    )
    .await;
    let v = jsonschema::validator_for(&schema_of("get_action_status")).unwrap();
    assert!(v.is_valid(&r["structuredContent"]), "{r}");
    assert_eq!(r["structuredContent"]["action"]["status"], "pending", "{r}");
    app.stop().await;
}

#[tokio::test]
async fn the_tasks_extension_is_offered_to_the_stateless_era_only() {
    let app = TestApp::spawn().await;
    let tasks = "io.modelcontextprotocol/tasks";
    let resp = post(&app, &app.agent, None, &initialize())
        .send()
        .await
        .unwrap();
    let init = answer_in(&resp.text().await.unwrap());
    let capabilities = &init["result"]["capabilities"];
    assert!(capabilities["tools"].is_object(), "{init}");
    assert!(capabilities["extensions"][tasks].is_null(), "{init}");
    let found = stateless(&app, "server/discover", json!({})).await;
    assert!(
        found["capabilities"]["extensions"][tasks].is_object(),
        "{found}"
    );
    app.stop().await;
}

/// What `/mcp` refuses at the HTTP level, rmcp's refusals included (a
/// browser origin, a method it does not serve, a wrong media type), is
/// RFC 9457 problem+json like every other error of the daemon.
#[tokio::test]
async fn mcp_refusals_are_problem_json() {
    let app = TestApp::spawn().await;
    let origin = post(&app, &app.agent, None, &initialize())
        .header("origin", "https://evil.example.com")
        .send()
        .await
        .unwrap();
    let media = app
        .client
        .post(format!("{}/mcp", app.base))
        .bearer_auth(&app.agent)
        .header("content-type", "text/plain")
        .header("accept", "application/json, text/event-stream")
        .body("hello")
        .send()
        .await
        .unwrap();
    let method = app
        .client
        .put(format!("{}/mcp", app.base))
        .bearer_auth(&app.agent)
        .send()
        .await
        .unwrap();
    for (want, resp) in [(403, origin), (415, media), (405, method)] {
        assert_eq!(resp.status().as_u16(), want);
        assert_eq!(
            resp.headers()["content-type"],
            "application/problem+json",
            "{want}"
        );
        let p: Value = resp.json().await.unwrap();
        assert_eq!(p["status"], want, "{p}");
        assert!(
            p["type"]
                .as_str()
                .unwrap()
                .starts_with("urn:actiongate:problem:")
        );
        assert!(!p["detail"].as_str().unwrap().is_empty(), "{p}");
    }
    app.stop().await;
}

/// A body sent as JSON that is not one JSON-RPC message is a bad body, as
/// on every other endpoint: JSON of another shape (a batch, which MCP no
/// longer has; nesting past the parser's depth) 422 naming the body, text
/// that is not JSON 400. rmcp alone answers these 415, "unsupported media
/// type", to a client that sent exactly the media type it wants.
#[tokio::test]
async fn mcp_bodies_that_are_not_one_message_are_bad_bodies() {
    let app = TestApp::spawn().await;
    let batch = Value::Array(vec![initialize()]).to_string();
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}{}}}"#,
        "[".repeat(300),
        "]".repeat(300)
    );
    for (body, want, field) in [
        (batch, 422, Some("body")),
        (deep, 422, Some("body")),
        (r#"{"hello":1}"#.to_owned(), 422, Some("body")),
        (r#"{"jsonrpc":"#.to_owned(), 400, None),
    ] {
        let resp = post(&app, &app.agent, None, &Value::Null)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), want, "{body:.60}");
        assert_eq!(resp.headers()["content-type"], "application/problem+json");
        let p: Value = resp.json().await.unwrap();
        assert_eq!(p["status"], want, "{p}");
        if let Some(field) = field {
            assert_eq!(p["errors"][0]["field"], field, "{p}");
        }
        assert!(!p["detail"].as_str().unwrap().is_empty(), "{p}");
    }
    app.stop().await;
}

/// The pending item of `request_permission` `permission`, called in
/// `session` over a stream the test then drops; the action's id and the
/// first bytes the stream carried.
async fn call_then_drop(
    app: &TestApp,
    session: &str,
    permission: &str,
    id: u64,
) -> (String, String) {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "request_permission", "_meta": {"progressToken": format!("p{id}")},
        "arguments": {"permission": permission, "reason": "r"}}});
    let mut resp = post(app, &app.agent, Some(session), &call)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let first = tokio::time::timeout(std::time::Duration::from_secs(2), resp.chunk())
        .await
        .ok()
        .and_then(|c| c.ok().flatten())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let action = loop {
        let (_, list) = app
            .call(
                Method::GET,
                "/v1/actions?status=pending",
                Some(&app.operator.clone()),
                None,
            )
            .await;
        let found = list["items"].as_array().unwrap().iter().find_map(|a| {
            (a["detail"].as_str() == Some(permission)).then(|| a["id"].as_str().unwrap().to_owned())
        });
        if let Some(id) = found {
            break id;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    };
    drop(resp);
    (action, first)
}

async fn status_of(app: &TestApp, id: &str) -> String {
    let (_, a) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{id}"),
            Some(&app.operator.clone()),
            None,
        )
        .await;
    a["status"].as_str().unwrap_or("").to_owned()
}

/// A client of the handshake era that drops a waiting call's stream and
/// does not resume it within `http.mcp_resume_seconds` has its pending item
/// withdrawn; one that resumes keeps it.
#[tokio::test]
async fn a_dropped_call_is_withdrawn_unless_its_client_resumes() {
    let app = TestApp::spawn_with(|s| {
        s.http.mcp_resume_seconds = 2;
        s.http.mcp_progress_seconds = 1;
    })
    .await;
    let session = open(&app, &app.agent).await;
    let (gone, first) = call_then_drop(&app, &session, "net:gone", 7).await;
    assert!(first.contains("id: "), "{first}");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        status_of(&app, &gone).await,
        "pending",
        "within the grace period"
    );
    let mut status = String::new();
    for _ in 0..200 {
        status = status_of(&app, &gone).await;
        if status == "cancelled" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(status, "cancelled");

    // Dropped, then resumed from its last event: still pending after the
    // grace period, and the resumed stream carries the decision.
    let (kept, first) = call_then_drop(&app, &session, "net:kept", 8).await;
    let event_id = first
        .lines()
        .find_map(|l| l.strip_prefix("id: "))
        .expect("the stream's first event has an id")
        .to_owned();
    let mut resumed = with_session(&app, Method::GET, &app.agent, &session)
        .header("last-event-id", event_id)
        .send()
        .await
        .unwrap();
    assert_eq!(resumed.status(), StatusCode::OK);
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(status_of(&app, &kept).await, "pending", "resumed in time");
    let (s, _) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{kept}/approve"),
            Some(&app.operator.clone()),
            Some(json!({})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let mut carried = String::new();
    while !carried.contains("Permission granted for net:kept") {
        let chunk = tokio::time::timeout(std::time::Duration::from_secs(10), resumed.chunk())
            .await
            .expect("the resumed stream carries the result")
            .unwrap()
            .expect("the stream ended without the result");
        carried.push_str(&String::from_utf8_lossy(&chunk));
    }
    app.stop().await;
}

/// One key holds at most 100 sessions at once: the next `initialize` is a
/// 429 problem and opens nothing; closing one makes room. Another key is
/// not held back by it.
#[tokio::test]
async fn a_key_holds_a_bounded_number_of_sessions() {
    let app = TestApp::spawn().await;
    let mut held = Vec::new();
    for _ in 0..100 {
        held.push(open(&app, &app.agent).await);
    }
    let resp = post(&app, &app.agent, None, &initialize())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(resp.headers().get("mcp-session-id").is_none());
    let problem: Value = resp.json().await.unwrap();
    assert_eq!(problem["code"], "limit-reached", "{problem}");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("100 MCP sessions"),
        "{problem}"
    );
    let other = app.key("agent", Some("agent-2")).await;
    open(&app, &other).await;
    // Every one held still answers; one closed makes room for one more.
    let (status, body) = list_in(&app, &app.agent, &held[99]).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let resp = with_session(&app, Method::DELETE, &app.agent, &held[0])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    open(&app, &app.agent).await;
    app.stop().await;
}
