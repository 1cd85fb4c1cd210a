//! A revoked grant allows nothing once its revocation is committed, on
//! every daemon. A daemon on Postgres caches grants until it reads a grant
//! event (another daemon's as soon as its notification arrives) or for at
//! most a second; a revocation whose notification is late must still not
//! let an action its grant covered be allowed.
//!
//! The revocation here is written to the database directly, as another
//! daemon's would be before its notification is read: the daemon under
//! test has the grant cached and hears nothing of the change.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, agent_key, role_key};
use crate::common::pg_cluster::Cluster;
use crate::common::{call, client};

async fn act(http: &reqwest::Client, base: &str, key: &str, body: Value) -> Value {
    let (s, a) = call(
        http,
        Method::POST,
        format!("{base}/v1/actions"),
        key,
        Some(body),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    a
}

/// A grant (for every session, or for one) revoked behind the daemon's
/// back: the next action it covered asks, every time, however warm the
/// daemon's cache of grants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_revoked_on_another_daemon_allows_nothing_after_its_commit() {
    let Some(cluster) = Cluster::shared() else {
        return;
    };
    let url = cluster.database();
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[("ACTIONGATE_STORAGE__DATABASE_URL", &url)]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "coder").await;
    let op = role_key(&http, &d.base, &admin, "operator").await;
    for (round, session) in [None, Some("task-1")]
        .into_iter()
        .cycle()
        .take(8)
        .enumerate()
    {
        let detail = format!("make target{round}");
        let mut grant = json!({"tool": "bash", "pattern": format!("^{detail}$"),
                               "expires": "1h", "agent": "coder"});
        let mut body = json!({"tool": "bash", "detail": detail, "timeout": "10m"});
        if let Some(s) = session {
            grant["session"] = json!(s);
            body["session"] = json!(s);
        }
        let (s, g) = call(
            &http,
            Method::POST,
            format!("{}/v1/grants", d.base),
            &op,
            Some(grant),
        )
        .await;
        assert_eq!(s, 201, "{g}");
        // The grant allows, and is now in the daemon's cache.
        let a = act(&http, &d.base, &agent, body.clone()).await;
        assert_eq!(a["status"], "approved", "round {round}: {a}");
        let id = g["id"].as_str().unwrap();
        let revoke = format!(
            "UPDATE grants SET revoked_at = (extract(epoch from now()) * 1000)::bigint \
             WHERE id = '{id}'"
        );
        cluster.psql_at(&url, &revoke).unwrap();
        let a = act(&http, &d.base, &agent, body).await;
        assert_eq!(
            a["status"], "pending",
            "round {round}: allowed by grant {id} after its revocation was committed: {a}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    d.stop();
}

/// Another grant of the same agent and tool lapsing (revoked behind the
/// daemon's back, still in its cache) changes nothing for an action that
/// a live grant allows: the action rests on the grant that allowed it, not
/// on every grant of the list. A review saw approved plan steps and
/// session grants asked after an unrelated grant expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrelated_grant_lapsing_does_not_turn_an_allowed_action_into_a_question() {
    let Some(cluster) = Cluster::shared() else {
        return;
    };
    let url = cluster.database();
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[("ACTIONGATE_STORAGE__DATABASE_URL", &url)]);
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "coder").await;
    let op = role_key(&http, &d.base, &admin, "operator").await;
    let grant = |body: Value| {
        let (http, base, op) = (http.clone(), d.base.clone(), op.clone());
        async move {
            let (s, g) = call(
                &http,
                Method::POST,
                format!("{base}/v1/grants"),
                &op,
                Some(body),
            )
            .await;
            assert_eq!(s, 201, "{g}");
            g["id"].as_str().unwrap().to_owned()
        }
    };
    let session = grant(
        json!({"tool": "bash", "pattern": "make ship", "agent": "coder",
                               "session": "task-9", "expires": "1h"}),
    )
    .await;
    for round in 0..4 {
        let other = grant(
            json!({"tool": "bash", "pattern": format!("unrelated{round} .*"),
                                 "agent": "coder", "expires": "1h"}),
        )
        .await;
        let body = json!({"tool": "bash", "detail": "make ship", "session": "task-9",
                          "timeout": "10m"});
        let a = act(&http, &d.base, &agent, body.clone()).await;
        assert_eq!(a["status"], "approved", "round {round}: {a}");
        let revoke = format!(
            "UPDATE grants SET revoked_at = (extract(epoch from now()) * 1000)::bigint \
             WHERE id = '{other}'"
        );
        cluster.psql_at(&url, &revoke).unwrap();
        let a = act(&http, &d.base, &agent, body).await;
        assert_eq!(
            a["status"], "approved",
            "round {round}: grant {other} lapsing made the action of grant {session} ask: {a}"
        );
    }
    d.stop();
}

/// An operator's or an admin's key revoked through one daemon is refused
/// by another at once, however recently that one used it: it decides,
/// grants and makes keys (a review approved an `rm -rf` and made a new
/// admin key with keys revoked a moment before on another daemon).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operators_key_revoked_on_one_daemon_is_refused_by_another_at_once() {
    let Some(cluster) = Cluster::shared() else {
        return;
    };
    let url = cluster.database();
    let (one, two) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let a = Daemon::start(one.path(), &[("ACTIONGATE_STORAGE__DATABASE_URL", &url)]);
    let b = Daemon::start(two.path(), &[("ACTIONGATE_STORAGE__DATABASE_URL", &url)]);
    let http = client();
    let admin = a.admin_key();
    let agent = agent_key(&http, &a.base, &admin, "coder").await;
    for role in ["operator", "admin"] {
        let (s, k) = call(
            &http,
            Method::POST,
            format!("{}/v1/keys", a.base),
            &admin,
            Some(json!({"role": role})),
        )
        .await;
        assert_eq!(s, 201, "{k}");
        let (key, id) = (k["key"].as_str().unwrap(), k["id"].as_str().unwrap());
        let pending = act(
            &http,
            &b.base,
            &agent,
            json!({"tool": "deploy", "detail": "prod"}),
        )
        .await;
        // The other daemon knows the key: it answered it just now.
        let (s, _) = call(
            &http,
            Method::GET,
            format!("{}/v1/whoami", b.base),
            key,
            None,
        )
        .await;
        assert_eq!(s, 200);
        let (s, r) = call(
            &http,
            Method::DELETE,
            format!("{}/v1/keys/{id}", a.base),
            &admin,
            None,
        )
        .await;
        assert_eq!(s, 200, "{r}");
        let id = pending["id"].as_str().unwrap();
        let (s, r) = call(
            &http,
            Method::POST,
            format!("{}/v1/actions/{id}/approve", b.base),
            key,
            Some(json!({})),
        )
        .await;
        assert_eq!(s, 401, "{role}: {r}");
    }
}
