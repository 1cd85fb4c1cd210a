//! WhatsApp (Cloud API): each approver's phone gets an interactive message
//! with reply buttons; the outcome is a text replying to it (WhatsApp
//! messages cannot be edited): the card's title and outcome, and the only
//! message a decision made here gets. Taps and text replies arrive at
//! `/v1/connectors/whatsapp/webhook`, signed in `X-Hub-Signature-256`
//! with the app secret; the GET verification handshake answers with the
//! challenge when the verify token matches.

use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::Sha256;

use super::card::{Card, cut};
use super::decide::{self, NOT_AN_APPROVER, Verb};
use super::http::{CallError, Http};
use super::{Connectors, Kind};
use crate::config::WhatsAppSettings;

/// Chat keys of WhatsApp start with this, then the phone number.
pub const PREFIX: &str = "whatsapp:";
/// An interactive body holds at most 1024 characters.
const MAX_BODY: usize = 1000;
/// Messages sent longer ago than this decide nothing (a webhook retried
/// for days must not approve what nobody looks at any more).
const STALE_SECS: i64 = 600;

/// Whether WhatsApp shows `text` whole in a card (a message with reply
/// buttons).
pub fn fits(text: &str) -> bool {
    literal(text, usize::MAX).chars().count() <= MAX_BODY
}

/// `text` as WhatsApp shows it as written, in at most `max` characters:
/// in a monospace block, where `*`, `_`, `~` and list marks are not
/// formatting (WhatsApp has no escape character, and `rm *.log*` would
/// lose its glob to bold). A run of three backticks, which would end the
/// block, shows its middle one by name.
fn literal(text: &str, max: usize) -> String {
    let mut inner = text.to_owned();
    while inner.contains("```") {
        inner = inner.replace("```", "`⟨U+0060⟩`");
    }
    format!("```\n{}\n```", cut(&inner, max.saturating_sub(8)))
}

/// A configured WhatsApp Business number.
pub struct WhatsApp {
    s: WhatsAppSettings,
}

/// Digits of a phone number (`+1 555-0100` and `15550100` are the same).
fn digits(phone: &str) -> String {
    phone.chars().filter(char::is_ascii_digit).collect()
}

impl WhatsApp {
    /// The number of `s`.
    pub fn new(s: WhatsAppSettings) -> WhatsApp {
        WhatsApp { s }
    }

    /// One chat per approver.
    pub fn destinations(&self) -> Vec<String> {
        self.s
            .approvers
            .iter()
            .map(|p| format!("{PREFIX}{}", digits(p)))
            .collect()
    }

    fn url(&self) -> String {
        format!(
            "{}/{}/messages",
            self.s.api_base.trim_end_matches('/'),
            self.s.phone_number_id
        )
    }

    fn auth(&self) -> String {
        format!("Bearer {}", self.s.access_token)
    }

    fn text_message(to: &str, text: &str, context: Option<&str>) -> Value {
        let mut m = json!({
            "messaging_product": "whatsapp",
            "recipient_type": "individual",
            "to": to,
            "type": "text",
            "text": {"body": literal(text, 4000), "preview_url": false},
        });
        if let Some(id) = context {
            m["context"] = json!({"message_id": id});
        }
        m
    }

    /// Sends `card` to `to` (a post) or its outcome as a reply to the
    /// post (an edit); the message id of a post.
    pub async fn deliver(
        &self,
        http: &Http,
        to: &str,
        kind: Kind,
        card: &Card,
        message_ref: Option<&str>,
    ) -> Result<Option<String>, CallError> {
        let card = &card.clone().fit(fits);
        let body = match kind {
            Kind::Post if !card.buttons.is_empty() => {
                // At most three reply buttons: "for this task" is offered
                // before "for 1h" where both are.
                let mut verbs = card.buttons.clone();
                if verbs.len() > 3 {
                    verbs.retain(|v| *v != Verb::Remember);
                }
                let buttons: Vec<Value> = verbs
                    .iter()
                    .map(|v| json!({"type": "reply", "reply": {"id": v.button_id(&card.item), "title": v.label()}}))
                    .collect();
                json!({
                    "messaging_product": "whatsapp",
                    "recipient_type": "individual",
                    "to": to,
                    "type": "interactive",
                    "interactive": {
                        "type": "button",
                        "body": {"text": literal(&card.text(), MAX_BODY)},
                        "footer": {"text": "Or reply yes / no to this message"},
                        "action": {"buttons": buttons},
                    },
                })
            }
            Kind::Post => Self::text_message(to, &card.text(), None),
            // A reply quoting the card: its title and outcome are enough
            // (the whole card again would be a second copy of it).
            Kind::Edit => Self::text_message(to, &outcome_text(card), message_ref),
        };
        let auth = self.auth();
        let answer = http
            .call(Method::POST, &self.url(), Some(&auth), &body, None)
            .await?;
        let id = answer.pointer("/messages/0/id").and_then(Value::as_str);
        match kind {
            Kind::Post => Ok(Some(
                id.ok_or_else(|| CallError::fatal("messages: no id"))?
                    .to_owned(),
            )),
            Kind::Edit => Ok(None),
        }
    }

    /// Whether `signature` (`sha256=<hex>`) is the app secret's HMAC of `body`.
    pub fn verify(&self, signature: &str, body: &[u8]) -> bool {
        let Some(sig) = signature
            .strip_prefix("sha256=")
            .and_then(|h| hex::decode(h).ok())
        else {
            return false;
        };
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(self.s.app_secret.as_bytes()) else {
            return false;
        };
        mac.update(body);
        mac.verify_slice(&sig).is_ok()
    }

    /// Whether `token` is the verify token (constant time).
    pub fn verify_token_matches(&self, token: &str) -> bool {
        super::routes::same_secret(token, &self.s.verify_token)
    }
}

/// What the outcome of `card` (a settled card: its outcome is its last
/// line) says in a reply to its message: the title and the outcome.
fn outcome_text(card: &Card) -> String {
    match card.lines.last() {
        Some(outcome) => format!("{}\n{outcome}", card.title),
        None => card.title.clone(),
    }
}

/// Handles a verified webhook payload: every message in it.
pub async fn handle_webhook(c: &Connectors, payload: &Value, now: i64) {
    let Some(w) = &c.whatsapp else { return };
    let messages = messages_of(payload);
    for m in &messages {
        handle_message(c, w, m, now).await;
    }
}

/// Every message of a webhook payload (`entry[].changes[].value.messages[]`).
fn messages_of(payload: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    for e in payload
        .get("entry")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        for ch in e
            .get("changes")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(ms) = ch.pointer("/value/messages").and_then(Value::as_array) {
                out.extend(ms.iter().cloned());
            }
        }
    }
    out
}

async fn handle_message(c: &Connectors, w: &WhatsApp, m: &Value, now: i64) {
    let from = digits(m.get("from").and_then(Value::as_str).unwrap_or(""));
    let Some(id) = m.get("id").and_then(Value::as_str) else {
        return;
    };
    let sent: i64 = m
        .get("timestamp")
        .and_then(Value::as_str)
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    if now.saturating_sub(sent) > STALE_SECS {
        tracing::info!("a stale whatsapp message decides nothing");
        return;
    }
    // Talk is not for the gate: a text message is answered only when it
    // reads as a decision (an approver's remark, a stranger's chat, get
    // nothing); a tap always is.
    if m.pointer("/text/body")
        .and_then(Value::as_str)
        .is_some_and(|text| !decide::reads_as_decision(text))
    {
        return;
    }
    let busy = match c.gate.connector_first_seen("whatsapp", id).await {
        Ok(true) => false,
        Ok(false) => return,
        Err(_) => true,
    };
    let approver =
        w.s.approvers
            .iter()
            .any(|a| digits(a) == from && !from.is_empty());
    let answer = if busy {
        decide::TRY_AGAIN.to_owned()
    } else if c.notify_only {
        "Decisions are not taken here (notify-only).".to_owned()
    } else if !approver {
        NOT_AN_APPROVER.to_owned()
    } else if let Some(button) = m
        .pointer("/interactive/button_reply/id")
        .and_then(Value::as_str)
    {
        match Verb::parse(button) {
            Some((verb, item)) => {
                // The message tapped may be a copy nobody knew of (a post
                // whose answer was lost): it gets the outcome too, which
                // then answers the tap.
                let chat = format!("{PREFIX}{from}");
                let told = match m.pointer("/context/id").and_then(Value::as_str) {
                    Some(ctx) => super::outbox::learned(c, &chat, item, ctx).await,
                    None => false,
                };
                let answer =
                    decide::decide(&c.gate, format!("whatsapp:{from}"), verb, item, fits).await;
                if told && answer == "Already decided." {
                    return;
                }
                answer
            }
            None => "Unknown button.".to_owned(),
        }
    } else if let Some(text) = m.pointer("/text/body").and_then(Value::as_str) {
        let chat = format!("{PREFIX}{from}");
        let item = match m.pointer("/context/id").and_then(Value::as_str) {
            Some(ctx) => c.gate.connector_item_of(&chat, ctx).await,
            None => Ok(None),
        };
        match item {
            Ok(Some(item)) => {
                decide::reply(&c.gate, format!("whatsapp:{from}"), &item, text, fits).await
            }
            Ok(None) => "Reply to the request's message (swipe it) with yes or no.".to_owned(),
            Err(_) => decide::TRY_AGAIN.to_owned(),
        }
    } else {
        return;
    };
    // A decision just made is told by the outcome, sent to every
    // approver as a reply to the card: one message, not two.
    if decide::shown_by_the_edit(&answer) {
        return;
    }
    let body = WhatsApp::text_message(&from, &answer, Some(id));
    let (http, url, auth) = (c.http.clone(), w.url(), w.auth());
    c.notice("whatsapp answer", async move {
        http.call(Method::POST, &url, Some(&auth), &body, None)
            .await
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_shown_as_written_in_a_monospace_block() {
        assert_eq!(
            literal("rm *.log*\n- _a_ ~b~", 100),
            "```\nrm *.log*\n- _a_ ~b~\n```"
        );
        for text in ["a```b", "a`````b", "``````", "x````"] {
            let shown = literal(text, 100);
            let inner = &shown[4..shown.len() - 4];
            assert!(!inner.contains("```"), "{text}: {shown}");
            assert!(inner.contains("⟨U+0060⟩"), "{text}: {shown}");
        }
        let long = literal(&"x".repeat(50), 20);
        assert_eq!(long.chars().count(), 20, "{long}");
        assert!(
            long.starts_with("```\n") && long.ends_with("…\n```"),
            "{long}"
        );
        assert!(fits(&"x".repeat(MAX_BODY - 8)));
        assert!(!fits(&"x".repeat(MAX_BODY - 7)));
    }
}
