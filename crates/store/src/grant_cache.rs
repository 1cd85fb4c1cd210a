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

use actiongate_api::model::GrantRecord;
use actiongate_policy as policy;

/// More entries than this clear the cache (they are read again on next use).
const MAX_ENTRIES: usize = 10_000;

/// A compiled pattern no decision used for this long is dropped, at the
/// next sweep: a grant revoked, expired, used up or pruned is never used
/// again, and each kept its compiled regex (~12 KiB) until the map
/// reached [`MAX_ENTRIES`] (a soak at 20 grants a minute grew 0.1 MB a
/// minute, for hours).
const UNUSED_FOR: std::time::Duration = std::time::Duration::from_secs(600);

/// Compiled patterns are swept of unused ones every this many inserts.
const SWEEP_EVERY: usize = 128;

/// Active grants by agent and tool.
#[derive(Default)]
pub(crate) struct GrantCache {
    inner: Mutex<Inner>,
    /// Tool patterns compiled, by grant id, kept across clears: a grant's
    /// target never changes, and compiling one (a regex) costs far more
    /// than reading its row. Without this, every grant made (which clears
    /// the cache) had the next decision compile again every grant of its
    /// agent and tool, every session's.
    patterns: Mutex<Patterns>,
}

/// The compiled patterns by grant id, and how many were inserted.
#[derive(Default)]
struct Patterns {
    by_id: HashMap<String, Compiled>,
    inserts: usize,
}

impl Patterns {
    /// Keeps `compiled` under `id`, dropping first, every
    /// [`SWEEP_EVERY`] inserts, what no decision used for [`UNUSED_FOR`].
    fn insert(&mut self, id: String, compiled: Compiled, now: std::time::Instant) {
        self.inserts = self.inserts.wrapping_add(1);
        if self.by_id.len() >= MAX_ENTRIES {
            self.by_id.clear();
        } else if self.inserts.is_multiple_of(SWEEP_EVERY) {
            self.by_id
                .retain(|_, c| now.saturating_duration_since(c.used) < UNUSED_FOR);
        }
        self.by_id.insert(id, compiled);
    }
}

/// A grant's tool pattern as written and as compiled.
struct Compiled {
    tool: String,
    pattern: String,
    whole_line: bool,
    compiled: policy::ToolPattern,
    /// When a decision last used it.
    used: std::time::Instant,
}

/// A grant scoped to a session or a count of uses, as read: compiled only
/// when a decision in its session needs it ([`for_session`]), so that many
/// sessions' grants cost one decision no more than its own.
#[derive(Debug, Clone)]
pub(crate) struct Scoped {
    record: GrantRecord,
}

impl Scoped {
    /// A scoped grant as read from its row (either backend).
    pub(crate) fn from_row(row: &impl crate::row::Cols) -> Result<Scoped, crate::StoreError> {
        Ok(Scoped {
            record: crate::grants::from_row(row)?,
        })
    }
}

/// Of every session's scoped grants, those that count in `session`: the
/// ones for no session (counted uses only) and that session's own, each
/// with its uses left, their patterns compiled once by `cache`.
pub(crate) fn for_session(
    all: &[Scoped],
    session: Option<&str>,
    cache: &GrantCache,
) -> Result<Vec<(policy::Grant, Option<i64>)>, crate::StoreError> {
    all.iter()
        .map(|s| &s.record)
        .filter(|g| g.session.is_none() || (session.is_some() && g.session.as_deref() == session))
        .map(|g| Ok((cache.to_policy(g)?, g.uses_left)))
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

    /// [`crate::grants::to_policy`], the tool pattern compiled once per
    /// grant (and again should its row ever name another pattern).
    pub(crate) fn to_policy(&self, g: &GrantRecord) -> Result<policy::Grant, crate::StoreError> {
        let Some((tool, pattern, whole_line)) = tool_pattern_of(g) else {
            return crate::grants::to_policy(g);
        };
        let now = std::time::Instant::now();
        let known = self.patterns.lock().ok().and_then(|mut p| {
            p.by_id
                .get_mut(&g.id)
                .filter(|c| c.tool == tool && c.pattern == pattern && c.whole_line == whole_line)
                .map(|c| {
                    c.used = now;
                    c.compiled.clone()
                })
        });
        if let Some(compiled) = known {
            return Ok(with_target(g, policy::GrantTarget::Tool(compiled)));
        }
        let grant = crate::grants::to_policy(g)?;
        if let (policy::GrantTarget::Tool(compiled), Ok(mut p)) =
            (&grant.target, self.patterns.lock())
        {
            p.insert(
                g.id.clone(),
                Compiled {
                    tool: tool.to_owned(),
                    pattern: pattern.to_owned(),
                    whole_line,
                    compiled: compiled.clone(),
                    used: now,
                },
                now,
            );
        }
        Ok(grant)
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

/// The tool, pattern and whole-line flag of `g`, when its target is a
/// tool pattern (as [`crate::grants::to_policy`] reads it).
fn tool_pattern_of(g: &GrantRecord) -> Option<(&str, &str, bool)> {
    if g.handler.is_some() && g.permission.is_some() && g.scope.is_some() {
        return None;
    }
    Some((g.tool.as_deref()?, g.pattern.as_deref()?, g.whole_line))
}

/// `g` for the policy, with `target` (compiled already).
fn with_target(g: &GrantRecord, target: policy::GrantTarget) -> policy::Grant {
    policy::Grant {
        id: g.id.clone(),
        agent: g.agent.clone(),
        target,
        expires_at: g.expires_at,
        revoked_at: g.revoked_at,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn record(id: &str, pattern: &str) -> GrantRecord {
        serde_json::from_value(serde_json::json!({
            "id": id, "agent": "a", "tool": "bash", "pattern": pattern,
            "granted_by": "op", "granted_at": "2026-12-04T00:00:00Z",
            "expires_at": null, "revoked_at": null, "active": true,
        }))
        .unwrap()
    }

    fn pattern_of(g: &policy::Grant) -> String {
        match &g.target {
            policy::GrantTarget::Tool(p) => p.pattern().to_owned(),
            policy::GrantTarget::Permission { .. } => String::new(),
        }
    }

    #[test]
    fn a_grants_pattern_is_compiled_once_and_outlives_clears() {
        let cache = GrantCache::default();
        let g = cache.to_policy(&record("g1", "make .*")).unwrap();
        assert_eq!(pattern_of(&g), "make .*");
        cache.clear();
        assert!(cache.patterns.lock().unwrap().by_id.contains_key("g1"));
        let again = cache.to_policy(&record("g1", "make .*")).unwrap();
        assert_eq!(pattern_of(&again), "make .*");
        assert_eq!(again.id, "g1");
        // A row naming another pattern under the same id is compiled anew,
        // never answered from the memo.
        let other = cache.to_policy(&record("g1", "ls .*")).unwrap();
        assert_eq!(pattern_of(&other), "ls .*");
    }

    /// A compiled pattern no decision used for a while is dropped at the
    /// next sweep; one in use stays.
    #[test]
    fn compiled_patterns_unused_for_a_while_are_swept() {
        let cache = GrantCache::default();
        cache.to_policy(&record("old", "make .*")).unwrap();
        let compiled = |id: &str| -> Compiled {
            let g = cache.to_policy(&record(id, "x")).unwrap();
            let policy::GrantTarget::Tool(compiled) = g.target else {
                panic!("a tool grant");
            };
            Compiled {
                tool: "bash".into(),
                pattern: "x".into(),
                whole_line: false,
                compiled,
                used: std::time::Instant::now(),
            }
        };
        let fresh: Vec<Compiled> = (0..SWEEP_EVERY)
            .map(|i| compiled(&format!("n{i}")))
            .collect();
        let mut p = cache.patterns.lock().unwrap();
        // Later than the unused time: a sweep drops "old"; what is
        // inserted then stays.
        let later = std::time::Instant::now() + UNUSED_FOR * 2;
        let mut kept = p.by_id.remove("n0").unwrap();
        kept.used = later;
        p.by_id.insert("kept".into(), kept);
        for (i, c) in fresh.into_iter().enumerate() {
            p.insert(format!("m{i}"), c, later);
        }
        assert!(!p.by_id.contains_key("old"));
        assert!(p.by_id.contains_key("kept"));
        assert!(p.by_id.len() <= SWEEP_EVERY + 1, "{}", p.by_id.len());
    }

    /// A decision in one session compiles its own session's grants and
    /// those for no session, never another session's.
    #[test]
    fn a_session_compiles_only_the_grants_that_count_in_it() {
        let cache = GrantCache::default();
        let scoped = |id: &str, session: Option<&str>| {
            let mut record = record(id, "make .*");
            record.session = session.map(str::to_owned);
            record.uses_left = session.is_none().then_some(3);
            Scoped { record }
        };
        let all: Vec<Scoped> = (0..50)
            .map(|i| scoped(&format!("s{i}"), Some(&format!("session-{i}"))))
            .chain([scoped("counted", None)])
            .collect();
        let mine = for_session(&all, Some("session-7"), &cache).unwrap();
        let ids: Vec<&str> = mine.iter().map(|(g, _)| g.id.as_str()).collect();
        assert_eq!(ids, ["s7", "counted"]);
        assert_eq!(mine[1].1, Some(3));
        assert_eq!(cache.patterns.lock().unwrap().by_id.len(), 2);
        let none = for_session(&all, None, &cache).unwrap();
        assert_eq!(none.len(), 1);
    }

    #[test]
    fn a_permission_grant_is_not_memoised() {
        let cache = GrantCache::default();
        let mut r = record("g2", "x");
        r.tool = None;
        r.pattern = None;
        r.handler = Some("h".to_owned());
        r.permission = Some("p".to_owned());
        r.scope = Some(serde_json::Map::new());
        let g = cache.to_policy(&r).unwrap();
        assert!(matches!(g.target, policy::GrantTarget::Permission { .. }));
        assert!(cache.patterns.lock().unwrap().by_id.is_empty());
    }
}
