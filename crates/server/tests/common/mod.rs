//! `TestApp`: the real router and daemon on 127.0.0.1:0 over a fresh SQLite
//! file in a temporary directory, spoken to over real HTTP.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::time::Duration;

use actiongate_server::config::Settings;
use reqwest::{Client, Method, Response, StatusCode};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

pub struct TestApp {
    pub base: String,
    pub client: Client,
    pub admin: String,
    pub operator: String,
    /// Agent key for agent "agent-1".
    pub agent: String,
    pub shutdown: CancellationToken,
    pub task: Option<Daemon>,
    pub dir: tempfile::TempDir,
}

type Daemon = tokio::task::JoinHandle<anyhow::Result<()>>;

/// Starts the daemon on `dir` and waits until it answers with its admin key
/// written.
async fn boot(
    dir: &std::path::Path,
    client: &Client,
    tweak: impl FnOnce(&mut Settings),
) -> (String, CancellationToken, Daemon) {
    let mut settings = Settings {
        data_dir: dir.to_path_buf(),
        ..Settings::default()
    };
    settings.actions.min_timeout = "1s".parse().unwrap();
    settings.storage.durability = actiongate_gate::storage::Durability::Normal;
    tweak(&mut settings);
    settings.validate().unwrap();
    // The lock a stopped daemon held on its database is let go when its
    // file closes, but tests run side by side in this one process and some
    // spawn programs: a child between fork and exec holds a copy of every
    // open file for a moment, and with it the lock. A restart that meets
    // that moment is tried again.
    for attempt in 0.. {
        match start(dir, client, settings.clone()).await {
            Ok(started) => return started,
            Err(e) if attempt < 40 && e.contains("serves the database") => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("daemon exited during start-up: {e}"),
        }
    }
    unreachable!()
}

async fn start(
    dir: &std::path::Path,
    client: &Client,
    settings: Settings,
) -> Result<(String, CancellationToken, Daemon), String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(actiongate_server::app::run(
        settings,
        listener,
        shutdown.clone(),
    ));
    let key_path = dir.join("admin.key");
    // Generous: a loaded CI machine can take seconds to start a daemon.
    for _ in 0..1200 {
        if task.is_finished() {
            return Err(format!("{:?}", task.await));
        }
        if let Ok(k) = std::fs::read_to_string(&key_path)
            && !k.trim().is_empty()
            && client.get(format!("{base}/healthz")).send().await.is_ok()
        {
            return Ok((base, shutdown, task));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("daemon did not start");
}

impl TestApp {
    pub async fn spawn() -> TestApp {
        Self::spawn_with(|_| {}).await
    }

    pub async fn spawn_with(tweak: impl FnOnce(&mut Settings)) -> TestApp {
        // reqwest's TLS needs a crypto provider before any client is built.
        actiongate_cli::install_tls_provider();
        let dir = tempfile::tempdir().unwrap();
        let client = Client::builder()
            .timeout(Duration::from_secs(90))
            .build()
            .unwrap();
        let (base, shutdown, task) = boot(dir.path(), &client, tweak).await;
        let admin = std::fs::read_to_string(dir.path().join("admin.key"))
            .unwrap()
            .trim()
            .to_owned();
        let mut app = TestApp {
            base,
            client,
            admin,
            operator: String::new(),
            agent: String::new(),
            shutdown,
            task: Some(task),
            dir,
        };
        app.operator = app.key("operator", None).await;
        app.agent = app.key("agent", Some("agent-1")).await;
        app
    }

    /// Stops the daemon and starts it again on the same data dir (a new
    /// port; the keys stay valid).
    pub async fn restart_with(mut self, tweak: impl FnOnce(&mut Settings)) -> TestApp {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.await.unwrap().unwrap();
        }
        let (base, shutdown, task) = boot(self.dir.path(), &self.client, tweak).await;
        TestApp {
            base,
            shutdown,
            task: Some(task),
            ..self
        }
    }

    /// A new operator key that is person `name`'s (only people count
    /// toward a quorum); the key.
    pub async fn person_operator(&self, name: &str) -> String {
        let (id, key) = self.issue("operator", None).await;
        let (status, body) = self
            .call(
                Method::POST,
                "/v1/people",
                Some(&self.admin.clone()),
                Some(json!({"name": name, "keys": [id]})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        key
    }

    /// Issues a key through the API.
    pub async fn key(&self, role: &str, agent: Option<&str>) -> String {
        self.issue(role, agent).await.1
    }

    /// A new key: its id and the key.
    pub async fn issue(&self, role: &str, agent: Option<&str>) -> (String, String) {
        let (status, body) = self
            .call(
                Method::POST,
                "/v1/keys",
                Some(&self.admin.clone()),
                Some(json!({"role": role, "agent": agent})),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        (
            body["id"].as_str().unwrap().to_owned(),
            body["key"].as_str().unwrap().to_owned(),
        )
    }

    /// Sets an agent's profile.
    pub async fn profile(&self, agent: &str, profile: Value) {
        let (status, body) = self
            .call(
                Method::PUT,
                &format!("/v1/agents/{agent}"),
                Some(&self.admin.clone()),
                Some(json!({"profile": profile})),
            )
            .await;
        assert!(status.is_success(), "{body}");
    }

    pub async fn send(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
    ) -> Response {
        let mut req = self.client.request(method, format!("{}{path}", self.base));
        if let Some(k) = key {
            req = req.bearer_auth(k);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        req.send().await.unwrap()
    }

    pub async fn call(
        &self,
        method: Method,
        path: &str,
        key: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let resp = self.send(method, path, key, body).await;
        let status = resp.status();
        let text = resp.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    /// Requests a decision-only action as agent-1.
    pub async fn request(&self, tool: &str, detail: &str) -> (StatusCode, Value) {
        let agent = self.agent.clone();
        self.call(
            Method::POST,
            "/v1/actions",
            Some(&agent),
            Some(json!({"tool": tool, "detail": detail})),
        )
        .await
    }

    /// The text of `GET /metrics` (read with the operator's key).
    pub async fn metrics(&self) -> String {
        self.client
            .get(format!("{}/metrics", self.base))
            .bearer_auth(&self.operator)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.await.unwrap().unwrap();
        }
    }
}
