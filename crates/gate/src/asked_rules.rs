//! The approvals rules an action was asked under, kept with it
//! (`docs/teams.md`): a copy of each rule goes into the recorded decision
//! (`decision.rule.approvals`) when the action is asked, and every later
//! decision on it applies those copies as well as whatever rule applies
//! now. A profile (or handler) changed while the action waits can so
//! tighten what it needs, never loosen it.

use actiongate_policy::approvals::{ApprovalRule, CompiledRule, compile_rule};
use actiongate_store::{Decision, DecisionResult};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The key of the copies in the recorded decision's `rule`.
pub const KEY: &str = "approvals";

/// One rule as the action keeps it.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RuleCopy {
    pattern: String,
    count: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    approvers: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    escalate_after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    escalate_to: Option<String>,
    /// Its position in the profile's list.
    index: usize,
    /// Where it came from when not the profile's list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    origin: Option<String>,
}

impl From<&CompiledRule> for RuleCopy {
    fn from(c: &CompiledRule) -> Self {
        RuleCopy {
            pattern: c.rule.pattern.clone(),
            count: c.rule.count,
            approvers: c.rule.approvers.clone(),
            escalate_after: c.rule.escalate_after.clone(),
            escalate_to: c.rule.escalate_to.clone(),
            index: c.index,
            origin: c.origin.clone(),
        }
    }
}

/// `decision` with a copy of `rules` in its `rule`, when it asks and some
/// rule applies (a `rule` that is no JSON object is kept under `decided`).
pub fn recorded(mut decision: Decision, rules: &[CompiledRule]) -> Decision {
    if decision.result != DecisionResult::Ask || rules.is_empty() {
        return decision;
    }
    let copies: Vec<RuleCopy> = rules.iter().map(RuleCopy::from).collect();
    let Ok(copies) = serde_json::to_value(copies) else {
        return decision;
    };
    let mut object = match decision.rule.take() {
        Some(Value::Object(o)) => o,
        Some(other) => Map::from_iter([("decided".to_owned(), other)]),
        None => Map::new(),
    };
    object.insert(KEY.to_owned(), copies);
    decision.rule = Some(Value::Object(object));
    decision
}

/// The rule of `decision` (a pending action's) with copies of `more` kept
/// beside the copies it has: what an edit falls under then binds every
/// later decision on the action as the rules it was asked under do.
/// `None` when there is nothing to add.
pub fn adding(decision: &Decision, more: &[CompiledRule]) -> Option<Value> {
    if more.is_empty() {
        return None;
    }
    let mut copies: Vec<Value> = decision
        .rule
        .as_ref()
        .and_then(|r| r.get(KEY))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for rule in more {
        copies.push(serde_json::to_value(RuleCopy::from(rule)).ok()?);
    }
    let mut object = match decision.rule.clone() {
        Some(Value::Object(o)) => o,
        Some(other) => Map::from_iter([("decided".to_owned(), other)]),
        None => Map::new(),
    };
    object.insert(KEY.to_owned(), Value::Array(copies));
    Some(Value::Object(object))
}

/// The rules kept with an action's recorded decision. `Err` when a copy is
/// there but cannot be read back (the caller fails closed).
pub fn kept(decision: &Decision) -> Result<Vec<CompiledRule>, String> {
    let Some(copies) = decision.rule.as_ref().and_then(|r| r.get(KEY)) else {
        return Ok(Vec::new());
    };
    let copies: Vec<RuleCopy> =
        serde_json::from_value(copies.clone()).map_err(|e| format!("approvals kept: {e}"))?;
    copies
        .into_iter()
        .map(|c| {
            let rule = ApprovalRule {
                pattern: c.pattern,
                count: c.count,
                approvers: c.approvers,
                escalate_after: c.escalate_after,
                escalate_to: c.escalate_to,
            };
            let mut compiled = compile_rule(c.index, &rule).map_err(|e| e.to_string())?;
            compiled.origin = c.origin;
            Ok(compiled)
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use actiongate_policy::approvals::compile_rules;

    fn rule(count: u32, approvers: &[&str]) -> CompiledRule {
        compile_rules(&[ApprovalRule {
            pattern: "tool:deploy:.*".to_owned(),
            count,
            approvers: approvers.iter().map(|s| (*s).to_owned()).collect(),
            escalate_after: Some("30m".to_owned()),
            escalate_to: Some("oncall".to_owned()),
        }])
        .unwrap()
        .remove(0)
    }

    fn ask(rule: Option<Value>) -> Decision {
        Decision {
            result: DecisionResult::Ask,
            reason: "asked".to_owned(),
            rule,
        }
    }

    #[test]
    fn an_asked_decision_keeps_its_rules_and_gives_them_back() {
        let pattern =
            serde_json::json!({"kind": "pattern", "list": "ask", "index": 0, "pattern": ".*"});
        let d = recorded(ask(Some(pattern)), &[rule(2, &["release-*"])]);
        let r = d.rule.as_ref().unwrap();
        assert_eq!(r["kind"], "pattern");
        let back = kept(&d).unwrap();
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].rule.count, 2);
        assert_eq!(back[0].rule.approvers, vec!["release-*".to_owned()]);
        assert_eq!(back[0].escalate_after_secs(), Some(1800));
        assert!(back[0].matches("tool:deploy:prod"));
    }

    #[test]
    fn an_allow_or_no_rule_keeps_nothing() {
        let mut allow = ask(None);
        allow.result = DecisionResult::Allow;
        assert!(recorded(allow, &[rule(2, &[])]).rule.is_none());
        assert!(recorded(ask(None), &[]).rule.is_none());
        assert!(kept(&ask(None)).unwrap().is_empty());
    }

    #[test]
    fn a_copy_that_cannot_be_read_is_an_error() {
        let bad = ask(Some(serde_json::json!({"approvals": [{"count": "two"}]})));
        assert!(kept(&bad).is_err());
    }
}
