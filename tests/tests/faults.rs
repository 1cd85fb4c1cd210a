//! Black-box tests: database faults get the right answer. A database locked
//! by another process is 503 with `Retry-After` within seconds; a full
//! database is 507, `/readyz` says so until a write succeeds again, and the
//! log says it once without spurious rollback errors; `/readyz` says not
//! ready, within a second, while another process holds the write lock.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common;
use common::client;
use common::daemon::{Daemon, agent_key, request_action, status_json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_locked_by_another_process_is_503_with_retry_after_in_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let (s, _, a) =
        status_json(request_action(&http, &d.base, &agent, "deploy", "first").await).await;
    assert_eq!(s, 201, "{a}");

    // Another process (this one) takes the write lock and keeps it.
    let other = rusqlite::Connection::open(d.database()).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();

    let started = Instant::now();
    let resp = request_action(&http, &d.base, &agent, "deploy", "while locked").await;
    let took = started.elapsed();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let (s, ctype, body) = status_json(resp).await;
    assert_eq!(s, 503, "{body}");
    assert_eq!(ctype.as_deref(), Some("application/problem+json"));
    assert_eq!(body["code"], "database-busy", "{body}");
    let secs: u64 = retry_after.expect("Retry-After").parse().unwrap();
    assert!((1..=30).contains(&secs), "Retry-After {secs}");
    assert!(
        took < Duration::from_secs(9),
        "answered after {took:?}: more than one busy timeout"
    );
    // Reads go on meanwhile (WAL).
    let (s, _) = common::call(
        &http,
        reqwest::Method::GET,
        format!("{}/v1/actions", d.base),
        &agent,
        None,
    )
    .await;
    assert_eq!(s, 200);

    other.execute_batch("ROLLBACK").unwrap();
    drop(other);
    let (s, _, a) =
        status_json(request_action(&http, &d.base, &agent, "deploy", "after").await).await;
    assert_eq!(s, 201, "{a}");
    // The refused request left nothing behind.
    let (_, list) = common::call(
        &http,
        reqwest::Method::GET,
        format!("{}/v1/actions", d.base),
        &agent,
        None,
    )
    .await;
    let text = list.to_string();
    assert!(!text.contains("while locked"), "{text}");
    d.stop();
}

/// Requests queued behind a write that finds the database locked are
/// answered busy with it, not each after a busy timeout of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_to_a_locked_database_are_all_busy_within_two_timeouts() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let (s, _, a) =
        status_json(request_action(&http, &d.base, &agent, "deploy", "first").await).await;
    assert_eq!(s, 201, "{a}");

    let other = rusqlite::Connection::open(d.database()).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let started = Instant::now();
    let requests = (0..20).map(|i| {
        let (http, base, agent) = (http.clone(), d.base.clone(), agent.clone());
        tokio::spawn(async move {
            let detail = format!("locked {i}");
            let resp = request_action(&http, &base, &agent, "deploy", &detail).await;
            let (s, _, body) = status_json(resp).await;
            (s, body, started.elapsed())
        })
    });
    for r in futures::future::join_all(requests).await {
        let (s, body, took) = r.unwrap();
        assert_eq!(s, 503, "{body}");
        assert_eq!(body["code"], "database-busy", "{body}");
        // Two busy timeouts (5 s each) and some slack for a loaded machine.
        assert!(took < Duration::from_secs(14), "answered after {took:?}");
    }
    other.execute_batch("ROLLBACK").unwrap();
    d.stop();
}

/// Pages the database file has now (the daemon stopped).
fn page_count(db: &std::path::Path) -> u64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("PRAGMA page_count", [], |r| r.get::<_, i64>(0))
        .unwrap() as u64
}

/// A handler whose description takes `bytes` of the database, so replacing
/// it with a short one frees that much.
fn handler(description: String) -> serde_json::Value {
    json!({
        "id": "ballast",
        "name": "Ballast",
        "url": "http://127.0.0.1:9/none",
        "description": description,
        "permissions": [{"name": "use", "parameters_schema": {"type": "object"}}],
        "actions": [{"name": "go", "permission": "use",
                     "params_schema": {"type": "object"}}],
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_database_is_507_and_not_ready_until_a_write_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let http = client();
    // First start: keys, and a large handler to free space with later.
    let d = Daemon::start(dir.path(), &[]);
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let (s, h) = common::call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/handlers", d.base),
        &admin,
        Some(handler("x".repeat(400 * 1024))),
    )
    .await;
    assert_eq!(s, 201, "{h}");
    let db = d.database();
    d.stop();

    // Second start: the database may grow by 30 pages (120 KiB) at most.
    let cap = (page_count(&db) + 30).to_string();
    let d = Daemon::start(
        dir.path(),
        &[("ACTIONGATE_STORAGE__TEST_MAX_PAGE_COUNT", cap.as_str())],
    );
    let (s, _) = common::call(
        &http,
        reqwest::Method::GET,
        format!("{}/readyz", d.base),
        "",
        None,
    )
    .await;
    assert_eq!(s, 200);

    let detail = "y".repeat(8 * 1024);
    let mut full = None;
    for i in 0..200 {
        let (s, ctype, body) =
            status_json(request_action(&http, &d.base, &agent, "deploy", &detail).await).await;
        if s == 201 {
            continue;
        }
        assert_eq!(s, 507, "write {i}: {body}");
        assert_eq!(ctype.as_deref(), Some("application/problem+json"));
        full = Some(body);
        break;
    }
    let body = full.expect("the capped database never filled");
    assert_eq!(body["code"], "storage-full", "{body}");
    assert!(body["detail"].as_str().unwrap().contains("full"), "{body}");
    // A few more writes fail the same way; reads go on.
    for _ in 0..3 {
        let (s, _, body) =
            status_json(request_action(&http, &d.base, &agent, "deploy", &detail).await).await;
        assert_eq!(s, 507, "{body}");
    }
    let (s, list) = common::call(
        &http,
        reqwest::Method::GET,
        format!("{}/v1/actions?limit=1", d.base),
        &agent,
        None,
    )
    .await;
    assert_eq!(s, 200, "{list}");
    let (s, ready) = common::call(
        &http,
        reqwest::Method::GET,
        format!("{}/readyz", d.base),
        "",
        None,
    )
    .await;
    assert_eq!(s, 503, "{ready}");
    assert!(
        ready["detail"].as_str().unwrap().contains("full"),
        "{ready}"
    );

    // Space is freed (the large handler shrinks): the write succeeds and
    // the daemon is ready again.
    let (s, h) = common::call(
        &http,
        reqwest::Method::PUT,
        format!("{}/v1/handlers/ballast", d.base),
        &admin,
        Some(handler("small".to_owned())),
    )
    .await;
    assert_eq!(s, 200, "{h}");
    let (s, ready) = common::call(
        &http,
        reqwest::Method::GET,
        format!("{}/readyz", d.base),
        "",
        None,
    )
    .await;
    assert_eq!(s, 200, "{ready}");
    let (s, _, a) =
        status_json(request_action(&http, &d.base, &agent, "deploy", "small").await).await;
    assert_eq!(s, 201, "{a}");

    // Give the log a moment, then read it: the full disk once, no spurious
    // rollback errors, no bare internal errors.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let log = d.stderr_lines();
    let said_full = log.iter().filter(|l| l.contains("disk is full")).count();
    assert_eq!(said_full, 1, "{log:#?}");
    assert!(
        !log.iter().any(|l| l.contains("rollback failed")),
        "{log:#?}"
    );
    assert!(!log.iter().any(|l| l.contains("store error")), "{log:#?}");
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_says_not_ready_quickly_while_another_process_holds_the_write_lock() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let ready = || async {
        let asked = Instant::now();
        let (s, body) = common::call(
            &http,
            reqwest::Method::GET,
            format!("{}/readyz", d.base),
            "",
            None,
        )
        .await;
        (s, body, asked.elapsed())
    };
    let (s, body, _) = ready().await;
    assert_eq!(s, 200, "{body}");

    let other = rusqlite::Connection::open(d.database()).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let (s, body, took) = ready().await;
    assert_eq!(s, 503, "{body}");
    assert!(
        body["detail"].as_str().unwrap().contains("locked"),
        "{body}"
    );
    assert!(took < Duration::from_secs(1), "/readyz took {took:?}");

    other.execute_batch("ROLLBACK").unwrap();
    let (s, body, _) = ready().await;
    assert_eq!(s, 200, "{body}");
    drop(other);
    d.stop();
}
