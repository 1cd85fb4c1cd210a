//! The active grants of (agent, tool), cached: every decision reads them,
//! and a read from the pool costs a hop to a connection's thread and, after
//! each commit, SQLite re-reading the pages it had cached.
//!
//! Grants change only through the writer, so the writer clears this cache
//! after every commit that ran general work that may touch grants (all but
//! what is submitted with `Writer::run_sparing_grants`), before any caller
//! of that batch is answered. A grant that expires while
//! cached stays in the list; the policy checks expiry against the time of
//! each decision. A lookup notes the generation before it reads and stores
//! what it read only if no commit cleared the cache meanwhile, so a read
//! that raced a change cannot leave a stale entry behind.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use actiongate_policy as policy;

/// More entries than this clear the cache (they are read again on next use).
const MAX_ENTRIES: usize = 10_000;

/// Active grants by agent and tool.
#[derive(Default)]
pub(crate) struct GrantCache {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    generation: u64,
    /// Agent, then tool: nested so that a lookup borrows both names.
    map: HashMap<String, HashMap<String, Arc<Vec<policy::Grant>>>>,
    entries: usize,
}

impl GrantCache {
    /// The cached grants, or the generation to pass to [`GrantCache::insert`].
    pub(crate) fn get(&self, agent: &str, tool: &str) -> Result<Arc<Vec<policy::Grant>>, u64> {
        let Ok(inner) = self.inner.lock() else {
            return Err(u64::MAX);
        };
        match inner.map.get(agent).and_then(|tools| tools.get(tool)) {
            Some(grants) => Ok(grants.clone()),
            None => Err(inner.generation),
        }
    }

    /// Stores what was read at `generation`, unless a commit cleared the
    /// cache since.
    pub(crate) fn insert(
        &self,
        generation: u64,
        agent: &str,
        tool: &str,
        grants: Arc<Vec<policy::Grant>>,
    ) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if inner.generation != generation {
            return;
        }
        if inner.entries >= MAX_ENTRIES {
            inner.map.clear();
            inner.entries = 0;
        }
        let replaced = inner
            .map
            .entry(agent.to_owned())
            .or_default()
            .insert(tool.to_owned(), grants);
        if replaced.is_none() {
            inner.entries += 1;
        }
    }

    /// Forgets everything; called by the writer after a commit that may
    /// have changed grants.
    pub(crate) fn clear(&self) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.generation = inner.generation.wrapping_add(1);
            inner.map.clear();
            inner.entries = 0;
        }
    }
}
