//! `limits.max_pending_per_agent`: how many items (actions, grant requests
//! and plans) one agent may have waiting for a human at once, so that one
//! agent cannot bury the queue operators read.
//!
//! A request that would add one takes a [`Ticket`] before it counts the
//! agent's stored items and keeps it until its item is stored: the ticket
//! holds the agent's admission lock, so on one daemon the count a request
//! reads includes every item admitted before it, and the limit is never
//! passed, nor refused below it, however many requests race. Only requests
//! that ask a human take it; other agents never wait for it. (With several
//! daemons on Postgres each daemon admits its own requests, so a burst
//! spread over them can pass the limit by at most their number - 1 per
//! round of concurrent requests.)

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::sync::OwnedMutexGuard;

use serde_json::json;

use crate::{Gate, GateError, GateResult};

/// At most one `limit.reached` event per agent this often.
const NOTE_EVERY: Duration = Duration::from_secs(60);

/// The per-agent admission locks behind [`Gate::admit_pending`].
#[derive(Default)]
pub(crate) struct PendingLimit {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// When each (agent, limit)'s last `limit.reached` was written.
    noted: Mutex<HashMap<(String, &'static str), Instant>>,
}

/// One request of an agent admitted to add a pending item: the agent's
/// admission lock, held until the item is stored.
pub(crate) struct Ticket<'a> {
    limit: &'a PendingLimit,
    agent: String,
    guard: Option<OwnedMutexGuard<()>>,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        drop(self.guard.take());
        // Forget the agent's lock once nobody holds or waits for it.
        let mut m = self
            .limit
            .locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if m.get(&self.agent)
            .is_some_and(|l| Arc::strong_count(l) == 1)
        {
            m.remove(&self.agent);
        }
    }
}

impl PendingLimit {
    async fn take(&self, agent: &str) -> Ticket<'_> {
        // A panic elsewhere cannot leave the map half-changed: recover it.
        let lock = self
            .locks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(agent.to_owned())
            .or_default()
            .clone();
        Ticket {
            limit: self,
            agent: agent.to_owned(),
            guard: Some(lock.lock_owned().await),
        }
    }

    /// Whether a `limit.reached` event about `agent` and `limit` is due
    /// (and, if so, that it is being written now).
    fn note_due(&self, agent: &str, limit: &'static str, now: Instant) -> bool {
        let Ok(mut m) = self.noted.lock() else {
            return false;
        };
        m.retain(|_, at| now.duration_since(*at) < NOTE_EVERY);
        let key = (agent.to_owned(), limit);
        if m.contains_key(&key) {
            return false;
        }
        m.insert(key, now);
        true
    }
}

impl Gate {
    /// Counts `agent` reaching `limits.<limit>` (at `max`), and records a
    /// `limit.reached` event at most once a minute per agent and limit
    /// (each daemon its own).
    pub(crate) async fn limit_reached(&self, agent: &str, limit: &'static str, max: usize) {
        metrics::counter!("actiongate_limit_reached_total", "limit" => limit).increment(1);
        if !self.pending_limit().note_due(agent, limit, Instant::now()) {
            return;
        }
        tracing::warn!(agent, max, "an agent reached limits.{limit}");
        let data = json!({"limit": limit, "agent": agent, "max": max});
        let written = match actiongate_store::Json::of(&data) {
            Ok(d) => self.store().record_limit_reached(agent, d).await,
            Err(e) => Err(e.into()),
        };
        if let Err(e) = written {
            tracing::warn!(agent, error = %e, "recording limit.reached failed");
        }
    }

    /// Admits one more item of `agent` waiting for a human, or refuses it
    /// with [`crate::ErrorCode::LimitReached`] naming the limit (and
    /// records a `limit.reached` event, at most once a minute per agent).
    /// Hold the ticket until the item is stored.
    pub(crate) async fn admit_pending(&self, agent: &str) -> GateResult<Ticket<'_>> {
        let max = self.config().max_pending_per_agent;
        let asked = Instant::now();
        let ticket = self.pending_limit().take(agent).await;
        // The agent's requests take turns here: when the one before found
        // the database locked, this one would wait out the same lock (a
        // busy timeout each, one after another); it is answered busy now.
        if self.store().busy_since(asked) {
            return Err(actiongate_store::StoreError::Busy.into());
        }
        let stored = self.store().pending_of_agent(agent).await?;
        if usize::try_from(stored).unwrap_or(usize::MAX) < max {
            return Ok(ticket);
        }
        drop(ticket);
        self.limit_reached(agent, "max_pending_per_agent", max)
            .await;
        Err(GateError::limit_reached(format!(
            "agent '{agent}' may have at most {max} items waiting for a human \
             (limits.max_pending_per_agent); new ones are refused until some are decided"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_noted_once_a_minute_per_agent_and_limit() {
        let l = PendingLimit::default();
        let t = Instant::now();
        let runs = "max_undecided_runs_per_minute";
        assert!(l.note_due("a", runs, t));
        assert!(!l.note_due("a", runs, t + Duration::from_secs(30)));
        assert!(l.note_due("a", "max_pending_per_agent", t));
        assert!(l.note_due("b", runs, t));
        assert!(l.note_due("a", runs, t + NOTE_EVERY));
    }
}
