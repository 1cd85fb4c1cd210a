//! What one agent holds at once: its items waiting for a human, and the
//! event recording that it reached a limit.

use actiongate_api::model::Json;

use crate::SqliteStore;
use crate::error::StoreError;
use crate::events::{NewEvent, insert_on};

/// The type of the event recording a limit reached.
pub const LIMIT_EVENT: &str = "limit.reached";

/// The event recording that `agent` reached a limit, `data` saying which.
pub(crate) fn limit_event(agent: &str, data: Json) -> NewEvent {
    NewEvent {
        kind: LIMIT_EVENT,
        agent: Some(agent.to_owned()),
        action_id: None,
        grant_id: None,
        data,
    }
}

impl SqliteStore {
    /// How many of `agent`'s actions, grant requests and plans wait for a
    /// human.
    pub async fn pending_of_agent(&self, agent: &str) -> Result<i64, StoreError> {
        // Named indexes: without statistics SQLite could walk every one of
        // the agent's actions by `actions_agent` instead.
        Ok(sqlx::query_scalar(
            "SELECT (SELECT COUNT(*) FROM actions INDEXED BY actions_pending_agent \
                     WHERE agent = ?1 AND status = 'pending') \
                  + (SELECT COUNT(*) FROM grant_requests INDEXED BY grant_requests_pending_agent \
                     WHERE agent = ?1 AND status = 'pending') \
                  + (SELECT COUNT(*) FROM plans INDEXED BY plans_pending_agent \
                     WHERE agent = ?1 AND status = 'pending')",
        )
        .bind(agent)
        .fetch_one(&self.read)
        .await?)
    }

    /// Appends a `limit.reached` event about `agent`.
    pub async fn record_limit_reached(&self, agent: &str, data: Json) -> Result<(), StoreError> {
        let ev = limit_event(agent, data);
        self.writer
            .run_sparing_grants(move |conn| Box::pin(async move { insert_on(conn, &ev).await }))
            .await
    }
}
