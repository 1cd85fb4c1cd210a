//! Grant requests: an agent asks a human for a permission and may block on
//! the answer; approving creates the grant (which approves what it covers).

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sqlx::{QueryBuilder, Sqlite, SqliteConnection};

use crate::SqliteStore;
use crate::error::StoreError;
use crate::events::{self, NewEvent};
use crate::grants::{self, GrantCreated, NewGrant};
use crate::paging::Page;
use crate::request_key::RequestKey;
use crate::time::{from_ms, now, opt_from_ms, to_ms};
use actiongate_api::model::{GrantRecord, GrantRequest, GrantRequestStatus, Json};

/// A grant request about to be stored.
#[derive(Debug, Clone)]
pub struct NewGrantRequest {
    /// Request id.
    pub id: String,
    /// Asking agent.
    pub agent: String,
    /// Handler.
    pub handler: String,
    /// Permission.
    pub permission: String,
    /// Scope asked for.
    pub scope: Map<String, Value>,
    /// Why.
    pub reason: Option<String>,
    /// Expiry asked for, in the grammar.
    pub expires: Option<String>,
    /// When it expires unanswered.
    pub deadline: DateTime<Utc>,
    /// The session the grant is to be limited to.
    pub session: Option<String>,
    /// The number of allowed actions the grant is to be limited to.
    pub uses: Option<i64>,
}

/// The grant request columns, in the order [`decode`] reads them, as a
/// literal for `concat!`.
macro_rules! request_columns {
    () => {
        "id, agent, handler, permission, scope, reason, expires, status, deadline, created_at, \
         decided_at, decided_by, deny_reason, grant_id, session, uses"
    };
}
pub(crate) use request_columns;

async fn from_row_on(
    conn: &mut SqliteConnection,
    row: &impl crate::row::Cols,
) -> Result<GrantRequest, StoreError> {
    let grant_id: Option<String> = row.try_get("grant_id")?;
    let grant = match grant_id {
        Some(id) => {
            let g = sqlx::query(concat!(
                "SELECT ",
                grants::grant_columns!(),
                " FROM grants WHERE id = ?"
            ))
            .bind(&id)
            .fetch_optional(&mut *conn)
            .await?;
            g.as_ref().map(grants::from_row).transpose()?
        }
        None => None,
    };
    decode(row, grant)
}

pub(crate) fn decode(
    row: &impl crate::row::Cols,
    grant: Option<GrantRecord>,
) -> Result<GrantRequest, StoreError> {
    let scope: String = row.try_get("scope")?;
    let status: String = row.try_get("status")?;
    Ok(GrantRequest {
        id: row.try_get("id")?,
        agent: row.try_get("agent")?,
        handler: row.try_get("handler")?,
        permission: row.try_get("permission")?,
        scope: serde_json::from_str(&scope)?,
        reason: row.try_get("reason")?,
        expires: row.try_get("expires")?,
        status: status.parse().map_err(StoreError::Corrupt)?,
        deadline: from_ms(row.try_get("deadline")?),
        created_at: from_ms(row.try_get("created_at")?),
        decided_at: opt_from_ms(row.try_get("decided_at")?),
        decided_by: row.try_get("decided_by")?,
        deny_reason: row.try_get("deny_reason")?,
        session: row.try_get("session")?,
        uses: row.try_get("uses")?,
        grant,
    })
}

pub(crate) fn event(kind: &'static str, r: &GrantRequest) -> Result<NewEvent, StoreError> {
    Ok(NewEvent {
        kind,
        agent: Some(r.agent.clone()),
        action_id: None,
        grant_id: r.grant.as_ref().map(|g| g.id.clone()),
        data: Json::of(r)?,
    })
}

/// The id and request hash of a grant request, by agent (for
/// [`crate::request_key::keyed_query`]).
pub(crate) const KEYED: &str = "SELECT id, request_hash FROM grant_requests WHERE agent = ";

/// The id of the grant request stored under `key` (`found`, its id and
/// request hash), if any; a conflict when that was another request.
pub(crate) fn keyed_id(
    found: Option<(String, Option<String>)>,
    key: &RequestKey,
) -> Result<Option<String>, StoreError> {
    found
        .map(|(id, hash)| key.same_request(hash, "grant request").map(|()| id))
        .transpose()
}

/// The id of the grant request `agent` made under `key`, if any; a
/// conflict when that was another request.
async fn keyed_on(
    conn: &mut SqliteConnection,
    agent: &str,
    key: &RequestKey,
) -> Result<Option<String>, StoreError> {
    let found = crate::request_key::keyed_query::<Sqlite>(KEYED, agent, key)
        .build_query_as()
        .fetch_optional(&mut *conn)
        .await?;
    keyed_id(found, key)
}

async fn get_on(conn: &mut SqliteConnection, id: &str) -> Result<GrantRequest, StoreError> {
    let row = sqlx::query(concat!(
        "SELECT ",
        request_columns!(),
        " FROM grant_requests WHERE id = ?"
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(StoreError::NotFound)?;
    from_row_on(conn, &row).await
}

/// Moves a pending request to `status`, or says where it is.
async fn settle_on(
    conn: &mut SqliteConnection,
    id: &str,
    status: GrantRequestStatus,
    decided_by: &str,
    deny_reason: Option<&str>,
    grant_id: Option<&str>,
) -> Result<(), StoreError> {
    let done = sqlx::query(
        "UPDATE grant_requests SET status = ?, decided_at = ?, decided_by = ?, deny_reason = ?, grant_id = ? \
         WHERE id = ? AND status = 'pending'",
    )
    .bind(status.as_str())
    .bind(to_ms(now()))
    .bind(decided_by)
    .bind(deny_reason)
    .bind(grant_id)
    .bind(id)
    .execute(&mut *conn)
    .await?;
    if done.rows_affected() == 0 {
        let current = get_on(conn, id).await?;
        return Err(StoreError::WrongState {
            current: current.status.as_str().to_owned(),
        });
    }
    Ok(())
}

/// The query of [`Store::list_grant_requests`](crate::Store::list_grant_requests).
pub(crate) fn list_query<DB>(
    agent: Option<&str>,
    status: Option<GrantRequestStatus>,
    page: &Page,
) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> &'static str: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q: QueryBuilder<DB> = QueryBuilder::new(concat!(
        "SELECT ",
        request_columns!(),
        " FROM grant_requests WHERE 1 = 1"
    ));
    if let Some(agent) = agent {
        q.push(" AND agent = ").push_bind(agent.to_owned());
    }
    if let Some(status) = status {
        q.push(" AND status = ").push_bind(status.as_str());
    }
    // Request ids are UUIDv7 (`grq_…`): their order is the order they
    // were made in.
    crate::paging::by_id(&mut q, page.after.as_deref(), page.limit, page.oldest_first);
    q
}

impl SqliteStore {
    /// Stores a pending grant request.
    pub async fn create_grant_request(
        &self,
        new: NewGrantRequest,
    ) -> Result<GrantRequest, StoreError> {
        Ok(self.create_grant_request_on(new, None).await?.0)
    }

    /// Stores a pending grant request under the agent's idempotency key:
    /// one it used before for the same request answers the request that
    /// made, unchanged (`false`: not created now); another request under it
    /// is a conflict.
    pub async fn create_grant_request_once(
        &self,
        new: NewGrantRequest,
        key: RequestKey,
    ) -> Result<(GrantRequest, bool), StoreError> {
        self.create_grant_request_on(new, Some(key)).await
    }

    /// The grant request `agent` made under `key`, if any; a conflict when
    /// that was another request.
    pub async fn grant_request_for_key(
        &self,
        agent: &str,
        key: &RequestKey,
    ) -> Result<Option<GrantRequest>, StoreError> {
        let mut conn = self.read.acquire().await?;
        match keyed_on(&mut conn, agent, key).await? {
            Some(id) => Ok(Some(get_on(&mut conn, &id).await?)),
            None => Ok(None),
        }
    }

    async fn create_grant_request_on(
        &self,
        new: NewGrantRequest,
        key: Option<RequestKey>,
    ) -> Result<(GrantRequest, bool), StoreError> {
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    if let Some(key) = &key
                        && let Some(id) = keyed_on(conn, &new.agent, key).await?
                    {
                        return Ok((get_on(conn, &id).await?, false));
                    }
                    sqlx::query(
                        "INSERT INTO grant_requests (id, agent, handler, permission, scope, reason, expires, status, \
                         deadline, created_at, session, uses, idempotency_key, request_hash) \
                         VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?, ?, ?, ?)",
                    )
                    .bind(&new.id)
                    .bind(&new.agent)
                    .bind(&new.handler)
                    .bind(&new.permission)
                    .bind(Value::Object(new.scope.clone()).to_string())
                    .bind(&new.reason)
                    .bind(&new.expires)
                    .bind(to_ms(new.deadline))
                    .bind(to_ms(now()))
                    .bind(&new.session)
                    .bind(new.uses)
                    .bind(key.as_ref().map(|k| &k.key))
                    .bind(key.as_ref().map(|k| &k.request_hash))
                    .execute(&mut *conn)
                    .await?;
                    let r = get_on(conn, &new.id).await?;
                    events::insert_on(conn, &event("grant_request.created", &r)?).await?;
                    Ok((r, true))
                })
            })
            .await
    }

    /// Approves a pending request by creating `grant`, in one transaction.
    pub async fn approve_grant_request(
        &self,
        id: &str,
        grant: NewGrant,
    ) -> Result<(GrantRequest, GrantCreated), StoreError> {
        let id = id.to_owned();
        let default_profile = self.default_profile.clone();
        let candidates = self.pending_covered(&grant).await?;
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    let decided_by = grant.granted_by.clone();
                    let grant_id = grant.id.clone();
                    settle_on(
                        conn,
                        &id,
                        GrantRequestStatus::Approved,
                        &decided_by,
                        None,
                        Some(&grant_id),
                    )
                    .await?;
                    let created = grants::create_on(
                        conn,
                        grant,
                        None,
                        None,
                        default_profile.as_ref(),
                        &candidates,
                    )
                    .await?;
                    let r = get_on(conn, &id).await?;
                    events::insert_on(conn, &event("grant_request.approved", &r)?).await?;
                    Ok((r, created))
                })
            })
            .await
    }

    /// Denies a pending request.
    pub async fn deny_grant_request(
        &self,
        id: &str,
        decided_by: String,
        reason: Option<String>,
    ) -> Result<GrantRequest, StoreError> {
        let id = id.to_owned();
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    settle_on(
                        conn,
                        &id,
                        GrantRequestStatus::Denied,
                        &decided_by,
                        reason.as_deref(),
                        None,
                    )
                    .await?;
                    let r = get_on(conn, &id).await?;
                    events::insert_on(conn, &event("grant_request.denied", &r)?).await?;
                    Ok(r)
                })
            })
            .await
    }

    /// Expires every pending request whose deadline is at or before `at`.
    pub async fn expire_grant_requests(
        &self,
        at: DateTime<Utc>,
    ) -> Result<Vec<GrantRequest>, StoreError> {
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    let ids: Vec<String> = sqlx::query_scalar(
                        "UPDATE grant_requests SET status = 'expired', decided_at = ?1, decided_by = 'deadline' \
                         WHERE status = 'pending' AND deadline <= ?1 RETURNING id",
                    )
                    .bind(to_ms(at))
                    .fetch_all(&mut *conn)
                    .await?;
                    let mut expired = Vec::with_capacity(ids.len());
                    for id in ids {
                        let r = get_on(conn, &id).await?;
                        events::insert_on(conn, &event("grant_request.expired", &r)?).await?;
                        expired.push(r);
                    }
                    Ok(expired)
                })
            })
            .await
    }

    /// The earliest deadline among pending grant requests.
    pub async fn next_grant_request_deadline(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let ms: Option<i64> =
            sqlx::query_scalar("SELECT MIN(deadline) FROM grant_requests WHERE status = 'pending'")
                .fetch_one(&self.read)
                .await?;
        Ok(ms.map(from_ms))
    }

    /// One grant request.
    pub async fn get_grant_request(&self, id: &str) -> Result<GrantRequest, StoreError> {
        let mut conn = self.read.acquire().await?;
        get_on(&mut conn, id).await
    }

    /// A page of grant requests, newest (or oldest) first; only `agent`'s
    /// and/or in `status` when given.
    pub async fn list_grant_requests(
        &self,
        agent: Option<&str>,
        status: Option<GrantRequestStatus>,
        page: &Page,
    ) -> Result<Vec<GrantRequest>, StoreError> {
        let mut conn = self.read.acquire().await?;
        let mut q = list_query::<Sqlite>(agent, status, page);
        let rows = q.build().fetch_all(&mut *conn).await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            out.push(from_row_on(&mut conn, row).await?);
        }
        Ok(out)
    }
}
