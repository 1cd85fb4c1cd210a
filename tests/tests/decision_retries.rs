//! An operator's decision sent again (its answer lost to a 503 or a
//! dropped connection, so the client sends it once more) is answered as
//! it stands and written once: the same verdict from the same identity is
//! a 200 with the item as it is now, and no second approval or event; any
//! other decision on a settled item is still a 409. An agent's cancel and
//! outcome report alike.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::call;
use crate::common::daemon::{Keyed, PgPair, agent_key, files_handler, register_handler, role_key};
use crate::teams::{approve, events_of, get, pending, person_key, team};

async fn post(k: &Keyed, url: String, key: &str, body: Value) -> (u16, Value) {
    call(&k.http, Method::POST, url, key, Some(body)).await
}

fn count(events: &[String], kind: &str) -> usize {
    events.iter().filter(|e| *e == kind).count()
}

#[tokio::test]
async fn an_action_decided_again_by_its_decider_is_answered_as_it_stands() {
    let k = Keyed::start(&[]).await;
    let (base, op) = (&k.d.base, &k.operator);
    let id = pending(&k.http, base, &k.agent, "bash", "make a").await;
    let url = format!("{base}/v1/actions/{id}");

    let (s, first) = post(&k, format!("{url}/approve"), op, json!({"note": "ok"})).await;
    assert_eq!(s, 200, "{first}");
    assert_eq!(first["status"], "approved");
    let (s, again) = post(&k, format!("{url}/approve"), op, json!({"note": "ok"})).await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(again["status"], "approved");
    assert_eq!(again["decided_at"], first["decided_at"]);
    assert_eq!(again["decided_by"], first["decided_by"]);
    assert_eq!(again["approvals"].as_array().unwrap().len(), 1, "{again}");
    // The words of a reply decide the same way.
    let (s, replied) = post(&k, format!("{url}/reply"), op, json!({"text": "yes"})).await;
    assert_eq!(s, 200, "{replied}");
    assert_eq!(replied["decided_at"], first["decided_at"]);
    let events = events_of(&k.http, base, &k.admin, &id).await;
    assert_eq!(count(&events, "action.approved"), 1, "{events:?}");

    // Another verdict, a grant with it, an edit, another operator: 409,
    // naming what the action is.
    for body in [
        json!({"remember": {"expires": "1h"}}),
        json!({"detail": "make b"}),
    ] {
        let (s, p) = post(&k, format!("{url}/approve"), op, body).await;
        assert_eq!(s, 409, "{p}");
    }
    let (s, p) = post(&k, format!("{url}/deny"), op, json!({})).await;
    assert_eq!((s, &p["current_status"]), (409, &json!("approved")), "{p}");
    let other = role_key(&k.http, base, &k.admin, "operator").await;
    let (s, p) = post(&k, format!("{url}/approve"), &other, json!({})).await;
    assert_eq!((s, &p["current_status"]), (409, &json!("approved")), "{p}");
    let (s, grants) = call(&k.http, Method::GET, format!("{base}/v1/grants"), op, None).await;
    assert_eq!((s, grants), (200, json!([])));

    // A denial sent again keeps its first reason; approving it is a 409.
    let id = pending(&k.http, base, &k.agent, "bash", "make c").await;
    let url = format!("{base}/v1/actions/{id}");
    let (s, first) = post(
        &k,
        format!("{url}/deny"),
        op,
        json!({"reason": "not today"}),
    )
    .await;
    assert_eq!(s, 200, "{first}");
    let (s, again) = post(
        &k,
        format!("{url}/deny"),
        op,
        json!({"reason": "not today"}),
    )
    .await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(
        (
            &again["status"],
            &again["decision_note"],
            &again["decided_at"]
        ),
        (&json!("denied"), &json!("not today"), &first["decided_at"])
    );
    let (s, p) = post(&k, format!("{url}/approve"), op, json!({})).await;
    assert_eq!((s, &p["current_status"]), (409, &json!("denied")), "{p}");
    let (s, p) = post(&k, format!("{url}/deny"), &other, json!({})).await;
    assert_eq!(s, 409, "{p}");
    let events = events_of(&k.http, base, &k.admin, &id).await;
    assert_eq!(count(&events, "action.denied"), 1, "{events:?}");

    // Settled otherwise (the agent withdrew it): a 409, whoever asks.
    let id = pending(&k.http, base, &k.agent, "bash", "make d").await;
    let url = format!("{base}/v1/actions/{id}");
    let (s, c) = post(&k, format!("{url}/cancel"), &k.agent, json!({})).await;
    assert_eq!(s, 200, "{c}");
    let (s, p) = post(&k, format!("{url}/deny"), op, json!({})).await;
    assert_eq!((s, &p["current_status"]), (409, &json!("cancelled")), "{p}");
}

/// The agent's own writes after asking: a cancel or an outcome report sent
/// again is answered as the action stands; another outcome, or a cancel of
/// what someone else settled, is a 409.
#[tokio::test]
async fn a_cancel_or_an_outcome_sent_again_is_answered_as_it_stands() {
    let k = Keyed::start(&[]).await;
    let (base, op) = (&k.d.base, &k.operator);
    let id = pending(&k.http, base, &k.agent, "bash", "make e").await;
    let url = format!("{base}/v1/actions/{id}");
    let (s, first) = post(&k, format!("{url}/cancel"), &k.agent, json!({})).await;
    assert_eq!((s, &first["status"]), (200, &json!("cancelled")), "{first}");
    let (s, again) = post(&k, format!("{url}/cancel"), &k.agent, json!({})).await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(again["decided_at"], first["decided_at"]);
    let events = events_of(&k.http, base, &k.admin, &id).await;
    assert_eq!(count(&events, "action.cancelled"), 1, "{events:?}");
    // Withdrawn by an operator: the agent's cancel is another one's.
    let id = pending(&k.http, base, &k.agent, "bash", "make f").await;
    let url = format!("{base}/v1/actions/{id}");
    let (s, c) = post(&k, format!("{url}/cancel"), op, json!({})).await;
    assert_eq!(s, 200, "{c}");
    let (s, p) = post(&k, format!("{url}/cancel"), &k.agent, json!({})).await;
    assert_eq!((s, &p["current_status"]), (409, &json!("cancelled")), "{p}");

    let id = pending(&k.http, base, &k.agent, "bash", "make g").await;
    let url = format!("{base}/v1/actions/{id}");
    let (s, a) = post(&k, format!("{url}/approve"), op, json!({})).await;
    assert_eq!(s, 200, "{a}");
    let report = json!({"status": "completed", "result": {"lines": 3, "ok": true}});
    let (s, first) = post(&k, format!("{url}/outcome"), &k.agent, report.clone()).await;
    assert_eq!((s, &first["status"]), (200, &json!("completed")), "{first}");
    let (s, again) = post(&k, format!("{url}/outcome"), &k.agent, report).await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(again["outcome"], first["outcome"]);
    for other in [
        json!({"status": "failed", "error": "no"}),
        json!({"status": "completed", "result": {"lines": 4}}),
    ] {
        let (s, p) = post(&k, format!("{url}/outcome"), &k.agent, other).await;
        assert_eq!((s, &p["current_status"]), (409, &json!("completed")), "{p}");
    }
    let events = events_of(&k.http, base, &k.admin, &id).await;
    assert_eq!(count(&events, "action.completed"), 1, "{events:?}");
}

/// Under a quorum, an approval sent again by one approver counts once: it
/// answers the action (still pending) and the second person settles it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_approval_sent_again_counts_once() {
    let t = team(json!([{"pattern": "tool:deploy:.*", "count": 2}])).await;
    let base = &t.d.base;
    let ann = person_key(&t.http, base, &t.admin, "ann").await;
    let bob = person_key(&t.http, base, &t.admin, "bob").await;
    let id = pending(&t.http, base, &t.agent, "deploy", "prod").await;
    // Twice at once, and once more after.
    let (a, b) = tokio::join!(
        approve(&t.http, base, &ann, &id, json!({})),
        approve(&t.http, base, &ann, &id, json!({}))
    );
    assert_eq!((a.0, b.0), (200, 200), "{a:?} {b:?}");
    let (s, again) = approve(&t.http, base, &ann, &id, json!({})).await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(again["status"], "pending", "{again}");
    assert_eq!(again["approvals"].as_array().unwrap().len(), 1, "{again}");
    let (s, done) = approve(&t.http, base, &bob, &id, json!({})).await;
    assert_eq!((s, &done["status"]), (200, &json!("approved")), "{done}");
    let (s, late) = approve(&t.http, base, &ann, &id, json!({})).await;
    assert_eq!((s, &late["status"]), (200, &json!("approved")), "{late}");
    let a = get(&t.http, base, &t.admin, &id).await;
    assert_eq!(a["approvals"].as_array().unwrap().len(), 2, "{a}");
    let events = events_of(&t.http, base, &t.admin, &id).await;
    assert_eq!(count(&events, "action.approval"), 1, "{events:?}");
    assert_eq!(count(&events, "action.approved"), 1, "{events:?}");
}

/// A plan or a grant request decided again the same way by its decider is
/// answered as it stands: no grant made twice; another decision is a 409.
#[tokio::test]
async fn plans_and_grant_requests_decided_again_are_answered_as_they_stand() {
    let k = Keyed::start(&[]).await;
    let (base, op) = (&k.d.base, &k.operator);
    let other = role_key(&k.http, base, &k.admin, "operator").await;
    let grants = || async {
        let (s, g) = call(&k.http, Method::GET, format!("{base}/v1/grants"), op, None).await;
        assert_eq!(s, 200, "{g}");
        g.as_array().unwrap().len()
    };
    let steps =
        json!([{"tool": "bash", "detail": "make dist"}, {"tool": "bash", "detail": "make docs"}]);
    let (s, plan) = post(
        &k,
        format!("{base}/v1/plans"),
        &k.agent,
        json!({"session": "task-1", "steps": steps}),
    )
    .await;
    assert_eq!(s, 201, "{plan}");
    let url = format!("{base}/v1/plans/{}", plan["id"].as_str().unwrap());
    let (s, first) = post(&k, format!("{url}/approve"), op, json!({"steps": [0]})).await;
    assert_eq!(s, 200, "{first}");
    assert_eq!(grants().await, 1);
    let (s, again) = post(&k, format!("{url}/approve"), op, json!({"steps": [0]})).await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(again, first);
    assert_eq!(grants().await, 1);
    // Every step is more than was approved; a denial or another operator
    // is another decision.
    for (key, verb, body) in [
        (op, "approve", json!({})),
        (op, "deny", json!({})),
        (&other, "approve", json!({"steps": [0]})),
    ] {
        let (s, p) = post(&k, format!("{url}/{verb}"), key, body).await;
        assert_eq!(s, 409, "{verb}: {p}");
    }
    let (s, plan) = post(
        &k,
        format!("{base}/v1/plans"),
        &k.agent,
        json!({"session": "task-2", "steps": [{"tool": "bash", "detail": "make"}]}),
    )
    .await;
    assert_eq!(s, 201, "{plan}");
    let url = format!("{base}/v1/plans/{}", plan["id"].as_str().unwrap());
    for _ in 0..2 {
        let (s, p) = post(&k, format!("{url}/deny"), op, json!({})).await;
        assert_eq!((s, &p["status"]), (200, &json!("denied")), "{p}");
    }

    register_handler(&k.http, base, &k.admin, files_handler()).await;
    let ask = json!({"handler": "files", "permission": "fs.write", "reason": "to write /a"});
    let (s, r) = post(
        &k,
        format!("{base}/v1/grant-requests"),
        &k.agent,
        ask.clone(),
    )
    .await;
    assert_eq!(s, 201, "{r}");
    let url = format!("{base}/v1/grant-requests/{}", r["id"].as_str().unwrap());
    let (s, first) = post(&k, format!("{url}/approve"), op, json!({})).await;
    assert_eq!((s, &first["status"]), (200, &json!("approved")), "{first}");
    let (s, again) = post(&k, format!("{url}/approve"), op, json!({})).await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(again["grant"]["id"], first["grant"]["id"]);
    assert_eq!(grants().await, 2);
    for (key, verb, body) in [
        (op, "approve", json!({"expires": "5m"})),
        (op, "deny", json!({})),
        (&other, "approve", json!({})),
    ] {
        let (s, p) = post(&k, format!("{url}/{verb}"), key, body).await;
        assert_eq!(s, 409, "{verb}: {p}");
    }
    let (s, r) = post(&k, format!("{base}/v1/grant-requests"), &k.agent, ask).await;
    assert_eq!(s, 201, "{r}");
    let url = format!("{base}/v1/grant-requests/{}", r["id"].as_str().unwrap());
    for _ in 0..2 {
        let (s, p) = post(&k, format!("{url}/deny"), op, json!({"reason": "no"})).await;
        assert_eq!((s, &p["status"]), (200, &json!("denied")), "{p}");
    }
    assert_eq!(grants().await, 2);
}

/// Two daemons on one Postgres: one operator's decision sent to both at
/// once, many times (a retry racing its first attempt through another
/// daemon behind a load balancer), is made once and every answer is it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_racing_itself_on_two_daemons_is_made_once() {
    // The data dirs bound first, so dropped after the daemons.
    let Some(PgPair {
        dirs: _dirs,
        daemons,
        http,
        admin,
        operator: op,
    }) = PgPair::start().await
    else {
        return;
    };
    let agent = agent_key(&http, &daemons[0].base, &admin, "racer").await;
    for round in 0..6 {
        let verb = if round % 2 == 0 { "approve" } else { "deny" };
        let id = pending(
            &http,
            &daemons[0].base,
            &agent,
            "bash",
            &format!("make r{round}"),
        )
        .await;
        let sends = (0..6).map(|i| {
            let (http, op) = (http.clone(), op.clone());
            let url = format!("{}/v1/actions/{id}/{verb}", daemons[i % 2].base);
            tokio::spawn(async move { call(&http, Method::POST, url, &op, Some(json!({}))).await })
        });
        let mut answers = Vec::new();
        for s in sends {
            answers.push(s.await.unwrap());
        }
        let settled = if verb == "approve" {
            "approved"
        } else {
            "denied"
        };
        assert!(
            answers.iter().all(|(s, a)| *s == 200
                && a["status"] == settled
                && a["decided_at"] == answers[0].1["decided_at"]),
            "{answers:?}"
        );
        let events = events_of(&http, &daemons[1].base, &admin, &id).await;
        assert_eq!(
            count(&events, &format!("action.{settled}")),
            1,
            "{events:?}"
        );
    }
}
