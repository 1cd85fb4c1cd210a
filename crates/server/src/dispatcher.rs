//! The dispatcher: sends approved handler actions to their executors as
//! signed webhooks (Standard Webhooks), one attempt at a time per action,
//! within global and per-handler limits, and records each attempt's outcome:
//! 2xx completes, 202 waits for the signed result callback, other 4xx fail,
//! 5xx/408/429/timeouts/refused connections retry on the configured schedule
//! with jitter, then fail. Leases make lost attempts (a crash on either
//! side, an executor that never calls back) come round again with the same
//! webhook-id and the next attempt number.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, broadcast};

use actiongate_store::{ActionAttempt, ActionStatus, AttemptNext, Claimed, Outcome};

use crate::config::Dispatch;
use crate::state::AppState;

/// Longest idle sleep; a safety net should a wake-up ever be missed.
const MAX_IDLE: Duration = Duration::from_secs(60);
/// How many due actions one pass looks at.
const BATCH: i64 = 256;
/// Extra lease beyond the handler's timeout, for the answer to be recorded.
const LEASE_SLACK: Duration = Duration::from_secs(30);

struct Limits {
    global: Arc<Semaphore>,
    per_handler: Mutex<HashMap<String, Arc<Semaphore>>>,
    per_handler_max: usize,
    freed: Notify,
}

impl Limits {
    fn try_acquire(&self, handler: &str) -> Option<(OwnedSemaphorePermit, OwnedSemaphorePermit)> {
        let sem = {
            let mut map = self.per_handler.lock().ok()?;
            map.entry(handler.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_handler_max)))
                .clone()
        };
        let h = sem.try_acquire_owned().ok()?;
        let g = self.global.clone().try_acquire_owned().ok()?;
        Some((g, h))
    }
}

/// Signs `body` for every valid secret (several during a rotation).
pub fn sign(
    secrets: &[String],
    msg_id: &str,
    timestamp: i64,
    body: &[u8],
) -> anyhow::Result<String> {
    let mut sigs = Vec::with_capacity(secrets.len());
    for s in secrets {
        let wh = standardwebhooks::Webhook::new(s)
            .map_err(|e| anyhow::anyhow!("bad handler secret: {e}"))?;
        sigs.push(
            wh.sign(msg_id, timestamp, body)
                .map_err(|e| anyhow::anyhow!("signing failed: {e}"))?,
        );
    }
    Ok(sigs.join(" "))
}

/// Makes whatever was in flight when the daemon last stopped due again
/// (or failed, with its attempts used up), recording the cut attempt. Runs
/// before the server accepts requests, so that an executor's late result
/// cannot settle such an action before its cut attempt is on record.
pub async fn recover_in_flight(state: &AppState, cfg: &Dispatch) {
    let max_attempts = cfg.retry_schedule.len() as i64 + 1;
    // Whatever was in flight when the daemon last stopped is lost: make it due again.
    match state
        .store()
        .release_leases(Utc::now(), max_attempts, true)
        .await
    {
        Ok(released) if !released.is_empty() => {
            tracing::info!(
                count = released.len(),
                "re-dispatching actions left running by the last run"
            );
        }
        Ok(_) => {}
        Err(e) => tracing::error!(error = %e, "recovering running actions failed"),
    }
}

/// Runs until shutdown.
pub async fn run(state: AppState, cfg: Dispatch) {
    let client = match reqwest::Client::builder()
        .pool_max_idle_per_host(cfg.per_handler_max_in_flight)
        .build()
    {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "cannot build the HTTP client; dispatch is off");
            return;
        }
    };
    let max_attempts = cfg.retry_schedule.len() as i64 + 1;
    let limits = Arc::new(Limits {
        global: Arc::new(Semaphore::new(cfg.max_in_flight)),
        per_handler: Mutex::new(HashMap::new()),
        per_handler_max: cfg.per_handler_max_in_flight,
        freed: Notify::new(),
    });
    let cfg = Arc::new(cfg);
    let mut events = state.store().subscribe();
    // When the earliest lease lapses; releasing is a write, so it is done
    // only when one is due, not on every pass.
    let mut lease_due: Option<chrono::DateTime<Utc>> = None;
    loop {
        if lease_due.is_some_and(|at| at <= Utc::now())
            && let Err(e) = state
                .store()
                .release_leases(Utc::now(), max_attempts, false)
                .await
        {
            tracing::error!(error = %e, "releasing lapsed leases failed");
        }
        let blocked = match pass(&state, &client, &cfg, &limits).await {
            Ok(blocked) => blocked,
            Err(e) => {
                tracing::error!(error = %e, "dispatch pass failed");
                false
            }
        };
        let sleep = match state.store().next_dispatch_times().await {
            Ok(next) => {
                lease_due = next.lease;
                match next.retry.into_iter().chain(next.lease).min() {
                    Some(at) => (at - Utc::now())
                        .to_std()
                        .unwrap_or(Duration::ZERO)
                        .min(MAX_IDLE),
                    None => MAX_IDLE,
                }
            }
            Err(_) => {
                lease_due = Some(Utc::now());
                Duration::from_secs(1)
            }
        };
        if sleep.is_zero() && !blocked {
            continue;
        }
        tokio::select! {
            _ = tokio::time::sleep(sleep.max(Duration::from_millis(1))) => {}
            _ = limits.freed.notified() => {}
            _ = wake_on_event(&mut events) => {}
            _ = state.shutdown().cancelled() => return,
        }
    }
}

/// Returns when an event may have made an action due.
async fn wake_on_event(events: &mut broadcast::Receiver<Arc<actiongate_store::Event>>) {
    // Only an approved handler action gives a pass something to do (a
    // decision-only action is approved too, with no handler). Everything
    // already queued is taken now: one pass serves them all, where returning
    // at the first would run a pass (three reads and a write) per event.
    let dispatchable = |ev: &actiongate_store::Event| {
        ev.kind == "action.approved" && ev.data.get("handler").is_some_and(|h| !h.is_null())
    };
    loop {
        let mut wake = match events.recv().await {
            Ok(ev) => dispatchable(&ev),
            Err(broadcast::error::RecvError::Lagged(_)) => true,
            Err(broadcast::error::RecvError::Closed) => std::future::pending::<bool>().await,
        };
        loop {
            match events.try_recv() {
                Ok(ev) => wake |= dispatchable(&ev),
                Err(broadcast::error::TryRecvError::Lagged(_)) => wake = true,
                Err(_) => break,
            }
        }
        if wake {
            return;
        }
    }
}

/// Claims what is due and within limits; `true` when limits held some back.
async fn pass(
    state: &AppState,
    client: &reqwest::Client,
    cfg: &Arc<Dispatch>,
    limits: &Arc<Limits>,
) -> anyhow::Result<bool> {
    let due = state.store().due_for_dispatch(Utc::now(), BATCH).await?;
    let mut blocked = false;
    let mut ids = Vec::new();
    let mut permits = HashMap::new();
    let mut longest = cfg.default_timeout;
    for (id, handler) in due {
        let Some(p) = limits.try_acquire(&handler) else {
            blocked = true;
            continue;
        };
        if let Ok(h) = state.handler(&handler).await
            && let Some(ms) = h.record.timeout_ms
        {
            longest = longest.max(Duration::from_millis(ms.max(0) as u64));
        }
        permits.insert(id.clone(), p);
        ids.push(id);
    }
    if ids.is_empty() {
        return Ok(blocked);
    }
    let lease = chrono::Duration::from_std(longest + LEASE_SLACK).unwrap_or_default();
    let claimed = state.store().claim(ids, Utc::now() + lease).await?;
    for c in claimed {
        let Some(p) = permits.remove(&c.action.id) else {
            continue;
        };
        let (state, client, cfg, limits) =
            (state.clone(), client.clone(), cfg.clone(), limits.clone());
        tokio::spawn(async move {
            attempt(&state, &client, &cfg, c).await;
            drop(p);
            limits.freed.notify_one();
        });
    }
    Ok(blocked)
}

/// What one HTTP exchange came to.
struct Answer {
    status_code: Option<u16>,
    error: Option<String>,
    next: AttemptNext,
}

async fn attempt(state: &AppState, client: &reqwest::Client, cfg: &Dispatch, c: Claimed) {
    let id = c.action.id.clone();
    let started = Utc::now();
    let clock = Instant::now();
    let answer = match exchange(state, client, cfg, &c).await {
        Ok(a) => a,
        Err(e) => Answer {
            status_code: None,
            error: Some(e.to_string()),
            next: retry(cfg, c.attempt, None, &e.to_string()),
        },
    };
    let rec = ActionAttempt {
        n: c.attempt,
        at: started,
        status_code: answer.status_code,
        error: answer.error,
        duration_ms: clock.elapsed().as_millis() as i64,
    };
    match state.store().finish_attempt(&id, rec, answer.next).await {
        Ok(Some(a)) if a.status == ActionStatus::Failed => {
            tracing::warn!(action = %id, "action failed")
        }
        Ok(_) => {}
        Err(e) => tracing::error!(action = %id, error = %e, "recording an attempt failed"),
    }
}

async fn exchange(
    state: &AppState,
    client: &reqwest::Client,
    cfg: &Dispatch,
    c: &Claimed,
) -> anyhow::Result<Answer> {
    let a = &c.action;
    let handler_id = a.handler.as_deref().unwrap_or_default();
    let handler = state
        .handler(handler_id)
        .await
        .map_err(|_| anyhow::anyhow!("handler '{handler_id}' is gone"))?;
    let secrets = state.handler_secrets(handler_id).await?;
    let body = serde_json::to_vec(&json!({
        "type": "action.execute",
        "action_id": a.id,
        "handler": handler_id,
        "action": a.action,
        "params": c.params,
        "agent": a.agent,
        "attempt": c.attempt,
        "deadline": a.deadline,
    }))?;
    let ts = Utc::now().timestamp();
    let signature = sign(&secrets, &a.id, ts, &body)?;
    let timeout = handler
        .record
        .timeout_ms
        .map(|ms| Duration::from_millis(ms.max(1) as u64))
        .unwrap_or(cfg.default_timeout);
    let resp = client
        .post(&handler.record.url)
        .timeout(timeout)
        .header("content-type", "application/json")
        .header("webhook-id", &a.id)
        .header("webhook-timestamp", ts.to_string())
        .header("webhook-signature", signature)
        .body(body)
        .send()
        .await;
    let resp = match resp {
        Ok(r) => r,
        Err(e) => {
            let what = if e.is_timeout() {
                "timed out"
            } else if e.is_connect() {
                "connection failed"
            } else {
                "request failed"
            };
            let msg = format!("{what}: {e}");
            return Ok(Answer {
                status_code: None,
                error: Some(msg.clone()),
                next: retry(cfg, c.attempt, None, &msg),
            });
        }
    };
    let code = resp.status().as_u16();
    let retry_after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Duration::from_secs);
    let body = read_capped(resp, cfg.result_max_bytes).await;
    Ok(match code {
        202 => Answer {
            status_code: Some(code),
            error: None,
            next: AttemptNext::AwaitResult(
                Utc::now()
                    + chrono::Duration::from_std(cfg.async_result_timeout).unwrap_or_default(),
            ),
        },
        200..=299 => Answer {
            status_code: Some(code),
            error: None,
            next: AttemptNext::Settle(Outcome {
                status: ActionStatus::Completed,
                result: Some(body),
                error: None,
            }),
        },
        408 | 429 | 500..=599 => {
            let msg = format!("executor answered {code}");
            Answer {
                status_code: Some(code),
                error: Some(msg.clone()),
                next: retry(cfg, c.attempt, retry_after, &msg),
            }
        }
        _ => {
            let msg = body
                .get("error")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| format!("executor refused with {code}"));
            Answer {
                status_code: Some(code),
                error: Some(msg.clone()),
                next: AttemptNext::Settle(Outcome {
                    status: ActionStatus::Failed,
                    result: Some(body),
                    error: Some(msg),
                }),
            }
        }
    })
}

/// The answer's body as JSON (text bodies as `{"text": …}`), at most `max` bytes kept.
async fn read_capped(mut resp: reqwest::Response, max: usize) -> Value {
    let mut buf = Vec::new();
    let mut total = 0usize;
    while let Ok(Some(chunk)) = resp.chunk().await {
        total += chunk.len();
        if buf.len() < max {
            let take = (max - buf.len()).min(chunk.len());
            buf.extend_from_slice(&chunk[..take]);
        }
    }
    if total > max {
        return json!({"truncated": true, "size": total});
    }
    if buf.is_empty() {
        return Value::Null;
    }
    serde_json::from_slice(&buf).unwrap_or_else(|_| json!({"text": String::from_utf8_lossy(&buf)}))
}

/// The next step after a retryable failure of attempt `n`.
fn retry(cfg: &Dispatch, n: i64, retry_after: Option<Duration>, error: &str) -> AttemptNext {
    let idx = usize::try_from(n - 1).unwrap_or(usize::MAX);
    match cfg.retry_schedule.get(idx) {
        Some(base) => {
            let jitter = rand::rng().random_range(0.8..1.2);
            let mut wait = base.mul_f64(jitter);
            if let Some(ra) = retry_after {
                wait = wait.max(ra.min(Duration::from_secs(3600)));
            }
            AttemptNext::RetryAt(Utc::now() + chrono::Duration::from_std(wait).unwrap_or_default())
        }
        None => AttemptNext::Settle(Outcome {
            status: ActionStatus::Failed,
            result: None,
            error: Some(format!("gave up after {n} attempts; last: {error}")),
        }),
    }
}
