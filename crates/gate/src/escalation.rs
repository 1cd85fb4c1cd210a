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

/// Most pending actions looked at in one round.
const PAGE: i64 = 500;

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

/// One look at the pending actions; how many it escalated.
pub async fn round(gate: &Gate) -> crate::GateResult<usize> {
    let filter = ActionFilter {
        status: Some(ActionStatus::Pending),
        limit: PAGE,
        ..ActionFilter::default()
    };
    let pending = gate.store().list_actions(&filter).await?;
    let now = actiongate_store::time::now();
    let mut escalated = 0;
    for action in pending {
        if action.team.escalated_at.is_some() {
            continue;
        }
        let rules = match gate.rules_of(&action).await {
            Ok(rules) => rules,
            Err(e) => {
                tracing::warn!(action = %action.id, error = %e.detail, "cannot read its approvals rules");
                continue;
            }
        };
        let Some(after) = rules.iter().filter_map(|r| r.escalate_after_secs()).min() else {
            continue;
        };
        let due = action.created_at + chrono::Duration::seconds(after as i64);
        if due > now {
            continue;
        }
        if gate.store().escalate(&action.id).await?.is_some() {
            escalated += 1;
            tracing::info!(action = %action.id, "escalated for want of a decision");
        }
    }
    Ok(escalated)
}
