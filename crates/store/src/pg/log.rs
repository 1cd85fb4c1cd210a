//! Appending to the event log, in commit order across nodes.
//!
//! A transaction takes its seqs from `event_counter` as its last step: the
//! `UPDATE` locks the counter's row until the transaction ends, so a second
//! transaction gets the numbers after these only once these events are
//! committed and visible (Postgres makes a commit visible before it releases
//! its locks). A rollback gives the numbers back with the lock. Seqs are
//! therefore gapless and ordered as commits are, which is what lets every
//! node follow the log by "everything after the last seq I saw".

use sqlx::PgConnection;

use crate::error::StoreError;
use crate::events::NewEvent;
use crate::time::{from_ms, now, to_ms};
use actiongate_api::model::Event;

/// The channel each commit notifies with the newest seq.
pub(crate) const CHANNEL: &str = "actiongate_events";

/// Writes `events` after every event committed so far and asks Postgres to
/// notify the other nodes at commit. Hold no other lock after this: commit.
pub(crate) async fn append(
    conn: &mut PgConnection,
    events: Vec<NewEvent>,
) -> Result<Vec<Event>, StoreError> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let n = i64::try_from(events.len()).unwrap_or(i64::MAX);
    let last: i64 =
        sqlx::query_scalar("UPDATE event_counter SET seq = seq + $1 WHERE id = 1 RETURNING seq")
            .bind(n)
            .fetch_one(&mut *conn)
            .await?;
    let at = from_ms(to_ms(now()));
    let mut written = Vec::with_capacity(events.len());
    for (seq, ev) in (last - n + 1..).zip(events) {
        let mut ev = ev.prepare(at);
        ev.seq = seq;
        written.push(ev);
    }
    // One array per column, for one `INSERT ... SELECT FROM UNNEST`.
    let seqs: Vec<i64> = written.iter().map(|e| e.seq).collect();
    let ids: Vec<&str> = written.iter().map(|e| e.id.as_str()).collect();
    let kinds: Vec<&str> = written.iter().map(|e| e.kind.as_str()).collect();
    let agents: Vec<Option<&str>> = written.iter().map(|e| e.agent.as_deref()).collect();
    let actions: Vec<Option<&str>> = written.iter().map(|e| e.action_id.as_deref()).collect();
    let grants: Vec<Option<&str>> = written.iter().map(|e| e.grant_id.as_deref()).collect();
    let data: Vec<&str> = written.iter().map(|e| e.data.get()).collect();
    sqlx::query(
        "INSERT INTO events (seq, id, type, at, agent, action_id, grant_id, data) \
         SELECT s, i, t, $4, a, ac, g, d FROM UNNEST($1::BIGINT[], $2::TEXT[], $3::TEXT[], \
         $5::TEXT[], $6::TEXT[], $7::TEXT[], $8::TEXT[]) AS e(s, i, t, a, ac, g, d)",
    )
    .bind(&seqs)
    .bind(&ids)
    .bind(&kinds)
    .bind(to_ms(at))
    .bind(&agents)
    .bind(&actions)
    .bind(&grants)
    .bind(&data)
    .execute(&mut *conn)
    .await?;
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(last.to_string())
        .execute(&mut *conn)
        .await?;
    Ok(written)
}
