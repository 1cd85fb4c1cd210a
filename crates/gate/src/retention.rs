//! Retention: prunes events older than `[events] retention`, moving the
//! audit chain's anchor past them so later exports still verify; records
//! settled before `[records] retention` (actions, grant requests, plans,
//! sessions, grants, webhook deliveries; see
//! [`actiongate_store::records`]); rate rows past their hour; and the
//! executors' callback ids once no signature could replay them.

use std::time::Duration;

use actiongate_store::Store;
use actiongate_store::records::Records;
use tokio_util::sync::CancellationToken;

/// Events deleted per transaction, so pruning never holds the writer long.
const PRUNE_BATCH: i64 = 5000;

/// How long an executor's callback id is kept: a signature is accepted
/// within 5 minutes either side of its timestamp, so after twice that
/// plus a margin no replay of it could be.
const SEEN_WEBHOOKS_KEPT: chrono::Duration = chrono::Duration::minutes(15);

/// Records deleted per transaction.
const RECORDS_BATCH: i64 = 500;

/// The shortest `records.retention` that deletes no approved action its
/// run report (matched within 24 hours) or outcome may still name.
const SHORTEST_SAFE: Duration = Duration::from_secs(86_400);

/// How long each kind of row is kept (`None`: for ever).
#[derive(Debug, Clone, Copy)]
pub struct Keep {
    /// Events.
    pub events: Option<Duration>,
    /// Settled records.
    pub records: Option<Duration>,
    /// Ended sessions that were tainted.
    pub tainted_sessions: Option<Duration>,
}

/// Prunes every `interval` until `shutdown`: events and records past
/// `keep`, rate rows past their hour, and callback ids past
/// [`SEEN_WEBHOOKS_KEPT`].
pub async fn run(store: Store, keep: Keep, interval: Duration, shutdown: CancellationToken) {
    if let Some(records) = keep.records
        && records < SHORTEST_SAFE
    {
        tracing::warn!(
            retention = ?records,
            "records.retention is under a day: an approved action may be deleted before its \
             run is reported (reports are matched within 24 hours) or its outcome posted"
        );
    }
    loop {
        match store
            .prune_seen_webhooks(chrono::Utc::now() - SEEN_WEBHOOKS_KEPT)
            .await
        {
            Ok(0) => {}
            Ok(n) => tracing::debug!(pruned = n, "forgot executors' callback ids past replay"),
            Err(e) => tracing::error!(error = %e, "pruning executors' callback ids failed"),
        }
        if let Some(retention) = keep.events {
            prune_once(&store, retention, &shutdown).await;
        }
        prune_records(&store, keep, &shutdown).await;
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

/// Deletes the records settled before `retention` (none without), and the
/// rows kept for a while only.
async fn prune_records(store: &Store, keep: Keep, shutdown: &CancellationToken) {
    let now = chrono::Utc::now();
    let before = |retention: Option<Duration>| {
        retention
            .and_then(|r| chrono::Duration::from_std(r).ok())
            .map(|age| now - age)
    };
    let cutoff = before(keep.records);
    for kind in Records::ALL {
        let kind_cutoff = match kind {
            Records::TaintedSessions => before(keep.tainted_sessions),
            _ => cutoff,
        };
        let Some(cutoff) = kind_cutoff else { continue };
        let mut total = 0;
        while !shutdown.is_cancelled() {
            match store.prune_records(kind, cutoff, RECORDS_BATCH).await {
                Ok(n) => {
                    total += n;
                    if (n as i64) < RECORDS_BATCH {
                        break;
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, records = kind.name(), "pruning old records failed");
                    break;
                }
            }
        }
        if total > 0 {
            tracing::info!(pruned = total, records = kind.name(), %cutoff, "pruned records past retention");
        }
    }
    // Chat interactions are kept as long as records; rate rows an hour.
    let seen_before = cutoff.unwrap_or(chrono::DateTime::<chrono::Utc>::UNIX_EPOCH);
    match store.prune_stale(now, seen_before).await {
        Ok(0) => {}
        Ok(n) => tracing::debug!(
            pruned = n,
            "pruned rate rows and chat interactions past their time"
        ),
        Err(e) => tracing::error!(error = %e, "pruning rate rows failed"),
    }
}
