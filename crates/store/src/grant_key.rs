//! An operator's idempotency key for a grant. The same key from the same
//! operator with the same request (its hash) answers the grant made the
//! first time and changes nothing: a retry after a lost answer or a 503
//! grants nothing twice. With another request it is a conflict. The key is
//! unique per operator in the schema (`grants_idempotency`), so two
//! requests racing with one key make one grant on either backend: the
//! second insert does nothing and reads the first.

use sqlx::QueryBuilder;

use crate::error::StoreError;
use crate::grants::{GrantCreated, from_row, grant_columns};
use crate::request_key::RequestKey;
use crate::row::Cols;

/// The grant `granted_by` made under `key`, if any.
pub(crate) fn keyed_query<DB>(granted_by: &str, key: &RequestKey) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let select = concat!(
        "SELECT request_hash, ",
        grant_columns!(),
        " FROM grants WHERE granted_by = "
    );
    crate::request_key::keyed_query(select, granted_by, key)
}

/// What a request under `key` answers when `row` (read by
/// [`keyed_query`]) holds a grant: that grant, unchanged, when the request
/// is the same; a conflict when it is another.
pub(crate) fn repeated(row: &impl Cols, key: &RequestKey) -> Result<GrantCreated, StoreError> {
    key.same_request(row.try_get("request_hash")?, "grant")?;
    Ok(GrantCreated {
        grant: from_row(row)?,
        approved_first: None,
        approved: Vec::new(),
        repeated: true,
    })
}

/// The insert's end: with a key, a second insert under it does nothing
/// (and returns no row) instead of failing.
pub(crate) fn on_conflict(key: Option<&RequestKey>) -> &'static str {
    match key {
        Some(_) => {
            " ON CONFLICT (granted_by, idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING"
        }
        None => "",
    }
}
