//! Dispatch and crashes with several daemons on one Postgres database: the
//! real binary three times, the real `actiongate-executor`, a throwaway
//! cluster. Each approved action reaches the executor once across all
//! daemons; when one daemon is killed (`kill -9`) under load, nothing it
//! acknowledged is lost and what it was sending is sent again by another,
//! with the same `webhook-id`, once its lease lapses.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, agent_key, role_key};
use crate::common::{binary, call, client};

use crate::common::pg_cluster;

/// A child process killed (SIGKILL) when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The executor, registered with the daemon at `base` as handler `fs`.
fn start_executor(root: &Path, state: &Path, base: &str, admin: &str) -> Proc {
    let mut child = Command::new(binary("actiongate-executor"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--register",
            base,
            "--admin-key",
            admin,
        ])
        .arg("--root")
        .arg(root)
        .arg("--state-dir")
        .arg(state)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(
        line.starts_with("actiongate-executor listening on "),
        "{line:?}"
    );
    std::thread::spawn(move || for _ in out.lines() {});
    Proc(child)
}

fn lines_of(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// How many times the executor started and finished each delivery
/// (webhook-id), and ran each action.
fn executor_record(state: &Path) -> (HashMap<String, usize>, HashMap<String, usize>) {
    let mut started = HashMap::new();
    for line in lines_of(&state.join("deliveries.jsonl")) {
        if line["phase"] == "started" {
            *started
                .entry(line["id"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
    }
    let mut runs = HashMap::new();
    for line in lines_of(&state.join("agent_actions.jsonl")) {
        *runs
            .entry(line["action_id"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    (started, runs)
}

/// Three daemons on one new database, each with `config`.
fn three_nodes(url: &str, config: &Path) -> (Vec<Daemon>, Vec<tempfile::TempDir>) {
    let mut nodes = Vec::new();
    let mut dirs = Vec::new();
    for _ in 0..3 {
        let dir = tempfile::tempdir().unwrap();
        nodes.push(Daemon::start(
            dir.path(),
            &[
                ("ACTIONGATE_STORAGE__DATABASE_URL", url),
                ("ACTIONGATE_CONFIG", config.to_str().unwrap()),
            ],
        ));
        dirs.push(dir);
    }
    (nodes, dirs)
}

/// Waits (at most `secs`) until action `id` is settled; the action.
async fn settled(c: &reqwest::Client, base: &str, key: &str, id: &str, secs: u64) -> Value {
    let until = Instant::now() + Duration::from_secs(secs);
    loop {
        let (s, a) = call(
            c,
            reqwest::Method::GET,
            format!("{base}/v1/actions/{id}?wait=10"),
            key,
            None,
        )
        .await;
        assert_eq!(s, 200, "{a}");
        if matches!(
            a["status"].as_str(),
            Some("completed" | "failed" | "denied" | "expired")
        ) || Instant::now() > until
        {
            return a;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_of_a_node_under_load_loses_nothing_acknowledged() {
    let Some(cluster) = pg_cluster::Cluster::shared() else {
        return;
    };
    let url = cluster.database();
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("actiongate.toml");
    // Short leases so that what the killed daemon was sending is sent again
    // within the test; quick retries.
    std::fs::write(
        &config,
        "[dispatch]\ndefault_timeout = \"4s\"\nlease_slack = \"2s\"\n\
         retry_schedule = [\"200ms\", \"500ms\", \"1s\", \"2s\", \"2s\", \"2s\", \"2s\", \"2s\"]\n",
    )
    .unwrap();
    let (mut nodes, _dirs) = three_nodes(&url, &config);
    let bases: Vec<String> = nodes.iter().map(|n| n.base.clone()).collect();
    let admin = nodes[0].admin_key();
    let c = client();
    let root = work.path().join("root");
    let state = work.path().join("state");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    let _exec = start_executor(&root, &state, &bases[1], &admin);
    let runner = agent_key(&c, &bases[0], &admin, "runner").await;
    let asker = agent_key(&c, &bases[0], &admin, "asker").await;
    let operator = role_key(&c, &bases[0], &admin, "operator").await;
    // `runner`'s actions are allowed outright: each is dispatched by the
    // daemon that took it, straight away.
    let (s, a) = call(
        &c,
        reqwest::Method::PUT,
        format!("{}/v1/agents/runner", bases[2]),
        &admin,
        Some(json!({"profile": {"allow": ["tool:fs:*"]}})),
    )
    .await;
    assert!(s == 200 || s == 201, "{a}");

    // Load on all three: commands that take a while in the executor, and
    // pending actions decided by an operator, until the kill and after.
    let stop = Arc::new(AtomicBool::new(false));
    let mut load = Vec::new();
    for w in 0..6usize {
        let (c, bases, runner, asker, operator, stop) = (
            c.clone(),
            bases.clone(),
            runner.clone(),
            asker.clone(),
            operator.clone(),
            stop.clone(),
        );
        load.push(tokio::spawn(async move {
            let mut ran: Vec<String> = Vec::new();
            let mut decided: Vec<String> = Vec::new();
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let base = &bases[(w + i) % 3];
                i += 1;
                let sent = c
                    .post(format!("{base}/v1/actions"))
                    .bearer_auth(&runner)
                    .json(&json!({"handler": "fs", "action": "execute_command",
                        "params": {"content": format!("sleep 0.5; echo run-{w}-{i} >> out/ran.log"), "reason": "load"}}))
                    .send()
                    .await;
                if let Ok(resp) = sent
                    && resp.status() == 201
                    && let Ok(a) = resp.json::<Value>().await
                {
                    ran.push(a["id"].as_str().unwrap().to_owned());
                }
                let base = &bases[(w + i + 1) % 3];
                let Ok(resp) = c
                    .post(format!("{base}/v1/actions"))
                    .bearer_auth(&asker)
                    .json(&json!({"tool": "bash", "detail": format!("make {w}-{i}")}))
                    .send()
                    .await
                else {
                    continue;
                };
                let Ok(a) = resp.json::<Value>().await else { continue };
                let Some(id) = a["id"].as_str() else { continue };
                let base = &bases[(w + i + 2) % 3];
                if let Ok(resp) = c
                    .post(format!("{base}/v1/actions/{id}/approve"))
                    .bearer_auth(&operator)
                    .send()
                    .await
                    && resp.status() == 200
                {
                    decided.push(id.to_owned());
                }
            }
            (ran, decided)
        }));
    }
    // Kill the third daemon while its commands are in the executor.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let killed = nodes.pop().unwrap();
    drop(killed);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::Relaxed);
    let mut ran = Vec::new();
    let mut decided = Vec::new();
    for l in load {
        let (r, d) = l.await.unwrap();
        ran.extend(r);
        decided.extend(d);
    }
    assert!(
        ran.len() >= 12 && decided.len() >= 12,
        "too little load: {} {}",
        ran.len(),
        decided.len()
    );

    // Every acknowledged decision stands.
    for id in &decided {
        let (s, a) = call(
            &c,
            reqwest::Method::GET,
            format!("{}/v1/actions/{id}", bases[0]),
            &operator,
            None,
        )
        .await;
        assert_eq!(s, 200, "{a}");
        assert_eq!(a["status"], "approved", "{a}");
    }
    // Every acknowledged action runs to completion (the killed daemon's,
    // after their leases lapse, from another daemon), and runs once.
    let finals: Vec<Value> = futures::stream::iter(ran.clone())
        .map(|id| {
            let (c, base, operator) = (c.clone(), bases[0].clone(), operator.clone());
            async move { settled(&c, &base, &operator, &id, 60).await }
        })
        .buffer_unordered(32)
        .collect()
        .await;
    let mut redelivered = 0;
    for a in &finals {
        assert_eq!(a["status"], "completed", "{a}");
        if a["attempts"].as_array().is_some_and(|t| t.len() > 1) {
            redelivered += 1;
        }
    }
    let (started, runs) = executor_record(&state);
    for id in &ran {
        assert_eq!(runs.get(id), Some(&1), "runs of {id}");
        assert_eq!(started.get(id), Some(&1), "deliveries started of {id}");
    }
    eprintln!(
        "{} actions run and {} decided under load; {redelivered} sent again after the kill",
        ran.len(),
        decided.len()
    );
    // The log the commands appended to: one line per acknowledged action.
    let log = std::fs::read_to_string(root.join("out/ran.log")).unwrap_or_default();
    assert_eq!(log.lines().count(), ran.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_approved_action_is_delivered_once_across_nodes() {
    let Some(cluster) = pg_cluster::Cluster::shared() else {
        return;
    };
    let url = cluster.database();
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("actiongate.toml");
    std::fs::write(&config, "[dispatch]\nmax_in_flight = 64\n").unwrap();
    let (nodes, _dirs) = three_nodes(&url, &config);
    let bases: Vec<String> = nodes.iter().map(|n| n.base.clone()).collect();
    let admin = nodes[0].admin_key();
    let c = client();
    let root = work.path().join("root");
    let state = work.path().join("state");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    let _exec = start_executor(&root, &state, &bases[0], &admin);
    let agent = agent_key(&c, &bases[0], &admin, "coder").await;
    let operator = role_key(&c, &bases[0], &admin, "operator").await;
    // 90 pending file actions, asked on every node...
    let ids: Vec<String> = futures::stream::iter(0..90)
        .map(|i| {
            let (c, base, agent) = (c.clone(), bases[i % 3].clone(), agent.clone());
            async move {
                let (s, a) = call(
                    &c,
                    reqwest::Method::POST,
                    format!("{base}/v1/actions"),
                    &agent,
                    Some(json!({"handler": "fs", "action": "create_file",
                        "params": {"filepath": format!("out/f{i:02}.txt"), "content": format!("{i}\n"), "reason": "x"}})),
                )
                .await;
                assert_eq!(s, 201, "{a}");
                assert_eq!(a["status"], "pending", "{a}");
                a["id"].as_str().unwrap().to_owned()
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    // ...released at once by one grant: every daemon's dispatcher wakes.
    let (s, g) = call(
        &c,
        reqwest::Method::POST,
        format!("{}/v1/grants", bases[1]),
        &operator,
        Some(
            json!({"agent": "coder", "handler": "fs", "permission": "fs.write",
            "scope": {"path": "out/*"}, "expires": "1h"}),
        ),
    )
    .await;
    assert_eq!(s, 201, "{g}");
    for (i, id) in ids.iter().enumerate() {
        let a = settled(&c, &bases[i % 3], &operator, id, 60).await;
        assert_eq!(a["status"], "completed", "{a}");
        assert_eq!(a["attempts"].as_array().map(Vec::len), Some(1), "{a}");
    }
    let (started, runs) = executor_record(&state);
    for id in &ids {
        assert_eq!(started.get(id), Some(&1), "deliveries of {id}");
        assert_eq!(runs.get(id), Some(&1), "runs of {id}");
    }
    for i in 0..90 {
        let text = std::fs::read_to_string(root.join(format!("out/f{i:02}.txt"))).unwrap();
        assert_eq!(text, format!("{i}\n"));
    }
}
