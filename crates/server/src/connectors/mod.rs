//! Chat connectors: pending items decided where the humans are (Telegram,
//! Slack, Discord, WhatsApp).
//!
//! Layout: what every chat shares is here ([`Connectors`]: the configured
//! chats and where each message goes), in [`card`] (rendering a pending
//! item with the page's masking rules), [`outbox`] (following the gate's
//! events into a durable queue of posts and outcome edits, and sending it
//! with retries) and [`decide`] (buttons and reply words, approvers, the
//! gate calls). Then one module per chat ([`telegram`], [`slack`],
//! [`discord`] with its Gateway websocket in [`gateway`], [`whatsapp`])
//! that speaks its API, and [`routes`] for the webhooks, whose signatures
//! are checked before anything is decided.
//!
//! Invariants: a decision from chat is the API's decision, made through the
//! gate as `Caller::human("<chat>:<user id>")`, only for a user on the
//! connector's approvers; the chats' APIs are called only from background
//! tasks, so a chat that is down or slow never slows a request to the gate;
//! each chat's messages are sent by a task of its own, so a chat that
//! hangs never holds up another's.

pub mod card;
pub mod decide;
pub mod discord;
pub mod gateway;
pub mod http;
pub mod outbox;
pub mod routes;
pub mod slack;
pub mod telegram;
pub mod undecided;
pub mod whatsapp;

use std::sync::Arc;
use std::time::Duration;

use actiongate_gate::Gate;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::config::{ConnectorsSettings, DiscordMode, TelegramMode};
use card::Card;
use http::{CallError, Http};

/// What an outgoing message does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A new message for a pending item.
    Post,
    /// The item's message shows its outcome (and loses its buttons).
    Edit,
}

/// The configured chats, shared by the background tasks and the webhooks.
pub struct Connectors {
    gate: Gate,
    http: Http,
    /// Discord's calls, named as Discord asks (`DiscordBot (url, version)`).
    discord_http: Http,
    /// What keeps a chat from working now, per chat (shown by `/readyz`).
    problems: std::sync::Mutex<std::collections::BTreeMap<String, String>>,
    notify_only: bool,
    telegram: Option<telegram::Telegram>,
    slack: Option<slack::Slack>,
    discord: Option<discord::Discord>,
    whatsapp: Option<whatsapp::WhatsApp>,
    /// Poked when a message is queued.
    wake: Notify,
    /// The chats (`telegram`, `slack`, `discord`, `whatsapp`) of tier 2:
    /// told only of escalated actions.
    tier2: Vec<&'static str>,
    /// Runs nobody decided, grouped into one message per agent and session.
    undecided: undecided::UndecidedRuns,
}

impl Connectors {
    /// The connectors `settings` turn on; `None` when none is.
    pub fn new(
        gate: Gate,
        settings: &ConnectorsSettings,
    ) -> anyhow::Result<Option<Arc<Connectors>>> {
        if !settings.any() {
            return Ok(None);
        }
        let on = |token: &str| !token.is_empty();
        Ok(Some(Arc::new(Connectors {
            gate,
            http: Http::new(Duration::from_secs(settings.timeout_seconds))?,
            discord_http: Http::with_user_agent(
                Duration::from_secs(settings.timeout_seconds),
                discord::USER_AGENT,
            )?,
            problems: Default::default(),
            notify_only: settings.notify_only,
            telegram: on(&settings.telegram.token)
                .then(|| telegram::Telegram::new(settings.telegram.clone())),
            slack: on(&settings.slack.token).then(|| slack::Slack::new(settings.slack.clone())),
            discord: on(&settings.discord.token)
                .then(|| discord::Discord::new(settings.discord.clone()))
                .transpose()?,
            whatsapp: on(&settings.whatsapp.access_token)
                .then(|| whatsapp::WhatsApp::new(settings.whatsapp.clone())),
            wake: Notify::new(),
            tier2: [
                (telegram::CHAT, settings.telegram.tier),
                (slack::CHAT, settings.slack.tier),
                (discord::CHAT, settings.discord.tier),
                ("whatsapp", settings.whatsapp.tier),
            ]
            .into_iter()
            .filter(|(_, tier)| *tier == 2)
            .map(|(chat, _)| chat)
            .collect(),
            undecided: undecided::UndecidedRuns::default(),
        })))
    }

    /// Starts the background tasks: the event follower, the sender and,
    /// per chat, what receives its updates. They end with the gate's
    /// shutdown token.
    pub fn spawn(self: &Arc<Self>) -> Vec<JoinHandle<()>> {
        let mut tasks = vec![
            tokio::spawn(outbox::follow(self.clone())),
            tokio::spawn(outbox::send(self.clone())),
        ];
        if let Some(t) = &self.telegram {
            tasks.push(match t.mode() {
                TelegramMode::Poll => tokio::spawn(telegram::poll(self.clone())),
                TelegramMode::Webhook => tokio::spawn(telegram::set_webhook(self.clone())),
            });
        }
        if let Some(d) = &self.discord
            && d.mode() == DiscordMode::Gateway
        {
            tasks.push(tokio::spawn(gateway::run(self.clone())));
        }
        tasks
    }

    /// The gate.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// Whether messages go without buttons and nothing is decided from chat.
    pub fn notify_only(&self) -> bool {
        self.notify_only
    }

    /// What keeps a chat from working now (`chat` → what), as `/readyz`
    /// shows it.
    pub fn problems(&self) -> std::collections::BTreeMap<String, String> {
        self.problems.lock().map(|p| p.clone()).unwrap_or_default()
    }

    /// Records (`Some`) or clears (`None`) what keeps `chat` from working.
    fn set_problem(&self, chat: &str, problem: Option<String>) {
        if let Ok(mut p) = self.problems.lock() {
            match problem {
                Some(what) => p.insert(chat.to_owned(), what),
                None => p.remove(chat),
            };
        }
    }

    /// Every chat a message of an item goes to.
    pub fn destinations(&self) -> Vec<String> {
        let mut d = Vec::new();
        if self.telegram.is_some() {
            d.push(telegram::CHAT.to_owned());
        }
        if self.slack.is_some() {
            d.push(slack::CHAT.to_owned());
        }
        if self.discord.is_some() {
            d.push(discord::CHAT.to_owned());
        }
        if let Some(w) = &self.whatsapp {
            d.extend(w.destinations());
        }
        d
    }

    /// The chats in which `p` is told directly, one per chat connector
    /// that is on and for which they have an identity: `telegram:<user
    /// id>` (the bot's private chat), `slack:<user id>` and
    /// `discord:<user id>` (direct messages), `whatsapp:<number>`.
    pub fn person_chats(&self, p: &actiongate_api::teams::Person) -> Vec<String> {
        let mut chats = Vec::new();
        let ids = [
            (self.telegram.is_some(), telegram::CHAT, &p.chat.telegram),
            (self.slack.is_some(), slack::CHAT, &p.chat.slack),
            (self.discord.is_some(), discord::CHAT, &p.chat.discord),
            (self.whatsapp.is_some(), "whatsapp", &p.chat.whatsapp),
        ];
        for (on, chat, id) in ids {
            if let (true, Some(id)) = (on, id) {
                chats.push(format!("{chat}:{id}"));
            }
        }
        chats
    }

    /// The chats of `tier` a message of an item goes to: tier 1 those told
    /// of every pending action, tier 2 those told only of escalated ones.
    pub fn destinations_of(&self, tier: u8) -> Vec<String> {
        self.destinations()
            .into_iter()
            .filter(|chat| {
                let kind = chat.split(':').next().unwrap_or(chat);
                self.tier2.contains(&kind) == (tier == 2)
            })
            .collect()
    }

    /// Sends one outgoing message to `chat`; the chat's message id of a
    /// post. `again`: a post tried before, whose answer may have been lost
    /// after the chat took it.
    async fn deliver(
        &self,
        chat: &str,
        kind: Kind,
        card: &Card,
        message_ref: Option<&str>,
        again: bool,
    ) -> Result<Option<String>, CallError> {
        let off = || CallError::fatal(format!("connector {chat} is not configured"));
        let person = |chat: &str, kind: &str| {
            chat.strip_prefix(kind)
                .and_then(|rest| rest.strip_prefix(':'))
                .map(str::to_owned)
        };
        if chat == telegram::CHAT {
            let t = self.telegram.as_ref().ok_or_else(off)?;
            let made = t.deliver(&self.http, None, kind, card, message_ref).await?;
            if again && let Some(id) = made.as_deref().and_then(|m| m.parse().ok()) {
                telegram::void_lost_copies(self, t, id).await;
            }
            Ok(made)
        } else if let Some(user) = person(chat, telegram::CHAT) {
            let t = self.telegram.as_ref().ok_or_else(off)?;
            t.deliver(&self.http, Some(&user), kind, card, message_ref)
                .await
        } else if chat == slack::CHAT {
            let s = self.slack.as_ref().ok_or_else(off)?;
            s.deliver(&self.http, kind, card, message_ref, again).await
        } else if let Some(user) = person(chat, slack::CHAT) {
            let s = self.slack.as_ref().ok_or_else(off)?;
            s.deliver_to(&self.http, &user, kind, card, message_ref)
                .await
        } else if chat == discord::CHAT {
            let d = self.discord.as_ref().ok_or_else(off)?;
            d.deliver(&self.discord_http, kind, card, message_ref).await
        } else if let Some(user) = person(chat, discord::CHAT) {
            let d = self.discord.as_ref().ok_or_else(off)?;
            d.deliver_to(&self.discord_http, &user, kind, card, message_ref)
                .await
        } else if let Some(to) = chat.strip_prefix(whatsapp::PREFIX) {
            let w = self.whatsapp.as_ref().ok_or_else(off)?;
            w.deliver(&self.http, to, kind, card, message_ref).await
        } else {
            Err(off())
        }
    }

    /// Sends a short notice now, outside the queue (an alert to a tap, an
    /// answer to a reply): in its own task, so that nothing waits for it.
    fn notice<F>(&self, what: &'static str, call: F)
    where
        F: std::future::Future<Output = Result<serde_json::Value, CallError>> + Send + 'static,
    {
        tokio::spawn(async move {
            if let Err(e) = call.await {
                tracing::warn!(what, error = %e.message, "a chat notice was not sent");
            }
        });
    }
}
