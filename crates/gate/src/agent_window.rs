//! What each agent used of a limit over a window of this daemon's clock
//! (`limits.max_undecided_runs_per_minute`, a count;
//! `limits.max_request_bytes_per_agent_per_hour`, bytes): the window starts
//! with the agent's first use after the last one ended.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Per-agent use in the current window.
pub(crate) struct AgentWindow {
    window: Duration,
    used: Mutex<HashMap<String, (Instant, u64)>>,
}

impl AgentWindow {
    /// Windows of `window`.
    pub(crate) fn new(window: Duration) -> AgentWindow {
        AgentWindow {
            window,
            used: Mutex::default(),
        }
    }

    /// Takes `amount` of `agent`'s `max` this window; false (and nothing
    /// taken) past it.
    pub(crate) fn take(&self, agent: &str, amount: u64, max: u64, now: Instant) -> bool {
        let mut m = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        m.retain(|_, (start, _)| now.duration_since(*start) < self.window);
        let (_, used) = m.entry(agent.to_owned()).or_insert((now, 0));
        if used.saturating_add(amount) > max {
            return false;
        }
        *used += amount;
        true
    }

    /// Gives `amount` taken this window back to `agent` (a request that
    /// turned out to store nothing).
    pub(crate) fn give_back(&self, agent: &str, amount: u64) {
        let mut m = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, used)) = m.get_mut(agent) {
            *used = used.saturating_sub(amount);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_agent_has_its_own_use_a_window() {
        let w = AgentWindow::new(Duration::from_secs(60));
        let t = Instant::now();
        assert!(w.take("a", 600, 1000, t));
        assert!(!w.take("a", 600, 1000, t), "past the limit");
        assert!(w.take("a", 400, 1000, t), "what is left is still there");
        assert!(!w.take("a", 1, 1000, t));
        assert!(w.take("b", 1000, 1000, t));
        // A new window starts a window after the first use of the last.
        assert!(!w.take("a", 1, 1000, t + Duration::from_secs(59)));
        assert!(w.take("a", 1000, 1000, t + Duration::from_secs(60)));
    }
}
