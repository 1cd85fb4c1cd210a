//! An executor's answer without the action's sensitive values: a handler
//! declares params `sensitive`, and the daemon shows them to nobody
//! (`docs/security.md`); an executor that echoes one back (a result that
//! repeats its input, an error quoting it) must not put it in the record,
//! the events, the audit or the page. Each value is replaced by `***`
//! wherever it appears in the result's strings and keys and in the error.

use serde_json::{Map, Value};

use crate::handler_spec::CompiledAction;
use crate::{Gate, GateResult};

/// Shortest value looked for: a shorter one would blank ordinary text and
/// keeps little secret anyway.
const MIN_LEN: usize = 4;

/// What replaces a sensitive value.
const MASK: &str = "***";

/// The sensitive values of `params` under `decl`: each string or number
/// at or under a sensitive pointer, also as JSON escapes it, longest
/// first.
pub fn values(decl: &CompiledAction, params: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for ptr in decl.sensitive_pointers() {
        if let Some(v) = params.pointer(ptr) {
            collect(v, &mut out);
        }
    }
    let escaped: Vec<String> = out
        .iter()
        .filter_map(|s| {
            let quoted = serde_json::to_string(s).ok()?;
            let inner = &quoted[1..quoted.len() - 1];
            (inner != s).then(|| inner.to_owned())
        })
        .collect();
    out.extend(escaped);
    out.retain(|s| s.chars().count() >= MIN_LEN);
    out.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    out.dedup();
    out
}

fn collect(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.push(s.clone()),
        Value::Number(n) => out.push(n.to_string()),
        Value::Bool(_) | Value::Null => {}
        Value::Array(items) => items.iter().for_each(|i| collect(i, out)),
        Value::Object(map) => map.values().for_each(|i| collect(i, out)),
    }
}

/// `text` with every one of `secrets` masked.
pub fn text(text: &str, secrets: &[String]) -> String {
    let mut t = text.to_owned();
    for s in secrets {
        if t.contains(s.as_str()) {
            t = t.replace(s.as_str(), MASK);
        }
    }
    t
}

/// `v` with every one of `secrets` masked in its strings and keys (a
/// number that is one becomes the string `***`).
pub fn value(v: Value, secrets: &[String]) -> Value {
    if secrets.is_empty() {
        return v;
    }
    match v {
        Value::String(s) => Value::String(text(&s, secrets)),
        Value::Array(items) => Value::Array(items.into_iter().map(|i| value(i, secrets)).collect()),
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, item) in map {
                out.insert(text(&k, secrets), value(item, secrets));
            }
            Value::Object(out)
        }
        Value::Number(n) if secrets.contains(&n.to_string()) => Value::String(MASK.to_owned()),
        other => other,
    }
}

impl Gate {
    /// The sensitive values of handler action `a` sent with `params`; none
    /// when the handler or its action is gone (nothing then says which).
    pub async fn sensitive_values(
        &self,
        a: &actiongate_store::Action,
        params: &Value,
    ) -> Vec<String> {
        let (Some(handler), Some(name)) = (a.handler.as_deref(), a.action.as_deref()) else {
            return Vec::new();
        };
        match self.handler(handler).await {
            Ok(h) => h
                .action(name)
                .map(|d| values(d, params))
                .unwrap_or_default(),
            Err(_) => Vec::new(),
        }
    }

    /// [`Gate::sensitive_values`] of stored action `id` (none when there is
    /// no such action: recording a result for it fails anyway).
    pub async fn sensitive_values_of(&self, id: &str) -> GateResult<Vec<String>> {
        let a = match self.store().get_action(id).await {
            Ok(a) => a,
            Err(actiongate_store::StoreError::NotFound) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let params = match self.store().action_params(id).await? {
            Some(p) => serde_json::from_str::<Value>(&p).unwrap_or(Value::Null),
            None => return Ok(Vec::new()),
        };
        Ok(self.sensitive_values(&a, &params).await)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_copy_of_a_value_is_masked_in_strings_keys_and_text() {
        let secrets = vec!["hunter2-SECRET".to_owned(), "4111111111111111".to_owned()];
        let v = json!({"echo": {"pw": "hunter2-SECRET", "hunter2-SECRET": 1},
            "log": ["login with hunter2-SECRET ok", "card 4111111111111111"], "n": 4111111111111111u64});
        let masked = value(v, &secrets);
        assert_eq!(
            masked,
            json!({"echo": {"pw": "***", "***": 1},
                "log": ["login with *** ok", "card ***"], "n": "***"})
        );
        assert_eq!(text("bad pw hunter2-SECRET", &secrets), "bad pw ***");
    }
}
