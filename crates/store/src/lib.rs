//! Persistence of actiongate: one contract ([`Store`]), two backends.
//!
//! [`Store`] is what the gate holds; each of its operations (`contract`) is
//! answered by the backend the daemon was started on:
//!
//! - SQLite (`sqlite`, the default, one file): one writer (`writer`) runs
//!   every change in batched, durable commits on its own thread, through
//!   sqlx or, for new actions, its own synchronous connection (`direct`); a
//!   task checkpoints the WAL beside it (`checkpoint`); reads go to a pool of
//!   read-only connections. The resource modules (`actions`, `agents`,
//!   `keys`, `events`, ...) hold the records' types and the SQLite queries.
//! - Postgres (`pg`), for several daemons on one database: each change is
//!   one transaction on a pool; seqs of events are taken last, under a row
//!   lock, so they are gapless and in commit order across nodes; every node
//!   tails the event log, woken by LISTEN/NOTIFY and polling as a fallback.
//!
//! Both write each change and the event that records it in one
//! transaction, and publish committed events in `seq` order on a broadcast
//! channel, which is what wakes long-polls and feeds event streams. Rows are
//! turned into records by the same code on both (`row`).

mod action_views;
mod actions;
mod agents;
pub mod anchor;
mod approvals;
pub mod audit;
pub mod audit_verify;
mod backup;
mod checkpoint;
pub mod connectors;
mod contract;
pub mod cpus;
mod create;
pub mod deadline;
mod direct;
mod dispatch;
mod error;
mod event_ref;
pub mod event_types;
mod events;
mod fault;
mod grant_cache;
mod grant_governs;
mod grant_key;
mod grant_list;
mod grant_requests;
mod grant_scan;
pub mod grants;
mod handlers;
mod in_use;
mod keys;
mod late_grant;
pub mod limits;
mod lock_probe;
mod paging;
mod pending;
mod people;
mod people_seen;
mod pg;
mod plan_key;
mod plans;
mod quick;
mod rate;
pub mod receipts;
pub mod records;
mod request_key;
mod row;
mod session_list;
mod sessions;
mod settle;
mod sqlite;
mod subscriptions;
pub mod time;
mod writer;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;

pub use actiongate_api::model::*;
pub use actiongate_api::teams::{ApprovalEntry, ChatIds, Person, Team};
pub use actions::{ActionFilter, HandlerAction, Inserted, NewAction, Transition};
pub use approvals::{Edit, TeamDecided, TeamDecision};
pub use backup::backup_sqlite;
pub use dispatch::{ActionAttempt, AttemptNext, Claimed, HandlerSecrets, NextDispatch};
pub use error::StoreError;
pub use event_types::{EVENT_TYPES, TypeFilter};
pub use events::NewEvent;
pub use grant_requests::NewGrantRequest;
pub use grants::{ApproveFirst, GrantCreated, GrantFilter, NewGrant, NewGrantTarget};
pub use handlers::NewHandler;
pub use keys::NewKey;
pub use paging::{Page, id_time_ms, next_events_page};
pub use pending::PendingCounts;
pub use people::NewPerson;
pub use people_seen::PersonSeen;
pub use pg::{PG_MIGRATOR, PgOptions, Postgres, connect_options, migrate_postgres};
pub use plans::{PLAN_PREFIX, RunReport};
pub use request_key::RequestKey;
pub use session_list::SessionFilter;
pub use sqlite::{MIGRATOR, SqliteStore, migrate};
pub use subscriptions::{
    AttemptOutcome, AttemptRecord, Delivery, DeliveryAttempt, DeliveryStatus, DueDelivery,
    NewSubscription, Subscription,
};
pub use writer::WriteStats;

/// What the crate's unit tests share.
#[cfg(test)]
mod test_support {
    use chrono::Utc;

    use crate::{Decision, DecisionResult, NewAction};

    /// The `n`th of a series of decision-only actions of `agent`, each with
    /// its own detail.
    pub(crate) fn new_action(n: usize, agent: String, result: DecisionResult) -> NewAction {
        let decision = Decision {
            result,
            reason: "test".to_owned(),
            rule: None,
        };
        NewAction {
            deadline: Some(Utc::now() + chrono::Duration::minutes(5)),
            ..NewAction::new(agent, "bash".to_owned(), format!("echo {n}"), decision)
        }
    }
}

/// How hard commits are pushed to disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// `synchronous=FULL`: a commit survives power loss.
    Full,
    /// `synchronous=NORMAL` (WAL): a commit survives a process crash
    /// (`kill -9`) but the last ones may be lost on power loss.
    Normal,
}

impl Durability {
    /// The group-commit wait ([`StoreOptions::commit_delay`]) that suits it:
    /// none with `Full`, where the writes that arrive while a commit waits
    /// for its fsync make the next batch anyway (a wait on top only idles
    /// the machine: BENCHMARKS.md, tenth session), and 200us with `Normal`,
    /// whose commits return at once.
    pub fn commit_delay(self) -> Duration {
        match self {
            Durability::Full => Duration::ZERO,
            Durability::Normal => Duration::from_micros(200),
        }
    }
}

/// Options for opening a store.
#[derive(Debug, Clone)]
pub struct StoreOptions {
    /// Durability of commits.
    pub durability: Durability,
    /// Most jobs that share one commit.
    pub batch_max: usize,
    /// How long the writer waits for more jobs to join a commit when it
    /// found several queued ("group commit"; zero commits at once).
    pub commit_delay: Duration,
    /// Read-only connections in the pool.
    pub read_connections: u32,
    /// Capacity of the event broadcast channel.
    pub event_buffer: usize,
    /// WAL frames (pages) after which the writer lets the WAL start over
    /// from its beginning (see `checkpoint`). Each time costs the writer a
    /// few fsyncs, a stall every queued write waits out; a larger value
    /// means fewer stalls under sustained load and a larger WAL file (it is
    /// reused, not shrunk: 4 KiB a frame).
    pub wal_restart_frames: i64,
    /// The CPU the writer's thread runs on, alone among the daemon's
    /// threads when they were kept off it ([`cpus::keep_off`]); `None`
    /// leaves it to the kernel. Linux only.
    pub writer_cpu: Option<usize>,
    /// The profile of agents that have none of their own: a new grant
    /// approves what is pending only where the agent's profile would let
    /// the grant allow it. `None`: nothing of such agents is approved by a
    /// new grant.
    pub default_profile: Option<Arc<actiongate_policy::Profile>>,
    /// For tests: SQLite's `max_page_count` on the writer's connections, so
    /// the database is "full" past that many pages (4 KiB each). `None`:
    /// SQLite's own limit.
    pub max_page_count: Option<u64>,
    /// The daemon's audit key: exports end with a line signed by it.
    pub audit_key: Option<anchor::AuditKey>,
    /// Whether opening may migrate a database an earlier version wrote
    /// (the daemon, `migrate`). `false` for commands that only work on it
    /// (`keys`, `audit export`): they migrate a new, empty database only,
    /// and refuse an older one, so an upgrade is never a side effect.
    pub upgrade: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            durability: Durability::Full,
            batch_max: 128,
            commit_delay: Durability::Full.commit_delay(),
            read_connections: 4,
            event_buffer: 8192,
            // 40 MiB of WAL at most; SQLite's own threshold is 1,000.
            wal_restart_frames: 10_000,
            writer_cpu: None,
            default_profile: actiongate_policy::get_preset("guarded").ok().map(Arc::new),
            max_page_count: None,
            audit_key: None,
            upgrade: true,
        }
    }
}

/// The persistent state of the gate, on the backend it was opened on.
/// Cheap to clone.
#[derive(Clone)]
pub struct Store(Backend);

#[derive(Clone)]
enum Backend {
    Sqlite(SqliteStore),
    Postgres(Postgres),
}

impl Store {
    /// Opens (creating if needed) the SQLite database at `path`, applies
    /// pending migrations and starts the writer.
    pub async fn open(path: &Path, opts: StoreOptions) -> Result<Store, StoreError> {
        Ok(Store(Backend::Sqlite(SqliteStore::open(path, opts).await?)))
    }

    /// Connects to the Postgres database at `pg.url`, applies pending
    /// migrations (one node at a time) and starts following its event log.
    pub async fn open_postgres(pg: &PgOptions, opts: StoreOptions) -> Result<Store, StoreError> {
        Ok(Store(Backend::Postgres(Postgres::open(pg, opts).await?)))
    }

    /// Whether this store is on Postgres (shared with other daemons).
    pub fn is_shared(&self) -> bool {
        matches!(self.0, Backend::Postgres(_))
    }

    /// Receives every event committed from now on, in `seq` order.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        match &self.0 {
            Backend::Sqlite(s) => s.subscribe(),
            Backend::Postgres(p) => p.subscribe(),
        }
    }

    /// The highest event `seq` published so far.
    pub fn last_seq(&self) -> i64 {
        match &self.0 {
            Backend::Sqlite(s) => s.last_seq(),
            Backend::Postgres(p) => p.last_seq(),
        }
    }

    /// How many transactions were committed, and jobs in them.
    pub fn write_stats(&self) -> WriteStats {
        match &self.0 {
            Backend::Sqlite(s) => s.write_stats(),
            Backend::Postgres(p) => p.write_stats(),
        }
    }

    /// The daemon's audit key, if it has one.
    pub fn audit_key(&self) -> Option<&anchor::AuditKey> {
        match &self.0 {
            Backend::Sqlite(s) => s.audit_key(),
            Backend::Postgres(p) => p.audit_key(),
        }
    }

    /// Whether the last write found the database or disk full, and none has
    /// committed since.
    pub fn disk_full(&self) -> bool {
        match &self.0 {
            Backend::Sqlite(s) => s.disk_full(),
            Backend::Postgres(p) => p.disk_full(),
        }
    }

    /// Whether a write found the database locked by another process (past
    /// its busy timeout) after `since`: SQLite only (Postgres' locks are
    /// per row, and its stalls are bounded otherwise).
    pub fn busy_since(&self, since: std::time::Instant) -> bool {
        match &self.0 {
            Backend::Sqlite(s) => s.busy_since(since),
            Backend::Postgres(_) => false,
        }
    }

    /// When a request that arrived at `arrived` must be done with the
    /// store ([`deadline::scope`]): Postgres bounds its calls; SQLite's
    /// writer answers within its busy timeout on its own (`None`).
    pub fn request_deadline(&self, arrived: tokio::time::Instant) -> Option<tokio::time::Instant> {
        match &self.0 {
            Backend::Sqlite(_) => None,
            Backend::Postgres(p) => Some(arrived + p.call_bound()),
        }
    }

    /// Whether the database answers, its schema is current and it takes
    /// writes.
    pub async fn ready(&self) -> Result<(), StoreError> {
        match &self.0 {
            Backend::Sqlite(s) => s.ready().await,
            Backend::Postgres(p) => p.ready().await,
        }
    }

    /// Stops the background tasks after the queued work and closes every
    /// connection. Later writes fail with [`StoreError::Closed`].
    pub async fn close(&self) {
        match &self.0 {
            Backend::Sqlite(s) => s.close().await,
            Backend::Postgres(p) => p.close().await,
        }
    }
}
