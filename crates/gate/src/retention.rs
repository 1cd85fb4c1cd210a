//! Retention: prunes events older than `[events] retention`, moving the
//! audit chain's anchor past them so later exports still verify, and the
//! executors' callback ids once no signature could replay them.

use std::time::Duration;

use actiongate_store::Store;
use tokio_util::sync::CancellationToken;

/// Events deleted per transaction, so pruning never holds the writer long.
const PRUNE_BATCH: i64 = 5000;

/// How long an executor's callback id is kept: a signature is accepted
/// within 5 minutes either side of its timestamp, so after twice that
/// plus a margin no replay of it could be.
const SEEN_WEBHOOKS_KEPT: chrono::Duration = chrono::Duration::minutes(15);

/// Prunes every `interval` until `shutdown`: events past `retention` (kept
/// for ever without), and callback ids past [`SEEN_WEBHOOKS_KEPT`].
pub async fn run(
    store: Store,
    retention: Option<Duration>,
    interval: Duration,
    shutdown: CancellationToken,
) {
    loop {
        match store
            .prune_seen_webhooks(chrono::Utc::now() - SEEN_WEBHOOKS_KEPT)
            .await
        {
            Ok(0) => {}
            Ok(n) => tracing::debug!(pruned = n, "forgot executors' callback ids past replay"),
            Err(e) => tracing::error!(error = %e, "pruning executors' callback ids failed"),
        }
        if let Some(retention) = retention {
            prune_once(&store, retention, &shutdown).await;
        }
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
