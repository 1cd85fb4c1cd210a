//! A send timeout for every connection: a peer that accepts no bytes for
//! too long is disconnected. And a bound on the connections open at once
//! (`http.max_connections`, see [`crate::fd_limit`]): past it, the listener
//! accepts the next one only once another has closed. Reaching it also
//! asks the kept-alive connections to close once idle ([`Pressure`]), so
//! clients' idle pools cannot hold every place while new connections wait.
//!
//! An event stream whose client stops reading fills the socket buffers and
//! is then never polled again, so it cannot notice on its own that it fell
//! behind. The listener wraps each connection so that a write left pending
//! for longer than the timeout fails; hyper then closes the connection and
//! drops the stream. Memory per stalled client stays bounded by the socket
//! and hyper buffers, and the client resumes from its last event id.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Sleep;

/// A listener whose connections time out writes that make no progress, and
/// of which at most so many are open at once.
pub struct StallGuardListener {
    inner: TcpListener,
    timeout: Duration,
    slots: Arc<Semaphore>,
    max: usize,
    /// When reaching the bound was last logged.
    warned: Option<Instant>,
    pressure: Arc<Pressure>,
}

/// Whether the listener is at its bound, and the call to close idle
/// connections: `serve` closes those that have answered a request, and
/// every answer given while at the bound closes its connection too.
#[derive(Debug)]
pub struct Pressure {
    full: AtomicBool,
    close: watch::Sender<u64>,
}

/// What [`Pressure::stop`] sends its connections: stop serving altogether.
pub const STOP: u64 = u64::MAX;

impl Pressure {
    /// Whether the bound is reached: an answer now closes its connection.
    pub fn full(&self) -> bool {
        self.full.load(Ordering::SeqCst)
    }

    /// Changes when connections that have answered are to close once
    /// idle; [`STOP`] when every connection is.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.close.subscribe()
    }

    /// Every connection closes once its request is answered.
    pub fn stop(&self) {
        self.close.send_replace(STOP);
    }

    fn reached(&self, full: bool) {
        self.full.store(full, Ordering::SeqCst);
        if full {
            self.close.send_modify(|n| *n = n.wrapping_add(1) % STOP);
        }
    }
}

/// How often reaching `http.max_connections` is logged, at most.
const WARN_EVERY: Duration = Duration::from_secs(60);

impl StallGuardListener {
    /// Wraps `inner`; at most `max` connections open at once.
    pub fn new(inner: TcpListener, timeout: Duration, max: usize) -> StallGuardListener {
        StallGuardListener {
            inner,
            timeout,
            slots: Arc::new(Semaphore::new(max.max(1))),
            max,
            warned: None,
            pressure: Arc::new(Pressure {
                full: AtomicBool::new(false),
                close: watch::channel(0).0,
            }),
        }
    }

    /// Its [`Pressure`].
    pub fn pressure(&self) -> Arc<Pressure> {
        self.pressure.clone()
    }

    /// Waits until every connection it accepted has closed.
    pub async fn all_closed(&self) {
        let all = u32::try_from(self.max.max(1)).unwrap_or(u32::MAX);
        let _all = self.slots.acquire_many(all).await;
    }

    /// A place for one more connection, waiting for one to close when all
    /// are taken.
    async fn slot(&mut self) -> Option<OwnedSemaphorePermit> {
        if let Ok(slot) = self.slots.clone().try_acquire_owned() {
            self.pressure.reached(false);
            return Some(slot);
        }
        self.pressure.reached(true);
        metrics::counter!("actiongate_http_connections_waited_total").increment(1);
        if self.warned.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
            self.warned = Some(Instant::now());
            tracing::warn!(
                max = self.max,
                "http.max_connections connections are open; new ones wait until one closes"
            );
        }
        self.slots.clone().acquire_owned().await.ok()
    }
}

impl axum::serve::Listener for StallGuardListener {
    type Io = StallGuard;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let slot = self.slot().await;
        let (io, addr) = axum::serve::Listener::accept(&mut self.inner).await;
        // Small event messages must not wait for the peer's delayed ACK.
        if let Err(e) = io.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        (
            StallGuard {
                inner: io,
                timeout: self.timeout,
                stalled: None,
                _slot: slot,
            },
            addr,
        )
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A connection whose writes fail after making no progress for a while.
pub struct StallGuard {
    inner: TcpStream,
    timeout: Duration,
    /// Armed when a write first returns pending; cleared by any progress.
    stalled: Option<Pin<Box<Sleep>>>,
    /// Its place among `http.max_connections`, given back when it closes.
    _slot: Option<OwnedSemaphorePermit>,
}

impl StallGuard {
    fn check<T>(&mut self, cx: &mut Context<'_>, r: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match r {
            Poll::Ready(v) => {
                self.stalled = None;
                Poll::Ready(v)
            }
            Poll::Pending => {
                let timeout = self.timeout;
                let sleep = self
                    .stalled
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
                match sleep.as_mut().poll(cx) {
                    Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the peer accepted no data within the send timeout",
                    ))),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl AsyncRead for StallGuard {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for StallGuard {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.check(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.check(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.check(cx, r)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
