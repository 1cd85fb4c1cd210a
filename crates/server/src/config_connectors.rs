//! `[connectors.*]`: the chats where pending items are decided (Telegram,
//! Slack, Discord, WhatsApp). A connector is on when its token is set.
//! Lists (`approvers`) are TOML arrays, or comma-separated in the
//! environment; ids may be written as numbers or strings.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

/// Outgoing chat messages a sender reads (and, on Postgres, takes) at once,
/// then sends one after another.
pub const OUTBOX_BATCH: u32 = 16;

/// Every chat connector.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ConnectorsSettings {
    /// Telegram (Bot API).
    pub telegram: TelegramSettings,
    /// Slack (Web API and interactivity).
    pub slack: SlackSettings,
    /// Discord (HTTP API; the Gateway or the interactions endpoint).
    pub discord: DiscordSettings,
    /// WhatsApp (Cloud API).
    pub whatsapp: WhatsAppSettings,
    /// `true`: messages carry no buttons and replies decide nothing.
    pub notify_only: bool,
    /// Seconds an outgoing call to a chat API may take.
    pub timeout_seconds: u64,
}

impl ConnectorsSettings {
    /// The longest a sender's batch of chat calls can take.
    pub fn batch_time(&self) -> Duration {
        Duration::from_secs(self.timeout_seconds) * OUTBOX_BATCH
    }
}

impl Default for ConnectorsSettings {
    fn default() -> Self {
        ConnectorsSettings {
            telegram: TelegramSettings::default(),
            slack: SlackSettings::default(),
            discord: DiscordSettings::default(),
            whatsapp: WhatsAppSettings::default(),
            notify_only: false,
            timeout_seconds: 10,
        }
    }
}

/// How Telegram's updates arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TelegramMode {
    /// `getUpdates` long polling (works behind NAT).
    #[default]
    Poll,
    /// Telegram POSTs them to `/v1/connectors/telegram/webhook`.
    Webhook,
}

/// `[connectors.telegram]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelegramSettings {
    /// The bot token from BotFather; empty: off.
    #[serde(deserialize_with = "text")]
    pub token: String,
    /// The chat the messages go to.
    #[serde(deserialize_with = "text")]
    pub chat_id: String,
    /// User ids whose taps and replies decide.
    #[serde(deserialize_with = "list")]
    pub approvers: Vec<String>,
    /// The Bot API's base URL.
    pub api_base: String,
    /// `poll` or `webhook`.
    pub mode: TelegramMode,
    /// Webhook mode: the public URL of `/v1/connectors/telegram/webhook`.
    pub webhook_url: String,
    /// Webhook mode: the secret Telegram sends back in
    /// `X-Telegram-Bot-Api-Secret-Token`.
    #[serde(deserialize_with = "text")]
    pub webhook_secret: String,
    /// Poll mode: seconds one `getUpdates` waits.
    pub poll_seconds: u64,
    /// Escalation tier: 1 (default) is told of every pending action; 2 only
    /// of actions escalated for want of a decision (`docs/teams.md`).
    pub tier: u8,
}

impl Default for TelegramSettings {
    fn default() -> Self {
        TelegramSettings {
            tier: 1,
            token: String::new(),
            chat_id: String::new(),
            approvers: Vec::new(),
            api_base: "https://api.telegram.org".to_owned(),
            mode: TelegramMode::Poll,
            webhook_url: String::new(),
            webhook_secret: String::new(),
            poll_seconds: 25,
        }
    }
}

/// `[connectors.slack]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SlackSettings {
    /// The bot token (`xoxb-…`); empty: off.
    #[serde(deserialize_with = "text")]
    pub token: String,
    /// The channel id the messages go to.
    #[serde(deserialize_with = "text")]
    pub channel: String,
    /// The app's signing secret (checks interactivity requests).
    #[serde(deserialize_with = "text")]
    pub signing_secret: String,
    /// Slack user ids whose clicks decide.
    #[serde(deserialize_with = "list")]
    pub approvers: Vec<String>,
    /// The Web API's base URL.
    pub api_base: String,
    /// Escalation tier: 1 (default) is told of every pending action; 2 only
    /// of actions escalated for want of a decision (`docs/teams.md`).
    pub tier: u8,
}

impl Default for SlackSettings {
    fn default() -> Self {
        SlackSettings {
            tier: 1,
            token: String::new(),
            channel: String::new(),
            signing_secret: String::new(),
            approvers: Vec::new(),
            api_base: "https://slack.com/api".to_owned(),
        }
    }
}

/// How Discord's interactions (button clicks) arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DiscordMode {
    /// Over the Gateway websocket the daemon opens (works behind NAT);
    /// replies in words arrive there too.
    #[default]
    Gateway,
    /// Discord POSTs them to `/v1/connectors/discord/interactions` (the
    /// application's Interactions Endpoint URL); no websocket, so replies
    /// in words are not read.
    Http,
}

/// `[connectors.discord]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DiscordSettings {
    /// The bot token; empty: off.
    #[serde(deserialize_with = "text")]
    pub token: String,
    /// The channel id the messages go to.
    #[serde(deserialize_with = "text")]
    pub channel_id: String,
    /// User ids or role ids whose clicks and replies decide.
    #[serde(deserialize_with = "list")]
    pub approvers: Vec<String>,
    /// `gateway` or `http`.
    pub mode: DiscordMode,
    /// Gateway mode: the websocket URL; empty: asked of `GET
    /// /gateway/bot`.
    pub gateway_url: String,
    /// The application's public key (hex), which checks requests to the
    /// interactions endpoint; needed in `http` mode.
    #[serde(deserialize_with = "text")]
    pub public_key: String,
    /// The HTTP API's base URL.
    pub api_base: String,
    /// Escalation tier: 1 (default) is told of every pending action; 2 only
    /// of actions escalated for want of a decision (`docs/teams.md`).
    pub tier: u8,
}

impl Default for DiscordSettings {
    fn default() -> Self {
        DiscordSettings {
            tier: 1,
            token: String::new(),
            channel_id: String::new(),
            approvers: Vec::new(),
            mode: DiscordMode::Gateway,
            gateway_url: String::new(),
            public_key: String::new(),
            api_base: "https://discord.com/api/v10".to_owned(),
        }
    }
}

/// `[connectors.whatsapp]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WhatsAppSettings {
    /// The Cloud API access token; empty: off.
    #[serde(deserialize_with = "text")]
    pub access_token: String,
    /// The sending phone number's id.
    #[serde(deserialize_with = "text")]
    pub phone_number_id: String,
    /// Phone numbers (international, digits) that are sent each item and
    /// whose replies decide.
    #[serde(deserialize_with = "list")]
    pub approvers: Vec<String>,
    /// The Meta app's secret (checks `X-Hub-Signature-256`).
    #[serde(deserialize_with = "text")]
    pub app_secret: String,
    /// What the webhook's GET verification must present.
    #[serde(deserialize_with = "text")]
    pub verify_token: String,
    /// The Graph API's base URL (with its version).
    pub api_base: String,
    /// Escalation tier: 1 (default) is told of every pending action; 2 only
    /// of actions escalated for want of a decision (`docs/teams.md`).
    pub tier: u8,
}

impl Default for WhatsAppSettings {
    fn default() -> Self {
        WhatsAppSettings {
            tier: 1,
            access_token: String::new(),
            phone_number_id: String::new(),
            approvers: Vec::new(),
            app_secret: String::new(),
            verify_token: String::new(),
            api_base: "https://graph.facebook.com/v21.0".to_owned(),
        }
    }
}

impl ConnectorsSettings {
    /// Whether any connector is on.
    pub fn any(&self) -> bool {
        !self.telegram.token.is_empty()
            || !self.slack.token.is_empty()
            || !self.discord.token.is_empty()
            || !self.whatsapp.access_token.is_empty()
    }

    /// Checks that each connector that is on has what it needs.
    pub fn check(&self) -> anyhow::Result<()> {
        let t = &self.telegram;
        if !t.token.is_empty() {
            need("telegram", "chat_id", &t.chat_id)?;
            base("telegram", &t.api_base)?;
            if t.mode == TelegramMode::Webhook {
                need("telegram", "webhook_url", &t.webhook_url)?;
                let ok = (16..=256).contains(&t.webhook_secret.len())
                    && t.webhook_secret
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                if !ok {
                    anyhow::bail!(
                        "connectors.telegram.webhook_secret: 16-256 characters of A-Z, a-z, 0-9, _ and - in webhook mode"
                    );
                }
            }
            if !(1..=50).contains(&t.poll_seconds) {
                anyhow::bail!("connectors.telegram.poll_seconds: 1-50");
            }
        }
        let s = &self.slack;
        if !s.token.is_empty() {
            need("slack", "channel", &s.channel)?;
            need("slack", "signing_secret", &s.signing_secret)?;
            base("slack", &s.api_base)?;
        }
        let d = &self.discord;
        if !d.token.is_empty() {
            need("discord", "channel_id", &d.channel_id)?;
            base("discord", &d.api_base)?;
            if d.mode == DiscordMode::Http || !d.public_key.is_empty() {
                let key = hex::decode(&d.public_key).ok().filter(|k| k.len() == 32);
                if key.is_none() {
                    anyhow::bail!(
                        "connectors.discord.public_key: the application's public key, 64 hex digits (needed in http mode)"
                    );
                }
            }
            let ws = d.gateway_url.starts_with("wss://") || d.gateway_url.starts_with("ws://");
            if !d.gateway_url.is_empty() && !ws {
                anyhow::bail!("connectors.discord.gateway_url: a ws(s) URL, or empty");
            }
        }
        let w = &self.whatsapp;
        if !w.access_token.is_empty() {
            need("whatsapp", "phone_number_id", &w.phone_number_id)?;
            need("whatsapp", "app_secret", &w.app_secret)?;
            need("whatsapp", "verify_token", &w.verify_token)?;
            base("whatsapp", &w.api_base)?;
            if w.approvers.is_empty() {
                anyhow::bail!("connectors.whatsapp.approvers: the phone numbers messages go to");
            }
        }
        for (chat, tier) in [
            ("telegram", t.tier),
            ("slack", s.tier),
            ("discord", d.tier),
            ("whatsapp", w.tier),
        ] {
            if !(1..=2).contains(&tier) {
                anyhow::bail!(
                    "connectors.{chat}.tier: 1 (every pending action) or 2 (escalated ones)"
                );
            }
        }
        if !(1..=120).contains(&self.timeout_seconds) {
            anyhow::bail!("connectors.timeout_seconds: 1-120");
        }
        Ok(())
    }
}

fn need(chat: &str, key: &str, value: &str) -> anyhow::Result<()> {
    if value.trim().is_empty() {
        anyhow::bail!("connectors.{chat}.{key}: needed when connectors.{chat} is on");
    }
    Ok(())
}

fn base(chat: &str, url: &str) -> anyhow::Result<()> {
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        anyhow::bail!("connectors.{chat}.api_base: an http(s) URL");
    }
    Ok(())
}

/// A text or a number, as text (the environment turns digits into numbers).
#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar {
    Text(String),
    Int(i64),
    Uint(u64),
}

impl Scalar {
    fn into_text(self) -> String {
        match self {
            Scalar::Text(s) => s,
            Scalar::Int(n) => n.to_string(),
            Scalar::Uint(n) => n.to_string(),
        }
    }
}

fn text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Scalar::deserialize(d)?.into_text())
}

/// A list, or one comma-separated text (the environment's form).
fn list<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Form {
        Many(Vec<Scalar>),
        One(Scalar),
    }
    let items = match Form::deserialize(d)? {
        Form::Many(v) => v.into_iter().map(Scalar::into_text).collect(),
        Form::One(s) => s
            .into_text()
            .split(',')
            .map(|p| p.trim().to_owned())
            .collect::<Vec<_>>(),
    };
    Ok(items.into_iter().filter(|s| !s.is_empty()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn telegram(f: impl FnOnce(&mut TelegramSettings)) -> ConnectorsSettings {
        let mut s = ConnectorsSettings::default();
        s.telegram.token = "1:x".into();
        s.telegram.chat_id = "-1".into();
        f(&mut s.telegram);
        s
    }

    #[test]
    fn what_each_connector_needs_is_checked() {
        assert!(ConnectorsSettings::default().check().is_ok());
        assert!(!ConnectorsSettings::default().any());
        assert!(telegram(|_| {}).check().is_ok());
        assert!(telegram(|t| t.chat_id.clear()).check().is_err());
        let webhook = |secret: &str| {
            let secret = secret.to_owned();
            telegram(move |t| {
                t.mode = TelegramMode::Webhook;
                t.webhook_url = "https://gate.example/v1/connectors/telegram/webhook".into();
                t.webhook_secret = secret;
            })
        };
        assert!(webhook("short").check().is_err());
        assert!(webhook("has spaces in it, sixteen+").check().is_err());
        assert!(webhook("a-good_secret-0123456789").check().is_ok());
        let mut d = ConnectorsSettings::default();
        d.discord.token = "t".into();
        d.discord.channel_id = "1".into();
        d.discord.public_key = "00".into();
        assert!(d.check().is_err());
        d.discord.public_key.clear();
        assert!(d.check().is_ok(), "the gateway needs no public key");
        d.discord.mode = DiscordMode::Http;
        assert!(d.check().is_err(), "the interactions endpoint does");
        d.discord.mode = DiscordMode::Gateway;
        d.discord.gateway_url = "https://gateway.discord.gg".into();
        assert!(d.check().is_err());
    }
}
