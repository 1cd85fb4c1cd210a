//! `GET /v1/presets`: the built-in profiles and their patterns.

use axum::Router;
use axum::routing::get;
use serde::Serialize;
use utoipa::ToSchema;

use crate::auth::Caller;
use crate::error::{ApiResult, Problem};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new().route("/v1/presets", get(list_presets))
}

/// A built-in profile.
#[derive(Debug, Serialize, ToSchema)]
pub struct Preset {
    /// Its name, usable as an agent's profile.
    pub name: String,
    /// Patterns that allow.
    pub allow: Vec<String>,
    /// Patterns that ask a human.
    pub ask: Vec<String>,
    /// Patterns that deny, whatever else matches.
    pub deny: Vec<String>,
}

/// List the presets (any key).
#[utoipa::path(
    get, path = "/v1/presets", tag = "agents",
    responses(
        (status = 200, description = "Every preset", body = Vec<Preset>),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn list_presets(_caller: Caller) -> ApiResult<axum::Json<Vec<Preset>>> {
    let presets = actiongate_policy::preset_names()
        .iter()
        .filter_map(|name| {
            actiongate_policy::preset_spec(name).map(|p| Preset {
                name: (*name).to_owned(),
                allow: p.allow,
                ask: p.ask,
                deny: p.deny,
            })
        })
        .collect();
    Ok(axum::Json(presets))
}
