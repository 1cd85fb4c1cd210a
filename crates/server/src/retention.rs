//! Retention: prunes events older than `[events] retention`, moving the
//! audit chain's anchor past them so later exports still verify.

use std::time::Duration;

use crate::state::AppState;

/// Events deleted per transaction, so pruning never holds the writer long.
const PRUNE_BATCH: i64 = 5000;

/// Runs until shutdown; does nothing when events are kept forever.
pub async fn run(state: AppState) {
    let ev = &state.settings().events;
    let (Ok(Some(retention)), Ok(interval)) = (ev.retention(), ev.prune_interval()) else {
        return;
    };
    loop {
        prune_once(&state, retention).await;
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = state.shutdown().cancelled() => return,
        }
    }
}

async fn prune_once(state: &AppState, retention: Duration) {
    let Ok(age) = chrono::Duration::from_std(retention) else {
        return;
    };
    let cutoff = chrono::Utc::now() - age;
    let mut total = 0;
    loop {
        if state.shutdown().is_cancelled() {
            break;
        }
        match state.store().prune_events(cutoff, PRUNE_BATCH).await {
            Ok(n) => {
                total += n;
                if (n as i64) < PRUNE_BATCH {
                    break;
                }
            }
            Err(e) => {
                tracing::error!(error = %e, "pruning old events failed");
                break;
            }
        }
    }
    if total > 0 {
        tracing::info!(pruned = total, %cutoff, "pruned events past retention");
    }
}
