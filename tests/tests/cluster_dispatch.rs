//! Dispatch and crashes with several daemons on one Postgres database: the
//! real binary three times, the real `actiongate-executor`, a throwaway
//! cluster. Each approved action reaches the executor once across all
//! daemons; when one daemon is killed (`kill -9`) under load, nothing it
//! acknowledged is lost and what it was sending is sent again by another,
//! with the same `webhook-id`, once its lease lapses.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use crate::common::daemon::{Daemon, agent_key, role_key};
use crate::common::executor::start_executor;
use crate::common::{call, client};

use crate::common::pg_cluster;

/// The file's whole lines: one the writer is still appending (a reader
/// can see it cut short) is left for the next read.
fn lines_of(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text[..text.rfind('\n').map_or(0, |i| i + 1)]
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

/// A `POST /v1/actions` of `runner`'s command on `base`; its id when
/// acknowledged (201), and whether the daemon started sending it at once
/// (it did not when its sending was backlogged: the action waits, approved,
/// for a dispatch pass of any daemon).
async fn run_command(
    c: &reqwest::Client,
    base: &str,
    runner: &str,
    command: String,
) -> Option<(String, bool)> {
    let resp = c
        .post(format!("{base}/v1/actions"))
        .bearer_auth(runner)
        .json(&json!({"handler": "fs", "action": "execute_command",
            "params": {"content": command, "reason": "load"}}))
        .send()
        .await
        .ok()?;
    if resp.status() != 201 {
        return None;
    }
    let a: Value = resp.json().await.ok()?;
    assert!(
        a["status"] == "running" || a["status"] == "approved",
        "allowed: {a}"
    );
    Some((a["id"].as_str()?.to_owned(), a["status"] == "running"))
}

/// The actions of `status` (first page of 200).
async fn with_status(c: &reqwest::Client, base: &str, key: &str, status: &str) -> Vec<Value> {
    let (s, page) = call(
        c,
        reqwest::Method::GET,
        format!("{base}/v1/actions?status={status}&limit=200"),
        key,
        None,
    )
    .await;
    assert_eq!(s, 200, "{page}");
    page["items"].as_array().cloned().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_of_a_node_under_load_loses_nothing_acknowledged() {
    let Some(cluster) = pg_cluster::Cluster::shared() else {
        return;
    };
    let url = cluster.database();
    let work = tempfile::tempdir().unwrap();
    let config = work.path().join("actiongate.toml");
    // Short leases (4 s + 2 s) so that what the killed daemon was sending is
    // sent again within the test; quick retries.
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
    std::fs::create_dir_all(root.join("out")).unwrap();
    std::fs::create_dir_all(&state).unwrap();
    let _exec = start_executor(&root, &state, &bases[1], &admin, false);
    // Attempts time out after 3 s: leases last 4 s + 2 s.
    let (s, h) = call(
        &c,
        reqwest::Method::GET,
        format!("{}/v1/handlers/fs", bases[0]),
        &admin,
        None,
    )
    .await;
    assert_eq!(s, 200, "{h}");
    let body = json!({"id": "fs", "name": h["name"], "description": h["description"], "url": h["url"],
        "timeout": "3s", "permissions": h["permissions"], "actions": h["actions"]});
    let (s, h) = call(
        &c,
        reqwest::Method::PUT,
        format!("{}/v1/handlers/fs", bases[0]),
        &admin,
        Some(body),
    )
    .await;
    assert_eq!(s, 200, "{h}");
    assert_eq!(h["timeout"], "3s", "{h}");
    // Every daemon reads handlers afresh after at most a second.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let runner = agent_key(&c, &bases[0], &admin, "runner").await;
    let asker = agent_key(&c, &bases[0], &admin, "asker").await;
    let operator = role_key(&c, &bases[0], &admin, "operator").await;
    // `runner`'s actions are allowed outright: each is sent by the daemon
    // that took it, straight away. Each command makes a directory of its
    // own: run twice, it would fail the second time.
    let (s, a) = call(
        &c,
        reqwest::Method::PUT,
        format!("{}/v1/agents/runner", bases[2]),
        &admin,
        Some(json!({"profile": {"allow": ["tool:fs:.*"], "ask": []}})),
    )
    .await;
    assert!(s == 200 || s == 201, "{a}");

    // Load on all three: commands that take a while in the executor, and
    // pending actions decided by an operator, until after the kill.
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
            let (mut ran, mut asked, mut decided) = (Vec::new(), Vec::new(), Vec::new());
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let command = format!("sleep 0.3 && mkdir out/r-{w}-{i}");
                let acked = run_command(&c, &bases[(w + i) % 3], &runner, command).await;
                ran.extend(acked.map(|(id, _)| id));
                let Ok(resp) = c
                    .post(format!("{}/v1/actions", bases[(w + i + 1) % 3]))
                    .bearer_auth(&asker)
                    .json(&json!({"tool": "bash", "detail": format!("make {w}-{i}")}))
                    .send()
                    .await
                else {
                    continue;
                };
                if resp.status() != 201 {
                    continue;
                }
                let Ok(a) = resp.json::<Value>().await else {
                    continue;
                };
                let id = a["id"].as_str().unwrap().to_owned();
                asked.push(id.clone());
                if let Ok(resp) = c
                    .post(format!(
                        "{}/v1/actions/{id}/approve",
                        bases[(w + i + 2) % 3]
                    ))
                    .bearer_auth(&operator)
                    .send()
                    .await
                    && resp.status() == 200
                {
                    decided.push(id);
                }
            }
            (ran, asked, decided)
        }));
    }
    tokio::time::sleep(Duration::from_millis(2000)).await;
    // Commands the third daemon is sending when it is killed: acknowledged,
    // in the executor (sleeping 2 s from after their acknowledgement), their
    // answers not yet recorded. Which ones those are is read from the clock,
    // not assumed: on a loaded machine acknowledging four can take long
    // enough for the first to finish before the kill.
    let mut sending_since = Vec::new();
    let mut acked = Vec::new();
    for k in 0..4 {
        let command = format!("sleep 2 && mkdir out/k-{k}");
        let (id, sending) = run_command(&c, &bases[2], &runner, command)
            .await
            .expect("acknowledged");
        if sending {
            sending_since.push((id.clone(), Instant::now()));
        }
        acked.push(id);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let killed = nodes.pop().unwrap();
    drop(killed); // SIGKILL
    let in_flight: Vec<String> = sending_since
        .into_iter()
        .filter(|(_, since)| since.elapsed() < Duration::from_millis(1500))
        .map(|(id, _)| id)
        .collect();
    assert!(
        !in_flight.is_empty(),
        "the third daemon was sending none when killed"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::Relaxed);
    let (mut ran, mut asked, mut decided) = (acked, Vec::new(), Vec::new());
    for l in load {
        let (r, a, d) = l.await.unwrap();
        ran.extend(r);
        asked.extend(a);
        decided.extend(d);
    }
    assert!(
        ran.len() >= 16 && decided.len() >= 12,
        "too little load: {} {}",
        ran.len(),
        decided.len()
    );

    // Every acknowledged action is there; every acknowledged decision stands.
    for id in &asked {
        let (s, a) = call(
            &c,
            reqwest::Method::GET,
            format!("{}/v1/actions/{id}", bases[0]),
            &operator,
            None,
        )
        .await;
        assert_eq!(s, 200, "{a}");
        if decided.contains(id) {
            assert_eq!(a["status"], "approved", "{a}");
        } else {
            // Its approval was not acknowledged (the daemon asked was
            // killed): it may or may not have been committed.
            assert!(a["status"] == "pending" || a["status"] == "approved", "{a}");
        }
    }
    // Every acknowledged command runs to completion, once: the killed
    // daemon's after their leases lapse, sent again by another daemon with
    // the same webhook-id (the executor answers the repeat from its record
    // instead of running the command again).
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
        let attempts = a["attempts"].as_array().unwrap();
        if attempts.len() > 1 {
            redelivered += 1;
        }
        if in_flight.iter().any(|id| a["id"] == json!(id)) {
            assert!(attempts.len() >= 2, "sent again: {a}");
            let cut = attempts[0]["error"].as_str().unwrap_or_default();
            assert!(cut.contains("lease lapsed"), "{a}");
        }
    }
    let (started, runs) = executor_record(&state);
    for id in &ran {
        assert_eq!(runs.get(id), Some(&1), "runs of {id}");
        assert_eq!(started.get(id), Some(&1), "deliveries started of {id}");
    }
    // Nothing ran twice. Each acknowledged command made its directory; so
    // may one a load worker sent to the third daemon as it was killed
    // (stored and sent, its answer lost with the daemon): at most one per
    // worker.
    for (id, n) in &runs {
        assert_eq!(*n, 1, "runs of {id}");
    }
    let made = std::fs::read_dir(root.join("out")).unwrap().count();
    assert!(
        (ran.len()..=ran.len() + 6).contains(&made),
        "{made} directories for {} acknowledged commands",
        ran.len()
    );
    // Nothing is left running or waiting to be sent once the leases of
    // what the killed daemon took (acknowledged or not) have lapsed.
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let running = with_status(&c, &bases[0], &operator, "running").await;
        let approved = with_status(&c, &bases[1], &operator, "approved").await;
        let waiting: Vec<&Value> = approved
            .iter()
            .filter(|a| !a["handler"].is_null())
            .collect();
        if running.is_empty() && waiting.is_empty() {
            break;
        }
        assert!(
            Instant::now() < until,
            "stuck: running {running:?}, waiting {waiting:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!(
        "{} commands run and {} decisions under load; {redelivered} sent again after the kill",
        ran.len(),
        decided.len()
    );
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
    let _exec = start_executor(&root, &state, &bases[0], &admin, false);
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
