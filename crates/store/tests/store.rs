//! The store against a real SQLite file.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use crate::backends::{Kind, open};
use actiongate_store::*;
use chrono::Utc;

async fn open_sqlite() -> (Store, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("t.db"), StoreOptions::default())
        .await
        .unwrap();
    (store, dir)
}

fn new_action(agent: &str, result: DecisionResult, key: Option<&str>, hash: &str) -> NewAction {
    let decision = Decision {
        result,
        reason: "test".to_owned(),
        rule: None,
    };
    NewAction {
        deadline: Some(Utc::now() + chrono::Duration::minutes(5)),
        idempotency_key: key.map(str::to_owned),
        request_hash: hash.to_owned(),
        ..NewAction::new(
            agent.to_owned(),
            "bash".to_owned(),
            "make".to_owned(),
            decision,
        )
    }
}

const APPROVE: Transition = Transition {
    from: &[ActionStatus::Pending],
    to: ActionStatus::Approved,
    decided_by: None,
    note: None,
    outcome: None,
    event: "action.approved",
};

async fn initial_status_follows_the_decision_and_records_an_event(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let mut events = store.subscribe();
    let (a, created) = store
        .insert_action(new_action("a", DecisionResult::Allow, None, "h"))
        .await
        .unwrap();
    assert!(created);
    assert_eq!(a.status, ActionStatus::Approved);
    assert_eq!(a.deadline, None);
    let (p, _) = store
        .insert_action(new_action("a", DecisionResult::Ask, None, "h"))
        .await
        .unwrap();
    assert_eq!(p.status, ActionStatus::Pending);
    assert!(p.deadline.is_some());
    let (d, _) = store
        .insert_action(new_action("a", DecisionResult::Deny, None, "h"))
        .await
        .unwrap();
    assert_eq!(d.status, ActionStatus::Denied);
    let kinds: Vec<String> = (0..3)
        .map(|_| events.try_recv().unwrap().kind.clone())
        .collect();
    assert_eq!(
        kinds,
        ["action.approved", "action.enqueued", "action.denied"]
    );
    assert_eq!(store.get_action(&p.id).await.unwrap(), p);
}

async fn a_failing_job_does_not_disturb_its_batch(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    store
        .insert_action(new_action("a", DecisionResult::Ask, Some("k"), "h1"))
        .await
        .unwrap();
    // Many writes at once share commits; the one reusing the key with
    // another body fails alone.
    let mut tasks = Vec::new();
    for i in 0..40 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            if i == 20 {
                store
                    .insert_action(new_action("a", DecisionResult::Ask, Some("k"), "other"))
                    .await
            } else {
                store
                    .insert_action(new_action("a", DecisionResult::Ask, None, "h"))
                    .await
            }
        }));
    }
    let mut ok = 0;
    let mut conflicts = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok(_) => ok += 1,
            Err(StoreError::Conflict(_)) => conflicts += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!((ok, conflicts), (39, 1));
    let all = store
        .list_actions(&ActionFilter {
            session: None,
            limit: 100,
            ..ActionFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(all.len(), 40);
    let events = store.events_after(0, None, 1000).await.unwrap();
    assert_eq!(events.len(), 40);
    assert!(events.windows(2).all(|w| w[0].seq < w[1].seq));
}

async fn a_failing_new_action_does_not_disturb_the_ones_written_with_it(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let (first, _) = store
        .insert_action(new_action("a", DecisionResult::Allow, None, "h"))
        .await
        .unwrap();
    let mut live = store.subscribe();
    // New actions queued together are written with one statement per table;
    // the one reusing an id makes that statement fail, and then only it.
    let mut tasks = Vec::new();
    for i in 0..60 {
        let store = store.clone();
        let mut new = new_action("a", DecisionResult::Allow, None, "h");
        if i == 30 {
            new.id = first.id.clone();
        }
        tasks.push(tokio::spawn(async move { store.insert_action(new).await }));
    }
    let mut created = Vec::new();
    let mut conflicts = 0;
    for t in tasks {
        match t.await.unwrap() {
            Ok((a, true)) => created.push(a),
            Ok((_, false)) => panic!("nothing was a retry"),
            Err(StoreError::Conflict(_)) => conflicts += 1,
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!((created.len(), conflicts), (59, 1));
    for a in &created {
        assert_eq!(&store.get_action(&a.id).await.unwrap(), a);
    }
    // What was published is exactly the log after the first event, in order.
    let log = store.events_after(1, None, 1000).await.unwrap();
    assert_eq!(log.len(), 59);
    let published: Vec<Event> = (0..59)
        .map(|_| live.try_recv().unwrap().as_ref().clone())
        .collect();
    assert_eq!(published, log);
    assert!(live.try_recv().is_err());
    assert_eq!(store.last_seq(), log.last().unwrap().seq);
}

async fn a_job_failing_alone_in_its_batch_leaves_nothing_behind(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let (first, _) = store
        .insert_action(new_action("a", DecisionResult::Allow, None, "h"))
        .await
        .unwrap();
    let mut again = new_action("a", DecisionResult::Ask, None, "h");
    again.id = first.id.clone();
    assert!(matches!(
        store.insert_action(again).await,
        Err(StoreError::Conflict(_))
    ));
    // Also for general work: the agent's key is refused, nothing is kept.
    let (other, _) = store
        .insert_action(new_action("b", DecisionResult::Ask, Some("k"), "h"))
        .await
        .unwrap();
    assert!(matches!(
        store
            .insert_action(new_action("b", DecisionResult::Ask, Some("k"), "x"))
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert_eq!(store.get_action(&first.id).await.unwrap(), first);
    let events = store.events_after(0, None, 100).await.unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[1].action_id.as_deref(), Some(other.id.as_str()));
    // The writer goes on.
    store
        .insert_action(new_action("a", DecisionResult::Deny, None, "h"))
        .await
        .unwrap();
    assert_eq!(store.events_after(0, None, 100).await.unwrap().len(), 3);
}

async fn same_key_same_body_returns_the_existing_action(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let (first, created) = store
        .insert_action(new_action("a", DecisionResult::Ask, Some("k"), "h"))
        .await
        .unwrap();
    assert!(created);
    let (again, created) = store
        .insert_action(new_action("a", DecisionResult::Ask, Some("k"), "h"))
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(first, again);
    // Keys are per agent.
    let (_, created) = store
        .insert_action(new_action("b", DecisionResult::Ask, Some("k"), "h"))
        .await
        .unwrap();
    assert!(created);
}

async fn transitions_are_compare_and_set(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let (p, _) = store
        .insert_action(new_action("a", DecisionResult::Ask, None, "h"))
        .await
        .unwrap();
    let mut approve = APPROVE;
    approve.decided_by = Some("key:op".to_owned());
    let a = store.transition(&p.id, approve.clone()).await.unwrap();
    assert_eq!(a.status, ActionStatus::Approved);
    assert_eq!(a.decided_by.as_deref(), Some("key:op"));
    match store.transition(&p.id, approve).await {
        Err(StoreError::WrongState { current }) => assert_eq!(current, "approved"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        store.transition("nope", APPROVE).await,
        Err(StoreError::NotFound)
    ));
}

/// Past its deadline a pending action is decided by nobody, even before
/// the sweeper has written it expired: a decision gets `expired`.
async fn a_pending_action_past_its_deadline_cannot_be_decided(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let mut soon = new_action("a", DecisionResult::Ask, None, "h");
    soon.deadline = Some(Utc::now() + chrono::Duration::milliseconds(50));
    let (soon, _) = store.insert_action(soon).await.unwrap();
    tokio::time::sleep(Duration::from_millis(80)).await;
    match store.transition(&soon.id, APPROVE).await {
        Err(StoreError::WrongState { current }) => assert_eq!(current, "expired"),
        other => panic!("{other:?}"),
    }
    // Nothing was written: the expiry is the sweeper's to record.
    assert_eq!(
        store.get_action(&soon.id).await.unwrap().status,
        ActionStatus::Pending
    );
    let expired = store.expire_due(Utc::now()).await.unwrap();
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].decided_by.as_deref(), Some("deadline"));
}

async fn expire_due_expires_only_overdue_pending_actions(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let mut soon = new_action("a", DecisionResult::Ask, None, "h");
    soon.deadline = Some(Utc::now() + chrono::Duration::milliseconds(50));
    let (soon, _) = store.insert_action(soon).await.unwrap();
    let (later, _) = store
        .insert_action(new_action("a", DecisionResult::Ask, None, "h"))
        .await
        .unwrap();
    assert_eq!(store.next_deadline().await.unwrap(), soon.deadline);
    tokio::time::sleep(Duration::from_millis(80)).await;
    let expired = store.expire_due(Utc::now()).await.unwrap();
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].id, soon.id);
    assert_eq!(expired[0].status, ActionStatus::Expired);
    assert_eq!(
        store.get_action(&later.id).await.unwrap().status,
        ActionStatus::Pending
    );
    assert_eq!(store.next_deadline().await.unwrap(), later.deadline);
    let events = store.action_events(&soon.id).await.unwrap();
    assert_eq!(events.last().unwrap().kind, "action.expired");
}

async fn data_survives_reopening_and_closed_store_refuses_writes(kind: Kind) {
    // What a second open finds the same database by.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let url = match kind {
        Kind::Sqlite => None,
        Kind::Postgres => match crate::backends::pg_database() {
            Some(url) => Some(url),
            None => return,
        },
    };
    let reopen = || async {
        match &url {
            None => Store::open(&path, StoreOptions::default()).await.unwrap(),
            Some(url) => crate::backends::open_node(url).await,
        }
    };
    let store = reopen().await;
    let (a, _) = store
        .insert_action(new_action("a", DecisionResult::Ask, None, "h"))
        .await
        .unwrap();
    store.close().await;
    let refused = store
        .insert_action(new_action("a", DecisionResult::Ask, None, "h"))
        .await;
    assert!(matches!(refused, Err(StoreError::Closed)), "{refused:?}");
    let store = reopen().await;
    assert_eq!(store.get_action(&a.id).await.unwrap(), a);
    assert!(store.last_seq() >= 1);
    store.ready().await.unwrap();
}

async fn a_database_a_newer_version_migrated_is_refused_unchanged(kind: Kind) {
    let Some((store, held)) = open(kind).await else {
        return;
    };
    let (a, _) = store
        .insert_action(new_action("a", DecisionResult::Ask, None, "h"))
        .await
        .unwrap();
    store.ready().await.unwrap();
    crate::backends::execute_raw(
        &held,
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (9999, 'later', 1, x'00', 1)",
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (9999, 'later', true, '\\x00'::bytea, 1)",
    )
    .await;
    // A daemon running when a newer one migrates leaves the rotation.
    let unready = store.ready().await;
    assert!(
        matches!(unready, Err(StoreError::Newer(9999))),
        "{unready:?}"
    );
    store.close().await;
    let refused = crate::backends::try_reopen(&held).await;
    assert!(
        matches!(refused, Err(StoreError::Newer(9999))),
        "{:?}",
        refused.err()
    );
    crate::backends::execute_raw(
        &held,
        "DELETE FROM _sqlx_migrations WHERE version = 9999",
        "DELETE FROM _sqlx_migrations WHERE version = 9999",
    )
    .await;
    let store = crate::backends::reopen(&held).await;
    assert_eq!(store.get_action(&a.id).await.unwrap(), a);
}

/// A Postgres database with a client connected that is not a daemon of
/// this version (no name, as daemons before the names; or any other name)
/// is not migrated, unless asked to beside other clients; with nothing to
/// migrate it opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_is_not_migrated_beside_an_unnamed_client() {
    use sqlx::Connection;
    let Some(url) = crate::backends::pg_database() else {
        return;
    };
    let mut unnamed = sqlx::PgConnection::connect(&url).await.unwrap();
    let refused = Store::open_postgres(&PgOptions::new(&url), StoreOptions::default()).await;
    assert!(
        matches!(&refused, Err(StoreError::Conflict(m)) if m.contains("older actiongate")),
        "{:?}",
        refused.err()
    );
    let tables: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public'",
    )
    .fetch_one(&mut unnamed)
    .await
    .unwrap();
    assert_eq!(tables, 0, "nothing was migrated");
    assert!(matches!(
        migrate_postgres(&url, false).await,
        Err(StoreError::Conflict(_))
    ));
    // A client named anything but a daemon of this version holds it back
    // too: an older daemon may have been given a name of its own.
    let named = url
        .parse::<sqlx::postgres::PgConnectOptions>()
        .unwrap()
        .application_name("actiongate-prod");
    let mut other = sqlx::PgConnection::connect_with(&named).await.unwrap();
    unnamed.close().await.unwrap();
    let refused = migrate_postgres(&url, false).await;
    assert!(
        matches!(&refused, Err(StoreError::Conflict(m)) if m.contains("actiongate-prod")),
        "{:?}",
        refused.err()
    );
    let (from, to) = migrate_postgres(&url, true).await.unwrap();
    assert_eq!(from, 0);
    assert!(to > 0);
    let store = crate::backends::open_node(&url).await;
    store.ready().await.unwrap();
    // A daemon's own connections are named, and do not hold up another.
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT application_name FROM pg_stat_activity WHERE datname = current_database() \
         AND pid <> pg_backend_pid()",
    )
    .fetch_all(&mut other)
    .await
    .unwrap();
    assert!(
        names.iter().any(|n| n.starts_with("actiongate m")),
        "{names:?}"
    );
    store.close().await;
}

async fn keys_are_found_by_hash_until_revoked(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let key = store
        .create_key(NewKey {
            id: "key_1".into(),
            name: "n".into(),
            role: Role::Operator,
            agent: None,
            hash: "abc".into(),
        })
        .await
        .unwrap();
    assert_eq!(store.find_key("abc").await.unwrap(), Some(key.clone()));
    let ids = |ids: &[&str]| ids.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert!(
        store
            .inactive_keys(ids(&["key_1"]))
            .await
            .unwrap()
            .is_empty()
    );
    let revoked = store.revoke_key("key_1").await.unwrap();
    // Revoked and unknown keys are inactive, named once each, in the order
    // asked; more ids than one read names are read in several.
    let mut many = ids(&["nope", "key_1"]);
    many.extend((0..1200).map(|i| format!("k{i}")));
    let inactive = store.inactive_keys(many.clone()).await.unwrap();
    assert_eq!(inactive, many);
    assert!(store.inactive_keys(Vec::new()).await.unwrap().is_empty());
    assert!(revoked.revoked_at.is_some());
    assert_eq!(
        store.revoke_key("key_1").await.unwrap().revoked_at,
        revoked.revoked_at
    );
    assert_eq!(store.find_key("abc").await.unwrap(), None);
    assert!(matches!(
        store
            .create_key(NewKey {
                id: "key_2".into(),
                name: "n".into(),
                role: Role::Admin,
                agent: None,
                hash: "abc".into()
            })
            .await,
        Err(StoreError::Conflict(_))
    ));
}

async fn cached_grants_follow_creation_and_revocation(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    assert!(store.active_grants("a", "bash").await.unwrap().is_empty());
    // Read twice: the second answer comes from the cache.
    assert!(store.active_grants("a", "bash").await.unwrap().is_empty());
    let grant = NewGrant {
        session: None,
        uses: None,
        id: uuid::Uuid::now_v7().to_string(),
        agent: Some("a".to_owned()),
        target: NewGrantTarget::Tool {
            tool: "bash".to_owned(),
            pattern: "make.*".to_owned(),
            whole_line: false,
        },
        granted_by: "op".to_owned(),
        expires_at: None,
        note: None,
    };
    let id = grant.id.clone();
    store.create_grant(grant, None).await.unwrap();
    let active = store.active_grants("a", "bash").await.unwrap();
    assert_eq!(active.len(), 1);
    assert_eq!(active[0].id, id);
    assert!(store.active_grants("b", "bash").await.unwrap().is_empty());
    store.revoke_grant(&id).await.unwrap();
    assert!(store.active_grants("a", "bash").await.unwrap().is_empty());
}

fn claimed_handler_action(agent: &str, result: DecisionResult) -> NewAction {
    claimed_handler_action_keyed(agent, result, None)
}

fn claimed_handler_action_keyed(
    agent: &str,
    result: DecisionResult,
    key: Option<&str>,
) -> NewAction {
    NewAction {
        handler: Some(HandlerAction {
            handler: "files".to_owned(),
            action: "write".to_owned(),
            params: serde_json::json!({"path": "/a", "secret": "s3"}),
            params_view: serde_json::json!({"path": "/a", "secret": "***"}),
            permission: "fs.write".to_owned(),
            scope: serde_json::Map::from_iter([("path".to_owned(), serde_json::json!("/a"))]),
            display: Some(serde_json::json!("write /a")),
            hints: Some(actiongate_api::handlers::ActionHints {
                destructive: Some(true),
                ..Default::default()
            }),
            claim_until: Some(Utc::now() + chrono::Duration::seconds(60)),
        }),
        ..new_action(agent, result, key, "h")
    }
}

async fn an_allowed_handler_action_can_be_stored_claimed_and_settled_once(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let mut events = store.subscribe();
    let (running, created) = store
        .insert_action(claimed_handler_action("a", DecisionResult::Allow))
        .await
        .unwrap();
    assert!(created);
    assert_eq!(running.status, ActionStatus::Running);
    assert_eq!(store.get_action(&running.id).await.unwrap(), running);
    // The handler's hints are kept with it.
    assert_eq!(
        running.hints.as_ref().and_then(|h| h.destructive),
        Some(true)
    );
    let first = events.recv().await.unwrap();
    let second = events.recv().await.unwrap();
    assert_eq!(
        (first.kind.as_str(), second.kind.as_str()),
        ("action.approved", "action.started")
    );
    assert_eq!(second.seq, first.seq + 1);
    assert_eq!(first.data.to_value()["status"], "approved");
    // Claimed for attempt 1: nothing is due for the dispatch loop.
    assert!(
        store
            .due_for_dispatch(Utc::now(), 10, Vec::new())
            .await
            .unwrap()
            .is_empty()
    );

    let rec = ActionAttempt {
        n: 1,
        at: Utc::now(),
        status_code: Some(200),
        error: None,
        duration_ms: 3,
    };
    let outcome = Outcome {
        status: ActionStatus::Completed,
        result: Some(serde_json::json!({"ok": true})),
        error: None,
    };
    let settled = store
        .settle_attempt(&running, &rec, outcome.clone())
        .await
        .unwrap()
        .expect("attempt 1 was running");
    assert_eq!(settled.status, ActionStatus::Completed);
    // What the settle answers (and publishes) is what is stored.
    assert_eq!(store.get_action(&running.id).await.unwrap(), settled);
    let ev = events.recv().await.unwrap();
    assert_eq!(ev.kind, "action.completed");
    assert_eq!(ev.seq, second.seq + 1);
    assert_eq!(serde_json::to_value(&settled).unwrap(), ev.data.to_value());

    // The same attempt again (a duplicate answer) changes nothing.
    let again = store.settle_attempt(&running, &rec, outcome).await.unwrap();
    assert_eq!(again, None);
    assert_eq!(store.get_action(&running.id).await.unwrap(), settled);
    assert!(
        events.try_recv().is_err(),
        "no event for a superseded settle"
    );
}

async fn only_an_allowed_handler_action_is_stored_claimed(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let (asked, _) = store
        .insert_action(claimed_handler_action("a", DecisionResult::Ask))
        .await
        .unwrap();
    assert_eq!(asked.status, ActionStatus::Pending);
    let (denied, _) = store
        .insert_action(claimed_handler_action("a", DecisionResult::Deny))
        .await
        .unwrap();
    assert_eq!(denied.status, ActionStatus::Denied);
    // With an idempotency key the row is written on the other insert path
    // (after a lookup); the handler's hints are kept there too.
    let (keyed, _) = store
        .insert_action(claimed_handler_action_keyed(
            "a",
            DecisionResult::Ask,
            Some("k1"),
        ))
        .await
        .unwrap();
    assert_eq!(keyed.hints.as_ref().and_then(|h| h.destructive), Some(true));
    for a in [asked, denied, keyed] {
        assert_eq!(store.get_action(&a.id).await.unwrap(), a);
    }
}

async fn claim_next_takes_the_oldest_due_action_of_the_handler_once(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let unclaimed = |agent: &str| {
        let mut new = claimed_handler_action(agent, DecisionResult::Allow);
        if let Some(h) = new.handler.as_mut() {
            h.claim_until = None;
        }
        new
    };
    // Decision-only approved actions are not the dispatcher's business.
    store
        .insert_action(new_action("a", DecisionResult::Allow, None, "h"))
        .await
        .unwrap();
    let (first, _) = store.insert_action(unclaimed("a")).await.unwrap();
    let (second, _) = store.insert_action(unclaimed("b")).await.unwrap();
    assert_eq!(first.status, ActionStatus::Approved);
    let lease = Utc::now() + chrono::Duration::seconds(60);
    let none = store.claim_next("other", Utc::now(), lease).await.unwrap();
    assert!(none.is_none(), "another handler's action is not taken");
    for expected in [&first, &second] {
        let c = store
            .claim_next("files", Utc::now(), lease)
            .await
            .unwrap()
            .expect("one is due");
        assert_eq!(c.action.id, expected.id);
        assert_eq!(c.attempt, 1);
        assert_eq!(c.action.status, ActionStatus::Running);
        assert_eq!(
            c.params["secret"], "s3",
            "the executor gets the params as sent"
        );
    }
    let rest = store.claim_next("files", Utc::now(), lease).await.unwrap();
    assert!(rest.is_none());
    assert!(
        store
            .due_for_dispatch(Utc::now(), 10, Vec::new())
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn checkpoints_keep_the_wal_from_growing_without_bound() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        // SQLite's own threshold, so that these writes cross it often.
        wal_restart_frames: 1000,
        ..StoreOptions::default()
    };
    let store = Store::open(&dir.path().join("t.db"), opts).await.unwrap();
    let wal = dir.path().join("t.db-wal");
    // The writer does no automatic checkpoints, and under writes that never
    // pause the background copy never catches up with the end of the WAL:
    // without the writer's catch-up these 6,000 actions leave a WAL that only
    // grows (24 MB when last measured; 5-9 MB with it, depending on how many
    // frames a busy machine appends between a background copy, which comes
    // at most every 50 ms, and the writer's catch-up).
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..6000 / 32 {
                store
                    .insert_action(new_action("a", DecisionResult::Allow, None, "h"))
                    .await
                    .unwrap();
            }
        }));
    }
    let mut largest = 0;
    while !tasks.iter().all(|t| t.is_finished()) {
        largest = largest.max(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    for t in tasks {
        t.await.unwrap();
    }
    let events = store.events_after(0, None, 7000).await.unwrap();
    assert_eq!(events.len(), 6000 / 32 * 32);
    assert!(
        largest < 12 << 20,
        "the WAL reached {largest} bytes: it is not being reused"
    );
}

#[tokio::test]
async fn a_write_arriving_alone_does_not_wait_for_company() {
    let dir = tempfile::tempdir().unwrap();
    let opts = StoreOptions {
        commit_delay: Duration::from_secs(30),
        ..StoreOptions::default()
    };
    let store = Store::open(&dir.path().join("t.db"), opts).await.unwrap();
    // Group commit waits only when others arrived alongside.
    let written = tokio::time::timeout(
        Duration::from_secs(10),
        store.insert_action(new_action("a", DecisionResult::Allow, None, "h")),
    )
    .await;
    assert!(written.is_ok(), "a lone write waited for the commit delay");
    store.close().await;
}

/// Migration 5 rebuilds `actions` and `events` (cheaper inserts): rows, the
/// `seq` counter and every constraint but the dropped one survive it.
#[tokio::test]
async fn rebuilding_actions_and_events_keeps_rows_and_the_event_counter() {
    use sqlx::{ConnectOptions, Connection, Row};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.db");
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .create_if_missing(true)
        .connect()
        .await
        .unwrap();
    MIGRATOR.run_to(4, &mut conn).await.unwrap();
    sqlx::query(
        "INSERT INTO actions (id, agent, tool, detail, action_string, status, decision_result, \
         decision_reason, created_at, handler, attempts) \
         VALUES ('a1', 'ag', 'bash', 'make', 'tool:bash:make', 'pending', 'ask', 'r', 1, NULL, 0)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    for (id, at) in [("e1", 1), ("e2", 2), ("e3", 3)] {
        sqlx::query(
            "INSERT INTO events (id, type, at, agent, action_id, data) \
             VALUES (?, 'action.created', ?, 'ag', 'a1', '{\"id\":\"a1\"}')",
        )
        .bind(id)
        .bind(at)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    // The newest event deleted: its seq must still never be reused.
    sqlx::query("DELETE FROM events WHERE id = 'e3'")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();

    let store = Store::open(&path, StoreOptions::default()).await.unwrap();
    let a = store.get_action("a1").await.unwrap();
    assert_eq!(
        (a.status, a.detail.as_str()),
        (ActionStatus::Pending, "make")
    );
    let old = store.events_after(0, None, 10).await.unwrap();
    assert_eq!(
        old.iter()
            .map(|e| (e.seq, e.id.as_str()))
            .collect::<Vec<_>>(),
        [(1, "e1"), (2, "e2")]
    );
    assert_eq!(old[0].data.get(), r#"{"id":"a1"}"#);
    let (b, _) = store
        .insert_action(new_action("ag", DecisionResult::Allow, None, "h"))
        .await
        .unwrap();
    let new = store.action_events(&b.id).await.unwrap();
    assert!(new[0].seq > 3, "seq {} reused", new[0].seq);
    // The pending action is still found by its deadline index and status.
    assert_eq!(store.pending_counts().await.unwrap().actions, 1);
    drop(store);

    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(&path)
        .connect()
        .await
        .unwrap();
    // A status outside the list is still refused.
    let bad = sqlx::query(
        "INSERT INTO actions (id, agent, tool, detail, action_string, status, decision_result, \
         decision_reason, created_at) VALUES ('x', 'ag', 'b', 'd', 's', 'bogus', 'allow', 'r', 1)",
    )
    .execute(&mut conn)
    .await;
    assert!(bad.is_err());
    // Inserting an action builds no temporary b-tree (the IN lists did,
    // for every row), and events have no unique index left to update.
    let plan = sqlx::query(
        "EXPLAIN INSERT INTO actions (id, agent, tool, detail, action_string, status, \
         decision_result, decision_reason, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let ops: Vec<String> = plan.iter().map(|r| r.get::<String, _>("opcode")).collect();
    assert!(!ops.iter().any(|o| o == "OpenEphemeral"), "{ops:?}");
    let unique: Vec<(String,)> =
        sqlx::query_as("SELECT name FROM pragma_index_list('events') WHERE \"unique\" = 1")
            .fetch_all(&mut conn)
            .await
            .unwrap();
    assert!(unique.is_empty(), "{unique:?}");
}

crate::conformance!(
    initial_status_follows_the_decision_and_records_an_event,
    data_survives_reopening_and_closed_store_refuses_writes,
    a_database_a_newer_version_migrated_is_refused_unchanged,
    a_failing_job_does_not_disturb_its_batch,
    a_failing_new_action_does_not_disturb_the_ones_written_with_it,
    a_job_failing_alone_in_its_batch_leaves_nothing_behind,
    same_key_same_body_returns_the_existing_action,
    transitions_are_compare_and_set,
    a_pending_action_past_its_deadline_cannot_be_decided,
    expire_due_expires_only_overdue_pending_actions,
    keys_are_found_by_hash_until_revoked,
    cached_grants_follow_creation_and_revocation,
    an_allowed_handler_action_can_be_stored_claimed_and_settled_once,
    only_an_allowed_handler_action_is_stored_claimed,
    claim_next_takes_the_oldest_due_action_of_the_handler_once,
);
