//! Whether another process holds the SQLite database's write lock, asked
//! by readiness: while one does, every write waits out the busy timeout and
//! fails, so the daemon is not ready, whatever reads still do.
//!
//! The probe takes the write lock on a connection of its own
//! (`BEGIN IMMEDIATE`, then `ROLLBACK`), waiting at most [`WAIT`]. Finding
//! it taken does not yet say by whom: this daemon's own writer takes it for
//! each batch. A writer that committed while the probe waited is not kept
//! out; one that did not, while the lock stayed taken for the whole wait,
//! is.

use std::path::Path;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::error::StoreError;

/// How long the probe waits for the write lock: far longer than one of the
/// writer's batches holds it, far shorter than readiness may take.
pub(crate) const WAIT: Duration = Duration::from_millis(300);

/// `true` when the write lock of the database at `path` stayed taken for
/// [`WAIT`] while this daemon's writer committed nothing (`commits` counts
/// its commits).
pub(crate) fn held_by_another(path: &Path, commits: impl Fn() -> u64) -> Result<bool, StoreError> {
    let fail = |e: rusqlite::Error| StoreError::Unavailable(e.to_string());
    let db = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(fail)?;
    // SQLite opens a file this user may not write read-only, quietly: every
    // write would then fail.
    if db.is_readonly(rusqlite::MAIN_DB).map_err(fail)? {
        return Err(crate::fault::unwritable(
            "the file is read-only to this user",
        ));
    }
    db.busy_timeout(WAIT).map_err(fail)?;
    let before = commits();
    match db.execute_batch("BEGIN IMMEDIATE") {
        Ok(()) => {
            db.execute_batch("ROLLBACK").map_err(fail)?;
            Ok(false)
        }
        Err(rusqlite::Error::SqliteFailure(e, _))
            if matches!(
                e.code,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            ) =>
        {
            Ok(commits() == before)
        }
        Err(e) => Err(fail(e)),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_lock_held_elsewhere_is_found_and_a_free_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let other = Connection::open(&path).unwrap();
        other
            .execute_batch("PRAGMA journal_mode = WAL; CREATE TABLE t (x)")
            .unwrap();
        assert!(!held_by_another(&path, || 0).unwrap());
        other.execute_batch("BEGIN EXCLUSIVE").unwrap();
        assert!(held_by_another(&path, || 0).unwrap());
        // Commits counted meanwhile: the daemon's own writer had it.
        let n = std::sync::atomic::AtomicU64::new(0);
        let counting = || n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        assert!(!held_by_another(&path, counting).unwrap());
        other.execute_batch("ROLLBACK").unwrap();
    }
}
