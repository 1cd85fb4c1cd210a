//! A deadline for the store calls of one request, counted from when it
//! arrived: each call is bounded on its own (Postgres: connect timeout +
//! statement timeout), and within [`scope`] also by what is left of the
//! request's time, so a request that made a call, then waited behind
//! another (an agent's pending-item ticket), then made another, still ends
//! within one bound of arriving.

use std::future::Future;

use tokio::time::Instant;

tokio::task_local! {
    static DEADLINE: Instant;
}

/// Runs `work` with its store calls bounded by `deadline` as well (none:
/// only each call's own bound).
pub async fn scope<T>(deadline: Option<Instant>, work: impl Future<Output = T>) -> T {
    match deadline {
        Some(at) => DEADLINE.scope(at, work).await,
        None => work.await,
    }
}

/// The deadline of the current [`scope`], if any.
pub(crate) fn current() -> Option<Instant> {
    DEADLINE.try_with(|d| *d).ok()
}
