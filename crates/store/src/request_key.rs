//! An idempotency key a caller sends with a request that creates
//! something (a grant, a plan, a grant request), and the hash of the
//! request it stands for: the same key with the same request again answers
//! what the first made and changes nothing; with another request it is a
//! conflict. Each table keeps the key unique per caller, so requests racing
//! with one key make one row on either backend.

use sqlx::QueryBuilder;

use crate::error::StoreError;

/// `select` (a statement ending in `WHERE <owner column> = `) narrowed to
/// the row `owner` stored under `key`.
pub(crate) fn keyed_query<DB>(
    select: &'static str,
    owner: &str,
    key: &RequestKey,
) -> QueryBuilder<DB>
where
    DB: sqlx::Database,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut q: QueryBuilder<DB> = QueryBuilder::new(select);
    q.push_bind(owner.to_owned())
        .push(" AND idempotency_key = ")
        .push_bind(key.key.clone());
    q
}

/// An idempotency key and the hash of the request it stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestKey {
    /// The key, as the caller sent it.
    pub key: String,
    /// SHA-256 (hex) of the request as sent.
    pub request_hash: String,
}

impl RequestKey {
    /// Whether a row stored under this key (`stored`, its request's hash)
    /// was made by the same request: a conflict naming the key and `what`
    /// it made when not.
    pub(crate) fn same_request(
        &self,
        stored: Option<String>,
        what: &str,
    ) -> Result<(), StoreError> {
        if stored.as_deref() == Some(self.request_hash.as_str()) {
            return Ok(());
        }
        Err(StoreError::Conflict(format!(
            "idempotency key '{}' was already used for a different {what}",
            self.key
        )))
    }
}
