//! The idempotency key of a request that creates something a human
//! decides or that decides for them (a grant, a plan, a grant request):
//! checked, and paired with the hash of the request it stands for.

use serde::Serialize;

use actiongate_store::RequestKey;

use crate::{GateError, GateResult};

/// Longest key.
const MAX_KEY: usize = 256;

/// `key` (the request's `idempotency_key`, 1-256 characters) with the hash
/// of `body`, the request as sent.
pub(crate) fn request_key<T: Serialize>(
    key: Option<&str>,
    body: &T,
) -> GateResult<Option<RequestKey>> {
    let Some(key) = key else {
        return Ok(None);
    };
    crate::actions::check_len("idempotency_key", Some(key), MAX_KEY)?;
    if key.is_empty() {
        return Err(GateError::invalid("idempotency_key", "must not be empty"));
    }
    Ok(Some(RequestKey {
        key: key.to_owned(),
        request_hash: crate::actions::request_hash(body),
    }))
}
