//! Keyset pages of a listing, newest or oldest first, on either backend:
//! a page starts strictly after the last item of the previous one, so a
//! queue longer than one page is read whole, each item once.

use sqlx::QueryBuilder;

/// Where a page of a listing starts, which end comes first, and how many
/// items it holds (grant requests, plans).
#[derive(Debug, Clone)]
pub struct Page {
    /// Only items strictly after this id in the listing's order (the last
    /// id of the previous page).
    pub after: Option<String>,
    /// At most this many items.
    pub limit: i64,
    /// Oldest first (the longest waiting first) instead of newest first.
    pub oldest_first: bool,
}

impl Page {
    /// The first page of at most `limit`, newest first.
    pub fn newest(limit: i64) -> Page {
        Page {
            after: None,
            limit,
            oldest_first: false,
        }
    }
}

/// Pushes the cursor, the order and the page size of a listing ordered by
/// `id` (ids are made in time order): ` AND id > ? ORDER BY id ASC LIMIT ?`
/// oldest first, `<` and `DESC` newest first.
pub(crate) fn by_id<DB>(q: &mut QueryBuilder<DB>, after: Option<&str>, limit: i64, oldest: bool)
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let (after_sql, order) = if oldest {
        (" AND id > ", " ORDER BY id ASC LIMIT ")
    } else {
        (" AND id < ", " ORDER BY id DESC LIMIT ")
    };
    if let Some(after) = after {
        q.push(after_sql).push_bind(after.to_owned());
    }
    q.push(order).push_bind(limit);
}
/// How many events the next page of a walk through the log should read,
/// after one of `size` events read `bytes` of event data: events can be
/// large (an action's detail and params), so walks start small, read twice
/// as many while that stays well under `budget` bytes and half as many
/// while over it, up to `most`.
pub fn next_events_page(size: i64, bytes: usize, budget: usize, most: i64) -> i64 {
    if bytes > budget {
        (size / 2).max(1)
    } else if bytes < budget / 4 {
        size.saturating_mul(2).min(most)
    } else {
        size
    }
}
