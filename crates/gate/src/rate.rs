//! Rate limits of profiles (`max_per_hour`, `rule_limits`): an action an
//! allow pattern allows takes a slot of each limit that applies, in the
//! store; past a limit it is asked instead, and its decision's reason says
//! which limit. A failure to count fails the request (never an allow). A
//! dry run (`POST /v1/check`) reads the counts and takes no slot.

use actiongate_policy::{self as policy, rate::limits_for};
use actiongate_store::{Decision, DecisionResult};

use crate::{Gate, GateResult};

impl Gate {
    /// `decision` (made for `agent` under its profile), or an ask when an
    /// allow would pass one of the profile's rate limits; an allow within
    /// them takes a slot of each.
    pub(crate) async fn rate_limited(
        &self,
        agent: &str,
        decision: Decision,
    ) -> GateResult<Decision> {
        self.rate_applied(agent, decision, true).await
    }

    /// [`Gate::rate_limited`] for a dry run: the same answer, taking no
    /// slot.
    pub(crate) async fn rate_peeked(
        &self,
        agent: &str,
        decision: Decision,
    ) -> GateResult<Decision> {
        self.rate_applied(agent, decision, false).await
    }

    async fn rate_applied(
        &self,
        agent: &str,
        decision: Decision,
        take: bool,
    ) -> GateResult<Decision> {
        if decision.result != DecisionResult::Allow {
            return Ok(decision);
        }
        let Some(rule) = decision
            .rule
            .as_ref()
            .and_then(|r| serde_json::from_value::<policy::Rule>(r.clone()).ok())
        else {
            return Ok(decision);
        };
        let profile = self.profile_of(agent).await?;
        let probe = policy::Decision {
            verdict: policy::Verdict::Allow,
            reason: String::new(),
            rule: Some(rule),
        };
        let limits = limits_for(&profile, &probe);
        if limits.is_empty() {
            return Ok(decision);
        }
        let counters = limits
            .iter()
            .map(|l| (l.key.clone(), i64::from(l.max_per_hour)))
            .collect();
        let now = chrono::Utc::now();
        let full = if take {
            self.store().rate_take(agent, counters, now).await?
        } else {
            self.store().rate_full(agent, counters, now).await?
        };
        let Some(key) = full else {
            return Ok(decision);
        };
        let Some(limit) = limits.iter().find(|l| l.key == key) else {
            return Ok(decision);
        };
        if take {
            metrics::counter!("actiongate_rate_limited_total").increment(1);
        }
        Ok(Decision {
            result: DecisionResult::Ask,
            reason: format!(
                "{}; but {} ({} an hour) is reached, so a human decides",
                decision.reason, limit.what, limit.max_per_hour
            ),
            rule: decision.rule,
        })
    }
}
