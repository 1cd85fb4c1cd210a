//! Postgres restarts under two running daemons: while it is down every
//! request that needs it fails with 503 problem+json and `Retry-After`,
//! `/readyz` says so; afterwards each daemon is back by itself (its pool,
//! the connection that listens for other nodes' commits, its background
//! loops), and nothing it acknowledged is lost. A cluster of its own, since
//! this test stops it; durable commits (`synchronous_commit=on`), as a real
//! deployment has.

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, agent_key, role_key};
use crate::common::pg_cluster::{self, Cluster};
use crate::common::{call, client};

/// A new action of `agent` on `base` (pending: the default profile asks);
/// its id.
async fn pending(
    c: &reqwest::Client,
    base: &str,
    agent: &str,
    detail: &str,
    timeout: &str,
) -> String {
    let (s, a) = call(
        c,
        reqwest::Method::POST,
        format!("{base}/v1/actions"),
        agent,
        Some(json!({"tool": "bash", "detail": detail, "timeout": timeout})),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    a["id"].as_str().unwrap().to_owned()
}

/// A request made while Postgres is down: 503 problem+json with
/// `Retry-After`.
async fn refused(req: reqwest::RequestBuilder, what: &str) {
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 503, "{what}");
    assert!(resp.headers().contains_key("retry-after"), "{what}");
    let ctype = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(
        ctype.starts_with("application/problem+json"),
        "{what}: {ctype}"
    );
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["status"], 503, "{what}: {body}");
}

/// `GET /v1/events` from the start until `n` events arrived (30 s at
/// most): their seqs and types.
async fn events(c: &reqwest::Client, base: &str, key: &str, n: usize) -> Vec<(i64, String)> {
    let resp = c
        .get(format!("{base}/v1/events"))
        .bearer_auth(key)
        .header("Last-Event-ID", "0")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.bytes_stream();
    let mut buf = String::new();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while out.len() < n {
        let chunk = tokio::time::timeout_at(deadline, body.next())
            .await
            .unwrap_or_else(|_| panic!("only {out:?} in 30 s"))
            .expect("stream ended")
            .unwrap();
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let frame: String = buf.drain(..end + 2).collect();
            let id = frame.lines().find_map(|l| l.strip_prefix("id: "));
            let kind = frame.lines().find_map(|l| l.strip_prefix("event: "));
            if let (Some(id), Some(kind)) = (id, kind) {
                out.push((id.trim().parse().unwrap(), kind.trim().to_owned()));
            }
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn postgres_down_is_503_and_the_daemon_reconnects_by_itself() {
    let cluster = match Cluster::start_durable() {
        Ok(c) => c,
        Err(e) if pg_cluster::required() => panic!("Postgres is required: {e}"),
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    let url = cluster.database();
    let env = [
        ("ACTIONGATE_STORAGE__DATABASE_URL", url.as_str()),
        ("ACTIONGATE_STORAGE__CONNECT_TIMEOUT", "1s"),
    ];
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let a = Daemon::start(dirs[0].path(), &env);
    let b = Daemon::start(dirs[1].path(), &env);
    let (base_a, base_b) = (a.base.clone(), b.base.clone());
    let c = client();
    let admin = a.admin_key();
    let agent = agent_key(&c, &base_a, &admin, "coder").await;
    let operator = role_key(&c, &base_b, &admin, "operator").await;

    // Acknowledged before the outage: three pending actions, one approved
    // (on the other node), one that expires while Postgres is down, and a
    // long-poll on A for one that B decides only after the restart.
    let kept = pending(&c, &base_a, &agent, "kept", "10m").await;
    let approved = pending(&c, &base_a, &agent, "approved", "10m").await;
    let (s, body) = call(
        &c,
        reqwest::Method::POST,
        format!("{base_b}/v1/actions/{approved}/approve"),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let waited = pending(&c, &base_a, &agent, "waited", "10m").await;
    let expiring = pending(&c, &base_b, &agent, "expiring", "2s").await;
    let waiter = {
        let (c, url, agent) = (
            c.clone(),
            format!("{base_a}/v1/actions/{waited}?wait=60"),
            agent.clone(),
        );
        tokio::spawn(async move { call(&c, reqwest::Method::GET, url, &agent, None).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;

    cluster.stop_server().unwrap();
    let down = Instant::now();
    for base in [&base_a, &base_b] {
        refused(
            c.post(format!("{base}/v1/actions"))
                .bearer_auth(&agent)
                .json(&json!({"tool": "bash", "detail": "while down"})),
            "a new action",
        )
        .await;
        refused(
            c.post(format!("{base}/v1/actions/{kept}/approve"))
                .bearer_auth(&operator),
            "a decision",
        )
        .await;
        refused(
            c.get(format!("{base}/v1/actions/{kept}"))
                .bearer_auth(&agent),
            "a read",
        )
        .await;
        refused(c.get(format!("{base}/readyz")), "/readyz").await;
    }
    // Down past the deadline of `expiring`.
    let left = Duration::from_secs(3).saturating_sub(down.elapsed());
    tokio::time::sleep(left).await;
    cluster.start_server().unwrap();

    let deadline = Instant::now() + Duration::from_secs(30);
    for (d, base) in [(&a, &base_a), (&b, &base_b)] {
        loop {
            let ready = c.get(format!("{base}/readyz")).send().await.unwrap();
            if ready.status() == 200 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{base} not ready 30 s after Postgres came back: {:#?}",
                d.stderr_lines()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    // B decides; the long-poll A held through the outage hears of it
    // (A's tail of the shared log is back).
    let (s, body) = call(
        &c,
        reqwest::Method::POST,
        format!("{base_b}/v1/actions/{waited}/approve"),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{body}");
    let (s, body) = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("the long-poll on A was answered")
        .unwrap();
    assert_eq!(s, 200, "{body}");
    assert_eq!(body["status"], "approved", "{body}");

    // The sweepers are back: what expired during the outage is expired,
    // once.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (_, x) = call(
            &c,
            reqwest::Method::GET,
            format!("{base_a}/v1/actions/{expiring}"),
            &agent,
            None,
        )
        .await;
        if x["status"] == "expired" {
            break;
        }
        assert!(Instant::now() < deadline, "not expired: {x}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let after = pending(&c, &base_a, &agent, "after", "10m").await;

    // Everything acknowledged is there, as acknowledged; nothing refused
    // was stored.
    for (id, status) in [
        (&kept, "pending"),
        (&approved, "approved"),
        (&waited, "approved"),
        (&expiring, "expired"),
        (&after, "pending"),
    ] {
        for base in [&base_a, &base_b] {
            let (s, x) = call(
                &c,
                reqwest::Method::GET,
                format!("{base}/v1/actions/{id}"),
                &agent,
                None,
            )
            .await;
            assert_eq!((s, x["status"].as_str()), (200, Some(status)), "{x}");
        }
    }
    let (_, all) = call(
        &c,
        reqwest::Method::GET,
        format!("{base_b}/v1/actions?limit=100"),
        &operator,
        None,
    )
    .await;
    assert_eq!(all["items"].as_array().map(Vec::len), Some(5), "{all}");
    // One gapless log, the same on both nodes: 5 enqueued, 2 approved,
    // 1 expired.
    let on_a = events(&c, &base_a, &operator, 8).await;
    let on_b = events(&c, &base_b, &operator, 8).await;
    assert_eq!(on_a, on_b);
    assert_eq!(
        on_a.iter().map(|e| e.0).collect::<Vec<_>>(),
        (1..=8).collect::<Vec<_>>()
    );
    let expired = on_a.iter().filter(|e| e.1 == "action.expired").count();
    assert_eq!(expired, 1, "{on_a:?}");
}
