//! Several daemons on one Postgres database act as one gate: the real
//! binary, three times, on a throwaway cluster (`tests/support/pg_cluster.rs`).
//! Without Postgres installed each test says so and passes, unless
//! `PG_TESTS_REQUIRED=1` (CI), which makes that a failure.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, agent_key, role_key};
use crate::common::{call, client};

use crate::common::pg_cluster;

use pg_cluster::Cluster;

/// `n` daemons on a new database of the shared cluster, started one after
/// another (the first mints the admin key); their data dirs.
struct Nodes {
    nodes: Vec<Daemon>,
    _dirs: Vec<tempfile::TempDir>,
    url: String,
}

impl Nodes {
    fn start(n: usize, env: &[(&str, &str)]) -> Option<Nodes> {
        let url = Cluster::shared()?.database();
        Some(Nodes::on(&url, n, env))
    }

    fn on(url: &str, n: usize, env: &[(&str, &str)]) -> Nodes {
        let mut dirs = Vec::new();
        let mut nodes = Vec::new();
        for _ in 0..n {
            let dir = tempfile::tempdir().unwrap();
            let mut all = vec![("ACTIONGATE_STORAGE__DATABASE_URL", url)];
            all.extend_from_slice(env);
            nodes.push(Daemon::start(dir.path(), &all));
            dirs.push(dir);
        }
        Nodes {
            nodes,
            _dirs: dirs,
            url: url.to_owned(),
        }
    }

    fn base(&self, i: usize) -> &str {
        &self.nodes[i % self.nodes.len()].base
    }

    fn admin(&self) -> String {
        self.nodes[0].admin_key()
    }
}

/// Creates a pending decision-only action of `agent` on `base`; its id.
async fn pending(c: &reqwest::Client, base: &str, agent: &str, detail: &str) -> String {
    let (s, a) = call(
        c,
        reqwest::Method::POST,
        format!("{base}/v1/actions"),
        agent,
        Some(json!({"tool": "bash", "detail": detail, "timeout": "10m"})),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    a["id"].as_str().unwrap().to_owned()
}

#[test]
fn only_the_first_daemon_on_an_empty_database_mints_an_admin_key() {
    let Some(cluster) = Cluster::shared() else {
        return;
    };
    let url = cluster.database();
    // Three daemons starting at once on one empty database.
    let started: Vec<(Daemon, tempfile::TempDir)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..3)
            .map(|_| {
                let url = url.clone();
                s.spawn(move || {
                    let dir = tempfile::tempdir().unwrap();
                    let d = Daemon::start(
                        dir.path(),
                        &[("ACTIONGATE_STORAGE__DATABASE_URL", url.as_str())],
                    );
                    (d, dir)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let keys: Vec<PathBuf> = started
        .iter()
        .map(|(d, _)| d.data.join("admin.key"))
        .filter(|p| p.exists())
        .collect();
    assert_eq!(keys.len(), 1, "admin keys written: {keys:?}");
    let admin = std::fs::read_to_string(&keys[0]).unwrap().trim().to_owned();
    // The one key administers every daemon: they share the database.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let c = client();
        for (d, _) in &started {
            let (s, body) = call(
                &c,
                reqwest::Method::GET,
                format!("{}/v1/keys", d.base),
                &admin,
                None,
            )
            .await;
            assert_eq!(s, 200, "{body}");
            assert_eq!(body.as_array().map(Vec::len), Some(1), "{body}");
        }
    });
}

/// An event as a test reads it from a stream: seq, type, action id.
type Seen = (i64, String, Option<String>);

/// Where reading a stream stops.
enum Until {
    /// At the event with this seq.
    Seq(i64),
    /// At the first event of this action.
    Action(String),
    /// When the stream ends.
    End,
}

impl Until {
    fn reached(&self, last: Option<&Seen>) -> bool {
        match (self, last) {
            (Until::Seq(s), Some(e)) => e.0 >= *s,
            (Until::Action(a), Some(e)) => e.2.as_ref() == Some(a),
            _ => false,
        }
    }
}

/// Reads the SSE messages of `resp` until `until`, at most `secs`.
async fn sse_events(resp: reqwest::Response, until: Until, secs: u64) -> Vec<Seen> {
    assert_eq!(resp.status(), 200);
    let mut body = resp.bytes_stream();
    let mut buf = String::new();
    let mut out: Vec<Seen> = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    while !until.reached(out.last()) {
        let chunk = tokio::time::timeout_at(deadline, body.next())
            .await
            .unwrap_or_else(|_| panic!("events did not arrive in {secs} s: {out:?}"));
        let Some(chunk) = chunk else {
            assert!(
                matches!(until, Until::End),
                "the stream ended early: {out:?}"
            );
            break;
        };
        buf.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        while let Some(end) = buf.find("\n\n") {
            let frame: String = buf.drain(..end + 2).collect();
            let mut id = None;
            let mut kind = None;
            let mut data = None;
            for line in frame.lines() {
                if let Some(v) = line.strip_prefix("id: ") {
                    id = v.trim().parse::<i64>().ok();
                } else if let Some(v) = line.strip_prefix("event: ") {
                    kind = Some(v.trim().to_owned());
                } else if let Some(v) = line.strip_prefix("data: ") {
                    data = serde_json::from_str::<Value>(v).ok();
                }
            }
            if let (Some(id), Some(kind)) = (id, kind) {
                let action = data.and_then(|d| d["action_id"].as_str().map(str::to_owned));
                out.push((id, kind, action));
                if until.reached(out.last()) {
                    break;
                }
            }
        }
    }
    out
}

/// `GET /v1/events` on `base`, resuming after `after` when given.
async fn open_events(
    c: &reqwest::Client,
    base: &str,
    key: &str,
    after: Option<i64>,
) -> reqwest::Response {
    let mut req = c.get(format!("{base}/v1/events")).bearer_auth(key);
    if let Some(after) = after {
        req = req.header("Last-Event-ID", after.to_string());
    }
    req.send().await.unwrap()
}

/// The types of the events of settled action `id`, as `GET
/// /v1/actions/{id}/events` on `base` replays them.
async fn action_event_types(c: &reqwest::Client, base: &str, key: &str, id: &str) -> Vec<String> {
    let resp = c
        .get(format!("{base}/v1/actions/{id}/events"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    sse_events(resp, Until::End, 20)
        .await
        .into_iter()
        .map(|(_, kind, _)| kind)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn decisions_and_idempotency_keys_hold_across_nodes() {
    let Some(n) = Nodes::start(3, &[]) else {
        return;
    };
    let c = client();
    let admin = n.admin();
    let agent = agent_key(&c, n.base(0), &admin, "coder").await;
    let operator = role_key(&c, n.base(1), &admin, "operator").await;

    // Three rounds of 50 decisions of one action (approvals and denials)
    // spread over three nodes: each time exactly one decision is made
    // (one event), and the action ends as the winner decided.
    for round in 0..3 {
        let id = pending(&c, n.base(round + 2), &agent, &format!("make {round}")).await;
        let answers: Vec<(usize, u16)> = futures::stream::iter(0..50)
            .map(|i| {
                let (c, base, operator, id) = (
                    c.clone(),
                    n.base(i).to_owned(),
                    operator.clone(),
                    id.clone(),
                );
                async move {
                    let (verb, body) = if i.is_multiple_of(2) {
                        ("approve", json!({"note": "race"}))
                    } else {
                        ("deny", json!({"reason": "race"}))
                    };
                    let (s, _) = call(
                        &c,
                        reqwest::Method::POST,
                        format!("{base}/v1/actions/{id}/{verb}"),
                        &operator,
                        Some(body),
                    )
                    .await;
                    (i, s)
                }
            })
            .buffer_unordered(50)
            .collect()
            .await;
        // One verdict wins. The key's other requests of that verdict are
        // its decision sent again, answered as the action stands (200);
        // every one of the other verdict is refused (409).
        let winner = answers.iter().find(|a| a.1 == 200).expect("a winner").0;
        assert!(
            answers.iter().all(|(i, s)| if i % 2 == winner % 2 {
                *s == 200
            } else {
                *s == 409
            }),
            "{answers:?}"
        );
        let want = if winner.is_multiple_of(2) {
            "approved"
        } else {
            "denied"
        };
        for i in 0..3 {
            let (s, a) = call(
                &c,
                reqwest::Method::GET,
                format!("{}/v1/actions/{id}", n.base(i)),
                &operator,
                None,
            )
            .await;
            assert_eq!(s, 200, "{a}");
            assert_eq!(a["status"], want, "{a}");
        }
        let types = action_event_types(&c, n.base(round), &operator, &id).await;
        let decided = types
            .iter()
            .filter(|t| *t == "action.approved" || *t == "action.denied")
            .count();
        assert_eq!(decided, 1, "{types:?}");
    }

    // One idempotency key sent 30 times at once to three nodes: one action
    // (201 once, 200 for the others); a different request with the same
    // key is refused on every node.
    let answers: Vec<(u16, String)> = futures::stream::iter(0..30)
        .map(|i| {
            let (c, base, agent) = (c.clone(), n.base(i).to_owned(), agent.clone());
            async move {
                let (s, a) = call(
                    &c,
                    reqwest::Method::POST,
                    format!("{base}/v1/actions"),
                    &agent,
                    Some(json!({"tool": "bash", "detail": "make test", "idempotency_key": "once"})),
                )
                .await;
                assert!(s == 200 || s == 201, "{s} {a}");
                (s, a["id"].as_str().unwrap().to_owned())
            }
        })
        .buffer_unordered(30)
        .collect()
        .await;
    let ids: HashSet<&String> = answers.iter().map(|a| &a.1).collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    assert_eq!(
        answers.iter().filter(|a| a.0 == 201).count(),
        1,
        "{answers:?}"
    );
    for i in 0..3 {
        let (s, a) = call(
            &c,
            reqwest::Method::POST,
            format!("{}/v1/actions", n.base(i)),
            &agent,
            Some(json!({"tool": "bash", "detail": "make other", "idempotency_key": "once"})),
        )
        .await;
        assert_eq!(s, 409, "{a}");
    }

    // Text Postgres cannot store (a NUL character) is the caller's to fix:
    // 422, never a 500, and nothing stored.
    let (s, a) = call(
        &c,
        reqwest::Method::POST,
        format!("{}/v1/actions", n.base(1)),
        &agent,
        Some(json!({"tool": "bash", "detail": "make\u{0}x", "reason": "a\u{0}"})),
    )
    .await;
    assert_eq!(s, 422, "{a} {:?}", n.nodes[1].stderr_lines());
    assert_eq!(a["code"], "validation", "{a}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiter_on_one_node_wakes_when_another_node_decides() {
    let Some(n) = Nodes::start(2, &[]) else {
        return;
    };
    let c = client();
    let admin = n.admin();
    let agent = agent_key(&c, n.base(0), &admin, "coder").await;
    let operator = role_key(&c, n.base(0), &admin, "operator").await;
    // From the decision's answer (committed by then) to the waiter's
    // answer; and, an upper bound, from when the decision was sent.
    let mut wakes = Vec::new();
    let mut from_sent = Vec::new();
    for round in 0..30 {
        let id = pending(&c, n.base(0), &agent, &format!("make {round}")).await;
        let waiter = {
            let (c, base, agent, id) = (c.clone(), n.base(0).to_owned(), agent.clone(), id.clone());
            tokio::spawn(async move {
                let (s, a) = call(
                    &c,
                    reqwest::Method::GET,
                    format!("{base}/v1/actions/{id}?wait=30"),
                    &agent,
                    None,
                )
                .await;
                (s, a, Instant::now())
            })
        };
        // Let the long-poll reach the daemon before deciding.
        tokio::time::sleep(Duration::from_millis(100)).await;
        let sent = Instant::now();
        let (s, a) = call(
            &c,
            reqwest::Method::POST,
            format!("{}/v1/actions/{id}/approve", n.base(1)),
            &operator,
            None,
        )
        .await;
        let decided = Instant::now();
        assert_eq!(s, 200, "{a}");
        let (s, a, woke) = waiter.await.unwrap();
        assert_eq!(s, 200, "{a}");
        assert_eq!(a["status"], "approved", "{a}");
        wakes.push(woke.saturating_duration_since(decided));
        from_sent.push(woke.saturating_duration_since(sent));
    }
    wakes.sort();
    from_sent.sort();
    let p50 = wakes[wakes.len() / 2];
    let p99 = wakes[wakes.len() * 99 / 100];
    eprintln!(
        "cross-node wake after the decision's answer: p50 {p50:?}, p99 {p99:?}; \
         after it was sent: p50 {:?}",
        from_sent[from_sent.len() / 2]
    );
    // The polling fallback alone would take up to the poll interval
    // (500 ms): a median this low is the notification at work.
    assert!(
        p50 < Duration::from_millis(50),
        "median cross-node wake {p50:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn event_ids_are_one_gapless_commit_ordered_sequence_on_every_node() {
    let Some(n) = Nodes::start(3, &[]) else {
        return;
    };
    let c = client();
    let admin = n.admin();
    let operator = role_key(&c, n.base(0), &admin, "operator").await;
    let agents: Vec<String> = futures::stream::iter(0..3)
        .then(|i| {
            let (c, base, admin) = (c.clone(), n.base(i).to_owned(), admin.clone());
            async move { agent_key(&c, &base, &admin, &format!("agent-{i}")).await }
        })
        .collect()
        .await;
    // 120 actions asked and approved: 240 events. No event was written yet.
    let total = 240;
    // A live stream on every node, open while the writers run: a node that
    // published seq 7 before seq 6 committed would skip 6 for good.
    let mut live = Vec::new();
    for i in 0..3 {
        let resp = open_events(&c, n.base(i), &operator, None).await;
        live.push(tokio::spawn(sse_events(resp, Until::Seq(total), 60)));
    }
    // Writers on every node at once, each action asked on one node and
    // approved on the next, so asks and approvals of different actions
    // commit interleaved from three nodes.
    futures::stream::iter(0..120)
        .map(|i| {
            let (c, agent, operator) = (c.clone(), agents[i % 3].clone(), operator.clone());
            let (ask_on, approve_on) = (n.base(i).to_owned(), n.base(i + 1).to_owned());
            async move {
                let id = pending(&c, &ask_on, &agent, &format!("job {i}")).await;
                let (s, a) = call(
                    &c,
                    reqwest::Method::POST,
                    format!("{approve_on}/v1/actions/{id}/approve"),
                    &operator,
                    None,
                )
                .await;
                assert_eq!(s, 200, "{a}");
            }
        })
        .buffer_unordered(24)
        .collect::<Vec<()>>()
        .await;
    let mut streams = Vec::new();
    for l in live {
        streams.push(l.await.unwrap());
    }
    let seqs: Vec<i64> = streams[0].iter().map(|e| e.0).collect();
    assert_eq!(seqs, (1..=total).collect::<Vec<_>>(), "gapless, in order");
    assert_eq!(streams[0], streams[1]);
    assert_eq!(streams[0], streams[2]);
    // Each action's enqueued event comes before its approval.
    let mut first: BTreeMap<String, &str> = BTreeMap::new();
    for (_, kind, action) in &streams[0] {
        let a = action.as_ref().expect("every event names its action");
        first.entry(a.clone()).or_insert(kind);
    }
    assert_eq!(first.len(), 120);
    assert!(first.values().all(|k| *k == "action.enqueued"), "{first:?}");
    // Resuming with Last-Event-ID on any node goes on exactly there.
    for (i, after) in [(0, 17), (1, 100), (2, 239)] {
        let resp = open_events(&c, n.base(i), &operator, Some(after)).await;
        let tail = sse_events(resp, Until::Seq(total), 30).await;
        assert_eq!(
            tail,
            streams[0][after as usize..].to_vec(),
            "resumed on node {i}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_action_expires_once_however_many_nodes_sweep() {
    let Some(n) = Nodes::start(3, &[]) else {
        return;
    };
    let c = client();
    let admin = n.admin();
    let agent = agent_key(&c, n.base(0), &admin, "coder").await;
    let operator = role_key(&c, n.base(0), &admin, "operator").await;
    let mut ids = Vec::new();
    for i in 0..15 {
        let (s, a) = call(
            &c,
            reqwest::Method::POST,
            format!("{}/v1/actions", n.base(i)),
            &agent,
            Some(json!({"tool": "bash", "detail": format!("late {i}"), "timeout": "1s"})),
        )
        .await;
        assert_eq!(s, 201, "{a}");
        ids.push(a["id"].as_str().unwrap().to_owned());
    }
    for (i, id) in ids.iter().enumerate() {
        let (s, a) = call(
            &c,
            reqwest::Method::GET,
            format!("{}/v1/actions/{id}?wait=10", n.base(i + 1)),
            &agent,
            None,
        )
        .await;
        assert_eq!(s, 200, "{a}");
        assert_eq!(a["status"], "expired", "{a}");
    }
    // Every node has swept by now, more than once (each looks every second).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    // Each action's history (every event naming it, from the log that
    // every node writes to) has one expiry.
    for id in &ids {
        let types = action_event_types(&c, n.base(2), &operator, id).await;
        assert_eq!(types, ["action.enqueued", "action.expired"], "{id}");
    }
}
