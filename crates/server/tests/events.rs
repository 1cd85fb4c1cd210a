//! Events over real HTTP: SSE streams that resume, notification webhooks,
//! the audit chain and retention.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::TestApp;
use eventsource_stream::{Event as SseEvent, Eventsource};
use futures::{Stream, StreamExt};
use rand::Rng;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

type SseStream = std::pin::Pin<Box<dyn Stream<Item = SseEvent> + Send>>;

/// Opens an event stream at `path` with `key`, resuming after `last`.
async fn open(app: &TestApp, key: &str, path: &str, last: Option<i64>) -> SseStream {
    let mut req = app
        .client
        .get(format!("{}{path}", app.base))
        .bearer_auth(key);
    if let Some(id) = last {
        req = req.header("last-event-id", id.to_string());
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), StatusCode::OK, "{path}");
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    Box::pin(
        resp.bytes_stream()
            .eventsource()
            .take_while(|r| futures::future::ready(r.is_ok()))
            .map(|r| r.unwrap()),
    )
}

async fn next(stream: &mut SseStream, wait: Duration) -> Option<SseEvent> {
    tokio::time::timeout(wait, stream.next())
        .await
        .ok()
        .flatten()
}

fn seq(ev: &SseEvent) -> i64 {
    ev.id.parse().unwrap()
}

async fn request_as(app: &TestApp, key: &str, tool: &str, detail: &str) -> Value {
    let (status, body) = app
        .call(
            Method::POST,
            "/v1/actions",
            Some(key),
            Some(json!({"tool": tool, "detail": detail})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

/// Every event in the log, from the audit export.
async fn all_events(app: &TestApp) -> Vec<Value> {
    let text = audit_text(app, "").await;
    // The last line is the export's final anchor, not an event.
    text.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l.get("audit").is_none())
        .collect()
}

async fn audit_text(app: &TestApp, query: &str) -> String {
    let resp = app
        .send(
            Method::GET,
            &format!("/v1/audit{query}"),
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    resp.text().await.unwrap()
}

/// Reads `key`'s stream, cutting it `cuts` times at random points and
/// resuming from the last id, until it holds `expected` events (known once
/// production ends). Returns the seqs in the order received.
async fn cut_and_resume(
    app: Arc<TestApp>,
    key: String,
    cuts: usize,
    mut expected: tokio::sync::watch::Receiver<Option<usize>>,
) -> (Vec<i64>, usize) {
    let mut got: Vec<i64> = Vec::new();
    let mut last = 0;
    let mut cut = 0;
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        assert!(
            Instant::now() < deadline,
            "timed out with {} events",
            got.len()
        );
        if let Some(n) = *expected.borrow_and_update()
            && got.len() >= n
        {
            return (got, cut);
        }
        let mut stream = open(&app, &key, "/v1/events", Some(last)).await;
        let budget = if cut < cuts {
            rand::rng().random_range(1..=60)
        } else {
            usize::MAX
        };
        let mut read = 0;
        while read < budget {
            match next(&mut stream, Duration::from_millis(300)).await {
                Some(ev) => {
                    last = seq(&ev);
                    got.push(last);
                    read += 1;
                }
                None => break,
            }
            if let Some(n) = *expected.borrow_and_update()
                && got.len() >= n
            {
                return (got, cut);
            }
        }
        if read >= budget {
            cut += 1;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_under_load_delivers_every_visible_event_once_in_order() {
    let app = Arc::new(TestApp::spawn().await);
    app.profile("agent-1", json!("open")).await;
    app.profile("agent-2", json!("open")).await;
    let agent2 = app.key("agent", Some("agent-2")).await;
    let (tx, rx) = tokio::sync::watch::channel(None);
    let (op_tx, op_rx) = tokio::sync::watch::channel(None);
    let agent_reader = tokio::spawn(cut_and_resume(app.clone(), app.agent.clone(), 50, rx));
    let operator_reader =
        tokio::spawn(cut_and_resume(app.clone(), app.operator.clone(), 50, op_rx));

    // 5,000 events from two agents, 32 requests at a time.
    let producer = {
        let app = app.clone();
        let agent2 = agent2.clone();
        async move {
            futures::stream::iter(0..5000)
                .for_each_concurrent(32, |i| {
                    let app = app.clone();
                    let key = if i % 2 == 0 {
                        app.agent.clone()
                    } else {
                        agent2.clone()
                    };
                    async move {
                        request_as(&app, &key, "file", &format!("view f{i}")).await;
                    }
                })
                .await;
        }
    };
    producer.await;
    let events = all_events(&app).await;
    assert_eq!(events.len(), 5000);
    let mine: Vec<i64> = events
        .iter()
        .filter(|e| e["agent"] == "agent-1")
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    let every: Vec<i64> = events.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    tx.send(Some(mine.len())).unwrap();
    op_tx.send(Some(every.len())).unwrap();

    let (got, cuts) = agent_reader.await.unwrap();
    assert_eq!(got.len(), mine.len(), "agent stream: wrong count");
    assert_eq!(got, mine, "agent stream: gap, duplicate or disorder");
    assert_eq!(cuts, 50, "the agent's stream was cut {cuts} times");
    let (got, cuts) = operator_reader.await.unwrap();
    assert_eq!(got, every, "operator stream: gap, duplicate or disorder");
    assert_eq!(cuts, 50, "the operator's stream was cut {cuts} times");
    Arc::try_unwrap(app).ok().unwrap().stop().await;
}

#[tokio::test]
async fn agents_see_only_their_own_events_and_operators_see_all() {
    let app = TestApp::spawn().await;
    let agent2 = app.key("agent", Some("agent-2")).await;
    let mut a1 = open(&app, &app.agent, "/v1/events", None).await;
    let mut a2 = open(&app, &agent2, "/v1/events", None).await;
    let mut op = open(&app, &app.operator, "/v1/events", None).await;
    let one = request_as(&app, &app.agent, "bash", "make one").await;
    let two = request_as(&app, &agent2, "bash", "make two").await;

    let ev = next(&mut a1, Duration::from_secs(5)).await.unwrap();
    let data: Value = serde_json::from_str(&ev.data).unwrap();
    assert_eq!(ev.event, "action.enqueued");
    assert_eq!(data["action_id"], one["id"]);
    assert_eq!(data["agent"], "agent-1");
    assert_eq!(data["data"]["detail"], "make one");
    assert_eq!(data["seq"].as_i64().unwrap(), seq(&ev));
    for key in ["id", "type", "at"] {
        assert!(data.get(key).is_some(), "{key} missing: {data}");
    }

    let ev = next(&mut a2, Duration::from_secs(5)).await.unwrap();
    let data: Value = serde_json::from_str(&ev.data).unwrap();
    assert_eq!(data["action_id"], two["id"]);

    let mut seen = Vec::new();
    for _ in 0..2 {
        let ev = next(&mut op, Duration::from_secs(5)).await.unwrap();
        seen.push(serde_json::from_str::<Value>(&ev.data).unwrap()["agent"].clone());
    }
    assert_eq!(seen, vec![json!("agent-1"), json!("agent-2")]);
    // Nothing of the other agent's arrives on an agent's stream, live or replayed.
    assert!(next(&mut a1, Duration::from_millis(300)).await.is_none());
    let mut replay = open(&app, &app.agent, "/v1/events", Some(0)).await;
    let ev = next(&mut replay, Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        serde_json::from_str::<Value>(&ev.data).unwrap()["agent"],
        "agent-1"
    );
    assert!(
        next(&mut replay, Duration::from_millis(300))
            .await
            .is_none()
    );
    app.stop().await;
}

/// A stream is authorized when it opens; revoking its key ends it, so a
/// revoked key sees nothing committed after.
#[tokio::test]
async fn revoking_a_key_ends_the_streams_it_holds_open() {
    let app = TestApp::spawn().await;
    let (op_id, op_key) = app.issue("operator", None).await;
    let (agent_id, agent_key) = app.issue("agent", Some("agent-1")).await;
    let pending = request_as(&app, &app.agent, "bash", "make").await;
    let id = pending["id"].as_str().unwrap().to_owned();
    let mut log = open(&app, &op_key, "/v1/events", None).await;
    let mut one = open(&app, &agent_key, &format!("/v1/actions/{id}/events"), None).await;
    let ev = next(&mut one, Duration::from_secs(5)).await.unwrap();
    assert_eq!(ev.event, "action.enqueued");
    // A stream of a key that stays is not disturbed by another's revocation.
    let mut kept = open(&app, &app.operator, "/v1/events", None).await;
    for key_id in [&op_id, &agent_id] {
        let (status, body) = app
            .call(
                Method::DELETE,
                &format!("/v1/keys/{key_id}"),
                Some(&app.admin),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    for (name, stream) in [("/v1/events", &mut log), ("action events", &mut one)] {
        let end = tokio::time::timeout(Duration::from_secs(5), stream.next()).await;
        assert!(matches!(end, Ok(None)), "{name}: the stream did not end");
    }
    let (status, _) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/approve"),
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let ev = next(&mut kept, Duration::from_secs(5)).await.unwrap();
    assert_eq!(ev.event, "action.approved");
    // Reconnecting with the revoked key is refused.
    let resp = app
        .client
        .get(format!("{}/v1/events", app.base))
        .bearer_auth(&op_key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    app.stop().await;
}

/// A long-poll is authorized when it starts; revoking its key ends it at
/// once with a 401 problem: reading an action, requesting one and asking
/// for a permission, each with `?wait=`. Another key's poll waits on.
#[tokio::test]
async fn revoking_a_key_ends_its_long_polls_with_401() {
    let app = TestApp::spawn().await;
    let (s, body) = app
        .call(
            Method::POST,
            "/v1/handlers",
            Some(&app.admin),
            Some(json!({
                "id": "mail", "name": "Mailer", "url": "http://127.0.0.1:9/hook",
                "permissions": [{"name": "email.send", "description": "d", "parameters_schema": {"type": "object"}}],
                "actions": [{"name": "send", "description": "d", "permission": "email.send", "params_schema": {"type": "object"}}]
            })),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
    let (op_id, op_key) = app.issue("operator", None).await;
    let (agent_id, agent_key) = app.issue("agent", Some("agent-1")).await;
    let pending = request_as(&app, &app.agent, "bash", "make").await;
    let id = pending["id"].as_str().unwrap().to_owned();
    let (long, short) = (
        format!("/v1/actions/{id}?wait=30"),
        format!("/v1/actions/{id}?wait=3"),
    );
    let start = Instant::now();
    let timed = |fut| async move {
        let (s, body): (StatusCode, Value) = fut.await;
        (s, body, start.elapsed())
    };
    let read = timed(app.call(Method::GET, &long, Some(&op_key), None));
    let request = timed(app.call(
        Method::POST,
        "/v1/actions?wait=30",
        Some(&agent_key),
        Some(json!({"tool": "bash", "detail": "make"})),
    ));
    let ask = timed(app.call(
        Method::POST,
        "/v1/grant-requests?wait=30",
        Some(&agent_key),
        Some(json!({"handler": "mail", "permission": "email.send", "scope": {}, "reason": "r"})),
    ));
    let kept = timed(app.call(Method::GET, &short, Some(&app.operator), None));
    let revoke = async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        for key_id in [&op_id, &agent_id] {
            let (s, body) = app
                .call(
                    Method::DELETE,
                    &format!("/v1/keys/{key_id}"),
                    Some(&app.admin),
                    None,
                )
                .await;
            assert_eq!(s, StatusCode::OK, "{body}");
        }
    };
    let (read, request, ask, kept, ()) = tokio::join!(read, request, ask, kept, revoke);
    for (name, (s, body, took)) in [("read", read), ("request", request), ("ask", ask)] {
        assert_eq!(s, StatusCode::UNAUTHORIZED, "{name}: {body}");
        assert!(
            body["detail"].as_str().unwrap().contains("revoked"),
            "{body}"
        );
        // Ended by the revocation, long before the 30 s wait.
        assert!(took < Duration::from_secs(10), "{name} took {took:?}");
    }
    let (s, body, took) = kept;
    assert_eq!(s, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "pending");
    assert!(took >= Duration::from_secs(3), "{took:?}");
    app.stop().await;
}

#[tokio::test]
async fn type_filters_pick_events_and_unknown_types_are_rejected() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("standard")).await;
    request_as(&app, &app.agent, "file", "view a").await; // approved
    request_as(&app, &app.agent, "self_edit", "x").await; // denied
    request_as(&app, &app.agent, "bash", "make").await; // enqueued

    let mut denied = open(
        &app,
        &app.operator,
        "/v1/events?types=action.denied",
        Some(0),
    )
    .await;
    let ev = next(&mut denied, Duration::from_secs(5)).await.unwrap();
    assert_eq!(ev.event, "action.denied");
    assert!(
        next(&mut denied, Duration::from_millis(300))
            .await
            .is_none()
    );

    let mut two = open(
        &app,
        &app.operator,
        "/v1/events?types=action.approved,action.enqueued",
        Some(0),
    )
    .await;
    let kinds = [
        next(&mut two, Duration::from_secs(5)).await.unwrap().event,
        next(&mut two, Duration::from_secs(5)).await.unwrap().event,
    ];
    assert_eq!(kinds, ["action.approved", "action.enqueued"]);

    let mut prefix = open(&app, &app.operator, "/v1/events?types=action.*", Some(0)).await;
    for _ in 0..3 {
        assert!(next(&mut prefix, Duration::from_secs(5)).await.is_some());
    }
    let mut grants = open(&app, &app.operator, "/v1/events?types=grant.*", Some(0)).await;
    assert!(
        next(&mut grants, Duration::from_millis(300))
            .await
            .is_none()
    );

    // The query's last_event_id works like the header; the header wins.
    let resp = app
        .client
        .get(format!("{}/v1/events?last_event_id=2", app.base))
        .bearer_auth(&app.operator)
        .header("last-event-id", "1")
        .send()
        .await
        .unwrap();
    let mut s: SseStream = Box::pin(resp.bytes_stream().eventsource().map(|r| r.unwrap()));
    assert_eq!(seq(&next(&mut s, Duration::from_secs(5)).await.unwrap()), 2);

    for bad in [
        "?types=action.aproved",
        "?types=nothing.*",
        "?last_event_id=-1",
    ] {
        let (status, body) = app
            .call(
                Method::GET,
                &format!("/v1/events{bad}"),
                Some(&app.operator),
                None,
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {body}");
        assert_eq!(body["code"], "validation");
    }
    let resp = app
        .client
        .get(format!("{}/v1/events", app.base))
        .bearer_auth(&app.operator)
        .header("last-event-id", "abc")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNPROCESSABLE_ENTITY);
    let (status, _) = app.call(Method::GET, "/v1/events", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    app.stop().await;
}

#[tokio::test]
async fn action_stream_replays_history_and_closes_when_the_action_settles() {
    let app = TestApp::spawn().await;
    let pending = request_as(&app, &app.agent, "bash", "make").await;
    let id = pending["id"].as_str().unwrap().to_owned();
    let other = request_as(&app, &app.agent, "bash", "other").await;
    let mut s = open(&app, &app.agent, &format!("/v1/actions/{id}/events"), None).await;
    let ev = next(&mut s, Duration::from_secs(5)).await.unwrap();
    assert_eq!(ev.event, "action.enqueued");
    // Another action's change does not show, nor end the stream.
    let (status, _) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{}/deny", other["id"].as_str().unwrap()),
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(next(&mut s, Duration::from_millis(300)).await.is_none());
    let (status, _) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/approve"),
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let ev = next(&mut s, Duration::from_secs(5)).await.unwrap();
    assert_eq!(ev.event, "action.approved");
    // Settled: the stream ends.
    let end = tokio::time::timeout(Duration::from_secs(5), s.next()).await;
    assert!(matches!(end, Ok(None)), "the stream did not end");

    // A settled action: its history, then the end.
    let mut s = open(
        &app,
        &app.operator,
        &format!("/v1/actions/{id}/events"),
        None,
    )
    .await;
    let kinds: Vec<String> = s.by_ref().map(|e| e.event).collect().await;
    assert_eq!(kinds, ["action.enqueued", "action.approved"]);

    // Another agent's action is not found.
    let agent2 = app.key("agent", Some("agent-2")).await;
    let (status, body) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{id}/events"),
            Some(&agent2),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    app.stop().await;
}

/// The action ids of the events in one chunk of a stream.
fn action_ids(chunk: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(chunk)
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .filter_map(|v| v["action_id"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_committed_within_the_coalescing_period_reach_a_stream_together() {
    let app = TestApp::spawn_with(|s| {
        s.events.coalesce = "1500ms".parse().unwrap();
        s.events.coalesce_per_stream = "5s".parse().unwrap();
    })
    .await;
    app.profile("agent-1", json!("open")).await;
    let resp = app
        .send(Method::GET, "/v1/events", Some(&app.operator), None)
        .await;
    assert_eq!(resp.status(), StatusCode::OK);
    let mut chunks = Box::pin(resp.bytes_stream());
    let mut next_chunk = async || {
        tokio::time::timeout(Duration::from_secs(10), chunks.next())
            .await
            .expect("a chunk in time")
            .expect("the stream goes on")
            .unwrap()
    };
    assert!(next_chunk().await.starts_with(b"retry:"));
    // A quiet period: the next event goes out at once, not a period later.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let (s, a) = app.request("file", "view a").await;
    assert_eq!(s, StatusCode::CREATED);
    let a_id = a["id"].as_str().unwrap().to_owned();
    let sent = Instant::now();
    let first = next_chunk().await;
    assert!(
        sent.elapsed() < Duration::from_millis(1200),
        "the first event waited {:?}",
        sent.elapsed()
    );
    assert!(action_ids(&first).iter().all(|id| *id == a_id), "{first:?}");
    // Three more commits right after: one message carries all three.
    let mut ids = Vec::new();
    for d in ["view b", "view c", "view d"] {
        let (s, b) = app.request("file", d).await;
        assert_eq!(s, StatusCode::CREATED);
        ids.push(b["id"].as_str().unwrap().to_owned());
    }
    let together = next_chunk().await;
    let got = action_ids(&together);
    for id in &ids {
        assert!(got.contains(id), "{id} not in {together:?}");
    }
    app.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_with_a_hundred_open_streams_finishes_quickly() {
    let app = TestApp::spawn().await;
    let mut streams = Vec::new();
    for i in 0..100 {
        let key = if i % 2 == 0 {
            app.operator.clone()
        } else {
            app.agent.clone()
        };
        let path = if i % 3 == 0 {
            "/v1/events?types=action.*"
        } else {
            "/v1/events"
        };
        streams.push(open(&app, &key, path, None).await);
    }
    let start = Instant::now();
    app.stop().await;
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "shutdown took {:?}",
        start.elapsed()
    );
    for mut s in streams {
        let end = tokio::time::timeout(Duration::from_secs(2), s.next()).await;
        assert!(matches!(end, Ok(None)), "a stream did not end");
    }
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_that_reads_nothing_is_cut_off_and_others_keep_up() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // A subscriber made to wait on the stalled one would wait out this
    // send timeout at least once: longer than the good stream is given
    // for any one event below. (A structural check, not a latency goal:
    // on a loaded machine an event may take long, but not 2 s.)
    let app = TestApp::spawn_with(|s| {
        s.events.send_timeout = "3s".parse().unwrap();
    })
    .await;
    app.profile("agent-1", json!("open")).await;

    // A client that sends its request and never reads, with a tiny window.
    let addr: std::net::SocketAddr = app.base.trim_start_matches("http://").parse().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stalled = socket.connect(addr).await.unwrap();
    stalled
        .write_all(
            format!(
                "GET /v1/events HTTP/1.1\r\nhost: x\r\nauthorization: Bearer {}\r\n\r\n",
                app.operator
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let mut good = open(&app, &app.operator, "/v1/events", None).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let rss_before = rss_kib();

    // ~250 events of ~120 KiB each: far more than the socket buffers hold.
    let big = "x".repeat(60 * 1024);
    for i in 0..250 {
        let action = request_as(&app, &app.agent, "file", &format!("view {i} {big}")).await;
        let ev = next(&mut good, Duration::from_secs(2))
            .await
            .expect("the good stream waited on the stalled one");
        let data: Value = serde_json::from_str(&ev.data).unwrap();
        assert_eq!(data["action_id"], action["id"]);
    }

    // After the send timeout the stalled client has been disconnected: it
    // reads what was buffered, then the end.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let mut buf = vec![0u8; 1 << 16];
    let mut received = 0usize;
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stalled.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received += n,
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the stalled stream was not cut off");
    assert!(
        received < 200 * 120 * 1024,
        "the stalled client got {received} bytes: it was not cut off"
    );
    // Everything it missed is still there to resume from, and memory did not
    // grow with what it did not read (30 MB went to the good subscriber).
    let grown_mib = rss_kib().saturating_sub(rss_before) / 1024;
    assert!(grown_mib < 256, "RSS grew {grown_mib} MiB");
    app.stop().await;
}

/// What the test receiver got: headers and body of every request.
#[derive(Debug, Clone)]
struct Received {
    id: String,
    timestamp: String,
    signature: String,
    body: String,
    answered: u16,
}

#[derive(Clone)]
struct Receiver {
    got: Arc<Mutex<Vec<Received>>>,
    failing: Arc<std::sync::atomic::AtomicUsize>,
}

async fn receive(
    axum::extract::State(r): axum::extract::State<Receiver>,
    headers: axum::http::HeaderMap,
    body: String,
) -> StatusCode {
    let h = |k: &str| {
        headers
            .get(k)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    };
    let fail = r
        .failing
        .fetch_update(
            std::sync::atomic::Ordering::SeqCst,
            std::sync::atomic::Ordering::SeqCst,
            |n| n.checked_sub(1),
        )
        .is_ok();
    let status = if fail {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::NO_CONTENT
    };
    r.got.lock().unwrap().push(Received {
        id: h("webhook-id"),
        timestamp: h("webhook-timestamp"),
        signature: h("webhook-signature"),
        body,
        answered: status.as_u16(),
    });
    status
}

fn ensure_standardwebhooks() {
    let ok = |_: ()| {
        std::process::Command::new("python3")
            .args(["-c", "import standardwebhooks"])
            .status()
            .is_ok_and(|s| s.success())
    };
    if !ok(()) {
        let _ = std::process::Command::new("python3")
            .args(["-m", "pip", "install", "--quiet", "standardwebhooks"])
            .status();
    }
    assert!(
        ok(()),
        "python3 with the standardwebhooks package is needed (python3 -m pip install standardwebhooks)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_subscriber_down_then_up_gets_every_event_signed() {
    let app = TestApp::spawn_with(|s| {
        s.webhooks.backoff_min = "50ms".parse().unwrap();
        s.webhooks.backoff_max = "300ms".parse().unwrap();
        s.webhooks.timeout = "2s".parse().unwrap();
    })
    .await;
    app.profile("agent-1", json!("standard")).await;
    // A port with nobody listening yet: connections are refused.
    let probe = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);

    let (status, sub) = app
        .call(
            Method::POST,
            "/v1/subscriptions",
            Some(&app.admin),
            Some(json!({"url": format!("http://{addr}/hook"), "types": ["action.*"], "description": "test"})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sub}");
    let secret = sub["secret"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("whsec_"));
    let sub_id = sub["id"].as_str().unwrap().to_owned();
    let (_, listed) = app
        .call(Method::GET, "/v1/subscriptions", Some(&app.admin), None)
        .await;
    assert_eq!(listed[0]["id"], sub_id.as_str());
    assert!(listed[0].get("secret").is_none(), "secret shown again");

    // Down: the events queue up.
    for i in 0..10 {
        request_as(&app, &app.agent, "file", &format!("view {i}")).await;
    }
    request_as(&app, &app.agent, "bash", "make").await;
    tokio::time::sleep(Duration::from_millis(700)).await;

    // Up, but failing the first 5 requests with 503.
    let receiver = Receiver {
        got: Arc::default(),
        failing: Arc::new(5.into()),
    };
    let router = axum::Router::new()
        .route("/hook", axum::routing::post(receive))
        .with_state(receiver.clone());
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let server = tokio::spawn(async move { axum::serve(listener, router).await });
    for i in 10..15 {
        request_as(&app, &app.agent, "file", &format!("view {i}")).await;
    }

    // Every action event arrives, and then is marked delivered.
    let expected: Vec<Value> = all_events(&app)
        .await
        .into_iter()
        .filter(|e| e["type"].as_str().unwrap().starts_with("action."))
        .collect();
    assert_eq!(expected.len(), 16);
    let deadline = Instant::now() + Duration::from_secs(30);
    let deliveries = loop {
        let (_, page) = app
            .call(
                Method::GET,
                &format!("/v1/subscriptions/{sub_id}/deliveries?limit=200"),
                Some(&app.admin),
                None,
            )
            .await;
        let items = page["items"].as_array().unwrap().clone();
        if items.len() == expected.len() && items.iter().all(|d| d["status"] == "delivered") {
            break items;
        }
        assert!(Instant::now() < deadline, "not all delivered: {page}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let got = receiver.got.lock().unwrap().clone();
    let mut by_id: BTreeMap<String, Vec<&Received>> = BTreeMap::new();
    for r in &got {
        by_id.entry(r.id.clone()).or_default().push(r);
    }
    for e in &expected {
        let tries = by_id
            .get(e["id"].as_str().unwrap())
            .unwrap_or_else(|| panic!("event {} never arrived", e["seq"]));
        assert_eq!(tries.last().unwrap().answered, 204);
        let body: Value = serde_json::from_str(&tries[0].body).unwrap();
        assert_eq!(body["seq"], e["seq"]);
        assert_eq!(body["data"], e["data"]);
        // Retries carry the same id and the same body.
        assert!(tries.iter().all(|t| t.body == tries[0].body));
    }
    assert!(got.iter().any(|r| r.answered == 503), "no retry after 503");
    // Attempts are recorded: refused connections, 503s, then success.
    let attempts: Vec<&Value> = deliveries
        .iter()
        .flat_map(|d| d["attempt_log"].as_array().unwrap())
        .collect();
    assert!(
        attempts
            .iter()
            .any(|a| a["status_code"].is_null() && a["error"].is_string()),
        "no refused attempt recorded"
    );
    assert!(attempts.iter().any(|a| a["status_code"] == 503));
    for d in &deliveries {
        let log = d["attempt_log"].as_array().unwrap();
        assert_eq!(log.len() as i64, d["attempts"].as_i64().unwrap());
        assert!(log.last().unwrap()["status_code"] == 204, "{d}");
    }

    // The reference library accepts every signature.
    ensure_standardwebhooks();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("received.json");
    let cases: Vec<Value> = got
        .iter()
        .map(|r| {
            json!({"body": r.body, "headers": {
                "webhook-id": r.id, "webhook-timestamp": r.timestamp, "webhook-signature": r.signature}})
        })
        .collect();
    std::fs::write(&file, serde_json::to_vec(&cases).unwrap()).unwrap();
    let script = r#"
import json, sys
from standardwebhooks.webhooks import Webhook
secret, path = sys.argv[1], sys.argv[2]
wh = Webhook(secret)
cases = json.load(open(path))
for c in cases:
    wh.verify(c["body"], c["headers"])
bad = dict(cases[0]["headers"])
try:
    wh.verify(cases[0]["body"] + " ", bad)
    sys.exit("a changed body verified")
except Exception:
    pass
print(len(cases), "verified")
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", script, &secret, file.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "standardwebhooks rejected a delivery: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("{} verified", got.len())
    );

    // Deleting the subscription stops deliveries.
    let (status, _) = app
        .call(
            Method::DELETE,
            &format!("/v1/subscriptions/{sub_id}"),
            Some(&app.admin),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, _) = app
        .call(
            Method::GET,
            &format!("/v1/subscriptions/{sub_id}"),
            Some(&app.admin),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    server.abort();
    app.stop().await;
}

#[tokio::test]
async fn subscriptions_are_for_admins_and_validated() {
    let app = TestApp::spawn().await;
    let body = json!({"url": "http://127.0.0.1:9/x", "types": ["*"]});
    let (status, _) = app
        .call(
            Method::POST,
            "/v1/subscriptions",
            Some(&app.operator),
            Some(body),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    for (bad, field) in [
        (json!({"url": "ftp://example.com/x", "types": ["*"]}), "url"),
        (json!({"url": "file:///etc/passwd", "types": ["*"]}), "url"),
        (json!({"url": "not a url", "types": ["*"]}), "url"),
        (json!({"url": "http://example.com/", "types": []}), "types"),
        (
            json!({"url": "http://example.com/", "types": ["action.nope"]}),
            "types",
        ),
    ] {
        let (status, problem) = app
            .call(
                Method::POST,
                "/v1/subscriptions",
                Some(&app.admin),
                Some(bad.clone()),
            )
            .await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}: {problem}");
        assert_eq!(problem["errors"][0]["field"], field, "{problem}");
    }
    let (_, list) = app
        .call(Method::GET, "/v1/subscriptions", Some(&app.admin), None)
        .await;
    assert_eq!(list, json!([]));
    app.stop().await;
}

fn verify_file(path: &std::path::Path) -> (bool, String) {
    verify_file_with(path, &[])
}

fn verify_file_with(path: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_actiongate"))
        .args(["audit", "verify"])
        .arg(path)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[tokio::test]
async fn audit_export_verifies_and_names_the_first_tampered_line() {
    let app = TestApp::spawn().await;
    app.profile("agent-1", json!("standard")).await;
    for i in 0..6 {
        request_as(&app, &app.agent, "file", &format!("view {i}")).await;
    }
    let pending = request_as(&app, &app.agent, "bash", "make").await;
    app.call(
        Method::POST,
        &format!("/v1/actions/{}/deny", pending["id"].as_str().unwrap()),
        Some(&app.operator),
        Some(json!({"reason": "no"})),
    )
    .await;
    let text = audit_text(&app, "?format=jsonl").await;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 9, "8 events and the final anchor");
    let first: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(first["prev_hash"], "0".repeat(64));
    assert_eq!(first["seq"], 1);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");

    std::fs::write(&path, &text).unwrap();
    let (ok, out) = verify_file(&path);
    assert!(ok, "{out}");
    assert!(out.contains("ok: 8 lines"), "{out}");
    assert!(
        out.contains("the chain goes on from genesis (0000"),
        "{out}"
    );

    // One byte changed in line 3.
    let mut changed: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
    changed[2] = changed[2].replacen("view 2", "view 3", 1);
    assert_ne!(changed[2], lines[2]);
    std::fs::write(&path, changed.join("\n") + "\n").unwrap();
    let (ok, out) = verify_file(&path);
    assert!(!ok && out.contains("line 3:"), "{out}");

    // Line 4 removed: line 4 is now the one that does not chain.
    let mut removed: Vec<&str> = lines.clone();
    removed.remove(3);
    std::fs::write(&path, removed.join("\n") + "\n").unwrap();
    let (ok, out) = verify_file(&path);
    assert!(!ok && out.contains("line 4:"), "{out}");

    // Lines 5 and 6 swapped.
    let mut swapped = lines.clone();
    swapped.swap(4, 5);
    std::fs::write(&path, swapped.join("\n") + "\n").unwrap();
    let (ok, out) = verify_file(&path);
    assert!(!ok && out.contains("line 5:"), "{out}");

    // A range continues the same chain: its lines equal the full export's.
    let third: Value = serde_json::from_str(lines[2]).unwrap();
    let since = third["at"].as_str().unwrap();
    let part = audit_text(&app, &format!("?since={}", urlencode(since))).await;
    let first_part: Value = serde_json::from_str(part.lines().next().unwrap()).unwrap();
    assert!(first_part["seq"].as_i64().unwrap() <= 3);
    assert!(text.contains(part.lines().next().unwrap()));

    // The CLI writes the same export from the data dir.
    let out_path = dir.path().join("cli.jsonl");
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_actiongate"))
        .args(["audit", "export", "--data-dir"])
        .arg(app.dir.path())
        .arg("--out")
        .arg(&out_path)
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(std::fs::read_to_string(&out_path).unwrap(), text);

    let (status, _) = app
        .call(Method::GET, "/v1/audit", Some(&app.agent), None)
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _) = app
        .call(
            Method::GET,
            "/v1/audit?format=csv",
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    // A time that is not RFC 3339: the field, and the form expected.
    let (status, body) = app
        .call(
            Method::GET,
            "/v1/audit?since=yesterday",
            Some(&app.operator),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["errors"][0]["field"], "since", "{body}");
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("RFC 3339"),
        "{body}"
    );
    app.stop().await;
}

fn urlencode(s: &str) -> String {
    s.replace(':', "%3A").replace('+', "%2B")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_prunes_and_later_exports_and_streams_continue_from_the_anchor() {
    let app = TestApp::spawn_with(|s| {
        s.events.retention = actiongate_server::config::Keep::For("3s".parse().unwrap());
        s.events.prune_interval = "200ms".parse().unwrap();
    })
    .await;
    app.profile("agent-1", json!("open")).await;
    for i in 0..5 {
        request_as(&app, &app.agent, "file", &format!("view {i}")).await;
    }
    let before = audit_text(&app, "").await;
    let last_before: Value = serde_json::from_str(before.lines().last().unwrap()).unwrap();
    assert_eq!(last_before["seq"], 5);

    // Wait until the five are pruned.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !audit_text(&app, "").await.is_empty() {
        assert!(Instant::now() < deadline, "events were not pruned");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for i in 5..8 {
        request_as(&app, &app.agent, "file", &format!("view {i}")).await;
    }
    let after = audit_text(&app, "").await;
    let first_after: Value = serde_json::from_str(after.lines().next().unwrap()).unwrap();
    assert_eq!(first_after["seq"], 6);
    // The chain continues from the last pruned event's hash.
    assert_eq!(first_after["prev_hash"], last_before["hash"]);
    let dir = tempfile::tempdir().unwrap();
    // Each export verifies; the later one from where the earlier ended.
    let path = dir.path().join("part.jsonl");
    std::fs::write(&path, &before).unwrap();
    let (ok, out) = verify_file(&path);
    assert!(ok, "{out}");
    std::fs::write(&path, &after).unwrap();
    let from = format!("5:{}", last_before["hash"].as_str().unwrap());
    let (ok, out) = verify_file_with(&path, &["--from-anchor", &from]);
    assert!(ok, "{out}");
    let (ok, out) = verify_file(&path);
    assert!(!ok && out.contains("genesis"), "{out}");

    // A client resuming from a pruned id is told so first.
    let mut s = open(&app, &app.agent, "/v1/events", Some(2)).await;
    let ev = next(&mut s, Duration::from_secs(5)).await.unwrap();
    assert_eq!(ev.event, "reset");
    let reset: Value = serde_json::from_str(&ev.data).unwrap();
    assert_eq!(reset["oldest_seq"], 6);
    assert_eq!(reset["last_event_id"], 2);
    let ev = next(&mut s, Duration::from_secs(5)).await.unwrap();
    assert_eq!(seq(&ev), 6);
    // An id this log never issued is reset too.
    let mut s = open(&app, &app.agent, "/v1/events", Some(10_000)).await;
    let ev = next(&mut s, Duration::from_secs(5)).await.unwrap();
    assert_eq!(ev.event, "reset");
    // A current id is not.
    let mut s = open(&app, &app.agent, "/v1/events", Some(6)).await;
    assert_eq!(seq(&next(&mut s, Duration::from_secs(5)).await.unwrap()), 7);
    app.stop().await;
}

/// A client that resumes far back and reads slowly may still be replaying
/// when retention prunes what it has not read yet: it is told with a
/// `reset`, as on connecting, never left with a silent gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruning_during_a_slow_replay_is_announced_not_skipped() {
    let app = TestApp::spawn_with(|s| {
        s.events.retention = actiongate_server::config::Keep::For("2s".parse().unwrap());
        s.events.prune_interval = "200ms".parse().unwrap();
        s.events.send_timeout = "120s".parse().unwrap();
    })
    .await;
    app.profile("agent-1", json!("open")).await;
    // Enough to overflow the sockets' buffers while the client waits:
    // about 18 MB of events.
    let detail = "x".repeat(12 * 1024);
    let total = 1_500;
    for batch in 0..total / 50 {
        futures::future::join_all((0..50).map(|i| {
            let detail = format!("view {} {detail}", batch * 50 + i);
            let app = &app;
            async move { request_as(app, &app.agent, "file", &detail).await }
        }))
        .await;
    }
    let mut slow = open(&app, &app.operator, "/v1/events", Some(0)).await;
    let first = next(&mut slow, Duration::from_secs(10)).await.unwrap();
    let mut seen = vec![(first.event.clone(), first.id.clone())];
    // Wait until everything written so far is pruned.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut probe = open(&app, &app.operator, "/v1/events", Some(1)).await;
        let ev = next(&mut probe, Duration::from_secs(5)).await.unwrap();
        if ev.event == "reset" {
            let reset: Value = serde_json::from_str(&ev.data).unwrap();
            if reset["oldest_seq"].as_i64().unwrap() > total {
                break;
            }
        }
        assert!(Instant::now() < deadline, "events were not pruned");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let last = request_as(&app, &app.agent, "file", "after").await;
    let last_id = last["id"].clone();
    // Read on until the newest event: every gap is announced.
    loop {
        let ev = next(&mut slow, Duration::from_secs(30))
            .await
            .expect("stream ended early");
        let done = ev.event != "reset"
            && serde_json::from_str::<Value>(&ev.data).unwrap()["action_id"] == last_id;
        seen.push((ev.event, ev.id));
        if done {
            break;
        }
    }
    let mut previous: Option<i64> = None;
    let mut resets = 0;
    for (event, id) in &seen {
        if event == "reset" {
            resets += 1;
            previous = None;
            continue;
        }
        let seq: i64 = id.parse().unwrap();
        if let Some(p) = previous {
            assert_eq!(
                seq,
                p + 1,
                "events {}..{seq} skipped without a reset",
                p + 1
            );
        }
        previous = Some(seq);
    }
    assert!(resets >= 1, "nothing was pruned under the slow stream");
    app.stop().await;
}
