//! Revoked keys let go of what they hold open. A request is authorized
//! once, when it arrives; a long-poll (`?wait=`) or an event stream
//! outlives that, so it ends, with a 401 for a long-poll, once its key is
//! revoked: at once when the key is revoked through this daemon, and
//! within [`CHECK_EVERY`] when it is revoked behind the daemon's back
//! (`actiongate keys revoke` on the data dir, or another daemon on a
//! shared database), which [`run`] looks for.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

use crate::Gate;
use crate::caller::{Caller, KeyGuard};
use crate::error::{GateError, GateResult};

/// How often the keys are read to find revocations made elsewhere; with
/// the time to act on one, what a revoked key holds ends within a second.
pub const CHECK_EVERY: Duration = Duration::from_millis(500);

/// Reads the revoked keys every [`CHECK_EVERY`] until shutdown, and tells
/// the gate of every key revoked since the last read.
pub async fn run(gate: Gate) {
    let mut known: Option<BTreeSet<String>> = None;
    let mut tick = tokio::time::interval(CHECK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = gate.shutdown().cancelled() => return,
            _ = tick.tick() => {}
        }
        let revoked: BTreeSet<String> = match gate.store().list_keys().await {
            Ok(keys) => keys
                .into_iter()
                .filter(|k| k.revoked_at.is_some())
                .map(|k| k.id)
                .collect(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the keys to find revocations");
                continue;
            }
        };
        if let Some(before) = &known {
            for id in revoked.difference(before) {
                gate.forget_key(id);
            }
        }
        known = Some(revoked);
    }
}

impl Gate {
    /// What ends `caller`'s long-poll if its key is revoked: `None` for a
    /// caller that holds no key (a human known to an adapter, the local
    /// command line). Taken before the work that precedes the wait, so
    /// no revocation meanwhile goes unseen, and so that a key holding
    /// `limits.max_open_per_key` already is refused (429) before anything
    /// is done.
    pub(crate) fn long_poll_guard(&self, caller: &Caller) -> GateResult<Option<KeyGuard>> {
        if caller.via.is_some() {
            return Ok(None);
        }
        self.key_guard(caller).map(Some)
    }

    /// Waits for `wait` unless `guard`'s key is revoked first: then 401.
    /// `wait` is boxed before the waiting starts (this is not an `async
    /// fn`, whose state would keep room for `wait` both as its argument
    /// and inside the `select!`): an idle long-poll's memory is its future.
    pub(crate) fn unless_revoked<'a, T: 'a>(
        &self,
        guard: Option<KeyGuard>,
        wait: impl Future<Output = GateResult<T>> + Send + 'a,
    ) -> impl Future<Output = GateResult<T>> + Send + 'a {
        let wait = Box::pin(wait);
        async move {
            let Some(mut guard) = guard else {
                return wait.await;
            };
            tokio::select! {
                result = wait => result,
                () = guard.revoked() => Err(GateError::unauthorized(
                    "the key was revoked while the request waited",
                )),
            }
        }
    }
}
