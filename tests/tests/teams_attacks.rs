//! Black-box tests from a second adversarial review of approvals for teams
//! (`docs/teams.md`): what a second identity of one person, a key that is
//! nobody's, or an approver of other actions could slip past a quorum or
//! an approver rule.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, agent_key};
use crate::common::pg_cluster::Cluster;
use crate::common::{call, client};
use crate::teams::{
    Team, approve, events_of, get, named_operator, pending, profile, team, team_on,
};
use crate::teams_review::person;

/// Ann edits an action nobody's rule governed into one that needs two
/// release approvers; her second key, which is nobody's (and so no
/// release approver, and no person a quorum counts), approves "as edited"
/// at the same moment. Checked against the action as it was before the
/// edit (no rule: anyone, once), that approval must not complete the
/// quorum of the edited one: whatever the order, the action never ends
/// approved by Ann alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_second_key_racing_its_owners_edit_never_completes_the_edited_quorum() {
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
    let (spare, _) = named_operator(&http, &d.base, &admin, "ann-laptop").await;
    person(
        &http,
        &d.base,
        &admin,
        json!({"name": "ann", "groups": ["release"], "keys": [ann_id]}),
    )
    .await;
    for round in 0..25 {
        let id = pending(
            &http,
            &d.base,
            &agent,
            "deploy",
            &format!("staging {round}"),
        )
        .await;
        let url = format!("{}/v1/actions/{id}/approve", d.base);
        let edit = call(
            &http,
            Method::POST,
            url.clone(),
            &ann,
            Some(json!({"detail": format!("prod {round}")})),
        );
        let seconds = (0..6u64).map(|i| {
            let (http, url, spare) = (http.clone(), url.clone(), spare.clone());
            async move {
                tokio::time::sleep(Duration::from_millis(i)).await;
                call(
                    &http,
                    Method::POST,
                    url,
                    &spare,
                    Some(json!({"seen": "edited"})),
                )
                .await
            }
        });
        let ((se, e), answers) = tokio::join!(edit, futures::future::join_all(seconds));
        let a = get(&http, &d.base, &admin, &id).await;
        assert_ne!(
            a["status"], "approved",
            "round {round}: the edit ({se}: {e}) and ann's second key ({answers:?}) approved a \
             prod deploy that needs two release approvers: {a}"
        );
    }
}

/// The registration of handler `pay` (one action, `send`) with `approvals`
/// on it when given.
fn pay(approvals: Option<Value>) -> Value {
    let mut send = json!({"name": "send", "permission": "pay.send",
        "params_schema": {"type": "object", "properties": {"amount": {"type": "integer"}}}});
    if let Some(a) = approvals {
        send["approvals"] = a;
    }
    json!({
        "id": "pay", "name": "Payments", "url": "http://127.0.0.1:9/hook",
        "permissions": [{"name": "pay.send", "parameters_schema": {"type": "object"}}],
        "actions": [send]
    })
}

/// A handler action given `approvals` while one of its actions waits
/// governs that action at once (`docs/teams.md`: every decision applies
/// "whatever rule applies now", and a grant settles no pending action "its
/// handler action's `approvals`" govern). An operator outside its approvers
/// granting the permission must not settle it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_does_not_settle_a_waiting_action_whose_handler_action_gained_approvals() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    handler_gains_approvals(&d.base, &d.admin_key()).await;
}

/// The same on Postgres, whose grants settle pending actions by a code
/// path of their own.
#[test]
fn on_postgres_a_grant_does_not_settle_a_waiting_action_whose_handler_action_gained_approvals() {
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
        .block_on(handler_gains_approvals(&d.base, &admin));
}

/// The handler-gains-approvals case on the daemon at `base`.
async fn handler_gains_approvals(base: &str, admin: &str) {
    let http = client();
    let agent = agent_key(&http, base, admin, "bot").await;
    let (intern, _) = named_operator(&http, base, admin, "intern").await;
    let (s, p) = call(
        &http,
        Method::POST,
        format!("{base}/v1/handlers"),
        admin,
        Some(pay(None)),
    )
    .await;
    assert_eq!(s, 201, "{p}");
    let (s, a) = call(
        &http,
        Method::POST,
        format!("{base}/v1/actions"),
        &agent,
        Some(
            json!({"handler": "pay", "action": "send", "params": {"amount": 5},
            "timeout": "10m"}),
        ),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    let id = a["id"].as_str().unwrap().to_owned();
    let (s, p) = call(
        &http,
        Method::PUT,
        format!("{base}/v1/handlers/pay"),
        admin,
        Some(pay(Some(
            json!({"count": 2, "approvers": ["group:finance"]}),
        ))),
    )
    .await;
    assert_eq!(s, 200, "{p}");
    // The rule of now governs it: the intern may not approve it.
    let (s, p) = approve(&http, base, &intern, &id, json!({})).await;
    assert_eq!(s, 403, "{p}");
    // Nor settle it with a grant.
    let (s, g) = call(
        &http,
        Method::POST,
        format!("{base}/v1/grants"),
        &intern,
        Some(
            json!({"agent": "bot", "handler": "pay", "permission": "pay.send",
            "scope": {}, "expires": "1h"}),
        ),
    )
    .await;
    assert_eq!(s, 201, "{g}");
    let a = get(&http, base, admin, &id).await;
    assert_eq!(a["status"], "pending", "{a}");
}

/// A person renamed after approving is still the same person: their
/// other identity (a second key here; a chat account alike) approving
/// again gets 409 ("the same person again, through any key or chat"),
/// and the quorum of two is not met by one person.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_renamed_person_counts_once_through_another_identity() {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team(json!([{"pattern": "tool:deploy:.*", "count": 2}])).await;
    let (desk, desk_id) = named_operator(&http, &d.base, &admin, "ann-desk").await;
    let (laptop, laptop_id) = named_operator(&http, &d.base, &admin, "ann-laptop").await;
    let pid = person(
        &http,
        &d.base,
        &admin,
        json!({"name": "ann", "keys": [desk_id, laptop_id]}),
    )
    .await;
    let id = pending(&http, &d.base, &agent, "deploy", "prod").await;
    let (s, a) = approve(&http, &d.base, &desk, &id, json!({})).await;
    assert_eq!(s, 200, "{a}");
    let (s, p) = call(
        &http,
        Method::PUT,
        format!("{}/v1/people/{pid}", d.base),
        &admin,
        Some(json!({"name": "ann.smith", "keys": [desk_id, laptop_id]})),
    )
    .await;
    assert_eq!(s, 200, "{p}");
    let (s, p) = approve(&http, &d.base, &laptop, &id, json!({})).await;
    assert_eq!(s, 409, "{p}");
    let a = get(&http, &d.base, &admin, &id).await;
    assert_eq!(a["status"], "pending", "{a}");
    assert_eq!(a["approvals"].as_array().unwrap().len(), 1, "{a}");
}

/// An approvals rule over a shell tool governs a command line that buries
/// its command where deny patterns still find it (a substitution inside a
/// parameter default or an arithmetic expansion, `bash -c`, `eval`): as
/// deny and allow patterns judge every command, so does the rule. An agent
/// cannot shed a quorum of two ops people by burying `rm`: the intern
/// outside the rule's approvers gets 403 on each, and one approval by an
/// approver leaves each pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approvals_rule_governs_a_command_buried_where_deny_patterns_find_it() {
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
    let lines = std::fs::read_to_string(crate::teams::fixture("buried_rm.txt")).unwrap();
    for line in lines.lines() {
        let id = pending(&http, &d.base, &agent, "bash", line).await;
        let (s, p) = approve(&http, &d.base, &intern, &id, json!({})).await;
        assert_eq!(s, 403, "{line}: {p}");
        let (s, a) = approve(&http, &d.base, &op, &id, json!({})).await;
        assert_eq!(s, 200, "{line}: {a}");
        assert_eq!(a["status"], "pending", "{line}: {a}");
        assert_eq!(a["approvals_required"], 2, "{line}: {a}");
    }
}

/// A handler action that runs a command line (its scope's `command` ends
/// its detail, as the reference executor's `execute_command`) is judged
/// like a shell tool, command by command: so is it by an approvals rule.
/// An agent cannot shed a rule over `run rm …` by sending `cd x && rm -r
/// out`, nor by burying `rm`: the intern outside the rule's approvers gets
/// 403, and one ops approval leaves each line pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approvals_rule_governs_each_command_of_a_handler_command_line() {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team(json!([
        {"pattern": "tool:sh1:run rm .*", "count": 2, "approvers": ["group:ops"]}
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
    let (s, p) = call(
        &http,
        Method::POST,
        format!("{}/v1/handlers", d.base),
        &admin,
        Some(json!({
            "id": "sh1", "name": "Shell", "url": "http://127.0.0.1:9/hook",
            "permissions": [{"name": "shell.exec", "parameters_schema": {"type": "object",
                "properties": {"command": {"type": "string"}}}}],
            "actions": [{"name": "run", "permission": "shell.exec",
                "params_schema": {"type": "object", "properties": {"content": {"type": "string"}}},
                "scope": {"command": "/content"}, "detail": "run {content}"}]
        })),
    )
    .await;
    assert_eq!(s, 201, "{p}");
    let buried = std::fs::read_to_string(crate::teams::fixture("buried_rm.txt")).unwrap();
    for line in buried.lines().chain(["cd x && rm -r out"]) {
        let (s, a) = call(
            &http,
            Method::POST,
            format!("{}/v1/actions", d.base),
            &agent,
            Some(
                json!({"handler": "sh1", "action": "run", "params": {"content": line},
                "timeout": "10m"}),
            ),
        )
        .await;
        assert_eq!((s, &a["status"]), (201, &json!("pending")), "{line}: {a}");
        let id = a["id"].as_str().unwrap().to_owned();
        let (s, p) = approve(&http, &d.base, &intern, &id, json!({})).await;
        assert_eq!(s, 403, "{line}: {p}");
        let (s, a) = approve(&http, &d.base, &op, &id, json!({})).await;
        assert_eq!(s, 200, "{line}: {a}");
        assert_eq!(a["status"], "pending", "{line}: {a}");
        assert_eq!(a["approvals_required"], 2, "{line}: {a}");
    }
}

/// Person `name` of `group`, deciding with an operator key of their own:
/// the key, its id and the person's id.
async fn member(
    http: &reqwest::Client,
    base: &str,
    admin: &str,
    name: &str,
    group: &str,
) -> (String, String, String) {
    let (key, key_id) = named_operator(http, base, admin, &format!("{name}-key")).await;
    let body = json!({"name": name, "groups": [group], "keys": [key_id]});
    let pid = person(http, base, admin, body).await;
    (key, key_id, pid)
}

/// An approval counts toward a quorum only while its approver still may
/// give it: one whose person left the rule's group, whose person was
/// removed, or whose key was revoked (a stolen key, say) since approving
/// no longer counts when the next approval lands, so the quorum is never
/// met with an approval nobody could give now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_stops_counting_once_its_approver_could_not_give_it() {
    approvals_lapse(None).await;
}

/// The same on Postgres, whose decisions lock the action's row.
#[test]
fn on_postgres_an_approval_stops_counting_once_its_approver_could_not_give_it() {
    on_postgres(approvals_lapse);
}

/// Runs `case` against a daemon on a new database of the shared
/// Postgres cluster, given its URL (nothing without a cluster).
pub(crate) fn on_postgres<F: std::future::Future<Output = ()>>(case: fn(Option<String>) -> F) {
    let Some(cluster) = Cluster::shared() else {
        return;
    };
    let url = cluster.database();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(case(Some(url)));
}

/// The daemon's environment for a team on `database` (SQLite without).
pub(crate) fn database_env(database: &Option<String>) -> Vec<(&'static str, &str)> {
    database
        .iter()
        .map(|url| ("ACTIONGATE_STORAGE__DATABASE_URL", url.as_str()))
        .collect()
}

async fn approvals_lapse(database: Option<String>) {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team_on(
        json!([{"pattern": "tool:deploy:.*", "count": 2, "approvers": ["group:ops"]}]),
        &database_env(&database),
    )
    .await;
    let base = &d.base;
    let mut keys = Vec::new();
    let mut ids = Vec::new();
    for name in ["ann", "bob", "cat", "dan", "eve"] {
        let (key, key_id, pid) = member(&http, base, &admin, name, "ops").await;
        keys.push(key);
        ids.push((pid, key_id));
    }
    let cases: Vec<(&str, usize, usize, usize)> = vec![
        ("left the group", 0, 1, 2),
        ("was removed", 2, 3, 4),
        ("had the key revoked", 3, 4, 1),
    ];
    for (what, first, second, third) in cases {
        let id = pending(&http, base, &agent, "deploy", &format!("prod {what}")).await;
        let (s, a) = approve(&http, base, &keys[first], &id, json!({})).await;
        assert_eq!(s, 200, "{what}: {a}");
        let (pid, key_id) = &ids[first];
        unseat(&http, base, &admin, what, pid, key_id).await;
        let (s, a) = approve(&http, base, &keys[second], &id, json!({})).await;
        assert_eq!(s, 200, "{what}: {a}");
        assert_eq!(
            a["status"], "pending",
            "the first approver {what}, yet still counted: {a}"
        );
        let approvals = a["approvals"].as_array().unwrap();
        assert_eq!(approvals.len(), 1, "{what}: {a}");
        let (s, a) = approve(&http, base, &keys[third], &id, json!({})).await;
        assert_eq!(s, 200, "{what}: {a}");
        assert_eq!(a["status"], "approved", "{what}: {a}");
        assert_eq!(a["approvals"].as_array().unwrap().len(), 2, "{what}: {a}");
    }
}

/// Takes from the approver with person `pid` and key `key_id` what let
/// them approve: `what` says how.
async fn unseat(
    http: &reqwest::Client,
    base: &str,
    admin: &str,
    what: &str,
    pid: &str,
    key_id: &str,
) {
    let (method, url, body) = match what {
        "left the group" => (
            Method::PUT,
            format!("{base}/v1/people/{pid}"),
            Some(json!({"name": "ann", "groups": ["dev"], "keys": [key_id]})),
        ),
        "was removed" => (Method::DELETE, format!("{base}/v1/people/{pid}"), None),
        "had the key revoked" => (Method::DELETE, format!("{base}/v1/keys/{key_id}"), None),
        _ => (
            Method::PUT,
            format!("{base}/v1/agents/bot"),
            Some(json!({"profile": profile(json!([
                {"pattern": "tool:deploy:.*", "count": 2, "approvers": ["group:sec"]}
            ]))})),
        ),
    };
    let (s, b) = call(http, method, url, admin, body).await;
    assert!((200..300).contains(&s), "{what}: {s} {b}");
}

/// An approval that lapsed leaves the count shown at once, not only when
/// the next approval lands: within seconds of its approver leaving the
/// rule's group, being removed, having the key revoked, or the agent's
/// profile naming other approvers, the pending action shows it no more,
/// and an `action.approval` event says so (what chat cards and the page
/// follow).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_approval_leaves_the_count_shown_without_another_approval() {
    lapsed_leaves_the_count(None).await;
}

/// The same on Postgres.
#[test]
fn on_postgres_a_lapsed_approval_leaves_the_count_shown_without_another_approval() {
    on_postgres(lapsed_leaves_the_count);
}

async fn lapsed_leaves_the_count(database: Option<String>) {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team_on(
        json!([{"pattern": "tool:deploy:.*", "count": 2, "approvers": ["group:ops"]}]),
        &database_env(&database),
    )
    .await;
    let base = &d.base;
    let mut approvers = Vec::new();
    for name in ["ann", "bob", "cat", "dan"] {
        approvers.push(member(&http, base, &admin, name, "ops").await);
    }
    // The last case changes the profile: each case's approver is another.
    let cases = [
        "left the group",
        "was removed",
        "had the key revoked",
        "now names other approvers",
    ];
    for (what, (key, key_id, pid)) in cases.into_iter().zip(&approvers) {
        let id = pending(&http, base, &agent, "deploy", &format!("prod {what}")).await;
        let (s, a) = approve(&http, base, key, &id, json!({})).await;
        assert_eq!(s, 200, "{what}: {a}");
        assert_eq!(a["approvals"].as_array().unwrap().len(), 1, "{what}: {a}");
        unseat(&http, base, &admin, what, pid, key_id).await;
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let a = loop {
            let a = get(&http, base, &admin, &id).await;
            if a["approvals"].as_array().is_none_or(Vec::is_empty)
                || std::time::Instant::now() > deadline
            {
                break a;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(
            a["approvals"].as_array().map_or(0, Vec::len),
            0,
            "the approver {what}, yet the approval is still shown: {a}"
        );
        assert_eq!(a["status"], "pending", "{what}: {a}");
        // The lapse's event is committed with it, but on Postgres it is
        // published once the log's tail reads it: wait for it.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let events = loop {
            let events = events_of(&http, base, &admin, &id).await;
            let seen = events.iter().filter(|t| *t == "action.approval").count();
            if seen >= 2 || std::time::Instant::now() > deadline {
                break events;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        let approval_events = events.iter().filter(|t| *t == "action.approval").count();
        assert_eq!(
            approval_events, 2,
            "{what}: one approval, one lapse: {events:?}"
        );
    }
}

/// A command line is governed by every rule one of its commands falls
/// under, not only by the first rule any of them matches: an agent cannot
/// shed a quorum of two ops people over `rm` by putting an `ls`, whose
/// earlier rule anyone may approve alone, in front of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_looser_earlier_rule_does_not_govern_a_line_that_also_runs_a_stricter_rules_command() {
    rules_of_every_command(None).await;
}

/// The same on Postgres.
#[test]
fn on_postgres_a_looser_earlier_rule_does_not_govern_a_line_that_also_runs_a_stricter_one() {
    on_postgres(rules_of_every_command);
}

async fn rules_of_every_command(database: Option<String>) {
    let Team {
        d,
        http,
        admin,
        agent,
        dir: _dir,
    } = team_on(
        json!([
            {"pattern": "tool:bash:ls( .*)?", "count": 1},
            {"pattern": "tool:bash:rm .*", "count": 2, "approvers": ["group:ops"]}
        ]),
        &database_env(&database),
    )
    .await;
    let base = &d.base;
    let (intern, _) = named_operator(&http, base, &admin, "intern").await;
    let (ann, _, _) = member(&http, base, &admin, "ann", "ops").await;
    for line in ["ls; rm -r out", "ls && rm -r out", "ls $(rm -r out)"] {
        let id = pending(&http, base, &agent, "bash", line).await;
        let a = get(&http, base, &admin, &id).await;
        assert_eq!(a["approvals_required"], 2, "{line}: {a}");
        let (s, a) = approve(&http, base, &intern, &id, json!({})).await;
        assert_eq!(s, 403, "{line}: the intern is no ops approver: {a}");
        let (s, a) = approve(&http, base, &ann, &id, json!({})).await;
        assert_eq!(s, 200, "{line}: {a}");
        assert_eq!(a["status"], "pending", "{line}: one approval of two: {a}");
    }
}
