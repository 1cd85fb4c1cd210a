//! Telegram (Bot API): `sendMessage` with an inline keyboard,
//! `editMessageText` on the outcome, `answerCallbackQuery` to a tap.
//! Updates arrive by `getUpdates` long polling (the offset is kept in the
//! database, so each update is handled once) or at
//! `/v1/connectors/telegram/webhook`, checked against the secret token.

use std::sync::Arc;
use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use super::card::{Card, cut};
use super::decide::{self, NOT_AN_APPROVER, Verb};
use super::http::{CallError, Http};
use super::{Connectors, Kind};
use crate::config::{TelegramMode, TelegramSettings};

/// The chat key of Telegram's messages.
pub const CHAT: &str = "telegram";
/// Longest message text Telegram takes is 4096; cards are cut before.
const MAX_TEXT: usize = 4000;

/// Whether Telegram shows `text` whole in a card.
pub fn fits(text: &str) -> bool {
    text.chars().count() <= MAX_TEXT
}

/// A configured Telegram bot.
pub struct Telegram {
    s: TelegramSettings,
}

impl Telegram {
    /// The bot of `s`.
    pub fn new(s: TelegramSettings) -> Telegram {
        Telegram { s }
    }

    /// How updates arrive.
    pub fn mode(&self) -> TelegramMode {
        self.s.mode
    }

    /// The webhook's secret token.
    pub fn webhook_secret(&self) -> &str {
        &self.s.webhook_secret
    }

    /// Whether chat id `v` (a number or a text) is the configured chat.
    fn is_the_chat(&self, v: &Value) -> bool {
        match v {
            Value::Number(n) => n.to_string() == self.s.chat_id,
            Value::String(s) => *s == self.s.chat_id,
            _ => false,
        }
    }

    /// The bot's own user id: a token is `<bot id>:<secret>`.
    fn bot_id(&self) -> Option<i64> {
        self.s.token.split(':').next()?.parse().ok()
    }

    fn url(&self, method: &str) -> String {
        format!(
            "{}/bot{}/{method}",
            self.s.api_base.trim_end_matches('/'),
            self.s.token
        )
    }

    async fn call(
        &self,
        http: &Http,
        method: &str,
        body: &Value,
        timeout: Option<Duration>,
    ) -> Result<Value, CallError> {
        let answer = http
            .call(Method::POST, &self.url(method), None, body, timeout)
            .await?;
        if answer.get("ok").and_then(Value::as_bool) != Some(true) {
            return Err(CallError::fatal(format!("{method}: not ok")));
        }
        Ok(answer.get("result").cloned().unwrap_or(Value::Null))
    }

    fn keyboard(card: &Card) -> Value {
        let row: Vec<Value> = card
            .buttons
            .iter()
            .map(|v| json!({"text": v.label(), "callback_data": v.button_id(&card.item)}))
            .collect();
        if row.is_empty() {
            json!({"inline_keyboard": []})
        } else {
            json!({"inline_keyboard": [row]})
        }
    }

    /// Posts or edits `card`'s message; the message id of a post.
    pub async fn deliver(
        &self,
        http: &Http,
        to: Option<&str>,
        kind: Kind,
        card: &Card,
        message_ref: Option<&str>,
    ) -> Result<Option<String>, CallError> {
        let card = &card.clone().fit(fits);
        // A person's private chat with the bot has their user id.
        let chat_id = to.unwrap_or(&self.s.chat_id);
        let text = cut(&card.text(), MAX_TEXT);
        match kind {
            Kind::Post => {
                let mut body = json!({"chat_id": chat_id, "text": text,
                    "link_preview_options": no_preview()});
                if !card.buttons.is_empty() {
                    body["reply_markup"] = Self::keyboard(card);
                }
                let result = self.call(http, "sendMessage", &body, None).await?;
                let id = result
                    .get("message_id")
                    .and_then(Value::as_i64)
                    .ok_or_else(|| CallError::fatal("sendMessage: no message_id"))?;
                Ok(Some(id.to_string()))
            }
            Kind::Edit => {
                let message_id: i64 = message_ref
                    .and_then(|r| r.parse().ok())
                    .ok_or_else(|| CallError::fatal("no message to edit"))?;
                let body = json!({
                    "chat_id": chat_id,
                    "message_id": message_id,
                    "text": text,
                    "link_preview_options": no_preview(),
                    "reply_markup": Self::keyboard(card),
                });
                self.call(http, "editMessageText", &body, None).await?;
                Ok(None)
            }
        }
    }
}

/// A card shows what an agent wrote: no preview of an agent's link is
/// drawn under it (Bot API `LinkPreviewOptions`).
fn no_preview() -> Value {
    json!({"is_disabled": true})
}

/// How many message ids before a post made again are looked at for the
/// copy its lost answer left.
const LOST_COPY_WINDOW: i64 = 10;

/// What a copy a lost answer left says once found.
const VOID_COPY: &str = "This card was posted again (a network error hid that it had been \
     sent): use the newer message.";

/// A post made again (an earlier attempt's answer was lost) became
/// message `newest`. Telegram cannot list a chat's messages, but its
/// message ids count up per chat, so a copy the lost answer left is among
/// the ids just before. Each one the daemon does not know of loses its
/// buttons; Telegram refuses that for anything but this bot's own message
/// with buttons (a person's message, a notice), and where it succeeds the
/// copy is a card nobody could otherwise reach again, and says it is void.
pub async fn void_lost_copies(c: &Connectors, t: &Telegram, newest: i64) {
    for id in ((newest - LOST_COPY_WINDOW).max(1)..newest).rev() {
        if !matches!(
            c.gate.connector_item_of(CHAT, &id.to_string()).await,
            Ok(None)
        ) {
            continue;
        }
        let strip = json!({"chat_id": t.s.chat_id, "message_id": id,
            "reply_markup": {"inline_keyboard": []}});
        if t.call(&c.http, "editMessageReplyMarkup", &strip, None)
            .await
            .is_err()
        {
            continue;
        }
        tracing::info!(
            message = id,
            "a copy a lost answer left was found and voided"
        );
        let text = json!({"chat_id": t.s.chat_id, "message_id": id, "text": VOID_COPY,
            "reply_markup": {"inline_keyboard": []}});
        if let Err(e) = t.call(&c.http, "editMessageText", &text, None).await {
            tracing::warn!(message = id, error = %e.message, "cannot say a copy is void");
        }
    }
}

/// `getUpdates` answered 409 this many times in a row: a webhook is set
/// or another poller runs, and it is shown as the chat's problem.
const CONFLICTS_SHOWN: i64 = 2;

/// What `/readyz` says while `getUpdates` keeps answering 409.
const CONFLICT: &str = "getUpdates answers 409 Conflict: a webhook is set for this bot \
     (deleted at start; set again since?) or another process polls with the same token";

/// Poll mode: deletes a webhook set before (after webhook mode was used,
/// `getUpdates` answers 409 until it is), retrying until Telegram answers.
async fn delete_webhook(c: &Connectors, t: &Telegram) -> bool {
    let mut attempts = 0;
    loop {
        match t
            .call(
                &c.http,
                "deleteWebhook",
                &json!({"drop_pending_updates": false}),
                None,
            )
            .await
        {
            Ok(_) => {
                tracing::info!("telegram poll mode: deleted any webhook set for the bot");
                return true;
            }
            Err(e) => {
                let pause = super::outbox::backoff(attempts).min(Duration::from_secs(30));
                attempts += 1;
                tracing::warn!(error = %e.message, retry_in = ?pause, "telegram deleteWebhook failed");
                tokio::select! {
                    _ = c.gate.shutdown().cancelled() => return false,
                    _ = tokio::time::sleep(pause) => {}
                }
            }
        }
    }
}

/// Long-polls `getUpdates` until shutdown, handling each update once.
pub async fn poll(c: Arc<Connectors>) {
    let Some(t) = &c.telegram else { return };
    let shutdown = c.gate.shutdown().clone();
    if !delete_webhook(&c, t).await {
        return;
    }
    let mut conflicts: i64 = 0;
    let mut offset: i64 = match c.gate.connector_state(CHAT, "offset").await {
        Ok(v) => v.and_then(|v| v.parse().ok()).unwrap_or(0),
        Err(_) => 0,
    };
    let mut failures: i64 = 0;
    let wait = Duration::from_secs(t.s.poll_seconds);
    loop {
        // Pages of 20 updates: a page of 100 long messages with replies
        // (a group member can send those) could near the bound on an
        // answer a chat API gets (`http::MAX_ANSWER`), and a page never
        // read is never passed.
        let body = json!({
            "offset": offset,
            "limit": 20,
            "timeout": t.s.poll_seconds,
            "allowed_updates": ["message", "callback_query"],
        });
        let got = tokio::select! {
            _ = shutdown.cancelled() => return,
            got = t.call(&c.http, "getUpdates", &body, Some(wait + Duration::from_secs(10))) => got,
        };
        let updates = match got {
            Ok(v) => {
                failures = 0;
                if conflicts > 0 {
                    conflicts = 0;
                    c.set_problem(CHAT, None);
                    metrics::gauge!("actiongate_connector_telegram_conflict").set(0.0);
                }
                match v {
                    Value::Array(u) => u,
                    _ => Vec::new(),
                }
            }
            Err(e) => {
                let pause = super::outbox::backoff(failures).min(Duration::from_secs(30));
                failures += 1;
                if e.status == Some(409) {
                    conflicts += 1;
                    metrics::counter!("actiongate_connector_telegram_conflicts_total").increment(1);
                    if conflicts == CONFLICTS_SHOWN {
                        tracing::error!("telegram: {CONFLICT}");
                        c.set_problem(CHAT, Some(CONFLICT.to_owned()));
                        metrics::gauge!("actiongate_connector_telegram_conflict").set(1.0);
                    }
                }
                tracing::warn!(error = %e.message, retry_in = ?pause, "telegram getUpdates failed");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(pause) => continue,
                }
            }
        };
        for u in updates {
            let Some(id) = u.get("update_id").and_then(Value::as_i64) else {
                continue;
            };
            if id < offset {
                continue;
            }
            handle_update(&c, &u).await;
            offset = id + 1;
            if let Err(e) = c
                .gate
                .set_connector_state(CHAT, "offset", offset.to_string())
                .await
            {
                tracing::warn!(error = %e.detail, "cannot keep telegram's update offset");
            }
        }
    }
}

/// Webhook mode: tells Telegram where to POST updates, retrying until it
/// answers.
pub async fn set_webhook(c: Arc<Connectors>) {
    let Some(t) = &c.telegram else { return };
    let body = json!({
        "url": t.s.webhook_url,
        "secret_token": t.s.webhook_secret,
        "allowed_updates": ["message", "callback_query"],
    });
    let mut attempts = 0;
    loop {
        match t.call(&c.http, "setWebhook", &body, None).await {
            Ok(_) => return,
            Err(e) => {
                let pause = super::outbox::backoff(attempts).min(Duration::from_secs(60));
                attempts += 1;
                tracing::warn!(error = %e.message, retry_in = ?pause, "telegram setWebhook failed");
                tokio::select! {
                    _ = c.gate.shutdown().cancelled() => return,
                    _ = tokio::time::sleep(pause) => {}
                }
            }
        }
    }
}

fn user_id(v: &Value) -> String {
    v.pointer("/from/id")
        .and_then(Value::as_i64)
        .map(|n| n.to_string())
        .unwrap_or_default()
}

/// Handles one update: a tap on a button, or a reply to an item's message.
pub async fn handle_update(c: &Connectors, u: &Value) {
    let Some(t) = &c.telegram else { return };
    if let Some(cq) = u.get("callback_query") {
        let Some(id) = cq.get("id").and_then(Value::as_str) else {
            return;
        };
        match c.gate.connector_first_seen(CHAT, &format!("cq:{id}")).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(_) => return answer_tap(c, t, id, decide::TRY_AGAIN, false),
        }
        let who = user_id(cq);
        // The message tapped may be a copy nobody knew of (a post whose
        // answer was lost): it is edited with the outcome too. What it
        // stands for is read from its own buttons, as Telegram sends the
        // message, never from the tap's data alone: a modified client may
        // send any data on any message (a stranger's tap naming another
        // item would make a later reply to this copy decide that item).
        // Message ids count per chat: only one in the configured chat.
        if let (true, Some(mid), Some((_, item))) = (
            cq.pointer("/message/chat/id")
                .is_some_and(|v| t.is_the_chat(v)),
            cq.pointer("/message/message_id").and_then(Value::as_i64),
            cq.get("data").and_then(Value::as_str).and_then(Verb::parse),
        ) && item_of_own_message(t, cq.get("message")).as_deref() == Some(item)
        {
            super::outbox::learned(c, CHAT, item, &mid.to_string()).await;
        }
        let answer = if c.notify_only {
            "Decisions are not taken here (notify-only).".to_owned()
        } else if !decide::is_approver(&t.s.approvers, &who) {
            NOT_AN_APPROVER.to_owned()
        } else {
            match cq.get("data").and_then(Value::as_str).and_then(Verb::parse) {
                Some((verb, item)) => {
                    decide::decide(&c.gate, format!("{CHAT}:{who}"), verb, item, fits).await
                }
                None => "Unknown button.".to_owned(),
            }
        };
        return answer_tap(c, t, id, &answer, answer == NOT_AN_APPROVER);
    }
    let Some(m) = u.get("message") else { return };
    let chat_ok = m.pointer("/chat/id").is_some_and(|v| t.is_the_chat(v));
    let (Some(to), Some(text)) = (
        m.pointer("/reply_to_message/message_id")
            .and_then(Value::as_i64),
        m.get("text").and_then(Value::as_str),
    ) else {
        return;
    };
    // Talk in the replies is not for the gate: only what reads as a
    // decision is answered (an approver's remark, a stranger's chat, get
    // nothing).
    if !chat_ok || c.notify_only || !decide::reads_as_decision(text) {
        return;
    }
    let item = match c.gate.connector_item_of(CHAT, &to.to_string()).await {
        Ok(Some(item)) => item,
        Ok(None) => {
            // A copy nobody knew of (a post whose answer was lost): this
            // bot's message, whose buttons name the item.
            let Some(item) = item_of_own_message(t, m.get("reply_to_message")) else {
                return;
            };
            super::outbox::learned(c, CHAT, &item, &to.to_string()).await;
            item
        }
        Err(_) => return answer_message(c, t, m, decide::TRY_AGAIN),
    };
    if let Some(mid) = m.get("message_id").and_then(Value::as_i64) {
        match c.gate.connector_first_seen(CHAT, &format!("m:{mid}")).await {
            Ok(true) => {}
            Ok(false) => return,
            Err(_) => return answer_message(c, t, m, decide::TRY_AGAIN),
        }
    }
    let who = user_id(m);
    let answer = if decide::is_approver(&t.s.approvers, &who) {
        decide::reply(&c.gate, format!("{CHAT}:{who}"), &item, text, fits).await
    } else {
        NOT_AN_APPROVER.to_owned()
    };
    answer_message(c, t, m, &answer);
}

/// Answers a tap (callback query `id`): a toast, or an alert.
fn answer_tap(c: &Connectors, t: &Telegram, id: &str, text: &str, alert: bool) {
    let body = json!({"callback_query_id": id, "text": cut(text, 190), "show_alert": alert});
    let (http, url) = (c.http.clone(), t.url("answerCallbackQuery"));
    c.notice("answerCallbackQuery", async move {
        http.call(Method::POST, &url, None, &body, None).await
    });
}

/// Answers message `m` in the chat, as a reply to it.
fn answer_message(c: &Connectors, t: &Telegram, m: &Value, text: &str) {
    let mut body = json!({"chat_id": t.s.chat_id, "text": text});
    if let Some(mid) = m.get("message_id").and_then(Value::as_i64) {
        body["reply_parameters"] = json!({"message_id": mid, "allow_sending_without_reply": true});
    }
    let (http, url) = (c.http.clone(), t.url("sendMessage"));
    c.notice("sendMessage", async move {
        http.call(Method::POST, &url, None, &body, None).await
    });
}

/// The item a message sent by this bot is about, from its buttons; `None`
/// for anyone else's message or one without buttons.
fn item_of_own_message(t: &Telegram, m: Option<&Value>) -> Option<String> {
    let m = m?;
    let from = m.pointer("/from/id").and_then(Value::as_i64)?;
    if Some(from) != t.bot_id() {
        return None;
    }
    m.pointer("/reply_markup/inline_keyboard/0/0/callback_data")
        .and_then(Value::as_str)
        .and_then(Verb::parse)
        .map(|(_, item)| item.to_owned())
}
