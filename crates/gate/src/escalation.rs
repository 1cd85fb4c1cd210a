//! Escalation (`docs/teams.md`): every second, each pending action whose
//! approvals rule has `escalate_after` and that waited that long without a
//! decision is marked escalated and `action.escalated` is written, once
//! per action whichever daemon sees it first (the store checks under the
//! row's lock). Who hears of it: subscriptions and chats marked `tier = 2`
//! (they follow `action.escalated`), and the people of the rule's
//! `escalate_to` group through their chats.
//!
//! The same sweep keeps what an action's approvals show true: each time it
//! reads the pending actions' rules (at once after a profile, handler,
//! person or key changed through this daemon, else every [`REREAD`]), it
//! drops the approvals whose approvers could not give them now (they left
//! the rule's approvers, are no longer a person, or approved with a key
//! since revoked), with an `action.approval` event. The next approval
//! drops them too (`crate::quorum`), so a quorum never counts one.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use actiongate_store::{ActionFilter, ActionStatus, ApiKey};
use chrono::{DateTime, Utc};

use crate::Gate;

/// How often pending actions are looked at.
const EVERY: Duration = Duration::from_secs(1);

/// How long what a round learnt of an action (when it is due, or that it
/// never is) is trusted when nothing says a rule changed: a profile
/// changed through another daemon counts within this (one changed here,
/// at the next round).
const REREAD: Duration = Duration::from_secs(30);

/// Pending actions read at a time; a round reads them all, the longest
/// waiting first.
const PAGE: i64 = 500;

/// Most pending actions one round reads (`limits.max_pending_per_agent`
/// bounds what waits per agent).
const MOST: i64 = 20_000;

/// What the sweep knows of the pending actions: when each is due for
/// escalation (`None`: never, or escalated already), as of `read_at`.
/// A round reads only the actions asked since the last (their
/// `action.enqueued` events after `seen`), their rows and rules; it reads
/// every pending action again when a profile or handler changed, and
/// every [`REREAD`]. What settled meanwhile stays known until then: its
/// escalation, when due, finds it no longer pending and writes nothing.
#[derive(Debug, Default)]
pub struct Sweep {
    due: HashMap<String, Option<DateTime<Utc>>>,
    read_at: Option<Instant>,
    /// [`Gate::rules_generation`] when it was read.
    rules: (u64, u64, u64),
    /// The newest event looked at for actions asked.
    seen: i64,
}

/// Runs until the gate shuts down.
pub async fn run(gate: Gate) {
    let mut sweep = Sweep::default();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = gate.shutdown().cancelled() => return,
        }
        if let Err(e) = sweep.round(&gate).await {
            // What it knew may be half updated: read everything again.
            sweep = Sweep::default();
            tracing::warn!(error = %e, "escalation round failed; retrying");
        }
    }
}

impl Sweep {
    /// One look at the pending actions, the longest waiting first; how
    /// many it escalated. A round sees every pending action (up to
    /// [`MOST`]): a queue of newer items, however long, hides no older one
    /// that is due.
    pub async fn round(&mut self, gate: &Gate) -> crate::GateResult<usize> {
        let now = actiongate_store::time::now();
        let rules = gate.rules_generation();
        if self.read_at.is_none_or(|t| t.elapsed() >= REREAD) || rules != self.rules {
            self.rules = rules;
            self.reread(gate).await?;
        } else {
            self.catch_up(gate).await?;
        }
        let due: Vec<String> = self
            .due
            .iter()
            .filter(|(_, due)| due.is_some_and(|d| d <= now))
            .map(|(id, _)| id.clone())
            .collect();
        let mut escalated = 0;
        for id in due {
            if gate.store().escalate(&id).await?.is_some() {
                tracing::info!(action = %id, "escalated for want of a decision");
                escalated += 1;
            }
            // Escalated now, or by another daemon, or settled: never again.
            self.due.insert(id, None);
        }
        Ok(escalated)
    }

    /// Reads every pending action's row and rules.
    async fn reread(&mut self, gate: &Gate) -> crate::GateResult<()> {
        let mut filter = ActionFilter {
            status: Some(ActionStatus::Pending),
            limit: PAGE,
            oldest_first: true,
            ..ActionFilter::default()
        };
        let mut due = HashMap::new();
        let mut read = 0;
        // Before the listing: an action asked while it runs is listed, or
        // read by the next catch-up, or both.
        let seen = gate.store().newest_seq().await?;
        let keys = gate.store().list_keys().await?;
        while read < MOST {
            let pending = gate.store().list_actions(&filter).await?;
            let full = pending.len() as i64 == PAGE;
            read += pending.len() as i64;
            filter.cursor = pending.last().map(|a| a.id.clone());
            for action in pending {
                let when = due_at(gate, &action, Some(&keys)).await;
                due.insert(action.id, when);
            }
            if !full {
                break;
            }
        }
        self.due = due;
        self.seen = seen;
        self.read_at = Some(Instant::now());
        Ok(())
    }

    /// Reads the actions asked since the last look: the rows and rules of
    /// those still pending (up to [`MOST`] known in all).
    async fn catch_up(&mut self, gate: &Gate) -> crate::GateResult<()> {
        loop {
            let asked = gate.store().enqueued_after(self.seen, PAGE).await?;
            let full = asked.len() as i64 == PAGE;
            for (seq, id) in asked {
                self.seen = seq;
                if self.due.contains_key(&id) || self.due.len() as i64 >= MOST {
                    continue;
                }
                let when = match gate.store().get_action(&id).await {
                    Ok(action) if action.status == ActionStatus::Pending => {
                        due_at(gate, &action, None).await
                    }
                    // Settled (or gone) since it was asked.
                    Ok(_) | Err(actiongate_store::StoreError::NotFound) => None,
                    Err(e) => return Err(e.into()),
                };
                self.due.insert(id, when);
            }
            if !full {
                return Ok(());
            }
        }
    }
}

/// When `action` is due for escalation under its approvals rules: `None`
/// when no rule of it escalates, it was escalated already, or its rules
/// cannot be read (logged; it is looked at again at the next reread).
/// With `keys` (every key, revoked ones too), first drops the approvals
/// it holds that lapsed under those rules.
async fn due_at(
    gate: &Gate,
    action: &actiongate_store::Action,
    keys: Option<&[ApiKey]>,
) -> Option<DateTime<Utc>> {
    let needed = action.team.escalated_at.is_none();
    let lapse = keys.filter(|_| !action.team.approvals.is_empty());
    if !needed && lapse.is_none() {
        return None;
    }
    let rules = match gate.rules_of(action).await {
        Ok(rules) => rules,
        Err(e) => {
            tracing::warn!(action = %action.id, error = %e.detail, "cannot read its approvals rules");
            return None;
        }
    };
    if let Some(keys) = lapse {
        drop_lapsed(gate, action, &rules, keys).await;
    }
    if !needed {
        return None;
    }
    let after = rules.iter().filter_map(|r| r.escalate_after_secs()).min()?;
    Some(action.created_at + chrono::Duration::seconds(after as i64))
}

/// Drops the approvals of `action` that no longer count under `rules`
/// (logged when it cannot: the next reread, or approval, tries again).
async fn drop_lapsed(
    gate: &Gate,
    action: &actiongate_store::Action,
    rules: &[actiongate_policy::approvals::CompiledRule],
    keys: &[ApiKey],
) {
    let dropped = match gate.lapsed(action, rules, Some(keys)).await {
        Ok((lapsed, _)) if lapsed.is_empty() => return,
        Ok((lapsed, _)) => gate.store().drop_lapsed(&action.id, lapsed).await,
        Err(e) => {
            tracing::warn!(action = %action.id, error = %e.detail, "cannot recount its approvals");
            return;
        }
    };
    if let Err(e) = dropped {
        tracing::warn!(action = %action.id, error = %e, "cannot drop its lapsed approvals");
    }
}
