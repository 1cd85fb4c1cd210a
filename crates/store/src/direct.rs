//! New actions written through SQLite's own API, on the writer's thread.
//!
//! Through sqlx every batch of new actions was one multi-row statement that
//! SQLite parsed afresh (its text changes with the batch's size), its values
//! copied into sqlx's arguments, and the work handed to the connection's own
//! thread and back. Here the writer has a second connection of its own,
//! synchronous, and runs two single-row inserts per action, prepared once for
//! the life of the writer, binding values borrowed from the job. The
//! transaction is the same: one `BEGIN IMMEDIATE` … `COMMIT` per batch, so an
//! answer still means the change is on disk. The writer uses its two
//! connections one after the other, never both in one transaction, so they
//! never wait on each other's lock, and each transaction sees the other's
//! commits.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags, params_from_iter};

use crate::Durability;
use crate::create::{ACTION_COLUMNS, ACTION_WIDTH, CreateJob, EVENT_COLUMNS, EVENT_WIDTH};

/// Placeholders for `n` columns.
fn placeholders(n: usize) -> String {
    let mut s = "?,".repeat(n);
    s.pop();
    s
}

/// The writer's synchronous connection.
pub(crate) struct Direct {
    db: Connection,
    insert_action: String,
    insert_event: String,
}

impl Direct {
    /// Opens the database at `path` (migrated already) with the settings of
    /// the writer's sqlx connection.
    pub(crate) fn open(path: &Path, durability: Durability) -> rusqlite::Result<Direct> {
        let db = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        db.busy_timeout(Duration::from_secs(5))?;
        db.execute_batch(match durability {
            Durability::Full => "PRAGMA synchronous = FULL;",
            Durability::Normal => "PRAGMA synchronous = NORMAL;",
        })?;
        // Checkpoints run beside the writer (see `checkpoint`).
        db.execute_batch(
            "PRAGMA journal_mode = WAL; PRAGMA foreign_keys = ON; \
             PRAGMA temp_store = MEMORY; PRAGMA wal_autocheckpoint = 0;",
        )?;
        Ok(Direct {
            db,
            insert_action: format!(
                "INSERT INTO actions ({ACTION_COLUMNS}) VALUES ({})",
                placeholders(ACTION_WIDTH)
            ),
            insert_event: format!(
                "INSERT INTO events ({EVENT_COLUMNS}) VALUES ({})",
                placeholders(EVENT_WIDTH)
            ),
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
        let mut actions = self.db.prepare_cached(&self.insert_action)?;
        let mut events = self.db.prepare_cached(&self.insert_event)?;
        for job in jobs.iter_mut() {
            actions.execute(params_from_iter(job.action_row()))?;
            job.set_event_time(at);
            for i in 0..job.event_count() {
                events.execute(params_from_iter(job.event_row(i, at)))?;
                job.set_seq(i, self.db.last_insert_rowid());
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
