//! `Exec`: the built `actiongate-executor` binary started on 127.0.0.1:0
//! over temporary root and state directories, spoken to over real HTTP with
//! deliveries signed like the daemon's.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use actiongate_executor::signing::Signer;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The secret tests sign with.
pub const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwJ7yjm3nNpBA=";

pub struct Exec {
    pub url: String,
    pub child: Child,
    pub root: tempfile::TempDir,
    pub state: tempfile::TempDir,
    pub client: reqwest::Client,
    pub signer: Signer,
    pub extra: Vec<String>,
}

static NEXT: AtomicU32 = AtomicU32::new(1);

/// A fresh action id.
pub fn new_id() -> String {
    format!(
        "act_{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_actiongate-executor")
}

/// Starts the binary; returns it and the URL it printed.
pub async fn spawn(args: &[String]) -> (Child, String) {
    let mut child = Command::new(bin())
        .args(args)
        .env("ACTIONGATE_KEY", "admin-key-that-commands-must-not-see")
        .env_remove("ACTIONGATE_EXECUTOR_SECRET")
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = BufReader::new(stdout).lines();
    let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .expect("the executor did not start in time")
        .unwrap()
        .expect("the executor exited before listening");
    let url = line
        .strip_prefix("actiongate-executor listening on ")
        .unwrap_or_else(|| panic!("unexpected first line: {line}"))
        .to_owned();
    (child, url)
}

impl Exec {
    pub async fn start() -> Exec {
        Self::start_with(&[]).await
    }

    pub async fn start_with(extra: &[&str]) -> Exec {
        let root = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        Self::start_in(root, state, extra.iter().map(|s| s.to_string()).collect()).await
    }

    pub async fn start_in(
        root: tempfile::TempDir,
        state: tempfile::TempDir,
        extra: Vec<String>,
    ) -> Exec {
        let mut args = vec![
            "--listen".to_owned(),
            "127.0.0.1:0".to_owned(),
            "--root".to_owned(),
            root.path().display().to_string(),
            "--state-dir".to_owned(),
            state.path().display().to_string(),
            "--secret".to_owned(),
            SECRET.to_owned(),
        ];
        args.extend(extra.iter().cloned());
        let (child, url) = spawn(&args).await;
        Exec {
            url,
            child,
            root,
            state,
            client: {
                actiongate_executor::install_tls_provider();
                reqwest::Client::builder()
                    .timeout(Duration::from_secs(60))
                    .build()
                    .unwrap()
            },
            signer: Signer::new(SECRET).unwrap(),
            extra,
        }
    }

    /// kill -9, then start again on the same directories.
    pub async fn kill9_and_restart(mut self) -> Exec {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
        let Exec {
            root, state, extra, ..
        } = self;
        Self::start_in(root, state, extra).await
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    pub fn journal(&self) -> Vec<Value> {
        read_jsonl(&self.state.path().join("agent_actions.jsonl"))
    }

    /// The delivery body the daemon sends.
    pub fn envelope(id: &str, action: &str, params: Value, attempt: u32) -> Value {
        json!({
            "type": "action.execute", "action_id": id, "handler": "fs",
            "action": action, "params": params, "agent": "agent-1",
            "attempt": attempt, "deadline": null
        })
    }

    /// Posts `body` with the given headers.
    pub async fn post_raw(&self, body: &[u8], headers: &[(&str, String)]) -> (StatusCode, Value) {
        let mut req = self
            .client
            .post(&self.url)
            .header("content-type", "application/json")
            .body(body.to_vec());
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let text = resp.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// Posts a delivery signed now with the right secret.
    pub async fn deliver_body(&self, id: &str, body: &Value) -> (StatusCode, Value) {
        let bytes = serde_json::to_vec(body).unwrap();
        let headers = self.signer.headers(id, &bytes).unwrap();
        self.post_raw(&bytes, &headers).await
    }

    pub async fn deliver_attempt(
        &self,
        id: &str,
        action: &str,
        params: Value,
        attempt: u32,
    ) -> (StatusCode, Value) {
        self.deliver_body(id, &Self::envelope(id, action, params, attempt))
            .await
    }

    /// A fresh action, attempt 1.
    pub async fn run(&self, action: &str, params: Value) -> (StatusCode, Value) {
        self.deliver_attempt(&new_id(), action, params, 1).await
    }
}

/// The file's whole lines: one the writer is still appending (a reader
/// can see it cut short) is left for the next read.
pub fn read_jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text[..text.rfind('\n').map_or(0, |i| i + 1)]
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}
