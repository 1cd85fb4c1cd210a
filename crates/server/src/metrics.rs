//! Prometheus metrics: requests and latency by route and status, decisions
//! by result, pending actions, open long-polls.

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

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

/// Middleware recording every request by matched route and status.
pub async fn track(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".to_owned());
    let method = method_label(req.method());
    let start = Instant::now();
    let resp = next.run(req).await;
    let status = resp.status().as_u16().to_string();
    let labels = [
        ("method", metrics::SharedString::const_str(method)),
        ("route", route.into()),
        ("status", status.into()),
    ];
    metrics::counter!("http_requests_total", &labels).increment(1);
    metrics::histogram!("http_request_duration_seconds", &labels)
        .record(start.elapsed().as_secs_f64());
    resp
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
