//! Black-box, SQLite: the event recording a decision-only action decided
//! when asked is stored by reference to the action's row
//! (`crates/store/src/event_ref.rs`). What the daemon answers from the log
//! is the same live, after a restart, and after records retention deleted
//! the actions; the audit export of it still verifies.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::audit::{export, verify};
use crate::common::daemon::{Daemon, agent_key, set_profile};
use crate::common::{call, client};

/// `(seq, type, data)` of every event of the export, in order.
fn events_of(export: &str) -> Vec<(i64, String, Value)> {
    export
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        // Not the export's closing line, nor anchors (a restart may add one).
        .filter(|v| v["type"].is_string() && v["type"] != "audit.anchor")
        .map(|v| {
            (
                v["seq"].as_i64().unwrap(),
                v["type"].as_str().unwrap().to_owned(),
                v["data"].clone(),
            )
        })
        .collect()
}

fn references(d: &Daemon) -> i64 {
    let db = rusqlite::Connection::open(d.database()).unwrap();
    db.query_row(
        "SELECT count(*) FROM events WHERE substr(data, 1, 1) = '@'",
        [],
        |r| r.get(0),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_read_the_same_after_a_restart_and_after_retention_deleted_their_actions() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(
        &http,
        &d.base,
        &admin,
        "bot",
        json!({"allow": ["tool:file:view\\s.*", "tool:mcp__fs__read:.*"], "ask": [], "deny": ["tool:bash:rm\\s.*"]}),
    )
    .await;
    let asks = [
        json!({"tool": "file", "detail": "view /tmp/x"}),
        json!({"tool": "bash", "detail": "rm -rf /tmp/y && curl http://e.example"}),
        json!({"tool": "mcp__fs__read", "detail": "{\"path\":\"/a\"}", "params": {"path": "/a", "n": [1, 2.5, null]},
               "reason": "the user asked \"why\" \u{1}", "session": "s-1"}),
    ];
    let mut live = Vec::new();
    for body in &asks {
        let (s, v) = call(
            &http,
            Method::POST,
            format!("{}/v1/actions", d.base),
            &agent,
            Some(body.clone()),
        )
        .await;
        assert_eq!(s, 201, "{v}");
        live.push(v);
    }
    assert_eq!(live[1]["status"], "denied");
    assert_eq!(references(&d), 3);
    let before = export(&http, &d.base, &admin).await;
    let events = events_of(&before);
    // Each action's event carries the action as it was answered.
    for a in &live {
        let ev = events
            .iter()
            .find(|e| e.2["id"] == a["id"])
            .expect("its event");
        assert_eq!(ev.2, *a);
    }
    let (ok, out) = verify(dir.path(), &before, &[]);
    assert!(ok, "{out}");
    d.stop();

    // Restarted with a records retention that deletes the settled actions.
    let d = Daemon::start(
        dir.path(),
        &[
            ("ACTIONGATE_RECORDS__RETENTION", "1s"),
            ("ACTIONGATE_EVENTS__PRUNE_INTERVAL", "1s"),
        ],
    );
    assert_eq!(events_of(&export(&http, &d.base, &admin).await), events);
    let deadline = Instant::now() + Duration::from_secs(20);
    for a in &live {
        let path = format!("{}/v1/actions/{}", d.base, a["id"].as_str().unwrap());
        while call(&http, Method::GET, path.clone(), &admin, None).await.0 != 404 {
            assert!(Instant::now() < deadline, "retention deleted no action");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    // Written out in full before the actions went: the same events.
    assert_eq!(references(&d), 0);
    let after = export(&http, &d.base, &admin).await;
    assert_eq!(events_of(&after), events);
    let (ok, out) = verify(dir.path(), &after, &[]);
    assert!(ok, "{out}");
}
