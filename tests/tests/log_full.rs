//! Black-box test: a daemon whose log cannot be written (stderr on a full
//! disk, here `/dev/full`, where every write fails with `ENOSPC`) keeps
//! answering every request, counts the lines it lost on `/metrics`, and
//! stops promptly on SIGTERM.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use crate::common;
use common::client;
use common::daemon::{Daemon, agent_key, request_action, status_json};

/// `/dev/full`, opened for writing: every write fails with "no space".
fn full_log() -> std::fs::File {
    std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap()
}

/// The value of the counter `name` in a Prometheus exposition.
fn counter(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Pages the database file has now (the daemon stopped).
fn page_count(db: &std::path::Path) -> u64 {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row("PRAGMA page_count", [], |r| r.get::<_, i64>(0))
        .unwrap() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_on_a_full_disk_loses_lines_not_requests_nor_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let http = client();
    let info = ("ACTIONGATE_LOG", "info");

    // The first start prints the admin key on stderr: that fails, the key
    // is in the data dir all the same.
    let d = Daemon::start_logging_to(dir.path(), &[info], Some(full_log()));
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let (s, _, a) =
        status_json(request_action(&http, &d.base, &agent, "deploy", "first").await).await;
    assert_eq!(s, 201, "{a}");
    let db = d.database();
    d.stop_within(Duration::from_secs(5));

    // The data disk fills too (the database may grow by 30 pages).
    let cap = (page_count(&db) + 30).to_string();
    let d = Daemon::start_logging_to(
        dir.path(),
        &[
            info,
            ("ACTIONGATE_STORAGE__TEST_MAX_PAGE_COUNT", cap.as_str()),
        ],
        Some(full_log()),
    );
    let detail = "y".repeat(8 * 1024);
    let mut refused = 0;
    for i in 0..60 {
        let (s, ctype, body) =
            status_json(request_action(&http, &d.base, &agent, "deploy", &detail).await).await;
        if s == 201 {
            assert_eq!(refused, 0, "write {i} succeeded after a 507: {body}");
            continue;
        }
        assert_eq!(s, 507, "write {i}: {body}");
        assert_eq!(ctype.as_deref(), Some("application/problem+json"));
        assert_eq!(body["code"], "storage-full", "{body}");
        refused += 1;
        if refused == 5 {
            break;
        }
    }
    assert_eq!(refused, 5, "the capped database never filled");
    for _ in 0..3 {
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
    }

    let metrics = http
        .get(format!("{}/metrics", d.base))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let dropped = counter(&metrics, "actiongate_log_lines_dropped_total");
    assert!(dropped.is_some_and(|n| n >= 1.0), "{metrics}");

    d.stop_within(Duration::from_secs(5));
}
