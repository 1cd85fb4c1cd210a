//! Black-box tests: `limits.max_pending_per_agent`. One agent cannot bury
//! the operators' queue: past the limit (default 100) its new actions and
//! grant requests get 429 problem+json naming the limit, a `limit.reached`
//! event is recorded, other agents are not affected, and racing requests
//! never pass the limit.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use reqwest::Method;
use serde_json::{Value, json};

use crate::audit::export;
use crate::common;
use common::daemon::{
    Daemon, agent_key, files_handler, register_handler, request_action, role_key, status_json,
};
use common::{call, client};

async fn pending_of(http: &reqwest::Client, base: &str, operator: &str, agent: &str) -> usize {
    let (s, page) = call(
        http,
        reqwest::Method::GET,
        format!("{base}/v1/actions?status=pending&agent={agent}&limit=200"),
        operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{page}");
    page["items"].as_array().unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_default_of_100_pending_items_an_agent_gets_429() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let keyed = json!({"tool": "deploy", "detail": "keyed", "idempotency_key": "k1"});
    let (s, first) = call(
        &http,
        Method::POST,
        format!("{}/v1/actions", d.base),
        &agent,
        Some(keyed.clone()),
    )
    .await;
    assert_eq!(s, 201, "{first}");
    for i in 1..100 {
        let (s, _, a) =
            status_json(request_action(&http, &d.base, &agent, "deploy", &format!("n{i}")).await)
                .await;
        assert_eq!(s, 201, "{i}: {a}");
    }
    // At the limit, a retry of a request already stored adds nothing: it
    // gets the stored action, as any retry does.
    let (s, again) = call(
        &http,
        Method::POST,
        format!("{}/v1/actions", d.base),
        &agent,
        Some(keyed),
    )
    .await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(again["id"], first["id"]);
    // The same key for another request is still a conflict, not a way past the limit.
    let other = json!({"tool": "deploy", "detail": "other", "idempotency_key": "k1"});
    let (s, p) = call(
        &http,
        Method::POST,
        format!("{}/v1/actions", d.base),
        &agent,
        Some(other),
    )
    .await;
    assert_eq!(s, 409, "{p}");
    let (s, ctype, p) =
        status_json(request_action(&http, &d.base, &agent, "deploy", "one more").await).await;
    assert_eq!(s, 429, "{p}");
    assert_eq!(ctype.as_deref(), Some("application/problem+json"));
    assert_eq!(p["code"], "limit-reached", "{p}");
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("limits.max_pending_per_agent"),
        "{p}"
    );
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limit_holds_for_actions_and_grant_requests_under_a_race_and_per_agent() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        dir.path(),
        &[("ACTIONGATE_LIMITS__MAX_PENDING_PER_AGENT", "5")],
    );
    let http = client();
    let admin = d.admin_key();
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let other = agent_key(&http, &d.base, &admin, "other").await;
    register_handler(&http, &d.base, &admin, files_handler()).await;

    // 30 requests at once: exactly 5 are stored, the rest get 429.
    let mut racing = Vec::new();
    for i in 0..30 {
        let (http, base, agent) = (http.clone(), d.base.clone(), agent.clone());
        racing.push(tokio::spawn(async move {
            let resp = request_action(&http, &base, &agent, "deploy", &format!("r{i}")).await;
            resp.status().as_u16()
        }));
    }
    let mut codes = Vec::new();
    for t in racing {
        codes.push(t.await.unwrap());
    }
    assert_eq!(codes.iter().filter(|c| **c == 201).count(), 5, "{codes:?}");
    assert!(codes.iter().all(|c| *c == 201 || *c == 429), "{codes:?}");
    assert_eq!(pending_of(&http, &d.base, &operator, "bot").await, 5);

    // A grant request is an item for a human too.
    let (s, p) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/grant-requests", d.base),
        &agent,
        Some(json!({"handler": "files", "permission": "fs.write", "reason": "more"})),
    )
    .await;
    assert_eq!(s, 429, "{p}");

    // Another agent is not held back.
    let (s, _, a) = status_json(request_action(&http, &d.base, &other, "deploy", "x").await).await;
    assert_eq!(s, 201, "{a}");

    // Deciding one makes room for one.
    let (_, page) = call(
        &http,
        reqwest::Method::GET,
        format!("{}/v1/actions?status=pending&agent=bot", d.base),
        &operator,
        None,
    )
    .await;
    let first = page["items"][0]["id"].as_str().unwrap().to_owned();
    let (s, _) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions/{first}/deny", d.base),
        &operator,
        Some(json!({"reason": "no"})),
    )
    .await;
    assert_eq!(s, 200);
    let (s, _, a) = status_json(request_action(&http, &d.base, &agent, "deploy", "y").await).await;
    assert_eq!(s, 201, "{a}");
    let (s, _, _) = status_json(request_action(&http, &d.base, &agent, "deploy", "z").await).await;
    assert_eq!(s, 429);

    // The limit was recorded in the log (once: at most one a minute).
    let text = export(&http, &d.base, &operator).await;
    let events: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &Value| v["type"] == "limit.reached")
        .collect();
    assert_eq!(events.len(), 1, "{text}");
    assert_eq!(events[0]["agent"], "bot");
    assert_eq!(events[0]["data"]["limit"], "max_pending_per_agent");
    assert_eq!(events[0]["data"]["max"], 5);
    d.stop();
}

/// A plan waits for a human like an action: an agent's pending plans count
/// toward its limit, so a flood of plans cannot bury the queue (nor push
/// the older plans off the page's list).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_plans_count_toward_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        dir.path(),
        &[("ACTIONGATE_LIMITS__MAX_PENDING_PER_AGENT", "3")],
    );
    let http = client();
    let admin = d.admin_key();
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let plan = |i: usize| {
        json!({"reason": "task", "session": "s",
               "steps": [{"tool": "bash", "detail": format!("make step-{i}")}]})
    };
    let (s, _, a) = status_json(request_action(&http, &d.base, &agent, "deploy", "x").await).await;
    assert_eq!(s, 201, "{a}");
    let mut ids = Vec::new();
    for i in 0..2 {
        let (s, p) = call(
            &http,
            Method::POST,
            format!("{}/v1/plans", d.base),
            &agent,
            Some(plan(i)),
        )
        .await;
        assert_eq!(s, 201, "{p}");
        ids.push(p["id"].as_str().unwrap().to_owned());
    }
    // One action and two plans wait: a third plan, and an action, are refused.
    let (s, p) = call(
        &http,
        Method::POST,
        format!("{}/v1/plans", d.base),
        &agent,
        Some(plan(2)),
    )
    .await;
    assert_eq!(s, 429, "{p}");
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("max_pending_per_agent"),
        "{p}"
    );
    let (s, _, _) = status_json(request_action(&http, &d.base, &agent, "deploy", "y").await).await;
    assert_eq!(s, 429);
    // Deciding a plan makes room.
    let (s, p) = call(
        &http,
        Method::POST,
        format!("{}/v1/plans/{}/deny", d.base, ids[0]),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{p}");
    let (s, p) = call(
        &http,
        Method::POST,
        format!("{}/v1/plans", d.base),
        &agent,
        Some(plan(3)),
    )
    .await;
    assert_eq!(s, 201, "{p}");
    d.stop();
}

/// A plan still pending when its session ends expires with it: it leaves
/// the pending list, is not approved afterwards, and no longer holds one
/// of the agent's pending places.
async fn a_pending_plan_expires_when_its_session_ends(pg: bool) {
    let dir = tempfile::tempdir().unwrap();
    let Some(d) = crate::sessions::start(
        pg,
        dir.path(),
        &[("ACTIONGATE_LIMITS__MAX_PENDING_PER_AGENT", "1")],
    ) else {
        return;
    };
    let http = client();
    let admin = d.admin_key();
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let (s, p) = call(
        &http,
        Method::POST,
        format!("{}/v1/plans", d.base),
        &agent,
        Some(json!({"reason": "task", "session": "s",
                    "steps": [{"tool": "bash", "detail": "make deploy"}]})),
    )
    .await;
    assert_eq!(s, 201, "{p}");
    let id = p["id"].as_str().unwrap().to_owned();
    let (s, _, _) = status_json(request_action(&http, &d.base, &agent, "deploy", "x").await).await;
    assert_eq!(s, 429, "the plan holds the one place");
    let (s, e) = call(
        &http,
        Method::POST,
        format!("{}/v1/sessions/s/end", d.base),
        &agent,
        None,
    )
    .await;
    assert_eq!(s, 200, "{e}");
    let (s, p) = call(
        &http,
        Method::GET,
        format!("{}/v1/plans/{id}", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{p}");
    assert_eq!(p["status"], "expired", "{p}");
    let (s, list) = call(
        &http,
        Method::GET,
        format!("{}/v1/plans?status=pending", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{list}");
    assert_eq!(list, json!([]));
    let (s, p) = call(
        &http,
        Method::POST,
        format!("{}/v1/plans/{id}/approve", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 409, "{p}");
    let text = export(&http, &d.base, &operator).await;
    assert!(text.contains("\"plan.expired\""), "{text}");
    let (s, _, a) = status_json(request_action(&http, &d.base, &agent, "deploy", "y").await).await;
    assert_eq!(s, 201, "{a}");
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_plan_expires_when_its_session_ends_on_sqlite() {
    a_pending_plan_expires_when_its_session_ends(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pending_plan_expires_when_its_session_ends_on_postgres() {
    a_pending_plan_expires_when_its_session_ends(true).await;
}
