//! One local fake of the four chat APIs (Telegram Bot API, Slack Web API,
//! Discord HTTP API, WhatsApp Cloud API), told apart by path: it records
//! every call, answers like the real one, queues Telegram updates for
//! `getUpdates`, and fails the next posts, answers slowly or never on
//! demand.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// A call the fake received.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub auth: Option<String>,
    pub body: Value,
    pub at: Instant,
    /// The id the fake answered with; -1 when it failed the call.
    pub answered: i64,
}

#[derive(Default)]
struct Inner {
    calls: Mutex<Vec<Call>>,
    updates: Mutex<Vec<Value>>,
    fail_posts: AtomicUsize,
    slow_ms: AtomicI64,
    hang: AtomicBool,
    ids: AtomicI64,
    /// What `GET /gateway/bot` answers with as the Gateway's URL.
    gateway: Mutex<String>,
}

#[derive(Clone)]
pub struct Fake {
    pub base: String,
    inner: Arc<Inner>,
}

impl Fake {
    pub async fn start() -> Fake {
        let inner = Arc::new(Inner {
            ids: AtomicI64::new(100),
            ..Inner::default()
        });
        let app = Router::new().fallback(answer).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Fake { base, inner }
    }

    /// Queues a Telegram update for the next `getUpdates`.
    pub fn push_update(&self, u: Value) {
        self.inner.updates.lock().unwrap().push(u);
    }

    /// The next `n` posts of a message answer 500.
    pub fn fail_posts(&self, n: usize) {
        self.inner.fail_posts.store(n, Ordering::SeqCst);
    }

    /// Every later call (but `getUpdates`) answers only after `ms`.
    pub fn slow(&self, ms: i64) {
        self.inner.slow_ms.store(ms, Ordering::SeqCst);
    }

    /// Every later call is recorded and never answered (`false`: answered
    /// again).
    pub fn hang(&self, on: bool) {
        self.inner.hang.store(on, Ordering::SeqCst);
    }

    /// The Gateway URL `GET /gateway/bot` names.
    pub fn set_gateway(&self, url: &str) {
        *self.inner.gateway.lock().unwrap() = url.to_owned();
    }

    pub fn calls(&self) -> Vec<Call> {
        self.inner.calls.lock().unwrap().clone()
    }

    /// Calls whose path ends with `suffix`.
    pub fn calls_to(&self, suffix: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.path.ends_with(suffix))
            .collect()
    }

    /// Waits until `pred` holds over the calls ending with `suffix`.
    pub async fn wait_for(
        &self,
        suffix: &str,
        what: &str,
        pred: impl Fn(&[Call]) -> bool,
    ) -> Vec<Call> {
        for _ in 0..400 {
            let calls = self.calls_to(suffix);
            if pred(&calls) {
                return calls;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("timed out waiting for {what}; calls: {:#?}", self.calls());
    }
}

fn ok(v: Value) -> Response {
    axum::Json(v).into_response()
}

async fn answer(
    State(inner): State<Arc<Inner>>,
    method: Method,
    uri: Uri,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_owned();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    if inner.hang.load(Ordering::SeqCst) {
        inner.calls.lock().unwrap().push(Call {
            method: method.to_string(),
            path: path.clone(),
            auth: auth.clone(),
            body: body.clone(),
            at: Instant::now(),
            answered: -1,
        });
        return std::future::pending().await;
    }
    if path.ends_with("/getUpdates") {
        let ups: Vec<Value> = std::mem::take(&mut *inner.updates.lock().unwrap());
        if ups.is_empty() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        return ok(json!({"ok": true, "result": ups}));
    }
    let slow = inner.slow_ms.load(Ordering::SeqCst);
    if slow > 0 {
        tokio::time::sleep(Duration::from_millis(slow as u64)).await;
    }
    let mut call = Call {
        method: method.to_string(),
        path: path.clone(),
        auth,
        body,
        at: Instant::now(),
        answered: -1,
    };
    if path.ends_with("/gateway/bot") {
        call.answered = 0;
        inner.calls.lock().unwrap().push(call);
        let url = inner.gateway.lock().unwrap().clone();
        return ok(json!({"url": url, "shards": 1,
            "session_start_limit": {"total": 1000, "remaining": 999, "reset_after": 14400000, "max_concurrency": 1}}));
    }
    let is_post = path.ends_with("/sendMessage")
        || path.ends_with("/chat.postMessage")
        || (method == Method::POST && path.contains("/channels/"))
        || (path.ends_with("/messages") && path.contains("/PHONE"));
    if is_post
        && inner
            .fail_posts
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    {
        inner.calls.lock().unwrap().push(call);
        return (StatusCode::INTERNAL_SERVER_ERROR, "down").into_response();
    }
    let id = inner.ids.fetch_add(1, Ordering::SeqCst);
    call.answered = id;
    inner.calls.lock().unwrap().push(call);
    if path.ends_with("/sendMessage") {
        ok(json!({"ok": true, "result": {"message_id": id}}))
    } else if path.contains("/bot") {
        ok(json!({"ok": true, "result": true}))
    } else if path.ends_with("/chat.postMessage") {
        ok(json!({"ok": true, "channel": "C1", "ts": format!("1700000000.{id}")}))
    } else if path.contains("/chat.") {
        ok(json!({"ok": true}))
    } else if path.contains("/interactions/") && path.ends_with("/callback") {
        StatusCode::NO_CONTENT.into_response()
    } else if path.contains("/channels/") {
        ok(json!({"id": id.to_string()}))
    } else if path.ends_with("/messages") {
        ok(json!({"messaging_product": "whatsapp", "messages": [{"id": format!("wamid.{id}")}]}))
    } else {
        (StatusCode::NOT_FOUND, "no such method").into_response()
    }
}
