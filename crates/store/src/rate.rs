//! Rate limit counters (`max_per_hour` of profiles): taking a slot counts
//! the agent's rows of each key in the last hour and, only when every key
//! is under its limit, records one row per key, in one transaction. On
//! SQLite the writer runs it alone; on Postgres a per-agent advisory lock
//! makes concurrent takers (on any daemon) take turns, so a limit is never
//! overshot.

use chrono::{DateTime, Utc};

use crate::SqliteStore;
use crate::error::StoreError;
use crate::time::to_ms;

/// An hour, in milliseconds.
pub(crate) const WINDOW_MS: i64 = 3_600_000;

impl SqliteStore {
    /// The first `(key, max_per_hour)` of `agent` already at its maximum
    /// over the hour before `at`, reading only: what [`SqliteStore::rate_take`]
    /// would answer, for a dry run.
    pub async fn rate_full(
        &self,
        agent: &str,
        limits: Vec<(String, i64)>,
        at: DateTime<Utc>,
    ) -> Result<Option<String>, StoreError> {
        let since = to_ms(at) - WINDOW_MS;
        let mut conn = self.read.acquire().await?;
        for (key, max) in limits {
            let n: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM rate_events WHERE agent = ? AND key = ? AND at > ?",
            )
            .bind(agent)
            .bind(&key)
            .bind(since)
            .fetch_one(&mut *conn)
            .await?;
            if n >= max {
                return Ok(Some(key));
            }
        }
        Ok(None)
    }

    /// Takes a slot of each `(key, max_per_hour)` for `agent` at `at`:
    /// `None` when taken, or the first key already at its maximum (nothing
    /// taken then).
    pub async fn rate_take(
        &self,
        agent: &str,
        limits: Vec<(String, i64)>,
        at: DateTime<Utc>,
    ) -> Result<Option<String>, StoreError> {
        let agent = agent.to_owned();
        let now = to_ms(at);
        self.writer
            .run_sparing_grants(move |conn| {
                Box::pin(async move {
                    for (key, max) in &limits {
                        sqlx::query(
                            "DELETE FROM rate_events WHERE agent = ? AND key = ? AND at <= ?",
                        )
                        .bind(&agent)
                        .bind(key)
                        .bind(now - WINDOW_MS)
                        .execute(&mut *conn)
                        .await?;
                        let n: i64 = sqlx::query_scalar(
                            "SELECT COUNT(*) FROM rate_events WHERE agent = ? AND key = ?",
                        )
                        .bind(&agent)
                        .bind(key)
                        .fetch_one(&mut *conn)
                        .await?;
                        if n >= *max {
                            return Ok(Some(key.clone()));
                        }
                    }
                    for (key, _) in &limits {
                        sqlx::query("INSERT INTO rate_events (agent, key, at) VALUES (?, ?, ?)")
                            .bind(&agent)
                            .bind(key)
                            .bind(now)
                            .execute(&mut *conn)
                            .await?;
                    }
                    Ok(None)
                })
            })
            .await
    }
}
