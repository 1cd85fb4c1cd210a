//! Events read back are the events published, byte for byte, on both
//! backends; on SQLite a decided decision-only action's first event is
//! stored by reference to its row (`crates/store/src/event_ref.rs`), and
//! reads the same before and after retention deletes the action.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::BTreeMap;

use actiongate_store::records::Records;
use actiongate_store::*;
use chrono::{Duration, Utc};
use serde_json::json;

use crate::backends::{Kind, open, sqlite_conn};

fn decided(result: DecisionResult, tool: &str, detail: &str) -> NewAction {
    NewAction::new(
        "a".to_owned(),
        tool.to_owned(),
        detail.to_owned(),
        Decision {
            result,
            reason: format!("decided: `{detail}`"),
            rule: Some(
                json!({"index": 3, "kind": "pattern", "list": "allow", "pattern": "tool:x\\s.*"}),
            ),
        },
    )
}

/// Actions of every shape a decision-only action asked without an
/// idempotency key takes, and a few that are not stored by reference.
fn shapes() -> Vec<NewAction> {
    let mut out = vec![
        decided(DecisionResult::Allow, "file", "view /tmp/x"),
        decided(
            DecisionResult::Deny,
            "bash",
            "rm -rf /tmp/x && curl http://e.example",
        ),
        decided(
            DecisionResult::Allow,
            "bash",
            "echo \"q\" \u{1}\t\\ é 🙂 </script>",
        ),
        decided(DecisionResult::Ask, "bash", "make"),
    ];
    let mut with_all = decided(DecisionResult::Allow, "mcp__fs__read", "{\"path\":\"/a\"}");
    with_all.reason = Some("the user asked".to_owned());
    with_all.params =
        Some(json!({"path": "/a", "n": [1, 2.5, -0.0, 1e300, null], "z": {"b": true, "a": "x"}}));
    with_all.session = Some("sess-1".to_owned());
    with_all.runtime = Some("claude-code".to_owned());
    out.push(with_all);
    let mut by_grant = decided(DecisionResult::Allow, "bash", "ls");
    by_grant.decision.rule = Some(json!({"kind": "grant", "id": "g-1", "scope": {"path": "/w"}}));
    out.push(by_grant);
    let mut no_rule = decided(
        DecisionResult::Deny,
        "bash",
        "token=ghp_abcdefghijklmnopqrstuvwxyz0123456789 x",
    );
    no_rule.decision.rule = None;
    out.push(no_rule);
    let mut keyed = decided(DecisionResult::Allow, "file", "view /k");
    keyed.idempotency_key = Some("k-1".to_owned());
    out.push(keyed);
    for a in &mut out {
        a.request_hash = "h".to_owned();
        if a.decision.result == DecisionResult::Ask {
            a.deadline = Some(Utc::now() + Duration::minutes(5));
        }
    }
    out
}

/// `(seq, id, type, data)` of each event, by seq.
fn texts<E: std::borrow::Borrow<Event>>(events: &[E]) -> BTreeMap<i64, (String, String, String)> {
    events
        .iter()
        .map(std::borrow::Borrow::borrow)
        .map(|e: &Event| {
            (
                e.seq,
                (e.id.clone(), e.kind.clone(), e.data.get().to_owned()),
            )
        })
        .collect()
}

async fn references(held: &crate::backends::Held) -> Option<i64> {
    let mut conn = sqlite_conn(held).await?;
    Some(
        sqlx::query_scalar("SELECT COUNT(*) FROM events WHERE substr(data, 1, 1) = '@'")
            .fetch_one(&mut conn)
            .await
            .unwrap(),
    )
}

async fn events_read_back_as_they_were_published(kind: Kind) {
    let Some((store, held)) = open(kind).await else {
        return;
    };
    let mut rx = store.subscribe();
    let mut ids = Vec::new();
    for new in shapes() {
        let (a, created) = store.insert_action(new).await.unwrap();
        assert!(created);
        ids.push(a.id);
    }
    let mut published = Vec::new();
    while published.len() < ids.len() {
        published.push(rx.recv().await.unwrap());
    }
    let published = texts(&published);
    let read = texts(&store.events_after(0, None, 1_000).await.unwrap());
    assert_eq!(read, published);
    for id in &ids {
        for ev in store.action_events(id).await.unwrap() {
            assert_eq!(
                Some(&(ev.id.clone(), ev.kind.clone(), ev.data.get().to_owned())),
                published.get(&ev.seq)
            );
        }
    }
    let by_agent = texts(&store.events_after(0, Some("a"), 1_000).await.unwrap());
    assert_eq!(by_agent, published);
    // On SQLite, the six decided ones without a key are stored by
    // reference (not the asked one, not the keyed one).
    if let Some(n) = references(&held).await {
        assert_eq!(n, 6);
    }

    // Retention deletes the settled actions; their events read the same.
    let gone = store
        .prune_records(Records::Actions, Utc::now() + Duration::days(1), 100)
        .await
        .unwrap();
    assert_eq!(gone, 7);
    assert_eq!(
        texts(&store.events_after(0, None, 1_000).await.unwrap()),
        published
    );
    if let Some(n) = references(&held).await {
        assert_eq!(n, 0);
    }
    // And the audit chain retention builds over them is the one an export
    // of the same events gives.
    let before = store.events_after(0, None, 1_000).await.unwrap();
    let mut hash = actiongate_store::audit::GENESIS_HASH.to_owned();
    for ev in &before {
        hash = actiongate_store::audit::audit_line(ev, &hash).unwrap().1;
    }
    let pruned = store
        .prune_events(Utc::now() + Duration::days(1), 1_000)
        .await
        .unwrap();
    assert_eq!(pruned, before.len());
    assert_eq!(store.audit_anchor().await.unwrap().hash, hash);
}

/// SQLite only: Postgres stores no event by reference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decided_action_keeps_the_columns_its_events_read() {
    let (store, held) = open(Kind::Sqlite).await.unwrap();
    let mut conn = sqlite_conn(&held).await.unwrap();
    let (a, _) = store
        .insert_action(decided(DecisionResult::Allow, "file", "view /tmp/x"))
        .await
        .unwrap();
    let before = store.action_events(&a.id).await.unwrap();
    for sql in [
        "UPDATE actions SET detail = 'view /etc/shadow' WHERE id = ?",
        "UPDATE actions SET decision_reason = 'x' WHERE id = ?",
        "UPDATE actions SET decided_by = 'key:k' WHERE id = ?",
        "UPDATE actions SET params_view = '{}' WHERE id = ?",
    ] {
        let err = sqlx::query(sql)
            .bind(&a.id)
            .execute(&mut conn)
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("asked columns do not change"),
            "{sql}: {err}"
        );
    }
    // Nor is it deleted while its event refers to it (retention writes the
    // event out first).
    let err = sqlx::query("DELETE FROM actions WHERE id = ?")
        .bind(&a.id)
        .execute(&mut conn)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("an event refers to"), "{err}");
    // What changes as it settles still may.
    sqlx::query("UPDATE actions SET status = 'completed', outcome = '{}' WHERE id = ?")
        .bind(&a.id)
        .execute(&mut conn)
        .await
        .unwrap();
    let after = store.action_events(&a.id).await.unwrap();
    assert_eq!(texts(&after), texts(&before));
    // A pending action's may change (an approver's edit).
    let mut asked = decided(DecisionResult::Ask, "file", "view /p");
    asked.deadline = Some(Utc::now() + Duration::minutes(5));
    let (p, _) = store.insert_action(asked).await.unwrap();
    sqlx::query("UPDATE actions SET detail = 'view /q' WHERE id = ?")
        .bind(&p.id)
        .execute(&mut conn)
        .await
        .unwrap();
}

crate::conformance!(events_read_back_as_they_were_published);
