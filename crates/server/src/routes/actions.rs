//! `/v1/actions`: request, read, list, and decide on actions.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use actiongate_api::{
    ApproveBody, CreateAction, DenyBody, ListOrder, OutcomeBody, ReplyBody, ToolActionRequest,
};
use actiongate_gate::actions::ListActions;
use actiongate_gate::decisions::Verdict;
use actiongate_gate::quorum::EditRequest;
use actiongate_gate::{Action, ActionStatus};

use crate::auth::{Caller, Operator};
use crate::error::{
    ApiError, ApiJson, ApiJsonBody, ApiPath, ApiQuery, ApiResult, Problem, is_object_text,
    object_has_key, parse_object, refuse_nul,
};
use crate::state::AppState;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/actions", post(create_action).get(list_actions))
        .route("/v1/actions/{id}", get(get_action))
        .route("/v1/actions/{id}/approve", post(approve))
        .route("/v1/actions/{id}/deny", post(deny))
        .route("/v1/actions/{id}/reply", post(reply))
        .route("/v1/actions/{id}/cancel", post(cancel))
        .route("/v1/actions/{id}/outcome", post(outcome))
}

/// Parses a request body. Most are decision-only, and one that parses as
/// such is taken as it is, with no tree of values built and taken apart
/// first; anything else (a handler action, a body in error) takes the
/// long way, which picks the form by its keys and names the field at
/// fault.
fn parse_create_action(bytes: &[u8]) -> Result<CreateAction, ApiError> {
    if is_object_text(bytes)
        && let Ok(tool) = serde_json::from_slice::<ToolActionRequest>(bytes)
    {
        refuse_nul(bytes)?;
        return Ok(CreateAction::Tool(tool));
    }
    // The form is picked by its keys, so errors name the right fields
    // (an unknown one, one of the wrong type, one given twice).
    if object_has_key(bytes, "handler") {
        parse_object(bytes).map(CreateAction::Handler)
    } else {
        parse_object(bytes).map(CreateAction::Tool)
    }
}

/// `?wait=S`: long-poll up to S seconds for the action to settle.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct WaitQuery {
    /// Seconds to wait for the action to settle: 0 (the default) to
    /// `actions.max_wait_seconds` (60 by default).
    #[param(minimum = 0, maximum = 60)]
    pub wait: Option<u64>,
}

impl WaitQuery {
    /// The wait, checked against the configured maximum.
    pub fn duration(&self, state: &AppState) -> Result<std::time::Duration, ApiError> {
        Ok(state.gate().wait_of(self.wait)?)
    }
}

fn with_location(status: StatusCode, action: Action) -> Response {
    let id = action.id.clone();
    let mut resp = (status, axum::Json(action)).into_response();
    set_location(&mut resp, &id);
    resp
}

fn set_location(resp: &mut Response, id: &str) {
    if let Ok(v) = HeaderValue::from_str(&format!("/v1/actions/{id}")) {
        resp.headers_mut().insert(header::LOCATION, v);
    }
}

/// Request an action.
#[utoipa::path(
    post, path = "/v1/actions", tag = "actions",
    params(WaitQuery),
    request_body = CreateAction,
    responses(
        (status = 201, description = "Decided (approved or denied) or queued for a human (pending)", body = Action),
        (status = 200, description = "The same idempotency key and body were sent before: the existing action", body = Action),
        (status = 400, description = "Malformed JSON", body = Problem, content_type = "application/problem+json"),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Key not bound to an agent", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such handler or action", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Idempotency key reused with a different body, or for a call whose run was reported (`POST /v1/runs`), or the handler is retired", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "The agent has limits.max_pending_per_agent items waiting for a human, or (with ?wait) the key holds limits.max_open_per_key streams and long-polls open already (limit-reached)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn create_action(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<WaitQuery>,
    ApiJsonBody(body): ApiJsonBody,
) -> ApiResult<Response> {
    caller.agent_id()?;
    let wait = q.duration(&state)?;
    let body = parse_create_action(&body)?;
    let done = state.gate().request_action(&caller, body, wait).await?;
    let status = if done.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    if let Some(json) = done.rendered {
        // The action as stored, rendered once for its event: the same text
        // serializing it again would give.
        let content_type = HeaderValue::from_static("application/json");
        let mut resp = (status, [(header::CONTENT_TYPE, content_type)], json).into_response();
        set_location(&mut resp, &done.action.id);
        return Ok(resp);
    }
    Ok(with_location(status, done.action))
}

/// Read an action; `?wait=S` long-polls until it settles.
#[utoipa::path(
    get, path = "/v1/actions/{id}", tag = "actions",
    params(("id" = String, Path, description = "Action id (a UUID)"), WaitQuery),
    responses(
        (status = 200, description = "The action", body = Action),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such action visible to the caller", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid wait", body = Problem, content_type = "application/problem+json"),
        (status = 429, description = "With ?wait: The key holds limits.max_open_per_key streams and long-polls open already", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn get_action(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<WaitQuery>,
) -> ApiResult<axum::Json<Action>> {
    let wait = q.duration(&state)?;
    Ok(axum::Json(
        state.gate().get_action(&caller, &id, wait).await?,
    ))
}

/// Filters and paging of `GET /v1/actions`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only actions in this status.
    pub status: Option<ActionStatus>,
    /// Only this agent's actions (agents always see only their own).
    #[param(
        pattern = r"^[A-Za-z0-9_.@\-]{1,128}$",
        min_length = 1,
        max_length = 128
    )]
    pub agent: Option<String>,
    /// Only this tool's actions.
    #[param(
        pattern = r"^[A-Za-z0-9_.\-]{1,128}$",
        min_length = 1,
        max_length = 128
    )]
    pub tool: Option<String>,
    /// Only the actions of this session.
    #[param(
        min_length = 1,
        max_length = 200,
        pattern = "^[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}](?:[^\\x00-\\x1f\\x7f-\\x9f\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u206f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}]{0,198}[^\\x00-\\x20\\x7f-\\xa0\\u1680\\u2000-\\u200f\\u2028-\\u202f\\u205f-\\u206f\\u3000\\xad\\u034f\\u0600-\\u0605\\u061c\\u06dd\\u070f\\u08e2\\u115f\\u1160\\u17b4\\u17b5\\u180b-\\u180f\\u2800\\u3164\\ufe00-\\ufe0f\\ufeff\\uffa0\\ufff0-\\ufffb\u{110BD}\u{110CD}\u{13430}-\u{1343F}\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}\u{E0000}-\u{E0FFF}])?$"
    )]
    pub session: Option<String>,
    /// Page size, 1-200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<i64>,
    /// `next_cursor` of the previous page (an action id).
    #[param(
        pattern = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
    )]
    pub cursor: Option<String>,
    /// `newest` first (the default) or `oldest` first; a cursor pages on
    /// in the order it came from.
    #[param(inline)]
    pub order: Option<ListOrder>,
}

/// A page of actions, newest (or oldest) first.
#[derive(Debug, Serialize, ToSchema)]
pub struct ActionPage {
    /// The actions.
    pub items: Vec<Action>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// List actions, newest first (or, with `order=oldest`, oldest first).
#[utoipa::path(
    get, path = "/v1/actions", tag = "actions",
    params(ListQuery),
    responses(
        (status = 200, description = "A page of actions", body = ActionPage),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid filter", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn list_actions(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<axum::Json<ActionPage>> {
    let (items, next_cursor) = state
        .gate()
        .list_actions(
            &caller,
            ListActions {
                status: q.status,
                agent: q.agent,
                tool: q.tool,
                session: q.session,
                limit: q.limit,
                cursor: q.cursor,
                oldest_first: q.order == Some(ListOrder::Oldest),
            },
        )
        .await?;
    Ok(axum::Json(ActionPage { items, next_cursor }))
}

/// Body given to endpoints whose body is optional.
fn optional<T: Default>(body: Option<ApiJson<T>>) -> T {
    body.map(|b| b.0).unwrap_or_default()
}

/// Approve a pending action (operators).
#[utoipa::path(
    post, path = "/v1/actions/{id}/approve", tag = "actions",
    params(("id" = String, Path, description = "Action id (a UUID)")),
    request_body(content = Option<ApproveBody>),
    responses(
        (status = 200, description = "Approved; or, when it needs approvals from more people, still pending with `approvals` grown", body = Action),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an operator, or not an approver under the action's approvals rule (named)", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such action", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Already settled otherwise (carries current_status; the same decision sent again by its decider is answered 200 as it stands), already approved by this person through another identity, or `remember.session` has ended", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid body, or edited params/detail invalid or denied (still pending)", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn approve(
    State(state): State<AppState>,
    Operator(caller): Operator,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
    body: Option<ApiJson<ApproveBody>>,
) -> ApiResult<axum::Json<Action>> {
    let body = optional(body);
    let verdict = match body.remember {
        None => Verdict::Approve { note: body.note },
        Some(remember) => Verdict::ApproveAndRemember {
            note: body.note,
            remember,
        },
    };
    let edit = EditRequest {
        params: body.params,
        detail: body.detail,
        seen: body.seen,
    };
    let channel = channel(&headers, &caller);
    Ok(axum::Json(
        state
            .gate()
            .decide_via(&caller, &id, verdict, channel, edit)
            .await?,
    ))
}

/// The channel a key's decision came through: the `X-Actiongate-Channel`
/// header (the page sends `page`, the CLI `cli`), else `api`; a chat
/// identity's is its chat.
fn channel<'a>(headers: &'a HeaderMap, caller: &Caller) -> &'a str {
    match headers
        .get("x-actiongate-channel")
        .and_then(|v| v.to_str().ok())
    {
        Some(c) if caller.via.is_none() => c,
        _ => actiongate_gate::quorum::channel_of(caller),
    }
}

/// Deny a pending action (operators).
#[utoipa::path(
    post, path = "/v1/actions/{id}/deny", tag = "actions",
    params(("id" = String, Path, description = "Action id (a UUID)")),
    request_body(content = Option<DenyBody>),
    responses(
        (status = 200, description = "Denied (or denied before by this caller: the denial sent again, answered as the action stands)", body = Action),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an operator", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such action", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Already settled otherwise, or by someone else; carries current_status", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid body", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn deny(
    State(state): State<AppState>,
    Operator(caller): Operator,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
    body: Option<ApiJson<DenyBody>>,
) -> ApiResult<axum::Json<Action>> {
    let body = optional(body);
    let verdict = Verdict::Deny {
        reason: body.reason,
    };
    let channel = channel(&headers, &caller);
    Ok(axum::Json(
        state
            .gate()
            .decide_via(&caller, &id, verdict, channel, EditRequest::default())
            .await?,
    ))
}

/// Decide by free text: yes/approve/ok/continue or no/reject/stop/cancel (operators).
#[utoipa::path(
    post, path = "/v1/actions/{id}/reply", tag = "actions",
    params(("id" = String, Path, description = "Action id (a UUID)")),
    request_body = ReplyBody,
    responses(
        (status = 200, description = "Approved or denied (or so decided before by this caller: the decision sent again, answered as the action stands)", body = Action),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an operator", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such action", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Already settled otherwise, or by someone else; carries current_status", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Reply not understood", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn reply(
    State(state): State<AppState>,
    Operator(caller): Operator,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ReplyBody>,
) -> ApiResult<axum::Json<Action>> {
    Ok(axum::Json(
        state.gate().reply(&caller, &id, &body.text).await?,
    ))
}

/// Cancel a pending action (its agent or an operator).
#[utoipa::path(
    post, path = "/v1/actions/{id}/cancel", tag = "actions",
    params(("id" = String, Path, description = "Action id (a UUID)")),
    responses(
        (status = 200, description = "Cancelled (also when this caller cancelled it before: the cancel sent again)", body = Action),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such action visible to the caller", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Not pending, and not cancelled by this caller; carries current_status", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn cancel(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<Action>> {
    Ok(axum::Json(state.gate().cancel(&caller, &id).await?))
}

/// Report the outcome of an approved action (its agent).
#[utoipa::path(
    post, path = "/v1/actions/{id}/outcome", tag = "actions",
    params(("id" = String, Path, description = "Action id (a UUID)")),
    request_body = OutcomeBody,
    responses(
        (status = 200, description = "Outcome recorded (also when this same outcome was reported before: the report sent again)", body = Action),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not the action's agent", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such action visible to the caller", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Not approved, and not holding this same outcome; carries current_status", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid body", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn outcome(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<OutcomeBody>,
) -> ApiResult<axum::Json<Action>> {
    Ok(axum::Json(state.gate().outcome(&caller, &id, body).await?))
}
