//! Black-box: an event stream whose client stops reading pins at most
//! `events.buffer_bytes` of events, however much is published while it
//! waits for its send timeout, and loses nothing: when it reads again its
//! stream ends and it resumes from its last id without a gap. Whatever
//! walks the log (a replay, an audit anchor round, an export) reads about a
//! MiB of events at a time, not a thousand whatever their size.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::daemon::{Daemon, Keyed, agent_key, request_action, set_profile};

/// The budget under test: 4 MiB.
const BUDGET: usize = 4 * 1024 * 1024;

/// The ids of the SSE messages in `text`.
fn ids(text: &str) -> Vec<i64> {
    text.lines()
        .filter_map(|l| l.strip_prefix("id: "))
        .filter_map(|v| v.trim().parse().ok())
        .collect()
}

/// How many large actions [`post_large`] posts.
const LARGE: usize = 300;

/// Posts [`LARGE`] allowed actions with 60 KiB of detail each (~40 MB of
/// events, the detail twice in each) as `agent`; the last one's id.
async fn post_large(http: &reqwest::Client, base: &str, agent: &str) -> String {
    let detail = "x".repeat(60 * 1024);
    let mut last = String::new();
    for i in 0..LARGE {
        let resp = request_action(http, base, agent, "file", &format!("view {i} {detail}")).await;
        assert_eq!(resp.status(), 201);
        let action: serde_json::Value = resp.json().await.unwrap();
        last = action["id"].as_str().unwrap().to_owned();
    }
    last
}

/// A client that sends `head` to `k`'s daemon and never reads, with a
/// tiny receive window.
async fn stalled_client(k: &Keyed, head: &str) -> tokio::net::TcpStream {
    let addr: std::net::SocketAddr = k.d.base.trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut s = socket.connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    s
}

/// Reads `GET /v1/events` (resuming after `after`) until an event of
/// `action` arrives, within `secs` (a debug build replays ~40 MB in well
/// under a second; the margin is for a loaded CI machine); the ids seen.
async fn follow_until(k: &Keyed, after: Option<i64>, action: &str, secs: u64) -> Vec<i64> {
    let mut req = k
        .http
        .get(format!("{}/v1/events", k.d.base))
        .timeout(Duration::from_secs(secs))
        .bearer_auth(&k.operator);
    if let Some(after) = after {
        req = req.header("last-event-id", after.to_string());
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.bytes_stream();
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    // Only what arrived since the last look (and an id's length before it)
    // is searched: the text grows to ~40 MB.
    let mut looked = 0;
    while !text[looked..].contains(action) {
        looked = text.len().saturating_sub(action.len());
        while !text.is_char_boundary(looked) {
            looked -= 1;
        }
        let chunk = tokio::time::timeout_at(deadline, body.next())
            .await
            .expect("the event did not arrive")
            .expect("the stream ended")
            .unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    ids(&text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_that_stops_reading_pins_at_most_the_budget_and_loses_nothing() {
    let k = Keyed::start(&[
        ("ACTIONGATE_EVENTS__SEND_TIMEOUT", "600s"),
        ("ACTIONGATE_EVENTS__BUFFER_BYTES", &BUDGET.to_string()),
    ])
    .await;
    set_profile(&k.http, &k.d.base, &k.admin, "bot", json!("open")).await;

    // A client that sends its request and never reads. HTTP/1.0: the body
    // ends when the connection does.
    let head = format!(
        "GET /v1/events HTTP/1.0\r\nauthorization: Bearer {}\r\n\r\n",
        k.operator
    );
    let mut stalled = stalled_client(&k, &head).await;
    let before = k.d.rss_kib();

    // ~40 MB of events, ten times the budget, while the stalled client
    // holds its stream.
    let last_id = post_large(&k.http, &k.d.base, &k.agent).await;

    // What the hub holds for the stalled stream stays within the budget
    // (plus the newest batch, which is never dropped), and so does the
    // daemon's memory: without the budget it held every event published.
    let held = crate::common::metric(&k.http, &k.d.base, "actiongate_sse_buffered_bytes").await;
    assert!(
        held <= (BUDGET + 3 * 1024 * 1024) as f64,
        "the hub holds {held} bytes"
    );
    let grown_mib = k.d.rss_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 40,
        "RSS grew {grown_mib} MiB with one stalled stream"
    );
    let good = follow_until(&k, Some(0), &last_id, 240).await;
    assert!(!good.is_empty());

    // The stalled client reads again: it gets what its sockets held, then
    // the end, well before its send timeout.
    let mut got = Vec::new();
    let start = Instant::now();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match tokio::time::timeout(Duration::from_secs(20), stalled.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the stalled stream did not end ({} bytes read)", got.len()),
        }
    }
    assert!(start.elapsed() < Duration::from_secs(30));
    let text = String::from_utf8_lossy(&got);
    let seen = ids(&text);
    let stalled_last = *seen.last().expect("the stalled stream got no event at all");
    assert!(
        seen.windows(2).all(|w| w[1] == w[0] + 1),
        "the stalled stream skipped events"
    );
    // It resumes from its last id and gets every later event, in order,
    // up to the last one published.
    let resumed = follow_until(&k, Some(stalled_last), &last_id, 240).await;
    assert_eq!(
        resumed.first(),
        Some(&(stalled_last + 1)),
        "a gap at the resume"
    );
    assert!(resumed.windows(2).all(|w| w[1] == w[0] + 1));
    assert_eq!(resumed.last(), good.last());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_stalled_streams_each_pin_a_small_chunk() {
    const STALLED: usize = 150;
    let k = Keyed::start(&[
        ("ACTIONGATE_EVENTS__SEND_TIMEOUT", "600s"),
        ("ACTIONGATE_EVENTS__BUFFER_BYTES", &BUDGET.to_string()),
    ])
    .await;
    set_profile(&k.http, &k.d.base, &k.admin, "bot", json!("open")).await;
    // One agent key's 150 live streams that are never read.
    let head = format!(
        "GET /v1/events HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {}\r\n\r\n",
        k.agent
    );
    let mut stalled = Vec::new();
    for _ in 0..STALLED {
        stalled.push(stalled_client(&k, &head).await);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = k.d.peak_rss_kib();
    // Each stream hands its connection what it cannot send, and keeps it
    // until its send timeout, outside the hub's budget: at most one batch
    // (up to 64 KiB and one event) and what the connection buffers (64
    // KiB), so together a bounded amount (30-65 MiB here, with the
    // posting's own; a review saw 430 MiB for 190 streams when each kept
    // hyper's 400 KiB and batches of 1 MiB). Posted 50 at a time, events
    // commit together and go out in batches.
    let detail = "x".repeat(60 * 1024);
    let k = &k;
    for round in 0..6 {
        futures::future::join_all((0..50).map(|i| {
            let detail = format!("view {round} {i} {detail}");
            async move {
                let resp = request_action(&k.http, &k.d.base, &k.agent, "file", &detail).await;
                assert_eq!(resp.status(), 201);
            }
        }))
        .await;
    }
    let grown_mib = k.d.peak_rss_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 128,
        "the daemon's peak grew {grown_mib} MiB with {STALLED} stalled streams"
    );
    drop(stalled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_replaying_large_events_each_hold_a_small_page() {
    let k = Keyed::start(&[("ACTIONGATE_EVENTS__SEND_TIMEOUT", "600s")]).await;
    set_profile(&k.http, &k.d.base, &k.admin, "bot", json!("open")).await;
    post_large(&k.http, &k.d.base, &k.agent).await;
    let before = k.d.rss_kib();
    // Eight clients replay the whole log and do not read: each stream holds
    // what it read last and cannot send. Read 500 events at a time, that was
    // the whole log per stream.
    let head = format!(
        "GET /v1/events HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {}\r\nlast-event-id: 0\r\n\r\n",
        k.operator
    );
    let mut stalled = Vec::new();
    for _ in 0..8 {
        stalled.push(stalled_client(&k, &head).await);
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let grown_mib = k.d.rss_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 64,
        "RSS grew {grown_mib} MiB with eight stalled replays"
    );
    // They are still served: one reads on and gets the whole log.
    let mut text = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    let reader = &mut stalled[0];
    let (mut messages, mut scanned) = (0, 0);
    while messages < LARGE {
        let n = tokio::time::timeout(Duration::from_secs(20), reader.read(&mut buf))
            .await
            .expect("the replay stopped")
            .unwrap();
        assert!(n > 0, "the replay ended early");
        text.extend_from_slice(&buf[..n]);
        messages += text[scanned..]
            .windows(5)
            .filter(|w| w == b"\nid: ")
            .count();
        scanned = text.len().saturating_sub(4);
    }
}

/// An agent key's own log of actions with the largest params (about 0.6
/// MiB of event each): forty stalled replays of it each hold about one
/// event. Read sixteen at a time, each held ~10 MiB, and the 200 streams
/// one key may open a couple of GiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_replays_of_the_largest_events_each_hold_about_one() {
    const STREAMS: usize = 40;
    let k = Keyed::start(&[("ACTIONGATE_EVENTS__SEND_TIMEOUT", "600s")]).await;
    set_profile(&k.http, &k.d.base, &k.admin, "bot", json!("open")).await;
    let params: serde_json::Map<String, serde_json::Value> = (0..900)
        .map(|i| (format!("k{i}"), json!("v".repeat(240))))
        .collect();
    for i in 0..40 {
        let resp = k
            .http
            .post(format!("{}/v1/actions", k.d.base))
            .bearer_auth(&k.agent)
            .json(
                &json!({"tool": "file", "detail": format!("view {i} {}", "a".repeat(50_000)),
                          "params": params}),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201);
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = k.d.rss_kib();
    let head = format!(
        "GET /v1/events HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {}\r\nlast-event-id: 0\r\n\r\n",
        k.agent
    );
    let mut stalled = Vec::new();
    for _ in 0..STREAMS {
        stalled.push(stalled_client(&k, &head).await);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let grown_mib = k.d.rss_kib().saturating_sub(before) / 1024;
    assert!(
        grown_mib < 100,
        "RSS grew {grown_mib} MiB with {STREAMS} stalled replays of large events"
    );
    drop(stalled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anchor_round_and_an_audit_export_read_large_events_a_mib_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let off = [("ACTIONGATE_EVENTS__AUDIT_ANCHOR_INTERVAL", "off")];
    let d = Daemon::start(dir.path(), &off);
    let http = crate::common::client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(&http, &d.base, &admin, "bot", json!("open")).await;
    // None anchored yet.
    post_large(&http, &d.base, &agent).await;
    d.stop();
    // Restarted with anchors every second: its first round hashes all of
    // them, which read whole 1,000 at a time took the whole log into memory.
    let d = Daemon::start(
        dir.path(),
        &[("ACTIONGATE_EVENTS__AUDIT_ANCHOR_INTERVAL", "1s")],
    );
    let before = d.peak_rss_kib();
    let deadline = Instant::now() + Duration::from_secs(20);
    let db = rusqlite::Connection::open(d.database()).unwrap();
    loop {
        let anchors: i64 = db
            .query_row(
                "SELECT count(*) FROM events WHERE type = 'audit.anchor'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        if anchors > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no anchor was written");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let grown_mib = d.peak_rss_kib().saturating_sub(before) / 1024;
    assert!(grown_mib < 20, "the anchor round took {grown_mib} MiB");

    // Exporting the audit log reads it the same way: all of it arrives,
    // a page of about a MiB at a time.
    let before = d.peak_rss_kib();
    let resp = crate::common::client()
        .get(format!("{}/v1/audit", d.base))
        .bearer_auth(d.admin_key())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.bytes_stream();
    let (mut lines, mut bytes) = (0usize, 0usize);
    while let Some(chunk) = body.next().await {
        let chunk = chunk.unwrap();
        lines += chunk.iter().filter(|&&b| b == b'\n').count();
        bytes += chunk.len();
    }
    assert!(lines > LARGE, "{lines} lines exported");
    assert!(bytes > LARGE * 60 * 1024, "{bytes} bytes exported");
    let grown_mib = d.peak_rss_kib().saturating_sub(before) / 1024;
    assert!(grown_mib < 20, "the export took {grown_mib} MiB");
}
