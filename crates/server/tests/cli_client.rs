//! The operator and agent CLI (`actiongate pending`, `approve`, `request`,
//! …): the built binary against the real daemon, exit codes included; and
//! `tail` against a scripted SSE server (reconnects resume from the last id).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::cli_support;
use crate::common;

use std::time::Duration;

use cli_support::{ag, dead_url, register_fs, run};
use common::TestApp;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

async fn pending_id(app: &TestApp, tool: &str, detail: &str) -> String {
    let (s, a) = app.request(tool, detail).await;
    assert_eq!(s, StatusCode::CREATED, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    a["id"].as_str().unwrap().to_owned()
}

async fn status_of(app: &TestApp, id: &str) -> Value {
    app.call(
        Method::GET,
        &format!("/v1/actions/{id}"),
        Some(&app.operator),
        None,
    )
    .await
    .1
}

#[tokio::test]
async fn operator_lists_shows_approves_and_denies_with_exit_codes() {
    let app = TestApp::spawn().await;
    let op = app.operator.clone();
    let first = pending_id(&app, "bash", "rm -rf build").await;
    let second = pending_id(&app, "bash", "git push origin main\nand more").await;

    let r = ag(&app, &op, &["pending"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("ID"), "{}", r.stdout);
    let first_row = r.stdout.find(&first).unwrap();
    let second_row = r.stdout.find(&second).unwrap();
    assert!(first_row < second_row, "oldest first: {}", r.stdout);
    assert!(r.stdout.contains("tool:bash:rm -rf build"));
    // Agent text cannot forge table rows.
    assert!(
        r.stdout.contains("git push origin main⏎and more"),
        "{}",
        r.stdout
    );
    assert_eq!(r.stdout.lines().count(), 3);

    let r = ag(&app, &op, &["pending", "--json"]).await;
    assert_eq!(r.code, 0);
    let listed = r.json();
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![first.as_str(), second.as_str()]);

    let r = ag(&app, &op, &["show", &first]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("status:    pending"), "{}", r.stdout);
    assert!(r.stdout.contains("action:    tool:bash:rm -rf build"));
    assert!(r.stdout.contains("deadline:"));

    let r = ag(&app, &op, &["approve", &first, "--note", "looks fine"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("approved"), "{}", r.stdout);
    assert_eq!(status_of(&app, &first).await["status"], "approved");

    let r = ag(&app, &op, &["deny", &second, "--reason", "not on a Friday"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let denied = status_of(&app, &second).await;
    assert_eq!(denied["status"], "denied");
    assert_eq!(denied["decision_note"], "not on a Friday");

    // A decided action cannot be decided again: the problem's title and
    // detail on one line, exit 5.
    let r = ag(&app, &op, &["approve", &second]).await;
    assert_eq!(r.code, 5, "{r:?}");
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("The action is not in a state that allows this: the action is denied"),
        "{}",
        r.stderr
    );
    assert!(r.stdout.is_empty());

    let r = ag(&app, &op, &["show", "no-such-action"]).await;
    assert_eq!(r.code, 5);
    assert!(r.stderr.contains("Not found"), "{}", r.stderr);

    let r = ag(&app, &op, &["pending"]).await;
    assert_eq!(r.stdout.trim(), "no pending actions");
    app.stop().await;
}

#[tokio::test]
async fn reply_and_approve_and_remember() {
    let app = TestApp::spawn().await;
    let op = app.operator.clone();
    let a = pending_id(&app, "bash", "make test").await;
    let r = ag(&app, &op, &["reply", &a, "sounds good, yes"]).await;
    // Not understood: 422, exit 5.
    assert_eq!(r.code, 5, "{r:?}");
    assert!(r.stderr.contains("not understood"), "{}", r.stderr);
    let r = ag(&app, &op, &["reply", &a, "yes"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(status_of(&app, &a).await["status"], "approved");
    let b = pending_id(&app, "bash", "make lint").await;
    let r = ag(&app, &op, &["reply", &b, "stop", "--json"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json()["status"], "denied");

    let c = pending_id(&app, "bash", "cargo build").await;
    let r = ag(
        &app,
        &op,
        &[
            "approve",
            &c,
            "--remember",
            "1h",
            "--pattern",
            "cargo (build|test)",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("remembered"), "{}", r.stdout);
    // The grant now allows the next one at once.
    let (_, next) = app.request("bash", "cargo test").await;
    assert_eq!(next["status"], "approved", "{next}");
    let r = ag(&app, &op, &["grants", "--json"]).await;
    let grants = r.json();
    assert_eq!(grants.as_array().unwrap().len(), 1, "{grants}");
    assert_eq!(grants[0]["pattern"], "cargo (build|test)");
    app.stop().await;
}

/// `grant --idempotency-key`: sent again (a script retrying after a 503
/// or a timeout), the same grant is answered and nothing is granted twice;
/// another grant under the key is the daemon's 409, exit 5.
#[tokio::test]
async fn a_grant_sent_again_with_its_key_is_granted_once() {
    let app = TestApp::spawn().await;
    let op = app.operator.clone();
    let grant = |pattern: &'static str| {
        [
            "grant",
            "--tool",
            "bash",
            "--pattern",
            pattern,
            "--expires",
            "1h",
            "--idempotency-key",
            "nightly-1",
        ]
    };
    let first = ag(&app, &op, &grant("make nightly")).await;
    assert_eq!(first.code, 0, "{first:?}");
    assert!(first.stdout.starts_with("granted grt_"), "{}", first.stdout);
    let id = first
        .stdout
        .split_whitespace()
        .nth(1)
        .unwrap()
        .trim_end_matches(':');
    let again = ag(&app, &op, &grant("make nightly")).await;
    assert_eq!(again.code, 0, "{again:?}");
    assert!(
        again
            .stdout
            .starts_with(&format!("granted before under this idempotency key: {id}")),
        "{}",
        again.stdout
    );
    let other = ag(&app, &op, &grant("make .*")).await;
    assert_eq!(other.code, 5, "{other:?}");
    assert!(other.stderr.contains("nightly-1"), "{}", other.stderr);
    let list = ag(&app, &op, &["grants", "--json"]).await.json();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    app.stop().await;
}

#[tokio::test]
async fn grants_are_made_listed_and_revoked() {
    let app = TestApp::spawn().await;
    register_fs(&app).await;
    let op = app.operator.clone();
    let waiting = pending_id(&app, "bash", "git pull --rebase").await;

    let r = ag(
        &app,
        &op,
        &[
            "grant",
            "--tool",
            "bash",
            "--pattern",
            "git pull.*",
            "--expires",
            "1h",
            "--agent",
            "agent-1",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("tool:bash:git pull.*"), "{}", r.stdout);
    assert!(
        r.stdout.trim_end().ends_with("approved 1 pending action"),
        "{}",
        r.stdout
    );
    assert_eq!(status_of(&app, &waiting).await["status"], "approved");
    let tool_grant = r
        .stdout
        .split_whitespace()
        .nth(1)
        .unwrap()
        .trim_end_matches(':')
        .to_owned();
    assert!(tool_grant.starts_with("grt_"), "{}", r.stdout);

    // Scope values are JSON when they parse, strings otherwise.
    let r = ag(
        &app,
        &op,
        &[
            "grant",
            "--handler",
            "fs",
            "--permission",
            "fs.use",
            "--scope",
            "path=/tmp/*",
            "--expires",
            "indefinite",
            "--json",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let g = r.json();
    assert_eq!(g["scope"], json!({"path": "/tmp/*"}));
    assert!(g["expires_at"].is_null());
    let perm_grant = g["id"].as_str().unwrap().to_owned();

    // An unknown scope key is the daemon's 422: exit 5.
    let r = ag(
        &app,
        &op,
        &[
            "grant",
            "--handler",
            "fs",
            "--permission",
            "fs.use",
            "--scope",
            "size=3",
            "--expires",
            "1h",
        ],
    )
    .await;
    assert_eq!(r.code, 5, "{r:?}");
    assert!(
        r.stderr.contains("The request is not valid: scope.size"),
        "{}",
        r.stderr
    );

    let r = ag(&app, &op, &["grants"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.contains(&tool_grant) && r.stdout.contains(&perm_grant),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("fs/fs.use {\"path\":\"/tmp/*\"}"),
        "{}",
        r.stdout
    );

    let r = ag(&app, &op, &["revoke", &tool_grant]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.starts_with(&format!("revoked {tool_grant}")),
        "{}",
        r.stdout
    );
    let r = ag(&app, &op, &["grants"]).await;
    assert!(!r.stdout.contains(&tool_grant), "{}", r.stdout);
    let r = ag(&app, &op, &["grants", "--all"]).await;
    assert!(r.stdout.contains(&tool_grant), "{}", r.stdout);
    assert!(r.stdout.contains("revoked"), "{}", r.stdout);
    let r = ag(&app, &op, &["revoke", "grt_nope"]).await;
    assert_eq!(r.code, 5);
    assert!(r.stderr.contains("no grant 'grt_nope'"), "{}", r.stderr);
    app.stop().await;
}

#[tokio::test]
async fn request_and_check_exit_codes_follow_the_decision() {
    let app = TestApp::spawn().await;
    app.profile(
        "agent-1",
        json!({"allow": ["tool:bash:ls( .*)?"], "ask": ["tool:bash:.*"], "deny": ["tool:bash:rm .*"]}),
    )
    .await;
    let agent = app.agent.clone();

    let r = ag(
        &app,
        &agent,
        &["check", "--tool", "bash", "--detail", "ls -la"],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.stdout.starts_with("allow: tool:bash:ls -la"),
        "{}",
        r.stdout
    );
    let r = ag(
        &app,
        &agent,
        &["check", "--tool", "bash", "--detail", "make"],
    )
    .await;
    assert_eq!(r.code, 4, "{r:?}");
    let r = ag(
        &app,
        &agent,
        &["check", "--tool", "bash", "--detail", "rm -rf /", "--json"],
    )
    .await;
    assert_eq!(r.code, 1, "{r:?}");
    assert_eq!(r.json()["result"], "deny");
    // Nothing was stored by check.
    assert!(cli_support::all_actions(&app).await.is_empty());

    let r = ag(
        &app,
        &agent,
        &["request", "--tool", "bash", "--detail", "ls"],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains(" approved: tool:bash:ls"), "{}", r.stdout);
    let r = ag(
        &app,
        &agent,
        &["request", "--tool", "bash", "--detail", "rm -rf build"],
    )
    .await;
    assert_eq!(r.code, 1, "{r:?}");
    let r = ag(
        &app,
        &agent,
        &["request", "--tool", "bash", "--detail", "make", "--json"],
    )
    .await;
    assert_eq!(r.code, 4, "{r:?}");
    let still = r.json();
    assert_eq!(still["status"], "pending");

    // Waiting: a human approves meanwhile.
    let url = app.base.clone();
    let waiter = tokio::spawn(async move {
        run(
            &url,
            &agent,
            &[
                "request",
                "--tool",
                "bash",
                "--detail",
                "make install",
                "--wait",
                "30",
                "--reason",
                "install it",
            ],
        )
        .await
    });
    let id = loop {
        let list = cli_support::all_actions(&app).await;
        if let Some(a) = list.iter().find(|a| a["detail"] == "make install") {
            break a["id"].as_str().unwrap().to_owned();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (s, _) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/reply"),
            Some(&app.operator),
            Some(json!({"text": "ok"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let r = waiter.await.unwrap();
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("approved"), "{}", r.stdout);

    // Nobody answers before the deadline: expired, exit 3.
    let agent = app.agent.clone();
    let r = ag(
        &app,
        &agent,
        &[
            "request",
            "--tool",
            "bash",
            "--detail",
            "make dist",
            "--timeout",
            "1s",
            "--wait",
            "20",
        ],
    )
    .await;
    assert_eq!(r.code, 3, "{r:?}");
    assert!(r.stdout.contains("expired"), "{}", r.stdout);

    // Cancelled while waiting: exit 3 as well.
    let r = ag(
        &app,
        &agent,
        &["request", "--tool", "bash", "--detail", "make clean"],
    )
    .await;
    assert_eq!(r.code, 4);
    let id = r.stdout.split_whitespace().next().unwrap().to_owned();
    let (s, _) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/cancel"),
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(s, StatusCode::OK);
    let r = ag(
        &app,
        &agent,
        &[
            "request",
            "--tool",
            "bash",
            "--detail",
            "make clean",
            "--wait",
            "0",
        ],
    )
    .await;
    // A new request (no idempotency key) is a new action: still asks.
    assert_eq!(r.code, 4);
    let r = ag(
        &app,
        &agent,
        &[
            "request",
            "--tool",
            "bash",
            "--detail",
            "x",
            "--idempotency-key",
            "k1",
        ],
    )
    .await;
    assert_eq!(r.code, 4);
    let id = r.stdout.split_whitespace().next().unwrap().to_owned();
    app.call(
        Method::POST,
        &format!("/v1/actions/{id}/cancel"),
        Some(&app.operator),
        None,
    )
    .await;
    let r = ag(
        &app,
        &agent,
        &[
            "request",
            "--tool",
            "bash",
            "--detail",
            "x",
            "--idempotency-key",
            "k1",
        ],
    )
    .await;
    assert_eq!(r.code, 3, "{r:?}");
    assert!(
        r.stdout.contains(&format!("{id} cancelled")),
        "{}",
        r.stdout
    );

    // Approved only as an approver edited it: not a go-ahead for what was
    // asked, exit 7 (a script gating on 0 runs nothing).
    let asked = [
        "request",
        "--tool",
        "bash",
        "--detail",
        "make clean-all",
        "--idempotency-key",
        "k2",
    ];
    let r = ag(&app, &agent, &asked).await;
    assert_eq!(r.code, 4, "{r:?}");
    let id = r.stdout.split_whitespace().next().unwrap().to_owned();
    let (s, body) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/approve"),
            Some(&app.operator),
            Some(json!({"detail": "make clean-tmp"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{body}");
    let r = ag(&app, &agent, &asked).await;
    assert_eq!(r.code, 7, "{r:?}");
    assert!(r.stdout.contains("[edited]"), "{}", r.stdout);
    assert!(r.stdout.contains("make clean-tmp"), "{}", r.stdout);
    app.stop().await;
}

#[tokio::test]
async fn usage_errors_exit_2_and_api_errors_exit_5() {
    let app = TestApp::spawn().await;
    let op = app.operator.clone();
    for args in [
        vec!["grant", "--tool", "bash", "--expires", "1h"],
        vec![
            "grant",
            "--handler",
            "fs",
            "--tool",
            "bash",
            "--pattern",
            "x",
            "--permission",
            "p",
            "--expires",
            "1h",
        ],
        vec!["grant", "--pattern", "x", "--expires", "1h"],
        vec!["approve", "some-id", "--scope", "a=b"],
        vec![
            "approve",
            "some-id",
            "--remember",
            "1h",
            "--scope",
            "novalue",
        ],
        vec!["request", "--tool", "bash"],
        vec![
            "request", "--tool", "bash", "--detail", "x", "--wait", "soon",
        ],
        vec!["frobnicate"],
    ] {
        let r = ag(&app, &op, &args).await;
        assert_eq!(r.code, 2, "{args:?}: {r:?}");
        assert!(!r.stderr.is_empty());
    }
    // No key at all.
    let r = run(&app.base, "", &["pending"]).await;
    assert_eq!(r.code, 2, "{r:?}");
    assert_eq!(
        r.stderr.trim(),
        "actiongate: no API key: pass --key or set ACTIONGATE_KEY"
    );
    let r = run("localhost:8080", &op, &["pending"]).await;
    assert_eq!(r.code, 2, "{r:?}");

    // A wrong key and a key of the wrong role: the daemon's problem, exit 5.
    let r = run(&app.base, "ag_wrong", &["pending"]).await;
    assert_eq!(r.code, 5, "{r:?}");
    assert_eq!(
        r.stderr.trim(),
        "actiongate: Missing or invalid API key: unknown or revoked key (HTTP 401)"
    );
    let agent = app.agent.clone();
    let r = ag(&app, &agent, &["grants"]).await;
    assert_eq!(r.code, 5, "{r:?}");
    assert!(
        r.stderr
            .starts_with("actiongate: Not allowed for this key: "),
        "{}",
        r.stderr
    );
    // --key wins over the environment, and is never echoed.
    let r = run(&app.base, "ag_wrong", &["pending", "--key", &op]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let r = run(&app.base, "ag_secret_value", &["--help"]).await;
    assert!(!r.stdout.contains("ag_secret_value"));
    app.stop().await;
}

#[tokio::test]
async fn an_unreachable_daemon_exits_6() {
    let url = dead_url().await;
    for args in [
        vec!["pending"],
        vec!["request", "--tool", "bash", "--detail", "ls"],
        vec!["check", "--tool", "bash", "--detail", "ls"],
        vec!["approve", "x"],
    ] {
        let r = run(&url, "k", &args).await;
        assert_eq!(r.code, 6, "{args:?}: {r:?}");
        assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
        assert!(
            r.stderr
                .contains(&format!("cannot reach the daemon at {url}")),
            "{}",
            r.stderr
        );
    }
}

/// A scripted SSE server: the first connection gets events 1 and 2 and is
/// cut; the next must resume with `Last-Event-ID: 2` and gets event 3.
async fn scripted_sse() -> (String, tokio::task::JoinHandle<Vec<String>>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let mut requests = Vec::new();
        let event = |seq: u32, kind: &str| {
            let data = json!({
                "seq": seq, "id": format!("evt_{seq}"), "type": kind,
                "at": "2026-11-22T10:00:00.000000Z", "agent": "coder",
                "action_id": format!("act-{seq}"),
                "data": {"action_string": format!("tool:bash:step {seq}"), "status": "pending"}
            });
            format!("id: {seq}\nevent: {kind}\ndata: {data}\n\n")
        };
        for round in 0..2 {
            let (mut sock, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 8192];
            let mut head = Vec::new();
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = sock.read(&mut buf).await.unwrap();
                head.extend_from_slice(&buf[..n]);
            }
            requests.push(String::from_utf8_lossy(&head).into_owned());
            let body = if round == 0 {
                format!(
                    "retry: 100\n\n: heartbeat\n\n{}{}",
                    event(1, "action.enqueued"),
                    event(2, "permission.needed")
                )
            } else {
                event(3, "action.approved")
            };
            let resp = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            sock.write_all(resp.as_bytes()).await.unwrap();
            sock.shutdown().await.unwrap();
        }
        requests
    });
    (url, task)
}

#[tokio::test]
async fn tail_prints_one_line_per_event_and_resumes_from_the_last_id() {
    let (url, server) = scripted_sse().await;
    let r = run(
        &url,
        "op-key",
        &[
            "tail",
            "--types",
            "action.*,permission.needed",
            "--count",
            "3",
        ],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", r.stdout);
    assert!(
        lines[0].ends_with("      1 action.enqueued    act-1 coder tool:bash:step 1"),
        "{}",
        lines[0]
    );
    assert!(lines[1].contains("permission.needed"), "{}", lines[1]);
    assert!(lines[2].contains("      3 action.approved"), "{}", lines[2]);
    assert!(r.stderr.contains("reconnecting"), "{}", r.stderr);
    let requests = server.await.unwrap();
    let first = requests[0].to_ascii_lowercase();
    assert!(
        first.starts_with("get /v1/events?types=action.%2a%2cpermission.needed "),
        "{first}"
    );
    assert!(first.contains("authorization: bearer op-key"));
    assert!(first.contains("accept: text/event-stream"));
    assert!(!first.contains("last-event-id"));
    assert!(
        requests[1]
            .to_ascii_lowercase()
            .contains("last-event-id: 2\r\n"),
        "{}",
        requests[1]
    );
}

/// A server that answers every request with `status` and a problem body.
async fn refusing_server(status: u16, title: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let body = json!({"type": "urn:actiongate:problem:x", "title": title, "status": status,
        "detail": "unknown or revoked key", "code": "x"})
    .to_string();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            let mut buf = vec![0u8; 8192];
            let _ = sock.read(&mut buf).await;
            let resp = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/problem+json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(resp.as_bytes()).await;
        }
    });
    url
}

#[tokio::test]
async fn tail_json_prints_the_event_objects_and_stops_on_client_errors() {
    let (url, server) = scripted_sse().await;
    let r = run(
        &url,
        "op-key",
        &["tail", "--json", "--count", "2", "--after", "0"],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let events: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["seq"], 1);
    assert_eq!(events[1]["type"], "permission.needed");
    server.abort();

    // A refused key is not retried: exit 5 at once.
    let url = refusing_server(401, "Missing or invalid API key").await;
    let r = run(&url, "ag_wrong", &["tail"]).await;
    assert_eq!(r.code, 5, "{r:?}");
    assert_eq!(
        r.stderr.trim(),
        "actiongate: Missing or invalid API key: unknown or revoked key (HTTP 401)"
    );
    // A failing daemon is retried (here until --count is never reached, so
    // the process is still running after a few attempts).
    let url = refusing_server(503, "Service unavailable").await;
    let mut child = cli_support::command(&url, "k")
        .args(["tail"])
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1200)).await;
    assert!(child.try_wait().unwrap().is_none(), "tail gave up on a 503");
    child.kill().await.unwrap();
    let out = child.wait_with_output().await.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.matches("reconnecting").count() >= 2, "{err}");
}

/// Against the real daemon's `GET /v1/events`: replay from the start, then
/// live events, filtered by type.
#[tokio::test]
async fn tail_follows_the_real_daemon() {
    let app = TestApp::spawn().await;
    let op = app.operator.clone();
    let first = pending_id(&app, "bash", "make one").await;
    let second = pending_id(&app, "bash", "make two").await;
    let url = app.base.clone();
    let tail = tokio::spawn(async move {
        run(
            &url,
            &op,
            &[
                "tail",
                "--after",
                "0",
                "--types",
                "action.enqueued",
                "--count",
                "3",
            ],
        )
        .await
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let third = pending_id(&app, "bash", "make three").await;
    let r = tokio::time::timeout(Duration::from_secs(30), tail)
        .await
        .expect("tail did not print three events")
        .unwrap();
    assert_eq!(r.code, 0, "{r:?}");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", r.stdout);
    for (line, id) in lines.iter().zip([&first, &second, &third]) {
        assert!(
            line.contains("action.enqueued") && line.contains(id.as_str()),
            "{line}"
        );
    }
    app.stop().await;
}

/// `sessions` lists the tasks with their counts, `sessions ID` shows one
/// with its actions oldest first, `--end` ends it (its grants void), and
/// an unknown session exits 5 with one line.
#[tokio::test]
async fn sessions_are_listed_shown_and_ended() {
    let app = TestApp::spawn().await;
    let (op, agent) = (app.operator.clone(), app.agent.clone());
    for detail in ["ls", "rm -rf build"] {
        let (s, a) = app
            .call(
                Method::POST,
                "/v1/actions",
                Some(&agent),
                Some(
                    json!({"tool": "bash", "detail": detail, "session": "task-1",
                    "runtime": "claude-code"}),
                ),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{a}");
    }

    let r = ag(&app, &op, &["sessions"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.starts_with("SESSION"), "{}", r.stdout);
    let row = r.stdout.lines().find(|l| l.starts_with("task-1")).unwrap();
    assert!(row.contains("agent-1") && row.contains("active"), "{row}");
    assert!(row.split_whitespace().any(|w| w == "2"), "{row}");

    let r = ag(&app, &op, &["sessions", "task-1"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("runtime claude-code"), "{}", r.stdout);
    let ls = r.stdout.find("tool:bash:ls").unwrap();
    let rm = r.stdout.find("tool:bash:rm -rf build").unwrap();
    assert!(ls < rm, "oldest first: {}", r.stdout);

    let r = ag(&app, &op, &["sessions", "task-1", "--json"]).await;
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 2);

    let r = ag(&app, &agent, &["sessions", "task-1", "--end"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("ended"), "{}", r.stdout);

    let r = ag(&app, &op, &["sessions", "nope"]).await;
    assert_eq!(r.code, 5, "{r:?}");
    assert_eq!(r.stderr.lines().count(), 1, "{r:?}");
    app.stop().await;
}

/// `sessions` shows the newest page and says there are more; `--all`
/// reads every page (each session once); `--status` and `--agent` filter.
#[tokio::test]
async fn sessions_lists_pages_and_filters() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("open")).await;
    let (op, agent) = (app.operator.clone(), app.agent.clone());
    for n in 0..205 {
        let body = json!({"tool": "bash", "detail": "ls", "session": format!("task {n:03}")});
        let (s, a) = app
            .call(Method::POST, "/v1/actions", Some(&agent), Some(body))
            .await;
        assert_eq!(s, StatusCode::CREATED, "{a}");
    }
    let r = ag(&app, &agent, &["sessions", "task 007", "--end"]).await;
    assert_eq!(r.code, 0, "{r:?}");

    let r = ag(&app, &op, &["sessions", "--json"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.json().as_array().unwrap().len(), 200);
    assert!(r.stderr.contains("--all"), "{r:?}");

    let r = ag(&app, &op, &["sessions", "--all", "--json"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let mut ids: Vec<String> = r
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 205);
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 205, "each session once");

    let r = ag(&app, &op, &["sessions", "--status", "ended"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    let rows: Vec<&str> = r.stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{}", r.stdout);
    assert!(rows[0].starts_with("task 007"), "{}", r.stdout);

    let r = ag(&app, &op, &["sessions", "--agent", "nobody"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.stdout.trim(), "no sessions");
    let r = ag(&app, &op, &["sessions", "--agent", "not an agent"]).await;
    assert_ne!(r.code, 0, "{r:?}");
    assert_eq!(r.stderr.lines().count(), 1, "{r:?}");
    assert!(r.stderr.contains("agent"), "{r:?}");
    app.stop().await;
}

/// `request --session` and `check --session` (or `ACTIONGATE_SESSION`)
/// act in a session: its grants cover them, and nothing else does.
#[tokio::test]
async fn request_and_check_act_in_a_session() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!({"allow": [], "ask": ["(?s).*"]}))
        .await;
    let (op, agent) = (app.operator.clone(), app.agent.clone());
    let (s, g) = app
        .call(
            Method::POST,
            "/v1/grants",
            Some(&op),
            Some(
                json!({"tool": "deploy", "pattern": "staging", "expires": "1h",
                        "agent": "agent-1", "session": "job-1", "uses": 1}),
            ),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{g}");
    let detail = ["--tool", "deploy", "--detail", "staging"];
    let r = ag(&app, &agent, &[&["check"][..], &detail].concat()).await;
    assert_eq!(r.code, 4, "no session: {r:?}");
    let r = ag(
        &app,
        &agent,
        &[&["check", "--session", "job-1"][..], &detail].concat(),
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let r = ag(
        &app,
        &agent,
        &[
            &["request", "--session", "job-1", "--runtime", "ci"][..],
            &detail,
        ]
        .concat(),
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    let r = ag(
        &app,
        &agent,
        &[&["request", "--json"][..], &detail].concat(),
    )
    .await;
    assert_eq!(r.code, 4, "{r:?}");
    assert!(r.json()["session"].is_null(), "{r:?}");
    let (s, list) = app
        .call(Method::GET, "/v1/actions?session=job-1", Some(&op), None)
        .await;
    assert_eq!(s, StatusCode::OK);
    let items = list["items"].as_array().unwrap();
    assert_eq!(items.len(), 1, "{list}");
    assert_eq!(items[0]["runtime"], "ci", "{list}");
    // The one use is spent: the same request in the session now asks.
    let r = ag(
        &app,
        &agent,
        &[&["request", "--session", "job-1"][..], &detail].concat(),
    )
    .await;
    assert_eq!(r.code, 4, "{r:?}");
    app.stop().await;
}

/// Grant requests are listed and decided from the CLI: pending oldest
/// first, approved narrower than asked (the grant printed), denied with a
/// reason the agent reads; deciding one twice is a 409 (exit 5).
#[tokio::test]
async fn grant_requests_are_listed_approved_and_denied() {
    let app = TestApp::spawn().await;
    register_fs(&app).await;
    let op = app.operator.clone();
    let ask = |path: &str| {
        json!({"handler": "fs", "permission": "fs.use", "scope": {"path": path},
            "reason": "publish the site", "expires": "2h"})
    };
    let mut ids = Vec::new();
    let deep = "/srv/www/site/assets/images/2026/december/gallery/../../../../../../../**";
    for path in ["/srv/www/*", "/etc/*", deep] {
        let (s, r) = app
            .call(
                Method::POST,
                "/v1/grant-requests",
                Some(&app.agent),
                Some(ask(path)),
            )
            .await;
        assert_eq!(s, StatusCode::CREATED, "{r}");
        ids.push(r["id"].as_str().unwrap().to_owned());
    }
    let r = ag(&app, &op, &["grant-requests"]).await;
    assert_eq!(r.code, 0, "{r:?}");
    // `show` takes a grant request's id too, the scope printed whole.
    let shown = ag(&app, &op, &["show", &ids[2]]).await;
    assert_eq!(shown.code, 0, "{shown:?}");
    assert!(
        shown.stdout.contains(&ids[2]) && shown.stdout.contains("../../../**"),
        "{}",
        shown.stdout
    );
    let first = r.stdout.find(&ids[0]).expect("first listed");
    let second = r.stdout.find(&ids[1]).expect("second listed");
    assert!(first < second, "oldest first: {}", r.stdout);
    assert!(r.stdout.contains("fs/fs.use"), "{}", r.stdout);
    // A scope too long for the table is printed whole below it.
    assert!(r.stdout.contains("../../../**"), "{}", r.stdout);
    let (s, r3) = app
        .call(
            Method::POST,
            &format!("/v1/grant-requests/{}/deny", ids[2]),
            Some(&op),
            Some(json!({"reason": "no"})),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{r3}");
    // `pending` says they wait.
    let r = ag(&app, &op, &["pending"]).await;
    assert!(
        r.stdout.contains("2 grant requests wait too"),
        "{}",
        r.stdout
    );

    let narrower = [
        "grant-request",
        "approve",
        &ids[0],
        "--scope",
        "path=/srv/www/blog/*",
        "--expires",
        "1h",
    ];
    let r = ag(&app, &op, &narrower).await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("approved: grant grt_"), "{}", r.stdout);
    assert!(r.stdout.contains("/srv/www/blog/*"), "{}", r.stdout);
    let r = ag(
        &app,
        &op,
        &["grant-request", "deny", &ids[1], "--reason", "not /etc"],
    )
    .await;
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.stdout.contains("denied"), "{}", r.stdout);
    let (_, seen) = app
        .call(
            Method::GET,
            &format!("/v1/grant-requests/{}", ids[1]),
            Some(&app.agent),
            None,
        )
        .await;
    assert_eq!(seen["deny_reason"], "not /etc", "{seen}");
    // Nothing pending now; deciding again is refused.
    let r = ag(&app, &op, &["grant-requests"]).await;
    assert!(r.stdout.contains("no grant requests"), "{}", r.stdout);
    let r = ag(&app, &op, &["grant-request", "deny", &ids[0]]).await;
    assert_eq!(r.code, 5, "{r:?}");
    // The agent's key may not decide.
    let agent = app.agent.clone();
    let r = ag(&app, &agent, &["grant-request", "approve", &ids[1]]).await;
    assert_eq!(r.code, 5, "{r:?}");
    app.stop().await;
}

/// A decision whose answer was lost (a 503 after the daemon made it) is
/// sent again and reported as made (exit 0), once; an approval that also grants is
/// sent once, its 503 reported (exit 5), since the daemon could not tell
/// it sent again.
#[tokio::test]
async fn a_decision_whose_answer_was_lost_is_sent_again_and_made_once() {
    let app = TestApp::spawn().await;
    let op = app.operator.clone();
    let mut ids = Vec::new();
    for detail in ["make yes", "make no", "make remembered"] {
        let (s, a) = app.request("bash", detail).await;
        assert_eq!(s, StatusCode::CREATED, "{a}");
        ids.push(a["id"].as_str().unwrap().to_owned());
    }
    let sent = |args: Vec<String>| {
        let (base, op) = (app.base.clone(), op.clone());
        async move {
            let (url, posts) = cli_support::lossy_proxy(&base).await;
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let out = run(&url, &op, &args).await;
            (out, posts.load(std::sync::atomic::Ordering::SeqCst))
        }
    };
    let (out, posts) = sent(vec!["approve".into(), ids[0].clone()]).await;
    assert_eq!((out.code, posts), (0, 2), "{out:?}");
    let (out, posts) = sent(vec!["deny".into(), ids[1].clone()]).await;
    assert_eq!((out.code, posts), (0, 2), "{out:?}");
    assert!(out.stderr.is_empty(), "{out:?}");
    let (out, posts) = sent(vec![
        "approve".into(),
        ids[2].clone(),
        "--remember".into(),
        "1h".into(),
    ])
    .await;
    assert_eq!((out.code, posts), (5, 1), "{out:?}");
    assert!(out.stderr.contains("answer lost in this test"), "{out:?}");
    for (id, status) in ids.iter().zip(["approved", "denied", "approved"]) {
        let (_, a) = app
            .call(Method::GET, &format!("/v1/actions/{id}"), Some(&op), None)
            .await;
        assert_eq!(a["status"], status, "{a}");
    }
    let (_, a) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{}", ids[0]),
            Some(&op),
            None,
        )
        .await;
    assert_eq!(a["approvals"].as_array().unwrap().len(), 1, "{a}");
    app.stop().await;
}
