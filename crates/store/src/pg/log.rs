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

/// The statement appending events, in one round trip: it takes their seqs
/// from the counter (whose row the `UPDATE` locks until the transaction
/// ends), numbers the events' rows from there in order (`WITH ORDINALITY`),
/// asks Postgres to notify at commit (`<last seq> <node>`: a node knows its
/// own commits), and answers the last seq. Parameters `$1`-`$9` are bound
/// by [`Batch::bind`]. `$before` is either empty or a data-modifying
/// statement named and followed by a comma (`"a AS (INSERT ...), "`, its
/// parameters from `$10` on), which then runs
/// in the same statement: a change that needs nothing read first is one
/// implicit transaction, one round trip.
macro_rules! append_sql {
    ($before:expr) => {
        concat!(
            "WITH ",
            $before,
            "c AS (UPDATE event_counter SET seq = seq + $1 WHERE id = 1 RETURNING seq), \
             e AS (INSERT INTO events (seq, id, type, at, agent, action_id, grant_id, data) \
               SELECT c.seq - $1 + u.n, u.i, u.t, $2, u.a, u.ac, u.g, u.d FROM c, \
               UNNEST($3::TEXT[], $4::TEXT[], $5::TEXT[], $6::TEXT[], $7::TEXT[], $8::TEXT[]) \
               WITH ORDINALITY AS u(i, t, a, ac, g, d, n)), \
             n AS (SELECT pg_notify('actiongate_events', c.seq::TEXT || ' ' || $9) FROM c) \
             SELECT c.seq FROM c CROSS JOIN n"
        )
    };
}
pub(crate) use append_sql;

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

    /// Binds `$1`-`$9` of [`append_sql`] to `q`, as written by `node`.
    pub(crate) fn bind<'q, O>(
        &'q self,
        q: sqlx::query::QueryScalar<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments>,
        node: &'q str,
    ) -> sqlx::query::QueryScalar<'q, sqlx::Postgres, O, sqlx::postgres::PgArguments> {
        let w = &self.written;
        let at = w.first().map_or(0, |e| to_ms(e.at));
        q.bind(i64::try_from(w.len()).unwrap_or(i64::MAX))
            .bind(at)
            .bind(w.iter().map(|e| e.id.as_str()).collect::<Vec<_>>())
            .bind(w.iter().map(|e| e.kind.as_str()).collect::<Vec<_>>())
            .bind(w.iter().map(|e| e.agent.as_deref()).collect::<Vec<_>>())
            .bind(w.iter().map(|e| e.action_id.as_deref()).collect::<Vec<_>>())
            .bind(w.iter().map(|e| e.grant_id.as_deref()).collect::<Vec<_>>())
            .bind(w.iter().map(|e| e.data.get()).collect::<Vec<_>>())
            .bind(node)
    }

    /// The events as written, the last with seq `last`.
    pub(crate) fn numbered(mut self, last: i64) -> Vec<Event> {
        let n = i64::try_from(self.written.len()).unwrap_or(i64::MAX);
        for (seq, ev) in (last - n + 1..).zip(self.written.iter_mut()) {
            ev.seq = seq;
        }
        self.written
    }
}

/// Writes `events` after every event committed so far and asks Postgres to
/// notify the other nodes at commit, in one statement, as written by
/// `node`. Hold no other lock after this: commit.
pub(crate) async fn append(
    conn: &mut PgConnection,
    events: Vec<NewEvent>,
    node: &str,
) -> Result<Vec<Event>, StoreError> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    let batch = Batch::new(events);
    let last: i64 = batch
        .bind(sqlx::query_scalar(append_sql!("")), node)
        .fetch_one(&mut *conn)
        .await?;
    Ok(batch.numbered(last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_statement_notifies_on_the_channel_nodes_listen_on() {
        assert!(append_sql!("").contains(&format!("pg_notify('{CHANNEL}'")));
    }
}
