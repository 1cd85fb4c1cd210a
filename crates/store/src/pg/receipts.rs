//! The receipt key and an action's params as sent, on Postgres: the key
//! row is inserted once (`ON CONFLICT DO NOTHING`), so daemons starting
//! together all end up with the first one's key.

use crate::error::StoreError;
use crate::pg::Postgres;
use crate::receipts::StoredReceiptKey;
use crate::time::{now, to_ms};

impl Postgres {
    /// The stored receipt key; `candidate` is stored first when there is
    /// none yet.
    pub async fn receipt_key(
        &self,
        candidate: StoredReceiptKey,
    ) -> Result<StoredReceiptKey, StoreError> {
        sqlx::query(
            "INSERT INTO receipt_key (id, kid, seed, created_at) VALUES (1, $1, $2, $3) \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(&candidate.kid)
        .bind(&candidate.seed)
        .bind(to_ms(now()))
        .execute(&self.pool)
        .await?;
        let (kid, seed): (String, String) =
            sqlx::query_as("SELECT kid, seed FROM receipt_key WHERE id = 1")
                .fetch_one(&self.pool)
                .await?;
        Ok(StoredReceiptKey { kid, seed })
    }

    /// The params of action `id` as its agent sent them.
    pub async fn action_params(&self, id: &str) -> Result<Option<String>, StoreError> {
        let row: Option<(Option<String>,)> =
            sqlx::query_as("SELECT params FROM actions WHERE id = $1")
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        row.map(|(p,)| p).ok_or(StoreError::NotFound)
    }
}
