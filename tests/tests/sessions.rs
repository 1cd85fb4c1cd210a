//! Black-box tests of sessions (issue 33, docs/sessions.md): actions carry
//! the session and runtime they came from, on SQLite and on Postgres.

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, agent_key, role_key};
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
