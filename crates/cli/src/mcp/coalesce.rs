//! Notifications the upstream may send without end (`list_changed`), passed
//! on to the agent at most one at a time per kind: each says only "list
//! again", so one sent after the last change says all of them. A flood
//! from the upstream becomes at most one send in flight and one after it,
//! never a queue that grows with the flood.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};

/// One kind of notification, coalesced.
#[derive(Debug, Default)]
pub struct Coalesced {
    /// A send is in flight (its sender owns the loop below).
    busy: AtomicBool,
    /// A notification arrived that no send has covered yet.
    again: AtomicBool,
}

impl Coalesced {
    /// Notes a notification and, unless a send is in flight (which will
    /// cover it), sends until none is left uncovered.
    pub async fn notify<F, Fut>(&self, mut send: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = ()>,
    {
        self.again.store(true, SeqCst);
        loop {
            if self.busy.swap(true, SeqCst) {
                return;
            }
            while self.again.swap(false, SeqCst) {
                send().await;
            }
            self.busy.store(false, SeqCst);
            // One that came after the last swap and before `busy` was
            // cleared found the loop busy and left: take it up.
            if !self.again.load(SeqCst) {
                return;
            }
        }
    }
}

/// The kinds of `list_changed` the proxy passes on.
#[derive(Debug, Default)]
pub struct ListChanges {
    /// Tools.
    pub tools: Coalesced,
    /// Resources.
    pub resources: Coalesced,
    /// Prompts.
    pub prompts: Coalesced,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flood_is_a_few_sends_and_the_last_change_is_always_sent() {
        let c = Arc::new(Coalesced::default());
        let sent = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for _ in 0..2000 {
            let (c, sent) = (c.clone(), sent.clone());
            tasks.push(tokio::spawn(async move {
                c.notify(|| async {
                    sent.fetch_add(1, SeqCst);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                })
                .await;
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let n = sent.load(SeqCst);
        assert!((1..200).contains(&n), "{n} sends for 2000 notifications");
        // Nothing is left uncovered: a later one is sent at once.
        let before = n;
        c.notify(|| async {
            sent.fetch_add(1, SeqCst);
        })
        .await;
        assert_eq!(sent.load(SeqCst), before + 1);
    }
}
