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
        kind: Kind,
        card: &Card,
        message_ref: Option<&str>,
    ) -> Result<Option<String>, CallError> {
        let card = &card.clone().fit(fits);
        let text = cut(&card.text(), MAX_TEXT);
        match kind {
            Kind::Post => {
                let mut body = json!({"chat_id": self.s.chat_id, "text": text});
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
                    "chat_id": self.s.chat_id,
                    "message_id": message_id,
                    "text": text,
                    "reply_markup": Self::keyboard(card),
                });
                self.call(http, "editMessageText", &body, None).await?;
                Ok(None)
            }
        }
    }
}

/// Long-polls `getUpdates` until shutdown, handling each update once.
pub async fn poll(c: Arc<Connectors>) {
    let Some(t) = &c.telegram else { return };
    let shutdown = c.gate.shutdown().clone();
    let mut offset: i64 = match c.gate.connector_state(CHAT, "offset").await {
        Ok(v) => v.and_then(|v| v.parse().ok()).unwrap_or(0),
        Err(_) => 0,
    };
    let mut failures: i64 = 0;
    let wait = Duration::from_secs(t.s.poll_seconds);
    loop {
        let body = json!({
            "offset": offset,
            "timeout": t.s.poll_seconds,
            "allowed_updates": ["message", "callback_query"],
        });
        let got = tokio::select! {
            _ = shutdown.cancelled() => return,
            got = t.call(&c.http, "getUpdates", &body, Some(wait + Duration::from_secs(10))) => got,
        };
        let updates = match got {
            Ok(Value::Array(u)) => {
                failures = 0;
                u
            }
            Ok(_) => Vec::new(),
            Err(e) => {
                let pause = super::outbox::backoff(failures).min(Duration::from_secs(30));
                failures += 1;
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
            _ => return,
        }
        let who = user_id(cq);
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
        let alert = answer == NOT_AN_APPROVER;
        let body = json!({"callback_query_id": id, "text": cut(&answer, 190), "show_alert": alert});
        let (http, url) = (c.http.clone(), t.url("answerCallbackQuery"));
        c.notice("answerCallbackQuery", async move {
            http.call(Method::POST, &url, None, &body, None).await
        });
        return;
    }
    let Some(m) = u.get("message") else { return };
    let chat_ok = m
        .pointer("/chat/id")
        .map(|v| match v {
            Value::Number(n) => n.to_string(),
            Value::String(s) => s.clone(),
            _ => String::new(),
        })
        .is_some_and(|id| id == t.s.chat_id);
    let (Some(to), Some(text)) = (
        m.pointer("/reply_to_message/message_id")
            .and_then(Value::as_i64),
        m.get("text").and_then(Value::as_str),
    ) else {
        return;
    };
    if !chat_ok || c.notify_only {
        return;
    }
    let Ok(Some(item)) = c.gate.connector_item_of(CHAT, &to.to_string()).await else {
        return;
    };
    if let Some(mid) = m.get("message_id").and_then(Value::as_i64) {
        match c.gate.connector_first_seen(CHAT, &format!("m:{mid}")).await {
            Ok(true) => {}
            _ => return,
        }
    }
    let who = user_id(m);
    let answer = if decide::is_approver(&t.s.approvers, &who) {
        decide::reply(&c.gate, format!("{CHAT}:{who}"), &item, text, fits).await
    } else {
        NOT_AN_APPROVER.to_owned()
    };
    let body = json!({"chat_id": t.s.chat_id, "text": answer});
    let (http, url) = (c.http.clone(), t.url("sendMessage"));
    c.notice("sendMessage", async move {
        http.call(Method::POST, &url, None, &body, None).await
    });
}
