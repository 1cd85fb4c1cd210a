//! Registration against the real daemon (in-process, over real HTTP): the
//! daemon accepts what the executor sends and what it prints, the secret is
//! saved and verifies deliveries, and re-registering replaces the handler.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common;
use crate::daemon;

use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::{Exec, new_id};
use daemon::Daemon;
use reqwest::{Client, StatusCode};
use serde_json::{Value, json};

async fn run_cli(args: &[&str], admin: &str) -> std::process::Output {
    tokio::process::Command::new(common::bin())
        .args(args)
        .env("ACTIONGATE_KEY", admin)
        .env_remove("ACTIONGATE_EXECUTOR_SECRET")
        .env("RUST_LOG", "warn")
        .output()
        .await
        .unwrap()
}

#[tokio::test]
async fn the_daemon_accepts_the_registration_and_the_saved_secret_verifies_deliveries() {
    let daemon = Daemon::start().await;

    // --print-registration prints valid JSON the daemon accepts as is.
    let out = run_cli(
        &[
            "--print-registration",
            "--handler-id",
            "fs-printed",
            "--public-url",
            "http://127.0.0.1:9/hook",
        ],
        "",
    )
    .await;
    assert!(out.status.success());
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["id"], "fs-printed");
    assert_eq!(printed["url"], "http://127.0.0.1:9/hook");
    let (s, body) = daemon
        .call(
            reqwest::Method::POST,
            "/v1/handlers",
            &daemon.admin,
            Some(printed),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");

    // --register: registers with its real listening URL, saves the secret, serves.
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let root_s = root.path().display().to_string();
    let state_s = state.path().display().to_string();
    let args: Vec<String> = [
        "--listen",
        "127.0.0.1:0",
        "--root",
        &root_s,
        "--state-dir",
        &state_s,
        "--register",
        &daemon.base,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let mut child = tokio::process::Command::new(common::bin())
        .args(&args)
        .env("ACTIONGATE_KEY", &daemon.admin)
        .env_remove("ACTIONGATE_EXECUTOR_SECRET")
        .env("RUST_LOG", "warn")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines =
        tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(child.stdout.take().unwrap()));
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .expect("the executor exited");
    let url = line
        .strip_prefix("actiongate-executor listening on ")
        .unwrap()
        .to_owned();

    let secret_file = state.path().join("secret");
    let secret = std::fs::read_to_string(&secret_file).unwrap();
    let secret = secret.trim();
    assert!(secret.starts_with("whsec_"));
    let mode = std::fs::metadata(&secret_file)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);

    let (s, handler) = daemon
        .call(reqwest::Method::GET, "/v1/handlers/fs", &daemon.admin, None)
        .await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(handler["url"], url.as_str());
    let names: Vec<&str> = handler["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "create_file",
            "update_file",
            "update_readme",
            "read_file",
            "execute_command"
        ]
    );

    // The daemon builds the action strings and displays from it, and holds
    // agents to its params schemas.
    let (s, key) = daemon
        .call(
            reqwest::Method::POST,
            "/v1/keys",
            &daemon.admin,
            Some(json!({"role": "agent", "agent": "coder"})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{key}");
    let agent = key["key"].as_str().unwrap().to_owned();
    let (s, action) = daemon
        .call(
            reqwest::Method::POST,
            "/v1/actions",
            &agent,
            Some(json!({"handler": "fs", "action": "create_file",
                "params": {"filepath": "src/app.py", "content": "print(1)", "reason": "start"}})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{action}");
    assert_eq!(action["action_string"], "tool:fs:create_file src/app.py");
    assert_eq!(action["permission"], "fs.write");
    assert_eq!(action["scope"], json!({"path": "src/app.py"}));
    assert_eq!(action["display"]["title"], "Create src/app.py");
    let (s, action) = daemon
        .call(
            reqwest::Method::POST,
            "/v1/actions",
            &agent,
            Some(json!({"handler": "fs", "action": "execute_command",
                "params": {"content": "ls -la", "reason": "look"}})),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{action}");
    assert_eq!(action["action_string"], "tool:fs:execute_command ls -la");
    assert_eq!(action["scope"], json!({"command": "ls -la"}));
    let (s, _) = daemon
        .call(
            reqwest::Method::POST,
            "/v1/actions",
            &agent,
            Some(json!({"handler": "fs", "action": "read_file",
                "params": {"filepath": "a", "reason": "r", "mode": "raw"}})),
        )
        .await;
    assert_eq!(
        s,
        StatusCode::UNPROCESSABLE_ENTITY,
        "extra params are refused"
    );

    // The saved secret is the one the running executor verifies with.
    let id = new_id();
    let body = serde_json::to_vec(&Exec::envelope(
        &id,
        "create_file",
        json!({"filepath": "hello.txt", "content": "hi", "reason": "r"}),
        1,
    ))
    .unwrap();
    let signer = actiongate_executor::signing::Signer::new(secret).unwrap();
    let mut req = {
        actiongate_executor::install_tls_provider();
        Client::new()
    }
    .post(&url)
    .body(body.clone());
    for (k, v) in signer.headers(&id, &body).unwrap() {
        req = req.header(k, v);
    }
    assert_eq!(req.send().await.unwrap().status(), StatusCode::OK);
    assert_eq!(
        std::fs::read_to_string(root.path().join("hello.txt")).unwrap(),
        "hi"
    );
    child.start_kill().unwrap();
    child.wait().await.unwrap();

    // Registering again replaces the handler (409 -> PUT) and keeps the saved secret.
    let out = run_cli(
        &[
            "--state-dir",
            &state_s,
            "--register",
            &daemon.base,
            "--register-only",
            "--public-url",
            "http://127.0.0.1:9/moved",
        ],
        &daemon.admin,
    )
    .await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&secret_file).unwrap().trim(),
        secret
    );
    let (_, handler) = daemon
        .call(reqwest::Method::GET, "/v1/handlers/fs", &daemon.admin, None)
        .await;
    assert_eq!(handler["url"], "http://127.0.0.1:9/moved");

    // Without a known secret, re-registering says what to do.
    let empty_state = tempfile::tempdir().unwrap();
    let out = run_cli(
        &[
            "--state-dir",
            &empty_state.path().display().to_string(),
            "--register",
            &daemon.base,
            "--register-only",
        ],
        &daemon.admin,
    )
    .await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--secret"));

    // A wrong admin key is reported with the daemon's answer.
    let out = run_cli(
        &[
            "--state-dir",
            &empty_state.path().display().to_string(),
            "--register",
            &daemon.base,
            "--register-only",
        ],
        "not-a-key",
    )
    .await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("401"));
    daemon.shutdown.cancel();
}
