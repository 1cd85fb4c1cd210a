//! Reading the event log.

use crate::error::StoreError;
use crate::events::{event_columns, from_row};
use crate::pg::Postgres;
use actiongate_api::model::Event;

impl Postgres {
    /// The highest committed event `seq` (possibly not yet published here).
    pub async fn newest_seq(&self) -> Result<i64, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT COALESCE(MAX(seq), 0)::BIGINT FROM events")
                .fetch_one(&self.pool)
                .await?,
        )
    }

    /// Up to `limit` events after `seq`, oldest first; only `agent`'s when given.
    pub async fn events_after(
        &self,
        seq: i64,
        agent: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Event>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE seq > $1 AND ($2::TEXT IS NULL OR agent = $2) ORDER BY seq LIMIT $3"
        ))
        .bind(seq)
        .bind(agent)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(from_row).collect()
    }

    /// Every event about one action, oldest first.
    pub async fn action_events(&self, action_id: &str) -> Result<Vec<Event>, StoreError> {
        let rows = sqlx::query(concat!(
            "SELECT ",
            event_columns!(),
            " FROM events WHERE action_id = $1 ORDER BY seq"
        ))
        .bind(action_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(from_row).collect()
    }
}
