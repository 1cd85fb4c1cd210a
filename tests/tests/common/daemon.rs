//! A daemon started from the built binary on a free loopback port, for the
//! hardening tests (faults, audit, metrics): start, read its admin key and
//! stderr, stop it by its own PID.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{binary, call};

/// `actiongate serve` on `data` and loopback `port` with `env` on top of
/// the test defaults (warnings logged, 1 s shortest action timeout), its
/// stderr piped and stdout discarded.
pub fn serve_command(data: &Path, port: u16, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(binary("actiongate"));
    cmd.arg("serve")
        .arg("--data-dir")
        .arg(data)
        .arg("--listen")
        .arg(format!("127.0.0.1:{port}"))
        .env("ACTIONGATE_LOG", "warn")
        .env("ACTIONGATE_ACTIONS__MIN_TIMEOUT", "1s")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// A running `actiongate serve`.
pub struct Daemon {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    /// The data dir.
    pub data: PathBuf,
    stderr: std::sync::mpsc::Receiver<String>,
}

impl Daemon {
    /// Starts the daemon on `data` with `env` on top of the test defaults,
    /// and waits until `/healthz` answers.
    pub fn start(data: &Path, env: &[(&str, &str)]) -> Daemon {
        Daemon::start_logging_to(data, env, None)
    }

    /// [`Daemon::start`] with its stderr going to `log` instead of this
    /// process (no lines are read then).
    pub fn start_logging_to(
        data: &Path,
        env: &[(&str, &str)],
        log: Option<std::fs::File>,
    ) -> Daemon {
        let (mut child, port) = super::listen::spawn_listening(|port| {
            let mut cmd = serve_command(data, port, env);
            if let Some(file) = &log {
                cmd.stderr(file.try_clone().unwrap());
            }
            cmd
        });
        let (tx, rx) = std::sync::mpsc::channel();
        if let Some(err) = child.stderr.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(err).lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            });
        }
        let d = Daemon {
            child,
            base: format!("http://127.0.0.1:{port}"),
            data: data.to_owned(),
            stderr: rx,
        };
        d.wait_up();
        d
    }

    fn wait_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if self.healthz_blocking() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("daemon did not come up");
    }

    /// `GET /healthz` over a plain socket (callable from async tests).
    fn healthz_blocking(&self) -> bool {
        use std::io::{Read, Write};
        let addr = self.base["http://".len()..].parse().unwrap();
        let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200))
        else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        if s.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").is_err() {
            return false;
        }
        let mut head = [0u8; 12];
        s.read_exact(&mut head).is_ok() && head.ends_with(b"200")
    }

    /// The admin key the first start wrote.
    pub fn admin_key(&self) -> String {
        std::fs::read_to_string(self.data.join("admin.key"))
            .unwrap()
            .trim()
            .to_owned()
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its resident memory (`VmRSS`), in KiB.
    pub fn rss_kib(&self) -> u64 {
        self.status_kib("VmRSS:")
    }

    /// The most memory it has held (VmHWM), in KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        self.status_kib("VmHWM:")
    }

    fn status_kib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap()
    }

    /// The database file.
    pub fn database(&self) -> PathBuf {
        self.data.join("actiongate.db")
    }

    /// Every stderr line since the last call.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr.try_iter().collect()
    }

    /// SIGTERM, then waits (at most 15 s) for it to end.
    pub fn stop(self) {
        self.stop_within(Duration::from_secs(15));
    }

    /// SIGTERM, then waits at most `limit` for it to end.
    pub fn stop_within(mut self, limit: Duration) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.child.try_wait().unwrap().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("daemon did not stop on SIGTERM");
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What many black-box tests start from: a daemon on SQLite in a fresh data
/// dir, its admin key, an agent key for `bot` (profile left as the default)
/// and an operator key. Keep `dir` as long as `d`: the data dir must
/// outlive the daemon.
pub struct Keyed {
    pub d: Daemon,
    pub http: reqwest::Client,
    pub admin: String,
    pub agent: String,
    pub operator: String,
    pub dir: tempfile::TempDir,
}

impl Keyed {
    /// Starts the daemon with `env` on top of the test defaults and makes
    /// the keys.
    pub async fn start(env: &[(&str, &str)]) -> Keyed {
        let dir = tempfile::tempdir().unwrap();
        let d = Daemon::start(dir.path(), env);
        let http = super::client();
        let admin = d.admin_key();
        let agent = agent_key(&http, &d.base, &admin, "bot").await;
        let operator = role_key(&http, &d.base, &admin, "operator").await;
        Keyed {
            d,
            http,
            admin,
            agent,
            operator,
            dir,
        }
    }
}

/// Two daemons on one database of the shared Postgres cluster, with an
/// admin key and an operator key made through the first; `None` when
/// Postgres is not here (and not required). The daemons stop before their
/// data dirs go.
pub struct PgPair {
    pub daemons: Vec<Daemon>,
    pub http: reqwest::Client,
    pub admin: String,
    pub operator: String,
    pub dirs: [tempfile::TempDir; 2],
}

impl PgPair {
    pub async fn start() -> Option<PgPair> {
        let url = super::pg_cluster::Cluster::shared()?.database();
        let dirs = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let env = [("ACTIONGATE_STORAGE__DATABASE_URL", url.as_str())];
        let daemons: Vec<Daemon> = dirs.iter().map(|d| Daemon::start(d.path(), &env)).collect();
        let http = super::client();
        let admin = daemons[0].admin_key();
        let operator = role_key(&http, &daemons[0].base, &admin, "operator").await;
        Some(PgPair {
            daemons,
            http,
            admin,
            operator,
            dirs,
        })
    }
}

/// A new agent key for `agent` (its profile left as the default, `guarded`:
/// every action asks, so each is stored pending).
pub async fn agent_key(client: &reqwest::Client, base: &str, admin: &str, agent: &str) -> String {
    let (s, k) = call(
        client,
        reqwest::Method::POST,
        format!("{base}/v1/keys"),
        admin,
        Some(json!({"role": "agent", "agent": agent})),
    )
    .await;
    assert_eq!(s, 201, "{k}");
    k["key"].as_str().unwrap().to_owned()
}

/// A new key of `role` (`operator`, `admin`).
pub async fn role_key(client: &reqwest::Client, base: &str, admin: &str, role: &str) -> String {
    let (s, k) = call(
        client,
        reqwest::Method::POST,
        format!("{base}/v1/keys"),
        admin,
        Some(json!({"role": role})),
    )
    .await;
    assert_eq!(s, 201, "{k}");
    k["key"].as_str().unwrap().to_owned()
}

/// `POST /v1/actions` of a decision-only action; the raw response.
pub async fn request_action(
    client: &reqwest::Client,
    base: &str,
    agent: &str,
    tool: &str,
    detail: &str,
) -> reqwest::Response {
    client
        .post(format!("{base}/v1/actions"))
        .bearer_auth(agent)
        .json(&json!({"tool": tool, "detail": detail}))
        .send()
        .await
        .unwrap()
}

/// The status and JSON body of a response (`Null` when not JSON).
pub async fn status_json(resp: reqwest::Response) -> (u16, Option<String>, Value) {
    let status = resp.status().as_u16();
    let ctype = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (status, ctype, resp.json().await.unwrap_or(Value::Null))
}

/// Sets `agent`'s profile (admin key).
pub async fn set_profile(
    client: &reqwest::Client,
    base: &str,
    admin: &str,
    agent: &str,
    profile: Value,
) {
    let (s, b) = call(
        client,
        reqwest::Method::PUT,
        format!("{base}/v1/agents/{agent}"),
        admin,
        Some(json!({ "profile": profile })),
    )
    .await;
    assert!((200..300).contains(&s), "{b}");
}

/// A handler `files` with one permission, `fs.write` (any scope), and one
/// action, `write`; its webhook goes nowhere.
pub fn files_handler() -> Value {
    serde_json::json!({
        "id": "files", "name": "Files", "url": "http://127.0.0.1:9/hook",
        "permissions": [{"name": "fs.write", "parameters_schema": {"type": "object"}}],
        "actions": [{"name": "write", "permission": "fs.write", "params_schema": {"type": "object"}}]
    })
}

/// Registers a handler (admin key); its webhook secret.
pub async fn register_handler(
    client: &reqwest::Client,
    base: &str,
    admin: &str,
    registration: Value,
) -> String {
    let (s, b) = call(
        client,
        reqwest::Method::POST,
        format!("{base}/v1/handlers"),
        admin,
        Some(registration),
    )
    .await;
    assert_eq!(s, 201, "{b}");
    b["secret"].as_str().unwrap().to_owned()
}
