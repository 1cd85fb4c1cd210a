//! A grant made while an action was being decided (SQLite). The gate
//! decides a new action on the grants it read before the action is
//! stored; a grant the writer stored in between approved the pending
//! actions it covered then, which did not yet include this one, and this
//! one was decided without it. So an action that asks is looked at again
//! on the writer, after its insert and in the same transaction: a grant
//! that covers it approves it there and then, as it would have had it
//! been stored a moment earlier. (Postgres orders the two with a lock:
//! `pg::grants`.)

use std::collections::HashMap;
use std::sync::Arc;

use actiongate_policy as policy;
use sqlx::SqliteConnection;

use crate::actions::{self, NewAction};
use crate::error::StoreError;
use crate::grant_governs::{asked_under_rules, handler_governs_on};
use crate::grants::{
    allows, approve_by_grant, covers, from_row, grant_columns, profile_on, to_policy,
};
use crate::time::{now, to_ms};
use actiongate_api::model::{Action, ActionStatus};

/// Stores `new` on `conn` and, when it asks, approves it by a grant that
/// covers it (see the module): the action as stored, and whether it is new.
pub(crate) async fn insert_on(
    conn: &mut SqliteConnection,
    new: NewAction,
    default_profile: Option<Arc<policy::Profile>>,
) -> Result<(Action, bool), StoreError> {
    let (action, created) = actions::insert_on(conn, new).await?;
    if !created || action.status != ActionStatus::Pending {
        return Ok((action, created));
    }
    match approve_if_granted_on(conn, &action, default_profile.as_ref()).await? {
        Some(approved) => Ok((approved, true)),
        None => Ok((action, true)),
    }
}

/// Approves pending `action` by the first unlimited grant that covers it
/// and that its agent's profile lets allow it; `None` when
/// none does, or a human must decide whatever covers it (an approvals
/// rule, a guarded action in a tainted session).
async fn approve_if_granted_on(
    conn: &mut SqliteConnection,
    pending: &Action,
    default_profile: Option<&Arc<policy::Profile>>,
) -> Result<Option<Action>, StoreError> {
    if asked_under_rules(pending) {
        return Ok(None);
    }
    // A grant for a session or a count allows only what is asked after it.
    let rows = sqlx::query(concat!(
        "SELECT ",
        grant_columns!(),
        " FROM grants WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?1) \
         AND (agent IS NULL OR agent = ?2) AND (handler = ?3 OR tool = ?3) \
         AND session IS NULL AND uses_left IS NULL ORDER BY id"
    ))
    .bind(to_ms(now()))
    .bind(&pending.agent)
    .bind(&pending.tool)
    .fetch_all(&mut *conn)
    .await?;
    let at = now();
    let mut profile = None;
    let mut specs = HashMap::new();
    for row in &rows {
        let grant = to_policy(&from_row(row)?)?;
        if !covers(&grant, pending, at) {
            continue;
        }
        if profile.is_none() {
            profile = Some(profile_on(conn, &pending.agent, default_profile).await?);
        }
        // No usable profile: nothing is approved on the agent's behalf.
        let Some(Some(p)) = &profile else {
            return Ok(None);
        };
        if !p
            .approval_rules_for(&pending.action_string, pending.scope.as_ref())
            .is_empty()
            || handler_governs_on(conn, pending, &mut specs).await?
        {
            return Ok(None);
        }
        if !allows(&grant, p, pending, at) {
            continue;
        }
        if crate::sessions::held_by_taint_on(conn, p, pending).await? {
            return Ok(None);
        }
        let t = approve_by_grant(&grant.id);
        let approved = actions::transition_on(conn, &pending.id, &t).await?;
        // Its event is written with the transition.
        if p.taints_call(
            &approved.action_string,
            approved.scope.as_ref(),
            approved.reads_world(),
        ) {
            crate::sessions::mark_taint_on(conn, &approved).await?;
        }
        return Ok(Some(approved));
    }
    Ok(None)
}
