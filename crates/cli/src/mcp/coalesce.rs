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
/// in the one place there is, replacing an older one that waited there.
///
/// Values are numbered in the order they were read: they reach [`Latest`]
/// from tasks of their own, so one read later may come first, and the one
/// read earlier must not then replace it.
///
/// Whether a send is in flight and what waits are one state under one lock,
/// so [`Latest::idle`] never sees the moment between a sender taking the
/// waiting value and sending it as "nothing in flight, nothing waiting".
#[derive(Debug)]
pub struct Latest<T> {
    state: StdMutex<LatestState<T>>,
}

#[derive(Debug)]
struct LatestState<T> {
    /// A send is in flight (its sender owns the loop in [`Latest::send`]).
    busy: bool,
    /// The value no send has taken yet.
    next: Option<T>,
    /// The number of the newest value taken in, waiting or sent.
    newest: Option<u64>,
}

impl<T> Default for Latest<T> {
    fn default() -> Self {
        Latest {
            state: StdMutex::new(LatestState {
                busy: false,
                next: None,
                newest: None,
            }),
        }
    }
}

impl<T> Latest<T> {
    /// Keeps `value`, read as number `order`, as the latest unless a newer
    /// one came first (which covers it) and, unless a send is in flight
    /// (which will take it up), sends until no value is left waiting.
    pub async fn send<F, Fut>(&self, order: u64, value: T, mut send: F)
    where
        F: FnMut(T) -> Fut,
        Fut: Future<Output = ()>,
    {
        {
            let Ok(mut s) = self.state.lock() else {
                return;
            };
            if s.newest.is_some_and(|n| n > order) {
                return;
            }
            s.newest = Some(order);
            s.next = Some(value);
            if s.busy {
                return;
            }
            s.busy = true;
        }
        // The loop is this caller's until it finds nothing waiting, which
        // it notes in the same step as it lets go of the loop.
        while let Some(v) = self.take_or_let_go() {
            send(v).await;
        }
    }

    /// Whether no send is in flight and no value waits for one.
    pub fn idle(&self) -> bool {
        self.state
            .lock()
            .map_or(true, |s| !s.busy && s.next.is_none())
    }

    /// The waiting value, or none and the loop let go of.
    fn take_or_let_go(&self) -> Option<T> {
        let mut s = self.state.lock().ok()?;
        let v = s.next.take();
        if v.is_none() {
            s.busy = false;
        }
        v
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
                l.send(i as u64, i, |v| {
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
        assert!(l.idle());
    }

    /// `idle` is what a forwarded call's result waits on (see
    /// `super::super::progress`): once it says idle, every value whose
    /// `send` returned has been sent, or a later one has. Each round races
    /// a value handed to a send in flight against a watcher asking `idle`.
    #[test]
    fn idle_means_every_value_handed_over_is_sent() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        for _ in 0..300 {
            rt.block_on(async {
                let l = Arc::new(Latest::<usize>::default());
                // The highest value whose send finished.
                let sent = Arc::new(AtomicUsize::new(0));
                // The highest value whose `send` call returned.
                let handed = Arc::new(AtomicUsize::new(0));
                let stop = Arc::new(AtomicBool::new(false));
                let watcher = std::thread::spawn({
                    let (l, sent, handed, stop) =
                        (l.clone(), sent.clone(), handed.clone(), stop.clone());
                    move || {
                        while !stop.load(SeqCst) {
                            let before = handed.load(SeqCst);
                            if l.idle() {
                                let s = sent.load(SeqCst);
                                assert!(s >= before, "idle with {before} handed over, {s} sent");
                            }
                        }
                    }
                });
                let mut tasks = Vec::new();
                for i in 1..=200 {
                    let (l, sent, handed) = (l.clone(), sent.clone(), handed.clone());
                    tasks.push(tokio::spawn(async move {
                        l.send(i as u64, i, |v| {
                            let sent = sent.clone();
                            async move {
                                tokio::task::yield_now().await;
                                sent.fetch_max(v, SeqCst);
                            }
                        })
                        .await;
                        handed.fetch_max(i, SeqCst);
                    }));
                    tokio::task::yield_now().await;
                }
                for t in tasks {
                    t.await.unwrap();
                }
                stop.store(true, SeqCst);
                watcher.join().unwrap();
            });
        }
    }

    /// Progress 3 handled before progress 2 (each has a task of its own)
    /// while a send is in flight: 3 is what is sent next, and 2 is dropped.
    #[tokio::test]
    async fn a_value_read_earlier_does_not_replace_one_read_later() {
        let l = Arc::new(Latest::<usize>::default());
        let sent = Arc::new(StdMutex::new(Vec::new()));
        let (release, released) = tokio::sync::watch::channel(false);
        let first = tokio::spawn({
            let (l, sent) = (l.clone(), sent.clone());
            async move {
                l.send(1, 1, |v| {
                    let (sent, mut released) = (sent.clone(), released.clone());
                    async move {
                        let _ = released.wait_for(|r| *r).await;
                        sent.lock().unwrap().push(v);
                    }
                })
                .await;
            }
        });
        tokio::task::yield_now().await;
        assert!(!l.idle(), "the first send is in flight");
        let never = |_| async { panic!("a send in flight takes these up") };
        l.send(3, 3, never).await;
        l.send(2, 2, never).await;
        release.send(true).unwrap();
        first.await.unwrap();
        assert_eq!(*sent.lock().unwrap(), [1, 3]);
        assert!(l.idle());
    }
}
