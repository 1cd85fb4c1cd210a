//! Black-box tests: deep JSON cannot poison the audit. Free-form JSON
//! (params, results, scopes) nests at most 64 levels: deeper is a 422
//! naming the field, with nothing stored; an executor's answer nested
//! deeper is kept as text. An event already stored too deep to render
//! (written before the limit, or around the daemon) is exported as raw
//! text and pruned like any other: export, verify and retention go on.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::audit::{export, verify};
use crate::common;
use common::daemon::{Daemon, agent_key, register_handler, role_key, set_profile};
use common::raw_http::{After, RawServer, answer};
use common::{call, client};

/// `levels` nested arrays around a number, as text.
fn nested_text(levels: usize) -> String {
    format!("{}1{}", "[".repeat(levels), "]".repeat(levels))
}

fn nested(levels: usize) -> Value {
    serde_json::from_str(&nested_text(levels.min(120))).unwrap()
}

fn handler(url: &str) -> Value {
    json!({
        "id": "files", "name": "Files", "url": url, "timeout": "2s",
        "permissions": [{"name": "fs.write", "parameters_schema": {"type": "object", "properties": {"path": {}}}}],
        "actions": [{"name": "write", "permission": "fs.write", "params_schema": {"type": "object"}}]
    })
}

/// Posts `body` (text) as JSON; the status and the problem's fields.
async fn post_text(url: String, key: &str, body: String) -> (u16, Value) {
    let resp = client()
        .post(url)
        .bearer_auth(key)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

fn names_field(problem: &Value, field: &str) -> bool {
    problem["errors"]
        .as_array()
        .is_some_and(|e| e.iter().any(|x| x["field"] == field))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_nested_past_64_levels_is_422_naming_the_field_and_nothing_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    register_handler(&http, &d.base, &admin, handler("http://127.0.0.1:9/hook")).await;

    // A decision-only action, approved: the agent reports its outcome.
    let (s, a) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions", d.base),
        &agent,
        Some(json!({"tool": "deploy", "detail": "prod"})),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    let id = a["id"].as_str().unwrap().to_owned();
    let (s, a) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions/{id}/approve", d.base),
        &operator,
        Some(json!({})),
    )
    .await;
    assert_eq!(s, 200, "{a}");

    // 126 levels (what the request parser alone allows), 65, and past
    // the parser's own limit: refused, naming the field.
    for levels in [126, 65, 300] {
        let body = format!(
            r#"{{"status":"completed","result":{}}}"#,
            nested_text(levels)
        );
        let (s, p) = post_text(format!("{}/v1/actions/{id}/outcome", d.base), &agent, body).await;
        assert_eq!(s, 422, "{levels} levels: {p}");
        assert!(names_field(&p, "result"), "{p}");
    }
    let (_, a) = call(
        &http,
        reqwest::Method::GET,
        format!("{}/v1/actions/{id}", d.base),
        &agent,
        None,
    )
    .await;
    assert_eq!(a["status"], "approved", "nothing changed: {a}");

    // Params of a handler action and a grant request's scope: the same.
    let body = format!(
        r#"{{"handler":"files","action":"write","params":{{"deep":{}}}}}"#,
        nested_text(100)
    );
    let (s, p) = post_text(format!("{}/v1/actions", d.base), &agent, body).await;
    assert_eq!(s, 422, "{p}");
    assert!(names_field(&p, "params"), "{p}");
    let body = format!(
        r#"{{"handler":"files","permission":"fs.write","reason":"r","scope":{{"path":{}}}}}"#,
        nested_text(100)
    );
    let (s, p) = post_text(format!("{}/v1/grant-requests", d.base), &agent, body).await;
    assert_eq!(s, 422, "{p}");
    assert!(names_field(&p, "scope"), "{p}");

    // 64 levels are accepted, and the export of all of it verifies.
    let (s, a) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions/{id}/outcome", d.base),
        &agent,
        Some(json!({"status": "completed", "result": nested(64)})),
    )
    .await;
    assert_eq!(s, 200, "{a}");
    let text = export(&http, &d.base, &operator).await;
    let (ok, out) = verify(dir.path(), &text, &[]);
    assert!(ok, "{out}");
    // Only one action was stored, and no grant request.
    let (_, list) = call(
        &http,
        reqwest::Method::GET,
        format!("{}/v1/actions", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{list}");
    let (_, reqs) = call(
        &http,
        reqwest::Method::GET,
        format!("{}/v1/grant-requests", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(reqs.as_array().map(Vec::len), Some(0), "{reqs}");
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_executor_answer_nested_too_deep_is_kept_as_text_and_the_audit_verifies() {
    let deep = nested_text(126);
    let executor = RawServer::start(move |_, _| {
        (
            answer("200 OK", &[("content-type", "application/json")], &deep),
            After::Close,
        )
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    set_profile(&http, &d.base, &admin, "bot", json!("open")).await;
    let hook = format!("{}/hook", executor.base);
    register_handler(&http, &d.base, &admin, handler(&hook)).await;
    let (s, a) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions?wait=30", d.base),
        &agent,
        Some(json!({"handler": "files", "action": "write", "params": {"path": "/x"}})),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    assert_eq!(a["status"], "completed", "{a}");
    assert!(
        a["outcome"]["result"]["text"]
            .as_str()
            .is_some_and(|t| t.starts_with("[[[")),
        "{a}"
    );
    let text = export(&http, &d.base, &operator).await;
    let (ok, out) = verify(dir.path(), &text, &[]);
    assert!(ok, "{out}");
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_stored_too_deep_is_exported_raw_and_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("ACTIONGATE_EVENTS__RETENTION", "3s"),
        ("ACTIONGATE_EVENTS__PRUNE_INTERVAL", "1s"),
    ];
    let d = Daemon::start(dir.path(), &env);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    let (s, _) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions", d.base),
        &agent,
        Some(json!({"tool": "deploy", "detail": "before"})),
    )
    .await;
    assert_eq!(s, 201);

    // An event as a daemon without the limit stored it: its data nests
    // 200 levels, past what any JSON reader here takes as a tree.
    let deep = format!(r#"{{"id":"legacy","result":{}}}"#, nested_text(200));
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    {
        let db = rusqlite::Connection::open(d.database()).unwrap();
        db.busy_timeout(Duration::from_secs(5)).unwrap();
        db.execute(
            "INSERT INTO events (id, type, at, agent, data) VALUES ('legacy-event', 'action.completed', ?1, 'bot', ?2)",
            rusqlite::params![now_ms, deep],
        )
        .unwrap();
    }
    let (s, _) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions", d.base),
        &agent,
        Some(json!({"tool": "deploy", "detail": "after"})),
    )
    .await;
    assert_eq!(s, 201);

    let text = export(&http, &d.base, &operator).await;
    let raw_line = text
        .lines()
        .find(|l| l.contains("legacy-event"))
        .unwrap_or_else(|| panic!("the deep event is not in the export:\n{text}"));
    let line: Value = serde_json::from_str(raw_line).unwrap();
    assert_eq!(line["data_raw"].as_str(), Some(deep.as_str()));
    assert!(line.get("data").is_none(), "{raw_line}");
    assert!(text.contains("\"after\""), "the export went on past it");
    let (ok, out) = verify(dir.path(), &text, &[]);
    assert!(ok, "{out}");

    // Retention prunes past it.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let db = rusqlite::Connection::open(d.database()).unwrap();
        let left: i64 = db
            .query_row(
                "SELECT COUNT(*) FROM events WHERE id = 'legacy-event'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        if left == 0 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "retention never pruned the deep event; log: {:?}",
            d.stderr_lines()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    d.stop();
}
