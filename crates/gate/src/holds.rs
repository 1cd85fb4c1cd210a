//! What one key holds at once, counted per daemon:
//!
//! - `limits.max_open_per_key`: event streams and long-polls. Each costs
//!   the daemon a connection, a file descriptor and some memory for as long
//!   as the client keeps it; without a bound one agent key could hold them
//!   until the daemon runs out of file descriptors and refuses every other
//!   client.
//! - `limits.max_in_flight_per_key`: requests being answered (any other
//!   request). Without a bound one key sending as many at once as the
//!   daemon accepts would queue them all before every other caller's, at
//!   the database, until everyone's calls time out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::{GateError, GateResult};

/// What every key holds of one kind.
#[derive(Debug)]
pub(crate) struct Holds {
    max: usize,
    kind: Kind,
    open: Mutex<HashMap<String, usize>>,
}

/// What is counted.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    /// Event streams and long-polls (`limits.max_open_per_key`).
    Open,
    /// Requests being answered (`limits.max_in_flight_per_key`).
    InFlight,
}

/// One open stream or long-poll, or one request in flight; counted until
/// dropped.
#[derive(Debug)]
pub struct Held {
    holds: Arc<Holds>,
    key_id: String,
}

impl Holds {
    /// At most `max` of `kind` per key.
    pub(crate) fn new(max: usize, kind: Kind) -> Arc<Holds> {
        Arc::new(Holds {
            max,
            kind,
            open: Mutex::default(),
        })
    }

    /// One more for `key_id`, or 429 when it holds `max` already.
    pub(crate) fn take(self: &Arc<Holds>, key_id: &str) -> GateResult<Held> {
        let mut open = self.open.lock().map_err(|_| GateError::internal())?;
        let n = open.entry(key_id.to_owned()).or_default();
        if *n >= self.max {
            let max = self.max;
            let (limit, detail) = match self.kind {
                Kind::Open => (
                    "max_open_per_key",
                    format!(
                        "this key holds {max} event streams and long-polls open already \
                         (limits.max_open_per_key); close one, or wait without ?wait="
                    ),
                ),
                Kind::InFlight => (
                    "max_in_flight_per_key",
                    format!(
                        "this key has {max} requests being answered already \
                         (limits.max_in_flight_per_key); send this one after one is answered"
                    ),
                ),
            };
            metrics::counter!("actiongate_limit_reached_total", "limit" => limit).increment(1);
            return Err(GateError::limit_reached(detail));
        }
        *n += 1;
        Ok(Held {
            holds: self.clone(),
            key_id: key_id.to_owned(),
        })
    }

    /// The keys that hold something open now.
    pub(crate) fn key_ids(&self) -> Vec<String> {
        let open = match self.open.lock() {
            Ok(open) => open,
            Err(poisoned) => poisoned.into_inner(),
        };
        open.keys().cloned().collect()
    }

    /// How many `key_id` holds open now.
    #[cfg(test)]
    fn open(&self, key_id: &str) -> usize {
        self.open
            .lock()
            .map_or(0, |o| o.get(key_id).copied().unwrap_or(0))
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut open = match self.holds.open.lock() {
            Ok(open) => open,
            Err(poisoned) => poisoned.into_inner(),
        };
        if let Some(n) = open.get_mut(&self.key_id) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.key_id);
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_key_holds_at_most_its_limit_and_gets_each_back_when_one_closes() {
        let holds = Holds::new(2, Kind::Open);
        let a = holds.take("k1").unwrap();
        let _b = holds.take("k1").unwrap();
        let refused = holds.take("k1").unwrap_err();
        assert_eq!(refused.code, crate::ErrorCode::LimitReached);
        assert!(refused.detail.contains("limits.max_open_per_key"));
        // Another key is not affected.
        let _c = holds.take("k2").unwrap();
        drop(a);
        assert_eq!(holds.open("k1"), 1);
        let mut ids = holds.key_ids();
        ids.sort();
        assert_eq!(ids, ["k1", "k2"]);
        let _d = holds.take("k1").unwrap();
        drop(_d);
        drop(_b);
        assert_eq!(holds.open("k1"), 0);
        assert!(holds.open.lock().unwrap().get("k1").is_none());
    }

    #[test]
    fn requests_in_flight_are_refused_past_their_own_limit_naming_it() {
        let holds = Holds::new(1, Kind::InFlight);
        let a = holds.take("k1").unwrap();
        let refused = holds.take("k1").unwrap_err();
        assert_eq!(refused.code, crate::ErrorCode::LimitReached);
        assert!(refused.detail.contains("limits.max_in_flight_per_key"));
        drop(a);
        let _b = holds.take("k1").unwrap();
    }
}
