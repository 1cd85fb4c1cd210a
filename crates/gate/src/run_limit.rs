//! `limits.max_undecided_runs_per_minute`: how many runs without a decision
//! one agent may report to this daemon a minute. Each becomes an
//! `action.undecided` event that every open page and chat shows as a
//! warning; an agent key reporting thousands would bury what operators
//! read, and grow the log without end.
//!
//! The count is this daemon's, by minute of its own clock. A report past it
//! is refused with 429 `limit-reached` (after its session is tainted, when
//! what it ran was an untrusted read: refusing the report never loosens a
//! session), and a `limit.reached` event names the limit at most once a
//! minute per agent.

use std::time::{Duration, Instant};

use crate::agent_window::AgentWindow;
use crate::{Gate, GateError, GateResult};

/// The window a count covers.
const WINDOW: Duration = Duration::from_secs(60);

/// Undecided runs reported per agent in the current window.
pub(crate) struct RunLimit(AgentWindow);

impl Default for RunLimit {
    fn default() -> Self {
        RunLimit(AgentWindow::new(WINDOW))
    }
}

impl RunLimit {
    /// Takes one of `agent`'s `max` reports this window; false past it.
    fn take(&self, agent: &str, max: usize, now: Instant) -> bool {
        self.0.take(agent, 1, max as u64, now)
    }
}

impl Gate {
    /// Admits one more undecided run of `agent` this minute, or refuses it
    /// with [`crate::ErrorCode::LimitReached`] naming the limit.
    pub(crate) async fn admit_undecided_run(&self, agent: &str) -> GateResult<()> {
        let max = self.config().max_undecided_runs_per_minute;
        let now = Instant::now();
        if self.run_limit().take(agent, max, now) {
            return Ok(());
        }
        self.limit_reached(agent, "max_undecided_runs_per_minute", max)
            .await;
        Err(GateError::limit_reached(format!(
            "agent '{agent}' may report at most {max} runs without a decision a minute \
             (limits.max_undecided_runs_per_minute); this one was not recorded"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_agent_has_its_count_a_window() {
        let l = RunLimit::default();
        let t = Instant::now();
        assert!(l.take("a", 2, t));
        assert!(l.take("a", 2, t));
        assert!(!l.take("a", 2, t));
        assert!(l.take("b", 2, t));
        // A new window starts a minute after the first report of the last.
        assert!(!l.take("a", 2, t + Duration::from_secs(59)));
        assert!(l.take("a", 2, t + WINDOW));
    }
}
