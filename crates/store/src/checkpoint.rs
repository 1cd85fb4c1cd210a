//! WAL checkpoints off the writer's path.
//!
//! SQLite's automatic checkpoint runs inside the commit that crosses the
//! threshold: every thousand pages or so the writer stops to copy the whole
//! WAL into the database file, and every caller queued behind it waits. Here
//! the writer's connection does no automatic checkpoints. A task with its own
//! connection copies what was committed (`PASSIVE`: it never blocks the
//! writer), at most once per [`PACE`], and each page once however many
//! commits rewrote it since. The WAL can only start over from its beginning
//! when every frame in it has been copied, which a copy running alongside
//! the writer seldom sees, so once the WAL holds
//! [`crate::StoreOptions::wal_restart_frames`] the task asks the writer to
//! copy the few frames committed since, between two batches
//! ([`Checkpoints::restart_due`]); the writer's next transaction then reuses
//! the file from its start.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::{Connection, SqliteConnection};
use tokio::sync::{Notify, oneshot};

/// Shortest time between two background copies.
const PACE: Duration = Duration::from_millis(50);

/// Shared between the writer and the checkpoint task.
#[derive(Debug)]
pub(crate) struct Checkpoints {
    /// WAL frames after which the writer lets the file start over.
    restart_frames: i64,
    /// Something was committed since the last copy.
    committed: Notify,
    /// The background copy has caught up with a full WAL; the writer copies
    /// the rest before its next transaction.
    restart: AtomicBool,
}

impl Checkpoints {
    /// Asks for a restart once the WAL holds `restart_frames`.
    pub(crate) fn new(restart_frames: i64) -> Checkpoints {
        Checkpoints {
            restart_frames,
            committed: Notify::new(),
            restart: AtomicBool::new(false),
        }
    }

    /// Called by the writer after each commit.
    pub(crate) fn committed(&self) {
        self.committed.notify_one();
    }

    /// Asked by the writer between batches: whether the WAL is due to start
    /// over. The writer then copies the frames committed since the
    /// background copy (a few commits' worth) with [`passive`], so its next
    /// transaction writes from the start of the file.
    pub(crate) fn restart_due(&self) -> bool {
        self.restart.swap(false, Ordering::AcqRel)
    }
}

/// `PRAGMA wal_checkpoint(PASSIVE)`: returns the frames in the WAL.
pub(crate) async fn passive(conn: &mut SqliteConnection) -> Result<i64, sqlx::Error> {
    let (_busy, log, _copied): (i64, i64, i64) = sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)")
        .fetch_one(conn)
        .await?;
    Ok(log)
}

/// Runs the background copies on `conn` until `stop` fires (or is dropped).
pub(crate) async fn run(
    mut conn: SqliteConnection,
    shared: Arc<Checkpoints>,
    mut stop: oneshot::Receiver<()>,
) {
    loop {
        tokio::select! {
            _ = shared.committed.notified() => {}
            _ = &mut stop => break,
        }
        match passive(&mut conn).await {
            Ok(frames) if frames >= shared.restart_frames => {
                shared.restart.store(true, Ordering::Release)
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "background checkpoint failed"),
        }
        tokio::select! {
            _ = tokio::time::sleep(PACE) => {}
            _ = &mut stop => break,
        }
    }
    if let Err(e) = conn.close().await {
        tracing::warn!(error = %e, "closing the checkpoint connection failed");
    }
}
