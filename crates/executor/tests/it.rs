//! Every integration test of this crate in one binary, so the workspace
//! links it once: one module per file beside this one.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, dead_code)]

mod common;
mod daemon;

mod e2e;
mod executor;
mod limits;
mod registration;
