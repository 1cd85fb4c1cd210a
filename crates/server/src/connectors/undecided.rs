//! Runs nobody decided (`action.undecided`), told in chat one message per
//! agent and session: the first run posts it, and each further run within
//! [`WINDOW`] of the one before updates it (how many, and the latest),
//! rather than one more message each. An agent running many commands its
//! hook never asked about fills no chat.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use actiongate_gate::connectors::Outgoing;
use chrono::Utc;
use serde_json::Value;

use super::card::{self, Card};
use super::outbox::{Sent, post, retry};
use super::{Connectors, Kind};

/// How the items of these messages start: `ud:<seq of the first run>`.
pub const ITEM: &str = "ud:";

/// How long after a run the next one of the same agent and session still
/// updates its message.
pub const WINDOW: Duration = Duration::from_secs(600);

/// Most groups kept; past it the oldest are forgotten (their next run
/// posts a new message).
const MOST: usize = 10_000;

/// The group one run belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Noted {
    /// The seq of the group's first run: its message's item is `ud:<seq>`.
    pub first_seq: i64,
    /// How many runs the group holds with this one.
    pub count: u64,
}

struct Group {
    first_seq: i64,
    count: u64,
    last: Instant,
}

/// The open groups, by agent and session.
#[derive(Default)]
pub struct UndecidedRuns {
    groups: Mutex<HashMap<(String, Option<String>), Group>>,
}

impl UndecidedRuns {
    /// Notes a run of `agent` in `session` told by the event of `seq` at
    /// `now`: a new group, or one more in the group still open.
    pub fn note(&self, agent: &str, session: Option<&str>, seq: i64, now: Instant) -> Noted {
        let Ok(mut groups) = self.groups.lock() else {
            return Noted {
                first_seq: seq,
                count: 1,
            };
        };
        let key = (agent.to_owned(), session.map(str::to_owned));
        if let Some(g) = groups.get_mut(&key)
            && now.duration_since(g.last) < WINDOW
        {
            g.count += 1;
            g.last = now;
            return Noted {
                first_seq: g.first_seq,
                count: g.count,
            };
        }
        if groups.len() >= MOST {
            groups.retain(|_, g| now.duration_since(g.last) < WINDOW);
            if groups.len() >= MOST {
                groups.clear();
            }
        }
        groups.insert(
            key,
            Group {
                first_seq: seq,
                count: 1,
                last: now,
            },
        );
        Noted {
            first_seq: seq,
            count: 1,
        }
    }
}

/// Tells of a run nobody decided (`data`, the event of `seq`): a message
/// for the first of its agent and session, an update of that message
/// (how many, the latest) for the next ones while they keep coming.
/// WhatsApp, whose messages cannot be edited, is told of the first only.
pub(super) async fn tell(c: &Connectors, seq: i64, data: &Value) {
    let field = |k: &str| data.get(k).and_then(Value::as_str);
    let noted = c.undecided.note(
        field("agent").unwrap_or("?"),
        field("session"),
        seq,
        Instant::now(),
    );
    let card = card::undecided_card(noted.first_seq, noted.count, data);
    if noted.count == 1 {
        post(c, card).await;
        return;
    }
    let Ok(body) = serde_json::to_string(&card) else {
        return;
    };
    let chats = match c.gate.connector_open_chats(&card.item).await {
        Ok(chats) => chats,
        Err(e) => {
            tracing::warn!(error = %e.detail, "connectors cannot read their messages");
            return;
        }
    };
    for chat in chats
        .iter()
        .filter(|ch| !ch.starts_with(super::whatsapp::PREFIX))
    {
        match c
            .gate
            .connector_update(chat, &card.item, body.clone())
            .await
        {
            Ok(true) => c.wake.notify_one(),
            Ok(false) => {}
            Err(e) => tracing::warn!(chat, error = %e.detail, "cannot queue a chat update"),
        }
    }
}

/// Sends update `o` (`card`, the group as it was then) to every known
/// message of its item in its chat, once its post is sent.
pub(super) async fn update_copies(
    c: &Connectors,
    o: &Outgoing,
    card: &Card,
    too_old: bool,
) -> Sent {
    match c.gate.connector_post_queued(&o.chat, &o.item).await {
        Ok(true) if !too_old => {
            let at = Utc::now() + chrono::Duration::seconds(2);
            let _ = c
                .gate
                .connector_retry(o.id, at, "waiting for the message to be sent".into())
                .await;
            return Sent::Done;
        }
        Ok(_) => {}
        Err(_) => return Sent::Done,
    }
    let copies = c
        .gate
        .connector_unedited(&o.chat, &o.item)
        .await
        .unwrap_or_default();
    for r in &copies {
        match c.deliver(&o.chat, Kind::Edit, card, Some(r), false).await {
            Ok(_) => {}
            Err(e) if e.retry && !too_old => return retry(c, o, e.message).await,
            Err(e) => {
                tracing::warn!(chat = %o.chat, item = %o.item, error = %e.message, "chat update given up");
            }
        }
    }
    let _ = c.gate.connector_sent(o.id, None).await;
    Sent::Done
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn runs_group_by_agent_and_session_while_they_keep_coming() {
        let runs = UndecidedRuns::default();
        let t = Instant::now();
        let first = runs.note("a", Some("s"), 10, t);
        assert_eq!((first.first_seq, first.count), (10, 1));
        let again = runs.note("a", Some("s"), 11, t + Duration::from_secs(60));
        assert_eq!((again.first_seq, again.count), (10, 2));
        // Another session, another agent, no session: groups of their own.
        assert_eq!(runs.note("a", Some("t"), 12, t).first_seq, 12);
        assert_eq!(runs.note("b", Some("s"), 13, t).first_seq, 13);
        assert_eq!(runs.note("a", None, 14, t).first_seq, 14);
        // A quiet window closes the group: the next run posts anew.
        let later = runs.note("a", Some("s"), 15, t + Duration::from_secs(60) + WINDOW);
        assert_eq!((later.first_seq, later.count), (15, 1));
    }
}
