//! A grant's scope values checked against the permission's
//! `parameters_schema`: a scope that could never match an action (an
//! amount given as text, a path given as a number) is refused when it is
//! asked for or granted, not kept as a grant that covers nothing.

use actiongate_api::FieldError;
use serde_json::{Map, Value};

/// Every scope value the schema refuses, named `<field>.<key>[/<pointer>]`.
///
/// The scope is checked as the object it is: a subset of the parameters,
/// so what the schema asks of the whole object (`required`, a count of
/// keys) is not held against it, and only errors inside a value count. A
/// string holding `*` or `?` is a glob, matched against the action's own
/// string: it is refused only where the key is declared as something other
/// than a string.
pub fn scope_violations(
    parameters_schema: &Value,
    scope: &Map<String, Value>,
    field: &str,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let properties = parameters_schema
        .get("properties")
        .and_then(Value::as_object);
    let mut plain = Map::new();
    for (key, value) in scope {
        let is_glob = value.as_str().is_some_and(|s| s.contains(['*', '?']));
        if !is_glob {
            plain.insert(key.clone(), value.clone());
            continue;
        }
        let declared = properties
            .and_then(|p| p.get(key))
            .and_then(|s| s.get("type"));
        let takes_strings = match declared {
            None => true,
            Some(Value::String(t)) => t == "string",
            Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
            Some(_) => true,
        };
        if !takes_strings {
            errors.push(FieldError {
                field: format!("{field}.{key}"),
                message: "a glob matches only strings, and this key is not one".to_owned(),
            });
        }
    }
    // The schema was checked when the handler was registered; one that
    // does not compile here refuses nothing more than the keys above.
    if let Ok(validator) = jsonschema::validator_for(parameters_schema) {
        let instance = Value::Object(plain);
        for e in validator.iter_errors(&instance) {
            let path = e.instance_path().as_str().to_owned();
            let Some(rest) = path.strip_prefix('/') else {
                continue;
            };
            let (key, inner) = rest.split_once('/').unwrap_or((rest, ""));
            let key = key.replace("~1", "/").replace("~0", "~");
            errors.push(FieldError {
                field: if inner.is_empty() {
                    format!("{field}.{key}")
                } else {
                    format!("{field}.{key}/{inner}")
                },
                message: e.masked().to_string(),
            });
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn scope(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn values_the_schema_refuses_are_named_and_globs_need_strings() {
        let schema = json!({
            "type": "object",
            "required": ["to", "amount"],
            "properties": {
                "to": {"type": "string", "format": "email"},
                "amount": {"type": "integer", "maximum": 100},
                "tags": {"type": "array", "items": {"type": "string"}}
            }
        });
        // A subset, globs on strings, values in range: fine.
        assert!(
            scope_violations(&schema, &scope(json!({"to": "*@example.com"})), "scope").is_empty()
        );
        assert!(scope_violations(&schema, &scope(json!({"amount": 5})), "scope").is_empty());
        let fields = |v: Value| {
            scope_violations(&schema, &scope(v), "scope")
                .into_iter()
                .map(|e| e.field)
                .collect::<Vec<_>>()
        };
        assert_eq!(fields(json!({"amount": "5"})), ["scope.amount"]);
        assert_eq!(fields(json!({"amount": 500})), ["scope.amount"]);
        assert_eq!(fields(json!({"amount": "*"})), ["scope.amount"]);
        assert_eq!(fields(json!({"tags": ["a", 1]})), ["scope.tags/1"]);
        assert_eq!(fields(json!({"to": 7, "amount": 1})), ["scope.to"]);
    }
}
