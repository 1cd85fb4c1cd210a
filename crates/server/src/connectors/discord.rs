//! Discord (HTTP API v10): a channel message with button components,
//! edited on the outcome (its components removed). Clicks arrive at
//! `/v1/connectors/discord/interactions`, signed with Ed25519 over the
//! timestamp and body (`X-Signature-Ed25519`, `X-Signature-Timestamp`),
//! and are answered with an ephemeral message.

use ed25519_dalek::{Signature, VerifyingKey};
use reqwest::Method;
use serde_json::{Value, json};

use super::card::{Card, cut};
use super::decide::{self, NOT_AN_APPROVER, Verb};
use super::http::{CallError, Http};
use super::{Connectors, Kind};
use crate::config::DiscordSettings;

/// The chat key of Discord's messages.
pub const CHAT: &str = "discord";
/// A message's content holds at most 2000 characters.
const MAX_TEXT: usize = 1900;
/// Interactions signed longer ago than this are refused.
pub const WINDOW_SECS: i64 = 300;
/// Message flag: only the clicking user sees the answer.
const EPHEMERAL: u64 = 64;

/// A configured Discord application.
pub struct Discord {
    s: DiscordSettings,
    key: VerifyingKey,
}

impl Discord {
    /// The application of `s`; its public key must be valid.
    pub fn new(s: DiscordSettings) -> anyhow::Result<Discord> {
        let bytes: [u8; 32] = hex::decode(&s.public_key)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| anyhow::anyhow!("connectors.discord.public_key: 64 hex digits"))?;
        let key = VerifyingKey::from_bytes(&bytes)
            .map_err(|_| anyhow::anyhow!("connectors.discord.public_key: not an Ed25519 key"))?;
        Ok(Discord { s, key })
    }

    fn auth(&self) -> String {
        format!("Bot {}", self.s.token)
    }

    fn messages_url(&self) -> String {
        format!(
            "{}/channels/{}/messages",
            self.s.api_base.trim_end_matches('/'),
            self.s.channel_id
        )
    }

    fn components(card: &Card) -> Value {
        if card.buttons.is_empty() {
            return json!([]);
        }
        let buttons: Vec<Value> = card
            .buttons
            .iter()
            .map(|v| {
                let style = match v {
                    Verb::Approve => 3,
                    Verb::Remember => 1,
                    Verb::Deny => 4,
                };
                json!({"type": 2, "style": style, "label": v.label(), "custom_id": v.button_id(&card.item)})
            })
            .collect();
        json!([{"type": 1, "components": buttons}])
    }

    /// Posts or edits `card`'s message; the message id of a post.
    pub async fn deliver(
        &self,
        http: &Http,
        kind: Kind,
        card: &Card,
        message_ref: Option<&str>,
    ) -> Result<Option<String>, CallError> {
        let body = json!({
            "content": cut(&card.text(), MAX_TEXT),
            "components": Self::components(card),
            "allowed_mentions": {"parse": []},
        });
        let auth = self.auth();
        match kind {
            Kind::Post => {
                let answer = http
                    .call(Method::POST, &self.messages_url(), Some(&auth), &body, None)
                    .await?;
                let id = answer
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| CallError::fatal("create message: no id"))?;
                Ok(Some(id.to_owned()))
            }
            Kind::Edit => {
                let id = message_ref.ok_or_else(|| CallError::fatal("no message to edit"))?;
                let url = format!("{}/{id}", self.messages_url());
                http.call(Method::PATCH, &url, Some(&auth), &body, None)
                    .await?;
                Ok(None)
            }
        }
    }

    /// Whether `body` was signed by Discord at `timestamp` (seconds),
    /// within the window around `now`.
    pub fn verify(&self, timestamp: &str, signature: &str, body: &[u8], now: i64) -> bool {
        let Ok(ts) = timestamp.parse::<i64>() else {
            return false;
        };
        if (now - ts).abs() > WINDOW_SECS {
            return false;
        }
        let Some(sig) = hex::decode(signature)
            .ok()
            .and_then(|b| <[u8; 64]>::try_from(b).ok())
        else {
            return false;
        };
        let mut message = timestamp.as_bytes().to_vec();
        message.extend_from_slice(body);
        self.key
            .verify_strict(&message, &Signature::from_bytes(&sig))
            .is_ok()
    }

    fn is_approver(&self, user: &str, roles: &[String]) -> bool {
        decide::is_approver(&self.s.approvers, user)
            || roles
                .iter()
                .any(|r| decide::is_approver(&self.s.approvers, r))
    }
}

fn ephemeral(text: &str) -> Value {
    json!({"type": 4, "data": {"content": text, "flags": EPHEMERAL}})
}

/// The answer to a verified interaction.
pub async fn handle_interaction(c: &Connectors, i: &Value) -> Value {
    let Some(d) = &c.discord else {
        return json!({"type": 1});
    };
    match i.get("type").and_then(Value::as_u64) {
        Some(1) => return json!({"type": 1}),
        Some(3) => {}
        _ => return ephemeral("Not handled."),
    }
    let id = i.get("id").and_then(Value::as_str).unwrap_or("");
    match c.gate.connector_first_seen(CHAT, id).await {
        Ok(true) => {}
        Ok(false) => return ephemeral("Already handled."),
        Err(_) => return ephemeral("Could not decide now; try again."),
    }
    let user = i
        .pointer("/member/user/id")
        .or_else(|| i.pointer("/user/id"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let roles: Vec<String> = i
        .pointer("/member/roles")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if c.notify_only {
        return ephemeral("Decisions are not taken here (notify-only).");
    }
    if !d.is_approver(&user, &roles) {
        return ephemeral(NOT_AN_APPROVER);
    }
    let custom = i
        .pointer("/data/custom_id")
        .and_then(Value::as_str)
        .unwrap_or("");
    match Verb::parse(custom) {
        Some((verb, item)) => {
            ephemeral(&decide::decide(&c.gate, format!("{CHAT}:{user}"), verb, item).await)
        }
        None => ephemeral("Unknown button."),
    }
}
