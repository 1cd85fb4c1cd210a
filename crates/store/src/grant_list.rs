//! Listing grants: the filters and the query, on both backends.

use sqlx::QueryBuilder;

use crate::grants::grant_columns;
use crate::time::{now, to_ms};

/// Filters of a grant listing.
#[derive(Debug, Clone, Default)]
pub struct GrantFilter {
    /// Only active (or only inactive) grants.
    pub active: Option<bool>,
    /// Only grants for this agent (including any-agent grants when `true`).
    pub agent: Option<String>,
    /// Only this handler's.
    pub handler: Option<String>,
    /// Only grants strictly after this id in the order asked (the last id
    /// of the previous page).
    pub after: Option<String>,
    /// At most this many (1,000 when `None`).
    pub limit: Option<i64>,
    /// Oldest first instead of newest first.
    pub oldest_first: bool,
}

/// The query of [`Store::list_grants`](crate::Store::list_grants).
pub(crate) fn list_query<DB>(f: &GrantFilter) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q: QueryBuilder<DB> = QueryBuilder::new(concat!(
        "SELECT ",
        grant_columns!(),
        " FROM grants WHERE 1 = 1"
    ));
    let at = to_ms(now());
    match f.active {
        // A counted grant whose uses are spent is no longer active.
        Some(true) => {
            q.push(
                " AND revoked_at IS NULL AND (uses_left IS NULL OR uses_left > 0) \
                 AND (expires_at IS NULL OR expires_at > ",
            )
            .push_bind(at)
            .push(")");
        }
        Some(false) => {
            q.push(" AND (revoked_at IS NOT NULL OR uses_left <= 0 OR expires_at <= ")
                .push_bind(at)
                .push(")");
        }
        None => {}
    }
    if let Some(agent) = &f.agent {
        q.push(" AND agent = ").push_bind(agent.clone());
    }
    if let Some(handler) = &f.handler {
        q.push(" AND handler = ").push_bind(handler.clone());
    }
    // Grant ids are UUIDv7 (`grt_…`): their order is the order they were
    // made in.
    crate::paging::by_id(
        &mut q,
        f.after.as_deref(),
        f.limit.unwrap_or(1000),
        f.oldest_first,
    );
    q
}
