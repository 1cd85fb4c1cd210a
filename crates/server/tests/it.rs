//! Every integration test of this crate in one binary, so the workspace
//! links it once: one module per file beside this one.
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, dead_code)]

mod cli_support;
mod common;

mod api;
mod claude_hook;
mod claude_post_hook;
mod cli_client;
mod cli_people;
mod cli_plans;
mod connectors;
mod dispatch;
mod events;
mod future_sizes;
mod grant_request_pages;
mod handler_pages;
mod handler_taint;
mod handlers;
mod hook_dirs;
mod hook_rewrites;
mod hook_sessions;
mod hooks_review;
mod mcp;
mod mcp_plans;
mod mcp_sessions;
mod mcp_taint;
mod mcp_tasks;
mod outbox_follow;
mod profile_size;
mod runtime_hooks;
mod setup_wrap;
mod tool_params;
mod web;
mod write_budget;
