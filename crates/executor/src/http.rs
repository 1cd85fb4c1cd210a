//! Serving connections with the read limits `axum::serve` leaves out, as the
//! daemon does (`crates/server/src/serve.rs`): at most `max_connections`
//! open at once (past it the listener accepts the next one only once
//! another has closed), and `request_read` to send a request's head,
//! counted from connecting or from the end of the last response on a
//! kept-alive connection; past it the connection is closed. The body has
//! as long again ([`read_body`]). So clients that send half a request, or
//! trickle it, cannot pile up and take every file descriptor.
//!
//! At the cap, kept-alive connections that have answered a request are
//! closed once idle, and answers close theirs (as nginx reuses its idle
//! keep-alive connections when it runs out): a daemon whose pool keeps more idle connections than the
//! cap (its `per_handler_max_in_flight` above `--max-connections`) would
//! otherwise hold every slot with them while its new connections wait in
//! the listen queue, each delivery timing out unanswered.
//!
//! Bodies are read before their signature can be checked, so what they may
//! hold in memory at once is bounded too: [`BodyBudget`].

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulConnection;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tower::ServiceExt;

/// Most bytes a connection buffers; a request head must fit (larger heads
/// get 431).
const CONNECTION_BUFFER: usize = 64 * 1024;

/// How often reaching `--max-connections` is logged, at most.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// Serves `app` on `listener` until `shutdown`, then waits for the open
/// connections to finish their requests.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    request_read: Duration,
    max_connections: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> io::Result<()> {
    let mut listener = listener;
    let max_connections = max_connections.clamp(1, Semaphore::MAX_PERMITS.min(u32::MAX as usize));
    let slots = Arc::new(Semaphore::new(max_connections));
    // Bumped to ask connections to close once idle: by one at the cap,
    // to [`STOP`] at shutdown.
    let (close, _) = watch::channel(0u64);
    // At the cap: every answer closes its connection too.
    let full = Arc::new(AtomicBool::new(false));
    let mut shutdown = std::pin::pin!(shutdown);
    let mut warned: Option<Instant> = None;
    loop {
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => {
                full.store(false, Ordering::SeqCst);
                slot
            }
            Err(_) => {
                full.store(true, Ordering::SeqCst);
                if warned.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
                    warned = Some(Instant::now());
                    tracing::warn!(
                        max_connections,
                        "--max-connections connections are open; new ones wait until one closes"
                    );
                }
                close.send_modify(|n| *n = n.wrapping_add(1) % STOP);
                tokio::select! {
                    slot = slots.clone().acquire_owned() => match slot {
                        Ok(slot) => slot,
                        Err(_) => break,
                    },
                    () = &mut shutdown => break,
                }
            }
        };
        // `accept` retries failures (EMFILE and the like) itself.
        let io = tokio::select! {
            (io, _) = axum::serve::Listener::accept(&mut listener) => io,
            () = &mut shutdown => break,
        };
        let answered = Arc::new(AtomicBool::new(false));
        let service = app
            .clone()
            .map_request(|req: hyper::Request<Incoming>| req.map(Body::new))
            .map_response({
                let (answered, full) = (answered.clone(), full.clone());
                move |mut r: Response| {
                    // Either this sees the cap, or the cap's call to close
                    // sees this answered: no idle connection keeps a slot.
                    answered.store(true, Ordering::SeqCst);
                    if full.load(Ordering::SeqCst) {
                        r.headers_mut().insert(
                            header::CONNECTION,
                            header::HeaderValue::from_static("close"),
                        );
                    }
                    r
                }
            });
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(request_read)
            .max_buf_size(CONNECTION_BUFFER)
            .serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
        tokio::spawn(run_connection(conn, slot, answered, close.subscribe()));
    }
    // Every connection closes once its request is answered (an idle one at
    // once); each gives its slot back when it has.
    close.send_replace(STOP);
    let _all = slots.acquire_many(max_connections as u32).await;
    Ok(())
}

/// What [`serve`] sends its connections to stop serving.
const STOP: u64 = u64::MAX;

/// Serves one connection, holding `slot`; asked through `close`, it closes
/// once idle (at shutdown, or at the cap once it has `answered`).
async fn run_connection<C>(
    conn: C,
    slot: OwnedSemaphorePermit,
    answered: Arc<AtomicBool>,
    mut close: watch::Receiver<u64>,
) where
    C: GracefulConnection<Error = hyper::Error> + Send + 'static,
{
    let _slot = slot;
    let mut conn = std::pin::pin!(conn);
    let mut closing = false;
    loop {
        tokio::select! {
            ended = conn.as_mut() => {
                if let Err(e) = ended {
                    tracing::debug!(error = %e, "connection ended");
                }
                return;
            }
            Ok(()) = close.changed(), if !closing => {
                let stop = *close.borrow_and_update() == STOP;
                if stop || answered.load(Ordering::SeqCst) {
                    conn.as_mut().graceful_shutdown();
                    closing = true;
                }
            }
        }
    }
}

/// The bytes all bodies being read before their signature is checked may
/// take at once. A request reserves its `Content-Length` (or the whole body
/// limit when it sends none) before reading, and gives it back once it is
/// verified or refused.
#[derive(Debug, Clone)]
pub struct BodyBudget {
    bytes: Arc<Semaphore>,
    limit: usize,
}

/// Why a body was not read.
#[derive(Debug, PartialEq, Eq)]
pub enum BodyError {
    /// Larger than the body limit (413).
    TooLarge,
    /// Not all there within the read timeout, or the budget stayed taken
    /// that long (408 / 503).
    Late,
    /// The connection failed while reading it, or a body sent without a
    /// length passed the limit (400).
    Broken,
}

impl BodyBudget {
    /// `total` bytes in all, at most `limit` per body.
    pub fn new(total: usize, limit: usize) -> BodyBudget {
        BodyBudget {
            bytes: Arc::new(Semaphore::new(total.min(Semaphore::MAX_PERMITS))),
            limit,
        }
    }

    /// Reads `body` whole, within `read` and the budget: the permit it
    /// returns holds the body's share until dropped.
    pub async fn read_body(
        &self,
        body: Body,
        content_length: Option<u64>,
        read: Duration,
    ) -> Result<(Bytes, OwnedSemaphorePermit), BodyError> {
        let want = match content_length {
            Some(n) if n > self.limit as u64 => return Err(BodyError::TooLarge),
            Some(n) => n as usize,
            None => self.limit,
        };
        let want = u32::try_from(want.max(1)).map_err(|_| BodyError::TooLarge)?;
        let read_it = async {
            let permit = self
                .bytes
                .clone()
                .acquire_many_owned(want)
                .await
                .map_err(|_| BodyError::Late)?;
            let bytes = axum::body::to_bytes(body, self.limit)
                .await
                .map_err(|_| BodyError::Broken)?;
            Ok((bytes, permit))
        };
        tokio::time::timeout(read, read_it)
            .await
            .map_err(|_| BodyError::Late)?
    }
}
