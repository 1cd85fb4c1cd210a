//! The MCP tool `request_plan_approval`: an agent asks a human to approve a
//! task's steps at once (docs/sessions.md) and waits, at most the daemon's
//! `actions.max_wait_seconds`, for the decision. A plan still pending then
//! is followed by calling the tool again with its `plan_id`.

use std::time::Duration;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use serde::Deserialize;
use serde_json::{Value, json};

use actiongate_api::sessions::{CreatePlan, Plan, PlanStepRequest};
use actiongate_gate::Caller;

use crate::state::AppState;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanArgs {
    #[serde(default)]
    session: Option<String>,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    steps: Option<Vec<PlanStepRequest>>,
    #[serde(default)]
    plan_id: Option<String>,
    #[serde(default)]
    wait_seconds: Option<u64>,
}

fn error(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// The plan as the tool answers it: a sentence and `{"plan": …}`.
fn answer(plan: &Plan) -> CallToolResult {
    let approved: Vec<String> = plan
        .steps
        .iter()
        .enumerate()
        .filter(|(_, s)| s.approved)
        .map(|(i, _)| i.to_string())
        .collect();
    // Steps approving the plan does not settle: the agent expects a
    // question when it runs them.
    let asks: Vec<String> = plan
        .steps
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.asks.as_ref().map(|why| format!("step {i} ({why})")))
        .collect();
    let text = match plan.status.as_str() {
        "approved" if approved.is_empty() => format!(
            "plan {} approved, but no step of it runs without a question: {}",
            plan.id,
            asks.join("; ")
        ),
        "approved" => {
            let mut t = format!(
                "plan {} approved: steps {} of {} each run once in session '{}' without another \
                 question; anything else is asked as usual",
                plan.id,
                approved.join(", "),
                plan.steps.len(),
                plan.session
            );
            if !asks.is_empty() {
                t.push_str(&format!("; these ask when run: {}", asks.join("; ")));
            }
            t
        }
        "denied" => format!("plan {} denied: request each step on its own", plan.id),
        "expired" => format!(
            "plan {} expired: its session '{}' ended before anyone decided; \
             ask again in a session that is running",
            plan.id, plan.session
        ),
        _ => format!(
            "plan {} is still pending: call request_plan_approval with plan_id to keep waiting",
            plan.id
        ),
    };
    let mut r = if matches!(plan.status.as_str(), "denied" | "expired") {
        CallToolResult::error(vec![ContentBlock::text(text)])
    } else {
        CallToolResult::success(vec![ContentBlock::text(text)])
    };
    r.structured_content =
        Some(json!({ "plan": serde_json::to_value(plan).unwrap_or(Value::Null) }));
    r
}

/// Runs `request_plan_approval`.
pub async fn call(
    state: &AppState,
    caller: &Caller,
    args: JsonObject,
    meta_session: Option<&String>,
) -> CallToolResult {
    let mut a: PlanArgs = match serde_json::from_value(Value::Object(args)) {
        Ok(a) => a,
        Err(e) => return error(format!("invalid arguments: {e}")),
    };
    // A new plan's session, as `_meta` names it too (never another).
    if a.plan_id.is_none() {
        a.session = match super::call::session_of(a.session.take(), meta_session) {
            Ok(s) => s,
            Err(r) => return r,
        };
    }
    let gate = state.gate();
    let max = gate.config().max_wait;
    let wait = a
        .wait_seconds
        .map_or(max, |s| Duration::from_secs(s).min(max));
    let id = match (a.plan_id, a.steps, a.session) {
        (Some(id), None, None) if a.reason.is_none() => id,
        (None, Some(steps), Some(session)) => {
            let body = CreatePlan {
                reason: a.reason,
                session,
                runtime: None,
                steps,
                idempotency_key: None,
            };
            match gate.create_plan(caller, body).await {
                Ok((p, _)) => p.id,
                Err(e) => return error(format!("actiongate: {e}")),
            }
        }
        _ => {
            return error(
                "invalid arguments: give session and steps (a new plan), or plan_id alone \
                 (to keep waiting for one)",
            );
        }
    };
    match gate.wait_plan(caller, &id, wait).await {
        Ok(plan) => answer(&plan),
        Err(e) => error(format!("actiongate: {e}")),
    }
}
