//! `POST /v1/agents/{id}/profile/replay`: what a candidate profile would
//! have decided otherwise over the agent's recorded actions (admins; reads
//! only). With `Accept: text/event-stream` the answer streams `progress`
//! events (`{"replayed": n}`) while it runs, then one `result` event (the
//! report) or one `error` event (a problem+json body); otherwise it is the
//! report as JSON.

use actiongate_api::replay::{ReplayBody, ReplayReport};
use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use crate::auth::Admin;
use crate::error::{ApiError, ApiJson, ApiPath, ApiResult, Problem};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new().route("/v1/agents/{id}/profile/replay", post(replay))
}

fn wants_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("text/event-stream"))
}

fn sse(event: &str, data: &serde_json::Value) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// Replay a candidate profile over an agent's recorded actions.
#[utoipa::path(
    post, path = "/v1/agents/{id}/profile/replay", tag = "agents",
    params(("id" = String, Path, description = "Agent id")),
    request_body = ReplayBody,
    responses(
        (status = 200, description = "The decisions that would change, grouped by old -> new outcome; with `Accept: text/event-stream`, `progress` events then a `result` (or `error`) event", body = ReplayReport),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid profile or since", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn replay(
    State(state): State<AppState>,
    Admin(caller): Admin,
    headers: HeaderMap,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ReplayBody>,
) -> ApiResult<Response> {
    let gate = state.gate().clone();
    if !wants_stream(&headers) {
        let report = gate
            .replay_profile(&caller, &id, &body.profile, body.since.as_deref(), None)
            .await?;
        return Ok(axum::Json(report).into_response());
    }
    // Bad input is answered as problem+json before any stream starts.
    let candidate = actiongate_gate::admin::compile_off_runtime(&body.profile).await?;
    actiongate_gate::replay::parse_since(body.since.as_deref(), chrono::Utc::now())?;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<u64>(64);
    let run = tokio::spawn(async move {
        gate.replay_compiled(&caller, &id, &candidate, body.since.as_deref(), Some(tx))
            .await
    });
    let stream = async_stream::stream! {
        while let Some(n) = rx.recv().await {
            yield Ok::<_, std::convert::Infallible>(sse("progress", &serde_json::json!({"replayed": n})));
        }
        let last = match run.await {
            Ok(Ok(report)) => sse("result", &serde_json::to_value(&report).unwrap_or_default()),
            Ok(Err(e)) => sse("error", &serde_json::to_value(ApiError::from(e).problem()).unwrap_or_default()),
            Err(_) => sse("error", &serde_json::json!({"title": "the replay failed", "status": 500})),
        };
        yield Ok(last);
    };
    let mut resp = Body::from_stream(stream).into_response();
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Ok(resp)
}
