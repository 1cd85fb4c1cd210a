//! `/v1/agents`: agents and their permission profiles (admins).

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa::openapi::schema::{
    AdditionalProperties, ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, Type,
};

use actiongate_policy::{ListKind, Profile, ProfileError, ProfileSpec};
use actiongate_store::Agent;

use crate::auth::Admin;
use crate::error::{ApiError, ApiJson, ApiPath, ApiResult, Problem};
use crate::state::AppState;
use actiongate_gate::actions::check_len;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/agents", get(list_agents))
        .route("/v1/agents/{id}", get(get_agent).put(put_agent))
}

/// An agent's name and profile.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutAgent {
    /// Display name.
    #[serde(default)]
    #[schema(max_length = 256)]
    pub name: Option<String>,
    /// A preset name (`"standard"`) or `{allow, ask, deny?, shell_tools?}`
    /// of full-match regex patterns over `tool:<tool>:<detail>`; absent or
    /// null uses the configured default.
    #[serde(default)]
    #[schema(schema_with = profile_schema)]
    pub profile: Option<serde_json::Value>,
}

/// The wire form of a profile (`actiongate_policy::ProfileSpec`): a preset
/// name, pattern lists, or null for the configured default.
fn profile_schema() -> Schema {
    let strings = |description: &str| {
        ArrayBuilder::new()
            .items(ObjectBuilder::new().schema_type(Type::String))
            .description(Some(description))
    };
    let preset = ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(actiongate_policy::preset_names().iter().copied()))
        .description(Some("A preset (GET /v1/presets)."));
    let custom = ObjectBuilder::new()
        .schema_type(Type::Object)
        .property(
            "allow",
            strings("Patterns that allow, unless a deny pattern matches."),
        )
        .required("allow")
        .property(
            "ask",
            strings("Patterns that ask a human (when no allow pattern matches)."),
        )
        .required("ask")
        .property(
            "deny",
            strings("Patterns that deny, whatever else matches."),
        )
        .property(
            "shell_tools",
            strings("Tools besides bash and sh whose detail is a shell command."),
        )
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .description(Some(
            "Full-match regular expressions over `tool:<tool>:<detail>`; an invalid one is a 422 naming it.",
        ));
    OneOfBuilder::new()
        .item(preset)
        .item(custom)
        .item(ObjectBuilder::new().schema_type(Type::Null))
        .description(Some(
            "A preset name or pattern lists; null or absent uses the configured default.",
        ))
        .build()
        .into()
}

/// Agent ids: 1-128 of `A-Z a-z 0-9 _ - . @`.
pub fn validate_agent_id(id: &str) -> Result<(), ApiError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '@'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "id",
            "1-128 characters from A-Z a-z 0-9 _ - . @",
        ))
    }
}

/// Compiles a profile given over the API, naming the bad pattern on failure.
pub fn compile_profile(json: &serde_json::Value) -> Result<Profile, ApiError> {
    let spec: ProfileSpec = serde_json::from_value(json.clone()).map_err(|e| {
        ApiError::invalid(
            "profile",
            format!("a preset name or {{allow, ask, deny?}}: {e}"),
        )
    })?;
    Profile::from_spec(spec).map_err(|e| match e {
        ProfileError::InvalidPattern {
            list,
            index,
            pattern,
            message,
        } => {
            let list = match list {
                ListKind::Allow => "allow",
                ListKind::Ask => "ask",
                ListKind::Deny => "deny",
            };
            ApiError::invalid(
                format!("profile.{list}[{index}]"),
                format!("invalid pattern '{pattern}': {message}"),
            )
        }
        other => ApiError::invalid("profile", other.to_string()),
    })
}

/// Create or replace an agent (admins).
#[utoipa::path(
    put, path = "/v1/agents/{id}", tag = "agents",
    params(("id" = String, Path, description = "Agent id: 1-128 of `A-Z a-z 0-9 _ - . @`", pattern = r"^[A-Za-z0-9_.@\-]{1,128}$")),
    request_body = PutAgent,
    responses(
        (status = 201, description = "Created", body = Agent),
        (status = 200, description = "Replaced", body = Agent),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid profile (names the pattern)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn put_agent(
    State(state): State<AppState>,
    Admin(_caller): Admin,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<PutAgent>,
) -> ApiResult<(StatusCode, axum::Json<Agent>)> {
    validate_agent_id(&id)?;
    check_len("name", body.name.as_deref(), 256)?;
    let profile = match body.profile {
        None | Some(serde_json::Value::Null) => None,
        Some(json) => {
            compile_profile(&json)?;
            Some(json)
        }
    };
    let (agent, created) = state
        .gate()
        .store()
        .put_agent(&id, body.name, profile)
        .await?;
    state.gate().forget_agent(&id);
    Ok((
        if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        },
        axum::Json(agent),
    ))
}

/// Read an agent (admins).
#[utoipa::path(
    get, path = "/v1/agents/{id}", tag = "agents",
    params(("id" = String, Path, description = "Agent id: 1-128 of `A-Z a-z 0-9 _ - . @`", pattern = r"^[A-Za-z0-9_.@\-]{1,128}$")),
    responses(
        (status = 200, description = "The agent", body = Agent),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such agent", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn get_agent(
    State(state): State<AppState>,
    Admin(_caller): Admin,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<Agent>> {
    state
        .gate()
        .store()
        .get_agent(&id)
        .await?
        .map(axum::Json)
        .ok_or_else(|| ApiError::not_found(format!("no agent '{id}'")))
}

/// List agents (admins).
#[utoipa::path(
    get, path = "/v1/agents", tag = "agents",
    responses(
        (status = 200, description = "Every agent", body = Vec<Agent>),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an admin", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn list_agents(
    State(state): State<AppState>,
    Admin(_caller): Admin,
) -> ApiResult<axum::Json<Vec<Agent>>> {
    Ok(axum::Json(state.gate().store().list_agents().await?))
}
