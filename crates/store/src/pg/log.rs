//! Appending to the event log, in commit order across nodes, without a
//! hot row (migration `0010_event_queue`).
//!
//! A writing transaction inserts its events into `event_queue` under one
//! `pos` from a plain sequence, taken by the statement that appends them
//! (after everything the transaction read), and commits: no lock shared
//! with other writers is held across its commit. Right after the commit,
//! the node's sequencer (`sequencer`, one caller per node for every
//! writer waiting) runs a pass of `actiongate_sequence`: one pass at a time
//! cluster-wide (an advisory lock held until the pass commits) moves every
//! committed queued event into `events` with the next seqs, in (pos, n)
//! order, updates `event_counter` once and notifies the other nodes once
//! per batch. Seqs are therefore gapless, a reader that sees one seq sees
//! every lower one, and a late committer's events are numbered by the
//! first pass after its commit, after everything already published. The
//! writer learns its events' seqs (its first event keeps its `pos` in
//! `events`) and the newest seq, and publishes up to it before answering.
//!
//! Anchors append directly ([`append_numbered`]) while holding the
//! sequencer's lock, so nothing is numbered between their hashing and them.

use sqlx::PgConnection;

use crate::error::StoreError;
use crate::events::NewEvent;
use crate::time::{from_ms, now, to_ms};
use actiongate_api::model::Event;

/// The channel each sequencing pass notifies with the newest seq.
pub(crate) const CHANNEL: &str = "actiongate_events";

/// The statement queueing events, in one round trip: one `pos` for them
/// all, their order within it (`WITH ORDINALITY`); it answers the `pos`.
/// Parameters `$1`-`$7` are bound by [`Batch::bind`]. `$before` is either
/// empty or a data-modifying statement named and followed by a comma
/// (`"a AS (INSERT ...), "`, its parameters from `$8` on), which then runs
/// in the same statement: a change that needs nothing read first is one
/// implicit transaction, one round trip.
macro_rules! append_sql {
    ($before:expr) => {
        concat!(
            "WITH ",
            $before,
            "p AS (SELECT nextval('event_pos') AS pos), \
             e AS (INSERT INTO event_queue (pos, n, id, type, at, agent, action_id, grant_id, data) \
               SELECT p.pos, u.n, u.i, u.t, $1, u.a, u.ac, u.g, u.d FROM p, \
               UNNEST($2::TEXT[], $3::TEXT[], $4::TEXT[], $5::TEXT[], $6::TEXT[], $7::TEXT[]) \
               WITH ORDINALITY AS u(i, t, a, ac, g, d, n)) \
             SELECT p.pos FROM p"
        )
    };
}
pub(crate) use append_sql;

/// The lock sequencing passes hold (`actiongate_sequence`), as a statement
/// for a transaction that must exclude them until it ends.
pub(crate) const LOCK_SEQUENCER: &str =
    "SELECT pg_advisory_xact_lock(hashtext('actiongate.events'))";

/// Events about to be appended, prepared at one time.
pub(crate) struct Batch {
    /// The events as they will be published; their seqs are filled in by
    /// [`Batch::numbered`].
    written: Vec<Event>,
}

impl Batch {
    /// `events`, in order, written now.
    pub(crate) fn new(events: Vec<NewEvent>) -> Batch {
        let at = from_ms(to_ms(now()));
        Batch {
            written: events.into_iter().map(|ev| ev.prepare(at)).collect(),
        }
    }

    /// Binds `$1`-`$7` of [`append_sql`] to `q`.
    pub(crate) fn bind<'q, O>(
        &'q self,
        q: sqlx::query::QueryScalar<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
    ) -> sqlx::query::QueryScalar<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments> {
        let w = &self.written;
        let at = w.first().map_or(0, |e| to_ms(e.at));
        q.bind(at)
            .bind(w.iter().map(|e| e.id.as_str()).collect::<Vec<_>>())
            .bind(w.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>())
            .bind(w.iter().map(|e| e.agent.as_deref()).collect::<Vec<_>>())
            .bind(w.iter().map(|e| e.action_id.as_deref()).collect::<Vec<_>>())
            .bind(w.iter().map(|e| e.grant_id.as_deref()).collect::<Vec<_>>())
            .bind(w.iter().map(|e| e.data.get()).collect::<Vec<_>>())
    }

    /// The events as written, the first with seq `first`.
    pub(crate) fn numbered(mut self, first: i64) -> Vec<Event> {
        for (seq, ev) in (first..).zip(self.written.iter_mut()) {
            ev.seq = seq;
        }
        self.written
    }

    /// Whether there is nothing to append.
    pub(crate) fn is_empty(&self) -> bool {
        self.written.is_empty()
    }
}

/// Queues `events` in the transaction on `conn`; answers their batch and
/// `pos`, for the node's sequencer after the commit (`None`: no events).
pub(crate) async fn append(
    conn: &mut PgConnection,
    events: Vec<NewEvent>,
) -> Result<Option<(Batch, i64)>, StoreError> {
    if events.is_empty() {
        return Ok(None);
    }
    let batch = Batch::new(events);
    let pos: i64 = batch
        .bind(sqlx::query_scalar(append_sql!("")))
        .fetch_one(&mut *conn)
        .await?;
    Ok(Some((batch, pos)))
}

/// Numbers whatever committed events are queued (a writer's whose pass
/// never ran), as `node`; answers the newest seq.
pub(crate) async fn sequence_any(
    conn: impl sqlx::PgExecutor<'_>,
    node: &str,
) -> Result<i64, StoreError> {
    Ok(
        sqlx::query_scalar("SELECT upto FROM actiongate_sequence(NULL, $1)")
            .bind(node)
            .fetch_one(conn)
            .await?,
    )
}

/// Appends `events` with the next seqs directly, in the transaction on
/// `conn`, which must hold [`LOCK_SEQUENCER`]; notifies at commit as
/// `node`. Answers the events with their seqs.
pub(crate) async fn append_numbered(
    conn: &mut PgConnection,
    events: Vec<NewEvent>,
    node: &str,
) -> Result<Vec<Event>, StoreError> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let batch = Batch::new(events);
    let n = i64::try_from(batch.written.len()).unwrap_or(i64::MAX);
    let last: i64 = batch
        .bind(sqlx::query_scalar(
            "WITH c AS (UPDATE event_counter SET seq = seq + $8 WHERE id = 1 RETURNING seq), \
             e AS (INSERT INTO events (seq, id, type, at, agent, action_id, grant_id, data) \
               SELECT c.seq - $8 + u.n, u.i, u.t, $1, u.a, u.ac, u.g, u.d FROM c, \
               UNNEST($2::TEXT[], $3::TEXT[], $4::TEXT[], $5::TEXT[], $6::TEXT[], $7::TEXT[]) \
               WITH ORDINALITY AS u(i, t, a, ac, g, d, n)), \
             n AS (SELECT pg_notify('actiongate_events', c.seq::TEXT || ' ' || $9) FROM c) \
             SELECT c.seq FROM c CROSS JOIN n",
        ))
        .bind(n)
        .bind(node)
        .fetch_one(&mut *conn)
        .await?;
    Ok(batch.numbered(last - n + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_notify_on_the_channel_nodes_listen_on() {
        let migration = include_str!("../../../../migrations/postgres/0010_event_queue.sql");
        assert!(migration.contains(&format!("pg_notify('{CHANNEL}'")));
        assert!(migration.contains("pg_advisory_xact_lock(hashtext('actiongate.events'))"));
        assert!(LOCK_SEQUENCER.contains("hashtext('actiongate.events')"));
    }
}
