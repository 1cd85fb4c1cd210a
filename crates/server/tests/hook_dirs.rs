//! Where a hooked call acts, through the real `actiongate hook <runtime>`
//! binary and daemon: a relative path is asked as the absolute file it
//! names under the runtime's working directory, so a profile written over
//! absolute directories holds against `..`; and a shell command run in a
//! directory of its own is asked with that directory in the reason, its
//! action string unchanged.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::cli_support;
use crate::common;
use crate::runtime_hooks::{check, gated_app, hook, policy_reason};

use cli_support::{Run, all_actions};
use common::TestApp;
use serde_json::{Value, json};

/// Runs `rt`'s hook on `input`; its run and the action it asked about.
async fn asked(app: &TestApp, rt: &'static str, input: &Value) -> (Run, Value) {
    let input = serde_json::to_vec(input).unwrap();
    let r = hook(&app.base, &app.agent, rt, &input, "1").await;
    (r, all_actions(app).await.last().unwrap().clone())
}

/// Every runtime writing `path` (relative to `/home/dev/proj`) in its own
/// input format; `tag` keeps each call its own action.
fn writes(path: &str, tag: &str) -> Vec<(&'static str, Value)> {
    let patch = format!("*** Begin Patch\n*** Add File: {path}\n+x\n*** End Patch\n");
    vec![
        (
            "claude-code",
            json!({"session_id": "cc-dirs", "cwd": "/home/dev/proj",
                "hook_event_name": "PreToolUse", "tool_name": "Write",
                "tool_input": {"file_path": path, "content": "x"},
                "tool_use_id": format!("toolu_{tag}")}),
        ),
        (
            "cursor",
            json!({"conversation_id": "conv-dirs", "generation_id": "gen-dirs",
                "hook_event_name": "preToolUse", "workspace_roots": ["/home/dev/proj"],
                "cwd": "/home/dev/proj", "tool_name": "Write",
                "tool_input": {"file_path": path, "contents": "x"},
                "tool_use_id": format!("tu_{tag}")}),
        ),
        (
            "gemini",
            json!({"session_id": "gm-dirs", "cwd": "/home/dev/proj",
                "hook_event_name": "BeforeTool", "tool_name": "write_file",
                "tool_input": {"file_path": path, "content": "x"}}),
        ),
        (
            "codex",
            json!({"session_id": "cx-dirs", "transcript_path": null, "cwd": "/home/dev/proj",
                "hook_event_name": "PreToolUse", "model": "gpt-5-codex",
                "permission_mode": "default", "tool_name": "apply_patch",
                "tool_input": {"command": patch}, "tool_use_id": format!("call_{tag}"),
                "turn_id": "turn_1"}),
        ),
        (
            "copilot",
            json!({"timestamp": 1, "cwd": "/home/dev/proj", "toolName": "create",
                "toolArgs": json!({"path": path, "file_text": "x"}).to_string()}),
        ),
        (
            "opencode",
            json!({"tool": "write", "sessionID": "ses_dirs", "callID": format!("call_{tag}"),
                "args": {"filePath": path, "content": "x"}, "directory": "/home/dev/proj"}),
        ),
    ]
}

/// A deny over an absolute directory catches a relative path that climbs
/// into it, and an allow over the project covers a relative path in it,
/// in every runtime.
#[tokio::test]
async fn a_relative_path_is_asked_as_the_file_under_the_working_directory() {
    let app = TestApp::spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["tool:file:.* /home/dev/proj/.*"],
               "ask": ["(?s).*"],
               "deny": ["tool:file:.* /srv/prod/.*"]}),
    )
    .await;
    let denied = format!(
        "actiongate: denied by policy: {}",
        policy_reason(&app, "file", "write /srv/prod/app.env").await
    );
    let allowed = format!(
        "actiongate: allowed by policy: {}",
        policy_reason(&app, "file", "write /home/dev/proj/src/new.rs").await
    );
    let cases = [
        (
            "../../../srv/prod/app.env",
            "deny",
            &denied,
            "/srv/prod/app.env",
        ),
        ("src/new.rs", "allow", &allowed, "/home/dev/proj/src/new.rs"),
    ];
    for (i, (path, verdict, reason, file)) in cases.into_iter().enumerate() {
        for (rt, input) in writes(path, &i.to_string()) {
            let (r, action) = asked(&app, rt, &input).await;
            check(&r, rt, verdict, reason);
            let want = format!("tool:file:write {file}");
            assert_eq!(action["action_string"], want.as_str(), "{rt}");
        }
    }
    app.stop().await;
}

/// The human approving `rm -rf build` sees where it runs; the action
/// string is the command alone, so `tool:bash:rm .*` still denies it.
#[tokio::test]
async fn a_shell_commands_own_directory_is_in_the_reason() {
    let app = gated_app().await;
    let denied = format!(
        "actiongate: denied by policy: {}",
        policy_reason(&app, "bash", "rm -rf build").await
    );
    let calls = [
        (
            "gemini",
            json!({"session_id": "gm-sh", "cwd": "/home/dev/proj",
                "hook_event_name": "BeforeTool", "tool_name": "run_shell_command",
                "tool_input": {"command": "rm -rf build", "dir_path": "../other"}}),
            "Gemini CLI in /home/dev/proj, this call in \"/home/dev/other\" (session gm-sh)",
        ),
        (
            "codex",
            json!({"session_id": "cx-sh", "transcript_path": null, "cwd": "/home/dev/proj",
                "hook_event_name": "PreToolUse", "model": "gpt-5-codex",
                "permission_mode": "default", "tool_name": "Bash",
                "tool_input": {"command": "rm -rf build", "workdir": "/srv/prod"},
                "tool_use_id": "call_sh", "turn_id": "turn_1"}),
            "Codex in /home/dev/proj, this call in \"/srv/prod\" (session cx-sh)",
        ),
        (
            "opencode",
            json!({"tool": "bash", "sessionID": "ses_sh", "callID": "call_sh",
                "args": {"command": "rm -rf build", "workdir": "web"},
                "directory": "/home/dev/proj"}),
            "opencode in /home/dev/proj, this call in \"/home/dev/proj/web\" (session ses_sh)",
        ),
        (
            "cursor",
            json!({"conversation_id": "conv-sh", "generation_id": "gen-sh",
                "hook_event_name": "preToolUse", "workspace_roots": ["/home/dev/proj"],
                "cwd": "/home/dev/proj", "tool_name": "Shell", "tool_use_id": "tu_sh",
                "tool_input": {"command": "rm -rf build", "working_directory": "/srv/prod"}}),
            "Cursor in /home/dev/proj, this call in \"/srv/prod\" (session conv-sh)",
        ),
    ];
    for (rt, input, reason) in calls {
        let (r, action) = asked(&app, rt, &input).await;
        check(&r, rt, "deny", &denied);
        assert_eq!(action["action_string"], "tool:bash:rm -rf build", "{rt}");
        assert_eq!(action["reason"], reason, "{rt}");
    }
    app.stop().await;
}
