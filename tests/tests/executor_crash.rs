//! Crash recovery of dispatch, with both sides as real processes: the
//! `actiongate` binary is SIGKILLed while hundreds of actions are in flight
//! to the `actiongate-executor` binary, then restarted on the same data dir.
//! Every action must end settled, none left running, and every side effect
//! must have happened exactly once (the executor's delivery record, its
//! journal and the files it wrote prove it).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::collections::HashMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};

use crate::common;
use common::executor::{Proc, start_executor};
use common::{binary, call, client, free_port};

/// Actions in the run: `FILES` create_file and `COMMANDS` execute_command.
const FILES: usize = 450;
const COMMANDS: usize = 50;
/// Executor journal lines to wait for before the kill: some done, most not.
const KILL_AFTER: usize = 120;

/// Starts the daemon on `data` with `config` and waits until it is ready.
async fn start_daemon(data: &Path, config: &Path, port: u16) -> Proc {
    let child = Command::new(binary("actiongate"))
        .arg("serve")
        .arg("--config")
        .arg(config)
        .arg("--data-dir")
        .arg(data)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .env("ACTIONGATE_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let proc = Proc(child);
    let client = client();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = client
            .get(format!("http://127.0.0.1:{port}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200);
        if ready {
            return proc;
        }
        assert!(Instant::now() < deadline, "the daemon did not become ready");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn lines_of(path: &Path) -> Vec<Value> {
    match std::fs::read_to_string(path) {
        Ok(text) => text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).unwrap())
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_dispatch_settles_every_action_and_runs_each_once() {
    crash_and_recover(false).await;
}

/// The same with results posted back (202): callbacks of the attempt cut
/// by the kill arrive after the restart, when a newer attempt is current.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_during_async_dispatch_settles_every_action_and_runs_each_once() {
    crash_and_recover(true).await;
}

async fn crash_and_recover(async_mode: bool) {
    let data = tempfile::tempdir().unwrap();
    let root = tempfile::tempdir().unwrap();
    let exec_state = tempfile::tempdir().unwrap();
    let config = data.path().join("actiongate.toml");
    // Every action may be in flight at once; retries come quickly and
    // outlast the executor's 5 s Retry-After for deliveries it is still
    // running. All of them wait for the grant at first: past the default
    // limit of pending items per agent.
    std::fs::write(
        &config,
        "[dispatch]\nmax_in_flight = 1024\nper_handler_max_in_flight = 1024\n\
         retry_schedule = [\"200ms\", \"500ms\", \"1s\", \"2s\", \"5s\", \"5s\", \"5s\", \"10s\"]\n\
         [limits]\nmax_pending_per_agent = 1000\n",
    )
    .unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let daemon = start_daemon(data.path(), &config, port).await;
    let admin = std::fs::read_to_string(data.path().join("admin.key"))
        .unwrap()
        .trim()
        .to_owned();
    let _exec = start_executor(root.path(), exec_state.path(), &base, &admin, async_mode);
    let client = client();
    let key = |role: &str| {
        let body = if role == "agent" {
            json!({"role": "agent", "agent": "coder"})
        } else {
            json!({"role": role})
        };
        let (client, base, admin) = (client.clone(), base.clone(), admin.clone());
        async move {
            let (s, k) = call(
                &client,
                reqwest::Method::POST,
                format!("{base}/v1/keys"),
                &admin,
                Some(body),
            )
            .await;
            assert_eq!(s, 201, "{k}");
            k["key"].as_str().unwrap().to_owned()
        }
    };
    let agent = key("agent").await;
    let operator = key("operator").await;

    // All 500 ask first (the default profile is `guarded`), so that the
    // grant below releases the file actions in one burst.
    let requests: Vec<(usize, Value)> = (0..FILES)
        .map(|i| {
            (
                i,
                json!({"handler": "fs", "action": "create_file",
                    "params": {"filepath": format!("out/f{i:03}.txt"), "content": format!("content {i}\n"), "reason": "crash test"}}),
            )
        })
        .chain((0..COMMANDS).map(|j| {
            (
                FILES + j,
                json!({"handler": "fs", "action": "execute_command",
                    "params": {"content": format!("sleep 10; echo line-{j} >> append.log"), "reason": "crash test"}}),
            )
        }))
        .collect();
    let created: Vec<(usize, Value)> = futures::stream::iter(requests)
        .map(|(i, body)| {
            let (client, base, agent) = (client.clone(), base.clone(), agent.clone());
            async move {
                let (s, a) = call(
                    &client,
                    reqwest::Method::POST,
                    format!("{base}/v1/actions"),
                    &agent,
                    Some(body),
                )
                .await;
                assert_eq!(s, 201, "{a}");
                assert_eq!(a["status"], "pending", "{a}");
                (i, a)
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let ids: HashMap<String, usize> = created
        .iter()
        .map(|(i, a)| (a["id"].as_str().unwrap().to_owned(), *i))
        .collect();
    assert_eq!(ids.len(), FILES + COMMANDS);

    // The commands first (each runs for 10 s, longer than the kill and the
    // restart take), then every file at once.
    let commands: Vec<String> = created
        .iter()
        .filter(|(i, _)| *i >= FILES)
        .map(|(_, a)| a["id"].as_str().unwrap().to_owned())
        .collect();
    futures::stream::iter(commands.clone())
        .map(|id| {
            let (client, base, operator) = (client.clone(), base.clone(), operator.clone());
            async move {
                let (s, a) = call(
                    &client,
                    reqwest::Method::POST,
                    format!("{base}/v1/actions/{id}/approve"),
                    &operator,
                    None,
                )
                .await;
                assert_eq!(s, 200, "{a}");
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
    let (s, g) = call(
        &client,
        reqwest::Method::POST,
        format!("{base}/v1/grants"),
        &operator,
        Some(
            json!({"agent": "coder", "handler": "fs", "permission": "fs.write",
            "scope": {"path": "out/*"}, "expires": "1h"}),
        ),
    )
    .await;
    assert_eq!(s, 201, "{g}");

    // Kill once every command is running in the executor and some files
    // are done, while the rest are in flight.
    let journal = exec_state.path().join("agent_actions.jsonl");
    let deliveries = exec_state.path().join("deliveries.jsonl");
    let deadline = Instant::now() + Duration::from_secs(60);
    let done_at_kill = loop {
        let done = std::fs::read_to_string(&journal)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        let record = std::fs::read_to_string(&deliveries).unwrap_or_default();
        let commands_started = commands
            .iter()
            .filter(|id| record.contains(&format!("\"id\":\"{id}\"")))
            .count();
        if done >= KILL_AFTER && commands_started == COMMANDS {
            break done;
        }
        assert!(
            Instant::now() < deadline,
            "in 60 s the executor finished {done} actions and started {commands_started} commands"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    drop(daemon);
    assert!(
        done_at_kill < FILES + COMMANDS,
        "everything finished before the kill; the test proves nothing"
    );

    // Restart on the same data dir and port (the executor keeps running).
    let _daemon = start_daemon(data.path(), &config, port).await;
    let settled: Vec<Value> = futures::stream::iter(ids.keys().cloned())
        .map(|id| {
            let (client, base, operator) = (client.clone(), base.clone(), operator.clone());
            async move {
                let until = Instant::now() + Duration::from_secs(90);
                loop {
                    let (s, a) = call(
                        &client,
                        reqwest::Method::GET,
                        format!("{base}/v1/actions/{id}?wait=30"),
                        &operator,
                        None,
                    )
                    .await;
                    assert_eq!(s, 200, "{a}");
                    if matches!(a["status"].as_str(), Some("completed" | "failed"))
                        || Instant::now() > until
                    {
                        return a;
                    }
                }
            }
        })
        .buffer_unordered(64)
        .collect()
        .await;

    // Every action completed: the executor never went away, so nothing had
    // a reason to fail, and nothing is left running or approved.
    let mut interrupted = 0;
    for a in &settled {
        assert_eq!(a["status"], "completed", "{a}");
        let attempts = a["attempts"].as_array().unwrap();
        if attempts
            .iter()
            .any(|t| t["error"] == "the daemon stopped during this attempt")
        {
            interrupted += 1;
        }
    }
    assert!(
        interrupted > 0,
        "no attempt was cut by the kill; the test proves nothing"
    );
    eprintln!(
        "{done_at_kill} of {} done at the kill; {interrupted} attempts were cut by it",
        ids.len()
    );

    // Each file exists once with its content; each command appended once.
    for i in 0..FILES {
        let path = root.path().join(format!("out/f{i:03}.txt"));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            format!("content {i}\n"),
            "{}",
            path.display()
        );
    }
    let appended = std::fs::read_to_string(root.path().join("append.log")).unwrap();
    let mut lines: Vec<&str> = appended.lines().collect();
    lines.sort_unstable();
    let mut expected: Vec<String> = (0..COMMANDS).map(|j| format!("line-{j}")).collect();
    expected.sort_unstable();
    assert_eq!(lines, expected, "a command ran twice or not at all");

    // The delivery record: one `started` and one `done` per action, so no
    // delivery ran twice; and the journal has one line per action.
    let mut started: HashMap<String, usize> = HashMap::new();
    let mut finished: HashMap<String, usize> = HashMap::new();
    for line in lines_of(&exec_state.path().join("deliveries.jsonl")) {
        let id = line["id"].as_str().unwrap().to_owned();
        match line["phase"].as_str() {
            Some("started") => *started.entry(id).or_default() += 1,
            Some("done") => *finished.entry(id).or_default() += 1,
            other => panic!("unexpected phase {other:?}"),
        }
    }
    for id in ids.keys() {
        assert_eq!(started.get(id), Some(&1), "started lines of {id}");
        assert_eq!(finished.get(id), Some(&1), "done lines of {id}");
    }
    assert_eq!(started.len(), ids.len());
    let journal = lines_of(&journal);
    let mut runs: HashMap<String, usize> = HashMap::new();
    for e in &journal {
        assert_eq!(e["status"], "success", "{e}");
        *runs
            .entry(e["action_id"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    assert_eq!(journal.len(), ids.len(), "journal lines");
    assert!(runs.values().all(|n| *n == 1));
    assert!(ids.keys().all(|id| runs.contains_key(id)));
}
