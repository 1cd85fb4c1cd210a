//! `GET /v1/whoami`: who the presented key says the caller is.

use axum::Router;
use axum::extract::State;
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
    /// The person the key belongs to (`POST /v1/people`), if any: only a
    /// person's approval counts toward a quorum of more than one.
    pub person: Option<String>,
    /// The names approvers rules' globs are matched against for this
    /// caller: the key's name and its person's name, if any.
    pub approver_names: Vec<String>,
    /// The person's groups, which approvers rules name as `group:<name>`.
    pub groups: Vec<String>,
}

/// Who the caller is: the key's id, name, role and agent (any key), and,
/// for deciding, its person, the names approvers rules match and its groups.
#[utoipa::path(
    get, path = "/v1/whoami", tag = "keys",
    responses(
        (status = 200, description = "The caller's key", body = WhoAmI),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn whoami(
    State(state): State<AppState>,
    caller: Caller,
) -> ApiResult<axum::Json<WhoAmI>> {
    let d = state.gate().decider(&caller).await?;
    Ok(axum::Json(WhoAmI {
        key_id: caller.key_id,
        name: caller.name,
        role: caller.role,
        agent: caller.agent,
        person: d.person.then_some(d.who),
        approver_names: d.names,
        groups: d.groups,
    }))
}
