//! `actiongate hook <runtime>` for every runtime, fed that runtime's
//! documented input (fixtures under `tests/fixtures/hooks/<runtime>/`,
//! their sources noted in docs/hooks.md) against the real daemon: an
//! allowed call, an asked call approved and denied by an operator, a call
//! the policy denies, and every runtime with the daemon stopped. Each
//! checks the exact stdout and exit code the runtime expects.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::cli_support;
use crate::common;

use std::time::Duration;

use cli_support::{Run, all_actions, dead_url, run_with_stdin};
use common::TestApp;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const RUNTIMES: &[&str] = &[
    "claude-code",
    "cursor",
    "gemini",
    "codex",
    "copilot",
    "opencode",
];

pub fn fixture(runtime: &str, name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/hooks/{runtime}/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The fixture with its own call id where the runtime sends one, so each
/// round is a new action.
fn fresh(runtime: &str, name: &str, tag: &str) -> Vec<u8> {
    let mut v = fixture(runtime, name);
    for key in ["tool_use_id", "callID"] {
        if v.get(key).is_some() {
            v[key] = json!(format!("{name}_{tag}"));
        }
    }
    serde_json::to_vec(&v).unwrap()
}

/// What the runtime must get: stdout (None: nothing) and the exit code.
fn expected(runtime: &str, verdict: &str, reason: &str) -> (Option<Value>, i32) {
    let allow = verdict == "allow";
    match runtime {
        "claude-code" => (
            Some(json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                "permissionDecision": verdict, "permissionDecisionReason": reason}})),
            0,
        ),
        "cursor" => (
            Some(json!({"permission": verdict, "user_message": reason, "agent_message": reason})),
            0,
        ),
        "gemini" if allow => (Some(json!({"decision": "allow", "reason": reason})), 0),
        // Exit code 2 blocks; the reason is on stderr.
        "gemini" => (None, 2),
        "codex" if allow => (None, 0),
        "codex" => (
            Some(json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
                "permissionDecision": "deny", "permissionDecisionReason": reason}})),
            0,
        ),
        "copilot" => (
            Some(json!({"permissionDecision": verdict, "permissionDecisionReason": reason})),
            0,
        ),
        "opencode" => (Some(json!({"status": verdict, "reason": reason})), 0),
        other => panic!("unknown runtime {other}"),
    }
}

pub async fn hook(url: &str, key: &str, runtime: &str, input: &[u8], wait: &str) -> Run {
    run_with_stdin(url, key, &["hook", runtime, "--wait", wait], Some(input)).await
}

/// Checks a run against what the runtime must get.
pub fn check(r: &Run, runtime: &str, verdict: &str, reason: &str) {
    let (stdout, code) = expected(runtime, verdict, reason);
    assert_eq!(r.code, code, "{runtime} {verdict}: {r:?}");
    match stdout {
        Some(v) => {
            assert_eq!(r.stdout.lines().count(), 1, "{runtime}: {r:?}");
            let got: Value = serde_json::from_str(&r.stdout).unwrap();
            assert_eq!(got, v, "{runtime} {verdict}");
        }
        None => {
            assert_eq!(r.stdout, "", "{runtime} {verdict}: {r:?}");
            if code == 2 {
                assert!(r.stderr.lines().any(|l| l == reason), "{runtime}: {r:?}");
            }
        }
    }
}

pub async fn policy_reason(app: &TestApp, tool: &str, detail: &str) -> String {
    let (s, v) = app
        .call(
            Method::POST,
            "/v1/check",
            Some(&app.agent),
            Some(json!({"tool": tool, "detail": detail})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{v}");
    v["reason"].as_str().unwrap().to_owned()
}

pub async fn gated_app() -> TestApp {
    let app = TestApp::spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["tool:bash:git status"],
               "ask": ["tool:file:.*", "tool:mcp__.*"],
               "deny": ["tool:bash:rm .*"]}),
    )
    .await;
    app
}

/// Runs the hook in the background, decides its action as operator, and
/// returns the run.
pub async fn decided(
    app: &TestApp,
    runtime: &'static str,
    input: Vec<u8>,
    path: &str,
    body: Value,
) -> Run {
    let url = app.base.clone();
    let agent = app.agent.clone();
    let before = all_actions(app).await.len();
    let task = tokio::spawn(async move { hook(&url, &agent, runtime, &input, "30").await });
    let id = loop {
        let list = all_actions(app).await;
        if list.len() > before {
            break list.last().unwrap()["id"].as_str().unwrap().to_owned();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (s, out) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/{path}"),
            Some(&app.operator),
            Some(body),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{out}");
    task.await.unwrap()
}

#[tokio::test]
async fn every_runtime_gets_allow_ask_and_deny_in_its_own_contract() {
    let app = gated_app().await;
    let allow_reason = format!(
        "actiongate: allowed by policy: {}",
        policy_reason(&app, "bash", "git status").await
    );
    let deny_reason = format!(
        "actiongate: denied by policy: {}",
        policy_reason(&app, "bash", "rm -rf build").await
    );
    for rt in RUNTIMES {
        let agent = app.agent.clone();
        // Allowed by the policy.
        let r = hook(&app.base, &agent, rt, &fresh(rt, "allowed", "a"), "5").await;
        check(&r, rt, "allow", &allow_reason);
        // The action records the runtime and, where it sends one, its session.
        let last = all_actions(&app).await.last().unwrap().clone();
        assert_eq!(last["runtime"], *rt, "{last}");
        let session = fixture(rt, "allowed")
            .as_object()
            .unwrap()
            .iter()
            .find(|(k, _)| {
                ["session_id", "conversation_id", "sessionID", "sessionId"].contains(&k.as_str())
            })
            .map(|(_, v)| v.clone())
            .unwrap_or(Value::Null);
        assert_eq!(last["session"], session, "{rt}: {last}");
        // Denied by the policy.
        let r = hook(&app.base, &agent, rt, &fresh(rt, "denied", "a"), "5").await;
        check(&r, rt, "deny", &deny_reason);
        // Asked: an operator approves, then another call is denied.
        let r = decided(
            &app,
            rt,
            fresh(rt, "asked", "yes"),
            "approve",
            json!({"note": "ok"}),
        )
        .await;
        check(&r, rt, "allow", "actiongate: allowed by an operator: ok");
        let r = decided(
            &app,
            rt,
            fresh(rt, "asked", "no"),
            "deny",
            json!({"reason": "not now"}),
        )
        .await;
        check(&r, rt, "deny", "actiongate: denied by an operator: not now");
    }
    // What the daemon saw: one action string per runtime's shell call.
    let strings: Vec<String> = all_actions(&app)
        .await
        .iter()
        .map(|a| a["action_string"].as_str().unwrap().to_owned())
        .collect();
    for s in [
        "tool:bash:git status",
        "tool:file:edit /home/dev/proj/src/main.rs",
        // Cursor's MCP call: its hook input names no server.
        r#"tool:mcp__unknown__create_issue:{"title":"Crash on start"}"#,
    ] {
        assert!(strings.iter().any(|x| x == s), "{s} not in {strings:?}");
    }
    // Codex's patch names `src/main.rs` under its cwd: asked as that file.
    assert!(
        !strings.iter().any(|x| x == "tool:file:edit src/main.rs"),
        "{strings:?}"
    );
    app.stop().await;
}

#[tokio::test]
async fn with_the_daemon_stopped_every_runtime_denies() {
    let down = dead_url().await;
    for rt in RUNTIMES {
        let r = hook(&down, "k", rt, &fresh(rt, "allowed", "down"), "5").await;
        let reason = match rt {
            &"gemini" => r.stderr.lines().last().unwrap().to_owned(),
            _ => {
                let v: Value = serde_json::from_str(&r.stdout).unwrap();
                [
                    "/hookSpecificOutput/permissionDecisionReason",
                    "/user_message",
                    "/permissionDecisionReason",
                    "/reason",
                ]
                .iter()
                .find_map(|p| v.pointer(p).and_then(Value::as_str))
                .unwrap()
                .to_owned()
            }
        };
        assert!(
            reason.starts_with("actiongate: the daemon is unreachable"),
            "{rt}: {reason}"
        );
        assert!(reason.ends_with("(failing closed: deny)"), "{rt}: {reason}");
        check(&r, rt, "deny", &reason);
        // Malformed input: deny too.
        let r = hook(&down, "k", rt, b"{\"hook_event_name\": 7", "5").await;
        assert!(!r.stdout.contains("allow"), "{rt}: {r:?}");
        assert!(r.code == 0 || r.code == 2, "{rt}: {r:?}");
    }
}

/// A wait too long to add to a clock must not crash the hook: Claude Code
/// and Gemini CLI let the call through on a crash's exit code (101).
#[tokio::test]
async fn an_absurd_wait_still_answers_in_the_runtime_contract() {
    let down = dead_url().await;
    for rt in RUNTIMES {
        let r = hook(
            &down,
            "k",
            rt,
            &fresh(rt, "allowed", "huge"),
            "18446744073709551615",
        )
        .await;
        assert!(r.code == 0 || r.code == 2, "{rt}: {r:?}");
        assert!(!r.stdout.contains("allow"), "{rt}: {r:?}");
        if *rt == "gemini" {
            assert_eq!(r.code, 2, "{r:?}");
        } else {
            assert!(r.stdout.contains("deny"), "{rt}: {r:?}");
        }
    }
}

#[tokio::test]
async fn claude_code_permission_requests_and_headless_defer() {
    let app = gated_app().await;
    let agent = app.agent.clone();
    // A standing grant allows `cargo test`: allow, and a session rule for it.
    let (s, g) = app
        .call(
            Method::POST,
            "/v1/grants",
            Some(&app.operator),
            Some(json!({"tool": "bash", "pattern": "cargo test", "expires": "1h"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{g}");
    let input = serde_json::to_vec(&fixture("claude-code", "permission_request")).unwrap();
    let r = hook(&app.base, &agent, "claude-code", &input, "5").await;
    assert_eq!(r.code, 0, "{r:?}");
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v,
        json!({"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {
            "behavior": "allow",
            "updatedPermissions": [{"type": "addRules",
                "rules": [{"toolName": "Bash", "ruleContent": "cargo test"}],
                "behavior": "allow", "destination": "session"}]}}})
    );
    // Denied by policy: behavior deny with the reason as message.
    let mut deny = fixture("claude-code", "permission_request");
    deny["tool_input"]["command"] = json!("rm -rf build");
    let r = hook(
        &app.base,
        &agent,
        "claude-code",
        &serde_json::to_vec(&deny).unwrap(),
        "5",
    )
    .await;
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v["hookSpecificOutput"]["decision"]["behavior"], "deny",
        "{v}"
    );

    // Headless: --defer answers at once and leaves the question queued;
    // once an operator approved, the resumed run's hook gets allow.
    let input = fresh("claude-code", "asked", "defer");
    let r = run_with_stdin(
        &app.base,
        &agent,
        &["hook", "claude-code", "--defer"],
        Some(&input),
    )
    .await;
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v["hookSpecificOutput"]["permissionDecision"], "defer",
        "{v}"
    );
    let last = all_actions(&app).await.last().unwrap().clone();
    assert_eq!(last["status"], "pending");
    let (s, _) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{}/approve", last["id"].as_str().unwrap()),
            Some(&app.operator),
            Some(json!({})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let r = run_with_stdin(
        &app.base,
        &agent,
        &["hook", "claude-code", "--defer"],
        Some(&input),
    )
    .await;
    let v: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(
        v["hookSpecificOutput"]["permissionDecision"], "allow",
        "{v}"
    );
    // Where Claude Code would run a call whose `defer` it ignored (a
    // message of several calls), the hook waits for a human instead.
    for mode in ["bypassPermissions", "acceptEdits", "dontAsk", ""] {
        let mut v = fixture("claude-code", "asked");
        v["tool_use_id"] = json!(format!("asked_mode_{mode}"));
        if mode.is_empty() {
            v.as_object_mut().unwrap().remove("permission_mode");
        } else {
            v["permission_mode"] = json!(mode);
        }
        let r = run_with_stdin(
            &app.base,
            &agent,
            &["hook", "claude-code", "--defer", "--wait", "1"],
            Some(&serde_json::to_vec(&v).unwrap()),
        )
        .await;
        let out: Value = serde_json::from_str(&r.stdout).unwrap();
        assert_eq!(
            out["hookSpecificOutput"]["permissionDecision"], "deny",
            "{mode}: {out}"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn a_codex_patch_is_asked_file_by_file() {
    let app = gated_app().await;
    let mut v = fixture("codex", "asked");
    v["tool_use_id"] = json!("call_patch2");
    v["tool_input"]["command"] = json!(
        "*** Begin Patch\n*** Add File: notes.txt\n+x\n*** Delete File: build.sh\n*** End Patch\n"
    );
    let r = hook(
        &app.base,
        &app.agent.clone(),
        "codex",
        &serde_json::to_vec(&v).unwrap(),
        "1",
    )
    .await;
    // Nobody answers the first file's question: denied, and the second is
    // never asked.
    let out: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(out["hookSpecificOutput"]["permissionDecision"], "deny");
    let strings: Vec<Value> = all_actions(&app)
        .await
        .iter()
        .map(|a| a["action_string"].clone())
        .collect();
    assert_eq!(
        strings,
        vec![json!("tool:file:write /home/dev/proj/notes.txt")]
    );
    app.stop().await;
}

/// The model writes the tool input: a call carrying two path fields (the
/// one the hook read first, and another the runtime may honour) is asked
/// about every path it names, so a benign one cannot cover the other.
#[tokio::test]
async fn a_file_call_naming_two_paths_is_asked_about_both() {
    let app = TestApp::spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["tool:file:(edit|write) /home/dev/proj/.*"], "ask": ["(?s).*"], "deny": []}),
    )
    .await;
    let inputs = [
        (
            "cursor",
            json!({"conversation_id": "conv-2p", "generation_id": "gen-2p",
                "hook_event_name": "preToolUse", "workspace_roots": ["/home/dev/proj"],
                "tool_name": "Write", "tool_use_id": "tu_2p",
                "tool_input": {"file_path": "/home/dev/proj/ok.txt",
                               "target_file": "/home/dev/.bashrc", "contents": "x"}}),
        ),
        (
            "copilot",
            json!({"timestamp": 1, "cwd": "/home/dev/proj", "toolName": "edit",
                "toolArgs": "{\"path\":\"/home/dev/proj/ok.txt\",\"file_path\":\"/home/dev/.bashrc\",\"old_str\":\"a\",\"new_str\":\"b\"}"}),
        ),
        (
            "opencode",
            json!({"tool": "write", "sessionID": "ses_2p", "callID": "call_2p",
                "args": {"filePath": "/home/dev/proj/ok.txt", "path": "/home/dev/.bashrc", "content": "x"},
                "directory": "/home/dev/proj"}),
        ),
    ];
    for (runtime, input) in inputs {
        let r = hook(
            &app.base,
            &app.agent.clone(),
            runtime,
            &serde_json::to_vec(&input).unwrap(),
            "1",
        )
        .await;
        let out: Value = serde_json::from_str(&r.stdout).unwrap_or(Value::Null);
        let verdict = out
            .get("permission")
            .or_else(|| out.get("permissionDecision"))
            .or_else(|| out.get("status"))
            .cloned()
            .unwrap_or(Value::Null);
        assert_eq!(verdict, "deny", "{runtime}: {r:?}");
        let last = all_actions(&app).await.last().unwrap().clone();
        assert!(
            last["action_string"]
                .as_str()
                .unwrap()
                .ends_with(" /home/dev/.bashrc"),
            "{runtime}: {last}"
        );
    }
    app.stop().await;
}

/// Codex's patch parser trims each hunk header (`parse_one_hunk`: "be
/// tolerant of … extra padding around marker strings"), so an indented
/// `*** Add File:` after another hunk still writes that file: it must be
/// asked too, not slip past behind an allowed one.
#[tokio::test]
async fn an_indented_patch_header_is_asked_as_codex_applies_it() {
    let app = TestApp::spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["tool:file:delete /home/dev/proj/tmp/.*"], "ask": ["(?s).*"], "deny": []}),
    )
    .await;
    let mut v = fixture("codex", "asked");
    v["tool_use_id"] = json!("call_patch_indented");
    v["tool_input"]["command"] = json!(
        "*** Begin Patch\n*** Delete File: tmp/scratch.txt\n  *** Add File: .git/hooks/pre-commit\n+#!/bin/sh\n*** End Patch\n"
    );
    let r = hook(
        &app.base,
        &app.agent.clone(),
        "codex",
        &serde_json::to_vec(&v).unwrap(),
        "1",
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let out: Value = serde_json::from_str(&r.stdout).unwrap_or(Value::Null);
    assert_eq!(
        out["hookSpecificOutput"]["permissionDecision"], "deny",
        "{r:?}"
    );
    let strings: Vec<Value> = all_actions(&app)
        .await
        .iter()
        .map(|a| a["action_string"].clone())
        .collect();
    assert_eq!(
        strings,
        vec![
            json!("tool:file:delete /home/dev/proj/tmp/scratch.txt"),
            json!("tool:file:write /home/dev/proj/.git/hooks/pre-commit")
        ]
    );
    app.stop().await;
}

fn codex_schema(name: &str) -> jsonschema::Validator {
    let path = format!(
        "{}/tests/fixtures/hooks/codex/schema/{name}.schema.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    jsonschema::validator_for(&schema).unwrap()
}

/// Codex ships its hook contract as JSON schemas inside its binary (copied
/// from `@openai/codex` 0.169.0 into `fixtures/hooks/codex/schema/`): our
/// fixtures are valid Codex inputs and every answer is a valid output.
#[tokio::test]
async fn codex_inputs_and_answers_match_the_schemas_codex_ships() {
    let app = gated_app().await;
    let agent = app.agent.clone();
    let pre_in = codex_schema("pre-tool-use.command.input");
    let pre_out = codex_schema("pre-tool-use.command.output");
    let perm_in = codex_schema("permission-request.command.input");
    let perm_out = codex_schema("permission-request.command.output");
    for name in ["allowed", "asked", "denied"] {
        let input = fixture("codex", name);
        assert!(pre_in.is_valid(&input), "{name}");
        let r = hook(
            &app.base,
            &agent,
            "codex",
            &serde_json::to_vec(&input).unwrap(),
            "1",
        )
        .await;
        assert_eq!(r.code, 0, "{r:?}");
        if name == "allowed" {
            assert_eq!(r.stdout, "");
        } else {
            let out: Value = serde_json::from_str(&r.stdout).unwrap();
            assert!(pre_out.is_valid(&out), "{out}");
        }
        // The same call as a PermissionRequest.
        let mut perm = input.clone();
        perm["hook_event_name"] = json!("PermissionRequest");
        perm.as_object_mut().unwrap().remove("tool_use_id");
        assert!(perm_in.is_valid(&perm), "{perm}");
        let r = hook(
            &app.base,
            &agent,
            "codex",
            &serde_json::to_vec(&perm).unwrap(),
            "1",
        )
        .await;
        assert_eq!(r.code, 0, "{r:?}");
        let out: Value = serde_json::from_str(&r.stdout).unwrap();
        assert!(perm_out.is_valid(&out), "{out}");
        // Leaving the sandbox is an operator's to allow, even for a call
        // the policy allowed inside it: unanswered here, denied.
        assert_eq!(
            out["hookSpecificOutput"]["decision"]["behavior"], "deny",
            "{out}"
        );
    }
    // Approved by an operator: the allow Codex's schema takes.
    let mut perm = fixture("codex", "allowed");
    perm["hook_event_name"] = json!("PermissionRequest");
    perm.as_object_mut().unwrap().remove("tool_use_id");
    let r = decided(
        &app,
        "codex",
        serde_json::to_vec(&perm).unwrap(),
        "approve",
        json!({}),
    )
    .await;
    let out: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|_| panic!("{r:?}"));
    assert!(perm_out.is_valid(&out), "{out}");
    assert_eq!(
        out["hookSpecificOutput"]["decision"]["behavior"], "allow",
        "{out}"
    );
    app.stop().await;
}
