//! `actiongate outbox follow`: the built binary follows a JSONL outbox and
//! submits each action exactly once to the real daemon, across kill -9 and
//! restart, truncation, rotation, bad lines, partial lines and a 100,000
//! line file.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use crate::cli_support;
use crate::common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cli_support::{all_actions, register_fs};
use common::TestApp;
use serde_json::{Value, json};

/// The followers are separate processes that keep both cores busy (one
/// reads 100,000 lines); these tests run one at a time so that none of
/// their daemons starves at start-up.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Outbox {
    dir: tempfile::TempDir,
}

impl Outbox {
    fn new() -> Outbox {
        Outbox {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn path(&self) -> PathBuf {
        self.dir.path().join("outbox.jsonl")
    }
    fn status_path(&self) -> PathBuf {
        self.dir.path().join("outbox.jsonl.status.jsonl")
    }
    fn state_path(&self) -> PathBuf {
        self.dir.path().join("outbox.jsonl.state.json")
    }
    fn append(&self, text: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.path())
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }
    /// The status file's whole records. A reader can see a record the
    /// follower is still writing cut short (a write lands page by page), so
    /// a last line without its newline is not read yet.
    fn status(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.status_path()).unwrap_or_default();
        let whole = text.rfind('\n').map_or("", |i| &text[..i]);
        whole
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
    fn state(&self) -> Option<Value> {
        std::fs::read(self.state_path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
    }
    /// Whether the follower's saved offset has reached the end of the file.
    fn caught_up(&self) -> bool {
        let len = std::fs::metadata(self.path()).map(|m| m.len()).unwrap_or(0);
        self.state()
            .is_some_and(|s| s["offset"].as_u64() == Some(len))
    }
}

fn create_line(name: &str) -> String {
    format!(
        "{}\n",
        json!({"actions": [{"action_type": "create_file", "filepath": format!("/work/{name}"),
            "content": format!("content of {name}"), "reason": format!("make {name}")}]})
    )
}

fn follower(app: &TestApp, outbox: &Outbox, extra: &[&str]) -> tokio::process::Child {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(outbox.dir.path().join("follower.log"))
        .unwrap();
    let mut cmd = cli_support::command(&app.base, &app.agent);
    cmd.args(["outbox", "follow"])
        .arg(outbox.path())
        .args(extra)
        .stdout(std::process::Stdio::null())
        .stderr(log);
    cmd.spawn().unwrap()
}

fn follower_log(outbox: &Outbox) -> String {
    std::fs::read_to_string(outbox.dir.path().join("follower.log")).unwrap_or_default()
}

async fn until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < timeout, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The filepaths of the fs actions in the daemon, with how often each occurs.
async fn submitted(app: &TestApp) -> BTreeMap<String, usize> {
    let mut seen = BTreeMap::new();
    for a in all_actions(app).await {
        assert_eq!(a["handler"], "fs", "{a}");
        let path = a["params"]["filepath"].as_str().unwrap_or("").to_owned();
        *seen.entry(path).or_insert(0) += 1;
    }
    seen
}

fn expected(names: impl IntoIterator<Item = String>) -> BTreeMap<String, usize> {
    names
        .into_iter()
        .map(|n| (format!("/work/{n}"), 1))
        .collect()
}

#[tokio::test]
async fn killed_and_restarted_mid_file_submits_each_action_exactly_once() {
    let _serial = ONE_AT_A_TIME.lock().await;
    // 600 actions stay pending (the agent's profile asks): past the default
    // limit of pending items per agent.
    let app = TestApp::spawn_with(|s| s.limits.max_pending_per_agent = 1000).await;
    register_fs(&app).await;
    let outbox = Outbox::new();
    let total = 600;
    let mut text = String::new();
    for i in 0..total {
        text.push_str(&create_line(&format!("f{i}")));
    }
    outbox.append(&text);

    let mut child = follower(&app, &outbox, &[]);
    until("some submissions", Duration::from_secs(60), || {
        outbox.status().len() >= 20
    })
    .await;
    child.kill().await.unwrap(); // SIGKILL: no chance to tidy up
    child.wait().await.unwrap();
    let at_kill = outbox.state().unwrap()["line"].as_u64().unwrap();
    assert!(
        at_kill < total,
        "the follower finished before it was killed; make the file longer"
    );

    // Lines written while it is down are not missed.
    outbox.append(&create_line("while-down"));
    let mut child = follower(&app, &outbox, &[]);
    until("catching up", Duration::from_secs(120), || {
        outbox.caught_up()
    })
    .await;
    outbox.append(&create_line("after-restart"));
    until("the new line", Duration::from_secs(10), || {
        outbox.caught_up()
    })
    .await;
    child.kill().await.unwrap();

    let mut names: Vec<String> = (0..total).map(|i| format!("f{i}")).collect();
    names.push("while-down".into());
    names.push("after-restart".into());
    assert_eq!(submitted(&app).await, expected(names));
    // Every line has a status record; a line in flight at the kill may have
    // two, both naming the same action. A record torn by the kill was cut
    // off at restart: every line of the file is whole.
    let raw = std::fs::read_to_string(outbox.status_path()).unwrap();
    assert!(raw.ends_with('\n'));
    let status = outbox.status();
    let mut by_line: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
    for r in &status {
        by_line
            .entry(r["line"].as_u64().unwrap())
            .or_default()
            .push(r);
    }
    assert_eq!(by_line.len() as u64, total + 2);
    for (line, records) in &by_line {
        assert!(records.len() <= 2, "line {line}: {records:?}");
        assert_eq!(records[0]["status"], "pending", "{records:?}");
        assert_eq!(records[0]["action_type"], "create_file");
        assert!(
            records
                .iter()
                .all(|r| r["action_id"] == records[0]["action_id"])
        );
    }
    // The follower's state after a full run: offset at the end, line count.
    let state = outbox.state().unwrap();
    assert_eq!(state["line"], total + 2);
    app.stop().await;
}

#[tokio::test]
async fn bad_lines_demo_actions_and_partial_lines() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let app = TestApp::spawn().await;
    register_fs(&app).await;
    let outbox = Outbox::new();
    outbox.append(&format!(
        "this is not json\n{}\n{}\n\n{}\n{}{}",
        json!({"no_actions": true}),
        json!({"actions": [{"action_type": "format_disk", "filepath": "/dev/sda"},
                           {"action_type": "update_readme", "reason": "log it"}]}),
        json!({"actions": [{"action_type": "create_file", "filepath": "/work/demo", "demo": true},
                           {"action_type": "read_file", "filepath": "/work/template", "template": true}]}),
        create_line("good"),
        r#"{"actions": [{"action_type": "create_file", "filepath": "/work/partial""#,
    ));
    let mut child = follower(&app, &outbox, &[]);
    until("the complete lines", Duration::from_secs(20), || {
        outbox.status().len() >= 7
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = outbox.status();
    let summary: Vec<(u64, Value, String)> = status
        .iter()
        .map(|r| {
            (
                r["line"].as_u64().unwrap(),
                r["index"].clone(),
                r["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (1, Value::Null, "invalid".into()),
            (2, Value::Null, "invalid".into()),
            (3, json!(0), "invalid".into()),
            (3, json!(1), "pending".into()),
            (5, json!(0), "skipped".into()),
            (5, json!(1), "skipped".into()),
            (6, json!(0), "pending".into()),
        ]
    );
    assert!(
        status[2]["details"]
            .as_str()
            .unwrap()
            .contains("unknown action_type 'format_disk'")
    );
    assert_eq!(status[2]["filepath"], "/dev/sda");
    let log = follower_log(&outbox);
    assert!(log.contains("line 1: skipped: not JSON"), "{log}");
    assert!(
        log.contains("line 2: skipped: no \"actions\" array"),
        "{log}"
    );
    assert!(
        log.contains("line 3 action 0: skipped: unknown action_type"),
        "{log}"
    );
    // The partial last line waits for its newline.
    let actions = all_actions(&app).await;
    assert_eq!(actions.len(), 2, "{actions:?}");
    assert_eq!(actions[0]["action"], "update_readme");
    assert_eq!(actions[0]["params"], json!({"reason": "log it"}));
    outbox.append(", \"content\": \"x\"}]}\n");
    until("the completed line", Duration::from_secs(10), || {
        outbox.caught_up()
    })
    .await;
    let actions = all_actions(&app).await;
    assert_eq!(actions.len(), 3);
    assert_eq!(
        actions[2]["params"],
        json!({"filepath": "/work/partial", "content": "x"})
    );
    child.kill().await.unwrap();

    // --include-demo submits the demo and template actions (a fresh state).
    let state = outbox.dir.path().join("other.state.json");
    let status_file = outbox.dir.path().join("other.status.jsonl");
    let mut child = follower(
        &app,
        &outbox,
        &[
            "--include-demo",
            "--once",
            "--state-file",
            state.to_str().unwrap(),
            "--status-file",
            status_file.to_str().unwrap(),
        ],
    );
    let exit = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(exit.success());
    let seen = submitted(&app).await;
    assert_eq!(seen.get("/work/demo"), Some(&1));
    assert_eq!(seen.get("/work/template"), Some(&1));
    // Everything else was recognised as already submitted.
    assert_eq!(seen.get("/work/good"), Some(&1));
    assert_eq!(all_actions(&app).await.len(), 5);
    app.stop().await;
}

#[tokio::test]
async fn truncation_and_rotation_start_from_the_beginning() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let app = TestApp::spawn().await;
    register_fs(&app).await;
    let outbox = Outbox::new();
    outbox.append(&format!(
        "{}{}{}",
        create_line("a1"),
        create_line("a2"),
        create_line("a3")
    ));
    let mut child = follower(&app, &outbox, &[]);
    until("the first lines", Duration::from_secs(20), || {
        outbox.caught_up()
    })
    .await;

    // Truncated and rewritten: the new lines are new actions even where
    // they repeat an old line at the same line number.
    std::fs::write(outbox.path(), create_line("b1") + &create_line("a2")).unwrap();
    until("the truncated file", Duration::from_secs(20), || {
        outbox.state().is_some_and(|s| s["generation"] == 1) && outbox.caught_up()
    })
    .await;

    // Rotated: renamed away, a new file in its place.
    std::fs::rename(outbox.path(), outbox.dir.path().join("outbox.jsonl.1")).unwrap();
    outbox.append(&create_line("c1"));
    until("the rotated file", Duration::from_secs(20), || {
        outbox.state().is_some_and(|s| s["generation"] == 2) && outbox.caught_up()
    })
    .await;
    child.kill().await.unwrap();

    let mut seen = submitted(&app).await;
    assert_eq!(seen.remove("/work/a2"), Some(2));
    assert_eq!(seen, expected(["a1", "a3", "b1", "c1"].map(String::from)));
    let log = follower_log(&outbox);
    assert!(
        log.contains("was truncated") || log.contains("was rewritten"),
        "{log}"
    );
    assert!(log.contains("was replaced by a new file"), "{log}");
    app.stop().await;
}

fn write_big(path: &Path, lines: usize) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for i in 0..lines {
        writeln!(
            f,
            "{}",
            json!({"actions": [{"action_type": "create_file", "filepath": format!("/work/demo{i}"),
                "content": "x", "reason": "demo", "demo": true}]})
        )
        .unwrap();
    }
    f.flush().unwrap();
}

#[tokio::test]
async fn a_new_line_after_100000_lines_is_noticed_quickly() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let app = TestApp::spawn().await;
    register_fs(&app).await;
    let outbox = Outbox::new();
    write_big(&outbox.path(), 100_000);
    let mut child = follower(&app, &outbox, &[]);
    until("the 100,000 demo lines", Duration::from_secs(180), || {
        outbox.caught_up()
    })
    .await;
    assert_eq!(outbox.state().unwrap()["line"], 100_000);
    assert!(all_actions(&app).await.is_empty());

    // Give the watcher time to settle, then time one new line.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut latencies = Vec::new();
    for n in 0..3 {
        let status_len = std::fs::metadata(outbox.status_path()).unwrap().len();
        let start = Instant::now();
        outbox.append(&create_line(&format!("new{n}")));
        until("the new line", Duration::from_secs(10), || {
            std::fs::metadata(outbox.status_path()).unwrap().len() > status_len
        })
        .await;
        latencies.push(start.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    child.kill().await.unwrap();
    eprintln!("new line to status record: {latencies:?}");
    // Noticed through a file-change notification, not a 500 ms poll: the
    // best of three (submission included) is well under the poll interval.
    let best = latencies.iter().min().unwrap();
    assert!(*best < Duration::from_millis(250), "{latencies:?}");
    assert_eq!(
        submitted(&app).await,
        expected((0..3).map(|n| format!("new{n}")))
    );
    app.stop().await;
}

#[tokio::test]
async fn from_end_skips_the_backlog_and_an_unreachable_daemon_is_retried() {
    let _serial = ONE_AT_A_TIME.lock().await;
    let app = TestApp::spawn().await;
    register_fs(&app).await;
    let outbox = Outbox::new();
    outbox.append(&(create_line("old1") + &create_line("old2")));
    let mut child = follower(&app, &outbox, &["--from-end"]);
    until("the start", Duration::from_secs(20), || outbox.caught_up()).await;
    outbox.append(&create_line("new1"));
    until("new1", Duration::from_secs(20), || {
        outbox.status().len() == 1
    })
    .await;
    child.kill().await.unwrap();
    assert_eq!(submitted(&app).await, expected(["new1".to_owned()]));

    // With the daemon unreachable the follower keeps retrying the line and
    // never moves past it; once it can reach the daemon the line goes in.
    let down = cli_support::dead_url().await;
    let log = std::fs::File::create(outbox.dir.path().join("down.log")).unwrap();
    outbox.append(&create_line("new2"));
    let mut child = cli_support::command(&down, "k")
        .args(["outbox", "follow"])
        .arg(outbox.path())
        .stderr(log)
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    child.kill().await.unwrap();
    let log = std::fs::read_to_string(outbox.dir.path().join("down.log")).unwrap();
    assert!(log.contains("cannot reach the daemon"), "{log}");
    assert!(log.contains("retrying in"), "{log}");
    assert!(!outbox.caught_up(), "the line was skipped");
    assert_eq!(outbox.status().len(), 1);
    let mut child = follower(&app, &outbox, &[]);
    until("new2", Duration::from_secs(20), || outbox.caught_up()).await;
    child.kill().await.unwrap();
    assert_eq!(
        submitted(&app).await,
        expected(["new1", "new2"].map(String::from))
    );
    app.stop().await;
}
