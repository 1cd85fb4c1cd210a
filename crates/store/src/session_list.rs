//! Listing sessions, a page at a time, on either backend: filtered by
//! agent and by whether they are active, in the order they began (which
//! never changes, so paging reads each session once however busy they
//! are), with the count of each one's actions per status read for the
//! whole page in one query.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sqlx::QueryBuilder;

use actiongate_api::sessions::Session;

use crate::error::StoreError;
use crate::paging::Page;
use crate::plans::{session_columns, session_from_row};
use crate::row::Cols;
use crate::time::to_ms;

/// Which sessions a listing holds.
#[derive(Debug, Clone, Default)]
pub struct SessionFilter {
    /// Only this agent's.
    pub agent: Option<String>,
    /// Only active ones (`Some(true)`) or only ended ones (`Some(false)`;
    /// ended by hand or idle past the timeout).
    pub active: Option<bool>,
    /// When the session `page.after` began, as the caller was told: the
    /// page is placed by it and that id alone, without looking the session
    /// up, so paging goes on past a session deleted meanwhile. Without
    /// `page.after`, the page starts past every session that began then
    /// (those that began later, oldest first; earlier, newest first).
    pub after_began: Option<DateTime<Utc>>,
}

/// The query of a page of sessions: those `filter` holds, by when they
/// began (`first_seen`, then id), from the end `page` says, strictly past
/// the session `page.after`, placed by when it began: `filter.after_began`,
/// or else as the session's row says (nothing when there is no such
/// session among those of `filter.agent`: the gate then says so). A session is active while it has not ended and was
/// seen after `idle_before`.
pub(crate) fn list_query<DB>(
    filter: &SessionFilter,
    page: &Page,
    idle_before: DateTime<Utc>,
) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q: QueryBuilder<DB> = QueryBuilder::new(concat!(
        "SELECT ",
        session_columns!(),
        " FROM sessions WHERE 1 = 1"
    ));
    if let Some(agent) = &filter.agent {
        q.push(" AND agent = ").push_bind(agent.clone());
    }
    match filter.active {
        Some(true) => {
            q.push(" AND ended_at IS NULL AND last_seen > ")
                .push_bind(to_ms(idle_before));
        }
        Some(false) => {
            q.push(" AND (ended_at IS NOT NULL OR last_seen <= ")
                .push_bind(to_ms(idle_before))
                .push(")");
        }
        None => {}
    }
    let (after, past, order) = if page.oldest_first {
        (
            " AND (first_seen, id) > ",
            " AND first_seen > ",
            " ORDER BY first_seen ASC, id ASC LIMIT ",
        )
    } else {
        (
            " AND (first_seen, id) < ",
            " AND first_seen < ",
            " ORDER BY first_seen DESC, id DESC LIMIT ",
        )
    };
    if let (Some(id), Some(began)) = (&page.after, filter.after_began) {
        q.push(after)
            .push("(")
            .push_bind(to_ms(began))
            .push(", ")
            .push_bind(id.clone())
            .push(")");
    } else if let Some(id) = &page.after {
        q.push(after)
            .push("(SELECT c.first_seen, c.id FROM sessions c WHERE c.id = ")
            .push_bind(id.clone());
        // A cursor outside the listing (another agent's session, when one
        // agent's are listed) places nothing: it would tell when a session
        // the caller may not see began.
        if let Some(agent) = &filter.agent {
            q.push(" AND c.agent = ").push_bind(agent.clone());
        }
        q.push(")");
    } else if let Some(began) = filter.after_began {
        q.push(past).push_bind(to_ms(began));
    }
    q.push(order).push_bind(page.limit);
    q
}

/// The query counting the actions of sessions `ids` per status: rows of
/// (session, status, count).
pub(crate) fn counts_query<DB>(ids: &[String]) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q: QueryBuilder<DB> =
        QueryBuilder::new("SELECT session, status, COUNT(*) FROM actions WHERE session IN (");
    let mut list = q.separated(", ");
    for id in ids {
        list.push_bind(id.clone());
    }
    q.push(") GROUP BY session, status");
    q
}

/// The ids of a page's session rows, in order.
pub(crate) fn ids_of<R: Cols>(rows: &[R]) -> Result<Vec<String>, StoreError> {
    Ok(rows
        .iter()
        .map(|r| r.try_get("id"))
        .collect::<Result<_, _>>()?)
}

/// The page's sessions from their rows (of [`list_query`]) and their
/// action counts (rows of [`counts_query`]).
pub(crate) fn page_of<R: Cols>(
    rows: &[R],
    ids: &[String],
    counts: Vec<(String, String, i64)>,
    idle_before: DateTime<Utc>,
) -> Result<Vec<Session>, StoreError> {
    let mut counts = counts_by_session(ids, counts);
    rows.iter()
        .zip(ids)
        .map(|(row, id)| session_from_row(row, idle_before, counts.remove(id).unwrap_or_default()))
        .collect()
}

/// Each session's counts from the rows of [`counts_query`], with `total`;
/// a session without actions has `{"total": 0}`.
fn counts_by_session(
    ids: &[String],
    rows: Vec<(String, String, i64)>,
) -> BTreeMap<String, BTreeMap<String, i64>> {
    let mut out: BTreeMap<String, BTreeMap<String, i64>> =
        ids.iter().map(|id| (id.clone(), BTreeMap::new())).collect();
    for (session, status, n) in rows {
        out.entry(session).or_default().insert(status, n);
    }
    for counts in out.values_mut() {
        let total = counts.values().sum();
        counts.insert("total".to_owned(), total);
    }
    out
}
