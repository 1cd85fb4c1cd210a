//! Discord (HTTP API v10): a channel message with button components,
//! edited on the outcome (its components removed). Clicks arrive over the
//! Gateway websocket ([`super::gateway`], the default, which also brings
//! replies in words) or at `/v1/connectors/discord/interactions`, signed
//! with Ed25519 over the timestamp and body (`X-Signature-Ed25519`,
//! `X-Signature-Timestamp`); either way they are answered with an
//! ephemeral message, seen only by the clicker.

use std::sync::Arc;

use ed25519_dalek::{Signature, VerifyingKey};
use reqwest::Method;
use serde_json::{Value, json};

use super::card::{Card, cut};
use super::decide::{self, NOT_AN_APPROVER, Verb};
use super::http::{CallError, Http};
use super::{Connectors, Kind};
use crate::config::{DiscordMode, DiscordSettings};

/// Discord's message flag that draws no embed for a message's links.
const SUPPRESS_EMBEDS: u64 = 1 << 2;

/// The `User-Agent` Discord asks of a bot: `DiscordBot ($url, $versionNumber)`.
pub const USER_AGENT: &str = concat!(
    "DiscordBot (",
    env!("CARGO_PKG_REPOSITORY"),
    ", ",
    env!("CARGO_PKG_VERSION"),
    ")"
);

/// The chat key of Discord's messages.
pub const CHAT: &str = "discord";
/// A message's content holds at most 2000 characters.
const MAX_TEXT: usize = 1900;
/// Discord refuses a message's content longer than this.
const MAX_CONTENT: usize = 2000;
/// Interactions signed longer ago than this are refused.
pub const WINDOW_SECS: i64 = 300;
/// Message flag: only the clicking user sees the answer.
const EPHEMERAL: u64 = 64;
/// Interactions and messages from the Gateway created longer ago than this
/// decide nothing (an interaction's token lasts 15 minutes; a replay after
/// a long outage must not approve what nobody looks at any more).
const STALE_MS: i64 = 10 * 60 * 1000;
/// Discord's epoch (2015-01-01), in milliseconds: snowflake ids count from
/// it.
const DISCORD_EPOCH_MS: i64 = 1_420_070_400_000;

/// Whether Discord shows `text` whole in a card (escaped, within its
/// limit).
pub fn fits(text: &str) -> bool {
    text.chars().count() <= MAX_TEXT
        && markdown_escaped(text, usize::MAX).chars().count() <= MAX_CONTENT
}

/// A configured Discord application.
pub struct Discord {
    pub(super) s: DiscordSettings,
    key: Option<VerifyingKey>,
}

impl Discord {
    /// The application of `s`; its public key, when given, must be valid.
    pub fn new(s: DiscordSettings) -> anyhow::Result<Discord> {
        let key = if s.public_key.is_empty() {
            None
        } else {
            let bytes: [u8; 32] = hex::decode(&s.public_key)
                .ok()
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| anyhow::anyhow!("connectors.discord.public_key: 64 hex digits"))?;
            Some(VerifyingKey::from_bytes(&bytes).map_err(|_| {
                anyhow::anyhow!("connectors.discord.public_key: not an Ed25519 key")
            })?)
        };
        Ok(Discord { s, key })
    }

    /// How interactions arrive.
    pub fn mode(&self) -> DiscordMode {
        self.s.mode
    }

    /// Whether the interactions endpoint can check signatures (a public
    /// key is configured).
    pub fn takes_http_interactions(&self) -> bool {
        self.key.is_some()
    }

    pub(super) fn auth(&self) -> String {
        format!("Bot {}", self.s.token)
    }

    pub(super) fn api(&self, path: &str) -> String {
        format!("{}{path}", self.s.api_base.trim_end_matches('/'))
    }

    fn messages_url(&self) -> String {
        self.api(&format!("/channels/{}/messages", self.s.channel_id))
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
                    Verb::Remember | Verb::Task => 1,
                    Verb::Deny => 4,
                };
                json!({"type": 2, "style": style, "label": v.label(), "custom_id": v.button_id(&card.item)})
            })
            .collect();
        json!([{"type": 1, "components": buttons}])
    }

    /// Posts or edits `card`'s message in the bot's direct messages with
    /// `user` (a Discord user id): the DM channel is opened (Discord
    /// answers with the same one each time), and the reference kept is
    /// `<channel> <message>` so the edit finds it.
    pub async fn deliver_to(
        &self,
        http: &Http,
        user: &str,
        kind: Kind,
        card: &Card,
        message_ref: Option<&str>,
    ) -> Result<Option<String>, CallError> {
        let card = &card.clone().fit(fits);
        let body = json!({
            "content": markdown_escaped(&cut(&card.text(), MAX_TEXT), MAX_CONTENT),
            "components": Self::components(card),
            "allowed_mentions": {"parse": []},
            // No embed of an agent's link under what an approver decides on.
            "flags": SUPPRESS_EMBEDS,
        });
        let auth = self.auth();
        match kind {
            Kind::Post => {
                let dm = http
                    .call(
                        Method::POST,
                        &self.api("/users/@me/channels"),
                        Some(&auth),
                        &json!({"recipient_id": user}),
                        None,
                    )
                    .await?;
                let channel = dm
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| CallError::fatal("create DM: no id"))?
                    .to_owned();
                let mut body = body;
                body["nonce"] = json!(nonce(&card.item));
                body["enforce_nonce"] = json!(true);
                let url = self.api(&format!("/channels/{channel}/messages"));
                let answer = http
                    .call(Method::POST, &url, Some(&auth), &body, None)
                    .await?;
                let id = answer
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| CallError::fatal("create message: no id"))?;
                Ok(Some(format!("{channel} {id}")))
            }
            Kind::Edit => {
                let (channel, id) = message_ref
                    .and_then(|r| r.split_once(' '))
                    .ok_or_else(|| CallError::fatal("no message to edit"))?;
                let url = self.api(&format!("/channels/{channel}/messages/{id}"));
                http.call(Method::PATCH, &url, Some(&auth), &body, None)
                    .await?;
                Ok(None)
            }
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
        let body = json!({
            "content": markdown_escaped(&cut(&card.text(), MAX_TEXT), MAX_CONTENT),
            "components": Self::components(card),
            "allowed_mentions": {"parse": []},
            // No embed of an agent's link under what an approver decides on.
            "flags": SUPPRESS_EMBEDS,
        });
        let auth = self.auth();
        match kind {
            Kind::Post => {
                // Posted again after a lost answer, the same nonce makes
                // Discord answer with the message made the first time.
                let mut body = body;
                body["nonce"] = json!(nonce(&card.item));
                body["enforce_nonce"] = json!(true);
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
        if now.abs_diff(ts) > WINDOW_SECS.unsigned_abs() {
            return false;
        }
        let Some(sig) = hex::decode(signature)
            .ok()
            .and_then(|b| <[u8; 64]>::try_from(b).ok())
        else {
            return false;
        };
        let Some(key) = &self.key else {
            return false;
        };
        let mut message = timestamp.as_bytes().to_vec();
        message.extend_from_slice(body);
        key.verify_strict(&message, &Signature::from_bytes(&sig))
            .is_ok()
    }

    fn is_approver(&self, user: &str, roles: &[String]) -> bool {
        decide::is_approver(&self.s.approvers, user)
            || roles
                .iter()
                .any(|r| decide::is_approver(&self.s.approvers, r))
    }
}

/// The nonce of `item`'s message: Discord takes at most 25 characters,
/// so the first 25 hex digits of the item's SHA-256.
pub fn nonce(item: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut n = hex::encode(Sha256::digest(item.as_bytes()));
    n.truncate(25);
    n
}

/// Characters Discord's markdown reads anywhere in a message: emphasis,
/// underline, strike-through, spoilers, code, mentions and timestamps
/// (`<@id>`, `<t:0>`), quotes, masked links (`[text](url)`), headings.
const MARKDOWN: &[char] = &['\\', '*', '_', '~', '`', '|', '<', '>', '[', ']', '#'];

/// `text` as Discord shows it literally: every markdown character escaped
/// with a backslash (Discord shows `\*` as `*`), and so is what makes a line
/// a list item (`- `, `+ `, `1. `); a message's content is markdown, and
/// what an agent wrote must not be shown as something else (a link whose
/// text is another URL, `*` eaten by emphasis, a spoiler that hides a
/// part). Cut to at most `max` characters, never inside an escape.
fn markdown_escaped(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    let mut count = 0;
    let mut line_start = true;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let list_mark = line_start
            && (matches!(c, '-' | '+')
                || (c.is_ascii_digit() && {
                    let word: String = chars.clone().take_while(|d| !d.is_whitespace()).collect();
                    let tail = word.trim_start_matches(|d: char| d.is_ascii_digit());
                    tail == "." || tail == ")"
                }));
        if list_mark && c.is_ascii_digit() {
            // `1.` becomes `1\.`: the digits as they are, the mark escaped.
            let mut digits = String::from(c);
            while let Some(d) = chars.next_if(|d| d.is_ascii_digit()) {
                digits.push(d);
            }
            let mark = chars.next().unwrap_or('.');
            let piece = format!("{digits}\\{mark}");
            if count + piece.chars().count() > max.saturating_sub(1) {
                out.push('…');
                return out;
            }
            count += piece.chars().count();
            out.push_str(&piece);
            line_start = false;
            continue;
        }
        let escape = MARKDOWN.contains(&c) || list_mark;
        let width = if escape { 2 } else { 1 };
        // The last character may take the place of the ellipsis.
        let room = if chars.peek().is_some() {
            max.saturating_sub(1)
        } else {
            max
        };
        if count + width > room {
            out.push('…');
            return out;
        }
        if escape {
            out.push('\\');
        }
        out.push(c);
        count += width;
        if c == '\n' {
            line_start = true;
        } else if !c.is_whitespace() {
            line_start = false;
        }
    }
    out
}

/// An answer only the clicker sees.
pub fn ephemeral(text: &str) -> Value {
    json!({"type": 4, "data": {"content": text, "flags": EPHEMERAL}})
}

/// What a click made more than [`STALE_MS`] before it arrived is answered.
pub const STALE_CLICK: &str = "This click is too old to decide anything: click again.";

/// The answer to a verified interaction; `None` for one handled before
/// (delivered again).
pub async fn handle_interaction(c: &Connectors, i: &Value) -> Option<Value> {
    let Some(d) = &c.discord else {
        return Some(json!({"type": 1}));
    };
    match i.get("type").and_then(Value::as_u64) {
        Some(1) => return Some(json!({"type": 1})),
        Some(3) => {}
        _ => return Some(ephemeral("Not handled.")),
    }
    let id = i.get("id").and_then(Value::as_str).unwrap_or("");
    // As on the Gateway: a click made long before it arrives decides
    // nothing (the id says when it was made; the signature's window only
    // says when it was sent).
    if !fresh(id) {
        tracing::info!("a stale discord interaction decides nothing");
        return Some(ephemeral(STALE_CLICK));
    }
    match c.gate.connector_first_seen(CHAT, id).await {
        Ok(true) => {}
        Ok(false) => return None,
        Err(_) => return Some(ephemeral(decide::TRY_AGAIN)),
    }
    Some(answer_click(c, d, i).await)
}

/// The answer to a click seen for the first time.
async fn answer_click(c: &Connectors, d: &Discord, i: &Value) -> Value {
    let user = i
        .pointer("/member/user/id")
        .or_else(|| i.pointer("/user/id"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let roles = roles_of(i);
    let custom = i
        .pointer("/data/custom_id")
        .and_then(Value::as_str)
        .unwrap_or("");
    // The message clicked may be a copy nobody knew of (Discord keeps a
    // nonce only for minutes): edited with the outcome too.
    let channel = i
        .get("channel_id")
        .or_else(|| i.pointer("/message/channel_id"))
        .and_then(Value::as_str);
    if let (true, Some(mid), Some((_, item))) = (
        channel == Some(d.s.channel_id.as_str()),
        i.pointer("/message/id").and_then(Value::as_str),
        Verb::parse(custom),
    ) {
        super::outbox::learned(c, CHAT, item, mid).await;
    }
    if c.notify_only {
        return ephemeral("Decisions are not taken here (notify-only).");
    }
    if !d.is_approver(&user, &roles) {
        return ephemeral(NOT_AN_APPROVER);
    }
    match Verb::parse(custom) {
        Some((verb, item)) => {
            ephemeral(&decide::decide(&c.gate, format!("{CHAT}:{user}"), verb, item, fits).await)
        }
        None => ephemeral("Unknown button."),
    }
}

/// The role ids of the member who sent `v` (an interaction or a message).
fn roles_of(v: &Value) -> Vec<String> {
    v.pointer("/member/roles")
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// How long ago (ms) snowflake `id` was made, at `now_ms`; `None` when
/// it is not a snowflake.
pub fn age_ms(id: &str, now_ms: i64) -> Option<i64> {
    let n: u64 = id.parse().ok()?;
    let made = i64::try_from(n >> 22).ok()? + DISCORD_EPOCH_MS;
    Some(now_ms - made)
}

/// Whether `id` was made within [`STALE_MS`] of now.
fn fresh(id: &str) -> bool {
    let now = chrono::Utc::now().timestamp_millis();
    age_ms(id, now).is_some_and(|age| age <= STALE_MS)
}

/// Whether `s` may stand in a URL path as one segment (ids and tokens).
fn path_safe(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 512
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s != "."
        && s != ".."
}

/// An interaction from the Gateway (`INTERACTION_CREATE`): decided as one
/// at the endpoint, answered through the interaction callback endpoint.
pub async fn on_gateway_interaction(c: Arc<Connectors>, i: Value) {
    let Some(d) = &c.discord else { return };
    let id = i.get("id").and_then(Value::as_str).unwrap_or("");
    let token = i.get("token").and_then(Value::as_str).unwrap_or("");
    if !path_safe(id) || !path_safe(token) {
        return;
    }
    if !fresh(id) {
        tracing::info!("a stale discord interaction decides nothing");
        return;
    }
    let Some(answer) = handle_interaction(&c, &i).await else {
        return;
    };
    let url = d.api(&format!("/interactions/{id}/{token}/callback"));
    let http = c.discord_http.clone();
    c.notice("discord interaction callback", async move {
        http.call(Method::POST, &url, None, &answer, None).await
    });
}

/// A message from the Gateway (`MESSAGE_CREATE`): a reply to an item's
/// message with reply words decides it, by an approver.
pub async fn on_gateway_message(c: Arc<Connectors>, m: Value) {
    let Some(d) = &c.discord else { return };
    let bot = m.pointer("/author/bot").and_then(Value::as_bool) == Some(true);
    if bot || m.get("webhook_id").is_some() || c.notify_only {
        return;
    }
    if m.get("channel_id").and_then(Value::as_str) != Some(d.s.channel_id.as_str()) {
        return;
    }
    let (Some(id), Some(to), Some(text)) = (
        m.get("id").and_then(Value::as_str),
        m.pointer("/message_reference/message_id")
            .and_then(Value::as_str),
        m.get("content").and_then(Value::as_str),
    ) else {
        return;
    };
    // Talk in the thread of replies is not for the gate.
    if decide::parse_reply(text).is_none() || !fresh(id) {
        return;
    }
    let item = match c.gate.connector_item_of(CHAT, to).await {
        Ok(Some(item)) => item,
        Ok(None) => return,
        Err(_) => return answer_reply(&c, d, id, decide::TRY_AGAIN),
    };
    match c.gate.connector_first_seen(CHAT, &format!("m:{id}")).await {
        Ok(true) => {}
        Ok(false) => return,
        Err(_) => return answer_reply(&c, d, id, decide::TRY_AGAIN),
    }
    let user = m
        .pointer("/author/id")
        .and_then(Value::as_str)
        .unwrap_or("");
    let answer = if d.is_approver(user, &roles_of(&m)) {
        decide::reply(&c.gate, format!("{CHAT}:{user}"), &item, text, fits).await
    } else {
        NOT_AN_APPROVER.to_owned()
    };
    if !decide::shown_by_the_edit(&answer) {
        answer_reply(&c, d, id, &answer);
    }
}

/// Answers message `id` in the channel, as a reply to it.
fn answer_reply(c: &Connectors, d: &Discord, id: &str, answer: &str) {
    let body = json!({
        "content": answer,
        "message_reference": {"message_id": id, "fail_if_not_exists": false},
        "allowed_mentions": {"parse": [], "replied_user": false},
    });
    let (http, url, auth) = (c.discord_http.clone(), d.messages_url(), d.auth());
    c.notice("discord reply", async move {
        http.call(Method::POST, &url, Some(&auth), &body, None)
            .await
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snowflakes_tell_their_age() {
        // Discord's documented example: 175928847299117063 was made at
        // 1462015105796 ms.
        assert_eq!(age_ms("175928847299117063", 1_462_015_105_796 + 5), Some(5));
        assert_eq!(age_ms("not-a-number", 0), None);
    }

    #[test]
    fn markdown_is_escaped_and_the_cut_never_splits_an_escape() {
        assert_eq!(markdown_escaped("a*b*_c_", 100), "a\\*b\\*\\_c\\_");
        assert_eq!(
            markdown_escaped("x\n- item\n 12. n\n+ p\nx-y 3.4", 100),
            "x\n\\- item\n 12\\. n\n\\+ p\nx-y 3.4"
        );
        assert_eq!(markdown_escaped("[a](b)", 100), "\\[a\\](b)");
        let cut = markdown_escaped(&"*".repeat(50), 10);
        assert_eq!(cut, "\\*\\*\\*\\*…");
        assert!(markdown_escaped(&"*".repeat(5000), 2000).chars().count() <= 2000);
        assert_eq!(markdown_escaped("abc*", 4), "abc…");
        assert_eq!(markdown_escaped("abc", 3), "abc");
    }

    #[test]
    fn only_plain_segments_go_into_a_path() {
        assert!(path_safe("aW50ZXJhY3Rpb246MTIz.abc-_"));
        assert!(!path_safe("../webhooks"));
        assert!(!path_safe("a/b"));
        assert!(!path_safe(".."));
        assert!(!path_safe(""));
    }
}
