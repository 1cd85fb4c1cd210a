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

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::{Gate, GateError, GateResult};

/// The window a count covers.
const WINDOW: Duration = Duration::from_secs(60);

/// Undecided runs reported per agent in the current window.
#[derive(Default)]
pub(crate) struct RunLimit {
    counts: Mutex<HashMap<String, (Instant, usize)>>,
}

impl RunLimit {
    /// Takes one of `agent`'s `max` reports this window; false past it.
    fn take(&self, agent: &str, max: usize, now: Instant) -> bool {
        let mut m = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        m.retain(|_, (start, _)| now.duration_since(*start) < WINDOW);
        let (_, n) = m.entry(agent.to_owned()).or_insert((now, 0));
        if *n >= max {
            return false;
        }
        *n += 1;
        true
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
