//! Black-box tests of approvals for teams (`docs/teams.md`) on the real
//! binary: people, quorum (also racing, on SQLite here and on Postgres
//! with two daemons), approver rules, edits before approving, escalation.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::audit::export;
use crate::common::daemon::{Daemon, agent_key, set_profile};
use crate::common::pg_cluster::Cluster;
use crate::common::{call, client};

/// A new operator key named `name`; its secret and id.
pub(crate) async fn named_operator(
    http: &reqwest::Client,
    base: &str,
    admin: &str,
    name: &str,
) -> (String, String) {
    let (s, k) = call(
        http,
        Method::POST,
        format!("{base}/v1/keys"),
        admin,
        Some(json!({"role": "operator", "name": name})),
    )
    .await;
    assert_eq!(s, 201, "{k}");
    (
        k["key"].as_str().unwrap().to_owned(),
        k["id"].as_str().unwrap().to_owned(),
    )
}

/// A new operator key that is person `name`'s (only people count toward
/// a quorum); the key.
pub(crate) async fn person_key(
    http: &reqwest::Client,
    base: &str,
    admin: &str,
    name: &str,
) -> String {
    let (key, id) = named_operator(http, base, admin, &format!("{name}-key")).await;
    let (s, p) = call(
        http,
        Method::POST,
        format!("{base}/v1/people"),
        admin,
        Some(json!({"name": name, "keys": [id]})),
    )
    .await;
    assert_eq!(s, 201, "{p}");
    key
}

/// A profile asking for everything, with `approvals` rules.
pub(crate) fn profile(approvals: Value) -> Value {
    json!({"allow": [], "ask": ["(?s).*"], "deny": ["tool:bash:rm -rf.*"], "approvals": approvals})
}

/// A daemon on SQLite whose agent `bot` has [`profile`]`(approvals)`.
pub(crate) struct Team {
    pub(crate) d: Daemon,
    pub(crate) http: reqwest::Client,
    pub(crate) admin: String,
    /// `bot`'s key.
    pub(crate) agent: String,
    /// The daemon's data; removed when dropped.
    pub(crate) dir: tempfile::TempDir,
}

/// Starts a [`Team`] with `approvals` rules.
pub(crate) async fn team(approvals: Value) -> Team {
    team_on(approvals, &[]).await
}

/// [`team`] with the daemon's environment `env` (a Postgres URL, say).
pub(crate) async fn team_on(approvals: Value, env: &[(&str, &str)]) -> Team {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), env);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(&http, &d.base, &admin, "bot", profile(approvals)).await;
    Team {
        d,
        http,
        admin,
        agent,
        dir,
    }
}

pub(crate) async fn pending(
    http: &reqwest::Client,
    base: &str,
    agent: &str,
    tool: &str,
    detail: &str,
) -> String {
    let (s, a) = call(
        http,
        Method::POST,
        format!("{base}/v1/actions"),
        agent,
        Some(json!({"tool": tool, "detail": detail, "timeout": "10m"})),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    a["id"].as_str().unwrap().to_owned()
}

pub(crate) async fn approve(
    http: &reqwest::Client,
    base: &str,
    key: &str,
    id: &str,
    body: Value,
) -> (u16, Value) {
    call(
        http,
        Method::POST,
        format!("{base}/v1/actions/{id}/approve"),
        key,
        Some(body),
    )
    .await
}

pub(crate) async fn get(http: &reqwest::Client, base: &str, key: &str, id: &str) -> Value {
    let (s, a) = call(
        http,
        Method::GET,
        format!("{base}/v1/actions/{id}"),
        key,
        None,
    )
    .await;
    assert_eq!(s, 200, "{a}");
    a
}

/// Event types the audit log holds about action `id`, in order.
pub(crate) async fn events_of(
    http: &reqwest::Client,
    base: &str,
    admin: &str,
    id: &str,
) -> Vec<String> {
    export(http, base, admin)
        .await
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["action_id"] == id || e["data"]["id"] == id)
        .map(|e| e["type"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_are_kept_by_admins_and_each_identity_is_one_persons() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let (op, op_id) = named_operator(&http, &d.base, &admin, "ann-laptop").await;
    let url = format!("{}/v1/people", d.base);
    let body = json!({"name": "ann", "groups": ["dba"], "keys": [op_id],
        "chat": {"telegram": "1001", "slack": "U0ANN"}});
    // Operators do not keep people.
    let (s, p) = call(&http, Method::POST, url.clone(), &op, Some(body.clone())).await;
    assert_eq!(s, 403, "{p}");
    let (s, ann) = call(&http, Method::POST, url.clone(), &admin, Some(body)).await;
    assert_eq!(s, 201, "{ann}");
    assert_eq!(ann["groups"], json!(["dba"]));
    let id = ann["id"].as_str().unwrap();
    // Another person cannot take ann's telegram id, nor her name.
    let (s, p) = call(
        &http,
        Method::POST,
        url.clone(),
        &admin,
        Some(json!({"name": "bob", "chat": {"telegram": "1001"}})),
    )
    .await;
    assert_eq!(s, 409, "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("telegram:1001"),
        "{p}"
    );
    let (s, p) = call(
        &http,
        Method::POST,
        url.clone(),
        &admin,
        Some(json!({"name": "ann"})),
    )
    .await;
    assert_eq!(s, 409, "{p}");
    // Bad fields are named, and nothing is stored.
    let (s, p) = call(
        &http,
        Method::POST,
        url.clone(),
        &admin,
        Some(json!({"name": "carl", "chat": {"whatsapp": "+1 555"}})),
    )
    .await;
    assert_eq!(s, 422, "{p}");
    assert_eq!(p["errors"][0]["field"], "chat.whatsapp", "{p}");
    let (s, p) = call(
        &http,
        Method::POST,
        url.clone(),
        &admin,
        Some(json!({"name": "carl", "keys": ["key_0000000000000000"]})),
    )
    .await;
    assert_eq!(s, 422, "{p}");
    assert_eq!(p["errors"][0]["field"], "keys[0]", "{p}");
    let (_, carl_id) = named_operator(&http, &d.base, &admin, "carl-laptop").await;
    let (s, p) = call(
        &http,
        Method::POST,
        url.clone(),
        &admin,
        Some(json!({"name": "carl", "keys": [carl_id, carl_id]})),
    )
    .await;
    assert_eq!(s, 422, "{p}");
    assert_eq!(p["errors"][0]["field"], "keys[1]", "{p}");
    let (s, list) = call(&http, Method::GET, url.clone(), &admin, None).await;
    assert_eq!(s, 200, "{list}");
    assert_eq!(list["items"].as_array().unwrap().len(), 1, "{list}");
    // Replace, read, delete.
    let (s, p) = call(
        &http,
        Method::PUT,
        format!("{url}/{id}"),
        &admin,
        Some(json!({"name": "ann", "groups": ["dba", "release"]})),
    )
    .await;
    assert_eq!(s, 200, "{p}");
    assert_eq!(p["keys"], json!([]));
    let (s, p) = call(&http, Method::GET, format!("{url}/{id}"), &admin, None).await;
    assert_eq!(s, 200, "{p}");
    assert_eq!(p["groups"], json!(["dba", "release"]));
    let (s, _) = call(&http, Method::DELETE, format!("{url}/{id}"), &admin, None).await;
    assert_eq!(s, 204);
    let (s, p) = call(&http, Method::GET, format!("{url}/{id}"), &admin, None).await;
    assert_eq!(s, 404, "{p}");
    // Her telegram id is free again.
    let (s, p) = call(
        &http,
        Method::POST,
        url,
        &admin,
        Some(json!({"name": "bob", "chat": {"telegram": "1001"}})),
    )
    .await;
    assert_eq!(s, 201, "{p}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_of_two_needs_two_people_and_one_person_counts_once_across_channels() {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team(json!([{"pattern": "tool:deploy:prod.*", "count": 2}])).await;
    let (ann_page, ann_page_id) = named_operator(&http, &d.base, &admin, "ann-page").await;
    let (ann_cli, ann_cli_id) = named_operator(&http, &d.base, &admin, "ann-cli").await;
    let (bob, bob_id) = named_operator(&http, &d.base, &admin, "bob-key").await;
    let (s, p) = call(
        &http,
        Method::POST,
        format!("{}/v1/people", d.base),
        &admin,
        Some(json!({"name": "ann", "keys": [ann_page_id, ann_cli_id]})),
    )
    .await;
    assert_eq!(s, 201, "{p}");

    let id = pending(&http, &d.base, &agent, "deploy", "prod eu").await;
    // Ann through the page: 200, still pending, 1 of 2.
    let resp = http
        .post(format!("{}/v1/actions/{id}/approve", d.base))
        .bearer_auth(&ann_page)
        .header("x-actiongate-channel", "page")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let a: Value = resp.json().await.unwrap();
    assert_eq!(a["status"], "pending", "{a}");
    assert_eq!(a["approvals_required"], 2, "{a}");
    assert_eq!(a["approvals"][0]["who"], "ann", "{a}");
    assert_eq!(a["approvals"][0]["channel"], "page", "{a}");
    // Ann again through another key of hers: the same person, 409.
    let (s, p) = approve(&http, &d.base, &ann_cli, &id, json!({})).await;
    assert_eq!(s, 409, "{p}");
    assert_eq!(
        get(&http, &d.base, &admin, &id).await["approvals"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    // Bob's key is nobody's: it might be Ann's second key for all the
    // daemon knows, so it does not count toward the quorum (403, nothing
    // changes) until an admin makes it a person's.
    let (s, p) = approve(&http, &d.base, &bob, &id, json!({})).await;
    assert_eq!(s, 403, "{p}");
    let detail = p["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("key:{bob_id} belongs to no person")),
        "{p}"
    );
    assert!(detail.contains("POST /v1/people"), "{p}");
    let a = get(&http, &d.base, &admin, &id).await;
    assert_eq!(a["status"], "pending", "{a}");
    assert_eq!(a["approvals"].as_array().unwrap().len(), 1, "{a}");
    let (s, p) = call(
        &http,
        Method::POST,
        format!("{}/v1/people", d.base),
        &admin,
        Some(json!({"name": "bob", "keys": [bob_id]})),
    )
    .await;
    assert_eq!(s, 201, "{p}");
    let (s, a) = approve(&http, &d.base, &bob, &id, json!({})).await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["status"], "approved", "{a}");
    assert_eq!(a["approvals"].as_array().unwrap().len(), 2, "{a}");
    assert_eq!(a["approvals"][1]["who"], "bob", "{a}");
    assert_eq!(a["approvals"][1]["by"], format!("key:{bob_id}"), "{a}");
    assert_eq!(a["decided_channel"], "api", "{a}");
    let events = events_of(&http, &d.base, &admin, &id).await;
    assert_eq!(
        events,
        ["action.enqueued", "action.approval", "action.approved"],
        "{events:?}"
    );

    // One deny ends it, whatever approvals came before; a denial fails
    // safe, so a key of nobody's may make it.
    let (carol, _) = named_operator(&http, &d.base, &admin, "carol-key").await;
    let id = pending(&http, &d.base, &agent, "deploy", "prod us").await;
    let (s, _) = approve(&http, &d.base, &ann_page, &id, json!({})).await;
    assert_eq!(s, 200);
    let (s, a) = call(
        &http,
        Method::POST,
        format!("{}/v1/actions/{id}/deny", d.base),
        &carol,
        Some(json!({"reason": "not today"})),
    )
    .await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["status"], "denied", "{a}");
    let (s, p) = approve(&http, &d.base, &bob, &id, json!({})).await;
    assert_eq!(s, 409, "{p}");

    // Actions no rule covers need one approval, as before.
    let id = pending(&http, &d.base, &agent, "deploy", "staging").await;
    let (s, a) = approve(&http, &d.base, &bob, &id, json!({})).await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["status"], "approved", "{a}");
    // A quorum cannot be skipped by approve-and-remember.
    let id = pending(&http, &d.base, &agent, "deploy", "prod ap").await;
    let (s, p) = approve(
        &http,
        &d.base,
        &bob,
        &id,
        json!({"remember": {"expires": "1h"}}),
    )
    .await;
    assert_eq!(s, 409, "{p}");
    assert_eq!(get(&http, &d.base, &admin, &id).await["status"], "pending");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_racing_are_counted_once_each_and_settle_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    race(std::slice::from_ref(&d.base), &d.admin_key()).await;
}

#[test]
fn approvals_racing_on_two_daemons_are_counted_once_each_and_settle_once() {
    let Some(cluster) = Cluster::shared() else {
        return;
    };
    let url = cluster.database();
    let mut dirs = Vec::new();
    let mut nodes = Vec::new();
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        nodes.push(Daemon::start(
            dir.path(),
            &[("ACTIONGATE_STORAGE__DATABASE_URL", url.as_str())],
        ));
        dirs.push(dir);
    }
    let bases: Vec<String> = nodes.iter().map(|n| n.base.clone()).collect();
    let admin = nodes[0].admin_key();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(race(&bases, &admin));
}

/// Three distinct operators race to approve actions that need two; the
/// same operator races with itself. `bases`: the daemons, taken in turn.
async fn race(bases: &[String], admin: &str) {
    let http = client();
    let b0 = &bases[0];
    let agent = agent_key(&http, b0, admin, "racer").await;
    set_profile(
        &http,
        b0,
        admin,
        "racer",
        profile(json!([{"pattern": "tool:deploy:.*", "count": 2}])),
    )
    .await;
    let mut ops = Vec::new();
    for i in 0..3 {
        ops.push(person_key(&http, b0, admin, &format!("op{i}")).await);
    }
    // Profiles are cached for a second on each daemon.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    for round in 0..10 {
        let id = pending(
            &http,
            &bases[round % bases.len()],
            &agent,
            "deploy",
            &format!("r{round}"),
        )
        .await;
        let calls = ops.iter().enumerate().map(|(i, op)| {
            let http = http.clone();
            let base = bases[i % bases.len()].clone();
            let id = id.clone();
            let op = op.clone();
            async move { approve(&http, &base, &op, &id, json!({})).await }
        });
        let answers = futures::future::join_all(calls).await;
        let ok: Vec<&Value> = answers
            .iter()
            .filter(|(s, _)| *s == 200)
            .map(|(_, a)| a)
            .collect();
        let refused = answers.iter().filter(|(s, _)| *s == 409).count();
        // Two count, the third finds it settled.
        assert_eq!((ok.len(), refused), (2, 1), "{answers:?}");
        let a = get(&http, b0, admin, &id).await;
        assert_eq!(a["status"], "approved", "{a}");
        assert_eq!(a["approvals"].as_array().unwrap().len(), 2, "{a}");
        // Another daemon's commits reach this one's log view within a second.
        let deadline = Instant::now() + Duration::from_secs(10);
        let events = loop {
            let events = events_of(&http, b0, admin, &id).await;
            if events.len() >= 3 || Instant::now() > deadline {
                break events;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert_eq!(
            events.iter().filter(|e| *e == "action.approved").count(),
            1,
            "{events:?}"
        );
        assert_eq!(
            events.iter().filter(|e| *e == "action.approval").count(),
            1,
            "{events:?}"
        );
    }
    // One operator twice at once: one approval, and each answer is the
    // action with it (the second is that approval sent again).
    let id = pending(&http, b0, &agent, "deploy", "twice").await;
    let calls = (0..2).map(|i| {
        let http = http.clone();
        let base = bases[i % bases.len()].clone();
        let id = id.clone();
        let op = ops[0].clone();
        async move { approve(&http, &base, &op, &id, json!({})).await }
    });
    let answers = futures::future::join_all(calls).await;
    let mut codes: Vec<u16> = answers.iter().map(|(s, _)| *s).collect();
    codes.sort_unstable();
    assert_eq!(codes, [200, 200], "{answers:?}");
    let a = get(&http, b0, admin, &id).await;
    assert_eq!(a["status"], "pending", "{a}");
    assert_eq!(a["approvals"].as_array().unwrap().len(), 1, "{a}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn someone_outside_the_approver_rule_gets_403_naming_it_and_changes_nothing() {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team(json!([
        {"pattern": "tool:sql:.*", "count": 1, "approvers": ["release-*", "group:dba"]}
    ]))
    .await;
    let (outsider, _) = named_operator(&http, &d.base, &admin, "intern").await;
    let (release, _) = named_operator(&http, &d.base, &admin, "release-bot").await;
    let (dba_key, dba_id) = named_operator(&http, &d.base, &admin, "laptop").await;
    let (s, p) = call(
        &http,
        Method::POST,
        format!("{}/v1/people", d.base),
        &admin,
        Some(json!({"name": "dora", "groups": ["dba"], "keys": [dba_id]})),
    )
    .await;
    assert_eq!(s, 201, "{p}");

    let id = pending(&http, &d.base, &agent, "sql", "DROP TABLE t").await;
    for (verb, body) in [
        ("approve", json!({})),
        ("deny", json!({})),
        ("reply", json!({"text": "yes"})),
    ] {
        let resp = http
            .post(format!("{}/v1/actions/{id}/{verb}", d.base))
            .bearer_auth(&outsider)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 403, "{verb}");
        assert_eq!(
            resp.headers()["content-type"].to_str().unwrap(),
            "application/problem+json"
        );
        let p: Value = resp.json().await.unwrap();
        let detail = p["detail"].as_str().unwrap();
        assert!(
            detail.contains("approvals rule #0") && detail.contains("release-*"),
            "{p}"
        );
    }
    let a = get(&http, &d.base, &admin, &id).await;
    assert_eq!(a["status"], "pending", "{a}");
    assert!(a.get("approvals").is_none(), "{a}");
    // A key whose name matches the glob, and a person in the group, may.
    let (s, a) = approve(&http, &d.base, &release, &id, json!({})).await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["status"], "approved", "{a}");
    let id = pending(&http, &d.base, &agent, "sql", "VACUUM").await;
    let (s, a) = approve(&http, &d.base, &dba_key, &id, json!({})).await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["decided_person"], "dora", "{a}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_edits_the_detail_before_approving() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(&http, &d.base, &admin, "bot", profile(json!([]))).await;
    let (op, _) = named_operator(&http, &d.base, &admin, "op").await;
    let id = pending(&http, &d.base, &agent, "bash", "rm -r build").await;
    // An edit the profile denies is refused with 422; still pending.
    let bad = std::fs::read_to_string(fixture("denied_detail.txt")).unwrap();
    let (s, p) = approve(&http, &d.base, &op, &id, json!({"detail": bad.trim()})).await;
    assert_eq!(s, 422, "{p}");
    assert_eq!(p["errors"][0]["field"], "detail", "{p}");
    assert_eq!(get(&http, &d.base, &admin, &id).await["status"], "pending");
    // Params are for handler actions.
    let (s, p) = approve(&http, &d.base, &op, &id, json!({"params": {"x": 1}})).await;
    assert_eq!(s, 422, "{p}");
    assert_eq!(p["errors"][0]["field"], "params", "{p}");
    // A good edit: approved, and the action shows what was asked and approved.
    let (s, a) = approve(
        &http,
        &d.base,
        &op,
        &id,
        json!({"detail": "rm -r build/tmp"}),
    )
    .await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["status"], "approved", "{a}");
    assert_eq!(a["edited"], true, "{a}");
    assert_eq!(a["detail"], "rm -r build", "{a}");
    assert_eq!(a["approved_detail"], "rm -r build/tmp", "{a}");
    // The agent reads the same.
    let seen = get(&http, &d.base, &agent, &id).await;
    assert_eq!(seen["approved_detail"], "rm -r build/tmp", "{seen}");
    // The log records it.
    let log = export(&http, &d.base, &admin).await;
    assert!(log.contains("rm -r build/tmp"), "{log}");
}

pub(crate) fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/teams_fixtures")
        .join(name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_action_nobody_decides_is_escalated_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(&http, &d.base, &admin, "bot", profile(json!([
        {"pattern": "tool:deploy:.*", "count": 1, "escalate_after": "2s", "escalate_to": "oncall"}
    ]))).await;
    let id = pending(&http, &d.base, &agent, "deploy", "prod").await;
    let other = pending(&http, &d.base, &agent, "bash", "ls").await;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let a = get(&http, &d.base, &admin, &id).await;
        if a.get("escalated_at").is_some() {
            assert_eq!(a["status"], "pending", "{a}");
            break;
        }
        assert!(Instant::now() < deadline, "never escalated: {a}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let events = events_of(&http, &d.base, &admin, &id).await;
    assert_eq!(
        events,
        ["action.enqueued", "action.escalated"],
        "{events:?}"
    );
    // No rule, no escalation.
    assert!(
        get(&http, &d.base, &admin, &other)
            .await
            .get("escalated_at")
            .is_none()
    );
    // One asked once the sweep has read what was pending (and 30 s before
    // it reads it all again) is found among what was asked since.
    let later = pending(&http, &d.base, &agent, "deploy", "staging").await;
    let deadline = Instant::now() + Duration::from_secs(12);
    loop {
        let a = get(&http, &d.base, &admin, &later).await;
        if a.get("escalated_at").is_some() {
            break;
        }
        assert!(Instant::now() < deadline, "never escalated: {a}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_with_a_bad_approvals_rule_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    for (rule, field) in [
        (json!({"pattern": ".*", "count": 0}), "profile.approvals[1]"),
        (json!({"pattern": "(", "count": 2}), "profile.approvals[1]"),
        (
            json!({"pattern": ".*", "escalate_after": "soon"}),
            "profile.approvals[1]",
        ),
        (json!({"pattern": ".*", "who": "x"}), "profile"),
    ] {
        let ok = json!({"pattern": "tool:x:.*"});
        let (s, p) = call(
            &http,
            Method::PUT,
            format!("{}/v1/agents/bot", d.base),
            &admin,
            Some(json!({"profile": profile(json!([ok, rule]))})),
        )
        .await;
        assert_eq!(s, 422, "{rule}: {p}");
        assert_eq!(p["errors"][0]["field"], field, "{rule}: {p}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edited_params_reach_the_executor() {
    let dir = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("notes.txt"), "old\n").unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let (op, _) = named_operator(&http, &d.base, &admin, "op").await;
    let _executor =
        crate::common::executor::start_executor(root.path(), state.path(), &d.base, &admin, false);
    let (s, a) = call(
        &http,
        Method::POST,
        format!("{}/v1/actions", d.base),
        &agent,
        Some(json!({"handler": "fs", "action": "update_file", "params": {
            "filepath": "notes.txt", "content": "asked\n", "reason": "r"}})),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    let id = a["id"].as_str().unwrap().to_owned();
    // Params that break the schema: 422, still pending.
    let (s, p) = approve(
        &http,
        &d.base,
        &op,
        &id,
        json!({"params": {"filepath": "notes.txt", "content": 7, "reason": "r"}}),
    )
    .await;
    assert_eq!(s, 422, "{p}");
    assert_eq!(get(&http, &d.base, &admin, &id).await["status"], "pending");
    // A detail is for decision-only actions.
    let (s, p) = approve(&http, &d.base, &op, &id, json!({"detail": "x"})).await;
    assert_eq!(s, 422, "{p}");
    let (s, a) = approve(
        &http,
        &d.base,
        &op,
        &id,
        json!({"params": {"filepath": "notes.txt", "content": "approved\n", "reason": "r"}}),
    )
    .await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["edited"], true, "{a}");
    assert_eq!(a["params"]["content"], "asked\n", "{a}");
    assert_eq!(a["approved_params"]["content"], "approved\n", "{a}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let a = get(&http, &d.base, &agent, &id).await;
        if a["status"] == "completed" {
            break;
        }
        assert!(Instant::now() < deadline, "not run: {a}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(
        std::fs::read_to_string(root.path().join("notes.txt")).unwrap(),
        "approved\n"
    );
    // The action string approved is kept as rendered at the edit: an admin
    // registering the handler again with another template changes neither
    // the action nor its receipt.
    let asked = a["action_string"].as_str().unwrap().to_owned();
    assert_eq!(a["approved_action_string"], asked.as_str(), "{a}");
    let (s, h) = call(
        &http,
        Method::GET,
        format!("{}/v1/handlers/fs", d.base),
        &admin,
        None,
    )
    .await;
    assert_eq!(s, 200, "{h}");
    let mut reg = json!({});
    for k in [
        "id",
        "name",
        "description",
        "url",
        "timeout",
        "permissions",
        "actions",
    ] {
        if let Some(v) = h.get(k).filter(|v| !v.is_null()) {
            reg[k] = v.clone();
        }
    }
    for action in reg["actions"].as_array_mut().unwrap() {
        if action["name"] == "update_file" {
            action["detail"] = json!("overwrite {filepath}");
        }
    }
    let (s, h) = call(
        &http,
        Method::PUT,
        format!("{}/v1/handlers/fs", d.base),
        &admin,
        Some(reg),
    )
    .await;
    assert_eq!(s, 200, "{h}");
    let (s, r) = call(
        &http,
        Method::GET,
        format!("{}/v1/actions/{id}/receipt", d.base),
        &op,
        None,
    )
    .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["claims"]["action_string"], asked.as_str(), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_action_may_ask_for_a_quorum_at_registration() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let a1 = person_key(&http, &d.base, &admin, "a1").await;
    let a2 = person_key(&http, &d.base, &admin, "a2").await;
    let registration = |approvals: Value| {
        json!({
            "id": "pay", "name": "Payments", "url": "http://127.0.0.1:9/hook",
            "permissions": [{"name": "pay.send", "parameters_schema": {"type": "object"}}],
            "actions": [{"name": "send", "params_schema": {"type": "object",
                "properties": {"amount": {"type": "integer"}}}, "permission": "pay.send",
                "approvals": approvals}]
        })
    };
    let (s, p) = call(
        &http,
        Method::POST,
        format!("{}/v1/handlers", d.base),
        &admin,
        Some(registration(json!({"count": 0}))),
    )
    .await;
    assert_eq!(s, 422, "{p}");
    assert_eq!(p["errors"][0]["field"], "actions[0].approvals", "{p}");
    let (s, p) = call(
        &http,
        Method::POST,
        format!("{}/v1/handlers", d.base),
        &admin,
        Some(registration(json!({"count": 2}))),
    )
    .await;
    assert_eq!(s, 201, "{p}");
    let (s, a) = call(
        &http,
        Method::POST,
        format!("{}/v1/actions", d.base),
        &agent,
        Some(json!({"handler": "pay", "action": "send", "params": {"amount": 5}})),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    let id = a["id"].as_str().unwrap().to_owned();
    let (s, a) = approve(&http, &d.base, &a1, &id, json!({})).await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    assert_eq!(a["approvals_required"], 2, "{a}");
    let (s, a) = approve(&http, &d.base, &a2, &id, json!({})).await;
    assert_eq!(s, 200, "{a}");
    assert_ne!(a["status"], "pending", "{a}");
}

/// A grant one operator makes does not settle a pending action that an
/// approvals rule governs (it needs its count of people, or its
/// approvers); the action it does not govern is approved as before.
#[tokio::test]
async fn a_grant_does_not_settle_a_pending_action_an_approvals_rule_governs() {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team(json!([{"pattern": "tool:deploy:prod.*", "count": 2}])).await;
    let (op, _) = named_operator(&http, &d.base, &admin, "ann").await;
    let governed = pending(&http, &d.base, &agent, "deploy", "prod eu").await;
    let plain = pending(&http, &d.base, &agent, "deploy", "staging").await;
    let (s, g) = call(
        &http,
        Method::POST,
        format!("{}/v1/grants", d.base),
        &op,
        Some(json!({"tool": "deploy", "pattern": ".*", "expires": "1h", "agent": "bot"})),
    )
    .await;
    assert_eq!(s, 201, "{g}");
    assert_eq!(get(&http, &d.base, &op, &plain).await["status"], "approved");
    let a = get(&http, &d.base, &op, &governed).await;
    assert_eq!(a["status"], "pending", "{a}");
}
