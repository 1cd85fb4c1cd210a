//! A bare axum server for bench/cost/run.sh: `POST /v1/check` parses a
//! `{"tool","detail"}` body and answers a small JSON decision, with none of
//! the daemon's work (no key lookup, no policy, no store). What it costs per
//! request is the floor of HTTP/1.1 + JSON on axum and tokio.
//!
//! Usage: `actiongate-cost-floor 127.0.0.1:PORT`. Like the daemon, it runs a
//! multi-threaded tokio runtime with one worker per CPU it may use.
//!
//! `GET /healthz` answers a small JSON status, as the daemon's does: the
//! floor of a GET.
//!
//! `POST /hook` answers `{"written":2}` to anything: bench/mcp/run.sh runs a
//! second copy as the executor of the handler action it measures.

use axum::Json;
use axum::Router;
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

/// The body the daemon's `POST /v1/check` takes.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Body {
    tool: String,
    detail: String,
}

/// A reply shaped like the daemon's.
#[derive(Serialize)]
struct Reply {
    action_string: String,
    result: &'static str,
}

/// What the daemon's `GET /healthz` answers.
#[derive(Serialize)]
struct Health {
    status: &'static str,
    version: &'static str,
}

async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
    })
}

async fn check(Json(body): Json<Body>) -> Json<Reply> {
    Json(Reply {
        action_string: format!("tool:{}:{}", body.tool, body.detail),
        result: "allow",
    })
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8099".to_owned());
    let app = Router::new()
        .route("/v1/check", post(check))
        .route("/healthz", get(healthz))
        .route(
            "/hook",
            post(|| async {
                (
                    [(axum::http::header::CONTENT_TYPE, "application/json")],
                    r#"{"written":2}"#,
                )
            }),
        )
        .route("/readyz", get(|| async { "ok" }));
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
}
