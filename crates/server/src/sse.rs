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

use std::convert::Infallible;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use actiongate_store::{Action, Event, Store, TypeFilter};
use axum::body::{Body, Bytes};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use futures::Stream;
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::{RecvError, TryRecvError};
use tokio_util::sync::CancellationToken;

/// Events read from the log per query while replaying.
const REPLAY_PAGE: i64 = 500;
/// Most bytes sent as one chunk when several live events are ready.
const COALESCE_BYTES: usize = 64 * 1024;

/// A committed event and its rendered SSE message.
#[derive(Debug)]
pub struct Frame {
    /// The event.
    pub event: Arc<Event>,
    /// `id:`, `event:`, `data:` lines and the blank line.
    pub bytes: Bytes,
}

/// Renders one SSE message for `ev`.
pub fn render(ev: &Event) -> Bytes {
    // Compact JSON never contains a raw newline, so one data line suffices.
    let json = serde_json::to_string(ev).unwrap_or_else(|e| {
        tracing::error!(seq = ev.seq, error = %e, "event does not serialize");
        "{}".to_owned()
    });
    Bytes::from(format!(
        "id: {}\nevent: {}\ndata: {json}\n\n",
        ev.seq, ev.kind
    ))
}

/// Fans committed events out to every open stream, rendered once.
#[derive(Clone)]
pub struct Hub {
    tx: Arc<RwLock<broadcast::Sender<Arc<Frame>>>>,
    capacity: usize,
}

impl Hub {
    /// Starts the task that renders the store's events for streams. Each
    /// stream may fall `capacity` events behind before it is closed.
    pub fn new(store: &Store, capacity: usize, shutdown: CancellationToken) -> Hub {
        let capacity = capacity.max(16);
        let (tx, _) = broadcast::channel(capacity);
        let hub = Hub {
            tx: Arc::new(RwLock::new(tx)),
            capacity,
        };
        tokio::spawn(hub.clone().run(store.subscribe(), shutdown));
        hub
    }

    /// Receives every event rendered from now on.
    pub fn subscribe(&self) -> Option<broadcast::Receiver<Arc<Frame>>> {
        self.tx.read().ok().map(|tx| tx.subscribe())
    }

    async fn run(self, mut rx: broadcast::Receiver<Arc<Event>>, shutdown: CancellationToken) {
        loop {
            let received = tokio::select! {
                r = rx.recv() => r,
                _ = shutdown.cancelled() => break,
            };
            match received {
                Ok(event) => {
                    let frame = Arc::new(Frame {
                        bytes: render(&event),
                        event,
                    });
                    if let Ok(tx) = self.tx.read() {
                        // No receivers is fine: nobody is streaming.
                        let _ = tx.send(frame);
                    }
                }
                Err(RecvError::Lagged(n)) => {
                    // The hub itself missed events: no stream may go on as if
                    // nothing happened. Replacing the sender closes every
                    // stream once it has drained; clients resume from their
                    // last id and the log fills the hole.
                    tracing::warn!(missed = n, "event hub lagged; closing every stream");
                    if let Ok(mut tx) = self.tx.write() {
                        *tx = broadcast::channel(self.capacity).0;
                    }
                }
                Err(RecvError::Closed) => break,
            }
        }
        // Dropping the senders ends every stream.
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

/// The stream of `GET /v1/events`. `rx` must have been subscribed before
/// `start` was worked out.
pub fn log_stream(
    store: Store,
    mut rx: broadcast::Receiver<Arc<Frame>>,
    scope: Scope,
    start: Start,
    timing: Timing,
    shutdown: CancellationToken,
) -> impl Stream<Item = Result<Bytes, Infallible>> {
    async_stream::stream! {
        let _open = OpenGauge::new();
        yield Ok(retry_line(timing.retry));
        if let Some(reset) = &start.reset {
            yield Ok(Bytes::from(format!("event: reset\ndata: {reset}\n\n")));
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
        let mut heartbeat = tokio::time::interval_at(
            tokio::time::Instant::now() + timing.heartbeat,
            timing.heartbeat,
        );
        loop {
            let received = tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                r = rx.recv() => r,
                _ = heartbeat.tick() => {
                    yield Ok(Bytes::from_static(HEARTBEAT));
                    continue;
                }
            };
            let first = match received {
                Ok(frame) => frame,
                Err(RecvError::Lagged(n)) => {
                    tracing::info!(missed = n, "event stream fell behind; closing it so the client resumes");
                    return;
                }
                Err(RecvError::Closed) => return,
            };
            // Send what is ready in one chunk.
            let mut chunk: Vec<u8> = Vec::new();
            let mut next = Some(first);
            while let Some(frame) = next.take() {
                if frame.event.seq > last {
                    last = frame.event.seq;
                    if scope.admits(&frame.event) {
                        chunk.extend_from_slice(&frame.bytes);
                    }
                }
                if chunk.len() >= COALESCE_BYTES {
                    break;
                }
                match rx.try_recv() {
                    Ok(frame) => next = Some(frame),
                    Err(TryRecvError::Empty) => {}
                    Err(TryRecvError::Lagged(_)) | Err(TryRecvError::Closed) => {
                        if !chunk.is_empty() {
                            yield Ok(Bytes::from(chunk));
                        }
                        return;
                    }
                }
            }
            if !chunk.is_empty() {
                heartbeat.reset();
                yield Ok(Bytes::from(chunk));
            }
        }
    }
}

/// Whether `ev` leaves its action settled, so its stream can end.
///
/// [`Action::is_settled`] is the one place that decides. It treats every
/// action as decision-only (settled at anything but pending); once actions
/// run by handlers exist, it must settle those only at
/// completed/failed/denied/expired/cancelled, and this follows.
pub fn settles(ev: &Event) -> bool {
    ev.kind.starts_with("action.")
        && serde_json::from_value::<Action>(ev.data.clone()).is_ok_and(|a| a.is_settled())
}

/// The stream of `GET /v1/actions/{id}/events`: `history` (read after `rx`
/// was subscribed), then live events of the action until one settles it.
pub fn action_stream(
    action_id: String,
    mut rx: broadcast::Receiver<Arc<Frame>>,
    history: Vec<Event>,
    settled: bool,
    timing: Timing,
    shutdown: CancellationToken,
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
        let mut heartbeat = tokio::time::interval_at(
            tokio::time::Instant::now() + timing.heartbeat,
            timing.heartbeat,
        );
        loop {
            let received = tokio::select! {
                biased;
                _ = shutdown.cancelled() => return,
                r = rx.recv() => r,
                _ = heartbeat.tick() => {
                    yield Ok(Bytes::from_static(HEARTBEAT));
                    continue;
                }
            };
            match received {
                Ok(frame) => {
                    let ev = &frame.event;
                    if ev.seq <= last || ev.action_id.as_deref() != Some(action_id.as_str()) {
                        continue;
                    }
                    last = ev.seq;
                    heartbeat.reset();
                    yield Ok(frame.bytes.clone());
                    if settles(ev) {
                        return;
                    }
                }
                Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => return,
            }
        }
    }
}

/// A `text/event-stream` response over `stream`.
pub fn response<S>(stream: S) -> Response
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
    resp
}
