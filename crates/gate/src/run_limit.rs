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

use serde_json::json;

use crate::{Gate, GateError, GateResult};

/// The window a count covers.
const WINDOW: Duration = Duration::from_secs(60);

/// Undecided runs reported per agent in the current window, and when each
/// agent's last `limit.reached` was noted.
#[derive(Default)]
pub(crate) struct RunLimit {
    counts: Mutex<HashMap<String, (Instant, usize)>>,
    noted: Mutex<HashMap<String, Instant>>,
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

    /// Whether a `limit.reached` about `agent` is due (and is being
    /// written now).
    fn note_due(&self, agent: &str, now: Instant) -> bool {
        let mut m = self.noted.lock().unwrap_or_else(PoisonError::into_inner);
        m.retain(|_, at| now.duration_since(*at) < WINDOW);
        if m.contains_key(agent) {
            return false;
        }
        m.insert(agent.to_owned(), now);
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
        metrics::counter!(
            "actiongate_limit_reached_total",
            "limit" => "max_undecided_runs_per_minute"
        )
        .increment(1);
        if self.run_limit().note_due(agent, now) {
            tracing::warn!(
                agent,
                max,
                "an agent reached limits.max_undecided_runs_per_minute"
            );
            let data = json!({
                "limit": "max_undecided_runs_per_minute",
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
        assert!(l.note_due("a", t));
        assert!(!l.note_due("a", t + Duration::from_secs(30)));
        assert!(l.note_due("a", t + WINDOW));
    }
}
