//! `/v1/grants`: standing permissions granted by humans, and
//! `/v1/permissions/check` for agents to ask whether they hold one.

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use actiongate_api::{CreateGrant, ListOrder, PermissionCheck};
use actiongate_gate::GrantFilter;
use actiongate_gate::GrantRecord;

use crate::auth::{Caller, Operator};
use crate::error::{
    ApiError, ApiJson, ApiJsonBody, ApiPath, ApiQuery, ApiResult, Problem, object_has_key,
    parse_object,
};
use crate::routes::links::after_page;
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/grants", post(create_grant).get(list_grants))
        .route("/v1/grants/{id}", get(get_grant).delete(revoke_grant))
        .route("/v1/permissions/check", post(check_permission))
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
        (status = 200, description = "Granted before under the same idempotency key and body: that grant, nothing changed (`approved_actions` is empty)", body = CreatedGrant),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an operator: only humans grant", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such handler or permission", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The session named has ended: a grant for it would be void; or the idempotency key was used for another grant", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn create_grant(
    State(state): State<AppState>,
    Operator(caller): Operator,
    ApiJsonBody(body): ApiJsonBody,
) -> ApiResult<(StatusCode, axum::Json<CreatedGrant>)> {
    let body = parse_create_grant(&body)?;
    let created = state.gate().create_grant(&caller, body).await?;
    let status = match created.repeated {
        true => StatusCode::OK,
        false => StatusCode::CREATED,
    };
    Ok((
        status,
        axum::Json(CreatedGrant {
            grant: created.grant,
            approved_actions: created.approved.into_iter().map(|a| a.id).collect(),
        }),
    ))
}

/// Picks the form by its keys, so errors name the right fields (an unknown
/// one, one of the wrong type, one given twice).
fn parse_create_grant(bytes: &[u8]) -> Result<CreateGrant, ApiError> {
    if object_has_key(bytes, "tool") {
        parse_object(bytes).map(CreateGrant::Tool)
    } else {
        parse_object(bytes).map(CreateGrant::Permission)
    }
}

/// Filters of `GET /v1/grants`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct GrantQuery {
    /// Only active (true) or only revoked/expired (false) grants.
    pub active: Option<bool>,
    /// Only grants for this agent.
    #[param(
        pattern = r"^[A-Za-z0-9_.@\-]{1,128}$",
        min_length = 1,
        max_length = 128
    )]
    pub agent: Option<String>,
    /// Only this handler's.
    #[param(
        pattern = r"^[a-z0-9][a-z0-9_\-]{0,63}$",
        min_length = 1,
        max_length = 64
    )]
    pub handler: Option<String>,
    /// `newest` first (the default) or `oldest` first.
    #[param(inline)]
    pub order: Option<ListOrder>,
    /// Only grants strictly after this id in that order: the last id of
    /// the previous page.
    #[param(min_length = 1, max_length = 200, pattern = r"^[!-~]{1,200}$")]
    pub after: Option<String>,
    /// Page size, 1-500 (default 500). A page shorter than `limit` is the
    /// last, unless it links the next (`Link`: cut short for its size).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
}

/// List grants, newest first or, with `order=oldest`, oldest first, a
/// page at a time (operators).
#[utoipa::path(
    get, path = "/v1/grants", tag = "grants",
    params(GrantQuery),
    responses(
        (status = 200, description = "A page of grants: page on with `after` set to the last id until a page is shorter than `limit` and has no `Link` header with `rel=\"next\"` (a page past 2 MiB of JSON is cut short and has one)", body = Vec<GrantRecord>,
            headers(("Link" = String, description = "`<URL>; rel=\"next\"`: the next page, when this one was cut short of `limit` for its size"))),
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
    RawQuery(raw): RawQuery,
) -> ApiResult<Response> {
    let f = GrantFilter {
        active: q.active,
        agent: q.agent,
        handler: q.handler,
        ..GrantFilter::default()
    };
    let page = super::grant_requests::list_page(q.order, q.after, q.limit);
    let (grants, cut) = state.gate().list_grants(&f, page).await?;
    Ok(after_page("/v1/grants", raw.as_deref(), grants, cut, |x| {
        &x.id
    }))
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
    Ok(axum::Json(state.gate().get_grant(&id).await?))
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
    Operator(caller): Operator,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<GrantRecord>> {
    Ok(axum::Json(state.gate().revoke_grant(&caller, &id).await?))
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
    let holding = state.gate().check_permission(&caller, &body).await?;
    Ok(axum::Json(PermissionAnswer {
        granted: holding.grant.is_some(),
        grant_id: holding.grant.as_ref().map(|g| g.id.clone()),
        expires_at: holding.grant.and_then(|g| g.expires_at),
    }))
}
