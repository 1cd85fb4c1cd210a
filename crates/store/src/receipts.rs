//! What signed decision receipts need from the store: the one signing key
//! every daemon on a database shares, and an action's params as sent (the
//! receipt binds their digest, not the masked view).

use crate::SqliteStore;
use crate::error::StoreError;
use crate::time::{now, to_ms};

/// The receipt signing key as stored: its id and its Ed25519 seed (hex).
#[derive(Clone, PartialEq, Eq)]
pub struct StoredReceiptKey {
    /// The key id (`kid` of receipts and of the JWK).
    pub kid: String,
    /// The 32-byte Ed25519 seed, 64 hex digits.
    pub seed: String,
}

impl std::fmt::Debug for StoredReceiptKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoredReceiptKey({})", self.kid)
    }
}

impl SqliteStore {
    /// The stored receipt key; `candidate` is stored first when there is
    /// none yet, so the first caller's key is everyone's.
    pub async fn receipt_key(
        &self,
        candidate: StoredReceiptKey,
    ) -> Result<StoredReceiptKey, StoreError> {
        if let Some(k) = self.read_receipt_key().await? {
            return Ok(k);
        }
        let c = candidate.clone();
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    sqlx::query(
                        "INSERT INTO receipt_key (id, kid, seed, created_at) VALUES (1, ?, ?, ?) \
                         ON CONFLICT (id) DO NOTHING",
                    )
                    .bind(&c.kid)
                    .bind(&c.seed)
                    .bind(to_ms(now()))
                    .execute(&mut *conn)
                    .await?;
                    Ok(())
                })
            })
            .await?;
        self.read_receipt_key().await?.ok_or(StoreError::NotFound)
    }

    async fn read_receipt_key(&self) -> Result<Option<StoredReceiptKey>, StoreError> {
        let row: Option<(String, String)> =
            sqlx::query_as("SELECT kid, seed FROM receipt_key WHERE id = 1")
                .fetch_optional(&self.read)
                .await?;
        Ok(row.map(|(kid, seed)| StoredReceiptKey { kid, seed }))
    }

    /// The params of action `id` as its agent sent them (`None` for a
    /// decision-only action).
    pub async fn action_params(&self, id: &str) -> Result<Option<String>, StoreError> {
        let row: Option<(Option<String>,)> =
            sqlx::query_as("SELECT params FROM actions WHERE id = ?")
                .bind(id)
                .fetch_optional(&self.read)
                .await?;
        row.map(|(p,)| p).ok_or(StoreError::NotFound)
    }
}
