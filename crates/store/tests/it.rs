//! Every integration test of this crate in one binary, so the workspace
//! links it once: one module per file beside this one.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, dead_code)]

mod actions;
mod approvals;
mod audit;
mod backends;
mod connectors;
mod cut_calls;
mod dispatch;
mod event_refs;
mod grant_lock;
mod grant_requests;
mod grants;
mod handlers;
mod keepalive;
mod limits;
mod nodes;
mod outbox;
mod pages;
mod records;
mod sessions;
mod store;
