//! Waiting for an action to settle inside a tool call: long-polls of the
//! gate in steps, with a `notifications/progress` after each step that
//! ends unsettled (when the client sent a `progressToken`), so clients that
//! cut silent calls keep waiting. A client that goes away (disconnect or
//! `notifications/cancelled`) withdraws its pending action.

use std::time::{Duration, Instant};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use rmcp::service::{Peer, RequestContext, RoleServer};
use tokio_util::sync::CancellationToken;

use actiongate_gate::{Action, ActionStatus};
use actiongate_gate::{Caller, Gate, GateError};

/// How a wait ended without the action settling.
#[derive(Debug)]
pub enum WaitEnd {
    /// The client went away; its pending action was withdrawn.
    Gone,
    /// The gate failed while waiting (the pending action was withdrawn).
    Failed(GateError),
}

/// What a wait does with the action when its client goes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnLeave {
    /// The call made the action: withdraw it (cancel it if still pending).
    Withdraw,
    /// The call only polls an action made elsewhere: leave it as it is.
    Keep,
}

/// What a tool call needs to wait: its cancellation, its peer and progress
/// token, and the progress interval.
pub struct Waiter {
    ct: CancellationToken,
    peer: Peer<RoleServer>,
    token: Option<ProgressToken>,
    every: Duration,
}

impl Waiter {
    /// The waiter of the request of `ctx`, reporting progress every `every`.
    pub fn new(ctx: &RequestContext<RoleServer>, every: Duration) -> Waiter {
        Waiter {
            ct: ctx.ct.clone(),
            peer: ctx.peer.clone(),
            token: ctx.meta.get_progress_token(),
            every,
        }
    }

    /// Whether the client went away (disconnected or cancelled the call).
    pub fn gone(&self) -> bool {
        self.ct.is_cancelled()
    }

    /// Withdraws `action` because its client went away.
    pub async fn withdraw(&self, gate: &Gate, caller: &Caller, action: &Action) -> WaitEnd {
        withdraw(gate, caller, &action.id).await;
        WaitEnd::Gone
    }

    /// Waits until `action` settles, or for at most `limit` when given
    /// (then answers it as it is). `waited` is how long the call already
    /// waited silently: the first progress comes that much sooner. With
    /// [`OnLeave::Withdraw`] (the call made the action) a client that goes
    /// away, or a failure, withdraws the action; a poll
    /// ([`OnLeave::Keep`]) withdraws nothing.
    pub async fn until_settled(
        &self,
        gate: &Gate,
        caller: &Caller,
        mut action: Action,
        limit: Option<Duration>,
        waited: Duration,
        on_leave: OnLeave,
    ) -> Result<Action, WaitEnd> {
        let started = Instant::now();
        let mut step_no = 0u32;
        while !action.is_settled() {
            let every = if step_no == 0 {
                self.every
                    .saturating_sub(waited)
                    .max(Duration::from_millis(1))
            } else {
                self.every
            };
            let step = match limit {
                Some(limit) => {
                    let left = limit.saturating_sub(started.elapsed());
                    if left.is_zero() {
                        return Ok(action);
                    }
                    left.min(every)
                }
                None => every,
            };
            let id = action.id.clone();
            let next = tokio::select! {
                next = gate.get_action(caller, &id, step) => next,
                () = self.ct.cancelled() => {
                    if on_leave == OnLeave::Withdraw {
                        withdraw(gate, caller, &id).await;
                    }
                    return Err(WaitEnd::Gone);
                }
            };
            action = match next {
                Ok(a) => a,
                Err(e) => {
                    if on_leave == OnLeave::Withdraw {
                        withdraw(gate, caller, &id).await;
                    }
                    return Err(WaitEnd::Failed(e));
                }
            };
            if !action.is_settled() {
                step_no += 1;
                self.progress(&action, step_no).await;
            }
        }
        Ok(action)
    }

    async fn progress(&self, action: &Action, step_no: u32) {
        let Some(token) = self.token.clone() else {
            return;
        };
        let param = ProgressNotificationParam::new(token, f64::from(step_no))
            .with_message(progress_message(action));
        if let Err(e) = self.peer.notify_progress(param).await {
            tracing::debug!(error = %e, action = %action.id, "a progress notification was not sent");
        }
    }
}

/// "waiting for an operator, 3 min left", or what else is going on.
pub fn progress_message(action: &Action) -> String {
    match action.status {
        ActionStatus::Pending => match action.deadline {
            Some(deadline) => {
                let left = (deadline - chrono::Utc::now()).num_seconds();
                if left >= 60 {
                    format!("waiting for an operator, {} min left", (left + 59) / 60)
                } else {
                    format!("waiting for an operator, {} s left", left.max(0))
                }
            }
            None => "waiting for an operator".to_owned(),
        },
        ActionStatus::Approved | ActionStatus::Running => format!(
            "approved; running on handler {}",
            action.handler.as_deref().unwrap_or("?")
        ),
        other => other.to_string(),
    }
}

/// Withdraws `id` if still pending (a settled one is left as it is).
async fn withdraw(gate: &Gate, caller: &Caller, id: &str) {
    match gate.cancel(caller, id).await {
        Ok(_) => {
            tracing::info!(action = %id, "the MCP client went away; its pending action was cancelled")
        }
        Err(e) => tracing::debug!(action = %id, error = %e, "not cancelled"),
    }
}
