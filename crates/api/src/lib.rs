//! The wire types of actiongate's HTTP API: request and response bodies
//! and their OpenAPI schemas. Only serde and utoipa; no I/O.
//!
//! Invariants: a type here is what crosses the wire, field for field; the
//! daemon (`crates/server`), the workflows that take these inputs
//! (`crates/gate`) and the client (`crates/cli`) share them, so a change
//! here is a change of the API and shows in `openapi/openapi.json`.

pub mod actions;
pub mod deliveries;
pub mod findings;
pub mod grants;
pub mod handlers;
pub mod model;
pub mod problem;
pub mod receipts;
pub mod replay;
pub mod rfc3339;
pub mod sessions;
pub mod teams;
pub mod text;

pub use actions::*;
pub use deliveries::*;
pub use findings::Finding;
pub use grants::*;
pub use handlers::*;
pub use model::*;
pub use problem::{FieldError, Problem};
pub use sessions::*;
pub use teams::*;
