//! actiongate's daemon as a library; `main.rs` is a thin wrapper.
//!
//! Layout: [`config`] loads settings; [`app`] builds the router and runs the
//! daemon (`serve` takes its listener, so tests bind port 0); [`routes`] has
//! one module per resource; [`auth`] turns bearer keys into a [`auth::Caller`];
//! [`cache`] keeps keys and compiled profiles in memory;
//! [`error`] is the one error type rendered as problem+json; [`waiters`] wakes
//! long-polls; [`sweeper`] expires pending actions at their deadline;
//! [`cli`] holds the `actiongate` commands. Events: [`sse`] streams the
//! log, [`notifier`] sends notification webhooks signed by [`webhook`],
//! [`audit`] exports the hash-chained log, [`retention`] prunes it, and
//! [`stall`] disconnects clients that stop reading.
//! [`cli`] holds the `actiongate` commands; [`client`] the ones that talk to
//! a running daemon (operator CLI, Claude Code hook, outbox follower);
//! [`web`] serves the operator's web page at `/`.

pub mod app;
pub mod audit;
pub mod auth;
pub mod cache;
pub mod cli;
pub mod client;
pub mod config;
pub mod config_events;
pub mod decide;
pub mod dispatcher;
pub mod error;
pub mod handler_spec;
pub mod metrics;
pub mod notifier;
pub mod openapi;
pub mod retention;
pub mod routes;
pub mod sse;
pub mod stall;
pub mod state;
pub mod sweeper;
pub mod template;
pub mod waiters;
pub mod web;
pub mod webhook;
