//! `/v1/grant-requests`: an agent asks a human for a permission and may
//! block on the answer (seed 004); operators approve (possibly narrower) or
//! deny; unanswered requests expire, which is not a denial.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use chrono::Utc;
use serde::Deserialize;
use serde_json::{Map, Value};
use utoipa::{IntoParams, ToSchema};

use actiongate_policy as policy;
use actiongate_store::{
    GrantRequest, GrantRequestStatus, NewGrant, NewGrantRequest, NewGrantTarget,
};

use crate::auth::{Caller, Operator};
use crate::error::{ApiError, ApiJson, ApiPath, ApiQuery, ApiResult, Problem};
use crate::routes::actions::WaitQuery;
use crate::routes::grants::{new_grant_id, parse_expires, permission_target};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/grant-requests",
            post(create_request).get(list_requests),
        )
        .route("/v1/grant-requests/{id}", get(get_request))
        .route("/v1/grant-requests/{id}/approve", post(approve_request))
        .route("/v1/grant-requests/{id}/deny", post(deny_request))
}

/// The expiry granted when neither the request nor the approval names one.
const DEFAULT_GRANT_EXPIRY: &str = "1h";

/// An agent's request for a permission.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateGrantRequest {
    /// Handler id.
    pub handler: String,
    /// Permission name.
    pub permission: String,
    /// Scope asked for.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub scope: Map<String, Value>,
    /// Why the agent needs it.
    pub reason: String,
    /// How long the grant should last (`1h`, `today`, `indefinite`, RFC 3339; default 1h).
    #[serde(default)]
    #[schema(pattern = r"^(?:[1-9][0-9]{0,3}[smhdw]|today|indefinite)$")]
    pub expires: Option<String>,
    /// How long a human has to answer (default and bounds as for actions).
    #[serde(default)]
    #[schema(
        pattern = r"^(?:(?:[1-9]|[1-5][0-9]|60)m|1h|(?:6[0-9]|[7-9][0-9]|[1-9][0-9]{2}|[12][0-9]{3}|3[0-5][0-9]{2}|3600)s)$"
    )]
    pub timeout: Option<String>,
}

fn settled(r: &GrantRequest) -> bool {
    r.status != GrantRequestStatus::Pending
}

async fn wait_request(
    state: &AppState,
    id: &str,
    wait: std::time::Duration,
) -> Result<GrantRequest, ApiError> {
    let store = state.store();
    Ok(state
        .waiters()
        .wait_until(id, wait, || store.get_grant_request(id), settled)
        .await?)
}

/// Ask a human for a permission; `?wait=S` blocks until they answer.
#[utoipa::path(
    post, path = "/v1/grant-requests", tag = "grants",
    params(WaitQuery),
    request_body = CreateGrantRequest,
    responses(
        (status = 201, description = "The request (pending, or settled within the wait)", body = GrantRequest),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Key not bound to an agent", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such handler or permission", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn create_request(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<WaitQuery>,
    ApiJson(body): ApiJson<CreateGrantRequest>,
) -> ApiResult<(StatusCode, axum::Json<GrantRequest>)> {
    let agent = caller.agent_id()?.to_owned();
    let wait = q.duration(&state)?;
    if body.reason.len() > 4096 {
        return Err(ApiError::invalid("reason", "at most 4096 bytes"));
    }
    permission_target(
        &state,
        &body.handler,
        &body.permission,
        body.scope.clone(),
        "scope",
    )
    .await?;
    if let Some(e) = &body.expires {
        parse_expires(&state, e, "expires")?;
    }
    let timeout = crate::routes::actions::timeout_of(&state, body.timeout.as_deref())?;
    let deadline =
        actiongate_store::time::now() + chrono::Duration::from_std(timeout).unwrap_or_default();
    let r = state
        .store()
        .create_grant_request(NewGrantRequest {
            id: format!("grq_{}", uuid::Uuid::now_v7().simple()),
            agent,
            handler: body.handler,
            permission: body.permission,
            scope: body.scope,
            reason: Some(body.reason),
            expires: body.expires,
            deadline,
        })
        .await?;
    state.deadlines_changed().notify_one();
    let r = if wait.is_zero() {
        r
    } else {
        wait_request(&state, &r.id, wait).await?
    };
    Ok((StatusCode::CREATED, axum::Json(r)))
}

/// `GET /v1/grant-requests` filters.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct RequestQuery {
    /// Only requests in this status.
    pub status: Option<GrantRequestStatus>,
}

/// List grant requests, newest first (operators see all, agents their own).
#[utoipa::path(
    get, path = "/v1/grant-requests", tag = "grants",
    params(RequestQuery),
    responses(
        (status = 200, description = "Requests", body = Vec<GrantRequest>),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid filter", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn list_requests(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<RequestQuery>,
) -> ApiResult<axum::Json<Vec<GrantRequest>>> {
    let agent = if caller.sees_all() {
        None
    } else {
        Some(caller.agent_id()?)
    };
    Ok(axum::Json(
        state.store().list_grant_requests(agent, q.status).await?,
    ))
}

async fn visible(state: &AppState, caller: &Caller, id: &str) -> Result<GrantRequest, ApiError> {
    match state.store().get_grant_request(id).await {
        Ok(r) if caller.may_see(&r.agent) => Ok(r),
        Ok(_) | Err(actiongate_store::StoreError::NotFound) => {
            Err(ApiError::not_found(format!("no grant request '{id}'")))
        }
        Err(e) => Err(e.into()),
    }
}

/// Read a grant request; `?wait=S` blocks until it is answered.
#[utoipa::path(
    get, path = "/v1/grant-requests/{id}", tag = "grants",
    params(("id" = String, Path, description = "Grant request id"), WaitQuery),
    responses(
        (status = 200, description = "The request", body = GrantRequest),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such request visible to the caller", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid wait", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn get_request(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<WaitQuery>,
) -> ApiResult<axum::Json<GrantRequest>> {
    let wait = q.duration(&state)?;
    let r = visible(&state, &caller, &id).await?;
    if wait.is_zero() || settled(&r) {
        return Ok(axum::Json(r));
    }
    Ok(axum::Json(wait_request(&state, &id, wait).await?))
}

/// An approval, optionally narrower than asked.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproveRequest {
    /// A scope within the one asked for (default: as asked).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub scope: Option<Map<String, Value>>,
    /// An expiry no later than the one asked for (default: as asked).
    #[serde(default)]
    #[schema(pattern = r"^(?:[1-9][0-9]{0,3}[smhdw]|today|indefinite)$")]
    pub expires: Option<String>,
}

/// Approve a grant request (operators): creates the grant, which approves the pending actions it covers.
#[utoipa::path(
    post, path = "/v1/grant-requests/{id}/approve", tag = "grants",
    params(("id" = String, Path, description = "Grant request id")),
    request_body(content = Option<ApproveRequest>),
    responses(
        (status = 200, description = "Approved; carries the grant", body = GrantRequest),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an operator", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such request", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Already answered or expired", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Wider than asked, or invalid", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn approve_request(
    State(state): State<AppState>,
    Operator(caller): Operator,
    ApiPath(id): ApiPath<String>,
    body: Option<ApiJson<ApproveRequest>>,
) -> ApiResult<axum::Json<GrantRequest>> {
    let body = body.map(|b| b.0).unwrap_or_default();
    let r = visible(&state, &caller, &id).await?;
    caller.not_for_own(Some(&r.agent))?;
    let scope = match body.scope {
        Some(narrow) => {
            // Every key asked for must still hold within what is granted.
            if !policy::scope_matches(&r.scope, &narrow) {
                return Err(ApiError::invalid(
                    "scope",
                    "must lie within the scope asked for",
                ));
            }
            narrow
        }
        None => r.scope.clone(),
    };
    let target = permission_target(&state, &r.handler, &r.permission, scope, "scope").await?;
    let asked = r.expires.as_deref().unwrap_or(DEFAULT_GRANT_EXPIRY);
    let asked_at = parse_expires(&state, asked, "expires")?;
    let expires_at = match body.expires {
        Some(e) => {
            let at = parse_expires(&state, &e, "expires")?;
            let later = match (at, asked_at) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(a), Some(b)) => a > b,
            };
            if later {
                return Err(ApiError::invalid(
                    "expires",
                    format!("may not outlast the expiry asked for ({asked})"),
                ));
            }
            at
        }
        None => asked_at,
    };
    if expires_at.is_some_and(|t| t <= Utc::now()) {
        return Err(ApiError::invalid("expires", "is already past"));
    }
    let grant = NewGrant {
        id: new_grant_id(),
        agent: Some(r.agent.clone()),
        target: match target {
            t @ NewGrantTarget::Permission { .. } => t,
            NewGrantTarget::Tool { .. } => return Err(ApiError::internal()),
        },
        granted_by: caller.identity(),
        expires_at,
        note: r.reason.clone(),
    };
    let (r, _created) = state.store().approve_grant_request(&id, grant).await?;
    Ok(axum::Json(r))
}

/// A denial.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DenyRequest {
    /// Why (the agent sees it).
    #[serde(default)]
    pub reason: Option<String>,
}

/// Deny a grant request (operators).
#[utoipa::path(
    post, path = "/v1/grant-requests/{id}/deny", tag = "grants",
    params(("id" = String, Path, description = "Grant request id")),
    request_body(content = Option<DenyRequest>),
    responses(
        (status = 200, description = "Denied", body = GrantRequest),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an operator", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such request", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Already answered or expired", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn deny_request(
    State(state): State<AppState>,
    Operator(caller): Operator,
    ApiPath(id): ApiPath<String>,
    body: Option<ApiJson<DenyRequest>>,
) -> ApiResult<axum::Json<GrantRequest>> {
    let body = body.map(|b| b.0).unwrap_or_default();
    if body.reason.as_ref().is_some_and(|r| r.len() > 4096) {
        return Err(ApiError::invalid("reason", "at most 4096 bytes"));
    }
    visible(&state, &caller, &id).await?;
    Ok(axum::Json(
        state
            .store()
            .deny_grant_request(&id, caller.identity(), body.reason)
            .await?,
    ))
}
