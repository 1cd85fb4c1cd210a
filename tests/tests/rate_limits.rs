//! Black-box tests of profile rate limits (`max_per_hour`, `rule_limits`):
//! past a limit an action that would be allowed is asked, with a reason
//! naming the limit; concurrent requests never overshoot, on SQLite and on
//! two daemons sharing Postgres; a limit naming no allow pattern is a 422.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use futures::StreamExt;
use serde_json::{Value, json};

use crate::common;
use common::daemon::{Daemon, agent_key, set_profile};
use common::pg_cluster::Cluster;
use common::{call, client};

fn profile() -> Value {
    json!({"allow": ["tool:echo:.*", "tool:bash:ls.*"], "ask": [],
           "max_per_hour": 20,
           "rule_limits": [{"pattern": "tool:bash:ls.*", "max_per_hour": 3}]})
}

/// Sends every body at once (32 in flight), spread over `bases`; each
/// answer's decision result and reason.
async fn burst(bases: &[String], key: &str, bodies: Vec<Value>) -> Vec<(String, String)> {
    let http = client();
    futures::stream::iter(bodies.into_iter().enumerate())
        .map(|(i, b)| {
            let (http, url, key) = (
                http.clone(),
                format!("{}/v1/actions", bases[i % bases.len()]),
                key.to_owned(),
            );
            async move {
                let (s, a) = call(&http, reqwest::Method::POST, url, &key, Some(b)).await;
                assert_eq!(s, 201, "{a}");
                (
                    a["decision"]["result"].as_str().unwrap().to_owned(),
                    a["decision"]["reason"].as_str().unwrap().to_owned(),
                )
            }
        })
        .buffer_unordered(32)
        .collect()
        .await
}

async fn check_limits(bases: Vec<String>, admin: &str) {
    let http = client();
    let bot = agent_key(&http, &bases[0], admin, "bot").await;
    set_profile(&http, &bases[0], admin, "bot", profile()).await;
    // The rule's limit: 3 of 8 concurrent `ls` allowed, the rest asked.
    let ls: Vec<Value> = (0..8)
        .map(|i| json!({"tool": "bash", "detail": format!("ls {i}")}))
        .collect();
    let got = burst(&bases, &bot, ls).await;
    let allowed = got.iter().filter(|(r, _)| r == "allow").count();
    assert_eq!(allowed, 3, "{got:?}");
    let asked: Vec<_> = got.iter().filter(|(r, _)| r == "ask").collect();
    assert_eq!(asked.len(), 5, "{got:?}");
    assert!(
        asked[0].1.contains("max_per_hour of rule `tool:bash:ls.*`"),
        "{}",
        asked[0].1
    );
    // Dry runs (check) take no slot: under the limit they say allow, and
    // the 17 slots left below are all still there.
    for _ in 0..5 {
        assert_eq!(check_echo(&bases[0], &bot).await["result"], "allow");
    }
    // The agent's limit (20, 3 used): 17 of 40 concurrent echoes allowed.
    let echo: Vec<Value> = (0..40)
        .map(|i| json!({"tool": "echo", "detail": format!("{i}")}))
        .collect();
    let got = burst(&bases, &bot, echo).await;
    assert_eq!(
        got.iter().filter(|(r, _)| r == "allow").count(),
        17,
        "{got:?}"
    );
    let asked: Vec<_> = got.iter().filter(|(r, _)| r == "ask").collect();
    assert_eq!(asked.len(), 23);
    assert!(
        asked[0].1.contains("the agent's max_per_hour (20 an hour)"),
        "{}",
        asked[0].1
    );
    // Asked, not dropped: they wait for a human, and the event says why.
    let (_, page) = call(
        &http,
        reqwest::Method::GET,
        format!("{}/v1/actions?agent=bot&status=pending&limit=200", bases[0]),
        admin,
        None,
    )
    .await;
    assert_eq!(page["items"].as_array().unwrap().len(), 28);
    // Past the limit a dry run answers what the action would get: ask,
    // saying which limit, on every daemon.
    for base in &bases {
        let c = check_echo(base, &bot).await;
        assert_eq!(c["result"], "ask", "{c}");
        assert!(
            c["reason"]
                .as_str()
                .unwrap()
                .contains("the agent's max_per_hour (20 an hour)"),
            "{c}"
        );
    }
}

/// `POST /v1/check` of an echo as `key`: its answer.
async fn check_echo(base: &str, key: &str) -> Value {
    let (s, c) = call(
        &client(),
        reqwest::Method::POST,
        format!("{base}/v1/check"),
        key,
        Some(json!({"tool": "echo", "detail": "x"})),
    )
    .await;
    assert_eq!(s, 200, "{c}");
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_per_hour_actions_are_asked_and_never_overshoot() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    check_limits(vec![d.base.clone()], &d.admin_key()).await;

    // A limit naming no allow pattern, or zero: 422 naming the field.
    let http = client();
    let admin = d.admin_key();
    let (s, b) = call(
        &http,
        reqwest::Method::PUT,
        format!("{}/v1/agents/x", d.base),
        &admin,
        Some(
            json!({"profile": {"allow": ["tool:echo:.*"], "ask": [], "max_per_hour": 0,
            "rule_limits": [{"pattern": "tool:bash:.*", "max_per_hour": 2}]}}),
        ),
    )
    .await;
    assert_eq!(s, 422, "{b}");
    let fields: Vec<&str> = b["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(
        fields,
        ["profile.max_per_hour", "profile.rule_limits[0].pattern"],
        "{b}"
    );
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_daemons_on_postgres_share_the_counts() {
    let Some(cluster) = Cluster::shared() else {
        return;
    };
    let url = cluster.database();
    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let a = Daemon::start(
        dirs[0].path(),
        &[("ACTIONGATE_STORAGE__DATABASE_URL", url.as_str())],
    );
    let b = Daemon::start(
        dirs[1].path(),
        &[("ACTIONGATE_STORAGE__DATABASE_URL", url.as_str())],
    );
    check_limits(vec![a.base.clone(), b.base.clone()], &a.admin_key()).await;
    a.stop();
    b.stop();
}
