//! The strict verifier of an audit export (`actiongate audit verify`).
//!
//! It accepts a file only when: it has at least one event line; the chain
//! starts at genesis (seq 1 after 64 zeros) or at the (seq, hash) the user
//! passes; seqs go up by exactly one; every line is in canonical form
//! (keys sorted, no spaces, no duplicate keys, so every reader sees the
//! content that was hashed); each hash follows from the line and the one
//! before; every `audit.anchor` event states the chain as it is just
//! before it; and the last line is the export's final anchor, stating the
//! last event's (seq, hash). With the key, every anchor's and the final
//! line's MAC must verify too.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::anchor::{ANCHOR_EVENT, AuditKey, Signed};
use crate::audit::{Anchor, GENESIS_HASH, canonical_json, chain_hash};

/// The export's final line: `{"audit":"end","events":N,"hash":H,"seq":S}`
/// and `"mac"` when the daemon has a key.
pub fn end_line(events: usize, last: &Anchor, key: Option<&AuditKey>) -> String {
    let mut line = serde_json::json!({
        "audit": "end",
        "events": events,
        "seq": last.seq,
        "hash": last.hash,
    });
    if let (Some(key), Value::Object(map)) = (key, &mut line) {
        map.insert("key_id".to_owned(), Value::String(key.id()));
        map.insert(
            "mac".to_owned(),
            Value::String(key.sign(Signed::End, last.seq, &last.hash)),
        );
    }
    canonical_json(&line)
}

/// What a file is checked against.
#[derive(Debug, Default)]
pub struct VerifyOptions {
    /// Where the file's chain starts when it does not start at genesis:
    /// the seq and hash of the event just before its first line.
    pub from: Option<Anchor>,
    /// The daemon's audit key: anchors and the final line must be signed.
    pub key: Option<AuditKey>,
}

/// What a successful verification proved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// Event lines.
    pub events: usize,
    /// Where the chain starts (genesis or the anchor passed).
    pub start: Anchor,
    /// The last event's seq and hash: pass it as the next export's start.
    pub end: Anchor,
    /// `audit.anchor` events whose MAC was checked with the key.
    pub anchors_signed: usize,
    /// `audit.anchor` events checked against the chain only (no key).
    pub anchors_unchecked: usize,
    /// Whether the final line's MAC was checked with the key.
    pub end_signed: bool,
}

/// Checks an export line by line; the error names the first bad line
/// (1-based) and what is wrong with it.
pub fn verify<I>(lines: I, opts: &VerifyOptions) -> Result<Report, (usize, String)>
where
    I: IntoIterator<Item = std::io::Result<String>>,
{
    let mut state = State {
        opts,
        cur: None,
        report: Report {
            events: 0,
            start: opts.from.clone().unwrap_or_default(),
            end: Anchor::default(),
            anchors_signed: 0,
            anchors_unchecked: 0,
            end_signed: false,
        },
        ended: false,
    };
    let mut n = 0;
    for line in lines {
        n += 1;
        let line = line.map_err(|e| (n, format!("cannot read: {e}")))?;
        state.line(&line).map_err(|e| (n, e))?;
    }
    if n == 0 {
        return Err((0, "the file is empty: it proves nothing".to_owned()));
    }
    if state.report.events == 0 {
        return Err((n, "no event lines".to_owned()));
    }
    if !state.ended {
        return Err((
            n,
            "the last line is not the export's final anchor ({\"audit\":\"end\",...}): \
             the end of the export may have been cut"
                .to_owned(),
        ));
    }
    Ok(state.report)
}

struct State<'a> {
    opts: &'a VerifyOptions,
    /// The chain after the last event line.
    cur: Option<Anchor>,
    report: Report,
    ended: bool,
}

impl State<'_> {
    fn line(&mut self, text: &str) -> Result<(), String> {
        if self.ended {
            return Err("a line after the final anchor".to_owned());
        }
        if text.trim().is_empty() {
            return Err("empty line".to_owned());
        }
        let value = parse_strict(text)?;
        let Value::Object(mut map) = value else {
            return Err("not a JSON object".to_owned());
        };
        if canonical_json(&Value::Object(map.clone())) != text {
            return Err(
                "not in canonical form (keys sorted, no whitespace, numbers and strings \
                 as the exporter writes them)"
                    .to_owned(),
            );
        }
        if map.contains_key("audit") {
            return self.end(&map);
        }
        let hash = take_string(&mut map, "hash")?;
        let prev = take_string(&mut map, "prev_hash")?;
        let seq = map
            .get("seq")
            .and_then(Value::as_i64)
            .ok_or_else(|| "no seq".to_owned())?;
        let before = match &self.cur {
            Some(cur) => {
                if seq != cur.seq + 1 {
                    return Err(format!(
                        "seq {seq} does not follow {} (a line was removed, inserted or moved)",
                        cur.seq
                    ));
                }
                if prev != cur.hash {
                    return Err(
                        "prev_hash is not the previous line's hash (a line was removed, \
                         inserted or moved)"
                            .to_owned(),
                    );
                }
                cur.clone()
            }
            None => self.start(seq, &prev)?,
        };
        let content = Value::Object(map);
        if chain_hash(&prev, &content) != hash {
            return Err("hash does not match the line's content (the line was changed)".to_owned());
        }
        if content.get("type").and_then(Value::as_str) == Some(ANCHOR_EVENT) {
            self.anchor(&content, &before)?;
        }
        self.cur = Some(Anchor { seq, hash });
        self.report.events += 1;
        Ok(())
    }

    /// The first event line: the chain must start at genesis or at the
    /// anchor the user passed.
    fn start(&self, seq: i64, prev: &str) -> Result<Anchor, String> {
        match &self.opts.from {
            Some(from) => {
                if seq != from.seq + 1 || prev != from.hash {
                    return Err(format!(
                        "the chain does not start at the anchor passed (seq {}, hash {}): \
                         its first line is seq {seq} after {prev}",
                        from.seq, from.hash
                    ));
                }
                Ok(from.clone())
            }
            None => {
                if seq != 1 || prev != GENESIS_HASH {
                    return Err(format!(
                        "the chain does not start at genesis (it starts at seq {seq}): lines \
                         before it may have been cut; to check a part or a pruned log, pass \
                         --from-anchor SEQ:HASH (the end of the previous export)"
                    ));
                }
                Ok(Anchor::default())
            }
        }
    }

    /// An `audit.anchor` event: it must state the chain just before it,
    /// and with the key its MAC must verify.
    fn anchor(&mut self, content: &Value, before: &Anchor) -> Result<(), String> {
        let data = &content["data"];
        let seq = data["seq"].as_i64();
        let hash = data["hash"].as_str();
        if seq != Some(before.seq) || hash != Some(before.hash.as_str()) {
            return Err(format!(
                "the anchor signed seq {} with hash {}, but the chain there is {}: an \
                 earlier event was changed and the chain recomputed",
                seq.map_or("-".to_owned(), |s| s.to_string()),
                hash.unwrap_or("-"),
                before.hash
            ));
        }
        match &self.opts.key {
            Some(key) => {
                let mac = data["mac"].as_str().unwrap_or_default();
                if !key.verify(Signed::Anchor, before.seq, &before.hash, mac) {
                    return Err(format!(
                        "the anchor's signature does not verify with the key {} (signed \
                         by key {}): the anchor was forged or the key is another",
                        key.id(),
                        data["key_id"].as_str().unwrap_or("-")
                    ));
                }
                self.report.anchors_signed += 1;
            }
            None => self.report.anchors_unchecked += 1,
        }
        Ok(())
    }

    /// The final line: it states the last event and how many there were.
    fn end(&mut self, map: &Map<String, Value>) -> Result<(), String> {
        if map.get("audit").and_then(Value::as_str) != Some("end") {
            return Err("an unknown audit line".to_owned());
        }
        let Some(cur) = &self.cur else {
            return Err("the final anchor comes before any event".to_owned());
        };
        let seq = map.get("seq").and_then(Value::as_i64);
        let hash = map.get("hash").and_then(Value::as_str);
        let events = map.get("events").and_then(Value::as_u64);
        if seq != Some(cur.seq) || hash != Some(cur.hash.as_str()) {
            return Err(
                "the final anchor does not match the last event (lines were cut or added)"
                    .to_owned(),
            );
        }
        if events != Some(self.report.events as u64) {
            return Err(format!(
                "the final anchor counts {} events, the file has {}",
                events.map_or("-".to_owned(), |e| e.to_string()),
                self.report.events
            ));
        }
        if let Some(key) = &self.opts.key {
            let mac = map.get("mac").and_then(Value::as_str).unwrap_or_default();
            if !key.verify(Signed::End, cur.seq, &cur.hash, mac) {
                return Err(format!(
                    "the final anchor's signature does not verify with the key {}",
                    key.id()
                ));
            }
            self.report.end_signed = true;
        }
        self.report.end = cur.clone();
        self.ended = true;
        Ok(())
    }
}

fn take_string(map: &mut Map<String, Value>, key: &str) -> Result<String, String> {
    match map.remove(key) {
        Some(Value::String(s)) => Ok(s),
        _ => Err(format!("no {key}")),
    }
}

/// Parses one JSON value, refusing duplicate object keys (serde_json keeps
/// the last silently; another reader may keep the first).
pub fn parse_strict(text: &str) -> Result<Value, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    let value = StrictValue
        .deserialize(&mut de)
        .map_err(|e| format!("not a JSON line: {e}"))?;
    de.end().map_err(|e| format!("not a JSON line: {e}"))?;
    Ok(value)
}

/// A `serde_json::Value` seed that fails on a duplicate key.
struct StrictValue;

impl<'de> DeserializeSeed<'de> for StrictValue {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for StrictValue {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(StrictValue)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        let mut seen = HashSet::new();
        while let Some(key) = access.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            let value = access.next_value_seed(StrictValue)?;
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        assert!(parse_strict(r#"{"a":1,"b":{"c":2}}"#).is_ok());
        let err = parse_strict(r#"{"a":1,"a":2}"#).unwrap_err();
        assert!(err.contains("duplicate key"), "{err}");
        assert!(parse_strict(r#"{"a":[{"c":1,"c":1}]}"#).is_err());
        assert!(parse_strict(r#"{"a":1} x"#).is_err());
    }
}
