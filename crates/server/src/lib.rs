//! actiongate's daemon as a library; `main.rs` is a thin wrapper.
//!
//! Layout: [`config`] loads settings; [`app`] builds the router and runs the
//! daemon (`serve` takes its listener, so tests bind port 0); [`routes`] has
//! one module per resource; [`auth`] turns bearer keys into a [`auth::Caller`];
//! [`cache`] keeps keys and compiled profiles in memory;
//! [`error`] is the one error type rendered as problem+json; [`waiters`] wakes
//! long-polls; [`sweeper`] expires pending actions at their deadline;
//! [`cli`] holds the `actiongate` commands.

pub mod app;
pub mod auth;
pub mod cache;
pub mod cli;
pub mod config;
pub mod decide;
pub mod error;
pub mod metrics;
pub mod openapi;
pub mod routes;
pub mod state;
pub mod sweeper;
pub mod waiters;
