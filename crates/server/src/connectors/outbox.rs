//! From the gate's events to chat messages, durably: [`follow`] turns each
//! newly pending item into one queued post per chat and each outcome into
//! one queued edit of every message of the item; [`send`] sends what is due
//! and retries what failed with backoff (first retry after 1 s). A post
//! whose answer was lost is posted again (idempotently where the chat
//! allows it); every message of an item whose id is known, from the post's
//! answer or from a tap on it or a reply to it ([`learned`]), is edited
//! with the outcome.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use actiongate_gate::actions::ListActions;
use actiongate_gate::connectors::Outgoing;
use actiongate_gate::{ActionStatus, Caller, Event, ListPage};
use chrono::Utc;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinSet;

use super::card::{self, Card};
use super::{Connectors, Kind};
use crate::config_connectors::OUTBOX_BATCH as BATCH;

/// How soon the sender looks again while what is due waits for a chat
/// that is being sent to.
const BUSY_LOOK: Duration = Duration::from_millis(250);
/// Longest wait between retries.
const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// How long a message is retried before it is given up.
const GIVE_UP_AFTER: chrono::Duration = chrono::Duration::hours(24);
/// Pending actions read at a time when catching up.
const CATCH_UP: i64 = 200;
/// Pending grant requests read at a time when catching up.
const GRANT_REQUESTS_PAGE: i64 = 500;
/// Most pending actions (and, apart, grant requests) one catch-up reads.
const CATCH_UP_MOST: i64 = 10_000;

/// Who reads items for rendering (an operator known to no chat).
fn reader() -> Caller {
    Caller::human("connectors".to_owned())
}

/// Wait before retry number `attempts + 1`: 1 s, 2 s, 4 s, … up to 5 min.
pub fn backoff(attempts: i64) -> Duration {
    let shift = attempts.clamp(0, 16) as u32;
    Duration::from_secs(1u64 << shift).min(MAX_BACKOFF)
}

/// Follows the gate's events until shutdown, catching up on what is
/// pending at start and after falling behind.
pub async fn follow(c: Arc<Connectors>) {
    let mut events = c.gate.subscribe();
    let shutdown = c.gate.shutdown().clone();
    catch_up(&c).await;
    loop {
        let ev = tokio::select! {
            _ = shutdown.cancelled() => return,
            ev = events.recv() => ev,
        };
        match ev {
            Ok(ev) => on_event(&c, &ev).await,
            Err(RecvError::Lagged(n)) => {
                tracing::warn!(missed = n, "connectors fell behind the events; catching up");
                catch_up(&c).await;
            }
            Err(RecvError::Closed) => return,
        }
    }
}

/// Queues a post of every pending action (the longest waiting first, up
/// to [`CATCH_UP_MOST`]), grant request and plan not posted yet.
async fn catch_up(c: &Connectors) {
    let mut q = ListActions {
        status: Some(ActionStatus::Pending),
        limit: Some(CATCH_UP),
        oldest_first: true,
        ..ListActions::default()
    };
    let mut read = 0;
    while read < CATCH_UP_MOST {
        match c.gate.list_actions(&reader(), q.clone()).await {
            Ok((actions, next)) => {
                read += actions.len() as i64;
                for a in actions {
                    post_action(c, &a, 1).await;
                    if a.team.escalated_at.is_some() {
                        post_action(c, &a, 2).await;
                    }
                }
                let Some(next) = next else { break };
                q.cursor = Some(next);
            }
            Err(e) => {
                tracing::warn!(error = %e.detail, "connectors cannot list pending actions");
                break;
            }
        }
    }
    catch_up_requests_and_plans(c).await;
}

/// Queues a post of every pending grant request and plan (the longest
/// waiting first, up to [`CATCH_UP_MOST`] of each) not posted yet.
async fn catch_up_requests_and_plans(c: &Connectors) {
    let pending = Some(actiongate_gate::GrantRequestStatus::Pending);
    catch_up_listing(
        c,
        "grant requests",
        GRANT_REQUESTS_PAGE,
        |page| async move { c.gate.list_grant_requests(&reader(), pending, page).await },
        |r| r.id.clone(),
        |r| card::grant_request_card(r, !c.notify_only),
    )
    .await;
    catch_up_listing(
        c,
        "plans",
        actiongate_gate::plans::PLANS_PAGE,
        |page| async move {
            let pending = Some("pending".to_owned());
            c.gate.list_plans(&reader(), pending, page).await
        },
        |p| p.id.clone(),
        |p| card::plan_card(p, !c.notify_only),
    )
    .await;
}

/// Queues a post of each item of a listing paged by `after` (`list`, the
/// longest waiting first, `size` a page; a page cut short for its size
/// says so), up to [`CATCH_UP_MOST`].
async fn catch_up_listing<T, Listed>(
    c: &Connectors,
    what: &str,
    size: i64,
    list: impl Fn(ListPage) -> Listed,
    id: impl Fn(&T) -> String,
    card: impl Fn(&T) -> Card,
) where
    Listed: Future<Output = actiongate_gate::GateResult<(Vec<T>, bool)>>,
{
    let mut page = ListPage::oldest(size);
    let mut read = 0;
    while read < CATCH_UP_MOST {
        match list(page.clone()).await {
            Ok((items, cut)) => {
                read += items.len() as i64;
                let short = (items.len() as i64) < size && !cut;
                for item in &items {
                    post(c, card(item)).await;
                }
                match items.last() {
                    Some(last) if !short => page.after = Some(id(last)),
                    _ => break,
                }
            }
            Err(e) => {
                tracing::warn!(error = %e.detail, "connectors cannot list pending {what}");
                break;
            }
        }
    }
}

async fn on_event(c: &Arc<Connectors>, ev: &Event) {
    match ev.kind.as_str() {
        "action.enqueued" => {
            let Some(id) = &ev.action_id else { return };
            match c.gate.visible_action(&reader(), id).await {
                Ok(a) if a.status == ActionStatus::Pending => post_action(c, &a, 1).await,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(action = %id, error = %e.detail, "connectors cannot read an action")
                }
            }
        }
        "action.escalated" => {
            let Ok(a) = ev.data.parse::<actiongate_gate::Action>() else {
                return;
            };
            if a.status == ActionStatus::Pending {
                post_action(c, &a, 2).await;
                tell_escalation_group(c, &a).await;
            }
        }
        "action.approval" => {
            // Approved by some, and more must: the open messages show who,
            // and an edit.
            let Some(id) = &ev.action_id else { return };
            let chats = match c.gate.connector_open_chats(id).await {
                Ok(chats) => chats,
                Err(e) => {
                    tracing::warn!(error = %e.detail, "connectors cannot read their messages");
                    return;
                }
            };
            // Made alike by every daemon that reads this event, so that
            // one update of it is queued however many daemons follow it.
            let marker = Card {
                item: id.clone(),
                title: format!("approval seq {}", ev.seq),
                lines: Vec::new(),
                buttons: Vec::new(),
                cut: false,
                progress: true,
            };
            let Ok(body) = serde_json::to_string(&marker) else {
                return;
            };
            // A WhatsApp message cannot be edited: its outcome is a reply.
            for chat in chats
                .iter()
                .filter(|ch| !ch.starts_with(super::whatsapp::PREFIX))
            {
                match c.gate.connector_update(chat, id, body.clone()).await {
                    Ok(true) => c.wake.notify_one(),
                    Ok(false) => {}
                    Err(e) => tracing::warn!(chat, error = %e.detail, "cannot queue a chat update"),
                }
            }
        }
        "grant_request.created" => {
            if let Ok(r) = ev.data.parse::<actiongate_gate::GrantRequest>() {
                post(c, card::grant_request_card(&r, !c.notify_only)).await;
            }
        }
        "action.approved" | "action.denied" | "action.expired" | "action.cancelled" => {
            let Some(id) = &ev.action_id else { return };
            // Settled when asked (by the policy, or a standing grant):
            // never pending, so never posted (the hot path of an allowed
            // request costs no read here).
            #[derive(serde::Deserialize)]
            struct By<'a> {
                #[serde(borrow)]
                decided_by: Option<&'a str>,
                #[serde(borrow)]
                created_at: Option<&'a str>,
                #[serde(borrow)]
                decided_at: Option<&'a str>,
            }
            if ev.data.parse::<By>().is_ok_and(|b| {
                b.decided_by == Some("policy")
                    || (b.decided_by.is_some_and(|d| d.starts_with("grant:"))
                        && b.decided_at.is_some()
                        && b.decided_at == b.created_at)
            }) {
                return;
            }
            let chats = match c.gate.connector_open_chats(id).await {
                Ok(chats) if !chats.is_empty() => chats,
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(error = %e.detail, "connectors cannot read their messages");
                    return;
                }
            };
            let Ok(a) = ev.data.parse::<actiongate_gate::Action>() else {
                return;
            };
            edit(c, &chats, card::settled_action(&a)).await;
        }
        "plan.requested" => {
            if let Ok(p) = ev.data.parse::<actiongate_api::sessions::Plan>() {
                post(c, card::plan_card(&p, !c.notify_only)).await;
            }
        }
        "plan.approved" | "plan.denied" | "plan.expired" => {
            let Ok(p) = ev.data.parse::<actiongate_api::sessions::Plan>() else {
                return;
            };
            let item = format!("{}{}", super::decide::PLAN, p.id);
            let chats = match c.gate.connector_open_chats(&item).await {
                Ok(chats) if !chats.is_empty() => chats,
                _ => return,
            };
            let done = card::settled(
                card::plan_card(&p, false),
                ev.kind.trim_start_matches("plan."),
                p.decided_by.as_deref(),
                None,
            );
            edit(c, &chats, done).await;
        }
        "action.undecided" => {
            if let Ok(data) = ev.data.parse::<serde_json::Value>() {
                super::undecided::tell(c, ev.seq, &data).await;
            }
        }
        "grant_request.approved" | "grant_request.denied" | "grant_request.expired" => {
            let Ok(r) = ev.data.parse::<actiongate_gate::GrantRequest>() else {
                return;
            };
            let item = format!("gr:{}", r.id);
            let chats = match c.gate.connector_open_chats(&item).await {
                Ok(chats) if !chats.is_empty() => chats,
                _ => return,
            };
            let status = ev.kind.trim_start_matches("grant_request.");
            let done = card::settled(
                card::grant_request_card(&r, false),
                status,
                r.decided_by.as_deref(),
                r.deny_reason.as_deref(),
            );
            edit(c, &chats, done).await;
        }
        _ => {}
    }
}

/// Queues the message of pending action `a` in the chats of `tier`, with
/// "Approve for 1h" when a grant can be made for it.
async fn post_action(c: &Connectors, a: &actiongate_gate::Action, tier: u8) {
    let buttons = !c.notify_only;
    let remember = buttons && c.gate.can_remember(a).await;
    post_to(
        c,
        card::action_card(a, buttons, remember),
        c.destinations_of(tier),
    )
    .await;
}

/// Tells the people of the escalated action's `escalate_to` group, each
/// in every chat they have an identity in whose connector is on (see
/// `Connectors::person_chats`). Their own chats get no buttons but in
/// WhatsApp (whose numbers are its approvers' chats): they decide where
/// they decide every other action.
async fn tell_escalation_group(c: &Connectors, a: &actiongate_gate::Action) {
    let Ok(rules) = c.gate.rules_of(a).await else {
        return;
    };
    let Some(group) = rules.iter().find_map(|r| r.rule.escalate_to.as_deref()) else {
        return;
    };
    let people = match c.gate.people_in(group).await {
        Ok(people) => people,
        Err(e) => {
            tracing::warn!(error = %e.detail, "connectors cannot read the escalation group");
            return;
        }
    };
    let chats: Vec<String> = people.iter().flat_map(|p| c.person_chats(p)).collect();
    let (whatsapp, others): (Vec<String>, Vec<String>) = chats
        .into_iter()
        .partition(|chat| chat.starts_with(super::whatsapp::PREFIX));
    let buttons = !c.notify_only;
    post_to(c, card::action_card(a, buttons, false), whatsapp).await;
    post_to(c, card::action_card(a, false, false), others).await;
}

pub(super) async fn post(c: &Connectors, card: Card) {
    let chats = c.destinations_of(1);
    post_to(c, card, chats).await;
}

async fn post_to(c: &Connectors, card: Card, chats: Vec<String>) {
    let Ok(body) = serde_json::to_string(&card) else {
        return;
    };
    for chat in chats {
        match c.gate.connector_post(&chat, &card.item, body.clone()).await {
            Ok(true) => c.wake.notify_one(),
            Ok(false) => {}
            Err(e) => tracing::warn!(chat, error = %e.detail, "cannot queue a chat message"),
        }
    }
}

async fn edit(c: &Connectors, chats: &[String], card: Card) {
    let Ok(body) = serde_json::to_string(&card) else {
        return;
    };
    for chat in chats {
        match c.gate.connector_edit(chat, &card.item, body.clone()).await {
            Ok(true) => c.wake.notify_one(),
            Ok(false) => {}
            Err(e) => tracing::warn!(chat, error = %e.detail, "cannot queue a chat edit"),
        }
    }
}

/// Sends due messages until shutdown: each chat by its own task, one
/// message after another (a post before its edit), so that a chat whose
/// API hangs holds up only its own messages.
pub async fn send(c: Arc<Connectors>) {
    let shutdown = c.gate.shutdown().clone();
    // Chats with a task sending now; dropped (and aborted) at shutdown,
    // when what they were sending stays queued for the next start.
    let mut sending: JoinSet<()> = JoinSet::new();
    let mut busy: HashMap<tokio::task::Id, String> = HashMap::new();
    loop {
        match c.gate.connector_due(i64::from(BATCH)).await {
            Ok(due) => {
                let mut by_chat: HashMap<String, Vec<Outgoing>> = HashMap::new();
                for o in due {
                    if !busy.values().any(|chat| *chat == o.chat) {
                        by_chat.entry(o.chat.clone()).or_default().push(o);
                    }
                }
                for (chat, batch) in by_chat {
                    let c = c.clone();
                    let task = sending.spawn(async move {
                        for o in batch {
                            // The chat's API is down or hanging: the rest
                            // waits for the next round, where a message
                            // retried sooner than theirs comes first, so
                            // that retries keep their pace.
                            if send_one(&c, o).await == Sent::ApiFailed {
                                break;
                            }
                        }
                    });
                    busy.insert(task.id(), chat);
                }
            }
            Err(e) => tracing::warn!(error = %e.detail, "cannot read the chat outbox"),
        }
        // What is due now belongs to chats being sent to: look again when
        // one is done, a message is queued, or soon.
        let wait = match c.gate.connector_next_due().await {
            Ok(Some(at)) => (at - Utc::now())
                .to_std()
                .unwrap_or(BUSY_LOOK)
                .max(Duration::from_millis(1)),
            _ => Duration::from_secs(1),
        }
        .min(Duration::from_secs(1));
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = c.wake.notified() => {}
            _ = tokio::time::sleep(wait) => {}
            Some(done) = sending.join_next_with_id() => {
                let id = match done {
                    Ok((id, ())) => id,
                    Err(e) => {
                        tracing::error!(error = %e, "a chat sender failed");
                        e.id()
                    }
                };
                busy.remove(&id);
            }
        }
    }
}

/// How sending one message went, as far as the rest of its chat's batch
/// cares.
#[derive(Debug, PartialEq)]
pub(super) enum Sent {
    /// Sent, given up, or waiting for its post.
    Done,
    /// The chat's API failed in a way worth retrying.
    ApiFailed,
}

async fn send_one(c: &Connectors, o: Outgoing) -> Sent {
    let card: Card = match serde_json::from_str(&o.body) {
        Ok(card) => card,
        Err(_) => {
            tracing::error!(chat = %o.chat, "an outgoing chat message does not parse; dropped");
            let _ = c.gate.connector_sent(o.id, None).await;
            return Sent::Done;
        }
    };
    let too_old = Utc::now() - o.created_at > GIVE_UP_AFTER;
    if o.kind == "edit" && card.progress && o.item.starts_with(super::undecided::ITEM) {
        return super::undecided::update_copies(c, &o, &card, too_old).await;
    }
    if o.kind == "edit" && card.progress {
        return update_copies(c, &o, too_old).await;
    }
    if o.kind == "edit" {
        return edit_copies(c, &o, &card, too_old).await;
    }
    // A post tried before may have reached the chat with its answer lost.
    let again = o.attempts > 0;
    match c.deliver(&o.chat, Kind::Post, &card, None, again).await {
        Ok(r) => {
            if let Err(e) = c.gate.connector_sent(o.id, r).await {
                tracing::warn!(error = %e.detail, "cannot record a sent chat message");
            }
            Sent::Done
        }
        Err(e) if e.retry && !too_old => retry(c, &o, e.message).await,
        Err(e) => {
            tracing::warn!(chat = %o.chat, item = %o.item, error = %e.message, "chat message given up");
            let _ = c.gate.connector_sent(o.id, None).await;
            Sent::Done
        }
    }
}

/// Schedules the next attempt of `o` after a failure worth retrying.
pub(super) async fn retry(c: &Connectors, o: &Outgoing, error: String) -> Sent {
    let wait = backoff(o.attempts);
    tracing::info!(chat = %o.chat, error = %error, retry_in = ?wait, "chat API failed; retrying");
    let at = Utc::now() + chrono::Duration::from_std(wait).unwrap_or_default();
    let _ = c.gate.connector_retry(o.id, at, error).await;
    Sent::ApiFailed
}

/// Edits every known message of `o`'s item in its chat not edited yet to
/// `card` (a post whose answer was lost can leave several); waits while
/// the item's post is still queued, so that no copy it makes is missed.
async fn edit_copies(c: &Connectors, o: &Outgoing, card: &Card, too_old: bool) -> Sent {
    if let Err(sent) = each_copy(c, o, card, too_old, true).await {
        return sent;
    }
    let _ = c.gate.connector_sent(o.id, None).await;
    Sent::Done
}

/// Updates every known message of `o`'s item in its chat to the action
/// as it is now (approvals so far, an edit), leaving them open to the
/// outcome edit; nothing once the action is settled or its outcome is
/// queued (the outcome edit is then sent after this, or this is dropped).
async fn update_copies(c: &Connectors, o: &Outgoing, too_old: bool) -> Sent {
    let open = match c.gate.connector_open_chats(&o.item).await {
        Ok(chats) => chats.contains(&o.chat),
        Err(_) => false,
    };
    let action = match c.gate.visible_action(&reader(), &o.item).await {
        Ok(a) if open && a.status == ActionStatus::Pending => a,
        _ => {
            let _ = c.gate.connector_sent(o.id, None).await;
            return Sent::Done;
        }
    };
    // As it was posted there: buttons in the chats that decide (not a
    // person's chat told of an escalation), none when notify-only.
    let buttons = !c.notify_only()
        && (c.destinations_of(1).contains(&o.chat) || c.destinations_of(2).contains(&o.chat));
    let card = card::progress_card(&action, buttons);
    let copies = match each_copy(c, o, &card, too_old, false).await {
        Ok(copies) => copies,
        Err(sent) => return sent,
    };
    // Decided while this was on its way: the outcome edit (another
    // daemon's sender, on Postgres) may have reached the chat first, so
    // the outcome is shown again over this update.
    if let Ok(a) = c.gate.visible_action(&reader(), &o.item).await
        && a.status != ActionStatus::Pending
    {
        let done = card::settled_action(&a);
        for r in &copies {
            if let Err(e) = c.deliver(&o.chat, Kind::Edit, &done, Some(r), false).await {
                tracing::warn!(chat = %o.chat, item = %o.item, error = %e.message, "chat outcome edit given up");
            }
        }
    }
    let _ = c.gate.connector_sent(o.id, None).await;
    Sent::Done
}

/// Edits every copy of `o.item` in `o.chat` not edited yet to show
/// `card`, once the item's own post has gone out (until then this is tried
/// again in two seconds); with `last`, each is recorded as edited for good
/// (the outcome). The copies, or how the update ended early.
pub(super) async fn each_copy(
    c: &Connectors,
    o: &Outgoing,
    card: &Card,
    too_old: bool,
    last: bool,
) -> Result<Vec<String>, Sent> {
    match c.gate.connector_post_queued(&o.chat, &o.item).await {
        Ok(true) if !too_old => {
            let at = Utc::now() + chrono::Duration::seconds(2);
            let _ = c
                .gate
                .connector_retry(o.id, at, "waiting for the message to be sent".into())
                .await;
            return Err(Sent::Done);
        }
        Ok(_) => {}
        Err(_) => return Err(Sent::Done),
    }
    let Ok(copies) = c.gate.connector_unedited(&o.chat, &o.item).await else {
        return Err(Sent::Done);
    };
    for r in &copies {
        match c.deliver(&o.chat, Kind::Edit, card, Some(r), false).await {
            Ok(_) => {}
            Err(e) if e.retry && !too_old => return Err(retry(c, o, e.message).await),
            Err(e) => {
                tracing::warn!(chat = %o.chat, item = %o.item, error = %e.message, "chat edit given up");
            }
        }
        if last && let Err(e) = c.gate.connector_copy_edited(&o.chat, r).await {
            tracing::warn!(error = %e.detail, "cannot record an edited chat message");
        }
    }
    Ok(copies)
}

/// The card of `item` once decided (as its outcome edit shows it); `None`
/// while it is pending or cannot be read.
pub async fn settled_card(c: &Connectors, item: &str) -> Option<Card> {
    if let Some(id) = item.strip_prefix("gr:") {
        let r = c
            .gate
            .get_grant_request(&reader(), id, Duration::ZERO)
            .await
            .ok()?;
        if r.status == actiongate_gate::GrantRequestStatus::Pending {
            return None;
        }
        Some(card::settled(
            card::grant_request_card(&r, false),
            r.status.as_str(),
            r.decided_by.as_deref(),
            r.deny_reason.as_deref(),
        ))
    } else {
        let a = c.gate.visible_action(&reader(), item).await.ok()?;
        if a.status == ActionStatus::Pending {
            return None;
        }
        Some(card::settled_action(&a))
    }
}

/// A message of `item` in `chat` seen in a tap on it or a reply to it:
/// recorded among the item's messages (so that its outcome edits it too)
/// and, when it was not known and the item is decided already, edited now
/// to show it. Whether an edit of it was queued.
pub async fn learned(c: &Connectors, chat: &str, item: &str, message_ref: &str) -> bool {
    match c.gate.connector_learn_copy(chat, item, message_ref).await {
        Ok(true) => {}
        Ok(false) => return false,
        Err(e) => {
            tracing::warn!(chat, error = %e.detail, "cannot record a chat message");
            return false;
        }
    }
    tracing::info!(
        chat,
        item,
        "another message of an item found (a post whose answer was lost)"
    );
    let Some(done) = settled_card(c, item).await else {
        return false;
    };
    let Ok(body) = serde_json::to_string(&done) else {
        return false;
    };
    match c.gate.connector_edit_again(chat, item, body).await {
        Ok(()) => {
            c.wake.notify_one();
            true
        }
        Err(e) => {
            tracing::warn!(chat, error = %e.detail, "cannot queue a chat edit");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_starts_at_a_second_and_is_capped() {
        assert_eq!(backoff(0), Duration::from_secs(1));
        assert_eq!(backoff(1), Duration::from_secs(2));
        assert_eq!(backoff(30), MAX_BACKOFF);
    }
}
