//! `POST /v1/check`: the decision for an action, nothing stored.

use axum::Router;
use axum::extract::State;
use axum::routing::post;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use actiongate_gate::Decision;

use crate::auth::Caller;
use crate::error::{ApiJson, ApiResult, Problem};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new().route("/v1/check", post(check))
}

/// What to check.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckBody {
    /// Tool name; 1-128 of `A-Z a-z 0-9 _ - .`.
    #[schema(
        pattern = r"^[A-Za-z0-9_.\-]{1,128}$",
        min_length = 1,
        max_length = 128
    )]
    pub tool: String,
    /// Tool-specific detail.
    #[schema(max_length = 65536)]
    pub detail: String,
    /// A dry run of this profile instead of the caller's (admin keys only;
    /// others get 403): a preset name or `{allow, ask, deny}`, judged alone,
    /// without grants.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub profile: Option<serde_json::Value>,
    /// The session (task) it would belong to: session grants, plans and
    /// taint apply within it (1-200 printable characters).
    #[serde(default)]
    #[schema(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}](?:[^\\x00-\\x1f\\x7f-\\x9f\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}]{0,198}[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}])?$"
    )]
    pub session: Option<String>,
    /// The agent runtime asking, e.g. `claude-code`.
    #[serde(default)]
    #[schema(pattern = r"^[a-z0-9][a-z0-9_.\-]{0,63}$")]
    pub runtime: Option<String>,
}

/// The decision and the action string it was made for.
#[derive(Debug, Serialize, ToSchema)]
pub struct CheckResult {
    /// `tool:<tool>:<detail>`.
    pub action_string: String,
    /// The decision.
    #[serde(flatten)]
    pub decision: Decision,
}

/// Decide an action under the caller's profile and grants (or, for admins, an inline `profile`) without storing anything.
#[utoipa::path(
    post, path = "/v1/check", tag = "actions",
    request_body = CheckBody,
    responses(
        (status = 200, description = "The decision", body = CheckResult),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Key not bound to an agent, or `profile` given without an admin key", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn check(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<CheckBody>,
) -> ApiResult<axum::Json<CheckResult>> {
    let (action_string, decision) = match &body.profile {
        Some(profile) => {
            state
                .gate()
                .check_with_profile(&caller, &body.tool, &body.detail, profile)
                .await?
        }
        None => {
            state
                .gate()
                .check_in(
                    &caller,
                    &body.tool,
                    &body.detail,
                    body.session.as_deref(),
                    body.runtime.as_deref(),
                )
                .await?
        }
    };
    Ok(axum::Json(CheckResult {
        action_string,
        decision,
    }))
}
