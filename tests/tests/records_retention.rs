//! Black-box: `records.retention`. Records settled before its cutoff are
//! deleted (a denied and an approved action, an ended session, a revoked
//! and a used-up grant); what can still change stays, however old (a
//! pending action, an active session, an active grant, one with a use
//! left), and so do an ended session a pending action still belongs to and
//! an ended session that was tainted (its id used again is still tainted).
//! On SQLite and on Postgres.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, agent_key, files_handler, register_handler, role_key};
use crate::common::pg_cluster::Cluster;
use crate::common::{call, client};

const RETAIN: [(&str, &str); 2] = [
    ("ACTIONGATE_RECORDS__RETENTION", "2s"),
    ("ACTIONGATE_EVENTS__PRUNE_INTERVAL", "1s"),
];

async fn post(d: &Daemon, key: &str, path: &str, body: Value) -> Value {
    let (s, v) = call(
        &client(),
        Method::POST,
        format!("{}{path}", d.base),
        key,
        Some(body),
    )
    .await;
    assert!((200..300).contains(&s), "{path}: {s} {v}");
    v
}

async fn status_of(d: &Daemon, key: &str, path: &str) -> u16 {
    call(
        &client(),
        Method::GET,
        format!("{}{path}", d.base),
        key,
        None,
    )
    .await
    .0
}

async fn settled_records_go_and_live_ones_stay(d: &Daemon) {
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let op = role_key(&http, &d.base, &admin, "operator").await;
    // The default profile asks: each action is pending until decided.
    let action = |detail: &str, session: &str| json!({"tool": "deploy", "detail": detail, "session": session});
    let pending = post(d, &agent, "/v1/actions", action("a1", "s-live")).await;
    let denied = post(d, &agent, "/v1/actions", action("a2", "s-done")).await;
    let approved = post(d, &agent, "/v1/actions", action("a3", "s-done")).await;
    let id = |v: &Value| v["id"].as_str().unwrap().to_owned();
    post(
        d,
        &op,
        &format!("/v1/actions/{}/deny", id(&denied)),
        json!({}),
    )
    .await;
    post(
        d,
        &op,
        &format!("/v1/actions/{}/approve", id(&approved)),
        json!({}),
    )
    .await;
    post(d, &op, "/v1/sessions/s-done/end", json!({})).await;
    // Ended with an action still pending in it.
    let held = post(d, &agent, "/v1/actions", action("a4", "s-held")).await;
    post(d, &op, "/v1/sessions/s-held/end", json!({})).await;
    // Tainted by an approved fetch, then ended.
    let fetch =
        json!({"tool": "WebFetch", "detail": "https://example.test/", "session": "s-tainted"});
    let fetch = post(d, &agent, "/v1/actions", fetch).await;
    post(
        d,
        &op,
        &format!("/v1/actions/{}/approve", id(&fetch)),
        json!({}),
    )
    .await;
    post(d, &op, "/v1/sessions/s-tainted/end", json!({})).await;
    let grant = |pattern: &str| json!({"tool": "bash", "pattern": pattern, "agent": "bot", "expires": "1h"});
    let live_grant = post(d, &op, "/v1/grants", grant("^ls$")).await;
    let revoked = post(d, &op, "/v1/grants", grant("^pwd$")).await;
    let (s, _) = call(
        &http,
        Method::DELETE,
        format!("{}/v1/grants/{}", d.base, id(&revoked)),
        &op,
        None,
    )
    .await;
    assert!((200..300).contains(&s));
    // Count-limited, without expiry: one used up, one with a use left.
    let counted = |pattern: &str, uses: u32| json!({"tool": "deploy", "pattern": pattern, "agent": "bot", "uses": uses, "expires": "indefinite"});
    let spent = post(d, &op, "/v1/grants", counted("^w1$", 1)).await;
    let unspent = post(d, &op, "/v1/grants", counted("^w2$", 2)).await;
    // Asked but for the grants.
    for detail in ["w1", "w2"] {
        let run = json!({"tool": "deploy", "detail": detail});
        let done = post(d, &agent, "/v1/actions", run).await;
        assert_eq!(done["decision"]["result"], "allow", "{detail}: {done}");
    }
    let again = json!({"tool": "deploy", "detail": "w1"});
    let again = post(d, &agent, "/v1/actions", again).await;
    assert_eq!(again["decision"]["result"], "ask", "used up: {again}");

    let deadline = Instant::now() + Duration::from_secs(20);
    while status_of(d, &op, &format!("/v1/actions/{}", id(&denied))).await != 404 {
        assert!(Instant::now() < deadline, "the denied action was kept");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // One more round, so every kind had its turn.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    for (what, path, want) in [
        (
            "the approved action",
            format!("/v1/actions/{}", id(&approved)),
            404,
        ),
        ("the ended session", "/v1/sessions/s-done".to_owned(), 404),
        (
            "the revoked grant",
            format!("/v1/grants/{}", id(&revoked)),
            404,
        ),
        (
            "the pending action",
            format!("/v1/actions/{}", id(&pending)),
            200,
        ),
        ("the live session", "/v1/sessions/s-live".to_owned(), 200),
        (
            "the live grant",
            format!("/v1/grants/{}", id(&live_grant)),
            200,
        ),
        (
            "the used-up grant",
            format!("/v1/grants/{}", id(&spent)),
            404,
        ),
        (
            "the grant with a use left",
            format!("/v1/grants/{}", id(&unspent)),
            200,
        ),
        ("the fetch", format!("/v1/actions/{}", id(&fetch)), 404),
        (
            "the ended session of a pending action",
            "/v1/sessions/s-held".to_owned(),
            200,
        ),
        ("the held action", format!("/v1/actions/{}", id(&held)), 200),
    ] {
        assert_eq!(status_of(d, &op, &path).await, want, "{what}");
    }
    // The tainted session is kept with its taint, after its actions went.
    let (s, tainted) = call(
        &http,
        Method::GET,
        format!("{}/v1/sessions/s-tainted", d.base),
        &op,
        None,
    )
    .await;
    assert_eq!(s, 200, "the tainted session was deleted");
    assert!(tainted["tainted_by"].is_string(), "{tainted}");
    // The pending action can still be decided, the live grant still allows.
    let (s, a) = call(
        &http,
        Method::POST,
        format!("{}/v1/actions/{}/approve", d.base, id(&pending)),
        &op,
        Some(json!({})),
    )
    .await;
    assert_eq!((s, a["status"].as_str()), (200, Some("approved")), "{a}");
    let ls = post(
        d,
        &agent,
        "/v1/actions",
        json!({"tool": "bash", "detail": "ls"}),
    )
    .await;
    assert_eq!(ls["status"], "approved", "{ls}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settled_records_past_retention_are_deleted_and_live_ones_kept_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let mut env = RETAIN.to_vec();
    env.push(("ACTIONGATE_LOG", "info"));
    let d = Daemon::start(dir.path(), &env);
    settled_records_go_and_live_ones_stay(&d).await;
    let log = d.stderr_lines();
    assert!(
        log.iter()
            .any(|l| l.contains("pruned records past retention")),
        "nothing said what was pruned"
    );
    // A retention under a day is warned of at start.
    assert!(
        log.iter()
            .any(|l| l.contains("WARN") && l.contains("records.retention is under a day")),
        "no warning of a retention under a day"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settled_records_past_retention_are_deleted_and_live_ones_kept_on_postgres() {
    let Some(cluster) = Cluster::shared() else {
        return;
    };
    let url = cluster.database();
    let dir = tempfile::tempdir().unwrap();
    let mut env = RETAIN.to_vec();
    env.push(("ACTIONGATE_STORAGE__DATABASE_URL", &url));
    let d = Daemon::start(dir.path(), &env);
    settled_records_go_and_live_ones_stay(&d).await;
}

/// The ids of the items a listing answers.
async fn ids_at(d: &Daemon, key: &str, path: &str) -> Vec<String> {
    let (s, v) = call(
        &client(),
        Method::GET,
        format!("{}{path}", d.base),
        key,
        None,
    )
    .await;
    assert_eq!(s, 200, "{path}: {v}");
    v.as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect()
}

/// A client paging plans or grant requests goes on after retention
/// deleted the last item of its page: the id still places the page (ids
/// are made in time order), nothing is skipped or read twice, and a
/// cursor naming nothing ever made is still 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_goes_on_past_an_item_retention_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &RETAIN);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let op = role_key(&http, &d.base, &admin, "operator").await;
    register_handler(&http, &d.base, &admin, files_handler()).await;
    let id = |v: Value| v["id"].as_str().unwrap().to_owned();
    let mut plans = Vec::new();
    let mut requests = Vec::new();
    for n in 0..3 {
        let plan =
            json!({"session": "s-plans", "steps": [{"tool": "deploy", "detail": format!("p{n}")}]});
        plans.push(id(post(&d, &agent, "/v1/plans", plan).await));
        let ask = json!({"handler": "files", "permission": "fs.write", "reason": format!("r{n}")});
        requests.push(id(post(&d, &agent, "/v1/grant-requests", ask).await));
    }
    // The middle ones are decided, so retention deletes them.
    post(&d, &op, &format!("/v1/plans/{}/deny", plans[1]), json!({})).await;
    post(
        &d,
        &op,
        &format!("/v1/grant-requests/{}/deny", requests[1]),
        json!({}),
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    for path in [
        format!("/v1/plans/{}", plans[1]),
        format!("/v1/grant-requests/{}", requests[1]),
    ] {
        while status_of(&d, &op, &path).await != 404 {
            assert!(Instant::now() < deadline, "{path} was kept");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    for (list, ids) in [("/v1/plans", &plans), ("/v1/grant-requests", &requests)] {
        let newest = ids_at(&d, &op, &format!("{list}?limit=1&after={}", ids[1])).await;
        assert_eq!(newest, [ids[0].clone()], "{list}");
        let oldest = format!("{list}?order=oldest&limit=5&after={}", ids[1]);
        assert_eq!(ids_at(&d, &op, &oldest).await, [ids[2].clone()], "{list}");
        // After the oldest, newest first: an empty last page, not a 404.
        let end = format!("{list}?after={}", ids[0]);
        assert!(ids_at(&d, &op, &end).await.is_empty(), "{list}");
    }
    for path in [
        "/v1/plans?after=pln_nothing",
        "/v1/grant-requests?after=grq_nothing",
    ] {
        assert_eq!(status_of(&d, &op, path).await, 404, "{path}");
    }
}

/// `records.tainted_sessions`: an ended session that was tainted is kept
/// past `records.retention` (the shared test above), and deleted once its
/// own retention passed and its actions are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tainted_session_goes_after_its_own_retention() {
    let dir = tempfile::tempdir().unwrap();
    let mut env = RETAIN.to_vec();
    env.push(("ACTIONGATE_RECORDS__TAINTED_SESSIONS", "4s"));
    let d = Daemon::start(dir.path(), &env);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let op = role_key(&http, &d.base, &admin, "operator").await;
    let fetch =
        json!({"tool": "WebFetch", "detail": "https://example.test/", "session": "s-tainted"});
    let fetch = post(&d, &agent, "/v1/actions", fetch).await;
    let fetch = fetch["id"].as_str().unwrap().to_owned();
    post(&d, &op, &format!("/v1/actions/{fetch}/approve"), json!({})).await;
    post(&d, &op, "/v1/sessions/s-tainted/end", json!({})).await;
    let ended = Instant::now();
    let deadline = ended + Duration::from_secs(20);
    while status_of(&d, &op, "/v1/sessions/s-tainted").await != 404 {
        assert!(Instant::now() < deadline, "the tainted session was kept");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Measured from after the end call returned: a little less than 4 s.
    assert!(
        ended.elapsed() >= Duration::from_millis(3500),
        "deleted after {:?}, before its own retention",
        ended.elapsed()
    );
}
