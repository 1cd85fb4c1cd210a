//! Dispatch bookkeeping on Postgres, with several daemons claiming from
//! one table.
//!
//! - Claims take approved actions `FOR UPDATE SKIP LOCKED`: a node never
//!   waits for, nor takes, a row another node is claiming.
//! - `attempts` is the lease's fencing token: a claim bumps it, and every
//!   outcome of an attempt (settle, retry, 202, a result callback) is
//!   written only while that attempt is still the running one. A node whose
//!   lease lapsed and whose action was released and claimed again writes
//!   nothing: its `settle` answers `None`.
//! - Lapsed leases are released by any node, each once: the rows are taken
//!   `FOR UPDATE SKIP LOCKED`, and the release itself is fenced.
//! - Every attempt keeps the action id as its webhook-id, so what another
//!   node sends again after a lapsed lease is the same delivery to the
//!   executor.

use chrono::{DateTime, Utc};
use sqlx::PgConnection;

use crate::actions::{action_columns, event_for, from_row};
use crate::dispatch::{
    ActionAttempt, AttemptNext, Claimed, NextDispatch, claimed_from, cut_attempt, result_applies,
    status_event,
};
use crate::error::StoreError;
use crate::events::NewEvent;
use crate::pg::Postgres;
use crate::time::{from_ms, now, to_ms};
use actiongate_api::model::{Action, ActionStatus, Outcome};

/// `attempt_log` with the record in parameter `$p` appended: the text
/// SQLite's `json_insert` writes (serde's records, comma-separated, no
/// spaces), so both backends store the same log.
macro_rules! appended {
    ($p:literal) => {
        concat!(
            "CASE WHEN attempt_log IS NULL OR attempt_log = '[]' THEN '[' || ",
            $p,
            "::TEXT || ']' ELSE left(attempt_log, -1) || ',' || ",
            $p,
            "::TEXT || ']' END"
        )
    };
}

/// Settles attempt `attempt` of running action `id` with `outcome`,
/// appending `rec` to its log when given; `None` when that attempt is no
/// longer the running one. The status event goes to `events`.
async fn settle_on(
    conn: &mut PgConnection,
    id: &str,
    attempt: i64,
    outcome: &Outcome,
    rec: Option<&ActionAttempt>,
    events: &mut Vec<NewEvent>,
) -> Result<Option<Action>, StoreError> {
    let rec = rec.map(serde_json::to_string).transpose()?;
    let row = sqlx::query(concat!(
        "UPDATE actions SET status = $1, outcome = $2, settled_at = $3, lease_until = NULL, \
         next_attempt_at = NULL, attempt_log = CASE WHEN $4::TEXT IS NULL THEN attempt_log ELSE ",
        appended!("$4"),
        " END WHERE id = $5 AND status = 'running' AND attempts = $6 RETURNING ",
        action_columns!()
    ))
    .bind(outcome.status.as_str())
    .bind(serde_json::to_string(outcome)?)
    .bind(to_ms(now()))
    .bind(rec)
    .bind(id)
    .bind(attempt)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let action = from_row(&row)?;
    events.push(event_for(&action, status_event(outcome.status))?);
    Ok(Some(action))
}

/// Puts running action `id` back to approved, due at `due`, logging `rec`,
/// while attempt `rec.n` is the running one; the action as it is then.
async fn requeue_on(
    conn: &mut PgConnection,
    id: &str,
    rec: &ActionAttempt,
    due: DateTime<Utc>,
) -> Result<Option<Action>, StoreError> {
    let row = sqlx::query(concat!(
        "UPDATE actions SET status = 'approved', lease_until = NULL, next_attempt_at = $1, attempt_log = ",
        appended!("$2"),
        " WHERE id = $3 AND status = 'running' AND attempts = $4 RETURNING ",
        action_columns!()
    ))
    .bind(to_ms(due))
    .bind(serde_json::to_string(rec)?)
    .bind(id)
    .bind(rec.n)
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(from_row).transpose()
}

/// The executor's 202 for attempt `rec.n`: the lease runs until `until`
/// for its result.
async fn await_result_on(
    conn: &mut PgConnection,
    id: &str,
    rec: &ActionAttempt,
    until: DateTime<Utc>,
) -> Result<Option<Action>, StoreError> {
    let row = sqlx::query(concat!(
        "UPDATE actions SET lease_until = $1, attempt_log = ",
        appended!("$2"),
        " WHERE id = $3 AND status = 'running' AND attempts = $4 RETURNING ",
        action_columns!()
    ))
    .bind(to_ms(until))
    .bind(serde_json::to_string(rec)?)
    .bind(id)
    .bind(rec.n)
    .fetch_optional(&mut *conn)
    .await?;
    row.as_ref().map(from_row).transpose()
}

/// The executor's answer `rec` to an attempt whose signed result beat it
/// here: the result settled the action and logged the attempt without its
/// answer (a record with neither a status code nor an error); `rec`
/// replaces that record, or is appended when the attempt has none. Nothing
/// when attempt `rec.n` is not the last one, the action is not settled, or
/// the attempt's record says something already (its lease lapsed).
async fn late_answer_on(
    conn: &mut PgConnection,
    id: &str,
    rec: &ActionAttempt,
) -> Result<(), StoreError> {
    let log: Option<Option<String>> = sqlx::query_scalar(
        "SELECT attempt_log FROM actions WHERE id = $1 AND attempts = $2 \
         AND status IN ('completed', 'failed') FOR UPDATE",
    )
    .bind(id)
    .bind(rec.n)
    .fetch_optional(&mut *conn)
    .await?;
    if let Some(log) = log {
        let mut records: Vec<ActionAttempt> = log
            .map(|t| serde_json::from_str(&t))
            .transpose()?
            .unwrap_or_default();
        match records.iter_mut().find(|r| r.n == rec.n) {
            Some(slot) if slot.status_code.is_none() && slot.error.is_none() => {
                *slot = rec.clone();
            }
            Some(_) => return Ok(()),
            None => records.push(rec.clone()),
        }
        sqlx::query("UPDATE actions SET attempt_log = $1 WHERE id = $2")
            .bind(serde_json::to_string(&records)?)
            .bind(id)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

impl Postgres {
    /// Approved handler actions due for an attempt at `at`, oldest first.
    pub async fn due_for_dispatch(
        &self,
        at: DateTime<Utc>,
        limit: i64,
        skip: Vec<String>,
    ) -> Result<Vec<(String, String)>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT id, handler FROM actions WHERE status = 'approved' AND handler IS NOT NULL \
             AND (next_attempt_at IS NULL OR next_attempt_at <= $1) \
             AND NOT (handler = ANY($3)) \
             ORDER BY COALESCE(next_attempt_at, 0), id LIMIT $2",
        )
        .bind(to_ms(at))
        .bind(limit)
        .bind(skip)
        .fetch_all(&self.pool)
        .await?)
    }

    /// Moves each still-approved action to `running` for its next attempt,
    /// leased until `lease_until`; the ones another node claims (or has
    /// claimed) are left out.
    pub async fn claim(
        &self,
        ids: Vec<String>,
        lease_until: DateTime<Utc>,
    ) -> Result<Vec<Claimed>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut tx = self.begin().await?;
        let rows = sqlx::query(concat!(
            "UPDATE actions SET status = 'running', attempts = attempts + 1, lease_until = $1, \
             next_attempt_at = NULL WHERE id IN (SELECT id FROM actions WHERE id = ANY($2) \
             AND status = 'approved' FOR UPDATE SKIP LOCKED) AND status = 'approved' \
             RETURNING attempts, params, ",
            action_columns!()
        ))
        .bind(to_ms(lease_until))
        .bind(&ids)
        .fetch_all(&mut *tx)
        .await?;
        let mut claimed = rows
            .iter()
            .map(claimed_from)
            .collect::<Result<Vec<_>, _>>()?;
        // Oldest first, as the pass asked for them.
        let order: std::collections::HashMap<&String, usize> =
            ids.iter().enumerate().map(|(i, id)| (id, i)).collect();
        claimed.sort_by_key(|c| order.get(&c.action.id).copied().unwrap_or(usize::MAX));
        let started = claimed
            .iter()
            .map(|c| event_for(&c.action, "action.started"))
            .collect::<Result<Vec<_>, _>>()?;
        self.commit(tx, started).await?;
        Ok(claimed)
    }

    /// Claims the approved action of `handler` that has waited longest and
    /// is due at `at`, if one is not being claimed by another node, for its
    /// next attempt leased until `lease_until`.
    pub async fn claim_next(
        &self,
        handler: &str,
        at: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> Result<Option<Claimed>, StoreError> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(concat!(
            "UPDATE actions SET status = 'running', attempts = attempts + 1, lease_until = $1, \
             next_attempt_at = NULL WHERE id = (SELECT id FROM actions WHERE status = 'approved' \
             AND handler IS NOT NULL AND handler = $2 AND (next_attempt_at IS NULL OR next_attempt_at <= $3) \
             ORDER BY COALESCE(next_attempt_at, 0), id LIMIT 1 FOR UPDATE SKIP LOCKED) \
             AND status = 'approved' RETURNING attempts, params, ",
            action_columns!()
        ))
        .bind(to_ms(lease_until))
        .bind(handler)
        .bind(to_ms(at))
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let claimed = claimed_from(&row)?;
        self.commit(tx, vec![event_for(&claimed.action, "action.started")?])
            .await?;
        Ok(Some(claimed))
    }

    /// Records attempt `rec` of `running`, as its claim returned it, and
    /// settles it with `outcome`; `None` when the attempt was superseded
    /// (lease lapsed and taken over, result already in).
    pub async fn settle_attempt(
        &self,
        running: &Action,
        rec: &ActionAttempt,
        outcome: Outcome,
    ) -> Result<Option<Action>, StoreError> {
        self.finish_attempt(&running.id, rec.clone(), AttemptNext::Settle(outcome))
            .await
    }

    /// Records attempt `rec` of a running action and applies `next`; `None`
    /// when the attempt was superseded (lease lapsed, result already in).
    pub async fn finish_attempt(
        &self,
        id: &str,
        rec: ActionAttempt,
        next: AttemptNext,
    ) -> Result<Option<Action>, StoreError> {
        let mut tx = self.begin().await?;
        let mut events = Vec::new();
        let done = match next {
            AttemptNext::Settle(outcome) => {
                settle_on(&mut tx, id, rec.n, &outcome, Some(&rec), &mut events).await?
            }
            AttemptNext::RetryAt(at) => requeue_on(&mut tx, id, &rec, at).await?,
            AttemptNext::AwaitResult(until) => await_result_on(&mut tx, id, &rec, until).await?,
        };
        if done.is_none() {
            late_answer_on(&mut tx, id, &rec).await?;
        }
        self.commit(tx, events).await?;
        Ok(done)
    }

    /// Running actions whose lease lapsed at `at` go back to approved (due
    /// now) for another attempt, or fail when `max_attempts` are used up.
    /// With `all`, every running action is released. An action another node
    /// is releasing (or settling) right now is left to it.
    pub async fn release_leases(
        &self,
        at: DateTime<Utc>,
        max_attempts: i64,
        all: bool,
    ) -> Result<Vec<Action>, StoreError> {
        let mut tx = self.begin().await?;
        let lapsed: Vec<(String, i64)> = sqlx::query_as(
            "SELECT id, attempts FROM actions WHERE status = 'running' \
             AND ($1 OR lease_until <= $2) ORDER BY id FOR UPDATE SKIP LOCKED",
        )
        .bind(all)
        .bind(to_ms(at))
        .fetch_all(&mut *tx)
        .await?;
        let mut changed = Vec::new();
        let mut events = Vec::new();
        for (id, attempts) in lapsed {
            let rec = cut_attempt(attempts, at, all);
            let done = if attempts >= max_attempts {
                let outcome = Outcome {
                    status: ActionStatus::Failed,
                    result: None,
                    error: rec.error.clone(),
                };
                settle_on(&mut tx, &id, attempts, &outcome, Some(&rec), &mut events).await?
            } else {
                requeue_on(&mut tx, &id, &rec, at).await?
            };
            changed.extend(done);
        }
        self.commit(tx, events).await?;
        Ok(changed)
    }

    /// When dispatch next has something to do: the earliest retry coming
    /// due of a handler not in `skip` (those with no room in flight) and
    /// the earliest lease lapsing (`None` when there is none).
    pub async fn next_dispatch_times(&self, skip: Vec<String>) -> Result<NextDispatch, StoreError> {
        let (retry, lease): (Option<i64>, Option<i64>) = sqlx::query_as(
            "SELECT (SELECT MIN(next_attempt_at) FROM actions \
                     WHERE status = 'approved' AND handler IS NOT NULL \
                     AND NOT (handler = ANY($1))), \
                    (SELECT MIN(lease_until) FROM actions WHERE status = 'running')",
        )
        .bind(skip)
        .fetch_one(&self.pool)
        .await?;
        Ok(NextDispatch {
            retry: retry.map(from_ms),
            lease: lease.map(from_ms),
        })
    }

    /// An executor's asynchronous result for `attempt` (the current one or
    /// an earlier one: all share the webhook-id the executor deduplicates
    /// by). A `webhook_id` seen before, on any node, is a replay
    /// ([`StoreError::Conflict`]); a result for an attempt not yet sent or
    /// for an action not running is [`StoreError::WrongState`].
    pub async fn accept_result(
        &self,
        id: &str,
        webhook_id: String,
        attempt: i64,
        outcome: Outcome,
    ) -> Result<Action, StoreError> {
        let mut tx = self.begin().await?;
        // A replay sent to two nodes at once: the second insert waits for
        // the first transaction and inserts nothing if it commits.
        if !record_webhook_on(&mut tx, &webhook_id).await? {
            return Err(StoreError::Conflict(
                "this webhook-id was already used".to_owned(),
            ));
        }
        match settle_result_on(&mut tx, id, attempt, &outcome).await {
            Ok((settled, events)) => {
                self.commit(tx, events).await?;
                Ok(settled)
            }
            // A refused callback still uses up its webhook-id; a fault
            // rolls everything back, so the executor can try again.
            Err(e @ (StoreError::WrongState { .. } | StoreError::NotFound)) => {
                self.commit(tx, Vec::new()).await?;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    /// Records `webhook_id` as seen; `false` when it was seen before.
    pub async fn consume_webhook(&self, webhook_id: String) -> Result<bool, StoreError> {
        let mut tx = self.begin().await?;
        let fresh = record_webhook_on(&mut tx, &webhook_id).await?;
        self.commit(tx, Vec::new()).await?;
        Ok(fresh)
    }

    /// Forgets replay-protection ids older than `before`.
    pub async fn prune_seen_webhooks(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        let mut tx = self.begin().await?;
        let n = sqlx::query("DELETE FROM seen_webhooks WHERE at < $1")
            .bind(to_ms(before))
            .execute(&mut *tx)
            .await?
            .rows_affected();
        self.commit(tx, Vec::new()).await?;
        Ok(n)
    }
}

/// Records `webhook_id` as seen on `conn`; `false` when it was seen before.
async fn record_webhook_on(conn: &mut PgConnection, webhook_id: &str) -> Result<bool, StoreError> {
    let done = sqlx::query(
        "INSERT INTO seen_webhooks (id, at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
    )
    .bind(webhook_id)
    .bind(to_ms(now()))
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// Settles running action `id` with an executor's `outcome` for `attempt`,
/// on `conn`; the settled action and the events to append.
async fn settle_result_on(
    conn: &mut PgConnection,
    id: &str,
    attempt: i64,
    outcome: &Outcome,
) -> Result<(Action, Vec<NewEvent>), StoreError> {
    // Locked: a release or a settle on another node waits for this.
    let row = sqlx::query(concat!(
        "SELECT attempts, ",
        action_columns!(),
        " FROM actions WHERE id = $1 FOR UPDATE"
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(StoreError::NotFound)?;
    let attempts: i64 = crate::row::Cols::try_get(&row, "attempts")?;
    let current = from_row(&row)?;
    let sent = result_applies(&current, attempts, attempt)?;
    let mut events = Vec::new();
    let settled = settle_on(conn, id, attempts, outcome, sent.as_ref(), &mut events)
        .await?
        .ok_or(StoreError::WrongState {
            current: current.status.to_string(),
        })?;
    Ok((settled, events))
}
