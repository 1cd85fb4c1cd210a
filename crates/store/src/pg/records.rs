//! Retention of records on Postgres (see [`crate::records`]).

use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;

use super::Postgres;
use crate::StoreError;
use crate::records::{RATE_WINDOW, Records, STALE, delete_dependents, delete_due, due_ids};
use crate::time::to_ms;

impl Postgres {
    /// Deletes up to `limit` records of `kind` settled before `cutoff`, with
    /// the rows that only refer to them; how many records.
    pub async fn prune_records(
        &self,
        kind: Records,
        cutoff: DateTime<Utc>,
        limit: i64,
    ) -> Result<u64, StoreError> {
        let cutoff = to_ms(cutoff);
        let ids: Vec<String> = due_ids::<sqlx::Postgres>(kind, cutoff, limit)
            .build_query_scalar()
            .fetch_all(&self.pool)
            .await?;
        if ids.is_empty() {
            return Ok(0);
        }
        let mut tx = self.begin().await?;
        let gone: Vec<String> = delete_due::<sqlx::Postgres>(kind, cutoff, &ids)
            .build_query_scalar()
            .fetch_all(&mut *tx)
            .await?;
        if !gone.is_empty() {
            for &dependent in kind.dependents() {
                delete_dependents::<sqlx::Postgres>(dependent, &gone)
                    .build()
                    .execute(&mut *tx)
                    .await?;
            }
        }
        self.commit(tx, Vec::new()).await?;
        Ok(gone.len() as u64)
    }

    /// Deletes rate rows older than [`RATE_WINDOW`] before `now`, and chat
    /// interactions seen before `cutoff`; how many rows.
    pub async fn prune_stale(
        &self,
        now: DateTime<Utc>,
        cutoff: DateTime<Utc>,
    ) -> Result<u64, StoreError> {
        let mut tx = self.begin().await?;
        let mut n = 0;
        for (sql, at) in STALE.iter().zip([to_ms(now - RATE_WINDOW), to_ms(cutoff)]) {
            n += QueryBuilder::<sqlx::Postgres>::new(*sql)
                .push_bind(at)
                .build()
                .execute(&mut *tx)
                .await?
                .rows_affected();
        }
        self.commit(tx, Vec::new()).await?;
        Ok(n)
    }
}
