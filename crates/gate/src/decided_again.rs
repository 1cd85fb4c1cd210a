//! A decision sent again: the answer to a decision that was made, but
//! whose answer was lost (a 503 after the commit, a dropped connection),
//! so the operator's client sends it once more. (An agent's cancel and
//! outcome report are answered the same way.)
//!
//! The store refuses a second decision (409: settled, or "already
//! approved"); when the refused one is the same verdict from the same
//! identity as the decision the item holds, the caller is answered the
//! item as it stands (200) and nothing is written: no second approval, no
//! event. Only a plain decision is recognised: an approval that edits,
//! remembers (grants) or narrows names more than the stored decision
//! keeps, so its repeat stays a 409, as does another verdict, another
//! identity (another key of the same person included), or an item settled
//! otherwise (expired, cancelled, approved by a grant).

use actiongate_api::model::GrantRequestStatus;
use actiongate_api::sessions::Plan;
use actiongate_store::{Action, ActionStatus, GrantRequest};

use crate::{ErrorCode, GateError, GateResult};

/// Whether `e` is the refusal a decision already made gets.
fn refused_as_decided(e: &GateError) -> bool {
    matches!(
        e.code,
        ErrorCode::ActionSettled | ErrorCode::GrantRequestSettled | ErrorCode::Conflict
    )
}

/// Whether `action` holds `by`'s approval (`approve`) or denial, as one
/// sent again would have made it: an approval counted (the action pending
/// for more, or approved and on its way), or the denial that settled it.
pub(crate) fn action_holds(action: &Action, by: &str, approve: bool) -> bool {
    if approve {
        let went_on = matches!(
            action.status,
            ActionStatus::Pending
                | ActionStatus::Approved
                | ActionStatus::Running
                | ActionStatus::Completed
                | ActionStatus::Failed
        );
        went_on && action.team.approvals.iter().any(|a| a.by == by)
    } else {
        action.status == ActionStatus::Denied && action.decided_by.as_deref() == Some(by)
    }
}

/// Whether `plan` was decided by `by` as approving `only` (every step when
/// `None`) or denying it would decide it: approved, each step approved
/// exactly when it was asked for and did not ask on its own.
pub(crate) fn plan_holds(plan: &Plan, by: &str, approve: Option<Option<&[usize]>>) -> bool {
    if plan.decided_by.as_deref() != Some(by) {
        return false;
    }
    match approve {
        None => plan.status == "denied",
        Some(only) => {
            plan.status == "approved"
                && plan.steps.iter().enumerate().all(|(i, step)| {
                    let asked = only.is_none_or(|o| o.contains(&i));
                    step.approved == (asked && step.asks.is_none())
                })
        }
    }
}

/// Whether grant request `r` was answered by `by` as approving it as asked
/// (`true`) or denying it would answer it.
pub(crate) fn grant_request_holds(r: &GrantRequest, by: &str, approve: bool) -> bool {
    let status = if approve {
        GrantRequestStatus::Approved
    } else {
        GrantRequestStatus::Denied
    };
    r.status == status && r.decided_by.as_deref() == Some(by)
}

/// `result` of a decision, or of an agent's cancel or outcome report: when
/// it is the refusal a decision made already gets, the item as `read`
/// finds it now, if it `holds` that same decision; else `result` as it is.
/// (`read` runs only on a refusal.)
pub(crate) async fn sent_again<T>(
    result: GateResult<T>,
    read: impl Future<Output = GateResult<T>>,
    holds: impl FnOnce(&T) -> bool,
) -> GateResult<T> {
    match result {
        Err(e) if refused_as_decided(&e) => match read.await {
            Ok(item) if holds(&item) => Ok(item),
            _ => Err(e),
        },
        other => other,
    }
}
