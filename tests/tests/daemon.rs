//! Black-box tests: the built `actiongate` binary, started as a user would.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common;
use common::{binary, call, client, free_port};

struct Daemon {
    child: Child,
    base: String,
    stderr: std::sync::mpsc::Receiver<String>,
}

impl Daemon {
    fn start(data: &Path, extra_env: &[(&str, &str)]) -> Daemon {
        let (mut child, port) = common::listen::spawn_listening(|port| {
            common::daemon::serve_command(data, port, extra_env)
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let d = Daemon {
            child,
            base: format!("http://127.0.0.1:{port}"),
            stderr: rx,
        };
        d.wait_ready();
        d
    }

    fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(r) = ureq_get(&format!("{}/readyz", self.base))
                && r == 200
            {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("daemon did not become ready");
    }

    fn kill9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success());
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "daemon did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn ureq_get(url: &str) -> Result<u16, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        client()
            .get(url)
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .map(|r| r.status().as_u16())
            .map_err(|e| e.to_string())
    })
}

/// A new key for `agent`, whose profile is set to `profile`.
async fn agent_key(
    client: &reqwest::Client,
    base: &str,
    admin: &str,
    agent: &str,
    profile: &str,
) -> String {
    let (s, k) = call(
        client,
        reqwest::Method::POST,
        format!("{base}/v1/keys"),
        admin,
        Some(json!({"role": "agent", "agent": agent})),
    )
    .await;
    assert_eq!(s, 201, "{k}");
    let (s, a) = call(
        client,
        reqwest::Method::PUT,
        format!("{base}/v1/agents/{agent}"),
        admin,
        Some(json!({"profile": profile})),
    )
    .await;
    assert!(s == 200 || s == 201, "{a}");
    k["key"].as_str().unwrap().to_owned()
}

/// The first admin key, as the daemon wrote it into `data`.
fn admin_key(data: &Path) -> String {
    std::fs::read_to_string(data.join("admin.key"))
        .unwrap()
        .trim()
        .to_owned()
}

/// `POST /v1/actions` of `bash: make` as `agent`: the new action, answered
/// 201.
async fn make(client: &reqwest::Client, base: &str, agent: &str) -> Value {
    let (s, a) = call(
        client,
        reqwest::Method::POST,
        format!("{base}/v1/actions"),
        agent,
        Some(json!({"tool": "bash", "detail": "make"})),
    )
    .await;
    assert_eq!(s, 201, "{a}");
    a
}

fn cli(data: &Path, args: &[&str]) -> std::process::Output {
    Command::new(binary("actiongate"))
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn first_start_creates_an_admin_key_file_with_mode_0600_and_prints_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let key = std::fs::read_to_string(dir.path().join("admin.key"))
        .unwrap()
        .trim()
        .to_owned();
    assert!(key.starts_with("agk_"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.path().join("admin.key"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let mut printed = false;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && !printed {
        if let Ok(line) = d.stderr.recv_timeout(Duration::from_millis(200)) {
            printed |= line.trim() == key;
        }
    }
    assert!(printed, "the admin key was not printed on stderr");
    let status = d.terminate();
    assert!(status.success(), "{status:?}");

    // A second start creates no new key and prints none.
    let d = Daemon::start(dir.path(), &[]);
    std::thread::sleep(Duration::from_millis(300));
    let lines: Vec<String> = d.stderr.try_iter().collect();
    assert!(!lines.iter().any(|l| l.contains("agk_")), "{lines:?}");
    let list = cli(dir.path(), &["keys", "list", "--json"]);
    let keys: Value = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(keys.as_array().unwrap().len(), 1);
}

/// The variables the docs tell a user to export for the client commands,
/// the hooks, `wrap` and the MCP proxy are not settings: a shell holding
/// them still starts the daemon and runs its admin commands.
#[test]
fn client_variables_in_the_environment_do_not_stop_the_daemon() {
    let dir = tempfile::tempdir().unwrap();
    let env = [
        ("ACTIONGATE_ADMIN_KEY", "agk_x"),
        ("ACTIONGATE_KEY_FILE", "/nonexistent/agent.key"),
        ("ACTIONGATE_SESSION", "s1"),
        ("ACTIONGATE_HOOK_WAIT", "5"),
        ("ACTIONGATE_HOOK_ON_ERROR", "deny"),
        ("ACTIONGATE_REAL_SHELL", "/bin/bash"),
        ("ACTIONGATE_MCP_PINS", "pins.json"),
    ];
    let d = Daemon::start(dir.path(), &env);
    let status = d.terminate();
    assert!(status.success(), "{status:?}");
    let out = Command::new(binary("actiongate"))
        .arg("--data-dir")
        .arg(dir.path())
        .args(["keys", "list", "--json"])
        .envs(env)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

/// A client command given the daemon's storage flags or its config file
/// is refused (they would do nothing: it talks to the daemon at --url),
/// one line, exit 2; ACTIONGATE_CONFIG, which a shell may export for the
/// daemon, is not.
#[test]
fn client_commands_refuse_the_daemons_storage_flags() {
    for flags in [
        vec!["--data-dir", "/nonexistent"],
        vec!["--database-url", "postgres://x@127.0.0.1:1/y"],
        vec!["--config", "/nonexistent.toml"],
    ] {
        let out = Command::new(binary("actiongate"))
            .args(&flags)
            .args(["pending", "--url", "http://127.0.0.1:1", "--key", "agk_x"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains("--config, --data-dir and --database-url are for"),
            "{err}"
        );
    }
    let out = Command::new(binary("actiongate"))
        .env("ACTIONGATE_CONFIG", "/nonexistent.toml")
        .args(["pending", "--url", "http://127.0.0.1:1", "--key", "agk_x"])
        .output()
        .unwrap();
    // Unreachable (6), not refused.
    assert_eq!(out.status.code(), Some(6), "{out:?}");
}

/// A bad setting stops `serve` before anything is made: no data dir, no
/// admin key printed or written.
#[test]
fn a_bad_setting_stops_serve_before_it_makes_the_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let out = Command::new(binary("actiongate"))
        .arg("--data-dir")
        .arg(&data)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env("ACTIONGATE_SESSIONS__IDLE_TIMEOUT", "0s")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("sessions.idle_timeout"), "{err}");
    assert!(!err.contains("agk_"), "{err}");
    assert!(!data.exists(), "the data dir was made");
}

/// A second daemon on the SQLite database another one serves is refused
/// at start, in one line: it would keep caches (profiles, grants, keys)
/// the first one's changes never clear. Once the first is gone it starts.
#[test]
fn a_second_daemon_on_one_sqlite_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let first = Daemon::start(dir.path(), &[]);
    let mut second = common::daemon::serve_command(dir.path(), free_port(), &[])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = second.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = second.kill();
            let _ = second.wait();
            panic!("the second daemon started and serves the same database");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success());
    let mut err = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut err).unwrap();
    assert!(
        err.contains("another actiongate serves the database"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(first.terminate().success());
    // Let go however the daemon ends: after kill -9 too.
    Daemon::start(dir.path(), &[]).kill9();
    drop(Daemon::start(dir.path(), &[]));
}

#[test]
fn keys_commands_work_against_the_data_dir() {
    let dir = tempfile::tempdir().unwrap();
    let out = cli(dir.path(), &["migrate"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = cli(
        dir.path(),
        &[
            "keys", "create", "--role", "agent", "--agent", "bot", "--name", "bot key", "--json",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let created: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(created["role"], "agent");
    assert_eq!(created["agent"], "bot");
    let key = created["key"].as_str().unwrap().to_owned();

    let out = cli(dir.path(), &["keys", "create", "--role", "agent"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("pass --agent NAME"), "{err}");
    let out = cli(dir.path(), &["keys", "create", "--role", "root"]);
    assert!(!out.status.success());

    let out = cli(dir.path(), &["keys", "list"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("bot key") && table.contains("active"),
        "{table}"
    );
    assert!(!table.contains(&key));

    // The key works against a daemon on the same data dir, until revoked.
    let d = Daemon::start(dir.path(), &[]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = client();
    let (s, _) = rt.block_on(call(
        &client,
        reqwest::Method::POST,
        format!("{}/v1/check", d.base),
        &key,
        Some(json!({"tool": "a", "detail": "b"})),
    ));
    assert_eq!(s, 200);
    let out = cli(
        dir.path(),
        &["keys", "revoke", created["id"].as_str().unwrap()],
    );
    assert!(out.status.success());
    // The daemon does not see a revocation made behind its back at once: it
    // trusts a key it looked up for a second (revoking over the API is
    // immediate). Within two seconds the key must be refused.
    let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let status = loop {
        let (s, _) = rt.block_on(call(
            &client,
            reqwest::Method::POST,
            format!("{}/v1/check", d.base),
            &key,
            Some(json!({"tool": "a", "detail": "b"})),
        ));
        if s == 401 || std::time::Instant::now() > until {
            break s;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(status, 401);
    let out = cli(dir.path(), &["keys", "revoke", "key_nope"]);
    assert!(!out.status.success());
}

/// The mode bits of `path` that say who may use it.
#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// The database holds webhook secrets and every agent's actions, so a data
/// dir the daemon makes, and the database files in it, are its owner's alone.
#[cfg(unix)]
#[test]
fn the_data_dir_and_the_database_are_private() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("nested").join("data");
    let d = Daemon::start(&data, &[]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = client();
    rt.block_on(async {
        let agent = agent_key(&client, &d.base, &admin_key(&data), "a1", "open").await;
        make(&client, &d.base, &agent).await;
    });
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&dir.path().join("nested")), 0o700);
    for file in [
        "actiongate.db",
        "actiongate.db-wal",
        "actiongate.db-shm",
        "admin.key",
    ] {
        assert_eq!(mode(&data.join(file)), 0o600, "{file}");
    }
    // `migrate` on a new data dir makes it the same way.
    let other = dir.path().join("other");
    let out = cli(&other, &["migrate"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(mode(&other), 0o700);
    assert_eq!(mode(&other.join("actiongate.db")), 0o600);

    // Opened up by hand since: each is named in a warning at the next start.
    d.terminate();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(
        data.join("admin.key"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    let d = Daemon::start(&data, &[]);
    let mut lines = Vec::new();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while std::time::Instant::now() < until
        && !(lines
            .iter()
            .any(|l: &String| l.contains("the data dir is open"))
            && lines
                .iter()
                .any(|l| l.contains("the admin key file is open")))
    {
        if let Ok(l) = d.stderr.recv_timeout(std::time::Duration::from_millis(200)) {
            lines.push(l);
        }
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains("the data dir is open") && l.contains("chmod 700")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("the admin key file is open") && l.contains("chmod 600")),
        "{lines:?}"
    );
    d.terminate();
}

/// Reading or revoking keys, or exporting the audit log, of a data dir with
/// no database is a mistake (a mistyped path): a one-line error, and no
/// empty database left behind.
#[test]
fn commands_that_read_the_database_refuse_a_data_dir_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo");
    for args in [
        &["keys", "list"][..],
        &["keys", "revoke", "key_0000000000000000"],
        &["audit", "export"],
    ] {
        let out = cli(&typo, args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains("no database"), "{args:?}: {err}");
        assert!(!typo.join("actiongate.db").exists(), "{args:?}");
    }
}

/// A daemon always has an admin: keys made with the CLI before the first
/// start (for agents only) or every admin key revoked, the next start makes
/// one, prints it once and writes it to `admin.key`.
#[test]
fn a_start_with_no_active_admin_key_makes_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = cli(
        dir.path(),
        &["keys", "create", "--role", "agent", "--agent", "bot"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let d = Daemon::start(dir.path(), &[]);
    let first = admin_key(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = client();
    let keys_url = format!("{}/v1/keys", d.base);
    let (s, keys) = rt.block_on(call(&client, reqwest::Method::GET, keys_url, &first, None));
    assert_eq!(s, 200, "{keys}");
    let admin_id = keys
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["role"] == "admin")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (s, _) = rt.block_on(call(
        &client,
        reqwest::Method::DELETE,
        format!("{}/v1/keys/{admin_id}", d.base),
        &first,
        None,
    ));
    assert_eq!(s, 200);
    assert!(d.terminate().success());

    let d = Daemon::start(dir.path(), &[]);
    let second = admin_key(dir.path());
    assert_ne!(first, second);
    let keys_url = format!("{}/v1/keys", d.base);
    let (s, _) = rt.block_on(call(
        &client,
        reqwest::Method::GET,
        keys_url.clone(),
        &second,
        None,
    ));
    assert_eq!(s, 200);
    let (s, _) = rt.block_on(call(&client, reqwest::Method::GET, keys_url, &first, None));
    assert_eq!(s, 401);
}

/// A key revoked with the CLI, behind the daemon's back, no longer holds
/// an event stream open: the daemon reads the revoked keys twice a second,
/// so the stream ends within about a second, long before its next
/// heartbeat (15 s by default).
#[test]
fn a_key_revoked_with_the_cli_loses_its_open_stream_within_a_second() {
    use futures::StreamExt;
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let admin = admin_key(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = client();
    let (s, created) = rt.block_on(call(
        &client,
        reqwest::Method::POST,
        format!("{}/v1/keys", d.base),
        &admin,
        Some(json!({"role": "operator"})),
    ));
    assert_eq!(s, 201, "{created}");
    let key = created["key"].as_str().unwrap().to_owned();
    let mut body = rt.block_on(async {
        let resp = client
            .get(format!("{}/v1/events", d.base))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200);
        resp.bytes_stream()
    });
    let out = cli(
        dir.path(),
        &["keys", "revoke", created["id"].as_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let revoked = Instant::now();
    let ended = rt.block_on(async {
        let until = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            match tokio::time::timeout_at(until, body.next()).await {
                Ok(Some(Ok(_))) => continue,
                Ok(None) | Ok(Some(Err(_))) => break true,
                Err(_) => break false,
            }
        }
    });
    assert!(ended, "the stream of a revoked key stayed open");
    // About a second; the slack is for a loaded machine, and still well
    // short of the heartbeat that caught it before.
    let took = revoked.elapsed();
    assert!(
        took < Duration::from_secs(4),
        "the stream ended after {took:?}"
    );
}

/// A long-poll of a key revoked with the CLI ends with a 401 problem
/// within about a second, long before its wait runs out.
#[test]
fn a_long_poll_of_a_key_revoked_with_the_cli_ends_with_401() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let admin = admin_key(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = client();
    let (s, created) = rt.block_on(call(
        &client,
        reqwest::Method::POST,
        format!("{}/v1/keys", d.base),
        &admin,
        Some(json!({"role": "agent", "agent": "a1"})),
    ));
    assert_eq!(s, 201, "{created}");
    let key = created["key"].as_str().unwrap().to_owned();
    // No profile: the default (`guarded`) asks, so the action stays pending.
    let pending = rt.block_on(make(&client, &d.base, &key));
    let url = format!(
        "{}/v1/actions/{}?wait=30",
        d.base,
        pending["id"].as_str().unwrap()
    );
    let poll = rt.spawn({
        let client = client.clone();
        let key = key.clone();
        async move { call(&client, reqwest::Method::GET, url, &key, None).await }
    });
    std::thread::sleep(Duration::from_millis(500));
    let out = cli(
        dir.path(),
        &["keys", "revoke", created["id"].as_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let revoked = Instant::now();
    let (s, problem) = rt.block_on(poll).unwrap();
    let took = revoked.elapsed();
    assert_eq!(s, 401, "{problem}");
    assert!(
        problem["detail"].as_str().unwrap().contains("revoked"),
        "{problem}"
    );
    // About a second; the slack is for a loaded machine.
    assert!(
        took < Duration::from_secs(4),
        "the poll ended after {took:?}"
    );
}

#[test]
fn kill_9_loses_no_acknowledged_request_and_overdue_actions_expire_on_restart() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let admin = admin_key(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = client();
    let base = d.base.clone();
    let (acked, short_id) = rt.block_on(async {
        let agent = agent_key(&client, &base, &admin, "a1", "standard").await;
        // One action whose deadline will pass while the daemon is down.
        let (_, short) = call(
            &client,
            reqwest::Method::POST,
            format!("{base}/v1/actions"),
            &agent,
            Some(json!({"tool": "bash", "detail": "make", "timeout": "1s"})),
        )
        .await;
        // 200 acknowledged requests from 8 concurrent clients.
        let mut tasks = Vec::new();
        for w in 0..8 {
            let client = client.clone();
            let base = base.clone();
            let agent = agent.clone();
            tasks.push(tokio::spawn(async move {
                let mut got = Vec::new();
                for i in 0..25 {
                    let detail = if i % 2 == 0 {
                        format!("create /f{w}-{i}")
                    } else {
                        format!("push {w}-{i}")
                    };
                    let tool = if i % 2 == 0 { "file" } else { "git" };
                    let (s, body) = call(
                        &client,
                        reqwest::Method::POST,
                        format!("{base}/v1/actions"),
                        &agent,
                        Some(json!({"tool": tool, "detail": detail})),
                    )
                    .await;
                    assert_eq!(s, 201);
                    got.push(body);
                }
                got
            }));
        }
        let mut acked = Vec::new();
        for t in tasks {
            acked.extend(t.await.unwrap());
        }
        (acked, short["id"].as_str().unwrap().to_owned())
    });
    assert_eq!(acked.len(), 200);
    d.kill9();
    std::thread::sleep(Duration::from_millis(1500));

    let d = Daemon::start(dir.path(), &[]);
    let base = d.base.clone();
    rt.block_on(async {
        for a in &acked {
            let (s, now) = call(
                &client,
                reqwest::Method::GET,
                format!("{base}/v1/actions/{}", a["id"].as_str().unwrap()),
                &admin,
                None,
            )
            .await;
            assert_eq!(s, 200);
            assert_eq!(&now, a, "an acknowledged action changed across kill -9");
        }
        let (_, short) = call(
            &client,
            reqwest::Method::GET,
            format!("{base}/v1/actions/{short_id}?wait=5"),
            &admin,
            None,
        )
        .await;
        assert_eq!(short["status"], "expired", "{short}");
    });
}

#[test]
fn settings_layer_defaults_file_env_and_flags() {
    let dir = tempfile::tempdir().unwrap();
    let port_file = free_port();
    let port_flag = free_port();
    let cfg = dir.path().join("ag.toml");
    std::fs::write(
        &cfg,
        format!("listen = \"127.0.0.1:{port_file}\"\n[actions]\nmax_wait_seconds = 5\n"),
    )
    .unwrap();
    // The file's port is overridden by the flag; env overrides the file.
    let mut child = Command::new(binary("actiongate"))
        .arg("serve")
        .arg("--config")
        .arg(&cfg)
        .arg("--data-dir")
        .arg(dir.path())
        .arg("--listen")
        .arg(format!("127.0.0.1:{port_flag}"))
        .env("ACTIONGATE_ACTIONS__MAX_WAIT_SECONDS", "7")
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port_flag}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while ureq_get(&format!("{base}/healthz")) != Ok(200) {
        assert!(
            Instant::now() < deadline,
            "daemon not up on the flag's port"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let admin = admin_key(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = client();
    rt.block_on(async {
        let (_, k) = call(
            &client,
            reqwest::Method::POST,
            format!("{base}/v1/keys"),
            &admin,
            Some(json!({"role": "agent", "agent": "a"})),
        )
        .await;
        let agent = k["key"].as_str().unwrap();
        call(
            &client,
            reqwest::Method::PUT,
            format!("{base}/v1/agents/a"),
            &admin,
            Some(json!({"profile": "open"})),
        )
        .await;
        let (s, _) = call(
            &client,
            reqwest::Method::POST,
            format!("{base}/v1/actions?wait=7"),
            agent,
            Some(json!({"tool": "t", "detail": "d", "timeout": "1m"})),
        )
        .await;
        assert_eq!(s, 201, "env should raise max_wait to 7");
        let (s, _) = call(
            &client,
            reqwest::Method::POST,
            format!("{base}/v1/actions?wait=8"),
            agent,
            Some(json!({"tool": "t", "detail": "d"})),
        )
        .await;
        assert_eq!(s, 422);
    });
    let _ = child.kill();
    let _ = child.wait();

    // A broken config file, or a value out of its range, is a one-line
    // error and a non-zero exit.
    for (text, says) in [
        ("listen = 5\n", "listen"),
        (
            "[storage]\ncommit_delay = \"1s\"\n",
            "storage.commit_delay: at most 100ms",
        ),
    ] {
        std::fs::write(&cfg, text).unwrap();
        let out = Command::new(binary("actiongate"))
            .arg("serve")
            .arg("--config")
            .arg(&cfg)
            .arg("--data-dir")
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{err}");
    }
}

/// The value of an unlabelled metric in Prometheus text.
fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
}

#[test]
fn without_subscriptions_an_action_costs_one_commit() {
    let dir = tempfile::tempdir().unwrap();
    let d = Daemon::start(dir.path(), &[]);
    let admin = admin_key(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = client();
    let base = d.base.clone();
    let commits = || async {
        let text = client
            .get(format!("{base}/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        metric(&text, "actiongate_store_commits_total")
    };
    rt.block_on(async {
        // `guarded`: every action waits for a human, with a deadline.
        let agent = agent_key(&client, &base, &admin, "a1", "guarded").await;
        let before = commits().await;
        for _ in 0..20 {
            assert_eq!(make(&client, &base, &agent).await["status"], "pending");
        }
        let after = commits().await;
        // One each. Filling an empty webhook outbox after every commit, and
        // an expiry sweep for every new deadline, made it 40 to 60.
        assert!(after - before >= 20.0, "commits are counted");
        assert!(
            after - before <= 22.0,
            "20 actions took {} commits",
            after - before
        );
    });
    d.terminate();
}

/// The CPUs of a `Cpus_allowed_list:` line in a /proc status file ("0-3,6").
fn allowed_cpus(status: &str) -> Vec<usize> {
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .unwrap()
        .trim();
    let mut cpus = Vec::new();
    for part in list.split(',') {
        match part.split_once('-') {
            Some((a, b)) => cpus.extend(a.parse::<usize>().unwrap()..=b.parse().unwrap()),
            None => cpus.push(part.parse().unwrap()),
        }
    }
    cpus
}

#[test]
fn writer_cpu_gives_the_writer_a_cpu_no_other_thread_uses() {
    let mine = allowed_cpus(&std::fs::read_to_string("/proc/self/status").unwrap());
    let dir = tempfile::tempdir().unwrap();
    // A CPU the daemon may not use, or its only one: a one-line error, and
    // no daemon.
    let outside = mine.last().unwrap() + 1;
    let mut refused = vec![(outside, "is not one this process may run on")];
    if mine.len() == 1 {
        refused.push((mine[0], "is the only one this process may run on"));
    }
    for (cpu, says) in refused {
        let out = Command::new(binary("actiongate"))
            .arg("serve")
            .arg("--data-dir")
            .arg(dir.path())
            .arg("--listen")
            .arg(format!("127.0.0.1:{}", free_port()))
            .env("ACTIONGATE_STORAGE__WRITER_CPU", cpu.to_string())
            .output()
            .unwrap();
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("storage.writer_cpu = {cpu}: CPU {cpu} {says}")),
            "{err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    if mine.len() == 1 {
        return;
    }

    let cpu = *mine.last().unwrap();
    let d = Daemon::start(
        dir.path(),
        &[("ACTIONGATE_STORAGE__WRITER_CPU", &cpu.to_string())],
    );
    let admin = admin_key(dir.path());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let client = client();
    let base = d.base.clone();
    rt.block_on(async {
        // New actions go through the writer, on its CPU.
        let agent = agent_key(&client, &base, &admin, "a1", "open").await;
        for _ in 0..5 {
            assert_eq!(make(&client, &base, &agent).await["status"], "approved");
        }
    });
    // One thread, the writer (a thread of the runtime's), runs on `cpu`
    // alone; every other thread of the daemon stays off it.
    let tasks = format!("/proc/{}/task", d.child.id());
    let mut on_cpu = Vec::new();
    let mut runtime_threads = 0;
    for task in std::fs::read_dir(&tasks).unwrap() {
        let task = task.unwrap().path();
        let name = std::fs::read_to_string(task.join("comm")).unwrap();
        let cpus = allowed_cpus(&std::fs::read_to_string(task.join("status")).unwrap());
        if cpus == [cpu] {
            on_cpu.push(name.trim().to_owned());
        } else {
            runtime_threads += usize::from(name.trim() == "tokio-rt-worker");
            assert!(
                !cpus.contains(&cpu),
                "{} ({name:?}) may run on CPU {cpu}: {cpus:?}",
                task.display()
            );
        }
    }
    assert_eq!(on_cpu, ["tokio-rt-worker"], "threads on CPU {cpu} alone");
    // As many runtime workers as without the setting: one a CPU the daemon
    // may use, the writer's included (it moves threads, not their number).
    assert!(
        runtime_threads >= mine.len(),
        "{runtime_threads} runtime workers for {} CPUs",
        mine.len()
    );
    d.terminate();
}
