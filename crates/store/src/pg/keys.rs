//! API keys on Postgres.

use crate::error::StoreError;
use crate::keys::{NewKey, from_row, key_columns};
use crate::pg::Postgres;
use crate::time::{now, to_ms};
use actiongate_api::model::ApiKey;

impl Postgres {
    /// Stores a new key.
    pub async fn create_key(&self, key: NewKey) -> Result<ApiKey, StoreError> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(concat!(
            "INSERT INTO api_keys (id, name, role, agent, hash, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING ",
            key_columns!()
        ))
        .bind(&key.id)
        .bind(&key.name)
        .bind(key.role.as_str())
        .bind(&key.agent)
        .bind(&key.hash)
        .bind(to_ms(now()))
        .fetch_one(&mut *tx)
        .await?;
        let key = from_row(&row)?;
        self.commit(tx, Vec::new()).await?;
        Ok(key)
    }

    /// The live (not revoked) key with this hash.
    pub async fn find_key(&self, hash: &str) -> Result<Option<ApiKey>, StoreError> {
        let row = sqlx::query(concat!(
            "SELECT ",
            key_columns!(),
            " FROM api_keys WHERE hash = $1 AND revoked_at IS NULL"
        ))
        .bind(hash)
        .fetch_optional(&self.pool)
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
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(from_row).collect()
    }

    /// Revokes a key; revoking twice returns the already revoked key.
    pub async fn revoke_key(&self, id: &str) -> Result<ApiKey, StoreError> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(concat!(
            "UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1) WHERE id = $2 RETURNING ",
            key_columns!()
        ))
        .bind(to_ms(now()))
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let key = row
            .as_ref()
            .map(from_row)
            .transpose()?
            .ok_or(StoreError::NotFound)?;
        self.commit(tx, Vec::new()).await?;
        Ok(key)
    }

    /// Whether key `id` exists and is not revoked.
    pub async fn key_active(&self, id: &str) -> Result<bool, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT EXISTS (SELECT 1 FROM api_keys WHERE id = $1 AND revoked_at IS NULL)",
        )
        .bind(id)
        .fetch_one(&self.pool)
        .await?)
    }

    /// Those of `ids` that are revoked or unknown.
    pub async fn inactive_keys(&self, ids: Vec<String>) -> Result<Vec<String>, StoreError> {
        let mut inactive = Vec::new();
        for chunk in ids.chunks(crate::keys::KEYS_PER_READ) {
            let mut q = crate::keys::active_among::<sqlx::Postgres>(chunk);
            let active = q.build_query_scalar().fetch_all(&self.pool).await?;
            inactive.extend(crate::keys::not_active(chunk, active));
        }
        Ok(inactive)
    }

    /// Stores `key`, an admin key, only if no admin key is active: what a
    /// first start does. Nodes starting together on an empty database take
    /// turns (an advisory lock), so one of them mints the key.
    pub async fn create_first_admin_key(&self, key: NewKey) -> Result<Option<ApiKey>, StoreError> {
        let mut tx = self.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('actiongate.first_admin_key'))")
            .execute(&mut *tx)
            .await?;
        let active: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM api_keys WHERE role = 'admin' AND revoked_at IS NULL",
        )
        .fetch_one(&mut *tx)
        .await?;
        if active > 0 {
            return Ok(None);
        }
        let row = sqlx::query(concat!(
            "INSERT INTO api_keys (id, name, role, agent, hash, created_at) \
             VALUES ($1, $2, 'admin', NULL, $3, $4) RETURNING ",
            key_columns!()
        ))
        .bind(&key.id)
        .bind(&key.name)
        .bind(&key.hash)
        .bind(to_ms(now()))
        .fetch_one(&mut *tx)
        .await?;
        let key = from_row(&row)?;
        self.commit(tx, Vec::new()).await?;
        Ok(Some(key))
    }

    /// How many admin keys are not revoked.
    pub async fn active_admin_keys(&self) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT COUNT(*) FROM api_keys WHERE role = 'admin' AND revoked_at IS NULL",
        )
        .fetch_one(&self.pool)
        .await?)
    }
}
