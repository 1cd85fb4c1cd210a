//! A tap or reply that arrives while the database is busy (another process
//! holds its write lock) decides nothing and is answered "try again"; the
//! approver is never left without an answer. The same tap or reply once
//! the lock is gone decides.

use serde_json::json;

use super::common::TestApp;
use super::fake::Fake;
use super::{action, pending, wait_status};
use super::{slack, telegram, whatsapp};

/// Seconds to wait for a busy answer: each write the daemon tries meanwhile
/// (Telegram's poll also keeps its offset) waits out the 5 s busy timeout.
const BUSY: u64 = 40;

/// Takes the daemon's database write lock from another connection, as
/// another process would, until the connection is dropped or rolls back.
fn lock(app: &TestApp) -> rusqlite::Connection {
    let other = rusqlite::Connection::open(app.dir.path().join("actiongate.db")).unwrap();
    other.execute_batch("BEGIN EXCLUSIVE").unwrap();
    other
}

fn says_try_again(text: &serde_json::Value) -> bool {
    text.as_str().is_some_and(|t| t.contains("try again"))
}

#[tokio::test]
async fn telegram_a_tap_and_a_reply_while_busy_are_answered_try_again() {
    let fake = Fake::start().await;
    let app = telegram::spawn(&fake, |_| {}).await;
    let id = pending(&app, "make deploy").await;
    let (_, message_id) = telegram::sent(&fake, &id).await;

    let held = lock(&app);
    fake.push_update(telegram::tap(
        1,
        "cq-1",
        telegram::APPROVER,
        &format!("a:{id}"),
    ));
    let answers = fake
        .wait_within(BUSY, "/answerCallbackQuery", "the busy tap's answer", |c| {
            !c.is_empty()
        })
        .await;
    assert_eq!(answers[0].body["callback_query_id"], "cq-1");
    assert!(says_try_again(&answers[0].body["text"]), "{:?}", answers[0]);
    fake.push_update(json!({
        "update_id": 2,
        "message": {
            "message_id": 900,
            "from": {"id": telegram::APPROVER},
            "chat": {"id": telegram::CHAT},
            "reply_to_message": {"message_id": message_id},
            "text": "yes",
        }
    }));
    let told = fake
        .wait_within(BUSY, "/sendMessage", "the busy reply's answer", |c| {
            c.iter()
                .any(|c| c.body["reply_parameters"]["message_id"] == 900)
        })
        .await;
    let told = told
        .iter()
        .find(|c| c.body["reply_parameters"]["message_id"] == 900)
        .unwrap();
    assert!(says_try_again(&told.body["text"]), "{told:?}");
    assert_eq!(action(&app, &id).await["status"], "pending");
    held.execute_batch("ROLLBACK").unwrap();

    // Tapped again: taken.
    fake.push_update(telegram::tap(
        3,
        "cq-2",
        telegram::APPROVER,
        &format!("a:{id}"),
    ));
    let a = wait_status(&app, &id, "approved").await;
    assert_eq!(a["decided_by"], format!("telegram:{}", telegram::APPROVER));
    app.stop().await;
}

#[tokio::test]
async fn slack_a_click_while_busy_is_answered_try_again() {
    let fake = Fake::start().await;
    let app = slack::spawn(&fake).await;
    let id = pending(&app, "make deploy").await;
    fake.wait_for("/chat.postMessage", "the message", |c| {
        c.iter().any(|c| c.body.to_string().contains(&id))
    })
    .await;
    let now = chrono::Utc::now().timestamp();
    let click = |ts: &str| slack::click(slack::APPROVER, &format!("a:{id}"), ts);

    let held = lock(&app);
    let body = click("1.1");
    assert_eq!(
        slack::post(&app, &body, now, &slack::signed(slack::SECRET, now, &body)).await,
        200
    );
    let told = fake
        .wait_within(
            BUSY,
            "/chat.postEphemeral",
            "the busy click's answer",
            |c| !c.is_empty(),
        )
        .await;
    assert_eq!(told[0].body["user"], slack::APPROVER);
    assert!(says_try_again(&told[0].body["text"]), "{:?}", told[0]);
    assert_eq!(action(&app, &id).await["status"], "pending");
    held.execute_batch("ROLLBACK").unwrap();

    let body = click("1.2");
    assert_eq!(
        slack::post(&app, &body, now, &slack::signed(slack::SECRET, now, &body)).await,
        200
    );
    wait_status(&app, &id, "approved").await;
    app.stop().await;
}

#[tokio::test]
async fn whatsapp_a_tap_while_busy_is_answered_try_again() {
    let fake = Fake::start().await;
    let app = whatsapp::spawn(&fake).await;
    let id = pending(&app, "make deploy").await;
    fake.wait_for("/PHONE/messages", "the message", |c| {
        c.iter().any(|c| c.body.to_string().contains(&id))
    })
    .await;
    let tap = |wamid: &str| {
        whatsapp::message(
            wamid,
            whatsapp::PHONE,
            json!({"type": "interactive", "interactive": {
            "type": "button_reply", "button_reply": {"id": format!("a:{id}"), "title": "Approve"}}}),
        )
    };

    let held = lock(&app);
    assert_eq!(
        whatsapp::post(&app, whatsapp::SECRET, &tap("wamid.busy")).await,
        200
    );
    let told = fake
        .wait_within(BUSY, "/PHONE/messages", "the busy tap's answer", |c| {
            c.iter().any(|c| says_try_again(&c.body["text"]["body"]))
        })
        .await;
    let told = told
        .iter()
        .find(|c| says_try_again(&c.body["text"]["body"]))
        .unwrap();
    assert_eq!(told.body["to"], whatsapp::PHONE);
    assert_eq!(action(&app, &id).await["status"], "pending");
    held.execute_batch("ROLLBACK").unwrap();

    assert_eq!(
        whatsapp::post(&app, whatsapp::SECRET, &tap("wamid.again")).await,
        200
    );
    wait_status(&app, &id, "approved").await;
    app.stop().await;
}
