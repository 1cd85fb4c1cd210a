//! Slack (Web API): `chat.postMessage` with Block Kit buttons,
//! `chat.update` on the outcome, `chat.postEphemeral` to answer a click.
//! Clicks arrive at `/v1/connectors/slack/interactivity` and threaded
//! replies (Events API, `message` events) at `/v1/connectors/slack/events`,
//! both signed with the app's signing secret (v0 scheme, 5-minute window,
//! constant-time check).

use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::Sha256;

use super::card::{Card, cut};
use super::decide::{self, NOT_AN_APPROVER, Verb};
use super::http::{CallError, Http};
use super::{Connectors, Kind};
use crate::config::SlackSettings;

/// The chat key of Slack's messages.
pub const CHAT: &str = "slack";
/// A section's text holds at most 3000 characters.
const MAX_TEXT: usize = 2900;
/// Requests older (or newer) than this are refused.
pub const WINDOW_SECS: i64 = 300;
/// Replies written longer ago than this decide nothing (Slack retries an
/// event for about an hour).
const STALE_SECS: f64 = 600.0;

/// The metadata event type of an item's message: how a post whose answer
/// was lost is found again.
const EVENT_TYPE: &str = "actiongate_item";
/// How many of the channel's newest messages are looked through for it.
const HISTORY: usize = 200;

/// `s` as one URL query value (channel ids are letters and digits; this
/// keeps anything else from adding parameters).
fn urlencoding(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// Whether Slack shows `text` whole in a card.
pub fn fits(text: &str) -> bool {
    text.chars().count() <= MAX_TEXT
}

/// Who this app posts as, from `auth.test`: how its own messages are
/// told from another app's.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Me {
    /// The bot's id (`B…`), which its messages carry as `bot_id`.
    bot_id: Option<String>,
    /// The bot user's id (`U…`), which its messages carry as `user`.
    user_id: Option<String>,
}

impl Me {
    /// Whether history message `m` was posted by this app. Another app in
    /// the channel may post a message with the same metadata (an agent
    /// knows its action's id): adopted as the card, a "yes" in its thread
    /// would decide the real item, which no real card showed.
    fn posted(&self, m: &Value) -> bool {
        let is = |key: &str, mine: &Option<String>| {
            mine.as_deref()
                .is_some_and(|mine| m.get(key).and_then(Value::as_str) == Some(mine))
        };
        is("bot_id", &self.bot_id) || is("user", &self.user_id)
    }
}

/// A configured Slack app.
pub struct Slack {
    s: SlackSettings,
    /// Who this app posts as, once known (asked once).
    me: std::sync::OnceLock<Me>,
}

impl Slack {
    /// The app of `s`.
    pub fn new(s: SlackSettings) -> Slack {
        Slack {
            s,
            me: std::sync::OnceLock::new(),
        }
    }

    /// Who this app posts as (`auth.test`, asked once and kept); `None`
    /// when Slack does not say.
    async fn me(&self, http: &Http) -> Option<&Me> {
        if let Some(me) = self.me.get() {
            return Some(me);
        }
        let answer = match self.call(http, "auth.test", &json!({})).await {
            Ok(a) => a,
            Err(e) => {
                tracing::warn!(error = %e.message, "slack: auth.test failed: who this app posts as is not known");
                return None;
            }
        };
        let id = |k: &str| {
            answer
                .get(k)
                .and_then(Value::as_str)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        let me = Me {
            bot_id: id("bot_id"),
            user_id: id("user_id"),
        };
        if me.bot_id.is_none() && me.user_id.is_none() {
            return None;
        }
        Some(self.me.get_or_init(|| me))
    }

    fn url(&self, method: &str) -> String {
        format!("{}/{method}", self.s.api_base.trim_end_matches('/'))
    }

    fn auth(&self) -> String {
        format!("Bearer {}", self.s.token)
    }

    async fn call(&self, http: &Http, method: &str, body: &Value) -> Result<Value, CallError> {
        let auth = self.auth();
        let answer = http
            .call(Method::POST, &self.url(method), Some(&auth), body, None)
            .await?;
        if answer.get("ok").and_then(Value::as_bool) != Some(true) {
            let err = answer
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("unknown");
            let msg = format!("{method}: {err}");
            return Err(match err {
                "ratelimited" | "internal_error" | "fatal_error" | "service_unavailable" => {
                    CallError::transient(msg)
                }
                _ => CallError::fatal(msg),
            });
        }
        Ok(answer)
    }

    fn blocks(card: &Card) -> Value {
        let mut blocks = vec![json!({
            "type": "section",
            // No `:emoji:` codes made pictures: an agent's reason could
            // otherwise draw a "✅ Approved by" line.
            "text": {"type": "plain_text", "text": cut(&card.text(), MAX_TEXT), "emoji": false},
        })];
        if !card.buttons.is_empty() {
            let elements: Vec<Value> = card
                .buttons
                .iter()
                .map(|v| {
                    let mut b = json!({
                        "type": "button",
                        "action_id": v.button_id(&card.item),
                        "value": v.button_id(&card.item),
                        "text": {"type": "plain_text", "text": v.label()},
                    });
                    match v {
                        Verb::Approve => b["style"] = json!("primary"),
                        Verb::Deny => b["style"] = json!("danger"),
                        Verb::Remember | Verb::Task => {}
                    }
                    b
                })
                .collect();
            blocks.push(json!({"type": "actions", "elements": elements}));
        }
        Value::Array(blocks)
    }

    /// The `ts` of the message of `item` this app posted in the channel
    /// among the newest [`HISTORY`], found by its metadata; only one this
    /// app posted (its `bot_id` or bot user), and none when who this app
    /// posts as is not known (then it is posted anew).
    async fn find_posted(&self, http: &Http, item: &str) -> Result<Option<String>, CallError> {
        let Some(me) = self.me(http).await else {
            return Ok(None);
        };
        let url = format!(
            "{}?channel={}&limit={HISTORY}&include_all_metadata=true",
            self.url("conversations.history"),
            urlencoding(&self.s.channel)
        );
        let answer = http.get(&url, Some(&self.auth())).await?;
        if answer.get("ok").and_then(Value::as_bool) != Some(true) {
            let err = answer
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("unknown");
            return Err(CallError::fatal(format!("conversations.history: {err}")));
        }
        let found = answer
            .get("messages")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|m| {
                me.posted(m)
                    && m.pointer("/metadata/event_type").and_then(Value::as_str) == Some(EVENT_TYPE)
                    && m.pointer("/metadata/event_payload/item")
                        .and_then(Value::as_str)
                        == Some(item)
            })
            .and_then(|m| m.get("ts").and_then(Value::as_str))
            .map(str::to_owned);
        Ok(found)
    }

    /// Posts or updates `card`'s message in the app's direct messages
    /// with `user` (a Slack user id): a post goes to the user id, Slack
    /// answers with the conversation's id, and the reference kept is
    /// `<conversation> <ts>` so the update finds it.
    pub async fn deliver_to(
        &self,
        http: &Http,
        user: &str,
        kind: Kind,
        card: &Card,
        message_ref: Option<&str>,
    ) -> Result<Option<String>, CallError> {
        let card = &card.clone().fit(fits);
        let text = mrkdwn_escaped(&cut(&card.text(), MAX_TEXT));
        match kind {
            Kind::Post => {
                let body = json!({"channel": user, "text": text, "blocks": Self::blocks(card),
                    "unfurl_links": false, "unfurl_media": false});
                let answer = self.call(http, "chat.postMessage", &body).await?;
                let ts = answer.get("ts").and_then(Value::as_str);
                let channel = answer.get("channel").and_then(Value::as_str);
                match (channel, ts) {
                    (Some(c), Some(ts)) => Ok(Some(format!("{c} {ts}"))),
                    _ => Err(CallError::fatal("chat.postMessage: no channel or ts")),
                }
            }
            Kind::Edit => {
                let (channel, ts) = message_ref
                    .and_then(|r| r.split_once(' '))
                    .ok_or_else(|| CallError::fatal("no message to update"))?;
                let body = json!({"channel": channel, "ts": ts, "text": text, "blocks": Self::blocks(card)});
                self.call(http, "chat.update", &body).await?;
                Ok(None)
            }
        }
    }

    /// Posts or updates `card`'s message; the message's `ts` of a post.
    /// A post tried before (`again`) is first looked for in the channel by
    /// its metadata: when the first try reached Slack and only the answer
    /// was lost, that message is the post, and nothing is posted twice.
    pub async fn deliver(
        &self,
        http: &Http,
        kind: Kind,
        card: &Card,
        message_ref: Option<&str>,
        again: bool,
    ) -> Result<Option<String>, CallError> {
        let card = &card.clone().fit(fits);
        // The message's `text` (shown in notifications) is mrkdwn.
        let text = mrkdwn_escaped(&cut(&card.text(), MAX_TEXT));
        match kind {
            Kind::Post => {
                if again {
                    match self.find_posted(http, &card.item).await {
                        Ok(Some(ts)) => {
                            tracing::info!(
                                "slack: the message was posted before (its answer was lost)"
                            );
                            return Ok(Some(ts));
                        }
                        Ok(None) => {}
                        // A transient failure is retried; without the
                        // history scope the post goes (a duplicate is
                        // better than no message).
                        Err(e) if e.retry => return Err(e),
                        Err(e) => {
                            tracing::warn!(error = %e.message, "slack: cannot look for a message posted before (needs channels:history); posting again");
                        }
                    }
                }
                let body = json!({
                    "channel": self.s.channel,
                    "text": text,
                    "blocks": Self::blocks(card),
                    // No preview of an agent's link under the card.
                    "unfurl_links": false,
                    "unfurl_media": false,
                    // Found again by it when the answer is lost.
                    "metadata": {"event_type": EVENT_TYPE, "event_payload": {"item": card.item}},
                });
                let answer = self.call(http, "chat.postMessage", &body).await?;
                let ts = answer
                    .get("ts")
                    .and_then(Value::as_str)
                    .ok_or_else(|| CallError::fatal("chat.postMessage: no ts"))?;
                Ok(Some(ts.to_owned()))
            }
            Kind::Edit => {
                let ts = message_ref.ok_or_else(|| CallError::fatal("no message to update"))?;
                let body = json!({"channel": self.s.channel, "ts": ts, "text": text, "blocks": Self::blocks(card)});
                self.call(http, "chat.update", &body).await?;
                Ok(None)
            }
        }
    }

    /// Whether `body` was signed with the signing secret at `timestamp`
    /// (seconds), within the window around `now`.
    pub fn verify(&self, timestamp: &str, signature: &str, body: &[u8], now: i64) -> bool {
        let Ok(ts) = timestamp.parse::<i64>() else {
            return false;
        };
        if now.abs_diff(ts) > WINDOW_SECS.unsigned_abs() {
            return false;
        }
        let Some(hex_sig) = signature.strip_prefix("v0=") else {
            return false;
        };
        let Ok(sig) = hex::decode(hex_sig) else {
            return false;
        };
        let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(self.s.signing_secret.as_bytes()) else {
            return false;
        };
        mac.update(format!("v0:{timestamp}:").as_bytes());
        mac.update(body);
        mac.verify_slice(&sig).is_ok()
    }
}

/// `text` shown literally where Slack reads mrkdwn: `&`, `<` and `>`
/// escaped as Slack asks, so an agent's `<!channel>` pings nobody and
/// `<url|label>` is no link labelled as another.
fn mrkdwn_escaped(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// Handles a verified interactivity payload (the `payload` form field).
pub async fn handle_interaction(c: &Connectors, payload: &Value) {
    let Some(s) = &c.slack else { return };
    if payload.get("type").and_then(Value::as_str) != Some("block_actions") {
        return;
    }
    let who = payload
        .pointer("/user/id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let Some(action) = payload.pointer("/actions/0") else {
        return;
    };
    let action_id = action
        .get("action_id")
        .and_then(Value::as_str)
        .unwrap_or("");
    let ts = action
        .get("action_ts")
        .and_then(Value::as_str)
        .unwrap_or("");
    let seen = format!("{who}:{ts}:{action_id}");
    match c.gate.connector_first_seen(CHAT, &seen).await {
        Ok(true) => {}
        Ok(false) => return,
        Err(_) => return tell(c, s, &who, decide::TRY_AGAIN.to_owned()),
    }
    // The message clicked may be a copy nobody knew of: edited with the
    // outcome too.
    let channel = payload
        .pointer("/channel/id")
        .or_else(|| payload.pointer("/container/channel_id"))
        .and_then(Value::as_str);
    let clicked = payload
        .pointer("/container/message_ts")
        .or_else(|| payload.pointer("/message/ts"))
        .and_then(Value::as_str);
    if let (Some(true), Some(message_ts), Some((_, item))) = (
        channel.map(|ch| ch == s.s.channel),
        clicked,
        Verb::parse(action_id),
    ) {
        super::outbox::learned(c, CHAT, item, message_ts).await;
    }
    let answer = if c.notify_only {
        Some("Decisions are not taken here (notify-only).".to_owned())
    } else if !decide::is_approver(&s.s.approvers, &who) {
        Some(NOT_AN_APPROVER.to_owned())
    } else {
        match Verb::parse(action_id) {
            Some((verb, item)) => {
                let a = decide::decide(&c.gate, format!("{CHAT}:{who}"), verb, item, fits).await;
                // A decision shows in the message itself; anything else is told.
                (!decide::shown_by_the_edit(&a)).then_some(a)
            }
            None => Some("Unknown button.".to_owned()),
        }
    };
    if let Some(text) = answer {
        tell(c, s, &who, text);
    }
}

/// Tells `user` (only them) `text` in the channel, outside the queue.
fn tell(c: &Connectors, s: &Slack, user: &str, text: String) {
    let body = json!({"channel": s.s.channel, "user": user, "text": text});
    let (http, url, auth) = (c.http.clone(), s.url("chat.postEphemeral"), s.auth());
    c.notice("chat.postEphemeral", async move {
        http.call(Method::POST, &url, Some(&auth), &body, None)
            .await
    });
}

/// Handles a verified Events API `event_callback` at `now` (seconds): a
/// threaded reply to an item's message with reply words decides it, by an
/// approver.
pub async fn handle_event(c: &Connectors, payload: &Value, now: i64) {
    let Some(s) = &c.slack else { return };
    let Some(e) = payload.get("event") else {
        return;
    };
    let text_of = |k: &str| e.get(k).and_then(Value::as_str);
    // Plain messages (and replies also sent to the channel); not edits,
    // deletions or any bot's, this app's own included.
    let subtype_ok = matches!(text_of("subtype"), None | Some("thread_broadcast"));
    if text_of("type") != Some("message") || !subtype_ok || e.get("bot_id").is_some() {
        return;
    }
    if c.notify_only || text_of("channel") != Some(s.s.channel.as_str()) {
        return;
    }
    let (Some(user), Some(ts), Some(parent), Some(text)) = (
        text_of("user"),
        text_of("ts"),
        text_of("thread_ts"),
        text_of("text"),
    ) else {
        return;
    };
    // Talk in the thread is not for the gate.
    if ts == parent || decide::parse_reply(text).is_none() {
        return;
    }
    let written: f64 = ts.parse().unwrap_or(0.0);
    if now as f64 - written > STALE_SECS {
        tracing::info!("a stale slack reply decides nothing");
        return;
    }
    let item = match c.gate.connector_item_of(CHAT, parent).await {
        Ok(Some(item)) => item,
        Ok(None) => return,
        Err(_) => return tell(c, s, user, decide::TRY_AGAIN.to_owned()),
    };
    match c.gate.connector_first_seen(CHAT, &format!("m:{ts}")).await {
        Ok(true) => {}
        Ok(false) => return,
        Err(_) => return tell(c, s, user, decide::TRY_AGAIN.to_owned()),
    }
    let answer = if decide::is_approver(&s.s.approvers, user) {
        decide::reply(&c.gate, format!("{CHAT}:{user}"), &item, text, fits).await
    } else {
        NOT_AN_APPROVER.to_owned()
    };
    if !decide::shown_by_the_edit(&answer) {
        tell(c, s, user, answer);
    }
}
