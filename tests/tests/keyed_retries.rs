//! An operator's grant, or an agent's plan or grant request, sent again
//! under its idempotency key (a retry after a lost answer or a 503) is
//! made once:
//! the same key and body answer what the first request made, another body
//! is a conflict, and requests racing with one key on several daemons make
//! one grant.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::call;
use crate::common::daemon::{
    Keyed, PgPair, agent_key, files_handler, register_handler, request_action, role_key,
    status_json,
};

async fn post(k: &Keyed, url: impl Into<String>, key: &str, body: Option<Value>) -> (u16, Value) {
    call(&k.http, Method::POST, url.into(), key, body).await
}

async fn get(k: &Keyed, url: impl Into<String>, key: &str) -> (u16, Value) {
    call(&k.http, Method::GET, url.into(), key, None).await
}

async fn delete(k: &Keyed, url: impl Into<String>, key: &str) -> (u16, Value) {
    call(&k.http, Method::DELETE, url.into(), key, None).await
}

async fn grants(k: &Keyed) -> Vec<Value> {
    let (s, list) = get(k, format!("{}/v1/grants", k.d.base), &k.operator).await;
    assert_eq!(s, 200, "{list}");
    list.as_array().unwrap().clone()
}

#[tokio::test]
async fn a_grant_sent_again_under_its_key_is_the_first_and_changes_nothing() {
    let k = Keyed::start(&[]).await;
    let base = &k.d.base;
    let (s, _, pending) =
        status_json(request_action(&k.http, base, &k.agent, "bash", "make a").await).await;
    assert_eq!(s, 201, "{pending}");
    assert_eq!(pending["status"], "pending");
    let body = json!({"tool": "bash", "pattern": "make [a-z]", "expires": "1h",
                      "idempotency_key": "grant-make-1"});
    let url = format!("{base}/v1/grants");
    let (s, first) = post(&k, url.clone(), &k.operator, Some(body.clone())).await;
    assert_eq!(s, 201, "{first}");
    assert_eq!(first["approved_actions"], json!([pending["id"]]));

    // The retry: the same grant, nothing approved again, one grant stored.
    let (s, again) = post(&k, url.clone(), &k.operator, Some(body.clone())).await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(again["id"], first["id"]);
    assert_eq!(again["approved_actions"], json!([]));
    assert_eq!(grants(&k).await.len(), 1);

    // The key with another grant: a conflict, nothing stored.
    let mut other = body.clone();
    other["pattern"] = json!("make .*");
    let (s, p) = post(&k, url.clone(), &k.operator, Some(other)).await;
    assert_eq!(s, 409, "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("grant-make-1"),
        "{p}"
    );
    assert_eq!(grants(&k).await.len(), 1);

    // Keys are each operator's own: another's same key is another grant.
    let second = role_key(&k.http, base, &k.admin, "operator").await;
    let (s, theirs) = post(&k, url.clone(), &second, Some(body.clone())).await;
    assert_eq!(s, 201, "{theirs}");
    assert_ne!(theirs["id"], first["id"]);

    // Revoked, the grant is still what the key made: a retry answers it
    // as it is now and grants nothing anew.
    let id = first["id"].as_str().unwrap();
    let (s, _) = delete(&k, format!("{url}/{id}"), &k.operator).await;
    assert_eq!(s, 200);
    let (s, late) = post(&k, url.clone(), &k.operator, Some(body)).await;
    assert_eq!(s, 200, "{late}");
    assert_eq!(late["id"], first["id"]);
    assert_eq!(late["active"], false);
    assert_eq!(grants(&k).await.len(), 2);

    // An empty or overlong key is refused by name, and stores nothing.
    for key in [json!(""), json!("k".repeat(257)), json!(7)] {
        let bad = json!({"tool": "bash", "pattern": "ls", "expires": "1h", "idempotency_key": key});
        let (s, p) = post(&k, url.clone(), &k.operator, Some(bad)).await;
        assert_eq!(s, 422, "{p}");
        assert!(p.to_string().contains("idempotency_key"), "{p}");
    }
    assert_eq!(grants(&k).await.len(), 2);
}

/// Two daemons on one Postgres, each sent the same keyed grant at once,
/// many times: one grant, and every answer names it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_key_racing_on_two_daemons_makes_one_grant() {
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
    let _ = agent_key(&http, &daemons[0].base, &admin, "coder").await;
    for round in 0..5 {
        let body = json!({"tool": "bash", "pattern": format!("make r{round}"), "expires": "1h",
                          "agent": "coder", "idempotency_key": format!("race-{round}")});
        let sends = (0..8).map(|i| {
            let (http, op, body) = (http.clone(), op.clone(), body.clone());
            let base = daemons[i % 2].base.clone();
            tokio::spawn(async move {
                call(
                    &http,
                    Method::POST,
                    format!("{base}/v1/grants"),
                    &op,
                    Some(body),
                )
                .await
            })
        });
        let mut answers = Vec::new();
        for s in sends {
            answers.push(s.await.unwrap());
        }
        let created = answers.iter().filter(|(s, _)| *s == 201).count();
        assert_eq!(created, 1, "{answers:?}");
        assert!(
            answers
                .iter()
                .all(|(s, g)| (*s == 200 || *s == 201) && g["id"] == answers[0].1["id"]),
            "{answers:?}"
        );
        let (s, list) = call(
            &http,
            Method::GET,
            format!("{}/v1/grants?agent=coder", daemons[1].base),
            &op,
            None,
        )
        .await;
        assert_eq!(s, 200);
        let made = list
            .as_array()
            .unwrap()
            .iter()
            .filter(|g| g["pattern"] == body["pattern"])
            .count();
        assert_eq!(made, 1, "{list}");
    }
}

/// A plan asked again under its key asks no human twice, even with the
/// agent at its pending limit (the plan the first request made is what
/// holds its place); another plan under the key is a conflict.
#[tokio::test]
async fn a_plan_asked_again_under_its_key_is_the_first() {
    let k = Keyed::start(&[("ACTIONGATE_LIMITS__MAX_PENDING_PER_AGENT", "1")]).await;
    let url = format!("{}/v1/plans", k.d.base);
    let body = json!({"session": "task-1", "reason": "release",
                      "steps": [{"tool": "bash", "detail": "make dist"}],
                      "idempotency_key": "plan-1"});
    let (s, first) = post(&k, url.clone(), &k.agent, Some(body.clone())).await;
    assert_eq!(s, 201, "{first}");
    let (s, again) = post(&k, url.clone(), &k.agent, Some(body.clone())).await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(again["id"], first["id"]);
    let mut other = body.clone();
    other["reason"] = json!("another");
    let (s, p) = post(&k, url.clone(), &k.agent, Some(other)).await;
    assert_eq!(s, 409, "{p}");
    assert!(p["detail"].as_str().unwrap().contains("plan-1"), "{p}");
    // Without the key, the same plan is another item: past the limit.
    let mut unkeyed = body.clone();
    unkeyed.as_object_mut().unwrap().remove("idempotency_key");
    let (s, p) = post(&k, url.clone(), &k.agent, Some(unkeyed)).await;
    assert_eq!(s, 429, "{p}");
    let (s, list) = get(&k, format!("{url}?status=pending"), &k.operator).await;
    assert_eq!(s, 200, "{list}");
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    let bad = json!({"session": "task-1", "steps": [{"tool": "bash", "detail": "ls"}], "idempotency_key": ""});
    let (s, p) = post(&k, url, &k.agent, Some(bad)).await;
    assert_eq!(s, 422, "{p}");
    assert!(p.to_string().contains("idempotency_key"), "{p}");
}

/// A grant request made again under its key asks no human twice: the
/// retry answers the first request as it stands, waits on it like the
/// first, and sees the operator's answer; another request under the key is
/// a conflict.
#[tokio::test]
async fn a_grant_request_made_again_under_its_key_is_the_first() {
    let k = Keyed::start(&[("ACTIONGATE_LIMITS__MAX_PENDING_PER_AGENT", "1")]).await;
    let base = &k.d.base;
    register_handler(&k.http, base, &k.admin, files_handler()).await;
    let url = format!("{base}/v1/grant-requests");
    let body = json!({"handler": "files", "permission": "fs.write", "reason": "to write /a",
                      "idempotency_key": "ask-1"});
    let (s, first) = post(&k, url.clone(), &k.agent, Some(body.clone())).await;
    assert_eq!(s, 201, "{first}");
    // At the pending limit, the retry still answers, after its wait.
    let (s, again) = post(&k, format!("{url}?wait=1"), &k.agent, Some(body.clone())).await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(
        (&again["id"], &again["status"]),
        (&first["id"], &json!("pending"))
    );
    let id = first["id"].as_str().unwrap();
    let (s, a) = post(
        &k,
        format!("{url}/{id}/approve"),
        &k.operator,
        Some(json!({})),
    )
    .await;
    assert_eq!(s, 200, "{a}");
    let (s, late) = post(&k, url.clone(), &k.agent, Some(body.clone())).await;
    assert_eq!(s, 200, "{late}");
    assert_eq!(
        (&late["id"], &late["status"]),
        (&first["id"], &json!("approved"))
    );
    let mut other = body.clone();
    other["reason"] = json!("to write /b");
    let (s, p) = post(&k, url.clone(), &k.agent, Some(other)).await;
    assert_eq!(s, 409, "{p}");
    assert!(p["detail"].as_str().unwrap().contains("ask-1"), "{p}");
    let (s, list) = get(&k, format!("{url}?status=approved"), &k.operator).await;
    assert_eq!(s, 200, "{list}");
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
}
