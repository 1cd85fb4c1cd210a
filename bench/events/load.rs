//! Event-stream load client: opens N SSE subscribers on a running daemon,
//! measures the daemon's memory per idle subscriber, then produces events at
//! a fixed rate and measures, on every subscriber, the time from an event's
//! commit (its `at`) to its arrival. Loopback only; bounded in count and time.
//!
//! Built as an example of the server crate; `bench/events/run.sh` runs it.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

struct Args {
    base: String,
    admin: String,
    pid: u32,
    subscribers: usize,
    rate: u64,
    seconds: u64,
}

fn args() -> Args {
    let mut a = Args {
        base: "http://127.0.0.1:8080".into(),
        admin: String::new(),
        pid: 0,
        subscribers: 1000,
        rate: 500,
        seconds: 20,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let v = pair.get(1).cloned().unwrap_or_default();
        match pair[0].as_str() {
            "--base" => a.base = v,
            "--admin-key" => a.admin = v,
            "--pid" => a.pid = v.parse().unwrap(),
            "--subscribers" => a.subscribers = v.parse().unwrap(),
            "--rate" => a.rate = v.parse().unwrap(),
            "--seconds" => a.seconds = v.parse().unwrap(),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(
        a.base.starts_with("http://127.") || a.base.starts_with("http://localhost"),
        "loopback only"
    );
    assert!(
        a.subscribers <= 5000 && a.seconds <= 120 && a.rate <= 5000,
        "bounded load only"
    );
    a
}

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// CPU time (user + system) `pid` has used so far, in seconds.
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // utime and stime are fields 14 and 15, i.e. 12 and 13 after the name.
    let ticks = f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0);
    ticks as f64 / 100.0
}

/// Latencies in microseconds and the number of events one subscriber got.
struct Tally {
    latencies_us: Vec<u32>,
    events: u64,
}

async fn subscriber(
    addr: String,
    key: String,
    connected: tokio::sync::mpsc::Sender<()>,
    stop: Arc<AtomicBool>,
    measure: Arc<AtomicBool>,
) -> Tally {
    let mut tcp = TcpStream::connect(&addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    tcp.write_all(
        format!("GET /v1/events HTTP/1.1\r\nhost: bench\r\nauthorization: Bearer {key}\r\n\r\n")
            .as_bytes(),
    )
    .await
    .unwrap();
    let mut tally = Tally {
        latencies_us: Vec::with_capacity(16 * 1024),
        events: 0,
    };
    let mut buf = vec![0u8; 64 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    let mut told = false;
    // The client must keep up with 500,000 deliveries a second on the cores
    // the daemon uses, so it finds each event's "at" with a SIMD search.
    let at_key = memchr::memmem::Finder::new(b"\"at\":\"");
    while !stop.load(Ordering::Relaxed) {
        let n = match tokio::time::timeout(Duration::from_millis(500), tcp.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => n,
            Err(_) => continue,
        };
        let now = chrono::Utc::now();
        if !told {
            told = true;
            let _ = connected.send(()).await;
        }
        pending.extend_from_slice(&buf[..n]);
        // Each event is one `data:` line; find its "at".
        let mut start = 0;
        while let Some(pos) = at_key.find(&pending[start..]) {
            let from = start + pos + 6;
            let Some(end) = memchr::memchr(b'"', &pending[from..]) else {
                break;
            };
            if let Ok(text) = std::str::from_utf8(&pending[from..from + end])
                && let Ok(at) = chrono::DateTime::parse_from_rfc3339(text)
            {
                tally.events += 1;
                if measure.load(Ordering::Relaxed) {
                    let us = (now - at.with_timezone(&chrono::Utc))
                        .num_microseconds()
                        .unwrap_or(0);
                    tally.latencies_us.push(us.clamp(0, u32::MAX as i64) as u32);
                }
            }
            start = from + end;
        }
        pending.drain(..start);
    }
    tally
}

#[tokio::main]
async fn main() {
    let a = args();
    actiongate_cli::install_tls_provider();
    let http = reqwest::Client::new();
    let key = |role: &str, agent: Option<&str>| {
        let http = http.clone();
        let base = a.base.clone();
        let admin = a.admin.clone();
        let body = json!({"role": role, "agent": agent});
        async move {
            let v: serde_json::Value = http
                .post(format!("{base}/v1/keys"))
                .bearer_auth(admin)
                .json(&body)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            v["key"].as_str().unwrap().to_owned()
        }
    };
    // One operator key per 100 subscribers: a key holds at most
    // limits.max_open_per_key streams (default 200).
    let mut operators = Vec::new();
    for _ in 0..a.subscribers.div_ceil(100) {
        operators.push(key("operator", None).await);
    }
    let agent = key("agent", Some("bench")).await;
    http.put(format!("{}/v1/agents/bench", a.base))
        .bearer_auth(&a.admin)
        .json(&json!({"profile": "open"}))
        .send()
        .await
        .unwrap();

    let addr = a.base.trim_start_matches("http://").to_owned();
    let rss_before = rss_kib(a.pid);
    let stop = Arc::new(AtomicBool::new(false));
    let measure = Arc::new(AtomicBool::new(false));
    let (tx, mut rx) = tokio::sync::mpsc::channel(a.subscribers);
    let mut subs = Vec::new();
    for i in 0..a.subscribers {
        subs.push(tokio::spawn(subscriber(
            addr.clone(),
            operators[i / 100].clone(),
            tx.clone(),
            stop.clone(),
            measure.clone(),
        )));
    }
    for _ in 0..a.subscribers {
        rx.recv().await.unwrap();
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_idle = rss_kib(a.pid);
    println!(
        "subscribers: {}; daemon RSS before {} KiB, with them idle {} KiB: {:.1} KiB per idle subscriber",
        a.subscribers,
        rss_before,
        rss_idle,
        (rss_idle.saturating_sub(rss_before)) as f64 / a.subscribers as f64
    );

    // Produce at a fixed rate.
    measure.store(true, Ordering::Relaxed);
    let daemon_pid = a.pid.to_string();
    let cpu_before = (cpu_seconds(&daemon_pid), cpu_seconds("self"));
    let total = a.rate * a.seconds;
    let period = Duration::from_secs_f64(1.0 / a.rate as f64);
    let started = Instant::now();
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut posts = tokio::task::JoinSet::new();
    for i in 0..total {
        ticker.tick().await;
        let http = http.clone();
        let url = format!("{}/v1/actions", a.base);
        let agent = agent.clone();
        posts.spawn(async move {
            let r = http
                .post(url)
                .bearer_auth(agent)
                .json(&json!({"tool": "file", "detail": format!("view bench/{i}")}))
                .send()
                .await;
            r.map(|r| r.status().is_success()).unwrap_or(false)
        });
    }
    let mut ok = 0;
    while let Some(r) = posts.join_next().await {
        ok += u64::from(r.unwrap_or(false));
    }
    let produced_in = started.elapsed();
    let cpu = (
        cpu_seconds(&daemon_pid) - cpu_before.0,
        cpu_seconds("self") - cpu_before.1,
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_busy = rss_kib(a.pid);
    stop.store(true, Ordering::Relaxed);
    let mut all: Vec<u32> = Vec::new();
    let mut short = 0;
    for s in subs {
        let t = s.await.unwrap();
        if t.events < ok {
            short += 1;
        }
        all.extend(t.latencies_us);
    }
    all.sort_unstable();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0) as f64
            / 1000.0
    };
    println!(
        "produced {ok}/{total} events in {:.1} s ({:.0}/s); {} deliveries measured; subscribers missing events: {short}",
        produced_in.as_secs_f64(),
        ok as f64 / produced_in.as_secs_f64(),
        all.len()
    );
    println!(
        "commit-to-delivery latency ms: p50 {:.1}, p90 {:.1}, p99 {:.1}, p99.9 {:.1}, max {:.1}",
        pct(0.50),
        pct(0.90),
        pct(0.99),
        pct(0.999),
        all.last().copied().unwrap_or(0) as f64 / 1000.0
    );
    println!("daemon RSS after the run: {rss_busy} KiB");
    println!(
        "CPU while producing ({:.1} s): daemon {:.2} s, this client {:.2} s",
        produced_in.as_secs_f64(),
        cpu.0,
        cpu.1
    );
}
