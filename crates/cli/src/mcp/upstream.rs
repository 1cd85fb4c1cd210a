//! The proxy's client of the upstream server ([`Upstream`]): what the
//! upstream sends on its own, passed on to the agent's side. Its
//! `list_changed` notifications and the progress of forwarded calls reach
//! the agent coalesced ([`super::coalesce`]), so a flood from the
//! upstream, or an agent that reads slowly, queues nothing per message.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use rmcp::ClientHandler;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::{NotificationContext, Peer, RoleClient, RoleServer};

use super::coalesce::ListChanges;
use super::progress::{Counted, ProgressTokens};

/// Where the agent's side of the proxy is, once known: upstream
/// `list_changed` notifications are passed on to it.
pub type Downstream = Arc<StdMutex<Option<Peer<RoleServer>>>>;

/// Most progress notifications waiting at once for the call they belong
/// to (whose token is recorded just after the request is sent): more are
/// dropped, rather than wait each in a task of its own.
const MAX_EARLY_PROGRESS: usize = 16;

/// The upstream server's client side.
pub struct Upstream {
    /// The agent's side.
    pub downstream: Downstream,
    /// Tokens of forwarded calls (shared with [`Proxy`]).
    pub progress: ProgressTokens,
    /// `list_changed` notifications on their way to the agent, coalesced.
    pub changes: Arc<ListChanges>,
    /// Progress notifications waiting for their call's token.
    pub early: Arc<AtomicUsize>,
}

impl ClientHandler for Upstream {
    async fn on_tool_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        self.changes
            .tools
            .notify(|| notify_list_changed(&self.downstream))
            .await;
    }

    async fn on_resource_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        self.changes
            .resources
            .notify(|| async {
                if let Some(peer) = peer_of(&self.downstream) {
                    let _ = peer.notify_resource_list_changed().await;
                }
            })
            .await;
    }

    async fn on_prompt_list_changed(&self, _ctx: NotificationContext<RoleClient>) {
        self.changes
            .prompts
            .notify(|| async {
                if let Some(peer) = peer_of(&self.downstream) {
                    let _ = peer.notify_prompt_list_changed().await;
                }
            })
            .await;
    }

    /// Progress of a forwarded call goes to the agent under its own token,
    /// coalesced ([`Relay`]); progress for anything else is dropped.
    async fn on_progress(
        &self,
        mut params: ProgressNotificationParam,
        ctx: NotificationContext<RoleClient>,
    ) {
        // Counted on reading: the call's result waits until it is done.
        let counted = ctx.extensions.get::<Counted>().map(|c| c.0.clone());
        let _handling = counted.as_ref().map(|r| r.handling());
        let find = |p: &ProgressNotificationParam| {
            self.progress
                .lock()
                .ok()
                .and_then(|m| m.get(&p.progress_token).cloned())
        };
        let mut relay_of = counted.clone();
        // The token is recorded right after the request is sent; a
        // notification that overtakes that waits a moment for it (a few
        // at most: a flood for tokens nobody knows is dropped).
        if relay_of.is_none() {
            if self.early.fetch_add(1, SeqCst) < MAX_EARLY_PROGRESS {
                for _ in 0..20 {
                    relay_of = find(&params);
                    if relay_of.is_some() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            self.early.fetch_sub(1, SeqCst);
        }
        let (Some(relay), Some(peer)) = (relay_of, peer_of(&self.downstream)) else {
            return;
        };
        params.progress_token = relay.theirs.clone();
        relay
            .latest
            .send(params, |p| {
                let peer = peer.clone();
                async move {
                    let _ = peer.notify_progress(p).await;
                }
            })
            .await;
    }
}

pub(super) fn peer_of(downstream: &Downstream) -> Option<Peer<RoleServer>> {
    downstream.lock().ok().and_then(|p| p.clone())
}

pub(super) async fn notify_list_changed(downstream: &Downstream) {
    if let Some(peer) = peer_of(downstream) {
        let _ = peer.notify_tool_list_changed().await;
    }
}
