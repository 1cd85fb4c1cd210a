//! Serving HTTP/1.1 connections: the router on hyper, with the read limits
//! `axum::serve` leaves out. A client has `http.request_read_seconds` to
//! send a request's head, counted from connecting or, on a kept-alive
//! connection, from the end of the last response; past it the connection
//! is closed. It then has as long again for the body; past that the
//! request is answered 408. So connections that send nothing, or trickle
//! a byte at a time, cannot pile up and take every file descriptor. A
//! request waiting for its answer (a long-poll, an event stream) is not
//! reading anything and is not limited here. At `http.max_connections`
//! kept-alive connections that have answered close once idle, and answers
//! close theirs ([`crate::stall::Pressure`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::header;
use axum::response::Response;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulConnection;
use hyper_util::service::TowerToHyperService;
use tokio::sync::watch;
use tokio::time::Sleep;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::error::BODY_LATE;
use crate::stall::{STOP, StallGuardListener};

/// Serves `app` on `listener` until `shutdown`, then waits for the open
/// connections to finish their requests.
pub async fn serve(
    mut listener: StallGuardListener,
    app: Router,
    read: Duration,
    shutdown: CancellationToken,
) {
    let keep_alive = keep_alive_header(read);
    let pressure = listener.pressure();
    loop {
        let io = tokio::select! {
            (io, _) = axum::serve::Listener::accept(&mut listener) => io,
            () = shutdown.cancelled() => break,
        };
        let keep_alive = keep_alive.clone();
        let answered = Arc::new(AtomicBool::new(false));
        let service = app
            .clone()
            .map_request(move |req: hyper::Request<Incoming>| {
                req.map(|inner| {
                    if inner.is_end_stream() {
                        // Nothing to read (a GET): no clock to run.
                        return Body::new(inner);
                    }
                    Body::new(Deadline {
                        inner,
                        late: Box::pin(tokio::time::sleep(read)),
                    })
                })
            })
            .map_response({
                let (answered, pressure) = (answered.clone(), pressure.clone());
                move |mut response: Response| {
                    // Either this sees the bound reached, or the listener's
                    // call to close sees this answered: no idle connection
                    // keeps a place another is waiting for.
                    answered.store(true, Ordering::SeqCst);
                    let headers = response.headers_mut();
                    if pressure.full() {
                        headers.insert(
                            header::CONNECTION,
                            header::HeaderValue::from_static("close"),
                        );
                    } else if let Some(v) = &keep_alive {
                        headers
                            .entry(header::HeaderName::from_static("keep-alive"))
                            .or_insert_with(|| v.clone());
                    }
                    response
                }
            });
        let conn = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(read)
            .max_buf_size(CONNECTION_BUFFER)
            .serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
        tokio::spawn(run_connection(conn, answered, pressure.subscribe()));
    }
    // Every connection closes once its request is answered (an idle one
    // at once); each gives its place back when it has.
    pressure.stop();
    listener.all_closed().await;
}

/// Serves one connection; asked through `close`, it closes once idle (at
/// shutdown, or at `http.max_connections` once it has `answered`).
async fn run_connection<C>(conn: C, answered: Arc<AtomicBool>, mut close: watch::Receiver<u64>)
where
    C: GracefulConnection<Error = hyper::Error> + Send + 'static,
{
    let mut conn = std::pin::pin!(conn);
    let mut closing = false;
    loop {
        tokio::select! {
            ended = conn.as_mut() => {
                if let Err(e) = ended {
                    tracing::trace!(error = %e, "connection ended");
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

/// `Keep-Alive: timeout=N`: how long a kept-alive connection may stay idle
/// before the daemon closes it (`read`, whole seconds, rounded down). A
/// client that honours it (undici, Node's `fetch`) stops reusing the
/// connection before then, instead of sending a request down a connection
/// the daemon is closing and losing it.
fn keep_alive_header(read: Duration) -> Option<header::HeaderValue> {
    header::HeaderValue::from_str(&format!("timeout={}", read.as_secs().max(1))).ok()
}

/// Most bytes a connection buffers: the request head must fit (larger
/// heads get 431), and a response is taken from its body only while less
/// than this waits to be written. hyper's default (about 400 KiB) let each
/// event stream whose client stopped reading keep that much of the events
/// published meanwhile until its send timeout, outside the hub's budget.
const CONNECTION_BUFFER: usize = 64 * 1024;

/// A request body that fails once its time is up.
struct Deadline {
    inner: Incoming,
    late: Pin<Box<Sleep>>,
}

impl HttpBody for Deadline {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(axum::Error::new)));
        }
        match self.late.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(axum::Error::new(BODY_LATE)))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
