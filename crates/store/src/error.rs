//! The store's one error type: backend errors classified in one place.

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
    /// The writer task has stopped (the store is closing).
    #[error("store is closed")]
    Closed,
    /// A stored value could not be decoded (corrupt or hand-edited row).
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// Any other backend failure.
    #[error("database error: {0}")]
    Backend(#[source] sqlx::Error),
    /// Applying migrations failed.
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
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
            _ => match Fault::of_sqlx(&err) {
                Fault::Busy => StoreError::Busy,
                Fault::Full => StoreError::Full,
                Fault::Other(_) => StoreError::Backend(err),
            },
        }
    }
}

impl From<serde_json::Error> for StoreError {
    fn from(err: serde_json::Error) -> Self {
        StoreError::Corrupt(err.to_string())
    }
}
