//! Black-box tests (`docs/teams.md`): grants and approvals rules. A grant
//! neither allows a new action nor settles a pending one that an approvals
//! rule governs (on SQLite and on Postgres), and an action keeps the rule
//! it was asked under when its profile changes while it waits.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, agent_key, set_profile};
use crate::common::pg_cluster::Cluster;
use crate::common::{call, client};
use crate::teams::{Team, approve, get, named_operator, pending, person_key, profile, team};

async fn create(http: &reqwest::Client, base: &str, agent: &str, body: Value) -> Value {
    let (s, a) = call(
        http,
        Method::POST,
        format!("{base}/v1/actions"),
        agent,
        Some(body),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    a
}

async fn grant(http: &reqwest::Client, base: &str, op: &str, body: Value) {
    let (s, g) = call(
        http,
        Method::POST,
        format!("{base}/v1/grants"),
        op,
        Some(body),
    )
    .await;
    assert_eq!(s, 201, "{g}");
}

/// A tool action an approvals rule governs asks although a grant covers
/// it; one it does not govern is allowed by the grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_does_not_allow_a_new_tool_action_an_approvals_rule_governs() {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team(json!([{"pattern": "tool:deploy:prod.*", "count": 2}])).await;
    let op = person_key(&http, &d.base, &admin, "ann").await;
    grant(
        &http,
        &d.base,
        &op,
        json!({"tool": "deploy", "pattern": ".*", "expires": "1h", "agent": "bot"}),
    )
    .await;
    let a = create(
        &http,
        &d.base,
        &agent,
        json!({"tool": "deploy", "detail": "staging", "timeout": "1s"}),
    )
    .await;
    assert_eq!(a["decision"]["result"], "allow", "{a}");
    let a = create(
        &http,
        &d.base,
        &agent,
        json!({"tool": "deploy", "detail": "prod eu", "timeout": "10m"}),
    )
    .await;
    assert_eq!(a["decision"]["result"], "ask", "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    let reason = a["decision"]["reason"].as_str().unwrap();
    assert!(reason.contains("approvals rule #0"), "{a}");
    // It still needs two people.
    let id = a["id"].as_str().unwrap();
    let (s, a) = approve(&http, &d.base, &op, id, json!({})).await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
}

/// A handler action whose registration asks for approvals asks although a
/// grant of its permission covers it; a sibling action without approvals
/// under the same permission is allowed by that grant.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_does_not_allow_a_new_handler_action_its_approvals_govern() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let (op, _) = named_operator(&http, &d.base, &admin, "ann").await;
    let schema = json!({"type": "object", "properties": {"amount": {"type": "integer"}}});
    let (s, p) = call(
        &http,
        Method::POST,
        format!("{}/v1/handlers", d.base),
        &admin,
        Some(json!({
            "id": "pay", "name": "Payments", "url": "http://127.0.0.1:9/hook",
            "permissions": [{"name": "pay.send", "parameters_schema": {"type": "object"}}],
            "actions": [
                {"name": "send", "params_schema": schema, "permission": "pay.send",
                 "approvals": {"count": 2}},
                {"name": "refund", "params_schema": schema, "permission": "pay.send"}
            ]
        })),
    )
    .await;
    assert_eq!(s, 201, "{p}");
    grant(
        &http,
        &d.base,
        &op,
        json!({"agent": "bot", "handler": "pay", "permission": "pay.send",
            "scope": {}, "expires": "1h"}),
    )
    .await;
    let a = create(
        &http,
        &d.base,
        &agent,
        json!({"handler": "pay", "action": "refund", "params": {"amount": 5}}),
    )
    .await;
    assert_eq!(a["decision"]["result"], "allow", "{a}");
    let a = create(
        &http,
        &d.base,
        &agent,
        json!({"handler": "pay", "action": "send", "params": {"amount": 5}, "timeout": "10m"}),
    )
    .await;
    assert_eq!(a["decision"]["result"], "ask", "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    assert!(
        a["decision"]["reason"]
            .as_str()
            .unwrap()
            .contains("handler action 'send'"),
        "{a}"
    );
}

/// The grant-settles-nothing-governed case on the daemon at `base`.
async fn pending_governed_stays_pending(base: &str, admin: &str) {
    let http = client();
    let agent = agent_key(&http, base, admin, "bot").await;
    set_profile(
        &http,
        base,
        admin,
        "bot",
        profile(json!([{"pattern": "tool:deploy:prod.*", "count": 2}])),
    )
    .await;
    let (op, _) = named_operator(&http, base, admin, "ann").await;
    let governed = pending(&http, base, &agent, "deploy", "prod eu").await;
    let plain = pending(&http, base, &agent, "deploy", "staging").await;
    grant(
        &http,
        base,
        &op,
        json!({"tool": "deploy", "pattern": ".*", "expires": "1h", "agent": "bot"}),
    )
    .await;
    assert_eq!(get(&http, base, &op, &plain).await["status"], "approved");
    let a = get(&http, base, &op, &governed).await;
    assert_eq!(a["status"], "pending", "{a}");
}

/// The Postgres half of
/// `teams::a_grant_does_not_settle_a_pending_action_an_approvals_rule_governs`.
#[test]
fn on_postgres_a_grant_does_not_settle_a_pending_action_an_approvals_rule_governs() {
    let Some(cluster) = Cluster::shared() else {
        return;
    };
    let url = cluster.database();
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        dir.path(),
        &[("ACTIONGATE_STORAGE__DATABASE_URL", url.as_str())],
    );
    let admin = d.admin_key();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(pending_governed_stays_pending(&d.base, &admin));
}

/// An action keeps the approvals rule it was asked under: its profile,
/// loosened while it waits, does not let an outsider decide it nor one
/// approval settle it; a grant made then does not settle it either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_keeps_the_approvals_rule_it_was_asked_under() {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team(json!([{"pattern": "tool:deploy:prod.*", "count": 2,
            "approvers": ["ann", "bea"]}]))
    .await;
    let ann = person_key(&http, &d.base, &admin, "ann").await;
    let bea = person_key(&http, &d.base, &admin, "bea").await;
    let (bob, _) = named_operator(&http, &d.base, &admin, "bob").await;
    let id = pending(&http, &d.base, &agent, "deploy", "prod eu").await;
    let a = get(&http, &d.base, &admin, &id).await;
    assert_eq!(a["decision"]["rule"]["approvals"][0]["count"], 2, "{a}");
    // The profile loses its rule while the action waits.
    set_profile(&http, &d.base, &admin, "bot", profile(json!([]))).await;
    grant(
        &http,
        &d.base,
        &bob,
        json!({"tool": "deploy", "pattern": ".*", "expires": "1h", "agent": "bot"}),
    )
    .await;
    assert_eq!(get(&http, &d.base, &admin, &id).await["status"], "pending");
    let (s, p) = approve(&http, &d.base, &bob, &id, json!({})).await;
    assert_eq!(s, 403, "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("approvals rule #0"),
        "{p}"
    );
    let (s, a) = approve(&http, &d.base, &ann, &id, json!({})).await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    assert_eq!(a["approvals_required"], 2, "{a}");
    let (s, a) = approve(&http, &d.base, &bea, &id, json!({})).await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["status"], "approved", "{a}");
}
