//! Revoked keys let go of what they hold open. A request is authorized
//! once, when it arrives; a long-poll (`?wait=`) or an event stream
//! outlives that, so it ends, with a 401 for a long-poll, once its key is
//! revoked: at once when the key is revoked through this daemon, and
//! within [`CHECK_EVERY`] when it is revoked behind the daemon's back
//! (`actiongate keys revoke` on the data dir, or another daemon on a
//! shared database), which [`run`] looks for. It reads only the keys that
//! hold something open on this daemon, and nothing when none does: its
//! cost follows open streams, not how many keys were ever made.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::Duration;

use crate::Gate;
use crate::caller::{Caller, KeyGuard};
use crate::error::{GateError, GateResult};

/// How often the keys are read to find revocations made elsewhere; with
/// the time to act on one, what a revoked key holds ends within a second.
pub const CHECK_EVERY: Duration = Duration::from_millis(500);

/// How many reads in a row a revoked key still holding something is told
/// of: twice covers a stream opened with the key while it was being
/// revoked (authorized just before), without waking every stream on every
/// read should one outlive its key.
const TELLS: u8 = 2;

/// Reads which of the keys holding something open are revoked every
/// [`CHECK_EVERY`] until shutdown, and tells the gate of each.
pub async fn run(gate: Gate) {
    let mut told = BTreeMap::new();
    let mut tick = tokio::time::interval(CHECK_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = gate.shutdown().cancelled() => return,
            _ = tick.tick() => {}
        }
        let held = gate.0.holds.key_ids();
        if held.is_empty() {
            told.clear();
            continue;
        }
        let revoked = match gate.store().inactive_keys(held).await {
            Ok(ids) => ids.into_iter().collect(),
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the keys to find revocations");
                continue;
            }
        };
        for id in to_tell(&mut told, revoked) {
            gate.forget_key(&id);
        }
    }
}

/// Which of `revoked` (revoked keys holding something open) to tell of
/// now, counting in `told` how often each was; a key no longer in
/// `revoked` is forgotten.
fn to_tell(told: &mut BTreeMap<String, u8>, revoked: BTreeSet<String>) -> Vec<String> {
    told.retain(|id, _| revoked.contains(id));
    revoked
        .into_iter()
        .filter(|id| {
            let n = told.entry(id.clone()).or_default();
            *n += 1;
            *n <= TELLS
        })
        .collect()
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

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn set(ids: &[&str]) -> BTreeSet<String> {
        ids.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_revoked_key_still_holding_is_told_of_twice_then_left_alone() {
        let mut told = BTreeMap::new();
        assert_eq!(to_tell(&mut told, set(&["k1"])), ["k1"]);
        assert_eq!(to_tell(&mut told, set(&["k1", "k2"])), ["k1", "k2"]);
        assert_eq!(to_tell(&mut told, set(&["k1", "k2"])), ["k2"]);
        assert!(to_tell(&mut told, set(&["k1", "k2"])).is_empty());
        // Once k1 holds nothing, it is forgotten: held again later (a
        // stream authorized just before it was revoked), it is told again.
        assert_eq!(to_tell(&mut told, set(&["k2"])), Vec::<String>::new());
        assert_eq!(to_tell(&mut told, set(&["k1", "k2"])), ["k1"]);
        assert!(to_tell(&mut told, BTreeSet::new()).is_empty());
        assert!(told.is_empty());
    }
}
