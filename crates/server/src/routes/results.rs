//! `POST /v1/actions/{id}/result`: an executor that answered 202 posts the
//! outcome later. It is authenticated by its signature, not a key: signed
//! with the handler's secret like the webhook it answers, within 5 minutes,
//! bound to the action in its URL (the body's `action_id`, or the
//! webhook-id), each webhook-id used once whether accepted or refused.

use axum::Router;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::routing::post;
use serde::Deserialize;
use utoipa::ToSchema;

use actiongate_gate::decisions::ExecutorResult;
use actiongate_gate::{Action, ActionStatus};

use crate::error::{ApiBytes, ApiError, ApiPath, ApiResult, Problem, parse_any_text};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new().route("/v1/actions/{id}/result", post(post_result))
}

/// An executor's outcome for an attempt it accepted with 202.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResultBody {
    /// `completed` or `failed`.
    pub status: ActionStatus,
    /// Result payload.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub result: Option<serde_json::Value>,
    /// Error text when it failed.
    #[serde(default)]
    pub error: Option<String>,
    /// The attempt this answers (the `attempt` of the webhook).
    pub attempt: i64,
    /// The action this result is for: the `action_id` of the webhook. A
    /// result is bound to its action by this field or, without it, by a
    /// `webhook-id` that contains the action id; one bound to another
    /// action is refused (401).
    #[serde(default)]
    pub action_id: Option<String>,
}

/// The title of this endpoint's 401: it takes a signature, not a key.
const BAD_SIGNATURE: &str = "Missing or invalid webhook signature";

fn unauthorized() -> ApiError {
    ApiError::unauthorized("missing, invalid, stale or replayed webhook signature")
}

/// Post an asynchronous result (executors; Standard Webhooks signature, no key).
#[utoipa::path(
    post, path = "/v1/actions/{id}/result", tag = "actions",
    params(
        ("id" = String, Path, description = "Action id"),
        ("webhook-id" = String, Header, description = "Unique id of this callback"),
        ("webhook-timestamp" = String, Header, description = "Unix seconds; within 5 minutes"),
        ("webhook-signature" = String, Header, description = "v1,<base64 HMAC-SHA256 of id.timestamp.body> with the handler's secret"),
    ),
    request_body = ResultBody,
    responses(
        (status = 200, description = "Recorded", body = Action),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Bad, stale or replayed signature, or a callback bound to another action", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Not running (settled, or waiting for a retry), or an attempt not yet sent", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields", body = Problem, content_type = "application/problem+json"),
    )
)]
pub async fn post_result(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
    ApiBytes(body): ApiBytes,
) -> ApiResult<axum::Json<Action>> {
    signed_result(state, id, headers, body)
        .await
        .map_err(|e| e.unauthorized_as(BAD_SIGNATURE))
}

async fn signed_result(
    state: AppState,
    id: String,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> ApiResult<axum::Json<Action>> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .ok_or_else(unauthorized)
    };
    let webhook_id = header("webhook-id")?;
    let callback = state
        .gate()
        .verify_executor(
            &id,
            webhook_id,
            header("webhook-timestamp")?,
            header("webhook-signature")?,
            &body,
        )
        .await?;
    let parsed: ResultBody = match parse_any_text(&body) {
        Ok(p) => p,
        Err(e) => {
            // Signed, but refused: its webhook-id is used up all the same.
            state.gate().refuse_callback(callback).await?;
            return Err(e);
        }
    };
    let result = ExecutorResult {
        status: parsed.status,
        result: parsed.result,
        error: parsed.error,
        attempt: parsed.attempt,
        action_id: parsed.action_id,
    };
    Ok(axum::Json(
        state.gate().executor_result(&id, callback, result).await?,
    ))
}
