//! Notifications the upstream may send without end, passed on to the
//! agent at most one at a time: `list_changed` per kind (each says only
//! "list again", so one sent after the last change says all of them), and
//! progress per call (each says how far it got, so the latest says all the
//! earlier ones did). A flood from the upstream becomes at most one send
//! in flight and one value after it, never a queue that grows with the
//! flood.

use std::future::Future;
use std::sync::Mutex as StdMutex;
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

/// A stream of values of which only the latest matters (progress), passed
/// on one at a time: a value that arrives while a send is in flight waits
/// in the one place there is, replacing any that waited there before.
#[derive(Debug)]
pub struct Latest<T> {
    /// A send is in flight (its sender owns the loop below).
    busy: AtomicBool,
    /// The value no send has taken yet.
    next: StdMutex<Option<T>>,
}

impl<T> Default for Latest<T> {
    fn default() -> Self {
        Latest {
            busy: AtomicBool::new(false),
            next: StdMutex::new(None),
        }
    }
}

impl<T> Latest<T> {
    /// Keeps `value` as the latest and, unless a send is in flight (which
    /// will take it up), sends until no value is left waiting.
    pub async fn send<F, Fut>(&self, value: T, mut send: F)
    where
        F: FnMut(T) -> Fut,
        Fut: Future<Output = ()>,
    {
        match self.next.lock() {
            Ok(mut next) => *next = Some(value),
            Err(_) => return,
        }
        loop {
            if self.busy.swap(true, SeqCst) {
                return;
            }
            while let Some(v) = self.take() {
                send(v).await;
            }
            self.busy.store(false, SeqCst);
            // One that came after the last take and before `busy` was
            // cleared found the loop busy and left: take it up.
            if self.next.lock().map_or(true, |n| n.is_none()) {
                return;
            }
        }
    }

    /// Whether no send is in flight and no value waits for one.
    pub fn idle(&self) -> bool {
        !self.busy.load(SeqCst) && self.next.lock().map_or(true, |n| n.is_none())
    }

    fn take(&self) -> Option<T> {
        self.next.lock().ok().and_then(|mut n| n.take())
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_flood_of_values_is_a_few_sends_and_none_is_left_waiting() {
        let l = Arc::new(Latest::<usize>::default());
        let sent = Arc::new(StdMutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..2000 {
            let (l, sent) = (l.clone(), sent.clone());
            tasks.push(tokio::spawn(async move {
                l.send(i, |v| {
                    let sent = sent.clone();
                    async move {
                        sent.lock().unwrap().push(v);
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                })
                .await;
            }));
            // The values arrive in order, as an upstream's do.
            tokio::task::yield_now().await;
        }
        for t in tasks {
            t.await.unwrap();
        }
        let sent = sent.lock().unwrap().clone();
        assert!((1..200).contains(&sent.len()), "{} sends", sent.len());
        // No value is left waiting once the flood is over.
        assert!(l.take().is_none());
    }
}
