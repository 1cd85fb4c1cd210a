//! End-to-end executor benchmark: allowed handler actions from N concurrent
//! agents to a no-op executor, from `POST /v1/actions?wait=` to the answer
//! saying `completed`. In the same run, two baselines at the same
//! concurrency: signed requests straight to the no-op executor (what an
//! agent would pay without the gate), and decision-only actions (the gate's
//! decision and durable write, no executor).
//!
//! The no-op executor runs in this process on its own thread and runtime:
//! it verifies the Standard Webhooks signature and answers 200 at once,
//! recording how long its handler took per webhook-id, so the gate's added
//! latency is each request's total minus the executor's own time.
//!
//! Built as an example of the server crate; `bench/executor/run.sh` runs it.
//! Loopback only; bounded in concurrency and time.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

struct Args {
    base: String,
    admin: String,
    concurrency: Vec<usize>,
    seconds: u64,
}

fn args() -> Args {
    let mut a = Args {
        base: "http://127.0.0.1:8080".into(),
        admin: String::new(),
        concurrency: vec![1, 64],
        seconds: 10,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let v = pair.get(1).cloned().unwrap_or_default();
        match pair[0].as_str() {
            "--base" => a.base = v,
            "--admin-key" => a.admin = v,
            "--concurrency" => a.concurrency = v.split(',').map(|c| c.parse().unwrap()).collect(),
            "--seconds" => a.seconds = v.parse().unwrap(),
            other => panic!("unknown flag {other}"),
        }
    }
    assert!(
        a.base.starts_with("http://127.") || a.base.starts_with("http://localhost"),
        "loopback only"
    );
    assert!(
        a.seconds <= 60 && a.concurrency.iter().all(|c| (1..=256).contains(c)),
        "bounded load only"
    );
    a
}

/// The no-op executor's state: its secret and its own time per webhook-id.
#[derive(Clone)]
struct Noop {
    secret: Arc<Mutex<Option<standardwebhooks::Webhook>>>,
    own_us: Arc<Mutex<HashMap<String, u32>>>,
}

async fn noop(State(n): State<Noop>, headers: HeaderMap, body: Bytes) -> (StatusCode, String) {
    let start = Instant::now();
    let verified = n
        .secret
        .lock()
        .unwrap()
        .as_ref()
        .is_some_and(|wh| wh.verify(&body, &headers).is_ok());
    if !verified {
        return (StatusCode::UNAUTHORIZED, "{}".into());
    }
    let id = headers
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let us = start.elapsed().as_micros() as u32;
    n.own_us.lock().unwrap().insert(id, us);
    (StatusCode::OK, r#"{"ok":true}"#.into())
}

/// Starts the no-op executor on its own thread; returns its URL.
fn start_noop(n: Noop) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(format!("http://{}/", listener.local_addr().unwrap()))
                .unwrap();
            let app = axum::Router::new()
                .fallback(axum::routing::post(noop))
                .with_state(n);
            axum::serve(listener, app).await.unwrap();
        });
    });
    rx.recv().unwrap()
}

/// What one phase measured.
struct Phase {
    ok: usize,
    errors: usize,
    elapsed: Duration,
    /// Per request: (total µs, id when the answer named one).
    samples: Vec<(u32, Option<String>)>,
}

fn pct(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

/// Runs `workers` loops of `one` for `secs` seconds (after 1 s of warm-up).
async fn phase<F, Fut>(workers: usize, secs: u64, one: F) -> Phase
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<Option<String>, String>> + Send,
{
    let one = Arc::new(one);
    let warm_until = Instant::now() + Duration::from_secs(1);
    let start = warm_until;
    let until = start + Duration::from_secs(secs);
    let mut tasks = Vec::new();
    for _ in 0..workers {
        let one = one.clone();
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            let (mut ok, mut errors) = (0, 0);
            loop {
                let t0 = Instant::now();
                if t0 >= until {
                    break;
                }
                let r = one().await;
                let us = t0.elapsed().as_micros() as u32;
                if t0 < warm_until {
                    continue;
                }
                match r {
                    Ok(id) => {
                        ok += 1;
                        samples.push((us, id));
                    }
                    Err(e) => {
                        if errors < 3 {
                            eprintln!("error: {e}");
                        }
                        errors += 1;
                    }
                }
            }
            (ok, errors, samples)
        }));
    }
    let mut p = Phase {
        ok: 0,
        errors: 0,
        elapsed: Duration::ZERO,
        samples: Vec::new(),
    };
    for t in tasks {
        let (ok, errors, samples) = t.await.unwrap();
        p.ok += ok;
        p.errors += errors;
        p.samples.extend(samples);
    }
    p.elapsed = start
        .elapsed()
        .min(Duration::from_secs(secs) + Duration::from_millis(500));
    p
}

fn report(name: &str, c: usize, p: &Phase) -> (f64, f64) {
    let mut lat: Vec<u32> = p.samples.iter().map(|s| s.0).collect();
    lat.sort_unstable();
    let rate = p.ok as f64 / p.elapsed.as_secs_f64();
    println!(
        "{name:<14} c={c:<3} {rate:>9.0}/s  ok {:>7}  errors {:>3}  p50 {:>7.3} ms  p90 {:>7.3} ms  p99 {:>7.3} ms",
        p.ok,
        p.errors,
        pct(&lat, 0.5),
        pct(&lat, 0.9),
        pct(&lat, 0.99)
    );
    (rate, pct(&lat, 0.5))
}

async fn post(
    http: &reqwest::Client,
    url: String,
    key: &str,
    body: &Value,
) -> Result<Value, String> {
    let resp = http
        .post(url)
        .bearer_auth(key)
        .json(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let v: Value = resp.json().await.map_err(|e| e.to_string())?;
    if status != 201 && status != 200 {
        return Err(format!("{status}: {v}"));
    }
    Ok(v)
}

#[tokio::main]
async fn main() {
    let a = args();
    actiongate_cli::install_tls_provider();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(512)
        .build()
        .unwrap();
    let noop_state = Noop {
        secret: Arc::default(),
        own_us: Arc::default(),
    };
    let noop_url = start_noop(noop_state.clone());

    let reg = json!({
        "id": "noop", "name": "No-op", "url": noop_url, "timeout": "10s",
        "permissions": [{"name": "noop.run", "parameters_schema": {"type": "object"}}],
        "actions": [{"name": "run", "permission": "noop.run",
            "params_schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "additionalProperties": false}}]
    });
    let h = post(&http, format!("{}/v1/handlers", a.base), &a.admin, &reg)
        .await
        .unwrap();
    let secret = h["secret"].as_str().unwrap().to_owned();
    *noop_state.secret.lock().unwrap() = Some(standardwebhooks::Webhook::new(&secret).unwrap());
    let k = post(
        &http,
        format!("{}/v1/keys", a.base),
        &a.admin,
        &json!({"role": "agent", "agent": "bench"}),
    )
    .await
    .unwrap();
    let agent = k["key"].as_str().unwrap().to_owned();
    let r = http
        .put(format!("{}/v1/agents/bench", a.base))
        .bearer_auth(&a.admin)
        .json(&json!({"profile": "open"}))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let signer = standardwebhooks::Webhook::new(&secret).unwrap();
    let signer = Arc::new(signer);
    let seq = Arc::new(std::sync::atomic::AtomicU64::new(0));

    println!(
        "{} s per phase after 1 s warm-up; cores: {}",
        a.seconds,
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for &c in &a.concurrency {
        // 1. Straight to the executor: a signed action.execute, as the daemon sends it.
        let direct = {
            let (http, url, signer, seq) =
                (http.clone(), noop_url.clone(), signer.clone(), seq.clone());
            phase(c, a.seconds, move || {
                let (http, url, signer, seq) =
                    (http.clone(), url.clone(), signer.clone(), seq.clone());
                async move {
                    let id = format!(
                        "direct-{}",
                        seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                    );
                    let body =
                        serde_json::to_vec(&json!({"type": "action.execute", "action_id": id,
                        "handler": "noop", "action": "run", "params": {}, "agent": "bench",
                        "attempt": 1, "deadline": null}))
                        .unwrap();
                    let ts = chrono::Utc::now().timestamp();
                    let sig = signer.sign(&id, ts, &body).unwrap();
                    let resp = http
                        .post(url)
                        .header("content-type", "application/json")
                        .header("webhook-id", &id)
                        .header("webhook-timestamp", ts.to_string())
                        .header("webhook-signature", sig)
                        .body(body)
                        .send()
                        .await
                        .map_err(|e| e.to_string())?;
                    if resp.status() != 200 {
                        return Err(format!("executor answered {}", resp.status()));
                    }
                    resp.bytes().await.map_err(|e| e.to_string())?;
                    Ok(Some(id))
                }
            })
            .await
        };
        // 2. Decision-only: allowed and stored, nothing to execute.
        let decision = {
            let (http, base, agent) = (http.clone(), a.base.clone(), agent.clone());
            phase(c, a.seconds, move || {
                let (http, base, agent) = (http.clone(), base.clone(), agent.clone());
                async move {
                    let v = post(
                        &http,
                        format!("{base}/v1/actions"),
                        &agent,
                        &json!({"tool": "bench", "detail": "noop"}),
                    )
                    .await?;
                    if v["status"] != "approved" {
                        return Err(format!("not approved: {v}"));
                    }
                    Ok(None)
                }
            })
            .await
        };
        // 3. End to end: request to completed through the no-op executor.
        let e2e = {
            let (http, base, agent) = (http.clone(), a.base.clone(), agent.clone());
            phase(c, a.seconds, move || {
                let (http, base, agent) = (http.clone(), base.clone(), agent.clone());
                async move {
                    let v = post(
                        &http,
                        format!("{base}/v1/actions?wait=30"),
                        &agent,
                        &json!({"handler": "noop", "action": "run", "params": {"n": 1}}),
                    )
                    .await?;
                    if v["status"] != "completed" {
                        return Err(format!("not completed: {v}"));
                    }
                    Ok(v["id"].as_str().map(str::to_owned))
                }
            })
            .await
        };
        let (direct_rate, direct_p50) = report("direct", c, &direct);
        let (decision_rate, decision_p50) = report("decision-only", c, &decision);
        let (e2e_rate, e2e_p50) = report("end-to-end", c, &e2e);
        let own = noop_state.own_us.lock().unwrap();
        let mut own_us: Vec<u32> = Vec::new();
        let mut added: Vec<u32> = Vec::new();
        for (us, id) in &e2e.samples {
            if let Some(o) = id.as_ref().and_then(|id| own.get(id)) {
                own_us.push(*o);
                added.push(us.saturating_sub(*o));
            }
        }
        drop(own);
        own_us.sort_unstable();
        added.sort_unstable();
        println!(
            "  executor's own time p50 {:.3} ms; gate added over it p50 {:.3} ms, p90 {:.3} ms, p99 {:.3} ms ({} matched)",
            pct(&own_us, 0.5),
            pct(&added, 0.5),
            pct(&added, 0.9),
            pct(&added, 0.99),
            added.len()
        );
        println!(
            "  ratios: end-to-end / decision-only throughput {:.2}, / direct {:.3}; end-to-end p50 - direct p50 = {:.3} ms, - decision-only p50 = {:.3} ms",
            e2e_rate / decision_rate,
            e2e_rate / direct_rate,
            e2e_p50 - direct_p50,
            e2e_p50 - decision_p50
        );
    }
}
