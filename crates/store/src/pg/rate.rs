//! Rate limit counters on Postgres: one transaction per take, serialized
//! per agent by an advisory lock, so daemons taking at once never overshoot.

use chrono::{DateTime, Utc};

use crate::error::StoreError;
use crate::pg::Postgres;
use crate::rate::WINDOW_MS;
use crate::time::to_ms;

impl Postgres {
    /// See [`crate::SqliteStore::rate_full`].
    pub async fn rate_full(
        &self,
        agent: &str,
        limits: Vec<(String, i64)>,
        at: DateTime<Utc>,
    ) -> Result<Option<String>, StoreError> {
        let since = to_ms(at) - WINDOW_MS;
        for (key, max) in limits {
            let n: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM rate_events WHERE agent = $1 AND key = $2 AND at > $3",
            )
            .bind(agent)
            .bind(&key)
            .bind(since)
            .fetch_one(&self.pool)
            .await?;
            if n >= max {
                return Ok(Some(key));
            }
        }
        Ok(None)
    }

    /// See [`crate::SqliteStore::rate_take`].
    pub async fn rate_take(
        &self,
        agent: &str,
        limits: Vec<(String, i64)>,
        at: DateTime<Utc>,
    ) -> Result<Option<String>, StoreError> {
        let now = to_ms(at);
        let mut tx = self.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('actiongate.rate'), hashtext($1))")
            .bind(agent)
            .execute(&mut *tx)
            .await?;
        for (key, max) in &limits {
            sqlx::query("DELETE FROM rate_events WHERE agent = $1 AND key = $2 AND at <= $3")
                .bind(agent)
                .bind(key)
                .bind(now - WINDOW_MS)
                .execute(&mut *tx)
                .await?;
            let n: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM rate_events WHERE agent = $1 AND key = $2",
            )
            .bind(agent)
            .bind(key)
            .fetch_one(&mut *tx)
            .await?;
            if n >= *max {
                tx.rollback().await?;
                return Ok(Some(key.clone()));
            }
        }
        for (key, _) in &limits {
            sqlx::query("INSERT INTO rate_events (agent, key, at) VALUES ($1, $2, $3)")
                .bind(agent)
                .bind(key)
                .bind(now)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(None)
    }
}
