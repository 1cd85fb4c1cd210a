//! The extractors that turn `Authorization: Bearer <key>` into who is
//! calling ([`Caller`], checked by the gate), and [`Operator`] and [`Admin`]
//! for routes that need the role.

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use actiongate_gate::Role;
pub use actiongate_gate::caller::{IssuedKey, hash_key, issue_key};
pub use actiongate_gate::{Caller, KeyGuard};

use crate::error::ApiError;
use crate::in_flight::{Authenticated, bearer};
use crate::state::AppState;

/// A caller whose key has at least the operator role. As an extractor it
/// answers 403 before the request's path or body is looked at, so a key
/// without the role learns nothing from how its request was malformed.
#[derive(Debug, Clone)]
pub struct Operator(pub Caller);

/// A caller whose key has the admin role (see [`Operator`]).
#[derive(Debug, Clone)]
pub struct Admin(pub Caller);

/// The caller, if its key has at least `role`.
async fn with_role(parts: &mut Parts, state: &AppState, role: Role) -> Result<Caller, ApiError> {
    let caller = Caller::from_request_parts(parts, state).await?;
    caller.require(role)?;
    Ok(caller)
}

impl FromRequestParts<AppState> for Operator {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        with_role(parts, state, Role::Operator).await.map(Operator)
    }
}

impl FromRequestParts<AppState> for Admin {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        with_role(parts, state, Role::Admin).await.map(Admin)
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        // Authenticated already on its way in (see `in_flight`).
        if let Some(Authenticated(known)) = parts.extensions.remove::<Authenticated>() {
            return Ok(known?);
        }
        let header = parts
            .headers
            .get(AUTHORIZATION)
            .ok_or_else(|| ApiError::unauthorized("send Authorization: Bearer <key>"))?;
        let token = bearer(header)?;
        Ok(state.gate().authenticate(token).await?)
    }
}
