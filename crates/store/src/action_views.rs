//! What an action shows humans, derived on every read (and when it is
//! first stored, so its events carry the same): the policy analyser's
//! findings, its human-facing text with secret-shaped parts masked, and
//! how many approvals it needs by the rules it was asked under.
//!
//! Derived rather than stored, so no column is needed and actions stored
//! before either existed get them too. The raw `detail`, `action_string`
//! and `params` (what an executor or agent needs, and what an operator
//! reveals with one click) are never touched.

use actiongate_api::model::Action;
use actiongate_policy::secrets::mask_secrets;
use serde_json::Value;

/// Fills `action.findings` and masks secrets in its rendered views: the
/// handler's `display` (title, summary, field values) and the policy's
/// reason, which quotes the command that decided.
pub(crate) fn derive(action: &mut Action) {
    action.findings = findings_of(action);
    if action.team.approvals_required.is_none() {
        action.team.approvals_required = asked_count(action);
    }
    action.decision.reason = mask_secrets(&action.decision.reason);
    if let Some(display) = action.display.as_mut() {
        mask_strings(display);
    }
}

/// The approvals an action needs by the approvals rules it was asked
/// under (their copies in its decision, `decision.rule.approvals`; the
/// largest count, 1 when a rule sets none), before any approval set it;
/// `None` when no rule applied.
fn asked_count(action: &Action) -> Option<u32> {
    let copies = action
        .decision
        .rule
        .as_ref()?
        .get("approvals")?
        .as_array()?;
    copies
        .iter()
        .map(|c| {
            c.get("count")
                .and_then(Value::as_u64)
                .map_or(1, |n| u32::try_from(n).unwrap_or(u32::MAX))
        })
        .max()
}

/// Every string inside `v`, masked.
fn mask_strings(v: &mut Value) {
    match v {
        Value::String(s) => {
            let masked = mask_secrets(s);
            if masked != *s {
                *s = masked;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mask_strings),
        Value::Object(map) => map.values_mut().for_each(mask_strings),
        _ => {}
    }
}

/// What the policy's analyser finds `action` may do, from its tool,
/// detail, scope and handler names.
fn findings_of(action: &Action) -> Vec<actiongate_api::Finding> {
    use actiongate_api::Finding as Wire;
    use actiongate_policy::Finding as Found;
    let names: Vec<&str> = [action.action.as_deref(), action.permission.as_deref()]
        .into_iter()
        .flatten()
        .collect();
    actiongate_policy::findings(&action.tool, &action.detail, action.scope.as_ref(), &names)
        .into_iter()
        .map(|f| match f {
            Found::Deletes => Wire::Deletes,
            Found::Writes => Wire::Writes,
            Found::Network => Wire::Network,
            Found::RunsCommands => Wire::RunsCommands,
            Found::Unclear => Wire::Unclear,
        })
        .collect()
}
