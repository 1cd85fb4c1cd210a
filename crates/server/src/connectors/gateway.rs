//! Discord's Gateway: the websocket the daemon opens to Discord (so that
//! it works behind NAT), over which button clicks (`INTERACTION_CREATE`)
//! and replies in words (`MESSAGE_CREATE`) arrive.
//!
//! The cycle is Discord's documented one: the URL from the configuration
//! or `GET /gateway/bot`; Hello, then Identify (or Resume); a heartbeat
//! every `heartbeat_interval`, the first after a random part of it, each
//! one acknowledged before the next or the connection is taken for dead
//! and resumed; Ready gives the session and the URL to resume at. A
//! dropped connection, Reconnect (op 7) or a resumable Invalid Session
//! (op 9) resumes there; a session Discord will not resume is started
//! again after 1-5 s (and at most 20 times an hour: Discord resets the
//! token of a bot that identifies 1000 times a day); a close code that
//! says retrying cannot help (a bad token, say) stops the connector,
//! loudly. Every wait is bounded, and
//! events are handled in their own tasks, so nothing here waits for the
//! gate or the gate for it.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::time::{Instant, sleep, sleep_until, timeout};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::{CloseFrame, WebSocketConfig};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::Connectors;
use super::discord::{self, Discord};

/// Intent: message events in guild channels (replies in words).
pub const GUILD_MESSAGES: u64 = 1 << 9;
/// Intent (privileged, switched on in the developer portal): the text of
/// those messages. Without it Discord still sends the text of a reply
/// that mentions the bot (Discord's default for a reply).
pub const MESSAGE_CONTENT: u64 = 1 << 15;
/// The API version and encoding, asked for on every connection.
const QUERY: &str = "v=10&encoding=json";
/// Largest message taken from the Gateway.
const MAX_MESSAGE: usize = 16 << 20;
/// Longest pause between two connection attempts.
const MAX_PAUSE: Duration = Duration::from_secs(60);
/// Resuming fails this many times in a row: start a new session.
const RESUME_TRIES: u32 = 3;
/// At most this many Identifies an hour: Discord resets the bot token of
/// an application that identifies 1000 times a day, so a Gateway that
/// keeps ending sessions must not make the daemon loop into that.
const IDENTIFIES_PER_HOUR: usize = 20;
const HOUR: Duration = Duration::from_secs(3600);

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A session, kept across connections to resume it.
struct Session {
    id: String,
    resume_url: String,
    seq: Option<i64>,
}

/// How a connection ended.
#[derive(Debug, PartialEq)]
enum End {
    /// The daemon is stopping.
    Shutdown,
    /// Connect again and resume the session (when there is one).
    Resume,
    /// Discord will not resume the session: identify anew, after 1-5 s.
    NewSession,
    /// Discord refused the intents (message content is off in the
    /// developer portal).
    DisallowedIntents,
    /// Retrying cannot help (a close code Discord says not to reconnect
    /// after).
    Fatal(String),
}

/// Keeps a Gateway connection until shutdown.
pub async fn run(c: Arc<Connectors>) {
    let Some(d) = &c.discord else { return };
    let shutdown = c.gate.shutdown().clone();
    let mut url = (!d.s.gateway_url.is_empty()).then(|| d.s.gateway_url.clone());
    let mut session: Option<Session> = None;
    let mut intents = GUILD_MESSAGES | MESSAGE_CONTENT;
    let mut failures: u32 = 0;
    let mut identified: VecDeque<Instant> = VecDeque::new();
    loop {
        let pause = match failures {
            0 => Duration::ZERO,
            n => super::outbox::backoff(i64::from(n - 1)).min(MAX_PAUSE),
        };
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = sleep(pause) => {}
        }
        if session.is_none() {
            while identified.front().is_some_and(|at| at.elapsed() >= HOUR) {
                identified.pop_front();
            }
            if identified.len() >= IDENTIFIES_PER_HOUR
                && let Some(oldest) = identified.front()
            {
                tracing::warn!(
                    "discord gateway: {IDENTIFIES_PER_HOUR} new sessions within an hour; waiting"
                );
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = sleep_until(*oldest + HOUR) => {}
                }
                continue;
            }
        }
        let target = match (&session, &url) {
            (Some(s), _) => s.resume_url.clone(),
            (None, Some(u)) => u.clone(),
            (None, None) => match tokio::select! {
                _ = shutdown.cancelled() => return,
                found = discover(&c, d) => found,
            } {
                Ok(u) => {
                    url = Some(u.clone());
                    u
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot ask Discord for its gateway");
                    failures += 1;
                    continue;
                }
            },
        };
        let mut ready = false;
        let end = connection(
            &c,
            d,
            &with_query(&target),
            &mut session,
            intents,
            &mut ready,
            &mut identified,
        )
        .await;
        failures = if ready { 0 } else { failures + 1 };
        match end {
            End::Shutdown => return,
            End::Resume => {
                if failures >= RESUME_TRIES && session.take().is_some() {
                    tracing::info!("discord gateway: resuming keeps failing; a new session");
                }
            }
            End::NewSession => {
                session = None;
                let wait = Duration::from_millis(1000 + rand::random_range(0..4000));
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = sleep(wait) => {}
                }
            }
            End::DisallowedIntents if intents & MESSAGE_CONTENT != 0 => {
                tracing::warn!(
                    "discord gateway: the Message Content intent is off for this application; \
                     replies in words are read only when they mention the bot"
                );
                intents &= !MESSAGE_CONTENT;
                session = None;
                failures = 0;
            }
            End::DisallowedIntents => {
                tracing::error!("discord gateway: the intents are refused; Discord is off");
                return;
            }
            End::Fatal(why) => {
                tracing::error!(%why, "discord gateway: refused for good; Discord is off until restart");
                return;
            }
        }
    }
}

/// The Gateway's URL from `GET /gateway/bot`.
async fn discover(c: &Connectors, d: &Discord) -> Result<String, String> {
    let answer = c
        .discord_http
        .get(&d.api("/gateway/bot"), Some(&d.auth()))
        .await
        .map_err(|e| e.message)?;
    answer
        .get("url")
        .and_then(Value::as_str)
        .filter(|u| is_ws(u))
        .map(str::to_owned)
        .ok_or_else(|| "GET /gateway/bot: no ws(s) url".to_owned())
}

fn is_ws(url: &str) -> bool {
    url.starts_with("wss://") || url.starts_with("ws://")
}

/// `url` with the version and encoding asked for, unless it names them.
pub fn with_query(url: &str) -> String {
    if url.contains('?') {
        url.to_owned()
    } else if url.ends_with('/') {
        format!("{url}?{QUERY}")
    } else {
        format!("{url}/?{QUERY}")
    }
}

/// One connection, from connecting to its end; `ready` is set once Discord
/// accepted the Identify or the Resume, and the time of an Identify is
/// added to `identified`.
async fn connection(
    c: &Arc<Connectors>,
    d: &Discord,
    url: &str,
    session: &mut Option<Session>,
    intents: u64,
    ready: &mut bool,
    identified: &mut VecDeque<Instant>,
) -> End {
    let shutdown = c.gate.shutdown().clone();
    let bound = c.discord_http.timeout();
    let config = WebSocketConfig::default().max_message_size(Some(MAX_MESSAGE));
    let connect = tokio_tungstenite::connect_async_with_config(url, Some(config), true);
    let socket: Socket = tokio::select! {
        _ = shutdown.cancelled() => return End::Shutdown,
        r = timeout(bound, connect) => match r {
            Ok(Ok((socket, _))) => socket,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cannot connect to Discord's gateway");
                return End::Resume;
            }
            Err(_) => {
                tracing::warn!("connecting to Discord's gateway timed out");
                return End::Resume;
            }
        },
    };
    let (mut tx, mut rx) = socket.split();
    // Hello comes first, at once.
    let hello = tokio::select! {
        _ = shutdown.cancelled() => return End::Shutdown,
        hello = timeout(bound, next_payload(&mut rx)) => hello,
    };
    let interval = match hello {
        Ok(Ok(hello)) if hello.get("op").and_then(Value::as_u64) == Some(10) => {
            let ms = hello
                .pointer("/d/heartbeat_interval")
                .and_then(Value::as_u64)
                .unwrap_or(41_250);
            Duration::from_millis(ms.clamp(100, 600_000))
        }
        Ok(Ok(_)) => return End::Resume,
        Ok(Err(end)) => return end,
        Err(_) => {
            tracing::warn!("discord gateway: no Hello");
            return End::Resume;
        }
    };
    let mut seq: Option<i64> = session.as_ref().and_then(|s| s.seq);
    let first = match session.as_ref() {
        Some(s) => json!({"op": 6, "d": {"token": d.s.token, "session_id": s.id, "seq": s.seq}}),
        None => json!({"op": 2, "d": {
            "token": d.s.token,
            "intents": intents,
            "properties": {"os": std::env::consts::OS, "browser": "actiongate", "device": "actiongate"},
        }}),
    };
    if session.is_none() {
        identified.push_back(Instant::now());
    }
    if !send(&mut tx, &first, bound).await {
        return End::Resume;
    }
    let mut next_beat = Instant::now() + interval.mul_f64(rand::random::<f64>());
    let mut acked = true;
    loop {
        let payload = tokio::select! {
            _ = shutdown.cancelled() => {
                // 1000: the session ends and the bot shows offline.
                close(&mut tx, CloseCode::Normal, bound).await;
                return End::Shutdown;
            }
            _ = sleep_until(next_beat) => {
                if !acked {
                    tracing::info!("discord gateway: a heartbeat was not acknowledged; resuming");
                    // Any code but 1000/1001 keeps the session resumable.
                    close(&mut tx, CloseCode::Library(4000), bound).await;
                    return End::Resume;
                }
                if !send(&mut tx, &json!({"op": 1, "d": seq}), bound).await {
                    return End::Resume;
                }
                acked = false;
                next_beat = Instant::now() + interval;
                continue;
            }
            p = next_payload(&mut rx) => match p {
                Ok(p) => p,
                Err(end) => return end,
            },
        };
        match payload.get("op").and_then(Value::as_u64) {
            Some(0) => {
                if let Some(s) = payload.get("s").and_then(Value::as_i64) {
                    seq = Some(s);
                    if let Some(sess) = session.as_mut() {
                        sess.seq = seq;
                    }
                }
                let data = payload.get("d").cloned().unwrap_or(Value::Null);
                match payload.get("t").and_then(Value::as_str) {
                    Some("READY") => {
                        let id = data.get("session_id").and_then(Value::as_str);
                        let resume = data
                            .get("resume_gateway_url")
                            .and_then(Value::as_str)
                            .filter(|u| is_ws(u));
                        if let Some(id) = id {
                            *session = Some(Session {
                                id: id.to_owned(),
                                resume_url: resume.unwrap_or(url).to_owned(),
                                seq,
                            });
                        }
                        *ready = true;
                        tracing::info!("discord gateway: ready");
                    }
                    Some("RESUMED") => {
                        *ready = true;
                        tracing::info!("discord gateway: resumed");
                    }
                    Some("INTERACTION_CREATE") => {
                        tokio::spawn(discord::on_gateway_interaction(c.clone(), data));
                    }
                    Some("MESSAGE_CREATE") => {
                        tokio::spawn(discord::on_gateway_message(c.clone(), data));
                    }
                    _ => {}
                }
            }
            // Discord asks for a heartbeat now.
            Some(1) => {
                let sent = send(&mut tx, &json!({"op": 1, "d": seq}), bound).await;
                if !sent {
                    return End::Resume;
                }
            }
            Some(7) => {
                close(&mut tx, CloseCode::Library(4000), bound).await;
                return End::Resume;
            }
            Some(9) => {
                let resumable = payload.get("d").and_then(Value::as_bool) == Some(true);
                close(&mut tx, CloseCode::Library(4000), bound).await;
                return if resumable && session.is_some() {
                    End::Resume
                } else {
                    End::NewSession
                };
            }
            Some(11) => acked = true,
            _ => {}
        }
    }
}

/// The next JSON payload; the end of the connection when it closed.
async fn next_payload(rx: &mut SplitStream<Socket>) -> Result<Value, End> {
    loop {
        match rx.next().await {
            None => return Err(End::Resume),
            Some(Err(e)) => {
                tracing::info!(error = %e, "discord gateway: connection lost");
                return Err(End::Resume);
            }
            Some(Ok(Message::Text(t))) => match serde_json::from_str(t.as_str()) {
                Ok(v) => return Ok(v),
                Err(_) => tracing::warn!("discord gateway: a payload is not JSON"),
            },
            Some(Ok(Message::Close(frame))) => return Err(closed(frame)),
            // Pings are answered by the websocket layer; nothing here
            // asks for compression, so no binary payloads.
            Some(Ok(_)) => {}
        }
    }
}

/// What a close frame from Discord means.
fn closed(frame: Option<CloseFrame>) -> End {
    let code = frame.map(|f| u16::from(f.code)).unwrap_or(0);
    match code {
        4004 => End::Fatal("4004: authentication failed (the bot token)".to_owned()),
        4010..=4013 => End::Fatal(format!("{code}: shard, version or intents refused")),
        4014 => End::DisallowedIntents,
        // Invalid seq, session timed out: the session cannot be resumed.
        4007 | 4009 => End::NewSession,
        _ => End::Resume,
    }
}

async fn send(tx: &mut SplitSink<Socket, Message>, v: &Value, bound: Duration) -> bool {
    matches!(
        timeout(bound, tx.send(Message::text(v.to_string()))).await,
        Ok(Ok(()))
    )
}

async fn close(tx: &mut SplitSink<Socket, Message>, code: CloseCode, bound: Duration) {
    let frame = CloseFrame {
        code,
        reason: "".into(),
    };
    let _ = timeout(bound, tx.send(Message::Close(Some(frame)))).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_and_encoding_are_asked_for() {
        assert_eq!(
            with_query("wss://gateway.discord.gg"),
            "wss://gateway.discord.gg/?v=10&encoding=json"
        );
        assert_eq!(
            with_query("wss://gateway.discord.gg/"),
            "wss://gateway.discord.gg/?v=10&encoding=json"
        );
        assert_eq!(with_query("ws://h/?v=10"), "ws://h/?v=10");
    }

    #[test]
    fn close_codes_say_whether_to_resume() {
        let frame = |code: u16| {
            Some(CloseFrame {
                code: CloseCode::from(code),
                reason: "".into(),
            })
        };
        assert_eq!(closed(frame(4000)), End::Resume);
        assert_eq!(closed(None), End::Resume);
        assert_eq!(closed(frame(4009)), End::NewSession);
        assert_eq!(closed(frame(4014)), End::DisallowedIntents);
        assert!(matches!(closed(frame(4004)), End::Fatal(_)));
    }
}
