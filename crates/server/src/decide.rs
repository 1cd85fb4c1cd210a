//! Running the policy for a caller: their profile, their grants, now.

use actiongate_policy as policy;
use actiongate_store::{Decision, DecisionResult};
use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::state::AppState;

/// Characters allowed in a tool name. A colon would let a tool name smuggle
/// part of a detail into `tool:<tool>:<detail>` and match other patterns.
pub fn validate_tool(tool: &str) -> Result<(), ApiError> {
    let ok = !tool.is_empty()
        && tool.len() <= 128
        && tool
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::invalid(
            "tool",
            "1-128 characters from A-Z a-z 0-9 _ - .",
        ))
    }
}

/// The permission a handler action needs.
pub struct NeededPermission<'a> {
    /// Handler id.
    pub handler: &'a str,
    /// Permission name.
    pub permission: &'a str,
    /// Scope values.
    pub scope: &'a Map<String, Value>,
}

/// Decides `tool:<tool>:<detail>` for `agent` under its profile and its
/// active grants (`permission` set for handler actions).
pub async fn decide(
    state: &AppState,
    agent: &str,
    tool: &str,
    detail: &str,
    permission: Option<NeededPermission<'_>>,
) -> Result<Decision, ApiError> {
    let profile = state.profile_of(agent).await?;
    let grants = state.store().active_grants(agent, tool).await?;
    let req = policy::Request {
        agent,
        tool,
        detail,
        permission: permission.map(|p| policy::PermissionRef {
            handler: p.handler,
            permission: p.permission,
            scope: p.scope,
        }),
    };
    Ok(record(policy::decide(
        &profile,
        &grants,
        &req,
        chrono::Utc::now(),
    )))
}

/// Decides a decision-only action.
pub async fn decide_tool(
    state: &AppState,
    agent: &str,
    tool: &str,
    detail: &str,
) -> Result<Decision, ApiError> {
    decide(state, agent, tool, detail, None).await
}

/// The policy's decision as stored on an action.
pub fn record(d: policy::Decision) -> Decision {
    Decision {
        result: match d.verdict {
            policy::Verdict::Allow => DecisionResult::Allow,
            policy::Verdict::Ask => DecisionResult::Ask,
            policy::Verdict::Deny => DecisionResult::Deny,
        },
        reason: d.reason,
        rule: d.rule.and_then(|r| serde_json::to_value(r).ok()),
    }
}
