//! The tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) in the
//! stateless era: a tool call that has to wait for a human answers at once
//! with a task, and `tasks/get` and `tasks/cancel` follow it.
//!
//! A task is an action and nothing else: its id names the tool that made it
//! and the action (`permission.<action id>`), and its state is read from
//! the gate on every request. Nothing is kept in this process, so any
//! daemon on the same database answers for any task, after a restart too.
//! Each request is authorized like `GET /v1/actions/{id}`: an agent sees
//! only its own actions.

use rmcp::model::{
    CallToolResult, CreateTaskResult, DetailedTask, GetTaskResult, JsonObject, Task, TaskPayload,
    TaskStatus,
};
use serde_json::Value;

use actiongate_gate::{Action, ActionStatus};
use actiongate_gate::{Caller, ErrorCode, Gate, GateError};

use super::call::{PERMISSION_TOOL, described, handler_result, permission_result};
use super::wait::progress_message;

/// How often a client should poll `tasks/get`, in milliseconds.
pub const POLL_INTERVAL_MS: u64 = 2000;

/// Which tool made a task: what its result looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `request_permission`: the action `tool:permission:<permission>`.
    Permission,
    /// `request_action`: a decision-only action.
    Action,
    /// A handler action's tool.
    Handler,
}

impl Kind {
    fn prefix(self) -> &'static str {
        match self {
            Kind::Permission => "permission",
            Kind::Action => "action",
            Kind::Handler => "handler",
        }
    }

    /// Whether `action` is one this kind of tool makes.
    fn fits(self, action: &Action) -> bool {
        match self {
            Kind::Permission => action.handler.is_none() && action.tool == PERMISSION_TOOL,
            Kind::Action => action.handler.is_none(),
            Kind::Handler => action.handler.is_some(),
        }
    }
}

/// The task id of `action`, made by a tool of `kind`.
pub fn task_id(kind: Kind, action: &Action) -> String {
    format!("{}.{}", kind.prefix(), action.id)
}

/// The kind and action id a task id names.
fn parse(task_id: &str) -> Option<(Kind, &str)> {
    let (prefix, id) = task_id.split_once('.')?;
    let kind = [Kind::Permission, Kind::Action, Kind::Handler]
        .into_iter()
        .find(|k| k.prefix() == prefix)?;
    (!id.is_empty()).then_some((kind, id))
}

fn task(kind: Kind, action: &Action) -> Task {
    let last = action.decided_at.unwrap_or(action.created_at);
    Task::new(
        task_id(kind, action),
        TaskStatus::Working,
        action.created_at.to_rfc3339(),
        last.to_rfc3339(),
    )
    .with_poll_interval_ms(POLL_INTERVAL_MS)
    .with_status_message(progress_message(action))
}

/// The answer to a call whose action waits for a human: its task.
pub fn created(kind: Kind, action: &Action) -> CreateTaskResult {
    CreateTaskResult::new(task(kind, action))
}

fn not_found() -> rmcp::ErrorData {
    rmcp::ErrorData::invalid_params("Failed to retrieve task: Task not found", None)
}

/// The action of `task_id`, as `caller` may see it (an unknown task and
/// another agent's action look the same).
async fn action_of(
    gate: &Gate,
    caller: &Caller,
    task_id: &str,
) -> Result<(Kind, Action), rmcp::ErrorData> {
    let (kind, id) = parse(task_id).ok_or_else(not_found)?;
    let action = gate
        .get_action(caller, id, std::time::Duration::ZERO)
        .await
        .map_err(|e| gate_error(&e))?;
    if !kind.fits(&action) {
        return Err(not_found());
    }
    Ok((kind, action))
}

fn gate_error(e: &GateError) -> rmcp::ErrorData {
    match e.code {
        ErrorCode::NotFound | ErrorCode::Forbidden => not_found(),
        _ => rmcp::ErrorData::internal_error(format!("actiongate: {e}"), None),
    }
}

fn as_object(result: CallToolResult) -> JsonObject {
    match serde_json::to_value(result) {
        Ok(Value::Object(map)) => map,
        _ => JsonObject::new(),
    }
}

/// The tool's result once the action settled; `None` while it waits or
/// runs, or when it was cancelled.
fn final_result(kind: Kind, action: &Action) -> Option<CallToolResult> {
    if !action.is_settled() || action.status == ActionStatus::Cancelled {
        return None;
    }
    Some(match kind {
        Kind::Permission => permission_result(&action.detail, minutes_of(action), action),
        Kind::Action => described(action),
        Kind::Handler => handler_result(action),
    })
}

/// The minutes a pending action had to be decided: its deadline from its
/// creation, to the second.
fn minutes_of(action: &Action) -> f64 {
    match action.deadline {
        Some(d) => {
            let secs = ((d - action.created_at).num_milliseconds() as f64 / 1000.0).round();
            secs / 60.0
        }
        None => 0.0,
    }
}

/// `tasks/get`: the task as its action stands now.
pub async fn get(
    gate: &Gate,
    caller: &Caller,
    task_id: &str,
) -> Result<GetTaskResult, rmcp::ErrorData> {
    let (kind, action) = action_of(gate, caller, task_id).await?;
    let mut t = task(kind, &action);
    let payload = if action.status == ActionStatus::Cancelled {
        t.status_message = Some(format!("cancelled: {}", action.action_string));
        TaskPayload::Cancelled
    } else {
        match final_result(kind, &action) {
            Some(result) => {
                t.status_message = None;
                TaskPayload::Completed {
                    result: as_object(result),
                }
            }
            None => TaskPayload::Working,
        }
    };
    Ok(GetTaskResult::new(DetailedTask::new(t, payload)))
}

/// `tasks/cancel`: withdraws the action if it still waits for a human. An
/// action already decided is left as it is (the spec's cancellation is a
/// request; `tasks/get` shows how it ended).
pub async fn cancel(gate: &Gate, caller: &Caller, task_id: &str) -> Result<(), rmcp::ErrorData> {
    let (_, action) = action_of(gate, caller, task_id).await?;
    match gate.cancel(caller, &action.id).await {
        Ok(_) => Ok(()),
        Err(e) if matches!(e.code, ErrorCode::ActionSettled | ErrorCode::Conflict) => Ok(()),
        Err(e) => Err(gate_error(&e)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn permission_action(status: &str) -> Action {
        serde_json::from_value(json!({
            "id": "a1", "agent": "agent-1", "tool": "permission", "detail": "net:x",
            "action_string": "tool:permission:net:x", "reason": "r", "status": status,
            "decision": {"result": "ask", "reason": "asked", "rule": null},
            "created_at": "2026-01-01T10:00:00.000Z",
            "decided_at": null, "decided_by": "deadline",
            "deadline": "2026-01-01T10:01:00.004Z"
        }))
        .unwrap()
    }

    #[test]
    fn an_expired_permission_task_is_the_timeout_error() {
        let a = permission_action("expired");
        let r = final_result(Kind::Permission, &a).unwrap();
        assert_eq!(r.is_error, Some(true));
        let text = r.content[0].as_text().unwrap().text.clone();
        assert_eq!(text, "Permission request timed out after 1 minutes");
        assert!(final_result(Kind::Permission, &permission_action("pending")).is_none());
    }

    #[test]
    fn task_ids_name_their_kind_and_action() {
        assert_eq!(
            parse("permission.0190-ab"),
            Some((Kind::Permission, "0190-ab"))
        );
        assert_eq!(parse("handler.x"), Some((Kind::Handler, "x")));
        assert_eq!(parse("handler."), None);
        assert_eq!(parse("other.x"), None);
        assert_eq!(parse("0190-ab"), None);
    }
}
