//! In-memory caches of what every request reads: API keys by hash and
//! compiled profiles by agent. Each saves a database round trip per request
//! (with sqlx's SQLite driver, a hop to the connection's thread and back).
//!
//! Both are invalidated by the daemon's own changes, and neither can keep a
//! stale entry because of a race: a lookup notes the cache's generation
//! before it reads the database and stores what it read only if no change
//! bumped the generation meanwhile.
//!
//! Keys can also be revoked by `actiongate keys revoke` on the data dir while
//! the daemon runs, or through another daemon on the same Postgres, which
//! this daemon does not see; cached keys therefore live only [`KEY_TTL`],
//! so such a revocation takes effect within that time. Only agents' keys are
//! cached: an operator's or an admin's is read at every request
//! (`Gate::authenticate`). Agents change only through the API.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a key found in the database is trusted without asking again.
pub const KEY_TTL: Duration = Duration::from_secs(1);

/// More entries than this clear the cache (they are read again on next use).
const MAX_ENTRIES: usize = 10_000;

/// A map whose entries are dropped wholesale or one by one on change.
pub struct Cache<V> {
    inner: Mutex<Inner<V>>,
    ttl: Option<Duration>,
}

struct Inner<V> {
    generation: u64,
    map: HashMap<String, (V, Instant)>,
}

/// The generation a lookup started at; pass it back to [`Cache::insert`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket(u64);

impl<V: Clone> Cache<V> {
    /// A cache whose entries expire after `ttl` (never when `None`).
    pub fn new(ttl: Option<Duration>) -> Cache<V> {
        Cache {
            inner: Mutex::new(Inner {
                generation: 0,
                map: HashMap::new(),
            }),
            ttl,
        }
    }

    /// The cached value, or a ticket to insert one read from the database.
    pub fn get(&self, key: &str) -> Result<V, Ticket> {
        let Ok(inner) = self.inner.lock() else {
            return Err(Ticket(u64::MAX));
        };
        match inner.map.get(key) {
            Some((v, at)) if self.ttl.is_none_or(|ttl| at.elapsed() < ttl) => Ok(v.clone()),
            _ => Err(Ticket(inner.generation)),
        }
    }

    /// Stores `value` unless the cache changed since `ticket` was taken.
    pub fn insert(&self, ticket: Ticket, key: &str, value: V) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if inner.generation != ticket.0 {
            return;
        }
        if inner.map.len() >= MAX_ENTRIES {
            inner.map.clear();
        }
        inner.map.insert(key.to_owned(), (value, Instant::now()));
    }

    /// How many times it was invalidated: a change since a reader last
    /// looked is a different number.
    pub fn generation(&self) -> u64 {
        self.inner.lock().map_or(u64::MAX, |inner| inner.generation)
    }

    /// Drops the entries `stale` picks and refuses lookups in flight.
    pub fn invalidate(&self, stale: impl Fn(&str, &V) -> bool) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.generation = inner.generation.wrapping_add(1);
            inner.map.retain(|k, (v, _)| !stale(k, v));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_lookup_that_raced_a_change_is_not_stored() {
        let cache: Cache<u32> = Cache::new(None);
        let ticket = cache.get("a").unwrap_err();
        cache.invalidate(|k, _| k == "a");
        cache.insert(ticket, "a", 1);
        assert!(cache.get("a").is_err());
        let ticket = cache.get("a").unwrap_err();
        cache.insert(ticket, "a", 2);
        assert_eq!(cache.get("a"), Ok(2));
    }

    #[test]
    fn invalidation_drops_only_the_picked_entries() {
        let cache: Cache<u32> = Cache::new(None);
        for (k, v) in [("a", 1), ("b", 2)] {
            let t = cache.get(k).unwrap_err();
            cache.insert(t, k, v);
        }
        cache.invalidate(|_, v| *v == 1);
        assert!(cache.get("a").is_err());
        assert_eq!(cache.get("b"), Ok(2));
    }

    #[test]
    fn entries_expire_after_the_ttl() {
        let cache: Cache<u32> = Cache::new(Some(Duration::ZERO));
        let t = cache.get("a").unwrap_err();
        cache.insert(t, "a", 1);
        assert!(cache.get("a").is_err());
    }
}
