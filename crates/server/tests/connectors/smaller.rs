//! What each chat's API asks of a client, and what its messages say:
//! Telegram's poll mode deletes a webhook and shows a lasting 409; Slack's
//! requests name their charset; Discord's `User-Agent`; Telegram's notices
//! reply to what they answer; "Approve for 1h" says a grant was made;
//! WhatsApp sends one message per decision.

use std::time::Duration;

use serde_json::{Value, json};

use super::common::TestApp;
use super::fake::{Call, Fake};
use super::{pending, wait_status};

async fn readyz(app: &TestApp) -> Value {
    let resp = app
        .client
        .get(format!("{}/readyz", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.json().await.unwrap()
}

/// After webhook mode was used, poll mode deletes the webhook at start:
/// `getUpdates` works and a tap decides.
#[tokio::test]
async fn telegram_poll_mode_deletes_a_webhook_left_from_webhook_mode() {
    use super::telegram::{APPROVER, sent, spawn, tap};
    let fake = Fake::start().await;
    fake.set_webhook(true);
    let app = spawn(&fake, |_| {}).await;
    let deleted = fake
        .wait_for("/deleteWebhook", "deleteWebhook", |c| !c.is_empty())
        .await;
    assert_eq!(deleted[0].body["drop_pending_updates"], false);
    let id = pending(&app, "make deploy").await;
    sent(&fake, &id).await;
    fake.push_update(tap(1, "cq-1", APPROVER, &format!("a:{id}")));
    wait_status(&app, &id, "approved").await;
    assert!(readyz(&app).await.get("details").is_none());
    app.stop().await;
}

/// `getUpdates` answering 409 whatever is done (another poller): shown in
/// `/readyz`'s details and the metrics, and gone once it answers again.
#[tokio::test]
async fn telegram_a_lasting_409_shows_in_readyz_and_the_metrics() {
    use super::telegram::spawn;
    let fake = Fake::start().await;
    fake.conflict(true);
    let app = spawn(&fake, |_| {}).await;
    let mut details = Value::Null;
    for _ in 0..200 {
        details = readyz(&app).await["details"].clone();
        if !details.is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let said = details["connectors.telegram"].as_str().unwrap_or("");
    assert!(said.contains("409"), "{details}");
    let text = app.metrics().await;
    assert!(
        text.contains("actiongate_connector_telegram_conflict 1"),
        "{text}"
    );
    assert!(text.contains("actiongate_connector_telegram_conflicts_total"));
    fake.conflict(false);
    let mut cleared = false;
    for _ in 0..300 {
        if readyz(&app).await.get("details").is_none() {
            cleared = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(cleared, "the 409 is still shown after getUpdates answered");
    assert!(
        app.metrics()
            .await
            .contains("actiongate_connector_telegram_conflict 0")
    );
    app.stop().await;
}

#[tokio::test]
async fn slack_requests_name_their_charset() {
    use super::slack::spawn;
    let fake = Fake::start().await;
    let app = spawn(&fake).await;
    let id = pending(&app, "make deploy").await;
    fake.wait_for("/chat.postMessage", "the message", |c| !c.is_empty())
        .await;
    let op = app.operator.clone();
    app.call(
        reqwest::Method::POST,
        &format!("/v1/actions/{id}/approve"),
        Some(&op),
        Some(json!({})),
    )
    .await;
    fake.wait_for("/chat.update", "the edit", |c| !c.is_empty())
        .await;
    for c in fake.calls().iter().filter(|c| c.method == "POST") {
        assert_eq!(
            c.content_type.as_deref(),
            Some("application/json; charset=utf-8"),
            "{}",
            c.path
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn discord_calls_name_themselves_as_discord_asks() {
    use super::discord::spawn;
    let fake = Fake::start().await;
    let app = spawn(&fake).await;
    pending(&app, "make deploy").await;
    let posts = fake
        .wait_for("/channels/C9/messages", "the message", |c| !c.is_empty())
        .await;
    let ua = posts[0].user_agent.clone().unwrap_or_default();
    assert!(
        ua.starts_with("DiscordBot (http")
            && ua.ends_with(&format!(", {})", env!("CARGO_PKG_VERSION"))),
        "{ua}"
    );
    app.stop().await;
}

/// A reply's answer replies to it; "Approve for 1h" edits the card to say
/// a grant was made.
#[tokio::test]
async fn telegram_answers_reply_to_what_they_answer_and_a_grant_is_shown() {
    use super::telegram::{APPROVER, CHAT, sent, spawn, tap};
    let fake = Fake::start().await;
    let app = spawn(&fake, |_| {}).await;
    let id = pending(&app, "make deploy").await;
    let (_, message_id) = sent(&fake, &id).await;
    fake.push_update(json!({
        "update_id": 1,
        "message": {
            "message_id": 900,
            "from": {"id": APPROVER},
            "chat": {"id": CHAT},
            "reply_to_message": {"message_id": message_id},
            "text": "approve? not sure",
        }
    }));
    let answers = fake
        .wait_for("/sendMessage", "the reply's answer", |c| {
            c.iter().any(|c| c.body.get("reply_parameters").is_some())
        })
        .await;
    let answer = answers
        .iter()
        .find(|c| c.body.get("reply_parameters").is_some())
        .unwrap();
    assert_eq!(answer.body["reply_parameters"]["message_id"], 900);
    // An approval word that opens a sentence approves nothing: it is
    // answered as talk is, and the action still waits.
    fake.push_update(json!({
        "update_id": 2,
        "message": {
            "message_id": 901,
            "from": {"id": APPROVER},
            "chat": {"id": CHAT},
            "reply_to_message": {"message_id": message_id},
            "text": "ok, let me check with the DB team first",
        }
    }));
    let answers = fake
        .wait_for("/sendMessage", "the second reply's answer", |c| {
            c.iter()
                .any(|c| c.body["reply_parameters"]["message_id"] == 901)
        })
        .await;
    let answer = answers
        .iter()
        .find(|c| c.body["reply_parameters"]["message_id"] == 901)
        .unwrap();
    assert!(
        answer.body["text"]
            .as_str()
            .unwrap()
            .contains("not understood"),
        "{answer:?}"
    );
    let op = app.operator.clone();
    let (_, a) = app
        .call(
            reqwest::Method::GET,
            &format!("/v1/actions/{id}"),
            Some(&op),
            None,
        )
        .await;
    assert_eq!(a["status"], "pending", "{a}");

    fake.push_update(tap(3, "cq-r", APPROVER, &format!("r:{id}")));
    wait_status(&app, &id, "approved").await;
    let edits = fake
        .wait_for("/editMessageText", "the edit", |c| !c.is_empty())
        .await;
    let text = edits[0].body["text"].as_str().unwrap();
    assert!(text.contains("Approved by telegram:42"), "{text}");
    assert!(text.contains("grant made"), "{text}");
    app.stop().await;
}

/// A decision by a tap gets one message (the outcome, replying to the
/// card), which says when a grant was made.
#[tokio::test]
async fn whatsapp_sends_one_message_per_decision() {
    use super::whatsapp::{PHONE, SECRET, message, post, spawn};
    let fake = Fake::start().await;
    let app = spawn(&fake).await;
    let id = pending(&app, "make deploy").await;
    let posts = fake
        .wait_for("/PHONE/messages", "the card", |c| {
            c.iter().any(|c| c.body.to_string().contains(&id))
        })
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = posts.len();
    let tap = message(
        "wamid.in-r",
        PHONE,
        json!({"type": "interactive", "interactive": {"type": "button_reply",
            "button_reply": {"id": format!("r:{id}"), "title": "Approve for 1h"}}}),
    );
    assert_eq!(post(&app, SECRET, &tap).await, 200);
    wait_status(&app, &id, "approved").await;
    fake.wait_for("/PHONE/messages", "the outcome", |c| c.len() > before)
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after: Vec<Call> = fake.calls_to("/PHONE/messages")[before..].to_vec();
    assert_eq!(after.len(), 1, "{after:#?}");
    let text = after[0].body["text"]["body"].as_str().unwrap();
    assert!(text.contains("Approved by whatsapp:"), "{text}");
    assert!(text.contains("grant made"), "{text}");
    app.stop().await;
}

/// Talk in the replies is left alone (docs/connectors.md): an approver's
/// remark and a stranger's chat get no answer; a stranger's "yes" is told
/// it decides nothing.
#[tokio::test]
async fn telegram_leaves_talk_in_the_replies_alone() {
    use super::telegram::{APPROVER, CHAT, sent, spawn};
    let fake = Fake::start().await;
    let app = spawn(&fake, |_| {}).await;
    let id = pending(&app, "make deploy").await;
    let (_, message_id) = sent(&fake, &id).await;
    let reply = |update: i64, mid: i64, from: i64, text: &str| {
        json!({"update_id": update, "message": {
            "message_id": mid, "from": {"id": from}, "chat": {"id": CHAT},
            "reply_to_message": {"message_id": message_id}, "text": text}})
    };
    fake.push_update(reply(
        1,
        910,
        APPROVER,
        "looks fine to me, checking the logs first",
    ));
    fake.push_update(reply(2, 911, 999, "lunch, anyone?"));
    fake.push_update(reply(3, 912, 999, "yes"));
    let answers = fake
        .wait_for("/sendMessage", "the stranger's yes answered", |c| {
            c.iter()
                .any(|c| c.body["reply_parameters"]["message_id"] == 912)
        })
        .await;
    let told = answers
        .iter()
        .find(|c| c.body["reply_parameters"]["message_id"] == 912)
        .unwrap();
    assert!(
        told.body["text"]
            .as_str()
            .unwrap()
            .contains("not on this connector's list"),
        "{told:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let talk: Vec<Call> = fake
        .calls_to("/sendMessage")
        .into_iter()
        .filter(|c| {
            [910, 911].contains(
                &c.body["reply_parameters"]["message_id"]
                    .as_i64()
                    .unwrap_or(0),
            )
        })
        .collect();
    assert!(talk.is_empty(), "talk answered: {talk:#?}");
    let op = app.operator.clone();
    let (_, a) = app
        .call(
            reqwest::Method::GET,
            &format!("/v1/actions/{id}"),
            Some(&op),
            None,
        )
        .await;
    assert_eq!(a["status"], "pending", "{a}");
    app.stop().await;
}

/// WhatsApp too: only what reads as a decision is answered.
#[tokio::test]
async fn whatsapp_leaves_talk_alone() {
    use super::whatsapp::{PHONE, SECRET, message, post, spawn};
    let fake = Fake::start().await;
    let app = spawn(&fake).await;
    let id = pending(&app, "make deploy").await;
    let posts = fake
        .wait_for("/PHONE/messages", "the card", |c| {
            c.iter().any(|c| c.body.to_string().contains(&id))
        })
        .await;
    let card = posts
        .iter()
        .find(|c| c.body.to_string().contains(&id))
        .unwrap()
        .answered;
    let text = |mid: &str, from: &str, body: &str| {
        message(
            mid,
            from,
            json!({"type": "text", "text": {"body": body},
                "context": {"id": format!("wamid.{card}")}}),
        )
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = fake.calls_to("/PHONE/messages").len();
    let remark = text(
        "wamid.t1",
        PHONE,
        "looks fine to me, checking the logs first",
    );
    assert_eq!(post(&app, SECRET, &remark).await, 200);
    let chat = text("wamid.t2", "4479", "lunch, anyone?");
    assert_eq!(post(&app, SECRET, &chat).await, 200);
    let attempt = text("wamid.t3", "4479", "yes");
    assert_eq!(post(&app, SECRET, &attempt).await, 200);
    fake.wait_for("/PHONE/messages", "the stranger's yes answered", |c| {
        c.len() > before
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let after: Vec<Call> = fake.calls_to("/PHONE/messages")[before..].to_vec();
    assert_eq!(after.len(), 1, "{after:#?}");
    assert_eq!(after[0].body["to"], "4479");
    assert_eq!(after[0].body["context"]["message_id"], "wamid.t3");
    let body = after[0].body["text"]["body"].as_str().unwrap();
    assert!(body.contains("not on this connector's list"), "{body}");
    app.stop().await;
}
