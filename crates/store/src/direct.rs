//! New actions written through SQLite's own API, on the writer's thread.
//!
//! Through sqlx every batch of new actions was one multi-row statement that
//! SQLite parsed afresh (its text changes with the batch's size), its values
//! copied into sqlx's arguments, and the work handed to the connection's own
//! thread and back. Here the writer has a second connection of its own,
//! synchronous, binding values borrowed from the jobs. A batch is written as
//! a few multi-row inserts per table, each of a power-of-two size
//! ([`chunk`]), so that there are only a few statement texts, each prepared
//! once for the life of the writer: a statement per row would open every
//! index of its table, read and write the `events` counter, and start and
//! end the statement again for each row. The transaction is the same: one
//! `BEGIN IMMEDIATE` … `COMMIT` per batch, so an answer still means the
//! change is on disk. The writer uses its two connections one after the
//! other, never both in one transaction, so they never wait on each other's
//! lock, and each transaction sees the other's commits.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, params_from_iter};

use crate::Durability;
use crate::create::{ACTION_COLUMNS, ACTION_WIDTH, CreateJob, EVENT_COLUMNS, EVENT_WIDTH};

/// The most rows one insert carries.
const CHUNK_MAX: usize = 64;

/// How many of `n` rows (at least one) the next insert carries: the largest
/// power of two that fits, at most [`CHUNK_MAX`]. A batch of any size is
/// then a handful of statements of at most `log2(CHUNK_MAX) + 1` shapes.
fn chunk(n: usize) -> usize {
    if n >= CHUNK_MAX {
        CHUNK_MAX
    } else {
        1 << n.max(1).ilog2()
    }
}

/// `rows` cut into the inserts that carry them ([`chunk`]), each with the
/// index of its statement's shape (the log2 of its size).
fn chunks<T>(mut rows: &[T]) -> impl Iterator<Item = (usize, &[T])> {
    std::iter::from_fn(move || {
        if rows.is_empty() {
            return None;
        }
        let (now, later) = rows.split_at(chunk(rows.len()));
        rows = later;
        Some((now.len().ilog2() as usize, now))
    })
}

/// `INSERT OR FAIL INTO table (columns) VALUES (?,…),(?,…)…` for `rows`
/// rows of `width` values each.
///
/// `OR FAIL`: a row that breaks a constraint ends the statement without
/// undoing the rows it already wrote, so SQLite keeps no statement journal
/// (a copy of every page the statement changes, made in case it has to undo
/// them). Any error rolls the whole transaction back anyway ([`Direct::create`]).
fn insert_sql(table: &str, columns: &str, width: usize, rows: usize) -> String {
    let mut row = "(".to_owned() + &"?,".repeat(width);
    row.pop();
    row.push(')');
    let mut sql = format!("INSERT OR FAIL INTO {table} ({columns}) VALUES ");
    for i in 0..rows {
        if i > 0 {
            sql.push(',');
        }
        sql.push_str(&row);
    }
    sql
}

/// The writer's synchronous connection.
pub(crate) struct Direct {
    db: Connection,
    /// Inserts of 1, 2, 4 … [`CHUNK_MAX`] rows, by the log2 of their size.
    insert_actions: Vec<String>,
    insert_events: Vec<String>,
}

impl Direct {
    /// Opens the database at `path` (migrated already) with the settings of
    /// the writer's sqlx connection.
    pub(crate) fn open(
        path: &Path,
        durability: Durability,
        max_page_count: Option<u64>,
    ) -> rusqlite::Result<Direct> {
        let db = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        db.busy_timeout(Duration::from_secs(5))?;
        if let Some(pages) = max_page_count {
            let pages = i64::try_from(pages).unwrap_or(i64::MAX);
            db.pragma_update_and_check(None, "max_page_count", pages, |r| r.get::<_, i64>(0))?;
        }
        db.execute_batch(match durability {
            Durability::Full => "PRAGMA synchronous = FULL;",
            Durability::Normal => "PRAGMA synchronous = NORMAL;",
        })?;
        // Checkpoints run beside the writer (see `checkpoint`).
        db.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON; \
             PRAGMA temp_store = MEMORY; PRAGMA wal_autocheckpoint = 0;",
        )?;
        let sizes = || (0..=CHUNK_MAX.ilog2()).map(|log| 1usize << log);
        let insert_actions: Vec<String> = sizes()
            .map(|n| insert_sql("actions", ACTION_COLUMNS, ACTION_WIDTH, n))
            .collect();
        let insert_events: Vec<String> = sizes()
            .map(|n| insert_sql("events", EVENT_COLUMNS, EVENT_WIDTH, n))
            .collect();
        // Every shape of both inserts stays prepared.
        db.set_prepared_statement_cache_capacity(2 * insert_actions.len() + 4);
        Ok(Direct {
            db,
            insert_actions,
            insert_events,
        })
    }

    /// Writes `jobs` in one committed transaction with `at` as its time, and
    /// fills in their events' `seq`. On an error nothing of it stands: the
    /// transaction is rolled back (the caller may then retry each job alone).
    pub(crate) fn create(&self, jobs: &mut [&mut CreateJob], at: i64) -> rusqlite::Result<()> {
        self.db.execute_batch("BEGIN IMMEDIATE")?;
        let written = self
            .insert_all(jobs, at)
            .and_then(|()| self.db.execute_batch("COMMIT"));
        if written.is_err() && !self.db.is_autocommit() {
            // Still open (an insert or the COMMIT failed): undo it all.
            if let Err(e) = self.db.execute_batch("ROLLBACK") {
                tracing::error!(error = %e, "rollback failed");
            }
        }
        written
    }

    fn insert_all(&self, jobs: &mut [&mut CreateJob], at: i64) -> rusqlite::Result<()> {
        for (shape, now) in chunks(jobs) {
            let rows = now.iter().flat_map(|job| job.action_row());
            self.db
                .prepare_cached(&self.insert_actions[shape])?
                .execute(params_from_iter(rows))?;
        }
        for job in jobs.iter_mut() {
            job.set_event_time(at);
        }
        // Each event as (job, index of the event in the job), in order.
        let events: Vec<(usize, usize)> = jobs
            .iter()
            .enumerate()
            .flat_map(|(j, job)| (0..job.event_count()).map(move |i| (j, i)))
            .collect();
        for (shape, now) in chunks(&events) {
            let rows = now.iter().flat_map(|&(j, i)| jobs[j].event_row(i, at));
            let written = self
                .db
                .prepare_cached(&self.insert_events[shape])?
                .execute(params_from_iter(rows))?;
            if written != now.len() {
                return Err(rusqlite::Error::StatementChangedRows(written));
            }
            // `seq` is AUTOINCREMENT and this the only writer: the rows of
            // one insert take consecutive values, the last one reported.
            let first = self.db.last_insert_rowid() + 1 - now.len() as i64;
            for (n, &(j, i)) in now.iter().enumerate() {
                jobs[j].set_seq(i, first + n as i64);
            }
        }
        Ok(())
    }

    /// `PRAGMA wal_checkpoint(PASSIVE)` (see [`crate::checkpoint`]).
    pub(crate) fn checkpoint(&self) -> rusqlite::Result<()> {
        self.db
            .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use chrono::Utc;

    use super::*;
    use crate::actions::{HandlerAction, NewAction};
    use actiongate_api::model::DecisionResult;

    #[test]
    fn chunks_are_the_largest_power_of_two_that_fits() {
        let sizes: Vec<usize> = [1, 2, 3, 5, 8, 63, 64, 65, 200]
            .into_iter()
            .map(chunk)
            .collect();
        assert_eq!(sizes, [1, 2, 2, 4, 8, 32, 64, 64, 64]);
    }

    /// The `n`th of a mix of new actions: decision-only ones of each
    /// result, and handler actions recorded by two events (stored claimed,
    /// or pending with the permission they need).
    fn new_action(n: usize) -> NewAction {
        let result = [
            DecisionResult::Allow,
            DecisionResult::Ask,
            DecisionResult::Deny,
        ][n % 3];
        let handler = (n % 4 == 3).then(|| HandlerAction {
            handler: "files".to_owned(),
            action: "write".to_owned(),
            params: serde_json::json!({"path": format!("/{n}")}),
            params_view: serde_json::json!({"path": format!("/{n}")}),
            permission: "fs.write".to_owned(),
            scope: serde_json::Map::from_iter([("path".to_owned(), serde_json::json!("/"))]),
            display: None,
            hints: None,
            claim_until: Some(Utc::now() + chrono::Duration::seconds(60)),
        });
        NewAction {
            handler,
            ..crate::test_support::new_action(n, format!("agent-{}", n % 5), result)
        }
    }

    /// A migrated database in a new directory, its store, and a direct
    /// connection to it.
    async fn open() -> (tempfile::TempDir, crate::SqliteStore, Direct) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        // Creates and migrates the file.
        let store = crate::SqliteStore::open(&path, crate::StoreOptions::default())
            .await
            .unwrap();
        let direct = Direct::open(&path, Durability::Normal, None).unwrap();
        (dir, store, direct)
    }

    #[tokio::test]
    async fn batches_of_any_size_give_each_event_the_seq_it_was_stored_with() {
        let (_dir, store, direct) = open().await;
        let mut stored = 0;
        for size in [1, 2, 3, 7, 64, 65, 100, 129] {
            let mut jobs: Vec<CreateJob> = (0..size)
                .map(|n| CreateJob::prepare(new_action(stored + n)).unwrap().0)
                .collect();
            stored += size;
            let mut refs: Vec<&mut CreateJob> = jobs.iter_mut().collect();
            direct.create(&mut refs, 1_000).unwrap();
            let mut seqs = Vec::new();
            for job in &jobs {
                let id = &job.action.id;
                let (status, events): (String, i64) = direct
                    .db
                    .query_row(
                        "SELECT status, (SELECT COUNT(*) FROM events WHERE action_id = ?1) \
                         FROM actions WHERE id = ?1",
                        [id],
                        |r| Ok((r.get(0)?, r.get(1)?)),
                    )
                    .unwrap();
                assert_eq!(status, job.action.status.as_str());
                assert_eq!(events, job.events().len() as i64);
                for (i, ev) in job.events().iter().enumerate() {
                    let (seq, data): (i64, String) = direct
                        .db
                        .query_row("SELECT seq, data FROM events WHERE id = ?", [&ev.id], |r| {
                            Ok((r.get(0)?, r.get(1)?))
                        })
                        .unwrap();
                    // Its JSON, or for a decided decision-only action a
                    // reference to its row (read back in `event_ref`'s tests).
                    assert_eq!((seq, data.as_str()), (ev.seq, job.stored_data(i)));
                    if !crate::event_ref::is_reference(&data) {
                        assert_eq!(data.as_str(), ev.data.get());
                    }
                    seqs.push(seq);
                }
            }
            // In the jobs' order, with no gaps.
            assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
        }
        let count: i64 = direct
            .db
            .query_row("SELECT COUNT(*) FROM actions", [], |r| r.get(0))
            .unwrap();
        assert_eq!(count, stored as i64);
        drop(direct);
        store.close().await;
    }

    #[tokio::test]
    async fn a_batch_with_a_bad_row_leaves_nothing_behind() {
        let (_dir, store, direct) = open().await;
        let mut jobs: Vec<CreateJob> = (0..20)
            .map(|n| CreateJob::prepare(new_action(n)).unwrap().0)
            .collect();
        // The last row of a 16-row insert reuses the first action's id.
        jobs[15].action.id = jobs[0].action.id.clone();
        let mut refs: Vec<&mut CreateJob> = jobs.iter_mut().collect();
        assert!(direct.create(&mut refs, 1_000).is_err());
        let rows: (i64, i64) = direct
            .db
            .query_row(
                "SELECT (SELECT COUNT(*) FROM actions), (SELECT COUNT(*) FROM events)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(rows, (0, 0));
        assert!(direct.db.is_autocommit());
        drop(direct);
        store.close().await;
    }
}
