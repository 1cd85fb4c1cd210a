//! End to end with both real sides: the daemon (in-process, real HTTP and
//! SQLite) dispatches to the reference executor binary, which changes the
//! disk. Zero trust: the agent's action waits until a human grants it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common;
use crate::daemon;

use daemon::Daemon;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

struct Setup {
    daemon: Daemon,
    agent: String,
    operator: String,
    root: tempfile::TempDir,
    _state: tempfile::TempDir,
    _exec: tokio::process::Child,
}

async fn setup(async_mode: bool) -> Setup {
    let daemon = Daemon::start_with(|s| {
        s.dispatch.retry_schedule = vec!["200ms".parse().unwrap(), "500ms".parse().unwrap()];
    })
    .await;
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let mut args: Vec<String> = vec![
        "--listen".into(),
        "127.0.0.1:0".into(),
        "--root".into(),
        root.path().display().to_string(),
        "--state-dir".into(),
        state.path().display().to_string(),
        "--register".into(),
        daemon.base.clone(),
        "--admin-key".into(),
        daemon.admin.clone(),
    ];
    if async_mode {
        args.push("--async".into());
    }
    let (exec, _url) = common::spawn(&args).await;
    let (s, k) = daemon
        .call(
            Method::POST,
            "/v1/keys",
            &daemon.admin,
            Some(json!({"role": "agent", "agent": "coder"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{k}");
    let agent = k["key"].as_str().unwrap().to_owned();
    let (_, k) = daemon
        .call(
            Method::POST,
            "/v1/keys",
            &daemon.admin,
            Some(json!({"role": "operator"})),
        )
        .await;
    let operator = k["key"].as_str().unwrap().to_owned();
    Setup {
        daemon,
        agent,
        operator,
        root,
        _state: state,
        _exec: exec,
    }
}

async fn create_file(s: &Setup, path: &str, content: &str) -> Value {
    let (status, a) = s
        .daemon
        .call(
            Method::POST,
            "/v1/actions",
            &s.agent,
            Some(json!({"handler": "fs", "action": "create_file",
                "params": {"filepath": path, "content": content, "reason": "scaffold"}})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{a}");
    a
}

async fn wait_settled(s: &Setup, id: &str) -> Value {
    let (_, a) = s
        .daemon
        .call(
            Method::GET,
            &format!("/v1/actions/{id}?wait=30"),
            &s.agent,
            None,
        )
        .await;
    a
}

async fn pending_then_granted_then_written(async_mode: bool) {
    let s = setup(async_mode).await;
    let a = create_file(&s, "src/app.py", "print('hi')\n").await;
    assert_eq!(a["status"], "pending", "{a}");
    assert_eq!(a["action_string"], "tool:fs:create_file src/app.py");
    assert!(!s.root.path().join("src/app.py").exists());

    let (status, g) = s
        .daemon
        .call(
            Method::POST,
            "/v1/grants",
            &s.operator,
            Some(
                json!({"agent": "coder", "handler": "fs", "permission": "fs.write",
                "scope": {"path": "src/*"}, "expires": "1h"}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{g}");
    let done = wait_settled(&s, a["id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        std::fs::read_to_string(s.root.path().join("src/app.py")).unwrap(),
        "print('hi')\n"
    );

    // Covered by the grant: runs at once. Outside it: waits for a human.
    let b = create_file(&s, "src/lib.py", "x = 1\n").await;
    assert_eq!(
        wait_settled(&s, b["id"].as_str().unwrap()).await["status"],
        "completed"
    );
    let c = create_file(&s, "etc/passwd", "no").await;
    assert_eq!(c["status"], "pending");

    // The executor refuses an escape: failed after one attempt, nothing written.
    let (_, g2) = s
        .daemon
        .call(
            Method::POST,
            "/v1/grants",
            &s.operator,
            Some(json!({"agent": "coder", "handler": "fs", "permission": "fs.write", "scope": {}, "expires": "1h"})),
        )
        .await;
    assert!(g2["id"].is_string());
    let d = create_file(&s, "../outside.txt", "no").await;
    let d = wait_settled(&s, d["id"].as_str().unwrap()).await;
    assert_eq!(d["status"], "failed", "{d}");
    assert_eq!(d["attempts"].as_array().unwrap().len(), 1);
    assert!(!s.root.path().parent().unwrap().join("outside.txt").exists());
    s.daemon.shutdown.cancel();
}

#[tokio::test]
async fn a_granted_action_runs_on_disk_and_completes() {
    pending_then_granted_then_written(false).await;
}

#[tokio::test]
async fn the_same_through_the_202_callback_path() {
    pending_then_granted_then_written(true).await;
}

async fn command(s: &Setup, line: &str) -> Value {
    let (status, a) = s
        .daemon
        .call(
            Method::POST,
            "/v1/actions",
            &s.agent,
            Some(json!({"handler": "fs", "action": "execute_command",
                "params": {"content": line, "reason": "look around"}})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{a}");
    a
}

#[tokio::test]
async fn a_command_grant_on_ls_does_not_run_a_chained_rm() {
    let s = setup(false).await;
    std::fs::write(s.root.path().join("victim.txt"), "keep me").unwrap();
    let (status, g) = s
        .daemon
        .call(
            Method::POST,
            "/v1/grants",
            &s.operator,
            Some(
                json!({"agent": "coder", "handler": "fs", "permission": "shell.exec",
                "scope": {"command": "ls*"}, "expires": "1h"}),
            ),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{g}");
    let ok = command(&s, "ls -la").await;
    let ok = wait_settled(&s, ok["id"].as_str().unwrap()).await;
    assert_eq!(ok["status"], "completed", "{ok}");
    // The grant's glob matches the raw line, but not its second command.
    let chained = command(&s, "ls; rm -f victim.txt").await;
    assert_eq!(chained["status"], "pending", "{chained}");
    let hidden = command(&s, "ls $(rm -f victim.txt)").await;
    assert_eq!(hidden["status"], "pending", "{hidden}");
    assert_eq!(
        std::fs::read_to_string(s.root.path().join("victim.txt")).unwrap(),
        "keep me"
    );
    s.daemon.shutdown.cancel();
}
