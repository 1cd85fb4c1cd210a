//! `/v1/grant-requests`: an agent asks a human for a permission and may
//! block on the answer (seed 004); operators approve (possibly narrower) or
//! deny; unanswered requests expire, which is not a denial.

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::{get, post};
use serde::Deserialize;
use utoipa::IntoParams;

use actiongate_api::{ApproveRequest, CreateGrantRequest, DenyRequest, ListOrder};
use actiongate_gate::{GrantRequest, GrantRequestStatus, ListPage};

use crate::auth::{Caller, Operator};
use crate::error::{ApiJson, ApiPath, ApiQuery, ApiResult, Problem};
use crate::routes::actions::WaitQuery;
use crate::routes::links::after_page;
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

/// Ask a human for a permission; `?wait=S` blocks until they answer.
#[utoipa::path(
    post, path = "/v1/grant-requests", tag = "grants",
    params(WaitQuery),
    request_body = CreateGrantRequest,
    responses(
        (status = 201, description = "The request (pending, or settled within the wait)", body = GrantRequest),
        (status = 200, description = "Asked before under the same idempotency key and body: that request as it stands (or once settled within the wait)", body = GrantRequest),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Key not bound to an agent", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such handler or permission", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The idempotency key was used for another request", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "The agent has limits.max_pending_per_agent items waiting for a human, or (with ?wait) the key holds limits.max_open_per_key streams and long-polls open already (limit-reached)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn create_request(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<WaitQuery>,
    ApiJson(body): ApiJson<CreateGrantRequest>,
) -> ApiResult<(StatusCode, axum::Json<GrantRequest>)> {
    caller.agent_id()?;
    let wait = q.duration(&state)?;
    let (r, created) = state.gate().request_grant(&caller, body, wait).await?;
    let status = match created {
        true => StatusCode::CREATED,
        false => StatusCode::OK,
    };
    Ok((status, axum::Json(r)))
}

/// `GET /v1/grant-requests` filters and paging.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct RequestQuery {
    /// Only requests in this status.
    pub status: Option<GrantRequestStatus>,
    /// `newest` first (the default) or `oldest` first (the longest
    /// waiting first).
    #[param(inline)]
    pub order: Option<ListOrder>,
    /// Only requests strictly after this id in that order: the last id of
    /// the previous page.
    #[param(min_length = 1, max_length = 200, pattern = r"^[!-~]{1,200}$")]
    pub after: Option<String>,
    /// Page size, 1-500 (default 500). A page shorter than `limit` is the
    /// last, unless it links the next (`Link`: cut short for its size).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
}

/// The page `order`, `after` and `limit` ask for.
pub fn list_page(order: Option<ListOrder>, after: Option<String>, limit: Option<i64>) -> ListPage {
    ListPage {
        after,
        limit,
        oldest_first: order == Some(ListOrder::Oldest),
    }
}

/// List grant requests, newest first or, with `order=oldest`, oldest first,
/// a page at a time (operators see all, agents their own).
#[utoipa::path(
    get, path = "/v1/grant-requests", tag = "grants",
    params(RequestQuery),
    responses(
        (status = 200, description = "A page of requests: page on with `after` set to the last id until a page is shorter than `limit` and has no `Link` header with `rel=\"next\"` (a page past 2 MiB of JSON is cut short and has one)", body = Vec<GrantRequest>,
            headers(("Link" = String, description = "`<URL>; rel=\"next\"`: the next page, when this one was cut short of `limit` for its size"))),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`after` names no grant request the caller may see", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid filter", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn list_requests(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<RequestQuery>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Response> {
    let (requests, cut) = state
        .gate()
        .list_grant_requests(&caller, q.status, list_page(q.order, q.after, q.limit))
        .await?;
    Ok(after_page(
        "/v1/grant-requests",
        raw.as_deref(),
        requests,
        cut,
        |x| &x.id,
    ))
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
        (status = 429, description = "With ?wait: The key holds limits.max_open_per_key streams and long-polls open already", body = Problem, content_type = "application/problem+json"),
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
    Ok(axum::Json(
        state.gate().get_grant_request(&caller, &id, wait).await?,
    ))
}

/// Approve a grant request (operators): creates the grant, which approves the pending actions it covers.
#[utoipa::path(
    post, path = "/v1/grant-requests/{id}/approve", tag = "grants",
    params(("id" = String, Path, description = "Grant request id")),
    request_body(content = Option<ApproveRequest>),
    responses(
        (status = 200, description = "Approved; carries the grant (also when this caller approved it as asked before: the approval sent again)", body = GrantRequest),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an operator", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such request", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Already answered otherwise or by someone else, or expired, or its session has ended", body = Problem, content_type = "application/problem+json"),
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
    Ok(axum::Json(
        state
            .gate()
            .approve_grant_request(&caller, &id, body)
            .await?,
    ))
}

/// Deny a grant request (operators).
#[utoipa::path(
    post, path = "/v1/grant-requests/{id}/deny", tag = "grants",
    params(("id" = String, Path, description = "Grant request id")),
    request_body(content = Option<DenyRequest>),
    responses(
        (status = 200, description = "Denied (also when this caller denied it before: the denial sent again)", body = GrantRequest),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an operator", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such request", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Already answered otherwise or by someone else, or expired", body = Problem, content_type = "application/problem+json"),
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
    Ok(axum::Json(
        state
            .gate()
            .deny_grant_request(&caller, &id, body.reason)
            .await?,
    ))
}
