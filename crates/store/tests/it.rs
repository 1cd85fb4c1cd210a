//! Every integration test of this crate in one binary, so the workspace
//! links it once: one module per file beside this one.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, dead_code)]

mod audit;
mod backends;
mod connectors;
mod grants;
mod nodes;
mod outbox;
mod store;
