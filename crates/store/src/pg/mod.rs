//! The Postgres backend: several daemons on one database act as one gate.
//!
//! Every change is one transaction on a connection of the pool; the events
//! it records are queued last (`log::append`) and numbered right after
//! its commit by a sequencing pass (`log::sequence`, one at a time across
//! nodes), so event seqs are gapless and in commit order across every
//! node without a row every writer locks across its commit. Compare-and-set updates (`UPDATE ... WHERE status = ...`)
//! decide races between nodes: Postgres re-checks the condition against the
//! row a concurrent winner committed, so exactly one wins.
//!
//! Each node follows the log (`tail`): woken by a LISTEN/NOTIFY message that
//! each sequencing pass sends (the newest seq and the node's name), by
//! its own commits, and by a timer as a fallback, it reads the events after
//! the last one it published and publishes them in order. A lost
//! notification costs latency, never an event.
//!
//! Modules: `actions`, `create` (new actions), `agents`, `dispatch`, `events`, `grant_requests`,
//! `grants`, `handlers`, `keys`, `limits`, `audit` (the chain's anchor and
//! retention), `anchor` (signed anchor events), `pool` (when a connection
//! is tested before use), `subscriptions`
//! (notification deliveries), `connectors` (chat connector state) hold the
//! queries of the records they are named after; the record types and the
//! pure parts of each operation are shared with the SQLite backend.
//! Multi-row changes lock their rows in id order, so no two transactions
//! deadlock; dispatch claims skip locked rows. Rows that are sent out
//! (deliveries, chat messages) are claimed by one node at a time with
//! `FOR UPDATE SKIP LOCKED` and a lease (`claimed_by`, `claim_until`), so
//! two nodes never both send one.

mod actions;
mod agents;
mod anchor;
mod approvals;
mod audit;
mod connectors;
mod create;
mod dispatch;
mod events;
mod grant_requests;
mod grants;
mod handlers;
mod keepalive;
mod keys;
mod limits;
mod log;
mod people;
mod plans;
mod pool;
mod rate;
mod receipts;
mod records;
mod sequencer;
mod sessions;
mod subscriptions;
mod tail;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Postgres as Pg, Transaction};
use tokio::sync::broadcast;

use crate::anchor::AuditKey;
use crate::grant_cache::GrantCache;
use crate::{Event, NewEvent, StoreError, StoreOptions, WriteStats};

/// Embedded migrations from `migrations/postgres`.
pub static PG_MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

/// How the daemon reaches its Postgres database.
#[derive(Debug, Clone)]
pub struct PgOptions {
    /// `postgres://user:password@host:port/database?...`
    pub url: String,
    /// Most connections this daemon opens (besides the one that listens).
    pub max_connections: u32,
    /// How long a request waits for a connection (and a new connection for
    /// the server) before it fails with 503.
    pub connect_timeout: Duration,
    /// Longest a statement may run before Postgres cancels it (503).
    pub statement_timeout: Duration,
    /// Longest a node goes without reading the event log when no
    /// notification arrives (the daemon's settings keep it at most a
    /// second; a lost notification costs this much latency).
    pub poll_interval: Duration,
    /// How long a node holds a notification delivery it took to send
    /// before another node may take it: longer than one attempt can take,
    /// since one still under way when it lapses may be made twice. Only a
    /// node that died mid-send makes the others wait it out.
    pub delivery_lease: Duration,
    /// The same for the chat messages a node took (a batch, sent one
    /// after another).
    pub chat_lease: Duration,
}

impl PgOptions {
    /// The defaults for `url`.
    pub fn new(url: impl Into<String>) -> PgOptions {
        PgOptions {
            url: url.into(),
            max_connections: 16,
            connect_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(10),
            poll_interval: Duration::from_millis(500),
            delivery_lease: Duration::from_secs(60),
            chat_lease: Duration::from_secs(300),
        }
    }
}

/// What stops a background task, and the task to await.
type TaskStop = (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
);

/// The store on Postgres. Cheap to clone.
#[derive(Clone)]
pub struct Postgres {
    pub(crate) pool: PgPool,
    events: broadcast::Sender<Arc<Event>>,
    last_seq: Arc<AtomicI64>,
    /// Publishes events, this node's and the others'.
    tail: Arc<tail::Tail>,
    commits: Arc<AtomicU64>,
    /// Set while writes fail with a full disk.
    full: Arc<AtomicBool>,
    shutdown: Arc<tokio::sync::Mutex<Vec<TaskStop>>>,
    pub(crate) default_profile: Option<Arc<actiongate_policy::Profile>>,
    audit_key: Option<AuditKey>,
    /// This node's name in the claims it makes on rows to send (new at
    /// every start: a restarted node waits out its old leases like any).
    pub(crate) node: Arc<str>,
    /// See [`PgOptions::delivery_lease`].
    pub(crate) delivery_lease: chrono::Duration,
    /// See [`PgOptions::chat_lease`].
    pub(crate) chat_lease: chrono::Duration,
    /// Active grants by agent and tool, as read (see `grants`): forgotten
    /// at every grant event the tail publishes, and every second.
    pub(crate) grants: Arc<GrantCache>,
    /// The second (since the epoch) the grants cache was last emptied in.
    pub(crate) grants_second: Arc<AtomicI64>,
    /// Longest any one call of the contract may take ([`Postgres::bounded`]).
    call_bound: Duration,
    /// Numbers what this node's writers committed, a pass per batch.
    sequencer: sequencer::Sequencer,
}

/// Longest `/readyz`'s question to the database may take.
const READY_WITHIN: Duration = Duration::from_millis(800);

/// What a call that did not end in time answers.
pub(crate) trait Stalled {
    /// The answer of a call cut off after `after`.
    fn stalled(after: Duration) -> Self;
}

impl<T> Stalled for Result<T, StoreError> {
    fn stalled(after: Duration) -> Self {
        Err(StoreError::TimedOut(after))
    }
}

impl Stalled for () {
    fn stalled(_: Duration) {}
}

impl Postgres {
    /// Connects, applies pending migrations (Postgres' advisory lock keeps
    /// nodes that start together from applying them twice) and starts the
    /// tail of the event log.
    pub async fn open(pg: &PgOptions, opts: StoreOptions) -> Result<Postgres, StoreError> {
        let (pool, losses) = pool::connect(pg, connect_options(pg)?).await?;
        let from = refuse_if_in_use(&pool, opts.upgrade).await?;
        PG_MIGRATOR.run(&pool).await?;
        crate::in_use::log_migrated(from, latest_migration());

        let last: i64 = sqlx::query_scalar("SELECT seq FROM event_counter WHERE id = 1")
            .fetch_one(&pool)
            .await?;
        let last_seq = Arc::new(AtomicI64::new(last));
        let (events, _) = broadcast::channel(opts.event_buffer.max(16));
        let node: Arc<str> = uuid::Uuid::now_v7().simple().to_string().into();
        let grants = Arc::new(GrantCache::default());
        let tail = Arc::new(tail::Tail {
            pool: pool.clone(),
            tx: events.clone(),
            last_seq: last_seq.clone(),
            poll: pg.poll_interval,
            node: node.clone(),
            grants: grants.clone(),
            following: AtomicBool::new(false),
            losses,
            lock: tokio::sync::Mutex::new(()),
        });
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let follow = tokio::spawn(tail::run(tail.clone(), stopped));
        let sequencer = sequencer::Sequencer::start(pool.clone(), node.clone(), tail.clone());
        Ok(Postgres {
            sequencer,
            pool,
            events,
            last_seq,
            tail,
            commits: Arc::new(AtomicU64::new(0)),
            full: Arc::new(AtomicBool::new(false)),
            shutdown: Arc::new(tokio::sync::Mutex::new(vec![(stop, follow)])),
            default_profile: opts.default_profile,
            audit_key: opts.audit_key,
            node,
            delivery_lease: lease(pg.delivery_lease),
            chat_lease: lease(pg.chat_lease),
            grants,
            grants_second: Arc::new(AtomicI64::new(0)),
            call_bound: pg.connect_timeout + pg.statement_timeout,
        })
    }

    /// Runs one call of the contract, cut off once it has taken the
    /// connect timeout (the wait for a connection) plus the statement
    /// timeout: Postgres enforces the latter only while it runs, so a
    /// stalled server (paused, or gone without a word on the network) would
    /// otherwise hold the call, and the request, for as long as the stall.
    /// A call cut off during its commit may have committed: it answers
    /// [`StoreError::TimedOut`], never success. Its connection is dropped
    /// (sqlx rolls back or tests it before reuse), and connections made
    /// before now are tested before their next use.
    /// Within a request's [`crate::deadline::scope`], it is cut off at
    /// that deadline if it comes first.
    pub(crate) async fn bounded<T: Stalled>(&self, call: impl Future<Output = T>) -> T {
        let own = tokio::time::Instant::now() + self.call_bound;
        let until = crate::deadline::current().map_or(own, |d| d.min(own));
        match tokio::time::timeout_at(until, call).await {
            Ok(answer) => answer,
            Err(_) => {
                self.tail.losses.lost();
                T::stalled(self.call_bound)
            }
        }
    }

    /// The longest one call may take ([`Postgres::bounded`]).
    pub fn call_bound(&self) -> std::time::Duration {
        self.call_bound
    }

    /// Starts a transaction.
    ///
    /// The BEGIN runs in a task of its own, so it always finishes even if
    /// the caller is cut off ([`Postgres::bounded`], or a request whose
    /// client left): sqlx counts a transaction only once the server has
    /// answered BEGIN, so a future dropped while waiting for that answer
    /// queues no rollback, and its connection went back to the pool inside
    /// a transaction. Whoever used it next ran in that transaction: a
    /// statement outside any transaction of its own (the keyless insert,
    /// the sequencing pass) was answered as done and never committed, and
    /// held its locks. Finished here, the transaction is dropped with the
    /// task's output if nobody waits for it, and rolled back before the
    /// connection is used again.
    pub(crate) async fn begin(&self) -> Result<Transaction<'static, Pg>, StoreError> {
        let pool = self.pool.clone();
        tokio::spawn(async move { pool.begin().await })
            .await
            .map_err(|e| StoreError::Unavailable(format!("starting a transaction: {e}")))?
            .map_err(StoreError::from)
    }

    /// Appends `events` (in order) and commits `tx`; then numbers them and
    /// publishes them on this node before returning, so the caller's
    /// waiters hear of them first. Returns the events as written, with
    /// their seqs.
    pub(crate) async fn commit(
        &self,
        mut tx: Transaction<'static, Pg>,
        events: Vec<NewEvent>,
    ) -> Result<Vec<Event>, StoreError> {
        let result = async {
            let queued = log::append(&mut tx, events).await?;
            tx.commit().await?;
            Ok::<_, StoreError>(queued)
        }
        .await;
        self.committed(result).await
    }

    /// What follows a commit that queued `result` (or failed): a
    /// sequencing pass numbers its events, which are published on this
    /// node before the caller is answered; a full disk is noted. Should
    /// the pass fail, the change is committed all the same (the tail's
    /// loop numbers and publishes its events): the caller hears
    /// [`StoreError::TimedOut`], "may have been committed", never success
    /// without seqs.
    pub(crate) async fn committed(
        &self,
        result: Result<Option<(log::Batch, i64)>, StoreError>,
    ) -> Result<Vec<Event>, StoreError> {
        let queued = match result {
            Ok(queued) => queued,
            Err(e) => {
                if matches!(e, StoreError::Full) && !self.full.swap(true, Ordering::Relaxed) {
                    tracing::error!(
                        "the Postgres database's disk is full: writes fail until space is freed"
                    );
                }
                return Err(e);
            }
        };
        self.full.store(false, Ordering::Relaxed);
        self.commits.fetch_add(1, Ordering::Relaxed);
        let Some((batch, pos)) = queued else {
            return Ok(Vec::new());
        };
        match self.sequencer.number(pos, batch).await {
            Ok(written) => Ok(written),
            Err(e) => {
                tracing::warn!(error = %e, "numbering committed events failed");
                Err(StoreError::TimedOut(self.call_bound))
            }
        }
    }

    /// Publishes `written`, events this node committed with their seqs,
    /// and everything up to `upto` before them or after, on this node.
    pub(crate) async fn published(
        &self,
        written: Vec<Event>,
        upto: i64,
    ) -> Result<Vec<Event>, StoreError> {
        if let Err(e) = self.tail.publish(written.clone(), upto).await {
            // Committed all the same; the tail's loop publishes them.
            tracing::warn!(error = %e, "publishing committed events failed");
        }
        Ok(written)
    }

    /// Receives every event committed from now on (by any node), in `seq`
    /// order.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.events.subscribe()
    }

    /// Whether this node's tail follows the log closely (see
    /// `tail::Tail::following`).
    pub(crate) fn tail_follows(&self) -> bool {
        self.tail.following.load(Ordering::Acquire)
    }

    /// The highest event `seq` published so far on this node.
    pub fn last_seq(&self) -> i64 {
        self.last_seq.load(Ordering::Acquire)
    }

    /// Transactions this node committed (each one job).
    pub fn write_stats(&self) -> WriteStats {
        let n = self.commits.load(Ordering::Relaxed);
        WriteStats {
            commits: n,
            jobs: n,
        }
    }

    /// The daemon's audit key, if it has one.
    pub fn audit_key(&self) -> Option<&AuditKey> {
        self.audit_key.as_ref()
    }

    /// Whether the last write found the disk full.
    pub fn disk_full(&self) -> bool {
        self.full.load(Ordering::Relaxed)
    }

    /// Whether the database answers and its schema is the one this binary
    /// expects.
    /// It answers within a second: a database that takes longer is not
    /// ready.
    pub async fn ready(&self) -> Result<(), StoreError> {
        if self.disk_full() {
            return Err(StoreError::Full);
        }
        let ask = sqlx::query_scalar(
            "SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success",
        )
        .fetch_one(&self.pool);
        let applied: i64 = tokio::time::timeout(READY_WITHIN, ask)
            .await
            .map_err(|_| StoreError::TimedOut(READY_WITHIN))??;
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
        Ok(())
    }

    /// Stops the tail and closes the pool.
    pub async fn close(&self) {
        let tasks = std::mem::take(&mut *self.shutdown.lock().await);
        for (stop, handle) in tasks {
            let _ = stop.send(());
            if let Err(e) = handle.await {
                tracing::error!(error = %e, "store task failed");
            }
        }
        self.pool.close().await;
    }
}

/// `d` as a time span (a day when it is too long to be one).
fn lease(d: Duration) -> chrono::Duration {
    chrono::Duration::from_std(d).unwrap_or(chrono::Duration::days(1))
}

/// The last migration the database of `pool` has, when this binary may
/// migrate it: not while other connections to it might be older daemons
/// (`in_use`), and, unless `upgrade`, only a new one.
async fn refuse_if_in_use(pool: &PgPool, upgrade: bool) -> Result<i64, StoreError> {
    let applied = crate::in_use::pg_applied(pool).await?;
    if crate::in_use::needs_migrating(applied, latest_migration(), upgrade)? {
        crate::in_use::refuse_pg(pool, latest_migration()).await?;
    }
    Ok(applied)
}

/// The last migration this binary knows.
fn latest_migration() -> i64 {
    PG_MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

/// `connect` naming its connections `actiongate m<N>`, then any name the
/// URL or `PGAPPNAME` gave (see `in_use`).
/// How the store connects to Postgres: `statement_timeout`, and the same
/// bound on a transaction left idle (`idle_in_transaction_session_timeout`):
/// a daemon that hangs inside one (stopped, a paused VM, a host cut off
/// without a reset) would otherwise hold its locks, the grants lock and the
/// event sequencer's among them, for as long as it hangs, and every other
/// daemon would wait on them. Postgres ends such a session and its
/// transaction instead.
pub fn connect_options(pg: &PgOptions) -> Result<PgConnectOptions, StoreError> {
    let statement_ms = pg.statement_timeout.as_millis().max(1).to_string();
    let connect: PgConnectOptions = pg
        .url
        .parse::<PgConnectOptions>()?
        .options([
            ("statement_timeout", statement_ms.as_str()),
            ("idle_in_transaction_session_timeout", statement_ms.as_str()),
        ])
        .log_statements(tracing::log::LevelFilter::Trace);
    Ok(named(connect))
}

fn named(connect: PgConnectOptions) -> PgConnectOptions {
    let name = crate::in_use::app_name(latest_migration(), connect.get_application_name());
    connect.application_name(&name)
}

/// Applies pending migrations to the Postgres database at `url`: the
/// migration it was at (0: none) and the one it is at now. Unless
/// `beside_others`, it refuses while other connections might be older
/// daemons (`in_use`).
pub async fn migrate_postgres(url: &str, beside_others: bool) -> Result<(i64, i64), StoreError> {
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(10))
        .connect_with(named(url.parse::<PgConnectOptions>()?))
        .await?;
    let from = if beside_others {
        crate::in_use::pg_applied(&pool).await?
    } else {
        refuse_if_in_use(&pool, true).await?
    };
    PG_MIGRATOR.run(&pool).await?;
    crate::in_use::log_migrated(from, latest_migration());
    pool.close().await;
    Ok((from, latest_migration()))
}
