//! Black-box tests from a review of faults and limits on the endpoints of
//! sessions, plans and teams: a NUL in any text, a plan step too long to be
//! granted, the list an oversized profile is refused for, the first receipt
//! key under a held SQLite lock, and the cost of look-around patterns.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, agent_key, role_key, set_profile};
use crate::common::pg_cluster::Cluster;
use crate::common::{call, client};

async fn post(
    http: &reqwest::Client,
    base: &str,
    key: &str,
    path: &str,
    body: Value,
) -> (u16, Value) {
    call(http, Method::POST, format!("{base}{path}"), key, Some(body)).await
}

fn names_field(problem: &Value, field: &str) -> bool {
    problem["errors"]
        .as_array()
        .is_some_and(|e| e.iter().any(|x| x["field"] == field))
}

/// Every text holding U+0000 is refused naming its field, on SQLite and
/// on Postgres alike, and nothing is stored; an approver's edit holding
/// one does not slip past the profile's deny.
async fn nul_is_refused_naming_the_field(d: &Daemon) {
    let http = client();
    let base = &d.base;
    let admin = d.admin_key();
    let agent = agent_key(&http, base, &admin, "bot").await;
    let operator = role_key(&http, base, &admin, "operator").await;
    set_profile(
        &http,
        base,
        &admin,
        "bot",
        json!({"allow": [], "ask": ["tool:bash:.*"], "deny": ["tool:bash:rm -rf /.*"]}),
    )
    .await;
    let nul = "\u{0}";
    for (body, field) in [
        (
            json!({"tool": "bash", "detail": format!("make x{nul}; rm -rf /")}),
            "detail",
        ),
        (
            json!({"tool": "bash", "detail": "make", "reason": format!("r{nul}")}),
            "reason",
        ),
        (
            json!({"tool": "bash", "detail": "make", "params": {"a": [1, format!("x{nul}")]}}),
            "params.a[1]",
        ),
    ] {
        let (s, p) = post(&http, base, &agent, "/v1/actions", body).await;
        assert_eq!(s, 422, "{p}");
        assert!(names_field(&p, field), "{field}: {p}");
    }
    let (s, p) = post(
        &http,
        base,
        &agent,
        "/v1/plans",
        json!({"session": "s1", "steps": [{"tool": "bash", "detail": "make"},
                                           {"tool": "bash", "detail": format!("make{nul}")}]}),
    )
    .await;
    assert_eq!(s, 422, "{p}");
    assert!(names_field(&p, "steps[1].detail"), "{p}");

    let (s, a) = post(
        &http,
        base,
        &agent,
        "/v1/actions",
        json!({"tool": "bash", "detail": "make x"}),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    let id = a["id"].as_str().unwrap();
    let edit = json!({"detail": format!("make x{nul}; rm -rf /")});
    let (s, p) = post(
        &http,
        base,
        &operator,
        &format!("/v1/actions/{id}/approve"),
        edit,
    )
    .await;
    assert_eq!(s, 422, "{p}");
    assert!(names_field(&p, "detail"), "{p}");
    let (_, listed) = call(
        &http,
        Method::GET,
        format!("{base}/v1/actions"),
        &operator,
        None,
    )
    .await;
    let actions = listed["items"].as_array().unwrap();
    assert_eq!(actions.len(), 1, "{listed}");
    assert_eq!(actions[0]["status"], "pending", "{listed}");
    assert_eq!(actions[0]["detail"], "make x", "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_in_any_text_is_refused_naming_it_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    nul_is_refused_naming_the_field(&d).await;
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nul_in_any_text_is_refused_naming_it_on_postgres() {
    let Some(cluster) = Cluster::shared() else {
        return;
    };
    let url = cluster.database();
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        dir.path(),
        &[("ACTIONGATE_STORAGE__DATABASE_URL", url.as_str())],
    );
    nul_is_refused_naming_the_field(&d).await;
    d.stop();
}

/// Approving a plan grants each step's line as a pattern: a step too long
/// for one is refused when the plan is sent, naming it, not accepted and
/// then never approvable; "approve and remember" of such an action names
/// what to give instead of a field the caller never sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_too_long_for_a_grant_is_refused_where_it_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let base = &d.base;
    let admin = d.admin_key();
    let agent = agent_key(&http, base, &admin, "bot").await;
    let operator = role_key(&http, base, &admin, "operator").await;
    set_profile(
        &http,
        base,
        &admin,
        "bot",
        json!({"allow": [], "ask": ["tool:bash:.*"]}),
    )
    .await;
    let plan = |detail: String| {
        json!({"session": "s1", "steps": [{"tool": "bash", "detail": "make"},
                                          {"tool": "bash", "detail": detail}]})
    };
    // 3,000 characters, 6,000 once each `.` is escaped.
    for long in ["x".repeat(5000), ".".repeat(3000)] {
        let (s, p) = post(&http, base, &agent, "/v1/plans", plan(long)).await;
        assert_eq!(s, 422, "{p}");
        assert!(names_field(&p, "steps[1].detail"), "{p}");
    }
    let (s, p) = post(
        &http,
        base,
        &agent,
        "/v1/plans",
        plan(format!("echo {}", "x".repeat(4000))),
    )
    .await;
    assert_eq!(s, 201, "{p}");
    let id = p["id"].as_str().unwrap();
    let (s, p) = post(
        &http,
        base,
        &operator,
        &format!("/v1/plans/{id}/approve"),
        Value::Null,
    )
    .await;
    assert_eq!(s, 200, "{p}");

    let (s, a) = post(
        &http,
        base,
        &agent,
        "/v1/actions",
        json!({"tool": "bash", "detail": format!("make {}", "x".repeat(5000))}),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    let id = a["id"].as_str().unwrap();
    let (s, p) = post(
        &http,
        base,
        &operator,
        &format!("/v1/actions/{id}/approve"),
        json!({"remember": {"expires": "1h"}}),
    )
    .await;
    assert_eq!(s, 422, "{p}");
    assert!(names_field(&p, "remember"), "{p}");
    d.stop();
}

/// Too many approvals rules: the error names `profile.approvals`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn too_many_approvals_rules_are_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let http = client();
    let admin = d.admin_key();
    let rules: Vec<Value> = (0..2000)
        .map(|i| json!({"pattern": format!("tool:deploy:r{i}")}))
        .collect();
    let (s, p) = call(
        &http,
        Method::PUT,
        format!("{}/v1/agents/bot", d.base),
        &admin,
        Some(json!({"profile": {"allow": [], "ask": [], "approvals": rules}})),
    )
    .await;
    assert_eq!(s, 422, "{p}");
    assert!(names_field(&p, "profile.approvals"), "{p}");
    d.stop();
}

/// With another process holding the SQLite write lock, the first requests
/// for the receipt key (made on first use) are all answered busy within
/// about two busy timeouts, not each after one more of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_for_the_first_receipt_key_under_a_held_lock_is_answered_together() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let other = rusqlite::Connection::open(d.database()).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let started = Instant::now();
    let asks = (0..6).map(|_| {
        let url = format!("{}/.well-known/actiongate-receipt-key", d.base);
        tokio::spawn(async move {
            let resp = client().get(url).send().await.unwrap();
            (resp.status().as_u16(), started.elapsed())
        })
    });
    for r in futures::future::join_all(asks).await {
        let (s, took) = r.unwrap();
        assert_eq!(s, 503);
        // Two busy timeouts (5 s each) and slack for a loaded machine; one
        // after another they took 5, 10, ... 30 s.
        assert!(took < Duration::from_secs(14), "answered after {took:?}");
    }
    other.execute_batch("ROLLBACK").unwrap();
    let resp = client()
        .get(format!("{}/.well-known/actiongate-receipt-key", d.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    d.stop();
}

/// A replay's candidate profile compiles off the threads that answer
/// requests: with one worker thread, `/healthz` answers while 40 heavy
/// look-around patterns compile (two replays at once held it 15 s).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replays_candidate_compiles_off_the_request_threads() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[("TOKIO_WORKER_THREADS", "1")]);
    let http = client();
    let admin = d.admin_key();
    let heavy: Vec<String> = (0..40)
        .map(|i| format!("tool:bash:(?=x)\\w{{40}}[a-z]{{0,20}}N{i}"))
        .collect();
    let body = json!({"profile": {"allow": heavy, "ask": []}});
    let url = format!("{}/v1/agents/bot/profile/replay", d.base);
    let started = Instant::now();
    let replay = call(&http, Method::POST, url, &admin, Some(body));
    let health = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let t = Instant::now();
        let resp = http
            .get(format!("{}/healthz", d.base))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        t.elapsed()
    };
    let ((s, p), waited) = tokio::join!(replay, health);
    let compiled = started.elapsed();
    assert_eq!(s, 200, "{p}");
    eprintln!("replay {compiled:?}, /healthz {waited:?}");
    assert!(
        waited < Duration::from_millis(500),
        "/healthz took {waited:?} while the replay took {compiled:?}"
    );
    d.stop();
}

/// A TCP proxy to Postgres that, once armed, forwards the `COMMIT` of the
/// first transaction that wrote to `people` and then closes both sides:
/// the commit is done, its answer never arrives.
struct CommitCutter {
    port: u16,
    armed: std::sync::Arc<std::sync::atomic::AtomicBool>,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl CommitCutter {
    async fn start(upstream: u16) -> CommitCutter {
        use std::sync::Arc;
        use std::sync::atomic::AtomicBool;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let armed = Arc::new(AtomicBool::new(false));
        let cut = Arc::new(AtomicBool::new(false));
        let (a, c) = (armed.clone(), cut.clone());
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (armed, cut) = (a.clone(), c.clone());
                tokio::spawn(async move {
                    if let Ok(server) =
                        tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                    {
                        pipe(client, server, armed, cut).await;
                    }
                });
            }
        });
        CommitCutter { port, armed, cut }
    }
}

async fn pipe(
    client: tokio::net::TcpStream,
    server: tokio::net::TcpStream,
    armed: std::sync::Arc<std::sync::atomic::AtomicBool>,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    use std::sync::atomic::Ordering;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    // The simple-protocol message sqlx sends to commit: 'Q', its length
    // (4 + "COMMIT\0"), the text.
    const COMMIT: &[u8] = b"Q\0\0\0\x0bCOMMIT\0";
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let back = tokio::spawn(async move {
        let _ = tokio::io::copy(&mut sr, &mut cw).await;
        cw
    });
    let mut wrote_people = false;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match cr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        let chunk = &buf[..n];
        wrote_people |= chunk.windows(18).any(|w| w == b"INSERT INTO people");
        let commits = chunk.windows(COMMIT.len()).any(|w| w == COMMIT);
        if commits && wrote_people && armed.swap(false, Ordering::SeqCst) {
            // Nothing more reaches the client (it sees the connection
            // end); Postgres gets the COMMIT, and is let commit.
            cut.store(true, Ordering::SeqCst);
            back.abort();
            let _ = back.await;
            let _ = sw.write_all(chunk).await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            return;
        }
        if sw.write_all(chunk).await.is_err() {
            break;
        }
        if commits {
            wrote_people = false;
        }
    }
    back.abort();
}

/// A Postgres connection lost once a write's COMMIT was sent: the write
/// is stored, and the 503 says it may have been, never that nothing was
/// written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_whose_answer_is_lost_is_never_told_as_nothing_written() {
    let Some(cluster) = Cluster::shared() else {
        return;
    };
    let direct = cluster.database();
    let cutter = CommitCutter::start(cluster.port).await;
    let url = direct.replace(
        &format!("127.0.0.1:{}/", cluster.port),
        &format!("127.0.0.1:{}/", cutter.port),
    );
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        dir.path(),
        &[("ACTIONGATE_STORAGE__DATABASE_URL", url.as_str())],
    );
    let http = client();
    let admin = d.admin_key();
    cutter
        .armed
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let (s, p) = post(&http, &d.base, &admin, "/v1/people", json!({"name": "ann"})).await;
    assert!(
        cutter.cut.load(std::sync::atomic::Ordering::SeqCst),
        "nothing was cut: {s} {p}"
    );
    assert_eq!(s, 503, "{p}");
    let detail = p["detail"].as_str().unwrap_or_default();
    assert!(!detail.contains("nothing was written"), "{p}");
    assert!(detail.contains("may or may not have been written"), "{p}");
    // It was written: the daemon answers from its other connections.
    let mut listed = Value::Null;
    for _ in 0..50 {
        let (s, l) = call(
            &http,
            Method::GET,
            format!("{}/v1/people", d.base),
            &admin,
            None,
        )
        .await;
        if s == 200 {
            listed = l;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(listed.to_string().contains("\"ann\""), "{listed}");
    d.stop();
}
