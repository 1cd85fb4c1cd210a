//! The reference executor of actiongate: an HTTP server that runs seed 002's
//! file and command actions for signed `action.execute` webhooks.
//!
//! Layout: [`server`] (on [`http`]'s bounded connections) verifies ([`signing`]), deduplicates ([`dedupe`]),
//! runs ([`actions`], with [`files`] and [`command`] on paths confined by
//! [`paths`], written via [`atomic`]) and journals ([`journal`]) each
//! delivery; [`callback`] posts async results; [`registration`] is what the
//! executor registers with the daemon; [`cli`] wires them to flags.

pub mod actions;
pub mod atomic;
pub mod callback;
pub mod cli;
pub mod command;
pub mod dedupe;
pub mod files;
pub mod http;
pub mod journal;
pub mod paths;
pub mod receipts;
pub mod registration;
pub mod server;
pub mod signing;

/// Installs rustls' ring provider as the process default (once; later calls
/// do nothing). The workspace builds reqwest with `rustls-no-provider`, so a
/// provider must be in place before any HTTP client is built.
pub fn install_tls_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
