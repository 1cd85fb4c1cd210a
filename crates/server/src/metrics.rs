//! Prometheus metrics: requests and latency by route and status, decisions
//! by result, pending actions, open long-polls.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{OnceLock, RwLock};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::response::Response;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tower::{Layer, Service};

/// The process-wide recorder; installed once, shared by every server a
/// process starts (tests start several, possibly on several threads at once).
static HANDLE: OnceLock<Result<PrometheusHandle, String>> = OnceLock::new();

/// Access to the Prometheus recorder.
#[derive(Clone)]
pub struct Metrics {
    handle: PrometheusHandle,
}

impl Metrics {
    /// Installs the global recorder on first use; racing callers wait for
    /// the one that installs it.
    pub fn install() -> anyhow::Result<Metrics> {
        let installed = HANDLE.get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    metrics_exporter_prometheus::Matcher::Full(
                        "http_request_duration_seconds".to_owned(),
                    ),
                    &[
                        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
                        30.0, 60.0,
                    ],
                )
                .map_err(|e| e.to_string())?
                .build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder)
                .map_err(|_| "a foreign metrics recorder is installed".to_owned())?;
            Ok(handle)
        });
        match installed {
            Ok(handle) => Ok(Metrics {
                handle: handle.clone(),
            }),
            Err(e) => Err(anyhow::anyhow!("{e}")),
        }
    }

    /// Renders the text exposition format.
    pub fn render(&self) -> String {
        self.handle.render()
    }
}

/// The layer recording every request by matched route and status, in
/// `http_requests_total` and `http_request_duration_seconds`.
#[derive(Clone, Copy, Debug)]
pub struct Track;

impl<S> Layer<S> for Track {
    type Service = Tracked<S>;

    fn layer(&self, inner: S) -> Tracked<S> {
        Tracked { inner }
    }
}

/// A service whose answers [`Track`] records.
#[derive(Clone, Debug)]
pub struct Tracked<S> {
    inner: S,
}

impl<S> Service<Request> for Tracked<S>
where
    S: Service<Request, Response = Response>,
{
    type Response = Response;
    type Error = S::Error;
    type Future = TrackedFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        let route = req.extensions().get::<MatchedPath>().cloned();
        let method = method_label(req.method());
        TrackedFuture {
            inner: self.inner.call(req),
            route,
            method,
            start: Instant::now(),
        }
    }
}

pin_project_lite::pin_project! {
    /// The answer of a [`Tracked`] service, recorded when it is ready.
    pub struct TrackedFuture<F> {
        #[pin]
        inner: F,
        route: Option<MatchedPath>,
        method: &'static str,
        start: Instant,
    }
}

impl<F, E> Future for TrackedFuture<F>
where
    F: Future<Output = Result<Response, E>>,
{
    type Output = Result<Response, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let answer = std::task::ready!(this.inner.poll(cx));
        if let Ok(resp) = &answer {
            let route = this.route.as_ref().map_or("unmatched", |p| p.as_str());
            record(
                this.method,
                route,
                resp.status().as_u16(),
                this.start.elapsed().as_secs_f64(),
            );
        }
        Poll::Ready(answer)
    }
}

/// The counter and histogram of one method, route and status.
struct Series {
    requests: metrics::Counter,
    duration: metrics::Histogram,
}

impl Series {
    fn record(&self, seconds: f64) {
        self.requests.increment(1);
        self.duration.record(seconds);
    }
}

/// The series of each method and status, by route: looked up once each,
/// not built from their labels on every request. As bounded as the
/// recorder's own: routes are the router's patterns (or `unmatched`),
/// methods are [`method_label`]'s.
type SeriesByRoute = HashMap<(&'static str, u16), HashMap<Box<str>, Series>>;

static SERIES: OnceLock<RwLock<SeriesByRoute>> = OnceLock::new();

fn record(method: &'static str, route: &str, status: u16, seconds: f64) {
    let known = SERIES.get_or_init(Default::default);
    if let Some(s) = known
        .read()
        .unwrap_or_else(|e| e.into_inner())
        .get(&(method, status))
        .and_then(|routes| routes.get(route))
    {
        return s.record(seconds);
    }
    let labels = [
        ("method", metrics::SharedString::const_str(method)),
        ("route", route.to_owned().into()),
        ("status", status.to_string().into()),
    ];
    let s = Series {
        requests: metrics::counter!("http_requests_total", &labels),
        duration: metrics::histogram!("http_request_duration_seconds", &labels),
    };
    s.record(seconds);
    known
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .entry((method, status))
        .or_default()
        .insert(route.into(), s);
}

/// The method as a label: the standard ones by name, any other as `other`,
/// so that a client inventing methods cannot add series without end.
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}
