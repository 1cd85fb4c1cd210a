//! Black-box test: when a daemon is killed while it sends an action to its
//! executor, another daemon on the database sends it again once the
//! attempt's lease lapses: the handler's timeout plus `lease_slack`, not
//! the longer `dispatch.default_timeout` of handlers that name none.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::daemon::{Daemon, agent_key, set_profile};
use crate::common::raw_http::{After, RawServer, answer};
use crate::common::{call, client, pg_cluster};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_senders_attempt_is_taken_over_once_its_own_lease_lapses() {
    let Some(cluster) = pg_cluster::Cluster::shared() else {
        return;
    };
    let url = cluster.database();
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("actiongate.toml");
    // The default timeout stays long (30 s); the handler's own is 3 s, so
    // its attempts are leased for 3 s + 2 s.
    std::fs::write(
        &config,
        "[dispatch]\nlease_slack = \"2s\"\nretry_schedule = [\"200ms\", \"1s\"]\n",
    )
    .unwrap();
    let env = [
        ("ACTIONGATE_STORAGE__DATABASE_URL", url.as_str()),
        ("ACTIONGATE_CONFIG", config.to_str().unwrap()),
    ];
    // The executor: the first attempt gets no answer (its sender dies
    // meanwhile), any later one succeeds.
    let exec = RawServer::start(|n, _| {
        if n == 1 {
            (Vec::new(), After::Stall(Duration::from_secs(60)))
        } else {
            (
                answer("200 OK", &[("content-type", "application/json")], "{}"),
                After::Close,
            )
        }
    })
    .await;

    let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let sender = Daemon::start(dirs[0].path(), &env);
    let other = Daemon::start(dirs[1].path(), &env);
    let c = client();
    let admin = sender.admin_key();
    let (s, h) = call(
        &c,
        reqwest::Method::POST,
        format!("{}/v1/handlers", sender.base),
        &admin,
        Some(json!({
            "id": "slow",
            "name": "Slow",
            "url": format!("{}/run", exec.base),
            "timeout": "3s",
            "permissions": [{"name": "use", "parameters_schema": {"type": "object"}}],
            "actions": [{"name": "go", "permission": "use",
                         "params_schema": {"type": "object"}}],
        })),
    )
    .await;
    assert_eq!(s, 201, "{h}");
    let runner = agent_key(&c, &sender.base, &admin, "runner").await;
    set_profile(
        &c,
        &sender.base,
        &admin,
        "runner",
        json!({"allow": ["tool:slow:.*"], "ask": []}),
    )
    .await;
    // Every daemon reads handlers afresh after at most a second.
    tokio::time::sleep(Duration::from_millis(1100)).await;

    // Allowed outright: the daemon that takes it sends it at once.
    let (s, a) = call(
        &c,
        reqwest::Method::POST,
        format!("{}/v1/actions", sender.base),
        &runner,
        Some(json!({"handler": "slow", "action": "go", "params": {}})),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    assert_eq!(a["status"], "running", "{a}");
    let id = a["id"].as_str().unwrap().to_owned();
    let claimed = Instant::now();
    while exec.requests().is_empty() {
        assert!(claimed.elapsed() < Duration::from_secs(5), "never sent");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(sender); // SIGKILL, mid-attempt

    // Lease 5 s from the claim; noticed within a second, retried after
    // 200 ms: settled well within 8 s of the claim.
    let settled = loop {
        let (s, a) = call(
            &c,
            reqwest::Method::GET,
            format!("{}/v1/actions/{id}", other.base),
            &runner,
            None,
        )
        .await;
        assert_eq!(s, 200, "{a}");
        if a["status"] == "completed" {
            break a;
        }
        assert!(
            claimed.elapsed() < Duration::from_secs(8),
            "not settled {:?} after the claim: {a}",
            claimed.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let took = claimed.elapsed();
    assert_eq!(exec.requests().len(), 2, "{settled}");
    let first: Value = exec.requests()[0].json();
    let second: Value = exec.requests()[1].json();
    assert_eq!(first["action_id"], second["action_id"]);
    eprintln!("taken over and settled {took:?} after the claim (lease 5 s)");
    other.stop();
}
