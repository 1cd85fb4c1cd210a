//! The notifier: outbound notification webhooks, delivered at least once.
//!
//! Two small loops. The fan-out loop wakes on committed events and moves
//! each subscription's cursor forward, writing a delivery row per matching
//! event in the same transaction (the durable outbox). The delivery loop
//! POSTs due deliveries, signed per Standard Webhooks with the event id as
//! `webhook-id` on every attempt, records every attempt, and schedules a
//! retry with exponential backoff and jitter after 5xx, 408, 429, timeouts
//! and connection errors. Nothing lives only in memory: after a restart,
//! pending deliveries are simply due again.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::Utc;
use rand::Rng;
use tokio::sync::Notify;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinSet;

use actiongate_store::{AttemptOutcome, AttemptRecord, DueDelivery};

use actiongate_store::Store;
use tokio_util::sync::CancellationToken;

use crate::transport::{OutboundRequest, Transport};

/// Outbound notification webhooks, typed.
#[derive(Debug, Clone, Copy)]
pub struct NotifyConfig {
    /// How long one attempt may take.
    pub timeout: Duration,
    /// Delay before the first retry; it doubles with every attempt.
    pub backoff_min: Duration,
    /// Longest delay between attempts.
    pub backoff_max: Duration,
    /// A delivery still failing this long after its event is given up.
    pub give_up_after: Duration,
    /// Most attempts in flight at once.
    pub concurrency: usize,
}

/// Events turned into deliveries per transaction.
const FAN_OUT_BATCH: i64 = 1000;
/// Shortest time between two checks for subscriptions behind the log:
/// events committed meanwhile are handled by the next check, so under load
/// the check costs a few queries a second instead of one per commit, and a
/// delivery waits at most this much longer.
const CHECK_GAP: Duration = Duration::from_millis(50);
/// Longest sleep of the delivery loop; a safety net for a missed wake-up.
const MAX_IDLE: Duration = Duration::from_secs(5);

/// Runs both loops until `shutdown`.
pub async fn run(
    store: Store,
    transport: Arc<dyn Transport>,
    config: NotifyConfig,
    shutdown: CancellationToken,
) {
    let wake = Arc::new(Notify::new());
    tokio::join!(
        fan_out_loop(store.clone(), wake.clone(), shutdown.clone()),
        deliver_loop(store, wake, transport, config, shutdown)
    );
}

async fn fan_out_loop(store: Store, wake: Arc<Notify>, shutdown: CancellationToken) {
    let mut rx = store.subscribe();
    // Whether subscriptions may be behind the log: on start, and after
    // events were committed while some subscription exists.
    let mut behind = true;
    let mut checked = tokio::time::Instant::now();
    loop {
        while behind {
            match store.fan_out(FAN_OUT_BATCH).await {
                Ok((made, more)) => {
                    if made > 0 {
                        wake.notify_one();
                    }
                    behind = more;
                }
                Err(e) => {
                    tracing::error!(error = %e, "filling the webhook outbox failed; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                        _ = shutdown.cancelled() => return,
                    }
                }
            }
        }
        let received = tokio::select! {
            r = rx.recv() => r,
            _ = shutdown.cancelled() => return,
        };
        match received {
            Ok(_) | Err(RecvError::Lagged(_)) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(checked + CHECK_GAP) => {}
                    _ = shutdown.cancelled() => return,
                }
                checked = tokio::time::Instant::now();
                // One pass handles every event committed so far.
                while !matches!(
                    rx.try_recv(),
                    Err(tokio::sync::broadcast::error::TryRecvError::Empty
                        | tokio::sync::broadcast::error::TryRecvError::Closed)
                ) {}
                // Without subscriptions there is nothing to write: skip the
                // writer entirely (a fan-out is a write, and it would cost
                // every commit a second one).
                behind = match store.outbox_behind().await {
                    Ok(behind) => behind,
                    Err(e) => {
                        tracing::warn!(error = %e, "checking subscriptions failed");
                        true
                    }
                };
            }
            Err(RecvError::Closed) => return,
        }
    }
}

async fn deliver_loop(
    store: Store,
    wake: Arc<Notify>,
    transport: Arc<dyn Transport>,
    timings: NotifyConfig,
    shutdown: CancellationToken,
) {
    let concurrency = timings.concurrency.max(1);
    let mut in_flight: HashSet<String> = HashSet::new();
    let mut tasks: JoinSet<String> = JoinSet::new();
    loop {
        if in_flight.len() < concurrency {
            let want = (concurrency + in_flight.len()) as i64;
            match store.due_deliveries(Utc::now(), want).await {
                Ok(due) => {
                    for d in due {
                        if in_flight.len() >= concurrency {
                            break;
                        }
                        if in_flight.insert(d.id.clone()) {
                            let store = store.clone();
                            let transport = transport.clone();
                            tasks.spawn(async move {
                                let id = d.id.clone();
                                attempt(&store, transport.as_ref(), timings, d).await;
                                id
                            });
                        }
                    }
                }
                Err(e) => tracing::error!(error = %e, "reading due deliveries failed"),
            }
        }
        let idle = if in_flight.len() >= concurrency {
            MAX_IDLE
        } else {
            match store.pending_schedule((in_flight.len() + 1) as i64).await {
                Ok(schedule) => schedule
                    .into_iter()
                    .find(|(id, _)| !in_flight.contains(id))
                    .map(|(_, at)| (at - Utc::now()).to_std().unwrap_or(Duration::ZERO))
                    .unwrap_or(MAX_IDLE)
                    .min(MAX_IDLE),
                Err(e) => {
                    tracing::error!(error = %e, "reading the delivery schedule failed");
                    Duration::from_secs(1)
                }
            }
        };
        if idle.is_zero() && in_flight.len() < concurrency {
            continue;
        }
        tokio::select! {
            done = tasks.join_next(), if !tasks.is_empty() => {
                if let Some(Ok(id)) = done {
                    in_flight.remove(&id);
                } else if let Some(Err(e)) = done {
                    tracing::error!(error = %e, "a delivery task failed");
                    // Its id is unknown here; start over with a clean slate
                    // once the others are done.
                    if tasks.is_empty() {
                        in_flight.clear();
                    }
                }
            }
            _ = tokio::time::sleep(idle) => {}
            _ = wake.notified() => {}
            _ = shutdown.cancelled() => break,
        }
    }
    // Attempts cut short stay pending and are retried after a restart with
    // the same webhook-id.
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
}

/// The delay before retry number `attempt` (1 = the first retry):
/// `min * 2^(attempt-1)` capped at `max`, then a random part of its upper
/// half (jitter), so receivers coming back are not hit by every sender at once.
pub fn backoff(attempt: i64, min: Duration, max: Duration) -> Duration {
    let exp = u32::try_from(attempt.saturating_sub(1).clamp(0, 30)).unwrap_or(30);
    let base = min.saturating_mul(2u32.saturating_pow(exp)).min(max);
    let half = base / 2;
    half + base.mul_f64(rand::rng().random_range(0.0..=0.5))
}

async fn attempt(store: &Store, transport: &dyn Transport, t: NotifyConfig, d: DueDelivery) {
    let at = Utc::now();
    let start = Instant::now();
    let timestamp = at.timestamp();
    let signed = crate::sign::sign(
        std::slice::from_ref(&d.secret),
        &d.event_id,
        timestamp,
        d.payload.as_bytes(),
    );
    let (status_code, error, retryable) = match signed {
        Err(e) => (None, Some(e.to_string()), false),
        Ok(signature) => {
            let req = OutboundRequest {
                url: d.url.clone(),
                headers: vec![
                    ("webhook-id", d.event_id.clone()),
                    ("webhook-timestamp", timestamp.to_string()),
                    ("webhook-signature", signature),
                ],
                body: d.payload.clone().into_bytes(),
                timeout: t.timeout,
                max_body: 0,
            };
            match transport.post(req).await {
                Ok(resp) if (200..300).contains(&resp.status) => (Some(resp.status), None, false),
                // A redirect could send the event somewhere the admin did
                // not name: it is a failure, never followed, retried like a
                // 5xx (as a delivery to an executor is), with where it
                // pointed for the admin to see.
                Ok(resp) => {
                    let code = resp.status;
                    let redirect = (300..400).contains(&code);
                    let retry = redirect || code >= 500 || code == 429 || code == 408;
                    let error = match (redirect, &resp.location) {
                        (true, Some(to)) => {
                            format!("HTTP {code} (redirect to {to}, not followed)")
                        }
                        (true, None) => format!("HTTP {code} (redirect, not followed)"),
                        (false, _) => format!("HTTP {code}"),
                    };
                    (Some(code), Some(error), retry)
                }
                Err(e) => (None, Some(e.to_string()), true),
            }
        }
    };
    let duration_ms = i64::try_from(start.elapsed().as_millis()).unwrap_or(i64::MAX);
    let outcome = match (&error, retryable) {
        (None, _) => AttemptOutcome::Delivered,
        (Some(_), false) => AttemptOutcome::Failed,
        (Some(_), true) => {
            let give_up = chrono::Duration::from_std(t.give_up_after)
                .map(|g| d.created_at + g)
                .unwrap_or(d.created_at);
            let delay = backoff(d.attempts + 1, t.backoff_min, t.backoff_max);
            let next = at + chrono::Duration::from_std(delay).unwrap_or_default();
            if next > give_up {
                AttemptOutcome::Failed
            } else {
                AttemptOutcome::Retry(next)
            }
        }
    };
    match &outcome {
        AttemptOutcome::Delivered => {
            metrics::counter!("actiongate_webhook_deliveries_total", "result" => "delivered")
                .increment(1)
        }
        AttemptOutcome::Retry(_) => {
            metrics::counter!("actiongate_webhook_deliveries_total", "result" => "retry")
                .increment(1)
        }
        AttemptOutcome::Failed => {
            tracing::warn!(delivery = %d.id, subscription = %d.subscription_id, error = ?error, "webhook delivery given up");
            metrics::counter!("actiongate_webhook_deliveries_total", "result" => "failed")
                .increment(1)
        }
    }
    let rec = AttemptRecord {
        at,
        status_code,
        error,
        duration_ms,
        outcome,
    };
    if let Err(e) = store.record_attempt(&d.id, rec).await {
        // It stays pending with its old schedule and is tried again.
        tracing::error!(delivery = %d.id, error = %e, "recording a delivery attempt failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        let min = Duration::from_secs(1);
        let max = Duration::from_secs(300);
        for attempt in 1..40 {
            let d = backoff(attempt, min, max);
            let base = (min * 2u32.pow((attempt as u32 - 1).min(20))).min(max);
            assert!(d >= base / 2 && d <= base, "attempt {attempt}: {d:?}");
        }
        assert!(backoff(100, min, max) <= max);
    }
}
