//! Sessions on both backends (issue 33): ending one, by hand or for being
//! idle, revokes its grants each with a `grant.revoked` event; a grant
//! request keeps the session and uses it asked for, and approving it makes
//! the grant so scoped.

use actiongate_api::model::{ActionStatus, Decision, DecisionResult};
use actiongate_store::*;
use chrono::Utc;
use serde_json::json;

use crate::backends::{Kind, open};

fn session_grant(agent: &str, session: &str) -> NewGrant {
    NewGrant {
        session: Some(session.to_owned()),
        uses: Some(2),
        id: uuid::Uuid::now_v7().to_string(),
        agent: Some(agent.to_owned()),
        target: NewGrantTarget::Tool {
            tool: "bash".to_owned(),
            pattern: "ls".to_owned(),
            whole_line: false,
        },
        granted_by: "op".to_owned(),
        expires_at: None,
        note: None,
    }
}

/// The ids of the grants named by `grant.revoked` events.
async fn revoked(store: &Store) -> Vec<String> {
    store
        .events_after(0, None, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "grant.revoked")
        .filter_map(|e| e.grant_id)
        .collect()
}

async fn ending_a_session_revokes_its_grants_with_events(kind: Kind) {
    let Some((store, _held)) = open(kind).await else {
        return;
    };
    let long_ago = Utc::now() - chrono::Duration::hours(1);
    store
        .touch_session("bot".into(), "s1".into(), None, long_ago)
        .await
        .unwrap();
    store
        .touch_session("bot".into(), "s2".into(), None, long_ago)
        .await
        .unwrap();
    let g1 = store
        .create_grant(session_grant("bot", "s1"), None)
        .await
        .unwrap();
    let g2 = store
        .create_grant(session_grant("bot", "s2"), None)
        .await
        .unwrap();
    assert!(revoked(&store).await.is_empty());

    let ended = store
        .end_session("s1".into(), "op".into(), long_ago)
        .await
        .unwrap();
    assert_eq!(ended.status, "ended");
    assert_eq!(revoked(&store).await, vec![g1.grant.id.clone()]);
    assert!(
        store
            .get_grant(&g1.grant.id)
            .await
            .unwrap()
            .revoked_at
            .is_some()
    );
    // Ending it again revokes nothing more.
    store
        .end_session("s1".into(), "op".into(), long_ago)
        .await
        .unwrap();
    assert_eq!(revoked(&store).await.len(), 1);

    // s2 is not idle an hour ago; it is idle as of a moment from now.
    assert!(store.oldest_open_session().await.unwrap().is_some());
    assert_eq!(store.end_idle_sessions(long_ago).await.unwrap(), 0);
    let later = Utc::now() + chrono::Duration::seconds(1);
    assert_eq!(store.end_idle_sessions(later).await.unwrap(), 1);
    assert_eq!(
        revoked(&store).await,
        vec![g1.grant.id.clone(), g2.grant.id.clone()]
    );
    assert_eq!(
        store
            .get_session("s2", long_ago)
            .await
            .unwrap()
            .unwrap()
            .status,
        "ended"
    );
    assert_eq!(store.oldest_open_session().await.unwrap(), None);
    assert_eq!(store.end_idle_sessions(later).await.unwrap(), 0);
}

async fn a_grant_for_an_ended_session_is_refused_where_it_is_stored(kind: Kind) {
    let Some((store, _held)) = open(kind).await else {
        return;
    };
    let long_ago = Utc::now() - chrono::Duration::hours(1);
    store
        .touch_session("bot".into(), "s1".into(), None, long_ago)
        .await
        .unwrap();
    store
        .end_session("s1".into(), "op".into(), long_ago)
        .await
        .unwrap();
    let refused = store.create_grant(session_grant("bot", "s1"), None).await;
    assert!(
        matches!(&refused, Err(StoreError::Conflict(m)) if m.contains("has ended")),
        "{:?}",
        refused.err()
    );
    let created = store
        .events_after(0, None, 1000)
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.kind == "grant.created")
        .count();
    assert_eq!(created, 0);

    // An end and a grant at once: either the grant is refused, or it was
    // stored first and the end revoked it. Never a live grant in an ended
    // session.
    for i in 0..30 {
        let id = format!("race{i}");
        store
            .touch_session("bot".into(), id.clone(), None, long_ago)
            .await
            .unwrap();
        let (ended, granted) = tokio::join!(
            store.end_session(id.clone(), "op".into(), long_ago),
            store.create_grant(session_grant("bot", &id), None),
        );
        ended.unwrap();
        match granted {
            Ok(g) => assert!(
                store
                    .get_grant(&g.grant.id)
                    .await
                    .unwrap()
                    .revoked_at
                    .is_some(),
                "{id}: a grant outlived its session's end"
            ),
            Err(StoreError::Conflict(_)) => {}
            Err(e) => panic!("{id}: {e}"),
        }
    }
}

async fn a_grant_request_keeps_its_session_and_uses_and_its_grant_has_them(kind: Kind) {
    let Some((store, _held)) = open(kind).await else {
        return;
    };
    let r = store
        .create_grant_request(NewGrantRequest {
            id: uuid::Uuid::now_v7().to_string(),
            agent: "bot".to_owned(),
            handler: "files".to_owned(),
            permission: "fs.write".to_owned(),
            scope: serde_json::Map::from_iter([("path".to_owned(), json!("/a"))]),
            reason: Some("why".to_owned()),
            expires: Some("1h".to_owned()),
            deadline: Utc::now() + chrono::Duration::minutes(5),
            session: Some("task".to_owned()),
            uses: Some(3),
        })
        .await
        .unwrap();
    assert_eq!(r.session.as_deref(), Some("task"));
    assert_eq!(r.uses, Some(3));
    let again = store.get_grant_request(&r.id).await.unwrap();
    assert_eq!(again.session.as_deref(), Some("task"));
    assert_eq!(again.uses, Some(3));
    let grant = NewGrant {
        session: again.session.clone(),
        uses: again.uses,
        id: uuid::Uuid::now_v7().to_string(),
        agent: Some("bot".to_owned()),
        target: NewGrantTarget::Permission {
            handler: "files".to_owned(),
            permission: "fs.write".to_owned(),
            scope: again.scope.clone(),
        },
        granted_by: "op".to_owned(),
        expires_at: None,
        note: None,
    };
    let (approved, _) = store.approve_grant_request(&r.id, grant).await.unwrap();
    let g = approved.grant.unwrap();
    assert_eq!(g.session.as_deref(), Some("task"));
    assert_eq!(g.uses, Some(3));
}

/// The ids of the scoped grants that may apply to `bot` running bash in
/// `session`.
async fn scoped(store: &Store, session: Option<&str>) -> Vec<(String, Option<i64>)> {
    store
        .scoped_grants("bot", session.map(str::to_owned), "bash")
        .await
        .unwrap()
        .into_iter()
        .map(|(g, left)| (g.id, left))
        .collect()
}

/// Scoped grants are read per session (none of another's, none without
/// one) and every change to grants shows in the next read, whatever was
/// read (and, on SQLite, cached) before it.
async fn scoped_grants_follow_every_change(kind: Kind) {
    let Some((store, _held)) = open(kind).await else {
        return;
    };
    assert!(scoped(&store, Some("s1")).await.is_empty());
    let g1 = store
        .create_grant(session_grant("bot", "s1"), None)
        .await
        .unwrap()
        .grant
        .id;
    assert_eq!(
        scoped(&store, Some("s1")).await,
        vec![(g1.clone(), Some(2))]
    );
    assert!(scoped(&store, Some("s2")).await.is_empty());
    assert!(scoped(&store, None).await.is_empty());
    // A counted grant for no session applies in every session and none.
    let mut any = session_grant("bot", "x");
    any.session = None;
    let g2 = store.create_grant(any, None).await.unwrap().grant.id;
    assert_eq!(scoped(&store, None).await, vec![(g2.clone(), Some(2))]);
    assert_eq!(
        scoped(&store, Some("s1")).await,
        vec![(g1.clone(), Some(2)), (g2.clone(), Some(2))]
    );
    store.revoke_grant(&g1).await.unwrap();
    assert_eq!(
        scoped(&store, Some("s1")).await,
        vec![(g2.clone(), Some(2))]
    );
    store.revoke_grant(&g2).await.unwrap();
    assert!(scoped(&store, Some("s1")).await.is_empty());
    assert!(scoped(&store, None).await.is_empty());
}

/// Idle sessions are ended a bounded batch at a time, those seen longest
/// ago first, so that one write never holds the writer for all of them;
/// calling again ends the rest.
async fn idle_sessions_end_a_batch_at_a_time(kind: Kind) {
    let Some((store, _held)) = open(kind).await else {
        return;
    };
    let long_ago = Utc::now() - chrono::Duration::hours(1);
    for i in 0..520 {
        if i == 500 {
            // Seen strictly later than the first 500.
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        store
            .touch_session("bot".into(), format!("s{i:03}"), None, long_ago)
            .await
            .unwrap();
    }
    let later = Utc::now() + chrono::Duration::seconds(1);
    assert_eq!(store.end_idle_sessions(later).await.unwrap(), 500);
    let first = store.get_session("s000", long_ago).await.unwrap().unwrap();
    assert_eq!(first.status, "ended");
    for newer in ["s500", "s519"] {
        let s = store.get_session(newer, long_ago).await.unwrap().unwrap();
        assert_eq!(s.status, "active", "the newest wait for the next batch");
    }
    assert_eq!(store.end_idle_sessions(later).await.unwrap(), 20);
    assert_eq!(store.end_idle_sessions(later).await.unwrap(), 0);
    assert_eq!(store.oldest_open_session().await.unwrap(), None);
}

/// An action the gate allowed on a grant read from its cache is stored
/// asked when that grant was revoked (a session ended, an operator revoked
/// it) between the decision and the transaction storing it: an allow is
/// never stored after its grant's revocation committed, with or without an
/// idempotency key. One whose grant is still in force stays allowed.
async fn an_allow_on_a_grant_revoked_before_it_is_stored_asks(kind: Kind) {
    let Some((store, _held)) = open(kind).await else {
        return;
    };
    let standing = NewGrant {
        session: None,
        uses: None,
        ..session_grant("bot", "s1")
    };
    let gone = store.create_grant(standing.clone(), None).await.unwrap();
    // Another command's: it does not cover the first's actions.
    let live = store
        .create_grant(
            NewGrant {
                id: uuid::Uuid::now_v7().to_string(),
                target: NewGrantTarget::Tool {
                    tool: "bash".to_owned(),
                    pattern: "pwd".to_owned(),
                    whole_line: false,
                },
                ..standing
            },
            None,
        )
        .await
        .unwrap();
    let allowed_on = |grant: &str, key: Option<&str>| NewAction {
        relies_on: vec![grant.to_owned()],
        idempotency_key: key.map(str::to_owned),
        ..NewAction::new(
            "bot".into(),
            "bash".into(),
            if grant == gone.grant.id { "ls" } else { "pwd" }.into(),
            Decision {
                result: DecisionResult::Allow,
                reason: "grant".into(),
                rule: None,
            },
        )
    };
    store.revoke_grant(&gone.grant.id).await.unwrap();
    for key in [None, Some("k1")] {
        let (a, _) = store
            .insert_action(allowed_on(&gone.grant.id, key))
            .await
            .unwrap();
        assert_eq!(a.status, ActionStatus::Pending, "{a:?}");
        assert_eq!(a.decision.result, DecisionResult::Ask);
        assert!(a.decision.reason.contains(&gone.grant.id), "{a:?}");
        let (a, _) = store
            .insert_action(allowed_on(&live.grant.id, key.map(|_| "k2")))
            .await
            .unwrap();
        assert_eq!(a.decision.result, DecisionResult::Allow, "{a:?}");
        assert_ne!(a.status, ActionStatus::Pending);
    }
}

/// A session idle past the timeout but not yet swept reads as ended when
/// it went idle, the timeout after it was last seen (as the sweeper will
/// store it), not when it was last seen; and as ended by being idle.
async fn an_idle_session_not_yet_swept_ended_when_it_went_idle(kind: Kind) {
    let Some((store, _held)) = open(kind).await else {
        return;
    };
    let long_ago = Utc::now() - chrono::Duration::hours(1);
    let seen = store
        .touch_session("bot".into(), "quiet".into(), None, long_ago)
        .await
        .unwrap()
        .last_seen;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    // A timeout of 200 ms: idle since `seen` + 200 ms.
    let timeout = chrono::Duration::milliseconds(200);
    let s = store
        .get_session("quiet", Utc::now() - timeout)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(s.status, "ended");
    assert_eq!(s.ended_by.as_deref(), Some("idle"));
    let ended = s.ended_at.unwrap();
    let off = (ended - (seen + timeout)).num_milliseconds().abs();
    assert!(off <= 50, "ended at {ended}, idle since {}", seen + timeout);
    // The sweep stores the same moment.
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert_eq!(
        store.end_idle_sessions(Utc::now() - timeout).await.unwrap(),
        1
    );
    let swept = store
        .get_session("quiet", Utc::now() - timeout)
        .await
        .unwrap()
        .unwrap();
    let off = (swept.ended_at.unwrap() - (seen + timeout))
        .num_milliseconds()
        .abs();
    assert!(off <= 50, "swept as ended at {:?}", swept.ended_at);
}

crate::conformance!(
    a_grant_for_an_ended_session_is_refused_where_it_is_stored,
    an_idle_session_not_yet_swept_ended_when_it_went_idle,
    an_allow_on_a_grant_revoked_before_it_is_stored_asks,
    idle_sessions_end_a_batch_at_a_time,
    scoped_grants_follow_every_change,
    ending_a_session_revokes_its_grants_with_events,
    a_grant_request_keeps_its_session_and_uses_and_its_grant_has_them,
);
