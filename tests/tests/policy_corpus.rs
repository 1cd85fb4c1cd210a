//! Black-box: the bypass corpus of `tests/policy/*.json` (issue 23, item
//! 12) against `POST /v1/check` of the built binary, one agent per
//! profile, and a 64 KiB detail of nested operators (item 5) that gets an
//! answer without stopping the daemon.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use crate::common;
use common::{binary, call, client};

/// The daemon, killed when dropped.
struct Daemon {
    child: Child,
    base: String,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The newest modification time of the files under `dir`.
fn newest(dir: &Path) -> SystemTime {
    let mut newest = SystemTime::UNIX_EPOCH;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                stack.push(e.path());
            } else {
                newest = newest.max(meta.modified().unwrap());
            }
        }
    }
    newest
}

/// The built daemon, refusing one older than the policy crate's sources
/// (this package cannot make cargo build another package's binary, and a
/// stale binary would test the old analysers).
fn daemon_binary() -> PathBuf {
    let bin = binary("actiongate");
    let built = std::fs::metadata(&bin).unwrap().modified().unwrap();
    let sources = newest(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../crates/policy/src"));
    assert!(
        built >= sources,
        "{} is older than crates/policy/src: run `cargo build -p actiongate` first",
        bin.display()
    );
    bin
}

async fn start(data: &Path) -> Daemon {
    let (child, port) = common::listen::spawn_listening(|port| {
        let mut cmd = Command::new(daemon_binary());
        cmd.arg("serve")
            .arg("--data-dir")
            .arg(data)
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .env("ACTIONGATE_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd
    });
    let d = Daemon {
        child,
        base: format!("http://127.0.0.1:{port}"),
    };
    assert!(ready(&d).await, "daemon did not become ready");
    d
}

/// Whether `/readyz` answers 200 within 30 s.
async fn ready(d: &Daemon) -> bool {
    let c = client();
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let r = c
            .get(format!("{}/readyz", d.base))
            .timeout(Duration::from_secs(2))
            .send()
            .await;
        if r.is_ok_and(|r| r.status() == 200) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A key for a new agent `agent` whose profile is `profile` (a preset name
/// or an object of pattern lists).
async fn agent(
    c: &reqwest::Client,
    d: &Daemon,
    admin: &str,
    agent: &str,
    profile: Value,
) -> String {
    let (s, k) = call(
        c,
        reqwest::Method::POST,
        format!("{}/v1/keys", d.base),
        admin,
        Some(json!({"role": "agent", "agent": agent})),
    )
    .await;
    assert_eq!(s, 201, "{k}");
    let (s, a) = call(
        c,
        reqwest::Method::PUT,
        format!("{}/v1/agents/{agent}", d.base),
        admin,
        Some(json!({ "profile": profile })),
    )
    .await;
    assert!(s == 200 || s == 201, "{a}");
    k["key"].as_str().unwrap().to_owned()
}

async fn check(
    c: &reqwest::Client,
    d: &Daemon,
    key: &str,
    tool: &str,
    detail: &str,
) -> (u16, Value) {
    call(
        c,
        reqwest::Method::POST,
        format!("{}/v1/check", d.base),
        key,
        Some(json!({"tool": tool, "detail": detail})),
    )
    .await
}

/// Every corpus file's profiles and entries.
fn corpus() -> (Vec<(String, Value)>, Vec<Value>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("policy");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut profiles = Vec::new();
    let mut entries = Vec::new();
    for path in files {
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        for (name, spec) in doc["profiles"].as_object().unwrap() {
            profiles.push((name.clone(), spec.clone()));
        }
        entries.extend(doc["entries"].as_array().unwrap().iter().cloned());
    }
    (profiles, entries)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_corpus_gets_its_verdicts_from_v1_check() {
    let dir = tempfile::tempdir().unwrap();
    let d = start(dir.path()).await;
    let admin = std::fs::read_to_string(dir.path().join("admin.key"))
        .unwrap()
        .trim()
        .to_owned();
    let c = client();
    let (profiles, entries) = corpus();
    assert!(entries.len() >= 200, "{} entries", entries.len());
    let mut keys = std::collections::BTreeMap::new();
    for name in ["open", "standard", "locked", "guarded", "readonly"] {
        keys.insert(
            name.to_owned(),
            agent(&c, &d, &admin, &format!("p-{name}"), json!(name)).await,
        );
    }
    for (name, spec) in profiles {
        let key = agent(&c, &d, &admin, &format!("p-{name}"), spec).await;
        keys.insert(name, key);
    }
    let mut failures = Vec::new();
    for e in &entries {
        let profile = e["profile"].as_str().unwrap();
        let (tool, detail) = (e["tool"].as_str().unwrap(), e["detail"].as_str().unwrap());
        let expect = e["expect"].as_str().unwrap();
        let (s, body) = check(&c, &d, &keys[profile], tool, detail).await;
        if s != 200 || body["result"] != expect {
            failures.push(format!(
                "{profile} {tool} {detail:?}: expected {expect}, got {s} {body}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Details of 64 KiB that nest the constructs the parsers recurse on: each
/// gets an answer that is not an allow, and the daemon answers afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_64_kib_nested_detail_gets_an_answer_and_the_daemon_survives() {
    const MAX: usize = 64 * 1024;
    let dir = tempfile::tempdir().unwrap();
    let d = start(dir.path()).await;
    let admin = std::fs::read_to_string(dir.path().join("admin.key"))
        .unwrap()
        .trim()
        .to_owned();
    let c = client();
    let key = agent(&c, &d, &admin, "deep", json!("open")).await;
    let fill = |prefix: &str, unit: &str, suffix: &str| {
        let n = (MAX - prefix.len() - suffix.len()) / unit.len();
        format!("{prefix}{}{suffix}", unit.repeat(n))
    };
    let nested = |open: &str, close: &str| {
        let n = MAX / (open.len() + close.len()) - 1;
        format!("{}x{}", open.repeat(n), close.repeat(n))
    };
    let details = [
        fill("[[ ", "! ", "-n x ]]"),
        fill("[[ -n x ", "&& -n x ", "]]"),
        fill("ls && [[ ", "! ", "-v x ]]"),
        fill("", "! ", "ls"),
        nested("((", "))"),
        nested("$(", ")"),
        nested("{ ", "; }"),
        nested("${x:-", "}"),
        fill("", "-C . ", "status"),
    ];
    for detail in &details {
        assert!(detail.len() <= MAX, "{}", detail.len());
        for tool in ["bash", "sh", "git"] {
            let (s, body) = check(&c, &d, &key, tool, detail).await;
            assert!(s == 200 || s == 422, "{tool}: {s} {body}");
            assert_ne!(body["result"], "allow", "{tool}: {body}");
        }
        // Requested as an action too (issue 23 found them crashing the
        // daemon through /v1/actions as well): stored pending, or refused.
        let (s, body) = call(
            &c,
            reqwest::Method::POST,
            format!("{}/v1/actions", d.base),
            &key,
            Some(json!({"tool": "bash", "detail": detail})),
        )
        .await;
        assert!(s == 201 || s == 422, "{s} {body}");
        assert_ne!(body["status"], "approved", "{body}");
    }
    // Still alive and still deciding.
    let (s, body) = check(&c, &d, &key, "bash", "ls -la").await;
    assert_eq!((s, body["result"].as_str()), (200, Some("allow")), "{body}");
}
