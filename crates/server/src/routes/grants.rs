//! `/v1/grants`: standing permissions granted by humans, and
//! `/v1/permissions/check` for agents to ask whether they hold one.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

use actiongate_policy as policy;
use actiongate_store::{GrantFilter, GrantRecord, NewGrant, NewGrantTarget};

use crate::auth::{Caller, Operator};
use crate::decide::validate_tool;
use crate::error::{
    ApiError, ApiJson, ApiJsonBody, ApiPath, ApiQuery, ApiResult, Problem, object_has_key,
    parse_object,
};
use crate::routes::agents::validate_agent_id;
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/grants", post(create_grant).get(list_grants))
        .route("/v1/grants/{id}", get(get_grant).delete(revoke_grant))
        .route("/v1/permissions/check", post(check_permission))
}

/// A fresh grant id.
pub fn new_grant_id() -> String {
    format!("grt_{}", uuid::Uuid::now_v7().simple())
}

/// Parses an expiry (`1h`, `today`, `indefinite`, RFC 3339) into its end.
pub fn parse_expires(
    state: &AppState,
    text: &str,
    field: &str,
) -> Result<Option<DateTime<Utc>>, ApiError> {
    policy::parse_expiry(text, Utc::now(), state.tz())
        .map(|e| e.expires_at())
        .map_err(|e| ApiError::invalid(field, e.to_string()))
}

/// Checks a handler permission and scope keys; the grant target they name.
pub async fn permission_target(
    state: &AppState,
    handler: &str,
    permission: &str,
    scope: Map<String, Value>,
    scope_field: &str,
) -> Result<NewGrantTarget, ApiError> {
    let h = match state.handler(handler).await {
        Ok(h) => h,
        Err(e) if e.status() == StatusCode::NOT_FOUND => {
            return Err(ApiError::not_found(format!("no handler '{handler}'")));
        }
        Err(e) => return Err(e),
    };
    let Some(decl) = h.permissions.get(permission) else {
        return Err(ApiError::not_found(format!(
            "handler '{handler}' declares no permission '{permission}'"
        )));
    };
    let known = decl
        .parameters_schema
        .get("properties")
        .and_then(Value::as_object);
    let unknown: Vec<&String> = scope
        .keys()
        .filter(|k| !known.is_some_and(|p| p.contains_key(*k)))
        .collect();
    if let Some(k) = unknown.first() {
        return Err(ApiError::invalid(
            format!("{scope_field}.{k}"),
            format!("permission '{permission}' has no scope key '{k}' in its parameters_schema"),
        ));
    }
    Ok(NewGrantTarget::Permission {
        handler: handler.to_owned(),
        permission: permission.to_owned(),
        scope,
    })
}

/// Checks a decision-only grant's pattern; the grant target it names.
pub fn tool_target(
    tool: &str,
    pattern: &str,
    pattern_field: &str,
) -> Result<NewGrantTarget, ApiError> {
    validate_tool(tool)?;
    if pattern.chars().count() > 4096 {
        return Err(ApiError::invalid(pattern_field, "at most 4096 characters"));
    }
    policy::ToolPattern::new(tool, pattern)
        .map_err(|e| ApiError::invalid(pattern_field, e.to_string()))?;
    Ok(NewGrantTarget::Tool {
        tool: tool.to_owned(),
        pattern: pattern.to_owned(),
    })
}

/// A grant of a handler's permission within a scope.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PermissionGrant {
    /// For this agent only; absent: any agent.
    #[serde(default)]
    #[schema(pattern = r"^[A-Za-z0-9_.@\-]{1,128}$")]
    pub agent: Option<String>,
    /// Handler id.
    pub handler: String,
    /// Permission name.
    pub permission: String,
    /// Scope values; a string with `*` or `?` is a glob; a missing key matches any value.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub scope: Map<String, Value>,
    /// `1h`, `30m`, `2d`, `today`, `indefinite`; the server also takes an RFC 3339 time.
    #[schema(pattern = r"^(?:[1-9][0-9]{0,3}[smhdw]|today|indefinite)$")]
    pub expires: String,
    /// A note.
    #[serde(default)]
    #[schema(max_length = 4096)]
    pub note: Option<String>,
}

/// A grant for decision-only actions of a tool whose detail matches a pattern.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolGrant {
    /// For this agent only; absent: any agent.
    #[serde(default)]
    #[schema(pattern = r"^[A-Za-z0-9_.@\-]{1,128}$")]
    pub agent: Option<String>,
    /// Tool name.
    #[schema(pattern = r"^[A-Za-z0-9_.\-]{1,128}$")]
    pub tool: String,
    /// Full-match regex over the detail, shell-aware for shell tools (the
    /// Rust `regex` syntax, plus look-around; an invalid one is a 422).
    #[schema(format = Regex, max_length = 4096)]
    pub pattern: String,
    /// `1h`, `30m`, `2d`, `today`, `indefinite`; the server also takes an RFC 3339 time.
    #[schema(pattern = r"^(?:[1-9][0-9]{0,3}[smhdw]|today|indefinite)$")]
    pub expires: String,
    /// A note.
    #[serde(default)]
    #[schema(max_length = 4096)]
    pub note: Option<String>,
}

/// A grant to create: `{handler, permission, scope}` or `{tool, pattern}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum CreateGrant {
    /// A handler permission.
    Permission(PermissionGrant),
    /// A decision-only tool pattern.
    Tool(ToolGrant),
}

impl CreateGrant {
    /// Picks the form by its keys, so errors name the right fields (an
    /// unknown one, one of the wrong type, one given twice).
    fn parse(bytes: &[u8]) -> Result<CreateGrant, ApiError> {
        if object_has_key(bytes, "tool") {
            parse_object(bytes).map(CreateGrant::Tool)
        } else {
            parse_object(bytes).map(CreateGrant::Permission)
        }
    }
}

/// A grant, and the pending actions creating it approved.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedGrant {
    /// The grant.
    #[serde(flatten)]
    pub grant: GrantRecord,
    /// Ids of pending actions it covered and approved.
    pub approved_actions: Vec<String>,
}

/// Grant a permission (operators); pending actions it covers are approved at once.
#[utoipa::path(
    post, path = "/v1/grants", tag = "grants",
    request_body = CreateGrant,
    responses(
        (status = 201, description = "Granted", body = CreatedGrant),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an operator: only humans grant", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such handler or permission", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn create_grant(
    State(state): State<AppState>,
    Operator(caller): Operator,
    ApiJsonBody(body): ApiJsonBody,
) -> ApiResult<(StatusCode, axum::Json<CreatedGrant>)> {
    let (agent, expires, note, target) = match CreateGrant::parse(&body)? {
        CreateGrant::Permission(g) => {
            let target =
                permission_target(&state, &g.handler, &g.permission, g.scope, "scope").await?;
            (g.agent, g.expires, g.note, target)
        }
        CreateGrant::Tool(g) => {
            let target = tool_target(&g.tool, &g.pattern, "pattern")?;
            (g.agent, g.expires, g.note, target)
        }
    };
    if let Some(a) = &agent {
        validate_agent_id(a)
            .map_err(|_| ApiError::invalid("agent", "1-128 characters from A-Z a-z 0-9 _ - . @"))?;
    }
    caller.not_for_own(agent.as_deref())?;
    if note.as_ref().is_some_and(|n| n.chars().count() > 4096) {
        return Err(ApiError::invalid("note", "at most 4096 characters"));
    }
    let expires_at = parse_expires(&state, &expires, "expires")?;
    let new = NewGrant {
        id: new_grant_id(),
        agent,
        target,
        granted_by: caller.identity(),
        expires_at,
        note,
    };
    let created = state.store().create_grant(new, None).await?;
    Ok((
        StatusCode::CREATED,
        axum::Json(CreatedGrant {
            grant: created.grant,
            approved_actions: created.approved.into_iter().map(|a| a.id).collect(),
        }),
    ))
}

/// Filters of `GET /v1/grants`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct GrantQuery {
    /// Only active (true) or only revoked/expired (false) grants.
    pub active: Option<bool>,
    /// Only grants for this agent.
    pub agent: Option<String>,
    /// Only this handler's.
    pub handler: Option<String>,
}

/// List grants, newest first (operators).
#[utoipa::path(
    get, path = "/v1/grants", tag = "grants",
    params(GrantQuery),
    responses(
        (status = 200, description = "Grants", body = Vec<GrantRecord>),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an operator", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid filter", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn list_grants(
    State(state): State<AppState>,
    Operator(_caller): Operator,
    ApiQuery(q): ApiQuery<GrantQuery>,
) -> ApiResult<axum::Json<Vec<GrantRecord>>> {
    let f = GrantFilter {
        active: q.active,
        agent: q.agent,
        handler: q.handler,
    };
    Ok(axum::Json(state.store().list_grants(&f).await?))
}

/// Read a grant (operators).
#[utoipa::path(
    get, path = "/v1/grants/{id}", tag = "grants",
    params(("id" = String, Path, description = "Grant id")),
    responses(
        (status = 200, description = "The grant", body = GrantRecord),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an operator", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such grant", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn get_grant(
    State(state): State<AppState>,
    Operator(_caller): Operator,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<GrantRecord>> {
    Ok(axum::Json(state.store().get_grant(&id).await?))
}

/// Revoke a grant (operators); revoking again returns the revoked grant.
#[utoipa::path(
    delete, path = "/v1/grants/{id}", tag = "grants",
    params(("id" = String, Path, description = "Grant id")),
    responses(
        (status = 200, description = "Revoked", body = GrantRecord),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an operator", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such grant", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn revoke_grant(
    State(state): State<AppState>,
    Operator(_caller): Operator,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<GrantRecord>> {
    Ok(axum::Json(state.store().revoke_grant(&id).await?))
}

/// Does the calling agent hold this permission for this scope?
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PermissionCheck {
    /// Handler id.
    pub handler: String,
    /// Permission name.
    pub permission: String,
    /// Scope values of the intended action.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub scope: Map<String, Value>,
}

/// The answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct PermissionAnswer {
    /// Whether an active grant covers it.
    pub granted: bool,
    /// The covering grant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub grant_id: Option<String>,
    /// When that grant ends (absent: indefinite or not granted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<DateTime<Utc>>,
}

/// Whether the calling agent holds a permission (seed 000's `check_permission`).
#[utoipa::path(
    post, path = "/v1/permissions/check", tag = "grants",
    request_body = PermissionCheck,
    responses(
        (status = 200, description = "The answer", body = PermissionAnswer),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Key not bound to an agent", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn check_permission(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<PermissionCheck>,
) -> ApiResult<axum::Json<PermissionAnswer>> {
    let agent = caller.agent_id()?;
    let now = Utc::now();
    let grants = state.store().active_grants(agent, &body.handler).await?;
    let req = policy::Request {
        agent,
        tool: &body.handler,
        detail: "",
        permission: Some(policy::PermissionRef {
            handler: &body.handler,
            permission: &body.permission,
            scope: &body.scope,
        }),
    };
    let covering = grants
        .iter()
        .filter(|g| {
            matches!(g.target, policy::GrantTarget::Permission { .. }) && g.covers(&req, now)
        })
        // The longest-lasting grant answers (indefinite first).
        .max_by_key(|g| g.expires_at.map_or(i64::MAX, |t| t.timestamp_millis()));
    Ok(axum::Json(PermissionAnswer {
        granted: covering.is_some(),
        grant_id: covering.map(|g| g.id.clone()),
        expires_at: covering.and_then(|g| g.expires_at),
    }))
}
