//! Serving connections with the read limits `axum::serve` leaves out, as the
//! daemon does (`crates/server/src/serve.rs`): at most `max_connections`
//! open at once (past it the listener accepts the next one only once
//! another has closed), and `request_read` to send a request's head,
//! counted from connecting or from the end of the last response on a
//! kept-alive connection; past it the connection is closed. The body has
//! as long again ([`read_body`]). So clients that send half a request, or
//! trickle it, cannot pile up and take every file descriptor.
//!
//! Bodies are read before their signature can be checked, so what they may
//! hold in memory at once is bounded too: [`BodyBudget`].

use std::future::Future;
use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
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
    let slots = Arc::new(Semaphore::new(max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    let mut warned: Option<Instant> = None;
    loop {
        let slot = match slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                if warned.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
                    warned = Some(Instant::now());
                    tracing::warn!(
                        max_connections,
                        "--max-connections connections are open; new ones wait until one closes"
                    );
                }
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
        let service = app
            .clone()
            .map_request(|req: hyper::Request<Incoming>| req.map(Body::new));
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(request_read)
            .max_buf_size(CONNECTION_BUFFER)
            .serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _slot = slot;
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "connection ended");
            }
        });
    }
    graceful.shutdown().await;
    Ok(())
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
