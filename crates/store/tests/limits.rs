//! The store's part in the limits of issue 24, on both backends: counting
//! an agent's pending items, the `limit.reached` event, and executor
//! callbacks whose webhook-id is used up whether accepted or refused.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use chrono::Utc;

use crate::backends::{Kind, open};
use actiongate_store::*;

fn action(agent: &str, result: DecisionResult) -> NewAction {
    NewAction {
        deadline: Some(Utc::now() + chrono::Duration::minutes(5)),
        ..NewAction::new(
            agent.to_owned(),
            "bash".to_owned(),
            "make".to_owned(),
            Decision {
                result,
                reason: "test".to_owned(),
                rule: None,
            },
        )
    }
}

async fn pending_of_agent_counts_only_that_agents_pending_items(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    assert_eq!(store.pending_of_agent("a").await.unwrap(), 0);
    let mut asked = Vec::new();
    for result in [
        DecisionResult::Ask,
        DecisionResult::Ask,
        DecisionResult::Allow,
        DecisionResult::Deny,
    ] {
        let (a, _) = store.insert_action(action("a", result)).await.unwrap();
        if result == DecisionResult::Ask {
            asked.push(a.id);
        }
    }
    store
        .insert_action(action("b", DecisionResult::Ask))
        .await
        .unwrap();
    assert_eq!(store.pending_of_agent("a").await.unwrap(), 2);
    assert_eq!(store.pending_of_agent("b").await.unwrap(), 1);
    store
        .transition(
            &asked[0],
            Transition {
                from: &[ActionStatus::Pending],
                to: ActionStatus::Denied,
                decided_by: Some("op".to_owned()),
                note: None,
                outcome: None,
                event: "action.denied",
            },
        )
        .await
        .unwrap();
    assert_eq!(store.pending_of_agent("a").await.unwrap(), 1);
}

async fn a_limit_reached_is_an_event_about_the_agent(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let mut events = store.subscribe();
    let data = Json::of(&serde_json::json!({"limit": "max_pending_per_agent", "max": 5})).unwrap();
    store.record_limit_reached("a", data).await.unwrap();
    let ev = events.recv().await.unwrap();
    assert_eq!(ev.kind, "limit.reached");
    assert_eq!(ev.agent.as_deref(), Some("a"));
    assert_eq!(ev.data.to_value()["max"], 5);
    let stored = store.events_after(0, Some("a"), 10).await.unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].kind, "limit.reached");
}

async fn a_refused_result_uses_up_its_webhook_id(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    // A decision-only action is never running: the result is refused...
    let (a, _) = store
        .insert_action(action("a", DecisionResult::Ask))
        .await
        .unwrap();
    let outcome = Outcome {
        status: ActionStatus::Completed,
        result: None,
        error: None,
    };
    let refused = store
        .accept_result(&a.id, "wh-1".to_owned(), 1, outcome.clone())
        .await;
    assert!(
        matches!(refused, Err(StoreError::WrongState { .. })),
        "{refused:?}"
    );
    // ...and its webhook-id is spent all the same.
    let again = store
        .accept_result(&a.id, "wh-1".to_owned(), 1, outcome)
        .await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    assert!(!store.consume_webhook("wh-1".to_owned()).await.unwrap());
    assert!(store.consume_webhook("wh-2".to_owned()).await.unwrap());
    assert!(!store.consume_webhook("wh-2".to_owned()).await.unwrap());
}

crate::conformance!(
    pending_of_agent_counts_only_that_agents_pending_items,
    a_limit_reached_is_an_event_about_the_agent,
    a_refused_result_uses_up_its_webhook_id,
);
