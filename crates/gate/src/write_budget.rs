//! `limits.max_request_bytes_per_agent_per_hour`: how many bytes of
//! requests (actions, plans, outcomes and reported runs, as JSON) one agent
//! may have this daemon store an hour. Every request is stored and audited, allowed or denied,
//! and the database holds several times what was sent (the action, its
//! events, the audit chain): one agent key sending its largest requests in
//! a loop grew it by tens of gigabytes an hour, until the disk was full for
//! every agent and approver.
//!
//! The count is this daemon's, by hour of its own clock from the agent's
//! first request of the window. A request past it is refused with 429
//! `limit-reached` before anything is stored, and a `limit.reached` event
//! names the limit at most once a minute per agent.

use std::time::{Duration, Instant};

use crate::agent_window::AgentWindow;
use crate::{Gate, GateError, GateResult};

/// The window a budget covers.
const WINDOW: Duration = Duration::from_secs(3600);

/// Bytes of requests stored per agent in the current window.
pub(crate) struct WriteBudget(AgentWindow);

impl Default for WriteBudget {
    fn default() -> Self {
        WriteBudget(AgentWindow::new(WINDOW))
    }
}

impl WriteBudget {
    /// Takes `bytes` of `agent`'s `max` this window; false (and nothing
    /// taken) past it.
    fn take(&self, agent: &str, bytes: u64, max: u64, now: Instant) -> bool {
        self.0.take(agent, bytes, max, now)
    }
}

/// Bytes a request took of its agent's budget, given back if it turns out
/// to store nothing (a retry of a stored request).
#[must_use]
pub(crate) struct Taken {
    agent: String,
    bytes: u64,
}

impl Taken {
    /// Gives the bytes back.
    pub(crate) fn give_back(self, gate: &Gate) {
        gate.write_budget().0.give_back(&self.agent, self.bytes);
    }
}

/// The bytes an action request has stored: its strings and its params as
/// JSON. Counted from its fields, so the usual request (a tool and a
/// detail) is not serialized once more just to be measured.
pub(crate) fn request_bytes(body: &actiongate_api::CreateAction) -> usize {
    use actiongate_api::CreateAction;
    let (reason, timeout, key) = body.common();
    let (session, runtime) = body.origin();
    let strings: usize = [reason, timeout, key, session, runtime]
        .into_iter()
        .flatten()
        .map(str::len)
        .sum();
    let json = |v: &serde_json::Value| crate::bounds::json_len(v, usize::MAX);
    strings
        + match body {
            CreateAction::Tool(t) => {
                t.tool.len()
                    + t.detail.len()
                    + t.caution.as_deref().map_or(0, str::len)
                    + t.params.as_ref().map_or(0, json)
            }
            CreateAction::Handler(h) => h.handler.len() + h.action.len() + json(&h.params),
        }
}

impl Gate {
    /// Admits a request of `agent` whose body takes `bytes` as JSON, or
    /// refuses it with [`crate::ErrorCode::LimitReached`] naming the limit.
    pub(crate) async fn admit_request_bytes(&self, agent: &str, bytes: usize) -> GateResult<()> {
        match self.take_request_bytes(agent, bytes) {
            Some(_) => Ok(()),
            None => Err(self.past_request_bytes(agent).await),
        }
    }

    /// An action request `body` of `agent`: its bytes are taken as
    /// [`Gate::admit_request_bytes`] does, but a retry of a request already
    /// stored (the same idempotency key) is admitted past the budget
    /// (taking nothing), as it stores nothing.
    pub(crate) async fn admit_action_bytes(
        &self,
        agent: &str,
        body: &actiongate_api::CreateAction,
    ) -> GateResult<Option<Taken>> {
        let (_, _, key) = body.common();
        if let Some(taken) = self.take_request_bytes(agent, request_bytes(body)) {
            return Ok(Some(taken));
        }
        match key {
            Some(key) if self.store().action_for_key(agent, key).await?.is_some() => Ok(None),
            _ => Err(self.past_request_bytes(agent).await),
        }
    }

    fn take_request_bytes(&self, agent: &str, bytes: usize) -> Option<Taken> {
        let max = self.config().max_request_bytes_per_agent_per_hour;
        self.write_budget()
            .take(agent, bytes as u64, max, Instant::now())
            .then(|| Taken {
                agent: agent.to_owned(),
                bytes: bytes as u64,
            })
    }

    /// The refusal of a request past the budget, said as an event too.
    async fn past_request_bytes(&self, agent: &str) -> GateError {
        let max = self.config().max_request_bytes_per_agent_per_hour;
        self.limit_reached(agent, "max_request_bytes_per_agent_per_hour", max as usize)
            .await;
        GateError::limit_reached(format!(
            "agent '{agent}' may send at most {max} bytes of requests an hour to be stored \
             (limits.max_request_bytes_per_agent_per_hour); this one was not stored"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_agent_has_its_budget_a_window() {
        let b = WriteBudget::default();
        let t = Instant::now();
        assert!(b.take("a", 600, 1000, t));
        assert!(!b.take("a", 600, 1000, t), "past the budget");
        assert!(b.take("a", 400, 1000, t), "what is left is still there");
        assert!(!b.take("a", 1, 1000, t));
        assert!(b.take("b", 1000, 1000, t));
        assert!(!b.take("a", 1, 1000, t + Duration::from_secs(3599)));
        assert!(b.take("a", 1000, 1000, t + WINDOW));
    }
}
