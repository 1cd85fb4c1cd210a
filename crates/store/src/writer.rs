//! The single writer: one SQLite connection that runs every change, batching
//! the jobs that arrive together into one durable commit.
//!
//! SQLite allows one writer at a time, so many writers only queue on a lock.
//! Instead every change is a job sent to this task. It takes what is queued
//! (up to `batch_max` jobs), runs each inside its own savepoint in one
//! `BEGIN IMMEDIATE` transaction, commits once, and only then answers the
//! callers: an answer means the change is on disk. A job that fails rolls back
//! to its savepoint and does not disturb the others in its batch.
//!
//! The writer runs on a thread of its own. A batch of nothing but new actions
//! (the hot path) is written through the writer's second, synchronous
//! connection ([`Direct`]): prepared inserts, no hand-off to another thread.
//! Everything else goes through sqlx, where every statement is a round trip
//! to the connection's own thread. So there a batch of one job runs without
//! a savepoint (a failure rolls the transaction back instead), and
//! consecutive prepared writes ([`Quick`]: new actions, executors' answers)
//! are written together in one hand-off, inside one savepoint; a batch of
//! nothing but those is begun, written and committed in one hand-off. If a
//! batch of new actions fails on either path, each is retried alone in its
//! own savepoint, so one bad row still fails only its own caller. Their
//! events are known from the writes; the log is read back after a commit
//! only when general jobs (which may write any events) were in the batch.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sqlx::{Connection, SqliteConnection};
use tokio::sync::{mpsc, oneshot};

use crate::actions::NewAction;
use crate::checkpoint::{self, Checkpoints};
use crate::create::CreateJob;
use crate::direct::Direct;
use crate::error::StoreError;
use crate::events::Publisher;
use crate::fault::{DiskState, Fault};
use crate::quick::{Quick, Wrap, write_group_on};
use crate::settle::SettleJob;
use crate::time::{now, to_ms};
use actiongate_api::model::{Action, Event};

mod batch;
use batch::{abort, drain_into, exec, quick_only, rollback};

/// A boxed future borrowing the writer's connection.
pub type BoxFuture<'c, T> = Pin<Box<dyn Future<Output = T> + Send + 'c>>;

/// A unit of work run on the writer connection inside a savepoint.
trait Job: Send {
    /// Runs the work; `true` when it succeeded and its savepoint is kept.
    fn run<'c>(&'c mut self, conn: &'c mut SqliteConnection) -> BoxFuture<'c, bool>;
    /// Answers the caller once the batch's commit is known.
    fn finish(self: Box<Self>, commit: Result<(), Fault>);
    /// Whether its work failed because the database or disk is full.
    fn found_full(&self) -> bool;
    /// Whether its work failed because the database was locked.
    fn found_busy(&self) -> bool;
    /// Whether it may change grants (their cache is then cleared).
    fn may_change_grants(&self) -> bool;
}

/// What waits in the writer's queue.
enum Queued {
    /// General work on the connection.
    Job(Box<dyn Job>),
    /// A prepared write (new action, settle), written together with its
    /// neighbours.
    Quick(Quick),
}

struct TypedJob<T, F> {
    grants: bool,
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

    fn finish(self: Box<Self>, commit: Result<(), Fault>) {
        let answer = match (commit, self.result) {
            (Ok(()), Some(result)) => result,
            (Ok(()), None) => Err(StoreError::Closed),
            (Err(e), Some(Err(job_err))) => {
                tracing::debug!(error = %e, "batch failed after job error");
                Err(job_err)
            }
            (Err(e), _) => Err(e.to_error("commit failed")),
        };
        // The caller may have gone away (client disconnected); the change
        // stands either way.
        let _ = self.reply.send(answer);
    }

    fn may_change_grants(&self) -> bool {
        self.grants
    }

    fn found_full(&self) -> bool {
        matches!(self.result, Some(Err(StoreError::Full)))
    }

    fn found_busy(&self) -> bool {
        matches!(self.result, Some(Err(StoreError::Busy)))
    }
}

/// Handle used to submit work to the writer task.
#[derive(Clone)]
pub struct Writer {
    tx: mpsc::Sender<Queued>,
    stats: Arc<Counts>,
    disk: Arc<DiskState>,
}

/// How much the writer has committed since the store was opened.
#[derive(Debug, Default)]
struct Counts {
    commits: AtomicU64,
    jobs: AtomicU64,
}

/// The writer's totals since the store was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteStats {
    /// Transactions committed (each a batch of jobs).
    pub commits: u64,
    /// Jobs in those transactions (changes asked for, whether or not they
    /// succeeded).
    pub jobs: u64,
}

impl Writer {
    /// Starts the writer task on `conn`. `after_commit` publishes the new
    /// events after every successful commit, before callers are answered.
    /// Sending on (or dropping) the returned `stop` finishes the queued work,
    /// refuses new work and closes the connection; await the handle for that.
    pub fn spawn(
        conn: SqliteConnection,
        batch_max: usize,
        commit_delay: Duration,
        direct: Option<Direct>,
        after_commit: Publisher,
        checkpoints: Arc<Checkpoints>,
        cpu: Option<usize>,
    ) -> (Writer, oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(4096);
        let (stop_tx, stop_rx) = oneshot::channel();
        let stats = Arc::new(Counts::default());
        let disk = Arc::new(DiskState::default());
        let inbox = Inbox {
            rx,
            stop: stop_rx,
            stopping: false,
            batch_max: batch_max.max(1),
            commit_delay,
        };
        let counts = stats.clone();
        let space = disk.clone();
        // Its own thread: the direct path runs SQLite synchronously, which
        // would stall a runtime worker and every task queued on it.
        let runtime = tokio::runtime::Handle::current();
        let handle = tokio::task::spawn_blocking(move || {
            // The runtime's blocking pool keeps the thread afterwards: it
            // gets its CPUs back when the writer ends.
            let pinned = cpu.and_then(pin_to);
            let ends = Ends {
                after_commit,
                stats: counts,
                checkpoints,
                disk: space,
            };
            runtime.block_on(run(conn, direct, inbox, ends));
            if let Some(before) = pinned
                && let Err(e) = crate::cpus::restrict(&before)
            {
                tracing::warn!(error = %e, "the writer's thread kept its CPU");
            }
        });
        (Writer { tx, stats, disk }, stop_tx, handle)
    }

    /// Whether the last write found the database or disk full (and none
    /// has committed since).
    pub fn disk_full(&self) -> bool {
        self.disk.is_full()
    }

    /// How long the writer has been on its current batch (`None`: idle).
    pub fn working_for(&self) -> Option<Duration> {
        self.disk.working_for()
    }

    /// Whether a write found the database locked (past its busy timeout)
    /// after `since`.
    pub fn busy_since(&self, since: std::time::Instant) -> bool {
        self.disk.busy_since(since)
    }

    /// Commits and jobs so far.
    pub fn stats(&self) -> WriteStats {
        WriteStats {
            commits: self.stats.commits.load(Ordering::Relaxed),
            jobs: self.stats.jobs.load(Ordering::Relaxed),
        }
    }

    /// Runs `work` in the next batch and returns its result once committed.
    pub async fn run<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T, StoreError>>
            + Send
            + 'static,
    {
        self.submit(true, work).await
    }

    /// [`Writer::run`] for work that never touches the grants table (action
    /// transitions, dispatch bookkeeping): the grant cache outlives its commit.
    pub async fn run_sparing_grants<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T, StoreError>>
            + Send
            + 'static,
    {
        self.submit(false, work).await
    }

    async fn submit<T, F>(&self, grants: bool, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Result<T, StoreError>>
            + Send
            + 'static,
    {
        let (reply, rx) = oneshot::channel();
        let job = TypedJob {
            grants,
            work: Some(work),
            result: None,
            reply,
        };
        self.tx
            .send(Queued::Job(Box::new(job)))
            .await
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Stores a new action that [`CreateJob::applies`] to, and its events;
    /// answers once committed.
    pub(crate) async fn create(
        &self,
        new: NewAction,
    ) -> Result<(Action, Option<Arc<Event>>), StoreError> {
        let (job, rx) = CreateJob::prepare(new)?;
        self.tx
            .send(Queued::Quick(Quick::Create(Box::new(job))))
            .await
            .map_err(|_| StoreError::Closed)?;
        let job = rx.await.map_err(|_| StoreError::Closed)??;
        Ok(job.into_action())
    }

    /// Settles `running` (claimed for attempt `rec.n`) with `outcome` if
    /// that attempt is still the running one; answers once committed.
    pub(crate) async fn settle(
        &self,
        running: &Action,
        rec: &crate::dispatch::ActionAttempt,
        outcome: actiongate_api::model::Outcome,
    ) -> Result<Option<Action>, StoreError> {
        let (job, rx) = SettleJob::prepare(running, rec, outcome)?;
        self.tx
            .send(Queued::Quick(Quick::Settle(Box::new(job))))
            .await
            .map_err(|_| StoreError::Closed)?;
        rx.await.map_err(|_| StoreError::Closed)?
    }
}

/// Pins the calling thread to `cpu`; the CPUs it had, or `None` (and a
/// warning) when it could not. A writer off its CPU still writes.
fn pin_to(cpu: usize) -> Option<Vec<usize>> {
    let pinned = crate::cpus::allowed().and_then(|before| {
        crate::cpus::restrict(&[cpu])?;
        Ok(before)
    });
    match pinned {
        Ok(before) => Some(before),
        Err(e) => {
            tracing::warn!(error = %e, cpu, "cannot pin the writer to its CPU");
            None
        }
    }
}

/// A job's result inside a batch, until the commit is known.
enum Outcome {
    /// General work: it keeps its own result.
    Job(Box<dyn Job>),
    /// A prepared write: written (`Ok`) or refused.
    Quick(Quick, Result<(), StoreError>),
}

/// The writer's queue and what stops it.
struct Inbox {
    rx: mpsc::Receiver<Queued>,
    stop: oneshot::Receiver<()>,
    stopping: bool,
    batch_max: usize,
    commit_delay: Duration,
}

impl Inbox {
    /// Waits for work and fills `batch` (empty) with what is queued, up to
    /// `batch_max`; `false` when the writer is to end (stopped and drained,
    /// or every handle dropped).
    async fn next(&mut self, batch: &mut Vec<Queued>) -> bool {
        let first = loop {
            if self.stopping {
                // Finish what was queued before the stop, then end.
                match self.rx.try_recv() {
                    Ok(job) => break job,
                    Err(_) => return false,
                }
            }
            tokio::select! {
                job = self.rx.recv() => match job {
                    Some(job) => break job,
                    None => return false,
                },
                _ = &mut self.stop => {
                    self.stopping = true;
                    self.rx.close();
                }
            }
        };
        batch.push(first);
        self.take_queued(batch);
        // Group commit: others arrived alongside, so more are likely on the
        // way; a moment's wait lets them share this commit (each commit
        // rewrites the last page of every table and index it touches).
        // Waiting ends early when a step brings nothing new.
        if batch.len() > 1 && !self.stopping && !self.commit_delay.is_zero() {
            let until = Instant::now() + self.commit_delay;
            let step = (self.commit_delay / 4).max(Duration::from_micros(25));
            while batch.len() < self.batch_max {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                // The writer has its own thread (see `Writer::spawn`).
                std::thread::sleep(step.min(left));
                let had = batch.len();
                self.take_queued(batch);
                if batch.len() == had {
                    break;
                }
            }
        }
        true
    }

    /// Moves what is queued into `batch`, up to `batch_max`.
    fn take_queued(&mut self, batch: &mut Vec<Queued>) {
        while batch.len() < self.batch_max {
            match self.rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
    }
}

/// Whether `batch` holds nothing but new actions (the direct path's work).
fn creates_only(batch: &[Queued]) -> bool {
    batch
        .iter()
        .all(|q| matches!(q, Queued::Quick(Quick::Create(_))))
}

/// Writes `batch` (new actions only) directly and publishes their events;
/// `Ok(false)` when those could not be sent from memory and the log must be
/// read. `Err` leaves `batch` as it was and nothing written.
fn write_direct(
    direct: &Direct,
    batch: &mut [Queued],
    after_commit: &Publisher,
) -> Result<bool, rusqlite::Error> {
    let mut jobs: Vec<&mut CreateJob> = batch
        .iter_mut()
        .filter_map(|q| match q {
            Queued::Quick(Quick::Create(job)) => Some(&mut **job),
            _ => None,
        })
        .collect();
    direct.create(&mut jobs, to_ms(now()))?;
    // Inserted in order: their seqs ascend.
    let events: Vec<Arc<Event>> = jobs.iter().flat_map(|job| job.events()).cloned().collect();
    Ok(after_commit.send_known(events))
}

/// What the writer tells after its batches.
struct Ends {
    after_commit: Publisher,
    stats: Arc<Counts>,
    checkpoints: Arc<Checkpoints>,
    disk: Arc<DiskState>,
}

async fn run(mut conn: SqliteConnection, direct: Option<Direct>, mut inbox: Inbox, ends: Ends) {
    let Ends {
        after_commit,
        stats,
        checkpoints,
        disk,
    } = ends;
    let mut batch: Vec<Queued> = Vec::with_capacity(inbox.batch_max);
    let committed = |jobs: u64| {
        checkpoints.committed();
        disk.committed();
        stats.commits.fetch_add(1, Ordering::Relaxed);
        stats.jobs.fetch_add(jobs, Ordering::Relaxed);
    };
    loop {
        if batch.is_empty() && !inbox.next(&mut batch).await {
            break;
        }
        // Held until the batch is done with, not until its answers are
        // sent: a job answered sees the writer idle (or on a later batch).
        let working = disk.working();
        if checkpoints.restart_due() {
            let copied = match &direct {
                Some(direct) => direct.checkpoint().map_err(|e| e.to_string()),
                None => checkpoint::passive(&mut conn)
                    .await
                    .map(drop)
                    .map_err(|e| e.to_string()),
            };
            if let Err(e) = copied {
                tracing::warn!(error = %e, "checkpoint on the writer failed");
            }
        }
        if let Some(direct) = &direct
            && creates_only(&batch)
        {
            let jobs = batch.len() as u64;
            match write_direct(direct, &mut batch, &after_commit) {
                Ok(sent) => {
                    committed(jobs);
                    if !sent {
                        after_commit.publish(&mut conn).await;
                    }
                    // Published first, then answered, as on sqlx's path.
                    drop(working);
                    for q in batch.drain(..) {
                        if let Queued::Quick(job) = q {
                            job.answer(Ok(()));
                        }
                    }
                    continue;
                }
                Err(e) => {
                    let fault = Fault::of_rusqlite(&e);
                    // Locked or full: the same writes would fail again on
                    // sqlx's path, each after its own busy timeout.
                    if fault.is_lasting() {
                        match fault {
                            Fault::Full => disk.filled(),
                            Fault::Busy => disk.found_busy(),
                            _ => {}
                        }
                        drop(working);
                        for q in batch.drain(..) {
                            if let Queued::Quick(job) = q {
                                job.answer(Err(fault.to_error("direct write failed")));
                            }
                        }
                        continue;
                    }
                    // sqlx's path below isolates the failing job.
                    tracing::debug!(error = %e, size = jobs, "direct batch failed; retrying job by job")
                }
            }
        }
        let general = batch.iter().any(|q| matches!(q, Queued::Job(_)));
        let grants = batch
            .iter()
            .any(|q| matches!(q, Queued::Job(job) if job.may_change_grants()));
        let jobs = batch.len() as u64;
        let (mut done, commit) = run_batch(&mut conn, &mut batch).await;
        let full = commit == Err(Fault::Full)
            || done.iter().any(|o| match o {
                Outcome::Job(job) => job.found_full(),
                Outcome::Quick(_, result) => matches!(result, Err(StoreError::Full)),
            });
        if full {
            disk.filled();
        }
        let busy = commit == Err(Fault::Busy)
            || done.iter().any(|o| match o {
                Outcome::Job(job) => job.found_busy(),
                Outcome::Quick(_, result) => matches!(result, Err(StoreError::Busy)),
            });
        if busy {
            disk.found_busy();
        }
        if commit.is_ok() {
            if full {
                // Not a sign of space: only the jobs that fit were kept.
                checkpoints.committed();
                stats.commits.fetch_add(1, Ordering::Relaxed);
                stats.jobs.fetch_add(jobs, Ordering::Relaxed);
            } else {
                committed(jobs);
            }
            if general {
                if grants {
                    after_commit.grants.clear();
                }
                after_commit.publish(&mut conn).await;
            } else {
                let mut events: Vec<Arc<Event>> = done
                    .iter_mut()
                    .flat_map(|o| match o {
                        Outcome::Quick(job, Ok(())) => job.take_events(),
                        _ => Vec::new(),
                    })
                    .collect();
                events.sort_by_key(|e| e.seq);
                after_commit.publish_known(&mut conn, events).await;
            }
        }
        drop(working);
        for outcome in done.drain(..) {
            match outcome {
                Outcome::Job(job) => job.finish(commit.clone()),
                Outcome::Quick(job, result) => job.answer(match (&commit, result) {
                    (Ok(()), result) => result,
                    (Err(_), Err(e)) => Err(e),
                    (Err(e), Ok(())) => Err(commit_failed(e)),
                }),
            }
        }
    }
    // It finalizes its statements; the connection closes after.
    drop(direct);
    if let Err(e) = conn.close().await {
        tracing::warn!(error = %e, "closing the writer connection failed");
    }
}

fn commit_failed(e: &Fault) -> StoreError {
    e.to_error("commit failed")
}

/// Runs `batch` (emptying it) in one transaction; returns every job's
/// outcome, in order, and whether the transaction committed.
async fn run_batch(
    conn: &mut SqliteConnection,
    batch: &mut Vec<Queued>,
) -> (Vec<Outcome>, Result<(), Fault>) {
    let mut done = Vec::with_capacity(batch.len());
    if let Some(written) = quick_only(conn, batch).await {
        return written;
    }
    let single = batch.len() == 1;
    if let Err(e) = exec(conn, "BEGIN IMMEDIATE").await {
        done.extend(batch.drain(..).map(|q| match q {
            Queued::Job(job) => Outcome::Job(job),
            Queued::Quick(job) => Outcome::Quick(job, Ok(())),
        }));
        return (done, Err(e));
    }
    let mut queue = batch.drain(..).peekable();
    let mut failed_alone = false;
    while let Some(next) = queue.next() {
        match next {
            Queued::Job(mut job) => {
                if !single && let Err(e) = exec(conn, "SAVEPOINT job").await {
                    return abort(conn, done, Outcome::Job(job), queue, e).await;
                }
                let ok = job.run(conn).await;
                let end = match (single, ok) {
                    (true, true) => None,
                    // Alone in the batch: nothing else to keep.
                    (true, false) => Some("ROLLBACK"),
                    (false, true) => Some("RELEASE job"),
                    (false, false) => Some("ROLLBACK TO job; RELEASE job"),
                };
                failed_alone = single && !ok;
                if let Some(end) = end
                    && let Err(e) = exec(conn, end).await
                {
                    return abort(conn, done, Outcome::Job(job), queue, e).await;
                }
                done.push(Outcome::Job(job));
            }
            Queued::Quick(job) => {
                let mut group = vec![job];
                while let Some(Queued::Quick(_)) = queue.peek() {
                    if let Some(Queued::Quick(job)) = queue.next() {
                        group.push(job);
                    }
                }
                match write_group_on(
                    conn,
                    &mut group,
                    if single { Wrap::Bare } else { Wrap::Savepoint },
                )
                .await
                {
                    Ok(()) => done.extend(group.into_iter().map(|j| Outcome::Quick(j, Ok(())))),
                    Err(e) if single => {
                        failed_alone = true;
                        rollback(conn).await;
                        // `single`: the group is this one job.
                        let mut e = Some(e);
                        done.extend(group.into_iter().map(|j| {
                            Outcome::Quick(j, Err(e.take().unwrap_or(StoreError::Closed)))
                        }));
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, size = group.len(), "group insert failed; inserting one by one");
                        if let Err(e) = exec(conn, "ROLLBACK TO grp; RELEASE grp").await {
                            let rest = group.into_iter().map(|j| Outcome::Quick(j, Ok(())));
                            done.extend(rest);
                            rollback(conn).await;
                            drain_into(&mut done, queue);
                            return (done, Err(e));
                        }
                        for job in group {
                            let mut one = [job];
                            let result = write_group_on(conn, &mut one, Wrap::Savepoint).await;
                            let [job] = one;
                            if result.is_err()
                                && let Err(e) = exec(conn, "ROLLBACK TO grp; RELEASE grp").await
                            {
                                done.push(Outcome::Quick(job, result));
                                rollback(conn).await;
                                drain_into(&mut done, queue);
                                return (done, Err(e));
                            }
                            done.push(Outcome::Quick(job, result));
                        }
                    }
                }
            }
        }
    }
    drop(queue);
    if failed_alone {
        // Rolled back already; the job's own error is its answer.
        return (done, Ok(()));
    }
    if let Err(e) = exec(conn, "COMMIT").await {
        rollback(conn).await;
        return (done, Err(e));
    }
    (done, Ok(()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use crate::{SqliteStore, StoreOptions};

    /// While a batch does not come back, the writer says for how long (so
    /// `/readyz` can leave rotation); once it is answered, that it is idle.
    #[tokio::test]
    async fn a_batch_that_does_not_come_back_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("t.db"), StoreOptions::default())
            .await
            .unwrap();
        assert_eq!(store.writer.working_for(), None);
        let (release, held) = tokio::sync::oneshot::channel::<()>();
        let writer = store.writer.clone();
        let job = tokio::spawn(async move {
            writer
                .run(move |_conn| {
                    Box::pin(async move {
                        let _ = held.await;
                        Ok(())
                    })
                })
                .await
        });
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let stuck = store.writer.working_for().unwrap_or_default();
        assert!(stuck >= std::time::Duration::from_millis(250), "{stuck:?}");
        release.send(()).unwrap();
        job.await.unwrap().unwrap();
        assert_eq!(store.writer.working_for(), None);
    }
}
