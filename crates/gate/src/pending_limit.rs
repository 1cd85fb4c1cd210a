//! `limits.max_pending_per_agent`: how many items (actions and grant
//! requests) one agent may have waiting for a human at once, so that one
//! agent cannot bury the queue operators read.
//!
//! A request that would add one takes a [`Ticket`] before it is stored and
//! drops it after. The ticket counts the agent's requests in flight, and a
//! request is admitted only while the items already stored plus those in
//! flight stay below the limit: on one daemon the limit is never passed,
//! however many requests race, and no lock is held across the write. (With
//! several daemons on Postgres each counts its own requests in flight, so a
//! burst spread over them can pass the limit by at most their number - 1
//! per round of concurrent requests.)

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::{Gate, GateError, GateResult};

/// At most one `limit.reached` event per agent this often.
const NOTE_EVERY: Duration = Duration::from_secs(60);

/// The per-agent counts behind [`Gate::admit_pending`].
#[derive(Default)]
pub(crate) struct PendingLimit {
    in_flight: Mutex<HashMap<String, usize>>,
    noted: Mutex<HashMap<String, Instant>>,
}

/// One request of an agent in flight that may add a pending item; counted
/// until dropped.
pub(crate) struct Ticket<'a> {
    limit: &'a PendingLimit,
    agent: String,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if let Ok(mut m) = self.limit.in_flight.lock()
            && let Some(n) = m.get_mut(&self.agent)
        {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.agent);
            }
        }
    }
}

impl PendingLimit {
    fn take(&self, agent: &str) -> (Ticket<'_>, usize) {
        let before = match self.in_flight.lock() {
            Ok(mut m) => {
                let n = m.entry(agent.to_owned()).or_insert(0);
                *n += 1;
                *n - 1
            }
            // A panic elsewhere poisoned it: count nothing in flight.
            Err(_) => 0,
        };
        (
            Ticket {
                limit: self,
                agent: agent.to_owned(),
            },
            before,
        )
    }

    /// Whether a `limit.reached` event about `agent` is due (and, if so,
    /// that it is being written now).
    fn note_due(&self, agent: &str) -> bool {
        let Ok(mut m) = self.noted.lock() else {
            return false;
        };
        let now = Instant::now();
        m.retain(|_, at| now.duration_since(*at) < NOTE_EVERY);
        if m.contains_key(agent) {
            return false;
        }
        m.insert(agent.to_owned(), now);
        true
    }
}

impl Gate {
    /// Admits one more item of `agent` waiting for a human, or refuses it
    /// with [`crate::ErrorCode::LimitReached`] naming the limit (and
    /// records a `limit.reached` event, at most once a minute per agent).
    /// Hold the ticket until the item is stored.
    pub(crate) async fn admit_pending(&self, agent: &str) -> GateResult<Ticket<'_>> {
        let max = self.config().max_pending_per_agent;
        let (ticket, in_flight) = self.pending_limit().take(agent);
        let stored = self.store().pending_of_agent(agent).await?;
        let held = usize::try_from(stored).unwrap_or(usize::MAX);
        if held.saturating_add(in_flight) < max {
            return Ok(ticket);
        }
        drop(ticket);
        metrics::counter!("actiongate_limit_reached_total", "limit" => "max_pending_per_agent")
            .increment(1);
        if self.pending_limit().note_due(agent) {
            tracing::warn!(agent, max, "an agent reached limits.max_pending_per_agent");
            let data = json!({
                "limit": "max_pending_per_agent",
                "agent": agent,
                "max": max,
            });
            let written = match actiongate_store::Json::of(&data) {
                Ok(d) => self.store().record_limit_reached(agent, d).await,
                Err(e) => Err(e.into()),
            };
            if let Err(e) = written {
                tracing::warn!(agent, error = %e, "recording limit.reached failed");
            }
        }
        Err(GateError::limit_reached(format!(
            "agent '{agent}' may have at most {max} items waiting for a human \
             (limits.max_pending_per_agent); new ones are refused until some are decided"
        )))
    }
}
