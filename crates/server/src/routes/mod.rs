//! One router module per resource, merged in [`router`].

pub mod actions;
pub mod agents;
pub mod check;
pub mod keys;
pub mod ops;
pub mod presets;
pub mod whoami;

use axum::Router;

use crate::state::AppState;

/// Every route of the API.
pub fn router() -> Router<AppState> {
    Router::new()
        .merge(actions::router())
        .merge(agents::router())
        .merge(check::router())
        .merge(keys::router())
        .merge(presets::router())
        .merge(ops::router())
        .merge(whoami::router())
}
