//! What one agent holds at once, on Postgres (see `crate::limits`).

use actiongate_api::model::Json;

use crate::error::StoreError;
use crate::limits::limit_event;
use crate::pg::Postgres;

impl Postgres {
    /// How many of `agent`'s actions and grant requests wait for a human.
    pub async fn pending_of_agent(&self, agent: &str) -> Result<i64, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT ((SELECT COUNT(*) FROM actions WHERE agent = $1 AND status = 'pending') \
                   + (SELECT COUNT(*) FROM grant_requests WHERE agent = $1 AND status = 'pending') \
                   + (SELECT COUNT(*) FROM plans WHERE agent = $1 AND status = 'pending'))::BIGINT",
        )
        .bind(agent)
        .fetch_one(&self.pool)
        .await?)
    }

    /// Appends a `limit.reached` event about `agent`.
    pub async fn record_limit_reached(&self, agent: &str, data: Json) -> Result<(), StoreError> {
        let tx = self.begin().await?;
        self.commit(tx, vec![limit_event(agent, data)]).await?;
        Ok(())
    }
}
