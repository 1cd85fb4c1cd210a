//! Operations endpoints: health, readiness, metrics.

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::Operator;
use crate::config::MetricsAuth;
use crate::error::{ApiError, ApiResult, Problem};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics_text))
}

/// Health answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`.
    pub status: String,
    /// Daemon version.
    pub version: String,
    /// What works less than it should without making the daemon unready
    /// (`/readyz` only): a chat connector that receives nothing, keyed
    /// `connectors.<chat>`. Absent when all is well.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<std::collections::BTreeMap<String, String>>,
}

/// The process is up.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "Up", body = Health)))]
pub async fn healthz() -> axum::Json<Health> {
    axum::Json(Health {
        status: "ok".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        details: None,
    })
}

/// The database answers and its migrations are applied.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Ready", body = Health),
        (status = 503, description = "Not ready", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn readyz(State(state): State<AppState>) -> ApiResult<axum::Json<Health>> {
    if state.gate().shutdown().is_cancelled() {
        return Err(ApiError::unavailable("shutting down"));
    }
    state.gate().ready().await.map_err(|e| match e.code {
        actiongate_gate::ErrorCode::StorageFull => {
            ApiError::unavailable("the database or disk is full: writes fail until space is freed")
        }
        actiongate_gate::ErrorCode::DatabaseBusy => ApiError::unavailable(
            "the database is locked by another process: writes fail until it lets go",
        ),
        _ => {
            tracing::warn!(error = %e, "not ready");
            ApiError::unavailable(format!("database not ready: {}", e.detail))
        }
    })?;
    // A chat that receives nothing does not stop the gate: shown, not
    // unready.
    let problems: std::collections::BTreeMap<String, String> = state
        .connectors()
        .map(|c| c.problems())
        .unwrap_or_default()
        .into_iter()
        .map(|(chat, what)| (format!("connectors.{chat}"), what))
        .collect();
    Ok(axum::Json(Health {
        status: "ready".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        details: (!problems.is_empty()).then_some(problems),
    }))
}

/// Prometheus text exposition; with `metrics.auth = "operator"`, for
/// operator and admin keys only.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses(
        (status = 200, description = "Prometheus text format", body = String, content_type = "text/plain"),
        (status = 401, description = "No or unknown key (metrics.auth = operator)", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an operator (metrics.auth = operator)", body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn metrics_text(
    State(state): State<AppState>,
    operator: Result<Operator, ApiError>,
) -> ApiResult<impl IntoResponse> {
    if state.settings().metrics.auth == MetricsAuth::Operator {
        operator?;
    }
    match state.gate().pending_counts().await {
        Ok(n) => {
            metrics::gauge!("actiongate_pending_actions").set(n.actions as f64);
            metrics::gauge!("actiongate_pending_grant_requests").set(n.grant_requests as f64);
            metrics::gauge!("actiongate_pending_plans").set(n.plans as f64);
        }
        Err(e) => tracing::warn!(error = %e, "counting what waits for a human failed"),
    }
    metrics::gauge!("actiongate_long_polls_waiting").set(state.gate().waiters().open() as f64);
    let writes = state.gate().write_stats();
    metrics::counter!("actiongate_store_commits_total").absolute(writes.commits);
    metrics::counter!("actiongate_store_writes_total").absolute(writes.jobs);
    metrics::counter!("actiongate_log_lines_dropped_total").absolute(crate::log_sink::dropped());
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics().render(),
    ))
}
