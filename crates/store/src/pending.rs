//! How many items wait for a human, of each kind: the metrics' gauges.

use crate::SqliteStore;
use crate::error::StoreError;

/// How many items wait for a human, of each kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PendingCounts {
    /// Pending actions.
    pub actions: i64,
    /// Pending grant requests.
    pub grant_requests: i64,
    /// Pending plans.
    pub plans: i64,
}

/// [`PendingCounts`] in one statement, the same on both backends (each
/// count reads a partial index of the pending rows).
pub(crate) const PENDING_COUNTS: &str = "SELECT \
    (SELECT COUNT(*) FROM actions WHERE status = 'pending'), \
    (SELECT COUNT(*) FROM grant_requests WHERE status = 'pending'), \
    (SELECT COUNT(*) FROM plans WHERE status = 'pending')";

impl SqliteStore {
    /// How many actions, grant requests and plans wait for a human.
    pub async fn pending_counts(&self) -> Result<PendingCounts, StoreError> {
        let (actions, grant_requests, plans) =
            sqlx::query_as(PENDING_COUNTS).fetch_one(&self.read).await?;
        Ok(PendingCounts {
            actions,
            grant_requests,
            plans,
        })
    }
}
