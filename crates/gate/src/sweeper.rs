//! The expiry sweeper: sleeps until the next pending deadline of an action
//! or grant request, or until the oldest open session goes idle (no polling
//! loop), expires (or ends) what is due, and on start what became overdue
//! while the daemon was down.

use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::Gate;

/// Longest single sleep; a safety net should a wake-up ever be missed.
const MAX_SLEEP: Duration = Duration::from_secs(300);

/// Longest single sleep with other daemons on the database: their new
/// deadlines wake only them, and should one stop, its items are expired here.
const MAX_SLEEP_SHARED: Duration = Duration::from_secs(1);

/// The wait before trying again after expiring failed.
const RETRY: Duration = Duration::from_secs(1);

/// Runs until shutdown.
pub async fn run(gate: Gate) {
    let max_sleep = if gate.store().is_shared() {
        MAX_SLEEP_SHARED
    } else {
        MAX_SLEEP
    };
    // Whether something may be due: on start (what became overdue while the
    // daemon was down), and when the earliest deadline passes. A new
    // deadline only sets the next wake-up; expiring is a write, and running
    // it for every new pending action would cost each a second commit.
    let mut due = true;
    loop {
        if due && !expire(&gate).await {
            // The deadline stays past, so retrying at once would spin on the
            // writer; what is overdue cannot be decided meanwhile anyway.
            tokio::select! {
                _ = tokio::time::sleep(RETRY) => {}
                _ = gate.shutdown().cancelled() => return,
            }
            continue;
        }
        let sleep = match next_deadline(&gate).await {
            Ok(Some(at)) => (at - Utc::now())
                .to_std()
                .unwrap_or(Duration::ZERO)
                .min(max_sleep),
            Ok(None) => max_sleep,
            Err(e) => {
                tracing::error!(error = %e, "reading the next deadline failed");
                Duration::from_secs(1)
            }
        };
        if sleep.is_zero() {
            due = true;
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(sleep) => due = true,
            _ = gate.deadlines_changed().notified() => due = false,
            _ = gate.shutdown().cancelled() => return,
        }
    }
}

/// Expires what is due; `false` when that failed.
async fn expire(gate: &Gate) -> bool {
    let mut ok = true;
    match gate.store().expire_due(Utc::now()).await {
        Ok(expired) if !expired.is_empty() => {
            tracing::info!(
                count = expired.len(),
                "expired pending actions past their deadline"
            );
        }
        Ok(_) => {}
        Err(e) => {
            tracing::error!(error = %e, "expiring actions failed");
            ok = false;
        }
    }
    match gate.store().expire_grant_requests(Utc::now()).await {
        Ok(expired) if !expired.is_empty() => {
            tracing::info!(
                count = expired.len(),
                "expired grant requests past their deadline"
            );
        }
        Ok(_) => {}
        Err(e) => {
            tracing::error!(error = %e, "expiring grant requests failed");
            ok = false;
        }
    }
    match gate.store().end_idle_sessions(gate.idle_before()).await {
        Ok(0) => {}
        // `GET /v1/sessions` shows each as ended, and each grant revoked is
        // a `grant.revoked` event; at info this was a line a second under
        // steady use (soak review).
        Ok(n) => tracing::debug!(count = n, "ended idle sessions, revoking their grants"),
        Err(e) => {
            tracing::error!(error = %e, "ending idle sessions failed");
            ok = false;
        }
    }
    ok
}

async fn next_deadline(gate: &Gate) -> Result<Option<DateTime<Utc>>, actiongate_store::StoreError> {
    let action = gate.store().next_deadline().await?;
    let request = gate.store().next_grant_request_deadline().await?;
    // The oldest open session goes idle then.
    let idle = gate
        .store()
        .oldest_open_session()
        .await?
        .map(|seen| seen + gate.idle_timeout());
    Ok(action.into_iter().chain(request).chain(idle).min())
}
