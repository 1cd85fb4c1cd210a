//! The single writer: one SQLite connection that runs every change, batching
//! the jobs that arrive together into one durable commit.
//!
//! SQLite allows one writer at a time, so many writers only queue on a lock.
//! Instead every change is a job sent to this task. It takes what is queued
//! (up to `batch_max` jobs), runs each inside its own savepoint in one
//! `BEGIN IMMEDIATE` transaction, commits once, and only then answers the
//! callers: an answer means the change is on disk. A job that fails rolls back
//! to its savepoint and does not disturb the others in its batch.

use std::future::Future;
use std::pin::Pin;

use sqlx::{Connection, SqliteConnection};
use tokio::sync::{mpsc, oneshot};

use crate::error::StoreError;
use crate::events::Publisher;

/// A boxed future borrowing the writer's connection.
pub type BoxFuture<'c, T> = Pin<Box<dyn Future<Output = T> + Send + 'c>>;

/// A unit of work run on the writer connection inside a savepoint.
trait Job: Send {
    /// Runs the work; `true` when it succeeded and its savepoint is kept.
    fn run<'c>(&'c mut self, conn: &'c mut SqliteConnection) -> BoxFuture<'c, bool>;
    /// Answers the caller once the batch's commit is known.
    fn finish(self: Box<Self>, commit: Result<(), String>);
}

struct TypedJob<T, F> {
    work: Option<F>,
    result: Option<Result<T, StoreError>>,
    reply: oneshot::Sender<Result<T, StoreError>>,
}

impl<T, F> Job for TypedJob<T, F>
where
    T: Send + 'static,
    F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T, StoreError>>
        + Send
        + 'static,
{
    fn run<'c>(&'c mut self, conn: &'c mut SqliteConnection) -> BoxFuture<'c, bool> {
        Box::pin(async move {
            let Some(work) = self.work.take() else {
                return false;
            };
            let result = work(conn).await;
            let ok = result.is_ok();
            self.result = Some(result);
            ok
        })
    }

    fn finish(self: Box<Self>, commit: Result<(), String>) {
        let answer = match (commit, self.result) {
            (Ok(()), Some(result)) => result,
            (Ok(()), None) => Err(StoreError::Closed),
            (Err(e), Some(Err(job_err))) => {
                tracing::debug!(error = %e, "batch failed after job error");
                Err(job_err)
            }
            (Err(e), _) => Err(StoreError::Backend(sqlx::Error::Protocol(format!(
                "commit failed: {e}"
            )))),
        };
        // The caller may have gone away (client disconnected); the change
        // stands either way.
        let _ = self.reply.send(answer);
    }
}

/// Handle used to submit work to the writer task.
#[derive(Clone)]
pub struct Writer {
    tx: mpsc::Sender<Box<dyn Job>>,
}

impl Writer {
    /// Starts the writer task on `conn`. `after_commit` publishes the new
    /// events after every successful commit, before callers are answered.
    /// Sending on (or dropping) the returned `stop` finishes the queued work,
    /// refuses new work and closes the connection; await the handle for that.
    pub fn spawn(
        conn: SqliteConnection,
        batch_max: usize,
        after_commit: Publisher,
    ) -> (Writer, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(4096);
        let (stop_tx, stop_rx) = oneshot::channel();
        let handle = tokio::spawn(run(conn, rx, stop_rx, batch_max.max(1), after_commit));
        (Writer { tx }, stop_tx, handle)
    }

    /// Runs `work` in the next batch and returns its result once committed.
    pub async fn run<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T, StoreError>>
            + Send
            + 'static,
    {
        let (reply, rx) = oneshot::channel();
        let job = TypedJob {
            work: Some(work),
            result: None,
            reply,
        };
        self.tx
            .send(Box::new(job))
            .await
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }
}

async fn run(
    mut conn: SqliteConnection,
    mut rx: mpsc::Receiver<Box<dyn Job>>,
    mut stop: oneshot::Receiver<()>,
    batch_max: usize,
    after_commit: Publisher,
) {
    let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(batch_max);
    let mut stopping = false;
    loop {
        let first = if stopping {
            // Finish what was queued before the stop, then end.
            match rx.try_recv() {
                Ok(job) => job,
                Err(_) => break,
            }
        } else {
            tokio::select! {
                job = rx.recv() => match job {
                    Some(job) => job,
                    None => break,
                },
                _ = &mut stop => {
                    stopping = true;
                    rx.close();
                    continue;
                }
            }
        };
        batch.push(first);
        while batch.len() < batch_max {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let commit = run_batch(&mut conn, &mut batch).await;
        if commit.is_ok() {
            after_commit.publish(&mut conn).await;
        }
        for job in batch.drain(..) {
            job.finish(commit.clone());
        }
    }
    if let Err(e) = conn.close().await {
        tracing::warn!(error = %e, "closing the writer connection failed");
    }
}

async fn run_batch(conn: &mut SqliteConnection, batch: &mut [Box<dyn Job>]) -> Result<(), String> {
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut *conn)
        .await
        .map_err(|e| e.to_string())?;
    for job in batch.iter_mut() {
        if let Err(e) = sqlx::raw_sql("SAVEPOINT job").execute(&mut *conn).await {
            rollback(conn).await;
            return Err(e.to_string());
        }
        let ok = job.run(conn).await;
        let end = if ok {
            "RELEASE job"
        } else {
            "ROLLBACK TO job; RELEASE job"
        };
        if let Err(e) = sqlx::raw_sql(end).execute(&mut *conn).await {
            rollback(conn).await;
            return Err(e.to_string());
        }
    }
    if let Err(e) = sqlx::raw_sql("COMMIT").execute(&mut *conn).await {
        rollback(conn).await;
        return Err(e.to_string());
    }
    Ok(())
}

async fn rollback(conn: &mut SqliteConnection) {
    if let Err(e) = sqlx::raw_sql("ROLLBACK").execute(&mut *conn).await {
        tracing::error!(error = %e, "rollback failed");
    }
}
