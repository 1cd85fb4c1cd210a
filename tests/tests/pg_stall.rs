//! Black-box test: a stalled Postgres (its processes paused with SIGSTOP,
//! as a hung host or a silent network would leave it) under load. Every
//! request ends within `storage.connect_timeout + storage.statement_timeout`
//! of arriving, a write with 503 and `Retry-After`; `/readyz` answers 503
//! within a second; once Postgres resumes the daemon serves again by
//! itself, and retrying a refused write with its idempotency key stores it
//! once.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::client;
use crate::common::daemon::{Daemon, agent_key};
use crate::common::pg_cluster::{self, Cluster};

/// `storage.connect_timeout` + `storage.statement_timeout` below.
const BOUND: Duration = Duration::from_secs(3);
/// What HTTP and scheduling may add on this small shared machine.
const SLACK: Duration = Duration::from_millis(700);

/// The postmaster of `cluster` and every process it started.
fn server_pids(cluster: &Cluster) -> Vec<u32> {
    let pidfile = std::fs::read_to_string(cluster.dir().join("data/postmaster.pid")).unwrap();
    let master: u32 = pidfile.lines().next().unwrap().trim().parse().unwrap();
    let mut pids = vec![master];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; comm may hold spaces.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(master) {
            pids.push(pid);
        }
    }
    pids
}

fn signal(sig: &str, pids: &[u32]) {
    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
    let ok = Command::new("kill")
        .arg(sig)
        .args(&pids)
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill {sig} {pids:?}");
}

/// Resumes paused processes however the test ends: a cluster left paused
/// would outlive the run (its watchdog's stop cannot reach it).
struct Resume(Vec<u32>);

impl Drop for Resume {
    fn drop(&mut self) {
        let pids: Vec<String> = self.0.iter().map(u32::to_string).collect();
        let _ = Command::new("kill")
            .arg("-CONT")
            .args(&pids)
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// One write as the load made it.
struct Sent {
    key: String,
    at: Instant,
    took: Duration,
    status: u16,
    retry_after: bool,
}

/// A new action under idempotency key `key`; status 0 when no answer came.
async fn write(http: &reqwest::Client, base: &str, agent: &str, key: &str) -> (u16, bool, Value) {
    let sent = http
        .post(format!("{base}/v1/actions"))
        .bearer_auth(agent)
        .json(&json!({"tool": "deploy", "detail": key, "idempotency_key": key}))
        .send()
        .await;
    let resp = match sent {
        Ok(resp) => resp,
        Err(e) => return (0, false, Value::String(e.to_string())),
    };
    let status = resp.status().as_u16();
    let retry_after = resp.headers().contains_key("retry-after");
    (
        status,
        retry_after,
        resp.json().await.unwrap_or(Value::Null),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_postgres_is_503_within_the_bound_and_the_daemon_recovers() {
    // A cluster of its own: the test pauses it.
    // Durable: the server is stopped and started again, and an immediate
    // stop loses asynchronously committed work (the migrations among it).
    let cluster = match Cluster::start_durable() {
        Ok(c) => c,
        Err(e) if pg_cluster::required() => panic!("Postgres is required: {e}"),
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    let url = cluster.database();
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        dir.path(),
        &[
            ("ACTIONGATE_STORAGE__DATABASE_URL", url.as_str()),
            ("ACTIONGATE_STORAGE__CONNECT_TIMEOUT", "1s"),
            ("ACTIONGATE_STORAGE__STATEMENT_TIMEOUT", "2s"),
            // Every write waits for a human; the load makes well over the
            // default hundred.
            ("ACTIONGATE_LIMITS__MAX_PENDING_PER_AGENT", "100000"),
        ],
    );
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let (s, _, a) = write(&http, &d.base, &agent, "before").await;
    assert_eq!(s, 201, "{a}");

    // Load: four writers, one after another each.
    let stop = Arc::new(AtomicBool::new(false));
    let mut load = Vec::new();
    for w in 0..4 {
        let (http, base, agent, stop) = (http.clone(), d.base.clone(), agent.clone(), stop.clone());
        load.push(tokio::spawn(async move {
            let mut sent = Vec::new();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let key = format!("w{w}-{n}");
                let at = Instant::now();
                let (status, retry_after, _) = write(&http, &base, &agent, &key).await;
                sent.push(Sent {
                    key,
                    at,
                    took: at.elapsed(),
                    status,
                    retry_after,
                });
            }
            sent
        }));
    }
    tokio::time::sleep(Duration::from_millis(800)).await;

    let pids = server_pids(&cluster);
    let _resume = Resume(pids.clone());
    signal("-STOP", &pids);
    let stalled = Instant::now();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    // Readiness says so within a second, twice in a row.
    for _ in 0..2 {
        let asked = Instant::now();
        let r = http.get(format!("{}/readyz", d.base)).send().await.unwrap();
        let took = asked.elapsed();
        assert_eq!(r.status().as_u16(), 503);
        assert!(took < Duration::from_secs(1), "/readyz took {took:?}");
    }
    tokio::time::sleep(Duration::from_millis(4000)).await;
    signal("-CONT", &pids);
    let resumed = Instant::now();

    // The daemon serves again by itself.
    let mut back = None;
    while resumed.elapsed() < Duration::from_secs(20) {
        let (s, _, _) = write(&http, &d.base, &agent, "after").await;
        if s == 201 {
            back = Some(resumed.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let Some(back) = back else {
        panic!(
            "no write succeeded within 20 s of Postgres resuming: {:#?}",
            d.stderr_lines()
        );
    };
    stop.store(true, Ordering::Relaxed);
    let mut sent = Vec::new();
    for l in load {
        sent.extend(l.await.unwrap());
    }

    let mut refused = Vec::new();
    for s in &sent {
        assert!(
            s.took <= BOUND + SLACK,
            "{} answered {} after {:?}",
            s.key,
            s.status,
            s.took
        );
        // Sent and answered while Postgres was paused.
        let during = s.at > stalled + Duration::from_millis(100) && s.at + s.took < resumed;
        if during {
            assert_eq!(
                s.status,
                503,
                "{} during the stall: {:#?}",
                s.key,
                d.stderr_lines()
            );
        } else {
            assert!(
                matches!(s.status, 201 | 503),
                "{}: {} {:#?}",
                s.key,
                s.status,
                d.stderr_lines()
            );
        }
        if s.status == 503 {
            assert!(s.retry_after, "{}: 503 without Retry-After", s.key);
            refused.push(s.key.clone());
        }
    }
    assert!(refused.len() >= 4, "only {} refused writes", refused.len());

    // Each refused write, retried with its key, is stored exactly once:
    // the first retry stores it (201) or finds what a cut-off commit
    // stored (200); a second retry finds the same action.
    for key in &refused {
        let (s1, _, a1) = write(&http, &d.base, &agent, key).await;
        assert!(
            matches!(s1, 200 | 201),
            "{key}: {s1} {a1} {:#?}",
            d.stderr_lines()
        );
        let (s2, _, a2) = write(&http, &d.base, &agent, key).await;
        assert_eq!(s2, 200, "{key}: {a2}");
        assert_eq!(a1["id"], a2["id"], "{key}");
    }
    eprintln!(
        "{} writes, {} refused during a 5.5 s stall, longest {:?}; serving again {back:?} after resuming",
        sent.len(),
        refused.len(),
        sent.iter().map(|s| s.took).max().unwrap_or_default()
    );
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_answers_within_a_second_while_postgres_is_down() {
    // Durable: the server is stopped and started again, and an immediate
    // stop loses asynchronously committed work (the migrations among it).
    let cluster = match Cluster::start_durable() {
        Ok(c) => c,
        Err(e) if pg_cluster::required() => panic!("Postgres is required: {e}"),
        Err(e) => {
            eprintln!("skipped: {e}");
            return;
        }
    };
    let url = cluster.database();
    let dir = tempfile::tempdir().unwrap();
    // The default connect timeout (5 s), which a readiness probe must not
    // wait out.
    let d = Daemon::start(
        dir.path(),
        &[("ACTIONGATE_STORAGE__DATABASE_URL", url.as_str())],
    );
    let http = client();
    let ready = || async {
        let asked = Instant::now();
        let s = http
            .get(format!("{}/readyz", d.base))
            .send()
            .await
            .unwrap()
            .status()
            .as_u16();
        (s, asked.elapsed())
    };
    assert_eq!(ready().await.0, 200);
    cluster.stop_server().unwrap();
    for _ in 0..3 {
        let (s, took) = ready().await;
        assert_eq!(s, 503);
        assert!(took < Duration::from_secs(1), "/readyz took {took:?}");
    }
    cluster.start_server().unwrap();
    let back = Instant::now();
    while ready().await.0 != 200 {
        assert!(
            back.elapsed() < Duration::from_secs(20),
            "not ready 20 s after Postgres came back"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    d.stop();
}
