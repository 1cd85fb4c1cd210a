//! The real daemon, in-process on port 0, for tests that need both sides.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, dead_code)]

use std::time::Duration;

use actiongate_server::config::Settings;
use reqwest::{Client, StatusCode};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub struct Daemon {
    pub base: String,
    pub admin: String,
    pub client: Client,
    pub shutdown: CancellationToken,
    _dir: tempfile::TempDir,
}

impl Daemon {
    pub async fn start() -> Daemon {
        Self::start_with(|_| {}).await
    }

    pub async fn start_with(tweak: impl FnOnce(&mut Settings)) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        let mut settings = Settings {
            data_dir: dir.path().to_path_buf(),
            ..Settings::default()
        };
        tweak(&mut settings);
        settings.validate().unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let shutdown = CancellationToken::new();
        tokio::spawn(actiongate_server::app::run(
            settings,
            listener,
            shutdown.clone(),
        ));
        let client = {
            actiongate_executor::install_tls_provider();
            Client::new()
        };
        let key_path = dir.path().join("admin.key");
        for _ in 0..400 {
            if let Ok(k) = std::fs::read_to_string(&key_path)
                && !k.trim().is_empty()
                && client.get(format!("{base}/healthz")).send().await.is_ok()
            {
                return Daemon {
                    base,
                    admin: k.trim().to_owned(),
                    client,
                    shutdown,
                    _dir: dir,
                };
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("daemon did not start");
    }

    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        key: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(key);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status();
        (status, resp.json().await.unwrap_or(Value::Null))
    }
}
