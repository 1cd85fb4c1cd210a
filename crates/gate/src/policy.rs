//! Running the policy for a caller: their profile, their grants, now.

use actiongate_policy as policy;
use actiongate_store::{Decision, DecisionResult};
use serde_json::{Map, Value};

use crate::Gate;
use crate::error::GateError;

/// Characters allowed in a tool name. A colon would let a tool name smuggle
/// part of a detail into `tool:<tool>:<detail>` and match other patterns.
pub fn validate_tool(tool: &str) -> Result<(), GateError> {
    let ok = !tool.is_empty()
        && tool.len() <= 128
        && tool
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    if ok {
        Ok(())
    } else {
        Err(GateError::invalid(
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
    gate: &Gate,
    agent: &str,
    tool: &str,
    detail: &str,
    permission: Option<NeededPermission<'_>>,
) -> Result<Decision, GateError> {
    let profile = gate.profile_of(agent).await?;
    let grants = gate.store().active_grants(agent, tool).await?;
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
    gate: &Gate,
    agent: &str,
    tool: &str,
    detail: &str,
) -> Result<Decision, GateError> {
    decide(gate, agent, tool, detail, None).await
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

impl Gate {
    /// A dry run: what the policy decides for `tool`/`detail` for the
    /// calling agent now, and the action string it judged; nothing stored.
    pub async fn check(
        &self,
        caller: &crate::Caller,
        tool: &str,
        detail: &str,
    ) -> Result<(String, Decision), GateError> {
        self.check_in(caller, tool, detail, None, None).await
    }

    /// [`Gate::check`] for an action of `session` (sent by `runtime`):
    /// what the policy, the session's grants and its taint decide.
    pub async fn check_in(
        &self,
        caller: &crate::Caller,
        tool: &str,
        detail: &str,
        session: Option<&str>,
        runtime: Option<&str>,
    ) -> Result<(String, Decision), GateError> {
        crate::sessions::validate_origin(session, runtime)?;
        let agent = caller.agent_id()?;
        validate_tool(tool)?;
        crate::actions::check_len("detail", Some(detail), crate::actions::MAX_DETAIL)?;
        let decision = decide_tool(self, agent, tool, detail).await?;
        metrics::counter!("actiongate_decisions_total", "result" => decision.result.as_str())
            .increment(1);
        Ok((policy::format_action(tool, detail), decision))
    }
}
