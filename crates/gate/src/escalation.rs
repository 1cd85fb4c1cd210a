//! Escalation (`docs/teams.md`): every second, each pending action whose
//! approvals rule has `escalate_after` and that waited that long without a
//! decision is marked escalated and `action.escalated` is written, once
//! per action whichever daemon sees it first (the store checks under the
//! row's lock). Who hears of it: subscriptions and chats marked `tier = 2`
//! (they follow `action.escalated`), and the people of the rule's
//! `escalate_to` group through their chats.

use std::time::Duration;

use actiongate_store::{ActionFilter, ActionStatus};

use crate::Gate;

/// How often pending actions are looked at.
const EVERY: Duration = Duration::from_secs(1);

/// Pending actions read at a time; a round reads them all, the longest
/// waiting first.
const PAGE: i64 = 500;

/// Most pending actions one round reads (`limits.max_pending_per_agent`
/// bounds what waits per agent).
const MOST: i64 = 20_000;

/// Runs until the gate shuts down.
pub async fn run(gate: Gate) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = gate.shutdown().cancelled() => return,
        }
        if let Err(e) = round(&gate).await {
            tracing::warn!(error = %e, "escalation round failed; retrying");
        }
    }
}

/// One look at the pending actions, the longest waiting first; how many
/// it escalated. A round reads every pending action (up to [`MOST`]): a
/// queue of newer items, however long, hides no older one that is due.
pub async fn round(gate: &Gate) -> crate::GateResult<usize> {
    let mut filter = ActionFilter {
        status: Some(ActionStatus::Pending),
        limit: PAGE,
        oldest_first: true,
        ..ActionFilter::default()
    };
    let now = actiongate_store::time::now();
    let mut escalated = 0;
    let mut read = 0;
    while read < MOST {
        let pending = gate.store().list_actions(&filter).await?;
        let full = pending.len() as i64 == PAGE;
        read += pending.len() as i64;
        filter.cursor = pending.last().map(|a| a.id.clone());
        for action in pending {
            if escalate_if_due(gate, &action, now).await? {
                escalated += 1;
            }
        }
        if !full {
            break;
        }
    }
    Ok(escalated)
}

/// Escalates `action` when an approvals rule of it says it waited long
/// enough; whether this call did.
async fn escalate_if_due(
    gate: &Gate,
    action: &actiongate_store::Action,
    now: chrono::DateTime<chrono::Utc>,
) -> crate::GateResult<bool> {
    if action.team.escalated_at.is_some() {
        return Ok(false);
    }
    let rules = match gate.rules_of(action).await {
        Ok(rules) => rules,
        Err(e) => {
            tracing::warn!(action = %action.id, error = %e.detail, "cannot read its approvals rules");
            return Ok(false);
        }
    };
    let Some(after) = rules.iter().filter_map(|r| r.escalate_after_secs()).min() else {
        return Ok(false);
    };
    let due = action.created_at + chrono::Duration::seconds(after as i64);
    if due > now {
        return Ok(false);
    }
    let done = gate.store().escalate(&action.id).await?.is_some();
    if done {
        tracing::info!(action = %action.id, "escalated for want of a decision");
    }
    Ok(done)
}
