//! The tools `/mcp` offers: the built-in ones (asking for a permission,
//! checking and requesting actions, following one, Claude Code's permission
//! prompt) and every handler action in service.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use rmcp::service::{Peer, RoleServer};
use serde_json::{Value, json};

use actiongate_gate::Gate;
use actiongate_gate::tools::HandlerTool;

/// `request_permission`: ask a human (or the profile) for a named permission.
pub const REQUEST_PERMISSION: &str = "request_permission";
/// `check_action`: a dry run of the policy.
pub const CHECK_ACTION: &str = "check_action";
/// `request_action`: request an action and (by default) wait for its decision.
pub const REQUEST_ACTION: &str = "request_action";
/// `get_action_status`: an action this agent requested, optionally waiting.
pub const GET_ACTION_STATUS: &str = "get_action_status";
/// `approval_prompt`: Claude Code's `--permission-prompt-tool`.
pub const APPROVAL_PROMPT: &str = "approval_prompt";
/// `request_plan_approval`: ask approval for a task's steps at once.
pub const REQUEST_PLAN_APPROVAL: &str = "request_plan_approval";

fn object(schema: Value) -> Arc<JsonObject> {
    match schema {
        Value::Object(map) => Arc::new(map),
        // Handler schemas are validated as objects at registration; anything
        // else is offered as "any object" and still checked on call.
        _ => Arc::new(JsonObject::new()),
    }
}

/// The `session` argument of the tools that request or check an action.
fn session_arg() -> Value {
    json!({"type": "string", "minLength": 1, "maxLength": 200,
        "description": "The session (task) it belongs to: an approved plan's steps and \
            session grants apply within it, and reading untrusted content taints it."})
}

fn tool(name: &'static str, description: &'static str, schema: Value, read_only: bool) -> Tool {
    let mut t = Tool::new(name, description, object(schema));
    t.annotations = Some(
        ToolAnnotations::new()
            .read_only(read_only)
            .destructive(false),
    );
    t
}

/// The structured content of a tool that answers with an action
/// (`{"action": {...}}`, the action as `GET /v1/actions/{id}` has it).
fn action_output() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "action": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "status": {"type": "string", "enum": [
                        "pending", "approved", "running", "completed", "denied",
                        "expired", "cancelled", "failed"
                    ]},
                    "tool": {"type": "string"},
                    "detail": {"type": "string"}
                },
                "required": ["id", "status"]
            }
        },
        "required": ["action"]
    }))
}

/// `check_action`'s structured content.
fn check_output() -> Arc<JsonObject> {
    object(json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "description": "The action as the policy reads it."},
            "result": {"type": "string", "enum": ["allow", "deny", "ask"]},
            "reason": {"type": "string"},
            "rule": {"type": ["object", "null"], "description": "The rule that decided, if one did."}
        },
        "required": ["action", "result", "reason"]
    }))
}

/// The built-in tools, with the schema of their structured content where
/// they have one (`approval_prompt` answers with text only).
pub fn builtin() -> Vec<Tool> {
    let mut tools = builtin_inputs();
    for t in &mut tools {
        t.output_schema = match t.name.as_ref() {
            REQUEST_PERMISSION | REQUEST_ACTION | GET_ACTION_STATUS => Some(action_output()),
            CHECK_ACTION => Some(check_output()),
            REQUEST_PLAN_APPROVAL => Some(object(json!({
                "type": "object",
                "properties": {
                    "plan": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"},
                            "status": {"type": "string", "enum": ["pending", "approved", "denied"]},
                            "session": {"type": "string"},
                            "steps": {"type": "array"}
                        },
                        "required": ["id", "status", "steps"]
                    }
                },
                "required": ["plan"]
            }))),
            _ => None,
        };
    }
    tools
}

fn builtin_inputs() -> Vec<Tool> {
    vec![
        tool(
            REQUEST_PERMISSION,
            "Ask for a permission before doing something that needs it. Blocks until a human \
             (or your profile) decides: the answer says whether it was granted, denied (with \
             the reason) or timed out.",
            json!({
                "type": "object",
                "properties": {
                    "permission": {"type": "string", "minLength": 1, "maxLength": 65536,
                        "description": "The permission asked for, e.g. \"network:api.example.com\"."},
                    "reason": {"type": "string", "minLength": 1, "maxLength": 4096,
                        "description": "Why it is needed, shown to the human."},
                    "timeout_minutes": {"type": "number", "minimum": 1, "maximum": 60, "default": 15,
                        "description": "How long to wait for a decision."}
                },
                "required": ["permission", "reason"],
                "additionalProperties": false
            }),
            false,
        ),
        tool(
            CHECK_ACTION,
            "What the policy would decide for an action now (allow, deny or ask), without \
             requesting it.",
            json!({
                "type": "object",
                "properties": {
                    "tool": {"type": "string", "pattern": "^[A-Za-z0-9_.\\-]{1,128}$",
                        "description": "The tool, e.g. \"bash\" or \"file\"."},
                    "detail": {"type": "string", "maxLength": 65536,
                        "description": "What exactly, e.g. the command line."},
                    "session": session_arg()
                },
                "required": ["tool", "detail"],
                "additionalProperties": false
            }),
            true,
        ),
        tool(
            REQUEST_ACTION,
            "Request an action (tool and detail). Blocks until it is decided unless \
             wait_seconds is 0, in which case poll it with get_action_status.",
            json!({
                "type": "object",
                "properties": {
                    "tool": {"type": "string", "pattern": "^[A-Za-z0-9_.\\-]{1,128}$"},
                    "detail": {"type": "string", "maxLength": 65536},
                    "reason": {"type": "string", "maxLength": 4096},
                    "timeout_minutes": {"type": "number", "minimum": 1, "maximum": 60,
                        "description": "How long a human has to decide (default: the daemon's)."},
                    "wait_seconds": {"type": "integer", "minimum": 0,
                        "description": "0: answer at once with the action's id; absent: wait for the decision."},
                    "session": session_arg()
                },
                "required": ["tool", "detail"],
                "additionalProperties": false
            }),
            false,
        ),
        tool(
            GET_ACTION_STATUS,
            "The status of an action you requested; with wait_seconds, waits up to that long \
             for it to be decided.",
            json!({
                "type": "object",
                "properties": {
                    "id": {"type": "string", "minLength": 1},
                    "wait_seconds": {"type": "integer", "minimum": 0, "default": 0}
                },
                "required": ["id"],
                "additionalProperties": false
            }),
            true,
        ),
        tool(
            REQUEST_PLAN_APPROVAL,
            "Ask a human to approve a task's steps at once, before running them: each \
             approved step then runs once in the session without another question. Waits for \
             the decision (at most the daemon's longest wait); a plan still pending is \
             followed by calling again with plan_id alone.",
            json!({
                "type": "object",
                "properties": {
                    "session": {"type": "string", "minLength": 1, "maxLength": 200,
                        "description": "The session the steps will run in (send it with each action)."},
                    "reason": {"type": "string", "maxLength": 4096,
                        "description": "What the task is, shown to the human."},
                    "steps": {"type": "array", "minItems": 1, "maxItems": 200,
                        "description": "Each {tool, detail} or {handler, action, params}.",
                        "items": {"type": "object"}},
                    "plan_id": {"type": "string", "minLength": 1,
                        "description": "Instead of a new plan: keep waiting for this one."},
                    "wait_seconds": {"type": "integer", "minimum": 0,
                        "description": "How long to wait for the decision (default and most: the daemon's longest wait)."}
                },
                "additionalProperties": false
            }),
            false,
        ),
        tool(
            APPROVAL_PROMPT,
            "Claude Code's --permission-prompt-tool: decides a tool call through actiongate \
             and answers {\"behavior\":\"allow\",\"updatedInput\":...} or \
             {\"behavior\":\"deny\",\"message\":...}.",
            json!({
                "type": "object",
                "properties": {
                    "tool_name": {"type": "string", "minLength": 1},
                    "input": {"type": "object"},
                    "tool_use_id": {"type": "string"}
                },
                "required": ["tool_name", "input"]
            }),
            false,
        ),
    ]
}

/// A handler action as a tool, with the hints its handler declared as the
/// tool's annotations (a hint the handler left out stays out: MCP's
/// defaults then apply). Hints are for display: nothing here or in the
/// policy reads them to allow a call.
pub fn of_handler(t: &HandlerTool) -> Tool {
    let mut tool = Tool::new(
        t.name.clone(),
        t.description.clone(),
        object(t.params_schema.clone()),
    );
    tool.annotations = Some(annotations(t));
    // The executor's answer is passed on as it is when it is an object,
    // as `{"result": ...}` otherwise; the action while it is not done.
    tool.output_schema = Some(object(json!({"type": "object"})));
    tool
}

fn annotations(t: &HandlerTool) -> ToolAnnotations {
    ToolAnnotations::from_raw(
        Some(format!("{}: {}", t.handler_name, t.action)),
        t.hints.read_only,
        t.hints.destructive,
        t.hints.idempotent,
        t.hints.open_world,
    )
}

/// The annotations of a handler action as JSON (`GET /v1/tools?format=mcp`).
pub fn annotations_json(t: &HandlerTool) -> Value {
    serde_json::to_value(annotations(t)).unwrap_or(Value::Null)
}

/// Sends `notifications/tools/list_changed` to a handshake-era session
/// whenever a handler changes, until the session is gone or the daemon
/// stops.
pub fn follow_handler_changes(gate: Gate, peer: Peer<RoleServer>) {
    let mut changes = gate.handlers_changed();
    changes.mark_unchanged();
    let shutdown = gate.shutdown().clone();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                changed = changes.changed() => {
                    if changed.is_err() || peer.notify_tool_list_changed().await.is_err() {
                        return;
                    }
                }
                () = shutdown.cancelled() => return,
            }
        }
    });
}
