//! Dispatch bookkeeping on both backends (claims, attempts, leases, result
//! callbacks); on Postgres, several nodes claiming and releasing at once,
//! and a stale lease holder losing to the node that took over.

use std::collections::HashMap;

use actiongate_store::*;
use chrono::{DateTime, Utc};
use serde_json::json;

use crate::backends::{Kind, open, open_node, pg_database};

/// An allowed handler action, stored approved for the dispatch loop.
fn approved(agent: &str, n: usize) -> NewAction {
    let decision = Decision {
        result: DecisionResult::Allow,
        reason: "test".to_owned(),
        rule: None,
    };
    NewAction {
        handler: Some(HandlerAction {
            handler: "files".to_owned(),
            action: "write".to_owned(),
            params: json!({"path": format!("/f{n}"), "token": "t0p"}),
            params_view: json!({"path": format!("/f{n}"), "token": "***"}),
            permission: "fs.write".to_owned(),
            scope: serde_json::Map::new(),
            display: None,
            hints: None,
            claim_until: None,
        }),
        ..NewAction::new(
            agent.to_owned(),
            "files".to_owned(),
            "write".to_owned(),
            decision,
        )
    }
}

fn rec(n: i64, code: Option<u16>, error: Option<&str>) -> ActionAttempt {
    ActionAttempt {
        n,
        at: Utc::now(),
        status_code: code,
        error: error.map(str::to_owned),
        duration_ms: 5,
    }
}

fn completed(v: serde_json::Value) -> Outcome {
    Outcome {
        status: ActionStatus::Completed,
        result: Some(v),
        error: None,
    }
}

fn in_secs(s: i64) -> DateTime<Utc> {
    Utc::now() + chrono::Duration::seconds(s)
}

async fn due_actions_are_claimed_once_oldest_first(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let mut ids = Vec::new();
    for n in 0..3 {
        ids.push(store.insert_action(approved("a", n)).await.unwrap().0.id);
    }
    let due = store
        .due_for_dispatch(Utc::now(), 10, Vec::new())
        .await
        .unwrap();
    let want: Vec<(String, String)> = ids.iter().map(|i| (i.clone(), "files".into())).collect();
    assert_eq!(due, want);
    assert_eq!(
        store
            .due_for_dispatch(Utc::now(), 2, Vec::new())
            .await
            .unwrap()
            .len(),
        2
    );
    // A handler whose room is full is left out of the batch.
    let skip = vec!["files".to_owned()];
    assert!(
        store
            .due_for_dispatch(Utc::now(), 10, skip)
            .await
            .unwrap()
            .is_empty()
    );
    let other = vec!["mail".to_owned()];
    assert_eq!(
        store
            .due_for_dispatch(Utc::now(), 10, other)
            .await
            .unwrap()
            .len(),
        3
    );

    let mut events = store.subscribe();
    let lease = in_secs(30);
    // Asked newest first: answered in the order asked.
    let asked: Vec<String> = ids.iter().rev().cloned().collect();
    let claimed = store.claim(asked.clone(), lease).await.unwrap();
    let got: Vec<&String> = claimed.iter().map(|c| &c.action.id).collect();
    assert_eq!(got, asked.iter().collect::<Vec<_>>());
    for c in &claimed {
        assert_eq!(c.attempt, 1);
        assert_eq!(c.action.status, ActionStatus::Running);
        assert_eq!(c.params["token"], "t0p", "the executor gets the params");
        assert_eq!(c.action.params.as_ref().unwrap()["token"], "***");
        let ev = events.recv().await.unwrap();
        assert_eq!(ev.kind, "action.started");
        assert_eq!(ev.action_id.as_ref(), Some(&c.action.id));
    }
    assert!(store.claim(ids.clone(), lease).await.unwrap().is_empty());
    assert!(
        store
            .due_for_dispatch(Utc::now(), 10, Vec::new())
            .await
            .unwrap()
            .is_empty()
    );
    assert!(events.try_recv().is_err());
    let next = store.next_dispatch_times(Vec::new()).await.unwrap();
    assert_eq!(next.retry, None);
    assert_eq!(
        next.lease.map(|l| l.timestamp_millis()),
        Some(lease.timestamp_millis())
    );
    assert!(store.claim(Vec::new(), lease).await.unwrap().is_empty());
}

async fn a_retry_comes_due_at_its_time_and_fences_the_attempt_before_it(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let (a, _) = store.insert_action(approved("a", 0)).await.unwrap();
    let first = store.claim(vec![a.id.clone()], in_secs(30)).await.unwrap();
    let later = in_secs(60);
    let retried = store
        .finish_attempt(
            &a.id,
            rec(1, Some(503), Some("busy")),
            AttemptNext::RetryAt(later),
        )
        .await
        .unwrap()
        .expect("attempt 1 was running");
    assert_eq!(retried.status, ActionStatus::Approved);
    assert_eq!(retried.attempts.len(), 1);
    assert_eq!(retried.attempts[0].status_code, Some(503));
    assert!(
        store
            .due_for_dispatch(Utc::now(), 10, Vec::new())
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        store
            .due_for_dispatch(later, 10, Vec::new())
            .await
            .unwrap()
            .len(),
        1
    );
    let next = store.next_dispatch_times(Vec::new()).await.unwrap();
    assert_eq!(
        next.retry.map(|t| t.timestamp_millis()),
        Some(later.timestamp_millis())
    );
    assert_eq!(next.lease, None);
    // A handler with no room in flight is left out: its retry waits for room.
    let skipping = store
        .next_dispatch_times(vec!["files".to_owned()])
        .await
        .unwrap();
    assert_eq!(skipping.retry, None);
    let second = store
        .claim_next("files", later, in_secs(90))
        .await
        .unwrap()
        .expect("due by then");
    assert_eq!(second.attempt, 2);

    // Attempt 1's late answers change nothing: attempt 2 is running.
    let stale = store
        .settle_attempt(
            &first[0].action,
            &rec(1, Some(200), None),
            completed(json!(1)),
        )
        .await
        .unwrap();
    assert_eq!(stale, None);
    let stale = store
        .finish_attempt(
            &a.id,
            rec(1, Some(500), None),
            AttemptNext::RetryAt(Utc::now()),
        )
        .await
        .unwrap();
    assert_eq!(stale, None);
    let done = store
        .settle_attempt(
            &second.action,
            &rec(2, Some(200), None),
            completed(json!(2)),
        )
        .await
        .unwrap()
        .expect("attempt 2 was running");
    assert_eq!(done.status, ActionStatus::Completed);
    assert_eq!(done.outcome.as_ref().unwrap().result, Some(json!(2)));
    let ns: Vec<i64> = done.attempts.iter().map(|r| r.n).collect();
    assert_eq!(ns, [1, 2]);
    assert_eq!(store.get_action(&a.id).await.unwrap(), done);
}

async fn an_async_result_settles_once_and_a_replay_is_refused(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let (a, _) = store.insert_action(approved("a", 0)).await.unwrap();
    let (b, _) = store.insert_action(approved("a", 1)).await.unwrap();
    store
        .claim(vec![a.id.clone(), b.id.clone()], in_secs(30))
        .await
        .unwrap();
    // `a`: the 202 first, then the result.
    let until = in_secs(300);
    let waiting = store
        .finish_attempt(
            &a.id,
            rec(1, Some(202), None),
            AttemptNext::AwaitResult(until),
        )
        .await
        .unwrap()
        .expect("running");
    assert_eq!(waiting.status, ActionStatus::Running);
    let lease = store.next_dispatch_times(Vec::new()).await.unwrap().lease;
    assert!(
        lease.is_some_and(|l| l < until),
        "b's lease is the earlier one"
    );
    let early = store
        .accept_result(&a.id, "msg_0".into(), 2, completed(json!("x")))
        .await;
    assert!(
        matches!(early, Err(StoreError::WrongState { .. })),
        "{early:?}"
    );
    // A refused callback uses up its webhook-id too.
    let again = store
        .accept_result(&a.id, "msg_0".into(), 1, completed(json!("x")))
        .await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    let done = store
        .accept_result(&a.id, "msg_1".into(), 1, completed(json!({"ok": 1})))
        .await
        .unwrap();
    assert_eq!(done.status, ActionStatus::Completed);
    assert_eq!(done.attempts.len(), 1, "the 202 is the attempt's record");
    assert_eq!(done.attempts[0].status_code, Some(202));
    let replay = store
        .accept_result(&a.id, "msg_1".into(), 1, completed(json!(0)))
        .await;
    assert!(matches!(replay, Err(StoreError::Conflict(_))), "{replay:?}");
    let settled = store
        .accept_result(&a.id, "msg_2".into(), 1, completed(json!(0)))
        .await;
    assert!(
        matches!(&settled, Err(StoreError::WrongState { current }) if current == "completed"),
        "{settled:?}"
    );

    // `b`: the result beats the 202; the 202's record replaces the one
    // logged for the attempt without its answer.
    let done = store
        .accept_result(&b.id, "msg_3".into(), 1, completed(json!("b")))
        .await
        .unwrap();
    assert_eq!(done.attempts.len(), 1);
    assert_eq!(done.attempts[0].status_code, None);
    let after = store
        .finish_attempt(
            &b.id,
            rec(1, Some(202), None),
            AttemptNext::AwaitResult(until),
        )
        .await
        .unwrap();
    assert_eq!(after, None, "already settled");
    let b_now = store.get_action(&b.id).await.unwrap();
    assert_eq!(b_now.status, ActionStatus::Completed);
    assert_eq!(b_now.attempts.len(), 1);
    assert_eq!(b_now.attempts[0].status_code, Some(202));
    assert!(matches!(
        store
            .accept_result("nope", "msg_4".into(), 1, completed(json!(0)))
            .await,
        Err(StoreError::NotFound)
    ));

    // Replay protection forgets what is older than asked: every id seen,
    // the refused ones (msg_0, msg_2, msg_4) as well as the accepted ones.
    assert_eq!(store.prune_seen_webhooks(in_secs(-60)).await.unwrap(), 0);
    assert_eq!(store.prune_seen_webhooks(in_secs(1)).await.unwrap(), 5);
}

/// The executor's own answer to an attempt, whatever it was, is its
/// record, also when its signed result settled the action first: a 200
/// with the result or a 5xx.
async fn an_executors_answer_after_its_result_is_the_attempts_record(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let (a, _) = store.insert_action(approved("a", 0)).await.unwrap();
    let (b, _) = store.insert_action(approved("a", 1)).await.unwrap();
    store
        .claim(vec![a.id.clone(), b.id.clone()], in_secs(30))
        .await
        .unwrap();
    for (id, webhook) in [(&a.id, "msg_a"), (&b.id, "msg_b")] {
        let done = store
            .accept_result(id, webhook.into(), 1, completed(json!("signed")))
            .await
            .unwrap();
        assert_eq!(done.attempts.len(), 1);
        assert_eq!(done.attempts[0].status_code, None);
    }
    // The dispatcher settles through `settle_attempt`, holding the action
    // as it claimed it.
    let late = store
        .settle_attempt(&a, &rec(1, Some(200), None), completed(json!("answered")))
        .await
        .unwrap();
    assert_eq!(late, None, "already settled");
    let late = store
        .finish_attempt(
            &b.id,
            rec(1, Some(503), Some("busy")),
            AttemptNext::RetryAt(in_secs(5)),
        )
        .await
        .unwrap();
    assert_eq!(late, None, "already settled");
    let a_now = store.get_action(&a.id).await.unwrap();
    assert_eq!(a_now.status, ActionStatus::Completed);
    assert_eq!(
        a_now.outcome.as_ref().unwrap().result,
        Some(json!("signed")),
        "the first result stands"
    );
    assert_eq!(a_now.attempts.len(), 1);
    assert_eq!(a_now.attempts[0].status_code, Some(200));
    let b_now = store.get_action(&b.id).await.unwrap();
    assert_eq!(
        b_now.status,
        ActionStatus::Completed,
        "no retry of a settled action"
    );
    assert_eq!(b_now.attempts.len(), 1);
    assert_eq!(b_now.attempts[0].status_code, Some(503));
    assert_eq!(b_now.attempts[0].error.as_deref(), Some("busy"));

    // An attempt whose lease lapsed keeps that record: the answer came too
    // late to be the attempt's.
    let (c, _) = store.insert_action(approved("a", 2)).await.unwrap();
    store.claim(vec![c.id.clone()], in_secs(-1)).await.unwrap();
    let failed = store.release_leases(Utc::now(), 1, false).await.unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].status, ActionStatus::Failed);
    let late = store
        .settle_attempt(&c, &rec(1, Some(200), None), completed(json!("late")))
        .await
        .unwrap();
    assert_eq!(late, None);
    let c_now = store.get_action(&c.id).await.unwrap();
    assert_eq!(c_now.attempts.len(), 1);
    assert_eq!(c_now.attempts[0].status_code, None);
    assert!(
        c_now.attempts[0]
            .error
            .as_deref()
            .unwrap()
            .contains("lease lapsed")
    );
}

async fn lapsed_leases_come_round_again_until_attempts_run_out(kind: Kind) {
    let Some((store, _dir)) = open(kind).await else {
        return;
    };
    let (a, _) = store.insert_action(approved("a", 0)).await.unwrap();
    let (b, _) = store.insert_action(approved("a", 1)).await.unwrap();
    let (c, _) = store.insert_action(approved("a", 2)).await.unwrap();
    store
        .claim(vec![a.id.clone(), b.id.clone()], in_secs(-1))
        .await
        .unwrap();
    store.claim(vec![c.id.clone()], in_secs(60)).await.unwrap();
    let mut events = store.subscribe();
    let released = store.release_leases(Utc::now(), 3, false).await.unwrap();
    let mut got: Vec<&str> = released.iter().map(|x| x.id.as_str()).collect();
    got.sort_unstable();
    assert_eq!(got, [a.id.as_str(), b.id.as_str()], "c's lease runs");
    for x in &released {
        assert_eq!(x.status, ActionStatus::Approved);
        assert_eq!(x.attempts.len(), 1);
        assert!(
            x.attempts[0]
                .error
                .as_deref()
                .unwrap()
                .contains("lease lapsed")
        );
    }
    assert!(events.try_recv().is_err(), "released, not settled");
    // Claimed again: the same action (the same webhook-id), attempt 2.
    let again = store.claim(vec![a.id.clone()], in_secs(-1)).await.unwrap();
    assert_eq!(again[0].attempt, 2);
    assert_eq!(events.recv().await.unwrap().kind, "action.started");
    // Out of attempts: the release fails it.
    let failed = store.release_leases(Utc::now(), 2, false).await.unwrap();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].status, ActionStatus::Failed);
    assert_eq!(failed[0].attempts.len(), 2);
    let ev = events.recv().await.unwrap();
    assert_eq!(ev.kind, "action.failed");
    assert_eq!(store.get_action(&a.id).await.unwrap(), failed[0]);
    // At start-up alone on its database, everything running is released.
    let all = store.release_leases(Utc::now(), 3, true).await.unwrap();
    assert_eq!(all.iter().map(|x| &x.id).collect::<Vec<_>>(), [&c.id]);
    assert!(
        all[0].attempts[0]
            .error
            .as_deref()
            .unwrap()
            .contains("stopped")
    );
}

crate::conformance!(
    due_actions_are_claimed_once_oldest_first,
    a_retry_comes_due_at_its_time_and_fences_the_attempt_before_it,
    an_async_result_settles_once_and_a_replay_is_refused,
    an_executors_answer_after_its_result_is_the_attempts_record,
    lapsed_leases_come_round_again_until_attempts_run_out,
);

/// Three nodes claim the same due actions at once (passes and hand-offs);
/// each action is claimed by one of them, for attempt 1.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn nodes_claiming_at_once_claim_each_action_once() {
    let Some(url) = pg_database() else {
        return;
    };
    let nodes = [
        open_node(&url).await,
        open_node(&url).await,
        open_node(&url).await,
    ];
    let mut ids = Vec::new();
    for n in 0..60 {
        ids.push(nodes[0].insert_action(approved("a", n)).await.unwrap().0.id);
    }
    let mut tasks = Vec::new();
    for round in 0..4 {
        for (i, node) in nodes.iter().enumerate() {
            let (node, ids) = (node.clone(), ids.clone());
            tasks.push(tokio::spawn(async move {
                if (round + i) % 2 == 0 {
                    node.claim(ids, in_secs(60)).await.unwrap()
                } else {
                    let mut got = Vec::new();
                    while let Some(c) = node
                        .claim_next("files", Utc::now(), in_secs(60))
                        .await
                        .unwrap()
                    {
                        got.push(c);
                    }
                    got
                }
            }));
        }
    }
    let mut claims: HashMap<String, usize> = HashMap::new();
    for t in tasks {
        for c in t.await.unwrap() {
            assert_eq!(c.attempt, 1, "{}", c.action.id);
            *claims.entry(c.action.id).or_default() += 1;
        }
    }
    assert_eq!(claims.len(), ids.len());
    assert!(claims.values().all(|n| *n == 1), "{claims:?}");
    for id in &ids {
        let started = nodes[2]
            .action_events(id)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.kind == "action.started")
            .count();
        assert_eq!(started, 1);
    }
    for n in nodes {
        n.close().await;
    }
}

/// A node's lease lapses (it hangs, or dies); the others release it at
/// once, each action once, and one claims it again. The first node's late
/// answer then loses to the attempt that took over.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stale_lease_holder_loses_to_the_node_that_took_over() {
    let Some(url) = pg_database() else {
        return;
    };
    let nodes = [
        open_node(&url).await,
        open_node(&url).await,
        open_node(&url).await,
    ];
    let mut ids = Vec::new();
    for n in 0..20 {
        ids.push(nodes[0].insert_action(approved("a", n)).await.unwrap().0.id);
    }
    let first = nodes[0].claim(ids.clone(), in_secs(-1)).await.unwrap();
    assert_eq!(first.len(), ids.len());
    let releases: Vec<_> = nodes[1..]
        .iter()
        .flat_map(|n| [n.clone(), n.clone()])
        .map(|n| tokio::spawn(async move { n.release_leases(Utc::now(), 5, false).await.unwrap() }))
        .collect();
    let mut released: HashMap<String, usize> = HashMap::new();
    for r in releases {
        for a in r.await.unwrap() {
            *released.entry(a.id).or_default() += 1;
        }
    }
    assert_eq!(released.len(), ids.len());
    assert!(released.values().all(|n| *n == 1), "{released:?}");
    let second = nodes[2].claim(ids.clone(), in_secs(60)).await.unwrap();
    assert_eq!(second.len(), ids.len());
    for (old, new) in first.iter().zip(&second) {
        assert_eq!(old.action.id, new.action.id, "the same webhook-id");
        assert_eq!(new.attempt, 2);
        let late = nodes[0]
            .settle_attempt(
                &old.action,
                &rec(1, Some(200), None),
                completed(json!("old")),
            )
            .await
            .unwrap();
        assert_eq!(late, None, "the stale holder's settle loses");
        let won = nodes[2]
            .settle_attempt(
                &new.action,
                &rec(2, Some(200), None),
                completed(json!("new")),
            )
            .await
            .unwrap()
            .expect("the current attempt settles");
        assert_eq!(won.outcome.unwrap().result, Some(json!("new")));
        let log: Vec<i64> = won.attempts.iter().map(|r| r.n).collect();
        assert_eq!(log, [1, 2], "the lapsed attempt and the one that answered");
    }
    for n in nodes {
        n.close().await;
    }
}
