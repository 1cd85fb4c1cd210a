//! `GET /v1/whoami`: who the presented key says the caller is.

use axum::Router;
use axum::routing::get;
use serde::Serialize;
use utoipa::ToSchema;

use actiongate_api::Role;

use crate::auth::Caller;
use crate::error::{ApiResult, Problem};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new().route("/v1/whoami", get(whoami))
}

/// The key a request was made with.
#[derive(Debug, Serialize, ToSchema)]
pub struct WhoAmI {
    /// The key's id (for revoking it).
    pub key_id: String,
    /// The key's name.
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// The agent it acts as, for agent keys.
    pub agent: Option<String>,
}

/// Who the caller is: the key's id, name, role and agent (any key).
#[utoipa::path(
    get, path = "/v1/whoami", tag = "keys",
    responses(
        (status = 200, description = "The caller's key", body = WhoAmI),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn whoami(caller: Caller) -> ApiResult<axum::Json<WhoAmI>> {
    Ok(axum::Json(WhoAmI {
        key_id: caller.key_id,
        name: caller.name,
        role: caller.role,
        agent: caller.agent,
    }))
}
