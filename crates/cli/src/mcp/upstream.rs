//! The proxy's client of the upstream server ([`Upstream`]): what the
//! upstream sends on its own, passed on to the agent's side. Its
//! `list_changed` notifications and the progress of forwarded calls reach
//! the agent coalesced ([`super::coalesce`]), so a flood from the
//! upstream, or an agent that reads slowly, queues nothing per message.

use std::sync::{Arc, Mutex as StdMutex};

use rmcp::ClientHandler;
use rmcp::model::ProgressNotificationParam;
use rmcp::service::{NotificationContext, Peer, RoleClient, RoleServer};

use super::coalesce::ListChanges;
use super::progress::Counted;

/// Where the agent's side of the proxy is, once known: upstream
/// `list_changed` notifications are passed on to it.
pub type Downstream = Arc<StdMutex<Option<Peer<RoleServer>>>>;

/// The upstream server's client side.
pub struct Upstream {
    /// The agent's side.
    pub downstream: Downstream,
    /// `list_changed` notifications on their way to the agent, coalesced.
    pub changes: Arc<ListChanges>,
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
    /// coalesced; progress for anything else is dropped. The transport
    /// found the call's relay as it read the notification
    /// ([`super::progress`]): the relay is recorded before the request is
    /// written, so one without it is nobody's.
    async fn on_progress(
        &self,
        mut params: ProgressNotificationParam,
        ctx: NotificationContext<RoleClient>,
    ) {
        let Some(Counted { relay, order }) = ctx.extensions.get::<Counted>().cloned() else {
            return;
        };
        // The call's result waits until this one is done with.
        let _handling = relay.handling();
        let Some(peer) = peer_of(&self.downstream) else {
            return;
        };
        params.progress_token = relay.theirs.clone();
        relay
            .latest
            .send(order, params, |p| {
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
