//! One outbox line (seed 002): `{"actions": [...]}` parsed into the actions
//! to submit, the ones to skip and the ones that are invalid, each with the
//! idempotency key that makes resubmitting it harmless.

use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

/// The action types of seed 002 (the reference executor's `fs` actions).
pub const ACTION_TYPES: &[&str] = &[
    "create_file",
    "update_file",
    "update_readme",
    "read_file",
    "execute_command",
];

/// The seed's action keys that become params, in order.
const PARAM_KEYS: &[&str] = &["filepath", "content", "reason"];

/// Where a line came from: which file (and which incarnation of it) and
/// which line, so that its actions' keys are unique to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineId {
    /// Device of the file.
    pub dev: u64,
    /// Inode of the file.
    pub ino: u64,
    /// Bumped each time the file is truncated or replaced under the same name.
    pub generation: u64,
    /// 1-based line number.
    pub line: u64,
}

/// What to do with one entry of `actions`.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// Submit this body to `POST /v1/actions`.
    Submit {
        /// `action_type`.
        action_type: String,
        /// `filepath`, if given.
        filepath: Option<String>,
        /// The request body.
        body: Value,
    },
    /// A demo or template action, skipped.
    Skip {
        /// `action_type`, if given.
        action_type: Option<String>,
        /// `filepath`, if given.
        filepath: Option<String>,
        /// Why.
        why: String,
    },
    /// Not an action we can submit.
    Invalid {
        /// `action_type`, if given.
        action_type: Option<String>,
        /// `filepath`, if given.
        filepath: Option<String>,
        /// What is wrong.
        why: String,
    },
}

/// The idempotency key of action `index` of a line: the file's identity,
/// the line number, the index and a hash of the line's bytes.
pub fn idempotency_key(id: LineId, index: usize, line: &[u8]) -> String {
    let hash = hex::encode(Sha256::digest(line));
    format!(
        "outbox:{}.{}.{}:{}:{index}:{}",
        id.dev,
        id.ino,
        id.generation,
        id.line,
        &hash[..32]
    )
}

/// Parses a line (without its newline). `Ok(None)`: a blank line;
/// `Err`: the whole line is bad.
pub fn parse(
    id: LineId,
    line: &[u8],
    handler: &str,
    include_demo: bool,
) -> Result<Option<Vec<Item>>, String> {
    let text = std::str::from_utf8(line).map_err(|_| "not UTF-8".to_owned())?;
    if text.trim().is_empty() {
        return Ok(None);
    }
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let actions = match v.get("actions") {
        Some(Value::Array(a)) => a,
        Some(_) => return Err("\"actions\" is not an array".to_owned()),
        None => return Err("no \"actions\" array".to_owned()),
    };
    Ok(Some(
        actions
            .iter()
            .enumerate()
            .map(|(index, a)| item(id, index, line, a, handler, include_demo))
            .collect(),
    ))
}

fn item(
    id: LineId,
    index: usize,
    line: &[u8],
    a: &Value,
    handler: &str,
    include_demo: bool,
) -> Item {
    let Some(obj) = a.as_object() else {
        return Item::Invalid {
            action_type: None,
            filepath: None,
            why: "the action is not an object".to_owned(),
        };
    };
    let filepath = obj
        .get("filepath")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let action_type = match obj.get("action_type") {
        Some(Value::String(t)) => t.clone(),
        _ => {
            return Item::Invalid {
                action_type: None,
                filepath,
                why: "no action_type".to_owned(),
            };
        }
    };
    if !ACTION_TYPES.contains(&action_type.as_str()) {
        return Item::Invalid {
            why: format!(
                "unknown action_type '{action_type}' (known: {})",
                ACTION_TYPES.join(", ")
            ),
            action_type: Some(action_type),
            filepath,
        };
    }
    for flag in ["demo", "template"] {
        if obj.get(flag) == Some(&Value::Bool(true)) && !include_demo {
            return Item::Skip {
                action_type: Some(action_type),
                filepath,
                why: format!("{flag} action (pass --include-demo to submit it)"),
            };
        }
    }
    let mut params = Map::new();
    for k in PARAM_KEYS {
        if let Some(v) = obj.get(*k) {
            params.insert((*k).to_owned(), v.clone());
        }
    }
    let mut body = json!({
        "handler": handler,
        "action": action_type,
        "params": params,
        "idempotency_key": idempotency_key(id, index, line),
    });
    if let Some(r) = obj.get("reason").and_then(Value::as_str) {
        body["reason"] = json!(r);
    }
    Item::Submit {
        action_type,
        filepath,
        body,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const ID: LineId = LineId {
        dev: 1,
        ino: 2,
        generation: 0,
        line: 7,
    };

    #[test]
    fn seed_actions_become_handler_actions() {
        let line = br#"{"actions":[{"action_type":"create_file","filepath":"/tmp/a","content":"hi","reason":"why"},{"action_type":"update_readme","reason":"log"}]}"#;
        let items = parse(ID, line, "fs", false).unwrap().unwrap();
        let Item::Submit { body, .. } = &items[0] else {
            panic!("{items:?}")
        };
        assert_eq!(body["handler"], "fs");
        assert_eq!(body["action"], "create_file");
        assert_eq!(
            body["params"],
            json!({"filepath": "/tmp/a", "content": "hi", "reason": "why"})
        );
        assert_eq!(body["reason"], "why");
        let Item::Submit { body: second, .. } = &items[1] else {
            panic!("{items:?}")
        };
        assert_eq!(second["params"], json!({"reason": "log"}));
        assert_ne!(body["idempotency_key"], second["idempotency_key"]);
    }

    #[test]
    fn keys_differ_by_file_generation_line_index_and_content() {
        let k = idempotency_key(ID, 0, b"x");
        assert_eq!(k, idempotency_key(ID, 0, b"x"));
        assert_ne!(k, idempotency_key(ID, 1, b"x"));
        assert_ne!(k, idempotency_key(ID, 0, b"y"));
        assert_ne!(k, idempotency_key(LineId { line: 8, ..ID }, 0, b"x"));
        assert_ne!(
            k,
            idempotency_key(
                LineId {
                    generation: 1,
                    ..ID
                },
                0,
                b"x"
            )
        );
        assert_ne!(k, idempotency_key(LineId { ino: 3, ..ID }, 0, b"x"));
        assert!(k.len() <= 256);
    }

    #[test]
    fn bad_lines_and_bad_actions_are_told_apart() {
        assert!(parse(ID, b"not json", "fs", false).is_err());
        assert!(parse(ID, b"{\"foo\": 1}", "fs", false).is_err());
        assert!(parse(ID, b"{\"actions\": 3}", "fs", false).is_err());
        assert_eq!(parse(ID, b"   ", "fs", false).unwrap(), None);
        let items = parse(
            ID,
            br#"{"actions":[{"action_type":"format_disk"},7,{"filepath":"/x"},{"action_type":"read_file","demo":true},{"action_type":"read_file","template":true}]}"#,
            "fs",
            false,
        )
        .unwrap()
        .unwrap();
        assert!(matches!(&items[0], Item::Invalid { why, .. } if why.contains("format_disk")));
        assert!(matches!(&items[1], Item::Invalid { .. }));
        assert!(matches!(&items[2], Item::Invalid { why, .. } if why == "no action_type"));
        assert!(matches!(&items[3], Item::Skip { .. }));
        assert!(matches!(&items[4], Item::Skip { .. }));
        let demo = br#"{"actions":[{"action_type":"read_file","demo":true}]}"#;
        let items = parse(ID, demo, "fs", true).unwrap().unwrap();
        assert!(matches!(&items[0], Item::Submit { .. }));
    }
}
