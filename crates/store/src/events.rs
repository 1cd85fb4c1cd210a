//! The event log: written in the same transaction as the change it records.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use sqlx::{QueryBuilder, Sqlite, SqliteConnection};
use tokio::sync::broadcast;
use uuid::Uuid;

use crate::SqliteStore;
use crate::error::StoreError;
use crate::grant_cache::GrantCache;
use crate::time::{from_ms, now, to_ms};
use actiongate_api::model::{Event, Json};

/// An event about to be written.
#[derive(Debug, Clone)]
pub struct NewEvent {
    /// Event type, e.g. `action.approved`.
    pub kind: &'static str,
    /// The agent concerned.
    pub agent: Option<String>,
    /// The action concerned.
    pub action_id: Option<String>,
    /// The grant concerned.
    pub grant_id: Option<String>,
    /// The resource after the change.
    pub data: Json,
}

/// Appends `ev` to the log on the writer's connection.
pub(crate) async fn insert_on(
    conn: &mut SqliteConnection,
    ev: &NewEvent,
) -> Result<(), StoreError> {
    sqlx::query(
        "INSERT INTO events (id, type, at, agent, action_id, grant_id, data) VALUES (?, ?, ?, ?, ?, ?, ?)",
    )
    .bind(Uuid::now_v7().to_string())
    .bind(ev.kind)
    .bind(to_ms(now()))
    .bind(&ev.agent)
    .bind(&ev.action_id)
    .bind(&ev.grant_id)
    .bind(ev.data.get())
    .execute(conn)
    .await?;
    Ok(())
}

impl NewEvent {
    /// The event as it will be published once written (its `seq` is filled
    /// in then), with a new id; its data is stored as it is.
    pub(crate) fn prepare(self, at: chrono::DateTime<chrono::Utc>) -> Event {
        Event {
            seq: 0,
            id: Uuid::now_v7().to_string(),
            kind: self.kind.to_owned(),
            at,
            agent: self.agent,
            action_id: self.action_id,
            grant_id: self.grant_id,
            data: self.data,
        }
    }
}

/// Writes `events` in order, with one statement.
pub(crate) async fn insert_all_on(
    conn: &mut SqliteConnection,
    events: &[NewEvent],
) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    let at = to_ms(now());
    let mut q: QueryBuilder<Sqlite> =
        QueryBuilder::new("INSERT INTO events (id, type, at, agent, action_id, grant_id, data) ");
    q.push_values(events, |mut row, ev| {
        row.push_bind(Uuid::now_v7().to_string())
            .push_bind(ev.kind)
            .push_bind(at)
            .push_bind(ev.agent.clone())
            .push_bind(ev.action_id.clone())
            .push_bind(ev.grant_id.clone())
            .push_bind(ev.data.get().to_owned());
    });
    q.build().persistent(false).execute(conn).await?;
    Ok(())
}

/// The event columns, in the order [`from_row`] reads them, as a literal
/// for `concat!` (queries must be static strings).
macro_rules! event_columns {
    () => {
        "seq, id, type, at, agent, action_id, grant_id, data"
    };
}
pub(crate) use event_columns;

/// The event columns of a SQLite query, with those of the action a
/// by-reference event renders from (`crate::event_ref`): select them with
/// [`stored_from!`], and name `events.agent`, not `agent`, in conditions.
macro_rules! stored_columns {
    () => {
        concat!(
            "events.seq AS seq, events.id AS id, events.type AS type, events.at AS at, \
             events.agent AS agent, events.action_id AS action_id, \
             events.grant_id AS grant_id, events.data AS data, ",
            crate::event_ref::ref_columns!()
        )
    };
}
pub(crate) use stored_columns;

/// What SQLite's event queries select [`stored_columns!`] from: the
/// events, each by-reference one with its action's row.
macro_rules! stored_from {
    () => {
        "events LEFT JOIN actions r ON substr(events.data, 1, 1) = '@' AND r.id = events.action_id"
    };
}
pub(crate) use stored_from;

/// Reads an event row selected with `event_columns!()` (Postgres) or
/// [`stored_columns!`] (SQLite).
pub(crate) fn from_row(row: &impl crate::row::Cols) -> Result<Event, StoreError> {
    let data: String = row.try_get("data")?;
    let seq = row.try_get("seq")?;
    let data = if crate::event_ref::is_reference(&data) {
        crate::event_ref::render(&data, seq, row)?
    } else {
        Json::from_text(data)?
    };
    Ok(Event {
        seq,
        id: row.try_get("id")?,
        kind: row.try_get("type")?,
        at: from_ms(row.try_get("at")?),
        agent: row.try_get("agent")?,
        action_id: row.try_get("action_id")?,
        grant_id: row.try_get("grant_id")?,
        data,
    })
}

/// Events after `seq` on the given connection, oldest first.
pub(crate) async fn after_on(
    conn: &mut SqliteConnection,
    seq: i64,
) -> Result<Vec<Event>, StoreError> {
    let rows = sqlx::query(concat!(
        "SELECT ",
        stored_columns!(),
        " FROM ",
        stored_from!(),
        " WHERE events.seq > ? ORDER BY events.seq"
    ))
    .bind(seq)
    .fetch_all(conn)
    .await?;
    rows.iter().map(from_row).collect()
}

/// Publishes committed events, in `seq` order, to in-process subscribers.
pub(crate) struct Publisher {
    pub(crate) tx: broadcast::Sender<Arc<Event>>,
    pub(crate) last_seq: Arc<AtomicI64>,
    /// Cleared after commits that may have changed grants.
    pub(crate) grants: Arc<GrantCache>,
}

impl Publisher {
    /// Reads the events committed since the last call and sends them.
    pub(crate) async fn publish(&self, conn: &mut SqliteConnection) {
        let after = self.last_seq.load(Ordering::Acquire);
        match after_on(conn, after).await {
            Ok(new) => {
                for ev in new {
                    self.last_seq.store(ev.seq, Ordering::Release);
                    // No receivers is fine: nobody is listening.
                    let _ = self.tx.send(Arc::new(ev));
                }
            }
            Err(e) => tracing::error!(error = %e, "reading committed events failed"),
        }
    }

    /// Sends `events`, the only ones a commit wrote, sorted by `seq`,
    /// without reading them back; reads the log instead when they do not
    /// follow on from the last one sent (an earlier read failed, or pruning
    /// left a gap), so no event is skipped.
    pub(crate) async fn publish_known(&self, conn: &mut SqliteConnection, events: Vec<Arc<Event>>) {
        if !self.send_known(events) {
            self.publish(conn).await;
        }
    }

    /// [`Publisher::publish_known`] without the reading: `false` when the
    /// caller must [`Publisher::publish`] instead (nothing was sent).
    pub(crate) fn send_known(&self, events: Vec<Arc<Event>>) -> bool {
        let after = self.last_seq.load(Ordering::Acquire);
        match events.first() {
            None => true,
            Some(first) if first.seq == after + 1 => {
                for ev in events {
                    self.last_seq.store(ev.seq, Ordering::Release);
                    let _ = self.tx.send(ev);
                }
                true
            }
            Some(_) => false,
        }
    }
}

impl SqliteStore {
    /// The highest committed event `seq` (possibly not yet published).
    pub async fn newest_seq(&self) -> Result<i64, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0) FROM events")
                .fetch_one(&self.read)
                .await?,
        )
    }

    /// Up to `limit` events after `seq`, oldest first; only `agent`'s when given.
    pub async fn events_after(
        &self,
        seq: i64,
        agent: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Event>, StoreError> {
        let rows = match agent {
            Some(agent) => {
                sqlx::query(concat!(
                    "SELECT ",
                    stored_columns!(),
                    " FROM ",
                    stored_from!(),
                    " WHERE events.seq > ? AND events.agent = ? ORDER BY events.seq LIMIT ?"
                ))
                .bind(seq)
                .bind(agent)
                .bind(limit)
                .fetch_all(&self.read)
                .await?
            }
            None => {
                sqlx::query(concat!(
                    "SELECT ",
                    stored_columns!(),
                    " FROM ",
                    stored_from!(),
                    " WHERE events.seq > ? ORDER BY events.seq LIMIT ?"
                ))
                .bind(seq)
                .bind(limit)
                .fetch_all(&self.read)
                .await?
            }
        };
        rows.iter().map(from_row).collect()
    }

    /// Every event about one action, oldest first.
    pub async fn action_events(&self, action_id: &str) -> Result<Vec<Event>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            stored_columns!(),
            " FROM ",
            stored_from!(),
            " WHERE events.action_id = ? ORDER BY events.seq"
        ))
        .bind(action_id)
        .fetch_all(&self.read)
        .await?;
        rows.iter().map(from_row).collect()
    }
}
