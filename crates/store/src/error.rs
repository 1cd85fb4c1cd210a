//! The store's one error type: backend errors classified in one place.

use sqlx::postgres::PgDatabaseError;
use thiserror::Error;

use crate::fault::Fault;

/// What went wrong in the store, classified so callers can answer sensibly.
#[derive(Debug, Error)]
pub enum StoreError {
    /// The row asked for does not exist.
    #[error("not found")]
    NotFound,
    /// The change conflicts with the current state (a lost compare-and-set
    /// race, a reused idempotency key, a duplicate id).
    #[error("conflict: {0}")]
    Conflict(String),
    /// A compare-and-set transition lost: the row is no longer in a state
    /// the transition starts from. Carries the state it is in now.
    #[error("the action is already {current}")]
    WrongState {
        /// The status the action has now.
        current: String,
    },
    /// The database stayed locked by another process past the busy timeout.
    #[error("database busy")]
    Busy,
    /// The database or the disk under it is full (`SQLITE_FULL`): nothing
    /// was written.
    #[error("database or disk is full")]
    Full,
    /// The database cannot be reached, or is shutting down or starting
    /// (Postgres): nothing was written; a retry after it is back succeeds.
    #[error("database unavailable: {0}")]
    Unavailable(String),
    /// The connection to the database was lost during a call (Postgres):
    /// what it sent may have been done, a commit may have committed, so a
    /// retry must be one the store can recognise, as for
    /// [`StoreError::TimedOut`].
    #[error("connection to the database lost: {0}")]
    Lost(String),
    /// The database did not answer within the daemon's bound on a call
    /// (Postgres stalled or unreachable): a change may or may not have
    /// been committed, so a retry must be one the store can recognise
    /// (the same idempotency key).
    #[error("database did not answer within {0:?}")]
    TimedOut(std::time::Duration),
    /// The database refused a value the request carried, as it stands
    /// (Postgres: text holding the NUL character, which `TEXT` cannot
    /// store): nothing was written, and the same request fails again.
    #[error("value refused by the database: {0}")]
    Invalid(String),
    /// Values of the request name what others already hold (a handler
    /// action's MCP tool name): each field and why. Nothing was written.
    #[error("names taken: {0:?}")]
    NamesTaken(Vec<(String, String)>),
    /// The writer task has stopped (the store is closing).
    #[error("store is closed")]
    Closed,
    /// A stored value could not be decoded (corrupt or hand-edited row).
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// Any other backend failure.
    #[error("database error: {0}")]
    Backend(#[source] sqlx::Error),
    /// The database holds a migration this binary does not know: a newer
    /// actiongate migrated it. Nothing was changed.
    #[error("the database was migrated by a newer actiongate (its migration {0} is unknown here)")]
    Newer(i64),
    /// Applying migrations failed.
    #[error("migration failed: {0}")]
    Migrate(sqlx::migrate::MigrateError),
}

impl From<sqlx::migrate::MigrateError> for StoreError {
    fn from(err: sqlx::migrate::MigrateError) -> Self {
        match err {
            sqlx::migrate::MigrateError::VersionMissing(v) => StoreError::Newer(v),
            err => StoreError::Migrate(err),
        }
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        match &err {
            sqlx::Error::RowNotFound => StoreError::NotFound,
            sqlx::Error::Database(db) if db.is_unique_violation() => {
                StoreError::Conflict(db.message().to_owned())
            }
            // SQLITE_BUSY, SQLITE_LOCKED and SQLITE_FULL, also in extended
            // forms, classified where the writer classifies them.
            sqlx::Error::PoolClosed | sqlx::Error::WorkerCrashed => StoreError::Closed,
            sqlx::Error::Database(db) => match db.try_downcast_ref::<PgDatabaseError>() {
                Some(pg) => {
                    of_sqlstate(pg.code(), err.to_string()).unwrap_or(StoreError::Backend(err))
                }
                None => of_fault(err),
            },
            // A connection lost mid-call: what was sent may have been
            // done, a COMMIT whose answer never came committed.
            sqlx::Error::Io(io)
                if !matches!(Fault::of_sqlx(&err), Fault::Full) && !never_connected(io) =>
            {
                StoreError::Lost(err.to_string())
            }
            // Postgres down or unreachable: no connection within the pool's
            // acquire timeout, or none made at all.
            sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) | sqlx::Error::Tls(_)
                if !matches!(Fault::of_sqlx(&err), Fault::Full) =>
            {
                StoreError::Unavailable(err.to_string())
            }
            _ => of_fault(err),
        }
    }
}

/// Whether `io` failed a connection before anything was sent on it.
fn never_connected(io: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        io.kind(),
        ErrorKind::ConnectionRefused
            | ErrorKind::NotFound
            | ErrorKind::AddrNotAvailable
            | ErrorKind::HostUnreachable
            | ErrorKind::NetworkUnreachable
            | ErrorKind::PermissionDenied
    )
}

/// A SQLite error, or one of sqlx's own, by the fault it is.
fn of_fault(err: sqlx::Error) -> StoreError {
    match Fault::of_sqlx(&err) {
        Fault::Busy => StoreError::Busy,
        Fault::Full => StoreError::Full,
        Fault::Unwritable(e) => crate::fault::unwritable(&e),
        Fault::Other(_) => StoreError::Backend(err),
    }
}

/// A Postgres error by its SQLSTATE, when it is one the daemon answers
/// differently from a plain failure.
fn of_sqlstate(code: &str, message: String) -> Option<StoreError> {
    Some(match code {
        // disk_full
        "53100" => StoreError::Full,
        // character_not_in_repertoire (a NUL in text), untranslatable_character:
        // the value, not the database, is at fault.
        "22021" | "22P05" => StoreError::Invalid(message),
        // serialization_failure, deadlock_detected, lock_not_available,
        // query_canceled (statement timeout), too_many_connections,
        // out_of_memory: retrying shortly may succeed.
        "40001" | "40P01" | "55P03" | "57014" | "53300" | "53200" => StoreError::Busy,
        // admin_shutdown, crash_shutdown, cannot_connect_now, and every
        // connection exception.
        "57P01" | "57P02" | "57P03" => StoreError::Unavailable(message),
        c if c.starts_with("08") => StoreError::Unavailable(message),
        _ => return None,
    })
}

impl From<serde_json::Error> for StoreError {
    fn from(err: serde_json::Error) -> Self {
        StoreError::Corrupt(err.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::StoreError;
    use std::io::{Error, ErrorKind};

    /// A connection refused never sent anything: nothing was written. One
    /// lost mid-call (reset, closed after a COMMIT was sent) may have
    /// committed, and is never told as "nothing was written".
    #[test]
    fn a_connection_lost_mid_call_is_told_apart_from_one_never_made() {
        let of = |kind| StoreError::from(sqlx::Error::Io(Error::from(kind)));
        assert!(matches!(
            of(ErrorKind::ConnectionRefused),
            StoreError::Unavailable(_)
        ));
        for kind in [
            ErrorKind::ConnectionReset,
            ErrorKind::UnexpectedEof,
            ErrorKind::BrokenPipe,
        ] {
            assert!(matches!(of(kind), StoreError::Lost(_)), "{kind:?}");
        }
        assert!(matches!(
            StoreError::from(sqlx::Error::PoolTimedOut),
            StoreError::Unavailable(_)
        ));
    }
}
