//! One local fake of the four chat APIs (Telegram Bot API, Slack Web API,
//! Discord HTTP API, WhatsApp Cloud API), told apart by path: it records
//! every call, answers like the real one, queues Telegram updates for
//! `getUpdates`, and fails the next posts, answers slowly or never on
//! demand, or takes a post and cuts the connection before the answer (an
//! answer lost). Like the real ones, Slack finds a message again by its
//! metadata (`conversations.history`), Discord answers a post with a nonce
//! it saw (`enforce_nonce`) with the message made the first time, and
//! Telegram's `getUpdates` answers 409 while a webhook is set.

use std::collections::HashMap;

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// The Slack app's bot (`auth.test`), which its messages carry.
pub const BOT_ID: &str = "B1";
/// The Slack app's bot user.
pub const BOT_USER: &str = "UBOT";

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
    /// The request's `Content-Type`.
    pub content_type: Option<String>,
    /// The request's `User-Agent`.
    pub user_agent: Option<String>,
}

#[derive(Default)]
struct Inner {
    calls: Mutex<Vec<Call>>,
    updates: Mutex<Vec<Value>>,
    /// The body of the last `getUpdates` (not kept among the calls).
    last_poll: Mutex<Value>,
    fail_posts: AtomicUsize,
    slow_ms: AtomicI64,
    hang: AtomicBool,
    ids: AtomicI64,
    /// What `GET /gateway/bot` answers with as the Gateway's URL.
    gateway: Mutex<String>,
    /// The next posts taken (the message made) whose answer is cut off.
    lose_answers: AtomicUsize,
    /// Slack's messages, oldest first: `ts`, metadata and the poster's
    /// `bot_id`.
    slack_messages: Mutex<Vec<(String, Value, &'static str)>>,
    /// A failed Slack post is copied by another app: a message with the
    /// same metadata, posted by another bot.
    foreign_copies: AtomicBool,
    /// Discord's nonces seen (with `enforce_nonce`) and their message ids.
    nonces: Mutex<HashMap<String, i64>>,
    /// A Telegram webhook is set: `getUpdates` answers 409.
    webhook: AtomicBool,
    /// `getUpdates` answers 409 whatever is set (another poller).
    conflict: AtomicBool,
    /// Telegram messages that show buttons now: only those can have their
    /// buttons taken away (Telegram answers 400 "message is not modified"
    /// for any other message of the bot, and for a person's).
    telegram_buttons: Mutex<std::collections::HashSet<i64>>,
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

    /// From now on, another app in the Slack channel posts a message with
    /// the metadata of each post that fails (it knows the item's id).
    pub fn foreign_copies(&self) {
        self.inner.foreign_copies.store(true, Ordering::SeqCst);
    }

    /// The next `n` posts make their message and then lose the answer:
    /// the connection is cut before the body is sent.
    pub fn lose_answers(&self, n: usize) {
        self.inner.lose_answers.store(n, Ordering::SeqCst);
    }

    /// A Telegram webhook is set (`true`) or not, as `setWebhook` and
    /// `deleteWebhook` leave it.
    pub fn set_webhook(&self, on: bool) {
        self.inner.webhook.store(on, Ordering::SeqCst);
    }

    /// `getUpdates` answers 409 whatever is set (`false`: as usual).
    pub fn conflict(&self, on: bool) {
        self.inner.conflict.store(on, Ordering::SeqCst);
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

    /// The body of the last `getUpdates`.
    pub fn last_poll(&self) -> Value {
        self.inner.last_poll.lock().unwrap().clone()
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
        self.wait_within(10, suffix, what, pred).await
    }

    /// [`Fake::wait_for`], for up to `secs` seconds.
    pub async fn wait_within(
        &self,
        secs: u64,
        suffix: &str,
        what: &str,
        pred: impl Fn(&[Call]) -> bool,
    ) -> Vec<Call> {
        for _ in 0..secs * 40 {
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
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let auth = header("authorization");
    let (content_type, user_agent) = (header("content-type"), header("user-agent"));
    if inner.hang.load(Ordering::SeqCst) {
        inner.calls.lock().unwrap().push(Call {
            method: method.to_string(),
            path: path.clone(),
            auth: auth.clone(),
            body: body.clone(),
            at: Instant::now(),
            answered: -1,
            content_type,
            user_agent,
        });
        return std::future::pending().await;
    }
    if path.ends_with("/setWebhook") || path.ends_with("/deleteWebhook") {
        inner
            .webhook
            .store(path.ends_with("/setWebhook"), Ordering::SeqCst);
    }
    if path.ends_with("/getUpdates")
        && (inner.webhook.load(Ordering::SeqCst) || inner.conflict.load(Ordering::SeqCst))
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
        return (
            StatusCode::CONFLICT,
            axum::Json(json!({"ok": false, "error_code": 409,
                "description": "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"})),
        )
            .into_response();
    }
    if path.ends_with("/getUpdates") {
        *inner.last_poll.lock().unwrap() = body.clone();
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
        content_type,
        user_agent,
    };
    if path.ends_with("/conversations.history") {
        call.answered = 0;
        inner.calls.lock().unwrap().push(call);
        let with_metadata = uri
            .query()
            .is_some_and(|q| q.contains("include_all_metadata=true"));
        let messages: Vec<Value> = inner
            .slack_messages
            .lock()
            .unwrap()
            .iter()
            .rev()
            .map(|(ts, metadata, bot)| {
                let user = if *bot == BOT_ID { BOT_USER } else { "UOTHER" };
                let mut m = json!({"type": "message", "ts": ts, "bot_id": bot, "user": user});
                if with_metadata && !metadata.is_null() {
                    m["metadata"] = metadata.clone();
                }
                m
            })
            .collect();
        return ok(json!({"ok": true, "messages": messages, "has_more": false}));
    }
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
        if path.ends_with("/chat.postMessage") && inner.foreign_copies.load(Ordering::SeqCst) {
            let id = inner.ids.fetch_add(1, Ordering::SeqCst);
            inner.slack_messages.lock().unwrap().push((
                format!("1700000000.{id}"),
                call.body["metadata"].clone(),
                "BOTHER",
            ));
        }
        inner.calls.lock().unwrap().push(call);
        return (StatusCode::INTERNAL_SERVER_ERROR, "down").into_response();
    }
    // Discord: a nonce seen before (enforced) answers with its message.
    let nonce = (is_post && call.body["enforce_nonce"] == true)
        .then(|| call.body["nonce"].as_str().map(str::to_owned))
        .flatten();
    let known = nonce
        .as_ref()
        .and_then(|n| inner.nonces.lock().unwrap().get(n).copied());
    let id = known.unwrap_or_else(|| inner.ids.fetch_add(1, Ordering::SeqCst));
    if let Some(n) = nonce {
        inner.nonces.lock().unwrap().insert(n, id);
    }
    call.answered = id;
    let keyboard_empty = |b: &Value| {
        b.pointer("/reply_markup/inline_keyboard")
            .and_then(Value::as_array)
            .is_none_or(|rows| rows.iter().all(|r| r.as_array().is_none_or(Vec::is_empty)))
    };
    if path.ends_with("/sendMessage") && !keyboard_empty(&call.body) {
        inner.telegram_buttons.lock().unwrap().insert(id);
    }
    if path.ends_with("/editMessageText") || path.ends_with("/editMessageReplyMarkup") {
        let target = call.body["message_id"].as_i64().unwrap_or(-1);
        let had = inner.telegram_buttons.lock().unwrap().contains(&target);
        if path.ends_with("/editMessageReplyMarkup") && (!had || !keyboard_empty(&call.body)) {
            inner.calls.lock().unwrap().push(call);
            return (
                StatusCode::BAD_REQUEST,
                axum::Json(json!({"ok": false, "error_code": 400,
                    "description": "Bad Request: message is not modified: specified new message content and reply markup are exactly the same as a current content and reply markup of the message"})),
            )
                .into_response();
        }
        if keyboard_empty(&call.body) {
            inner.telegram_buttons.lock().unwrap().remove(&target);
        }
    }
    if path.ends_with("/chat.postMessage") {
        inner.slack_messages.lock().unwrap().push((
            format!("1700000000.{id}"),
            call.body["metadata"].clone(),
            BOT_ID,
        ));
    }
    inner.calls.lock().unwrap().push(call);
    if is_post
        && inner
            .lose_answers
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    {
        // The message is made; the connection is cut before the answer.
        let cut = futures::stream::once(async {
            Err::<Bytes, std::io::Error>(std::io::Error::other("connection cut"))
        });
        return (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            axum::body::Body::from_stream(cut),
        )
            .into_response();
    }
    if path.ends_with("/sendMessage") {
        ok(json!({"ok": true, "result": {"message_id": id}}))
    } else if path.contains("/bot") {
        ok(json!({"ok": true, "result": true}))
    } else if path.ends_with("/chat.postMessage") {
        ok(json!({"ok": true, "channel": "C1", "ts": format!("1700000000.{id}")}))
    } else if path.ends_with("/auth.test") {
        ok(json!({"ok": true, "user_id": BOT_USER, "bot_id": BOT_ID, "team_id": "T1"}))
    } else if path.contains("/chat.") {
        ok(json!({"ok": true}))
    } else if path.contains("/interactions/") && path.ends_with("/callback") {
        StatusCode::NO_CONTENT.into_response()
    } else if path.ends_with("/users/@me/channels") {
        // Discord opens (or finds) the DM channel with a user.
        ok(json!({"id": format!("dm{id}"), "type": 1}))
    } else if path.contains("/channels/") {
        ok(json!({"id": id.to_string()}))
    } else if path.ends_with("/messages") {
        ok(json!({"messaging_product": "whatsapp", "messages": [{"id": format!("wamid.{id}")}]}))
    } else {
        (StatusCode::NOT_FOUND, "no such method").into_response()
    }
}
