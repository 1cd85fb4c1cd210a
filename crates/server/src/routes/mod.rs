//! One router module per resource, merged in [`router`].

pub mod actions;
pub mod agents;
pub mod audit;
pub mod check;
pub mod events;
pub mod grant_requests;
pub mod grants;
pub mod handlers;
pub mod keys;
mod links;
pub mod ops;
pub mod people;
pub mod presets;
pub mod receipts;
pub mod replay;
pub mod results;
pub mod sessions;
pub mod subscriptions;
pub mod tools;
pub mod whoami;

use axum::Router;

use crate::state::AppState;

/// Every route of the API.
pub fn router() -> Router<AppState> {
    Router::new()
        .merge(actions::router())
        .merge(agents::router())
        .merge(check::router())
        .merge(grants::router())
        .merge(sessions::router())
        .merge(grant_requests::router())
        .merge(handlers::router())
        .merge(tools::router())
        .merge(results::router())
        .merge(keys::router())
        .merge(people::router())
        .merge(presets::router())
        .merge(receipts::router())
        .merge(replay::router())
        .merge(ops::router())
        .merge(events::router())
        .merge(subscriptions::router())
        .merge(audit::router())
        .merge(whoami::router())
}
