//! `actiongate hook claude-code` fed `PostToolUse` inputs (docs/hooks.md):
//! the run is reported to `POST /v1/runs` with its session, so a run the
//! gate never decided raises `action.undecided`; nothing is printed.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::cli_support;
use crate::common;

use cli_support::{dead_url, run_with_stdin};
use common::TestApp;
use serde_json::{Value, json};

fn input(event: &str, command: &str, session: &str, call: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "session_id": session,
        "cwd": "/repo",
        "hook_event_name": event,
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": call,
        "tool_response": {"stdout": "", "stderr": "", "interrupted": false},
    }))
    .unwrap()
}

/// The `action.undecided` events of the audit export.
async fn undecided(app: &TestApp) -> Vec<Value> {
    let text = app
        .client
        .get(format!("{}/v1/audit", app.base))
        .bearer_auth(&app.operator)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .filter(|l| l.contains("action.undecided"))
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test]
async fn a_post_tool_use_report_of_a_run_nobody_decided_raises_action_undecided() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("open")).await;
    let key = app.agent.clone();
    let pre = run_with_stdin(
        &app.base,
        &key,
        &["hook", "claude-code"],
        Some(&input("PreToolUse", "ls -la", "cc-1", "toolu_1")),
    )
    .await;
    assert_eq!(pre.code, 0, "{pre:?}");
    assert!(pre.stdout.contains("\"allow\""), "{pre:?}");

    // What was allowed is decided: no event, nothing printed.
    let post = run_with_stdin(
        &app.base,
        &key,
        &["hook", "claude-code"],
        Some(&input("PostToolUse", "ls -la", "cc-1", "toolu_1")),
    )
    .await;
    assert_eq!(post.code, 0, "{post:?}");
    assert_eq!(post.stdout, "", "{post:?}");
    assert!(undecided(&app).await.is_empty());

    // A run the hook never asked about (Claude Code's own dialog, say).
    let post = run_with_stdin(
        &app.base,
        &key,
        &["hook", "claude-code"],
        Some(&input("PostToolUse", "make release", "cc-1", "toolu_2")),
    )
    .await;
    assert_eq!(post.code, 0, "{post:?}");
    assert_eq!(post.stdout, "", "{post:?}");
    let events = undecided(&app).await;
    assert_eq!(events.len(), 1, "{events:?}");
    let text = events[0].to_string();
    for want in ["make release", "cc-1", "claude-code", "agent-1"] {
        assert!(text.contains(want), "{want}: {text}");
    }

    // The report cannot be made: said on stderr, exit 1, still no stdout.
    let down = dead_url().await;
    let post = run_with_stdin(
        &down,
        &key,
        &["hook", "claude-code"],
        Some(&input("PostToolUse", "ls", "cc-1", "toolu_3")),
    )
    .await;
    assert_eq!(post.code, 1, "{post:?}");
    assert_eq!(post.stdout, "", "{post:?}");
    assert!(
        post.stderr
            .starts_with("actiongate hook: the run was not reported: "),
        "{post:?}"
    );
    app.stop().await;
}

/// A call id a script can choose (Claude Code's `REPL` passes its own to
/// the tools it calls) must not turn one decision into many runs: once the
/// call's run is reported, asking again under its id is refused.
#[tokio::test]
async fn a_call_that_ran_is_not_allowed_again_under_its_id() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("guarded")).await;
    let key = app.agent.clone();
    let pre = || input("PreToolUse", "make deploy", "cc-2", "repl_chosen");
    let approve = async {
        loop {
            let (_, list) = app
                .call(
                    reqwest::Method::GET,
                    "/v1/actions?status=pending",
                    Some(&app.operator),
                    None,
                )
                .await;
            if let Some(id) = list["items"][0]["id"].as_str() {
                let (s, _) = app
                    .call(
                        reqwest::Method::POST,
                        &format!("/v1/actions/{id}/approve"),
                        Some(&app.operator),
                        Some(json!({})),
                    )
                    .await;
                assert_eq!(s, reqwest::StatusCode::OK);
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    };
    let first = pre();
    let (allowed, ()) = tokio::join!(
        run_with_stdin(
            &app.base,
            &key,
            &["hook", "claude-code", "--wait", "20"],
            Some(&first)
        ),
        approve
    );
    assert!(allowed.stdout.contains("\"allow\""), "{allowed:?}");
    let post = run_with_stdin(
        &app.base,
        &key,
        &["hook", "claude-code"],
        Some(&input("PostToolUse", "make deploy", "cc-2", "repl_chosen")),
    )
    .await;
    assert_eq!(post.code, 0, "{post:?}");
    // The same call again: not the approval it had once.
    let again = run_with_stdin(&app.base, &key, &["hook", "claude-code"], Some(&pre())).await;
    assert!(again.stdout.contains("\"deny\""), "{again:?}");
    assert!(again.stdout.contains("ran already"), "{again:?}");
    app.stop().await;
}

/// A reported run's `action` is an action id: anything else (of any
/// size) is refused with 422 naming it, and nothing is recorded; it was
/// once stored whole in an audited `action.undecided` event.
#[tokio::test]
async fn a_run_naming_no_action_id_is_refused_and_records_nothing() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("open")).await;
    for action in [json!("not-a-uuid"), json!("x".repeat(200_000))] {
        let (s, p) = app
            .call(
                reqwest::Method::POST,
                "/v1/runs",
                Some(&app.agent),
                Some(json!({"tool": "bash", "detail": "make", "session": "r", "action": action})),
            )
            .await;
        assert_eq!(s, reqwest::StatusCode::UNPROCESSABLE_ENTITY, "{p}");
        assert!(p.to_string().contains("\"action\""), "{p}");
    }
    assert!(undecided(&app).await.is_empty());
    app.stop().await;
}
