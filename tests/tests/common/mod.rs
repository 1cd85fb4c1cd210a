//! Helpers shared by the black-box tests: finding the built binaries, free
//! ports, and JSON calls over real HTTP.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

pub mod daemon;
pub mod executor;
pub mod listen;
pub mod raw_http;

/// A throwaway Postgres cluster, one per test process.
#[path = "../../support/pg_cluster.rs"]
pub mod pg_cluster;

/// `target/<profile>/<name>`, built by `cargo test --workspace` (the
/// server's and executor's integration tests make cargo build their
/// binaries) or `cargo build -p actiongate -p actiongate-executor`. With
/// `BLACKBOX_BIN_DIR` set, from that directory instead: to run these tests
/// against another build (an older one, to see a test fail there).
pub fn binary(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let built = exe.parent().and_then(Path::parent).unwrap().to_owned();
    let dir = std::env::var_os("BLACKBOX_BIN_DIR")
        .map(PathBuf::from)
        .unwrap_or(built);
    let bin = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.exists(),
        "{} is missing: run `cargo build -p actiongate -p actiongate-executor` or `cargo test --workspace`",
        bin.display()
    );
    bin
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A client with a 60 s timeout; reqwest's TLS (enabled by the daemon's
/// rustls-no-provider feature, unified into this build) needs a crypto
/// provider first.
pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// The value of an unlabelled metric of `/metrics` on `base` (0 while it
/// has none).
pub async fn metric(http: &reqwest::Client, base: &str, name: &str) -> f64 {
    let text = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// Sends `body` (if any) as JSON with the bearer `key`; the status and the
/// JSON answer (`Null` if it is not JSON).
pub async fn call(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: String,
    key: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = client.request(method, url).bearer_auth(key);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}
