//! WhatsApp against the fake Cloud API, webhooks signed like Meta signs them.

use hmac::{Hmac, Mac};
use reqwest::Method;
use serde_json::{Value, json};
use sha2::Sha256;

use super::common::TestApp;
use super::fake::{Call, Fake};
use super::{action, assert_retried, pending, wait_status};

pub(super) const SECRET: &str = "meta-app-secret";
pub(super) const PHONE: &str = "15550100";

pub(super) async fn spawn(fake: &Fake) -> TestApp {
    let base = fake.base.clone();
    let app = TestApp::spawn_with(move |s| {
        let w = &mut s.connectors.whatsapp;
        w.access_token = "EAAG-test".into();
        w.phone_number_id = "PHONE".into();
        w.approvers = vec![format!("+{PHONE}")];
        w.app_secret = SECRET.into();
        w.verify_token = "verify-me".into();
        w.api_base = format!("{base}/v21.0");
    })
    .await;
    app.profile("agent-1", json!("standard")).await;
    app
}

pub(super) fn message(id: &str, from: &str, content: Value) -> String {
    let mut m = json!({
        "from": from,
        "id": id,
        "timestamp": chrono::Utc::now().timestamp().to_string(),
    });
    for (k, v) in content.as_object().unwrap() {
        m[k] = v.clone();
    }
    json!({
        "object": "whatsapp_business_account",
        "entry": [{"id": "1", "changes": [{"field": "messages", "value": {
            "messaging_product": "whatsapp",
            "messages": [m],
        }}]}],
    })
    .to_string()
}

pub(super) async fn post(app: &TestApp, secret: &str, body: &str) -> u16 {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body.as_bytes());
    app.client
        .post(format!("{}/v1/connectors/whatsapp/webhook", app.base))
        .header("content-type", "application/json")
        .header(
            "x-hub-signature-256",
            format!("sha256={}", hex::encode(mac.finalize().into_bytes())),
        )
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

fn mine<'a>(calls: &'a [Call], id: &str) -> Vec<&'a Call> {
    calls
        .iter()
        .filter(|c| c.body.to_string().contains(id))
        .collect()
}

#[tokio::test]
async fn whatsapp_handshake_buttons_replies_strangers_and_forgeries() {
    let fake = Fake::start().await;
    let app = spawn(&fake).await;
    let verify = |token: &str| {
        format!(
            "{}/v1/connectors/whatsapp/webhook?hub.mode=subscribe&hub.verify_token={token}&hub.challenge=1158201444",
            app.base
        )
    };
    let ok = app.client.get(verify("verify-me")).send().await.unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(ok.text().await.unwrap(), "1158201444");
    assert_eq!(
        app.client
            .get(verify("wrong"))
            .send()
            .await
            .unwrap()
            .status(),
        403
    );

    let id = pending(&app, "make deploy").await;
    let posts = fake
        .wait_for("/PHONE/messages", "the message", |c| {
            !mine(c, &id).is_empty()
        })
        .await;
    let m = &mine(&posts, &id)[0].body;
    assert_eq!(m["to"], PHONE);
    assert_eq!(m["type"], "interactive");
    // As written: in a monospace block, which WhatsApp formats nothing in.
    let text = m["interactive"]["body"]["text"].as_str().unwrap();
    assert!(
        text.starts_with("```\n") && text.ends_with("\n```") && text.contains("make deploy"),
        "{text}"
    );
    let buttons = m["interactive"]["action"]["buttons"].as_array().unwrap();
    assert_eq!(buttons[1]["reply"]["title"], "Approve for 1h");
    assert!(
        buttons
            .iter()
            .all(|b| b["reply"]["title"].as_str().unwrap().len() <= 20)
    );

    let tap = message(
        "wamid.in1",
        PHONE,
        json!({"type": "interactive", "interactive": {
        "type": "button_reply", "button_reply": {"id": format!("a:{id}"), "title": "Approve"}}}),
    );
    // Forged: refused, nothing decided. A stranger: told, nothing decided.
    assert_eq!(post(&app, "wrong-secret", &tap).await, 401);
    let stranger = message(
        "wamid.in2",
        "4479",
        json!({"type": "interactive", "interactive": {
        "type": "button_reply", "button_reply": {"id": format!("a:{id}"), "title": "Approve"}}}),
    );
    assert_eq!(post(&app, SECRET, &stranger).await, 200);
    fake.wait_for("/PHONE/messages", "the stranger's notice", |c| {
        c.iter().any(|c| c.body["to"] == "4479")
    })
    .await;
    assert_eq!(action(&app, &id).await["status"], "pending");

    assert_eq!(post(&app, SECRET, &tap).await, 200);
    let a = wait_status(&app, &id, "approved").await;
    assert_eq!(a["decided_by"], format!("whatsapp:{PHONE}"));
    // The outcome goes as a reply to the message.
    fake.wait_for("/PHONE/messages", "the outcome", |c| {
        c.iter().any(|c| {
            c.body["type"] == "text"
                && c.body["text"]["body"]
                    .as_str()
                    .unwrap_or("")
                    .contains("Approved by whatsapp:")
                && c.body["context"]["message_id"].as_str().is_some()
        })
    })
    .await;

    // A "no" replied to the message denies; the API down: retried.
    fake.fail_posts(1);
    let other = pending(&app, "make release").await;
    let posts = fake
        .wait_for("/PHONE/messages", "the retried message", |c| {
            mine(c, &other).len() >= 2
        })
        .await;
    let ours: Vec<Call> = mine(&posts, &other).into_iter().cloned().collect();
    assert_retried(&ours);
    let accepted = ours.iter().find(|c| c.answered >= 0).unwrap();
    // The daemon records the message id once the answer is read.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let no = message(
        "wamid.in3",
        PHONE,
        json!({"type": "text", "text": {"body": "no, stop"},
        "context": {"from": PHONE, "id": format!("wamid.{}", accepted.answered)}}),
    );
    assert_eq!(post(&app, SECRET, &no).await, 200);
    let a = wait_status(&app, &other, "denied").await;
    assert_eq!(a["decided_by"], format!("whatsapp:{PHONE}"));
    // Delivered again (Meta retries): handled once.
    assert_eq!(post(&app, SECRET, &no).await, 200);
    let op = app.operator.clone();
    let (_, body) = app
        .call(
            Method::GET,
            &format!("/v1/actions/{other}"),
            Some(&op),
            None,
        )
        .await;
    assert_eq!(body["status"], "denied");

    // Decided on the API: the outcome goes as a reply to the message.
    let third = pending(&app, "make publish").await;
    let posts = fake
        .wait_for("/PHONE/messages", "the third message", |c| {
            mine(c, &third).iter().any(|c| c.answered >= 0)
        })
        .await;
    let sent = format!(
        "wamid.{}",
        mine(&posts, &third)
            .iter()
            .find(|c| c.answered >= 0)
            .unwrap()
            .answered
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let (status, _) = app
        .call(
            Method::POST,
            &format!("/v1/actions/{third}/approve"),
            Some(&op),
            Some(json!({})),
        )
        .await;
    assert!(status.is_success());
    fake.wait_for("/PHONE/messages", "the API decision's outcome", |c| {
        c.iter().any(|c| {
            c.body["context"]["message_id"] == sent.as_str()
                && c.body["text"]["body"]
                    .as_str()
                    .unwrap_or("")
                    .contains("Approved by key:")
        })
    })
    .await;
    app.stop().await;
}
