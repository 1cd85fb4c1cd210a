//! Sessions and plans on Postgres (see `crate::plans`).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sqlx::{PgConnection, Postgres as Pg};

use crate::error::StoreError;
use crate::grants::{NewGrant, from_row as grant_from_row, grant_event, insert_query};
use crate::paging::Page;
use crate::pg::{
    Postgres,
    grants::{lock_grants, only_later},
};
use crate::plan_key;
use crate::plans::{
    RunReport, list_query, plan_columns, plan_event, plan_from_row, session_columns,
    session_from_row, undecided_event,
};
use crate::request_key::RequestKey;
use crate::session_list::{self, SessionFilter};
use crate::time::{now, to_ms};
use actiongate_api::model::Json;
use actiongate_api::sessions::{Plan, PlanStep, Session};

/// How many times a run's claim picks again after losing its pick to a
/// concurrent report.
const CLAIM_TRIES: usize = 20;

async fn counts_on(conn: &mut PgConnection, id: &str) -> Result<BTreeMap<String, i64>, StoreError> {
    let rows: Vec<(String, i64)> = sqlx::query_as(
        "SELECT status, COUNT(*)::BIGINT FROM actions WHERE session = $1 GROUP BY status",
    )
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    let mut out: BTreeMap<String, i64> = rows.into_iter().collect();
    out.insert("total".to_owned(), out.values().sum());
    Ok(out)
}

async fn session_on(
    conn: &mut PgConnection,
    id: &str,
    idle_before: DateTime<Utc>,
) -> Result<Option<Session>, StoreError> {
    let row = sqlx::query(concat!(
        "SELECT ",
        session_columns!(),
        " FROM sessions WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let counts = counts_on(conn, id).await?;
    session_from_row(&row, idle_before, counts).map(Some)
}

/// Voids what session `id` held (see `crate::plans::void_session_on`):
/// revokes its grants and expires its pending plans; their events, to
/// commit with them.
async fn void_session_on(
    conn: &mut PgConnection,
    id: &str,
    at: i64,
) -> Result<Vec<crate::events::NewEvent>, StoreError> {
    let plans = sqlx::query(concat!(
        "UPDATE plans SET status = 'expired', decided_at = $1 \
         WHERE session = $2 AND status = 'pending' RETURNING ",
        plan_columns!()
    ))
    .bind(at)
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    let rows = sqlx::query(concat!(
        "UPDATE grants SET revoked_at = $1 WHERE session = $2 AND revoked_at IS NULL RETURNING ",
        crate::grants::grant_columns!()
    ))
    .bind(at)
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    let mut events = Vec::with_capacity(plans.len() + rows.len());
    for row in &plans {
        events.push(plan_event("plan.expired", &plan_from_row(row)?)?);
    }
    for row in &rows {
        events.push(grant_event("grant.revoked", &grant_from_row(row)?)?);
    }
    Ok(events)
}

impl Postgres {
    /// See `SqliteStore::touch_session`.
    pub async fn touch_session(
        &self,
        agent: String,
        id: String,
        runtime: Option<String>,
        idle_before: DateTime<Utc>,
    ) -> Result<Session, StoreError> {
        let mut tx = self.begin().await?;
        let at = to_ms(now());
        // Twice at most: retention may delete an ended session between the
        // insert that found it and the read that locks it; the second
        // insert then makes it.
        let mut found = None;
        for _ in 0..2 {
            sqlx::query(
                "INSERT INTO sessions (id, agent, runtime, first_seen, last_seen, taint_complete) \
                 VALUES ($1, $2, $3, $4, $4, 1) ON CONFLICT (id) DO NOTHING",
            )
            .bind(&id)
            .bind(&agent)
            .bind(&runtime)
            .bind(at)
            .execute(&mut *tx)
            .await?;
            found = sqlx::query_as(
                "SELECT agent, ended_at, last_seen FROM sessions WHERE id = $1 FOR UPDATE",
            )
            .bind(&id)
            .fetch_optional(&mut *tx)
            .await?;
            if found.is_some() {
                break;
            }
        }
        let (owner, ended, last): (String, Option<i64>, i64) = found.ok_or(StoreError::NotFound)?;
        if owner != agent {
            return Err(StoreError::Conflict(format!(
                "session '{id}' is another agent's"
            )));
        }
        let events = if ended.is_some() || last <= to_ms(idle_before) {
            void_session_on(&mut tx, &id, at).await?
        } else {
            Vec::new()
        };
        sqlx::query(
            "UPDATE sessions SET last_seen = $1, ended_at = NULL, ended_by = NULL, \
             runtime = COALESCE($2, runtime) WHERE id = $3",
        )
        .bind(at)
        .bind(&runtime)
        .bind(&id)
        .execute(&mut *tx)
        .await?;
        let s = session_on(&mut tx, &id, idle_before)
            .await?
            .ok_or(StoreError::NotFound)?;
        self.commit(tx, events).await?;
        Ok(s)
    }

    /// See `SqliteStore::taint_session`.
    pub async fn taint_session(
        &self,
        id: String,
        action_id: String,
        action_string: String,
    ) -> Result<(), StoreError> {
        let mut tx = self.begin().await?;
        crate::pg::sessions::record_taint_on(&mut tx, &id, &action_id, &action_string).await?;
        self.commit(tx, Vec::new()).await?;
        Ok(())
    }

    /// See `SqliteStore::link_carrier`.
    pub async fn link_carrier(&self, id: String, carrier: String) -> Result<bool, StoreError> {
        let linked =
            sqlx::query("UPDATE sessions SET carrier = COALESCE(carrier, $1) WHERE id = $2")
                .bind(carrier)
                .bind(id)
                .execute(&self.pool)
                .await?
                .rows_affected();
        Ok(linked > 0)
    }

    /// One session.
    pub async fn get_session(
        &self,
        id: &str,
        idle_before: DateTime<Utc>,
    ) -> Result<Option<Session>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        session_on(&mut conn, id, idle_before).await
    }

    /// See `SqliteStore::session_tainted_at`.
    pub async fn session_tainted_at(&self, id: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        let at: Option<Option<i64>> =
            sqlx::query_scalar("SELECT tainted_at FROM sessions WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(at.flatten().and_then(DateTime::from_timestamp_millis))
    }

    /// See `SqliteStore::session_owner`.
    pub async fn session_owner(&self, id: &str) -> Result<Option<String>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT agent FROM sessions WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    /// See `SqliteStore::list_sessions`.
    pub async fn list_sessions(
        &self,
        filter: SessionFilter,
        page: Page,
        idle_before: DateTime<Utc>,
    ) -> Result<Vec<Session>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let rows = session_list::list_query::<sqlx::Postgres>(&filter, &page, idle_before)
            .build()
            .fetch_all(&mut *conn)
            .await?;
        let ids = session_list::ids_of(&rows)?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let counts = session_list::counts_query::<sqlx::Postgres>(&ids)
            .build_query_as()
            .fetch_all(&mut *conn)
            .await?;
        session_list::page_of(&rows, &ids, counts, idle_before)
    }

    /// See `SqliteStore::end_idle_sessions`.
    pub async fn end_idle_sessions(&self, idle_before: DateTime<Utc>) -> Result<usize, StoreError> {
        let mut tx = self.begin().await?;
        let at = to_ms(now());
        // Ended when it went idle (see `SqliteStore::end_idle_sessions`).
        let timeout = (at - to_ms(idle_before)).max(0);
        let ids: Vec<String> = sqlx::query_scalar(
            "UPDATE sessions SET ended_at = last_seen + $1, ended_by = 'idle' WHERE id IN \
             (SELECT id FROM sessions WHERE ended_at IS NULL AND last_seen <= $2 \
             ORDER BY last_seen LIMIT $3 FOR UPDATE SKIP LOCKED) RETURNING id",
        )
        .bind(timeout)
        .bind(to_ms(idle_before))
        .bind(crate::plans::IDLE_BATCH)
        .fetch_all(&mut *tx)
        .await?;
        let mut events = Vec::new();
        for id in &ids {
            events.extend(void_session_on(&mut tx, id, at).await?);
        }
        self.commit(tx, events).await?;
        Ok(ids.len())
    }

    /// See `SqliteStore::oldest_open_session`.
    pub async fn oldest_open_session(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let oldest: Option<i64> =
            sqlx::query_scalar("SELECT MIN(last_seen) FROM sessions WHERE ended_at IS NULL")
                .fetch_one(&self.pool)
                .await?;
        Ok(oldest.map(crate::time::from_ms))
    }

    /// Ends session `id`, voiding its grants.
    pub async fn end_session(
        &self,
        id: String,
        by: String,
        idle_before: DateTime<Utc>,
    ) -> Result<Session, StoreError> {
        let mut tx = self.begin().await?;
        let at = to_ms(now());
        sqlx::query(
            "UPDATE sessions SET ended_at = $1, ended_by = $2 WHERE id = $3 AND ended_at IS NULL",
        )
        .bind(at)
        .bind(&by)
        .bind(&id)
        .execute(&mut *tx)
        .await?;
        let events = void_session_on(&mut tx, &id, at).await?;
        let s = session_on(&mut tx, &id, idle_before)
            .await?
            .ok_or(StoreError::NotFound)?;
        self.commit(tx, events).await?;
        Ok(s)
    }

    /// See `SqliteStore::create_plan`. Two requests under one key racing
    /// (on two daemons) insert one row: the second inserts nothing and
    /// answers the first's plan.
    pub async fn create_plan(
        &self,
        plan: Plan,
        key: Option<RequestKey>,
    ) -> Result<(Plan, bool), StoreError> {
        let mut tx = self.begin().await?;
        let inserted = plan_key::insert_query::<Pg>(&plan, key.as_ref())?
            .build()
            .execute(&mut *tx)
            .await?
            .rows_affected();
        if let (0, Some(key)) = (inserted, &key) {
            let row = plan_key::keyed_query::<Pg>(&plan.agent, key)
                .build()
                .fetch_one(&mut *tx)
                .await?;
            return Ok((plan_key::found(&row, key)?, false));
        }
        self.commit(tx, vec![plan_event("plan.requested", &plan)?])
            .await?;
        Ok((plan, true))
    }

    /// See `SqliteStore::plan_for_key`.
    pub async fn plan_for_key(
        &self,
        agent: &str,
        key: &RequestKey,
    ) -> Result<Option<Plan>, StoreError> {
        let row = plan_key::keyed_query::<Pg>(agent, key)
            .build()
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| plan_key::found(&row, key)).transpose()
    }

    /// One plan.
    pub async fn get_plan(&self, id: &str) -> Result<Plan, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            plan_columns!(),
            " FROM plans WHERE id = $1"
        ))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or(StoreError::NotFound)?;
        plan_from_row(&row)
    }

    /// See `SqliteStore::list_plans`.
    pub async fn list_plans(
        &self,
        status: Option<String>,
        page: &Page,
    ) -> Result<Vec<Plan>, StoreError> {
        let rows = list_query::<sqlx::Postgres>(status, page)
            .build()
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(plan_from_row).collect()
    }

    /// See `SqliteStore::decide_plan`.
    pub async fn decide_plan(
        &self,
        id: String,
        status: &'static str,
        by: String,
        steps: Vec<PlanStep>,
        grants: Vec<NewGrant>,
    ) -> Result<Plan, StoreError> {
        let mut tx = self.begin().await?;
        // A plan's step grants are scoped to its session and counted: they
        // allow only later actions, so nothing orders them against pending
        // ones (see `pg::grants`), unless one is not.
        if grants.iter().any(|g| !only_later(g)) {
            lock_grants(&mut tx, true).await?;
        }
        let row = sqlx::query(concat!(
            "UPDATE plans SET status = $1, decided_at = $2, decided_by = $3, steps = $4 \
             WHERE id = $5 AND status = 'pending' RETURNING ",
            plan_columns!()
        ))
        .bind(status)
        .bind(to_ms(now()))
        .bind(&by)
        .bind(serde_json::to_string(&steps)?)
        .bind(&id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else {
            let current: Option<String> =
                sqlx::query_scalar("SELECT status FROM plans WHERE id = $1")
                    .bind(&id)
                    .fetch_optional(&mut *tx)
                    .await?;
            return Err(match current {
                Some(current) => StoreError::WrongState { current },
                None => StoreError::NotFound,
            });
        };
        let plan = plan_from_row(&row)?;
        let mut events = Vec::new();
        for g in &grants {
            let row = insert_query::<sqlx::Postgres>(g, None)
                .build()
                .fetch_one(&mut *tx)
                .await?;
            events.push(grant_event("grant.created", &grant_from_row(&row)?)?);
        }
        let kind = if status == "approved" {
            "plan.approved"
        } else {
            "plan.denied"
        };
        events.push(plan_event(kind, &plan)?);
        self.commit(tx, events).await?;
        Ok(plan)
    }

    /// Appends an `action.undecided` event.
    pub async fn record_undecided(&self, agent: &str, data: Json) -> Result<(), StoreError> {
        let tx = self.begin().await?;
        self.commit(tx, vec![undecided_event(agent, data)]).await?;
        Ok(())
    }

    /// See `SqliteStore::run_claimed`.
    pub async fn run_claimed(&self, id: &str) -> Result<bool, StoreError> {
        let found: Option<i32> =
            sqlx::query_scalar("SELECT 1 FROM run_claims WHERE action_id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        Ok(found.is_some())
    }

    /// See `SqliteStore::claim_run`. Two reports may pick the same action
    /// at once: the one whose insert conflicts picks again.
    pub async fn claim_run(&self, run: RunReport) -> Result<Option<String>, StoreError> {
        for named in [run.action.clone(), None] {
            for _ in 0..CLAIM_TRIES {
                // One statement: prune what is past the look-back, pick the
                // latest unclaimed action that covers the run (an edited
                // one covers the detail approved, not the one asked), claim it.
                // `picked` without `claimed`: another report claimed that
                // one meanwhile, so pick again.
                let (claimed, picked): (Option<String>, Option<String>) = sqlx::query_as(
                    "WITH pruned AS (DELETE FROM run_claims WHERE claimed_at < $6), \
                     pick AS (SELECT id FROM actions WHERE agent = $2 AND tool = $3 \
                       AND COALESCE(team::jsonb ->> 'approved_detail', detail) = $4 \
                       AND ($5::TEXT IS NULL OR session = $5) \
                       AND created_at >= $6 \
                       AND status IN ('approved', 'running', 'completed', 'failed') \
                       AND ($7::TEXT IS NULL OR id = $7) \
                       AND NOT EXISTS (SELECT 1 FROM run_claims c WHERE c.action_id = actions.id) \
                       ORDER BY id DESC LIMIT 1), \
                     claim AS (INSERT INTO run_claims (action_id, claimed_at) \
                       SELECT id, $1 FROM pick ON CONFLICT (action_id) DO NOTHING \
                       RETURNING action_id) \
                     SELECT (SELECT action_id FROM claim), (SELECT id FROM pick)",
                )
                .bind(to_ms(now()))
                .bind(&run.agent)
                .bind(&run.tool)
                .bind(&run.detail)
                .bind(run.session.clone())
                .bind(to_ms(run.since))
                .bind(named.clone())
                .fetch_one(&self.pool)
                .await?;
                if claimed.is_some() {
                    return Ok(claimed);
                }
                if picked.is_none() {
                    break;
                }
            }
            if named.is_none() {
                break;
            }
        }
        Ok(None)
    }
}
