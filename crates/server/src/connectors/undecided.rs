//! Runs nobody decided (`action.undecided`), told in chat one message per
//! agent and session: the first run posts it, and each further run within
//! [`WINDOW`] of the one before updates it (how many, and the latest; at
//! most every [`EVERY`]), rather than one more message each. An agent
//! running many commands its hook never asked about fills no chat, nor
//! queues an edit per run ahead of the cards waiting for a decision.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use actiongate_gate::connectors::Outgoing;
use serde_json::Value;

use super::Connectors;
use super::card::{self, Card};
use super::outbox::{Sent, post};

/// How the items of these messages start: `ud:<seq of the first run>`.
pub const ITEM: &str = "ud:";

/// How long after a run the next one of the same agent and session still
/// updates its message.
pub const WINDOW: Duration = Duration::from_secs(600);

/// Least time between two updates of one message: a burst of runs updates
/// it once now and once at the end, and never queues an edit per run ahead
/// of the cards that wait for a decision.
pub const EVERY: Duration = Duration::from_secs(5);

/// Most groups kept; past it the oldest are forgotten (their next run
/// posts a new message).
const MOST: usize = 10_000;

/// What to do for one run.
#[derive(Debug, Clone, PartialEq)]
pub enum Told {
    /// Post the group's message: its first run.
    Post,
    /// Update its message now with the group as it is.
    Update(Shown),
    /// Update it after this long (the group as it is then).
    Later(Duration),
    /// Nothing: an update is already due.
    Nothing,
}

/// A group as its message shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    /// The seq of the group's first run: its message's item is `ud:<seq>`.
    pub first_seq: i64,
    /// How many runs the group holds.
    pub count: u64,
    /// The latest run's event data.
    pub latest: Value,
}

struct Group {
    first_seq: i64,
    count: u64,
    last: Instant,
    latest: Value,
    updated: Instant,
    due: bool,
}

type Key = (String, Option<String>);

/// The open groups, by agent and session.
#[derive(Default)]
pub struct UndecidedRuns {
    groups: Mutex<HashMap<Key, Group>>,
}

fn key_of(data: &Value) -> Key {
    let field = |k: &str| data.get(k).and_then(Value::as_str).map(str::to_owned);
    (field("agent").unwrap_or_default(), field("session"))
}

impl UndecidedRuns {
    /// Notes a run (`data`, told by the event of `seq`) at `now`: a new
    /// group, or one more in the group still open.
    pub fn note(&self, seq: i64, data: &Value, now: Instant) -> Told {
        let Ok(mut groups) = self.groups.lock() else {
            return Told::Post;
        };
        let key = key_of(data);
        if let Some(g) = groups.get_mut(&key)
            && now.duration_since(g.last) < WINDOW
        {
            g.count += 1;
            g.last = now;
            g.latest = data.clone();
            if g.due {
                return Told::Nothing;
            }
            let since = now.duration_since(g.updated);
            if since >= EVERY {
                g.updated = now;
                return Told::Update(Shown {
                    first_seq: g.first_seq,
                    count: g.count,
                    latest: g.latest.clone(),
                });
            }
            g.due = true;
            return Told::Later(EVERY - since);
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
                latest: data.clone(),
                updated: now,
                due: false,
            },
        );
        Told::Post
    }

    /// The group of `data` as it is at `now`, for the update that was due.
    pub fn due(&self, data: &Value, now: Instant) -> Option<Shown> {
        let mut groups = self.groups.lock().ok()?;
        let g = groups.get_mut(&key_of(data))?;
        g.due = false;
        g.updated = now;
        Some(Shown {
            first_seq: g.first_seq,
            count: g.count,
            latest: g.latest.clone(),
        })
    }
}

/// Tells of a run nobody decided (`data`, the event of `seq`): a message
/// for the first of its agent and session, an update of that message
/// (how many, the latest) for the next ones while they keep coming, at
/// most every [`EVERY`]. WhatsApp, whose messages cannot be edited, is
/// told of the first only.
pub(super) async fn tell(c: &Arc<Connectors>, seq: i64, data: &Value) {
    match c.undecided.note(seq, data, Instant::now()) {
        Told::Post => post(c, card::undecided_card(seq, 1, data)).await,
        Told::Update(shown) => update(c, &shown).await,
        Told::Later(wait) => {
            let (c, data) = (c.clone(), data.clone());
            let shutdown = c.gate.shutdown().clone();
            tokio::spawn(async move {
                tokio::select! {
                    () = shutdown.cancelled() => {}
                    () = tokio::time::sleep(wait) => {
                        if let Some(shown) = c.undecided.due(&data, Instant::now()) {
                            update(&c, &shown).await;
                        }
                    }
                }
            });
        }
        Told::Nothing => {}
    }
}

/// Queues the update of a group's message in every chat holding it.
async fn update(c: &Connectors, shown: &Shown) {
    let card = card::undecided_card(shown.first_seq, shown.count, &shown.latest);
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
    if let Err(sent) = super::outbox::each_copy(c, o, card, too_old, false).await {
        return sent;
    }
    let _ = c.gate.connector_sent(o.id, None).await;
    Sent::Done
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn run(agent: &str, session: Option<&str>) -> Value {
        serde_json::json!({"agent": agent, "session": session, "action_string": "tool:bash:x"})
    }

    #[test]
    fn runs_group_by_agent_and_session_and_update_at_most_every_few_seconds() {
        let runs = UndecidedRuns::default();
        let t = Instant::now();
        assert_eq!(runs.note(10, &run("a", Some("s")), t), Told::Post);
        // The second at once: an update after EVERY, then nothing more
        // is queued until it was sent.
        let s = Duration::from_secs(1);
        assert_eq!(
            runs.note(11, &run("a", Some("s")), t + s),
            Told::Later(EVERY - s)
        );
        assert_eq!(
            runs.note(12, &run("a", Some("s")), t + 2 * s),
            Told::Nothing
        );
        let shown = runs.due(&run("a", Some("s")), t + EVERY).unwrap();
        assert_eq!((shown.first_seq, shown.count), (10, 3));
        // Another session, another agent, no session: groups of their own.
        assert_eq!(runs.note(13, &run("a", Some("t")), t), Told::Post);
        assert_eq!(runs.note(14, &run("b", Some("s")), t), Told::Post);
        assert_eq!(runs.note(15, &run("a", None), t), Told::Post);
        // Past EVERY since the last update: at once.
        match runs.note(16, &run("a", Some("s")), t + 2 * EVERY) {
            Told::Update(shown) => assert_eq!((shown.first_seq, shown.count), (10, 4)),
            other => panic!("{other:?}"),
        }
        // A quiet window closes the group: the next run posts anew.
        assert_eq!(
            runs.note(17, &run("a", Some("s")), t + 2 * EVERY + WINDOW),
            Told::Post
        );
    }
}
