//! actiongate's daemon as a library; `main.rs` is a thin wrapper. This
//! crate is the HTTP adapter over the gate (`actiongate_gate`): it turns
//! requests into gate calls and gate answers into responses.
//!
//! Layout: [`config`] loads settings; [`app`] builds the router and runs the
//! daemon (`serve` takes its listener, so tests bind port 0); [`routes`] has
//! one module per resource; [`auth`] turns bearer keys into a caller through
//! the gate; [`error`] is the one error type rendered as problem+json;
//! [`transport`] is the outbound HTTP client the gate sends through. Events:
//! [`sse`] streams the log, [`audit`] exports the hash-chained log, and
//! [`stall`] disconnects clients that stop reading. [`cli`] holds the
//! `actiongate` commands that work on the data dir (the client commands are
//! `actiongate_cli`'s); [`web`] serves the operator's web page at `/`.
//!
//! Invariants: no module here decides, grants, expires or dispatches; a
//! route extracts, calls the gate, and maps the answer.

pub mod app;
pub mod auth;
pub mod backup;
pub mod cli;
pub mod config;
pub mod config_connectors;
pub mod config_duration;
pub mod config_events;
pub mod config_limits;
pub mod config_sessions;
pub mod connectors;
pub mod error;
pub mod fd_limit;
pub mod in_flight;
pub mod log_sink;
pub mod mcp;
pub mod metrics;
pub mod openapi;
pub mod routes;
pub mod serve;
pub mod sse;
pub mod stall;
pub mod state;
pub mod transport;
pub mod web;
