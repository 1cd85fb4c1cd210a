//! Black-box test: memory from a burst of long-polls is given back. The
//! full measurement (10,000 polls, three rounds, release build) is
//! `bench/memory/run.sh`, with its figures in `bench/memory/README.md`;
//! this is the same in small (1,000 polls, three rounds, the test build):
//! after each burst closes, the idle RSS comes back down towards what it
//! was before it, instead of staying at the burst's peak (glibc's malloc
//! kept it all), and it does not ratchet up from round to round.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common;
use common::daemon::{Daemon, agent_key, set_profile};
use common::{call, client};

const POLLS: usize = 1000;

/// `actiongate_long_polls_waiting` from `/metrics`.
async fn waiting(http: &reqwest::Client, base: &str) -> usize {
    common::metric(http, base, "actiongate_long_polls_waiting").await as usize
}

/// Opens one long-poll per id, waits until the daemon holds them all,
/// reads the RSS, closes them, waits until the daemon let them all go;
/// the RSS with them open.
async fn burst(d: &Daemon, agent: &str, ids: &[String]) -> u64 {
    // One connection per poll, as separate clients would make them.
    let polls = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let tasks: Vec<_> = ids
        .iter()
        .map(|id| {
            let (polls, url, agent) = (
                polls.clone(),
                format!("{}/v1/actions/{id}?wait=60", d.base),
                agent.to_owned(),
            );
            tokio::spawn(async move {
                let _ = polls.get(url).bearer_auth(agent).send().await;
            })
        })
        .collect();
    let probe = client();
    let deadline = Instant::now() + Duration::from_secs(60);
    while waiting(&probe, &d.base).await < ids.len() {
        assert!(
            Instant::now() < deadline,
            "the long-polls did not all arrive"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let loaded = d.rss_kib();
    for t in &tasks {
        t.abort();
    }
    for t in tasks {
        let _ = t.await;
    }
    drop(polls);
    let deadline = Instant::now() + Duration::from_secs(60);
    while waiting(&probe, &d.base).await > 0 {
        assert!(Instant::now() < deadline, "closed long-polls stayed open");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    loaded
}

/// Waits (up to 40 s: the allocator purges on a timer) for the RSS to come
/// down to `target`; the RSS then.
async fn settle(d: &Daemon, target: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let rss = d.rss_kib();
        if rss <= target || Instant::now() > deadline {
            return rss;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_from_a_burst_of_long_polls_is_given_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        dir.path(),
        &[
            ("ACTIONGATE_LIMITS__MAX_PENDING_PER_AGENT", "100000"),
            ("ACTIONGATE_LIMITS__MAX_OPEN_PER_KEY", "100000"),
        ],
    );
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    set_profile(&http, &d.base, &admin, "bot", json!("guarded")).await;
    let mut ids = Vec::with_capacity(POLLS);
    for i in 0..POLLS {
        let (s, a) = call(
            &http,
            reqwest::Method::POST,
            format!("{}/v1/actions", d.base),
            &agent,
            Some(json!({"tool": "deploy", "detail": format!("service-{i}"), "timeout": "60m"})),
        )
        .await;
        assert_eq!(s, 201, "{a}");
        ids.push(a["id"].as_str().unwrap().to_owned());
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = d.rss_kib();
    let mut idles = Vec::new();
    let mut report = format!("before {before} KiB");
    for round in 1..=3 {
        let loaded = burst(&d, &agent, &ids).await;
        assert!(loaded > before, "the polls took no memory? {loaded} KiB");
        // Given back: at least a quarter of what the burst added (the
        // release build gives back nearly all of it, bench/memory; glibc's
        // malloc gave back nothing).
        let target = before + (loaded - before) * 3 / 4;
        let idle = settle(&d, target).await;
        report.push_str(&format!(
            "; round {round}: {loaded} KiB with polls, {idle} KiB idle"
        ));
        assert!(idle <= target, "memory was not given back: {report}");
        idles.push(idle);
    }
    let worst = *idles.iter().max().unwrap();
    assert!(
        worst as f64 <= idles[0] as f64 * 1.2 + 2048.0,
        "idle RSS ratchets up from burst to burst: {report}"
    );
    eprintln!("{report}");
    d.stop();
}
