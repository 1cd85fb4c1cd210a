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

/// When a record whose id is `prefix` and a UUIDv7 (simple) was made, in
/// ms since the epoch: where a cursor naming one that retention deleted
/// still places a page. `None` for an id not so made.
pub fn id_time_ms(prefix: &str, id: &str) -> Option<i64> {
    let hex = id.strip_prefix(prefix)?;
    if hex.len() != 32 {
        return None;
    }
    let uuid = uuid::Uuid::try_parse(hex).ok()?;
    if uuid.get_version_num() != 7 {
        return None;
    }
    let (secs, nanos) = uuid.get_timestamp()?.to_unix();
    Some(i64::try_from(secs).ok()? * 1000 + i64::from(nanos / 1_000_000))
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn an_id_tells_when_it_was_made_only_when_it_is_a_uuidv7_after_its_prefix() {
        let before = chrono::Utc::now().timestamp_millis();
        let id = format!("pln_{}", uuid::Uuid::now_v7().simple());
        let after = chrono::Utc::now().timestamp_millis();
        let made = id_time_ms("pln_", &id).unwrap();
        assert!(
            (before..=after).contains(&made),
            "{made} not in {before}..={after}"
        );
        assert_eq!(id_time_ms("grq_", &id), None, "another prefix");
        let v4 = "pln_5b6f1c9e0a3d4e2f8b7a6c5d4e3f2a1b";
        assert_eq!(id_time_ms("pln_", v4), None, "not made in time order");
        let hyphenated = format!("pln_{}", uuid::Uuid::now_v7());
        assert_eq!(id_time_ms("pln_", &hyphenated), None);
        for typo in ["pln_nothing", "pln_", "", "pln_0190"] {
            assert_eq!(id_time_ms("pln_", typo), None, "{typo}");
        }
    }
}
