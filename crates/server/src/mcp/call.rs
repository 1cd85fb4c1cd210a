//! `tools/call`: each tool turned into gate calls and the answer into a
//! tool result (or, for a client that takes tasks, a task while a human
//! decides: see [`super::tasks`]). Whatever goes wrong is an error result
//! naming it; nothing that fails is ever reported as allowed.

use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CreateTaskResult,
    JsonObject, RequestMetaObject,
};
use serde::Deserialize;
use serde_json::{Value, json};

use actiongate_api::actions::{CreateAction, HandlerActionRequest, ToolActionRequest};
use actiongate_cli::hooks::Fallback;
use actiongate_cli::hooks::claude_code::call_of;
use actiongate_cli::hooks::gate::{Verdict, answer_for};
use actiongate_gate::{Action, ActionStatus};
use actiongate_gate::{Caller, GateError};

use super::sessions::ConnectionTrail;
use super::tasks::{self, Kind};
use super::tools::{
    APPROVAL_PROMPT, CHECK_ACTION, GET_ACTION_STATUS, REQUEST_ACTION, REQUEST_PERMISSION,
    REQUEST_PLAN_APPROVAL,
};
use super::wait::{OnLeave, WaitEnd, Waiter};
use crate::state::AppState;

/// How long a call waits inside its request before waiting in steps with
/// progress (see `Ctx::request`).
const FIRST_WAIT: Duration = Duration::from_millis(500);

/// The tool `permission`'s actions stand for `request_permission` calls.
pub const PERMISSION_TOOL: &str = "permission";

/// Where a call came from besides its arguments: its `_meta`, and what
/// its key and MCP session carry ([`ConnectionTrail`]).
pub struct Meta<'a> {
    /// The call's `_meta`.
    pub meta: &'a RequestMetaObject,
    /// The key's trail of gate sessions, and the MCP session's own.
    pub trail: Option<ConnectionTrail>,
}

/// Runs one tool call. With `tasks` (the client takes tasks), a call whose
/// action waits for a human answers at once with its task.
pub async fn call(
    state: &AppState,
    caller: &Caller,
    request: CallToolRequestParams,
    from: Meta<'_>,
    waiter: Waiter,
    tasks: bool,
) -> CallToolResponse {
    let session = match meta_session(from.meta) {
        Ok(session) => session,
        Err(r) => return r.into(),
    };
    let args = request.arguments.unwrap_or_default();
    let name = request.name.as_ref();
    let ctx = Ctx {
        state,
        caller,
        waiter,
        tasks,
        session,
        implicit: from.trail.as_ref().and_then(|t| t.implicit.clone()),
    };
    let carried_into = match &from.trail {
        Some(trail) => match ctx.carry(name, &args, trail).await {
            Ok(to) => to,
            // Fail closed: a call whose session may be tainted is not made.
            Err(e) => return gate_error(e).into(),
        },
        None => None,
    };
    let result = match name {
        REQUEST_PERMISSION => ctx.request_permission(args).await,
        CHECK_ACTION => ctx.check_action(args).await,
        REQUEST_ACTION => ctx.request_action(args).await,
        GET_ACTION_STATUS => ctx.get_action_status(args).await,
        APPROVAL_PROMPT => Ok(ctx.approval_prompt(args).await),
        REQUEST_PLAN_APPROVAL => {
            Ok(super::plans::call(state, caller, args, ctx.session.as_ref()).await)
        }
        other => ctx.handler_tool(other, args).await,
    };
    // Before the model reads the answer (what may have tainted the
    // session), the key's own session takes the taint.
    if let (Some(to), Some(trail)) = (carried_into, &from.trail) {
        trail.record(state.gate(), caller, &to).await;
    }
    match result {
        Ok(r) | Err(Reply::Result(r)) => r.into(),
        Err(Reply::Task(t)) => CallToolResponse::Task(t),
    }
}

struct Ctx<'a> {
    state: &'a AppState,
    caller: &'a Caller,
    waiter: Waiter,
    tasks: bool,
    /// The session the call's `_meta` names ([`SESSION_META`]).
    session: Option<String>,
    /// The session of a call over an MCP session (handshake era) that
    /// names none: the connection's own.
    implicit: Option<String>,
}

/// The `_meta` key of a tool call naming the session its action belongs
/// to: the only way to give one to a handler's tool, whose input is the
/// handler's parameters (and to `request_permission`).
pub const SESSION_META: &str = "actiongate/session";

/// The session the call's `_meta` names (rmcp hands it over in the
/// request's context), if any; not a string is an error result.
fn meta_session(meta: &RequestMetaObject) -> Result<Option<String>, CallToolResult> {
    match meta.0.get(SESSION_META) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(text_error(format!(
            "invalid _meta: {SESSION_META} must be a string"
        ))),
    }
}

/// The session of a tool whose arguments may name one too (`argument`),
/// given the one its `_meta` names: they must not name another.
pub fn session_of(
    argument: Option<String>,
    meta: Option<&String>,
) -> Result<Option<String>, CallToolResult> {
    match (argument, meta) {
        (Some(a), Some(m)) if a != *m => Err(text_error(format!(
            "invalid arguments: session '{a}' is not the session _meta names ({SESSION_META})"
        ))),
        (Some(a), _) => Ok(Some(a)),
        (None, m) => Ok(m.cloned()),
    }
}

impl Ctx<'_> {
    /// [`session_of`] this call's `_meta`; a call naming none over an MCP
    /// session is in that connection's own.
    fn session_of(&self, argument: Option<String>) -> Result<Option<String>, CallToolResult> {
        Ok(session_of(argument, self.session.as_ref())?.or_else(|| self.implicit.clone()))
    }

    /// The session a tool that takes no `session` argument runs in.
    fn own_session(&self) -> Option<String> {
        self.session.clone().or_else(|| self.implicit.clone())
    }

    /// Carries into the session this call names (`tool`'s `session`
    /// argument, `_meta`'s, or the connection's own) any taint of the
    /// sessions the key named over `/mcp` before, then records it there: a
    /// model that read a stranger's text cannot shed the taint by naming
    /// a fresh session, or none, or by connecting again
    /// (`actiongate_gate::carried_taint`).
    /// The session carried into, when it is the caller's own.
    async fn carry(
        &self,
        tool: &str,
        args: &JsonObject,
        trail: &ConnectionTrail,
    ) -> Result<Option<String>, GateError> {
        // An operator's or admin's key acts in no agent's session.
        if self.caller.agent.is_none() {
            return Ok(None);
        }
        let argument = match tool {
            CHECK_ACTION | REQUEST_ACTION | REQUEST_PLAN_APPROVAL => args
                .get("session")
                .and_then(Value::as_str)
                .map(str::to_owned),
            _ => None,
        };
        // A plan looked up by id alone names no session of its own.
        if tool == REQUEST_PLAN_APPROVAL && argument.is_none() && self.session.is_none() {
            return Ok(None);
        }
        let Ok(Some(to)) = self.session_of(argument) else {
            return Ok(None);
        };
        let mut from = match trail.trail.lock() {
            Ok(t) => t.others(&to),
            Err(_) => return Err(GateError::internal()),
        };
        // The key's own session holds what its calls met on any daemon
        // lately (this daemon's trail may never have seen it).
        if trail.key_session != to && self.state.gate().tainted_lately(&trail.key_session).await? {
            from.insert(0, trail.key_session.clone());
        }
        let carried = self
            .state
            .gate()
            .carry_taint(self.caller, &from, &to)
            .await?;
        if !carried.own {
            return Ok(None);
        }
        match trail.trail.lock() {
            Ok(mut t) => t.push(&to, carried.tainted),
            Err(_) => return Err(GateError::internal()),
        }
        Ok(Some(to))
    }
}

/// How a tool call ends early: an (error) result, or a task to follow.
enum Reply {
    Result(CallToolResult),
    Task(CreateTaskResult),
}

impl From<CallToolResult> for Reply {
    fn from(r: CallToolResult) -> Reply {
        Reply::Result(r)
    }
}

type ToolResult = Result<CallToolResult, Reply>;

fn text_error(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

fn gate_error(e: GateError) -> CallToolResult {
    text_error(format!("actiongate: {e}"))
}

fn wait_error(e: WaitEnd) -> CallToolResult {
    match e {
        WaitEnd::Gone => text_error("the call was cancelled; the request was withdrawn"),
        WaitEnd::Failed(e) => gate_error(e),
    }
}

fn parse<T: for<'de> Deserialize<'de>>(args: JsonObject) -> Result<T, CallToolResult> {
    serde_json::from_value(Value::Object(args))
        .map_err(|e| text_error(format!("invalid arguments: {e}")))
}

/// `timeout_minutes` as the gate's timeout text; 1-60, default 15.
fn timeout_of(minutes: Option<f64>) -> Result<(f64, String), CallToolResult> {
    let m = minutes.unwrap_or(15.0);
    if !(1.0..=60.0).contains(&m) {
        return Err(text_error(
            "invalid arguments: timeout_minutes must be between 1 and 60",
        ));
    }
    Ok((m, format!("{}s", (m * 60.0).round() as u64)))
}

fn minutes_text(m: f64) -> String {
    if m.fract() == 0.0 {
        format!("{m:.0}")
    } else {
        format!("{m}")
    }
}

/// Why an action ended as it did: the human's note, or the policy's reason
/// (also when a standing grant allowed it as it was asked), or the grant
/// made for it.
fn reason_of(a: &Action) -> String {
    if let Some(note) = a.decision_note.clone().filter(|n| !n.trim().is_empty()) {
        return note;
    }
    match a.decided_by.as_deref() {
        None | Some("policy") => a.decision.reason.clone(),
        // Settled as it was asked (by a standing grant): the decision says why.
        Some(_) if a.decided_at == Some(a.created_at) => a.decision.reason.clone(),
        Some(by) => match by.strip_prefix("grant:") {
            Some(id) => format!("allowed by grant {id}"),
            None => "no reason given".to_owned(),
        },
    }
}

fn action_json(a: &Action) -> Value {
    serde_json::to_value(a).unwrap_or(Value::Null)
}

/// A result with `text` and the action as structured content.
fn with_action(text: String, a: &Action, is_error: bool) -> CallToolResult {
    let mut r = if is_error {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    r.structured_content = Some(json!({"action": action_json(a)}));
    r
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PermissionArgs {
    permission: String,
    reason: String,
    #[serde(default)]
    timeout_minutes: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CheckArgs {
    tool: String,
    detail: String,
    #[serde(default)]
    session: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestArgs {
    tool: String,
    detail: String,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    timeout_minutes: Option<f64>,
    #[serde(default)]
    wait_seconds: Option<u64>,
    #[serde(default)]
    session: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StatusArgs {
    id: String,
    #[serde(default)]
    wait_seconds: Option<u64>,
}

#[derive(Deserialize)]
struct PromptArgs {
    tool_name: String,
    input: Value,
    #[serde(default)]
    tool_use_id: Option<String>,
}

impl Ctx<'_> {
    /// Requests `body` now and waits (up to `limit`, or until settled).
    /// A client that takes tasks gets one instead when the action waits for
    /// a human and the tool (`kind`) can answer through a task.
    async fn request(
        &self,
        body: CreateAction,
        limit: Option<Duration>,
        kind: Option<Kind>,
    ) -> Result<Action, Reply> {
        let gate = self.state.gate();
        let task = kind.filter(|_| self.tasks);
        // Most calls settle at once or within milliseconds (an allowed
        // handler action on its executor): the gate waits for them in the
        // request itself, with its waiter registered before the insert, so
        // no read follows. A task needs the answer at once. The wait is
        // short because a client that leaves during it is noticed only at
        // its end (the action's id is not known before).
        let first = match (limit, task) {
            (Some(l), _) if l.is_zero() => Duration::ZERO,
            (_, Some(_)) => Duration::ZERO,
            (Some(l), None) => l.min(FIRST_WAIT),
            (None, None) => FIRST_WAIT,
        };
        let action = gate
            .request_action(self.caller, body, first)
            .await
            .map_err(gate_error)?
            .action;
        if limit.is_some_and(|l| l.is_zero()) || action.is_settled() {
            return Ok(action);
        }
        if let Some(kind) = task
            && action.status == ActionStatus::Pending
        {
            return Err(Reply::Task(tasks::created(kind, &action)));
        }
        if self.waiter.gone() {
            return Err(wait_error(self.waiter.withdraw(gate, self.caller, &action).await).into());
        }
        let rest = limit.map(|l| l.saturating_sub(first));
        Ok(self
            .waiter
            .until_settled(gate, self.caller, action, rest, first, OnLeave::Withdraw)
            .await
            .map_err(wait_error)?)
    }

    async fn request_permission(&self, args: JsonObject) -> ToolResult {
        let a: PermissionArgs = parse(args)?;
        if a.permission.is_empty() || a.reason.trim().is_empty() {
            return Err(
                text_error("invalid arguments: permission and reason must not be empty").into(),
            );
        }
        let (minutes, timeout) = timeout_of(a.timeout_minutes)?;
        let body = CreateAction::Tool(ToolActionRequest {
            tool: PERMISSION_TOOL.to_owned(),
            detail: a.permission.clone(),
            reason: Some(a.reason),
            timeout: Some(timeout),
            idempotency_key: None,
            session: self.own_session(),
            runtime: None,
            params: None,
            caution: None,
        });
        let action = self.request(body, None, Some(Kind::Permission)).await?;
        Ok(permission_result(&a.permission, minutes, &action))
    }

    async fn check_action(&self, args: JsonObject) -> ToolResult {
        let a: CheckArgs = parse(args)?;
        let session = self.session_of(a.session)?;
        let (action, decision) = self
            .state
            .gate()
            .check_in(self.caller, &a.tool, &a.detail, session.as_deref(), None)
            .await
            .map_err(gate_error)?;
        let result = decision.result.as_str();
        let mut r = CallToolResult::success(vec![ContentBlock::text(format!(
            "{result}: {action} ({})",
            decision.reason
        ))]);
        r.structured_content = Some(json!({
            "action": action,
            "result": result,
            "reason": decision.reason,
            "rule": decision.rule,
        }));
        Ok(r)
    }

    async fn request_action(&self, args: JsonObject) -> ToolResult {
        let a: RequestArgs = parse(args)?;
        let session = self.session_of(a.session)?;
        // Absent: the daemon's default timeout.
        let timeout = match a.timeout_minutes {
            Some(m) => Some(timeout_of(Some(m))?.1),
            None => None,
        };
        let body = CreateAction::Tool(ToolActionRequest {
            tool: a.tool,
            detail: a.detail,
            reason: a.reason,
            timeout,
            idempotency_key: None,
            session,
            runtime: None,
            params: None,
            caution: None,
        });
        let action = self
            .request(
                body,
                a.wait_seconds.map(Duration::from_secs),
                Some(Kind::Action),
            )
            .await?;
        Ok(described(&action))
    }

    async fn get_action_status(&self, args: JsonObject) -> ToolResult {
        let a: StatusArgs = parse(args)?;
        let gate = self.state.gate();
        let action = gate
            .get_action(self.caller, &a.id, Duration::ZERO)
            .await
            .map_err(gate_error)?;
        let wait = Duration::from_secs(a.wait_seconds.unwrap_or(0));
        let action = if wait.is_zero() {
            action
        } else {
            // Waiting here is a poll: leaving it withdraws nothing.
            match tokio::time::timeout(
                wait,
                self.waiter.until_settled(
                    gate,
                    self.caller,
                    action.clone(),
                    Some(wait),
                    Duration::ZERO,
                    OnLeave::Keep,
                ),
            )
            .await
            {
                Ok(Err(WaitEnd::Gone)) => return Err(text_error("the call was cancelled").into()),
                Ok(r) => r.map_err(wait_error)?,
                Err(_) => action,
            }
        };
        Ok(described(&action))
    }

    async fn handler_tool(&self, name: &str, args: JsonObject) -> ToolResult {
        let gate = self.state.gate();
        let Some(tool) = gate
            .handler_tool(self.caller, name)
            .await
            .map_err(gate_error)?
        else {
            return Err(text_error(format!("no tool '{name}'")).into());
        };
        let body = CreateAction::Handler(HandlerActionRequest {
            handler: tool.handler,
            action: tool.action,
            params: Value::Object(args),
            reason: None,
            timeout: None,
            idempotency_key: None,
            session: self.own_session(),
            runtime: None,
        });
        let action = self.request(body, None, Some(Kind::Handler)).await?;
        Ok(handler_result(&action))
    }

    /// Claude Code's permission prompt: always JSON text, never an allow on
    /// error. A call that could not be decided (input it cannot read, the
    /// request failing) is a tool error whose text is still the deny
    /// Claude Code parses; a decided deny is a normal result.
    async fn approval_prompt(&self, args: JsonObject) -> CallToolResult {
        match self.prompt(args).await {
            Ok(answer) => CallToolResult::success(vec![ContentBlock::text(answer.to_string())]),
            Err(message) => {
                let deny = json!({"behavior": "deny", "message": format!("actiongate: {message}")});
                CallToolResult::error(vec![ContentBlock::text(deny.to_string())])
            }
        }
    }

    async fn prompt(&self, args: JsonObject) -> Result<Value, String> {
        let a: PromptArgs = serde_json::from_value(Value::Object(args))
            .map_err(|e| format!("invalid arguments: {e}"))?;
        let mapped = call_of(&a.tool_name, &a.input)?.mapped();
        let reason = match &a.tool_use_id {
            Some(id) => format!("Claude Code permission prompt (tool use {id})"),
            None => "Claude Code permission prompt".to_owned(),
        };
        let body = CreateAction::Tool(ToolActionRequest {
            tool: mapped.tool,
            detail: mapped.detail,
            reason: Some(reason),
            timeout: None,
            idempotency_key: None,
            // In the session `_meta` names, as every tool: its grants and
            // plan apply, and a stranger's text read there taints it.
            session: self.own_session(),
            runtime: None,
            params: None,
            caution: None,
        });
        // No task here: the answer must carry the input as it was sent,
        // which the daemon does not keep, so the call waits for the decision.
        let action = self.request(body, None, None).await.map_err(|r| match r {
            Reply::Result(r) => r
                .content
                .first()
                .and_then(|c| c.as_text().map(|t| t.text.clone()))
                .unwrap_or_else(|| "the request failed".to_owned()),
            Reply::Task(_) => "the request failed".to_owned(),
        })?;
        let decision = answer_for(&action_json(&action), Fallback::Deny, 0);
        Ok(if decision.verdict == Verdict::Allow {
            json!({"behavior": "allow", "updatedInput": a.input})
        } else {
            json!({"behavior": "deny", "message": decision.reason})
        })
    }
}

/// `request_permission`'s answer once `action` (the permission's) settled;
/// `minutes` is what it waited at most.
pub fn permission_result(permission: &str, minutes: f64, action: &Action) -> CallToolResult {
    let p = permission;
    match action.status {
        ActionStatus::Approved | ActionStatus::Running | ActionStatus::Completed => {
            let text = match &action.team.approved_detail {
                Some(d) if action.team.edited => format!(
                    "Permission granted as edited: an approver changed it before approving, \
                     so what is granted is `{d}`, not {p}"
                ),
                _ => format!("Permission granted for {p}"),
            };
            with_action(text, action, false)
        }
        ActionStatus::Denied => with_action(
            format!("Permission denied for {p}: {}", reason_of(action)),
            action,
            false,
        ),
        ActionStatus::Expired => with_action(
            format!(
                "Permission request timed out after {} minutes",
                minutes_text(minutes)
            ),
            action,
            true,
        ),
        other => with_action(
            format!("Permission request for {p} ended as {other}"),
            action,
            true,
        ),
    }
}

/// What an allowed action's result says: `state: <action string>`, or,
/// when an approver edited it before approving (docs/teams.md), what was
/// approved instead, so an agent reading only the text never runs the
/// call as it asked it.
fn allowed_text(state: &str, a: &Action) -> String {
    if !a.team.edited {
        return format!("{state}: {}", a.action_string);
    }
    match (&a.team.approved_detail, &a.handler) {
        (Some(detail), None) => format!(
            "{state} as edited: an approver changed this call before approving it, so do not \
             run it as asked ({}); what was approved is tool {} with detail: {detail}",
            a.action_string, a.tool
        ),
        _ => format!(
            "{state} as edited: an approver changed its params before approving it; the \
             executor runs the version approved ({})",
            a.action_string
        ),
    }
}

/// A handler tool's answer once its action settled: the executor's answer,
/// or an error result saying why there is none.
pub fn handler_result(action: &Action) -> CallToolResult {
    match action.status {
        ActionStatus::Completed => {
            let result = action
                .outcome
                .as_ref()
                .and_then(|o| o.result.clone())
                .unwrap_or(Value::Null);
            let text = match &result {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
            r.structured_content = Some(match result {
                Value::Object(_) => result,
                other => json!({"result": other}),
            });
            r
        }
        ActionStatus::Failed => {
            let error = action
                .outcome
                .as_ref()
                .and_then(|o| o.error.clone())
                .unwrap_or_else(|| "the executor reported a failure".to_owned());
            with_action(format!("failed: {error}"), action, true)
        }
        _ => described(action),
    }
}

/// An action as a tool result: an error result unless it is allowed or
/// still waiting.
pub fn described(a: &Action) -> CallToolResult {
    let s = a.status;
    let text = match s {
        ActionStatus::Pending => format!("pending: action {} waits for an operator", a.id),
        ActionStatus::Approved => allowed_text("approved", a),
        ActionStatus::Running => allowed_text("running", a),
        ActionStatus::Completed => allowed_text("completed", a),
        ActionStatus::Denied => format!("denied: {}: {}", a.action_string, reason_of(a)),
        ActionStatus::Expired => {
            format!("expired: no operator decided in time: {}", a.action_string)
        }
        ActionStatus::Cancelled => format!("cancelled: {}", a.action_string),
        ActionStatus::Failed => format!("failed: {}", a.action_string),
    };
    let is_error = matches!(
        s,
        ActionStatus::Denied
            | ActionStatus::Expired
            | ActionStatus::Cancelled
            | ActionStatus::Failed
    );
    with_action(text, a, is_error)
}
