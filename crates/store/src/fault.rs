//! Faults of the database itself (busy, full), classified once so they keep
//! their meaning through the writer, and the "disk full" state that
//! readiness reports until a write succeeds again.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::StoreError;

/// SQLite's primary result codes the daemon answers differently.
const SQLITE_BUSY: i32 = 5;
const SQLITE_LOCKED: i32 = 6;
const SQLITE_FULL: i32 = 13;
const SQLITE_PERM: i32 = 3;
const SQLITE_READONLY: i32 = 8;
const SQLITE_IOERR: i32 = 10;
const SQLITE_CANTOPEN: i32 = 14;

/// Why a statement of the writer failed, cheap to hand to every job of a
/// batch (a `sqlx::Error` is not `Clone`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fault {
    /// Another connection held the lock past the busy timeout.
    Busy,
    /// The database or the disk under it is full.
    Full,
    /// The file cannot be written (read-only to this user, an I/O error):
    /// no write will succeed until someone fixes it.
    Unwritable(String),
    /// Anything else, as text.
    Other(String),
}

impl Fault {
    /// Classifies a primary (or extended) SQLite result code and message.
    fn from_code(code: Option<i32>, message: String) -> Fault {
        match code.map(|c| c & 0xff) {
            Some(SQLITE_BUSY | SQLITE_LOCKED) => Fault::Busy,
            Some(SQLITE_FULL) => Fault::Full,
            Some(SQLITE_PERM | SQLITE_READONLY | SQLITE_IOERR | SQLITE_CANTOPEN) => {
                Fault::Unwritable(message)
            }
            _ => Fault::Other(message),
        }
    }

    /// Classifies an error of the writer's sqlx connection.
    pub(crate) fn of_sqlx(err: &sqlx::Error) -> Fault {
        match err {
            sqlx::Error::Database(db) => {
                Fault::from_code(db.code().and_then(|c| c.parse().ok()), err.to_string())
            }
            // ENOSPC while SQLite writes is reported as SQLITE_FULL; an
            // `Io` error here comes from sqlx's own files.
            sqlx::Error::Io(io) if io.raw_os_error() == Some(28) => Fault::Full,
            _ => Fault::Other(err.to_string()),
        }
    }

    /// Classifies an error of the writer's direct (rusqlite) connection.
    pub(crate) fn of_rusqlite(err: &rusqlite::Error) -> Fault {
        match err {
            rusqlite::Error::SqliteFailure(e, _) => {
                Fault::from_code(Some(e.extended_code), err.to_string())
            }
            _ => Fault::Other(err.to_string()),
        }
    }

    /// Whether retrying the same write at once cannot help: the lock or the
    /// space will not come back within the request.
    pub(crate) fn is_lasting(&self) -> bool {
        matches!(self, Fault::Busy | Fault::Full | Fault::Unwritable(_))
    }

    /// The error its callers get.
    pub(crate) fn to_error(&self, what: &str) -> StoreError {
        match self {
            Fault::Busy => StoreError::Busy,
            Fault::Full => StoreError::Full,
            Fault::Unwritable(e) => unwritable(e),
            Fault::Other(e) => StoreError::Backend(sqlx::Error::Protocol(format!("{what}: {e}"))),
        }
    }
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Busy => f.write_str("database busy"),
            Fault::Full => f.write_str("database or disk is full"),
            Fault::Unwritable(e) => write!(f, "the database cannot be written: {e}"),
            Fault::Other(e) => f.write_str(e),
        }
    }
}

/// What a write to a database file that cannot be written answers: 503
/// (someone must fix the file's owner, mode or disk; nothing was written).
pub(crate) fn unwritable(e: &str) -> StoreError {
    StoreError::Unavailable(format!(
        "the database cannot be written (check the data dir's owner, mode and disk): {e}"
    ))
}

/// Whether the last write found the database or disk full: set by a write
/// that failed so, cleared by the next that commits. Each change is logged
/// once, not every failed write.
#[derive(Debug, Default)]
pub(crate) struct DiskState {
    full: AtomicBool,
    /// When a write last found the database locked by another connection.
    busy_at: std::sync::Mutex<Option<std::time::Instant>>,
    /// When the writer began the batch it is on (`None`: waiting for work).
    working_since: std::sync::Mutex<Option<std::time::Instant>>,
}

/// Marks the writer on a batch while held.
pub(crate) struct Working<'a>(&'a DiskState);

impl Drop for Working<'_> {
    fn drop(&mut self) {
        *self
            .0
            .working_since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
    }
}

impl DiskState {
    /// The writer begins a batch, until the guard is dropped.
    pub(crate) fn working(&self) -> Working<'_> {
        *self
            .working_since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(std::time::Instant::now());
        Working(self)
    }

    /// How long the writer has been on its batch (`None`: it waits for
    /// work). A batch takes milliseconds; one taking seconds means writes
    /// are stuck (a hung disk, a lock held past every timeout).
    pub(crate) fn working_for(&self) -> Option<std::time::Duration> {
        self.working_since
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .map(|at| at.elapsed())
    }

    /// A write found the database busy (past its busy timeout) now.
    pub(crate) fn found_busy(&self) {
        let mut at = self
            .busy_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *at = Some(std::time::Instant::now());
    }

    /// Whether a write found the database busy after `since`: work that
    /// waited its turn behind that write would wait out the same lock.
    pub(crate) fn busy_since(&self, since: std::time::Instant) -> bool {
        self.busy_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .is_some_and(|at| at > since)
    }

    /// Whether writes are failing for want of space.
    pub(crate) fn is_full(&self) -> bool {
        self.full.load(Ordering::Acquire)
    }

    /// A write failed because the database or disk is full.
    pub(crate) fn filled(&self) {
        if !self.full.swap(true, Ordering::AcqRel) {
            tracing::error!(
                "database or disk is full: writes are refused (507) and /readyz \
                 reports not ready until space is freed and a write succeeds"
            );
        }
    }

    /// A write committed: there is space again.
    pub(crate) fn committed(&self) {
        if self.full.load(Ordering::Acquire) && self.full.swap(false, Ordering::AcqRel) {
            tracing::warn!("the database accepts writes again (space was freed)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn extended_codes_keep_their_primary_meaning() {
        // SQLITE_BUSY_SNAPSHOT (517) and SQLITE_LOCKED_SHAREDCACHE (262).
        assert_eq!(Fault::from_code(Some(517), String::new()), Fault::Busy);
        assert_eq!(Fault::from_code(Some(262), String::new()), Fault::Busy);
        assert_eq!(Fault::from_code(Some(13), String::new()), Fault::Full);
        assert!(matches!(
            Fault::from_code(Some(19), "x".into()),
            Fault::Other(_)
        ));
    }

    /// A file this user may not write, or one the disk fails to write, is
    /// a fault someone must fix (503, readiness down), not an internal
    /// error (it was a bare 500 on every write).
    #[test]
    fn a_database_that_cannot_be_written_is_unavailable() {
        // SQLITE_READONLY, SQLITE_READONLY_DBMOVED, SQLITE_IOERR_WRITE,
        // SQLITE_CANTOPEN, SQLITE_PERM.
        for code in [8, 1032, 778, 14, 3] {
            let fault = Fault::from_code(Some(code), "attempt to write".into());
            assert!(matches!(fault, Fault::Unwritable(_)), "{code}: {fault:?}");
            assert!(fault.is_lasting());
            match fault.to_error("write") {
                StoreError::Unavailable(m) => assert!(m.contains("cannot be written"), "{m}"),
                other => panic!("{code}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_full_state_clears_on_the_next_commit() {
        let disk = DiskState::default();
        assert!(!disk.is_full());
        disk.filled();
        disk.filled();
        assert!(disk.is_full());
        disk.committed();
        assert!(!disk.is_full());
    }
}
