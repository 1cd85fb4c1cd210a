//! Retention: prunes events older than `[events] retention`, moving the
//! audit chain's anchor past them so later exports still verify.

use std::time::Duration;

use actiongate_store::Store;
use tokio_util::sync::CancellationToken;

/// Events deleted per transaction, so pruning never holds the writer long.
const PRUNE_BATCH: i64 = 5000;

/// Prunes every `interval` until `shutdown`.
pub async fn run(
    store: Store,
    retention: Duration,
    interval: Duration,
    shutdown: CancellationToken,
) {
    loop {
        prune_once(&store, retention, &shutdown).await;
        tokio::select! {
            _ = tokio::time::sleep(interval) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}

async fn prune_once(store: &Store, retention: Duration, shutdown: &CancellationToken) {
    let Ok(age) = chrono::Duration::from_std(retention) else {
        return;
    };
    let cutoff = chrono::Utc::now() - age;
    let mut total = 0;
    loop {
        if shutdown.is_cancelled() {
            break;
        }
        match store.prune_events(cutoff, PRUNE_BATCH).await {
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
