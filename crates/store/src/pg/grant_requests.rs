//! Grant requests on Postgres. Answering one is a compare-and-set on its
//! row (`status = 'pending'`): two operators on two nodes, or an operator
//! and a sweeper, produce one answer; approving creates the grant in the
//! same transaction (`pg::grants::create_on`).

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::{PgConnection, Postgres as Pg};

use crate::error::StoreError;
use crate::events::NewEvent;
use crate::grant_requests::{
    KEYED, NewGrantRequest, decode, event, keyed_id, list_query, request_columns,
};
use crate::grants::{GrantCreated, NewGrant};
use crate::paging::Page;
use crate::pg::Postgres;
use crate::pg::grants;
use crate::request_key::RequestKey;
use crate::time::{from_ms, now, to_ms};
use actiongate_api::model::{GrantRequest, GrantRequestStatus};

/// A request row with its grant, if it has one.
async fn with_grant(
    conn: &mut PgConnection,
    row: &sqlx::postgres::PgRow,
) -> Result<GrantRequest, StoreError> {
    let grant_id: Option<String> = crate::row::Cols::try_get(row, "grant_id")?;
    let grant = match grant_id {
        Some(id) => grants::get_on(conn, &id).await?,
        None => None,
    };
    decode(row, grant)
}

/// See `grant_requests::keyed_on`.
async fn keyed_on(
    conn: &mut PgConnection,
    agent: &str,
    key: &RequestKey,
) -> Result<Option<String>, StoreError> {
    let found = crate::request_key::keyed_query::<Pg>(KEYED, agent, key)
        .build_query_as()
        .fetch_optional(&mut *conn)
        .await?;
    keyed_id(found, key)
}

async fn get_on(conn: &mut PgConnection, id: &str) -> Result<GrantRequest, StoreError> {
    let row = sqlx::query(concat!(
        "SELECT ",
        request_columns!(),
        " FROM grant_requests WHERE id = $1"
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await?
    .ok_or(StoreError::NotFound)?;
    with_grant(conn, &row).await
}

/// Moves a pending request to `status`, or says where it is.
async fn settle_on(
    conn: &mut PgConnection,
    id: &str,
    status: GrantRequestStatus,
    decided_by: &str,
    deny_reason: Option<&str>,
    grant_id: Option<&str>,
) -> Result<(), StoreError> {
    let done = sqlx::query(
        "UPDATE grant_requests SET status = $1, decided_at = $2, decided_by = $3, deny_reason = $4, \
         grant_id = $5 WHERE id = $6 AND status = 'pending'",
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

impl Postgres {
    /// Stores a pending grant request.
    pub async fn create_grant_request(
        &self,
        new: NewGrantRequest,
    ) -> Result<GrantRequest, StoreError> {
        Ok(self.create_grant_request_on(new, None).await?.0)
    }

    /// See `SqliteStore::create_grant_request_once`. Two requests under
    /// one key racing (on two daemons) insert one row: the second inserts
    /// nothing and answers the first's.
    pub async fn create_grant_request_once(
        &self,
        new: NewGrantRequest,
        key: RequestKey,
    ) -> Result<(GrantRequest, bool), StoreError> {
        self.create_grant_request_on(new, Some(key)).await
    }

    /// See `SqliteStore::grant_request_for_key`.
    pub async fn grant_request_for_key(
        &self,
        agent: &str,
        key: &RequestKey,
    ) -> Result<Option<GrantRequest>, StoreError> {
        let mut conn = self.pool.acquire().await?;
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
        let mut tx = self.begin().await?;
        let inserted = sqlx::query(
            "INSERT INTO grant_requests (id, agent, handler, permission, scope, reason, expires, status, \
             deadline, created_at, session, uses, idempotency_key, request_hash) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $9, $10, $11, $12, $13) \
             ON CONFLICT (agent, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING",
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
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if let (0, Some(key)) = (inserted, &key) {
            let id = keyed_on(&mut tx, &new.agent, key)
                .await?
                .ok_or(StoreError::NotFound)?;
            return Ok((get_on(&mut tx, &id).await?, false));
        }
        let r = get_on(&mut tx, &new.id).await?;
        self.commit(tx, vec![event("grant_request.created", &r)?])
            .await?;
        Ok((r, true))
    }

    /// Approves a pending request by creating `grant`, in one transaction.
    pub async fn approve_grant_request(
        &self,
        id: &str,
        grant: NewGrant,
    ) -> Result<(GrantRequest, GrantCreated), StoreError> {
        let candidates = self.pending_covered(&grant).await?;
        let mut tx = self.begin().await?;
        let decided_by = grant.granted_by.clone();
        let grant_id = grant.id.clone();
        settle_on(
            &mut tx,
            id,
            GrantRequestStatus::Approved,
            &decided_by,
            None,
            Some(&grant_id),
        )
        .await?;
        let mut events: Vec<NewEvent> = Vec::new();
        let created = grants::create_on(
            &mut tx,
            grant,
            None,
            None,
            self.default_profile.as_ref(),
            &candidates,
            &mut events,
        )
        .await?;
        let r = get_on(&mut tx, id).await?;
        events.push(event("grant_request.approved", &r)?);
        self.commit(tx, events).await?;
        Ok((r, created))
    }

    /// Denies a pending request.
    pub async fn deny_grant_request(
        &self,
        id: &str,
        decided_by: String,
        reason: Option<String>,
    ) -> Result<GrantRequest, StoreError> {
        let mut tx = self.begin().await?;
        settle_on(
            &mut tx,
            id,
            GrantRequestStatus::Denied,
            &decided_by,
            reason.as_deref(),
            None,
        )
        .await?;
        let r = get_on(&mut tx, id).await?;
        self.commit(tx, vec![event("grant_request.denied", &r)?])
            .await?;
        Ok(r)
    }

    /// Expires every pending request whose deadline is at or before `at`.
    /// Nodes sweeping at once expire each once: the rows are locked in id
    /// order, and a node that waited for another's lock finds them no
    /// longer pending.
    pub async fn expire_grant_requests(
        &self,
        at: DateTime<Utc>,
    ) -> Result<Vec<GrantRequest>, StoreError> {
        let mut tx = self.begin().await?;
        let rows = sqlx::query(concat!(
            "UPDATE grant_requests SET status = 'expired', decided_at = $1, decided_by = 'deadline' \
             WHERE id IN (SELECT id FROM grant_requests WHERE status = 'pending' AND deadline <= $1 \
             ORDER BY id FOR UPDATE) AND status = 'pending' RETURNING ",
            request_columns!()
        ))
        .bind(to_ms(at))
        .fetch_all(&mut *tx)
        .await?;
        let mut expired = Vec::with_capacity(rows.len());
        for row in &rows {
            expired.push(with_grant(&mut tx, row).await?);
        }
        // In id order, as on SQLite.
        expired.sort_by(|a, b| a.id.cmp(&b.id));
        let events = expired
            .iter()
            .map(|r| event("grant_request.expired", r))
            .collect::<Result<Vec<_>, _>>()?;
        self.commit(tx, events).await?;
        Ok(expired)
    }

    /// The earliest deadline among pending grant requests.
    pub async fn next_grant_request_deadline(&self) -> Result<Option<DateTime<Utc>>, StoreError> {
        let ms: Option<i64> =
            sqlx::query_scalar("SELECT MIN(deadline) FROM grant_requests WHERE status = 'pending'")
                .fetch_one(&self.pool)
                .await?;
        Ok(ms.map(from_ms))
    }

    /// One grant request.
    pub async fn get_grant_request(&self, id: &str) -> Result<GrantRequest, StoreError> {
        let mut conn = self.pool.acquire().await?;
        get_on(&mut conn, id).await
    }

    /// Grant requests, newest first; only `agent`'s and/or in `status` when given.
    pub async fn list_grant_requests(
        &self,
        agent: Option<&str>,
        status: Option<GrantRequestStatus>,
        page: &Page,
    ) -> Result<Vec<GrantRequest>, StoreError> {
        let mut conn = self.pool.acquire().await?;
        let rows = list_query::<Pg>(agent, status, page)
            .build()
            .fetch_all(&mut *conn)
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            out.push(with_grant(&mut conn, row).await?);
        }
        Ok(out)
    }
}
