//! Requests the upstream server makes of the client (roots, sampling,
//! elicitation, ping), which the proxy answers itself (it relays none), at
//! most [`MAX_OPEN_REQUESTS`] at a time. rmcp answers each request in a
//! task of its own and writes each answer in another, so an upstream that
//! sends requests faster than it reads the answers, or stops reading them,
//! would grow the proxy's memory without bound. Past the bound a request
//! is dropped unanswered: an answer would have to wait in memory too.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex as StdMutex};

use rmcp::RoleClient;
use rmcp::model::{JsonRpcMessage, RequestId, ServerNotification};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

/// Most requests of the upstream's open at once (received, not yet
/// answered to the end).
pub const MAX_OPEN_REQUESTS: usize = 16;

/// A transport to the upstream that bounds its requests to the client.
pub struct Bounded<T> {
    inner: T,
    /// Ids of the upstream's requests whose answers are not written yet.
    open: Arc<StdMutex<HashSet<RequestId>>>,
    /// Whether a request was dropped yet (said once on stderr).
    dropped: bool,
}

impl<T> Bounded<T> {
    /// `inner`, bounded.
    pub fn new(inner: T) -> Self {
        Bounded {
            inner,
            open: Arc::default(),
            dropped: false,
        }
    }

    /// Whether `msg` goes on to the proxy: a request within the bound (now
    /// counted open) or anything else, but no cancellation of a request
    /// the proxy is answering (it answers at once; the answer is what
    /// closes the request, so the bound cannot be slipped past by
    /// cancelling).
    fn admits(&mut self, msg: &RxJsonRpcMessage<RoleClient>) -> bool {
        let Ok(mut open) = self.open.lock() else {
            return false;
        };
        match msg {
            JsonRpcMessage::Request(r) => {
                if open.len() >= MAX_OPEN_REQUESTS && !open.contains(&r.id) {
                    if !self.dropped {
                        self.dropped = true;
                        eprintln!(
                            "actiongate mcp proxy: the upstream server has {MAX_OPEN_REQUESTS} \
                             requests to the client unanswered; more are dropped"
                        );
                    }
                    return false;
                }
                open.insert(r.id.clone());
                true
            }
            JsonRpcMessage::Notification(n) => match &n.notification {
                ServerNotification::CancelledNotification(c) => c
                    .params
                    .request_id
                    .as_ref()
                    .is_none_or(|id| !open.contains(id)),
                _ => true,
            },
            _ => true,
        }
    }
}

/// An answer on its way to the upstream: its request closes when the
/// write ends (or fails, or is dropped).
struct Answering {
    id: RequestId,
    open: Arc<StdMutex<HashSet<RequestId>>>,
}

impl Drop for Answering {
    fn drop(&mut self) {
        if let Ok(mut open) = self.open.lock() {
            open.remove(&self.id);
        }
    }
}

impl<T: Transport<RoleClient>> Transport<RoleClient> for Bounded<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let id = match &item {
            JsonRpcMessage::Response(r) => Some(r.id.clone()),
            JsonRpcMessage::Error(e) => e.id.clone(),
            _ => None,
        };
        let answering = id.map(|id| Answering {
            id,
            open: self.open.clone(),
        });
        let send = self.inner.send(item);
        async move {
            let sent = send.await;
            drop(answering);
            sent
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let msg = self.inner.receive().await?;
            if self.admits(&msg) {
                return Some(msg);
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
