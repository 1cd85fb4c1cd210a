//! Several nodes (stores) on one Postgres database at once: what SQLite's
//! single writer gives for free must hold across nodes. Without Postgres
//! these say so and pass, unless `PG_TESTS_REQUIRED=1`.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashSet;
use std::time::{Duration, Instant};

use actiongate_store::anchor::{ANCHOR_EVENT, AuditKey};
use actiongate_store::*;
use chrono::Utc;

use crate::audit::{all_events, ask, verify_chain};
use crate::backends::{open_node, open_node_with, pg_cluster, pg_database};

fn sub(types: &[&str]) -> NewSubscription {
    NewSubscription {
        id: format!("sub_{}", uuid::Uuid::now_v7().simple()),
        url: "http://127.0.0.1:9/hook".to_owned(),
        types: types.iter().map(|t| (*t).to_owned()).collect(),
        description: None,
        secret: "whsec_AAAA".to_owned(),
        tier: 1,
    }
}

fn attempt(outcome: AttemptOutcome) -> AttemptRecord {
    AttemptRecord {
        at: Utc::now(),
        status_code: Some(503),
        error: Some("HTTP 503".to_owned()),
        duration_ms: 1,
        outcome,
    }
}

async fn nodes(url: &str, n: usize, lease: Duration) -> Vec<Store> {
    let mut out = Vec::new();
    for _ in 0..n {
        let mut pg = PgOptions::new(url);
        pg.delivery_lease = lease;
        pg.chat_lease = lease;
        out.push(open_node_with(pg).await);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_fanning_out_at_once_make_each_delivery_once() {
    let Some(url) = pg_database() else {
        return;
    };
    let n = nodes(&url, 3, Duration::from_secs(60)).await;
    let all = n[0].create_subscription(sub(&["*"])).await.unwrap();
    let denied = n[1]
        .create_subscription(sub(&["action.enqueued"]))
        .await
        .unwrap();
    // Writers and fan-outs on every node at once.
    let mut tasks = Vec::new();
    for (i, node) in n.iter().enumerate() {
        let node = node.clone();
        tasks.push(tokio::spawn(async move {
            let mut made = 0;
            for _ in 0..40 {
                node.insert_action(ask(&format!("agent-{i}")))
                    .await
                    .unwrap();
                made += node.fan_out(7).await.unwrap().0;
            }
            made
        }));
    }
    let mut made = 0;
    for t in tasks {
        made += t.await.unwrap();
    }
    loop {
        let (m, more) = n[2].fan_out(1000).await.unwrap();
        made += m;
        if !more && !n[2].outbox_behind().await.unwrap() {
            break;
        }
    }
    for s in [&all, &denied] {
        let d = n[0].list_deliveries(&s.id, None, None, 1000).await.unwrap();
        let seqs: Vec<i64> = d.iter().rev().map(|d| d.event_seq).collect();
        assert_eq!(seqs, (1..=120).collect::<Vec<_>>(), "{}", s.id);
    }
    assert_eq!(
        made, 240,
        "each delivery counted once by the node that made it"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_delivery_is_taken_by_one_node_until_its_lease_lapses() {
    let Some(url) = pg_database() else {
        return;
    };
    let n = nodes(&url, 2, Duration::from_millis(700)).await;
    let s = n[0].create_subscription(sub(&["*"])).await.unwrap();
    for _ in 0..20 {
        n[0].insert_action(ask("a")).await.unwrap();
    }
    assert_eq!(n[1].fan_out(1000).await.unwrap(), (20, false));
    // Both take at once: no delivery goes to both.
    let now = Utc::now();
    let (a, b) = tokio::join!(n[0].due_deliveries(now, 12), n[1].due_deliveries(now, 12));
    let (a, b) = (a.unwrap(), b.unwrap());
    let ids_a: HashSet<String> = a.iter().map(|d| d.id.clone()).collect();
    let ids_b: HashSet<String> = b.iter().map(|d| d.id.clone()).collect();
    assert!(ids_a.is_disjoint(&ids_b), "{ids_a:?} {ids_b:?}");
    assert_eq!(ids_a.len() + ids_b.len(), 20);
    // In event order, each node's share.
    let seq = |d: &DueDelivery| {
        serde_json::from_str::<serde_json::Value>(&d.payload).unwrap()["seq"].as_i64()
    };
    assert!(a.windows(2).all(|w| seq(&w[0]) < seq(&w[1])));
    // The holder sees its own again (as SQLite's one sender does); the
    // other node does not, and waits for the lease.
    let again: HashSet<String> = n[0]
        .due_deliveries(Utc::now(), 100)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.id)
        .collect();
    assert_eq!(again, ids_a);
    assert!(
        n[1].due_deliveries(Utc::now(), 100)
            .await
            .unwrap()
            .iter()
            .all(|d| ids_b.contains(&d.id))
    );
    let first_due = n[1]
        .pending_schedule(100)
        .await
        .unwrap()
        .into_iter()
        .filter(|(id, _)| ids_a.contains(id))
        .map(|(_, at)| at)
        .min()
        .unwrap();
    assert!(
        first_due > Utc::now() + chrono::Duration::milliseconds(200),
        "node 1 sees node 0's deliveries due only when the lease lapses"
    );
    // Node 0 "dies" holding them: after the lease, node 1 takes them over.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let taken: HashSet<String> = n[1]
        .due_deliveries(Utc::now(), 100)
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.id)
        .collect();
    assert!(ids_a.is_subset(&taken));
    // Node 0 comes back late with a retry of one it lost: recorded, but the
    // schedule stays node 1's; node 1 delivers it; node 0's later failure
    // does not undo that.
    let late = ids_a.iter().next().unwrap().clone();
    let later = Utc::now() + chrono::Duration::hours(1);
    n[0].record_attempt(&late, attempt(AttemptOutcome::Retry(later)))
        .await
        .unwrap();
    assert!(
        n[1].due_deliveries(Utc::now(), 100)
            .await
            .unwrap()
            .iter()
            .any(|d| d.id == late)
    );
    let mut ok = attempt(AttemptOutcome::Delivered);
    ok.status_code = Some(200);
    ok.error = None;
    n[1].record_attempt(&late, ok).await.unwrap();
    n[0].record_attempt(&late, attempt(AttemptOutcome::Failed))
        .await
        .unwrap();
    let d = n[0].list_deliveries(&s.id, None, None, 100).await.unwrap();
    let d = d.iter().find(|d| d.id == late).unwrap();
    assert_eq!(d.status, DeliveryStatus::Delivered);
    assert_eq!(d.attempts, 3);
    assert_eq!(d.attempt_log.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chat_messages_are_queued_and_taken_once_across_nodes() {
    let Some(url) = pg_database() else {
        return;
    };
    let n = nodes(&url, 3, Duration::from_secs(60)).await;
    // Every node hears every event and queues the same post.
    let mut tasks = Vec::new();
    for node in &n {
        for item in 0..10 {
            let node = node.clone();
            tasks.push(tokio::spawn(async move {
                let posted = node
                    .connector_post("telegram", &format!("a{item}"), "{}".into())
                    .await
                    .unwrap();
                let seen = node
                    .connector_first_seen("telegram", &format!("cq:{item}"))
                    .await
                    .unwrap();
                (posted, seen)
            }));
        }
    }
    let mut posted = 0;
    let mut seen = 0;
    for t in tasks {
        let (p, s) = t.await.unwrap();
        posted += usize::from(p);
        seen += usize::from(s);
    }
    assert_eq!((posted, seen), (10, 10));
    let now = Utc::now();
    let (a, b, c) = tokio::join!(
        n[0].connector_due(now, 4),
        n[1].connector_due(now, 4),
        n[2].connector_due(now, 4)
    );
    let mut ids = HashSet::new();
    let mut total = 0;
    let mut held = Vec::new();
    for due in [a.unwrap(), b.unwrap(), c.unwrap()] {
        total += due.len();
        assert!(due.windows(2).all(|w| w[0].id < w[1].id));
        held.push(due.iter().map(|o| o.id).collect::<HashSet<_>>());
        ids.extend(due.into_iter().map(|o| o.id));
    }
    assert_eq!(
        (ids.len(), total),
        (10, 10),
        "each message taken by one node"
    );
    // Nothing is due for a node while another holds it: asked again, each
    // node gets back what it holds and nothing another does.
    for (i, node) in n.iter().enumerate() {
        let again: HashSet<i64> = node
            .connector_due(Utc::now(), 100)
            .await
            .unwrap()
            .into_iter()
            .map(|o| o.id)
            .collect();
        assert_eq!(again, held[i], "node {i}");
    }
    // Sent from node 1; the edits, queued by all three, are queued once.
    for id in &ids {
        n[1].connector_sent(*id, Some(format!("m{id}")))
            .await
            .unwrap();
    }
    let edits = futures::future::join_all(
        n.iter()
            .map(|node| node.connector_edit("telegram", "a0", "{}".into())),
    )
    .await;
    assert_eq!(edits.iter().filter(|e| *e.as_ref().unwrap()).count(), 1);
    assert!(
        n[2].connector_message_ref("telegram", "a0")
            .await
            .unwrap()
            .is_some()
    );
    // A retry is recorded by the node holding the message, not another.
    let edit = n[0].connector_due(Utc::now(), 10).await.unwrap();
    assert_eq!(edit.len(), 1);
    let later = Utc::now() + chrono::Duration::hours(1);
    n[1].connector_retry(edit[0].id, later, "not mine".into())
        .await
        .unwrap();
    assert_eq!(n[0].connector_due(Utc::now(), 10).await.unwrap(), edit);
    n[0].connector_retry(edit[0].id, later, "down".into())
        .await
        .unwrap();
    assert!(n[0].connector_due(Utc::now(), 10).await.unwrap().is_empty());
    let due = n[2].connector_due(later, 10).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].attempts, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn anchors_and_retention_on_every_node_keep_one_verifiable_chain() {
    let Some(url) = pg_database() else {
        return;
    };
    let n = nodes(&url, 3, Duration::from_secs(60)).await;
    let dir = tempfile::tempdir().unwrap();
    // Every node signs with the same key (the README copies it).
    let key = AuditKey::load_or_create(&dir.path().join("audit.key")).unwrap();
    for node in &n {
        node.start_anchors(key.clone(), Duration::from_millis(20))
            .await;
    }
    let writers: Vec<_> = n
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let node = node.clone();
            tokio::spawn(async move {
                for j in 0..60 {
                    node.insert_action(ask(&format!("agent-{i}")))
                        .await
                        .unwrap();
                    if j % 15 == 0 {
                        tokio::time::sleep(Duration::from_millis(30)).await;
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    // Retention on every node at once, in small batches.
    let cutoff = Utc::now() + chrono::Duration::hours(1);
    let pruners: Vec<_> = n
        .iter()
        .map(|node| {
            let node = node.clone();
            tokio::spawn(async move {
                let mut total = 0;
                for _ in 0..4 {
                    total += node.prune_events(cutoff, 10).await.unwrap();
                }
                total
            })
        })
        .collect();
    let mut pruned = 0;
    for p in pruners {
        pruned += p.await.unwrap();
    }
    // More events and anchors after the pruning.
    for _ in 0..10 {
        n[1].insert_action(ask("late")).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    for node in &n {
        node.close().await;
    }
    let store = open_node(&url).await;
    let anchor = store.audit_anchor().await.unwrap();
    // 120 of the 180 and more events written by then: none pruned twice.
    assert_eq!(pruned, 3 * 4 * 10);
    assert_eq!(anchor.seq, 120);
    let events = all_events(&store).await;
    assert_eq!(events[0].seq, anchor.seq + 1);
    let gapless = events.windows(2).all(|w| w[1].seq == w[0].seq + 1);
    assert!(gapless);
    let report = verify_chain(&events, &anchor, &key);
    assert!(report.anchors_signed >= 1, "{report:?}");
    let kinds: Vec<&str> = events.iter().map(|e| e.kind.as_str()).collect();
    assert!(
        kinds
            .windows(2)
            .all(|w| !(w[0] == ANCHOR_EVENT && w[1] == ANCHOR_EVENT)),
        "two anchors in a row: nodes anchored the same point"
    );
    assert_eq!(kinds.last(), Some(&ANCHOR_EVENT));
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn after_postgres_restarts_a_node_hears_the_others_without_polling() {
    // A durable cluster of its own: this test stops it.
    let cluster = match pg_cluster::Cluster::start_durable() {
        Ok(c) => c,
        Err(e) if pg_cluster::required() => panic!("Postgres is required: {e}"),
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    let url = cluster.database();
    // Polling so rare that only LISTEN/NOTIFY can deliver within the test.
    let node = |url: &str| {
        let mut pg = PgOptions::new(url);
        pg.poll_interval = Duration::from_secs(600);
        pg.connect_timeout = Duration::from_secs(1);
        open_node_with(pg)
    };
    let a = node(&url).await;
    let b = node(&url).await;
    let mut heard = a.subscribe();
    let (before, _) = b.insert_action(ask("a")).await.unwrap();
    let ev = tokio::time::timeout(Duration::from_secs(5), heard.recv())
        .await
        .expect("node a heard node b before the restart")
        .unwrap();
    assert_eq!(ev.action_id.as_deref(), Some(before.id.as_str()));
    // Node a's pool holds several connections, idle, when Postgres stops.
    let reads = |n: usize| {
        let a = a.clone();
        let id = before.id.clone();
        async move {
            futures::future::join_all((0..n).map(|_| a.get_action(&id)))
                .await
                .into_iter()
                .collect::<Vec<_>>()
        }
    };
    assert!(reads(16).await.iter().all(Result::is_ok));

    cluster.stop_server().unwrap();
    // Down longer than the connect timeout: the listening connection's own
    // attempt to come back fails too, and the node has to listen anew.
    for _ in 0..3 {
        let t = Instant::now();
        assert!(matches!(
            b.insert_action(ask("a")).await,
            Err(StoreError::Unavailable(_))
        ));
        // connect_timeout (1 s here, 5 s by default) bounds the wait.
        assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    }
    cluster.start_server().unwrap();

    // Node a's connections from before the restart are all gone: none is
    // handed out (each is tested first), so its first requests succeed.
    for answer in reads(16).await {
        assert!(answer.is_ok(), "{answer:?}");
    }

    // Both pools reconnect by themselves.
    let started = Instant::now();
    let after = loop {
        match b.insert_action(ask("a")).await {
            Ok((action, _)) => break action,
            Err(e) => {
                assert!(started.elapsed() < Duration::from_secs(30), "{e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    let ev = tokio::time::timeout(Duration::from_secs(5), heard.recv())
        .await
        .expect("node a listens again after the restart")
        .unwrap();
    assert_eq!(ev.action_id.as_deref(), Some(after.id.as_str()));
    assert_eq!(
        ev.seq, 2,
        "nothing acknowledged was lost, nothing else written"
    );
    assert_eq!(a.get_action(&before.id).await.unwrap(), before);
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_stuck_behind_a_lock_is_cancelled_after_the_statement_timeout() {
    use sqlx::{Connection, Executor};
    let Some(url) = pg_database() else {
        return;
    };
    let mut pg = PgOptions::new(&url);
    pg.statement_timeout = Duration::from_millis(300);
    let store = open_node_with(pg).await;
    // Another client holds the table every commit that writes events
    // inserts into.
    let mut other = sqlx::PgConnection::connect(&url).await.unwrap();
    other.execute("BEGIN").await.unwrap();
    other
        .execute("LOCK TABLE event_queue IN SHARE MODE")
        .await
        .unwrap();
    let t = Instant::now();
    let stuck = store.insert_action(ask("a")).await;
    assert!(matches!(stuck, Err(StoreError::Busy)), "{stuck:?}");
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    other.execute("ROLLBACK").await.unwrap();
    // Nothing of the cancelled write was kept; the next one goes through.
    store.insert_action(ask("a")).await.unwrap();
    assert_eq!(all_events(&store).await.len(), 1);
    store.close().await;
}

/// A store's connection left idle inside a transaction (its daemon hung:
/// stopped, a paused VM) is ended by Postgres after the statement timeout,
/// its transaction rolled back and its locks let go, so the other daemons
/// waiting on them go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_left_idle_is_ended_after_the_statement_timeout() {
    use sqlx::{ConnectOptions, Executor, Row};
    let Some(url) = pg_database() else {
        return;
    };
    let mut pg = PgOptions::new(&url);
    pg.statement_timeout = Duration::from_millis(400);
    let mut hung = actiongate_store::connect_options(&pg)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let shown = hung
        .fetch_one("SHOW idle_in_transaction_session_timeout")
        .await
        .unwrap();
    assert_eq!(shown.get::<String, _>(0), "400ms");
    hung.execute("BEGIN").await.unwrap();
    hung.execute("SELECT pg_advisory_xact_lock_shared(hashtext('actiongate.grants'))")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Another session gets the lock exclusively: the idle one was ended.
    let mut other = url
        .parse::<sqlx::postgres::PgConnectOptions>()
        .unwrap()
        .connect()
        .await
        .unwrap();
    let got: bool = other
        .fetch_one("SELECT pg_try_advisory_lock(hashtext('actiongate.grants'))")
        .await
        .unwrap()
        .get(0);
    assert!(got, "the hung transaction still holds its lock");
    assert!(hung.execute("SELECT 1").await.is_err());
}

/// Three nodes writing at once through every kind of write (an action that
/// needs nothing read first, one that asks, one with an idempotency key, a
/// decision): each node publishes every event once, in seq order, with no
/// gap, and the same events as the log holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_node_publishes_every_event_once_in_order_while_all_write() {
    let Some(url) = pg_database() else {
        return;
    };
    let n = nodes(&url, 3, Duration::from_secs(60)).await;
    let mut heard: Vec<_> = n.iter().map(Store::subscribe).collect();
    let approve = Transition {
        from: &[ActionStatus::Pending],
        to: ActionStatus::Approved,
        decided_by: Some("op".to_owned()),
        note: None,
        outcome: None,
        event: "action.approved",
    };
    let writers: Vec<_> = n
        .iter()
        .enumerate()
        .map(|(i, node)| {
            let (node, approve) = (node.clone(), approve.clone());
            tokio::spawn(async move {
                for j in 0..30 {
                    let mut new = ask(&format!("agent-{i}"));
                    match j % 3 {
                        0 => new.decision.result = DecisionResult::Allow,
                        1 => {}
                        _ => {
                            new.decision.result = DecisionResult::Allow;
                            new.idempotency_key = Some(format!("k{j}"));
                        }
                    }
                    let (a, _) = node.insert_action(new).await.unwrap();
                    if a.status == ActionStatus::Pending {
                        node.transition(&a.id, approve.clone()).await.unwrap();
                    }
                }
            })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    // 90 actions, 30 of them approved later: 120 events.
    let total = 120;
    let logged = all_events(&n[0]).await;
    assert_eq!(logged.len(), total);
    for (i, rx) in heard.iter_mut().enumerate() {
        let mut got = Vec::new();
        while got.len() < total {
            let ev = tokio::time::timeout(Duration::from_secs(5), rx.recv())
                .await
                .unwrap_or_else(|_| panic!("node {i} heard only {}", got.len()))
                .unwrap();
            got.push(ev);
        }
        let seqs: Vec<i64> = got.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=total as i64).collect::<Vec<_>>(), "node {i}");
        for (ev, log) in got.iter().zip(&logged) {
            assert_eq!(**ev, *log, "node {i} published what the log holds");
        }
        // Nothing more (no event published twice).
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(rx.try_recv().is_err(), "node {i}");
    }
    for node in &n {
        node.close().await;
    }
}

/// Three nodes writing at full rate (every node several writers at once,
/// no pause), each with a subscriber draining as it goes: every subscriber
/// on every node sees every seq exactly once, in order, the seqs are 1..N
/// with no gap, and what each published is what the log holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_writing_at_full_rate_publish_seqs_one_to_n_everywhere() {
    let Some(url) = pg_database() else {
        return;
    };
    let n = nodes(&url, 3, Duration::from_secs(60)).await;
    let (writers_per_node, per_writer) = (6, 25);
    let total = 3 * writers_per_node * per_writer;
    let listeners: Vec<_> = n
        .iter()
        .map(|node| {
            let mut rx = node.subscribe();
            tokio::spawn(async move {
                let mut got = Vec::new();
                while got.len() < total {
                    match tokio::time::timeout(Duration::from_secs(20), rx.recv()).await {
                        Ok(Ok(ev)) => got.push(ev),
                        _ => break,
                    }
                }
                // Nothing more (no event published twice).
                tokio::time::sleep(Duration::from_millis(100)).await;
                (got, rx.try_recv().is_err())
            })
        })
        .collect();
    let mut writers = Vec::new();
    for (i, node) in n.iter().enumerate() {
        for w in 0..writers_per_node {
            let node = node.clone();
            writers.push(tokio::spawn(async move {
                for j in 0..per_writer {
                    let mut new = ask(&format!("agent-{i}-{w}"));
                    // Both ways of writing: one statement, and a
                    // transaction of several (an idempotency key).
                    new.decision.result = DecisionResult::Allow;
                    if j % 2 == 1 {
                        new.idempotency_key = Some(format!("k{i}-{w}-{j}"));
                    }
                    node.insert_action(new).await.unwrap();
                }
            }));
        }
    }
    for w in writers {
        w.await.unwrap();
    }
    let logged = all_events(&n[0]).await;
    assert_eq!(
        logged.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=total as i64).collect::<Vec<_>>(),
        "the log holds seqs 1..N"
    );
    for (i, l) in listeners.into_iter().enumerate() {
        let (got, nothing_more) = l.await.unwrap();
        let seqs: Vec<i64> = got.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (1..=total as i64).collect::<Vec<_>>(), "node {i}");
        for (ev, log) in got.iter().zip(&logged) {
            assert_eq!(**ev, *log, "node {i} published what the log holds");
        }
        assert!(nothing_more, "node {i} published an event twice");
    }
    for node in &n {
        node.close().await;
    }
}

/// A transaction that queued its events before others but commits after
/// they were numbered and published is never skipped: the first pass
/// after its commit numbers its events after everything published, and
/// every node publishes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_late_committer_is_numbered_after_what_was_published_never_skipped() {
    use sqlx::{Connection, Executor};
    let Some(url) = pg_database() else {
        return;
    };
    let n = nodes(&url, 2, Duration::from_secs(60)).await;
    let mut heard: Vec<_> = n.iter().map(Store::subscribe).collect();
    let mut late = sqlx::PgConnection::connect(&url).await.unwrap();
    late.execute("BEGIN").await.unwrap();
    late.execute(
        "INSERT INTO event_queue (pos, n, id, type, at, agent, action_id, grant_id, data) \
         VALUES (nextval('event_pos'), 1, 'late', 'test.late', 1, NULL, NULL, NULL, '{}')",
    )
    .await
    .unwrap();
    // Queued after it (a higher pos), committed and published before it.
    let (first, _) = n[0].insert_action(ask("a")).await.unwrap();
    for rx in &mut heard {
        let ev = rx.recv().await.unwrap();
        assert_eq!(
            (ev.seq, ev.action_id.as_deref()),
            (1, Some(first.id.as_str()))
        );
    }
    late.execute("COMMIT").await.unwrap();
    // The next commit's pass (on the other node) numbers both.
    let (second, _) = n[1].insert_action(ask("a")).await.unwrap();
    for (i, rx) in heard.iter_mut().enumerate() {
        let mut got = Vec::new();
        for _ in 0..2 {
            let ev = tokio::time::timeout(Duration::from_secs(5), rx.recv())
                .await
                .unwrap_or_else(|_| panic!("node {i} heard only {got:?}"))
                .unwrap();
            got.push((ev.seq, ev.id.clone(), ev.action_id.clone()));
        }
        assert_eq!(got[0], (2, "late".to_owned(), None), "node {i}");
        assert_eq!(
            (got[1].0, got[1].2.as_deref()),
            (3, Some(second.id.as_str()))
        );
    }
    // A late committer nobody's commit follows is numbered by the tails'
    // sweep (at each poll).
    late.execute(
        "INSERT INTO event_queue (pos, n, id, type, at, agent, action_id, grant_id, data) \
         VALUES (nextval('event_pos'), 1, 'stray', 'test.late', 1, NULL, NULL, NULL, '{}')",
    )
    .await
    .unwrap();
    for (i, rx) in heard.iter_mut().enumerate() {
        let ev = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("node {i} never heard the stray event"))
            .unwrap();
        assert_eq!((ev.seq, ev.id.as_str()), (4, "stray"), "node {i}");
    }
    for node in &n {
        node.close().await;
    }
}

/// The backend pid of the one other session waiting for a lock in this
/// test's database (tests running beside it share the cluster).
async fn lock_waiter(admin: &mut sqlx::PgConnection) -> i32 {
    let started = Instant::now();
    loop {
        let pid: Option<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
             AND pid <> pg_backend_pid() AND datname = current_database() LIMIT 1",
        )
        .fetch_optional(&mut *admin)
        .await
        .unwrap();
        if let Some(pid) = pid {
            return pid;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "nobody waits");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Faults in the middle of a write (its connection killed, a deadlock)
/// are answered as "try again" (503: unavailable, busy), never as a 500,
/// and leave nothing half-written; the next write goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_in_the_middle_of_a_write_are_retryable_and_write_nothing() {
    use sqlx::{Connection, Executor};
    let Some(url) = pg_database() else {
        return;
    };
    let store = open_node(&url).await;
    store
        .put_agent("a", None, Some(serde_json::json!("guarded")))
        .await
        .unwrap();
    let mut other = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();

    // Its connection killed while it waits to append its events: an action
    // that asks (a transaction of several statements) and one allowed (one
    // statement).
    for result in [DecisionResult::Ask, DecisionResult::Allow] {
        other.execute("BEGIN").await.unwrap();
        other
            .execute("LOCK TABLE event_queue IN SHARE MODE")
            .await
            .unwrap();
        let mut new = ask("a");
        new.decision.result = result;
        let write = tokio::spawn({
            let store = store.clone();
            async move { store.insert_action(new).await }
        });
        let pid = lock_waiter(&mut admin).await;
        sqlx::query("SELECT pg_terminate_backend($1)")
            .bind(pid)
            .execute(&mut admin)
            .await
            .unwrap();
        let answer = write.await.unwrap();
        assert!(
            matches!(answer, Err(StoreError::Unavailable(_))),
            "{result:?}: {answer:?}"
        );
        other.execute("ROLLBACK").await.unwrap();
    }
    assert_eq!(all_events(&store).await.len(), 0);
    let stored: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM actions")
        .fetch_one(&mut admin)
        .await
        .unwrap();
    assert_eq!(stored, 0, "nothing half-written");

    // A deadlock: the store's grant waits for an action another session
    // holds, and that session then waits for what the grant holds.
    let (first, _) = store.insert_action(ask("a")).await.unwrap();
    other.execute("BEGIN").await.unwrap();
    sqlx::query("SELECT id FROM actions WHERE id = $1 FOR UPDATE")
        .bind(&first.id)
        .execute(&mut other)
        .await
        .unwrap();
    let grant = NewGrant {
        session: None,
        uses: None,
        id: uuid::Uuid::now_v7().to_string(),
        agent: Some("a".to_owned()),
        target: NewGrantTarget::Tool {
            tool: "bash".to_owned(),
            pattern: "make".to_owned(),
            whole_line: false,
        },
        granted_by: "op".to_owned(),
        expires_at: None,
        note: None,
    };
    let write = tokio::spawn({
        let (store, first) = (store.clone(), first.id.clone());
        async move {
            let first = ApproveFirst {
                action_id: first,
                decided_by: "op".to_owned(),
                seen: actiongate_store::PersonSeen::of("op", None),
                note: None,
                person: "op".to_owned(),
                channel: "api".to_owned(),
                taints: false,
            };
            store.create_grant(grant, Some(first)).await
        }
    });
    lock_waiter(&mut admin).await;
    // Waits for the grant's lock; Postgres finds the cycle and cancels
    // whichever waited first: the store's write.
    let closing = other
        .execute("SELECT pg_advisory_xact_lock(hashtext('actiongate.grants'))")
        .await;
    let answer = write.await.unwrap();
    assert!(matches!(answer, Err(StoreError::Busy)), "{answer:?}");
    closing.unwrap();
    other.execute("ROLLBACK").await.unwrap();
    assert_eq!(all_events(&store).await.len(), 1, "only the first action's");

    // The pool makes new connections for the ones lost.
    let (again, _) = store.insert_action(ask("a")).await.unwrap();
    assert_eq!(again.status, ActionStatus::Pending);
    store.close().await;
}
