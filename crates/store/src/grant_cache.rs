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
//!
//! The grants scoped to a session or a count of uses are cached the same
//! way ([`Scoped`]): a use is taken by a compare-and-set in the
//! transaction that stores the action (which re-checks revocation and
//! expiry), and that commit clears the cache, so a stale count can only
//! make an action ask, never allow one more time.
//!
//! On Postgres the cache answers only while the node's tail follows the
//! log; it is cleared when the tail publishes a grant event (any node's),
//! after a use is taken here, and every second (`pg::grants`).

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

/// A grant scoped to a session or a count of uses, as read.
#[derive(Debug, Clone)]
pub(crate) struct Scoped {
    pub(crate) grant: policy::Grant,
    /// Uses left when read, if counted.
    pub(crate) uses_left: Option<i64>,
    /// The session it is for, if any.
    pub(crate) session: Option<String>,
}

impl Scoped {
    /// A scoped grant as read from its row (either backend).
    pub(crate) fn from_row(row: &impl crate::row::Cols) -> Result<Scoped, crate::StoreError> {
        let g = crate::grants::from_row(row)?;
        Ok(Scoped {
            grant: crate::grants::to_policy(&g)?,
            uses_left: g.uses_left,
            session: g.session,
        })
    }
}

/// Of every session's scoped grants, those that count in `session`: the
/// ones for no session (counted uses only) and that session's own, each
/// with its uses left.
pub(crate) fn for_session(
    all: &[Scoped],
    session: Option<&str>,
) -> Vec<(policy::Grant, Option<i64>)> {
    all.iter()
        .filter(|s| s.session.is_none() || (session.is_some() && s.session.as_deref() == session))
        .map(|s| (s.grant.clone(), s.uses_left))
        .collect()
}

/// Agent, then tool: nested so that a lookup borrows both names.
type ByAgentTool<T> = HashMap<String, HashMap<String, Arc<Vec<T>>>>;

#[derive(Default)]
struct Inner {
    generation: u64,
    map: ByAgentTool<policy::Grant>,
    scoped: ByAgentTool<Scoped>,
    entries: usize,
}

impl Inner {
    /// Stores `value` under (`agent`, `tool`) in the map `pick` chooses,
    /// clearing everything first when full.
    fn put<T>(
        &mut self,
        pick: fn(&mut Inner) -> &mut ByAgentTool<T>,
        agent: &str,
        tool: &str,
        value: Arc<Vec<T>>,
    ) {
        if self.entries >= MAX_ENTRIES {
            self.map.clear();
            self.scoped.clear();
            self.entries = 0;
        }
        let replaced = pick(self)
            .entry(agent.to_owned())
            .or_default()
            .insert(tool.to_owned(), value);
        if replaced.is_none() {
            self.entries += 1;
        }
    }
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
        inner.put(|i| &mut i.map, agent, tool, grants);
    }

    /// The cached scoped grants of (`agent`, `tool`), every session's, or
    /// the generation to pass to [`GrantCache::insert_scoped`].
    pub(crate) fn get_scoped(&self, agent: &str, tool: &str) -> Result<Arc<Vec<Scoped>>, u64> {
        let Ok(inner) = self.inner.lock() else {
            return Err(u64::MAX);
        };
        match inner.scoped.get(agent).and_then(|tools| tools.get(tool)) {
            Some(grants) => Ok(grants.clone()),
            None => Err(inner.generation),
        }
    }

    /// Stores the scoped grants read at `generation`, unless a commit
    /// cleared the cache since.
    pub(crate) fn insert_scoped(
        &self,
        generation: u64,
        agent: &str,
        tool: &str,
        grants: Arc<Vec<Scoped>>,
    ) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        if inner.generation != generation {
            return;
        }
        inner.put(|i| &mut i.scoped, agent, tool, grants);
    }

    /// Forgets everything; called by the writer after a commit that may
    /// have changed grants.
    pub(crate) fn clear(&self) {
        if let Ok(mut inner) = self.inner.lock() {
            inner.generation = inner.generation.wrapping_add(1);
            inner.map.clear();
            inner.scoped.clear();
            inner.entries = 0;
        }
    }
}
