//! Action rows on Postgres: compare-and-set transitions, listing, expiry
//! at the deadline (new actions: `create`).

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, Postgres as Pg, QueryBuilder};

use crate::actions::{ActionFilter, Transition, action_columns, event_for, from_row};
use crate::error::StoreError;
use crate::pg::Postgres;
use crate::time::{from_ms, now, to_ms};
use actiongate_api::model::{Action, ActionStatus};

/// One action by id, on `conn`.
pub(crate) async fn get_on(
    conn: &mut PgConnection,
    id: &str,
) -> Result<Option<Action>, StoreError> {
    let row = sqlx::query(concat!(
        "SELECT ",
        action_columns!(),
        " FROM actions WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(conn)
    .await?;
    row.as_ref().map(from_row).transpose()
}

impl Postgres {
    /// Moves an action from one of `t.from` to `t.to` if it is still in one
    /// of them; otherwise [`StoreError::WrongState`] with where it is now.
    pub async fn transition(&self, id: &str, t: Transition) -> Result<Action, StoreError> {
        let mut tx = self.begin().await?;
        let action = transition_on(&mut tx, id, &t).await?;
        self.commit(tx, vec![event_for(&action, t.event)?]).await?;
        Ok(action)
    }

    /// Expires every pending action whose deadline is at or before `at`.
    /// Nodes that sweep at once expire each action once: the second waits
    /// for the first's commit and finds it no longer pending. The rows are
    /// locked in id order, as a new grant locks what it approves, so the
    /// two never deadlock.
    pub async fn expire_due(&self, at: DateTime<Utc>) -> Result<Vec<Action>, StoreError> {
        let mut tx = self.begin().await?;
        let rows = sqlx::query(concat!(
            "UPDATE actions SET status = 'expired', decided_at = $1, decided_by = 'deadline', \
             settled_at = $1 WHERE id IN (SELECT id FROM actions WHERE status = 'pending' \
             AND deadline <= $1 ORDER BY id FOR UPDATE) AND status = 'pending' RETURNING ",
            action_columns!()
        ))
        .bind(to_ms(at))
        .fetch_all(&mut *tx)
        .await?;
        let mut expired = rows.iter().map(from_row).collect::<Result<Vec<_>, _>>()?;
        expired.sort_by(|a, b| a.id.cmp(&b.id));
        let events = expired
            .iter()
            .map(|a| event_for(a, "action.expired"))
            .collect::<Result<Vec<_>, _>>()?;
        self.commit(tx, events).await?;
        Ok(expired)
    }

    /// The earliest deadline among pending actions.
    pub async fn next_deadline(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let ms: Option<i64> =
            sqlx::query_scalar("SELECT MIN(deadline) FROM actions WHERE status = 'pending'")
                .fetch_one(&self.pool)
                .await?;
        Ok(ms.map(from_ms))
    }

    /// One action by id.
    pub async fn get_action(&self, id: &str) -> Result<Action, StoreError> {
        let mut conn = self.pool.acquire().await?;
        get_on(&mut conn, id).await?.ok_or(StoreError::NotFound)
    }

    /// The action `agent` stored under idempotency key `key`, if any.
    pub async fn action_for_key(
        &self,
        agent: &str,
        key: &str,
    ) -> Result<Option<Action>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            action_columns!(),
            " FROM actions WHERE agent = $1 AND idempotency_key = $2"
        ))
        .bind(agent)
        .bind(key)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// A page of actions, newest first (or oldest first).
    pub async fn list_actions(&self, f: &ActionFilter) -> Result<Vec<Action>, StoreError> {
        let mut q: QueryBuilder<Pg> = QueryBuilder::new(concat!(
            "SELECT ",
            action_columns!(),
            " FROM actions WHERE TRUE"
        ));
        if let Some(st) = f.status {
            q.push(" AND status = ").push_bind(st.as_str());
        }
        crate::actions::filter_and_page(&mut q, f);
        let rows = q.build().fetch_all(&self.pool).await?;
        rows.iter().map(from_row).collect()
    }

    /// How many actions wait for a human.
    pub async fn pending_counts(&self) -> Result<crate::PendingCounts, StoreError> {
        let (actions, grant_requests, plans) = sqlx::query_as(crate::pending::PENDING_COUNTS)
            .fetch_one(&self.pool)
            .await?;
        Ok(crate::PendingCounts {
            actions,
            grant_requests,
            plans,
        })
    }
}

/// The compare-and-set of [`Postgres::transition`] on `conn`, without its
/// event (the caller appends it).
pub(crate) async fn transition_on(
    conn: &mut PgConnection,
    id: &str,
    t: &Transition,
) -> Result<Action, StoreError> {
    let at = to_ms(now());
    let outcome = t.outcome.as_ref().map(serde_json::to_string).transpose()?;
    let mut q: QueryBuilder<Pg> = QueryBuilder::new("UPDATE actions SET status = ");
    q.push_bind(t.to.as_str());
    if let Some(by) = &t.decided_by {
        q.push(", decided_at = ").push_bind(at);
        q.push(", decided_by = ").push_bind(by.clone());
    }
    if let Some(note) = &t.note {
        q.push(", decision_note = ").push_bind(note.clone());
    }
    if let Some(outcome) = outcome {
        q.push(", outcome = ").push_bind(outcome);
    }
    q.push(", settled_at = ").push_bind(at);
    q.push(" WHERE id = ").push_bind(id.to_owned());
    q.push(" AND status IN (");
    let mut sep = q.separated(", ");
    for st in t.from {
        sep.push_bind(st.as_str());
    }
    q.push(")");
    // Past its deadline a pending action is expired, whether or not a
    // sweeper has written that yet: nobody decides it any more.
    q.push(" AND (status <> 'pending' OR deadline IS NULL OR deadline > ")
        .push_bind(at)
        .push(")");
    q.push(concat!(" RETURNING ", action_columns!()));
    if let Some(row) = q.build().fetch_optional(&mut *conn).await? {
        return from_row(&row);
    }
    match get_on(conn, id).await? {
        Some(current) => Err(StoreError::WrongState {
            current: if current.status == ActionStatus::Pending
                && current.deadline.is_some_and(|d| to_ms(d) <= at)
            {
                ActionStatus::Expired.to_string()
            } else {
                current.status.to_string()
            },
        }),
        None => Err(StoreError::NotFound),
    }
}
