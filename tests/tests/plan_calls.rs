//! A handler step of a plan is approved as its call: that action with
//! those params, not whatever else its permission's scope admits; and its
//! sensitive params are kept and shown masked, as every action's are.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::call;
use crate::common::daemon::{agent_key, register_handler, role_key};
use crate::sessions::{post, start};

/// `mail`: `send` {to, body, token (sensitive)} and `forward` {to}, both
/// needing `mail.send` scoped by recipient.
fn mail() -> Value {
    json!({
        "id": "mail", "name": "Mail", "url": "http://127.0.0.1:9/hook",
        "permissions": [{"name": "mail.send",
            "parameters_schema": {"type": "object", "properties": {"to": {}}}}],
        "actions": [
            {"name": "send", "permission": "mail.send", "scope": {"to": "/to"},
             "sensitive": ["/token"],
             "params_schema": {"type": "object", "required": ["to", "body"],
                "properties": {"to": {"type": "string"}, "body": {"type": "string"},
                               "token": {"type": "string"}}}},
            {"name": "forward", "permission": "mail.send", "scope": {"to": "/to"},
             "params_schema": {"type": "object", "required": ["to"],
                "properties": {"to": {"type": "string"}}}}
        ]
    })
}

async fn a_plan_step_covers_its_own_call_only(pg: bool) {
    let dir = tempfile::tempdir().unwrap();
    let Some(d) = start(pg, dir.path(), &[]) else {
        return;
    };
    let http = crate::common::client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    register_handler(&http, &d.base, &admin, mail()).await;
    let secret = "tok-7f3a9c1e55d2";
    let step = json!({"to": "bob@example.com", "body": "minutes attached", "token": secret});
    let (s, plan) = post(
        &http,
        format!("{}/v1/plans", d.base),
        &agent,
        json!({"reason": "send the minutes", "session": "task",
               "steps": [{"handler": "mail", "action": "send", "params": step}]}),
    )
    .await;
    assert_eq!(s, 201, "{plan}");
    let id = plan["id"].as_str().unwrap();
    // Shown as every action is: the sensitive value masked.
    assert_eq!(plan["steps"][0]["params"]["token"], "***", "{plan}");
    let (s, shown) = call(
        &http,
        Method::GET,
        format!("{}/v1/plans/{id}", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{shown}");
    assert!(!shown.to_string().contains(secret), "{shown}");
    let (s, done) = call(
        &http,
        Method::POST,
        format!("{}/v1/plans/{id}/approve", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{done}");
    assert!(!done.to_string().contains(secret), "{done}");

    let act = |params: Value, action: &'static str| {
        let http = http.clone();
        let url = format!("{}/v1/actions", d.base);
        let agent = agent.clone();
        async move {
            let (s, a) = post(
                &http,
                url,
                &agent,
                json!({"handler": "mail", "action": action, "params": params, "session": "task"}),
            )
            .await;
            assert_eq!(s, 201, "{a}");
            a
        }
    };
    // Another body to the approved recipient, or another action of the
    // same permission: not what the step said, so they ask.
    let other = json!({"to": "bob@example.com", "body": "wire 10k to acct 99", "token": secret});
    let a = act(other, "send").await;
    assert_eq!(
        a["status"], "pending",
        "the step's grant ran another body: {a}"
    );
    let a = act(json!({"to": "bob@example.com"}), "forward").await;
    assert_eq!(
        a["status"], "pending",
        "the step's grant ran another action: {a}"
    );
    // The step itself runs without a question, once.
    let a = act(step.clone(), "send").await;
    assert_ne!(a["status"], "pending", "{a}");
    let a = act(step, "send").await;
    assert_eq!(a["status"], "pending", "the step ran twice: {a}");
    // Nothing recorded the secret in the clear.
    let (s, grants) = call(
        &http,
        Method::GET,
        format!("{}/v1/grants", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{grants}");
    assert!(!grants.to_string().contains(secret), "{grants}");
    let log = crate::audit::export(&http, &d.base, &admin).await;
    let leaks: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(secret) && l.contains("plan."))
        .collect();
    assert!(leaks.is_empty(), "{leaks:?}");
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_step_covers_its_own_call_only_on_sqlite() {
    a_plan_step_covers_its_own_call_only(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_step_covers_its_own_call_only_on_postgres() {
    a_plan_step_covers_its_own_call_only(true).await;
}

/// A step an approvals rule governs (the profile's, or its handler
/// action's), or a way out in a tainted session (a guarded line, or a
/// handler action not declared closed: sending mail), is granted nothing
/// by one approver's plan: the plan says so when asked and when approved,
/// and the step asks when it runs; the other steps run as approved.
async fn a_plan_grants_nothing_to_a_step_that_asks_when_it_runs(pg: bool) {
    let dir = tempfile::tempdir().unwrap();
    let Some(d) = start(pg, dir.path(), &[]) else {
        return;
    };
    let http = crate::common::client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    let mut handler = mail();
    handler["actions"][1]["approvals"] = json!({"count": 2});
    register_handler(&http, &d.base, &admin, handler).await;
    crate::common::daemon::set_profile(
        &http,
        &d.base,
        &admin,
        "bot",
        json!({"allow": ["tool:WebFetch:.*"], "ask": ["(?s).*"],
               "taints": ["tool:WebFetch:.*"], "guarded": ["tool:bash:curl .*"],
               "approvals": [{"pattern": "tool:deploy:prod.*", "count": 2}]}),
    )
    .await;
    // The session read the web: its ways out ask.
    let (s, a) = post(
        &http,
        format!("{}/v1/actions", d.base),
        &agent,
        json!({"tool": "WebFetch", "detail": "https://example.com/notes", "session": "rel"}),
    )
    .await;
    assert_eq!((s, a["status"].as_str()), (201, Some("approved")), "{a}");
    let (s, plan) = post(
        &http,
        format!("{}/v1/plans", d.base),
        &agent,
        json!({"reason": "release", "session": "rel", "steps": [
            {"tool": "bash", "detail": "make build"},
            {"tool": "deploy", "detail": "prod web"},
            {"handler": "mail", "action": "forward", "params": {"to": "ops@example.com"}},
            {"handler": "mail", "action": "send", "params": {"to": "ops@example.com", "body": "done"}},
            {"tool": "bash", "detail": "curl -d done https://hooks.example.com/x"}
        ]}),
    )
    .await;
    assert_eq!(s, 201, "{plan}");
    let asks = |p: &Value| -> Vec<bool> {
        p["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["asks"].is_string())
            .collect()
    };
    assert_eq!(asks(&plan), [false, true, true, true, true], "{plan}");
    let why = |p: &Value, i: usize| p["steps"][i]["asks"].as_str().unwrap().to_owned();
    assert!(why(&plan, 1).contains("approvals rule #0"), "{plan}");
    assert!(why(&plan, 3).contains("tainted by action"), "{plan}");
    assert!(why(&plan, 4).contains("tainted by action"), "{plan}");
    let id = plan["id"].as_str().unwrap();
    let (s, done) = call(
        &http,
        Method::POST,
        format!("{}/v1/plans/{id}/approve", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{done}");
    let approved: Vec<bool> = done["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["approved"] == true && !s["grants"].as_array().unwrap_or(&vec![]).is_empty())
        .collect();
    assert_eq!(approved, [true, false, false, false, false], "{done}");
    assert_eq!(asks(&done), [false, true, true, true, true], "{done}");

    let run = async |body: Value| {
        let (s, a) = post(&http, format!("{}/v1/actions", d.base), &agent, body).await;
        assert_eq!(s, 201, "{a}");
        a
    };
    let a = run(json!({"tool": "bash", "detail": "make build", "session": "rel"})).await;
    assert_eq!(a["status"], "approved", "{a}");
    let a = run(json!({"tool": "deploy", "detail": "prod web", "session": "rel"})).await;
    assert_eq!(a["status"], "pending", "{a}");
    assert_eq!(a["decision"]["rule"]["approvals"][0]["count"], 2, "{a}");
    let a = run(json!({"handler": "mail", "action": "forward",
        "params": {"to": "ops@example.com"}, "session": "rel"}))
    .await;
    assert_eq!(a["status"], "pending", "{a}");
    let a = run(json!({"handler": "mail", "action": "send",
        "params": {"to": "ops@example.com", "body": "done"}, "session": "rel"}))
    .await;
    assert_eq!(a["status"], "pending", "{a}");
    let a = run(
        json!({"tool": "bash", "detail": "curl -d done https://hooks.example.com/x",
        "session": "rel"}),
    )
    .await;
    assert_eq!(a["status"], "pending", "{a}");
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_grants_nothing_to_a_step_that_asks_when_it_runs_on_sqlite() {
    a_plan_grants_nothing_to_a_step_that_asks_when_it_runs(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_grants_nothing_to_a_step_that_asks_when_it_runs_on_postgres() {
    a_plan_grants_nothing_to_a_step_that_asks_when_it_runs(true).await;
}

/// A plan whose step reads untrusted content (a fetch in the shell) before
/// a way out: the way out will ask when it runs, as the session is tainted
/// by then, so the plan says so and grants it nothing. A way out before
/// the read is granted as any step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_way_out_after_a_step_that_reads_untrusted_content_asks_when_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let d = start(false, dir.path(), &[]).unwrap();
    let http = crate::common::client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    crate::common::daemon::set_profile(&http, &d.base, &admin, "bot", json!("standard")).await;
    let (s, plan) = post(
        &http,
        format!("{}/v1/plans", d.base),
        &agent,
        json!({"reason": "release", "session": "rel", "steps": [
            {"tool": "bash", "detail": "git push origin tag v1"},
            {"tool": "bash", "detail": "curl -s example.test/release-notes"},
            {"tool": "bash", "detail": "git push origin main"}
        ]}),
    )
    .await;
    assert_eq!(s, 201, "{plan}");
    let steps = plan["steps"].as_array().unwrap();
    assert!(
        steps[0]["asks"].is_null() && steps[1]["asks"].is_null(),
        "{plan}"
    );
    let why = steps[2]["asks"].as_str().unwrap();
    assert!(
        why.contains("step 1") && why.contains("untrusted content"),
        "{plan}"
    );
    let id = plan["id"].as_str().unwrap();
    let (s, done) = call(
        &http,
        Method::POST,
        format!("{}/v1/plans/{id}/approve", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{done}");
    let granted: Vec<bool> = done["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| !s["grants"].as_array().unwrap_or(&vec![]).is_empty())
        .collect();
    assert_eq!(granted, [true, true, false], "{done}");
    for (detail, status) in [
        ("git push origin tag v1", "approved"),
        ("curl -s example.test/release-notes", "approved"),
        ("git push origin main", "pending"),
    ] {
        let (s, a) = post(
            &http,
            format!("{}/v1/actions", d.base),
            &agent,
            json!({"tool": "bash", "detail": detail, "session": "rel"}),
        )
        .await;
        assert_eq!((s, a["status"].as_str()), (201, Some(status)), "{a}");
    }
    d.stop();
}
