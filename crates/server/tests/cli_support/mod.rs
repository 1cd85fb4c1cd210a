//! Running the built `actiongate` binary against a `TestApp`, and the
//! minimal `fs` handler the outbox follower's actions need.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::process::Stdio;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::common::TestApp;

/// What a run of the binary produced.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:?}"))
    }
}

/// A command for the binary with a clean environment for its settings.
pub fn command(url: &str, key: &str) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_actiongate"));
    for (k, _) in std::env::vars() {
        if k.starts_with("ACTIONGATE_") {
            cmd.env_remove(k);
        }
    }
    cmd.env("ACTIONGATE_URL", url)
        .env("ACTIONGATE_KEY", key)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

/// Runs the binary to completion.
pub async fn run(url: &str, key: &str, args: &[&str]) -> Run {
    run_with_stdin(url, key, args, None).await
}

/// Runs the binary with `stdin` as its input.
pub async fn run_with_stdin(url: &str, key: &str, args: &[&str], stdin: Option<&[u8]>) -> Run {
    use tokio::io::AsyncWriteExt;
    let mut cmd = command(url, key);
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    if stdin.is_some() {
        cmd.stdin(Stdio::piped());
    }
    let mut child = cmd.spawn().unwrap();
    if let Some(bytes) = stdin {
        let mut pipe = child.stdin.take().unwrap();
        pipe.write_all(bytes).await.unwrap();
        drop(pipe);
    }
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        child.wait_with_output(),
    )
    .await
    .expect("the command did not finish")
    .unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Runs the binary against the app.
pub async fn ag(app: &TestApp, key: &str, args: &[&str]) -> Run {
    run(&app.base, key, args).await
}

/// A URL where nothing listens.
pub async fn dead_url() -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    format!("http://{addr}")
}

/// Registers a minimal `fs` handler with the reference executor's action
/// names and params (nothing listens at its URL: actions stay approved).
pub async fn register_fs(app: &TestApp) {
    let params = json!({
        "type": "object",
        "properties": {
            "filepath": {"type": "string"},
            "content": {"type": "string"},
            "reason": {"type": "string"}
        },
        "additionalProperties": false
    });
    let actions: Vec<Value> = [
        "create_file",
        "update_file",
        "update_readme",
        "read_file",
        "execute_command",
    ]
    .iter()
    .map(|name| {
        json!({
            "name": name,
            "description": format!("{name} (test)"),
            "params_schema": params,
            "permission": "fs.use",
            "scope": {"path": "/filepath"},
            "detail": format!("{name} {{filepath}}"),
        })
    })
    .collect();
    let handler = json!({
        "id": "fs",
        "name": "Files",
        "description": "Reference executor stand-in",
        "url": "http://127.0.0.1:9/fs",
        "permissions": [{
            "name": "fs.use",
            "description": "Use the file system",
            "parameters_schema": {"type": "object", "properties": {"path": {"type": "string"}}}
        }],
        "actions": actions,
    });
    let (s, body) = app
        .call(
            Method::POST,
            "/v1/handlers",
            Some(&app.admin),
            Some(handler),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{body}");
}

/// Every action the operator sees, oldest first.
pub async fn all_actions(app: &TestApp) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = "/v1/actions?limit=200".to_owned();
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let (s, page) = app
            .call(Method::GET, &path, Some(&app.operator), None)
            .await;
        assert_eq!(s, StatusCode::OK, "{page}");
        out.extend(page["items"].as_array().unwrap().iter().cloned());
        cursor = page["next_cursor"].as_str().map(str::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    out.reverse();
    out
}

/// A proxy in front of `base` that passes every request on but answers
/// the first POST with 503 (what it made was made, its answer lost), as a
/// busy daemon or a proxy may; its URL and how many POSTs it saw.
pub async fn lossy_proxy(base: &str) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use axum::response::IntoResponse;
    use std::sync::atomic::Ordering;
    let posts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (base, seen, http) = (base.to_owned(), posts.clone(), reqwest::Client::new());
    let app = axum::Router::new().fallback(move |req: axum::extract::Request| {
        let (base, seen, http) = (base.clone(), seen.clone(), http.clone());
        async move {
            let (parts, body) = req.into_parts();
            let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
            let target = parts.uri.path_and_query().map_or("", |p| p.as_str());
            let mut out = http
                .request(parts.method.clone(), format!("{base}{target}"))
                .body(body);
            for name in ["authorization", "content-type", "accept", "x-actiongate-channel"] {
                if let Some(v) = parts.headers.get(name) {
                    out = out.header(name, v);
                }
            }
            let resp = out.send().await.unwrap();
            let (status, kind) = (resp.status(), resp.headers().get("content-type").cloned());
            let bytes = resp.bytes().await.unwrap();
            if parts.method == Method::POST && seen.fetch_add(1, Ordering::SeqCst) == 0 {
                let lost = r#"{"title":"Service Unavailable","status":503,"detail":"answer lost in this test"}"#;
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [("content-type", "application/problem+json")],
                    lost,
                )
                    .into_response();
            }
            let mut answer = (status, bytes).into_response();
            if let Some(kind) = kind {
                answer.headers_mut().insert("content-type", kind);
            }
            answer
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}"), posts)
}
