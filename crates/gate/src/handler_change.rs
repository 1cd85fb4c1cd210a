//! A handler registered again: the grants of a permission whose actions'
//! scopes now mean something else are revoked. A grant's scope names the
//! values of a permission's parameters; which of an action's params fill
//! them is the registration's (`scope` pointers). Moved (`{x: "safe*"}`
//! once read from `/x`, now from `/y`), an old grant would allow what
//! nobody granted.

use std::collections::{BTreeMap, BTreeSet};

use actiongate_store::GrantFilter;
use serde_json::Value;

use crate::{Gate, GateResult};

/// Per permission: its parameters' schema, and each action of it with its
/// scope pointers and params schema.
fn scopes(spec: &Value) -> BTreeMap<String, (Value, BTreeSet<String>)> {
    let mut out: BTreeMap<String, (Value, BTreeSet<String>)> = BTreeMap::new();
    let list = |key: &str| {
        spec.get(key)
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    for p in list("permissions") {
        if let Some(name) = p.get("name").and_then(Value::as_str) {
            let schema = p.get("parameters_schema").cloned().unwrap_or(Value::Null);
            out.entry(name.to_owned()).or_default().0 = schema;
        }
    }
    for a in list("actions") {
        if let Some(permission) = a.get("permission").and_then(Value::as_str) {
            let shape = serde_json::json!([a.get("name"), a.get("scope"), a.get("params_schema")]);
            out.entry(permission.to_owned())
                .or_default()
                .1
                .insert(shape.to_string());
        }
    }
    out
}

/// The permissions of `old` whose scopes `new` changes (or drops).
pub(crate) fn changed_permissions(old: &Value, new: &Value) -> BTreeSet<String> {
    let (old, new) = (scopes(old), scopes(new));
    old.into_iter()
        .filter(|(name, shape)| new.get(name) != Some(shape))
        .map(|(name, _)| name)
        .collect()
}

impl Gate {
    /// Revokes the active grants of handler `id`'s `permissions`; how many.
    pub(crate) async fn revoke_grants_of(
        &self,
        id: &str,
        permissions: &BTreeSet<String>,
    ) -> GateResult<usize> {
        let mut revoked = 0;
        let mut after = None;
        loop {
            let page = self
                .store()
                .list_grants(&GrantFilter {
                    active: Some(true),
                    handler: Some(id.to_owned()),
                    after: after.clone(),
                    limit: Some(500),
                    ..GrantFilter::default()
                })
                .await?;
            for g in &page {
                if g.permission
                    .as_ref()
                    .is_some_and(|p| permissions.contains(p))
                {
                    self.store().revoke_grant(&g.id).await?;
                    revoked += 1;
                }
            }
            if page.len() < 500 {
                return Ok(revoked);
            }
            after = page.last().map(|g| g.id.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_moved_scope_pointer_changes_its_permission_and_nothing_else() {
        let spec = |pointer: &str| {
            json!({"permissions": [{"name": "run", "parameters_schema": {"type": "object"}},
                                   {"name": "read"}],
                   "actions": [{"name": "do", "permission": "run", "scope": {"x": pointer}},
                               {"name": "get", "permission": "read", "scope": {"path": "/path"}}]})
        };
        assert!(changed_permissions(&spec("/x"), &spec("/x")).is_empty());
        assert_eq!(
            changed_permissions(&spec("/x"), &spec("/y")),
            BTreeSet::from(["run".to_owned()])
        );
        let dropped = json!({"permissions": [], "actions": []});
        assert_eq!(changed_permissions(&spec("/x"), &dropped).len(), 2);
    }
}
