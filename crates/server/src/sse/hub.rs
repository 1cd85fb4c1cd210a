//! The hub: renders each committed event once and hands the rendered
//! batches to every open stream, within a byte budget.
//!
//! Batches travel on a `tokio` broadcast channel, which keeps each one until
//! every receiver has taken it. A stream whose client stops reading is not
//! polled any more, so its receiver would pin everything published until its
//! connection's send timeout cuts it off: event rate times that timeout,
//! which one agent posting large params could make hundreds of MB. The hub
//! therefore counts the rendered bytes alive in batches and, past
//! `events.buffer_bytes`, drops the rendering of the oldest ones still held.
//! A stream that then reaches such a batch ends, as one that fell a whole
//! window behind does, and its client resumes from its last id: the log
//! still has every event.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use actiongate_api::Event;
use actiongate_gate::events::EventLog;
use axum::body::Bytes;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio_util::bytes::BytesMut;
use tokio_util::sync::CancellationToken;

/// Most events in one batch.
const BATCH_EVENTS: usize = 256;
/// A batch is cut once its messages reach this many bytes. A stream hands
/// a whole batch to its connection as one chunk, which a stalled client's
/// connection keeps until its send timeout, outside the budget: each
/// stalled stream pins at most this plus one event.
const BATCH_BYTES: usize = 64 * 1024;

/// How long the hub gathers events before it sends the next batch.
#[derive(Debug, Clone, Copy)]
pub struct Coalesce {
    /// Per open stream: about what one stream's wake-up and socket write
    /// cost, so with few streams events go out almost at once.
    pub per_stream: Duration,
    /// At most this.
    pub max: Duration,
}

/// Renders one SSE message for `ev` onto `out`.
fn render_into(out: &mut BytesMut, ev: &Event) {
    use std::fmt::Write as _;
    // Compact JSON never contains a raw newline, so one data line suffices.
    let json = serde_json::to_string(ev).unwrap_or_else(|e| {
        tracing::error!(seq = ev.seq, error = %e, "event does not serialize");
        "{}".to_owned()
    });
    let _ = write!(out, "id: {}\nevent: {}\ndata: {json}\n\n", ev.seq, ev.kind);
}

/// Renders one SSE message for `ev`.
pub fn render(ev: &Event) -> Bytes {
    let mut out = BytesMut::new();
    render_into(&mut out, ev);
    out.freeze()
}

/// Committed events handed to every stream together, each rendered once.
#[derive(Debug)]
pub struct Batch {
    /// `None` once the hub dropped it to stay within its byte budget.
    rendered: Mutex<Option<Arc<Rendered>>>,
    /// Bytes counted for it in the hub's budget.
    size: usize,
    held: Arc<AtomicUsize>,
}

/// The events of a batch and their messages.
#[derive(Debug)]
pub struct Rendered {
    /// The events, in `seq` order.
    pub events: Vec<Arc<Event>>,
    /// Where each event's message lies in `bytes`.
    spans: Vec<Range<usize>>,
    /// Every event's message, in order: what a stream that takes every
    /// event sends, without copying.
    pub bytes: Bytes,
}

impl Rendered {
    /// The rendered message of the `i`th event.
    pub fn message(&self, i: usize) -> &[u8] {
        &self.bytes[self.spans[i].clone()]
    }

    /// The `seq` of the last event.
    pub fn last_seq(&self) -> i64 {
        self.events.last().map_or(i64::MIN, |e| e.seq)
    }
}

/// The gauge of the rendered bytes alive in batches.
const HELD_GAUGE: &str = "actiongate_sse_buffered_bytes";

impl Batch {
    /// Renders `events`, at least one, until their messages reach
    /// [`BATCH_BYTES`]; what is left of `events` stays for the next batch.
    fn render(events: &mut VecDeque<Arc<Event>>, held: &Arc<AtomicUsize>) -> Batch {
        let mut out = BytesMut::new();
        let mut taken = Vec::new();
        let mut spans = Vec::new();
        while let Some(ev) = events.pop_front() {
            let start = out.len();
            render_into(&mut out, &ev);
            spans.push(start..out.len());
            taken.push(ev);
            if out.len() >= BATCH_BYTES {
                break;
            }
        }
        // The messages, and about as much again for the events they came
        // from.
        let size = out.len() * 2;
        held.fetch_add(size, Ordering::Relaxed);
        metrics::gauge!(HELD_GAUGE).increment(size as f64);
        Batch {
            rendered: Mutex::new(Some(Arc::new(Rendered {
                events: taken,
                spans,
                bytes: out.freeze(),
            }))),
            size,
            held: held.clone(),
        }
    }

    /// The events and their messages; `None` when the hub dropped them to
    /// stay within its budget: the stream must end, its client resume.
    pub fn rendered(&self) -> Option<Arc<Rendered>> {
        self.rendered.lock().ok()?.clone()
    }

    /// Drops the rendering (once) and takes it off the budget.
    fn release(&self) {
        let taken = match self.rendered.lock() {
            Ok(mut r) => r.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if taken.is_some() {
            self.held.fetch_sub(self.size, Ordering::Relaxed);
            metrics::gauge!(HELD_GAUGE).decrement(self.size as f64);
        }
    }
}

impl Drop for Batch {
    fn drop(&mut self) {
        self.release();
    }
}

/// The batches that may still be held, oldest first, and the bytes alive.
struct Budget {
    limit: usize,
    held: Arc<AtomicUsize>,
    order: Mutex<VecDeque<Weak<Batch>>>,
}

impl Budget {
    /// Counts `batch` in; drops the renderings of the oldest batches still
    /// held while more than the limit is.
    fn admit(&self, batch: &Arc<Batch>, most_alive: usize) {
        let Ok(mut order) = self.order.lock() else {
            return;
        };
        order.push_back(Arc::downgrade(batch));
        // Never the batch just sent: streams that keep up must get it.
        while self.held.load(Ordering::Relaxed) > self.limit && order.len() > 1 {
            let Some(oldest) = order.pop_front() else {
                break;
            };
            if let Some(oldest) = oldest.upgrade() {
                tracing::debug!(
                    bytes = oldest.size,
                    "event batch dropped to stay within events.buffer_bytes"
                );
                oldest.release();
            }
        }
        while order.front().is_some_and(|b| b.strong_count() == 0) {
            order.pop_front();
        }
        // Gone batches behind a held one.
        if order.len() > most_alive {
            order.retain(|b| b.strong_count() > 0);
        }
    }
}

/// Fans committed events out to every open stream, rendered once.
#[derive(Clone)]
pub struct Hub {
    tx: Arc<RwLock<broadcast::Sender<Arc<Batch>>>>,
    capacity: usize,
    budget: Arc<Budget>,
}

/// How far streams may fall behind before they are closed.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    /// Batches (at least as many events).
    pub batches: usize,
    /// Rendered bytes held for all streams together.
    pub bytes: usize,
}

impl Hub {
    /// Starts the task that renders the store's events for streams. A
    /// stream may fall a `window` behind before it is closed. While events
    /// keep coming, a batch goes out at most once per gap (see
    /// [`Coalesce`]; zero: one per commit, at once).
    pub fn new(
        store: &EventLog,
        window: Window,
        coalesce: Coalesce,
        shutdown: CancellationToken,
    ) -> Hub {
        let capacity = window.batches.max(16);
        let (tx, _) = broadcast::channel(capacity);
        let hub = Hub {
            tx: Arc::new(RwLock::new(tx)),
            capacity,
            budget: Arc::new(Budget {
                limit: window.bytes,
                held: Arc::default(),
                order: Mutex::default(),
            }),
        };
        tokio::spawn(hub.clone().run(store.subscribe(), coalesce, shutdown));
        hub
    }

    /// Receives every batch sent from now on.
    pub fn subscribe(&self) -> Option<broadcast::Receiver<Arc<Batch>>> {
        self.tx.read().ok().map(|tx| tx.subscribe())
    }

    fn send(&self, events: Vec<Arc<Event>>) {
        let Ok(tx) = self.tx.read() else { return };
        // With nobody streaming, nothing is rendered.
        if events.is_empty() || tx.receiver_count() == 0 {
            return;
        }
        let mut events = VecDeque::from(events);
        while !events.is_empty() {
            let batch = Arc::new(Batch::render(&mut events, &self.budget.held));
            // Alive at most: the channel's window, plus one in flight per
            // stream.
            self.budget
                .admit(&batch, self.capacity + tx.receiver_count());
            let _ = tx.send(batch);
        }
    }

    /// Least time between two batches, for the streams open now.
    fn gap(&self, coalesce: Coalesce) -> Duration {
        let streams = self.tx.read().map_or(0, |tx| tx.receiver_count());
        let streams = u32::try_from(streams).unwrap_or(u32::MAX);
        coalesce
            .max
            .min(coalesce.per_stream.saturating_mul(streams))
    }

    /// Closes every stream once it has drained: clients resume from their
    /// last id and the log fills whatever the hub missed.
    fn restart(&self) {
        if let Ok(mut tx) = self.tx.write() {
            *tx = broadcast::channel(self.capacity).0;
        }
    }

    async fn run(
        self,
        mut rx: broadcast::Receiver<Arc<Event>>,
        coalesce: Coalesce,
        shutdown: CancellationToken,
    ) {
        // When the last batch went out; the next waits until one gap after
        // it, gathering what commits meanwhile.
        let start = tokio::time::Instant::now();
        let mut last_sent = start.checked_sub(coalesce.max).unwrap_or(start);
        let mut batch: Vec<Arc<Event>> = Vec::new();
        'run: loop {
            let flush_at = last_sent + self.gap(coalesce);
            let received = if batch.is_empty() {
                tokio::select! {
                    r = rx.recv() => r,
                    _ = shutdown.cancelled() => break,
                }
            } else {
                tokio::select! {
                    biased;
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep_until(flush_at) => {
                        self.send(std::mem::take(&mut batch));
                        last_sent = tokio::time::Instant::now();
                        continue;
                    }
                    r = rx.recv() => r,
                }
            };
            let mut next = Some(received);
            while let Some(received) = next.take() {
                match received {
                    Ok(event) => batch.push(event),
                    Err(RecvError::Lagged(n)) => {
                        // The hub itself missed events: no stream may go on
                        // as if nothing happened.
                        tracing::warn!(missed = n, "event hub lagged; closing every stream");
                        batch.clear();
                        self.restart();
                        continue 'run;
                    }
                    Err(RecvError::Closed) => break 'run,
                }
                if batch.len() >= BATCH_EVENTS {
                    break;
                }
                // What else is ready (typically the rest of one commit).
                next = match rx.try_recv() {
                    Ok(event) => Some(Ok(event)),
                    Err(TryRecvError::Lagged(n)) => Some(Err(RecvError::Lagged(n))),
                    Err(TryRecvError::Closed) => Some(Err(RecvError::Closed)),
                    Err(TryRecvError::Empty) => None,
                };
            }
            let now = tokio::time::Instant::now();
            if now >= flush_at || batch.len() >= BATCH_EVENTS {
                self.send(std::mem::take(&mut batch));
                last_sent = now;
            }
        }
        // What was gathered still goes out, then dropping the sender ends
        // every stream.
        self.send(batch);
        if let Ok(mut tx) = self.tx.write() {
            *tx = broadcast::channel(1).0;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn event(seq: i64, bytes: usize) -> Arc<Event> {
        let data = actiongate_api::Json::of(&"x".repeat(bytes)).unwrap();
        Arc::new(Event {
            seq,
            id: format!("ev{seq}"),
            kind: "action.created".into(),
            at: chrono::Utc::now(),
            agent: None,
            action_id: None,
            grant_id: None,
            data,
        })
    }

    #[test]
    fn past_the_budget_the_oldest_held_renderings_go_never_the_newest() {
        let budget = Budget {
            limit: 3 * 1024 * 1024,
            held: Arc::default(),
            order: Mutex::default(),
        };
        let mut kept = Vec::new();
        for seq in 0..4 {
            let mut events = VecDeque::from([event(seq, 700 * 1024)]);
            let batch = Arc::new(Batch::render(&mut events, &budget.held));
            budget.admit(&batch, 100);
            kept.push(batch);
        }
        // Each counts about 1.4 MB: two fit.
        let alive: Vec<bool> = kept.iter().map(|b| b.rendered().is_some()).collect();
        assert_eq!(alive, [false, false, true, true]);
        assert!(budget.held.load(Ordering::Relaxed) <= budget.limit);
        // A batch bigger than the budget alone still goes out.
        let mut events = VecDeque::from([event(9, 2 * 1024 * 1024)]);
        let big = Arc::new(Batch::render(&mut events, &budget.held));
        budget.admit(&big, 100);
        assert!(big.rendered().is_some());
        // Dropped batches leave the count.
        drop(kept);
        drop(big);
        assert_eq!(budget.held.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_batch_is_cut_at_its_byte_limit() {
        let held = Arc::default();
        let mut events: VecDeque<_> = (0..5).map(|s| event(s, 20 * 1024)).collect();
        let first = Batch::render(&mut events, &held);
        assert_eq!(first.rendered().unwrap().events.len(), 4);
        let second = Batch::render(&mut events, &held);
        assert_eq!(second.rendered().unwrap().events.len(), 1);
        assert!(events.is_empty());
        // One event larger than the limit is a batch of its own.
        let mut events = VecDeque::from([event(9, 200 * 1024), event(10, 10)]);
        let big = Batch::render(&mut events, &held);
        assert_eq!(big.rendered().unwrap().events.len(), 1);
    }
}
