//! Server-Sent Events: the hub that renders each committed event once
//! ([`hub`]), and the streams that replay the log from a client's last id and then follow
//! it live, with no gap and no duplicate at the seam.
//!
//! A stream subscribes to the hub *before* it reads the log, pages through
//! the log from the client's last id, then follows the live channel,
//! skipping what it already sent (`seq <= last`). Every receiver has a
//! bounded window over one shared ring; a reader that falls a whole window
//! behind is not dropped from silently: its stream ends and the client
//! resumes from its last id. A client that stops reading altogether is cut
//! off by the connection's send timeout (see [`crate::stall`]); until then
//! what it has not taken is held within the hub's byte budget.
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
use std::sync::Arc;
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
use tokio_util::sync::CancellationToken;

use actiongate_gate::KeyGuard;

mod hub;

pub use hub::{Batch, Coalesce, Hub, Rendered, Window, render};

/// Most events read from the log per query while replaying.
const REPLAY_PAGE: i64 = 500;
/// Events read by a replay's first query: events can be large (an action's
/// detail and params, hundreds of KiB), so pages start at one event and
/// grow while they stay under [`REPLAY_BYTES`], which bounds what one
/// replaying stream holds: a page, then the chunk rendered from it, which
/// a client that stops reading leaves in hyper's buffer (one chunk: hyper
/// stops polling the stream past its buffer's bound). Sixteen large
/// events made that 10 MiB a stream, and a key may hold hundreds.
const FIRST_REPLAY_PAGE: i64 = 1;
/// About the most bytes of events one replay query should read.
const REPLAY_BYTES: usize = 256 * 1024;
/// Most bytes sent as one chunk when several live batches are ready.
const COALESCE_BYTES: usize = 64 * 1024;

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

/// The gauge of open event streams on `/metrics`.
const STREAMS_OPEN: &str = "actiongate_sse_streams_open";

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

/// The size of the replay's next query (see
/// [`actiongate_gate::events::next_events_page`]).
fn next_page_size(size: i64, bytes: usize) -> i64 {
    actiongate_gate::events::next_events_page(size, bytes, REPLAY_BYTES, REPLAY_PAGE)
}

/// Adds to `chunk` the messages of `batch` after `last` that `scope`
/// admits, and moves `last` on. When that is the whole batch and `chunk` is
/// empty, returns the batch's bytes instead of copying them.
fn take_batch(
    batch: &Rendered,
    scope: &Scope,
    last: &mut i64,
    chunk: &mut Vec<u8>,
) -> Option<Bytes> {
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
        let _open = actiongate_gate::OpenGauge::new(STREAMS_OPEN);
        yield Ok(retry_line(timing.retry));
        if let Some(reset) = &start.reset {
            yield Ok(reset_message(reset));
        }
        let mut last = start.after;
        let mut page_size = FIRST_REPLAY_PAGE;
        // Replay from the log.
        loop {
            if shutdown.is_cancelled() {
                return;
            }
            let page = match store.events_after(last, scope.agent.as_deref(), page_size).await {
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
            let full = page.len() as i64 >= page_size;
            page_size = next_page_size(page_size, page.iter().map(|ev| ev.data.get().len()).sum());
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
            let Some(first) = first.rendered() else {
                tracing::info!("event stream fell behind the hub's byte budget; closing it so the client resumes");
                return;
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
                match rx.try_recv().map(|more| more.rendered()) {
                    Ok(Some(more)) => next = Some(more),
                    Err(TryRecvError::Empty) => {}
                    // Dropped past the budget, fallen a window behind, or the
                    // hub restarted: what is ready goes out, then the end.
                    Ok(None) | Err(TryRecvError::Lagged(_)) | Err(TryRecvError::Closed) => end = true,
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
        let _open = actiongate_gate::OpenGauge::new(STREAMS_OPEN);
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
            let Some(batch) = batch.rendered() else {
                return;
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

/// The header naming the seq a stream of the whole log starts after: a
/// client that loses the stream before any event resumes from it.
pub const RESUME_HEADER: &str = "actiongate-resume-after";

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_pages_grow_while_small_and_shrink_while_large() {
        let mut size = FIRST_REPLAY_PAGE;
        for _ in 0..10 {
            size = next_page_size(size, 1000);
        }
        assert_eq!(size, REPLAY_PAGE);
        for _ in 0..20 {
            size = next_page_size(size, 8 * REPLAY_BYTES);
        }
        assert_eq!(size, 1);
        assert_eq!(next_page_size(64, REPLAY_BYTES / 2), 64);
    }
}
