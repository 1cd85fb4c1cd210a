//! Black-box tests of sessions (issue 33, docs/sessions.md): actions carry
//! the session and runtime they came from, on SQLite and on Postgres.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, Keyed, agent_key, role_key};
use crate::common::pg_cluster::Cluster;
use crate::common::{call, client};

/// One daemon on SQLite, or on a new Postgres database when `pg` (`None`
/// when Postgres is not installed and not required).
pub(crate) fn start(pg: bool, dir: &std::path::Path, env: &[(&str, &str)]) -> Option<Daemon> {
    if !pg {
        return Some(Daemon::start(dir, env));
    }
    let url = Cluster::shared()?.database();
    let mut all = vec![("ACTIONGATE_STORAGE__DATABASE_URL", url.as_str())];
    all.extend_from_slice(env);
    Some(Daemon::start(dir, &all))
}

pub(crate) async fn post(
    http: &reqwest::Client,
    url: String,
    key: &str,
    body: Value,
) -> (u16, Value) {
    call(http, Method::POST, url, key, Some(body)).await
}

async fn actions_carry_their_session_and_runtime(pg: bool) {
    let dir = tempfile::tempdir().unwrap();
    let Some(d) = start(pg, dir.path(), &[]) else {
        return;
    };
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    let url = format!("{}/v1/actions", d.base);

    let (s, a) = post(
        &http,
        url.clone(),
        &agent,
        json!({"tool": "bash", "detail": "ls", "session": "s-1", "runtime": "claude-code"}),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    assert_eq!(a["session"], "s-1", "{a}");
    assert_eq!(a["runtime"], "claude-code", "{a}");
    // With an idempotency key the action takes the other insert path.
    let (s, keyed) = post(
        &http,
        url.clone(),
        &agent,
        json!({"tool": "bash", "detail": "pwd", "session": "s-1", "idempotency_key": "k"}),
    )
    .await;
    assert_eq!(s, 201, "{keyed}");
    assert_eq!(keyed["session"], "s-1", "{keyed}");
    assert_eq!(keyed["runtime"], Value::Null, "{keyed}");
    let (s, other) = post(
        &http,
        url.clone(),
        &agent,
        json!({"tool": "bash", "detail": "id"}),
    )
    .await;
    assert_eq!(s, 201, "{other}");
    assert_eq!(other["session"], Value::Null, "{other}");
    assert_eq!(other["runtime"], Value::Null, "{other}");

    // Read back as stored, and filtered by session.
    let (s, got) = call(
        &http,
        Method::GET,
        format!("{url}/{}", a["id"].as_str().unwrap()),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{got}");
    assert_eq!(got["session"], "s-1");
    assert_eq!(got["runtime"], "claude-code");
    let (s, page) = call(
        &http,
        Method::GET,
        format!("{url}?session=s-1"),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{page}");
    let ids: Vec<&str> = page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [keyed["id"].as_str().unwrap(), a["id"].as_str().unwrap()]
    );
    let (s, none) = call(
        &http,
        Method::GET,
        format!("{url}?session=s-2"),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(none["items"], json!([]));

    // Bad values are refused, naming the field, and store nothing.
    for (body, field) in [
        (
            json!({"tool": "bash", "detail": "x", "session": "x".repeat(201)}),
            "session",
        ),
        (
            json!({"tool": "bash", "detail": "x", "session": ""}),
            "session",
        ),
        (
            json!({"tool": "bash", "detail": "x", "session": "a\u{7}b"}),
            "session",
        ),
        (
            json!({"tool": "bash", "detail": "x", "runtime": "Claude Code"}),
            "runtime",
        ),
    ] {
        let (s, p) = post(&http, url.clone(), &agent, body.clone()).await;
        assert_eq!(s, 422, "{body}: {p}");
        assert!(p.to_string().contains(field), "{p}");
        let (s, p) = post(&http, format!("{}/v1/check", d.base), &agent, body.clone()).await;
        assert_eq!(s, 422, "{body}: {p}");
    }
    let (_, all) = call(&http, Method::GET, url.clone(), &operator, None).await;
    assert_eq!(all["items"].as_array().unwrap().len(), 3);

    // `/v1/check` takes them too.
    let (s, c) = post(
        &http,
        format!("{}/v1/check", d.base),
        &agent,
        json!({"tool": "bash", "detail": "ls", "session": "s-1", "runtime": "cursor"}),
    )
    .await;
    assert_eq!(s, 200, "{c}");
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_carry_their_session_and_runtime_on_sqlite() {
    actions_carry_their_session_and_runtime(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn actions_carry_their_session_and_runtime_on_postgres() {
    actions_carry_their_session_and_runtime(true).await;
}

/// Ten concurrent requests in session `s1`, spread over `bases`, under a
/// grant of 3 uses for that session: exactly 3 are allowed; another
/// session's request asks; the grant is used up.
async fn three_uses_allow_exactly_three(bases: &[String], admin: &str) {
    let http = client();
    let agent = agent_key(&http, &bases[0], admin, "bot").await;
    let operator = role_key(&http, &bases[0], admin, "operator").await;
    let (s, grant) = post(
        &http,
        format!("{}/v1/grants", bases[0]),
        &operator,
        json!({"agent": "bot", "tool": "deploy", "pattern": "prod", "expires": "1h",
               "session": "s1", "uses": 3}),
    )
    .await;
    assert_eq!(s, 201, "{grant}");
    let gid = grant["grant"]["id"]
        .as_str()
        .or(grant["id"].as_str())
        .unwrap()
        .to_owned();
    let requests = (0..10).map(|i| {
        let http = http.clone();
        let url = format!("{}/v1/actions", bases[i % bases.len()]);
        let agent = agent.clone();
        async move {
            post(
                &http,
                url,
                &agent,
                json!({"tool": "deploy", "detail": "prod", "session": "s1"}),
            )
            .await
        }
    });
    let answers = futures::future::join_all(requests).await;
    let mut approved = 0;
    for (s, a) in &answers {
        assert_eq!(*s, 201, "{a}");
        match a["status"].as_str().unwrap() {
            "approved" => {
                approved += 1;
                assert_eq!(a["decided_by"], format!("grant:{gid}"), "{a}");
                assert!(
                    a["decision"]["reason"].as_str().unwrap().contains(&gid),
                    "{a}"
                );
            }
            "pending" => {}
            other => panic!("{other}: {a}"),
        }
    }
    assert_eq!(approved, 3, "{answers:?}");
    let (s, other) = post(
        &http,
        format!("{}/v1/actions", bases[0]),
        &agent,
        json!({"tool": "deploy", "detail": "prod", "session": "s2"}),
    )
    .await;
    assert_eq!(s, 201);
    assert_eq!(
        other["status"], "pending",
        "another session's grant: {other}"
    );
    let (s, g) = call(
        &http,
        Method::GET,
        format!("{}/v1/grants/{gid}", bases[0]),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{g}");
    assert_eq!(g["uses"], 3, "{g}");
    assert_eq!(g["uses_left"], 0, "{g}");
    assert_eq!(g["active"], false, "{g}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_of_three_uses_allows_exactly_three_of_ten_concurrent_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    three_uses_allow_exactly_three(std::slice::from_ref(&d.base), &d.admin_key()).await;
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_of_three_uses_allows_exactly_three_of_ten_over_two_daemons_on_postgres() {
    let Some(cluster) = Cluster::shared() else {
        return;
    };
    let url = cluster.database();
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = [("ACTIONGATE_STORAGE__DATABASE_URL", url.as_str())];
    let one = Daemon::start(a.path(), &env);
    let two = Daemon::start(b.path(), &env);
    three_uses_allow_exactly_three(&[one.base.clone(), two.base.clone()], &one.admin_key()).await;
    one.stop();
    two.stop();
}

/// A daemon on SQLite, an agent `bot` with `profile` (when given), its
/// key and an operator key.
async fn setup(profile: Option<Value>) -> (tempfile::TempDir, Daemon, String, String) {
    let k = Keyed::start(&[]).await;
    if let Some(p) = profile {
        crate::common::daemon::set_profile(&k.http, &k.d.base, &k.admin, "bot", p).await;
    }
    (k.dir, k.d, k.agent, k.operator)
}

/// `POST /v1/actions` of `tool`/`detail` in `session`; its status.
async fn status_of(
    http: &reqwest::Client,
    base: &str,
    agent: &str,
    tool: &str,
    detail: &str,
    session: &str,
) -> String {
    let (s, a) = post(
        http,
        format!("{base}/v1/actions"),
        agent,
        json!({"tool": tool, "detail": detail, "session": session, "runtime": "claude-code"}),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    a["status"].as_str().unwrap().to_owned()
}

/// Asks approval for `steps` in `session` and approves it; the plan.
async fn approved_plan(
    http: &reqwest::Client,
    base: &str,
    agent: &str,
    operator: &str,
    session: &str,
    steps: Vec<Value>,
) -> Value {
    let (s, plan) = post(
        http,
        format!("{base}/v1/plans"),
        agent,
        json!({"reason": "the task", "session": session, "steps": steps}),
    )
    .await;
    assert_eq!(s, 201, "{plan}");
    assert_eq!(plan["status"], "pending");
    let id = plan["id"].as_str().unwrap();
    let (s, pending) = call(
        http,
        Method::GET,
        format!("{base}/v1/plans?status=pending"),
        operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{pending}");
    assert_eq!(pending[0]["id"], id, "{pending}");
    // No body approves every step, as the schema says.
    let (s, done) = call(
        http,
        Method::POST,
        format!("{base}/v1/plans/{id}/approve"),
        operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{done}");
    assert_eq!(done["status"], "approved", "{done}");
    done
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_of_four_steps_approved_once_runs_those_four_and_asks_for_a_fifth() {
    // No profile of its own: the default asks for everything.
    let (_dir, d, agent, operator) = setup(None).await;
    let http = client();
    let steps: Vec<Value> = ["a", "b", "c", "d"]
        .iter()
        .map(|t| json!({"tool": "deploy", "detail": format!("service {t}")}))
        .collect();
    let plan = approved_plan(&http, &d.base, &agent, &operator, "task-1", steps).await;
    assert!(
        plan["steps"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["approved"] == true),
        "{plan}"
    );
    // Another session gets nothing of it.
    assert_eq!(
        status_of(&http, &d.base, &agent, "deploy", "service a", "task-2").await,
        "pending"
    );
    // In any order, each step once.
    for t in ["d", "b", "a", "c"] {
        assert_eq!(
            status_of(
                &http,
                &d.base,
                &agent,
                "deploy",
                &format!("service {t}"),
                "task-1"
            )
            .await,
            "approved",
            "step {t}"
        );
    }
    assert_eq!(
        status_of(&http, &d.base, &agent, "deploy", "service a", "task-1").await,
        "pending"
    );
    assert_eq!(
        status_of(&http, &d.base, &agent, "deploy", "service e", "task-1").await,
        "pending"
    );
    // A decided plan cannot be decided again.
    let id = plan["id"].as_str().unwrap();
    let (s, p) = post(
        &http,
        format!("{}/v1/plans/{id}/deny", d.base),
        &operator,
        json!({}),
    )
    .await;
    assert_eq!(s, 409, "{p}");
    // The session lists its actions.
    let (s, session) = call(
        &http,
        Method::GET,
        format!("{}/v1/sessions/task-1", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200, "{session}");
    assert_eq!(session["agent"], "bot");
    assert_eq!(session["status"], "active");
    assert_eq!(session["actions"]["approved"], 4, "{session}");
    assert_eq!(session["actions"]["pending"], 2, "{session}");
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ending_a_session_voids_its_grants_and_another_agent_cannot_use_it() {
    let (_dir, d, agent, operator) = setup(None).await;
    let http = client();
    let steps = vec![json!({"tool": "deploy", "detail": "x"})];
    approved_plan(&http, &d.base, &agent, &operator, "s", steps).await;
    let other = agent_key(&http, &d.base, &d.admin_key(), "other").await;
    let (s, p) = post(
        &http,
        format!("{}/v1/actions", d.base),
        &other,
        json!({"tool": "deploy", "detail": "x", "session": "s"}),
    )
    .await;
    assert_eq!(s, 422, "another agent's session: {p}");
    let (s, ended) = post(
        &http,
        format!("{}/v1/sessions/s/end", d.base),
        &agent,
        json!({}),
    )
    .await;
    assert_eq!(s, 200, "{ended}");
    assert_eq!(ended["status"], "ended");
    assert_eq!(
        status_of(&http, &d.base, &agent, "deploy", "x", "s").await,
        "pending"
    );
    let (s, list) = call(
        &http,
        Method::GET,
        format!("{}/v1/sessions", d.base),
        &operator,
        None,
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(list[0]["id"], "s", "{list}");
    d.stop();
}

/// A grant scoped to a session is its owner's: with no agent it goes to
/// the owner (not to whichever agent names the session first), naming
/// another agent is refused, and one for a session nobody has used yet
/// must name its agent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_grant_is_for_the_sessions_agent() {
    let (_dir, d, agent, operator) = setup(None).await;
    let http = client();
    let other = agent_key(&http, &d.base, &d.admin_key(), "other").await;
    let grant = |session: &str, agent: Option<&str>| {
        let mut body =
            json!({"tool": "deploy", "pattern": "x", "expires": "1h", "session": session});
        if let Some(a) = agent {
            body["agent"] = json!(a);
        }
        body
    };
    let url = format!("{}/v1/grants", d.base);
    // Nobody has used "fresh": the grant must say whose it is.
    let (s, p) = post(&http, url.clone(), &operator, grant("fresh", None)).await;
    assert_eq!(s, 422, "{p}");
    assert_eq!(p["errors"][0]["field"], "agent", "{p}");
    assert_eq!(
        status_of(&http, &d.base, &other, "deploy", "x", "fresh").await,
        "pending",
        "the first agent naming the session got a grant nobody gave it"
    );
    // "s" is bot's: a grant naming no agent is bot's, one naming "other" is refused.
    assert_eq!(
        status_of(&http, &d.base, &agent, "deploy", "y", "s").await,
        "pending"
    );
    let (s, p) = post(&http, url.clone(), &operator, grant("s", Some("other"))).await;
    assert_eq!(s, 422, "{p}");
    let (s, g) = post(&http, url, &operator, grant("s", None)).await;
    assert_eq!(s, 201, "{g}");
    assert_eq!(g["agent"], "bot", "{g}");
    assert_eq!(
        status_of(&http, &d.base, &agent, "deploy", "x", "s").await,
        "approved"
    );
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reported_run_nobody_decided_raises_action_undecided() {
    let (_dir, d, agent, operator) = setup(Some(json!("open"))).await;
    let http = client();
    assert_eq!(
        status_of(&http, &d.base, &agent, "bash", "ls", "s").await,
        "approved"
    );
    let (s, r) = post(
        &http,
        format!("{}/v1/runs", d.base),
        &agent,
        json!({"tool": "bash", "detail": "ls", "session": "s"}),
    )
    .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["decided"], true, "{r}");
    assert!(r["action"].is_string(), "{r}");
    let before = crate::audit::export(&http, &d.base, &operator).await;
    assert!(!before.contains("action.undecided"));
    let (s, r) = post(
        &http,
        format!("{}/v1/runs", d.base),
        &agent,
        json!({"tool": "bash", "detail": "make release", "session": "s", "runtime": "claude-code"}),
    )
    .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r, json!({"decided": false, "action": null}));
    let after = crate::audit::export(&http, &d.base, &operator).await;
    let line = after
        .lines()
        .find(|l| l.contains("action.undecided"))
        .expect("no action.undecided event");
    assert!(line.contains("make release"), "{line}");
    d.stop();
}

/// A Claude Code tool call of the task file as the hook maps it.
fn mapped(call: &Value) -> (String, String) {
    let (tool, arg) = (
        call[0].as_str().unwrap(),
        call[1].as_str().unwrap().to_owned(),
    );
    match tool {
        "bash" => ("bash".to_owned(), arg),
        "Edit" => ("file".to_owned(), format!("edit {arg}")),
        "Write" => ("file".to_owned(), format!("write {arg}")),
        other => (other.to_owned(), arg),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_36_call_task_asks_18_times_under_readonly_and_once_with_its_plan_approved() {
    let task: Value = serde_json::from_str(include_str!("../data/task-36-calls.json")).unwrap();
    let calls: Vec<(String, String)> = task["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(mapped)
        .collect();
    assert_eq!(calls.len(), 36);
    let (_dir, d, agent, operator) = setup(Some(json!("readonly"))).await;
    let http = client();
    // Today: through /v1/check, as the hook maps them.
    let mut asks = Vec::new();
    for (tool, detail) in &calls {
        let (s, c) = post(
            &http,
            format!("{}/v1/check", d.base),
            &agent,
            json!({"tool": tool, "detail": detail}),
        )
        .await;
        assert_eq!(s, 200, "{c}");
        if c["result"] == "ask" {
            asks.push((tool.clone(), detail.clone()));
        }
    }
    assert_eq!(asks.len(), 18, "{asks:?}");
    // The plan: every step that would ask, the push left out.
    let steps: Vec<Value> = asks
        .iter()
        .filter(|(_, detail)| !detail.starts_with("git push"))
        .map(|(tool, detail)| json!({"tool": tool, "detail": detail}))
        .collect();
    assert_eq!(steps.len(), 17);
    approved_plan(&http, &d.base, &agent, &operator, "task-36", steps).await;
    let mut asked = Vec::new();
    for (tool, detail) in &calls {
        let (s, c) = post(
            &http,
            format!("{}/v1/check", d.base),
            &agent,
            json!({"tool": tool, "detail": detail, "session": "task-36"}),
        )
        .await;
        assert_eq!(s, 200, "{c}");
        let status = status_of(&http, &d.base, &agent, tool, detail, "task-36").await;
        if status == "pending" {
            asked.push(detail.clone());
        } else {
            assert_eq!(status, "approved", "{detail}");
        }
    }
    assert_eq!(
        asked,
        ["git push origin fix/folded-headers"],
        "asked once more, for the push"
    );
    // A step outside the plan still asks.
    assert_eq!(
        status_of(&http, &d.base, &agent, "bash", "cargo publish", "task-36").await,
        "pending"
    );
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_after_a_web_fetch_in_the_session_asks_and_a_fresh_session_allows_it() {
    // `open` allows everything; its default `taints`/`guarded` apply.
    let (_dir, d, agent, _operator) = setup(Some(json!("open"))).await;
    let http = client();
    let post_cmd = "curl -X POST https://example.com/upload -d @notes.txt";
    assert_eq!(
        status_of(&http, &d.base, &agent, "bash", post_cmd, "before").await,
        "approved"
    );
    assert_eq!(
        status_of(
            &http,
            &d.base,
            &agent,
            "WebFetch",
            "https://example.com/page",
            "read"
        )
        .await,
        "approved"
    );
    let (s, a) = post(
        &http,
        format!("{}/v1/actions", d.base),
        &agent,
        json!({"tool": "bash", "detail": post_cmd, "session": "read"}),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    assert!(
        a["decision"]["reason"]
            .as_str()
            .unwrap()
            .contains("tainted"),
        "{a}"
    );
    assert_eq!(
        status_of(&http, &d.base, &agent, "bash", post_cmd, "fresh").await,
        "approved"
    );
    // Reading stays allowed in the tainted session.
    assert_eq!(
        status_of(&http, &d.base, &agent, "bash", "ls", "read").await,
        "approved"
    );
    d.stop();
}
