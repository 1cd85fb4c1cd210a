//! The connectors' outbound HTTP: one reqwest client that never follows a
//! redirect, every call bounded by a timeout; an answer is sorted into
//! success, worth retrying (connect errors, timeouts, redirects, 408, 429,
//! 5xx) or not (any other refusal).

use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

/// A failed call.
#[derive(Debug, Clone)]
pub struct CallError {
    /// Whether trying again later may work.
    pub retry: bool,
    /// What happened (no secrets: URLs are never included).
    pub message: String,
    /// The HTTP status the API answered with, when it answered.
    pub status: Option<u16>,
}

impl CallError {
    /// A failure not worth retrying.
    pub fn fatal(message: impl Into<String>) -> CallError {
        CallError {
            retry: false,
            message: message.into(),
            status: None,
        }
    }

    /// A failure worth retrying.
    pub fn transient(message: impl Into<String>) -> CallError {
        CallError {
            retry: true,
            message: message.into(),
            status: None,
        }
    }
}

/// The `User-Agent` of the connectors' calls.
pub const USER_AGENT: &str = concat!("actiongate/", env!("CARGO_PKG_VERSION"));

/// What a JSON body is sent as: with its charset, which Slack asks for
/// (it warns `missing_charset` otherwise).
pub const JSON_UTF8: &str = "application/json; charset=utf-8";

/// The HTTP client of all connectors.
#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
    timeout: Duration,
}

impl Http {
    /// A client whose calls take at most `timeout`.
    pub fn new(timeout: Duration) -> anyhow::Result<Http> {
        Http::with_user_agent(timeout, USER_AGENT)
    }

    /// A client whose calls take at most `timeout` and name themselves
    /// `user_agent` (Discord asks for its own form).
    pub fn with_user_agent(timeout: Duration, user_agent: &str) -> anyhow::Result<Http> {
        actiongate_cli::install_tls_provider();
        let client = reqwest::Client::builder()
            // A redirect could carry a bot token somewhere nobody named.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(timeout)
            .user_agent(user_agent)
            .build()
            .map_err(|e| anyhow::anyhow!("cannot build the connectors' HTTP client: {e}"))?;
        Ok(Http { client, timeout })
    }

    /// Sends `body` as JSON with `method` to `url`, with an extra
    /// `authorization` header when given, waiting at most `timeout` (the
    /// client's when `None`); the answer's JSON body.
    pub async fn call(
        &self,
        method: Method,
        url: &str,
        authorization: Option<&str>,
        body: &Value,
        timeout: Option<Duration>,
    ) -> Result<Value, CallError> {
        let bytes = serde_json::to_vec(body)
            .map_err(|_| CallError::fatal("the request body is not JSON"))?;
        let req = self
            .client
            .request(method, url)
            .header(reqwest::header::CONTENT_TYPE, JSON_UTF8)
            .body(bytes);
        self.answer(req, authorization, timeout).await
    }

    /// GETs `url` (no body), with an `authorization` header when given;
    /// the answer's JSON body.
    pub async fn get(&self, url: &str, authorization: Option<&str>) -> Result<Value, CallError> {
        self.answer(self.client.get(url), authorization, None).await
    }

    /// The most the connectors' calls wait.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    async fn answer(
        &self,
        req: reqwest::RequestBuilder,
        authorization: Option<&str>,
        timeout: Option<Duration>,
    ) -> Result<Value, CallError> {
        // The whole exchange, body included, is bounded.
        let mut req = req.timeout(timeout.unwrap_or(self.timeout));
        if let Some(a) = authorization {
            req = req.header("authorization", a);
        }
        let resp = req.send().await.map_err(|e| {
            CallError::transient(if e.is_timeout() {
                "timed out".to_owned()
            } else if e.is_connect() {
                "cannot connect".to_owned()
            } else {
                "request failed".to_owned()
            })
        })?;
        let status = resp.status();
        let bytes = read_bounded(resp).await?;
        if status.is_success() {
            if bytes.is_empty() {
                return Ok(Value::Null);
            }
            return serde_json::from_slice(&bytes)
                .map_err(|_| CallError::fatal(format!("{status} with a body that is not JSON")));
        }
        let code = status.as_u16();
        let mut e = if status.is_redirection() {
            // Never followed (it could carry the token elsewhere); retried
            // like a 5xx, as deliveries to executors and notification
            // webhooks are. The Location is not logged: it may hold a token.
            CallError::transient(format!("{code}: a redirect, not followed"))
        } else {
            let text = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned();
            let message = format!("{code}: {text}");
            if code == 408 || code == 429 || status.is_server_error() {
                CallError::transient(message)
            } else {
                CallError::fatal(message)
            }
        };
        e.status = Some(code);
        Err(e)
    }
}

/// Most bytes of a chat service's answer kept: far more than any answer
/// of theirs holds (a page of updates, a posted message), so one that is
/// larger is a fault, not read on into memory.
pub const MAX_ANSWER: usize = 8 * 1024 * 1024;

/// `resp`'s body, read up to [`MAX_ANSWER`].
async fn read_bounded(mut resp: reqwest::Response) -> Result<Vec<u8>, CallError> {
    if resp.content_length().is_some_and(|n| n > MAX_ANSWER as u64) {
        return Err(CallError::transient("an answer over 8 MiB, not read"));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|_| CallError::transient("answer cut short"))?
    {
        if body.len() + chunk.len() > MAX_ANSWER {
            return Err(CallError::transient("an answer over 8 MiB, not read"));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A server answering every request with `body` (its length said when
    /// `sized`, else chunked), on a port of its own.
    async fn answering(body: Vec<u8>, sized: bool) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let body = body.clone();
                tokio::spawn(async move {
                    let mut head = [0u8; 4096];
                    let _ = s.read(&mut head).await;
                    let framing = if sized {
                        format!("content-length: {}", body.len())
                    } else {
                        "transfer-encoding: chunked".to_owned()
                    };
                    let head = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n{framing}\r\n\r\n"
                    );
                    let _ = s.write_all(head.as_bytes()).await;
                    if sized {
                        let _ = s.write_all(&body).await;
                    } else {
                        for part in body.chunks(64 * 1024) {
                            let size = format!("{:x}\r\n", part.len());
                            let _ = s.write_all(size.as_bytes()).await;
                            let _ = s.write_all(part).await;
                            let _ = s.write_all(b"\r\n").await;
                        }
                        let _ = s.write_all(b"0\r\n\r\n").await;
                    }
                });
            }
        });
        base
    }

    #[tokio::test]
    async fn an_answer_past_the_bound_is_not_read_into_memory() {
        let http = Http::new(Duration::from_secs(20)).unwrap();
        let huge = format!("{{\"ok\":true,\"x\":\"{}\"}}", "x".repeat(MAX_ANSWER));
        for sized in [true, false] {
            let base = answering(huge.clone().into_bytes(), sized).await;
            let e = http.get(&base, None).await.unwrap_err();
            assert!(e.message.contains("over 8 MiB"), "{}", e.message);
        }
        let base = answering(br#"{"ok":true}"#.to_vec(), false).await;
        assert_eq!(http.get(&base, None).await.unwrap()["ok"], true);
    }
}
