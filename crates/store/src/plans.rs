//! Sessions and plans on SQLite (issue 33): a session's row (whose it is,
//! when it was seen, whether it ended, what tainted it) and plans whose
//! approval stores one grant of one use per approved step, in the
//! transaction that approves them. Postgres: `pg/plans.rs`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sqlx::{QueryBuilder, Sqlite, SqliteConnection};

use crate::SqliteStore;
use crate::error::StoreError;
use crate::events::{self, NewEvent};
use crate::grants::{NewGrant, from_row as grant_from_row, grant_event, insert_query};
use crate::paging::Page;
use crate::plan_key;
use crate::request_key::RequestKey;
use crate::session_list::{self, SessionFilter};
use crate::time::{from_ms, now, opt_from_ms, to_ms};
use actiongate_api::model::Json;
use actiongate_api::sessions::{Plan, PlanStep, Session};

/// The session columns, for `concat!`.
macro_rules! session_columns {
    () => {
        "id, agent, runtime, first_seen, last_seen, ended_at, ended_by, tainted_by, taint_action, \
         tainted_at"
    };
}
pub(crate) use session_columns;

/// A run a runtime reports (`POST /v1/runs`), to be matched to a decision.
#[derive(Debug, Clone)]
pub struct RunReport {
    /// The agent that ran it.
    pub agent: String,
    /// Its tool.
    pub tool: String,
    /// Its detail.
    pub detail: String,
    /// Its session, when the runtime gave one.
    pub session: Option<String>,
    /// The action the runtime says it was, tried first.
    pub action: Option<String>,
    /// How far back a covering action may have been created.
    pub since: DateTime<Utc>,
}

/// The plan columns, for `concat!`.
macro_rules! plan_columns {
    () => {
        "id, agent, session, reason, status, steps, created_at, decided_at, decided_by"
    };
}
pub(crate) use plan_columns;

/// What every plan's id starts with, a UUIDv7 after it.
pub const PLAN_PREFIX: &str = "pln_";

/// The query of [`Store::list_plans`](crate::Store::list_plans): plans in
/// the order they were made (`created_at`, then id), from the end `page`
/// says, strictly past the plan `page.after` (nothing when there is no such
/// plan: the gate then says so).
pub(crate) fn list_query<DB>(status: Option<String>, page: &Page) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q: QueryBuilder<DB> = QueryBuilder::new(concat!(
        "SELECT ",
        plan_columns!(),
        " FROM plans WHERE 1 = 1"
    ));
    if let Some(status) = status {
        q.push(" AND status = ").push_bind(status);
    }
    let (after, order) = if page.oldest_first {
        (
            " AND (created_at, id) > ",
            " ORDER BY created_at ASC, id ASC LIMIT ",
        )
    } else {
        (
            " AND (created_at, id) < ",
            " ORDER BY created_at DESC, id DESC LIMIT ",
        )
    };
    if let Some(id) = &page.after {
        // A plan retention deleted since is placed by its id's time (its
        // `created_at` within a millisecond).
        // Any other id places nothing (an empty page, which the gate
        // answers 404).
        q.push(after)
            .push("(COALESCE((SELECT c.created_at FROM plans c WHERE c.id = ")
            .push_bind(id.clone())
            .push("), ");
        match crate::paging::id_time_ms(PLAN_PREFIX, id) {
            Some(made) => q.push_bind(made),
            None => q.push("NULL"),
        };
        q.push("), ").push_bind(id.clone()).push(")");
    }
    q.push(order).push_bind(page.limit);
    q
}

/// A session row as answered, `idle_before` telling an idle one (ended),
/// with its action counts.
pub(crate) fn session_from_row(
    row: &impl crate::row::Cols,
    idle_before: DateTime<Utc>,
    actions: BTreeMap<String, i64>,
) -> Result<Session, StoreError> {
    let ended_at = opt_from_ms(row.try_get("ended_at")?);
    let last_seen = from_ms(row.try_get("last_seen")?);
    let ended = ended_at.is_some() || last_seen <= idle_before;
    Ok(Session {
        id: row.try_get("id")?,
        agent: row.try_get("agent")?,
        runtime: row.try_get("runtime")?,
        first_seen: from_ms(row.try_get("first_seen")?),
        last_seen,
        status: if ended { "ended" } else { "active" }.to_owned(),
        // Not yet swept: it ended when it went idle, the timeout
        // (`idle_before` is now less the timeout) after it was last seen,
        // as the sweeper will store it.
        ended_at: ended_at.or(ended.then(|| from_ms(to_ms(last_seen + (now() - idle_before))))),
        // Idle past the timeout, not yet swept: ended by being idle.
        ended_by: match row.try_get::<Option<String>>("ended_by")? {
            Some(by) => Some(by),
            None => ended.then(|| "idle".to_owned()),
        },
        tainted_by: row.try_get("tainted_by")?,
        taint_action: row.try_get("taint_action")?,
        tainted_at: opt_from_ms(row.try_get("tainted_at")?),
        actions,
    })
}

/// A plan row.
pub(crate) fn plan_from_row(row: &impl crate::row::Cols) -> Result<Plan, StoreError> {
    let steps: String = row.try_get("steps")?;
    Ok(Plan {
        id: row.try_get("id")?,
        agent: row.try_get("agent")?,
        session: row.try_get("session")?,
        reason: row.try_get("reason")?,
        status: row.try_get("status")?,
        steps: serde_json::from_str::<Vec<PlanStep>>(&steps)?,
        created_at: from_ms(row.try_get("created_at")?),
        decided_at: opt_from_ms(row.try_get("decided_at")?),
        decided_by: row.try_get("decided_by")?,
    })
}

/// The event recording a plan's change.
pub(crate) fn plan_event(kind: &'static str, plan: &Plan) -> Result<NewEvent, StoreError> {
    Ok(NewEvent {
        kind,
        agent: Some(plan.agent.clone()),
        action_id: None,
        grant_id: None,
        data: Json::of(plan)?,
    })
}

/// The event recording a run no allow or approval covered.
pub(crate) fn undecided_event(agent: &str, data: Json) -> NewEvent {
    NewEvent {
        kind: "action.undecided",
        agent: Some(agent.to_owned()),
        action_id: None,
        grant_id: None,
        data,
    }
}

async fn counts_on(
    conn: &mut SqliteConnection,
    id: &str,
) -> Result<BTreeMap<String, i64>, StoreError> {
    let rows: Vec<(String, i64)> =
        sqlx::query_as("SELECT status, COUNT(*) FROM actions WHERE session = ? GROUP BY status")
            .bind(id)
            .fetch_all(&mut *conn)
            .await?;
    let mut out: BTreeMap<String, i64> = rows.into_iter().collect();
    out.insert("total".to_owned(), out.values().sum());
    Ok(out)
}

async fn session_on(
    conn: &mut SqliteConnection,
    id: &str,
    idle_before: DateTime<Utc>,
) -> Result<Option<Session>, StoreError> {
    let row = sqlx::query(concat!(
        "SELECT ",
        session_columns!(),
        " FROM sessions WHERE id = ?"
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?;
    let Some(row) = row else { return Ok(None) };
    let counts = counts_on(conn, id).await?;
    session_from_row(&row, idle_before, counts).map(Some)
}

/// Most idle sessions one sweep ends in one write.
pub(crate) const IDLE_BATCH: i64 = 500;

/// Voids what session `id` held when it ended (or went idle): revokes its
/// grants, each with its `grant.revoked` event as revoking it by hand
/// appends, and expires its pending plans (`plan.expired`), which could
/// only grant into a session that is over.
async fn void_session_on(conn: &mut SqliteConnection, id: &str, at: i64) -> Result<(), StoreError> {
    let plans = sqlx::query(concat!(
        "UPDATE plans SET status = 'expired', decided_at = ? \
         WHERE session = ? AND status = 'pending' RETURNING ",
        plan_columns!()
    ))
    .bind(at)
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    for row in &plans {
        events::insert_on(conn, &plan_event("plan.expired", &plan_from_row(row)?)?).await?;
    }
    let rows = sqlx::query(concat!(
        "UPDATE grants SET revoked_at = ? WHERE session = ? AND revoked_at IS NULL RETURNING ",
        crate::grants::grant_columns!()
    ))
    .bind(at)
    .bind(id)
    .fetch_all(&mut *conn)
    .await?;
    for row in &rows {
        events::insert_on(conn, &grant_event("grant.revoked", &grant_from_row(row)?)?).await?;
    }
    Ok(())
}

impl SqliteStore {
    /// Records that `agent` acts in session `id` now: creates it, or (when
    /// it had ended, or was idle since `idle_before`) voids its grants and
    /// opens it again; another agent's session is a conflict.
    pub async fn touch_session(
        &self,
        agent: String,
        id: String,
        runtime: Option<String>,
        idle_before: DateTime<Utc>,
    ) -> Result<Session, StoreError> {
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    let at = to_ms(now());
                    let row: Option<(String, Option<i64>, i64)> = sqlx::query_as(
                        "SELECT agent, ended_at, last_seen FROM sessions WHERE id = ?",
                    )
                    .bind(&id)
                    .fetch_optional(&mut *conn)
                    .await?;
                    match row {
                        None => {
                            sqlx::query(
                                "INSERT INTO sessions (id, agent, runtime, first_seen, last_seen, \
                                 taint_complete) VALUES (?, ?, ?, ?, ?, 1)",
                            )
                            .bind(&id)
                            .bind(&agent)
                            .bind(&runtime)
                            .bind(at)
                            .bind(at)
                            .execute(&mut *conn)
                            .await?;
                        }
                        Some((owner, _, _)) if owner != agent => {
                            return Err(StoreError::Conflict(format!(
                                "session '{id}' is another agent's"
                            )));
                        }
                        Some((_, ended, last)) => {
                            if ended.is_some() || last <= to_ms(idle_before) {
                                void_session_on(conn, &id, at).await?;
                            }
                            sqlx::query(
                                "UPDATE sessions SET last_seen = ?, ended_at = NULL, ended_by = NULL, \
                                 runtime = COALESCE(?, runtime) WHERE id = ?",
                            )
                            .bind(at)
                            .bind(&runtime)
                            .bind(&id)
                            .execute(&mut *conn)
                            .await?;
                        }
                    }
                    session_on(conn, &id, idle_before)
                        .await?
                        .ok_or(StoreError::NotFound)
                })
            })
            .await
    }

    /// Marks session `id` tainted by action `action_id` (`action_string`)
    /// unless it already is.
    pub async fn taint_session(
        &self,
        id: String,
        action_id: String,
        action_string: String,
    ) -> Result<(), StoreError> {
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    crate::sessions::record_taint_on(conn, &id, &action_id, &action_string).await
                })
            })
            .await
    }

    /// One session.
    pub async fn get_session(
        &self,
        id: &str,
        idle_before: DateTime<Utc>,
    ) -> Result<Option<Session>, StoreError> {
        let mut conn = self.read.acquire().await?;
        session_on(&mut conn, id, idle_before).await
    }

    /// Records that key session `carrier` named session `id` over `/mcp`,
    /// unless another did first: a taint recorded on `id` from now on is
    /// recorded on `carrier` too. False when `id` is not stored (yet).
    pub async fn link_carrier(&self, id: String, carrier: String) -> Result<bool, StoreError> {
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    let linked = sqlx::query(
                        "UPDATE sessions SET carrier = COALESCE(carrier, ?) WHERE id = ?",
                    )
                    .bind(&carrier)
                    .bind(&id)
                    .execute(&mut *conn)
                    .await?
                    .rows_affected();
                    Ok(linked > 0)
                })
            })
            .await
    }

    /// When session `id` was tainted, if it is (its row alone: no counts).
    pub async fn session_tainted_at(&self, id: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        let at: Option<Option<i64>> =
            sqlx::query_scalar("SELECT tainted_at FROM sessions WHERE id = ?")
                .bind(id)
                .fetch_optional(&self.read)
                .await?;
        Ok(at.flatten().and_then(DateTime::from_timestamp_millis))
    }

    /// The agent session `id` belongs to, if it was ever used.
    pub async fn session_owner(&self, id: &str) -> Result<Option<String>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT agent FROM sessions WHERE id = ?")
                .bind(id)
                .fetch_optional(&self.read)
                .await?,
        )
    }

    /// A page of sessions `filter` holds, by when they began (see
    /// [`crate::session_list::list_query`]).
    pub async fn list_sessions(
        &self,
        filter: SessionFilter,
        page: Page,
        idle_before: DateTime<Utc>,
    ) -> Result<Vec<Session>, StoreError> {
        let mut conn = self.read.acquire().await?;
        let rows = session_list::list_query::<Sqlite>(&filter, &page, idle_before)
            .build()
            .fetch_all(&mut *conn)
            .await?;
        let ids = session_list::ids_of(&rows)?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let counts = session_list::counts_query::<Sqlite>(&ids)
            .build_query_as()
            .fetch_all(&mut *conn)
            .await?;
        session_list::page_of(&rows, &ids, counts, idle_before)
    }

    /// Ends the open sessions idle since `idle_before`, voiding their
    /// grants: the [`IDLE_BATCH`] seen longest ago, so that one write never
    /// holds the writer for long (the sweep comes back for the rest).
    pub async fn end_idle_sessions(&self, idle_before: DateTime<Utc>) -> Result<usize, StoreError> {
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    let at = to_ms(now());
                    // Ended when it went idle: the timeout after it was
                    // last seen (as a read before this sweep says).
                    let timeout = (at - to_ms(idle_before)).max(0);
                    let ids: Vec<String> = sqlx::query_scalar(
                        "UPDATE sessions SET ended_at = last_seen + ?, ended_by = 'idle' WHERE id IN \
                         (SELECT id FROM sessions WHERE ended_at IS NULL AND last_seen <= ? \
                         ORDER BY last_seen LIMIT ?) RETURNING id",
                    )
                    .bind(timeout)
                    .bind(to_ms(idle_before))
                    .bind(IDLE_BATCH)
                    .fetch_all(&mut *conn)
                    .await?;
                    for id in &ids {
                        void_session_on(conn, id, at).await?;
                    }
                    Ok(ids.len())
                })
            })
            .await
    }

    /// When the open session seen longest ago was last seen.
    pub async fn oldest_open_session(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let oldest: Option<i64> =
            sqlx::query_scalar("SELECT MIN(last_seen) FROM sessions WHERE ended_at IS NULL")
                .fetch_one(&self.read)
                .await?;
        Ok(oldest.map(from_ms))
    }

    /// Ends session `id`, voiding its grants (ending it again changes nothing).
    pub async fn end_session(
        &self,
        id: String,
        by: String,
        idle_before: DateTime<Utc>,
    ) -> Result<Session, StoreError> {
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    let at = to_ms(now());
                    sqlx::query(
                        "UPDATE sessions SET ended_at = ?, ended_by = ? WHERE id = ? AND ended_at IS NULL",
                    )
                    .bind(at)
                    .bind(&by)
                    .bind(&id)
                    .execute(&mut *conn)
                    .await?;
                    void_session_on(conn, &id, at).await?;
                    session_on(conn, &id, idle_before)
                        .await?
                        .ok_or(StoreError::NotFound)
                })
            })
            .await
    }

    /// Stores a pending plan and its `plan.requested` event; under an
    /// idempotency key `agent` used before for the same request, the plan
    /// that made instead, unchanged (`false`: not created now).
    pub async fn create_plan(
        &self,
        plan: Plan,
        key: Option<RequestKey>,
    ) -> Result<(Plan, bool), StoreError> {
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    if let Some(key) = &key
                        && let Some(row) = plan_key::keyed_query::<Sqlite>(&plan.agent, key)
                            .build()
                            .fetch_optional(&mut *conn)
                            .await?
                    {
                        return Ok((plan_key::found(&row, key)?, false));
                    }
                    plan_key::insert_query::<Sqlite>(&plan, key.as_ref())?
                        .build()
                        .execute(&mut *conn)
                        .await?;
                    events::insert_on(conn, &plan_event("plan.requested", &plan)?).await?;
                    Ok((plan, true))
                })
            })
            .await
    }

    /// The plan `agent` asked for under `key`, if any; a conflict when
    /// that was another request.
    pub async fn plan_for_key(
        &self,
        agent: &str,
        key: &RequestKey,
    ) -> Result<Option<Plan>, StoreError> {
        let row = plan_key::keyed_query::<Sqlite>(agent, key)
            .build()
            .fetch_optional(&self.read)
            .await?;
        row.map(|row| plan_key::found(&row, key)).transpose()
    }

    /// One plan.
    pub async fn get_plan(&self, id: &str) -> Result<Plan, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            plan_columns!(),
            " FROM plans WHERE id = ?"
        ))
        .bind(id)
        .fetch_optional(&self.read)
        .await?
        .ok_or(StoreError::NotFound)?;
        plan_from_row(&row)
    }

    /// A page of plans, newest (or oldest) first; only in `status` when given.
    pub async fn list_plans(
        &self,
        status: Option<String>,
        page: &Page,
    ) -> Result<Vec<Plan>, StoreError> {
        let rows = list_query::<Sqlite>(status, page)
            .build()
            .fetch_all(&self.read)
            .await?;
        rows.iter().map(plan_from_row).collect()
    }

    /// Decides pending plan `id` (compare-and-set): `approved` with its
    /// steps as decided and the grants they make, stored in the same
    /// transaction, or `denied`.
    pub async fn decide_plan(
        &self,
        id: String,
        status: &'static str,
        by: String,
        steps: Vec<PlanStep>,
        grants: Vec<NewGrant>,
    ) -> Result<Plan, StoreError> {
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    let row = sqlx::query(concat!(
                        "UPDATE plans SET status = ?, decided_at = ?, decided_by = ?, steps = ? \
                         WHERE id = ? AND status = 'pending' RETURNING ",
                        plan_columns!()
                    ))
                    .bind(status)
                    .bind(to_ms(now()))
                    .bind(&by)
                    .bind(serde_json::to_string(&steps)?)
                    .bind(&id)
                    .fetch_optional(&mut *conn)
                    .await?;
                    let Some(row) = row else {
                        let current: Option<String> =
                            sqlx::query_scalar("SELECT status FROM plans WHERE id = ?")
                                .bind(&id)
                                .fetch_optional(&mut *conn)
                                .await?;
                        return Err(match current {
                            Some(current) => StoreError::WrongState { current },
                            None => StoreError::NotFound,
                        });
                    };
                    let plan = plan_from_row(&row)?;
                    for g in &grants {
                        let row = insert_query::<sqlx::Sqlite>(g, None)
                            .build()
                            .fetch_one(&mut *conn)
                            .await?;
                        let grant = grant_from_row(&row)?;
                        events::insert_on(conn, &grant_event("grant.created", &grant)?).await?;
                    }
                    let kind = if status == "approved" {
                        "plan.approved"
                    } else {
                        "plan.denied"
                    };
                    events::insert_on(conn, &plan_event(kind, &plan)?).await?;
                    Ok(plan)
                })
            })
            .await
    }

    /// Appends an `action.undecided` event about `agent`'s run `data`.
    pub async fn record_undecided(&self, agent: &str, data: Json) -> Result<(), StoreError> {
        let ev = undecided_event(agent, data);
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move { events::insert_on(conn, &ev).await })
            })
            .await
    }

    /// Whether a reported run claimed action `id` (within the look-back
    /// that claims are kept for).
    pub async fn run_claimed(&self, id: &str) -> Result<bool, StoreError> {
        let mut conn = self.read.acquire().await?;
        let found: Option<i64> = sqlx::query_scalar("SELECT 1 FROM run_claims WHERE action_id = ?")
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
        Ok(found.is_some())
    }

    /// Claims for a reported run the allowed or approved action that covers
    /// it: `run.action` when it is one, else the latest of the agent's
    /// actions on that tool and detail (in the run's session when given)
    /// created since `run.since`, that no earlier run claimed. Each action
    /// covers one run. Claims older than `run.since` are pruned first.
    pub async fn claim_run(&self, run: RunReport) -> Result<Option<String>, StoreError> {
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    sqlx::query("DELETE FROM run_claims WHERE claimed_at < ?")
                        .bind(to_ms(run.since))
                        .execute(&mut *conn)
                        .await?;
                    // The action named first; when it does not cover the
                    // run, any other may. An action an approver edited
                    // covers the detail approved, never the one asked.
                    for named in [run.action.clone(), None] {
                        let claimed: Option<String> = sqlx::query_scalar(
                            "INSERT INTO run_claims (action_id, claimed_at) \
                             SELECT id, ? FROM actions WHERE agent = ? AND tool = ? \
                             AND COALESCE(json_extract(team, '$.approved_detail'), detail) = ? \
                             AND (? IS NULL OR session = ?) AND created_at >= ? \
                             AND status IN ('approved', 'running', 'completed', 'failed') \
                             AND (? IS NULL OR id = ?) \
                             AND NOT EXISTS (SELECT 1 FROM run_claims c WHERE c.action_id = actions.id) \
                             ORDER BY id DESC LIMIT 1 RETURNING action_id",
                        )
                        .bind(to_ms(now()))
                        .bind(&run.agent)
                        .bind(&run.tool)
                        .bind(&run.detail)
                        .bind(run.session.clone())
                        .bind(run.session.clone())
                        .bind(to_ms(run.since))
                        .bind(named.clone())
                        .bind(named.clone())
                        .fetch_optional(&mut *conn)
                        .await?;
                        if claimed.is_some() || named.is_none() {
                            return Ok(claimed);
                        }
                    }
                    Ok(None)
                })
            })
            .await
    }
}
