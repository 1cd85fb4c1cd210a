//! The audit chain over the event log, and retention.
//!
//! An export is one JSON line per event in `seq` order. Each line carries
//! `prev_hash` and `hash = SHA-256(prev_hash "\n" canonical(line without
//! prev_hash and hash))`, hex, so an edited, inserted, removed or reordered
//! line breaks the chain. The chain is computed from stored content when it
//! is needed, starting at the anchor: the hash of the last event pruned by
//! retention (or 64 zeros when nothing was ever pruned). Pruning stores the
//! new anchor in the same transaction that deletes the events, so later
//! exports continue exactly the chain an earlier export showed.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::SqliteStore;
use crate::error::StoreError;
use crate::events::{event_columns, from_row};
use crate::time::to_ms;
use actiongate_api::model::Event;

/// `prev_hash` of the very first event.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Where the chain of the stored events starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Anchor {
    /// The last pruned event's seq (0: nothing pruned).
    pub seq: i64,
    /// Its chain hash, the `prev_hash` of the next event.
    pub hash: String,
}

impl Default for Anchor {
    fn default() -> Self {
        Anchor {
            seq: 0,
            hash: GENESIS_HASH.to_owned(),
        }
    }
}

/// JSON with object keys sorted and no whitespace, so the same content
/// always hashes the same, whatever the key order of a line.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                if let Some(item) = map.get(k) {
                    write_canonical(item, out);
                }
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The chain hash of content following `prev`.
pub fn chain_hash(prev: &str, content: &Value) -> String {
    let mut h = Sha256::new();
    h.update(prev.as_bytes());
    h.update(b"\n");
    h.update(canonical_json(content).as_bytes());
    hex::encode(h.finalize())
}

/// Deepest `data` an audit line carries as a tree: the line wraps it one
/// level deeper, and a reader such as `audit verify` (serde_json) reads at
/// most 128 levels. Data the API accepts nests at most 64 levels (plus the
/// few its event adds), so only a value stored before that limit, or
/// written around the daemon, is deeper.
pub const MAX_DATA_DEPTH: usize = 127;

/// How deeply `v` nests (0 for a scalar), counted without recursion.
pub fn json_depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(v, 1usize)];
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::Array(items) => {
                deepest = deepest.max(d);
                stack.extend(items.iter().map(|c| (c, d + 1)));
            }
            Value::Object(map) => {
                deepest = deepest.max(d);
                stack.extend(map.values().map(|c| (c, d + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// The content of `ev`'s audit line (before `prev_hash` and `hash`): the
/// event as JSON. An event whose data cannot be read as a tree (nested past
/// [`MAX_DATA_DEPTH`] levels) is logged and carries its stored text as the
/// string `data_raw` instead of `data`, so it never stops an export, the
/// anchors or pruning, and its line is hashed and verified like any other.
pub fn event_content(ev: &Event) -> Value {
    match serde_json::to_value(ev) {
        Ok(v)
            if v.get("data")
                .is_none_or(|d| json_depth(d) <= MAX_DATA_DEPTH) =>
        {
            v
        }
        _ => {
            tracing::warn!(
                seq = ev.seq,
                "an event's data nests too deeply to render; the audit carries it as raw text (data_raw)"
            );
            let bare = Event {
                data: actiongate_api::model::Json::null(),
                ..ev.clone()
            };
            let mut v = serde_json::to_value(&bare).unwrap_or_default();
            if let Value::Object(map) = &mut v {
                map.remove("data");
                map.insert(
                    "data_raw".to_owned(),
                    Value::String(ev.data.get().to_owned()),
                );
            }
            v
        }
    }
}

/// The export line of `ev` after `prev`, and its hash.
pub fn audit_line(ev: &Event, prev: &str) -> Result<(String, String), StoreError> {
    let mut content = event_content(ev);
    let hash = chain_hash(prev, &content);
    if let Value::Object(map) = &mut content {
        map.insert("prev_hash".to_owned(), Value::String(prev.to_owned()));
        map.insert("hash".to_owned(), Value::String(hash.clone()));
    }
    // Canonical, as `audit verify` requires.
    Ok((canonical_json(&content), hash))
}

impl SqliteStore {
    /// Where the chain of the stored events starts.
    pub async fn audit_anchor(&self) -> Result<Anchor, StoreError> {
        let row: Option<(i64, String)> =
            sqlx::query_as("SELECT seq, hash FROM audit_anchor WHERE id = 1")
                .fetch_optional(&self.read)
                .await?;
        Ok(row
            .map(|(seq, hash)| Anchor { seq, hash })
            .unwrap_or_default())
    }

    /// The seq of the first event (in seq order) at or after `at`.
    pub async fn first_seq_since(&self, at: DateTime<Utc>) -> Result<Option<i64>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT MIN(seq) FROM events WHERE at >= ?")
                .bind(to_ms(at))
                .fetch_one(&self.read)
                .await?,
        )
    }

    /// Deletes up to `max` of the oldest events written before `cutoff`
    /// (never one a subscription has not yet turned into deliveries) and
    /// moves the anchor past them. Returns how many events were pruned.
    /// Deliveries are records: `records.retention` deletes them, with
    /// their attempts.
    pub async fn prune_events(&self, cutoff: DateTime<Utc>, max: i64) -> Result<usize, StoreError> {
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    let anchor: Option<(i64, String)> =
                        sqlx::query_as("SELECT seq, hash FROM audit_anchor WHERE id = 1")
                            .fetch_optional(&mut *conn)
                            .await?;
                    let (mut seq, mut hash) =
                        anchor.unwrap_or_else(|| (0, GENESIS_HASH.to_owned()));
                    let keep_after: Option<i64> =
                        sqlx::query_scalar("SELECT MIN(cursor) FROM subscriptions")
                            .fetch_one(&mut *conn)
                            .await?;
                    let heads: Vec<(i64, i64)> = sqlx::query_as(
                        "SELECT seq, at FROM events WHERE seq > ? ORDER BY seq LIMIT ?",
                    )
                    .bind(seq)
                    .bind(max)
                    .fetch_all(&mut *conn)
                    .await?;
                    let Some(upper) = due_until(&heads, to_ms(cutoff), keep_after) else {
                        return Ok(0);
                    };
                    let mut pruned = 0;
                    while seq < upper {
                        let rows = due_chunk::<sqlx::Sqlite>(SQLITE_EVENTS, seq, upper)
                            .build()
                            .fetch_all(&mut *conn)
                            .await?;
                        if rows.is_empty() {
                            break;
                        }
                        pruned += chain_rows(&rows, &mut seq, &mut hash)?;
                    }
                    sqlx::query("DELETE FROM events WHERE seq <= ?")
                        .bind(seq)
                        .execute(&mut *conn)
                        .await?;
                    sqlx::query(
                        "INSERT INTO audit_anchor (id, seq, hash) VALUES (1, ?, ?) \
                         ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash",
                    )
                    .bind(seq)
                    .bind(&hash)
                    .execute(&mut *conn)
                    .await?;
                    Ok(pruned)
                })
            })
            .await
    }
}

/// How many events a retention round reads whole at a time to hash them:
/// an event may hold up to 256 KiB an agent sent, so a round holds a few
/// MiB at most, however many it prunes (soak review).
pub(crate) const PRUNE_CHUNK: i64 = 16;

/// What SQLite's [`due_chunk`] selects from, up to its condition.
pub(crate) const SQLITE_EVENTS: &str = concat!(
    "SELECT ",
    crate::events::stored_columns!(),
    " FROM ",
    crate::events::stored_from!(),
    " WHERE "
);

/// What Postgres's [`due_chunk`] selects from, up to its condition.
pub(crate) const PG_EVENTS: &str = concat!("SELECT ", event_columns!(), " FROM events WHERE ");

/// The next [`PRUNE_CHUNK`] events after `after`, up to `upper`, whole,
/// selected by `select` ([`SQLITE_EVENTS`] or [`PG_EVENTS`]).
pub(crate) fn due_chunk<DB>(select: &'static str, after: i64, upper: i64) -> sqlx::QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q = sqlx::QueryBuilder::new(select);
    q.push("events.seq > ")
        .push_bind(after)
        .push(" AND events.seq <= ")
        .push_bind(upper)
        .push(" ORDER BY events.seq LIMIT ")
        .push_bind(PRUNE_CHUNK);
    q
}

/// Chains the events of `rows` (in seq order, following `seq`) onto
/// `hash`, moving `seq` to the last; how many.
pub(crate) fn chain_rows(
    rows: &[impl crate::row::Cols],
    seq: &mut i64,
    hash: &mut String,
) -> Result<usize, StoreError> {
    for row in rows {
        let ev = from_row(row)?;
        *hash = chain_hash(hash, &event_content(&ev));
        *seq = ev.seq;
    }
    Ok(rows.len())
}

/// The last of `heads` (`(seq, at)` in ms, oldest first, after the anchor)
/// that retention may prune: those before `cutoff`, and none past a
/// subscription's cursor `keep_after`, stopping at the first that is not.
pub(crate) fn due_until(heads: &[(i64, i64)], cutoff: i64, keep_after: Option<i64>) -> Option<i64> {
    heads
        .iter()
        .take_while(|&&(seq, at)| at < cutoff && keep_after.is_none_or(|k| seq <= k))
        .last()
        .map(|&(seq, _)| seq)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retention_stops_at_the_first_event_it_may_not_prune() {
        let heads = [(4, 10), (5, 20), (6, 30), (7, 15)];
        assert_eq!(due_until(&heads, 25, None), Some(5));
        assert_eq!(due_until(&heads, 100, None), Some(7));
        assert_eq!(due_until(&heads, 100, Some(5)), Some(5));
        assert_eq!(due_until(&heads, 10, None), None);
        assert_eq!(due_until(&heads, 100, Some(3)), None);
        assert_eq!(due_until(&[], 100, None), None);
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let a: Value = serde_json::json!({"b": 1, "a": {"d": [1, {"z": 1, "y": 2}], "c": "x"}});
        assert_eq!(
            canonical_json(&a),
            r#"{"a":{"c":"x","d":[1,{"y":2,"z":1}]},"b":1}"#
        );
    }
}
