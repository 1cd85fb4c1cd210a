//! The SQLite backend: one file, one batching writer, a read pool.

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use tokio::sync::broadcast;

use crate::writer::{WriteStats, Writer};

/// How long one batch of writes may take before `/readyz` says writes are
/// stuck: a batch takes milliseconds, one waiting on a lock held by another
/// process at most the busy timeout (5 s) per job tried.
const WRITES_STUCK: Duration = Duration::from_secs(15);

/// How long readiness waits for its probe of the write lock (which itself
/// waits 300 ms for the lock): past it, the file does not answer.
const PROBE_WAIT: Duration = Duration::from_secs(2);

/// Marks a readiness probe of the database file running, until dropped
/// (by the probe's own thread, when it ends).
struct Probing(Arc<std::sync::atomic::AtomicBool>);

impl Probing {
    fn start(flag: &Arc<std::sync::atomic::AtomicBool>) -> Option<Probing> {
        (!flag.swap(true, Ordering::AcqRel)).then(|| Probing(flag.clone()))
    }
}

impl Drop for Probing {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}
use crate::{
    Durability, Event, StoreError, StoreOptions, anchor, checkpoint, direct, events, grant_cache,
};

/// Embedded migrations from `migrations/sqlite`.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite");

/// What stops a background task (the writer, the checkpoints), and the task
/// to await.
type TaskStop = (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
);

/// The persistent state of one actiongate daemon.
#[derive(Clone)]
pub struct SqliteStore {
    pub(crate) writer: Writer,
    pub(crate) read: SqlitePool,
    pub(crate) events: broadcast::Sender<Arc<Event>>,
    pub(crate) last_seq: Arc<AtomicI64>,
    pub(crate) grant_cache: Arc<grant_cache::GrantCache>,
    /// At least the number of subscriptions (raised before one is stored,
    /// lowered after one is deleted): while it is 0 no event needs a
    /// delivery and the notifier need not look.
    pub(crate) subscriptions: Arc<AtomicI64>,
    /// The writer first (it may still commit), then the checkpoints.
    pub(crate) shutdown: Arc<tokio::sync::Mutex<Vec<TaskStop>>>,
    /// See [`StoreOptions::default_profile`].
    pub(crate) default_profile: Option<Arc<actiongate_policy::Profile>>,
    /// See [`StoreOptions::audit_key`].
    pub(crate) audit_key: Option<anchor::AuditKey>,
    /// Whether a readiness probe of the file is running.
    pub(crate) probing: Arc<std::sync::atomic::AtomicBool>,
    /// The database file (readiness probes its write lock).
    pub(crate) path: Arc<Path>,
}

impl SqliteStore {
    /// Opens (creating if needed) the database file at `path`, applies
    /// pending migrations and starts the writer.
    pub async fn open(path: &Path, opts: StoreOptions) -> Result<SqliteStore, StoreError> {
        create_private(path)?;
        let base = SqliteConnectOptions::from_str("sqlite://")?
            .filename(path)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(match opts.durability {
                Durability::Full => SqliteSynchronous::Full,
                Durability::Normal => SqliteSynchronous::Normal,
            })
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true)
            .pragma("temp_store", "memory")
            .log_statements(tracing::log::LevelFilter::Trace);

        // The writer reads back whole batches of RETURNING rows: let them
        // come in one go rather than 50 at a time.
        let mut writer_opts = base.clone();
        if let Some(pages) = opts.max_page_count {
            writer_opts = writer_opts.pragma("max_page_count", pages.to_string());
        }
        let holder = crate::in_use::sqlite_user(path)?;
        let mut conn = writer_opts
            .create_if_missing(true)
            .row_buffer_size(1024)
            // Checkpoints run beside it (see `checkpoint`).
            .pragma("wal_autocheckpoint", "0")
            .connect()
            .await?;
        let from = refuse_if_in_use(&mut conn, holder, opts.upgrade).await?;
        MIGRATOR.run_direct(None, &mut conn, false).await?;
        crate::in_use::log_migrated(from, latest_migration());

        // Pruning may have removed every event; seqs still continue past the anchor.
        let last: i64 = sqlx::query_scalar(
            "SELECT MAX(COALESCE((SELECT MAX(seq) FROM events), 0), \
             COALESCE((SELECT seq FROM audit_anchor WHERE id = 1), 0))",
        )
        .fetch_one(&mut conn)
        .await?;
        let last_seq = Arc::new(AtomicI64::new(last));
        let subscriptions: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM subscriptions")
            .fetch_one(&mut conn)
            .await?;

        let read = SqlitePoolOptions::new()
            .max_connections(opts.read_connections.max(1))
            .min_connections(1)
            .connect_with(base.clone().read_only(true))
            .await?;

        let (events, _) = broadcast::channel(opts.event_buffer.max(16));
        let grant_cache = Arc::new(grant_cache::GrantCache::default());
        let publish = events::Publisher {
            tx: events.clone(),
            last_seq: last_seq.clone(),
            grants: grant_cache.clone(),
        };
        let checkpoints = Arc::new(checkpoint::Checkpoints::new(opts.wal_restart_frames));
        let (checkpoint_stop, stopped) = tokio::sync::oneshot::channel();
        let checkpointer = tokio::spawn(checkpoint::run(
            base.clone().connect().await?,
            checkpoints.clone(),
            stopped,
        ));
        // New actions skip sqlx when this connection opens; if it does not,
        // sqlx writes them too.
        let direct = direct::Direct::open(path, opts.durability, opts.max_page_count)
            .inspect_err(
                |e| tracing::warn!(error = %e, "direct writes unavailable; using sqlx only"),
            )
            .ok();
        let (writer, stop, handle) = Writer::spawn(
            conn,
            opts.batch_max,
            opts.commit_delay,
            direct,
            publish,
            checkpoints,
            opts.writer_cpu,
        );
        Ok(SqliteStore {
            writer,
            read,
            events,
            last_seq,
            grant_cache,
            subscriptions: Arc::new(AtomicI64::new(subscriptions)),
            shutdown: Arc::new(tokio::sync::Mutex::new(vec![
                (stop, handle),
                (checkpoint_stop, checkpointer),
            ])),
            default_profile: opts.default_profile,
            audit_key: opts.audit_key,
            path: Arc::from(path),
            probing: Arc::default(),
        })
    }

    /// Receives every event committed from now on, in `seq` order.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }

    /// The highest event `seq` published so far.
    pub fn last_seq(&self) -> i64 {
        self.last_seq.load(Ordering::Acquire)
    }

    /// How many transactions the writer committed, and jobs in them.
    pub fn write_stats(&self) -> WriteStats {
        self.writer.stats()
    }

    /// The daemon's audit key, if it has one.
    pub fn audit_key(&self) -> Option<&anchor::AuditKey> {
        self.audit_key.as_ref()
    }

    /// Whether the last write found the database or disk full, and none has
    /// committed since.
    pub fn disk_full(&self) -> bool {
        self.writer.disk_full()
    }

    /// Whether a write found the database locked after `since`.
    pub fn busy_since(&self, since: std::time::Instant) -> bool {
        self.writer.busy_since(since)
    }

    /// Whether the database answers, its schema is current and it takes
    /// writes ([`StoreError::Full`] while the disk is full).
    pub async fn ready(&self) -> Result<(), StoreError> {
        if self.disk_full() {
            return Err(StoreError::Full);
        }
        let applied: i64 = sqlx::query_scalar(
            "SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success = 1",
        )
        .fetch_one(&self.read)
        .await?;
        let latest = latest_migration();
        // A newer version migrated it (a rolling upgrade of several daemons):
        // this one leaves the load balancer's rotation.
        if applied > latest {
            return Err(StoreError::Newer(applied));
        }
        if applied < latest {
            return Err(StoreError::Conflict(format!(
                "schema at migration {applied}, binary expects {latest}"
            )));
        }
        // Writes that do not come back: nothing acknowledged is lost, but
        // every request that writes waits, so this daemon leaves rotation.
        if let Some(stuck) = self.writer.working_for().filter(|t| *t >= WRITES_STUCK) {
            return Err(StoreError::Unavailable(format!(
                "writes have not come back for {} s",
                stuck.as_secs()
            )));
        }
        // Reads go on while another process holds the write lock; writes
        // do not. One probe at a time, and never waited on for long: on a
        // hung disk it blocks its thread, and readiness still answers.
        let Some(probing) = Probing::start(&self.probing) else {
            return Err(StoreError::Unavailable(
                "the database file does not answer (the last probe of it is still waiting)"
                    .to_owned(),
            ));
        };
        let path = self.path.clone();
        let writer = self.writer.clone();
        let probe = tokio::task::spawn_blocking(move || {
            let _probing = probing;
            crate::lock_probe::held_by_another(&path, || writer.stats().commits)
        });
        let locked = tokio::time::timeout(PROBE_WAIT, probe)
            .await
            .map_err(|_| StoreError::Unavailable("the database file does not answer".to_owned()))?
            .map_err(|e| StoreError::Unavailable(e.to_string()))??;
        if locked {
            return Err(StoreError::Busy);
        }
        Ok(())
    }

    /// Stops the writer after the queued work and closes every connection.
    /// Later writes fail with [`StoreError::Closed`].
    pub async fn close(&self) {
        let tasks = std::mem::take(&mut *self.shutdown.lock().await);
        for (stop, handle) in tasks {
            let _ = stop.send(());
            if let Err(e) = handle.await {
                tracing::error!(error = %e, "store task failed");
            }
        }
        self.read.close().await;
    }
}

/// Applies pending migrations to the database at `path`: the migration
/// it was at (0: none, a new database) and the one it is at now.
pub async fn migrate(path: &Path) -> Result<(i64, i64), StoreError> {
    create_private(path)?;
    let holder = crate::in_use::sqlite_user(path)?;
    let mut conn = SqliteConnectOptions::from_str("sqlite://")?
        .filename(path)
        .journal_mode(SqliteJournalMode::Wal)
        .create_if_missing(true)
        .connect()
        .await?;
    let from = refuse_if_in_use(&mut conn, holder, true).await?;
    MIGRATOR.run_direct(None, &mut conn, false).await?;
    crate::in_use::log_migrated(from, latest_migration());
    Ok((from, latest_migration()))
}

/// The last migration this binary knows.
fn latest_migration() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

/// The last migration the database open on `conn` has, when this binary
/// may migrate it: not while `holder`, another process, has it open
/// (maybe an older daemon, `in_use`), and, unless `upgrade`, only a new
/// one.
async fn refuse_if_in_use(
    conn: &mut sqlx::SqliteConnection,
    holder: Option<i32>,
    upgrade: bool,
) -> Result<i64, StoreError> {
    let applied = crate::in_use::sqlite_applied(conn).await?;
    if crate::in_use::needs_migrating(applied, latest_migration(), upgrade)? {
        crate::in_use::refuse_sqlite(holder)?;
    }
    Ok(applied)
}

/// Creates the database file at `path`, empty and readable by its owner
/// alone, unless it exists. It holds webhook secrets and every agent's
/// actions; SQLite gives its `-wal` and `-shm` files the same mode.
fn create_private(path: &Path) -> Result<(), StoreError> {
    let mut file = std::fs::OpenOptions::new();
    file.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        file.mode(0o600);
    }
    match file.open(path) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(StoreError::Backend(sqlx::Error::Io(e))),
    }
}
