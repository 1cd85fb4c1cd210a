//! Dispatch bookkeeping: claiming approved handler actions for an attempt,
//! recording each attempt's outcome, leases that lapse, recovery after a
//! crash, and result callbacks (with replay protection).

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{QueryBuilder, Sqlite, SqliteConnection};

use crate::SqliteStore;
use crate::actions::{self, action_columns};
use crate::error::StoreError;
use crate::events::{self};
use crate::time::{from_ms, now, to_ms};
use actiongate_api::model::{Action, ActionStatus, Outcome};

pub use actiongate_api::ActionAttempt;

/// A claimed attempt: what the dispatcher needs to send.
#[derive(Debug, Clone)]
pub struct Claimed {
    /// The action, now `running`.
    pub action: Action,
    /// Params as sent by the agent (unmasked: only the executor sees them).
    pub params: Value,
    /// This attempt's number.
    pub attempt: i64,
}

/// What to do after an attempt.
#[derive(Debug, Clone)]
pub enum AttemptNext {
    /// The executor finished: completed or failed with this outcome.
    Settle(Outcome),
    /// Try again at this time.
    RetryAt(DateTime<Utc>),
    /// The executor accepted (202) and will post the result before this time.
    AwaitResult(DateTime<Utc>),
}

pub(crate) fn status_event(status: ActionStatus) -> &'static str {
    match status {
        ActionStatus::Completed => "action.completed",
        ActionStatus::Failed => "action.failed",
        ActionStatus::Running => "action.started",
        _ => "action.approved",
    }
}

/// A claimed action from a row of `RETURNING attempts, params, <action columns>`.
pub(crate) fn claimed_from(row: &impl crate::row::Cols) -> Result<Claimed, StoreError> {
    let attempt: i64 = row.try_get("attempts")?;
    let params: Option<String> = row.try_get("params")?;
    let params = params
        .map(|t| serde_json::from_str(&t))
        .transpose()?
        .unwrap_or(Value::Null);
    Ok(Claimed {
        action: actions::from_row(row)?,
        params,
        attempt,
    })
}

async fn append_attempt(
    conn: &mut SqliteConnection,
    id: &str,
    rec: &ActionAttempt,
) -> Result<(), StoreError> {
    sqlx::query("UPDATE actions SET attempt_log = json_insert(COALESCE(attempt_log, '[]'), '$[#]', json(?)) WHERE id = ?")
        .bind(serde_json::to_string(rec)?)
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

/// The executor's answer `rec` to an attempt whose signed result beat it
/// here: the result settled the action and logged the attempt without its
/// answer (a record with neither a status code nor an error); `rec`
/// replaces that record, or is appended when the attempt has none. Nothing
/// when attempt `rec.n` is not the last one, the action is not settled, or
/// the attempt's record says something already (its lease lapsed).
async fn late_answer_on(
    conn: &mut SqliteConnection,
    id: &str,
    rec: &ActionAttempt,
) -> Result<(), StoreError> {
    sqlx::query(
        "UPDATE actions SET attempt_log = COALESCE( \
           (SELECT json_set(attempt_log, '$[' || e.key || ']', json(?1)) \
            FROM json_each(attempt_log) e WHERE json_extract(e.value, '$.n') = ?3 LIMIT 1), \
           json_insert(COALESCE(attempt_log, '[]'), '$[#]', json(?1))) \
         WHERE id = ?2 AND attempts = ?3 AND status IN ('completed', 'failed') \
         AND NOT EXISTS (SELECT 1 FROM json_each(COALESCE(attempt_log, '[]')) e \
           WHERE json_extract(e.value, '$.n') = ?3 \
           AND (json_extract(e.value, '$.status_code') IS NOT NULL \
                OR json_extract(e.value, '$.error') IS NOT NULL))",
    )
    .bind(serde_json::to_string(rec)?)
    .bind(id)
    .bind(rec.n)
    .execute(&mut *conn)
    .await?;
    Ok(())
}

async fn settle_on(
    conn: &mut SqliteConnection,
    id: &str,
    attempt: i64,
    outcome: &Outcome,
    rec: Option<&ActionAttempt>,
) -> Result<Option<Action>, StoreError> {
    let rec = rec.map(serde_json::to_string).transpose()?;
    let row = sqlx::query(concat!(
        "UPDATE actions SET status = ?, outcome = ?, settled_at = ?, lease_until = NULL, next_attempt_at = NULL, \
         attempt_log = CASE WHEN ? IS NULL THEN attempt_log \
             ELSE json_insert(COALESCE(attempt_log, '[]'), '$[#]', json(?)) END \
         WHERE id = ? AND status = 'running' AND attempts = ? RETURNING ",
        action_columns!()
    ))
    .bind(outcome.status.as_str())
    .bind(serde_json::to_string(outcome)?)
    .bind(to_ms(now()))
    .bind(&rec)
    .bind(&rec)
    .bind(id)
    .bind(attempt)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let action = actions::from_row(&row)?;
    events::insert_on(
        conn,
        &actions::event_for(&action, status_event(outcome.status))?,
    )
    .await?;
    Ok(Some(action))
}

/// The record of an attempt cut short: its lease lapsed with no answer, or
/// (`stopped`) the daemon stopped during it.
pub(crate) fn cut_attempt(n: i64, at: DateTime<Utc>, stopped: bool) -> ActionAttempt {
    ActionAttempt {
        n,
        at,
        status_code: None,
        error: Some(if stopped {
            "the daemon stopped during this attempt".to_owned()
        } else {
            "the attempt's lease lapsed with no answer".to_owned()
        }),
        duration_ms: 0,
    }
}

/// Whether an executor's result for `attempt` may settle `current`, whose
/// running attempt is `attempts`; the record to log for the running
/// attempt when its own answer (the 202) is not in yet.
pub(crate) fn result_applies(
    current: &Action,
    attempts: i64,
    attempt: i64,
) -> Result<Option<ActionAttempt>, StoreError> {
    if current.status != ActionStatus::Running {
        return Err(StoreError::WrongState {
            current: current.status.to_string(),
        });
    }
    // Every attempt carries the same webhook-id, so an executor runs the
    // action once and the result of any attempt sent so far is the
    // action's result: one that was cut off (a crash, a lapsed lease) may
    // answer late.
    if !(1..=attempts).contains(&attempt) {
        return Err(StoreError::WrongState {
            current: format!("running attempt {attempts}, not {attempt}"),
        });
    }
    // The result can beat the executor's own answer (its 202) to the
    // daemon, and a crash can then lose that answer: the running attempt
    // is logged now, and its record is completed when the answer comes in.
    Ok(
        (!current.attempts.iter().any(|a| a.n == attempts)).then(|| ActionAttempt {
            n: attempts,
            at: now(),
            status_code: None,
            error: None,
            duration_ms: 0,
        }),
    )
}

impl SqliteStore {
    /// Approved handler actions due for an attempt at `at`, oldest first.
    ///
    /// The dispatch queries name their partial index (`INDEXED BY`): without
    /// statistics SQLite picks `actions_status` (or `actions_handler`) and
    /// walks every approved action, decision-only ones included, so each
    /// pass grew with the history (76,000 rows after a minute of load).
    /// Actions of the handlers in `skip` are left out.
    pub async fn due_for_dispatch(
        &self,
        at: DateTime<Utc>,
        limit: i64,
        skip: Vec<String>,
    ) -> Result<Vec<(String, String)>, StoreError> {
        Ok(sqlx::query_as(
            "SELECT id, handler FROM actions INDEXED BY actions_dispatch_due \
             WHERE status = 'approved' AND handler IS NOT NULL \
             AND (next_attempt_at IS NULL OR next_attempt_at <= ?) \
             AND handler NOT IN (SELECT value FROM json_each(?)) \
             ORDER BY COALESCE(next_attempt_at, 0), id LIMIT ?",
        )
        .bind(to_ms(at))
        .bind(serde_json::to_string(&skip)?)
        .bind(limit)
        .fetch_all(&self.read)
        .await?)
    }

    /// Moves each still-approved action to `running` for its next attempt,
    /// leased until `lease_until`; the ones another claimer won are left out.
    pub async fn claim(
        &self,
        ids: Vec<String>,
        lease_until: DateTime<Utc>,
    ) -> Result<Vec<Claimed>, StoreError> {
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    if ids.is_empty() {
                        return Ok(Vec::new());
                    }
                    // One statement for the whole pass, one for the events.
                    let mut q: QueryBuilder<Sqlite> = QueryBuilder::new(
                        "UPDATE actions SET status = 'running', attempts = attempts + 1, lease_until = ",
                    );
                    q.push_bind(to_ms(lease_until));
                    q.push(", next_attempt_at = NULL WHERE status = 'approved' AND id IN (");
                    let mut list = q.separated(", ");
                    for id in &ids {
                        list.push_bind(id.clone());
                    }
                    q.push(concat!(") RETURNING attempts, params, ", action_columns!()));
                    let rows = q.build().persistent(false).fetch_all(&mut *conn).await?;
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
                        .map(|c| actions::event_for(&c.action, "action.started"))
                        .collect::<Result<Vec<_>, _>>()?;
                    events::insert_all_on(conn, &started).await?;
                    Ok(claimed)
                })
            })
            .await
    }

    /// Claims the approved action of `handler` that has waited longest and
    /// is due at `at`, if there is one, for its next attempt leased until
    /// `lease_until`: how a finished attempt hands its room in the limits
    /// straight to the next action waiting for it.
    pub async fn claim_next(
        &self,
        handler: &str,
        at: DateTime<Utc>,
        lease_until: DateTime<Utc>,
    ) -> Result<Option<Claimed>, StoreError> {
        let handler = handler.to_owned();
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    let row = sqlx::query(concat!(
                        "UPDATE actions SET status = 'running', attempts = attempts + 1, lease_until = ?, \
                         next_attempt_at = NULL WHERE id = (SELECT id FROM actions INDEXED BY actions_dispatch_due \
                         WHERE status = 'approved' AND handler IS NOT NULL AND handler = ? AND (next_attempt_at IS NULL OR next_attempt_at <= ?) \
                         ORDER BY COALESCE(next_attempt_at, 0), id LIMIT 1) RETURNING attempts, params, ",
                        action_columns!()
                    ))
                    .bind(to_ms(lease_until))
                    .bind(&handler)
                    .bind(to_ms(at))
                    .fetch_optional(&mut *conn)
                    .await?;
                    let Some(row) = row else { return Ok(None) };
                    let claimed = claimed_from(&row)?;
                    events::insert_on(conn, &actions::event_for(&claimed.action, "action.started")?)
                        .await?;
                    Ok(Some(claimed))
                })
            })
            .await
    }

    /// Records attempt `rec` of `running`, as its claim returned it, and
    /// settles it with `outcome`: the same as [`Store::finish_attempt`] with
    /// [`AttemptNext::Settle`], written with whatever else is queued in one
    /// hand-off to the writer's connection. `None` when the attempt was
    /// superseded (lease lapsed, result already in).
    pub async fn settle_attempt(
        &self,
        running: &Action,
        rec: &ActionAttempt,
        outcome: Outcome,
    ) -> Result<Option<Action>, StoreError> {
        let done = self.writer.settle(running, rec, outcome).await?;
        if done.is_none() {
            // Superseded, which is rare: the answer may yet be the
            // record of an attempt its signed result settled.
            let (id, rec) = (running.id.clone(), rec.clone());
            self.writer
                .run_sparing_grants(move |conn| {
                    Box::pin(async move { late_answer_on(conn, &id, &rec).await })
                })
                .await?;
        }
        Ok(done)
    }

    /// Records attempt `rec` of a running action and applies `next`; `None`
    /// when the attempt was superseded (lease lapsed, result already in).
    pub async fn finish_attempt(
        &self,
        id: &str,
        rec: ActionAttempt,
        next: AttemptNext,
    ) -> Result<Option<Action>, StoreError> {
        let id = id.to_owned();
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    // Each branch is one compare-and-set that also appends
                    // the attempt: it applies only while attempt `rec.n` is
                    // still the running one.
                    let n = rec.n;
                    let done = match next {
                        AttemptNext::Settle(outcome) => {
                            settle_on(conn, &id, rec.n, &outcome, Some(&rec)).await?
                        }
                        AttemptNext::RetryAt(at) => {
                            let row = sqlx::query(concat!(
                                "UPDATE actions SET status = 'approved', lease_until = NULL, next_attempt_at = ?, \
                                 attempt_log = json_insert(COALESCE(attempt_log, '[]'), '$[#]', json(?)) \
                                 WHERE id = ? AND status = 'running' AND attempts = ? RETURNING ",
                                action_columns!()
                            ))
                            .bind(to_ms(at))
                            .bind(serde_json::to_string(&rec)?)
                            .bind(&id)
                            .bind(rec.n)
                            .fetch_optional(&mut *conn)
                            .await?;
                            row.as_ref().map(actions::from_row).transpose()?
                        }
                        AttemptNext::AwaitResult(until) => {
                            let row = sqlx::query(concat!(
                                "UPDATE actions SET lease_until = ?, \
                                 attempt_log = json_insert(COALESCE(attempt_log, '[]'), '$[#]', json(?)) \
                                 WHERE id = ? AND status = 'running' AND attempts = ? RETURNING ",
                                action_columns!()
                            ))
                            .bind(to_ms(until))
                            .bind(serde_json::to_string(&rec)?)
                            .bind(&id)
                            .bind(n)
                            .fetch_optional(&mut *conn)
                            .await?;
                            row.as_ref().map(actions::from_row).transpose()?
                        }
                    };
                    if done.is_none() {
                        late_answer_on(conn, &id, &rec).await?;
                    }
                    Ok(done)
                })
            })
            .await
    }

    /// Running actions whose lease lapsed at `at` go back to approved (due
    /// now) for another attempt, or fail when `max_attempts` are used up.
    /// With `all`, every running action is released (start-up after a crash:
    /// whatever was in flight is lost).
    pub async fn release_leases(
        &self,
        at: DateTime<Utc>,
        max_attempts: i64,
        all: bool,
    ) -> Result<Vec<Action>, StoreError> {
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    let ids: Vec<(String, i64)> = if all {
                        sqlx::query_as("SELECT id, attempts FROM actions WHERE status = 'running'")
                            .fetch_all(&mut *conn)
                            .await?
                    } else {
                        sqlx::query_as("SELECT id, attempts FROM actions WHERE status = 'running' AND lease_until <= ?")
                            .bind(to_ms(at))
                            .fetch_all(&mut *conn)
                            .await?
                    };
                    let mut changed = Vec::new();
                    for (id, attempts) in ids {
                        let rec = cut_attempt(attempts, at, all);
                        append_attempt(conn, &id, &rec).await?;
                        if attempts >= max_attempts {
                            let outcome = Outcome {
                                status: ActionStatus::Failed,
                                result: None,
                                error: rec.error.clone(),
                            };
                            if let Some(a) = settle_on(conn, &id, attempts, &outcome, None).await? {
                                changed.push(a);
                            }
                        } else {
                            sqlx::query(
                                "UPDATE actions SET status = 'approved', lease_until = NULL, next_attempt_at = ? \
                                 WHERE id = ? AND status = 'running'",
                            )
                            .bind(to_ms(at))
                            .bind(&id)
                            .execute(&mut *conn)
                            .await?;
                            if let Some(a) = actions::get_on(conn, &id).await? {
                                changed.push(a);
                            }
                        }
                    }
                    Ok(changed)
                })
            })
            .await
    }

    /// When dispatch next has something to do: the earliest retry coming
    /// due of a handler not in `skip` (those with no room in flight) and
    /// the earliest lease lapsing (`None` when there is none).
    pub async fn next_dispatch_times(&self, skip: Vec<String>) -> Result<NextDispatch, StoreError> {
        let (retry, lease): (Option<i64>, Option<i64>) = sqlx::query_as(
            "SELECT (SELECT MIN(next_attempt_at) FROM actions INDEXED BY actions_dispatch_due \
                     WHERE status = 'approved' AND handler IS NOT NULL \
                     AND handler NOT IN (SELECT value FROM json_each(?))), \
                    (SELECT MIN(lease_until) FROM actions INDEXED BY actions_running_lease \
                     WHERE status = 'running')",
        )
        .bind(serde_json::to_string(&skip)?)
        .fetch_one(&self.read)
        .await?;
        Ok(NextDispatch {
            retry: retry.map(from_ms),
            lease: lease.map(from_ms),
        })
    }

    /// An executor's asynchronous result for `attempt` (the current one or
    /// an earlier one: all share the webhook-id the executor deduplicates
    /// by). A `webhook_id` seen before is a replay ([`StoreError::Conflict`]);
    /// a result for an attempt not yet sent or for an action not running is
    /// [`StoreError::WrongState`], an unknown action [`StoreError::NotFound`].
    /// The `webhook_id` is recorded as seen whether the result is accepted
    /// or refused (a refused callback cannot be replayed either); only a
    /// fault (busy, full) leaves it unrecorded, so a retry can succeed.
    pub async fn accept_result(
        &self,
        id: &str,
        webhook_id: String,
        attempt: i64,
        outcome: Outcome,
    ) -> Result<Action, StoreError> {
        let id = id.to_owned();
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    if !record_webhook_on(conn, &webhook_id).await? {
                        return Ok(Err(StoreError::Conflict(
                            "this webhook-id was already used".to_owned(),
                        )));
                    }
                    // A refusal commits the webhook-id above; a fault rolls
                    // everything back.
                    match settle_result_on(conn, &id, attempt, &outcome).await {
                        Ok(a) => Ok(Ok(a)),
                        Err(e @ (StoreError::WrongState { .. } | StoreError::NotFound)) => {
                            Ok(Err(e))
                        }
                        Err(e) => Err(e),
                    }
                })
            })
            .await?
    }

    /// Records `webhook_id` as seen; `false` when it was seen before.
    pub async fn consume_webhook(&self, webhook_id: String) -> Result<bool, StoreError> {
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move { record_webhook_on(conn, &webhook_id).await })
            })
            .await
    }

    /// Forgets replay-protection ids older than `before` (timestamps older
    /// than the tolerance are refused anyway).
    pub async fn prune_seen_webhooks(&self, before: DateTime<Utc>) -> Result<u64, StoreError> {
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    Ok(sqlx::query("DELETE FROM seen_webhooks WHERE at < ?")
                        .bind(to_ms(before))
                        .execute(conn)
                        .await?
                        .rows_affected())
                })
            })
            .await
    }

    /// Replaces a handler's secret; the old one stays valid until `grace_until`.
    pub async fn rotate_handler_secret(
        &self,
        id: &str,
        secret: String,
        grace_until: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let id = id.to_owned();
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    let done = sqlx::query(
                        "UPDATE handlers SET previous_secret = secret, previous_secret_until = ?, secret = ?, updated_at = ? \
                         WHERE id = ? AND retired_at IS NULL",
                    )
                    .bind(to_ms(grace_until))
                    .bind(&secret)
                    .bind(to_ms(now()))
                    .bind(&id)
                    .execute(conn)
                    .await?;
                    if done.rows_affected() == 0 {
                        return Err(StoreError::NotFound);
                    }
                    Ok(())
                })
            })
            .await
    }

    /// A handler's secrets: the current one and the rotated-out one with
    /// the end of its grace period (see [`HandlerSecrets::valid_at`]).
    pub async fn handler_secret_set(&self, id: &str) -> Result<HandlerSecrets, StoreError> {
        let cols: SecretCols = sqlx::query_as(
            "SELECT secret, previous_secret, previous_secret_until FROM handlers WHERE id = ?",
        )
        .bind(id)
        .fetch_optional(&self.read)
        .await?
        .ok_or(StoreError::NotFound)?;
        Ok(HandlerSecrets::from(cols))
    }

    /// A handler's valid secrets: the current one first, then the previous
    /// one while its grace period lasts.
    pub async fn handler_secrets(&self, id: &str) -> Result<Vec<String>, StoreError> {
        Ok(self.handler_secret_set(id).await?.valid_at(now()))
    }
}

/// When dispatch next has something to do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NextDispatch {
    /// The earliest retry of an approved action.
    pub retry: Option<DateTime<Utc>>,
    /// The earliest lease of a running action to lapse.
    pub lease: Option<DateTime<Utc>>,
}

/// A handler's webhook secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerSecrets {
    /// The current secret.
    pub current: String,
    /// The rotated-out secret and when it stops being valid.
    pub previous: Option<(String, DateTime<Utc>)>,
}

/// `secret, previous_secret, previous_secret_until` of a handler row.
pub(crate) type SecretCols = (String, Option<String>, Option<i64>);

impl From<SecretCols> for HandlerSecrets {
    fn from((current, previous, until): SecretCols) -> HandlerSecrets {
        HandlerSecrets {
            current,
            previous: previous.zip(until.map(from_ms)),
        }
    }
}

impl HandlerSecrets {
    /// The secrets valid at `at`: the current one first, then the previous
    /// one while its grace period lasts.
    pub fn valid_at(&self, at: DateTime<Utc>) -> Vec<String> {
        let mut out = vec![self.current.clone()];
        if let Some((p, until)) = &self.previous
            && *until > at
        {
            out.push(p.clone());
        }
        out
    }
}

/// Records `webhook_id` as seen on the writer's connection; `false` when it
/// was seen before.
async fn record_webhook_on(
    conn: &mut sqlx::SqliteConnection,
    webhook_id: &str,
) -> Result<bool, StoreError> {
    let done =
        sqlx::query("INSERT INTO seen_webhooks (id, at) VALUES (?, ?) ON CONFLICT (id) DO NOTHING")
            .bind(webhook_id)
            .bind(to_ms(now()))
            .execute(&mut *conn)
            .await?;
    Ok(done.rows_affected() == 1)
}

/// Settles running action `id` with an executor's `outcome` for `attempt`.
async fn settle_result_on(
    conn: &mut sqlx::SqliteConnection,
    id: &str,
    attempt: i64,
    outcome: &Outcome,
) -> Result<Action, StoreError> {
    let current = actions::get_on(conn, id)
        .await?
        .ok_or(StoreError::NotFound)?;
    let attempts: i64 = sqlx::query_scalar("SELECT attempts FROM actions WHERE id = ?")
        .bind(id)
        .fetch_one(&mut *conn)
        .await?;
    let sent = result_applies(&current, attempts, attempt)?;
    settle_on(conn, id, attempts, outcome, sent.as_ref())
        .await?
        .ok_or(StoreError::WrongState {
            current: current.status.to_string(),
        })
}
