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
        let max = self.config().max_request_bytes_per_agent_per_hour;
        if self
            .write_budget()
            .take(agent, bytes as u64, max, Instant::now())
        {
            return Ok(());
        }
        self.limit_reached(agent, "max_request_bytes_per_agent_per_hour", max as usize)
            .await;
        Err(GateError::limit_reached(format!(
            "agent '{agent}' may send at most {max} bytes of requests an hour to be stored \
             (limits.max_request_bytes_per_agent_per_hour); this one was not stored"
        )))
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
