//! Dry runs of profiles: deciding one action under an inline profile
//! (`POST /v1/check` with `profile`), and replaying a candidate profile
//! over an agent's recorded actions to show which decisions it would change
//! (`POST /v1/agents/{id}/profile/replay`). Both only read.
//!
//! A replayed action keeps what its grant gave it: a decision that came
//! from a grant stays an allow unless the candidate denies the action
//! (deny patterns win over grants, as when deciding) or an approvals rule
//! of the candidate governs it (then its approvers decide: it asks unless
//! the candidate alone allows it). One made after its
//! session read untrusted content asks where the candidate guards it.

use std::collections::{BTreeMap, HashMap};

use actiongate_api::replay::{ReplayExample, ReplayGroup, ReplayReport};
use actiongate_policy::{self as policy, Verdict};
use actiongate_store::{Action, ActionFilter};
use chrono::{DateTime, Duration, Utc};
use serde_json::Value;

use crate::policy::{record, validate_tool};
use crate::{Caller, Gate, GateError, GateResult};
use actiongate_api::model::{DecisionResult, Role};
use actiongate_api::text::clip;

/// Actions read per page while replaying.
const PAGE: i64 = 1000;
/// Examples kept per group.
const EXAMPLES: usize = 5;
/// The default history replayed.
const DEFAULT_SINCE_DAYS: i64 = 30;

/// `since` as given: an RFC 3339 time, or `<n>d`, `<n>h`, `<n>m` back
/// from `now`; `None` is 30 days back.
pub fn parse_since(since: Option<&str>, now: DateTime<Utc>) -> GateResult<DateTime<Utc>> {
    let Some(s) = since.map(str::trim) else {
        return Ok(now - Duration::days(DEFAULT_SINCE_DAYS));
    };
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&Utc));
    }
    let bad = || {
        GateError::invalid(
            "since",
            "an RFC 3339 time or a duration back from now like 30d, 12h, 90m",
        )
    };
    // The unit is the last character, whatever its width.
    let cut = s.char_indices().last().map_or(0, |(i, _)| i);
    let (n, unit) = s.split_at(cut);
    let n: i64 = n.parse().map_err(|_| bad())?;
    if !(0..=36_500 * 24 * 60).contains(&n) {
        return Err(bad());
    }
    let back = match unit {
        "d" if n <= 36_500 => Duration::days(n),
        "h" if n <= 36_500 * 24 => Duration::hours(n),
        "m" => Duration::minutes(n),
        _ => return Err(bad()),
    };
    Ok(now - back)
}

fn word(v: Verdict) -> &'static str {
    match v {
        Verdict::Allow => "allow",
        Verdict::Ask => "ask",
        Verdict::Deny => "deny",
    }
}

fn past(outcome: &str) -> &'static str {
    match outcome {
        "allow" => "allowed",
        "ask" => "asked",
        _ => "denied",
    }
}

/// What `candidate` decides for recorded `action`; `tainted`: its session
/// had read untrusted content before it ([`Gate::tainted_before`]), so a
/// way out the candidate guards asks, as it would have when asked.
fn replay_one(candidate: &policy::Profile, action: &Action, tainted: bool) -> Verdict {
    let new = replay_rules(candidate, action);
    if tainted
        && new == Verdict::Allow
        && candidate.way_out_call(
            &action.action_string,
            action.scope.as_ref(),
            action.reaches_out(),
        )
    {
        Verdict::Ask
    } else {
        new
    }
}

/// [`replay_one`] before taint: the candidate's rules, and a grant's allow.
fn replay_rules(candidate: &policy::Profile, action: &Action) -> Verdict {
    let new = policy::check(&action.action_string, candidate);
    // Only an allow is kept: a grant that covered an action some hazard
    // or approvals rule still asked about gave it nothing to keep.
    let by_grant = action.decision.result == DecisionResult::Allow
        && action
            .decision
            .rule
            .as_ref()
            .and_then(|r| r.get("kind"))
            .and_then(Value::as_str)
            == Some("grant");
    // Under an approvals rule of the candidate a grant allows nothing: its
    // approvers decide (`crate::policy::decide_in`).
    let governed = || {
        !candidate
            .approval_rules_for(&action.action_string, action.scope.as_ref())
            .is_empty()
    };
    if by_grant && new != Verdict::Deny && !governed() {
        Verdict::Allow
    } else {
        new
    }
}

/// Tallies changed decisions by old -> new outcome.
#[derive(Default)]
struct Tally {
    replayed: u64,
    groups: BTreeMap<(String, String), ReplayGroup>,
}

impl Tally {
    fn add(&mut self, action: &Action, new: Verdict) {
        self.replayed += 1;
        let old = action.decision.result.as_str().to_owned();
        let new = word(new).to_owned();
        if old == new {
            return;
        }
        let g = self
            .groups
            .entry((old.clone(), new.clone()))
            .or_insert_with(|| ReplayGroup {
                from: old,
                to: new,
                count: 0,
                examples: Vec::new(),
            });
        g.count += 1;
        if g.examples.len() < EXAMPLES {
            g.examples.push(ReplayExample {
                id: action.id.clone(),
                action_string: clip(&action.action_string, 200),
                created_at: action
                    .created_at
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            });
        }
    }

    fn report(self, agent: &str, since: DateTime<Utc>) -> ReplayReport {
        let mut groups: Vec<ReplayGroup> = self.groups.into_values().collect();
        groups.sort_by(|a, b| b.count.cmp(&a.count).then(a.from.cmp(&b.from)));
        let changed = groups.iter().map(|g| g.count).sum();
        let summary = if groups.is_empty() {
            format!("no decision of the {} replayed would change", self.replayed)
        } else {
            groups
                .iter()
                .map(|g| format!("{} {} would now be {}", g.count, past(&g.from), past(&g.to)))
                .collect::<Vec<_>>()
                .join("; ")
        };
        ReplayReport {
            agent: agent.to_owned(),
            since: since.to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
            replayed: self.replayed,
            changed,
            groups,
            summary,
        }
    }
}

/// When each session replayed was tainted (`None`: not tainted).
type TaintTimes = HashMap<String, Option<DateTime<Utc>>>;

impl Gate {
    /// Whether recorded `action` came after its session was tainted: it was
    /// asked for the taint, or it was made after the session's taint was
    /// recorded (its tainting action let run, a run reported, a taint
    /// carried in).
    async fn tainted_before(&self, action: &Action, times: &mut TaintTimes) -> GateResult<bool> {
        let Some(session) = &action.session else {
            return Ok(false);
        };
        if action.decision.result == DecisionResult::Ask
            && action
                .decision
                .reason
                .starts_with(&format!("session '{session}' is tainted by "))
        {
            return Ok(true);
        }
        if !times.contains_key(session) {
            let at = self
                .store()
                .get_session(session, self.idle_before())
                .await?
                .and_then(|s| s.tainted_at);
            times.insert(session.clone(), at);
        }
        Ok(times
            .get(session)
            .copied()
            .flatten()
            .is_some_and(|at| at < action.created_at))
    }

    /// A dry run of an inline profile (admin keys): what `profile` alone
    /// (no grants) decides for `tool`/`detail`; nothing stored.
    pub async fn check_with_profile(
        &self,
        caller: &Caller,
        tool: &str,
        detail: &str,
        profile: &Value,
    ) -> GateResult<(String, actiongate_store::Decision)> {
        caller.require(Role::Admin)?;
        validate_tool(tool)?;
        crate::actions::check_len("detail", Some(detail), crate::actions::MAX_DETAIL)?;
        let profile = crate::admin::compile_off_runtime(profile).await?;
        let agent = caller.agent.as_deref().unwrap_or("dry-run");
        let req = policy::Request {
            agent,
            tool,
            detail,
            permission: None,
        };
        let decision = record(policy::decide(&profile, &[], &req, Utc::now()));
        Ok((policy::format_action(tool, detail), decision))
    }

    /// Replays `candidate` over `agent`'s actions recorded since `since`
    /// (admin keys): the decisions it would change. `progress` is told how
    /// many were replayed after each page. Reads only.
    pub async fn replay_profile(
        &self,
        caller: &Caller,
        agent: &str,
        candidate: &Value,
        since: Option<&str>,
        progress: Option<tokio::sync::mpsc::Sender<u64>>,
    ) -> GateResult<ReplayReport> {
        caller.require(Role::Admin)?;
        crate::actions::validate_agent_id(agent)?;
        let candidate = crate::admin::compile_off_runtime(candidate).await?;
        self.replay_compiled(caller, agent, &candidate, since, progress)
            .await
    }

    /// [`Gate::replay_profile`] of a profile compiled already.
    pub async fn replay_compiled(
        &self,
        caller: &Caller,
        agent: &str,
        candidate: &actiongate_policy::Profile,
        since: Option<&str>,
        progress: Option<tokio::sync::mpsc::Sender<u64>>,
    ) -> GateResult<ReplayReport> {
        caller.require(Role::Admin)?;
        crate::actions::validate_agent_id(agent)?;
        let since = parse_since(since, Utc::now())?;
        let mut tally = Tally::default();
        let mut taint_times = HashMap::new();
        let mut cursor = None;
        'pages: loop {
            let page = self
                .store()
                .list_actions(&ActionFilter {
                    agent: Some(agent.to_owned()),
                    cursor: cursor.take(),
                    limit: PAGE,
                    ..ActionFilter::default()
                })
                .await?;
            let full = page.len() as i64 == PAGE;
            for action in &page {
                if action.created_at < since {
                    break 'pages;
                }
                let tainted = self.tainted_before(action, &mut taint_times).await?;
                tally.add(action, replay_one(candidate, action, tainted));
            }
            if let Some(tx) = &progress {
                // A listener gone away does not stop the replay's answer.
                let _ = tx.try_send(tally.replayed);
            }
            match page.last() {
                Some(last) if full => cursor = Some(last.id.clone()),
                _ => break,
            }
            // Long histories: let other tasks run between pages.
            tokio::task::yield_now().await;
        }
        Ok(tally.report(agent, since))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn since_takes_rfc3339_and_durations() {
        let now = Utc::now();
        assert_eq!(parse_since(None, now).unwrap(), now - Duration::days(30));
        assert_eq!(
            parse_since(Some("7d"), now).unwrap(),
            now - Duration::days(7)
        );
        assert_eq!(
            parse_since(Some("12h"), now).unwrap(),
            now - Duration::hours(12)
        );
        assert!(parse_since(Some("2026-01-01T00:00:00Z"), now).is_ok());
        for bad in ["", "d", "7w", "-1d", "x7d", "999999999d", "5é", "é", "7日"] {
            assert!(parse_since(Some(bad), now).is_err(), "{bad}");
        }
    }
}
