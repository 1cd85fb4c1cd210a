//! Every integration test of this crate in one binary, so the workspace
//! links it once: one module per file beside this one.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, dead_code)]

mod common;

mod audit;
mod bounded_json;
mod cluster;
mod cluster_audit;
mod cluster_dispatch;
mod cluster_mcp;
mod cluster_restart;
mod daemon;
mod dispatch_lease;
mod edge_names;
mod edge_proxy;
mod edge_review;
mod examples;
mod executor_crash;
mod executor_modes;
mod faults;
mod findings;
mod fuzz_bodies;
mod layout;
mod log_full;
mod log_output;
mod masked_views;
mod mcp_proxy;
mod memory;
mod metrics;
mod outbound;
mod pending_limit;
mod pending_pages;
mod pg_stall;
mod plan_calls;
mod policy_corpus;
mod rate_limits;
mod readme;
mod receipts;
mod replay;
mod results;
mod runs;
mod sensitive;
mod session_attacks;
mod session_grants;
mod session_lifecycle;
mod session_pages;
mod session_review;
mod session_shell;
mod sessions;
mod teams;
mod teams_attacks;
mod teams_grants;
mod teams_review;
mod teams_seen;
mod teams_tiers;
mod visible;
