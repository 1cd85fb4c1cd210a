//! API keys, stored only as hashes.

use crate::SqliteStore;
use crate::error::StoreError;
use crate::time::{from_ms, now, opt_from_ms, to_ms};
use actiongate_api::model::{ApiKey, Role};

/// A key about to be stored; the caller hashes the secret.
#[derive(Debug, Clone)]
pub struct NewKey {
    /// Key id (public).
    pub id: String,
    /// Human-readable name.
    pub name: String,
    /// What it may do.
    pub role: Role,
    /// The agent it acts as.
    pub agent: Option<String>,
    /// Hex SHA-256 of the secret key.
    pub hash: String,
}

macro_rules! key_columns {
    () => {
        "id, name, role, agent, created_at, revoked_at"
    };
}
pub(crate) use key_columns;

/// How many key ids one read of [`active_among`] names.
pub(crate) const KEYS_PER_READ: usize = 500;

/// `SELECT id` of those of `ids` that are active.
pub(crate) fn active_among<DB>(ids: &[String]) -> sqlx::QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q =
        sqlx::QueryBuilder::new("SELECT id FROM api_keys WHERE revoked_at IS NULL AND id IN (");
    let mut list = q.separated(", ");
    for id in ids {
        list.push_bind(id.clone());
    }
    q.push(")");
    q
}

/// Those of `chunk` not among `active` (what [`active_among`] answered).
pub(crate) fn not_active(chunk: &[String], active: Vec<String>) -> impl Iterator<Item = String> {
    let active: std::collections::HashSet<String> = active.into_iter().collect();
    chunk
        .iter()
        .filter(move |id| !active.contains(*id))
        .cloned()
}

pub(crate) fn from_row(row: &impl crate::row::Cols) -> Result<ApiKey, StoreError> {
    let role: String = row.try_get("role")?;
    Ok(ApiKey {
        id: row.try_get("id")?,
        name: row.try_get("name")?,
        role: role.parse().map_err(StoreError::Corrupt)?,
        agent: row.try_get("agent")?,
        created_at: from_ms(row.try_get("created_at")?),
        revoked_at: opt_from_ms(row.try_get("revoked_at")?),
    })
}

impl SqliteStore {
    /// Stores a new key.
    pub async fn create_key(&self, key: NewKey) -> Result<ApiKey, StoreError> {
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    let row = sqlx::query(concat!(
                        "INSERT INTO api_keys (id, name, role, agent, hash, created_at) \
                         VALUES (?, ?, ?, ?, ?, ?) RETURNING ",
                        key_columns!()
                    ))
                    .bind(&key.id)
                    .bind(&key.name)
                    .bind(key.role.as_str())
                    .bind(&key.agent)
                    .bind(&key.hash)
                    .bind(to_ms(now()))
                    .fetch_one(conn)
                    .await?;
                    from_row(&row)
                })
            })
            .await
    }

    /// The live (not revoked) key with this hash.
    pub async fn find_key(&self, hash: &str) -> Result<Option<ApiKey>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            key_columns!(),
            " FROM api_keys WHERE hash = ? AND revoked_at IS NULL"
        ))
        .bind(hash)
        .fetch_optional(&self.read)
        .await?;
        row.as_ref().map(from_row).transpose()
    }

    /// Every key, newest first.
    pub async fn list_keys(&self) -> Result<Vec<ApiKey>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            key_columns!(),
            " FROM api_keys ORDER BY created_at DESC, id"
        ))
        .fetch_all(&self.read)
        .await?;
        rows.iter().map(from_row).collect()
    }

    /// Revokes a key; revoking twice returns the already revoked key.
    pub async fn revoke_key(&self, id: &str) -> Result<ApiKey, StoreError> {
        let id = id.to_owned();
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    let row = sqlx::query(concat!("UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ? RETURNING ", key_columns!()))
                    .bind(to_ms(now()))
                    .bind(&id)
                    .fetch_optional(conn)
                    .await?;
                    row.as_ref().map(from_row).transpose()?.ok_or(StoreError::NotFound)
                })
            })
            .await
    }

    /// Whether key `id` exists and is not revoked.
    pub async fn key_active(&self, id: &str) -> Result<bool, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM api_keys WHERE id = ? AND revoked_at IS NULL)",
        )
        .bind(id)
        .fetch_one(&self.read)
        .await?)
    }

    /// Those of `ids` that are revoked or unknown.
    pub async fn inactive_keys(&self, ids: Vec<String>) -> Result<Vec<String>, StoreError> {
        let mut inactive = Vec::new();
        for chunk in ids.chunks(crate::keys::KEYS_PER_READ) {
            let mut q = crate::keys::active_among::<sqlx::Sqlite>(chunk);
            let active = q.build_query_scalar().fetch_all(&self.read).await?;
            inactive.extend(crate::keys::not_active(chunk, active));
        }
        Ok(inactive)
    }

    /// Stores `key`, an admin key, only if no admin key is active: what a
    /// first start does. `None`: one was active, nothing stored.
    pub async fn create_first_admin_key(&self, key: NewKey) -> Result<Option<ApiKey>, StoreError> {
        self.writer
            .run(move |conn| {
                Box::pin(async move {
                    let active: i64 = sqlx::query_scalar(
                        "SELECT COUNT(*) FROM api_keys WHERE role = 'admin' AND revoked_at IS NULL",
                    )
                    .fetch_one(&mut *conn)
                    .await?;
                    if active > 0 {
                        return Ok(None);
                    }
                    let row = sqlx::query(concat!(
                        "INSERT INTO api_keys (id, name, role, agent, hash, created_at) \
                         VALUES (?, ?, 'admin', NULL, ?, ?) RETURNING ",
                        key_columns!()
                    ))
                    .bind(&key.id)
                    .bind(&key.name)
                    .bind(&key.hash)
                    .bind(to_ms(now()))
                    .fetch_one(conn)
                    .await?;
                    from_row(&row).map(Some)
                })
            })
            .await
    }

    /// How many admin keys are not revoked.
    pub async fn active_admin_keys(&self) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT COUNT(*) FROM api_keys WHERE role = 'admin' AND revoked_at IS NULL",
        )
        .fetch_one(&self.read)
        .await?)
    }
}
