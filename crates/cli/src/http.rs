//! The daemon's HTTP API as the client commands see it: a small reqwest
//! wrapper that turns problem+json answers and transport failures into
//! [`ClientError`], and long-polls an action until it settles.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use clap::Args;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::Exit;

/// The daemon's address and the key to call it with.
#[derive(Clone, Args)]
pub struct Conn {
    /// Base URL of the daemon.
    #[arg(long, env = "ACTIONGATE_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// API key: an agent key for request, check, hook and outbox; an
    /// operator key for the rest.
    #[arg(long, env = "ACTIONGATE_KEY", hide_env_values = true)]
    pub key: Option<String>,
}

/// Never shows the key.
impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("url", &self.url)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// An error answer of the daemon, read from its problem+json body.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// HTTP status.
    pub status: u16,
    /// Short summary of the kind of problem.
    pub title: String,
    /// What went wrong this time.
    pub detail: String,
    /// Machine-readable code (`validation`, `not-found`, …), if given.
    pub code: Option<String>,
    /// The first invalid field, for validation errors.
    pub field: Option<String>,
    /// Its message.
    pub field_message: Option<String>,
    /// The action's status, for conflicts over its state.
    pub current_status: Option<String>,
}

impl Problem {
    /// Reads a problem from an error response body (or makes one up from the
    /// status when the body is not a problem, e.g. from a proxy).
    pub fn from_body(status: StatusCode, body: &str) -> Problem {
        let v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        let first = v.get("errors").and_then(|e| e.get(0));
        let field_text = |k: &str| {
            first
                .and_then(|f| f.get(k))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let fallback_detail = || {
            let t: String = body.chars().take(200).collect();
            if t.trim().is_empty() {
                "(no details)".to_owned()
            } else {
                t
            }
        };
        Problem {
            status: status.as_u16(),
            title: text("title")
                .unwrap_or_else(|| status.canonical_reason().unwrap_or("HTTP error").to_owned()),
            detail: text("detail").unwrap_or_else(fallback_detail),
            code: text("code"),
            field: field_text("field"),
            field_message: field_text("message"),
            current_status: text("current_status"),
        }
    }
}

/// Why a call to the daemon did not produce the answer asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientError {
    /// No connection, or no answer in time.
    Unreachable(String),
    /// The daemon answered with an error status.
    Api(Box<Problem>),
    /// The daemon answered something that is not the JSON expected.
    BadResponse(String),
    /// The command was given something it cannot use.
    Usage(String),
}

impl ClientError {
    /// The exit code for this error.
    pub fn exit(&self) -> Exit {
        match self {
            ClientError::Unreachable(_) => Exit::Unreachable,
            ClientError::Api(_) | ClientError::BadResponse(_) => Exit::Api,
            ClientError::Usage(_) => Exit::Usage,
        }
    }

    /// Whether trying again later may succeed (transport trouble, 5xx,
    /// 408, 429), as opposed to a request the daemon will never accept.
    pub fn is_transient(&self) -> bool {
        match self {
            ClientError::Unreachable(_) | ClientError::BadResponse(_) => true,
            ClientError::Api(p) => p.status >= 500 || p.status == 408 || p.status == 429,
            ClientError::Usage(_) => false,
        }
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = match self {
            ClientError::Unreachable(m) | ClientError::BadResponse(m) | ClientError::Usage(m) => {
                m.clone()
            }
            ClientError::Api(p) => format!("{}: {} (HTTP {})", p.title, p.detail, p.status),
        };
        // Always one line, and never terminal control characters.
        f.write_str(&super::output::one_line(&text))
    }
}

/// Prints an error on stderr as one line and returns its exit code.
pub fn report(err: &ClientError) -> Exit {
    eprintln!("actiongate: {err}");
    err.exit()
}

/// Renders an error and its causes on one line (reqwest's own message
/// alone says little: "error sending request").
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let m = s.to_string();
        if !text.contains(&m) {
            text.push_str(": ");
            text.push_str(&m);
        }
        source = s.source();
    }
    text
}

/// The longest single long-poll asked of the daemon; longer waits are
/// split into several. The daemon's limit is 60 s by default; a lower
/// configured limit is learnt from its 422 answer.
const WAIT_CHUNK: u64 = 55;

/// A client of one daemon with one key.
pub struct Api {
    base: String,
    key: Option<String>,
    http: reqwest::Client,
    wait_cap: AtomicU64,
    timeout: Duration,
}

/// Never shows the key.
impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("base", &self.base)
            .field("key", &self.key.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl Api {
    /// A client of the daemon `conn` names.
    pub fn new(conn: &Conn) -> Result<Api, ClientError> {
        Self::with_timeouts(conn, Duration::from_secs(5), Duration::from_secs(30))
    }

    /// A client with the given connect and per-request timeouts (a
    /// long-poll gets its wait on top of the request timeout).
    pub fn with_timeouts(
        conn: &Conn,
        connect: Duration,
        request: Duration,
    ) -> Result<Api, ClientError> {
        let base = conn.url.trim_end_matches('/').to_owned();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ClientError::Usage(format!(
                "--url must start with http:// or https://, got '{base}'"
            )));
        }
        crate::install_tls_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(connect)
            // The daemon closes a connection idle for http.request_read_seconds
            // (30 s by default); a pooled one is dropped well before that (5 s,
            // as httpx does), so a long-running follower or proxy does not
            // send on a connection the daemon is closing.
            .pool_idle_timeout(Duration::from_secs(5))
            .user_agent(concat!("actiongate-cli/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| {
                ClientError::Usage(format!("cannot build an HTTP client: {}", chain(&e)))
            })?;
        Ok(Api {
            base,
            key: conn.key.clone().filter(|k| !k.trim().is_empty()),
            http,
            wait_cap: AtomicU64::new(WAIT_CHUNK),
            timeout: request,
        })
    }

    /// The daemon's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The key, if one was given.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The underlying HTTP client (for streams).
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Fails early, with a clear message, when no key was given.
    pub fn require_key(&self) -> Result<(), ClientError> {
        if self.key.is_none() {
            return Err(ClientError::Usage(
                "no API key: pass --key or set ACTIONGATE_KEY".to_owned(),
            ));
        }
        Ok(())
    }

    /// Maps a transport error.
    pub fn unreachable(&self, e: &reqwest::Error) -> ClientError {
        ClientError::Unreachable(format!(
            "cannot reach the daemon at {}: {}",
            self.base,
            chain(e)
        ))
    }

    /// Sends a request; the JSON body of a 2xx answer, with its status.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        extra_wait: Duration,
    ) -> Result<(StatusCode, Value), ClientError> {
        let (status, _, value) = self.call_linking(method, path, body, extra_wait).await?;
        Ok((status, value))
    }

    /// [`Api::call`], and whether the answer links a next page (`Link:
    /// <…>; rel="next"`: a page cut short for its size).
    async fn call_linking(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        extra_wait: Duration,
    ) -> Result<(StatusCode, bool, Value), ClientError> {
        let mut req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .timeout(self.timeout + extra_wait)
            .header(reqwest::header::ACCEPT, "application/json")
            // Decisions record the channel they came through.
            .header("x-actiongate-channel", "cli");
        if let Some(k) = &self.key {
            req = req.bearer_auth(k);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let resp = req.send().await.map_err(|e| self.unreachable(&e))?;
        let status = resp.status();
        let next = resp
            .headers()
            .get_all(reqwest::header::LINK)
            .iter()
            .any(|l| l.to_str().is_ok_and(|l| l.contains("rel=\"next\"")));
        let text = resp.text().await.map_err(|e| self.unreachable(&e))?;
        if !status.is_success() {
            return Err(ClientError::Api(Box::new(Problem::from_body(
                status, &text,
            ))));
        }
        if status == StatusCode::NO_CONTENT {
            return Ok((status, next, Value::Null));
        }
        let value = serde_json::from_str(&text).map_err(|e| {
            ClientError::BadResponse(format!(
                "the daemon's answer to {path} is not JSON ({e}); is {} an actiongate daemon?",
                self.base
            ))
        })?;
        Ok((status, next, value))
    }

    /// GET, expecting JSON.
    pub async fn get(&self, path: &str) -> Result<Value, ClientError> {
        Ok(self.call(Method::GET, path, None, Duration::ZERO).await?.1)
    }

    /// Every item of a cursor-paged list (`path` has a query already),
    /// oldest first: the API lists newest first.
    pub async fn all_pages(&self, path: &str) -> Result<Vec<Value>, ClientError> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = match &cursor {
                Some(c) => {
                    self.get(&format!("{path}&cursor={}", query_value(c)))
                        .await?
                }
                None => self.get(path).await?,
            };
            if let Some(Value::Array(batch)) = page.get("items") {
                items.extend(batch.iter().cloned());
            }
            cursor = page
                .get("next_cursor")
                .and_then(Value::as_str)
                .map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        items.reverse();
        Ok(items)
    }

    /// Every item of a list paged by `after=<last id>` (`path` has a query
    /// already, with `limit={page}`: a page shorter than that is the last,
    /// unless it links a next one, `Link: <…>; rel="next"`),
    /// in the order the API lists them, up to about `most` items.
    pub async fn after_pages(
        &self,
        path: &str,
        page: usize,
        most: usize,
    ) -> Result<Vec<Value>, ClientError> {
        let mut all: Vec<Value> = Vec::new();
        loop {
            let page_path = match all.last().and_then(|x| x["id"].as_str()) {
                Some(last) => format!("{path}&after={}", query_value(last)),
                None => path.to_owned(),
            };
            // A page cut short for its size links the next one.
            let (_, linked, list) = self
                .call_linking(Method::GET, &page_path, None, Duration::ZERO)
                .await?;
            let items = match list {
                Value::Array(items) => items,
                _ => Vec::new(),
            };
            let short = items.is_empty() || (items.len() < page && !linked);
            all.extend(items);
            if short || all.len() >= most {
                return Ok(all);
            }
        }
    }

    /// POST a JSON body, expecting JSON.
    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        Ok(self
            .call(Method::POST, path, Some(body), Duration::ZERO)
            .await?
            .1)
    }

    /// POST a decision the daemon answers as the item stands when its
    /// decider sends it again (approve, deny, reply; a plan's; a grant
    /// request's as asked): sent again after a 502, 503 or 504 or a
    /// failed connection, up to three times, so a decision made whose
    /// answer was lost is not reported as a failure. All of it within
    /// the request timeout: a daemon that hangs is not waited on twice.
    pub async fn post_decision(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        let started = Instant::now();
        let mut pauses = DECISION_RETRY_PAUSES.iter();
        loop {
            match self.post(path, body).await {
                Err(e) if lost_answer(&e) => match pauses.next() {
                    Some(pause) if started.elapsed() + *pause < self.timeout => {
                        tokio::time::sleep(*pause).await;
                    }
                    _ => return Err(e),
                },
                other => return other,
            }
        }
    }

    /// PUT a JSON body, expecting JSON.
    pub async fn put(&self, path: &str, body: &Value) -> Result<Value, ClientError> {
        Ok(self
            .call(Method::PUT, path, Some(body), Duration::ZERO)
            .await?
            .1)
    }

    /// DELETE, expecting JSON or nothing (204).
    pub async fn delete(&self, path: &str) -> Result<Value, ClientError> {
        Ok(self
            .call(Method::DELETE, path, None, Duration::ZERO)
            .await?
            .1)
    }

    /// A call with `?wait=`, retried with a shorter wait when the daemon's
    /// limit is lower than ours (a 422 about `wait` stores nothing).
    async fn call_waiting(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
        wait: Duration,
    ) -> Result<(StatusCode, Value), ClientError> {
        loop {
            let secs = wait.as_secs().min(self.wait_cap.load(Ordering::Relaxed));
            let sep = if path.contains('?') { '&' } else { '?' };
            let full = if secs == 0 {
                path.to_owned()
            } else {
                format!("{path}{sep}wait={secs}")
            };
            match self
                .call(method.clone(), &full, body, Duration::from_secs(secs))
                .await
            {
                Err(ClientError::Api(p))
                    if secs > 0 && p.status == 422 && p.field.as_deref() == Some("wait") =>
                {
                    let cap = max_wait_from(p.field_message.as_deref()).unwrap_or(secs / 2);
                    self.wait_cap.store(cap.min(secs - 1), Ordering::Relaxed);
                }
                other => return other,
            }
        }
    }

    /// `POST /v1/actions`, then long-polls up to `wait` for it to settle.
    /// The action as it stands, and whether this call created it (false:
    /// the idempotency key was seen before).
    pub async fn create_action(
        &self,
        body: &Value,
        wait: Duration,
    ) -> Result<(Value, bool), ClientError> {
        let started = Instant::now();
        let (status, action) = self
            .call_waiting(Method::POST, "/v1/actions", Some(body), wait)
            .await?;
        let created = status == StatusCode::CREATED;
        let left = wait.saturating_sub(started.elapsed());
        let action = self.wait_settled(action, left).await?;
        Ok((action, created))
    }

    /// Long-polls `GET /v1/actions/{id}` until the action settles or `wait`
    /// runs out; the action as it last stood.
    pub async fn wait_settled(
        &self,
        mut action: Value,
        wait: Duration,
    ) -> Result<Value, ClientError> {
        let deadline = Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if is_settled(&action) || left < Duration::from_secs(1) {
                return Ok(action);
            }
            let id = action
                .get("id")
                .and_then(Value::as_str)
                .ok_or_else(|| ClientError::BadResponse("the action has no id".to_owned()))?
                .to_owned();
            action = self
                .call_waiting(
                    Method::GET,
                    &format!("/v1/actions/{}", path_segment(&id)),
                    None,
                    left,
                )
                .await?
                .1;
        }
    }

    /// Best effort: withdraws a pending action (the hook does this when it
    /// stops waiting, so the queue holds no question nobody waits for).
    pub async fn cancel(&self, id: &str) -> Result<Value, ClientError> {
        self.post(
            &format!("/v1/actions/{}/cancel", path_segment(id)),
            &json!({}),
        )
        .await
    }
}

/// The pauses before each sending again of a decision.
const DECISION_RETRY_PAUSES: [Duration; 3] = [
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
];

/// Whether `e` may have lost the answer to a request the daemon made (or
/// says it could not make now): a transport failure or a 502/503/504.
fn lost_answer(e: &ClientError) -> bool {
    match e {
        ClientError::Unreachable(_) => true,
        ClientError::Api(p) => matches!(p.status, 502..=504),
        ClientError::BadResponse(_) | ClientError::Usage(_) => false,
    }
}

/// Reads the limit out of the daemon's "must be 0-N seconds".
fn max_wait_from(message: Option<&str>) -> Option<u64> {
    let m = message?;
    let rest = m.split("0-").nth(1)?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Percent-encodes an id for use as one path segment.
pub fn path_segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Percent-encodes a query value.
pub fn query_value(v: &str) -> String {
    path_segment(v)
}

/// Whether nothing more will happen to the action (see DESIGN.md "Model").
pub fn is_settled(action: &Value) -> bool {
    let status = action.get("status").and_then(Value::as_str).unwrap_or("");
    let handler = action.get("handler").is_some_and(|h| !h.is_null());
    match status {
        "completed" | "failed" | "denied" | "expired" | "cancelled" => true,
        "approved" => !handler,
        _ => false,
    }
}

/// The exit code action `a` stands for: its status, except that an
/// approval of an edited decision-only action is not a go-ahead for what
/// was asked ([`Exit::Edited`]).
pub fn exit_for_action(a: &serde_json::Value) -> Exit {
    let status = a.get("status").and_then(serde_json::Value::as_str);
    let edited = a.get("edited").and_then(serde_json::Value::as_bool) == Some(true);
    match status {
        Some("approved") if edited => Exit::Edited,
        Some(s) => exit_for_status(s),
        None => Exit::Api,
    }
}

/// The exit code an action's status stands for.
pub fn exit_for_status(status: &str) -> Exit {
    match status {
        "approved" | "completed" => Exit::Ok,
        "denied" | "failed" => Exit::Denied,
        "expired" | "cancelled" => Exit::Expired,
        _ => Exit::Pending,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn an_edited_approval_is_not_a_go_ahead() {
        let a = |v: serde_json::Value| exit_for_action(&v) as u8;
        assert_eq!(a(serde_json::json!({"status": "approved"})), 0);
        assert_eq!(
            a(serde_json::json!({"status": "approved", "edited": false})),
            0
        );
        assert_eq!(
            a(serde_json::json!({"status": "approved", "edited": true})),
            7
        );
        assert_eq!(
            a(serde_json::json!({"status": "completed", "edited": true})),
            0
        );
        assert_eq!(
            a(serde_json::json!({"status": "pending", "edited": true})),
            4
        );
        assert_eq!(a(serde_json::json!({"status": "denied"})), 1);
        assert_eq!(a(serde_json::json!({})), 5);
    }

    #[test]
    fn problem_bodies_are_read_and_others_summarised() {
        let p = Problem::from_body(
            StatusCode::UNPROCESSABLE_ENTITY,
            r#"{"type":"urn:actiongate:problem:validation","title":"The request is not valid","status":422,"detail":"wait: must be 0-30 seconds","code":"validation","errors":[{"field":"wait","message":"must be 0-30 seconds"}]}"#,
        );
        assert_eq!(p.title, "The request is not valid");
        assert_eq!(p.field.as_deref(), Some("wait"));
        assert_eq!(max_wait_from(p.field_message.as_deref()), Some(30));
        let p = Problem::from_body(StatusCode::BAD_GATEWAY, "<html>bad\ngateway</html>");
        assert_eq!(p.title, "Bad Gateway");
        assert_eq!(
            ClientError::Api(Box::new(p)).to_string(),
            "Bad Gateway: <html>bad⏎gateway</html> (HTTP 502)"
        );
    }

    #[test]
    fn settled_depends_on_whether_a_handler_runs_it() {
        assert!(is_settled(&json!({"status": "approved"})));
        assert!(!is_settled(&json!({"status": "approved", "handler": "fs"})));
        assert!(is_settled(&json!({"status": "failed", "handler": "fs"})));
        assert!(!is_settled(&json!({"status": "pending"})));
    }

    #[test]
    fn debug_output_never_shows_the_key() {
        let conn = Conn {
            url: "http://127.0.0.1:1".into(),
            key: Some("agk_secret".into()),
        };
        let api = Api::new(&conn).unwrap();
        assert!(!format!("{conn:?} {api:?}").contains("agk_secret"));
    }

    #[test]
    fn ids_are_encoded_as_one_segment() {
        assert_eq!(path_segment("a/b c"), "a%2Fb%20c");
        assert_eq!(path_segment("0193-ab_c.d"), "0193-ab_c.d");
    }
}
