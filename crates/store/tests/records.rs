//! Retention of records, on both backends: what is settled before the
//! cutoff goes, with the rows that only refer to it; what can still change
//! stays; nothing settled after the cutoff is touched.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use actiongate_store::records::Records;
use actiongate_store::*;
use chrono::{Duration, Utc};

use crate::backends::{Kind, open};

fn action(result: DecisionResult) -> NewAction {
    let decision = Decision {
        result,
        reason: "test".to_owned(),
        rule: None,
    };
    NewAction {
        deadline: Some(Utc::now() + Duration::minutes(5)),
        request_hash: "h".to_owned(),
        ..NewAction::new(
            "a".to_owned(),
            "bash".to_owned(),
            "make".to_owned(),
            decision,
        )
    }
}

/// How many records of `kind` settled before `cutoff` retention deletes,
/// at most `limit`.
async fn prune(store: &Store, kind: Records, cutoff: chrono::DateTime<Utc>, limit: i64) -> u64 {
    store.prune_records(kind, cutoff, limit).await.unwrap()
}

async fn settled_records_go_with_what_refers_to_them_and_live_ones_stay(kind: Kind) {
    let Some((store, _held)) = open(kind).await else {
        return;
    };
    // Allowed decision-only: settled. Asked: pending.
    let (settled, _) = store
        .insert_action(action(DecisionResult::Allow))
        .await
        .unwrap();
    let (pending, _) = store
        .insert_action(action(DecisionResult::Ask))
        .await
        .unwrap();
    // The settled one's run was claimed; both were posted to a chat.
    let claimed = store
        .claim_run(RunReport {
            agent: "a".to_owned(),
            tool: "bash".to_owned(),
            detail: "make".to_owned(),
            session: None,
            action: Some(settled.id.clone()),
            since: Utc::now() - Duration::minutes(1),
        })
        .await
        .unwrap();
    assert_eq!(claimed.as_deref(), Some(settled.id.as_str()));
    for item in [&settled.id, &pending.id] {
        assert!(
            store
                .connector_post("slack", item, "{}".into())
                .await
                .unwrap()
        );
    }
    // A webhook subscriber: one delivery delivered, one still pending.
    let sub = store
        .create_subscription(NewSubscription {
            id: format!("sub_{}", uuid::Uuid::now_v7().simple()),
            url: "http://127.0.0.1:9/hook".to_owned(),
            types: vec!["*".to_owned()],
            description: None,
            secret: "whsec_AAAA".to_owned(),
            tier: 1,
        })
        .await
        .unwrap();
    store
        .insert_action(action(DecisionResult::Deny))
        .await
        .unwrap();
    store
        .insert_action(action(DecisionResult::Deny))
        .await
        .unwrap();
    assert_eq!(store.fan_out(100).await.unwrap().0, 2);
    let due = store.due_deliveries(Utc::now(), 10).await.unwrap();
    store
        .record_attempt(
            &due[0].id,
            AttemptRecord {
                at: Utc::now(),
                status_code: Some(200),
                error: None,
                duration_ms: 1,
                outcome: AttemptOutcome::Delivered,
            },
        )
        .await
        .unwrap();

    // Settled just now: not before a cutoff an hour ago.
    let past = Utc::now() - Duration::hours(1);
    for kind in Records::ALL {
        assert_eq!(prune(&store, kind, past, 500).await, 0, "{kind:?}");
    }
    // Before a cutoff just ahead: the three settled actions and the
    // delivered delivery go, the pending ones stay.
    let ahead = Utc::now() + Duration::minutes(1);
    assert_eq!(prune(&store, Records::Actions, ahead, 2).await, 2);
    assert_eq!(prune(&store, Records::Actions, ahead, 2).await, 1);
    assert_eq!(prune(&store, Records::Actions, ahead, 2).await, 0);
    assert!(matches!(
        store.get_action(&settled.id).await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(
        store.get_action(&pending.id).await.unwrap().status,
        ActionStatus::Pending
    );
    assert!(!store.run_claimed(&settled.id).await.unwrap());
    assert!(
        store
            .connector_open_chats(&settled.id)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store.connector_open_chats(&pending.id).await.unwrap(),
        ["slack"]
    );
    // Pruning events leaves deliveries to records retention: with their
    // attempts, in bounded batches.
    store.prune_events(ahead, 500).await.unwrap();
    assert_eq!(
        store
            .list_deliveries(&sub.id, None, None, 10)
            .await
            .unwrap()
            .len(),
        2
    );
    assert_eq!(prune(&store, Records::Deliveries, ahead, 500).await, 1);
    let left = store
        .list_deliveries(&sub.id, None, None, 10)
        .await
        .unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].status, DeliveryStatus::Pending);
}

async fn rate_rows_go_after_their_hour(kind: Kind) {
    let Some((store, _held)) = open(kind).await else {
        return;
    };
    let now = Utc::now();
    let limit = || vec![("k".to_owned(), 1)];
    assert_eq!(
        store
            .rate_take("a", limit(), now - Duration::hours(2))
            .await
            .unwrap(),
        None
    );
    assert_eq!(store.rate_take("b", limit(), now).await.unwrap(), None);
    let epoch = chrono::DateTime::<Utc>::UNIX_EPOCH;
    assert_eq!(store.prune_stale(now, epoch).await.unwrap(), 1);
    assert_eq!(store.prune_stale(now, epoch).await.unwrap(), 0);
    // The row within its hour still counts.
    assert_eq!(
        store.rate_full("b", limit(), now).await.unwrap().as_deref(),
        Some("k")
    );
}

/// A count-limited grant without expiry is due once used up, counted from
/// its last use, not from when it was granted; one with a use left never.
async fn a_used_up_grant_goes_counted_from_its_last_use(kind: Kind) {
    let Some((store, _held)) = open(kind).await else {
        return;
    };
    let grant = NewGrant {
        session: None,
        uses: Some(1),
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
    let id = grant.id.clone();
    store.create_grant(grant, None).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let between = Utc::now();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let ahead = Utc::now() + Duration::minutes(1);
    assert_eq!(
        prune(&store, Records::Grants, ahead, 500).await,
        0,
        "a grant with a use left"
    );
    let mut last_use = action(DecisionResult::Allow);
    last_use.take_use = Some(id.clone());
    store.insert_action(last_use).await.unwrap();
    assert_eq!(store.get_grant(&id).await.unwrap().uses_left, Some(0));
    // Granted before `between`, used up after it.
    assert_eq!(prune(&store, Records::Grants, between, 500).await, 0);
    assert_eq!(prune(&store, Records::Grants, ahead, 500).await, 1);
    assert!(matches!(
        store.get_grant(&id).await,
        Err(StoreError::NotFound)
    ));
}

/// An ended, untainted session is kept while a grant request for it is
/// pending (approving it must find the session ended, not open it again
/// with a grant) and while another session names it as its taint carrier
/// (a taint recorded there later must reach it); then it goes.
async fn an_ended_session_stays_while_a_request_or_a_carried_session_names_it(kind: Kind) {
    let Some((store, _held)) = open(kind).await else {
        return;
    };
    let long_ago = Utc::now() - Duration::hours(1);
    for id in ["mcp-k", "s1", "asked"] {
        store
            .touch_session("a".into(), id.into(), None, long_ago)
            .await
            .unwrap();
    }
    assert!(
        store
            .link_carrier("s1".into(), "mcp-k".into())
            .await
            .unwrap()
    );
    let request = store
        .create_grant_request(NewGrantRequest {
            id: uuid::Uuid::now_v7().to_string(),
            agent: "a".to_owned(),
            handler: "files".to_owned(),
            permission: "fs.write".to_owned(),
            scope: serde_json::Map::new(),
            reason: None,
            expires: Some("1h".to_owned()),
            deadline: Utc::now() + Duration::minutes(5),
            session: Some("asked".to_owned()),
            uses: None,
        })
        .await
        .unwrap();
    for id in ["mcp-k", "asked"] {
        store
            .end_session(id.into(), "op".into(), long_ago)
            .await
            .unwrap();
    }
    let ahead = Utc::now() + Duration::minutes(1);
    let sessions = || prune(&store, Records::Sessions, ahead, 500);
    assert_eq!(sessions().await, 0, "both are named");
    store
        .deny_grant_request(&request.id, "op".to_owned(), None)
        .await
        .unwrap();
    assert_eq!(sessions().await, 1, "the request was decided");
    assert!(
        store
            .get_session("asked", long_ago)
            .await
            .unwrap()
            .is_none()
    );
    store
        .end_session("s1".into(), "op".into(), long_ago)
        .await
        .unwrap();
    // s1 goes first; its carrier, named by nothing now, next.
    assert_eq!(sessions().await, 1);
    assert!(store.get_session("s1", long_ago).await.unwrap().is_none());
    assert!(
        store
            .get_session("mcp-k", long_ago)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(sessions().await, 1);
    assert!(
        store
            .get_session("mcp-k", long_ago)
            .await
            .unwrap()
            .is_none()
    );
}

/// An ended session that was tainted is not an untainted one's kind: only
/// its own retention deletes it, once nothing refers to it.
async fn a_tainted_session_goes_only_by_its_own_retention(kind: Kind) {
    let Some((store, _held)) = open(kind).await else {
        return;
    };
    let long_ago = Utc::now() - Duration::hours(1);
    store
        .touch_session("a".into(), "read-web".into(), None, long_ago)
        .await
        .unwrap();
    store
        .taint_session(
            "read-web".into(),
            "act-1".into(),
            "tool:WebFetch:https://example.test/".into(),
        )
        .await
        .unwrap();
    store
        .end_session("read-web".into(), "op".into(), long_ago)
        .await
        .unwrap();
    let ahead = Utc::now() + Duration::minutes(1);
    assert_eq!(prune(&store, Records::Sessions, ahead, 500).await, 0);
    assert!(
        store
            .get_session("read-web", long_ago)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(
        prune(&store, Records::TaintedSessions, long_ago, 500).await,
        0,
        "ended after the cutoff"
    );
    assert_eq!(prune(&store, Records::TaintedSessions, ahead, 500).await, 1);
    assert!(
        store
            .get_session("read-web", long_ago)
            .await
            .unwrap()
            .is_none()
    );
}

/// The actions of a session opened before taints were recorded on its row
/// (`taint_complete` 0, none recorded) are where its taint is read from:
/// they stay while it does; ended, it stays too.
async fn a_session_whose_taint_lives_in_its_actions_keeps_them(kind: Kind) {
    let Some((store, held)) = open(kind).await else {
        return;
    };
    let long_ago = Utc::now() - Duration::days(1);
    store
        .touch_session("a".to_owned(), "old".to_owned(), None, long_ago)
        .await
        .unwrap();
    let mut new = action(DecisionResult::Allow);
    new.session = Some("old".to_owned());
    store.insert_action(new).await.unwrap();
    crate::backends::execute_raw(
        &held,
        "UPDATE sessions SET taint_complete = 0 WHERE id = 'old'",
        "UPDATE sessions SET taint_complete = 0 WHERE id = 'old'",
    )
    .await;
    let ahead = Utc::now() + Duration::minutes(1);
    assert_eq!(prune(&store, Records::Actions, ahead, 500).await, 0);
    store
        .end_session("old".to_owned(), "test".to_owned(), long_ago)
        .await
        .unwrap();
    assert_eq!(prune(&store, Records::Sessions, ahead, 500).await, 0);
    // Once its taint is on its row, the actions may go, then the session.
    crate::backends::execute_raw(
        &held,
        "UPDATE sessions SET taint_complete = 1 WHERE id = 'old'",
        "UPDATE sessions SET taint_complete = 1 WHERE id = 'old'",
    )
    .await;
    assert_eq!(prune(&store, Records::Actions, ahead, 500).await, 1);
    assert_eq!(prune(&store, Records::Sessions, ahead, 500).await, 1);
}

crate::conformance!(
    settled_records_go_with_what_refers_to_them_and_live_ones_stay,
    rate_rows_go_after_their_hour,
    a_session_whose_taint_lives_in_its_actions_keeps_them,
    a_used_up_grant_goes_counted_from_its_last_use,
    an_ended_session_stays_while_a_request_or_a_carried_session_names_it,
    a_tainted_session_goes_only_by_its_own_retention,
);
