//! The dispatcher: sends approved handler actions to their executors as
//! signed webhooks (Standard Webhooks), one attempt at a time per action,
//! within global and per-handler limits, and records each attempt's outcome:
//! 2xx completes, 202 waits for the signed result callback, other 4xx fail,
//! 5xx/408/429/timeouts/refused connections retry on the configured schedule
//! with jitter, then fail. Leases make lost attempts (a crash on either
//! side, an executor that never calls back) come round again with the same
//! webhook-id and the next attempt number.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chrono::Utc;
use rand::Rng;
use serde_json::{Value, json};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, broadcast};

use actiongate_store::{ActionAttempt, ActionStatus, AttemptNext, Claimed, Outcome};

use crate::Gate;
use crate::transport::{OutboundRequest, Transport};

/// Longest idle sleep; a safety net should a wake-up ever be missed.
const MAX_IDLE: Duration = Duration::from_secs(60);
/// Longest idle sleep with other daemons on the database: what they do
/// wakes only them, so a lease that lapses when one of them dies, or a
/// retry it scheduled, is found here by looking.
const MAX_IDLE_SHARED: Duration = Duration::from_secs(1);
/// Shortest wait between passes while some handler has no room in flight.
const BLOCKED_FLOOR: Duration = Duration::from_millis(50);
/// How many due actions one pass looks at in a round.
const BATCH: i64 = 256;
/// Most rounds of a pass: each looks past the handlers the previous
/// rounds found full.
const MAX_ROUNDS: usize = 8;

/// The longest per-attempt timeout a handler may register (its `timeout`).
pub const MAX_ATTEMPT: Duration = Duration::from_secs(24 * 3600);

/// How approved handler actions reach their executors, typed.
#[derive(Debug, Clone)]
pub struct DispatchConfig {
    /// Attempts in flight at once, over all handlers.
    pub max_in_flight: usize,
    /// Attempts in flight at once to one handler.
    pub per_handler_max_in_flight: usize,
    /// Per-attempt timeout of handlers that name none.
    pub default_timeout: Duration,
    /// Waits before each retry; its length + 1 is the number of attempts.
    pub retry_schedule: Vec<Duration>,
    /// How long an executor that answered 202 has to post the result.
    pub async_result_timeout: Duration,
    /// Largest executor answer kept as the result, in bytes.
    pub result_max_bytes: usize,
    /// How long a rotated-out handler secret stays valid.
    pub secret_grace: Duration,
    /// Added to an attempt's timeout to make its lease: past the lease, an
    /// attempt whose daemon went away is presumed lost and sent again (by
    /// any daemon on the database).
    pub lease_slack: Duration,
}

struct Limits {
    global: Arc<Semaphore>,
    per_handler: Mutex<HashMap<String, Arc<Semaphore>>>,
    per_handler_max: usize,
    freed: Notify,
}

/// Room for one attempt in flight, within the global and the handler's
/// limit; given back (waking the dispatch loop) when dropped.
pub struct Slot {
    _permits: (OwnedSemaphorePermit, OwnedSemaphorePermit),
    limits: Arc<Limits>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.limits.freed.notify_one();
    }
}

/// What the dispatch loop and request handlers share: the in-flight limits,
/// the transport and the settings. A request that stores an allowed
/// handler action takes a [`Slot`] first; the action is then stored
/// already claimed and its attempt starts at once, without waiting for the
/// loop to find it.
pub struct Dispatcher {
    cfg: Arc<DispatchConfig>,
    transport: Arc<dyn Transport>,
    limits: Arc<Limits>,
    /// Whether the loop runs (dispatch enabled, past start-up recovery).
    live: AtomicBool,
    /// Whether approved actions wait for the loop to find room for them;
    /// new requests then queue behind them instead of taking the room.
    backlog: AtomicBool,
}

impl Dispatcher {
    /// The shared part; nothing is sent until [`run`] starts.
    pub fn new(cfg: DispatchConfig, transport: Arc<dyn Transport>) -> Dispatcher {
        Dispatcher {
            limits: Arc::new(Limits {
                global: Arc::new(Semaphore::new(cfg.max_in_flight)),
                per_handler: Mutex::new(HashMap::new()),
                per_handler_max: cfg.per_handler_max_in_flight,
                freed: Notify::new(),
            }),
            cfg: Arc::new(cfg),
            transport,
            live: AtomicBool::new(false),
            backlog: AtomicBool::new(false),
        }
    }

    /// A slot for an attempt to `handler`, if dispatch runs, no approved
    /// action waits for room, and the limits have room. Without one, the
    /// action is stored approved and the loop sends it in turn.
    pub fn reserve(&self, handler: &str) -> Option<Slot> {
        if !self.live.load(Ordering::Acquire) || self.backlog.load(Ordering::Acquire) {
            return None;
        }
        let slot = self.try_acquire(handler);
        if slot.is_none() {
            self.backlog.store(true, Ordering::Release);
        }
        slot
    }

    fn try_acquire(&self, handler: &str) -> Option<Slot> {
        let sem = {
            let mut map = self.limits.per_handler.lock().ok()?;
            map.entry(handler.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(self.limits.per_handler_max)))
                .clone()
        };
        let h = sem.try_acquire_owned().ok()?;
        let g = self.limits.global.clone().try_acquire_owned().ok()?;
        Some(Slot {
            _permits: (g, h),
            limits: self.limits.clone(),
        })
    }

    /// How long an attempt to a handler with this timeout is leased for:
    /// the attempt's own timeout (the handler's, else the default) and the
    /// slack, so that a daemon that died mid-attempt holds it no longer.
    pub fn lease(&self, timeout_ms: Option<i64>) -> chrono::Duration {
        let timeout = attempt_timeout(&self.cfg, timeout_ms);
        chrono::Duration::from_std(timeout + self.cfg.lease_slack).unwrap_or_default()
    }

    /// Runs claimed attempt `c` in its own task, holding `slot` until done.
    /// While actions wait for room, the slot then goes straight to the next
    /// one of the same handler (one claim, no pass of the dispatch loop).
    pub fn start(&self, gate: &Gate, c: Claimed, slot: Slot) {
        let gate = gate.clone();
        tokio::spawn(async move {
            let d = gate.dispatcher();
            let mut c = c;
            loop {
                let handler = c.action.handler.clone().unwrap_or_default();
                attempt(&gate, d.transport.as_ref(), &d.cfg, c).await;
                if !d.backlog.load(Ordering::Acquire) || gate.shutdown().is_cancelled() {
                    break;
                }
                let timeout = match gate.handler(&handler).await {
                    Ok(h) => h.record.timeout_ms,
                    Err(_) => break,
                };
                let now = Utc::now();
                match gate
                    .store()
                    .claim_next(&handler, now, now + d.lease(timeout))
                    .await
                {
                    Ok(Some(next)) => c = next,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::error!(error = %e, "claiming the next action failed");
                        break;
                    }
                }
            }
            drop(slot);
        });
    }
}

/// Makes whatever was in flight when the daemon last stopped due again
/// (or failed, with its attempts used up), recording the cut attempt. Runs
/// before the server accepts requests, so that an executor's late result
/// cannot settle such an action before its cut attempt is on record.
pub async fn recover_in_flight(gate: &Gate) {
    let cfg = &gate.dispatcher().cfg;
    let max_attempts = cfg.retry_schedule.len() as i64 + 1;
    // Whatever was in flight when the daemon last stopped is lost: make it
    // due again. Not with other daemons on the database: what is running
    // may be theirs, still in flight; a lost attempt is released when its
    // lease lapses.
    let all = !gate.store().is_shared();
    match gate
        .store()
        .release_leases(Utc::now(), max_attempts, all)
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
pub async fn run(gate: Gate) {
    let d = gate.dispatcher();
    d.live.store(true, Ordering::Release);
    let max_attempts = d.cfg.retry_schedule.len() as i64 + 1;
    let max_idle = if gate.store().is_shared() {
        MAX_IDLE_SHARED
    } else {
        MAX_IDLE
    };
    let mut events = gate.store().subscribe();
    // When the earliest lease lapses; releasing is a write, so it is done
    // only when one is due, not on every pass.
    let mut lease_due: Option<chrono::DateTime<Utc>> = None;
    loop {
        if lease_due.is_some_and(|at| at <= Utc::now())
            && let Err(e) = gate
                .store()
                .release_leases(Utc::now(), max_attempts, false)
                .await
        {
            tracing::error!(error = %e, "releasing lapsed leases failed");
        }
        // A pass runs as a task of its own: should one panic (a value no
        // check foresaw), dispatch for every other handler goes on.
        let one = gate.clone();
        let mut panicked = false;
        let full = match tokio::spawn(async move { pass(&one).await }).await {
            Ok(Ok(full)) => full,
            Ok(Err(e)) => {
                tracing::error!(error = %e, "dispatch pass failed");
                Vec::new()
            }
            Err(e) => {
                tracing::error!(error = %e, "dispatch pass panicked");
                panicked = true;
                Vec::new()
            }
        };
        let blocked = !full.is_empty();
        // A full handler's due retries wait for room (`freed`), not for
        // their time, which has passed: counting them would make this loop
        // look again every millisecond while a slow executor holds its room.
        let sleep = match gate.store().next_dispatch_times(full).await {
            Ok(next) => {
                lease_due = next.lease;
                match next.retry.into_iter().chain(next.lease).min() {
                    Some(at) => (at - Utc::now())
                        .to_std()
                        .unwrap_or(Duration::ZERO)
                        .min(max_idle),
                    None => max_idle,
                }
            }
            Err(_) => {
                lease_due = Some(Utc::now());
                Duration::from_secs(1)
            }
        };
        if sleep.is_zero() && !blocked && !panicked {
            continue;
        }
        // Blocked with something due all the same (more of the full
        // handlers' backlog than one pass looks past): look again soon,
        // not at once. After a panic, not before a second has passed.
        let floor = if panicked {
            Duration::from_secs(1)
        } else if blocked {
            BLOCKED_FLOOR
        } else {
            Duration::from_millis(1)
        };
        tokio::select! {
            _ = tokio::time::sleep(sleep.max(floor)) => {}
            _ = d.limits.freed.notified() => {}
            _ = wake_on_event(&mut events) => {}
            _ = gate.shutdown().cancelled() => break,
        }
    }
    d.live.store(false, Ordering::Release);
}

/// Returns when an event may have made an action due.
async fn wake_on_event(events: &mut broadcast::Receiver<Arc<actiongate_store::Event>>) {
    // Only an approved handler action gives a pass something to do (a
    // decision-only action is approved too, with no handler), and not one
    // its request already claimed (its `action.started` follows in the same
    // commit). Everything already queued is taken now: one pass serves them
    // all, where returning at the first would run a pass (three reads and a
    // write) per event.
    let mut approved: Vec<String> = Vec::new();
    let mut lagged = false;
    let note = |approved: &mut Vec<String>, ev: &actiongate_store::Event| match ev.kind.as_str() {
        "action.approved" if ev.names_a_handler() => {
            approved.extend(ev.action_id.clone());
        }
        "action.started" => approved.retain(|id| Some(id) != ev.action_id.as_ref()),
        _ => {}
    };
    loop {
        match events.recv().await {
            Ok(ev) => note(&mut approved, &ev),
            Err(broadcast::error::RecvError::Lagged(_)) => lagged = true,
            Err(broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
        }
        loop {
            match events.try_recv() {
                Ok(ev) => note(&mut approved, &ev),
                Err(broadcast::error::TryRecvError::Lagged(_)) => lagged = true,
                Err(_) => break,
            }
        }
        if lagged || !approved.is_empty() {
            return;
        }
    }
}

/// Claims what is due and within limits; the handlers whose limits held
/// some back.
async fn pass(gate: &Gate) -> anyhow::Result<Vec<String>> {
    let d = gate.dispatcher();
    let mut blocked = false;
    // Claimed together by lease: each action is leased for its own
    // handler's timeout, not the longest of the batch.
    let mut by_lease: std::collections::BTreeMap<chrono::Duration, Vec<String>> =
        std::collections::BTreeMap::new();
    let mut slots = HashMap::new();
    // Handlers whose room in flight is full: a batch full of one slow
    // executor's backlog is looked past, so another handler's due actions
    // are found (else they waited for that backlog to drain).
    let mut full: Vec<String> = Vec::new();
    for _ in 0..MAX_ROUNDS {
        let due = gate
            .store()
            .due_for_dispatch(Utc::now(), BATCH, full.clone())
            .await?;
        let whole_batch = due.len() as i64 == BATCH;
        let mut newly_full = false;
        for (id, handler) in due {
            if slots.contains_key(&id) || full.contains(&handler) {
                continue;
            }
            let Some(slot) = d.try_acquire(&handler) else {
                blocked = true;
                full.push(handler);
                newly_full = true;
                continue;
            };
            let timeout = match gate.handler(&handler).await {
                Ok(h) => h.record.timeout_ms,
                Err(_) => None,
            };
            slots.insert(id.clone(), slot);
            by_lease.entry(d.lease(timeout)).or_default().push(id);
        }
        if !(whole_batch && newly_full) {
            break;
        }
    }
    for (lease, ids) in by_lease {
        let claimed = gate.store().claim(ids, Utc::now() + lease).await?;
        for c in claimed {
            if let Some(slot) = slots.remove(&c.action.id) {
                d.start(gate, c, slot);
            }
        }
    }
    d.backlog.store(blocked, Ordering::Release);
    Ok(full)
}

/// An attempt's timeout: the handler's own (`timeout_ms`), or the default.
/// Registration refuses more than [`MAX_ATTEMPT`]; a value stored before it
/// did is held to it, so no lease overflows a date.
fn attempt_timeout(cfg: &DispatchConfig, timeout_ms: Option<i64>) -> Duration {
    let most = MAX_ATTEMPT.as_millis() as i64;
    timeout_ms
        .map(|ms| Duration::from_millis(ms.clamp(1, most) as u64))
        .unwrap_or(cfg.default_timeout)
}

/// What one HTTP exchange came to.
struct Answer {
    status_code: Option<u16>,
    error: Option<String>,
    next: AttemptNext,
}

async fn attempt(gate: &Gate, transport: &dyn Transport, cfg: &DispatchConfig, c: Claimed) {
    let id = c.action.id.clone();
    let started = Utc::now();
    let clock = Instant::now();
    let answer = match exchange(gate, transport, cfg, &c).await {
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
    let recorded = match answer.next {
        AttemptNext::Settle(outcome) => gate.store().settle_attempt(&c.action, &rec, outcome).await,
        next => gate.store().finish_attempt(&id, rec, next).await,
    };
    match recorded {
        Ok(Some(a)) if a.status == ActionStatus::Failed => {
            tracing::warn!(action = %id, "action failed")
        }
        Ok(_) => {}
        Err(e) => tracing::error!(action = %id, error = %e, "recording an attempt failed"),
    }
}

async fn exchange(
    gate: &Gate,
    transport: &dyn Transport,
    cfg: &DispatchConfig,
    c: &Claimed,
) -> anyhow::Result<Answer> {
    let a = &c.action;
    let handler_id = a.handler.as_deref().unwrap_or_default();
    let handler = gate
        .handler(handler_id)
        .await
        .map_err(|_| anyhow::anyhow!("handler '{handler_id}' is gone"))?;
    let secrets = gate.handler_secrets(handler_id).await?;
    // What the answer must not carry into the record: the sensitive
    // values it may echo.
    let sensitive = a
        .action
        .as_deref()
        .and_then(|name| handler.action(name))
        .map(|decl| crate::scrub::values(decl, &c.params))
        .unwrap_or_default();
    // The decision's signed receipt: an executor can check a human allowed
    // exactly these params without trusting the webhook secret alone.
    let decided = gate.decided_string(a, Some(&c.params)).await;
    let (digest, params_key) = gate.params_digest(&a.id, &c.params).await?;
    let receipt = gate
        .sign_receipt(&crate::receipts::receipt_claims(a, Some(digest), decided))
        .await?;
    let body = serde_json::to_vec(&json!({
        "type": "action.execute",
        "action_id": a.id,
        "handler": handler_id,
        "action": a.action,
        "params": c.params,
        "agent": a.agent,
        "attempt": c.attempt,
        "deadline": a.deadline,
        "receipt": receipt,
        "params_key": params_key,
    }))?;
    let ts = Utc::now().timestamp();
    let signature = crate::sign::sign(&secrets, &a.id, ts, &body)?;
    let timeout = attempt_timeout(cfg, handler.record.timeout_ms);
    let req = OutboundRequest {
        url: handler.record.url.clone(),
        headers: vec![
            ("webhook-id", a.id.clone()),
            ("webhook-timestamp", ts.to_string()),
            ("webhook-signature", signature),
        ],
        body,
        timeout,
        max_body: cfg.result_max_bytes,
    };
    let resp = match transport.post(req).await {
        Ok(r) => r,
        // No answer, or one cut short: the executor may or may not have
        // run it; the same webhook-id lets it tell a retry from a new one.
        Err(e) => {
            let msg = e.to_string();
            return Ok(Answer {
                status_code: None,
                error: Some(msg.clone()),
                next: retry(cfg, c.attempt, None, &msg),
            });
        }
    };
    let code = resp.status;
    let body = crate::scrub::value(
        result_value(&resp.body, resp.body_len, cfg.result_max_bytes),
        &sensitive,
    );
    let location = resp
        .location
        .as_deref()
        .map(|to| crate::scrub::text(to, &sensitive));
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
        // A redirect is never followed: it could point anywhere the daemon
        // can reach. It counts as a failed attempt, retried like a 5xx.
        300..=399 => {
            let msg = match &location {
                Some(to) => format!(
                    "executor answered {code} (redirect to {}, not followed)",
                    actiongate_api::text::clip(to, 512)
                ),
                None => format!("executor answered {code} (redirect, not followed)"),
            };
            Answer {
                status_code: Some(code),
                error: Some(msg.clone()),
                next: retry(cfg, c.attempt, resp.retry_after, &msg),
            }
        }
        408 | 429 | 500..=599 => {
            let msg = format!("executor answered {code}");
            Answer {
                status_code: Some(code),
                error: Some(msg.clone()),
                next: retry(cfg, c.attempt, resp.retry_after, &msg),
            }
        }
        _ => {
            // Its own words, as long as any text an agent sends.
            let msg = body
                .get("error")
                .and_then(Value::as_str)
                .map(|e| actiongate_api::text::clip(e, crate::actions::MAX_TEXT))
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

/// An answer's body as the result: JSON, or text as `{"text": …}` (also
/// JSON nested deeper than [`crate::bounds::MAX_DEPTH`], which the events
/// and the audit wrap further); a body longer than `max` as
/// `{"truncated": true, "size": …}`.
fn result_value(body: &[u8], len: usize, max: usize) -> Value {
    if len > max {
        return json!({"truncated": true, "size": len});
    }
    if body.is_empty() {
        return Value::Null;
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(v) if crate::bounds::depth(&v) <= crate::bounds::MAX_DEPTH => v,
        _ => json!({"text": String::from_utf8_lossy(body)}),
    }
}

/// An executor's asynchronous result as it is kept, the same as an answer
/// given at once ([`result_value`]): nested deeper than
/// [`crate::bounds::MAX_DEPTH`], as `{"text": …}`; past `max` bytes as
/// JSON, as `{"truncated": true, "size": …}`. Refusing it would leave the
/// action running until its result times out (the callback's
/// `webhook-id` is used once, and an executor does not retry a 4xx).
pub(crate) fn kept_result(result: Value, max: usize) -> Value {
    if !crate::bounds::fits(&result, max) {
        let size = serde_json::to_vec(&result).map_or(0, |b| b.len());
        return json!({"truncated": true, "size": size});
    }
    // Within `max` as JSON, so is its text.
    if crate::bounds::depth(&result) > crate::bounds::MAX_DEPTH {
        return json!({"text": result.to_string()});
    }
    result
}

/// The next step after a retryable failure of attempt `n`.
fn retry(cfg: &DispatchConfig, n: i64, retry_after: Option<Duration>, error: &str) -> AttemptNext {
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
