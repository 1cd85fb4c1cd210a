//! Outbound HTTP as the gate sees it: one signed POST and its answer. The
//! adapter that owns HTTP implements [`Transport`] (the daemon with an HTTP
//! client that never follows redirects); tests can put anything behind it.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// One POST to send.
#[derive(Debug, Clone)]
pub struct OutboundRequest {
    /// Where to.
    pub url: String,
    /// Headers besides `content-type: application/json`.
    pub headers: Vec<(&'static str, String)>,
    /// The JSON body.
    pub body: Vec<u8>,
    /// How long the whole exchange may take.
    pub timeout: Duration,
    /// Most bytes of the answer's body kept.
    pub max_body: usize,
}

/// The answer to an [`OutboundRequest`], body read to its end.
#[derive(Debug, Clone)]
pub struct OutboundResponse {
    /// The HTTP status.
    pub status: u16,
    /// `Retry-After` in seconds, when given.
    pub retry_after: Option<Duration>,
    /// `Location`, when given (a redirect is never followed).
    pub location: Option<String>,
    /// The body, at most `max_body` bytes of it.
    pub body: Vec<u8>,
    /// The body's whole length, which may exceed what was kept.
    pub body_len: usize,
}

/// Why no complete answer came back.
#[derive(Debug, Clone, thiserror::Error)]
pub enum OutboundError {
    /// No answer within the timeout.
    #[error("timed out: {0}")]
    Timeout(String),
    /// No connection.
    #[error("connection failed: {0}")]
    Connect(String),
    /// The answer's body ended early or could not be read.
    #[error("answer cut short: {0}")]
    Body(String),
    /// Anything else.
    #[error("request failed: {0}")]
    Other(String),
}

/// Sends an [`OutboundRequest`].
pub trait Transport: Send + Sync + 'static {
    /// Sends it and reads the answer's body to its end.
    fn post(
        &self,
        req: OutboundRequest,
    ) -> Pin<Box<dyn Future<Output = Result<OutboundResponse, OutboundError>> + Send + '_>>;
}

/// A transport that sends nothing: for a gate opened by a command that
/// works on the database without running the daemon's background loops.
pub struct Refuse;

impl Transport for Refuse {
    fn post(
        &self,
        req: OutboundRequest,
    ) -> Pin<Box<dyn Future<Output = Result<OutboundResponse, OutboundError>> + Send + '_>> {
        Box::pin(async move {
            Err(OutboundError::Other(format!(
                "not sent to {}: this gate does not send",
                req.url
            )))
        })
    }
}
