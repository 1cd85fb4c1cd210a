//! Outbound HTTP for the gate ([`actiongate_gate::Transport`]): one
//! reqwest client per use that never follows a redirect (a 3xx comes back
//! as it is, with its `Location`), reads the answer's body to its end, and
//! reports a body that ends early or cannot be read as an error, never as
//! an answer; and connects only to addresses `outbound.allowed_networks`
//! allows (checked on the addresses a name resolves to at each connection,
//! so a name that turns private later is refused too).

use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use actiongate_gate::outbound::OutboundPolicy;
use actiongate_gate::{OutboundError, OutboundRequest, OutboundResponse, Transport};
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// A [`Transport`] over reqwest.
pub struct HttpTransport {
    client: reqwest::Client,
    /// Keeps no connection: a send again goes on a new one, not on another
    /// kept-alive connection the receiver may be closing too.
    fresh: reqwest::Client,
    policy: Arc<OutboundPolicy>,
}

/// Resolves names with the system resolver and keeps only the addresses
/// the policy allows; none left is an error, so nothing is sent.
struct Guarded(Arc<OutboundPolicy>);

impl Resolve for Guarded {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.0.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            if !policy.allows_name(&host) {
                return Err(format!("host '{host}' is not in outbound.allowed_hosts").into());
            }
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let allowed: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|a| policy.allows_ip(a.ip()))
                .collect();
            if allowed.is_empty() {
                let ips: Vec<String> = found.iter().map(|a| a.ip().to_string()).collect();
                return Err(format!(
                    "'{host}' resolves to {}, not in outbound.allowed_networks",
                    ips.join(", ")
                )
                .into());
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

impl HttpTransport {
    /// A transport keeping up to `idle_per_host` idle connections per host;
    /// `connect_timeout` bounds connecting when set; it connects only where
    /// `policy` allows.
    pub fn new(
        idle_per_host: usize,
        connect_timeout: Option<Duration>,
        policy: OutboundPolicy,
    ) -> anyhow::Result<HttpTransport> {
        actiongate_cli::install_tls_provider();
        let policy = Arc::new(policy);
        let build = |idle: usize| {
            let mut builder = reqwest::Client::builder()
                // A redirect could send a signed delivery, or fetch a
                // result, somewhere nobody named: never followed.
                .redirect(reqwest::redirect::Policy::none())
                // Direct, whatever HTTP_PROXY says: through a proxy the
                // guarded resolver would see the proxy's address, never
                // the target's.
                .no_proxy()
                .dns_resolver(Arc::new(Guarded(policy.clone())))
                .pool_max_idle_per_host(idle)
                .user_agent(concat!("actiongate/", env!("CARGO_PKG_VERSION")));
            if let Some(t) = connect_timeout {
                builder = builder.connect_timeout(t);
            }
            builder
                .build()
                .map_err(|e| anyhow::anyhow!("cannot build an HTTP client: {e}"))
        };
        Ok(HttpTransport {
            client: build(idle_per_host)?,
            fresh: build(0)?,
            policy,
        })
    }

    async fn send(&self, req: OutboundRequest) -> Result<OutboundResponse, OutboundError> {
        // The URL as registration checks it (it may predate the settings);
        // an address in it is not resolved, so this is its only check.
        if let Err(why) = self.policy.check_url(&req.url) {
            return Err(OutboundError::Connect(format!("{why}; not sent")));
        }
        let started = Instant::now();
        let payload = axum::body::Bytes::from(req.body);
        let mut resends = 0;
        let mut resp = loop {
            let client = if resends == 0 {
                &self.client
            } else {
                &self.fresh
            };
            let mut builder = client
                .post(&req.url)
                .timeout(req.timeout.saturating_sub(started.elapsed()))
                .header("content-type", "application/json");
            for (name, value) in &req.headers {
                builder = builder.header(*name, value);
            }
            match builder.body(payload.clone()).send().await {
                Ok(resp) => break resp,
                // A kept-alive connection the receiver closed as this went
                // out (at its connection cap, or its idle timeout): no
                // answer came, and receivers deduplicate by webhook-id, so
                // it goes again once, on a new connection, as browsers
                // resend on a reused connection that closes unanswered.
                Err(e)
                    if resends < MOST_RESENDS
                        && closed_unanswered(&e)
                        && started.elapsed() < req.timeout / 2 =>
                {
                    resends += 1;
                    tracing::debug!(url = %req.url, error = %describe(&e), "the connection closed unanswered; sent again");
                }
                Err(e) => {
                    let text = describe(&e);
                    return Err(if e.is_timeout() {
                        OutboundError::Timeout(text)
                    } else if e.is_connect() {
                        OutboundError::Connect(text)
                    } else {
                        OutboundError::Other(text)
                    });
                }
            }
        };
        let status = resp.status().as_u16();
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let retry_after = header("retry-after")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let location = header("location");
        let mut body = Vec::new();
        let mut body_len = 0usize;
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    body_len += chunk.len();
                    if body.len() < req.max_body {
                        let take = (req.max_body - body.len()).min(chunk.len());
                        body.extend_from_slice(&chunk[..take]);
                    }
                }
                Ok(None) => break,
                // Cut short (fewer bytes than its length said, a reset, a
                // timeout while reading): not an answer.
                Err(e) => {
                    let text = describe(&e);
                    return Err(if e.is_timeout() {
                        OutboundError::Timeout(format!("reading the answer: {text}"))
                    } else {
                        OutboundError::Body(text)
                    });
                }
            }
        }
        Ok(OutboundResponse {
            status,
            retry_after,
            location,
            body,
            body_len,
        })
    }
}

impl Transport for HttpTransport {
    fn post(
        &self,
        req: OutboundRequest,
    ) -> Pin<Box<dyn Future<Output = Result<OutboundResponse, OutboundError>> + Send + '_>> {
        Box::pin(self.send(req))
    }
}

/// Sends of one request again after its connection closed unanswered.
const MOST_RESENDS: u32 = 1;

/// Whether `e` is a connection that closed (or was reset) before any of
/// the answer arrived.
fn closed_unanswered(e: &reqwest::Error) -> bool {
    if e.is_timeout() || e.is_connect() {
        return false;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(h) = s.downcast_ref::<hyper::Error>()
            && h.is_incomplete_message()
        {
            return true;
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            )
        {
            return true;
        }
        source = s.source();
    }
    false
}

/// The error and its causes on one line (reqwest's own text omits them).
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
