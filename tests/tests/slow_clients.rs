//! Black-box: clients that hold connections open without sending a
//! request (none at all, a head a byte at a time, a body that stops) are
//! cut off after `http.request_read_seconds`, so they cannot pile up and
//! take every file descriptor; a request waiting for its answer longer
//! than that is not.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::daemon::{Daemon, agent_key};
use crate::common::{call, client};

/// How long the daemon under test gives a request to arrive.
const READ: &str = "1";

fn addr(d: &Daemon) -> String {
    d.base.trim_start_matches("http://").to_owned()
}

/// Reads until the daemon closes the connection (or `limit` passes); what
/// it sent and how long that took.
async fn until_closed(s: &mut TcpStream, limit: Duration) -> (String, Duration) {
    let start = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while start.elapsed() < limit {
        match tokio::time::timeout(Duration::from_millis(200), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    (String::from_utf8_lossy(&got).into_owned(), start.elapsed())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_send_no_request_in_time_are_cut_off_and_waits_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        dir.path(),
        &[("ACTIONGATE_HTTP__REQUEST_READ_SECONDS", READ)],
    );

    // Nothing at all.
    let mut silent = TcpStream::connect(addr(&d)).await.unwrap();
    let (_, took) = until_closed(&mut silent, Duration::from_secs(10)).await;
    assert!(
        took < Duration::from_secs(5),
        "a silent connection stayed {took:?}"
    );

    // A head a byte at a time, never finished.
    let mut trickle = TcpStream::connect(addr(&d)).await.unwrap();
    let start = Instant::now();
    let mut closed = false;
    for b in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: "
        .iter()
        .cycle()
        .take(60)
    {
        if trickle.write_all(&[*b]).await.is_err() {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    if !closed {
        let (_, took) = until_closed(&mut trickle, Duration::from_secs(5)).await;
        assert!(took < Duration::from_secs(5), "a trickled head stayed open");
    }
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );

    // A head, then a body that stops short: 408.
    let http = client();
    let admin = d.admin_key();
    let agent = agent_key(&http, &d.base, &admin, "bot").await;
    let mut short = TcpStream::connect(addr(&d)).await.unwrap();
    let head = format!(
        "POST /v1/actions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {agent}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"tool\""
    );
    short.write_all(head.as_bytes()).await.unwrap();
    let (answer, took) = until_closed(&mut short, Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("request_read_seconds"), "{answer}");
    assert!(took < Duration::from_secs(5), "{took:?}");

    // A long-poll waits past the read limit and is answered.
    let (s, a) = call(
        &http,
        reqwest::Method::POST,
        format!("{}/v1/actions", d.base),
        &agent,
        Some(json!({"tool": "bash", "detail": "make deploy"})),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    let id = a["id"].as_str().unwrap();
    let start = Instant::now();
    let (s, a) = call(
        &http,
        reqwest::Method::GET,
        format!("{}/v1/actions/{id}?wait=3", d.base),
        &agent,
        None,
    )
    .await;
    assert_eq!(s, 200, "{a}");
    assert_eq!(a["status"], "pending", "{a}");
    assert!(
        start.elapsed() >= Duration::from_millis(2900),
        "{:?}",
        start.elapsed()
    );
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kept_alive_connection_is_told_how_long_it_may_idle() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(
        dir.path(),
        &[("ACTIONGATE_HTTP__REQUEST_READ_SECONDS", "2")],
    );
    let mut s = TcpStream::connect(addr(&d)).await.unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let answered = Instant::now();
    let (answer, took) = until_closed(&mut s, Duration::from_secs(10)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let head = answer.to_ascii_lowercase();
    assert!(head.contains("\r\nkeep-alive: timeout=2\r\n"), "{answer}");
    // Closed once idle that long, not before.
    assert!(took >= Duration::from_millis(1800), "{took:?}");
    assert!(
        answered.elapsed() < Duration::from_secs(6),
        "{:?}",
        answered.elapsed()
    );

    // Whatever the route answers, the header is there (an error too).
    let r = client()
        .get(format!("{}/v1/actions", d.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["keep-alive"], "timeout=2");
    d.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_connections_a_new_one_waits_until_one_closes() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[("ACTIONGATE_HTTP__MAX_CONNECTIONS", "4")]);
    // The start-up probe's connection is gone.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut idle = Vec::new();
    for _ in 0..4 {
        idle.push(TcpStream::connect(addr(&d)).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    // A fifth client is not served while four are open...
    let target = addr(&d);
    let fifth = tokio::spawn(async move {
        let mut s = TcpStream::connect(target).await.unwrap();
        s.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").await.unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).await.unwrap();
        answer
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!fifth.is_finished(), "a fifth connection was served");
    // ... and is as soon as one of them closes.
    drop(idle.pop());
    let answer = tokio::time::timeout(Duration::from_secs(5), fifth)
        .await
        .expect("the fifth connection still waits")
        .unwrap();
    assert!(answer.starts_with("HTTP/1.0 200"), "{answer}");
    // The daemon served on, nothing failed.
    assert!(d.stderr_lines().iter().all(|l| !l.contains("ERROR")));
}

/// Sends a whole `GET /healthz` on `s` and reads its answer's head.
async fn healthz_on(s: &mut TcpStream) -> String {
    s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut buf))
            .await
            .expect("no answer")
            .unwrap();
        assert!(n > 0, "closed unanswered");
        got.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&got).to_ascii_lowercase()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_max_connections_kept_alive_ones_that_answered_make_room() {
    let dir = tempfile::tempdir().unwrap();
    // Idle connections are kept a minute: only closing them makes room.
    let d = Daemon::start(
        dir.path(),
        &[
            ("ACTIONGATE_HTTP__MAX_CONNECTIONS", "4"),
            ("ACTIONGATE_HTTP__REQUEST_READ_SECONDS", "60"),
        ],
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Three answered and kept alive, a fourth connected and silent: the
    // daemon is at its bound.
    let mut kept = Vec::new();
    for _ in 0..3 {
        let mut s = TcpStream::connect(addr(&d)).await.unwrap();
        let head = healthz_on(&mut s).await;
        assert!(head.contains("keep-alive: timeout=60"), "{head}");
        kept.push(s);
    }
    let mut quiet = TcpStream::connect(addr(&d)).await.unwrap();
    // The kept-alive ones close (not the silent one, which has sent nothing
    // yet), so a new client is served at once.
    for s in &mut kept {
        let (_, took) = until_closed(s, Duration::from_secs(10)).await;
        assert!(
            took < Duration::from_secs(5),
            "an idle connection stayed open"
        );
    }
    let r = tokio::time::timeout(
        Duration::from_secs(10),
        client().get(format!("{}/healthz", d.base)).send(),
    )
    .await
    .expect("a new client waited for the idle ones' read timeout")
    .unwrap();
    assert_eq!(r.status(), 200);
    // Four open again (the silent one and three more; the new client's
    // closed with it): an answer given at the bound closes its connection.
    let _more = [
        TcpStream::connect(addr(&d)).await.unwrap(),
        TcpStream::connect(addr(&d)).await.unwrap(),
        TcpStream::connect(addr(&d)).await.unwrap(),
    ];
    tokio::time::sleep(Duration::from_millis(300)).await;
    let head = healthz_on(&mut quiet).await;
    assert!(head.contains("connection: close"), "{head}");
    let (_, took) = until_closed(&mut quiet, Duration::from_secs(10)).await;
    assert!(took < Duration::from_secs(5));
    assert!(d.stderr_lines().iter().all(|l| !l.contains("ERROR")));
}

/// The soft and hard limits of open files of process `pid`.
fn open_files(pid: u32) -> (u64, u64) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let mut n = line["Max open files".len()..]
        .split_whitespace()
        .map(|v| v.parse::<u64>().unwrap());
    (n.next().unwrap(), n.next().unwrap())
}

#[test]
fn the_daemon_raises_its_soft_limit_of_open_files_to_the_hard_one() {
    let Ok(prlimit) = which_prlimit() else {
        eprintln!("skipped: no prlimit (util-linux)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (mut child, _port) = crate::common::listen::spawn_listening(|port| {
        let serve = crate::common::daemon::serve_command(dir.path(), port, &[]);
        let mut cmd = std::process::Command::new(&prlimit);
        cmd.arg("--nofile=256:4096")
            .arg("--")
            .arg(serve.get_program())
            .args(serve.get_args())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        for (k, v) in serve.get_envs() {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
        if let Some(cwd) = serve.get_current_dir() {
            cmd.current_dir(cwd);
        }
        cmd
    });
    // Once it serves, it has raised its limit.
    let base = format!("127.0.0.1:{_port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !healthy(&base) {
        assert!(Instant::now() < deadline, "the daemon did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    let limits = open_files(child.id());
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(limits, (4096, 4096));
}

/// Whether `GET /healthz` on `addr` answers 200.
fn healthy(addr: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let mut answer = String::new();
    s.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").is_ok()
        && s.read_to_string(&mut answer).is_ok()
        && answer.starts_with("HTTP/1.0 200")
}

fn which_prlimit() -> Result<std::path::PathBuf, ()> {
    ["/usr/bin/prlimit", "/bin/prlimit"]
        .into_iter()
        .map(std::path::PathBuf::from)
        .find(|p| p.exists())
        .ok_or(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_buffers_about_64_kib() {
    // What a connection buffers bounds both a request head and what an
    // event stream whose client stopped reading keeps of its events.
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let ask = |header_bytes: usize| {
        let target = addr(&d);
        async move {
            let mut s = TcpStream::connect(target).await.unwrap();
            let head = format!(
                "GET /healthz HTTP/1.0\r\nx-filler: {}\r\n\r\n",
                "a".repeat(header_bytes)
            );
            let _ = s.write_all(head.as_bytes()).await;
            let mut answer = String::new();
            let _ = s.read_to_string(&mut answer).await;
            answer
        }
    };
    assert!(ask(30 * 1024).await.starts_with("HTTP/1.0 200"));
    // (hyper reads in growing steps and checks between them, so a head a
    // little past the bound may pass; hyper's own default let 400 KiB in.)
    let too_large = ask(200 * 1024).await;
    assert!(too_large.starts_with("HTTP/1.1 431"), "{too_large}");
}
