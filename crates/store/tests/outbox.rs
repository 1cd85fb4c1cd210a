//! The webhook outbox and retention, across restarts, on both backends.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::backends::{Kind, open, reopen};

use actiongate_store::audit::audit_line;
use actiongate_store::audit_verify::{VerifyOptions, end_line, verify};
use actiongate_store::*;
use chrono::Utc;

fn action(agent: &str, result: DecisionResult) -> NewAction {
    let decision = Decision {
        result,
        reason: "test".to_owned(),
        rule: None,
    };
    NewAction {
        deadline: Some(Utc::now() + chrono::Duration::minutes(5)),
        request_hash: "h".to_owned(),
        ..NewAction::new(
            agent.to_owned(),
            "bash".to_owned(),
            "make".to_owned(),
            decision,
        )
    }
}

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

async fn outbox_survives_a_restart_without_losing_or_repeating_a_delivery(kind: Kind) {
    let Some((store, held)) = open(kind).await else {
        return;
    };
    // Events before the subscription are not sent.
    store
        .insert_action(action("a", DecisionResult::Allow))
        .await
        .unwrap();
    let denied_only = store
        .create_subscription(sub(&["action.denied"]))
        .await
        .unwrap();
    let all = store.create_subscription(sub(&["*"])).await.unwrap();
    store
        .insert_action(action("a", DecisionResult::Deny))
        .await
        .unwrap();
    store
        .insert_action(action("a", DecisionResult::Ask))
        .await
        .unwrap();
    assert_eq!(store.fan_out(1000).await.unwrap(), (3, false));
    store
        .insert_action(action("a", DecisionResult::Deny))
        .await
        .unwrap();
    store.close().await;

    // After a restart: what was written stays, the rest is caught up once.
    let store = reopen(&held).await;
    assert!(store.outbox_behind().await.unwrap());
    assert_eq!(store.fan_out(1000).await.unwrap(), (2, false));
    assert_eq!(store.fan_out(1000).await.unwrap(), (0, false));
    assert!(!store.outbox_behind().await.unwrap());
    let d = store
        .list_deliveries(&denied_only.id, None, None, 100)
        .await
        .unwrap();
    assert_eq!(d.len(), 2);
    assert!(d.iter().all(|d| d.event_type == "action.denied"));
    let d = store
        .list_deliveries(&all.id, None, None, 100)
        .await
        .unwrap();
    assert_eq!(
        d.iter().map(|d| d.event_seq).collect::<Vec<_>>(),
        vec![4, 3, 2]
    );

    // Attempts: a retry keeps it pending, success finishes it.
    let due = store.due_deliveries(Utc::now(), 100).await.unwrap();
    assert_eq!(due.len(), 5);
    let first = &due[0];
    let retry_at = Utc::now() + chrono::Duration::hours(1);
    store
        .record_attempt(
            &first.id,
            AttemptRecord {
                at: Utc::now(),
                status_code: Some(503),
                error: Some("HTTP 503".to_owned()),
                duration_ms: 3,
                outcome: AttemptOutcome::Retry(retry_at),
            },
        )
        .await
        .unwrap();
    assert_eq!(
        store.due_deliveries(Utc::now(), 100).await.unwrap().len(),
        4
    );
    store
        .record_attempt(
            &first.id,
            AttemptRecord {
                at: Utc::now(),
                status_code: Some(200),
                error: None,
                duration_ms: 2,
                outcome: AttemptOutcome::Delivered,
            },
        )
        .await
        .unwrap();
    let delivered = store
        .list_deliveries(
            &first.subscription_id,
            Some(DeliveryStatus::Delivered),
            None,
            10,
        )
        .await
        .unwrap();
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0].attempts, 2);
    assert_eq!(delivered[0].attempt_log.len(), 2);
    assert_eq!(delivered[0].last_error.as_deref(), Some("HTTP 503"));
    store.close().await;
}

async fn pruning_moves_the_anchor_and_keeps_events_owed_to_subscriptions(kind: Kind) {
    let Some((store, held)) = open(kind).await else {
        return;
    };
    for _ in 0..5 {
        store
            .insert_action(action("a", DecisionResult::Allow))
            .await
            .unwrap();
    }
    // The chain over everything, as an export would compute it.
    let events = store.events_after(0, None, 100).await.unwrap();
    let mut prev = audit::GENESIS_HASH.to_owned();
    let mut hashes = Vec::new();
    for ev in &events {
        let (_, hash) = audit_line(ev, &prev).unwrap();
        hashes.push(hash.clone());
        prev = hash;
    }
    // A subscription holds back the events it has not yet been given.
    store.create_subscription(sub(&["*"])).await.unwrap();
    store
        .insert_action(action("a", DecisionResult::Allow))
        .await
        .unwrap();
    let future = Utc::now() + chrono::Duration::hours(1);
    assert_eq!(store.prune_events(future, 2).await.unwrap(), 2);
    assert_eq!(store.audit_anchor().await.unwrap().hash, hashes[1]);
    assert_eq!(store.prune_events(future, 100).await.unwrap(), 3);
    let anchor = store.audit_anchor().await.unwrap();
    assert_eq!(
        anchor,
        audit::Anchor {
            seq: 5,
            hash: hashes[4].clone()
        }
    );
    // Event 6 is owed to the subscription: kept until fanned out.
    assert_eq!(store.prune_events(future, 100).await.unwrap(), 0);
    store.fan_out(100).await.unwrap();
    assert_eq!(store.prune_events(future, 100).await.unwrap(), 1);
    store.close().await;

    // Seqs continue after a restart with an empty log, and the chain from
    // the anchor verifies.
    let store = reopen(&held).await;
    assert_eq!(store.last_seq(), 6);
    store
        .insert_action(action("a", DecisionResult::Allow))
        .await
        .unwrap();
    let anchor = store.audit_anchor().await.unwrap();
    let ev = store.events_after(anchor.seq, None, 10).await.unwrap();
    assert_eq!(ev[0].seq, 7);
    let (line, hash) = audit_line(&ev[0], &anchor.hash).unwrap();
    let end = end_line(1, &actiongate_store::audit::Anchor { seq: 7, hash }, None);
    let opts = VerifyOptions {
        from: Some(anchor.clone()),
        key: None,
    };
    let report = verify([Ok(line), Ok(end)], &opts).unwrap();
    assert_eq!(report.start, anchor);
    store.close().await;
}

async fn the_outbox_is_behind_only_while_some_subscription_exists(kind: Kind) {
    let Some((store, _held)) = open(kind).await else {
        return;
    };
    store
        .insert_action(action("a", DecisionResult::Allow))
        .await
        .unwrap();
    // Nobody to deliver to: nothing to catch up.
    assert!(!store.outbox_behind().await.unwrap());
    let s = store.create_subscription(sub(&["*"])).await.unwrap();
    assert!(
        !store.outbox_behind().await.unwrap(),
        "it starts at the end"
    );
    store
        .insert_action(action("a", DecisionResult::Deny))
        .await
        .unwrap();
    assert!(store.outbox_behind().await.unwrap());
    store.delete_subscription(&s.id).await.unwrap();
    assert!(!store.outbox_behind().await.unwrap());
    // A failed delete changes nothing.
    let kept = store.create_subscription(sub(&["*"])).await.unwrap();
    assert!(matches!(
        store.delete_subscription("sub_none").await,
        Err(StoreError::NotFound)
    ));
    store
        .insert_action(action("a", DecisionResult::Deny))
        .await
        .unwrap();
    assert!(store.outbox_behind().await.unwrap());
    store.delete_subscription(&kept.id).await.unwrap();
}

/// A tier-2 subscription is sent only `action.escalated` (of the types it
/// names); tier 1 every event; the tier is kept and listed.
async fn a_tier_two_subscription_is_sent_only_escalations(kind: Kind) {
    let Some((store, _held)) = open(kind).await else {
        return;
    };
    let tier2 = store
        .create_subscription(NewSubscription {
            tier: 2,
            ..sub(&["action.*"])
        })
        .await
        .unwrap();
    assert_eq!(tier2.tier, 2);
    let all = store.create_subscription(sub(&["*"])).await.unwrap();
    let (asked, _) = store
        .insert_action(action("a", DecisionResult::Ask))
        .await
        .unwrap();
    assert!(store.escalate(&asked.id).await.unwrap().is_some());
    store.fan_out(1000).await.unwrap();
    let types = |d: Vec<Delivery>| d.into_iter().map(|d| d.event_type).collect::<Vec<_>>();
    let sent = store
        .list_deliveries(&tier2.id, None, None, 100)
        .await
        .unwrap();
    assert_eq!(types(sent), ["action.escalated"]);
    let sent = store
        .list_deliveries(&all.id, None, None, 100)
        .await
        .unwrap();
    assert_eq!(types(sent).len(), 2);
    assert_eq!(store.get_subscription(&tier2.id).await.unwrap().tier, 2);
    assert_eq!(store.get_subscription(&all.id).await.unwrap().tier, 1);
}

crate::conformance!(
    a_tier_two_subscription_is_sent_only_escalations,
    outbox_survives_a_restart_without_losing_or_repeating_a_delivery,
    pruning_moves_the_anchor_and_keeps_events_owed_to_subscriptions,
    the_outbox_is_behind_only_while_some_subscription_exists,
);
