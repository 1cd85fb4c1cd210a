//! Black-box tests from an adversarial review of approvals for teams
//! (`docs/teams.md`, `docs/receipts.md`): what an operator outside an
//! approver rule, an approver editing an action, or a grant could slip past
//! a quorum, and what a receipt binds.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, agent_key, set_profile};
use crate::common::pg_cluster::Cluster;
use crate::common::{call, client};
use crate::teams::{Team, approve, get, named_operator, pending, person_key, profile, team};

/// Adds a person; their id.
pub(crate) async fn person(http: &reqwest::Client, base: &str, admin: &str, body: Value) -> String {
    let (s, p) = call(
        http,
        Method::POST,
        format!("{base}/v1/people"),
        admin,
        Some(body),
    )
    .await;
    assert_eq!(s, 201, "{p}");
    p["id"].as_str().unwrap().to_owned()
}

/// An approver who edits an action into a string a stricter rule governs
/// binds every later approval to that rule: its approvers and its count,
/// not those of the string the agent asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edit_into_a_stricter_rule_binds_every_later_approval() {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team(json!([
        {"pattern": "tool:deploy:prod.*", "count": 2, "approvers": ["group:release"]}
    ]))
    .await;
    let (ann, ann_id) = named_operator(&http, &d.base, &admin, "ann-key").await;
    let (bob, bob_id) = named_operator(&http, &d.base, &admin, "bob-key").await;
    let (intern, _) = named_operator(&http, &d.base, &admin, "intern").await;
    person(
        &http,
        &d.base,
        &admin,
        json!({"name": "ann", "groups": ["release"], "keys": [ann_id]}),
    )
    .await;
    person(
        &http,
        &d.base,
        &admin,
        json!({"name": "bob", "groups": ["release"], "keys": [bob_id]}),
    )
    .await;

    // Asked as staging: no rule, anyone, once. Ann edits it to prod.
    let id = pending(&http, &d.base, &agent, "deploy", "staging").await;
    let (s, a) = approve(&http, &d.base, &ann, &id, json!({"detail": "prod eu"})).await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    assert_eq!(a["approvals_required"], 2, "{a}");
    // The intern is no approver of what will run: 403, nothing changes.
    let (s, p) = approve(&http, &d.base, &intern, &id, json!({})).await;
    assert_eq!(s, 403, "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("approvals rule #0"),
        "{p}"
    );
    let a = get(&http, &d.base, &admin, &id).await;
    assert_eq!(a["status"], "pending", "{a}");
    assert_eq!(a["approvals"].as_array().unwrap().len(), 1, "{a}");
    // Nor may they deny it.
    let (s, p) = call(
        &http,
        Method::POST,
        format!("{}/v1/actions/{id}/deny", d.base),
        &intern,
        Some(json!({})),
    )
    .await;
    assert_eq!(s, 403, "{p}");
    // A second release approver, having read the edit, completes it.
    let (s, a) = approve(&http, &d.base, &bob, &id, json!({"seen": "edited"})).await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["status"], "approved", "{a}");
    assert_eq!(a["approved_detail"], "prod eu", "{a}");
}

/// A decision-only action's receipt binds the detail the approvers let the
/// agent run (an edit), and names every person of its quorum.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_receipt_names_every_approver_and_binds_the_edited_detail() {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team(json!([{"pattern": "tool:deploy:.*", "count": 2}])).await;
    let ann = person_key(&http, &d.base, &admin, "ann").await;
    let bob = person_key(&http, &d.base, &admin, "bob").await;
    let id = pending(&http, &d.base, &agent, "deploy", "prod eu").await;
    let (s, a) = approve(
        &http,
        &d.base,
        &ann,
        &id,
        json!({"detail": "prod eu --canary"}),
    )
    .await;
    assert_eq!(s, 200, "{a}");
    let (s, a) = approve(&http, &d.base, &bob, &id, json!({"seen": "edited"})).await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["status"], "approved", "{a}");
    let (s, r) = call(
        &http,
        Method::GET,
        format!("{}/v1/actions/{id}/receipt", d.base),
        &agent,
        None,
    )
    .await;
    assert_eq!(s, 200, "{r}");
    let c = &r["claims"];
    assert_eq!(c["action_string"], "tool:deploy:prod eu --canary", "{c}");
    let ids: Vec<&str> = c["deciders"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["id"].as_str().unwrap())
        .collect();
    let who: Vec<String> = a["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["by"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, who, "{c}");
}

/// Cancelling is deciding for whoever is not the agent: an operator outside
/// the approver rule cannot end a governed action that way either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_outside_the_approver_rule_cannot_cancel_a_governed_action() {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team(json!([
        {"pattern": "tool:sql:.*", "count": 1, "approvers": ["group:dba"]}
    ]))
    .await;
    let (intern, _) = named_operator(&http, &d.base, &admin, "intern").await;
    let id = pending(&http, &d.base, &agent, "sql", "VACUUM").await;
    let url = format!("{}/v1/actions/{id}/cancel", d.base);
    let (s, p) = call(&http, Method::POST, url.clone(), &intern, None).await;
    assert_eq!(s, 403, "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("approvals rule #0"),
        "{p}"
    );
    assert_eq!(get(&http, &d.base, &admin, &id).await["status"], "pending");
    // The agent withdraws its own request as before.
    let (s, a) = call(&http, Method::POST, url, &agent, None).await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["status"], "cancelled", "{a}");
}

/// One identity approves once: a key whose person was renamed after it
/// approved does not count a second time (its approval sent again is
/// answered as it stands), and once its person is removed
/// it is nobody's and counts toward no quorum at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_identity_counts_once_even_when_its_person_changes_meanwhile() {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team(json!([{"pattern": "tool:deploy:.*", "count": 2}])).await;
    let (ann, ann_id) = named_operator(&http, &d.base, &admin, "ann-key").await;
    let pid = person(
        &http,
        &d.base,
        &admin,
        json!({"name": "ann", "keys": [ann_id]}),
    )
    .await;
    let id = pending(&http, &d.base, &agent, "deploy", "prod").await;
    let (s, a) = approve(&http, &d.base, &ann, &id, json!({})).await;
    assert_eq!(s, 200, "{a}");
    let (s, p) = call(
        &http,
        Method::PUT,
        format!("{}/v1/people/{pid}", d.base),
        &admin,
        Some(json!({"name": "ann-renamed", "keys": [ann_id]})),
    )
    .await;
    assert_eq!(s, 200, "{p}");
    // The same identity again: its approval sent again, which stands
    // (200) and is not counted twice.
    let (s, p) = approve(&http, &d.base, &ann, &id, json!({})).await;
    assert_eq!(s, 200, "{p}");
    assert_eq!(
        (&p["status"], p["approvals"].as_array().unwrap().len()),
        (&json!("pending"), 1),
        "{p}"
    );
    let (s, _) = call(
        &http,
        Method::DELETE,
        format!("{}/v1/people/{pid}", d.base),
        &admin,
        None,
    )
    .await;
    assert_eq!(s, 204);
    let (s, p) = approve(&http, &d.base, &ann, &id, json!({})).await;
    assert_eq!(s, 403, "{p}");
    let a = get(&http, &d.base, &admin, &id).await;
    assert_eq!(a["status"], "pending", "{a}");
    assert_eq!(a["approvals"].as_array().unwrap().len(), 1, "{a}");
}

/// On Postgres a new action that asks is approved at its insert by a grant
/// made meanwhile; a grant must not approve one an approvals rule governs
/// (one operator's say is not a quorum).
#[test]
fn on_postgres_a_grant_does_not_allow_a_new_action_an_approvals_rule_governs() {
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
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let http = client();
        let base = &d.base;
        let agent = agent_key(&http, base, &admin, "bot").await;
        set_profile(
            &http,
            base,
            &admin,
            "bot",
            profile(json!([{"pattern": "tool:deploy:prod.*", "count": 2}])),
        )
        .await;
        let op = person_key(&http, base, &admin, "ann").await;
        let (s, g) = call(
            &http,
            Method::POST,
            format!("{base}/v1/grants"),
            &op,
            Some(json!({"tool": "deploy", "pattern": ".*", "expires": "1h", "agent": "bot"})),
        )
        .await;
        assert_eq!(s, 201, "{g}");
        let (s, a) = call(
            &http,
            Method::POST,
            format!("{base}/v1/actions"),
            &agent,
            Some(json!({"tool": "deploy", "detail": "prod eu", "timeout": "10m"})),
        )
        .await;
        assert_eq!(s, 201, "{a}");
        assert_eq!(a["status"], "pending", "{a}");
        let id = a["id"].as_str().unwrap();
        let (s, a) = approve(&http, base, &op, id, json!({})).await;
        assert_eq!(s, 200, "{a}");
        assert_eq!(a["status"], "pending", "{a}");
    });
}

/// A key's decision may say it came through the page or the CLI, but not
/// through a chat: that channel is recorded for people and stated in
/// receipts, and only a chat identity's decisions come through it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_cannot_claim_a_chat_channel_for_its_decision() {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team(json!([{"pattern": "tool:deploy:.*", "count": 2}])).await;
    let op = person_key(&http, &d.base, &admin, "op").await;
    let id = pending(&http, &d.base, &agent, "deploy", "prod").await;
    let resp = http
        .post(format!("{}/v1/actions/{id}/approve", d.base))
        .bearer_auth(&op)
        .header("x-actiongate-channel", "telegram")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let p: Value = resp.json().await.unwrap();
    assert_eq!(status, 422, "{p}");
    assert_eq!(p["errors"][0]["field"], "channel", "{p}");
    let a = get(&http, &d.base, &admin, &id).await;
    assert!(a.get("approvals").is_none(), "{a}");
    // The page is a key's channel.
    let resp = http
        .post(format!("{}/v1/actions/{id}/approve", d.base))
        .bearer_auth(&op)
        .header("x-actiongate-channel", "page")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let a: Value = resp.json().await.unwrap();
    assert_eq!(a["approvals"][0]["channel"], "page", "{a}");
}

/// An approvals rule over a shell tool governs a command line with one of
/// its commands in it, as deny and allow patterns judge every simple
/// command: an agent cannot shed a quorum by putting another command
/// first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approvals_rule_governs_a_command_line_that_hides_its_command_after_another() {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team(json!([
        {"pattern": "tool:bash:rm .*", "count": 2, "approvers": ["group:ops"]}
    ]))
    .await;
    let (op, op_id) = named_operator(&http, &d.base, &admin, "ann-key").await;
    let (intern, _) = named_operator(&http, &d.base, &admin, "intern").await;
    person(
        &http,
        &d.base,
        &admin,
        json!({"name": "ann", "groups": ["ops"], "keys": [op_id]}),
    )
    .await;
    let line = std::fs::read_to_string(crate::teams::fixture("hidden_rm.txt")).unwrap();
    let id = pending(&http, &d.base, &agent, "bash", line.trim()).await;
    let (s, p) = approve(&http, &d.base, &intern, &id, json!({})).await;
    assert_eq!(s, 403, "{p}");
    let (s, a) = approve(&http, &d.base, &op, &id, json!({})).await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    assert_eq!(a["approvals_required"], 2, "{a}");
}

/// "Approve and remember" is a person's decision like any approval: the
/// action records who and through which channel, and lists the approval.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_and_remember_records_the_person_and_channel_that_decided() {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team(json!([])).await;
    let (ann, ann_id) = named_operator(&http, &d.base, &admin, "ann-key").await;
    person(
        &http,
        &d.base,
        &admin,
        json!({"name": "ann", "groups": ["release"], "keys": [ann_id]}),
    )
    .await;
    let id = pending(&http, &d.base, &agent, "deploy", "staging").await;
    let (s, a) = approve(
        &http,
        &d.base,
        &ann,
        &id,
        json!({"remember": {"expires": "1h"}}),
    )
    .await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["status"], "approved", "{a}");
    for a in [a.clone(), get(&http, &d.base, &admin, &id).await] {
        assert_eq!(a["decided_person"], "ann", "{a}");
        assert_eq!(a["decided_channel"], "api", "{a}");
        let approvals = a["approvals"].as_array().unwrap();
        assert_eq!(approvals.len(), 1, "{a}");
        assert_eq!(approvals[0]["who"], "ann", "{a}");
    }
    d.stop();
}

/// A profile whose approvals rule needs more people than may approve it
/// is kept, with a warning saying so: its actions could never be approved
/// (only people count toward a quorum). The warning goes once there are
/// enough people among the rule's approvers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_no_one_could_meet_is_warned_of_when_the_profile_is_set() {
    let Team {
        d,
        http,
        admin,
        dir: _dir,
        ..
    } = team(json!([])).await;
    let rules = json!([
        {"pattern": "tool:deploy:.*", "count": 2, "approvers": ["group:sre"]},
        {"pattern": "tool:db:.*", "count": 1, "approvers": ["group:dba"]}
    ]);
    let put = || {
        call(
            &http,
            Method::PUT,
            format!("{}/v1/agents/bot", d.base),
            &admin,
            Some(json!({"profile": profile(rules.clone())})),
        )
    };
    let (s, a) = put().await;
    assert_eq!(s, 200, "{a}");
    let warnings = a["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{a}");
    let w = warnings[0].as_str().unwrap();
    assert!(
        w.contains("approvals rule #0") && w.contains("needs 2") && w.contains("but 0 of"),
        "{w}"
    );
    // Kept all the same.
    let (_, got) = call(
        &http,
        Method::GET,
        format!("{}/v1/agents/bot", d.base),
        &admin,
        None,
    )
    .await;
    assert_eq!(got["profile"]["approvals"][0]["count"], 2, "{got}");
    assert!(got.get("warnings").is_none(), "{got}");

    // One person of the group, and one outside it: still short.
    for (name, group) in [("ann", "sre"), ("bob", "web")] {
        let (s, p) = call(
            &http,
            Method::POST,
            format!("{}/v1/people", d.base),
            &admin,
            Some(json!({"name": name, "groups": [group]})),
        )
        .await;
        assert_eq!(s, 201, "{p}");
    }
    let (_, a) = put().await;
    assert!(
        a["warnings"][0].as_str().unwrap().contains("but 1 of"),
        "{a}"
    );
    let (s, p) = call(
        &http,
        Method::POST,
        format!("{}/v1/people", d.base),
        &admin,
        Some(json!({"name": "cho", "groups": ["sre"]})),
    )
    .await;
    assert_eq!(s, 201, "{p}");
    let (s, a) = put().await;
    assert_eq!(s, 200, "{a}");
    assert!(a.get("warnings").is_none(), "{a}");
}

/// A handler action's `approvals` is warned of as a profile's rule is:
/// registering or replacing the handler keeps it and says its actions
/// could never be approved while too few people may approve them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_actions_quorum_no_one_could_meet_is_warned_of() {
    let Team {
        d,
        http,
        admin,
        dir: _dir,
        ..
    } = team(json!([])).await;
    let handler = json!({
        "id": "deploy", "name": "Deploy", "url": "http://127.0.0.1:9/hook",
        "permissions": [{"name": "deploy.run",
            "parameters_schema": {"type": "object", "properties": {}}}],
        "actions": [
            {"name": "prod", "permission": "deploy.run",
             "params_schema": {"type": "object"},
             "approvals": {"count": 2, "approvers": ["group:sre"]}},
            {"name": "staging", "permission": "deploy.run",
             "params_schema": {"type": "object"}, "approvals": {"count": 1}}
        ]
    });
    let (s, h) = call(
        &http,
        Method::POST,
        format!("{}/v1/handlers", d.base),
        &admin,
        Some(handler.clone()),
    )
    .await;
    assert_eq!(s, 201, "{h}");
    assert!(h["secret"].as_str().is_some(), "{h}");
    let warnings = h["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{h}");
    let w = warnings[0].as_str().unwrap();
    assert!(
        w.contains("handler action 'prod'") && w.contains("needs 2") && w.contains("but 0 of"),
        "{w}"
    );
    // Kept all the same; reading it warns of nothing.
    let (_, got) = call(
        &http,
        Method::GET,
        format!("{}/v1/handlers/deploy", d.base),
        &admin,
        None,
    )
    .await;
    assert_eq!(got["actions"][0]["approvals"]["count"], 2, "{got}");
    assert!(got.get("warnings").is_none(), "{got}");

    let put = || {
        call(
            &http,
            Method::PUT,
            format!("{}/v1/handlers/deploy", d.base),
            &admin,
            Some(handler.clone()),
        )
    };
    let (s, h) = put().await;
    assert_eq!(s, 200, "{h}");
    assert!(
        h["warnings"][0].as_str().unwrap().contains("but 0 of"),
        "{h}"
    );
    for name in ["ann", "bob"] {
        let (s, p) = call(
            &http,
            Method::POST,
            format!("{}/v1/people", d.base),
            &admin,
            Some(json!({"name": name, "groups": ["sre"]})),
        )
        .await;
        assert_eq!(s, 201, "{p}");
    }
    let (s, h) = put().await;
    assert_eq!(s, 200, "{h}");
    assert!(h.get("warnings").is_none(), "{h}");
}
