//! Bounds on the free-form JSON the gate stores (params, results, scopes,
//! outcomes): one nesting limit for all of it and a size limit per kind,
//! checked where it comes in, before anything is stored. Stored JSON is
//! wrapped a few levels deeper in events and audit lines, and every reader
//! (serde_json stops at 128 levels) must be able to read it back.

use serde_json::Value;

use crate::{GateError, GateResult};

/// Most levels of nested arrays and objects in a free-form value: `{}` is
/// one level, `{"a": []}` two.
pub const MAX_DEPTH: usize = 64;

/// Size limits per kind of free-form JSON, in bytes of compact JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonLimits {
    /// A handler action's params.
    pub params: usize,
    /// A result: an agent's outcome, an executor's asynchronous result.
    pub result: usize,
    /// A scope: of a grant, a grant request, a remembered approval.
    pub scope: usize,
}

impl Default for JsonLimits {
    fn default() -> Self {
        JsonLimits {
            params: 256 * 1024,
            result: 256 * 1024,
            scope: 16 * 1024,
        }
    }
}

/// How deeply `v` nests (0 for a scalar), counted without recursion, and
/// stopping once past `MAX_DEPTH`.
pub fn depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 1usize)];
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|c| (c, d + 1))),
            Value::Object(map) => stack.extend(map.values().map(|c| (c, d + 1))),
            _ => continue,
        }
        deepest = deepest.max(d);
        if deepest > MAX_DEPTH {
            return deepest;
        }
    }
    deepest
}

/// Counts bytes written, failing once past a limit.
struct Counter {
    n: usize,
    max: usize,
}

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.n += buf.len();
        if self.n > self.max {
            return Err(std::io::Error::other("over the limit"));
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Whether `v` as compact JSON takes at most `max` bytes; stops writing
/// once past it.
pub fn fits(v: &Value, max: usize) -> bool {
    serde_json::to_writer(&mut Counter { n: 0, max }, v).is_ok()
}

/// How many bytes `v` takes as compact JSON, counted up to `max` (past
/// it: more than `max`, without writing the rest).
pub fn json_len<T: serde::Serialize>(v: &T, max: usize) -> usize {
    let mut c = Counter { n: 0, max };
    match serde_json::to_writer(&mut c, v) {
        Ok(()) => c.n,
        Err(_) => max.saturating_add(1),
    }
}

/// Checks `v`, the value of `field`, against the nesting limit and
/// `max_bytes`: a 422 naming the field when it is past either.
pub fn check(field: &str, v: &Value, max_bytes: usize) -> GateResult<()> {
    if depth(v) > MAX_DEPTH {
        return Err(GateError::invalid(
            field,
            format!("nests deeper than {MAX_DEPTH} levels of arrays and objects"),
        ));
    }
    if !fits(v, max_bytes) {
        return Err(GateError::invalid(
            field,
            format!("larger than {max_bytes} bytes as JSON"),
        ));
    }
    match nul_at(v, field.to_owned()) {
        Some(at) => Err(GateError::invalid(at, crate::actions::NUL_REFUSED)),
        None => Ok(()),
    }
}

/// The path (`params.a[1]`, `steps[1].detail`) of the first string or key
/// in `value` holding U+0000, which no entrance takes; `path` is where
/// `value` is (empty at the top, where a string is the `body`).
pub fn nul_at(value: &Value, path: String) -> Option<String> {
    let named = |key: &str| {
        if path.is_empty() {
            key.to_owned()
        } else {
            format!("{path}.{key}")
        }
    };
    match value {
        Value::String(s) if s.contains('\0') => Some(if path.is_empty() {
            "body".to_owned()
        } else {
            path
        }),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, v)| nul_at(v, format!("{path}[{i}]"))),
        Value::Object(map) => map.iter().find_map(|(k, v)| {
            if k.contains('\0') {
                Some(named(&k.replace('\0', "\\u0000")))
            } else {
                nul_at(v, named(k))
            }
        }),
        _ => None,
    }
}

/// [`check`] for a map of values (a scope).
pub fn check_map(
    field: &str,
    map: &serde_json::Map<String, Value>,
    max_bytes: usize,
) -> GateResult<()> {
    // The map is one level; its values nest below it.
    let mut deepest = 1;
    for v in map.values() {
        deepest = deepest.max(1 + depth(v));
        if deepest > MAX_DEPTH {
            break;
        }
    }
    if deepest > MAX_DEPTH {
        return Err(GateError::invalid(
            field,
            format!("nests deeper than {MAX_DEPTH} levels of arrays and objects"),
        ));
    }
    let mut counter = Counter {
        n: 0,
        max: max_bytes,
    };
    if serde_json::to_writer(&mut counter, map).is_err() {
        return Err(GateError::invalid(
            field,
            format!("larger than {max_bytes} bytes as JSON"),
        ));
    }
    match map.iter().find_map(|(k, v)| {
        if k.contains('\0') {
            Some(field.to_owned())
        } else {
            nul_at(v, format!("{field}.{k}"))
        }
    }) {
        Some(at) => Err(GateError::invalid(at, crate::actions::NUL_REFUSED)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn a_nul_anywhere_in_free_form_json_is_refused_naming_where() {
        let v = serde_json::json!({"a": [1, {"b": "x\u{0}"}]});
        let e = check("params", &v, 1 << 20).unwrap_err();
        assert_eq!(e.errors[0].field, "params.a[1].b");
        let m = serde_json::json!({"reason": "r\u{0}"});
        let e = check_map("scope", m.as_object().unwrap(), 1 << 20).unwrap_err();
        assert_eq!(e.errors[0].field, "scope.reason");
        assert!(check("params", &serde_json::json!({"a": "x"}), 1 << 20).is_ok());
    }

    fn nested(levels: usize) -> Value {
        let mut v = json!(1);
        for _ in 0..levels {
            v = json!([v]);
        }
        v
    }

    #[test]
    fn depth_counts_containers() {
        assert_eq!(depth(&json!(1)), 0);
        assert_eq!(depth(&json!({})), 1);
        assert_eq!(depth(&json!({"a": [1, {"b": []}]})), 4);
        assert_eq!(depth(&nested(64)), 64);
    }

    #[test]
    fn sixty_four_levels_pass_and_sixty_five_name_the_field() {
        check("params", &nested(64), 1 << 20).unwrap();
        let e = check("params", &nested(65), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("params"), "{e}");
        let mut m = serde_json::Map::new();
        m.insert("k".into(), nested(63));
        check_map("scope", &m, 1 << 20).unwrap();
        m.insert("k".into(), nested(64));
        assert!(check_map("scope", &m, 1 << 20).is_err());
    }

    #[test]
    fn size_is_that_of_compact_json() {
        let v = json!({"a": "xxxx"});
        assert!(fits(&v, 12));
        assert!(!fits(&v, 11));
    }
}
