//! A decision-only action's `params`: the tool call's input, stored and
//! shown to the humans who decide, read by no policy.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::cli_support;
use crate::common;

use cli_support::{all_actions, run_with_stdin};
use common::TestApp;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

async fn create(app: &TestApp, body: Value) -> (StatusCode, Value) {
    let agent = app.agent.clone();
    app.call(Method::POST, "/v1/actions", Some(&agent), Some(body))
        .await
}

async fn count(app: &TestApp) -> usize {
    let op = app.operator.clone();
    let (_, page) = app.call(Method::GET, "/v1/actions", Some(&op), None).await;
    page["items"].as_array().unwrap().len()
}

#[tokio::test]
async fn params_of_a_decision_only_action_are_stored_and_returned() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("standard")).await;
    let params = json!({"file_path": "/p/a.rs", "old_string": "a", "new_string": "b"});
    let (status, created) = create(
        &app,
        json!({"tool": "file", "detail": "edit /p/a.rs", "params": params}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["params"], params);
    assert!(created["handler"].is_null(), "{created}");
    let path = format!("/v1/actions/{}", created["id"].as_str().unwrap());
    let op = app.operator.clone();
    let (_, read) = app.call(Method::GET, &path, Some(&op), None).await;
    assert_eq!(read["params"], params);
    // Without params nothing is shown.
    let (_, plain) = app.request("file", "edit /p/b.rs").await;
    assert!(plain["params"].is_null(), "{plain}");
    app.stop().await;
}

#[tokio::test]
async fn the_policy_decides_on_tool_and_detail_whatever_the_params() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("standard")).await;
    for (detail, want) in [
        ("create /src/app.py", "approved"),
        ("rm -rf build", "pending"),
    ] {
        let tool = if detail.starts_with("rm") {
            "bash"
        } else {
            "file"
        };
        let (_, bare) = app.request(tool, detail).await;
        // Params that would read as something else to a pattern change nothing.
        let (_, with) = create(
            &app,
            json!({"tool": tool, "detail": detail,
                "params": {"command": "rm -rf /", "content": "git status"}}),
        )
        .await;
        assert_eq!(bare["status"], want, "{bare}");
        assert_eq!(with["status"], want, "{with}");
        assert_eq!(with["decision"], bare["decision"]);
        assert_eq!(with["action_string"], bare["action_string"]);
    }
    app.stop().await;
}

#[tokio::test]
async fn params_that_are_no_object_or_too_large_are_refused_naming_params() {
    let app = TestApp::spawn().await;
    let big = "x".repeat(300 * 1024);
    let mut deep = json!(1);
    for _ in 0..70 {
        deep = json!([deep]);
    }
    for params in [
        json!("content"),
        json!(["a"]),
        json!(7),
        json!({"content": big}),
        json!({"d": deep}),
    ] {
        let (status, problem) = create(
            &app,
            json!({"tool": "file", "detail": "write /p/a", "params": params}),
        )
        .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{problem}");
        assert_eq!(problem["errors"][0]["field"], "params", "{problem}");
    }
    assert_eq!(count(&app).await, 0, "nothing is stored");
    app.stop().await;
}

#[tokio::test]
async fn an_idempotency_key_reused_with_other_params_conflicts() {
    let app = TestApp::spawn().await;
    let body = |content: &str| {
        json!({"tool": "file", "detail": "write /p/a", "idempotency_key": "k1",
            "params": {"file_path": "/p/a", "content": content}})
    };
    let (s1, a1) = create(&app, body("one")).await;
    let (s2, a2) = create(&app, body("one")).await;
    assert_eq!(s1, StatusCode::CREATED, "{a1}");
    assert_eq!(s2, StatusCode::OK, "{a2}");
    assert_eq!(a1["id"], a2["id"]);
    let (s3, p) = create(&app, body("two")).await;
    assert_eq!(s3, StatusCode::CONFLICT, "{p}");
    // Nor is the same key without params the same request.
    let (s4, p) = create(
        &app,
        json!({"tool": "file", "detail": "write /p/a", "idempotency_key": "k1"}),
    )
    .await;
    assert_eq!(s4, StatusCode::CONFLICT, "{p}");
    assert_eq!(count(&app).await, 1);
    app.stop().await;
}

#[tokio::test]
async fn an_approver_edits_the_detail_of_a_decision_only_action_never_its_params() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("standard")).await;
    let params = json!({"command": "rm -rf build"});
    let (_, a) = create(
        &app,
        json!({"tool": "bash", "detail": "rm -rf build", "params": params}),
    )
    .await;
    assert_eq!(a["status"], "pending", "{a}");
    let approve = format!("/v1/actions/{}/approve", a["id"].as_str().unwrap());
    let op = app.operator.clone();
    let (status, problem) = app
        .call(
            Method::POST,
            &approve,
            Some(&op),
            Some(json!({"params": {"command": "ls"}})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{problem}");
    assert_eq!(problem["errors"][0]["field"], "params", "{problem}");
    let (status, approved) = app
        .call(
            Method::POST,
            &approve,
            Some(&op),
            Some(json!({"detail": "rm -rf build/tmp"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    assert_eq!(
        approved["approved_detail"], "rm -rf build/tmp",
        "{approved}"
    );
    assert_eq!(approved["params"], params, "the params shown stay as asked");
    app.stop().await;
}

/// A Claude Code `PreToolUse` input for `tool` with `input`.
fn claude_pre_tool(tool: &str, input: Value, call: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "session_id": "s-params",
        "cwd": "/home/dev/proj",
        "hook_event_name": "PreToolUse",
        "tool_name": tool,
        "tool_input": input,
        "tool_use_id": call,
    }))
    .unwrap()
}

/// Runs the Claude Code hook on `input` (asked, unanswered within a
/// second) and answers the action it created.
async fn hooked(app: &TestApp, input: &[u8]) -> Value {
    let before = all_actions(app).await.len();
    let agent = app.agent.clone();
    let r = run_with_stdin(
        &app.base,
        &agent,
        &["hook", "claude-code", "--wait", "1"],
        Some(input),
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let actions = all_actions(app).await;
    assert_eq!(actions.len(), before + 1, "{r:?}");
    actions.last().unwrap().clone()
}

#[tokio::test]
async fn a_claude_code_write_or_edit_shows_its_content_and_its_old_and_new_text() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("readonly")).await;
    let write = json!({"file_path": "/home/dev/proj/NOTES.md", "content": "# Notes\n\nTODO\n"});
    let a = hooked(&app, &claude_pre_tool("Write", write.clone(), "toolu_w1")).await;
    assert_eq!(
        a["action_string"],
        "tool:file:write /home/dev/proj/NOTES.md"
    );
    assert_eq!(a["decision"]["result"], "ask", "{a}");
    assert_eq!(a["params"], write, "{a}");

    let edit = json!({"file_path": "src/main.rs", "old_string": "fn main() {}",
        "new_string": "fn main() { run(); }", "replace_all": false});
    let a = hooked(&app, &claude_pre_tool("Edit", edit.clone(), "toolu_e1")).await;
    assert_eq!(
        a["action_string"],
        "tool:file:edit /home/dev/proj/src/main.rs"
    );
    // The input as Claude Code sent it (its path as written).
    assert_eq!(a["params"], edit, "{a}");

    // A shell call shows no params: its detail is the whole call.
    let a = hooked(
        &app,
        &claude_pre_tool("Bash", json!({"command": "rm -rf build"}), "toolu_b1"),
    )
    .await;
    assert!(a["params"].is_null(), "{a}");
    app.stop().await;
}

#[tokio::test]
async fn a_huge_write_is_still_asked_its_content_cut_with_a_marker() {
    let app = TestApp::spawn().await;
    // Writes are allowed: one whose content cannot be shown whole is
    // still asked, with a caution saying why (no rule or grant allows
    // content nobody can read).
    app.profile("agent-1", json!({"allow": ["tool:file:.*"], "ask": []}))
        .await;
    let content = "0123456789abcdef".repeat(64 * 1024);
    assert_eq!(content.len(), 1 << 20);
    let input = json!({"file_path": "/home/dev/proj/big.txt", "content": content});
    let a = hooked(&app, &claude_pre_tool("Write", input, "toolu_big")).await;
    assert_eq!(a["action_string"], "tool:file:write /home/dev/proj/big.txt");
    assert_eq!(a["decision"]["result"], "ask", "{a}");
    assert_eq!(a["decision"]["rule"]["kind"], "caution", "{a}");
    assert!(
        a["decision"]["reason"]
            .as_str()
            .unwrap()
            .contains("too large to show whole"),
        "{a}"
    );
    let shown = a["params"]["content"].as_str().unwrap();
    let marker = format!("…[{} more bytes not shown]", (1 << 20) - 128 * 1024);
    assert!(shown.ends_with(&marker), "{}", &shown[shown.len() - 60..]);
    assert!(content.starts_with(&shown[..128 * 1024]));
    assert_eq!(a["params"]["file_path"], "/home/dev/proj/big.txt");
    // Shown whole, the same write is allowed.
    let input = json!({"file_path": "/home/dev/proj/small.txt", "content": "0123456789abcdef".repeat(4096)});
    let a = hooked(&app, &claude_pre_tool("Write", input, "toolu_small")).await;
    assert_eq!(a["decision"]["result"], "allow", "{a}");
    app.stop().await;
}
