//! `/v1/sessions`, `/v1/plans` and `/v1/runs` (issue 33, docs/sessions.md):
//! sessions as operators see them, plans approved at once or step by step,
//! and runs reported after the fact.

use axum::Router;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Deserialize;
use utoipa::IntoParams;

use actiongate_api::ListOrder;
use actiongate_api::sessions::{ApprovePlan, CreatePlan, Plan, ReportRun, RunMatched, Session};

use crate::auth::{Caller, Operator};
use crate::error::{ApiJson, ApiPath, ApiQuery, ApiResult, Problem};
use crate::routes::actions::WaitQuery;
use crate::routes::grant_requests::list_page;
use crate::routes::links::{after_page, linked, next_link};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/sessions", get(list_sessions))
        .route("/v1/sessions/{id}", get(get_session))
        .route("/v1/sessions/{id}/end", post(end_session))
        .route("/v1/plans", post(create_plan).get(list_plans))
        .route("/v1/plans/{id}", get(get_plan))
        .route("/v1/plans/{id}/approve", post(approve_plan))
        .route("/v1/plans/{id}/deny", post(deny_plan))
        .route("/v1/runs", post(report_run))
}

/// `GET /v1/sessions` filters and paging.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SessionQuery {
    /// `active`, or `ended` (by hand or idle past `sessions.idle_timeout`).
    #[param(pattern = "^(active|ended)$")]
    pub status: Option<String>,
    /// Only this agent's sessions (an agent key sees only its own).
    #[param(
        min_length = 1,
        max_length = 128,
        pattern = r"^[A-Za-z0-9_.@-]{1,128}$"
    )]
    pub agent: Option<String>,
    /// `newest` first (the default) or `oldest` first, by when they began.
    #[param(inline)]
    pub order: Option<ListOrder>,
    /// Only sessions strictly after this one in that order: the last id of
    /// the previous page (a session id: 1-200 printable characters, no
    /// surrounding whitespace).
    #[param(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}](?:[^\\x00-\\x1f\\x7f-\\x9f\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}]{0,198}[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}])?$"
    )]
    pub after: Option<String>,
    /// With `after`: when that session began (its `first_seen`, as the
    /// listing gave it, RFC 3339). The page is then placed by it without
    /// looking the session up, so paging goes on when that session was
    /// deleted meanwhile (retention); the `Link` of a full page carries it.
    /// Alone: the page starts past every session that began at that time
    /// (those that began later, oldest first; earlier, newest first).
    #[param(value_type = Option<String>, format = DateTime)]
    pub began: Option<String>,
    /// Page size, 1-500 (default 200). A page shorter than `limit` is the
    /// last.
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
}

/// Sessions, newest first or, with `order=oldest`, oldest first by when
/// they began, a page at a time (operators see all, an agent its own).
#[utoipa::path(get, path = "/v1/sessions", tag = "sessions", params(SessionQuery),
    responses((status = 200, description = "A page of sessions: page on with `after` set to the last id (and `began` to its `first_seen`) until a page is shorter than `limit`; a full page links the next with `Link: <…>; rel=\"next\"`", body = [Session],
            headers(("Link" = String, description = "On a full page: the next page (RFC 8288 `rel=\"next\"`), placed by the last session's id and `first_seen`"))),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`after` names no session the caller may see", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid filter or page (named)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn list_sessions(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<SessionQuery>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Response> {
    let page = list_page(q.order, q.after, q.limit);
    let full = page.limit.unwrap_or(actiongate_gate::plans::SESSIONS_PAGE);
    let sessions = state
        .gate()
        .list_sessions(&caller, q.status, q.agent, page, q.began)
        .await?;
    let next = sessions
        .last()
        .filter(|_| sessions.len() as i64 >= full)
        .map(|last| {
            let began = last
                .first_seen
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
            next_link(
                "/v1/sessions",
                raw.as_deref(),
                &[("after", &last.id), ("began", &began)],
            )
        });
    Ok(linked(axum::Json(sessions).into_response(), next))
}

/// One session.
#[utoipa::path(get, path = "/v1/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Session id: 1-200 printable characters, no surrounding whitespace", min_length = 1, max_length = 200, pattern = "^[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}](?:[^\\x00-\\x1f\\x7f-\\x9f\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}]{0,198}[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}])?$")),
    responses((status = 200, description = "The session", body = Session),
        (status = 404, description = "No such session", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not a session id", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn get_session(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<Session>> {
    Ok(axum::Json(state.gate().get_session(&caller, &id).await?))
}

/// Ends a session (its agent or an operator): its grants are void.
#[utoipa::path(post, path = "/v1/sessions/{id}/end", tag = "sessions",
    params(("id" = String, Path, description = "Session id: 1-200 printable characters, no surrounding whitespace", min_length = 1, max_length = 200, pattern = "^[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}](?:[^\\x00-\\x1f\\x7f-\\x9f\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}]{0,198}[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}])?$")),
    responses((status = 200, description = "The ended session", body = Session),
        (status = 404, description = "No such session", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Not a session id", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn end_session(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<Session>> {
    Ok(axum::Json(state.gate().end_session(&caller, &id).await?))
}

/// Ask approval for a plan (agents).
#[utoipa::path(post, path = "/v1/plans", tag = "sessions", request_body = CreatePlan,
    responses((status = 201, description = "The pending plan", body = Plan),
        (status = 200, description = "Asked before under the same idempotency key and body: that plan, as it stands now", body = Plan),
        (status = 403, description = "Not an agent key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "A step names no handler or action", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A step's handler is retired, or the idempotency key was used for another plan", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "The agent has limits.max_pending_per_agent items waiting for a human (limit-reached)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn create_plan(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<CreatePlan>,
) -> ApiResult<(StatusCode, axum::Json<Plan>)> {
    let (plan, created) = state.gate().create_plan(&caller, body).await?;
    let status = match created {
        true => StatusCode::CREATED,
        false => StatusCode::OK,
    };
    Ok((status, axum::Json(plan)))
}

/// Filters of `GET /v1/plans`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct PlanQuery {
    /// `pending`, `approved`, `denied` or `expired`.
    #[param(pattern = "^(pending|approved|denied|expired)$")]
    pub status: Option<String>,
    /// `newest` first (the default) or `oldest` first (the longest
    /// waiting first), by when they were made.
    #[param(inline)]
    pub order: Option<ListOrder>,
    /// Only plans strictly after this one in that order: the last id of
    /// the previous page.
    #[param(min_length = 1, max_length = 200, pattern = r"^[!-~]{1,200}$")]
    pub after: Option<String>,
    /// Page size, 1-500 (default 200). A page shorter than `limit` is the
    /// last, unless it links the next (`Link`: cut short for its size).
    #[param(minimum = 1, maximum = 500)]
    pub limit: Option<i64>,
}

/// Plans, newest first or, with `order=oldest`, oldest first, a page at a
/// time (operators).
#[utoipa::path(get, path = "/v1/plans", tag = "sessions", params(PlanQuery),
    responses((status = 200, description = "A page of plans: page on with `after` set to the last id until a page is shorter than `limit` and has no `Link` header with `rel=\"next\"` (a page past 2 MiB of JSON is cut short and has one)", body = [Plan],
            headers(("Link" = String, description = "`<URL>; rel=\"next\"`: the next page, when this one was cut short of `limit` for its size"))),
        (status = 403, description = "Not an operator", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`after` names no plan", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid filter or page (named)", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn list_plans(
    State(state): State<AppState>,
    Operator(caller): Operator,
    ApiQuery(q): ApiQuery<PlanQuery>,
    RawQuery(raw): RawQuery,
) -> ApiResult<Response> {
    let (plans, cut) = state
        .gate()
        .list_plans(&caller, q.status, list_page(q.order, q.after, q.limit))
        .await?;
    Ok(after_page("/v1/plans", raw.as_deref(), plans, cut, |x| {
        &x.id
    }))
}

/// One plan; `?wait=S` blocks until it is decided (or expires), at most S
/// seconds.
#[utoipa::path(get, path = "/v1/plans/{id}", tag = "sessions",
    params(("id" = String, Path, description = "Plan id"), WaitQuery),
    responses((status = 200, description = "The plan (still pending when the wait ran out)", body = Plan),
        (status = 404, description = "No such plan", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid wait", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "With ?wait: The key holds limits.max_open_per_key streams and long-polls open already", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn get_plan(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<WaitQuery>,
) -> ApiResult<axum::Json<Plan>> {
    let wait = q.duration(&state)?;
    Ok(axum::Json(
        state.gate().wait_plan(&caller, &id, wait).await?,
    ))
}

/// Approve a plan, all of it or `steps` (operators): each approved step
/// becomes session grants of one use.
#[utoipa::path(post, path = "/v1/plans/{id}/approve", tag = "sessions",
    params(("id" = String, Path, description = "Plan id")),
    request_body(content = Option<ApprovePlan>, description = "Which steps; no body approves them all"),
    responses((status = 200, description = "The approved plan (also when this caller approved the same steps before: the approval sent again)", body = Plan),
        (status = 403, description = "Not an operator, or the plan's own agent", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such plan", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Already decided otherwise, or by someone else", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn approve_plan(
    State(state): State<AppState>,
    Operator(caller): Operator,
    ApiPath(id): ApiPath<String>,
    body: Option<ApiJson<ApprovePlan>>,
) -> ApiResult<axum::Json<Plan>> {
    let steps = body.and_then(|b| b.0.steps);
    Ok(axum::Json(
        state.gate().approve_plan(&caller, &id, steps).await?,
    ))
}

/// Deny a plan (operators).
#[utoipa::path(post, path = "/v1/plans/{id}/deny", tag = "sessions",
    params(("id" = String, Path, description = "Plan id")),
    responses((status = 200, description = "The denied plan (also when this caller denied it before: the denial sent again)", body = Plan),
        (status = 403, description = "Not an operator, or the plan's own agent", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such plan", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Already decided otherwise, or by someone else", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn deny_plan(
    State(state): State<AppState>,
    Operator(caller): Operator,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<Plan>> {
    Ok(axum::Json(state.gate().deny_plan(&caller, &id).await?))
}

/// Report what ran (agents); a run no allow or approval covered raises
/// `action.undecided`.
#[utoipa::path(post, path = "/v1/runs", tag = "sessions", request_body = ReportRun,
    responses((status = 200, description = "Whether a decision covered it", body = RunMatched),
        (status = 403, description = "Not an agent key", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "The agent reported limits.max_undecided_runs_per_minute runs no decision covered this minute (limit-reached); this one was not recorded", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields", body = Problem, content_type = "application/problem+json")),
    security(("bearer" = [])))]
pub async fn report_run(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(body): ApiJson<ReportRun>,
) -> ApiResult<axum::Json<RunMatched>> {
    Ok(axum::Json(state.gate().report_run(&caller, body).await?))
}
