//! Server-Sent Events: the hub that renders each committed event once, and
//! the streams that replay the log from a client's last id and then follow
//! it live, with no gap and no duplicate at the seam.
//!
//! A stream subscribes to the hub *before* it reads the log, pages through
//! the log from the client's last id, then follows the live channel,
//! skipping what it already sent (`seq <= last`). Every receiver has a
//! bounded window over one shared ring; a reader that falls a whole window
//! behind is not dropped from silently: its stream ends and the client
//! resumes from its last id. A client that stops reading altogether is cut
//! off by the connection's send timeout (see [`crate::stall`]).
//!
//! The hub hands events to streams in batches: what was committed together,
//! and, while events keep coming, what was committed within one gap of the
//! batch before, a gap that grows with the number of open streams
//! (`events.coalesce_per_stream`, at most `events.coalesce`). A stream then
//! wakes and writes once per batch instead of once per event: with 1,000
//! subscribers and hundreds of events a second, the wake-ups and socket
//! writes, not the events, are the cost. An event after a quiet period goes
//! out at once.

use std::convert::Infallible;
use std::ops::Range;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use actiongate_api::Event;
use actiongate_gate::events::EventLog;
use actiongate_gate::events::TypeFilter;
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use futures::Stream;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio_util::bytes::BytesMut;
use tokio_util::sync::CancellationToken;

use actiongate_gate::KeyGuard;

/// Events read from the log per query while replaying.
const REPLAY_PAGE: i64 = 500;
/// Most bytes sent as one chunk when several live batches are ready.
const COALESCE_BYTES: usize = 64 * 1024;
/// Most events in one batch.
const BATCH_EVENTS: usize = 256;

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
    /// The events, in `seq` order.
    pub events: Vec<Arc<Event>>,
    /// Where each event's message lies in `bytes`.
    spans: Vec<Range<usize>>,
    /// Every event's message, in order: what a stream that takes every
    /// event sends, without copying.
    pub bytes: Bytes,
}

impl Batch {
    fn new(events: Vec<Arc<Event>>) -> Batch {
        let mut out = BytesMut::new();
        let mut spans = Vec::with_capacity(events.len());
        for ev in &events {
            let start = out.len();
            render_into(&mut out, ev);
            spans.push(start..out.len());
        }
        Batch {
            events,
            spans,
            bytes: out.freeze(),
        }
    }

    /// The rendered message of the `i`th event.
    pub fn message(&self, i: usize) -> &[u8] {
        &self.bytes[self.spans[i].clone()]
    }

    /// The `seq` of the last event.
    fn last_seq(&self) -> i64 {
        self.events.last().map_or(i64::MIN, |e| e.seq)
    }
}

/// Fans committed events out to every open stream, rendered once.
#[derive(Clone)]
pub struct Hub {
    tx: Arc<RwLock<broadcast::Sender<Arc<Batch>>>>,
    capacity: usize,
}

impl Hub {
    /// Starts the task that renders the store's events for streams. Each
    /// stream may fall `capacity` batches (at least as many events) behind
    /// before it is closed. While events keep coming, a batch goes out at
    /// most once per gap (see [`Coalesce`]; zero: one per commit, at once).
    pub fn new(
        store: &EventLog,
        capacity: usize,
        coalesce: Coalesce,
        shutdown: CancellationToken,
    ) -> Hub {
        let capacity = capacity.max(16);
        let (tx, _) = broadcast::channel(capacity);
        let hub = Hub {
            tx: Arc::new(RwLock::new(tx)),
            capacity,
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
        let _ = tx.send(Arc::new(Batch::new(events)));
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

/// Which events a stream carries.
#[derive(Debug, Clone)]
pub struct Scope {
    /// Only this agent's events (`None`: all, for operators).
    pub agent: Option<String>,
    /// Only these types.
    pub types: TypeFilter,
}

impl Scope {
    fn admits(&self, ev: &Event) -> bool {
        let agent_ok = match &self.agent {
            None => true,
            Some(a) => ev.agent.as_deref() == Some(a.as_str()),
        };
        agent_ok && self.types.matches(&ev.kind)
    }
}

/// Timing of a stream.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// Idle comment period.
    pub heartbeat: Duration,
    /// The `retry:` hint.
    pub retry: Duration,
}

/// Counts open streams for `/metrics`.
struct OpenGauge;

impl OpenGauge {
    fn new() -> OpenGauge {
        metrics::gauge!("actiongate_sse_streams_open").increment(1.0);
        OpenGauge
    }
}

impl Drop for OpenGauge {
    fn drop(&mut self) {
        metrics::gauge!("actiongate_sse_streams_open").decrement(1.0);
    }
}

fn retry_line(retry: Duration) -> Bytes {
    Bytes::from(format!("retry: {}\n\n", retry.as_millis()))
}

const HEARTBEAT: &[u8] = b": heartbeat\n\n";

/// Where a stream of the whole log starts.
#[derive(Debug, Clone)]
pub struct Start {
    /// Send events after this seq.
    pub after: i64,
    /// When the client's last id is gone (pruned, or unknown to this log):
    /// the `reset` message to send first.
    pub reset: Option<serde_json::Value>,
}

/// The data of a `reset` message: the client's last id (gone for `reason`)
/// and the first seq it will get instead, the one after the retention
/// `anchor`.
pub fn reset_notice(reason: &str, last_event_id: i64, anchor: i64) -> serde_json::Value {
    serde_json::json!({
        "reason": reason,
        "last_event_id": last_event_id,
        "oldest_seq": anchor + 1,
    })
}

fn reset_message(notice: &serde_json::Value) -> Bytes {
    Bytes::from(format!("event: reset\ndata: {notice}\n\n"))
}

/// Adds to `chunk` the messages of `batch` after `last` that `scope`
/// admits, and moves `last` on. When that is the whole batch and `chunk` is
/// empty, returns the batch's bytes instead of copying them.
fn take_batch(batch: &Batch, scope: &Scope, last: &mut i64, chunk: &mut Vec<u8>) -> Option<Bytes> {
    let first_new = batch.events.partition_point(|e| e.seq <= *last);
    if first_new == batch.events.len() {
        return None;
    }
    *last = batch.last_seq();
    let fresh = &batch.events[first_new..];
    if chunk.is_empty() && first_new == 0 && fresh.iter().all(|e| scope.admits(e)) {
        return Some(batch.bytes.clone());
    }
    for (i, ev) in fresh.iter().enumerate() {
        if scope.admits(ev) {
            chunk.extend_from_slice(batch.message(first_new + i));
        }
    }
    None
}

/// The stream of `GET /v1/events`. `rx` must have been subscribed before
/// `start` was worked out.
pub fn log_stream(
    store: EventLog,
    mut rx: broadcast::Receiver<Arc<Batch>>,
    scope: Scope,
    start: Start,
    timing: Timing,
    shutdown: CancellationToken,
    key: KeyGuard,
) -> impl Stream<Item = Result<Bytes, Infallible>> {
    async_stream::stream! {
        let _open = OpenGauge::new();
        yield Ok(retry_line(timing.retry));
        if let Some(reset) = &start.reset {
            yield Ok(reset_message(reset));
        }
        let mut last = start.after;
        // Replay from the log.
        loop {
            if shutdown.is_cancelled() {
                return;
            }
            let page = match store.events_after(last, scope.agent.as_deref(), REPLAY_PAGE).await {
                Ok(page) => page,
                Err(e) => {
                    tracing::warn!(error = %e, "replaying events failed; closing the stream");
                    return;
                }
            };
            // Retention may have pruned past `last` while the stream was
            // replaying (a client that resumes far back and reads slowly):
            // asked after the page was read, the anchor shows any pruning
            // that page could have missed. Then the client is told, as on
            // connecting, and the replay goes on from the oldest event left.
            let anchor = match store.audit_anchor().await {
                Ok(anchor) => anchor.seq,
                Err(e) => {
                    tracing::warn!(error = %e, "replaying events failed; closing the stream");
                    return;
                }
            };
            if anchor > last {
                yield Ok(reset_message(&reset_notice("pruned", last, anchor)));
                last = anchor;
                continue;
            }
            let full = page.len() as i64 >= REPLAY_PAGE;
            let mut chunk = Vec::new();
            for ev in page {
                last = ev.seq;
                if scope.types.matches(&ev.kind) {
                    chunk.extend_from_slice(&render(&ev));
                }
            }
            if !chunk.is_empty() {
                yield Ok(Bytes::from(chunk));
            }
            if !full {
                break;
            }
        }
        // Live.
        let mut idle = Idle::new(timing.heartbeat, key);
        let cancelled = shutdown.cancelled_owned();
        tokio::pin!(cancelled);
        loop {
            let received = tokio::select! {
                biased;
                _ = &mut cancelled => return,
                r = rx.recv() => r,
                wake = idle.wake() => match idle.answer(wake).await {
                    None => return,
                    Some(true) => {
                        yield Ok(Bytes::from_static(HEARTBEAT));
                        continue;
                    }
                    Some(false) => continue,
                }
            };
            let first = match received {
                Ok(batch) => batch,
                Err(RecvError::Lagged(n)) => {
                    tracing::info!(missed = n, "event stream fell behind; closing it so the client resumes");
                    return;
                }
                Err(RecvError::Closed) => return,
            };
            // Send what is ready in one chunk: usually one whole batch, sent
            // as the hub rendered it (`whole`, only while `chunk` is empty).
            let mut chunk: Vec<u8> = Vec::new();
            let mut whole: Option<Bytes> = None;
            let mut next = Some(first);
            let mut end = false;
            while let Some(batch) = next.take() {
                if let Some(earlier) = whole.take() {
                    chunk.extend_from_slice(&earlier);
                }
                whole = take_batch(&batch, &scope, &mut last, &mut chunk);
                if chunk.len() >= COALESCE_BYTES {
                    break;
                }
                match rx.try_recv() {
                    Ok(more) => next = Some(more),
                    Err(TryRecvError::Empty) => {}
                    Err(TryRecvError::Lagged(_)) | Err(TryRecvError::Closed) => end = true,
                }
            }
            if let Some(out) = whole.or_else(|| (!chunk.is_empty()).then(|| Bytes::from(chunk))) {
                idle.sent();
                yield Ok(out);
            }
            if end {
                return;
            }
        }
    }
}

/// What wakes a stream that has no events to send: its heartbeat timer,
/// and revocations of keys (its own may be among them).
struct Idle {
    heartbeat: Heartbeat,
    key: KeyGuard,
}

/// Why [`Idle::wake`] returned.
enum Wake {
    /// A key was revoked through the API; `false` when no more can be.
    Revocation(bool),
    /// The heartbeat timer fired; whether a heartbeat is due.
    Tick(bool),
}

impl Idle {
    fn new(period: Duration, key: KeyGuard) -> Idle {
        Idle {
            heartbeat: Heartbeat::new(period),
            key,
        }
    }

    /// Waits for the timer or a revocation. Cancel-safe, to be raced
    /// against the stream's events; [`Idle::answer`] then runs unraced, so
    /// that no check of the key is dropped halfway.
    async fn wake(&mut self) -> Wake {
        tokio::select! {
            more = self.key.changed() => Wake::Revocation(more),
            due = self.heartbeat.tick() => Wake::Tick(due),
        }
    }

    /// `None` to end the stream (its key is revoked, or cannot be checked
    /// any more); else whether to send a heartbeat. The key is asked about
    /// after every revocation and before every heartbeat, which catches
    /// revocations made with the CLI, behind the daemon's back.
    async fn answer(&mut self, wake: Wake) -> Option<bool> {
        match wake {
            Wake::Revocation(false) => None,
            Wake::Tick(false) => Some(false),
            Wake::Revocation(true) | Wake::Tick(true) => self
                .key
                .active()
                .await
                .then_some(matches!(wake, Wake::Tick(true))),
        }
    }

    /// Something was sent now.
    fn sent(&mut self) {
        self.heartbeat.sent();
    }
}

/// When an idle stream sends its heartbeat comment: one period after the
/// last thing it sent. A message only notes the time; the timer is moved
/// when it fires early, not re-armed for every message.
struct Heartbeat {
    period: Duration,
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
    last_sent: Option<tokio::time::Instant>,
}

impl Heartbeat {
    fn new(period: Duration) -> Heartbeat {
        Heartbeat {
            period,
            sleep: Box::pin(tokio::time::sleep(period)),
            last_sent: None,
        }
    }

    /// Something was sent now.
    fn sent(&mut self) {
        self.last_sent = Some(tokio::time::Instant::now());
    }

    /// Waits for the timer; whether the stream has been idle for a whole
    /// period, so a heartbeat is due (the timer then restarts either way).
    async fn tick(&mut self) -> bool {
        (&mut self.sleep).await;
        let next_due = self.last_sent.take().map(|at| at + self.period);
        match next_due {
            Some(due) if due > self.sleep.deadline() => {
                self.sleep.as_mut().reset(due);
                false
            }
            _ => {
                let next = tokio::time::Instant::now() + self.period;
                self.sleep.as_mut().reset(next);
                true
            }
        }
    }
}

/// Whether `ev` leaves its action settled, so its stream can end.
fn settles(ev: &Event) -> bool {
    ev.settles_its_action() == Some(true)
}

/// The stream of `GET /v1/actions/{id}/events`: `history` (read after `rx`
/// was subscribed), then live events of the action until one settles it.
pub fn action_stream(
    action_id: String,
    mut rx: broadcast::Receiver<Arc<Batch>>,
    history: Vec<Event>,
    settled: bool,
    timing: Timing,
    shutdown: CancellationToken,
    key: KeyGuard,
) -> impl Stream<Item = Result<Bytes, Infallible>> {
    async_stream::stream! {
        let _open = OpenGauge::new();
        yield Ok(retry_line(timing.retry));
        let mut last = 0;
        let mut done = settled;
        let mut chunk = Vec::new();
        for ev in &history {
            last = ev.seq;
            done |= settles(ev);
            chunk.extend_from_slice(&render(ev));
        }
        if !chunk.is_empty() {
            yield Ok(Bytes::from(chunk));
        }
        if done {
            return;
        }
        let mut idle = Idle::new(timing.heartbeat, key);
        let cancelled = shutdown.cancelled_owned();
        tokio::pin!(cancelled);
        loop {
            let received = tokio::select! {
                biased;
                _ = &mut cancelled => return,
                r = rx.recv() => r,
                wake = idle.wake() => match idle.answer(wake).await {
                    None => return,
                    Some(true) => {
                        yield Ok(Bytes::from_static(HEARTBEAT));
                        continue;
                    }
                    Some(false) => continue,
                }
            };
            let batch = match received {
                Ok(batch) => batch,
                Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => return,
            };
            let mut chunk = Vec::new();
            let mut done = false;
            for (i, ev) in batch.events.iter().enumerate() {
                if ev.seq <= last || ev.action_id.as_deref() != Some(action_id.as_str()) {
                    continue;
                }
                last = ev.seq;
                chunk.extend_from_slice(batch.message(i));
                if settles(ev) {
                    done = true;
                    break;
                }
            }
            if !chunk.is_empty() {
                idle.sent();
                yield Ok(Bytes::from(chunk));
            }
            if done {
                return;
            }
        }
    }
}

/// The response header naming the heartbeat period in milliseconds, so a
/// client can tell a dead stream from a quiet one without assuming the
/// default (`events.heartbeat`).
pub const HEARTBEAT_HEADER: &str = "actiongate-heartbeat-ms";

/// A `text/event-stream` response over `stream`, whose idle comments come
/// every `heartbeat`.
pub fn response<S>(stream: S, heartbeat: Duration) -> Response
where
    S: Stream<Item = Result<Bytes, Infallible>> + Send + 'static,
{
    let mut resp = Response::new(Body::from_stream(stream));
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies such as nginx would otherwise buffer the stream.
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    h.insert(
        HEARTBEAT_HEADER,
        HeaderValue::from(heartbeat.as_millis() as u64),
    );
    resp
}
