//! A post whose answer is lost (the chat API made the message, then the
//! connection was cut before its answer): Slack and Discord do not post it
//! twice; Telegram and WhatsApp may, and every copy whose id becomes known
//! (a tap on it, a reply to it) is answered and shows the outcome; on
//! Telegram the copy is found and voided when the post is made again. No
//! copy looks pending once the item is decided.

use std::time::Duration;

use reqwest::Method;
use serde_json::{Value, json};

use super::common::TestApp;
use super::fake::{Call, Fake};
use super::{pending, wait_status};

fn mine(calls: &[Call], id: &str) -> Vec<Call> {
    calls
        .iter()
        .filter(|c| c.body.to_string().contains(id))
        .cloned()
        .collect()
}

async fn approve_on_the_api(app: &TestApp, id: &str) {
    let op = app.operator.clone();
    let (status, body) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{id}/approve"),
            Some(&op),
            Some(json!({})),
        )
        .await;
    assert!(status.is_success(), "{body}");
}

/// Waits for the post of `id` and its retry after the lost answer; the
/// message ids of both (the lost one first).
async fn two_posts(fake: &Fake, suffix: &str, id: &str) -> Vec<Call> {
    let posts = fake
        .wait_for(suffix, "the post and its retry", |c| mine(c, id).len() >= 2)
        .await;
    // The daemon records the second one's id once its answer is read.
    tokio::time::sleep(Duration::from_millis(400)).await;
    mine(&posts, id)
}

/// A tap by `from` with `data` on the card `post` (its message as
/// Telegram sends it with the tap: the bot's, with its buttons).
fn telegram_tap_by(from: i64, update_id: i64, query: &str, data: &str, post: &Call) -> Value {
    use super::telegram::CHAT;
    json!({
        "update_id": update_id,
        "callback_query": {
            "id": query,
            "from": {"id": from, "is_bot": false, "first_name": "T"},
            "message": {"message_id": post.answered, "chat": {"id": CHAT},
                        "from": {"id": 123, "is_bot": true},
                        "reply_markup": post.body["reply_markup"].clone()},
            "chat_instance": "1",
            "data": data,
        }
    })
}

fn telegram_tap(update_id: i64, query: &str, data: &str, post: &Call) -> Value {
    telegram_tap_by(super::telegram::APPROVER, update_id, query, data, post)
}

/// Whether an `editMessageText` of message `message_id` shows `what`.
fn edited(calls: &[Call], message_id: i64, what: &str) -> bool {
    calls.iter().any(|c| {
        c.body["message_id"] == message_id && c.body["text"].as_str().unwrap_or("").contains(what)
    })
}

#[tokio::test]
async fn telegram_every_copy_a_lost_answer_made_is_edited_once_it_is_known() {
    use super::telegram::{APPROVER, CHAT, spawn};
    let fake = Fake::start().await;
    let app = spawn(&fake, |_| {}).await;

    // 1. The answer is lost: two messages. A tap on the copy nobody knew
    // of approves, and both copies show it.
    fake.lose_answers(1);
    let id = pending(&app, "make deploy").await;
    let posts = two_posts(&fake, "/sendMessage", &id).await;
    let (lost, known) = (posts[0].answered, posts[1].answered);
    assert_ne!(lost, known);
    fake.push_update(telegram_tap(1, "cq-lost", &format!("a:{id}"), &posts[0]));
    wait_status(&app, &id, "approved").await;
    let edits = fake
        .wait_for("/editMessageText", "both copies edited", |c| {
            edited(c, lost, "Approved by telegram:42")
                && edited(c, known, "Approved by telegram:42")
        })
        .await;
    assert!(
        edits
            .iter()
            .all(|c| c.body["reply_markup"]["inline_keyboard"] == json!([]))
    );

    // 2. Decided on the API first: a later tap on the unknown copy is
    // answered with the real state and that copy is edited to it.
    fake.lose_answers(1);
    let other = pending(&app, "make release").await;
    let posts = two_posts(&fake, "/sendMessage", &other).await;
    let (lost, known) = (posts[0].answered, posts[1].answered);
    approve_on_the_api(&app, &other).await;
    fake.wait_for("/editMessageText", "the known copy's edit", |c| {
        edited(c, known, "Approved by key:")
    })
    .await;
    assert!(!edited(
        &fake.calls_to("/editMessageText"),
        lost,
        "Approved"
    ));
    fake.push_update(telegram_tap(2, "cq-late", &format!("d:{other}"), &posts[0]));
    let answers = fake
        .wait_for("/answerCallbackQuery", "the late tap's answer", |c| {
            c.iter().any(|c| c.body["callback_query_id"] == "cq-late")
        })
        .await;
    let answer = answers
        .iter()
        .find(|c| c.body["callback_query_id"] == "cq-late")
        .unwrap();
    assert_eq!(answer.body["text"], "Already decided.");
    fake.wait_for("/editMessageText", "the late copy's edit", |c| {
        edited(c, lost, "Approved by key:")
    })
    .await;

    // 3. A reply to an unknown copy (this bot's message, its buttons
    // naming the item) decides, and both copies show it.
    fake.lose_answers(1);
    let third = pending(&app, "make publish").await;
    let posts = two_posts(&fake, "/sendMessage", &third).await;
    let (lost, known) = (posts[0].answered, posts[1].answered);
    let markup = posts[0].body["reply_markup"].clone();
    fake.push_update(json!({
        "update_id": 3,
        "message": {
            "message_id": 950,
            "from": {"id": APPROVER},
            "chat": {"id": CHAT},
            "reply_to_message": {"message_id": lost, "from": {"id": 123, "is_bot": true},
                "chat": {"id": CHAT}, "text": "tool:bash:make publish", "reply_markup": markup},
            "text": "no, not today",
        }
    }));
    wait_status(&app, &third, "denied").await;
    fake.wait_for("/editMessageText", "both copies denied", |c| {
        edited(c, lost, "Denied") && edited(c, known, "Denied")
    })
    .await;
    app.stop().await;
}

#[tokio::test]
async fn slack_a_post_whose_answer_was_lost_is_found_again_not_posted_twice() {
    use super::slack::spawn;
    let fake = Fake::start().await;
    let app = spawn(&fake).await;
    fake.lose_answers(1);
    let id = pending(&app, "make deploy").await;
    fake.wait_for(
        "/conversations.history",
        "the look for the lost post",
        |c| !c.is_empty(),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let posts = mine(&fake.calls_to("/chat.postMessage"), &id);
    assert_eq!(posts.len(), 1, "posted twice: {posts:#?}");
    assert_eq!(posts[0].body["metadata"]["event_payload"]["item"], id);
    let ts = format!("1700000000.{}", posts[0].answered);
    approve_on_the_api(&app, &id).await;
    let updates = fake
        .wait_for("/chat.update", "the edit of the one message", |c| {
            !c.is_empty()
        })
        .await;
    assert_eq!(updates[0].body["ts"], ts);
    app.stop().await;
}

/// After a failed post, another app's message carrying this item's
/// metadata (an agent knows its action's id) is not taken for the card: a
/// "yes" in its thread would decide the item, which no card showed.
#[tokio::test]
async fn slack_another_apps_message_with_the_items_metadata_is_not_taken_for_the_card() {
    use super::slack::spawn;
    let fake = Fake::start().await;
    let app = spawn(&fake).await;
    fake.foreign_copies();
    fake.fail_posts(1);
    let id = pending(&app, "make deploy").await;
    let posts = two_posts(&fake, "/chat.postMessage", &id).await;
    assert_eq!(posts.len(), 2, "{posts:#?}");
    assert!(posts[1].answered >= 0, "the retry posted: {posts:#?}");
    let asked = fake.calls_to("/auth.test");
    assert_eq!(asked.len(), 1, "{asked:#?}");
    let ts = format!("1700000000.{}", posts[1].answered);
    approve_on_the_api(&app, &id).await;
    let updates = fake
        .wait_for("/chat.update", "the edit of the card", |c| !c.is_empty())
        .await;
    assert_eq!(updates[0].body["ts"], ts);
    app.stop().await;
}

#[tokio::test]
async fn discord_a_post_whose_answer_was_lost_is_not_made_twice() {
    use super::discord::spawn;
    let fake = Fake::start().await;
    let app = spawn(&fake).await;
    fake.lose_answers(1);
    let id = pending(&app, "make deploy").await;
    let posts = two_posts(&fake, "/channels/C9/messages", &id).await;
    // The same nonce, enforced: Discord answers with the first message.
    assert_eq!(posts[0].body["nonce"], posts[1].body["nonce"]);
    assert_eq!(posts[0].body["enforce_nonce"], true);
    assert!(posts[0].body["nonce"].as_str().unwrap().len() <= 25);
    assert_eq!(posts[0].answered, posts[1].answered);
    approve_on_the_api(&app, &id).await;
    let message = posts[0].answered;
    let edit = format!("/channels/C9/messages/{message}");
    fake.wait_for(&edit, "the edit", |c| c.iter().any(|c| c.method == "PATCH"))
        .await;
    // One message made, so nothing else to edit.
    assert!(
        fake.calls()
            .iter()
            .all(|c| c.method != "PATCH" || c.path.ends_with(&edit))
    );
    app.stop().await;
}

#[tokio::test]
async fn whatsapp_a_tap_on_a_copy_a_lost_answer_made_gets_the_outcome_on_both() {
    use super::whatsapp::{PHONE, SECRET, message, post, spawn};
    let fake = Fake::start().await;
    let app = spawn(&fake).await;
    fake.lose_answers(1);
    let id = pending(&app, "make deploy").await;
    let posts = two_posts(&fake, "/PHONE/messages", &id).await;
    let (lost, known) = (
        format!("wamid.{}", posts[0].answered),
        format!("wamid.{}", posts[1].answered),
    );
    let before = fake.calls_to("/PHONE/messages").len();
    let tap = message(
        "wamid.in-lost",
        PHONE,
        json!({"type": "interactive", "context": {"from": PHONE, "id": lost},
            "interactive": {"type": "button_reply",
                "button_reply": {"id": format!("a:{id}"), "title": "Approve"}}}),
    );
    assert_eq!(post(&app, SECRET, &tap).await, 200);
    wait_status(&app, &id, "approved").await;
    let outcome = |c: &Call, to: &str| {
        c.body["context"]["message_id"] == to
            && c.body["text"]["body"]
                .as_str()
                .unwrap_or("")
                .contains("Approved by whatsapp:")
    };
    fake.wait_for("/PHONE/messages", "the outcome on both copies", |c| {
        c.iter().any(|c| outcome(c, &lost)) && c.iter().any(|c| outcome(c, &known))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    // Those two, and nothing more (no acknowledgement besides).
    let after: Vec<Call> = fake.calls_to("/PHONE/messages")[before..].to_vec();
    assert_eq!(after.len(), 2, "{after:#?}");
    app.stop().await;
}

/// Telegram cannot list a chat's messages, but its message ids count up
/// per chat: a post made again looks at the ids just before its own, and
/// the copy the lost answer made loses its buttons at once and says it is
/// void. A card the daemon knows (another pending item's) is left alone,
/// and Telegram refuses the edit for anything without buttons.
#[tokio::test]
async fn telegram_a_copy_a_lost_answer_made_is_voided_when_the_post_is_made_again() {
    use super::telegram::spawn;
    let fake = Fake::start().await;
    let app = spawn(&fake, |_| {}).await;
    let before = pending(&app, "make check").await;
    let first = fake
        .wait_for("/sendMessage", "the first card", |c| {
            !mine(c, &before).is_empty()
        })
        .await;
    let before_card = mine(&first, &before)[0].answered;

    fake.lose_answers(1);
    let id = pending(&app, "make deploy").await;
    let posts = two_posts(&fake, "/sendMessage", &id).await;
    let (lost, known) = (posts[0].answered, posts[1].answered);
    let edits = fake
        .wait_for("/editMessageText", "the lost copy voided", |c| {
            edited(c, lost, "posted again")
        })
        .await;
    let stripped = fake.calls_to("/editMessageReplyMarkup");
    assert!(
        stripped.iter().any(|c| c.body["message_id"] == lost
            && c.body["reply_markup"]["inline_keyboard"] == json!([])),
        "{stripped:#?}"
    );
    let void = edits.iter().find(|c| c.body["message_id"] == lost).unwrap();
    assert!(
        void.body
            .get("reply_markup")
            .is_none_or(|m| m["inline_keyboard"] == json!([]))
    );
    for other in [known, before_card] {
        assert!(
            !stripped.iter().any(|c| c.body["message_id"] == other),
            "{other}"
        );
        assert!(
            !edits.iter().any(|c| c.body["message_id"] == other),
            "{other}"
        );
    }

    // The known copy still decides, and shows the outcome.
    approve_on_the_api(&app, &id).await;
    fake.wait_for("/editMessageText", "the known copy's edit", |c| {
        edited(c, known, "Approved by key:")
    })
    .await;
    app.stop().await;
}

/// A tap's data is whatever the client sends (the Bot API warns it may
/// name no button of the message): a stranger's tap on a copy nobody knew
/// of, naming another item, must not make that copy stand for the other
/// item, so that an approver's "yes" to the copy approves what it shows
/// and nothing else.
#[tokio::test]
async fn telegram_a_forged_tap_does_not_make_a_copy_stand_for_another_item() {
    use super::telegram::{APPROVER, CHAT, spawn};
    let fake = Fake::start().await;
    let app = spawn(&fake, |_| {}).await;
    let target = pending(&app, "make wipe-backups").await;
    fake.wait_for("/sendMessage", "the target's card", |c| {
        !mine(c, &target).is_empty()
    })
    .await;
    fake.lose_answers(1);
    let shown = pending(&app, "make list").await;
    let posts = two_posts(&fake, "/sendMessage", &shown).await;
    let lost = posts[0].answered;
    let stranger = 777;
    fake.push_update(telegram_tap_by(
        stranger,
        1,
        "cq-forged",
        &format!("a:{target}"),
        &posts[0],
    ));
    fake.wait_for("/answerCallbackQuery", "the stranger's answer", |c| {
        c.iter().any(|c| c.body["callback_query_id"] == "cq-forged")
    })
    .await;
    let markup = posts[0].body["reply_markup"].clone();
    fake.push_update(json!({
        "update_id": 2,
        "message": {
            "message_id": 951,
            "from": {"id": APPROVER},
            "chat": {"id": CHAT},
            "reply_to_message": {"message_id": lost, "from": {"id": 123, "is_bot": true},
                "chat": {"id": CHAT}, "text": "tool:bash:make list", "reply_markup": markup},
            "text": "yes",
        }
    }));
    wait_status(&app, &shown, "approved").await;
    let op = app.operator.clone();
    let (_, a) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{target}"),
            Some(&op),
            None,
        )
        .await;
    assert_eq!(
        a["status"], "pending",
        "the reply approved another item: {a}"
    );
    app.stop().await;
}
