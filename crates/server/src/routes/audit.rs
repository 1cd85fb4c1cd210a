//! `/v1/audit`: the tamper-evident export of the event log (operators).

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::Response;
use axum::routing::get;
use chrono::{DateTime, Utc};
use futures::TryStreamExt;
use serde::Deserialize;
use utoipa::IntoParams;

use crate::auth::Operator;
use crate::error::{ApiError, ApiQuery, ApiResult, Problem};
use crate::state::AppState;
use actiongate_gate::audit::{Range, export};

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new().route("/v1/audit", get(audit_export))
}

/// Range and format of an export.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuditQuery {
    /// Start at the first event written at or after this time (RFC 3339).
    #[serde(default, deserialize_with = "time_query")]
    pub since: Option<DateTime<Utc>>,
    /// Stop before the first event written at or after this time (RFC 3339).
    #[serde(default, deserialize_with = "time_query")]
    pub until: Option<DateTime<Utc>>,
    /// `jsonl` (the only format, and the default).
    #[param(pattern = "^jsonl$")]
    pub format: Option<String>,
}

/// A query's time, with an error that says what is expected.
fn time_query<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<DateTime<Utc>>, D::Error> {
    let text = String::deserialize(d)?;
    DateTime::parse_from_rfc3339(&text)
        .map(|t| Some(t.with_timezone(&Utc)))
        .map_err(|_| {
            serde::de::Error::custom("an RFC 3339 time such as 2026-01-31T09:00:00Z is expected")
        })
}

/// Export the event log as hash-chained JSON lines (operators).
///
/// One event per line in seq order, each with `prev_hash` and `hash` =
/// SHA-256 of the previous hash, a newline and the line's content as
/// canonical JSON (keys sorted, no whitespace) without those two fields.
/// An edited, inserted, removed or reordered line breaks the chain;
/// `actiongate audit verify FILE` checks a file. The first line chains from
/// the previous event's hash (or from the anchor kept when old events were
/// pruned; 64 zeros before the first event).
#[utoipa::path(
    get, path = "/v1/audit", tag = "audit",
    params(AuditQuery),
    responses(
        (status = 200, description = "JSON lines", body = String, content_type = "application/jsonl"),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an operator", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid range or format", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn audit_export(
    State(state): State<AppState>,
    Operator(_caller): Operator,
    ApiQuery(q): ApiQuery<AuditQuery>,
) -> ApiResult<Response> {
    if q.format.as_deref().is_some_and(|f| f != "jsonl") {
        return Err(ApiError::invalid("format", "the only format is jsonl"));
    }
    // An `until` before `since` is an empty range: the export has no lines.
    let range = Range {
        since: q.since,
        until: q.until,
    };
    let stream = export(state.gate().event_log(), range).map_err(|e| {
        // The body is cut short, which the client sees as an error.
        tracing::error!(error = %e, "audit export failed");
        std::io::Error::other("audit export failed")
    });
    let mut resp = Response::new(Body::from_stream(stream));
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/jsonl"),
    );
    Ok(resp)
}
