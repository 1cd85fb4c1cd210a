//! `/v1/actions`: request, read, list, and decide on actions.

use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::{IntoParams, ToSchema};

use actiongate_policy as policy;
use actiongate_store::{
    Action, ActionFilter, ActionStatus, ApproveFirst, Claimed, DecisionResult, HandlerAction,
    NewAction, NewGrant, Outcome, Transition,
};

use crate::auth::{Caller, Operator};
use crate::decide::{NeededPermission, decide_tool, validate_tool};
use crate::dispatcher::Slot;
use crate::error::{
    ApiError, ApiJson, ApiJsonBody, ApiPath, ApiQuery, ApiResult, Problem, is_object_text,
    object_has_key, parse_object,
};
use crate::metrics::record_decision;
use crate::routes::agents::validate_agent_id;
use crate::routes::grants;
use crate::state::AppState;
use crate::waiters::Registration;

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

/// A decision-only request: the agent runs the tool itself once allowed.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolActionRequest {
    /// Tool name, e.g. `bash`; 1-128 of `A-Z a-z 0-9 _ - .`.
    #[schema(
        pattern = r"^[A-Za-z0-9_.\-]{1,128}$",
        min_length = 1,
        max_length = 128
    )]
    pub tool: String,
    /// Tool-specific detail, e.g. the command line.
    #[schema(max_length = 65536)]
    pub detail: String,
    /// Why the agent wants to do it (shown to the human).
    #[serde(default)]
    #[schema(max_length = 4096)]
    pub reason: Option<String>,
    /// How long a human has to decide if the policy asks one, e.g. `5m`.
    /// Bounds and default are configured (`actions.min_timeout`,
    /// `max_timeout`, `default_timeout`); the pattern spells the default
    /// bounds, 1m-60m, in seconds, minutes or hours. The server also takes
    /// other spellings of a duration within the configured bounds (`1h 0m`).
    #[serde(default)]
    #[schema(
        pattern = r"^(?:(?:[1-9]|[1-5][0-9]|60)m|1h|(?:6[0-9]|[7-9][0-9]|[1-9][0-9]{2}|[12][0-9]{3}|3[0-5][0-9]{2}|3600)s)$"
    )]
    pub timeout: Option<String>,
    /// Makes retries safe: the same key and body return the first action.
    #[serde(default)]
    #[schema(max_length = 256)]
    pub idempotency_key: Option<String>,
}

/// A request for an action a registered handler performs.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HandlerActionRequest {
    /// Handler id.
    pub handler: String,
    /// Action name.
    pub action: String,
    /// Params, validated against the action's `params_schema`.
    #[schema(value_type = Object)]
    pub params: serde_json::Value,
    /// Why the agent wants to do it.
    #[serde(default)]
    #[schema(max_length = 4096)]
    pub reason: Option<String>,
    /// How long a human has to decide if the policy asks one, e.g. `5m`;
    /// bounds and default as for a decision-only action (the pattern
    /// spells the default bounds, 1m-60m).
    #[serde(default)]
    #[schema(
        pattern = r"^(?:(?:[1-9]|[1-5][0-9]|60)m|1h|(?:6[0-9]|[7-9][0-9]|[1-9][0-9]{2}|[12][0-9]{3}|3[0-5][0-9]{2}|3600)s)$"
    )]
    pub timeout: Option<String>,
    /// Makes retries safe.
    #[serde(default)]
    #[schema(max_length = 256)]
    pub idempotency_key: Option<String>,
}

/// Either a handler action or a decision-only action.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum CreateAction {
    /// `{handler, action, params, …}`.
    Handler(HandlerActionRequest),
    /// `{tool, detail, …}`.
    Tool(ToolActionRequest),
}

impl CreateAction {
    /// Parses a request body. Most are decision-only, and one that parses as
    /// such is taken as it is, with no tree of values built and taken apart
    /// first; anything else (a handler action, a body in error) takes the
    /// long way, which picks the form by its keys and names the field at
    /// fault.
    fn parse(bytes: &[u8]) -> Result<CreateAction, ApiError> {
        if is_object_text(bytes)
            && let Ok(tool) = serde_json::from_slice::<ToolActionRequest>(bytes)
        {
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

    fn common(&self) -> (Option<&str>, Option<&str>, Option<&str>) {
        match self {
            CreateAction::Handler(h) => (
                h.reason.as_deref(),
                h.timeout.as_deref(),
                h.idempotency_key.as_deref(),
            ),
            CreateAction::Tool(t) => (
                t.reason.as_deref(),
                t.timeout.as_deref(),
                t.idempotency_key.as_deref(),
            ),
        }
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
    pub fn duration(&self, state: &AppState) -> Result<Duration, ApiError> {
        let max = state.settings().actions.max_wait_seconds;
        match self.wait {
            None => Ok(Duration::ZERO),
            Some(s) if s <= max => Ok(Duration::from_secs(s)),
            Some(_) => Err(ApiError::invalid(
                "wait",
                format!("must be 0-{max} seconds"),
            )),
        }
    }
}

/// Most characters of a detail, an outcome's error text.
pub const MAX_DETAIL: usize = 64 * 1024;
/// Most characters of a reason or note.
pub const MAX_TEXT: usize = 4096;
/// Most characters of a free-text reply.
const MAX_REPLY: usize = 256;

/// Limits are in characters, as JSON Schema's `maxLength` counts them.
pub fn check_len(field: &str, value: Option<&str>, max: usize) -> Result<(), ApiError> {
    match value {
        // Counting is only needed when the bytes could exceed the limit.
        Some(v) if v.len() > max && v.chars().count() > max => Err(ApiError::invalid(
            field,
            format!("at most {max} characters"),
        )),
        _ => Ok(()),
    }
}

/// The time a human has to decide: the default, or `timeout` within the
/// configured bounds.
pub fn timeout_of(state: &AppState, timeout: Option<&str>) -> Result<Duration, ApiError> {
    let (min, max, default) = state.timeouts();
    let Some(text) = timeout else {
        return Ok(default);
    };
    let d =
        policy::parse_duration(text).map_err(|e| ApiError::invalid("timeout", e.to_string()))?;
    if d < min || d > max {
        return Err(ApiError::invalid(
            "timeout",
            format!("must be between {} and {}", humanize(min), humanize(max)),
        ));
    }
    Ok(d)
}

fn humanize(d: Duration) -> String {
    let s = d.as_secs();
    if s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

fn request_hash<T: Serialize>(body: &T) -> String {
    hex::encode(Sha256::digest(serde_json::to_vec(body).unwrap_or_default()))
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
        (status = 409, description = "Idempotency key reused with a different body, or the handler is retired", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body too large", body = Problem, content_type = "application/problem+json"),
        (status = 415, description = "Not JSON", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid fields", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn create_action(
    State(state): State<AppState>,
    caller: Caller,
    ApiQuery(q): ApiQuery<WaitQuery>,
    ApiJsonBody(body): ApiJsonBody,
) -> ApiResult<Response> {
    let agent = caller.agent_id()?.to_owned();
    let wait = q.duration(&state)?;
    let body = CreateAction::parse(&body)?;
    let (reason, timeout, key) = body.common();
    check_len("reason", reason, MAX_TEXT)?;
    check_len("idempotency_key", key, 256)?;
    let timeout = timeout_of(&state, timeout)?;
    // Only a retry with the same key compares it.
    let request_hash = key.map(|_| request_hash(&body)).unwrap_or_default();
    let mut slot = None;
    let new = match body {
        CreateAction::Tool(t) => {
            validate_tool(&t.tool)?;
            check_len("detail", Some(&t.detail), MAX_DETAIL)?;
            let decision = decide_tool(&state, &agent, &t.tool, &t.detail).await?;
            NewAction {
                reason: t.reason,
                idempotency_key: t.idempotency_key,
                request_hash,
                ..NewAction::new(agent, t.tool, t.detail, decision)
            }
        }
        CreateAction::Handler(h) => {
            let (new, s) = handler_action(&state, agent, h, request_hash).await?;
            slot = s;
            new
        }
    };
    let result = new.decision.result;
    let new = NewAction {
        deadline: chrono::Duration::from_std(timeout)
            .ok()
            .map(|d| actiongate_store::time::now() + d),
        ..new
    };
    // A waiter registered before the insert needs no read to start from,
    // and misses nothing however fast the action settles.
    let id = new.id.clone();
    let registered = (!wait.is_zero()).then(|| state.waiters().register(&id));
    let (mut action, created, rendered) = match slot {
        None => {
            let done = state.store().create_action(new).await?;
            let rendered = done
                .rendered()
                .map(|json| axum::body::Bytes::copy_from_slice(json.as_bytes()));
            (done.action, done.created, rendered)
        }
        Some(slot) => {
            let (action, created) = insert_and_start(&state, new, slot).await?;
            (action, created, None)
        }
    };
    if created {
        record_decision(result.as_str());
        if result == DecisionResult::Ask {
            state.deadlines_changed().notify_one();
        }
    }
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    if !wait.is_zero() && !action.is_settled() {
        action = match registered {
            Some(reg) if created => wait_settled_from(&state, reg, wait).await?,
            // An idempotent retry answers with an earlier action, not `id`:
            // the waiter on `id`, which will never settle, goes first.
            unused => {
                drop(unused);
                wait_settled(&state, &action.id, wait).await?
            }
        };
    } else if let Some(json) = rendered {
        // The action as stored, rendered once for its event: the same text
        // serializing it again would give.
        let content_type = HeaderValue::from_static("application/json");
        let mut resp = (status, [(header::CONTENT_TYPE, content_type)], json).into_response();
        set_location(&mut resp, &action.id);
        return Ok(resp);
    }
    Ok(with_location(status, action))
}

/// Stores an allowed handler action already claimed for its first attempt
/// and starts that attempt. One task does both, so a client that goes away
/// meanwhile cannot leave the action claimed and unsent until its lease
/// lapses.
async fn insert_and_start(
    state: &AppState,
    new: NewAction,
    slot: Slot,
) -> Result<(Action, bool), ApiError> {
    let params = new
        .handler
        .as_ref()
        .map(|h| h.params.clone())
        .unwrap_or_default();
    let state = state.clone();
    tokio::spawn(async move {
        let (action, created) = state.store().insert_action(new).await?;
        if created && action.status == ActionStatus::Running {
            let claimed = Claimed {
                action: action.clone(),
                params,
                attempt: 1,
            };
            state.dispatcher().start(&state, claimed, slot);
        }
        Ok::<_, actiongate_store::StoreError>((action, created))
    })
    .await
    .map_err(|e| {
        tracing::error!(error = %e, "storing a handler action failed");
        ApiError::internal()
    })?
    .map_err(ApiError::from)
}

/// Validates a handler action and decides it. When the policy allows it and
/// dispatch has room, it comes with a [`Slot`] and is to be stored claimed.
async fn handler_action(
    state: &AppState,
    agent: String,
    h: HandlerActionRequest,
    request_hash: String,
) -> Result<(NewAction, Option<Slot>), ApiError> {
    let handler = match state.handler(&h.handler).await {
        Ok(handler) if handler.record.retired_at.is_none() => handler,
        Ok(_) => {
            return Err(ApiError::conflict(format!(
                "handler '{}' is retired",
                h.handler
            )));
        }
        Err(e) if e.status() == StatusCode::NOT_FOUND => {
            return Err(ApiError::not_found(format!("no handler '{}'", h.handler)));
        }
        Err(e) => return Err(e),
    };
    let Some(action) = handler.action(&h.action) else {
        return Err(ApiError::not_found(format!(
            "handler '{}' has no action '{}'",
            h.handler, h.action
        )));
    };
    let violations = action.violations(&h.params);
    if !violations.is_empty() {
        return Err(ApiError::invalid_fields(violations));
    }
    let detail = action.detail(&h.params);
    check_len("params", Some(&detail), MAX_DETAIL)?;
    let scope = action.scope(&h.params);
    let permission = action.decl.permission.clone();
    let decision = crate::decide::decide(
        state,
        &agent,
        &h.handler,
        &detail,
        Some(NeededPermission {
            handler: &h.handler,
            permission: &permission,
            scope: &scope,
        }),
    )
    .await?;
    let params_view = action.masked(&h.params);
    let display = action.display(&params_view);
    let slot = if decision.result == DecisionResult::Allow {
        state.dispatcher().reserve(&h.handler)
    } else {
        None
    };
    let claim_until = slot.as_ref().map(|_| {
        actiongate_store::time::now() + state.dispatcher().lease(handler.record.timeout_ms)
    });
    let new = NewAction {
        reason: h.reason,
        idempotency_key: h.idempotency_key,
        request_hash,
        handler: Some(HandlerAction {
            handler: h.handler.clone(),
            action: h.action,
            params: h.params,
            params_view,
            permission,
            scope,
            display,
            claim_until,
        }),
        ..NewAction::new(agent, h.handler, detail, decision)
    };
    Ok((new, slot))
}

async fn wait_settled(state: &AppState, id: &str, wait: Duration) -> Result<Action, ApiError> {
    let gauge = metrics::gauge!("actiongate_long_polls_open");
    gauge.increment(1.0);
    let result = state.waiters().wait_for_action(id, wait).await;
    gauge.decrement(1.0);
    Ok(result?)
}

/// [`wait_settled`] for a waiter registered before its action was stored
/// (and seen unsettled).
async fn wait_settled_from(
    state: &AppState,
    reg: Registration<'_>,
    wait: Duration,
) -> Result<Action, ApiError> {
    let gauge = metrics::gauge!("actiongate_long_polls_open");
    gauge.increment(1.0);
    let result = state.waiters().wait_for_action_from(reg, wait).await;
    gauge.decrement(1.0);
    Ok(result?)
}

/// Loads an action the caller may see (another agent's is "not found").
async fn visible(state: &AppState, caller: &Caller, id: &str) -> Result<Action, ApiError> {
    match state.store().get_action(id).await {
        Ok(a) if caller.may_see(&a.agent) => Ok(a),
        Ok(_) | Err(actiongate_store::StoreError::NotFound) => {
            Err(ApiError::not_found(format!("no action '{id}'")))
        }
        Err(e) => Err(e.into()),
    }
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
    let action = visible(&state, &caller, &id).await?;
    if wait.is_zero() || action.is_settled() {
        return Ok(axum::Json(action));
    }
    // Neither is kept while waiting: an idle long-poll's memory is its future.
    drop((action, caller));
    Ok(axum::Json(wait_settled(&state, &id, wait).await?))
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
    /// Page size, 1-200 (default 50).
    #[param(minimum = 1, maximum = 200)]
    pub limit: Option<i64>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

/// A page of actions, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct ActionPage {
    /// The actions.
    pub items: Vec<Action>,
    /// Pass as `cursor` for the next page; absent on the last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// List actions, newest first.
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
    let limit = q.limit.unwrap_or(50);
    if !(1..=200).contains(&limit) {
        return Err(ApiError::invalid("limit", "must be 1-200"));
    }
    if let Some(agent) = &q.agent {
        validate_agent_id(agent)
            .map_err(|_| ApiError::invalid("agent", "1-128 characters from A-Z a-z 0-9 _ - . @"))?;
    }
    if let Some(tool) = &q.tool {
        validate_tool(tool)?;
    }
    let agent = if caller.sees_all() {
        q.agent
    } else {
        let own = caller.agent_id()?.to_owned();
        if q.agent.as_deref().is_some_and(|a| a != own) {
            // Another agent's actions are invisible: an empty page.
            return Ok(axum::Json(ActionPage {
                items: Vec::new(),
                next_cursor: None,
            }));
        }
        Some(own)
    };
    let filter = ActionFilter {
        status: q.status,
        agent,
        tool: q.tool,
        cursor: q.cursor,
        limit: limit + 1,
    };
    let mut items = state.store().list_actions(&filter).await?;
    let next_cursor = if items.len() as i64 > limit {
        items.truncate(limit as usize);
        items.last().map(|a| a.id.clone())
    } else {
        None
    };
    Ok(axum::Json(ActionPage { items, next_cursor }))
}

/// Body of an approval.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproveBody {
    /// A note kept with the decision.
    #[serde(default)]
    #[schema(max_length = 4096)]
    pub note: Option<String>,
    /// Also grant a standing permission (the "don't ask again" of the gear icon).
    #[serde(default)]
    pub remember: Option<Remember>,
}

/// A grant made while approving.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Remember {
    /// `1h`, `30m`, `2d`, `today`, `indefinite` or an RFC 3339 time.
    #[schema(pattern = r"^(?:[1-9][0-9]{0,3}[smhdw]|today|indefinite)$")]
    pub expires: String,
    /// Handler actions: the scope granted (default: this action's scope); values may be globs.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub scope: Option<serde_json::Map<String, serde_json::Value>>,
    /// Decision-only actions: full-match pattern over the detail (default: exactly this detail).
    #[serde(default)]
    #[schema(format = Regex)]
    pub pattern: Option<String>,
    /// The agent it is for: default this action's agent; `*` for any agent.
    #[serde(default)]
    pub agent: Option<String>,
}

/// Body of a denial.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DenyBody {
    /// Why it was denied (the agent sees it).
    #[serde(default)]
    #[schema(max_length = 4096)]
    pub reason: Option<String>,
}

/// Body of a free-text reply.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplyBody {
    /// yes/approve/ok/continue or no/reject/stop/cancel, in any case,
    /// with surrounding whitespace and ASCII punctuation ignored (`"Yes!"`).
    #[schema(
        max_length = 256,
        pattern = r"^[\t\n\r !-/:-@\[-`{-~]*(?:[Yy][Ee][Ss]|[Aa][Pp][Pp][Rr][Oo][Vv][Ee]|[Oo][Kk]|[Cc][Oo][Nn][Tt][Ii][Nn][Uu][Ee]|[Nn][Oo]|[Rr][Ee][Jj][Ee][Cc][Tt]|[Ss][Tt][Oo][Pp]|[Cc][Aa][Nn][Cc][Ee][Ll])[\t\n\r !-/:-@\[-`{-~]*$"
    )]
    pub text: String,
}

const PENDING: &[ActionStatus] = &[ActionStatus::Pending];

async fn decide_pending(
    state: &AppState,
    Operator(caller): &Operator,
    id: &str,
    to: ActionStatus,
    note: Option<String>,
    note_field: &str,
) -> ApiResult<axum::Json<Action>> {
    check_len(note_field, note.as_deref(), MAX_TEXT)?;
    let action = visible(state, caller, id).await?;
    if to == ActionStatus::Approved {
        caller.not_for_own(Some(&action.agent))?;
    }
    let event = if to == ActionStatus::Approved {
        "action.approved"
    } else {
        "action.denied"
    };
    let action = state
        .store()
        .transition(
            id,
            Transition {
                from: PENDING,
                to,
                decided_by: Some(caller.identity()),
                note,
                outcome: None,
                event,
            },
        )
        .await?;
    Ok(axum::Json(action))
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
        (status = 200, description = "Approved", body = Action),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an operator", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such action", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Already settled; carries current_status", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid body", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn approve(
    State(state): State<AppState>,
    operator: Operator,
    ApiPath(id): ApiPath<String>,
    body: Option<ApiJson<ApproveBody>>,
) -> ApiResult<axum::Json<Action>> {
    let body = optional(body);
    match body.remember {
        None => {
            decide_pending(
                &state,
                &operator,
                &id,
                ActionStatus::Approved,
                body.note,
                "note",
            )
            .await
        }
        Some(remember) => approve_and_remember(&state, &operator, &id, body.note, remember).await,
    }
}

/// Approves `id` and grants what `remember` says, in one transaction.
async fn approve_and_remember(
    state: &AppState,
    Operator(caller): &Operator,
    id: &str,
    note: Option<String>,
    remember: Remember,
) -> ApiResult<axum::Json<Action>> {
    check_len("note", note.as_deref(), MAX_TEXT)?;
    let action = visible(state, caller, id).await?;
    let target = match (&action.handler, &action.permission) {
        (Some(handler), Some(permission)) => {
            if remember.pattern.is_some() {
                return Err(ApiError::invalid(
                    "remember.pattern",
                    "handler actions are granted by scope, not pattern",
                ));
            }
            let scope = remember
                .scope
                .clone()
                .or_else(|| action.scope.clone())
                .unwrap_or_default();
            grants::permission_target(state, handler, permission, scope, "remember.scope").await?
        }
        _ => {
            if remember.scope.is_some() {
                return Err(ApiError::invalid(
                    "remember.scope",
                    "decision-only actions are granted by pattern, not scope",
                ));
            }
            let pattern = remember
                .pattern
                .clone()
                .unwrap_or_else(|| regex::escape(&action.detail));
            grants::tool_target(&action.tool, &pattern, "remember.pattern")?
        }
    };
    let agent = match remember.agent.as_deref() {
        None => Some(action.agent.clone()),
        Some("*") => None,
        Some(a) => {
            crate::routes::agents::validate_agent_id(a).map_err(|_| {
                ApiError::invalid("remember.agent", "an agent id, or * for any agent")
            })?;
            Some(a.to_owned())
        }
    };
    caller.not_for_own(Some(&action.agent))?;
    caller.not_for_own(agent.as_deref())?;
    let expires_at = grants::parse_expires(state, &remember.expires, "remember.expires")?;
    let new = NewGrant {
        id: grants::new_grant_id(),
        agent,
        target,
        granted_by: caller.identity(),
        expires_at,
        note: note.clone(),
    };
    let first = ApproveFirst {
        action_id: id.to_owned(),
        decided_by: caller.identity(),
        note,
    };
    let created = state.store().create_grant(new, Some(first)).await?;
    created
        .approved_first
        .map(axum::Json)
        .ok_or_else(ApiError::internal)
}

/// Deny a pending action (operators).
#[utoipa::path(
    post, path = "/v1/actions/{id}/deny", tag = "actions",
    params(("id" = String, Path, description = "Action id (a UUID)")),
    request_body(content = Option<DenyBody>),
    responses(
        (status = 200, description = "Denied", body = Action),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an operator", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such action", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Already settled; carries current_status", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Invalid body", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn deny(
    State(state): State<AppState>,
    operator: Operator,
    ApiPath(id): ApiPath<String>,
    body: Option<ApiJson<DenyBody>>,
) -> ApiResult<axum::Json<Action>> {
    let body = optional(body);
    decide_pending(
        &state,
        &operator,
        &id,
        ActionStatus::Denied,
        body.reason,
        "reason",
    )
    .await
}

/// Decide by free text: yes/approve/ok/continue or no/reject/stop/cancel (operators).
#[utoipa::path(
    post, path = "/v1/actions/{id}/reply", tag = "actions",
    params(("id" = String, Path, description = "Action id (a UUID)")),
    request_body = ReplyBody,
    responses(
        (status = 200, description = "Approved or denied", body = Action),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not an operator", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such action", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Already settled; carries current_status", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "Reply not understood", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn reply(
    State(state): State<AppState>,
    operator: Operator,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ReplyBody>,
) -> ApiResult<axum::Json<Action>> {
    check_len("text", Some(&body.text), MAX_REPLY)?;
    let to = match policy::parse_reply(&body.text) {
        Some(policy::Reply::Approve) => ActionStatus::Approved,
        Some(policy::Reply::Deny) => ActionStatus::Denied,
        None => {
            return Err(ApiError::invalid(
                "text",
                "not understood; say yes, approve, ok or continue to approve, or no, reject, stop or cancel to deny",
            ));
        }
    };
    let note = Some(format!("reply: {}", body.text.trim()));
    decide_pending(&state, &operator, &id, to, note, "text").await
}

/// Cancel a pending action (its agent or an operator).
#[utoipa::path(
    post, path = "/v1/actions/{id}/cancel", tag = "actions",
    params(("id" = String, Path, description = "Action id (a UUID)")),
    responses(
        (status = 200, description = "Cancelled", body = Action),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such action visible to the caller", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Not pending; carries current_status", body = Problem, content_type = "application/problem+json"),
    ),
    security(("bearer" = []))
)]
pub async fn cancel(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(id): ApiPath<String>,
) -> ApiResult<axum::Json<Action>> {
    visible(&state, &caller, &id).await?;
    let action = state
        .store()
        .transition(
            &id,
            Transition {
                from: PENDING,
                to: ActionStatus::Cancelled,
                decided_by: Some(caller.identity()),
                note: None,
                outcome: None,
                event: "action.cancelled",
            },
        )
        .await?;
    Ok(axum::Json(action))
}

/// What the agent reports after running an approved decision-only action.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OutcomeBody {
    /// How it went.
    pub status: OutcomeStatus,
    /// Any result payload (any JSON value).
    #[serde(default)]
    pub result: Option<serde_json::Value>,
    /// Error text when it failed.
    #[serde(default)]
    #[schema(max_length = 65536)]
    pub error: Option<String>,
}

/// How an approved action went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum OutcomeStatus {
    /// It ran and succeeded.
    Completed,
    /// It ran and failed, or could not run.
    Failed,
}

/// Report the outcome of an approved action (its agent).
#[utoipa::path(
    post, path = "/v1/actions/{id}/outcome", tag = "actions",
    params(("id" = String, Path, description = "Action id (a UUID)")),
    request_body = OutcomeBody,
    responses(
        (status = 200, description = "Outcome recorded", body = Action),
        (status = 401, description = "Missing or unknown key", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "Not the action's agent", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such action visible to the caller", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "Not approved; carries current_status", body = Problem, content_type = "application/problem+json"),
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
    let action = visible(&state, &caller, &id).await?;
    if action.handler.is_some() {
        return Err(ApiError::conflict(
            "handler actions get their outcome from their executor",
        ));
    }
    if caller.agent.as_deref() != Some(action.agent.as_str()) {
        return Err(ApiError::forbidden(
            "only the agent that requested the action reports its outcome",
        ));
    }
    let (to, event) = match body.status {
        OutcomeStatus::Completed => (ActionStatus::Completed, "action.completed"),
        OutcomeStatus::Failed => (ActionStatus::Failed, "action.failed"),
    };
    check_len("error", body.error.as_deref(), MAX_DETAIL)?;
    let outcome = Outcome {
        status: to,
        result: body.result,
        error: body.error,
    };
    let action = state
        .store()
        .transition(
            &id,
            Transition {
                from: &[ActionStatus::Approved],
                to,
                decided_by: None,
                note: None,
                outcome: Some(outcome),
                event,
            },
        )
        .await?;
    Ok(axum::Json(action))
}
