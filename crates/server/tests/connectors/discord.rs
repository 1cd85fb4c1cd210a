//! Discord against the fake HTTP API, interactions signed with Ed25519
//! like Discord signs them.

use ed25519_dalek::{Signer, SigningKey};
use reqwest::Method;
use serde_json::{Value, json};

use super::common::TestApp;
use super::fake::{Call, Fake};
use super::{action, assert_retried, pending, wait_status};

const APPROVER: &str = "111";
const ROLE: &str = "999";

fn key() -> SigningKey {
    SigningKey::from_bytes(&[7u8; 32])
}

async fn spawn(fake: &Fake) -> TestApp {
    let base = fake.base.clone();
    let app = TestApp::spawn_with(move |s| {
        let d = &mut s.connectors.discord;
        d.token = "bot-token".into();
        d.channel_id = "C9".into();
        d.approvers = vec![APPROVER.into(), ROLE.into()];
        d.public_key = hex::encode(key().verifying_key().to_bytes());
        d.api_base = format!("{base}/api/v10");
    })
    .await;
    app.profile("agent-1", json!("standard")).await;
    app
}

fn interaction(id: &str, user: &str, roles: &[&str], custom_id: &str) -> String {
    json!({
        "id": id,
        "type": 3,
        "member": {"user": {"id": user}, "roles": roles},
        "data": {"custom_id": custom_id, "component_type": 2},
    })
    .to_string()
}

async fn post(app: &TestApp, key: &SigningKey, ts: i64, body: &str) -> (u16, Value) {
    let sig = key.sign(format!("{ts}{body}").as_bytes());
    let resp = app
        .client
        .post(format!("{}/v1/connectors/discord/interactions", app.base))
        .header("content-type", "application/json")
        .header("x-signature-ed25519", hex::encode(sig.to_bytes()))
        .header("x-signature-timestamp", ts.to_string())
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

fn mine<'a>(calls: &'a [Call], id: &str) -> Vec<&'a Call> {
    calls
        .iter()
        .filter(|c| c.body.to_string().contains(id))
        .collect()
}

#[tokio::test]
async fn discord_message_click_edit_stranger_and_forgeries() {
    let fake = Fake::start().await;
    let app = spawn(&fake).await;
    let now = chrono::Utc::now().timestamp();
    let (status, pong) = post(
        &app,
        &key(),
        now,
        &json!({"id": "p", "type": 1}).to_string(),
    )
    .await;
    assert_eq!((status, pong), (200, json!({"type": 1})));

    let id = pending(&app, "make deploy").await;
    let posts = fake
        .wait_for("/channels/C9/messages", "the message", |c| {
            !mine(c, &id).is_empty()
        })
        .await;
    let m = mine(&posts, &id)[0];
    assert_eq!(m.auth.as_deref(), Some("Bot bot-token"));
    let buttons = m.body["components"][0]["components"].as_array().unwrap();
    assert_eq!(buttons[0]["custom_id"], format!("a:{id}"));
    assert_eq!(buttons[2]["style"], 4);

    // A stranger: told, ephemerally; nothing decided.
    let (status, answer) = post(
        &app,
        &key(),
        now,
        &interaction("i1", "5", &[], &format!("a:{id}")),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(answer["type"], 4);
    assert_eq!(answer["data"]["flags"], 64);
    // Forged (another key), stale (10 minutes old): 401, nothing decided.
    let body = interaction("i2", "6", &[ROLE], &format!("d:{id}"));
    let other = SigningKey::from_bytes(&[8u8; 32]);
    assert_eq!(post(&app, &other, now, &body).await.0, 401);
    assert_eq!(post(&app, &key(), now - 600, &body).await.0, 401);
    assert_eq!(action(&app, &id).await["status"], "pending");

    // A member with an approver role denies.
    let (status, answer) = post(&app, &key(), now, &body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["data"]["content"], "Denied.");
    let a = wait_status(&app, &id, "denied").await;
    assert_eq!(a["decided_by"], "discord:6");
    let edits = fake
        .wait_for("", "the outcome edit", |c| {
            c.iter().any(|c| c.method == "PATCH")
        })
        .await;
    let edit = edits.iter().find(|c| c.method == "PATCH").unwrap();
    assert!(
        edit.path.starts_with("/api/v10/channels/C9/messages/"),
        "{}",
        edit.path
    );
    assert_eq!(edit.body["components"], json!([]));
    assert!(
        edit.body["content"]
            .as_str()
            .unwrap()
            .contains("Denied by discord:6")
    );

    // The API down: retried; decided on the API: edited.
    fake.fail_posts(1);
    let other = pending(&app, "make release").await;
    let posts = fake
        .wait_for("/channels/C9/messages", "the retried message", |c| {
            mine(c, &other).len() >= 2
        })
        .await;
    let ours: Vec<Call> = mine(&posts, &other).into_iter().cloned().collect();
    assert_retried(&ours);
    let op = app.operator.clone();
    let (status, _) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{other}/approve"),
            Some(&op),
            Some(json!({})),
        )
        .await;
    assert!(status.is_success());
    fake.wait_for("", "the API decision's edit", |c| {
        c.iter().any(|c| {
            c.method == "PATCH"
                && c.body["content"]
                    .as_str()
                    .unwrap_or("")
                    .contains("Approved by key:")
        })
    })
    .await;
    app.stop().await;
}
