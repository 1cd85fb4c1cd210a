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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn decisions_and_idempotency_keys_hold_across_nodes() {
    let Some(n) = Nodes::start(3, &[]) else {
        return;
    };
    let c = client();
    let admin = n.admin();
    let agent = agent_key(&c, n.base(0), &admin, "coder").await;
    let operator = role_key(&c, n.base(1), &admin, "operator").await;

    // 50 decisions of one action spread over three nodes: one wins.
    let id = pending(&c, n.base(2), &agent, "make").await;
    let answers: Vec<u16> = futures::stream::iter(0..50)
        .map(|i| {
            let (c, base, operator, id) = (
                c.clone(),
                n.base(i).to_owned(),
                operator.clone(),
                id.clone(),
            );
            async move {
                let verb = if i % 2 == 0 { "approve" } else { "deny" };
                let (s, _) = call(
                    &c,
                    reqwest::Method::POST,
                    format!("{base}/v1/actions/{id}/{verb}"),
                    &operator,
                    Some(json!({"reason": "race"})),
                )
                .await;
                s
            }
        })
        .buffer_unordered(50)
        .collect()
        .await;
    assert_eq!(
        answers.iter().filter(|s| **s == 200).count(),
        1,
        "{answers:?}"
    );
    assert!(
        answers.iter().all(|s| *s == 200 || *s == 409),
        "{answers:?}"
    );
    let (_, events) = call(
        &c,
        reqwest::Method::GET,
        format!("{}/v1/actions/{id}/events", n.base(0)),
        &operator,
        None,
    )
    .await;
    let decided = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            matches!(
                e["type"].as_str(),
                Some("action.approved" | "action.denied")
            )
        })
        .count();
    assert_eq!(decided, 1, "{events}");

    // One idempotency key sent 30 times at once to three nodes: one action.
    let ids: HashSet<String> = futures::stream::iter(0..30)
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
                a["id"].as_str().unwrap().to_owned()
            }
        })
        .buffer_unordered(30)
        .collect()
        .await;
    assert_eq!(ids.len(), 1, "{ids:?}");
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
    let mut wakes = Vec::new();
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
    }
    wakes.sort();
    let p50 = wakes[wakes.len() / 2];
    let p99 = wakes[wakes.len() * 99 / 100];
    eprintln!("cross-node wake after the decision's answer: p50 {p50:?}, p99 {p99:?}");
    assert!(
        p50 < Duration::from_millis(50),
        "median cross-node wake {p50:?}"
    );
}

/// Reads `GET /v1/events` on `base` after `after` until `until` (a seq) or
/// 30 s; the (seq, type, action id) of each event.
async fn read_events(
    c: &reqwest::Client,
    base: &str,
    key: &str,
    after: i64,
    until: i64,
) -> Vec<(i64, String, Option<String>)> {
    let resp = c
        .get(format!("{base}/v1/events"))
        .bearer_auth(key)
        .header("Last-Event-ID", after.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.bytes_stream();
    let mut buf = String::new();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while out.last().is_none_or(|(seq, _, _)| *seq < until) {
        let chunk = tokio::time::timeout_at(deadline, body.next())
            .await
            .expect("events did not arrive in 30 s")
            .expect("stream ended")
            .unwrap();
        buf.push_str(&String::from_utf8_lossy(&chunk));
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
                let action = data.and_then(|d| d["id"].as_str().map(str::to_owned));
                out.push((id, kind, action));
            }
        }
    }
    out
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
    // Writers on every node at once: new actions, and decisions of them.
    let ids: Vec<String> = futures::stream::iter(0..120)
        .map(|i| {
            let (c, base, agent) = (c.clone(), n.base(i).to_owned(), agents[i % 3].clone());
            async move { pending(&c, &base, &agent, &format!("job {i}")).await }
        })
        .buffer_unordered(24)
        .collect()
        .await;
    futures::stream::iter(ids.iter().enumerate())
        .map(|(i, id)| {
            let (c, base, operator) = (c.clone(), n.base(i + 1).to_owned(), operator.clone());
            async move {
                let (s, a) = call(
                    &c,
                    reqwest::Method::POST,
                    format!("{base}/v1/actions/{id}/approve"),
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
    // 120 enqueued + 120 approved.
    let total = 240;
    let mut streams = Vec::new();
    for i in 0..3 {
        streams.push(read_events(&c, n.base(i), &operator, 0, total).await);
    }
    let seqs: Vec<i64> = streams[0].iter().map(|e| e.0).collect();
    assert_eq!(seqs, (1..=total).collect::<Vec<_>>(), "gapless, in order");
    assert_eq!(streams[0], streams[1]);
    assert_eq!(streams[0], streams[2]);
    // Each action's enqueued event comes before its approval.
    let mut first: BTreeMap<String, &str> = BTreeMap::new();
    for (_, kind, action) in &streams[0] {
        if let Some(a) = action {
            first.entry(a.clone()).or_insert(kind);
        }
    }
    assert!(first.values().all(|k| *k == "action.enqueued"), "{first:?}");
    // Resuming on another node after Last-Event-ID goes on exactly there.
    let tail = read_events(&c, n.base(2), &operator, 100, total).await;
    assert_eq!(tail, streams[0][100..].to_vec());
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
    // Every node has swept by now, more than once.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    for id in &ids {
        let (_, events) = call(
            &c,
            reqwest::Method::GET,
            format!("{}/v1/actions/{id}/events", n.base(2)),
            &operator,
            None,
        )
        .await;
        let expired = events
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["type"] == "action.expired")
            .count();
        assert_eq!(expired, 1, "{events}");
    }
}
