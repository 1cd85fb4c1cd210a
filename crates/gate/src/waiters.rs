//! Long-poll waiters: a map from action id to the requests waiting on it,
//! woken by the committed-event broadcast. A waiter costs a map entry and a
//! oneshot channel: no thread, no database connection while it waits.
//!
//! The waking event is handed to the waiter: an action's events carry the
//! action as committed, so an event that leaves it unsettled, with nothing
//! published after it, needs no read of the database. What a waiter answers
//! is always read from the database (an action may still change after the
//! event that settled it, e.g. a late attempt record).

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actiongate_store::{Action, Event, Store, StoreError};
use tokio::sync::{broadcast, oneshot};
use tokio_util::sync::CancellationToken;

/// What wakes a waiter: the event about its key, or `None` when events were
/// missed and anything may have changed.
type Wake = Option<Arc<Event>>;
type Map = HashMap<String, Vec<(u64, oneshot::Sender<Wake>)>>;

/// Registry of long-polls, keyed by action id.
pub struct Waiters {
    map: Arc<Mutex<Map>>,
    next_token: AtomicU64,
    store: Store,
    shutdown: CancellationToken,
}

/// A waiter's place in the map; removed when dropped (timeout, client gone).
pub struct Registration<'a> {
    map: &'a Mutex<Map>,
    id: &'a str,
    token: u64,
    rx: oneshot::Receiver<Wake>,
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        if let Ok(mut map) = self.map.lock()
            && let Some(list) = map.get_mut(self.id)
        {
            list.retain(|(t, _)| *t != self.token);
            if list.is_empty() {
                map.remove(self.id);
            }
        }
    }
}

impl Waiters {
    /// Starts the task that wakes waiters from committed events.
    pub fn new(store: Store, shutdown: CancellationToken) -> Waiters {
        let map: Arc<Mutex<Map>> = Arc::default();
        tokio::spawn(fan_out(store.subscribe(), map.clone(), shutdown.clone()));
        Waiters {
            map,
            next_token: AtomicU64::new(0),
            store,
            shutdown,
        }
    }

    /// Registers a waiter on `id` now, so that an event committed from now
    /// on wakes it, even one about a write the caller has yet to make.
    pub fn register<'a>(&'a self, id: &'a str) -> Registration<'a> {
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        if let Ok(mut map) = self.map.lock() {
            map.entry(id.to_owned()).or_default().push((token, tx));
        }
        Registration {
            map: &self.map,
            id,
            token,
            rx,
        }
    }

    /// How many requests are waiting now.
    pub fn open(&self) -> usize {
        self.map
            .lock()
            .map(|m| m.values().map(Vec::len).sum())
            .unwrap_or(0)
    }

    /// Returns the action once it is settled, or its current state when
    /// `wait` runs out or the daemon shuts down.
    pub async fn wait_for_action(&self, id: &str, wait: Duration) -> Result<Action, StoreError> {
        let reg = self.register(id);
        let current = self.store.get_action(id).await?;
        if current.is_settled() || wait.is_zero() || self.shutdown.is_cancelled() {
            return Ok(current);
        }
        // Not kept while waiting: an idle long-poll's memory is its future.
        drop(current);
        self.wait_for_action_from(reg, wait).await
    }

    /// [`Waiters::wait_for_action`] for a waiter registered before its
    /// caller saw the action unsettled, so nothing committed since is missed.
    pub async fn wait_for_action_from(
        &self,
        reg: Registration<'_>,
        wait: Duration,
    ) -> Result<Action, StoreError> {
        let id = reg.id;
        self.wait_loop(
            reg,
            wait,
            || self.store.get_action(id),
            Action::is_settled,
            leaves_unsettled,
        )
        .await
    }

    /// Returns `load()` once `done` holds for it, re-loading whenever an
    /// event about `key` (an action or grant request id) is committed; or
    /// its current value when `wait` runs out or the daemon shuts down.
    pub async fn wait_until<T, F, Fut>(
        &self,
        key: &str,
        wait: Duration,
        load: F,
        done: impl Fn(&T) -> bool,
    ) -> Result<T, StoreError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        // Register before reading, so a change committed between the read
        // and the wait still wakes us.
        let reg = self.register(key);
        let current = load().await?;
        if done(&current) || wait.is_zero() || self.shutdown.is_cancelled() {
            return Ok(current);
        }
        drop(current);
        self.wait_loop(reg, wait, load, done, |_| false).await
    }

    /// The waiting itself, for a value seen not done after `reg` was
    /// registered. `unsettled(event)` tells an event that leaves it not
    /// done. No value is held while waiting.
    async fn wait_loop<'a, T, F, Fut>(
        &'a self,
        mut reg: Registration<'a>,
        wait: Duration,
        load: F,
        done: impl Fn(&T) -> bool,
        unsettled: impl Fn(&Event) -> bool,
    ) -> Result<T, StoreError>
    where
        F: Fn() -> Fut,
        Fut: Future<Output = Result<T, StoreError>>,
    {
        let key = reg.id;
        let until = tokio::time::Instant::now() + wait;
        loop {
            let woken = tokio::select! {
                woken = &mut reg.rx => woken.ok().flatten(),
                _ = tokio::time::sleep_until(until) => return load().await,
                _ = self.shutdown.cancelled() => return load().await,
            };
            if tokio::time::Instant::now() >= until {
                return load().await;
            }
            // Register again before looking, so nothing published from
            // here on is missed.
            reg = self.register(key);
            // An event that leaves it unsettled, with none published
            // since, changes nothing this waiter answers: no read.
            let quiet = woken
                .as_ref()
                .is_some_and(|ev| unsettled(ev) && self.store.last_seq() == ev.seq);
            if !quiet {
                let value = load().await?;
                if done(&value) || self.shutdown.is_cancelled() {
                    return Ok(value);
                }
            }
        }
    }
}

/// Whether an event about an action leaves it unsettled.
fn leaves_unsettled(ev: &Event) -> bool {
    ev.settles_its_action() == Some(false)
}

async fn fan_out(
    mut rx: broadcast::Receiver<Arc<actiongate_store::Event>>,
    map: Arc<Mutex<Map>>,
    shutdown: CancellationToken,
) {
    loop {
        let received = tokio::select! {
            r = rx.recv() => r,
            _ = shutdown.cancelled() => break,
        };
        match received {
            Ok(ev) => {
                // Actions are keyed by their id; grant requests and plans
                // by theirs, which their events carry as the resource's id.
                let key = match &ev.action_id {
                    Some(id) => Some(std::borrow::Cow::Borrowed(id.as_str())),
                    None if ev.kind.starts_with("grant_request.")
                        || ev.kind.starts_with("plan.") =>
                    {
                        ev.resource_id()
                    }
                    None => None,
                };
                let Some(key) = key else { continue };
                let woken = map.lock().ok().and_then(|mut m| m.remove(key.as_ref()));
                for (_, tx) in woken.into_iter().flatten() {
                    let _ = tx.send(Some(ev.clone()));
                }
            }
            Err(broadcast::error::RecvError::Lagged(n)) => {
                // We missed events: wake everyone; each waiter re-reads its
                // action and goes back to waiting if nothing changed.
                tracing::warn!(missed = n, "waiter fan-out lagged; waking all waiters");
                let all = map
                    .lock()
                    .map(|mut m| std::mem::take(&mut *m))
                    .unwrap_or_default();
                for (_, tx) in all.into_values().flatten() {
                    let _ = tx.send(None);
                }
            }
            Err(broadcast::error::RecvError::Closed) => break,
        }
    }
}
