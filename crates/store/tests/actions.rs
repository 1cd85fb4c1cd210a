//! Listing actions on both backends: by status, agent and tool, newest
//! or oldest first, page by page; what waits for a human and until when.

use actiongate_store::*;
use chrono::Utc;

use crate::backends::{Kind, open};

fn new_action(n: usize, result: DecisionResult) -> NewAction {
    let decision = Decision {
        result,
        reason: "test".to_owned(),
        rule: None,
    };
    let tool = if n.is_multiple_of(4) { "git" } else { "bash" };
    NewAction {
        deadline: Some(Utc::now() + chrono::Duration::minutes(5 + n as i64)),
        ..NewAction::new(
            format!("agent-{}", n % 2),
            tool.to_owned(),
            format!("echo {n}"),
            decision,
        )
    }
}

/// Every id of a listing, read `limit` at a time.
async fn all_pages(store: &Store, mut f: ActionFilter) -> Vec<String> {
    let mut listed = Vec::new();
    loop {
        let page = store.list_actions(&f).await.unwrap();
        assert!(page.len() as i64 <= f.limit);
        let Some(last) = page.last() else { break };
        f.cursor = Some(last.id.clone());
        listed.extend(page.into_iter().map(|a| a.id));
    }
    listed
}

async fn listings_filter_and_page_newest_first(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let cancel = Transition {
        from: &[ActionStatus::Pending],
        to: ActionStatus::Cancelled,
        decided_by: None,
        note: None,
        outcome: None,
        event: "action.cancelled",
    };
    let mut stored: Vec<Action> = Vec::new();
    for n in 0..24 {
        let result = [
            DecisionResult::Allow,
            DecisionResult::Ask,
            DecisionResult::Deny,
        ][n % 3];
        let (a, _) = store.insert_action(new_action(n, result)).await.unwrap();
        let a = if n % 6 == 1 {
            store.transition(&a.id, cancel.clone()).await.unwrap()
        } else {
            a
        };
        stored.push(a);
    }
    stored.reverse();
    let want = |keep: &dyn Fn(&Action) -> bool| -> Vec<String> {
        stored
            .iter()
            .filter(|a| keep(a))
            .map(|a| a.id.clone())
            .collect()
    };
    let base = ActionFilter {
        session: None,
        limit: 5,
        ..ActionFilter::default()
    };
    assert_eq!(all_pages(&store, base.clone()).await, want(&|_| true));
    for status in [
        ActionStatus::Approved,
        ActionStatus::Pending,
        ActionStatus::Denied,
        ActionStatus::Cancelled,
        ActionStatus::Completed,
    ] {
        let f = ActionFilter {
            session: None,
            status: Some(status),
            ..base.clone()
        };
        assert_eq!(
            all_pages(&store, f).await,
            want(&|a| a.status == status),
            "{status:?}"
        );
    }
    let f = ActionFilter {
        session: None,
        agent: Some("agent-1".to_owned()),
        tool: Some("bash".to_owned()),
        status: Some(ActionStatus::Pending),
        ..base.clone()
    };
    assert_eq!(
        all_pages(&store, f).await,
        want(&|a| a.agent == "agent-1" && a.tool == "bash" && a.status == ActionStatus::Pending)
    );

    // Oldest first: the same actions the other way round, page by page.
    let oldest = ActionFilter {
        oldest_first: true,
        ..base.clone()
    };
    let mut reversed = want(&|_| true);
    reversed.reverse();
    assert_eq!(all_pages(&store, oldest.clone()).await, reversed);
    let f = ActionFilter {
        status: Some(ActionStatus::Pending),
        ..oldest
    };
    let mut reversed = want(&|a| a.status == ActionStatus::Pending);
    reversed.reverse();
    assert_eq!(all_pages(&store, f).await, reversed);

    let pending: Vec<&Action> = stored
        .iter()
        .filter(|a| a.status == ActionStatus::Pending)
        .collect();
    assert_eq!(
        store.pending_counts().await.unwrap().actions,
        pending.len() as i64
    );
    let earliest = pending.iter().filter_map(|a| a.deadline).min();
    assert_eq!(
        store
            .next_deadline()
            .await
            .unwrap()
            .map(|d| d.timestamp_millis()),
        earliest.map(|d| d.timestamp_millis())
    );
}

crate::conformance!(
    listings_filter_and_page_newest_first,
    text_holding_nul_is_stored_or_refused_as_invalid,
    a_decision_only_actions_params_are_stored_to_be_shown
);

/// A decision-only action's params (the tool call's input, shown to the
/// humans who decide) are stored and read back as the action's params,
/// whichever way it is inserted (no key: the writer's fast path; a key:
/// looked up first), and never as the params an executor runs.
async fn a_decision_only_actions_params_are_stored_to_be_shown(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let params = serde_json::json!({"file_path": "/p/a", "content": "hi\n"});
    for (n, key) in [(1, None), (2, Some("k2".to_owned()))] {
        for result in [DecisionResult::Ask, DecisionResult::Allow] {
            let new = NewAction {
                params: Some(params.clone()),
                request_hash: key.as_ref().map_or(String::new(), |_| "h".to_owned()),
                idempotency_key: key.clone().map(|k| format!("{k}-{}", result.as_str())),
                ..new_action(n, result)
            };
            let (a, created) = store.insert_action(new).await.unwrap();
            assert!(created);
            assert_eq!(a.params.as_ref(), Some(&params));
            assert!(a.handler.is_none());
            let read = store.get_action(&a.id).await.unwrap();
            assert_eq!(read.params.as_ref(), Some(&params), "{key:?}");
            assert_eq!(store.action_params(&a.id).await.unwrap(), None);
        }
    }
}

/// Text an agent sends may hold U+0000, which Postgres' `TEXT` cannot
/// store: there the request is refused as invalid (a 422, not a fault),
/// with nothing written; SQLite stores it as sent.
async fn text_holding_nul_is_stored_or_refused_as_invalid(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    // Asked (a transaction of several statements) and allowed (one).
    for result in [DecisionResult::Ask, DecisionResult::Allow] {
        let mut new = new_action(1, result);
        new.detail = "echo a\u{0}b".to_owned();
        new.reason = Some("why\u{0}".to_owned());
        let answer = store.insert_action(new).await;
        match kind {
            Kind::Sqlite => assert_eq!(answer.unwrap().0.detail, "echo a\u{0}b"),
            Kind::Postgres => {
                assert!(matches!(answer, Err(StoreError::Invalid(_))), "{answer:?}");
                assert_eq!(store.newest_seq().await.unwrap(), 0);
                assert!(
                    store
                        .list_actions(&ActionFilter {
                            session: None,
                            limit: 10,
                            ..ActionFilter::default()
                        })
                        .await
                        .unwrap()
                        .is_empty()
                );
            }
        }
    }
}
