//! A tool call of the handshake era whose client went away is withdrawn.
//!
//! rmcp keeps a call's event stream after its client drops the connection,
//! so the client can resume it with `Last-Event-ID`, and the progress the
//! call sends keeps the session alive: without this layer the call, and
//! the pending item a human is asked about, would wait for its deadline.
//! Here each `tools/call` answered with an event stream is watched: when
//! the client drops the stream before its end, the call is orphaned. A
//! client that resumes a stream of that session (before or after the
//! daemon notices the drop, which may take until the next write) is back:
//! the session's orphans wait until its last resumed stream ends, and are
//! orphaned again then. An orphan still orphaned `http.mcp_resume_seconds`
//! later is cancelled, as if the client had sent `notifications/cancelled`
//! for it (which withdraws its pending item); cancelling a call that
//! finished meanwhile does nothing.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::Stream;
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::streamable_http_server::SessionManager;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use serde_json::{Value, json};

/// The header naming a session of the handshake era.
const SESSION_HEADER: &str = "mcp-session-id";

/// The calls whose streams were dropped, by session.
#[derive(Clone)]
pub struct Orphans {
    inner: Arc<Inner>,
}

struct Inner {
    manager: Arc<LocalSessionManager>,
    sessions: Mutex<HashMap<String, Watch>>,
    next: AtomicU64,
    grace: Duration,
    body_limit: usize,
}

/// One session's dropped calls.
#[derive(Default)]
struct Watch {
    /// Resumed streams open now.
    resumers: usize,
    /// Calls dropped while or before a stream was resumed: the client is
    /// back, so they wait for the last resumed stream to end.
    held: Vec<Value>,
    /// Calls dropped with no stream resumed, each with its token: the
    /// ones still here after the grace period are cancelled.
    orphans: Vec<(Value, u64)>,
}

impl Orphans {
    /// Orphans of the sessions `manager` holds, cancelled after `grace`.
    pub fn new(manager: Arc<LocalSessionManager>, grace: Duration, body_limit: usize) -> Orphans {
        Orphans {
            inner: Arc::new(Inner {
                manager,
                sessions: Mutex::default(),
                next: AtomicU64::new(0),
                grace,
                body_limit,
            }),
        }
    }

    /// `calls` of `session` lost their streams: held while a stream of the
    /// session is resumed, else cancelled unless one is within the grace
    /// period.
    fn orphan(&self, session: String, calls: Vec<Value>) {
        if calls.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let token = self.inner.next.fetch_add(1, Ordering::Relaxed);
        {
            let Ok(mut sessions) = self.inner.sessions.lock() else {
                return;
            };
            let watch = sessions.entry(session.clone()).or_default();
            if watch.resumers > 0 {
                watch.held.extend(calls);
                return;
            }
            watch
                .orphans
                .extend(calls.into_iter().map(|id| (id, token)));
        }
        let this = self.clone();
        runtime.spawn(async move {
            tokio::time::sleep(this.inner.grace).await;
            let due: Vec<Value> = {
                let Ok(mut sessions) = this.inner.sessions.lock() else {
                    return;
                };
                let Some(watch) = sessions.get_mut(&session) else {
                    return;
                };
                let (due, kept): (Vec<_>, Vec<_>) =
                    watch.orphans.drain(..).partition(|(_, t)| *t == token);
                watch.orphans = kept;
                if watch.resumers == 0 && watch.held.is_empty() && watch.orphans.is_empty() {
                    sessions.remove(&session);
                }
                due.into_iter().map(|(id, _)| id).collect()
            };
            for id in due {
                this.cancel(&session, id).await;
            }
        });
    }

    /// A stream of `session` was resumed: its client is back, and the
    /// session's orphans are held until the last resumed stream ends.
    fn resumed(&self, session: &str) {
        if let Ok(mut sessions) = self.inner.sessions.lock() {
            let watch = sessions.entry(session.to_owned()).or_default();
            watch.resumers += 1;
            let adopted: Vec<Value> = watch.orphans.drain(..).map(|(id, _)| id).collect();
            watch.held.extend(adopted);
        }
    }

    /// A resumed stream of `session` ended; with it the last, the calls
    /// held are orphaned again (those that finished meanwhile are cancelled
    /// to no effect).
    fn resume_ended(&self, session: String) {
        let held = match self.inner.sessions.lock() {
            Ok(mut sessions) => {
                let Some(watch) = sessions.get_mut(&session) else {
                    return;
                };
                watch.resumers = watch.resumers.saturating_sub(1);
                if watch.resumers > 0 {
                    return;
                }
                let held = std::mem::take(&mut watch.held);
                if watch.orphans.is_empty() {
                    sessions.remove(&session);
                }
                held
            }
            Err(_) => return,
        };
        self.orphan(session, held);
    }

    /// Tells the session its client cancelled call `id`.
    async fn cancel(&self, session: &str, id: Value) {
        let message = json!({
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": id, "reason": "the client went away"},
        });
        let Ok(message) = serde_json::from_value::<ClientJsonRpcMessage>(message) else {
            return;
        };
        let session: rmcp::transport::common::server_side_http::SessionId = Arc::from(session);
        if let Err(e) = self.inner.manager.accept_message(&session, message).await {
            tracing::debug!(error = %e, "cancelling a dropped MCP call found no session");
        }
    }
}

/// The id of a `tools/call` request in `body`, if it is one.
fn tool_call_id(body: &[u8]) -> Option<Value> {
    // Most requests are not calls: no parse for them.
    if !body.windows(10).any(|w| w == b"tools/call") {
        return None;
    }
    let v: Value = serde_json::from_slice(body).ok()?;
    (v.get("method")? == "tools/call")
        .then(|| v.get("id").cloned())
        .flatten()
}

/// Watches the streams of calls (POST) and of resumptions (GET with
/// `Last-Event-ID`) in sessions of the handshake era.
pub async fn watch(State(orphans): State<Orphans>, request: Request, next: Next) -> Response {
    let Some(session) = request
        .headers()
        .get(SESSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
    else {
        return next.run(request).await;
    };
    let (kind, request) = match *request.method() {
        Method::POST => {
            let (parts, body) = request.into_parts();
            let bytes = match axum::body::to_bytes(body, orphans.inner.body_limit).await {
                Ok(b) => b,
                Err(_) => {
                    return crate::error::ApiError::refusal(
                        axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                        "the request body is larger than http.body_limit_bytes",
                    )
                    .into_response();
                }
            };
            let Some(call) = tool_call_id(&bytes) else {
                return next
                    .run(Request::from_parts(parts, Body::from(bytes)))
                    .await;
            };
            (
                Kind::Call(vec![call]),
                Request::from_parts(parts, Body::from(bytes)),
            )
        }
        Method::GET if request.headers().contains_key("last-event-id") => {
            orphans.resumed(&session);
            (Kind::Resume, request)
        }
        _ => return next.run(request).await,
    };
    let response = next.run(request).await;
    let streams = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|ct| ct.starts_with("text/event-stream"));
    let mut guard = Guard {
        orphans,
        session,
        kind,
    };
    if !(response.status().is_success() && streams) {
        // Nothing to watch: a call answered at once, or a resumption
        // refused (its guard, dropped here, counts it ended).
        if let Kind::Call(calls) = &mut guard.kind {
            calls.clear();
        }
        return response;
    }
    let (parts, body) = response.into_parts();
    let watched = Watched {
        inner: body.into_data_stream(),
        guard: Some(guard),
    };
    Response::from_parts(parts, Body::from_stream(watched))
}

/// What a watched stream is.
enum Kind {
    /// A call's own stream: its call is orphaned when the stream is
    /// dropped before its end.
    Call(Vec<Value>),
    /// A resumed stream: its end, however it comes, is counted.
    Resume,
}

/// Reports its stream's end when dropped: a call's stream dropped armed
/// (before its end) orphans its call.
struct Guard {
    orphans: Orphans,
    session: String,
    kind: Kind,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let session = std::mem::take(&mut self.session);
        match &mut self.kind {
            Kind::Call(calls) => self.orphans.orphan(session, std::mem::take(calls)),
            Kind::Resume => self.orphans.resume_ended(session),
        }
    }
}

/// A response stream that disarms a call's guard once it ends.
struct Watched {
    inner: axum::body::BodyDataStream,
    guard: Option<Guard>,
}

impl Stream for Watched {
    type Item = Result<Bytes, axum::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let next = Pin::new(&mut self.inner).poll_next(cx);
        if let Poll::Ready(None) = next
            && let Some(mut guard) = self.guard.take()
            && let Kind::Call(calls) = &mut guard.kind
        {
            calls.clear();
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_tool_call_with_an_id_is_watched() {
        let call = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"}}"#;
        assert_eq!(tool_call_id(call), Some(json!(7)));
        let named = br#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{}}"#;
        assert_eq!(tool_call_id(named), Some(json!("a")));
        let list = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;
        assert_eq!(tool_call_id(list), None);
        let quoted = br#"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"tools/call"}}"#;
        assert_eq!(tool_call_id(quoted), None);
        assert_eq!(tool_call_id(b"tools/call"), None);
    }
}
