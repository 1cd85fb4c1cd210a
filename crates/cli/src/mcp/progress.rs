//! The progress of forwarded calls, on its way from the upstream to the
//! agent, in order with the call's result.
//!
//! rmcp reads the upstream's messages in order but hands each notification
//! to a task of its own and each response straight to its caller, so the
//! progress an upstream sent just before a result can reach the agent after
//! it (where clients drop it). The transport to the upstream ([`Counting`])
//! records a forwarded call's relay as the call is written (it rides in the
//! request's extensions, [`RelayTo`]), so no answer can come before it; it
//! counts each progress notification of the call as it is read, before
//! the result behind it can be, and numbers it (the relay passes on the
//! newest read, whichever task reaches it first); the relay counts it
//! again once it is passed on; a call's result waits
//! ([`Relay::passed_on`]) until the two counts meet.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{
    GetExtensions, GetMeta, JsonRpcMessage, ProgressNotificationParam, ProgressToken,
    ServerNotification,
};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

use super::coalesce::Latest;

/// Progress tokens of forwarded calls: rmcp gives each upstream request a
/// token of its own; the agent's token it stands for, and its progress on
/// the way to the agent.
pub type ProgressTokens = Arc<StdMutex<HashMap<ProgressToken, Relay>>>;

/// Longest a call's result waits for the progress read before it: a
/// bound, so an agent that stops reading cannot hold results back forever.
const MOST_WAIT: Duration = Duration::from_secs(2);

/// The progress of one forwarded call on its way to the agent.
#[derive(Debug, Clone)]
pub struct Relay {
    /// The agent's token.
    pub theirs: ProgressToken,
    /// The latest progress not yet sent: an upstream that reports faster
    /// than the agent reads has all but the latest dropped, rather than
    /// one task and one message queued per report.
    pub latest: Arc<Latest<ProgressNotificationParam>>,
    /// Notifications read from the upstream for this call.
    read: Arc<AtomicU64>,
    /// Of those, the ones the relay is done with (sent, or covered by a
    /// later one, or dropped because the agent is gone).
    done: Arc<AtomicU64>,
}

impl Relay {
    /// The relay of a call whose agent gave the token `theirs`.
    pub fn new(theirs: ProgressToken) -> Self {
        Relay {
            theirs,
            latest: Arc::default(),
            read: Arc::default(),
            done: Arc::default(),
        }
    }

    /// Marks one notification counted on reading as done when dropped.
    pub fn handling(&self) -> Handling {
        Handling(self.done.clone())
    }

    /// Waits until every notification read for this call before now is
    /// done and none is waiting to be sent (at most [`MOST_WAIT`]).
    pub async fn passed_on(&self) {
        let until = tokio::time::Instant::now() + MOST_WAIT;
        while !(self.done.load(SeqCst) >= self.read.load(SeqCst) && self.latest.idle()) {
            if tokio::time::Instant::now() >= until {
                return;
            }
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
}

/// One counted notification in the relay's hands: done when dropped, on
/// every path out of the handler.
pub struct Handling(Arc<AtomicU64>);

impl Drop for Handling {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// The relay a notification was counted for on reading, and its number
/// among the call's notifications, carried to the handler in the
/// notification's extensions.
#[derive(Debug, Clone)]
pub struct Counted {
    /// The call's relay.
    pub relay: Relay,
    /// The order it was read in: rmcp hands each notification to a task of
    /// its own, so a later one may reach the relay first.
    pub order: u64,
}

/// The relay of a forwarded call, carried in its request's extensions to
/// the transport, which records it under the call's progress token as the
/// request is written.
#[derive(Debug, Clone)]
pub struct RelayTo(pub Relay);

/// A transport to the upstream that counts the progress of forwarded calls
/// as it is read (see the module's comment).
pub struct Counting<T> {
    inner: T,
    relays: ProgressTokens,
}

impl<T> Counting<T> {
    /// `inner`, counting for the calls in `relays`.
    pub fn new(inner: T, relays: ProgressTokens) -> Self {
        Counting { inner, relays }
    }

    fn count(&self, msg: &mut RxJsonRpcMessage<RoleClient>) {
        let JsonRpcMessage::Notification(n) = msg else {
            return;
        };
        let ServerNotification::ProgressNotification(p) = &mut n.notification else {
            return;
        };
        let relay = self
            .relays
            .lock()
            .ok()
            .and_then(|m| m.get(&p.params.progress_token).cloned());
        if let Some(relay) = relay {
            let order = relay.read.fetch_add(1, SeqCst);
            p.extensions.insert(Counted { relay, order });
        }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Counting<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Request(r) = &item
            && let Some(RelayTo(relay)) = r.request.extensions().get::<RelayTo>()
            && let Some(token) = r.request.get_meta().get_progress_token()
            && let Ok(mut relays) = self.relays.lock()
        {
            relays.insert(token, relay.clone());
        }
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let mut msg = self.inner.receive().await?;
        self.count(&mut msg);
        Some(msg)
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test]
    async fn a_result_waits_for_the_progress_read_before_it() {
        let relay = Relay::new(ProgressToken(rmcp::model::NumberOrString::Number(1)));
        relay.read.fetch_add(2, SeqCst);
        let first = relay.handling();
        drop(first);
        let second = relay.handling();
        let started = tokio::time::Instant::now();
        let waiter = tokio::spawn({
            let relay = relay.clone();
            async move { relay.passed_on().await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "the result went before the progress");
        drop(second);
        waiter.await.unwrap();
        assert!(started.elapsed() < MOST_WAIT);
    }

    #[tokio::test]
    async fn an_agent_that_stops_reading_holds_a_result_back_a_bounded_time() {
        let relay = Relay::new(ProgressToken(rmcp::model::NumberOrString::Number(1)));
        relay.read.fetch_add(1, SeqCst);
        let started = tokio::time::Instant::now();
        relay.passed_on().await;
        assert!(started.elapsed() >= MOST_WAIT);
    }
}
