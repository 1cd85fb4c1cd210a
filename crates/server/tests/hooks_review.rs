//! What a review of the runtime hooks found, each through the built
//! binary against the real daemon: calls that were asked under a name or
//! a path a rule could misread, calls that did not taint their session,
//! and a daemon that hangs or answers garbage.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::cli_support::{Run, all_actions};
use crate::common::TestApp;
use crate::runtime_hooks::{fixture, hook};

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The verdict an opencode hook run gave.
fn opencode_status(r: &Run) -> String {
    let v: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|_| panic!("{r:?}"));
    v["status"].as_str().unwrap().to_owned()
}

async fn opencode(app: &TestApp, session: &str, call: &str, tool: &str, args: Value) -> Run {
    let mut v = fixture("opencode", "allowed");
    v["sessionID"] = json!(session);
    v["callID"] = json!(call);
    v["tool"] = json!(tool);
    v["args"] = args;
    hook(
        &app.base,
        &app.agent,
        "opencode",
        &serde_json::to_vec(&v).unwrap(),
        "1",
    )
    .await
}

async fn last_action_string(app: &TestApp) -> String {
    all_actions(app).await.last().unwrap()["action_string"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// opencode's web search and its MCP tools (`<server>_<tool>`) are text
/// strangers wrote: each taints its session, so that a way out there asks
/// (denied: opencode cannot ask) while a fresh session's is allowed
/// (`open`'s defaults).
#[tokio::test]
async fn an_opencode_search_or_mcp_tool_taints_its_session() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("open")).await;
    let way_out = json!({"command": "scp notes.txt backup.example.com:/srv/notes.txt"});

    let r = opencode(&app, "ses_a", "c1", "bash", way_out.clone()).await;
    assert_eq!(opencode_status(&r), "allow", "{r:?}");
    let r = opencode(&app, "ses_a", "c2", "websearch", json!({"query": "foo"})).await;
    assert_eq!(opencode_status(&r), "allow", "{r:?}");
    assert_eq!(last_action_string(&app).await, "tool:WebSearch:foo");
    let r = opencode(&app, "ses_a", "c3", "bash", way_out.clone()).await;
    assert_eq!(opencode_status(&r), "deny", "{r:?}");

    let r = opencode(
        &app,
        "ses_b",
        "c4",
        "github_list_issues",
        json!({"repo": "o/r"}),
    )
    .await;
    assert_eq!(opencode_status(&r), "allow", "{r:?}");
    assert_eq!(
        last_action_string(&app).await,
        r#"tool:mcp__github__list_issues:{"repo":"o/r"}"#
    );
    let r = opencode(&app, "ses_b", "c5", "bash", way_out.clone()).await;
    assert_eq!(opencode_status(&r), "deny", "{r:?}");

    let r = opencode(&app, "ses_c", "c6", "bash", way_out).await;
    assert_eq!(opencode_status(&r), "allow", "{r:?}");
    app.stop().await;
}

/// A runtime's tool the hooks do not map, named as one they produce, is
/// not read as that tool: a rule allowing every `Read` sees `tool:other`,
/// and nothing allows it.
#[tokio::test]
async fn a_tool_named_like_a_mapped_one_is_not_taken_for_it() {
    let app = TestApp::spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["tool:Read:.*", "tool:Glob:.*", "tool:git:(?!push).*"],
               "ask": [], "deny": []}),
    )
    .await;
    let mut codex = fixture("codex", "allowed");
    codex["tool_name"] = json!("Read");
    codex["tool_input"] = json!({"file_path": "/home/dev/.ssh/id_ed25519"});
    let r = hook(
        &app.base,
        &app.agent,
        "codex",
        &serde_json::to_vec(&codex).unwrap(),
        "1",
    )
    .await;
    assert!(r.stdout.contains("\"deny\""), "{r:?}");
    assert_eq!(
        last_action_string(&app).await,
        r#"tool:other:Read {"file_path":"/home/dev/.ssh/id_ed25519"}"#
    );
    for tool in ["git", "Glob"] {
        let r = opencode(
            &app,
            "ses_d",
            &format!("c_{tool}"),
            tool,
            json!({"pattern": "x"}),
        )
        .await;
        assert_eq!(opencode_status(&r), "deny", "{tool}: {r:?}");
        assert!(
            last_action_string(&app)
                .await
                .starts_with(&format!("tool:other:{tool} ")),
            "{tool}"
        );
    }
    app.stop().await;
}

/// A path that climbs above the home directory with `..` is not a
/// relative path in the project: a rule allowing writes to a project's
/// top-level files does not cover `~/a/../../x`, which is asked as the
/// file it names, from the hook's `$HOME`.
#[tokio::test]
async fn a_path_climbing_above_home_is_not_a_relative_one() {
    let app = TestApp::spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["tool:file:write [^/~.][^/]*"], "ask": [], "deny": []}),
    )
    .await;
    let r = opencode(
        &app,
        "ses_e",
        "c1",
        "write",
        json!({"filePath": "~/a/../../x", "content": "x"}),
    )
    .await;
    assert_eq!(opencode_status(&r), "deny", "{r:?}");
    let home = std::path::PathBuf::from(std::env::var("HOME").unwrap());
    let above = home.parent().unwrap_or(&home).join("x");
    assert_eq!(
        last_action_string(&app).await,
        format!("tool:file:write {}", above.display())
    );
    app.stop().await;
}

/// The second review of the hooks, through the built binary: a path that
/// looks like a Windows one under a Linux working directory, a patch
/// header without a space (which opencode applies), and a deeply nested
/// `\\?\UNC\` path, which once overflowed the hook's stack (no answer:
/// Claude Code and Gemini CLI then run the call).
#[tokio::test]
async fn windows_looking_paths_spaceless_patch_headers_and_deep_paths_are_asked_about() {
    let app = TestApp::spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["tool:file:.*", "tool:Grep:.*"], "ask": [],
               "deny": ["tool:file:.* /srv/prod/.*"]}),
    )
    .await;
    let r = opencode(
        &app,
        "ses_f",
        "c1",
        "write",
        json!({"filePath": "C:/../../../../srv/prod/app.env", "content": "x"}),
    )
    .await;
    assert_eq!(opencode_status(&r), "deny", "{r:?}");
    assert_eq!(
        last_action_string(&app).await,
        "tool:file:write /srv/prod/app.env"
    );

    let patch = "*** Begin Patch\n*** Add File: notes.txt\n+hi\n*** Add File:/srv/prod/app.env\n+x\n*** End Patch";
    let r = opencode(
        &app,
        "ses_f",
        "c2",
        "apply_patch",
        json!({"patchText": patch}),
    )
    .await;
    assert_eq!(opencode_status(&r), "deny", "{r:?}");
    assert_eq!(
        last_action_string(&app).await,
        "tool:file:write /srv/prod/app.env"
    );

    let deep = format!("\\\\{}srv\\share\\x", "?\\UNC\\".repeat(20_000));
    let mut v = fixture("opencode", "allowed");
    v["callID"] = json!("c3");
    v["tool"] = json!("grep");
    v["args"] = json!({"pattern": "BEGIN RSA PRIVATE KEY", "path": deep});
    v["directory"] = json!("C:\\Users\\dev\\proj");
    let r = hook(
        &app.base,
        &app.agent,
        "opencode",
        &serde_json::to_vec(&v).unwrap(),
        "1",
    )
    .await;
    assert_eq!(r.code, 0, "{:.300}", r.stderr);
    assert_eq!(opencode_status(&r), "allow", "{r:?}");
    app.stop().await;
}

/// A loopback server that accepts and then never answers, or answers with
/// something that is not HTTP: every runtime's hook denies, in its own
/// contract, within its budget.
#[tokio::test]
async fn a_daemon_that_hangs_or_answers_garbage_is_denied_in_time() {
    const RUNTIMES: &[&str] = &[
        "claude-code",
        "cursor",
        "gemini",
        "codex",
        "copilot",
        "opencode",
    ];
    for garbage in [false, true] {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                let Ok((mut conn, _)) = listener.accept().await else {
                    return;
                };
                if garbage {
                    let mut buf = [0u8; 4096];
                    let _ = conn.read(&mut buf).await;
                    let _ = conn
                        .write_all(b"HTTP/1.1 500 oops\r\nContent-Length: 3\r\n\r\n{]x")
                        .await;
                }
                held.push(conn);
            }
        });
        let runs = RUNTIMES.iter().map(|rt| {
            let url = url.clone();
            async move {
                let input = serde_json::to_vec(&fixture(rt, "allowed")).unwrap();
                let start = Instant::now();
                let r = hook(&url, "ag_k", rt, &input, "1").await;
                (*rt, start.elapsed(), r)
            }
        });
        for (rt, took, r) in futures::future::join_all(runs).await {
            // The hook's budget is its wait plus four seconds.
            assert!(took < Duration::from_secs(8), "{rt} took {took:?}");
            assert!(!r.stdout.contains("allow"), "{rt}: {r:?}");
            if rt == "gemini" {
                assert_eq!(r.code, 2, "{r:?}");
            } else {
                assert_eq!(r.code, 0, "{rt}: {r:?}");
                assert!(r.stdout.contains("deny"), "{rt}: {r:?}");
            }
        }
        server.abort();
    }
}

/// A grant on a relative file becomes a Claude Code session rule for that
/// file only: `//` and its absolute path, not the bare name Claude Code
/// would match at any depth.
#[tokio::test]
async fn a_claude_code_session_rule_names_the_file_not_every_file_so_named() {
    let app = crate::runtime_hooks::gated_app().await;
    let (s, g) = app
        .call(
            reqwest::Method::POST,
            "/v1/grants",
            Some(&app.operator),
            Some(
                json!({"tool": "file", "pattern": "edit /home/dev/proj/README\\.md",
                "expires": "1h"}),
            ),
        )
        .await;
    assert_eq!(s, reqwest::StatusCode::CREATED, "{g}");
    let mut input = fixture("claude-code", "permission_request");
    input["tool_name"] = json!("Edit");
    input["tool_input"] = json!({"file_path": "README.md", "old_string": "a", "new_string": "b"});
    let r = hook(
        &app.base,
        &app.agent,
        "claude-code",
        &serde_json::to_vec(&input).unwrap(),
        "5",
    )
    .await;
    let v: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|_| panic!("{r:?}"));
    assert_eq!(
        v["hookSpecificOutput"]["decision"]["updatedPermissions"][0]["rules"],
        json!([{"toolName": "Edit", "ruleContent": "//home/dev/proj/README.md"}]),
        "{v}"
    );
    // A hook that lets Claude Code ask its user (when nobody decides, or
    // when it cannot reach the daemon) makes no rule: Claude Code consults
    // its rules exactly then, and one made from this grant would allow the
    // call after the grant is spent, revoked or expired.
    input["tool_use_id"] = json!("toolu_ask");
    for fallback in ["--on-timeout", "--on-error"] {
        let r = crate::cli_support::run_with_stdin(
            &app.base,
            &app.agent,
            &["hook", "claude-code", "--wait", "5", fallback, "ask"],
            Some(&serde_json::to_vec(&input).unwrap()),
        )
        .await;
        let v: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|_| panic!("{r:?}"));
        assert_eq!(
            v["hookSpecificOutput"]["decision"]["behavior"], "allow",
            "{v}"
        );
        assert!(
            v["hookSpecificOutput"]["decision"]
                .get("updatedPermissions")
                .is_none(),
            "{fallback}: {v}"
        );
    }
    app.stop().await;
}

async fn copilot(app: &TestApp, session: &str, tool: &str, args: Value) -> String {
    let mut v = fixture("copilot", "allowed");
    v["sessionId"] = json!(session);
    v["toolName"] = json!(tool);
    v["toolArgs"] = json!(args.to_string());
    let r = hook(
        &app.base,
        &app.agent,
        "copilot",
        &serde_json::to_vec(&v).unwrap(),
        "1",
    )
    .await;
    let v: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|_| panic!("{r:?}"));
    v["permissionDecision"].as_str().unwrap().to_owned()
}

/// A Copilot CLI MCP tool (`<server>-<tool>`) taints its session: a way
/// out after the MCP read is denied, while a fresh session's is allowed
/// (`open`'s defaults). Text sent to a shell with `write_bash` is asked as
/// the command line it is, and left to an operator even under `open`: the
/// program reading it may be a pager or a REPL (unanswered here: denied).
#[tokio::test]
async fn a_copilot_mcp_tool_taints_its_session_and_shell_input_is_a_command() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("open")).await;
    let typed = json!({"shellId": "1", "input": "scp notes.txt backup.example.com:/srv/x\n",
        "delay": 10});
    assert_eq!(copilot(&app, "s0", "write_bash", typed).await, "deny");
    assert_eq!(
        last_action_string(&app).await,
        "tool:bash:scp notes.txt backup.example.com:/srv/x\n"
    );
    let last = all_actions(&app).await.last().unwrap().clone();
    assert!(
        last["decision"]["reason"]
            .as_str()
            .unwrap()
            .contains("keystrokes"),
        "{last}"
    );
    let way_out = json!({"command": "scp notes.txt backup.example.com:/srv/x", "mode": "sync"});
    assert_eq!(copilot(&app, "s1", "bash", way_out.clone()).await, "allow");
    let issue = json!({"owner": "o", "repo": "r", "issue_number": 1});
    assert_eq!(
        copilot(&app, "s1", "github-mcp-server-get_issue", issue).await,
        "allow"
    );
    assert!(
        last_action_string(&app)
            .await
            .starts_with("tool:mcp__github__mcp-server-get_issue:{"),
    );
    assert_eq!(copilot(&app, "s1", "bash", way_out.clone()).await, "deny");
    assert_eq!(copilot(&app, "s2", "bash", way_out).await, "allow");
    app.stop().await;
}

/// Copilot's `write_bash` types its `{enter}`, `{up}`, … as keys: a
/// second command after an `{enter}` is judged as the command it is, and
/// keys that edit the line or recall history leave a line no analyser
/// can read plain. Whatever it types goes to a human (unanswered here:
/// denied).
#[tokio::test]
async fn copilot_key_names_in_shell_input_are_typed_as_keys() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("readonly")).await;
    let input = |text: &str| json!({"shellId": "1", "input": text, "delay": 10});
    assert_eq!(
        copilot(&app, "s1", "write_bash", input("echo hi{enter}")).await,
        "deny"
    );
    assert_eq!(last_action_string(&app).await, "tool:bash:echo hi\n");
    let second = input("echo hi{ENTER}rm -rf ~/proj{enter}");
    assert_eq!(copilot(&app, "s1", "write_bash", second).await, "deny");
    assert_eq!(
        last_action_string(&app).await,
        "tool:bash:echo hi\nrm -rf ~/proj\n"
    );
    for edited in [
        "echo x{up}{enter}",
        "ls{backspace}{backspace}rm -rf ~{enter}",
    ] {
        assert_eq!(
            copilot(&app, "s1", "write_bash", input(edited)).await,
            "deny",
            "{edited}"
        );
    }
    app.stop().await;
}

/// Under `readonly`, the profile `actiongate setup` gives a new agent, the
/// runtimes' own bookkeeping (a todo list, a stated intent, the output of
/// a shell already run) passes without a human, while starting or
/// stopping work still asks (and, unanswered or where the runtime
/// cannot ask, is denied).
#[tokio::test]
async fn a_runtimes_bookkeeping_passes_under_readonly_and_starting_work_asks() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("readonly")).await;
    for (tool, args) in [
        ("update_todo", json!({"todos": "- [ ] fix the test"})),
        ("report_intent", json!({"intent": "Reading the tests"})),
        ("read_bash", json!({"shellId": "1", "delay": 5})),
        ("list_bash", json!({})),
    ] {
        assert_eq!(copilot(&app, "s1", tool, args).await, "allow", "{tool}");
    }
    // Asked, and unanswered within the hook's wait: denied.
    assert_eq!(
        copilot(&app, "s1", "stop_bash", json!({"shellId": "1"})).await,
        "deny"
    );
    let last = all_actions(&app).await.last().unwrap().clone();
    assert_eq!(last["decision"]["result"], "ask", "{last}");
    let todos = json!({"todos": [{"content": "fix it", "status": "pending"}]});
    let r = opencode(&app, "s2", "c1", "todowrite", todos).await;
    assert_eq!(opencode_status(&r), "allow", "{r:?}");
    let r = opencode(&app, "s2", "c2", "task", json!({"prompt": "x"})).await;
    assert_eq!(opencode_status(&r), "deny", "{r:?}");
    let last = all_actions(&app).await.last().unwrap().clone();
    assert_eq!(last["decision"]["result"], "ask", "{last}");
    let r = opencode(&app, "s2", "c3", "question", json!({"questions": []})).await;
    assert_eq!(opencode_status(&r), "allow", "{r:?}");
    // Claude Code 2.1's task tracker, deferred tools, questions and plan
    // mode (names as its 2.1.197 binary spells them); its subagents ask.
    for (tool, input, want) in [
        (
            "TaskCreate",
            json!({"subject": "fix it", "description": "the test"}),
            "allow",
        ),
        (
            "TaskUpdate",
            json!({"taskId": "1", "status": "completed"}),
            "allow",
        ),
        (
            "TaskOutput",
            json!({"task_id": "b1", "block": false, "timeout": 1000}),
            "allow",
        ),
        ("ToolSearch", json!({"query": "select:TaskCreate"}), "allow"),
        (
            "AskUserQuestion",
            json!({"questions": [{"question": "Which?"}]}),
            "allow",
        ),
        ("ExitPlanMode", json!({"plan": "1. fix"}), "allow"),
        (
            "Agent",
            json!({"prompt": "x", "subagent_type": "general-purpose"}),
            "deny",
        ),
    ] {
        let mut v = fixture("claude-code", "allowed");
        v["tool_name"] = json!(tool);
        v["tool_input"] = input;
        v["tool_use_id"] = json!(format!("toolu_{tool}"));
        let r = hook(
            &app.base,
            &app.agent,
            "claude-code",
            &serde_json::to_vec(&v).unwrap(),
            "1",
        )
        .await;
        let out: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|_| panic!("{r:?}"));
        assert_eq!(
            out["hookSpecificOutput"]["permissionDecision"], want,
            "{tool}: {out}"
        );
    }
    // Gemini CLI 0.61's (`@google/gemini-cli-core`).
    for tool in [
        "ask_user",
        "tracker_create_task",
        "update_topic",
        "exit_plan_mode",
    ] {
        let mut v = fixture("gemini", "allowed");
        v["tool_name"] = json!(tool);
        v["tool_input"] = json!({"title": "x"});
        let r = hook(
            &app.base,
            &app.agent,
            "gemini",
            &serde_json::to_vec(&v).unwrap(),
            "1",
        )
        .await;
        let out: Value = serde_json::from_str(&r.stdout).unwrap_or_else(|_| panic!("{r:?}"));
        assert_eq!(out["decision"], "allow", "{tool}: {out}");
    }
    app.stop().await;
}

/// On Windows a path climbs with `..\`: a rule allowing writes in the
/// project (`C:/Users/dev/proj/...`) does not cover one that climbs out of
/// it, nor one from the drive's root, and a deny over `C:/Windows/` sees
/// the file that would be written.
#[tokio::test]
async fn a_windows_path_is_resolved_below_its_drive() {
    let app = TestApp::spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["tool:file:write C:/Users/dev/proj/.*"], "ask": [],
               "deny": ["tool:file:.* C:/Windows/.*"]}),
    )
    .await;
    let cwd = "C:\\Users\\dev\\proj";
    let write = |path: &str| json!({"filePath": path, "content": "x"});
    let mut v = fixture("opencode", "allowed");
    v["directory"] = json!(cwd);
    let calls = std::sync::atomic::AtomicUsize::new(0);
    let run = |args: Value| {
        let mut v = v.clone();
        v["tool"] = json!("write");
        v["args"] = args;
        // A call id of its own: a retried call is the same action.
        let n = calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        v["callID"] = json!(format!("call_{n}"));
        let base = app.base.clone();
        let agent = app.agent.clone();
        async move {
            let r = hook(
                &base,
                &agent,
                "opencode",
                &serde_json::to_vec(&v).unwrap(),
                "1",
            )
            .await;
            opencode_status(&r)
        }
    };
    assert_eq!(run(write("src\\main.rs")).await, "allow");
    assert_eq!(
        last_action_string(&app).await,
        "tool:file:write C:/Users/dev/proj/src/main.rs"
    );
    for (path, asked) in [
        (
            "..\\..\\..\\Windows\\System32\\x.dll",
            "C:/Windows/System32/x.dll",
        ),
        ("\\Windows\\x", "C:/Windows/x"),
        (
            "c:\\users\\dev\\proj\\..\\..\\..\\windows\\x",
            "C:/windows/x",
        ),
    ] {
        assert_eq!(run(write(path)).await, "deny", "{path}");
        assert_eq!(
            last_action_string(&app).await,
            format!("tool:file:write {asked}")
        );
    }
    app.stop().await;
}
