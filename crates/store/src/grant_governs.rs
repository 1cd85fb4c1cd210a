//! What keeps a grant from settling a waiting action: an approvals rule
//! (a count of people, or who may approve) it was asked under, or that its
//! handler action has now.

use std::collections::HashMap;

use serde_json::Value;
use sqlx::SqliteConnection;

use crate::error::StoreError;
use actiongate_api::model::Action;

/// Whether `action` was asked under an approvals rule, a copy of which its
/// recorded decision keeps (`decision.rule.approvals`, written by the
/// gate): such a rule governs it even when the profile no longer has it,
/// or when it is its handler action's. Or with a caution (`decision.rule`
/// of kind `caution`): its caller could not vouch for it, and only an
/// operator's approval of it settles it, never a grant.
pub(crate) fn asked_under_rules(action: &Action) -> bool {
    action.decision.rule.as_ref().is_some_and(|r| {
        r.get("approvals").is_some() || r.get("kind").and_then(Value::as_str) == Some("caution")
    })
}

/// Whether the handler action of `action` has `approvals` of its own in
/// `spec`, its handler's registration as stored now (`None`: no such
/// handler): such a rule governs the action at once, even when it was
/// asked before the handler had it. A spec that cannot be read governs
/// it too (nothing is approved on a guess).
pub(crate) fn handler_action_governs(spec: Option<&str>, action: &Action) -> bool {
    let Some(name) = action.action.as_deref() else {
        return false;
    };
    let Some(spec) = spec else {
        return false;
    };
    let Ok(spec) = serde_json::from_str::<Value>(spec) else {
        return true;
    };
    let Some(actions) = spec.get("actions").and_then(Value::as_array) else {
        return true;
    };
    actions
        .iter()
        .filter(|a| a.get("name").and_then(Value::as_str) == Some(name))
        .any(|a| a.get("approvals").is_some_and(|r| !r.is_null()))
}

/// [`handler_action_governs`] for pending `action`, its handler's spec
/// read once per handler into `specs`.
pub(crate) async fn handler_governs_on(
    conn: &mut SqliteConnection,
    action: &Action,
    specs: &mut HashMap<String, Option<String>>,
) -> Result<bool, StoreError> {
    let Some(handler) = action.handler.as_deref() else {
        return Ok(false);
    };
    if !specs.contains_key(handler) {
        let spec: Option<String> = sqlx::query_scalar("SELECT spec FROM handlers WHERE id = ?")
            .bind(handler)
            .fetch_optional(&mut *conn)
            .await?;
        specs.insert(handler.to_owned(), spec);
    }
    Ok(handler_action_governs(
        specs.get(handler).and_then(Option::as_deref),
        action,
    ))
}
