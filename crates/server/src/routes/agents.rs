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

use actiongate_api::Agent;

use crate::auth::Admin;
use crate::error::{ApiJson, ApiPath, ApiResult, Problem};
use crate::state::AppState;

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
        .property(
            "examples",
            ObjectBuilder::new()
                .schema_type(Type::Object)
                .property("allow", strings("Action strings it must allow."))
                .property("ask", strings("Action strings it must ask a human about."))
                .property("deny", strings("Action strings it must deny."))
                .additional_properties(Some(AdditionalProperties::FreeForm(false)))
                .description(Some(
                    "Checked when the profile is set: 422 naming every example (`profile.examples.allow[0]`) that gets another answer.",
                )),
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
        (status = 422, description = "Invalid profile (names the pattern), or examples it answers otherwise (names each)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn put_agent(
    State(state): State<AppState>,
    Admin(caller): Admin,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<PutAgent>,
) -> ApiResult<(StatusCode, axum::Json<Agent>)> {
    let (agent, created) = state
        .gate()
        .put_agent(&caller, &id, body.name, body.profile)
        .await?;
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
    Admin(caller): Admin,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<Agent>> {
    Ok(axum::Json(state.gate().get_agent(&caller, &id).await?))
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
    Admin(caller): Admin,
) -> ApiResult<axum::Json<Vec<Agent>>> {
    Ok(axum::Json(state.gate().list_agents(&caller).await?))
}
