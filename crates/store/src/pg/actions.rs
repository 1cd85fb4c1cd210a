//! Action rows on Postgres: insertion with idempotency, compare-and-set
//! transitions, listing, expiry at the deadline.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgConnection, Postgres as Pg, QueryBuilder};

use crate::actions::{
    ActionFilter, Inserted, NewAction, Transition, action_columns, claim_of, created_events,
    event_for, from_row, initial_state, stored_action,
};
use crate::error::StoreError;
use crate::pg::{Postgres, grants};
use crate::time::{from_ms, now, to_ms};
use actiongate_api::model::{Action, ActionStatus, DecisionResult};

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

/// The action that already holds `new`'s idempotency key, if any: the same
/// request gets it back, a different one is a conflict.
async fn existing(conn: &mut PgConnection, new: &NewAction) -> Result<Option<Action>, StoreError> {
    let Some(key) = &new.idempotency_key else {
        return Ok(None);
    };
    let found: Option<(String, Option<String>)> = sqlx::query_as(
        "SELECT id, request_hash FROM actions WHERE agent = $1 AND idempotency_key = $2",
    )
    .bind(&new.agent)
    .bind(key)
    .fetch_optional(&mut *conn)
    .await?;
    let Some((id, hash)) = found else {
        return Ok(None);
    };
    if hash.as_deref() != Some(new.request_hash.as_str()) {
        return Err(StoreError::Conflict(format!(
            "idempotency key '{key}' was already used for a different request"
        )));
    }
    get_on(conn, &id)
        .await?
        .ok_or(StoreError::NotFound)
        .map(Some)
}

impl Postgres {
    /// Stores a decided action and the events recording it; with an
    /// idempotency key already used by this agent, the same request returns
    /// the existing action (`false`), a different one is a conflict.
    pub async fn insert_action(&self, new: NewAction) -> Result<(Action, bool), StoreError> {
        let done = self.create_action(new).await?;
        Ok((done.action, done.created))
    }

    /// [`Postgres::insert_action`], answering with the new action's event.
    pub async fn create_action(&self, new: NewAction) -> Result<Inserted, StoreError> {
        let mut tx = self.begin().await?;
        // Decided on grants read before this transaction: one made since
        // (on any node) is looked for below, under the lock that orders the
        // two (see `pg::grants`).
        let asks = new.decision.result == DecisionResult::Ask;
        if asks {
            grants::lock_grants(&mut tx, false).await?;
        }
        if let Some(action) = existing(&mut tx, &new).await? {
            return Ok(Inserted::new(action, false, None));
        }
        let created = now();
        let (status, decided, deadline) = initial_state(&new);
        let claim = claim_of(&new);
        let h = new.handler.as_ref();
        // A concurrent request with the same key (on any node) that commits
        // first makes this insert do nothing; its action is the answer.
        let inserted = sqlx::query(
            "INSERT INTO actions (id, agent, tool, detail, action_string, reason, status, decision_result, \
             decision_reason, decision_rule, created_at, decided_at, decided_by, deadline, settled_at, \
             idempotency_key, request_hash, handler, action_name, params, params_view, permission, scope, display, \
             attempts, lease_until) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $12, $15, $16, $17, $18, $19, \
             $20, $21, $22, $23, $24, $25) \
             ON CONFLICT (agent, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING",
        )
        .bind(&new.id)
        .bind(&new.agent)
        .bind(&new.tool)
        .bind(&new.detail)
        .bind(&new.action_string)
        .bind(&new.reason)
        .bind(if claim.is_some() {
            ActionStatus::Running.as_str()
        } else {
            status.as_str()
        })
        .bind(new.decision.result.as_str())
        .bind(&new.decision.reason)
        .bind(new.decision.rule.as_ref().map(Value::to_string))
        .bind(to_ms(created))
        .bind(decided.then(|| to_ms(created)))
        .bind(decided.then_some("policy"))
        .bind(deadline.map(to_ms))
        .bind(&new.idempotency_key)
        .bind(&new.request_hash)
        .bind(h.map(|h| h.handler.clone()))
        .bind(h.map(|h| h.action.clone()))
        .bind(h.map(|h| h.params.to_string()))
        .bind(h.map(|h| h.params_view.to_string()))
        .bind(h.map(|h| h.permission.clone()))
        .bind(h.map(|h| Value::Object(h.scope.clone()).to_string()))
        .bind(h.and_then(|h| h.display.as_ref().map(Value::to_string)))
        .bind(i64::from(claim.is_some()))
        .bind(claim.map(to_ms))
        .execute(&mut *tx)
        .await?;
        if inserted.rows_affected() == 0 {
            let action = existing(&mut tx, &new).await?.ok_or(StoreError::NotFound)?;
            return Ok(Inserted::new(action, false, None));
        }
        let mut action = stored_action(new, created);
        let mut events = created_events(&mut action, claim.is_some())?;
        if asks
            && let Some((approved, event)) =
                grants::approve_if_granted(&mut tx, &action, self.default_profile.as_ref()).await?
        {
            action = approved;
            events.push(event);
        }
        let written = self.commit(tx, events).await?;
        // The last event about the action carries it as it is now.
        let rendered = written
            .into_iter()
            .rev()
            .find(|ev| ev.kind.starts_with("action."))
            .map(std::sync::Arc::new);
        Ok(Inserted::new(action, true, rendered))
    }

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

    /// A page of actions, newest first.
    pub async fn list_actions(&self, f: &ActionFilter) -> Result<Vec<Action>, StoreError> {
        let mut q: QueryBuilder<Pg> = QueryBuilder::new(concat!(
            "SELECT ",
            action_columns!(),
            " FROM actions WHERE TRUE"
        ));
        if let Some(st) = f.status {
            q.push(" AND status = ").push_bind(st.as_str());
        }
        if let Some(agent) = &f.agent {
            q.push(" AND agent = ").push_bind(agent.clone());
        }
        if let Some(tool) = &f.tool {
            q.push(" AND tool = ").push_bind(tool.clone());
        }
        if let Some(cursor) = &f.cursor {
            q.push(" AND id < ").push_bind(cursor.clone());
        }
        q.push(" ORDER BY id DESC LIMIT ").push_bind(f.limit);
        let rows = q.build().fetch_all(&self.pool).await?;
        rows.iter().map(from_row).collect()
    }

    /// How many actions wait for a human.
    pub async fn pending_count(&self) -> Result<i64, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT COUNT(*) FROM actions WHERE status = 'pending'")
                .fetch_one(&self.pool)
                .await?,
        )
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
